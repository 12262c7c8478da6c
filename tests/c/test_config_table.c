/* SPDX-License-Identifier: Apache-2.0 */
/* test_config_table.c - tests/data/config_table.txt through the C API: each
 * case's values set with s3lect_config_set_text (the one S3LECT_* syntax),
 * then s3lect_config_validate; the effective values or the error text must
 * be the table's. Then tests/data/env_table.txt: each case's variables given
 * to s3lect_config_set_from_env as an environment of its own. The CLI,
 * Python, Go and Lua run the same tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3lect.h"
#include "testutil.h"

static char *trim(char *s)
{
    while (*s == ' ')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Sets the case's items on c: option names with s3lect_config_set_text, or
 * (env) variables as the environment of s3lect_config_set_from_env. */
static int set_given(const char *id, s3lect_config *c, char *given, int env)
{
    const char *envp[32];
    size_t n = 0;
    int rc = 0;
    for (char *save = NULL, *it = strtok_r(given, ";", &save); !rc && it;
         it = strtok_r(NULL, ";", &save)) {
        it = trim(it);
        char *eq = strchr(it, '=');
        if (!*it || !eq)
            continue;
        if (env) {
            CHECK(n + 1 < sizeof envp / sizeof envp[0], "%s: too many variables", id);
            if (n + 1 < sizeof envp / sizeof envp[0])
                envp[n++] = it;
            continue;
        }
        *eq = '\0';
        int opt = s3lect_option_by_name(it);
        CHECK(opt > 0, "%s: no option %s", id, it);
        rc = s3lect_config_set_text(c, opt, eq + 1);
    }
    envp[n] = NULL;
    return env && !rc ? s3lect_config_set_from_env(c, envp) : rc;
}

/* Whether option opt of c has the table's value `want` (an integer, or a
 * string's text; "" for a string that is not set). */
static int has_value(s3lect_config *c, int opt, const char *want, char *got, size_t gotlen)
{
    int type = 0;
    s3lect_option_info(opt, NULL, &type, NULL, NULL, NULL);
    if (type == S3LECT_OPTION_STR) {
        int n = s3lect_config_get_str(c, opt, got, gotlen);
        return n >= 0 && strcmp(got, want) == 0;
    }
    int64_t v = -1;
    s3lect_config_get_int(c, opt, &v);
    snprintf(got, gotlen, "%lld", (long long)v);
    return v == strtoll(want, NULL, 10);
}

/* Runs one case; msg gets the error text ("" when valid). */
static void run_case(const char *id, char *given, char *result, int env)
{
    s3lect_config *c = s3lect_config_new();
    char msg[512] = "";
    int rc = s3lect_config_set_str(c, S3LECT_OPT_LOCK, "file:///tmp/config-table.json");
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_SERVER_ID, "table");
    rc = rc ? rc : set_given(id, c, given, env);
    rc = rc ? rc : s3lect_config_validate(c);
    if (rc)
        s3lect_config_errmsg(c, msg, sizeof msg);
    if (strncmp(result, "error ", 6) == 0) {
        CHECK(rc == S3LECT_EINVAL && strstr(msg, result + 6),
              "%s: want an error with '%s', got %d '%s'", id, result + 6, rc, msg);
    } else {
        CHECK(rc == 0, "%s: want valid, got '%s'", id, msg);
        char *save = NULL;
        for (char *it = strtok_r(result + 5, " ", &save); it; it = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(it, '=');
            *eq = '\0';
            int opt = s3lect_option_by_name(it);
            char got[256] = "";
            CHECK(opt > 0 && has_value(c, opt, eq + 1, got, sizeof got),
                  "%s: %s is '%s', want '%s'", id, it, got, eq + 1);
        }
    }
    s3lect_config_free(c);
}

/* Runs every case of the table at path (env: an environment table); returns
 * how many. */
static int run_table(const char *path, int env)
{
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open the table %s", path);
    char line[1024];
    int cases = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *a = strstr(line, " | "), *b = a ? strstr(a + 3, " | ") : NULL;
        CHECK(b != NULL, "bad line: %s", line);
        if (!b)
            continue;
        *a = *b = '\0';
        run_case(trim(line), a + 3, trim(b + 3), env);
        cases++;
    }
    if (f)
        fclose(f);
    return cases;
}

int main(int argc, char **argv)
{
    int cases = run_table(argc > 1 ? argv[1] : "tests/data/config_table.txt", 0);
    CHECK(cases >= 30, "the table has %d cases, want at least 30", cases);
    cases = run_table(argc > 2 ? argv[2] : "tests/data/env_table.txt", 1);
    CHECK(cases >= 20, "the environment table has %d cases, want at least 20", cases);
    return t_done("config_table");
}
