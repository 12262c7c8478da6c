/* SPDX-License-Identifier: Apache-2.0 */
/* cred_chain.c - the AWS credential provider chain (order in aws_creds.h):
 * which source supplies the credentials, and how each fetches them. The
 * cache and the refresher they go into are cred_cache.c's.
 *
 * Providers: an ordered list (providers[]); each says whether it is
 * configured (the first that is supplies the credentials; a half-done
 * setting is an error, not a reason to ask the next), how to fetch its
 * credentials and how to describe where they come from. A provider with
 * static keys has no fetch. The cache knows nothing of AWS beyond the
 * shape of the credentials: it sees a provider only through cred_ops.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aws_creds.h"
#include "config.h"
#include "cred_cache.h"
#include "cred_parse.h"
#include "cred_sources.h"
#include "s3lect.h"
#include "util.h"

#define MAX_PROFILE_DEPTH 8
#define METADATA_TIMEOUT_MS 5000
#define IMDS_PROBE_TIMEOUT_MS 1000 /* the chain's last resort, at open */
#define STS_DEFAULT_TIMEOUT_MS 10000

/* ---- fetching ---- */

/* What fetching from a source needs: the state of a cache entry. */
typedef struct aws_src {
    char *profile, *cred_path, *conf_path;      /* the profile */
    char *role_arn, *session_name, *token_file; /* web identity from the environment */
    char *region, *ca_file;                     /* what STS and SSO are asked */
    int64_t timeout_ms;
} aws_src;

static void src_free(void *p)
{
    aws_src *e = p;
    if (!e)
        return;
    free(e->profile);
    free(e->cred_path);
    free(e->conf_path);
    free(e->region);
    free(e->ca_file);
    free(e->role_arn);
    free(e->session_name);
    free(e->token_file);
    free(e);
}

static int set_static(cred_fetched *out, const char *akid, const char *secret, const char *token)
{
    memset(out, 0, sizeof *out);
    out->access_key_id = strdup(akid);
    out->secret_access_key = strdup(secret);
    out->session_token = token && *token ? strdup(token) : NULL;
    if (!out->access_key_id || !out->secret_access_key ||
        (token && *token && !out->session_token)) {
        cred_fetched_clear(out);
        return S3LECT_ENOMEM;
    }
    return 0;
}

static void default_session_name(char *buf, size_t len)
{
    snprintf(buf, len, "s3lect-%lld", (long long)u_wall_ms());
}

static int parse_duration(const char *v, const char *profile, int *out, char *err, size_t errlen)
{
    *out = 0;
    if (!v)
        return 0;
    char *end;
    long d = strtol(v, &end, 10);
    if (*end || d < 900 || d > 43200) {
        snprintf(err, errlen,
                 "profile '%s': duration_seconds '%.40s' is not a number of seconds between 900 "
                 "and 43200",
                 profile, v);
        return S3LECT_EAUTH;
    }
    *out = (int)d;
    return 0;
}

/* The STS endpoint a profile names (sts = endpoint_url, then endpoint_url)
 * unless the environment names one (the environment wins, as in the SDKs). */
static const char *profile_sts_endpoint(const aws_section *s)
{
    if (aws_env_true("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS") || aws_env("AWS_ENDPOINT_URL_STS") ||
        aws_env("AWS_ENDPOINT_URL"))
        return NULL;
    const char *v = aws_section_get(s, "sts.endpoint_url");
    return v ? v : aws_section_get(s, "endpoint_url");
}

/* A profile with only one of aws_access_key_id and aws_secret_access_key:
 * names the one it has and the one it lacks. Returns S3LECT_EAUTH. */
static int half_static_keys(const aws_section *s, const char *name, char *err, size_t errlen)
{
    int has_akid = aws_section_get(s, "aws_access_key_id") != NULL;
    snprintf(err, errlen, "profile '%s' in %s has %s but not %s", name, s->where,
             has_akid ? "aws_access_key_id" : "aws_secret_access_key",
             has_akid ? "aws_secret_access_key" : "aws_access_key_id");
    return S3LECT_EAUTH;
}

/* Two environment variables that go together (what names them in the
 * message): 0 when both are set, else S3LECT_EAUTH naming the one that is
 * set and the one that is not. Called when at least one is set. */
static int env_pair_complete(const char *what, const char *a_name, const char *a,
                             const char *b_name, const char *b, char *err, size_t errlen)
{
    if (a && b)
        return 0;
    snprintf(err, errlen, "incomplete %s in the environment: %s is set but %s is not", what,
             a ? a_name : b_name, a ? b_name : a_name);
    return S3LECT_EAUTH;
}

static int profile_fetch(const aws_src *e, const char *name, const char **chain, int depth,
                         const _Atomic int *abort, cred_fetched *out, char *err, size_t errlen);

/* The credentials a role profile assumes the role with. */
static int role_source(const aws_src *e, const char *name, const aws_section *s, const char **chain,
                       int depth, const _Atomic int *abort, cred_fetched *base, char *err,
                       size_t errlen)
{
    const char *src = aws_section_get(s, "source_profile");
    const char *cs = aws_section_get(s, "credential_source");
    if (src && cs) {
        snprintf(err, errlen,
                 "profile '%s' sets both source_profile and credential_source: keep one", name);
        return S3LECT_EAUTH;
    }
    if (src && strcmp(src, name) == 0) {
        const char *akid = aws_section_get(s, "aws_access_key_id");
        const char *secret = aws_section_get(s, "aws_secret_access_key");
        if (!akid || !secret) {
            snprintf(err, errlen,
                     "profile '%s' is its own source_profile but has no "
                     "aws_access_key_id/aws_secret_access_key",
                     name);
            return S3LECT_EAUTH;
        }
        return set_static(base, akid, secret, aws_section_get(s, "aws_session_token"));
    }
    if (src)
        return profile_fetch(e, src, chain, depth + 1, abort, base, err, errlen);
    if (cs) {
        if (strcasecmp(cs, "Environment") == 0) {
            const char *akid = aws_env("AWS_ACCESS_KEY_ID");
            const char *secret = aws_env("AWS_SECRET_ACCESS_KEY");
            if (!akid || !secret) {
                snprintf(err, errlen,
                         "profile '%s' has credential_source = Environment but "
                         "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are not both set",
                         name);
                return S3LECT_EAUTH;
            }
            return set_static(base, akid, secret, aws_env("AWS_SESSION_TOKEN"));
        }
        char why[400];
        int rc;
        if (strcasecmp(cs, "Ec2InstanceMetadata") == 0)
            rc = aws_imds_fetch(METADATA_TIMEOUT_MS, base, why, sizeof why);
        else if (strcasecmp(cs, "EcsContainer") == 0)
            rc = aws_container_fetch(METADATA_TIMEOUT_MS, base, why, sizeof why);
        else {
            snprintf(err, errlen,
                     "profile '%s': credential_source '%.40s' is not one of Environment, "
                     "Ec2InstanceMetadata, EcsContainer",
                     name, cs);
            return S3LECT_EAUTH;
        }
        if (rc)
            snprintf(err, errlen, "profile '%s' (credential_source %s): %s", name, cs, why);
        return rc;
    }
    snprintf(err, errlen,
             "profile '%s' has role_arn but neither source_profile, credential_source nor "
             "web_identity_token_file: add one to say which credentials assume the role",
             name);
    return S3LECT_EAUTH;
}

static int profile_fetch(const aws_src *e, const char *name, const char **chain, int depth,
                         const _Atomic int *abort, cred_fetched *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < depth; i++) {
        if (strcmp(chain[i], name) != 0)
            continue;
        char path[400] = "";
        size_t n = 0;
        for (int j = 0; j < depth && n < sizeof path; j++)
            n += (size_t)snprintf(path + n, sizeof path - n, "'%s' -> ", chain[j]);
        snprintf(err, errlen,
                 "the profiles' source_profile settings form a cycle: %s'%s'; break it with a "
                 "profile that has keys or a credential_source",
                 path, name);
        return S3LECT_EAUTH;
    }
    if (depth >= MAX_PROFILE_DEPTH) {
        snprintf(err, errlen, "source_profile chain from profile '%s' is deeper than %d profiles",
                 chain[0], MAX_PROFILE_DEPTH);
        return S3LECT_EAUTH;
    }
    chain[depth] = name;
    aws_section s;
    if (aws_profile_read(e->cred_path, e->conf_path, name, &s) != 0) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    int rc;
    char why[450];
    const char *role = aws_section_get(&s, "role_arn");
    const char *wit = aws_section_get(&s, "web_identity_token_file");
    const char *sess = aws_section_get(&s, "role_session_name");
    char defname[64];
    default_session_name(defname, sizeof defname);
    aws_sts_ctx ctx = {.region = e->region,
                       .endpoint = profile_sts_endpoint(&s),
                       .ca_file = e->ca_file,
                       .timeout_ms = e->timeout_ms,
                       .abort = abort};
    if (!s.found) {
        snprintf(err, errlen, "profile '%s'%s%s%s not found in %s or %s", name,
                 depth ? " (source_profile of '" : "", depth ? chain[depth - 1] : "",
                 depth ? "')" : "", e->cred_path ? e->cred_path : "~/.aws/credentials",
                 e->conf_path ? e->conf_path : "~/.aws/config");
        rc = S3LECT_EAUTH;
    } else if (role && aws_section_get(&s, "mfa_serial")) {
        snprintf(err, errlen,
                 "profile '%s' needs an MFA code (mfa_serial) to assume %s; s3lect runs "
                 "unattended and cannot ask for one: use a role without an MFA condition, or "
                 "credential_process",
                 name, role);
        rc = S3LECT_EAUTH;
    } else if (role && wit && !aws_section_get(&s, "source_profile") &&
               !aws_section_get(&s, "credential_source")) {
        int dur;
        rc = parse_duration(aws_section_get(&s, "duration_seconds"), name, &dur, err, errlen);
        if (rc == 0) {
            rc = aws_sts_assume_role_web_identity(&ctx, role, sess ? sess : defname, wit, dur, out,
                                                  why, sizeof why);
            if (rc)
                snprintf(err, errlen, "profile '%s' (web_identity_token_file): %s", name, why);
        }
    } else if (role) {
        int dur;
        rc = parse_duration(aws_section_get(&s, "duration_seconds"), name, &dur, err, errlen);
        cred_fetched base = {0};
        if (rc == 0)
            rc = role_source(e, name, &s, chain, depth, abort, &base, err, errlen);
        if (rc == 0) {
            rc = aws_sts_assume_role(&ctx, &base, role, sess ? sess : defname, dur,
                                     aws_section_get(&s, "external_id"), out, why, sizeof why);
            if (rc)
                snprintf(err, errlen, "profile '%s' (role_arn): %s", name, why);
        }
        cred_fetched_clear(&base);
    } else if (wit) {
        snprintf(err, errlen, "profile '%s' has web_identity_token_file but no role_arn", name);
        rc = S3LECT_EAUTH;
    } else if (aws_section_get(&s, "aws_access_key_id") &&
               aws_section_get(&s, "aws_secret_access_key")) {
        rc = set_static(out, aws_section_get(&s, "aws_access_key_id"),
                        aws_section_get(&s, "aws_secret_access_key"),
                        aws_section_get(&s, "aws_session_token"));
    } else if (aws_section_get(&s, "sso_session") || aws_section_get(&s, "sso_start_url")) {
        const char *sname = aws_section_get(&s, "sso_session");
        aws_section ss = {0};
        if (sname && aws_sso_session_read(e->conf_path, sname, &ss) != 0) {
            rc = S3LECT_ENOMEM;
            snprintf(err, errlen, "out of memory");
        } else if (sname && !ss.found) {
            snprintf(err, errlen,
                     "profile '%s' names sso_session '%s', but %s has no "
                     "[sso-session %s] section",
                     name, sname, e->conf_path ? e->conf_path : "~/.aws/config", sname);
            rc = S3LECT_EAUTH;
        } else {
            aws_sso_params p = {.profile = name,
                                .session_name = sname,
                                .start_url = sname ? aws_section_get(&ss, "sso_start_url")
                                                   : aws_section_get(&s, "sso_start_url"),
                                .region = sname ? aws_section_get(&ss, "sso_region")
                                                : aws_section_get(&s, "sso_region"),
                                .account_id = aws_section_get(&s, "sso_account_id"),
                                .role_name = aws_section_get(&s, "sso_role_name"),
                                .ca_file = e->ca_file,
                                .timeout_ms = e->timeout_ms,
                                .abort = abort};
            rc = aws_sso_fetch(&p, out, err, errlen);
        }
        aws_section_clear(&ss);
    } else if (aws_section_get(&s, "credential_process")) {
        char what[200];
        snprintf(what, sizeof what, "credential_process of profile '%s'", name);
        rc = aws_process_fetch(aws_section_get(&s, "credential_process"), what,
                               aws_process_timeout_ms(), abort, out, err, errlen);
    } else if (aws_section_get(&s, "aws_access_key_id") ||
               aws_section_get(&s, "aws_secret_access_key")) {
        rc = half_static_keys(&s, name, err, errlen);
    } else {
        snprintf(err, errlen,
                 "profile '%s' in %s has no credentials (aws_access_key_id, role_arn, "
                 "sso_session, credential_process or web_identity_token_file)",
                 name, s.where);
        rc = S3LECT_EAUTH;
    }
    aws_section_clear(&s);
    return rc;
}

/* The providers' fetches (cred_ops.fetch; no lock held). */

static int webid_env_fetch(const void *state, int first, const _Atomic int *abort,
                           cred_fetched *out, char *err, size_t errlen)
{
    (void)first;
    const aws_src *e = state;
    aws_sts_ctx ctx = {
        .region = e->region, .ca_file = e->ca_file, .timeout_ms = e->timeout_ms, .abort = abort};
    return aws_sts_assume_role_web_identity(&ctx, e->role_arn, e->session_name, e->token_file, 0,
                                            out, err, errlen);
}

static int profile_src_fetch(const void *state, int first, const _Atomic int *abort,
                             cred_fetched *out, char *err, size_t errlen)
{
    (void)first;
    const aws_src *e = state;
    const char *chain[MAX_PROFILE_DEPTH];
    return profile_fetch(e, e->profile, chain, 0, abort, out, err, errlen);
}

static int container_src_fetch(const void *state, int first, const _Atomic int *abort,
                               cred_fetched *out, char *err, size_t errlen)
{
    (void)state, (void)first, (void)abort;
    char why[450];
    int rc = aws_container_fetch(METADATA_TIMEOUT_MS, out, why, sizeof why);
    if (rc)
        snprintf(err, errlen, "container credentials: %s", why);
    return rc;
}

static int imds_src_fetch(const void *state, int first, const _Atomic int *abort, cred_fetched *out,
                          char *err, size_t errlen)
{
    (void)state, (void)abort;
    char why[450];
    int rc =
        aws_imds_fetch(first ? IMDS_PROBE_TIMEOUT_MS : METADATA_TIMEOUT_MS, out, why, sizeof why);
    if (rc)
        snprintf(err, errlen, "EC2 instance metadata: %s", why);
    return rc;
}

/* ---- resolution ---- */

static char *join_key(const char *const *parts, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(parts[i] ? parts[i] : "") + 1;
    char *k = malloc(len);
    if (!k)
        return NULL;
    k[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        strcat(k, parts[i] ? parts[i] : "");
        strcat(k, "\n");
    }
    return k;
}

/* ---- the providers, in order (aws_creds.h) ---- */

/* What the providers of one resolution share. */
typedef struct aws_resolving {
    const struct s3lect_config *cfg;
    const char *profile;
    int explicit_profile;
    char *cred_path, *conf_path; /* the shared files (read by the profile provider) */
    aws_section s;               /* the profile's section */
    char note[400];              /* why the profile was passed over ("" if it was not) */
} aws_resolving;

/* What a configured provider found: static keys, or what fetching needs. */
typedef struct aws_found {
    int is_static;
    cred_fetched keys; /* static keys */
    aws_src *src;      /* else: the entry's state */
    char *key;         /* and the cache key (the region and CA bundle are added) */
} aws_found;

typedef struct aws_provider {
    int env_only; /* skipped when the configuration names a profile (as the SDKs do) */
    /* Is it configured? 0: no, ask the next; 1: yes, *f filled; else
     * S3LECT_EAUTH (err says what to fix) or S3LECT_ENOMEM. */
    int (*configured)(aws_resolving *r, aws_found *f, char *err, size_t errlen);
    /* Where its credentials come from, for messages and whoami. */
    void (*describe)(const aws_resolving *r, const aws_found *f, char *buf, size_t n);
    cred_ops ops; /* fetch (not for static keys), free and open_failed */
} aws_provider;

static int found_static(aws_found *f, const char *akid, const char *secret, const char *token)
{
    f->is_static = 1;
    int rc = set_static(&f->keys, akid, secret, token);
    return rc ? rc : 1;
}

static int found_fetched(aws_found *f)
{
    f->src = calloc(1, sizeof *f->src);
    return f->src ? 1 : S3LECT_ENOMEM;
}

/* 1. Keys in the configuration. */
static int config_configured(aws_resolving *r, aws_found *f, char *err, size_t errlen)
{
    const struct s3lect_config *cfg = r->cfg;
    const char *akid = cfg && cfg->access_key_id && *cfg->access_key_id ? cfg->access_key_id : NULL;
    const char *secret =
        cfg && cfg->secret_access_key && *cfg->secret_access_key ? cfg->secret_access_key : NULL;
    if (!akid && !secret)
        return 0;
    if (!akid || !secret) {
        snprintf(err, errlen,
                 "incomplete S3 credentials in the configuration: set both the access key id "
                 "and the secret access key");
        return S3LECT_EAUTH;
    }
    return found_static(f, akid, secret, cfg->session_token);
}

static void config_describe(const aws_resolving *r, const aws_found *f, char *buf, size_t n)
{
    (void)r, (void)f;
    snprintf(buf, n, "the configuration");
}

/* 2. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN. */
static int env_configured(aws_resolving *r, aws_found *f, char *err, size_t errlen)
{
    (void)r;
    const char *akid = aws_env("AWS_ACCESS_KEY_ID");
    const char *secret = aws_env("AWS_SECRET_ACCESS_KEY");
    if (!akid && !secret)
        return 0;
    if (env_pair_complete("S3 credentials", "AWS_ACCESS_KEY_ID", akid, "AWS_SECRET_ACCESS_KEY",
                          secret, err, errlen) != 0)
        return S3LECT_EAUTH;
    return found_static(f, akid, secret, aws_env("AWS_SESSION_TOKEN"));
}

static void env_describe(const aws_resolving *r, const aws_found *f, char *buf, size_t n)
{
    (void)r, (void)f;
    snprintf(buf, n, "the environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)");
}

/* 3. Web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN. */
static int webid_env_configured(aws_resolving *r, aws_found *f, char *err, size_t errlen)
{
    (void)r;
    const char *tf = aws_env("AWS_WEB_IDENTITY_TOKEN_FILE");
    const char *role = aws_env("AWS_ROLE_ARN");
    if (!tf && !role)
        return 0;
    if (env_pair_complete("web identity settings", "AWS_WEB_IDENTITY_TOKEN_FILE", tf,
                          "AWS_ROLE_ARN", role, err, errlen) != 0)
        return S3LECT_EAUTH;
    if (found_fetched(f) != 1)
        return S3LECT_ENOMEM;
    char defname[64];
    default_session_name(defname, sizeof defname);
    const char *sess = aws_env("AWS_ROLE_SESSION_NAME");
    aws_src *e = f->src;
    e->role_arn = u_strdup(role);
    e->token_file = u_strdup(tf);
    e->session_name = u_strdup(sess ? sess : defname);
    /* The session name is not part of the key unless set: one entry per
     * role and token file. */
    const char *parts[] = {"webid", role, tf, sess};
    f->key = join_key(parts, 4);
    return !e->role_arn || !e->token_file || !e->session_name || !f->key ? S3LECT_ENOMEM : 1;
}

static void webid_env_describe(const aws_resolving *r, const aws_found *f, char *buf, size_t n)
{
    (void)r;
    snprintf(buf, n, "web identity (AWS_WEB_IDENTITY_TOKEN_FILE, role %.200s)", f->src->role_arn);
}

/* What makes a profile's credentials temporary (for its description), or
 * NULL when it has static keys or nothing. */
static const char *profile_dynamic(const aws_section *s)
{
    return aws_section_get(s, "role_arn")                  ? "role_arn"
           : aws_section_get(s, "web_identity_token_file") ? "web identity"
           : (aws_section_get(s, "aws_access_key_id") &&
              aws_section_get(s, "aws_secret_access_key"))
               ? NULL
           : (aws_section_get(s, "sso_session") || aws_section_get(s, "sso_start_url")) ? "SSO"
           : aws_section_get(s, "credential_process") ? "credential_process"
                                                      : NULL;
}

/* 4. The profile in the shared files. A profile without credentials is
 * passed over (r->note says why) unless it was named and is missing. */
static int profile_configured(aws_resolving *r, aws_found *f, char *err, size_t errlen)
{
    r->cred_path = aws_shared_file_path("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    r->conf_path = aws_shared_file_path("AWS_CONFIG_FILE", "config");
    if (aws_profile_read(r->cred_path, r->conf_path, r->profile, &r->s) != 0)
        return S3LECT_ENOMEM;
    const aws_section *s = &r->s;
    const char *profile = r->profile;
    if (s->found) {
        if (profile_dynamic(s)) {
            if (found_fetched(f) != 1)
                return S3LECT_ENOMEM;
            aws_src *e = f->src;
            e->profile = u_strdup(profile);
            e->cred_path = u_strdup(r->cred_path);
            e->conf_path = u_strdup(r->conf_path);
            const char *parts[] = {"profile", profile, r->cred_path, r->conf_path};
            f->key = join_key(parts, 4);
            if (!f->key || !e->profile || (r->cred_path && !e->cred_path) ||
                (r->conf_path && !e->conf_path))
                return S3LECT_ENOMEM;
            return 1;
        }
        const char *akid = aws_section_get(s, "aws_access_key_id");
        const char *secret = aws_section_get(s, "aws_secret_access_key");
        if (akid && secret)
            return found_static(f, akid, secret, aws_section_get(s, "aws_session_token"));
        if (akid || secret)
            return half_static_keys(s, profile, err, errlen);
        if (s->problem[0]) /* what is wrong with the file says more */
            snprintf(r->note, sizeof r->note, "profile '%.60s' has no credentials: %.320s", profile,
                     s->problem);
        else
            snprintf(r->note, sizeof r->note,
                     "profile '%s' in %s has no aws_access_key_id/aws_secret_access_key, "
                     "role_arn, sso_session, credential_process or web_identity_token_file",
                     profile, s->where);
    } else if (r->explicit_profile || strcmp(profile, "default") != 0) {
        snprintf(err, errlen, "AWS profile '%s' not found in %s or %s%s%.400s%s", profile,
                 r->cred_path ? r->cred_path : "~/.aws/credentials",
                 r->conf_path ? r->conf_path : "~/.aws/config", s->problem[0] ? " (" : "",
                 s->problem, s->problem[0] ? ")" : "");
        return S3LECT_EAUTH;
    } else if (s->problem[0]) {
        /* No [default] profile to be had: say why, not "no credentials". */
        snprintf(r->note, sizeof r->note, "%.390s", s->problem);
    }
    return 0;
}

static void profile_describe(const aws_resolving *r, const aws_found *f, char *buf, size_t n)
{
    const char *role = aws_section_get(&r->s, "role_arn");
    if (f->is_static)
        snprintf(buf, n, "profile '%.60s' in %.240s", r->profile, r->s.where);
    else if (role)
        snprintf(buf, n, "profile '%.60s' (role %.120s) in %.120s", r->profile, role, r->s.where);
    else
        snprintf(buf, n, "profile '%.60s' (%s) in %.160s", r->profile, profile_dynamic(&r->s),
                 r->s.where);
}

/* 5. Container credentials (ECS, EKS Pod Identity). */
static int container_configured(aws_resolving *r, aws_found *f, char *err, size_t errlen)
{
    (void)r, (void)err, (void)errlen;
    if (!aws_container_configured())
        return 0;
    if (found_fetched(f) != 1)
        return S3LECT_ENOMEM;
    f->key = u_strdup("container\n");
    return f->key ? 1 : S3LECT_ENOMEM;
}

static void container_describe(const aws_resolving *r, const aws_found *f, char *buf, size_t n)
{
    (void)r, (void)f;
    snprintf(buf, n, "container credentials (%s)",
             aws_env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
                 ? "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
                 : "AWS_CONTAINER_CREDENTIALS_FULL_URI");
}

/* 6. EC2 instance metadata: the last resort. */
static int imds_configured(aws_resolving *r, aws_found *f, char *err, size_t errlen)
{
    (void)r, (void)err, (void)errlen;
    if (!aws_imds_enabled())
        return 0;
    if (found_fetched(f) != 1)
        return S3LECT_ENOMEM;
    f->key = u_strdup("imds\n");
    return f->key ? 1 : S3LECT_ENOMEM;
}

static void imds_describe(const aws_resolving *r, const aws_found *f, char *buf, size_t n)
{
    (void)f;
    if (r->note[0]) /* says why the profile was passed over */
        snprintf(buf, n, "EC2 instance metadata (because %.260s)", r->note);
    else
        snprintf(buf, n, "EC2 instance metadata");
}

static void imds_open_failed(const char *desc, const char *last, char *err, size_t errlen)
{
    snprintf(err, errlen,
             "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
             "or add a profile to ~/.aws/credentials (or point "
             "AWS_SHARED_CREDENTIALS_FILE/AWS_PROFILE at one); the last resort failed: %s "
             "(set AWS_EC2_METADATA_DISABLED=true off EC2)%s%s",
             last, strcmp(desc, "EC2 instance metadata") ? "; tried " : "",
             strcmp(desc, "EC2 instance metadata") ? desc : "");
}

static const aws_provider providers[] = {
    {0, config_configured, config_describe, {NULL, NULL, NULL}},
    {1, env_configured, env_describe, {NULL, NULL, NULL}},
    {1, webid_env_configured, webid_env_describe, {webid_env_fetch, src_free, NULL}},
    {0, profile_configured, profile_describe, {profile_src_fetch, src_free, NULL}},
    {0, container_configured, container_describe, {container_src_fetch, src_free, NULL}},
    {0, imds_configured, imds_describe, {imds_src_fetch, src_free, imds_open_failed}},
};

/* No provider is configured: says what to set. */
static void nothing_configured(const aws_resolving *r, char *err, size_t errlen)
{
    if (r->note[0])
        snprintf(err, errlen, "no AWS credentials: %s (and EC2 instance metadata is disabled)",
                 r->note);
    else
        snprintf(err, errlen,
                 "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                 "or add a [default] profile to %s (or point "
                 "AWS_SHARED_CREDENTIALS_FILE/AWS_PROFILE at one); EC2 instance metadata "
                 "is disabled (AWS_EC2_METADATA_DISABLED)",
                 r->cred_path ? r->cred_path : "~/.aws/credentials");
}

/* A new entry for what provider p found (consumed). */
static int found_entry(const struct s3lect_config *cfg, const aws_resolving *r,
                       const aws_provider *p, aws_found *f, struct cred_cache **out)
{
    struct cred_cache *e = cred_entry_new(f->is_static ? NULL : &p->ops);
    if (!e)
        return S3LECT_ENOMEM;
    *out = e;
    p->describe(r, f, e->desc, sizeof e->desc);
    if (f->is_static) {
        e->cur = f->keys;
        memset(&f->keys, 0, sizeof f->keys);
        e->have = 1;
        return 0;
    }
    aws_src *src = f->src;
    e->state = src;
    f->src = NULL;
    src->region = aws_region_resolve(cfg);
    src->ca_file = u_strdup(aws_ca_bundle_resolve(cfg));
    src->timeout_ms =
        cfg && cfg->request_timeout > 0 ? cfg->request_timeout : STS_DEFAULT_TIMEOUT_MS;
    if (!src->region || (aws_ca_bundle_resolve(cfg) && !src->ca_file))
        return S3LECT_ENOMEM;
    /* The region and CA bundle change what STS and SSO are asked. */
    const char *parts[] = {f->key, src->region, src->ca_file};
    e->key = join_key(parts, 3);
    return e->key ? 0 : S3LECT_ENOMEM;
}

/* Asks the providers in order which one applies; a new entry for it (static
 * ones carry their keys). Returns 0, S3LECT_EAUTH or S3LECT_ENOMEM. */
static int resolve(const struct s3lect_config *cfg, struct cred_cache **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    aws_resolving r = {.cfg = cfg};
    r.profile = aws_profile_name(cfg, &r.explicit_profile);
    aws_found f = {0};
    struct cred_cache *e = NULL;
    int rc = 0;
    size_t i = 0;
    for (; i < sizeof providers / sizeof providers[0] && rc == 0; i++)
        if (!(providers[i].env_only && r.explicit_profile))
            rc = providers[i].configured(&r, &f, err, errlen);
    if (rc == 1)
        rc = found_entry(cfg, &r, &providers[i - 1], &f, &e);
    else if (rc == 0) {
        nothing_configured(&r, err, errlen);
        rc = S3LECT_EAUTH;
    }
    cred_fetched_clear(&f.keys);
    src_free(f.src);
    free(f.key);
    aws_section_clear(&r.s);
    free(r.cred_path);
    free(r.conf_path);
    if (rc) {
        cred_entry_free(e);
        if (rc == S3LECT_ENOMEM)
            snprintf(err, errlen, "out of memory reading S3 credentials");
        return rc;
    }
    *out = e;
    return 0;
}

int aws_chain_open(const struct s3lect_config *cfg, int flags, cred_cache **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    struct cred_cache *e;
    int rc = resolve(cfg, &e, err, errlen);
    return rc ? rc : cred_cache_open(e, flags, out, err, errlen);
}

/* ---- one-shot resolution ---- */

int aws_chain_get(cred_cache *e, aws_creds *out, uint64_t *gen, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    cred_fetched f;
    int rc = cred_cache_keys(e, &f, gen, err, errlen);
    if (rc)
        return rc;
    out->access_key_id = f.access_key_id;
    out->secret_access_key = f.secret_access_key;
    out->session_token = f.session_token;
    snprintf(out->source, sizeof out->source, "%s", e->desc);
    memset(&f, 0, sizeof f);
    return 0;
}

int aws_creds_resolve(const struct s3lect_config *cfg, aws_creds *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    cred_cache *c;
    int rc = aws_chain_open(cfg, 0, &c, err, errlen);
    if (rc)
        return rc;
    rc = aws_chain_get(c, out, NULL, err, errlen);
    cred_cache_release(c);
    return rc;
}

void aws_creds_clear(aws_creds *c)
{
    if (!c)
        return;
    u_wipe_free(c->access_key_id);
    u_wipe_free(c->secret_access_key);
    u_wipe_free(c->session_token);
    memset(c, 0, sizeof *c);
}
