/* SPDX-License-Identifier: Apache-2.0 */
/* store_gcs.c - the Google Cloud Storage store (gs://BUCKET/OBJECT): the
 * JSON API with bearer tokens (gcp/gcp_creds.h), in the asynchronous
 * begin/finish form the S3 store has (peer mode, the connection pool and
 * max_connections work the same).
 *
 *   read:    GET  {endpoint}/storage/v1/b/BUCKET/o/OBJECT?alt=media
 *            the body; the generation (x-goog-generation) is the etag
 *   create:  POST {endpoint}/upload/storage/v1/b/BUCKET/o?uploadType=media
 *            &name=OBJECT&ifGenerationMatch=0
 *   replace: the same with ifGenerationMatch=GENERATION (the release too)
 *
 * 412 is a lost race, 404 a missing object (or bucket: fatal), 401/403 a
 * refused token (one line naming the source and the permission), 408, 429
 * and 5xx transient. The Date header is the store's clock, Last-Modified
 * (or the upload's "updated") the record's write time (docs/algorithm.md
 * "The store's clock"). Messages never hold the token.
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http_store.h"
#include "config.h"
#include "gcp_creds.h"
#include "http.h"
#include "net.h"
#include "store.h"
#include "util.h"

#define GCS_DEFAULT_TIMEOUT_MS 10000
#define GCS_DEFAULT_ENDPOINT "https://storage.googleapis.com"
#define GCS_MAX_BODY (1024 * 1024)

typedef struct gcs_store {
    st_store base;
    char *bucket;
    char *origin;        /* scheme://host[:port] */
    char *base_path;     /* the endpoint's path prefix ("" normally) */
    char *endpoint_desc; /* for messages */
    char *ca_file;
    int64_t default_timeout_ms;
    st_bearer bearer; /* chain NULL: no token (an emulator) */
} gcs_store;

/* ---- request state ---- */

struct st_xfer {
    gcs_store *s;
    char *key;
    int put;
    int create; /* put without if_match */
    char *if_match;
    int64_t timeout_ms;
    CURL *easy;
    struct curl_slist *headers; /* holds the token: wiped when freed */
    http_body data;
    char errbuf[CURL_ERROR_SIZE];
    char generation[32], date[64], last_modified[64];
};

static void xfer_free(st_xfer *x)
{
    if (!x)
        return;
    if (x->easy) {
        curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, NULL);
    }
    http_headers_free(x->headers);
    http_body_clear(&x->data);
    free(x->key);
    free(x->if_match);
    free(x);
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *ud)
{
    st_xfer *x = ud;
    size_t n = size * nmemb;
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0)
        x->generation[0] = x->date[0] = x->last_modified[0] = '\0';
    else if (n > 5 && strncasecmp(line, "Date:", 5) == 0)
        http_header_value(line, n, 5, x->date, sizeof x->date);
    else if (n > 14 && strncasecmp(line, "Last-Modified:", 14) == 0)
        http_header_value(line, n, 14, x->last_modified, sizeof x->last_modified);
    else if (n > 18 && strncasecmp(line, "x-goog-generation:", 18) == 0)
        http_header_value(line, n, 18, x->generation, sizeof x->generation);
    return n;
}

/* Percent-encodes everything but the unreserved characters (an object name
 * in a path segment or a query value). */
static char *pct(const char *s)
{
    return u_pct_encode(s, strlen(s), 0);
}

static st_xfer *gcs_begin(st_store *st, void *easy, const char *key, int put, const void *body,
                          size_t len, const char *if_match, int64_t timeout_ms, st_result *out)
{
    gcs_store *s = (gcs_store *)st;
    memset(out, 0, sizeof *out);
    if (!key || !*key) {
        st_result_setf(out, ST_FATAL, "empty object name: use gs://%s/path/to/leader.json",
                       s->bucket);
        return NULL;
    }
    st_xfer *x = calloc(1, sizeof *x);
    if (!x || !(x->key = u_strdup(key)) ||
        (put && if_match && !(x->if_match = u_strdup(if_match)))) {
        xfer_free(x);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    x->s = s;
    x->put = put;
    x->create = put && !if_match;
    x->timeout_ms = timeout_ms > 0 ? timeout_ms : s->default_timeout_ms;
    x->data.max = GCS_MAX_BODY;
    if (put && if_match) {
        /* A generation is a decimal number: anything else is not one of ours. */
        if (!*if_match || strspn(if_match, "0123456789") != strlen(if_match) ||
            strlen(if_match) > 20) {
            /* No object has it: the write cannot match. */
            st_result_setf(out, ST_PRECONDITION,
                           "gs://%s/%s: '%.40s' is not a GCS generation, so it matches no "
                           "version of the object",
                           s->bucket, key, if_match);
            xfer_free(x);
            return NULL;
        }
    }
    char *token;
    if (st_bearer_take(&s->bearer, &token, out) != 0) {
        xfer_free(x);
        return NULL;
    }
    char *eb = pct(s->bucket), *ek = pct(key), *url = NULL;
    if (eb && ek) {
        if (put)
            url = u_asprintf("%s%s/upload/storage/v1/b/%s/o?uploadType=media&name=%s"
                             "&ifGenerationMatch=%s",
                             s->origin, s->base_path, eb, ek, if_match ? if_match : "0");
        else
            url =
                u_asprintf("%s%s/storage/v1/b/%s/o/%s?alt=media", s->origin, s->base_path, eb, ek);
    }
    free(eb);
    free(ek);
    int oom = !url;
    struct curl_slist *hl = NULL;
    http_header_add(&hl, &oom, "Expect", NULL);
    http_header_add(&hl, &oom, "Accept", NULL);
    if (put)
        http_header_add(&hl, &oom, "Content-Type", "application/json");
    if (token) {
        char *auth = u_asprintf("Bearer %s", token);
        if (auth)
            http_header_add(&hl, &oom, "Authorization", auth);
        else
            oom = 1;
        u_wipe_free(auth);
    }
    u_wipe_free(token);
    x->headers = hl;
    if (oom) {
        free(url);
        xfer_free(x);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    CURL *e = easy;
    x->easy = e;
    curl_easy_reset(e);
    http_easy_common(e, url, (long)x->timeout_ms, (long)x->timeout_ms, x->errbuf, &x->data);
    free(url);
    http_easy_request(e, hl, on_header, x, put ? "POST" : "GET", body, put ? len : 0);
    http_set_ca(e, s->ca_file);
    return x;
}

/* The error's message from a JSON error body ({"error":{"message":...}}). */
static void error_detail(const http_body *b, long status, char *out, size_t n)
{
    cJSON *j = b->body ? cJSON_ParseWithLength(b->body, b->len) : NULL;
    const cJSON *e = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
    const cJSON *m = e && cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "message") : NULL;
    st_http_detail(b, status, m && cJSON_IsString(m) ? m->valuestring : NULL, out, n);
    cJSON_Delete(j);
}

static void http_failure(st_xfer *x, long status, st_result *out)
{
    gcs_store *s = x->s;
    char detail[300];
    error_detail(&x->data, status, detail, sizeof detail);
    const char *method = x->put ? "POST" : "GET";
    const char *perm = !x->put     ? "storage.objects.get"
                       : x->create ? "storage.objects.create"
                                   : "storage.objects.create and storage.objects.delete";
    char src[400];
    if (s->bearer.chain) {
        cred_cache_info in;
        cred_cache_describe(s->bearer.chain, &in);
        snprintf(src, sizeof src, "%s%s%s%s", in.source, in.principal[0] ? " (" : "", in.principal,
                 in.principal[0] ? ")" : "");
    } else {
        snprintf(src, sizeof src, "no credentials (emulator mode)");
    }
    if (status == 404) {
        int bucket = strstr(detail, "ucket") != NULL;
        if (x->put || bucket)
            st_result_setf(out, ST_FATAL,
                           "bucket '%s' does not exist at %s (%s): create it or fix the lock URL",
                           s->bucket, s->endpoint_desc, detail);
        else
            st_result_setf(out, ST_NOT_FOUND, "gs://%s/%s does not exist (%s)", s->bucket, x->key,
                           detail);
    } else if (status == 412) {
        if (x->create)
            st_result_setf(out, ST_PRECONDITION,
                           "gs://%s/%s already exists: another writer won (%s)", s->bucket, x->key,
                           detail);
        else
            st_result_setf(out, ST_PRECONDITION,
                           "gs://%s/%s changed since generation %s: another writer won (%s)",
                           s->bucket, x->key, x->if_match, detail);
    } else if (status == 401 || status == 403) {
        if (status == 401)
            st_bearer_refused(&s->bearer); /* an expired or revoked token: refresh once */
        st_result_setf(out, ST_AUTH,
                       "%s gs://%s/%s refused (%s): the credentials from %s lack %s on bucket "
                       "'%s' (grant roles/storage.objectUser or a role with "
                       "storage.objects.get, storage.objects.create and storage.objects.delete)",
                       method, s->bucket, x->key, detail, src, perm, s->bucket);
    } else if (status == 408 || status == 429 || status >= 500) {
        st_result_setf(out, ST_TRANSIENT, "%s gs://%s/%s: temporary failure at %s (%s); will retry",
                       method, s->bucket, x->key, s->endpoint_desc, detail);
    } else if (status == 409) {
        st_result_setf(out, ST_TRANSIENT,
                       "%s gs://%s/%s raced another write at %s (%s); whether it landed is "
                       "unknown: will read back",
                       method, s->bucket, x->key, s->endpoint_desc, detail);
    } else {
        st_result_setf(out, ST_FATAL, "%s gs://%s/%s failed at %s (%s)", method, s->bucket, x->key,
                       s->endpoint_desc, detail);
    }
}

static void gcs_finish(st_store *st, st_xfer *x, int curl_code, st_result *out)
{
    gcs_store *s = (gcs_store *)st;
    long status = st_http_finish_start(x->easy, out);
    CURLcode cc = (CURLcode)curl_code;
    if (http_transport_failed(cc, &x->data)) {
        char what[1200];
        snprintf(what, sizeof what, "%s gs://%s/%s", x->put ? "POST" : "GET", s->bucket, x->key);
        st_transport_failure(curl_code, x->errbuf, what, s->endpoint_desc, x->timeout_ms, out);
        if (out->outcome == ST_FATAL)
            st_result_setf(out, ST_FATAL,
                           "%s: cannot talk to %s (%s): check the endpoint and, for HTTPS, the CA "
                           "bundle (--ca-file)",
                           what, s->endpoint_desc,
                           x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc));
        xfer_free(x);
        return;
    }
    if (status < 200 || status > 299) {
        http_failure(x, status, out);
        xfer_free(x);
        return;
    }
    if (x->put) {
        /* The upload answers with the object's metadata. */
        cJSON *j = x->data.body ? cJSON_ParseWithLength(x->data.body, x->data.len) : NULL;
        const cJSON *g = j ? cJSON_GetObjectItemCaseSensitive(j, "generation") : NULL;
        if (g && cJSON_IsString(g) && strlen(g->valuestring) < sizeof x->generation)
            snprintf(x->generation, sizeof x->generation, "%s", g->valuestring);
        else if (g && cJSON_IsNumber(g) && g->valuedouble > 0)
            snprintf(x->generation, sizeof x->generation, "%.0f", g->valuedouble);
        cJSON_Delete(j);
    }
    if (!x->generation[0] || strspn(x->generation, "0123456789") != strlen(x->generation)) {
        st_result_setf(out, ST_FATAL,
                       "%s gs://%s/%s: the server at %s sent no object generation; s3lect needs "
                       "generations for conditional writes",
                       x->put ? "POST" : "GET", s->bucket, x->key, s->endpoint_desc);
    } else {
        st_result_http_ok(out, x->generation, x->put ? NULL : &x->data, x->date, x->last_modified);
    }
    xfer_free(x);
}

static const char *gcs_pool(const st_store *st)
{
    return ((const gcs_store *)st)->origin;
}

static void gcs_destroy(st_store *st)
{
    gcs_store *s = (gcs_store *)st;
    if (!s)
        return;
    st_bearer_clear(&s->bearer);
    free(s->bucket);
    free(s->origin);
    free(s->base_path);
    free(s->endpoint_desc);
    free(s->ca_file);
    free(s);
}

static const st_vtable gcs_vtable = {.name = "gcs",
                                     .destroy = gcs_destroy,
                                     .begin = gcs_begin,
                                     .finish = gcs_finish,
                                     .pool = gcs_pool};

/* The endpoint: the endpoint setting, STORAGE_EMULATOR_HOST (what Google's
 * client libraries and fake-gcs-server use; "host:port" means http), else
 * Google's. *emulator: requests may go without a token when no credentials
 * are configured (STORAGE_EMULATOR_HOST, or http:// to a loopback host). */
static int gcs_endpoint_resolve(const struct s3lect_config *cfg, char **url, int *emulator)
{
    const char *env = getenv("STORAGE_EMULATOR_HOST");
    *emulator = 0;
    if (cfg->endpoint && *cfg->endpoint) {
        *url = u_strdup(cfg->endpoint);
    } else if (env && *env) {
        *url = strstr(env, "://") ? u_strdup(env) : u_asprintf("http://%s", env);
        *emulator = 1;
    } else {
        *url = u_strdup(GCS_DEFAULT_ENDPOINT);
    }
    return *url ? 0 : S3LECT_ENOMEM;
}

int st_gcs_emulator(const struct s3lect_config *cfg, int *emulator, char *err, size_t errlen)
{
    char *url = NULL;
    st_endpoint ep = {0};
    int rc = gcs_endpoint_resolve(cfg, &url, emulator);
    if (rc)
        snprintf(err, errlen, "out of memory");
    else
        rc = st_endpoint_parse(url, "GCS endpoint", &ep, err, errlen);
    if (!rc && !ep.https && u_is_loopback_host(ep.host))
        *emulator = 1;
    st_endpoint_clear(&ep);
    free(url);
    return rc;
}

int st_gcs_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out, char *err,
                size_t errlen)
{
    *out = NULL;
    int rc = http_global_init(err, errlen);
    if (rc)
        return rc;
    gcs_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->base.vt = &gcs_vtable;
    s->default_timeout_ms =
        cfg->request_timeout > 0 ? cfg->request_timeout : GCS_DEFAULT_TIMEOUT_MS;
    char *url = NULL;
    int emulator = 0;
    st_endpoint ep = {0};
    if (!(s->bucket = u_strdup(loc->bucket)) ||
        (cfg->ca_file && !(s->ca_file = u_strdup(cfg->ca_file))) ||
        gcs_endpoint_resolve(cfg, &url, &emulator) != 0) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    }
    if (!rc)
        rc = st_endpoint_parse(url, "GCS endpoint", &ep, err, errlen);
    if (!rc) {
        const char *scheme = ep.https ? "https" : "http";
        s->origin = u_asprintf("%s://%s", scheme, ep.authority);
        s->base_path = u_strdup(ep.base_path);
        s->endpoint_desc = strcmp(url, GCS_DEFAULT_ENDPOINT) == 0
                               ? u_strdup("Google Cloud Storage")
                               : u_asprintf("%s://%s%s", scheme, ep.authority, ep.base_path);
        if (!s->origin || !s->base_path || !s->endpoint_desc) {
            snprintf(err, errlen, "out of memory");
            rc = S3LECT_ENOMEM;
        }
    }
    /* Fail early, with a message saying what to set, when there are no
     * credentials; an emulator may go without. */
    if (!rc)
        rc = st_gcs_emulator(cfg, &emulator, err, errlen);
    if (!rc)
        rc = gcp_chain_open(cfg, emulator ? GCP_CHAIN_OPTIONAL : 0, &s->bearer.chain, err, errlen);
    st_endpoint_clear(&ep);
    free(url);
    if (rc) {
        gcs_destroy(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

/* GCS bucket names: 3-63 characters (up to 222 with dots) of a-z, 0-9, '-',
 * '_' and '.', starting and ending with a letter or digit. */
static int check_bucket(const char *url, const char *b, size_t bl, char *err, size_t errlen)
{
    for (size_t i = 0; i < bl; i++) {
        char c = b[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
              c == '_')) {
            snprintf(err, errlen,
                     "lock URL '%.200s': the bucket name has an invalid character; GCS bucket "
                     "names use only a-z, 0-9, '-', '_' and '.'",
                     url);
            return S3LECT_EINVAL;
        }
    }
    size_t max = memchr(b, '.', bl) ? 222 : 63;
    if (bl < 3 || bl > max) {
        snprintf(err, errlen,
                 "lock URL '%.200s': the bucket name is %zu characters long; GCS bucket names "
                 "have 3 to 63 (222 with dots)",
                 url, bl);
        return S3LECT_EINVAL;
    }
    int alnum = 1;
    for (size_t i = 0; i < bl; i += bl - 1) {
        char c = b[i];
        alnum &= (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (bl == 1)
            break;
    }
    if (!alnum) {
        snprintf(err, errlen,
                 "lock URL '%.200s': GCS bucket names start and end with a letter or digit", url);
        return S3LECT_EINVAL;
    }
    return 0;
}

/* Object names: 1-1024 bytes of UTF-8 without control characters; for a
 * lock no empty, "." or ".." segments. */
static int check_object(const char *url, const char *key, char *err, size_t errlen)
{
    size_t n = strlen(key);
    if (n > 1024) {
        snprintf(err, errlen, "lock URL: the object name is %zu bytes long; GCS's limit is 1024",
                 n);
        return S3LECT_EINVAL;
    }
    for (const unsigned char *p = (const unsigned char *)key; *p;) {
        if (st_is_control(p)) {
            snprintf(err, errlen,
                     "lock URL: the object name has a control character (byte 0x%02x at offset "
                     "%zu); remove it",
                     *p, (size_t)(p - (const unsigned char *)key));
            return S3LECT_EINVAL;
        }
        size_t l = st_utf8_len(p);
        if (!l) {
            snprintf(err, errlen, "lock URL: the object name is not valid UTF-8 (at offset %zu)",
                     (size_t)(p - (const unsigned char *)key));
            return S3LECT_EINVAL;
        }
        p += l;
    }
    return st_check_segments(url, "object name", key, n, err, errlen);
}

int st_gcs_parse(const char *url, const char *b, st_location *out, char *err, size_t errlen)
{
    return st_parse_bucket_object(url, b, "gs://bucket/object", "an object", check_bucket,
                                  check_object, out, err, errlen);
}

int st_gcs_canonical(const st_location *loc, char **out)
{
    return st_canon_add(out, "gs://", loc->bucket, 0) || st_canon_add(out, "/", loc->key, 0);
}
