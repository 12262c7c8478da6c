/* SPDX-License-Identifier: Apache-2.0 */
/* aws_creds.c - region and endpoint from config, environment and the AWS
 * shared files (precedence in aws_creds.h), and the shared files' reader the
 * credential chain uses (cred_sources.h). The chain itself: cred_chain.c. */
#include "aws_creds.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "cred_sources.h"
#include "s3lect.h"
#include "util.h"

static const char *nonempty(const char *s)
{
    return s && *s ? s : NULL;
}

static const char *env(const char *name)
{
    return nonempty(getenv(name));
}

static int env_true(const char *name)
{
    const char *v = env(name);
    return v && (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

/* ---- shared files ---- */

const char *aws_env(const char *name)
{
    return env(name);
}

int aws_env_true(const char *name)
{
    return env_true(name);
}

char *aws_shared_file_path(const char *var, const char *name)
{
    const char *v = env(var);
    const char *rest;
    if (v && strncmp(v, "~/", 2) != 0)
        return strdup(v);
    rest = v ? v + 2 : NULL;
    char *home = u_home_dir();
    if (!home)
        return NULL;
    size_t n = strlen(home) + strlen(rest ? rest : name) + 8;
    char *p = malloc(n);
    if (p) {
        if (rest)
            snprintf(p, n, "%s/%s", home, rest);
        else
            snprintf(p, n, "%s/.aws/%s", home, name);
    }
    free(home);
    return p;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Does the header "[...]" in line name the section we want? kind: "" for the
 * credentials file ("[NAME]"), "profile" for the config file ("[profile
 * NAME]", or "[default]" for default), "sso-session". */
static int section_matches(char *line, const char *kind, const char *name)
{
    char *end = strchr(line, ']');
    if (!end)
        return 0;
    *end = '\0';
    char *h = trim(line + 1);
    size_t kl = strlen(kind);
    if (kl && strncmp(h, kind, kl) == 0 && (h[kl] == ' ' || h[kl] == '\t'))
        return strcmp(trim(h + kl + 1), name) == 0;
    if (kl && !(strcmp(kind, "profile") == 0 && strcmp(name, "default") == 0))
        return 0;
    return strcmp(h, name) == 0;
}

const char *aws_section_get(const aws_section *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->kv[i].key, key) == 0)
            return nonempty(s->kv[i].val);
    return NULL;
}

/* Adds key = val unless key is there already (the first occurrence wins). */
static int section_add(aws_section *s, const char *key, const char *val)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->kv[i].key, key) == 0)
            return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        aws_kv *kv = realloc(s->kv, cap * sizeof *kv);
        if (!kv)
            return S3LECT_ENOMEM;
        s->kv = kv;
        s->cap = cap;
    }
    char *k = strdup(key), *v = strdup(val);
    if (!k || !v) {
        free(k);
        u_wipe_free(v);
        return S3LECT_ENOMEM;
    }
    s->kv[s->n].key = k;
    s->kv[s->n].val = v;
    s->n++;
    return 0;
}

void aws_section_clear(aws_section *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->kv[i].key);
        u_wipe_free(s->kv[i].val);
    }
    free(s->kv);
    memset(s, 0, sizeof *s);
}

/* ---- problems with the shared files ---- */

#define FILE_PROBLEM_EVERY_MS 60000
static pthread_mutex_t fp_mu = PTHREAD_MUTEX_INITIALIZER;
static char fp_pending[700], fp_reported[700];
static int64_t fp_reported_at;
static _Atomic uint64_t fp_errors[2]; /* credentials, config */

/* Counts a problem with the file at path and keeps its message (which names
 * the file and what is wrong, never a value from it) for
 * aws_file_problem_take and, if it is the first, for s->problem. */
static void file_problem(aws_section *s, int is_config, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void file_problem(aws_section *s, int is_config, const char *path, const char *fmt, ...)
{
    char what[300], msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "the AWS %s file %.300s %s", is_config ? "config" : "credentials",
             path, what);
    atomic_fetch_add(&fp_errors[is_config ? 1 : 0], 1);
    if (s && !s->problem[0])
        snprintf(s->problem, sizeof s->problem, "%s", msg);
    pthread_mutex_lock(&fp_mu);
    snprintf(fp_pending, sizeof fp_pending, "%s", msg);
    pthread_mutex_unlock(&fp_mu);
}

void aws_file_error_totals(uint64_t *credentials, uint64_t *config)
{
    *credentials = atomic_load(&fp_errors[0]);
    *config = atomic_load(&fp_errors[1]);
}

int aws_file_problem_take(char *buf, size_t n)
{
    int64_t now = u_mono_ms();
    int got = 0;
    pthread_mutex_lock(&fp_mu);
    if (fp_pending[0] && (strcmp(fp_pending, fp_reported) != 0 || !fp_reported_at ||
                          now - fp_reported_at >= FILE_PROBLEM_EVERY_MS)) {
        snprintf(buf, n, "%s", fp_pending);
        snprintf(fp_reported, sizeof fp_reported, "%s", fp_pending);
        fp_reported_at = now;
        got = 1;
    }
    fp_pending[0] = '\0';
    pthread_mutex_unlock(&fp_mu);
    return got;
}

/* Reads one section of an INI file into s (keys already there are kept).
 * Indented lines after "sub =" are stored as "sub.key". Returns 1 if the
 * section exists, 0 if not or the file cannot be read, -1 on out of memory.
 * A file that exists but cannot be read, and the first line anywhere in it
 * that is not a comment, a [section] header or key = value, are problems
 * (file_problem); the rest of the file is still used, as before. */
static int read_section(const char *path, const char *kind, const char *name, aws_section *s)
{
    int is_config = kind[0] != '\0';
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) {
        if (path && errno != ENOENT && errno != ENOTDIR)
            file_problem(s, is_config, path, "cannot be read: %s", strerror(errno));
        return 0;
    }
    char line[4096], sub[64] = "";
    int in_section = 0, found = 0, oom = 0, any_header = 0, bad = 0;
    long lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        int indented = line[0] == ' ' || line[0] == '\t';
        char *t = trim(line);
        if (*t == '\0' || *t == '#' || *t == ';')
            continue;
        if (*t == '[') {
            if (!strchr(t, ']') && !bad++)
                file_problem(s, is_config, path, "line %ld: a [section] header without ']'",
                             lineno);
            in_section = section_matches(t, kind, name);
            found |= in_section;
            any_header = 1;
            sub[0] = '\0';
            continue;
        }
        char *eq = strchr(t, '=');
        if (!bad && (!eq ? !indented : eq == t || !any_header)) {
            bad = 1;
            file_problem(s, is_config, path, "line %ld: %s", lineno,
                         !eq       ? "expected 'key = value', a [section] header or a comment"
                         : eq == t ? "'=' without a key before it"
                                   : "'key = value' before any [section] header");
        }
        if (!in_section)
            continue;
        if (!eq)
            continue;
        *eq = '\0';
        char *key = trim(t), *val = trim(eq + 1);
        for (char *k = key; *k; k++)
            if (*k >= 'A' && *k <= 'Z')
                *k = (char)(*k - 'A' + 'a');
        if (indented && sub[0]) {
            char full[200];
            snprintf(full, sizeof full, "%s.%s", sub, key);
            if (section_add(s, full, val) != 0)
                oom = 1;
            continue;
        }
        if (*val == '\0' && strlen(key) < sizeof sub) {
            snprintf(sub, sizeof sub, "%s", key);
            continue;
        }
        sub[0] = '\0';
        if (section_add(s, key, val) != 0)
            oom = 1;
    }
    if (ferror(f))
        file_problem(s, is_config, path, "cannot be read: %s", strerror(errno));
    volatile char *v = line; /* may have held a secret */
    for (size_t i = 0; i < sizeof line; i++)
        v[i] = 0;
    fclose(f);
    return oom ? -1 : found;
}

int aws_profile_read(const char *cred_path, const char *conf_path, const char *name,
                     aws_section *out)
{
    memset(out, 0, sizeof *out);
    int a = read_section(cred_path, "", name, out);
    int b = a < 0 ? 0 : read_section(conf_path, "profile", name, out);
    if (a < 0 || b < 0) {
        aws_section_clear(out);
        return S3LECT_ENOMEM;
    }
    out->found = a || b;
    snprintf(out->where, sizeof out->where, "%s%s%s", a ? cred_path : "", a && b ? " and " : "",
             b ? conf_path : "");
    return 0;
}

int aws_sso_session_read(const char *conf_path, const char *name, aws_section *out)
{
    memset(out, 0, sizeof *out);
    int b = read_section(conf_path, "sso-session", name, out);
    if (b < 0) {
        aws_section_clear(out);
        return S3LECT_ENOMEM;
    }
    out->found = b;
    snprintf(out->where, sizeof out->where, "%s", conf_path ? conf_path : "");
    return 0;
}

const char *aws_profile_name(const struct s3lect_config *cfg, int *explicit_cfg)
{
    const char *p = cfg ? nonempty(cfg->profile) : NULL;
    *explicit_cfg = p != NULL;
    if (!p)
        p = env("AWS_PROFILE");
    if (!p)
        p = env("AWS_DEFAULT_PROFILE");
    return p ? p : "default";
}

/* Loads the profile from the config file only (region, endpoints). */
static int load_config_profile(const struct s3lect_config *cfg, aws_section *v)
{
    int explicit_cfg;
    const char *profile = aws_profile_name(cfg, &explicit_cfg);
    char *path = aws_shared_file_path("AWS_CONFIG_FILE", "config");
    memset(v, 0, sizeof *v);
    int rc = read_section(path, "profile", profile, v);
    free(path);
    return rc;
}

/* ---- region and endpoint ---- */

char *aws_region_resolve(const struct s3lect_config *cfg)
{
    const char *r = cfg ? nonempty(cfg->region) : NULL;
    if (!r)
        r = env("AWS_REGION");
    if (!r)
        r = env("AWS_DEFAULT_REGION");
    if (r)
        return strdup(r);
    aws_section v;
    char *out = NULL;
    if (load_config_profile(cfg, &v) > 0 && aws_section_get(&v, "region"))
        out = strdup(aws_section_get(&v, "region"));
    aws_section_clear(&v);
    if (out)
        return out;
    /* Only when no region is configured anywhere: the instance's own. */
    if (aws_imds_enabled()) {
        out = aws_imds_region(AWS_IMDS_REGION_TIMEOUT_MS);
        if (out && *out)
            return out;
        free(out);
    }
    return strdup("us-east-1");
}

char *aws_service_endpoint_resolve(const struct s3lect_config *cfg, const char *env_id,
                                   const char *config_id, int *oom)
{
    const char *e = cfg ? nonempty(cfg->endpoint) : NULL;
    char *out = NULL;
    *oom = 0;
    if (!e && !env_true("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) {
        char name[64], key[64];
        snprintf(name, sizeof name, "AWS_ENDPOINT_URL_%s", env_id);
        snprintf(key, sizeof key, "%s.endpoint_url", config_id);
        e = env(name);
        if (!e)
            e = env("AWS_ENDPOINT_URL");
        if (!e) {
            aws_section v;
            int rc = load_config_profile(cfg, &v);
            if (rc < 0)
                *oom = 1;
            const char *pick = aws_section_get(&v, key);
            if (!pick)
                pick = aws_section_get(&v, "endpoint_url");
            if (rc > 0 && pick) {
                out = strdup(pick);
                if (!out)
                    *oom = 1;
            }
            aws_section_clear(&v);
            return out;
        }
    }
    if (!e)
        return NULL;
    out = strdup(e);
    if (!out)
        *oom = 1;
    return out;
}

char *aws_endpoint_resolve(const struct s3lect_config *cfg, int *oom)
{
    return aws_service_endpoint_resolve(cfg, "S3", "s3", oom);
}

const char *aws_ca_bundle_resolve(const struct s3lect_config *cfg)
{
    const char *ca = cfg ? nonempty(cfg->ca_file) : NULL;
    return ca ? ca : env("AWS_CA_BUNDLE");
}
