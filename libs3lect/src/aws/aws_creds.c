/* aws_creds.c - credentials, region and endpoint from config, environment
 * and the AWS shared files (precedence in aws_creds.h). */
#include "aws_creds.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "s3lect.h"

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

/* The values of one profile that we use. All allocated or NULL. */
typedef struct profile_values {
    char *access_key_id, *secret_access_key, *session_token;
    char *region, *endpoint_url, *s3_endpoint_url;
} profile_values;

static void wipe_free(char *s)
{
    if (s) {
        memset(s, 0, strlen(s));
        free(s);
    }
}

static void profile_values_clear(profile_values *v)
{
    free(v->access_key_id);
    wipe_free(v->secret_access_key);
    wipe_free(v->session_token);
    free(v->region);
    free(v->endpoint_url);
    free(v->s3_endpoint_url);
    memset(v, 0, sizeof *v);
}

static char *home_dir(void)
{
    const char *h = env("HOME");
    if (h)
        return strdup(h);
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &res) == 0 && res && res->pw_dir)
        return strdup(res->pw_dir);
    return NULL;
}

/* The path of a shared file: the variable's value (with a leading "~/"
 * expanded), else ~/.aws/<name>. NULL if there is no home directory. */
static char *shared_file_path(const char *var, const char *name)
{
    const char *v = env(var);
    const char *rest;
    if (v && strncmp(v, "~/", 2) != 0)
        return strdup(v);
    rest = v ? v + 2 : NULL;
    char *home = home_dir();
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

/* Is the section header "[...]" in line the profile we want? In the config
 * file a profile is "[profile NAME]" ("[default]" also works for default). */
static int section_matches(char *line, const char *profile, int config_file)
{
    char *end = strchr(line, ']');
    if (!end)
        return 0;
    *end = '\0';
    char *name = trim(line + 1);
    if (config_file && strncmp(name, "profile", 7) == 0 && (name[7] == ' ' || name[7] == '\t'))
        return strcmp(trim(name + 8), profile) == 0;
    if (config_file && strcmp(profile, "default") != 0)
        return 0;
    return strcmp(name, profile) == 0;
}

static void set_value(char **dst, const char *v, int *oom)
{
    if (*dst)
        return; /* the first occurrence wins */
    *dst = strdup(v);
    if (!*dst)
        *oom = 1;
}

/* Reads the values of profile from an INI file into v (values already set
 * are kept). Returns 1 if the profile's section exists, 0 if not or the file
 * cannot be read, -1 on out of memory. Indented lines after "s3 =" form the
 * s3 sub-section (only endpoint_url is used from it). */
static int read_profile(const char *path, const char *profile, int config_file, profile_values *v)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return 0;
    char line[4096];
    int in_section = 0, found = 0, in_s3 = 0, oom = 0;
    while (fgets(line, sizeof line, f)) {
        int indented = line[0] == ' ' || line[0] == '\t';
        char *s = trim(line);
        if (*s == '\0' || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            in_section = section_matches(s, profile, config_file);
            found |= in_section;
            in_s3 = 0;
            continue;
        }
        if (!in_section)
            continue;
        char *eq = strchr(s, '=');
        if (!eq)
            continue;
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        for (char *k = key; *k; k++)
            if (*k >= 'A' && *k <= 'Z')
                *k = (char)(*k - 'A' + 'a');
        if (indented) {
            if (in_s3 && strcmp(key, "endpoint_url") == 0)
                set_value(&v->s3_endpoint_url, val, &oom);
            continue;
        }
        in_s3 = strcmp(key, "s3") == 0 && *val == '\0';
        if (strcmp(key, "aws_access_key_id") == 0)
            set_value(&v->access_key_id, val, &oom);
        else if (strcmp(key, "aws_secret_access_key") == 0)
            set_value(&v->secret_access_key, val, &oom);
        else if (strcmp(key, "aws_session_token") == 0)
            set_value(&v->session_token, val, &oom);
        else if (strcmp(key, "region") == 0)
            set_value(&v->region, val, &oom);
        else if (strcmp(key, "endpoint_url") == 0)
            set_value(&v->endpoint_url, val, &oom);
    }
    memset(line, 0, sizeof line); /* may have held a secret */
    fclose(f);
    return oom ? -1 : found;
}

static const char *profile_name(const struct s3lect_config *cfg, int *explicit_cfg)
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
static int load_config_profile(const struct s3lect_config *cfg, profile_values *v)
{
    int explicit_cfg;
    const char *profile = profile_name(cfg, &explicit_cfg);
    char *path = shared_file_path("AWS_CONFIG_FILE", "config");
    int rc = read_profile(path, profile, 1, v);
    free(path);
    return rc;
}

/* ---- credentials ---- */

static int fill(aws_creds *out, const char *akid, const char *secret, const char *token)
{
    out->access_key_id = strdup(akid);
    out->secret_access_key = strdup(secret);
    out->session_token = nonempty(token) ? strdup(token) : NULL;
    if (!out->access_key_id || !out->secret_access_key || (nonempty(token) && !out->session_token))
        return S3LECT_ENOMEM;
    return 0;
}

int aws_creds_resolve(const struct s3lect_config *cfg, aws_creds *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *akid = cfg ? nonempty(cfg->access_key_id) : NULL;
    const char *secret = cfg ? nonempty(cfg->secret_access_key) : NULL;
    int rc;

    if (akid || secret) {
        if (!akid || !secret) {
            snprintf(err, errlen,
                     "incomplete S3 credentials in the configuration: set both the access key id "
                     "and the secret access key");
            return S3LECT_EAUTH;
        }
        snprintf(out->source, sizeof out->source, "the configuration");
        rc = fill(out, akid, secret, cfg->session_token);
        goto done;
    }

    int explicit_profile;
    const char *profile = profile_name(cfg, &explicit_profile);
    if (!explicit_profile) {
        akid = env("AWS_ACCESS_KEY_ID");
        secret = env("AWS_SECRET_ACCESS_KEY");
        if (akid || secret) {
            if (!akid || !secret) {
                snprintf(err, errlen,
                         "incomplete S3 credentials in the environment: %s is set "
                         "but %s is not",
                         akid ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                         akid ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
                return S3LECT_EAUTH;
            }
            snprintf(out->source, sizeof out->source,
                     "the environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)");
            rc = fill(out, akid, secret, env("AWS_SESSION_TOKEN"));
            goto done;
        }
    }

    char *cred_path = shared_file_path("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    char *conf_path = shared_file_path("AWS_CONFIG_FILE", "config");
    profile_values v = {0};
    const char *used_path = cred_path;
    int found = read_profile(cred_path, profile, 0, &v);
    if (found >= 0 && !(v.access_key_id && v.secret_access_key)) {
        /* The config file may hold credentials too; keys found in the
         * credentials file win (read first). */
        int f2 = read_profile(conf_path, profile, 1, &v);
        found = f2 < 0 ? -1 : (found || f2);
        used_path = conf_path;
    }
    if (found < 0) {
        rc = S3LECT_ENOMEM;
    } else if (v.access_key_id && v.secret_access_key) {
        snprintf(out->source, sizeof out->source, "profile '%s' in %s", profile,
                 used_path ? used_path : "?");
        rc = fill(out, v.access_key_id, v.secret_access_key, v.session_token);
    } else if (found) {
        snprintf(err, errlen,
                 "profile '%s' in %s or %s has no aws_access_key_id/aws_secret_access_key "
                 "(s3lect reads static keys only; export AWS_ACCESS_KEY_ID and "
                 "AWS_SECRET_ACCESS_KEY, e.g. from 'aws configure export-credentials')",
                 profile, cred_path ? cred_path : "~/.aws/credentials",
                 conf_path ? conf_path : "~/.aws/config");
        rc = S3LECT_EAUTH;
    } else if (explicit_profile || strcmp(profile, "default") != 0) {
        snprintf(err, errlen, "AWS profile '%s' not found in %s or %s", profile,
                 cred_path ? cred_path : "~/.aws/credentials",
                 conf_path ? conf_path : "~/.aws/config");
        rc = S3LECT_EAUTH;
    } else {
        snprintf(err, errlen,
                 "no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                 "add a [default] profile to %s (or point AWS_SHARED_CREDENTIALS_FILE/AWS_PROFILE "
                 "at one)",
                 cred_path ? cred_path : "~/.aws/credentials");
        rc = S3LECT_EAUTH;
    }
    profile_values_clear(&v);
    free(cred_path);
    free(conf_path);
done:
    if (rc != 0)
        aws_creds_clear(out);
    if (rc == S3LECT_ENOMEM)
        snprintf(err, errlen, "out of memory reading S3 credentials");
    return rc;
}

void aws_creds_clear(aws_creds *c)
{
    if (!c)
        return;
    free(c->access_key_id);
    wipe_free(c->secret_access_key);
    wipe_free(c->session_token);
    memset(c, 0, sizeof *c);
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
    profile_values v = {0};
    char *out = NULL;
    if (load_config_profile(cfg, &v) > 0 && nonempty(v.region)) {
        out = v.region;
        v.region = NULL;
    }
    profile_values_clear(&v);
    return out ? out : strdup("us-east-1");
}

char *aws_endpoint_resolve(const struct s3lect_config *cfg, int *oom)
{
    const char *e = cfg ? nonempty(cfg->endpoint) : NULL;
    char *out = NULL;
    *oom = 0;
    if (!e && !env_true("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) {
        e = env("AWS_ENDPOINT_URL_S3");
        if (!e)
            e = env("AWS_ENDPOINT_URL");
        if (!e) {
            profile_values v = {0};
            int rc = load_config_profile(cfg, &v);
            if (rc < 0)
                *oom = 1;
            char **pick = nonempty(v.s3_endpoint_url) ? &v.s3_endpoint_url
                          : nonempty(v.endpoint_url)  ? &v.endpoint_url
                                                      : NULL;
            if (rc > 0 && pick) {
                out = *pick;
                *pick = NULL;
            }
            profile_values_clear(&v);
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

const char *aws_ca_bundle_resolve(const struct s3lect_config *cfg)
{
    const char *ca = cfg ? nonempty(cfg->ca_file) : NULL;
    return ca ? ca : env("AWS_CA_BUNDLE");
}
