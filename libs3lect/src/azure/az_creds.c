/* SPDX-License-Identifier: Apache-2.0 */
/* az_creds.c - Entra ID (Azure AD) token sources of the Azure Blob store
 * (az_creds.h), cached and refreshed by the aws layer's credential cache
 * (cred_cache.h). */
#include "az_creds.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "cred_cache.h"
#include "cred_http.h"
#include "crypto.h"
#include "http.h"
#include "s3lect.h"
#include "net.h"
#include "util.h"

#define AZ_TIMEOUT_MS 10000
#define AZ_IMDS_PROBE_TIMEOUT_MS 3000 /* the IMDS nobody configured */
#define AZ_MAX_FILE (64 * 1024)
#define AZ_DEFAULT_AUTHORITY "https://login.microsoftonline.com"
#define AZ_DEFAULT_IMDS "http://169.254.169.254"
#define AZ_ASSERTION_LIFETIME_S 600

enum { SRC_SECRET = 1, SRC_CERT, SRC_WORKLOAD, SRC_APPSERVICE, SRC_IMDS };

typedef struct az_src {
    int kind;
    char *tenant, *client_id;
    char *secret;    /* SRC_SECRET (wiped) */
    char *path;      /* SRC_CERT: the PEM; SRC_WORKLOAD: the token file (re-read each fetch) */
    char *authority; /* SRC_SECRET, SRC_CERT, SRC_WORKLOAD */
    char *md_url;    /* SRC_APPSERVICE: IDENTITY_ENDPOINT; SRC_IMDS: the IMDS origin */
    char *md_header; /* SRC_APPSERVICE: IDENTITY_HEADER (wiped) */
    int last_resort;
    char *ca_file;
    int64_t timeout_ms;
} az_src;

static void src_free(void *p)
{
    az_src *s = p;
    if (!s)
        return;
    free(s->tenant);
    free(s->client_id);
    u_wipe_free(s->secret);
    free(s->path);
    free(s->authority);
    free(s->md_url);
    u_wipe_free(s->md_header);
    free(s->ca_file);
    free(s);
}

static const char *genv(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int read_file(const char *path, const char *what, char **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read %s %s", what, path);
        return S3LECT_EAUTH;
    }
    char *buf = malloc(AZ_MAX_FILE + 1);
    size_t n = buf ? fread(buf, 1, AZ_MAX_FILE + 1, f) : 0;
    fclose(f);
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (n == 0 || n > AZ_MAX_FILE) {
        u_wipe(buf, AZ_MAX_FILE + 1);
        free(buf);
        snprintf(err, errlen, "%s %s is %s", what, path, n ? "too large" : "empty");
        return S3LECT_EAUTH;
    }
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    *out = buf;
    return 0;
}

/* Appends name=urlencode(v) to the form *f (allocated; wiped when replaced). */
static int form_add(char **f, const char *name, const char *v)
{
    if (!v)
        v = ""; /* a source without that field (never sent so: the caller picks by kind) */
    size_t old = *f ? strlen(*f) : 0;
    char *n = malloc(old + strlen(name) + 3 * strlen(v) + 3);
    if (!n)
        return -1;
    char *p = n;
    if (old) {
        memcpy(p, *f, old);
        p += old;
        *p++ = '&';
    }
    p += sprintf(p, "%s=", name);
    u_pct_encode_into(v, strlen(v), 0, p);
    u_wipe_free(*f);
    *f = n;
    return 0;
}

/* ---- token answers ---- */

static const char *jstr(const cJSON *o, const char *name)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, name) : NULL;
    return v && cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

/* The token's appid (or azp) and oid claims, "appid X, oid Y", into dst. */
static void token_principal(const char *tok, char *dst, size_t cap)
{
    dst[0] = '\0';
    const char *a = strchr(tok, '.');
    const char *b = a ? strchr(a + 1, '.') : NULL;
    size_t len = b ? (size_t)(b - a - 1) : 0;
    uint8_t *claims = b ? malloc(U_UNBASE64_MAX(len)) : NULL;
    long n = claims ? u_unbase64(a + 1, len, U_B64_LENIENT, claims) : -1;
    if (n < 0) {
        free(claims);
        return;
    }
    cJSON *j = cJSON_ParseWithLength((const char *)claims, (size_t)n);
    const char *app = jstr(j, "appid");
    if (!app)
        app = jstr(j, "azp");
    const char *oid = jstr(j, "oid");
    if (app || oid)
        snprintf(dst, cap, "%s%.64s%s%s%.64s", app ? "appid " : "", app ? app : "",
                 app && oid ? ", " : "", oid ? "oid " : "", oid ? oid : "");
    for (char *c = dst; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == '"')
            *c = '?';
    cJSON_Delete(j);
    u_wipe(claims, (size_t)n);
    free(claims);
}

int az_parse_token(const char *body, size_t len, int64_t now_ms, cred_fetched *out, char *err,
                   size_t errlen)
{
    int rc = cred_parse_bearer(body, len, now_ms, out, err, errlen);
    if (rc == 0)
        token_principal(out->bearer, out->principal, sizeof out->principal);
    return rc;
}

/* One request to a token endpoint; the answer parsed into out. */
static int token_call(const az_src *s, const char *method, const char *url,
                      const char *const *headers, const char *body, const char *what,
                      const _Atomic int *abort, cred_fetched *out, char *err, size_t errlen)
{
    int rc = cred_token_call(method, url, headers, body, what, s->ca_file,
                             s->last_resort ? AZ_IMDS_PROBE_TIMEOUT_MS : s->timeout_ms, abort, out,
                             err, errlen);
    if (rc == 0)
        token_principal(out->bearer, out->principal, sizeof out->principal);
    return rc;
}

/* ---- client credentials: secret, certificate, federated token ---- */

/* The certificate's SHA-1 thumbprint (base64url) and the PEM's text, for
 * the client assertion. */
static int cert_thumbprint(const char *pem, const char *path, char **x5t, char *err, size_t errlen)
{
    *x5t = NULL;
    BIO *bio = BIO_new_mem_buf(pem, (int)strlen(pem));
    X509 *cert = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    unsigned char *der = NULL;
    int n = cert ? i2d_X509(cert, &der) : -1;
    X509_free(cert);
    if (n <= 0) {
        snprintf(err, errlen,
                 "the client certificate file %s (AZURE_CLIENT_CERTIFICATE_PATH) has no PEM "
                 "certificate: give one PEM file with the private key and the certificate",
                 path);
        return S3LECT_EAUTH;
    }
    uint8_t sha1[SHA_DIGEST_LENGTH];
    SHA1(der, (size_t)n, sha1);
    OPENSSL_free(der);
    *x5t = u_base64_dup(sha1, sizeof sha1, U_B64_URL | U_B64_NOPAD);
    if (!*x5t) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    return 0;
}

static char *cert_assertion(const az_src *s, const char *token_url, char *err, size_t errlen,
                            int *rc)
{
    char *pem = NULL, *x5t = NULL, *jwt = NULL;
    *rc = read_file(s->path, "the client certificate file", &pem, err, errlen);
    if (*rc == 0)
        *rc = cert_thumbprint(pem, s->path, &x5t, err, errlen);
    if (*rc == 0) {
        uint8_t jti[16];
        char jti_hex[33];
        if (cr_random(jti, sizeof jti) != 0)
            memset(jti, 0, sizeof jti);
        cr_hex(jti, sizeof jti, jti_hex);
        int64_t now = u_wall_ms() / 1000;
        char *header = u_asprintf("{\"alg\":\"RS256\",\"typ\":\"JWT\",\"x5t\":\"%s\"}", x5t);
        char *claims =
            u_asprintf("{\"aud\":\"%s\",\"iss\":\"%s\",\"sub\":\"%s\",\"jti\":\"%s\","
                       "\"nbf\":%lld,\"iat\":%lld,\"exp\":%lld}",
                       token_url, s->client_id, s->client_id, jti_hex, (long long)now - 60,
                       (long long)now, (long long)now + AZ_ASSERTION_LIFETIME_S);
        char e[200] = "";
        jwt = header && claims ? cr_jwt_rs256(header, claims, pem, e, sizeof e) : NULL;
        if (!jwt) {
            snprintf(err, errlen, "cannot sign the client assertion with %s: %s", s->path,
                     e[0] ? e : "out of memory");
            *rc = S3LECT_EAUTH;
        }
        free(header);
        free(claims);
    }
    u_wipe_free(pem);
    free(x5t);
    return jwt;
}

static int fetch_client(const void *state, int first, const _Atomic int *abort, cred_fetched *out,
                        char *err, size_t errlen)
{
    (void)first;
    const az_src *s = state;
    char *url = u_asprintf("%s/%s/oauth2/v2.0/token", s->authority, s->tenant);
    char *form = NULL, *assertion = NULL;
    int rc = url ? 0 : S3LECT_ENOMEM;
    if (rc == 0 && s->kind == SRC_WORKLOAD)
        rc = read_file(s->path, "the federated token file (AZURE_FEDERATED_TOKEN_FILE)", &assertion,
                       err, errlen);
    else if (rc == 0 && s->kind == SRC_CERT)
        assertion = cert_assertion(s, url, err, errlen, &rc);
    if (rc == 0 &&
        (form_add(&form, "grant_type", "client_credentials") ||
         form_add(&form, "client_id", s->client_id) || form_add(&form, "scope", AZ_SCOPE) ||
         (s->kind == SRC_SECRET ? form_add(&form, "client_secret", s->secret)
                                : (form_add(&form, "client_assertion_type",
                                            "urn:ietf:params:oauth:client-assertion-type:jwt-"
                                            "bearer") ||
                                   form_add(&form, "client_assertion", assertion)))))
        rc = S3LECT_ENOMEM;
    if (rc == S3LECT_ENOMEM)
        snprintf(err, errlen, "out of memory");
    if (rc == 0) {
        const char *h[] = {"Content-Type: application/x-www-form-urlencoded",
                           "Accept: application/json", NULL};
        char what[400];
        snprintf(what, sizeof what, "Microsoft Entra ID at %s (tenant %s)", s->authority,
                 s->tenant);
        rc = token_call(s, "POST", url, h, form, what, abort, out, err, errlen);
        if (rc == 0 && !out->principal[0])
            snprintf(out->principal, sizeof out->principal, "appid %.64s", s->client_id);
    }
    u_wipe_free(form);
    u_wipe_free(assertion);
    free(url);
    return rc;
}

/* ---- managed identity ---- */

static int fetch_managed(const void *state, int first, const _Atomic int *abort, cred_fetched *out,
                         char *err, size_t errlen)
{
    (void)first;
    const az_src *s = state;
    char *url, *hdr = NULL, what[400];
    if (s->kind == SRC_APPSERVICE) {
        url = u_asprintf("%s%sapi-version=2019-08-01&resource=%s%s%s", s->md_url,
                         strchr(s->md_url, '?') ? "&" : "?", AZ_RESOURCE,
                         s->client_id ? "&client_id=" : "", s->client_id ? s->client_id : "");
        hdr = u_asprintf("X-IDENTITY-HEADER: %s", s->md_header);
        snprintf(what, sizeof what, "the managed identity endpoint %s (IDENTITY_ENDPOINT)",
                 s->md_url);
    } else {
        url = u_asprintf("%s/metadata/identity/oauth2/token?api-version=2018-02-01&resource=%s%s%s",
                         s->md_url, AZ_RESOURCE, s->client_id ? "&client_id=" : "",
                         s->client_id ? s->client_id : "");
        hdr = u_strdup("Metadata: true");
        snprintf(what, sizeof what, "the instance metadata service (IMDS) at %s", s->md_url);
    }
    int rc;
    if (!url || !hdr) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    } else {
        const char *h[] = {hdr, NULL};
        rc = token_call(s, "GET", url, h, NULL, what, abort, out, err, errlen);
        if (rc == S3LECT_EAUTH && strstr(err, "HTTP 400"))
            snprintf(err + strlen(err), errlen - strlen(err),
                     ": is a managed identity assigned to this VM or service%s?",
                     s->client_id ? " (and is AZURE_CLIENT_ID one of its identities)" : "");
    }
    free(url);
    u_wipe_free(hdr);
    return rc;
}

static void imds_open_failed(const char *desc, const char *last, char *err, size_t errlen)
{
    (void)desc;
    snprintf(
        err, errlen,
        "no Azure credentials found: set AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY "
        "or AZURE_STORAGE_SAS_TOKEN; or AZURE_TENANT_ID, AZURE_CLIENT_ID and "
        "AZURE_CLIENT_SECRET (or AZURE_CLIENT_CERTIFICATE_PATH); or AZURE_FEDERATED_TOKEN_FILE "
        "(AKS workload identity); or run with a managed identity (IMDS: %s)",
        last);
}

static const cred_ops client_ops = {fetch_client, src_free, NULL};
static const cred_ops managed_ops = {fetch_managed, src_free, NULL};
static const cred_ops imds_last_ops = {fetch_managed, src_free, imds_open_failed};

/* ---- resolution ---- */

static int is_loopback_url(const char *url)
{
    const char *h = strstr(url, "://");
    if (!h)
        return 0;
    h += 3;
    char host[64];
    size_t n = strcspn(h, ":/");
    if (*h == '[') {
        h++;
        n = strcspn(h, "]");
    }
    if (n == 0 || n >= sizeof host)
        return 0;
    memcpy(host, h, n);
    host[n] = '\0';
    return u_is_loopback_host(host);
}

/* A tenant id (GUID) or domain: letters, digits, '-' and '.' (it goes into the URL). */
static int tenant_ok(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > 100)
        return 0;
    for (; *t; t++)
        if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9') ||
              *t == '-' || *t == '.'))
            return 0;
    return 1;
}

int az_chain_open(const struct s3lect_config *cfg, int flags, cred_cache **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    const char *ca = cfg ? cfg->ca_file : NULL; /* NULL: the system's (http_set_ca) */
    az_src *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->timeout_ms = cfg && cfg->request_timeout > 0 ? cfg->request_timeout : AZ_TIMEOUT_MS;
    s->ca_file = ca ? u_strdup(ca) : NULL;
    const char *tenant = genv("AZURE_TENANT_ID"), *client = genv("AZURE_CLIENT_ID");
    const char *secret = genv("AZURE_CLIENT_SECRET"), *cert = genv("AZURE_CLIENT_CERTIFICATE_PATH");
    const char *fed = genv("AZURE_FEDERATED_TOKEN_FILE");
    const char *auth = genv("AZURE_AUTHORITY_HOST");
    const cred_ops *ops;
    char desc[320];
    int oom = 0;
    if (tenant && client && (secret || cert || fed)) {
        s->kind = secret ? SRC_SECRET : cert ? SRC_CERT : SRC_WORKLOAD;
        s->tenant = u_strdup(tenant);
        s->client_id = u_strdup(client);
        s->secret = secret && s->kind == SRC_SECRET ? u_strdup(secret) : NULL;
        s->path = u_strdup(s->kind == SRC_CERT ? cert : s->kind == SRC_WORKLOAD ? fed : NULL);
        s->authority = u_strdup(auth ? auth : AZ_DEFAULT_AUTHORITY);
        oom = !s->tenant || !s->client_id || (s->kind == SRC_SECRET && !s->secret) ||
              (s->kind != SRC_SECRET && !s->path) || !s->authority;
        if (!oom) {
            size_t n = strlen(s->authority);
            while (n > 0 && s->authority[n - 1] == '/')
                s->authority[--n] = '\0';
            if (strncasecmp(s->authority, "https://", 8) != 0 &&
                !(strncasecmp(s->authority, "http://", 7) == 0 && is_loopback_url(s->authority))) {
                snprintf(err, errlen,
                         "AZURE_AUTHORITY_HOST '%.200s' must be an https:// URL (http:// only on "
                         "a loopback address)",
                         s->authority);
                src_free(s);
                return S3LECT_EAUTH;
            }
        }
        if (!tenant_ok(tenant)) {
            snprintf(err, errlen,
                     "AZURE_TENANT_ID '%.80s' is not a tenant id or domain (letters, digits, "
                     "'-' and '.')",
                     tenant);
            src_free(s);
            return S3LECT_EAUTH;
        }
        snprintf(desc, sizeof desc, "%s (tenant %s, client %s)",
                 s->kind == SRC_SECRET ? "client secret in AZURE_CLIENT_SECRET"
                 : s->kind == SRC_CERT ? "client certificate AZURE_CLIENT_CERTIFICATE_PATH"
                                       : "workload identity AZURE_FEDERATED_TOKEN_FILE",
                 tenant, client);
        ops = &client_ops;
    } else if (genv("IDENTITY_ENDPOINT") && genv("IDENTITY_HEADER")) {
        s->kind = SRC_APPSERVICE;
        s->md_url = u_strdup(genv("IDENTITY_ENDPOINT"));
        s->md_header = u_strdup(genv("IDENTITY_HEADER"));
        s->client_id = client ? u_strdup(client) : NULL;
        oom = !s->md_url || !s->md_header || (client && !s->client_id);
        snprintf(desc, sizeof desc, "managed identity (App Service endpoint %s)%s%s",
                 s->md_url ? s->md_url : "", client ? ", client " : "", client ? client : "");
        ops = &managed_ops;
    } else {
        const char *host = genv("AZURE_POD_IDENTITY_AUTHORITY_HOST");
        s->kind = SRC_IMDS;
        s->last_resort = !host;
        s->md_url = u_strdup(host ? host : AZ_DEFAULT_IMDS);
        if (s->md_url) {
            size_t n = strlen(s->md_url);
            while (n > 0 && s->md_url[n - 1] == '/')
                s->md_url[--n] = '\0';
        }
        s->client_id = client ? u_strdup(client) : NULL;
        oom = !s->md_url || (client && !s->client_id);
        snprintf(desc, sizeof desc, "managed identity (IMDS at %s%s)%s%s",
                 s->md_url ? s->md_url : "", host ? ", AZURE_POD_IDENTITY_AUTHORITY_HOST" : "",
                 client ? ", client " : "", client ? client : "");
        ops = host ? &managed_ops : &imds_last_ops;
    }
    struct cred_cache *e = oom || (ca && !s->ca_file) ? NULL : cred_entry_new(ops);
    if (!e) {
        src_free(s);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    e->state = s;
    snprintf(e->desc, sizeof e->desc, "%s", desc);
    e->key = u_asprintf(
        "azure\n%d\n%s\n%s\n%s\n%s\n%s\n%s\n%lld", s->kind, s->tenant ? s->tenant : "",
        s->client_id ? s->client_id : "", s->path ? s->path : "", s->authority ? s->authority : "",
        s->md_url ? s->md_url : "", s->ca_file ? s->ca_file : "", (long long)s->timeout_ms);
    if (!e->key) {
        cred_entry_free(e);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    return cred_cache_open(e, flags & CRED_CACHE_NOWAIT, out, err, errlen);
}
