/* SPDX-License-Identifier: Apache-2.0 */
/* test_options.c - the option query API (s3lect_option_info, _count, _by_name)
 * describes what the setters and s3lect_config_new actually do.
 *
 *   test_options PATH/TO/s3lect.h
 *
 * The header is read to find every S3LECT_OPT_* enumerator, so that an option
 * added to the header but not to the library's table fails here. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3lect.h"
#include "testutil.h"

#define MAX_ENUMS 256

typedef struct header_opt {
    char name[64]; /* the enumerator's suffix in lower case: "lease_timeout" */
    int value;
} header_opt;

static header_opt g_enums[MAX_ENUMS];
static int g_nenums;

/* Collects "S3LECT_OPT_<NAME> = <value>" lines (S3LECT_OPTION_* do not match). */
static void read_header(const char *path)
{
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open header %s", path);
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, "S3LECT_OPT_", 11) != 0)
            continue;
        p += 11;
        header_opt h = {{0}, 0};
        size_t n = 0;
        while ((isupper((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_') &&
               n + 1 < sizeof h.name)
            h.name[n++] = (char)tolower((unsigned char)*p++);
        if (sscanf(p, " = %d", &h.value) != 1)
            continue;
        CHECK(g_nenums < MAX_ENUMS, "too many options in the header");
        if (g_nenums < MAX_ENUMS)
            g_enums[g_nenums++] = h;
    }
    fclose(f);
    CHECK(g_nenums > 0, "no S3LECT_OPT_ enumerator found in %s", path);
}

static const char *type_str(int t)
{
    switch (t) {
    case S3LECT_OPTION_STR:
        return "str";
    case S3LECT_OPTION_INT:
        return "int";
    case S3LECT_OPTION_BOOL:
        return "bool";
    case S3LECT_OPTION_BYTES:
        return "bytes";
    default:
        return "?";
    }
}

/* The count is the last enumerator; every enumerator has an entry named after it. */
static void t_count_and_names(void)
{
    int count = s3lect_option_count();
    int highest = 0;
    for (int i = 0; i < g_nenums; i++)
        if (g_enums[i].value > highest)
            highest = g_enums[i].value;
    CHECK(count == highest, "s3lect_option_count() = %d, the header's last option is %d", count,
          highest);
    CHECK(count == S3LECT_OPT_MAX_HOLD, "count %d, last enumerator %d", count,
          (int)S3LECT_OPT_MAX_HOLD);
    CHECK(g_nenums == count, "the header has %d options numbered up to %d (gaps?)", g_nenums,
          count);
    for (int i = 0; i < g_nenums; i++) {
        const char *name = NULL;
        int rc = s3lect_option_info(g_enums[i].value, &name, NULL, NULL, NULL, NULL);
        CHECK(rc == S3LECT_OK, "option %s (%d) of the header: info rc %d", g_enums[i].name,
              g_enums[i].value, rc);
        CHECK(name && strcmp(name, g_enums[i].name) == 0,
              "option %d is named '%s', its enumerator says '%s'", g_enums[i].value,
              name ? name : "(null)", g_enums[i].name);
        CHECK(s3lect_option_by_name(g_enums[i].name) == g_enums[i].value,
              "s3lect_option_by_name(\"%s\") = %d, want %d", g_enums[i].name,
              s3lect_option_by_name(g_enums[i].name), g_enums[i].value);
    }
}

/* Ints: min and max are accepted, min-1 and max+1 refused; the default is a
 * new configuration's value. */
static void check_int(int opt, const char *name, int64_t lo, int64_t hi, int64_t def)
{
    s3lect_config *cfg = s3lect_config_new();
    int64_t v = 0;
    CHECK(s3lect_config_get_int(cfg, (s3lect_option)opt, &v) == S3LECT_OK && v == def,
          "%s: default %lld, a new config has %lld", name, (long long)def, (long long)v);
    CHECK(lo <= def && def <= hi, "%s: default %lld outside %lld..%lld", name, (long long)def,
          (long long)lo, (long long)hi);
    CHECK(lo < hi, "%s: bounds %lld..%lld", name, (long long)lo, (long long)hi);
    int rc = s3lect_config_set_int(cfg, (s3lect_option)opt, lo);
    CHECK(rc == S3LECT_OK, "%s: min %lld refused (%d)", name, (long long)lo, rc);
    CHECK(s3lect_config_get_int(cfg, (s3lect_option)opt, &v) == S3LECT_OK && v == lo,
          "%s: set %lld, read %lld", name, (long long)lo, (long long)v);
    rc = s3lect_config_set_int(cfg, (s3lect_option)opt, lo - 1);
    CHECK(rc == S3LECT_EINVAL, "%s: min-1 = %lld accepted (%d)", name, (long long)(lo - 1), rc);
    CHECK(s3lect_config_get_int(cfg, (s3lect_option)opt, &v) == S3LECT_OK && v == lo,
          "%s: a refused value changed it to %lld", name, (long long)v);
    rc = s3lect_config_set_int(cfg, (s3lect_option)opt, hi);
    CHECK(rc == S3LECT_OK, "%s: max %lld refused (%d)", name, (long long)hi, rc);
    CHECK(s3lect_config_get_int(cfg, (s3lect_option)opt, &v) == S3LECT_OK && v == hi,
          "%s: set %lld, read %lld", name, (long long)hi, (long long)v);
    rc = s3lect_config_set_int(cfg, (s3lect_option)opt, hi + 1);
    CHECK(rc == S3LECT_EINVAL, "%s: max+1 = %lld accepted (%d)", name, (long long)(hi + 1), rc);
    CHECK(s3lect_config_get_int(cfg, (s3lect_option)opt, &v) == S3LECT_OK && v == hi,
          "%s: a refused value changed it to %lld", name, (long long)v);
    CHECK(s3lect_config_set_str(cfg, (s3lect_option)opt, "1") == S3LECT_EINVAL,
          "%s: an int option took a string", name);
    CHECK(s3lect_config_set_bool(cfg, (s3lect_option)opt, 1) == S3LECT_EINVAL,
          "%s: an int option took a bool", name);
    CHECK(s3lect_config_get_str(cfg, (s3lect_option)opt, NULL, 0) == S3LECT_EINVAL,
          "%s: get_str read an int option", name);
    s3lect_config_free(cfg);
}

/* Bools: 0 and 1 are what they store; the default is a new configuration's. */
static void check_bool(int opt, const char *name, int64_t lo, int64_t hi, int64_t def)
{
    s3lect_config *cfg = s3lect_config_new();
    int64_t v = 99;
    CHECK(lo == 0 && hi == 1, "%s: bool bounds %lld..%lld", name, (long long)lo, (long long)hi);
    CHECK(s3lect_config_get_int(cfg, (s3lect_option)opt, &v) == S3LECT_OK && v == def,
          "%s: default %lld, a new config has %lld", name, (long long)def, (long long)v);
    CHECK(def == 0 || def == 1 || (def == -1 && opt == S3LECT_OPT_PATH_STYLE),
          "%s: bool default %lld", name, (long long)def);
    for (int b = 0; b <= 1; b++) {
        CHECK(s3lect_config_set_bool(cfg, (s3lect_option)opt, b) == S3LECT_OK, "%s: set_bool %d",
              name, b);
        CHECK(s3lect_config_get_int(cfg, (s3lect_option)opt, &v) == S3LECT_OK && v == b,
              "%s: set %d, read %lld", name, b, (long long)v);
    }
    /* set_int on a bool: nonzero is 1 (as documented with S3LECT_OPTION_BOOL). */
    CHECK(s3lect_config_set_int(cfg, (s3lect_option)opt, 0) == S3LECT_OK, "%s: set_int 0", name);
    CHECK(s3lect_config_set_int(cfg, (s3lect_option)opt, 7) == S3LECT_OK &&
              s3lect_config_get_int(cfg, (s3lect_option)opt, &v) == S3LECT_OK && v == 1,
          "%s: set_int 7 read %lld", name, (long long)v);
    CHECK(s3lect_config_set_str(cfg, (s3lect_option)opt, "1") == S3LECT_EINVAL,
          "%s: a bool option took a string", name);
    s3lect_config_free(cfg);
}

/* Strings and bytes: no bounds, default 0; they refuse the int setters. */
static void check_text(int opt, const char *name, int type, int64_t lo, int64_t hi, int64_t def)
{
    s3lect_config *cfg = s3lect_config_new();
    int64_t v = 0;
    CHECK(lo == 0 && hi == 0 && def == 0, "%s: %s option reports %lld..%lld default %lld", name,
          type_str(type), (long long)lo, (long long)hi, (long long)def);
    CHECK(s3lect_config_set_int(cfg, (s3lect_option)opt, 1) == S3LECT_EINVAL,
          "%s: a %s option took an int", name, type_str(type));
    CHECK(s3lect_config_set_bool(cfg, (s3lect_option)opt, 1) == S3LECT_EINVAL,
          "%s: a %s option took a bool", name, type_str(type));
    CHECK(s3lect_config_get_int(cfg, (s3lect_option)opt, &v) == S3LECT_EINVAL,
          "%s: get_int read a %s option", name, type_str(type));
    if (type == S3LECT_OPTION_BYTES) {
        char buf[8];
        CHECK(s3lect_config_set_bytes(cfg, (s3lect_option)opt, "abc", 3) == S3LECT_OK,
              "%s: set_bytes refused", name);
        CHECK(s3lect_config_get_str(cfg, (s3lect_option)opt, buf, sizeof buf) == 3 &&
                  strcmp(buf, "abc") == 0,
              "%s: bytes not read back", name);
    } else {
        CHECK(s3lect_config_set_bytes(cfg, (s3lect_option)opt, "abc", 3) == S3LECT_EINVAL,
              "%s: a string option took bytes", name);
        CHECK(s3lect_config_set_str(cfg, (s3lect_option)opt, NULL) == S3LECT_OK,
              "%s: set_str NULL refused", name);
        CHECK(s3lect_config_get_str(cfg, (s3lect_option)opt, NULL, 0) >= 0,
              "%s: get_str refused a string option", name);
    }
    s3lect_config_free(cfg);
}

static void t_each_option(void)
{
    int count = s3lect_option_count();
    for (int opt = 1; opt <= count; opt++) {
        const char *name = NULL;
        int type = 0;
        int64_t lo = -7, hi = -7, def = -7;
        int rc = s3lect_option_info(opt, &name, &type, &lo, &hi, &def);
        CHECK(rc == S3LECT_OK, "option %d: info rc %d (gap?)", opt, rc);
        if (rc != S3LECT_OK)
            continue;
        CHECK(name && name[0], "option %d has no name", opt);
        if (!name)
            continue;
        CHECK(s3lect_option_by_name(name) == opt, "by_name(\"%s\") = %d, want %d", name,
              s3lect_option_by_name(name), opt);
        switch (type) {
        case S3LECT_OPTION_INT:
            check_int(opt, name, lo, hi, def);
            break;
        case S3LECT_OPTION_BOOL:
            check_bool(opt, name, lo, hi, def);
            break;
        case S3LECT_OPTION_STR:
        case S3LECT_OPTION_BYTES:
            check_text(opt, name, type, lo, hi, def);
            break;
        default:
            CHECK(0, "option %d (%s) has type %d", opt, name, type);
        }
    }
}

/* Known bounds stated by the header's option docs: spot checks that the
 * table is the one the setters always used. */
static void t_known_values(void)
{
    int type = 0;
    int64_t lo = 0, hi = 0, def = 0;
    CHECK(s3lect_option_info(S3LECT_OPT_LEASE_TIMEOUT, NULL, &type, &lo, &hi, &def) == 0 &&
              type == S3LECT_OPTION_INT && lo == 100 && hi == 86400000 && def == 15000,
          "lease_timeout: type %d %lld..%lld default %lld", type, (long long)lo, (long long)hi,
          (long long)def);
    CHECK(s3lect_option_info(S3LECT_OPT_REQUEST_TIMEOUT, NULL, &type, &lo, &hi, &def) == 0 &&
              type == S3LECT_OPTION_INT && lo == 100 && hi == 600000 && def == 10000,
          "request_timeout: type %d %lld..%lld default %lld", type, (long long)lo, (long long)hi,
          (long long)def);
    CHECK(s3lect_option_info(S3LECT_OPT_MAX_CLOCK_SKEW, NULL, &type, &lo, &hi, &def) == 0 &&
              type == S3LECT_OPTION_INT && lo == 0 && def == 0,
          "max_clock_skew: type %d min %lld default %lld", type, (long long)lo, (long long)def);
    CHECK(s3lect_option_info(S3LECT_OPT_PEER_CA, NULL, &type, NULL, NULL, NULL) == 0 &&
              type == S3LECT_OPTION_BYTES,
          "peer_ca: type %d", type);
    CHECK(s3lect_option_info(S3LECT_OPT_RELEASE_ON_STOP, NULL, &type, NULL, NULL, &def) == 0 &&
              type == S3LECT_OPTION_BOOL && def == 1,
          "release_on_stop: type %d default %lld", type, (long long)def);
    CHECK(s3lect_option_by_name("lease_timeout") == S3LECT_OPT_LEASE_TIMEOUT, "by_name");
}

/* Values that are not options: EINVAL, outputs untouched; unknown names: 0. */
static void t_unknown(void)
{
    int bad[] = {0, -1, s3lect_option_count() + 1, s3lect_option_count() + 100, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *name = "untouched";
        int type = -5;
        int64_t lo = -5, hi = -5, def = -5;
        int rc = s3lect_option_info(bad[i], &name, &type, &lo, &hi, &def);
        CHECK(rc == S3LECT_EINVAL, "option_info(%d) = %d", bad[i], rc);
        CHECK(strcmp(name, "untouched") == 0 && type == -5 && lo == -5 && hi == -5 && def == -5,
              "option_info(%d) wrote its outputs", bad[i]);
        CHECK(s3lect_option_info(bad[i], NULL, NULL, NULL, NULL, NULL) == S3LECT_EINVAL,
              "option_info(%d, NULLs)", bad[i]);
    }
    const char *names[] = {
        "",      "nope",           "LEASE_TIMEOUT",  "lease_timeout ", " lease_timeout",
        "lease", "unknown option", "S3LECT_OPT_LOCK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(s3lect_option_by_name(names[i]) == 0, "by_name(\"%s\") = %d", names[i],
              s3lect_option_by_name(names[i]));
    CHECK(s3lect_option_by_name(NULL) == 0, "by_name(NULL)");
    /* Every output may be NULL. */
    for (int opt = 1; opt <= s3lect_option_count(); opt++)
        CHECK(s3lect_option_info(opt, NULL, NULL, NULL, NULL, NULL) == S3LECT_OK,
              "option_info(%d, NULLs)", opt);
}

/* s3lect_config_new/dup/free walk the same table: a config with every option
 * set (ints at max, bools 1, strings and bytes given) duplicates exactly. */
static void t_dup_every_option(void)
{
    s3lect_config *cfg = s3lect_config_new();
    int count = s3lect_option_count();
    for (int opt = 1; opt <= count; opt++) {
        const char *name = NULL;
        int type = 0;
        int64_t hi = 0;
        s3lect_option_info(opt, &name, &type, NULL, &hi, NULL);
        int rc = S3LECT_EINVAL;
        if (type == S3LECT_OPTION_INT || type == S3LECT_OPTION_BOOL)
            rc = s3lect_config_set_int(cfg, (s3lect_option)opt, hi);
        else if (type == S3LECT_OPTION_BYTES)
            rc = s3lect_config_set_bytes(cfg, (s3lect_option)opt, "pem\0bytes", 9);
        else if ((rc = s3lect_config_set_str(cfg, (s3lect_option)opt, "/value-1")) != S3LECT_OK)
            rc = s3lect_config_set_str(cfg, (s3lect_option)opt, "value-1"); /* e.g. region */
        CHECK(rc == S3LECT_OK, "%s: could not be set (%d)", name ? name : "?", rc);
    }
    s3lect_config *dup = s3lect_config_dup(cfg);
    CHECK(dup != NULL, "dup");
    for (int opt = 1; dup && opt <= count; opt++) {
        int type = 0;
        s3lect_option_info(opt, NULL, &type, NULL, NULL, NULL);
        if (type == S3LECT_OPTION_INT || type == S3LECT_OPTION_BOOL) {
            int64_t a = -1, b = -2;
            s3lect_config_get_int(cfg, (s3lect_option)opt, &a);
            s3lect_config_get_int(dup, (s3lect_option)opt, &b);
            CHECK(a == b, "option %d: %lld, dup %lld", opt, (long long)a, (long long)b);
        } else {
            char a[64] = "a", b[64] = "b";
            int na = s3lect_config_get_str(cfg, (s3lect_option)opt, a, sizeof a);
            int nb = s3lect_config_get_str(dup, (s3lect_option)opt, b, sizeof b);
            CHECK(na == nb && strcmp(a, b) == 0, "option %d: '%s' (%d), dup '%s' (%d)", opt, a, na,
                  b, nb);
        }
    }
    s3lect_config_free(cfg);
    s3lect_config_free(dup);
}

/* The facts front ends read instead of keeping lists: every integer option
 * has exactly one unit; the secrets, the run-time timings and the
 * process-wide sizes are the documented ones. Which options were set is
 * recorded, and a NULL string unsets. */
static void t_facts_and_set(void)
{
    for (int opt = 1; opt <= s3lect_option_count(); opt++) {
        int type = 0, f = s3lect_option_flags(opt);
        const char *name = NULL;
        s3lect_option_info(opt, &name, &type, NULL, NULL, NULL);
        int units = !!(f & S3LECT_OPTION_UNIT_MS) + !!(f & S3LECT_OPTION_UNIT_COUNT);
        CHECK(f >= 0 && units == (type == S3LECT_OPTION_INT), "%s: flags %d", name, f);
        CHECK(!(f & S3LECT_OPTION_PROCESS_WIDE) || (f & S3LECT_OPTION_UNIT_COUNT),
              "%s: the process-wide sizes are counts", name);
        CHECK(!(f & S3LECT_OPTION_UNIT_COUNT) || (f & S3LECT_OPTION_PROCESS_WIDE) ||
                  opt == S3LECT_OPT_PRIORITY,
              "%s: the counts are the process-wide sizes and the priority", name);
    }
    CHECK(s3lect_option_flags(0) == S3LECT_EINVAL, "option 0");
    CHECK(s3lect_option_flags(S3LECT_OPT_PEER_KEY) & S3LECT_OPTION_SECRET, "peer_key is secret");
    CHECK(s3lect_option_flags(S3LECT_OPT_SESSION_TOKEN) & S3LECT_OPTION_SECRET, "session_token");
    CHECK(!(s3lect_option_flags(S3LECT_OPT_ACCESS_KEY_ID) & S3LECT_OPTION_SECRET), "key id");
    CHECK(s3lect_option_flags(S3LECT_OPT_LEASE_TIMEOUT) & S3LECT_OPTION_RUNTIME,
          "lease at run time");
    CHECK(!(s3lect_option_flags(S3LECT_OPT_MAX_LEASE_TIMEOUT) & S3LECT_OPTION_RUNTIME),
          "max_lease_timeout is fixed at creation");
    s3lect_config *c = s3lect_config_new();
    CHECK(s3lect_config_is_set(c, S3LECT_OPT_LEASE_TIMEOUT) == 0, "new config: nothing set");
    s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, 3000);
    CHECK(s3lect_config_is_set(c, S3LECT_OPT_LEASE_TIMEOUT) == 1, "lease set");
    CHECK(s3lect_config_is_set(c, S3LECT_OPT_RENEW_DEADLINE) == 0, "deadline derived, not set");
    int64_t v = 0;
    s3lect_config_get_int(c, S3LECT_OPT_RENEW_DEADLINE, &v);
    CHECK(v == 2000, "derived deadline %lld", (long long)v);
    s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, 30000); /* derived again from the new one */
    s3lect_config_get_int(c, S3LECT_OPT_RENEW_DEADLINE, &v);
    CHECK(v == 20000, "re-derived deadline %lld", (long long)v);
    s3lect_config *d = s3lect_config_dup(c);
    CHECK(s3lect_config_is_set(d, S3LECT_OPT_LEASE_TIMEOUT) == 1, "dup keeps what was set");
    s3lect_config_set_str(c, S3LECT_OPT_REGION, "eu-west-1");
    CHECK(s3lect_config_is_set(c, S3LECT_OPT_REGION) == 1, "region set");
    s3lect_config_set_str(c, S3LECT_OPT_REGION, NULL);
    CHECK(s3lect_config_is_set(c, S3LECT_OPT_REGION) == 0, "NULL unsets");
    CHECK(s3lect_config_set_text(c, S3LECT_OPT_PEER_MODE, "on") == 0, "bool text");
    CHECK(s3lect_config_set_text(c, S3LECT_OPT_PEER_MODE, "maybe") == S3LECT_EINVAL, "bad bool");
    CHECK(s3lect_config_is_set(NULL, S3LECT_OPT_LOCK) == S3LECT_EINVAL, "NULL config");
    s3lect_config_free(d);
    s3lect_config_free(c);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/s3lect.h\n", argv[0]);
        return 2;
    }
    read_header(argv[1]);
    t_count_and_names();
    t_each_option();
    t_known_values();
    t_unknown();
    t_dup_every_option();
    t_facts_and_set();
    return t_done("options");
}
