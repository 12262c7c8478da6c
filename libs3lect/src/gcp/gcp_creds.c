/* SPDX-License-Identifier: Apache-2.0 */
/* gcp_creds.c - the Google Cloud credential chain (gcp_creds.h): which
 * source applies, and each source's fetch of an access token, cached and
 * refreshed by the aws layer's credential cache (cred_cache.h). */
#include "gcp_creds.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "config.h"
#include "cred_cache.h"
#include "cred_http.h"
#include "crypto.h"
#include "gcp_aws.h"
#include "http.h"
#include "s3lect.h"
#include "util.h"

#define GCP_TIMEOUT_MS 10000
#define GCP_MD_PROBE_TIMEOUT_MS 3000 /* the metadata server nobody configured */
#define GCP_MAX_FILE (64 * 1024)
#define GCP_DEFAULT_TOKEN_URI "https://oauth2.googleapis.com/token"
#define GCP_DEFAULT_MD_HOST "169.254.169.254"
#define JWT_LIFETIME_S 3600

enum { SRC_FILE = 1, SRC_METADATA = 2 };

typedef struct gcp_src {
    int kind;
    char *path;      /* SRC_FILE: the credentials file (re-read at every fetch) */
    char *md_origin; /* SRC_METADATA: "http://host[:port]" */
    int md_last_resort;
    char *ca_file; /* NULL: the system's */
    int64_t timeout_ms;
} gcp_src;

static void src_free(void *p)
{
    gcp_src *s = p;
    if (!s)
        return;
    free(s->path);
    free(s->md_origin);
    free(s->ca_file);
    free(s);
}

static const char *genv(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* ---- small pieces ---- */

/* Reads path (at most GCP_MAX_FILE bytes) into *out (NUL-terminated; wipe
 * it: it holds keys). Returns 0 or S3LECT_EAUTH with err set. */
static int read_file(const char *path, char **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read the Google credentials file %s: %s", path,
                 strerror(errno));
        return S3LECT_EAUTH;
    }
    char *buf = malloc(GCP_MAX_FILE + 1);
    size_t n = buf ? fread(buf, 1, GCP_MAX_FILE + 1, f) : 0;
    fclose(f);
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (n > GCP_MAX_FILE) {
        u_wipe(buf, n);
        free(buf);
        snprintf(err, errlen, "the Google credentials file %s is larger than %d bytes", path,
                 GCP_MAX_FILE);
        return S3LECT_EAUTH;
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

/* Parses the credentials file's JSON (the caller deletes it). */
static cJSON *read_json(const char *path, char *err, size_t errlen, int *rc)
{
    char *text;
    *rc = read_file(path, &text, err, errlen);
    if (*rc)
        return NULL;
    cJSON *j = cJSON_Parse(text);
    u_wipe_free(text);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        snprintf(err, errlen, "the Google credentials file %s is not a JSON object", path);
        *rc = S3LECT_EAUTH;
        return NULL;
    }
    return j;
}

static const char *jstr(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* application/x-www-form-urlencoded value. */
static int form_add(char **out, size_t *len, size_t *cap, const char *name, const char *v)
{
    size_t need = *len + strlen(name) + 3 * strlen(v) + 3;
    if (need > *cap) {
        size_t nc = need * 2;
        char *n = malloc(nc);
        if (!n)
            return -1;
        if (*out) {
            memcpy(n, *out, *len + 1);
            u_wipe(*out, *cap);
            free(*out);
        }
        *out = n;
        *cap = nc;
    }
    char *p = *out + *len;
    if (*len)
        *p++ = '&';
    p += sprintf(p, "%s=", name);
    p += u_pct_encode_into(v, strlen(v), 0, p);
    *len = (size_t)(p - *out);
    return 0;
}

int gcp_parse_token(const char *body, size_t len, int64_t now_ms, cred_fetched *out, char *err,
                    size_t errlen)
{
    return cred_parse_bearer(body, len, now_ms, out, err, errlen);
}

/* One request to a token endpoint; the answer parsed into out. what names
 * the endpoint in messages ("the token endpoint https://..."). */
static int token_call(const gcp_src *s, const char *method, const char *url,
                      const char *const *headers, const char *body, const char *what,
                      const _Atomic int *abort, cred_fetched *out, char *err, size_t errlen)
{
    return cred_token_call(method, url, headers, body, what, s->ca_file,
                           s->md_last_resort ? GCP_MD_PROBE_TIMEOUT_MS : s->timeout_ms, abort, out,
                           err, errlen);
}

static int token_form_post(const gcp_src *s, const char *url, const char *form, const char *what,
                           const _Atomic int *abort, cred_fetched *out, char *err, size_t errlen)
{
    const char *h[] = {"Content-Type: application/x-www-form-urlencoded",
                       "Accept: application/json", NULL};
    return token_call(s, "POST", url, h, form, what, abort, out, err, errlen);
}

/* ---- service_account ---- */

static int fetch_service_account(const gcp_src *s, const cJSON *j, const _Atomic int *abort,
                                 cred_fetched *out, char *err, size_t errlen)
{
    const char *email = jstr(j, "client_email"), *key = jstr(j, "private_key");
    const char *kid = jstr(j, "private_key_id"), *uri = jstr(j, "token_uri");
    if (!uri)
        uri = GCP_DEFAULT_TOKEN_URI;
    if (!email || !key) {
        snprintf(err, errlen, "the service account key file %s lacks %s", s->path,
                 !email ? "client_email" : "private_key");
        return S3LECT_EAUTH;
    }
    int64_t now = u_wall_ms() / 1000;
    cJSON *hdr = cJSON_CreateObject(), *cl = cJSON_CreateObject();
    char *hs = NULL, *cs = NULL, *jwt = NULL, *form = NULL;
    int rc = S3LECT_ENOMEM;
    if (hdr && cl && cJSON_AddStringToObject(hdr, "alg", "RS256") &&
        cJSON_AddStringToObject(hdr, "typ", "JWT") &&
        (!kid || cJSON_AddStringToObject(hdr, "kid", kid)) &&
        cJSON_AddStringToObject(cl, "iss", email) &&
        cJSON_AddStringToObject(cl, "scope", GCP_SCOPE_STORAGE) &&
        cJSON_AddStringToObject(cl, "aud", uri) &&
        cJSON_AddNumberToObject(cl, "iat", (double)now) &&
        cJSON_AddNumberToObject(cl, "exp", (double)(now + JWT_LIFETIME_S)))
        rc = 0;
    if (!rc && (!(hs = cJSON_PrintUnformatted(hdr)) || !(cs = cJSON_PrintUnformatted(cl))))
        rc = S3LECT_ENOMEM;
    char e[200] = "";
    if (!rc && !(jwt = cr_jwt_rs256(hs, cs, key, e, sizeof e)))
        rc = S3LECT_EAUTH;
    size_t len = 0, cap = 0;
    if (!rc &&
        (form_add(&form, &len, &cap, "grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer") ||
         form_add(&form, &len, &cap, "assertion", jwt)))
        rc = S3LECT_ENOMEM;
    if (!rc) {
        char what[600];
        snprintf(what, sizeof what, "the token endpoint %s (service account %s)", uri, email);
        rc = token_form_post(s, uri, form, what, abort, out, err, errlen);
        if (!rc)
            snprintf(out->principal, sizeof out->principal, "%s", email);
    } else if (rc == S3LECT_EAUTH) {
        snprintf(err, errlen, "the service account key file %s: %s", s->path, e);
    } else {
        snprintf(err, errlen, "out of memory");
    }
    if (form)
        u_wipe(form, cap);
    free(form);
    u_wipe_free(jwt);
    free(hs);
    free(cs);
    cJSON_Delete(hdr);
    cJSON_Delete(cl);
    return rc;
}

/* ---- authorized_user ---- */

static int fetch_authorized_user(const gcp_src *s, const cJSON *j, const _Atomic int *abort,
                                 cred_fetched *out, char *err, size_t errlen)
{
    const char *id = jstr(j, "client_id"), *secret = jstr(j, "client_secret");
    const char *refresh = jstr(j, "refresh_token"), *uri = jstr(j, "token_uri");
    if (!uri)
        uri = GCP_DEFAULT_TOKEN_URI;
    if (!id || !secret || !refresh) {
        snprintf(err, errlen,
                 "the user credentials file %s lacks %s: run 'gcloud auth application-default "
                 "login' again",
                 s->path,
                 !id       ? "client_id"
                 : !secret ? "client_secret"
                           : "refresh_token");
        return S3LECT_EAUTH;
    }
    char *form = NULL;
    size_t len = 0, cap = 0;
    if (form_add(&form, &len, &cap, "grant_type", "refresh_token") ||
        form_add(&form, &len, &cap, "client_id", id) ||
        form_add(&form, &len, &cap, "client_secret", secret) ||
        form_add(&form, &len, &cap, "refresh_token", refresh)) {
        if (form)
            u_wipe(form, cap);
        free(form);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    char what[600];
    snprintf(what, sizeof what, "the token endpoint %s (gcloud user credentials)", uri);
    int rc = token_form_post(s, uri, form, what, abort, out, err, errlen);
    if (rc == S3LECT_EAUTH && strstr(err, "invalid_grant"))
        snprintf(err + strlen(err), errlen - strlen(err),
                 ": the refresh token was revoked or expired; run 'gcloud auth "
                 "application-default login'");
    const char *acct = jstr(j, "account");
    if (!rc && acct)
        snprintf(out->principal, sizeof out->principal, "%s", acct);
    u_wipe(form, cap);
    free(form);
    return rc;
}

/* ---- external_account (workload identity federation) ---- */

/* The subject token from credential_source (file or url), allocated. */
static int subject_token(const gcp_src *s, const cJSON *src, const char *audience,
                         const _Atomic int *abort, char **tok, char *err, size_t errlen)
{
    *tok = NULL;
    const char *file = jstr(src, "file"), *url = jstr(src, "url");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(src, "format");
    const char *ftype = fmt ? jstr(fmt, "type") : NULL;
    const char *field = fmt ? jstr(fmt, "subject_token_field_name") : NULL;
    char *raw = NULL;
    int rc;
    const char *envid = jstr(src, "environment_id");
    if (envid) {
        if (strncmp(envid, "aws", 3) == 0)
            return gcp_aws_subject_token(s->path, jstr(src, "regional_cred_verification_url"),
                                         audience, s->timeout_ms, tok, err, errlen);
        snprintf(err, errlen, "%s: credential_source environment_id '%.40s' is not supported",
                 s->path, envid);
        return S3LECT_EAUTH;
    }
    if (file) {
        rc = read_file(file, &raw, err, errlen);
        if (rc)
            return rc;
    } else if (url) {
        const cJSON *hs = cJSON_GetObjectItemCaseSensitive(src, "headers");
        const char *h[10];
        char *owned[10];
        size_t n = 0;
        for (const cJSON *c = hs ? hs->child : NULL; c && n < 9; c = c->next)
            if (cJSON_IsString(c) && (owned[n] = u_asprintf("%s: %s", c->string, c->valuestring)))
                h[n] = owned[n], n++;
        h[n] = NULL;
        cred_http_resp r;
        char e[300] = "";
        rc = cred_http("GET", url, h, NULL, 0, s->ca_file, s->timeout_ms, abort, &r, e, sizeof e);
        for (size_t i = 0; i < n; i++)
            u_wipe_free(owned[i]);
        if (rc) {
            snprintf(err, errlen, "the subject token URL %s did not answer: %s", url, e);
            return rc;
        }
        if (r.status != 200) {
            snprintf(err, errlen, "the subject token URL %s answered HTTP %ld", url, r.status);
            rc = r.status >= 500 || r.status == 429 ? S3LECT_ETRANSIENT : S3LECT_EAUTH;
            cred_http_resp_clear(&r);
            return rc;
        }
        raw = r.body;
        r.body = NULL;
        cred_http_resp_clear(&r);
    } else {
        snprintf(err, errlen, "%s: credential_source has neither file nor url", s->path);
        return S3LECT_EAUTH;
    }
    const char *where = file ? file : url;
    if (ftype && strcmp(ftype, "json") == 0) {
        cJSON *j = cJSON_Parse(raw);
        const char *v = j && field ? jstr(j, field) : NULL;
        if (v)
            *tok = u_strdup(v);
        cred_json_wipe_delete(j);
        if (!v) {
            u_wipe_free(raw);
            snprintf(err, errlen, "the subject token from %s is not JSON with the field '%s'",
                     where, field ? field : "(subject_token_field_name not set)");
            return S3LECT_EAUTH;
        }
    } else {
        size_t n = strlen(raw);
        while (n && (raw[n - 1] == '\n' || raw[n - 1] == '\r' || raw[n - 1] == ' '))
            raw[--n] = '\0';
        *tok = u_strdup(raw);
    }
    u_wipe_free(raw);
    if (!*tok) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (!**tok) {
        u_wipe_free(*tok);
        *tok = NULL;
        snprintf(err, errlen, "the subject token from %s is empty", where);
        return S3LECT_EAUTH;
    }
    return 0;
}

static int fetch_external_account(const gcp_src *s, const cJSON *j, const _Atomic int *abort,
                                  cred_fetched *out, char *err, size_t errlen)
{
    const char *aud = jstr(j, "audience"), *stt = jstr(j, "subject_token_type");
    const char *url = jstr(j, "token_url"), *imp = jstr(j, "service_account_impersonation_url");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(j, "credential_source");
    if (!url)
        url = "https://sts.googleapis.com/v1/token";
    if (!aud || !stt || !src || !cJSON_IsObject(src)) {
        snprintf(err, errlen, "the workload identity federation file %s lacks %s", s->path,
                 !aud   ? "audience"
                 : !stt ? "subject_token_type"
                        : "credential_source");
        return S3LECT_EAUTH;
    }
    char *subject;
    int rc = subject_token(s, src, aud, abort, &subject, err, errlen);
    if (rc)
        return rc;
    char *form = NULL;
    size_t len = 0, cap = 0;
    rc = form_add(&form, &len, &cap, "grant_type",
                  "urn:ietf:params:oauth:grant-type:token-exchange") ||
                 form_add(&form, &len, &cap, "audience", aud) ||
                 form_add(&form, &len, &cap, "scope", GCP_SCOPE_CLOUD) ||
                 form_add(&form, &len, &cap, "requested_token_type",
                          "urn:ietf:params:oauth:token-type:access_token") ||
                 form_add(&form, &len, &cap, "subject_token", subject) ||
                 form_add(&form, &len, &cap, "subject_token_type", stt)
             ? S3LECT_ENOMEM
             : 0;
    u_wipe_free(subject);
    char what[600];
    snprintf(what, sizeof what, "the security token service %s (workload identity federation)",
             url);
    if (rc)
        snprintf(err, errlen, "out of memory");
    else
        rc = token_form_post(s, url, form, what, abort, out, err, errlen);
    if (form)
        u_wipe(form, cap);
    free(form);
    if (rc || !imp)
        return rc;
    /* Impersonation: the federated token buys the service account's. */
    char *auth = u_asprintf("Authorization: Bearer %s", out->bearer);
    cred_fetched fed = *out;
    memset(out, 0, sizeof *out);
    cred_fetched_clear(&fed);
    if (!auth) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    char body[200];
    snprintf(body, sizeof body, "{\"scope\":[\"%s\"],\"lifetime\":\"3600s\"}", GCP_SCOPE_STORAGE);
    const char *h[] = {auth, "Content-Type: application/json", "Accept: application/json", NULL};
    const char *sa = strstr(imp, "serviceAccounts/");
    char email[256] = "";
    if (sa)
        snprintf(email, sizeof email, "%.*s", (int)strcspn(sa + 16, ":/"), sa + 16);
    snprintf(what, sizeof what, "the impersonation endpoint %s", imp);
    rc = token_call(s, "POST", imp, h, body, what, abort, out, err, errlen);
    u_wipe_free(auth);
    if (rc == S3LECT_EAUTH)
        snprintf(err + strlen(err), errlen - strlen(err),
                 ": grant the federated principal roles/iam.workloadIdentityUser (or "
                 "serviceAccountTokenCreator) on %s",
                 email[0] ? email : "the service account");
    if (!rc)
        snprintf(out->principal, sizeof out->principal, "%s", email);
    return rc;
}

/* ---- the file sources ---- */

static int fetch_file(const void *state, int first, const _Atomic int *abort, cred_fetched *out,
                      char *err, size_t errlen)
{
    (void)first;
    const gcp_src *s = state;
    int rc;
    cJSON *j = read_json(s->path, err, errlen, &rc);
    if (!j)
        return rc;
    const char *type = jstr(j, "type");
    if (type && strcmp(type, "service_account") == 0)
        rc = fetch_service_account(s, j, abort, out, err, errlen);
    else if (type && strcmp(type, "authorized_user") == 0)
        rc = fetch_authorized_user(s, j, abort, out, err, errlen);
    else if (type && strcmp(type, "external_account") == 0)
        rc = fetch_external_account(s, j, abort, out, err, errlen);
    else {
        snprintf(err, errlen,
                 "the Google credentials file %s has type '%.40s'; s3lect knows service_account, "
                 "authorized_user and external_account",
                 s->path, type ? type : "(none)");
        rc = S3LECT_EAUTH;
    }
    cred_json_wipe_delete(j);
    return rc;
}

/* ---- the metadata server ---- */

static int fetch_metadata(const void *state, int first, const _Atomic int *abort, cred_fetched *out,
                          char *err, size_t errlen)
{
    (void)first;
    const gcp_src *s = state;
    const char *h[] = {"Metadata-Flavor: Google", NULL};
    char url[400], what[500];
    snprintf(url, sizeof url, "%s/computeMetadata/v1/instance/service-accounts/default/token",
             s->md_origin);
    snprintf(what, sizeof what, "the metadata server at %s", s->md_origin);
    int rc = token_call(s, "GET", url, h, NULL, what, abort, out, err, errlen);
    if (rc == S3LECT_EAUTH && strstr(err, "HTTP 404"))
        snprintf(err + strlen(err), errlen - strlen(err),
                 ": no service account is attached to this VM, node pool or service (GKE: "
                 "set up Workload Identity for the pod's Kubernetes service account)");
    if (rc)
        return rc;
    snprintf(url, sizeof url, "%s/computeMetadata/v1/instance/service-accounts/default/email",
             s->md_origin);
    cred_http_resp r;
    char e[200];
    if (cred_http("GET", url, h, NULL, 0, NULL, s->timeout_ms, abort, &r, e, sizeof e) == 0) {
        if (r.status == 200 && r.len < sizeof out->principal && !strpbrk(r.body, "\r\n\t <>\""))
            snprintf(out->principal, sizeof out->principal, "%s", r.body);
        cred_http_resp_clear(&r);
    }
    return 0;
}

static void metadata_open_failed(const char *desc, const char *last, char *err, size_t errlen)
{
    (void)desc;
    snprintf(err, errlen,
             "no Google credentials found: set GOOGLE_APPLICATION_CREDENTIALS to a key or "
             "federation file, run 'gcloud auth application-default login', or run on Google "
             "Cloud with a service account attached (the metadata server: %s)",
             last);
}

static const cred_ops file_ops = {fetch_file, src_free, NULL};
static const cred_ops md_ops = {fetch_metadata, src_free, NULL};
static const cred_ops md_last_ops = {fetch_metadata, src_free, metadata_open_failed};

/* ---- resolution ---- */

/* gcloud's application-default file, allocated, or NULL when it is absent. */
static char *adc_path(void)
{
    const char *dir = genv("CLOUDSDK_CONFIG");
    char *p;
    if (dir) {
        p = u_asprintf("%s/application_default_credentials.json", dir);
    } else {
        char *home = u_home_dir();
        p = home ? u_asprintf("%s/.config/gcloud/application_default_credentials.json", home)
                 : NULL;
        free(home);
    }
    FILE *f = p ? fopen(p, "rb") : NULL;
    if (!f) {
        free(p);
        return NULL;
    }
    fclose(f);
    return p;
}

static const char *type_desc(const char *type)
{
    if (!type)
        return "Google credentials file";
    if (strcmp(type, "service_account") == 0)
        return "service account key";
    if (strcmp(type, "authorized_user") == 0)
        return "gcloud user credentials (authorized_user)";
    if (strcmp(type, "external_account") == 0)
        return "workload identity federation (external_account)";
    return "Google credentials file";
}

int gcp_chain_open(const struct s3lect_config *cfg, int flags, cred_cache **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    const char *ca = cfg ? cfg->ca_file : NULL; /* NULL: the system's (http_set_ca) */
    int64_t timeout = cfg && cfg->request_timeout > 0 ? cfg->request_timeout : GCP_TIMEOUT_MS;
    const char *tok = genv("GOOGLE_OAUTH_ACCESS_TOKEN");
    if (tok) {
        struct cred_cache *e = cred_entry_new(NULL);
        if (!e || !(e->cur.bearer = u_strdup(tok))) {
            cred_entry_free(e);
            snprintf(err, errlen, "out of memory");
            return S3LECT_ENOMEM;
        }
        e->have = 1;
        snprintf(e->desc, sizeof e->desc, "the access token in GOOGLE_OAUTH_ACCESS_TOKEN");
        return cred_cache_open(e, flags & CRED_CACHE_NOWAIT, out, err, errlen);
    }
    gcp_src *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->timeout_ms = timeout;
    s->ca_file = ca ? u_strdup(ca) : NULL;
    const char *gac = genv("GOOGLE_APPLICATION_CREDENTIALS");
    const char *from = "GOOGLE_APPLICATION_CREDENTIALS";
    const cred_ops *ops;
    char desc[320];
    if (gac) {
        s->path = u_strdup(gac);
    } else {
        s->path = adc_path();
        from = "gcloud application-default credentials";
    }
    if (s->path) {
        int rc;
        cJSON *j = read_json(s->path, err, errlen, &rc);
        if (!j) {
            if (gac && rc == S3LECT_EAUTH)
                snprintf(err + strlen(err), errlen - strlen(err),
                         " (GOOGLE_APPLICATION_CREDENTIALS)");
            src_free(s);
            return rc;
        }
        const char *type = jstr(j, "type");
        snprintf(desc, sizeof desc, "%s %s (%s)", type_desc(type), s->path, from);
        cred_json_wipe_delete(j);
        s->kind = SRC_FILE;
        ops = &file_ops;
    } else {
        const char *host = genv("GCE_METADATA_HOST");
        if (!host && (flags & GCP_CHAIN_OPTIONAL)) {
            src_free(s);
            return 0;
        }
        s->kind = SRC_METADATA;
        s->md_last_resort = !host;
        s->md_origin = u_asprintf("http://%s", host ? host : GCP_DEFAULT_MD_HOST);
        snprintf(desc, sizeof desc, "the metadata server at %s%s",
                 host ? host : GCP_DEFAULT_MD_HOST, host ? " (GCE_METADATA_HOST)" : "");
        ops = host ? &md_ops : &md_last_ops;
    }
    struct cred_cache *e = cred_entry_new(ops);
    if (!e || (s->kind == SRC_FILE && !s->path) || (s->kind == SRC_METADATA && !s->md_origin) ||
        (ca && !s->ca_file)) {
        src_free(s);
        cred_entry_free(e);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    e->state = s;
    snprintf(e->desc, sizeof e->desc, "%s", desc);
    e->key = u_asprintf("gcp\n%d\n%s\n%s\n%s\n%lld", s->kind, s->path ? s->path : "",
                        s->md_origin ? s->md_origin : "", s->ca_file ? s->ca_file : "",
                        (long long)s->timeout_ms);
    if (!e->key) {
        cred_entry_free(e);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    return cred_cache_open(e, flags & CRED_CACHE_NOWAIT, out, err, errlen);
}
