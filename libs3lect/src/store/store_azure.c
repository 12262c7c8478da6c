/* SPDX-License-Identifier: Apache-2.0 */
/* store_azure.c - the Azure Blob Storage store: Get Blob and a conditional
 * Put Blob (If-None-Match: * to create, If-Match: ETAG to replace), signed
 * with Shared Key or carrying a SAS token (azure/az_auth.h), either
 * blocking on the store's own handle or prepared on a handle of the
 * runtime's shared libcurl multi (begin/finish), like the S3 store.
 *
 * Lock URLs: az://ACCOUNT/CONTAINER/BLOB, or the blob's own URL
 * https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB (any host
 * ACCOUNT.blob.core.SUFFIX: the sovereign clouds' blob.core.usgovcloudapi.net
 * and blob.core.chinacloudapi.cn; an https URL of another host is refused,
 * so the scheme names nothing else).
 *
 * Outcomes: 2xx OK; 412 ConditionNotMet and 409 BlobAlreadyExists (a create
 * that lost the race) PRECONDITION; 404 BlobNotFound NOT_FOUND; 404
 * ContainerNotFound and other 404s FATAL; 401/403 AUTH; 408, 429, 5xx
 * TRANSIENT; a lease held on the blob (LeaseIdMissing, LeaseAlreadyPresent,
 * under 409 or 412) or an archived blob FATAL (s3lect takes no leases:
 * someone else does); other 409s TRANSIENT (read back); other 4xx and 3xx
 * FATAL. Messages never contain a key, a SAS or a signature.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http_store.h"
#include "az_auth.h"
#include "az_creds.h"
#include "config.h"
#include "http.h"
#include "store.h"
#include "util.h"

#define AZ_DEFAULT_TIMEOUT_MS 10000
#define AZ_VERSION "2021-08-06"
#define AZ_MAX_BODY (1024 * 1024)

typedef struct az_store {
    st_store base;
    char *account, *container;
    char *origin;        /* "scheme://host[:port]" */
    char *base_path;     /* the endpoint's path: "" or "/devstoreaccount1" (Azurite) */
    char *endpoint_desc; /* for messages */
    char *ca_file;
    int64_t default_timeout_ms;
    az_creds creds;
    /* Entra ID, when no explicit credential is set: the shared token cache
     * entry (bearer.chain NULL otherwise). */
    st_bearer bearer;
    char source[320];
} az_store;

/* ---- one request ---- */

typedef struct az_response {
    http_body data;
    char etag[512];
    char date[64], last_modified[64];
    char error_code[128], request_id[128];
} az_response;

struct st_xfer {
    az_store *s;
    char *key;
    const char *method;
    const char *if_match; /* PUT only; NULL: If-None-Match: * */
    char *if_match_copy;
    int put;
    int64_t timeout_ms;
    CURL *easy;
    struct curl_slist *headers;
    az_response resp;
    char errbuf[CURL_ERROR_SIZE];
};

static size_t on_header(char *line, size_t size, size_t nmemb, void *ud)
{
    az_response *r = ud;
    size_t n = size * nmemb;
    static const struct {
        const char *name;
        size_t off, cap;
    } keep[] = {
        {"ETag:", offsetof(az_response, etag), sizeof r->etag},
        {"Date:", offsetof(az_response, date), sizeof r->date},
        {"Last-Modified:", offsetof(az_response, last_modified), sizeof r->last_modified},
        {"x-ms-error-code:", offsetof(az_response, error_code), sizeof r->error_code},
        {"x-ms-request-id:", offsetof(az_response, request_id), sizeof r->request_id},
    };
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
            ((char *)r + keep[i].off)[0] = '\0';
        return n;
    }
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        size_t nl = strlen(keep[i].name);
        if (n > nl && strncasecmp(line, keep[i].name, nl) == 0)
            http_header_value(line, n, nl, (char *)r + keep[i].off, keep[i].cap);
    }
    return n;
}

static void xfer_free(st_xfer *x)
{
    if (!x)
        return;
    if (x->easy) {
        curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, NULL);
    }
    http_headers_free(x->headers);
    http_body_clear(&x->resp.data);
    free(x->key);
    free(x->if_match_copy);
    free(x);
}

/* The blob's lock URL for messages. */
#define AZ_FMT "az://%s/%s/%s"
#define AZ_ARGS(s, key) (s)->account, (s)->container, (key)

static st_xfer *az_begin(st_store *st, void *easy, const char *key, int put, const void *body,
                         size_t len, const char *if_match, int64_t timeout_ms, st_result *out)
{
    az_store *s = (az_store *)st;
    memset(out, 0, sizeof *out);
    if (!key || !*key) {
        st_result_setf(out, ST_FATAL, "empty blob name: use az://%s/%s/path/to/leader.json",
                       s->account, s->container);
        return NULL;
    }
    st_xfer *x = calloc(1, sizeof *x);
    if (!x || !(x->key = u_strdup(key)) ||
        (put && if_match && !(x->if_match_copy = u_strdup(if_match)))) {
        if (x)
            xfer_free(x);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    x->s = s;
    x->put = put;
    x->method = put ? "PUT" : "GET";
    x->if_match = put ? x->if_match_copy : NULL;
    x->timeout_ms = timeout_ms > 0 ? timeout_ms : s->default_timeout_ms;

    char *eblob = u_pct_encode(key, strlen(key), 1);
    char *path = eblob ? u_asprintf("%s/%s/%s", s->base_path, s->container, eblob) : NULL;
    free(eblob);
    char date[32], clen[32];
    az_http_date((int64_t)time(NULL), date);
    snprintf(clen, sizeof clen, "%zu", put ? len : (size_t)0);
    az_header h[8];
    size_t nh = 0;
    h[nh++] = (az_header){"x-ms-date", date};
    h[nh++] = (az_header){"x-ms-version", AZ_VERSION};
    if (put) {
        h[nh++] = (az_header){"Content-Type", "application/json"};
        h[nh++] = (az_header){"Content-Length", clen};
        h[nh++] = (az_header){"x-ms-blob-type", "BlockBlob"};
        if (x->if_match)
            h[nh++] = (az_header){"If-Match", x->if_match};
        else
            h[nh++] = (az_header){"If-None-Match", "*"};
    }
    char *bearer = NULL;
    if (st_bearer_take(&s->bearer, &bearer, out) != 0) {
        free(path);
        xfer_free(x);
        return NULL;
    }
    struct curl_slist *hl = NULL;
    int oom = !path;
    if (bearer) {
        char *auth = u_asprintf("Bearer %s", bearer);
        if (auth)
            http_header_add(&hl, &oom, "Authorization", auth);
        else
            oom = 1;
        u_wipe_free(auth);
        u_wipe_free(bearer);
    }
    for (size_t i = 0; i < nh; i++)
        if (strcmp(h[i].name, "Content-Length") != 0) /* libcurl sends it */
            http_header_add(&hl, &oom, h[i].name, h[i].value);
    if (!oom && s->creds.kind == AZ_CRED_SHARED_KEY) {
        char *sts = az_sharedkey_string(x->method, h, nh, s->account, path, NULL);
        char *auth =
            sts ? az_sharedkey_authorization(s->account, s->creds.key, s->creds.key_len, sts)
                : NULL;
        if (auth)
            http_header_add(&hl, &oom, "Authorization", auth);
        else
            oom = 1;
        free(sts);
        u_wipe_free(auth);
    }
    http_header_add(&hl, &oom, "Expect", NULL);
    http_header_add(&hl, &oom, "Accept", NULL);
    int sas = s->creds.kind == AZ_CRED_SAS;
    char *url =
        path ? u_asprintf("%s%s%s%s", s->origin, path, sas ? "?" : "", sas ? s->creds.sas : "")
             : NULL;
    free(path);
    x->headers = hl;
    if (oom || !url) {
        if (url) {
            memset(url, 0, strlen(url));
            free(url);
        }
        xfer_free(x);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    CURL *e = easy;
    x->easy = e;
    curl_easy_reset(e);
    x->resp.data.max = AZ_MAX_BODY;
    http_easy_common(e, url, (long)x->timeout_ms, (long)x->timeout_ms, x->errbuf, &x->resp.data);
    memset(url, 0, strlen(url)); /* the SAS */
    free(url);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* the path is signed as sent */
    http_easy_request(e, hl, on_header, &x->resp, x->method, body, put ? len : 0);
    http_set_ca(e, s->ca_file);
    return x;
}

static int classify(long status, const az_response *r);

/* The <Message> of an Azure error body (first line only), or "". */
static void error_message(const az_response *r, char *dst, size_t cap)
{
    dst[0] = '\0';
    const char *b = r->data.body;
    const char *m = b ? strstr(b, "<Message>") : NULL;
    if (!m)
        return;
    m += 9;
    size_t n = strcspn(m, "<\r\n");
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, m, n);
    dst[n] = '\0';
}

static int code_is(const az_response *r, const char *code)
{
    return strcmp(r->error_code, code) == 0;
}

int st_azure_outcome(long status, const char *error_code)
{
    az_response r;
    snprintf(r.error_code, sizeof r.error_code, "%s", error_code ? error_code : "");
    return classify(status, &r);
}

static int classify(long status, const az_response *r)
{
    if (status >= 200 && status < 300)
        return ST_OK;
    /* A lease someone else holds on the blob (a backup or sync tool, `az
     * storage blob lease acquire`) refuses every write, under 412 as well
     * as 409 (LeaseIdMissing): not a lost race but an outage until it is
     * broken, said as such (issue 38). s3lect itself takes no leases. */
    if ((status == 409 || status == 412) &&
        (code_is(r, "LeaseIdMissing") || code_is(r, "LeaseAlreadyPresent") ||
         code_is(r, "LeaseIdMismatchWithBlobOperation") || code_is(r, "LeaseLost") ||
         code_is(r, "LeaseNotPresentWithBlobOperation")))
        return ST_FATAL;
    if (status == 412)
        return ST_PRECONDITION;
    if (status == 409) {
        if (code_is(r, "BlobAlreadyExists"))
            return ST_PRECONDITION; /* If-None-Match: * lost the race */
        if (code_is(r, "BlobArchived") || code_is(r, "BlobBeingRehydrated") ||
            code_is(r, "BlobImmutableDueToPolicy"))
            return ST_FATAL;
        return ST_TRANSIENT;
    }
    if (status == 404)
        return (code_is(r, "BlobNotFound") || !r->error_code[0]) ? ST_NOT_FOUND : ST_FATAL;
    if (status == 401 || status == 403)
        return ST_AUTH;
    if (status == 408 || status == 429 || status >= 500)
        return ST_TRANSIENT;
    return ST_FATAL;
}

static void set_http_failure(const st_xfer *x, long status, int outcome, st_result *out)
{
    const az_store *s = x->s;
    const az_response *r = &x->resp;
    char msg[300];
    error_message(r, msg, sizeof msg);
    char detail[600];
    snprintf(detail, sizeof detail, "HTTP %ld%s%s%s%s%s%s%s", status, r->error_code[0] ? " " : "",
             r->error_code, msg[0] ? ": " : "", msg, r->request_id[0] ? " (request id " : "",
             r->request_id, r->request_id[0] ? ")" : "");
    const char *src = s->bearer.chain ? s->source : s->creds.source;
    switch (outcome) {
    case ST_NOT_FOUND:
        st_result_setf(out, outcome, AZ_FMT " does not exist (%s)", AZ_ARGS(s, x->key), detail);
        break;
    case ST_PRECONDITION:
        if (x->if_match)
            st_result_setf(out, outcome, AZ_FMT " changed since etag %s: another writer won (%s)",
                           AZ_ARGS(s, x->key), x->if_match, detail);
        else
            st_result_setf(out, outcome, AZ_FMT " already exists: another writer won (%s)",
                           AZ_ARGS(s, x->key), detail);
        break;
    case ST_AUTH:
        if (s->creds.kind == AZ_CRED_SHARED_KEY &&
            (code_is(r, "AuthenticationFailed") || code_is(r, "AuthorizationFailure")))
            /* Azure says AuthenticationFailed for a wrong key, Azurite
             * AuthorizationFailure (which Azure also uses for its firewall). */
            st_result_setf(out, outcome,
                           "Azure Storage rejected the Shared Key signature of %s " AZ_FMT
                           " (%s): the key from %s is not a key of storage account '%s' (or the "
                           "account's network rules refuse this client); fix the key (az "
                           "storage account keys list)",
                           x->method, AZ_ARGS(s, x->key), detail, src, s->account);
        else if (s->creds.kind == AZ_CRED_SAS &&
                 (code_is(r, "AuthenticationFailed") || code_is(r, "AuthorizationFailure")))
            st_result_setf(out, outcome,
                           "the SAS token from %s was refused for %s " AZ_FMT
                           " (%s): it is expired, malformed or for another account or container "
                           "(or the account's network rules refuse this client); make a new one "
                           "with read, create and write permission",
                           src, x->method, AZ_ARGS(s, x->key), detail);
        else
            st_result_setf(out, outcome,
                           "access denied: the credentials from %s may not %s " AZ_FMT
                           " (%s); grant the Storage Blob Data Contributor role on container "
                           "'%s' (or a role with the data actions "
                           "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read "
                           "and .../write), or, for a SAS, the r, c and w permissions",
                           src, x->put ? "write" : "read", AZ_ARGS(s, x->key), detail,
                           s->container);
        break;
    case ST_FATAL:
        if (code_is(r, "ContainerNotFound"))
            st_result_setf(out, outcome,
                           "container '%s' does not exist in storage account '%s' at %s (%s): "
                           "create it (az storage container create --name %s) or fix the lock URL",
                           s->container, s->account, s->endpoint_desc, detail, s->container);
        else if (code_is(r, "LeaseIdMissing") || code_is(r, "LeaseAlreadyPresent") ||
                 code_is(r, "LeaseIdMismatchWithBlobOperation") || code_is(r, "LeaseLost") ||
                 code_is(r, "LeaseNotPresentWithBlobOperation"))
            st_result_setf(out, outcome,
                           "%s " AZ_FMT " was refused at %s (%s): another client holds a blob "
                           "lease on the lock blob (a backup or sync tool, or 'az storage blob "
                           "lease acquire'); s3lect takes no leases, and no node can write the "
                           "lock until it is broken: az storage blob lease break --account-name "
                           "%s --container-name %s --blob-name %s, and keep that tool away from "
                           "this blob. The lock is led again within a lease of the break",
                           x->method, AZ_ARGS(s, x->key), s->endpoint_desc, detail, s->account,
                           s->container, x->key);
        else if (status == 409)
            st_result_setf(out, outcome,
                           "%s " AZ_FMT " was refused at %s (%s): the blob is archived "
                           "or immutable: use another blob",
                           x->method, AZ_ARGS(s, x->key), s->endpoint_desc, detail);
        else if (status == 404)
            st_result_setf(out, outcome,
                           "%s " AZ_FMT " failed at %s (%s): check the account and the "
                           "endpoint",
                           x->method, AZ_ARGS(s, x->key), s->endpoint_desc, detail);
        else
            st_result_setf(out, outcome, "%s " AZ_FMT " failed at %s (%s)", x->method,
                           AZ_ARGS(s, x->key), s->endpoint_desc, detail);
        break;
    default:
        if (status == 409)
            st_result_setf(out, outcome,
                           "%s " AZ_FMT " conflicted with another operation at %s (%s); "
                           "whether it landed is unknown: will read back",
                           x->method, AZ_ARGS(s, x->key), s->endpoint_desc, detail);
        else
            st_result_setf(out, outcome, "%s " AZ_FMT ": temporary failure at %s (%s); will retry",
                           x->method, AZ_ARGS(s, x->key), s->endpoint_desc, detail);
        break;
    }
}

static void az_finish(st_store *st, st_xfer *x, int curl_code, st_result *out)
{
    az_store *s = (az_store *)st;
    CURLcode cc = (CURLcode)curl_code;
    long status = st_http_finish_start(x->easy, out);
    az_response *r = &x->resp;
    if (http_transport_failed(cc, &r->data)) {
        char what[1200];
        snprintf(what, sizeof what, "%s " AZ_FMT, x->method, AZ_ARGS(s, x->key));
        st_transport_failure(cc, x->errbuf, what, s->endpoint_desc, x->timeout_ms, out);
    } else {
        int outcome = classify(status, r);
        if (outcome != ST_OK) {
            set_http_failure(x, status, outcome, out);
            if (outcome == ST_AUTH && s->bearer.chain)
                st_bearer_refused(&s->bearer);
        } else if (!r->etag[0]) {
            st_result_setf(out, ST_FATAL,
                           "%s " AZ_FMT ": the server at %s sent no ETag; s3lect needs ETags for "
                           "conditional writes",
                           x->method, AZ_ARGS(s, x->key), s->endpoint_desc);
        } else {
            st_result_http_ok(out, r->etag, x->put ? NULL : &r->data, r->date, r->last_modified);
        }
    }
    xfer_free(x);
}

static const char *az_pool(const st_store *st)
{
    return ((const az_store *)st)->origin;
}

static void az_destroy(st_store *st)
{
    az_store *s = (az_store *)st;
    if (!s)
        return;
    free(s->account);
    free(s->container);
    free(s->origin);
    free(s->base_path);
    free(s->endpoint_desc);
    free(s->ca_file);
    az_creds_clear(&s->creds);
    st_bearer_clear(&s->bearer);
    free(s);
}

static const st_vtable az_vtable = {.name = "azure",
                                    .destroy = az_destroy,
                                    .begin = az_begin,
                                    .finish = az_finish,
                                    .pool = az_pool};

static int is_local_host(const char *host)
{
    unsigned char buf[16];
    return strcmp(host, "localhost") == 0 || inet_pton(AF_INET, host, buf) == 1 ||
           inet_pton(AF_INET6, host, buf) == 1;
}

/* origin, base_path and endpoint_desc from the blob endpoint url (what names
 * its setting). An endpoint without a path on an IP address or localhost
 * is an emulator's: the account goes into the path (Azurite's path-style). */
static int set_endpoint(az_store *s, const char *url, const char *what, char *err, size_t errlen)
{
    st_endpoint ep;
    int rc = st_endpoint_parse(url, what, &ep, err, errlen);
    if (rc)
        return rc;
    const char *scheme = ep.https ? "https" : "http";
    s->origin = u_asprintf("%s://%s", scheme, ep.authority);
    if (!ep.base_path[0] && is_local_host(ep.host))
        s->base_path = u_asprintf("/%s", s->account);
    else
        s->base_path = u_strdup(ep.base_path);
    s->endpoint_desc =
        s->base_path ? u_asprintf("%s%s", s->origin ? s->origin : "", s->base_path) : NULL;
    st_endpoint_clear(&ep);
    if (!s->origin || !s->base_path || !s->endpoint_desc) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    return 0;
}

int st_azure_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                  char *err, size_t errlen)
{
    *out = NULL;
    int rc = http_global_init(err, errlen);
    if (rc)
        return rc;
    az_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->base.vt = &az_vtable;
    s->default_timeout_ms = cfg->request_timeout > 0 ? cfg->request_timeout : AZ_DEFAULT_TIMEOUT_MS;
    s->account = u_strdup(loc->bucket);
    s->container = u_strdup(loc->opt1);
    s->ca_file = u_strdup(cfg->ca_file);
    if (!s->account || !s->container || (cfg->ca_file && !s->ca_file)) {
        az_destroy(&s->base);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    rc = az_creds_resolve(s->account, &s->creds, err, errlen);
    if (rc == 0 && s->creds.kind == AZ_CRED_NONE) {
        /* Entra ID: the Azure SDKs' default chain (az_creds.h). */
        rc = az_chain_open(cfg, 0, &s->bearer.chain, err, errlen);
        if (rc == 0) {
            cred_cache_info info;
            cred_cache_describe(s->bearer.chain, &info);
            snprintf(s->source, sizeof s->source, "%s", info.source);
        }
    }
    if (rc == 0) {
        if (cfg->endpoint) {
            rc = set_endpoint(s, cfg->endpoint, "Azure blob endpoint (--endpoint)", err, errlen);
        } else if (s->creds.blob_endpoint) {
            rc = set_endpoint(s, s->creds.blob_endpoint,
                              "the blob endpoint of AZURE_STORAGE_CONNECTION_STRING", err, errlen);
        } else {
            char *url = u_asprintf("https://%s.blob.%s", s->account,
                                   loc->opt2 ? loc->opt2 : "core.windows.net");
            rc = url ? set_endpoint(s, url, "Azure blob endpoint", err, errlen) : S3LECT_ENOMEM;
            if (!url)
                snprintf(err, errlen, "out of memory");
            free(url);
        }
    }
    if (rc) {
        az_destroy(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

/* ---- lock URLs ---- */

/* Storage account names: 3-24 lower-case letters and digits. */
static int check_account(const char *url, const char *a, size_t n, char *err, size_t errlen)
{
    int ok = n >= 3 && n <= 24;
    for (size_t i = 0; ok && i < n; i++)
        ok = (a[i] >= 'a' && a[i] <= 'z') || (a[i] >= '0' && a[i] <= '9');
    if (!ok)
        snprintf(err, errlen,
                 "lock URL '%.200s': '%.*s' is not a storage account name (3 to 24 lower-case "
                 "letters and digits): use az://ACCOUNT/CONTAINER/BLOB",
                 url, (int)(n < 40 ? n : 40), a);
    return ok ? 0 : S3LECT_EINVAL;
}

/* Container names: 3-63 of a-z, 0-9 and '-', starting and ending with a
 * letter or digit, no "--". */
static int check_container(const char *url, const char *c, size_t n, char *err, size_t errlen)
{
    int ok = n >= 3 && n <= 63 && c[0] != '-' && c[n - 1] != '-';
    for (size_t i = 0; ok && i < n; i++)
        ok = (c[i] >= 'a' && c[i] <= 'z') || (c[i] >= '0' && c[i] <= '9') ||
             (c[i] == '-' && c[i + 1] != '-');
    if (!ok)
        snprintf(err, errlen,
                 "lock URL '%.200s': '%.*s' is not a container name (3 to 63 of a-z, 0-9 and "
                 "'-', starting and ending with a letter or digit, no '--')",
                 url, (int)(n < 70 ? n : 70), c);
    return ok ? 0 : S3LECT_EINVAL;
}

#define AZ_BLOB_MAX 1024

static int check_blob(const char *url, const char *b, char *err, size_t errlen)
{
    size_t n = strlen(b);
    if (n > AZ_BLOB_MAX) {
        snprintf(err, errlen, "lock URL: the blob name is %zu bytes long; Azure's limit is %d", n,
                 AZ_BLOB_MAX);
        return S3LECT_EINVAL;
    }
    for (const unsigned char *p = (const unsigned char *)b; *p;) {
        size_t l = st_is_control(p) ? 0 : st_utf8_len(p);
        if (!l) {
            snprintf(err, errlen,
                     "lock URL: the blob name has a control character or invalid UTF-8 at "
                     "offset %zu",
                     (size_t)(p - (const unsigned char *)b));
            return S3LECT_EINVAL;
        }
        p += l;
    }
    return st_check_segments(url, "blob name", b, n, err, errlen);
}

/* ACCOUNT/CONTAINER/BLOB of p (after the scheme), the account already
 * split off (a, an) by the caller. */
static int parse_rest(const char *url, const char *a, size_t an, const char *cb, st_location *out,
                      const char *usage, char *err, size_t errlen)
{
    if (strpbrk(url, "?#")) {
        /* Not quoted past the '?': it may be a SAS token's signature. */
        snprintf(err, errlen,
                 "lock URL '%.*s...' has a query or fragment ('?' or '#'); lock URLs take neither "
                 "(give a SAS token in AZURE_STORAGE_SAS_TOKEN): %s",
                 (int)strcspn(url, "?#") < 200 ? (int)strcspn(url, "?#") : 200, url, usage);
        return S3LECT_EINVAL;
    }
    const char *slash = cb ? strchr(cb, '/') : NULL;
    if (!cb || !slash || slash == cb || !slash[1]) {
        snprintf(err, errlen, "lock URL '%.200s' needs a container and a blob: %s", url, usage);
        return S3LECT_EINVAL;
    }
    size_t cn = (size_t)(slash - cb);
    int rc = check_account(url, a, an, err, errlen);
    if (!rc)
        rc = check_container(url, cb, cn, err, errlen);
    if (!rc)
        rc = check_blob(url, slash + 1, err, errlen);
    if (rc)
        return rc;
    out->bucket = u_asprintf("%.*s", (int)an, a);
    out->opt1 = u_asprintf("%.*s", (int)cn, cb);
    out->key = u_strdup(slash + 1);
    if (!out->bucket || !out->opt1 || !out->key) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    return 0;
}

int st_azure_parse(const char *url, const char *rest, st_location *out, char *err, size_t errlen)
{
    static const char usage[] = "az://ACCOUNT/CONTAINER/path/to/leader.json";
    const char *slash = strchr(rest, '/');
    if (!slash || slash == rest) {
        snprintf(err, errlen, "lock URL '%.200s' needs an account, a container and a blob: %s", url,
                 usage);
        return S3LECT_EINVAL;
    }
    return parse_rest(url, rest, (size_t)(slash - rest), slash + 1, out, usage, err, errlen);
}

/* https://ACCOUNT.blob.core.SUFFIX/CONTAINER/BLOB: only Azure blob URLs. */
int st_azure_https_parse(const char *url, const char *rest, st_location *out, char *err,
                         size_t errlen)
{
    static const char usage[] = "https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB";
    size_t hn = strcspn(rest, "/?#");
    const char *dot = memchr(rest, '.', hn);
    const char *blob = dot ? dot + 1 : NULL;
    size_t suffix_at = 0;
    if (blob && (size_t)(rest + hn - blob) > 10 && strncasecmp(blob, "blob.core.", 10) == 0)
        suffix_at = (size_t)(blob + 5 - rest);
    if (!suffix_at || memchr(rest, ':', hn) || memchr(rest, '@', hn)) {
        snprintf(err, errlen,
                 "lock URL '%.*s': an https lock URL names an Azure blob, %s (or %s); for "
                 "another server give it with --endpoint and use az://ACCOUNT/CONTAINER/BLOB",
                 (int)strcspn(url, "?#") < 200 ? (int)strcspn(url, "?#") : 200, url, usage,
                 "an ACCOUNT.blob.core.usgovcloudapi.net or .chinacloudapi.cn host");
        return S3LECT_EINVAL;
    }
    int rc = parse_rest(url, rest, (size_t)(dot - rest), rest[hn] == '/' ? rest + hn + 1 : NULL,
                        out, usage, err, errlen);
    if (rc)
        return rc;
    out->opt2 = u_asprintf("%.*s", (int)(hn - suffix_at), rest + suffix_at);
    if (!out->opt2) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    for (char *c = out->opt2; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    if (strcmp(out->opt2, "core.windows.net") == 0) {
        free(out->opt2);
        out->opt2 = NULL;
    }
    return 0;
}

int st_azure_canonical(const st_location *loc, char **out)
{
    if (loc->opt2)
        return st_canon_add(out, "https://", loc->bucket, 0) ||
               st_canon_add(out, ".blob.", loc->opt2, 0) || st_canon_add(out, "/", loc->opt1, 0) ||
               st_canon_add(out, "/", loc->key, 0);
    return st_canon_add(out, "az://", loc->bucket, 0) || st_canon_add(out, "/", loc->opt1, 0) ||
           st_canon_add(out, "/", loc->key, 0);
}
