/* SPDX-License-Identifier: Apache-2.0 */
/* store_s3.c - the S3 store: SigV4-signed GET and conditional PUT (DESIGN §5),
 * either blocking on the store's own keep-alive handle (the CLI) or prepared
 * on a handle of the runtime's shared libcurl multi (begin/finish).
 *
 * Outcomes follow s3_classify() (s3_xml.h). Messages say what failed, on
 * which bucket and key, which IAM action was refused and what to do; they
 * never contain the secret, the session token or a signature.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "aws_http.h"
#include "config.h"
#include "crypto.h"
#include "s3_xml.h"
#include "sigv4.h"
#include "store.h"
#include "util.h"

#define S3_DEFAULT_TIMEOUT_MS 10000

typedef struct s3_store {
    st_store base;
    /* Endpoint, region, credentials, the blocking calls' handle. v.host has
     * "bucket." in front when virtual-hosted; v.base_path is the endpoint's
     * path plus "/bucket" when path-style. */
    ah_service v;
    char *bucket;
} s3_store;

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int is_ip_literal(const char *host)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* Can the bucket be the first label of a host name under TLS? (No dots:
 * they break the wildcard certificate.) */
static int bucket_fits_host(const char *b, int https)
{
    size_t n = strlen(b);
    if (n < 3 || n > 63 || b[0] == '-' || b[n - 1] == '-')
        return 0;
    for (const char *c = b; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' ||
              (*c == '.' && !https)))
            return 0;
    return 1;
}

static int is_aws_host(const char *host)
{
    return ends_with(host, ".amazonaws.com") || ends_with(host, ".amazonaws.com.cn");
}

/* ---- messages ---- */

typedef struct req_ctx {
    s3_store *s;
    const char *method; /* "GET" / "PUT" */
    const char *action; /* "s3:GetObject" / "s3:PutObject" */
    const char *key;
    const char *if_match; /* PUT only; NULL means If-None-Match: * */
    int64_t timeout_ms;
} req_ctx;

static void set_http_failure(const req_ctx *c, long status, const ah_response *resp,
                             const s3_error_body *xe, int outcome, st_result *out)
{
    s3_store *s = c->s;
    const char *code = xe->code[0] ? xe->code : "";
    char detail[400];
    snprintf(detail, sizeof detail, "HTTP %ld%s%s%s%s%s%s%s", status, code[0] ? " " : "", code,
             xe->message[0] ? ": " : "", xe->message, xe->request_id[0] ? " (request id " : "",
             xe->request_id, xe->request_id[0] ? ")" : "");
    switch (outcome) {
    case ST_NOT_FOUND:
        st_result_setf(out, outcome, "s3://%s/%s does not exist (%s)", s->bucket, c->key, detail);
        break;
    case ST_PRECONDITION:
        if (c->if_match)
            st_result_setf(out, outcome,
                           "s3://%s/%s changed since etag %s: another writer won (%s)", s->bucket,
                           c->key, c->if_match, detail);
        else
            st_result_setf(out, outcome, "s3://%s/%s already exists: another writer won (%s)",
                           s->bucket, c->key, detail);
        break;
    case ST_AUTH:
        if (strcmp(code, "SignatureDoesNotMatch") == 0)
            st_result_setf(out, outcome,
                           "S3 rejected the signature of %s on bucket '%s' (%s): the secret "
                           "access key from %s does not belong to access key id %s; fix the "
                           "secret",
                           c->action, s->bucket, detail, s->v.signer.creds.source,
                           s->v.signer.creds.access_key_id ? s->v.signer.creds.access_key_id : "?");
        else if (strcmp(code, "InvalidAccessKeyId") == 0)
            st_result_setf(out, outcome,
                           "S3 does not know access key id %s from %s (%s): use credentials of "
                           "an account that owns bucket '%s'",
                           s->v.signer.creds.access_key_id ? s->v.signer.creds.access_key_id : "?",
                           s->v.signer.creds.source, detail, s->bucket);
        else if (strcmp(code, "ExpiredToken") == 0 || strcmp(code, "InvalidToken") == 0 ||
                 strcmp(code, "TokenRefreshRequired") == 0)
            st_result_setf(out, outcome,
                           "the session token from %s was refused for %s on bucket '%s' (%s): "
                           "refresh the credentials",
                           s->v.signer.creds.source, c->action, s->bucket, detail);
        else if (strcmp(code, "RequestTimeTooSkewed") == 0)
            st_result_setf(out, outcome,
                           "S3 refused %s on bucket '%s' because this machine's clock is off by "
                           "more than 15 minutes (%s): synchronise the clock (NTP)",
                           c->action, s->bucket, detail);
        else if (!c->if_match && strcmp(c->method, "GET") == 0)
            /* S3 also hides a missing key behind 403 from callers that may not list the bucket. */
            st_result_setf(out, outcome,
                           "access denied: the credentials from %s lack %s on "
                           "arn:aws:s3:::%s/%s (%s); grant s3:GetObject and s3:PutObject on the "
                           "lock key (if the lock does not exist yet, S3 also answers 403 unless "
                           "s3:ListBucket is granted on arn:aws:s3:::%s; see docs/s3.md)",
                           s->v.signer.creds.source, c->action, s->bucket, c->key, detail,
                           s->bucket);
        else
            st_result_setf(out, outcome,
                           "access denied: the credentials from %s lack %s on "
                           "arn:aws:s3:::%s/%s (%s); grant s3:GetObject and s3:PutObject on the "
                           "lock key",
                           s->v.signer.creds.source, c->action, s->bucket, c->key, detail);
        break;
    case ST_FATAL:
        if (strcmp(code, "NoSuchBucket") == 0)
            st_result_setf(out, outcome,
                           "bucket '%s' does not exist at %s (%s): create it or fix the lock URL",
                           s->bucket, s->v.endpoint_desc, detail);
        else if (resp->bucket_region[0] && strcmp(resp->bucket_region, s->v.region) != 0)
            st_result_setf(out, outcome,
                           "bucket '%s' is in region %s, not %s (%s): set the region "
                           "(--region %s or AWS_REGION)",
                           s->bucket, resp->bucket_region, s->v.region, detail,
                           resp->bucket_region);
        else if (strcmp(code, "AuthorizationHeaderMalformed") == 0 ||
                 (status >= 300 && status < 400))
            st_result_setf(out, outcome,
                           "%s s3://%s/%s was refused at %s (%s): check the region (now %s) and "
                           "the endpoint",
                           c->method, s->bucket, c->key, s->v.endpoint_desc, detail, s->v.region);
        else if (status == 501)
            st_result_setf(out, outcome,
                           "the server at %s does not implement %s s3://%s/%s (%s): s3lect needs "
                           "conditional writes (If-Match/If-None-Match); run 's3lect "
                           "check-store' to test a store",
                           s->v.endpoint_desc, c->method, s->bucket, c->key, detail);
        else
            st_result_setf(out, outcome, "%s s3://%s/%s failed at %s (%s)", c->method, s->bucket,
                           c->key, s->v.endpoint_desc, detail);
        break;
    default:
        if (status == 409)
            st_result_setf(out, outcome,
                           "%s s3://%s/%s raced another conditional write at %s (%s); whether "
                           "it landed is unknown: will read back",
                           c->method, s->bucket, c->key, s->v.endpoint_desc, detail);
        else
            st_result_setf(out, outcome, "%s s3://%s/%s: temporary failure at %s (%s); will retry",
                           c->method, s->bucket, c->key, s->v.endpoint_desc, detail);
        break;
    }
}

static void set_transport_failure(const req_ctx *c, CURLcode cc, const char *errbuf, st_result *out)
{
    char what[1200];
    snprintf(what, sizeof what, "%s s3://%s/%s", c->method, c->s->bucket, c->key);
    st_transport_failure(cc, errbuf, what, c->s->v.endpoint_desc, c->timeout_ms, out);
}

/* ---- requests ---- */

/* One request in flight: what finish() needs once the transfer is over. */
struct st_xfer {
    req_ctx c;
    char *key; /* c.key points here */
    ah_call call;
};

static void xfer_free(st_xfer *x)
{
    if (!x)
        return;
    ah_call_release(&x->call);
    free(x->key);
    free(x);
}

/* Prepares one signed request on easy (signed now, just before it is sent).
 * body/len is the PUT payload (put != 0), copied into the handle. Returns
 * NULL with out filled when no request can be made. */
static st_xfer *s3_begin(st_store *st, void *easy, const char *key, int put, const void *body,
                         size_t len, const char *if_match, int64_t timeout_ms, st_result *out)
{
    s3_store *s = (s3_store *)st;
    memset(out, 0, sizeof *out);
    if (!key || !*key) {
        st_result_setf(out, ST_FATAL, "empty S3 object key: use s3://%s/path/to/leader.json",
                       s->bucket);
        return NULL;
    }
    st_xfer *x = calloc(1, sizeof *x);
    if (!x || !(x->key = u_strdup(key))) {
        free(x);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    x->c = (req_ctx){
        s,      put ? "PUT" : "GET",   put ? "s3:PutObject" : "s3:GetObject",
        x->key, put ? if_match : NULL, timeout_ms > 0 ? timeout_ms : s->v.default_timeout_ms};
    req_ctx *c = &x->c;
    if (ah_signer_creds(&s->v.signer, out) != 0) {
        xfer_free(x);
        return NULL;
    }
    char *ekey = sigv4_uri_encode(c->key, strlen(c->key), 1);
    char *path = ekey ? u_asprintf("%s/%s", s->v.base_path, ekey) : NULL;
    free(ekey);
    if (!path) {
        xfer_free(x);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    sigv4_header h[2];
    size_t nh = 0;
    if (put) {
        h[nh++] = (sigv4_header){"Content-Type", "application/json"};
        if (c->if_match)
            h[nh++] = (sigv4_header){"If-Match", c->if_match};
        else
            h[nh++] = (sigv4_header){"If-None-Match", "*"};
    }
    ah_request rq = {.method = c->method,
                     .origin = s->v.origin,
                     .host = s->v.host,
                     .path = path,
                     .service = "s3",
                     .region = s->v.region,
                     .headers = h,
                     .nheaders = nh,
                     .body = put ? body : NULL,
                     .body_len = put ? len : 0,
                     .s3 = 1,
                     .timeout_ms = c->timeout_ms,
                     .ca_file = s->v.ca_file};
    int rc = ah_call_prepare(&x->call, easy, &s->v.signer, &rq, out);
    free(path);
    if (rc != 0) {
        xfer_free(x);
        return NULL;
    }
    return x;
}

static void s3_finish(st_store *st, st_xfer *x, int curl_code, st_result *out)
{
    s3_store *s = (s3_store *)st;
    CURLcode cc = (CURLcode)curl_code;
    req_ctx *c = &x->c;
    ah_response *resp = &x->call.resp;
    int put = strcmp(c->method, "PUT") == 0;
    long status = st_http_finish_start(x->call.easy, out);
    if (ah_call_transport_failed(&x->call, cc)) {
        set_transport_failure(c, cc, x->call.errbuf, out);
    } else {
        s3_error_body xe = {0};
        int outcome = s3_classify(status, NULL);
        if (outcome != ST_OK) {
            s3_xml_parse_error(resp->data.body, resp->data.len, &xe);
            outcome = s3_classify(status, xe.code);
        }
        if (outcome != ST_OK) {
            set_http_failure(c, status, resp, &xe, outcome, out);
            if (outcome == ST_AUTH)
                ah_signer_refused(&s->v.signer);
        } else if (!resp->etag[0]) {
            st_result_setf(out, ST_FATAL,
                           "%s s3://%s/%s: the server at %s sent no ETag; s3lect needs ETags "
                           "for conditional writes",
                           c->method, s->bucket, c->key, s->v.endpoint_desc);
        } else {
            st_result_http_ok(out, resp->etag, put ? NULL : &resp->data, resp->date,
                              resp->last_modified);
        }
    }
    xfer_free(x);
}

static const char *s3_pool(const st_store *st)
{
    return ((const s3_store *)st)->v.origin;
}

static void s3_destroy(st_store *st)
{
    s3_store *s = (s3_store *)st;
    if (!s)
        return;
    ah_service_clear(&s->v);
    free(s->bucket);
    free(s);
}

static const st_vtable s3_vtable = {
    .name = "s3", .destroy = s3_destroy, .begin = s3_begin, .finish = s3_finish, .pool = s3_pool};

/* Works out origin, Host and path prefix from the endpoint and addressing. */
static int setup_addressing(s3_store *s, const char *endpoint_url, int path_style, char *err,
                            size_t errlen)
{
    st_endpoint ep;
    char *aws_url = NULL;
    if (!endpoint_url) {
        const char *suffix =
            strncmp(s->v.region, "cn-", 3) == 0 ? "amazonaws.com.cn" : "amazonaws.com";
        aws_url = u_asprintf("https://s3.%s.%s", s->v.region, suffix);
        if (!aws_url) {
            snprintf(err, errlen, "out of memory");
            return S3LECT_ENOMEM;
        }
    }
    int rc =
        st_endpoint_parse(endpoint_url ? endpoint_url : aws_url, "S3 endpoint", &ep, err, errlen);
    if (rc) {
        free(aws_url);
        return rc;
    }
    int fits = bucket_fits_host(s->bucket, ep.https);
    int use_path;
    if (path_style == 1) {
        use_path = 1;
    } else if (path_style == 0) {
        if (!fits || is_ip_literal(ep.host)) {
            snprintf(err, errlen,
                     "virtual-hosted addressing was requested but bucket '%s' cannot be put in "
                     "front of host '%s'; use path-style addressing",
                     s->bucket, ep.host);
            st_endpoint_clear(&ep);
            free(aws_url);
            return S3LECT_EINVAL;
        }
        use_path = 0;
    } else {
        /* Auto: virtual-hosted where AWS wants it; path-style for IPs,
         * localhost and other S3-compatible servers (MinIO, Ceph, R2 ...),
         * which all accept it without DNS set-up. */
        use_path = !(is_aws_host(ep.host) && fits);
    }
    const char *scheme = ep.https ? "https" : "http";
    if (use_path) {
        s->v.host = u_strdup(ep.authority);
        s->v.base_path = u_asprintf("%s/%s", ep.base_path, s->bucket);
    } else {
        s->v.host = u_asprintf("%s.%s", s->bucket, ep.authority);
        s->v.base_path = u_strdup(ep.base_path);
    }
    s->v.origin = s->v.host ? u_asprintf("%s://%s", scheme, s->v.host) : NULL;
    s->v.endpoint_desc = endpoint_url ? u_asprintf("%s://%s%s", scheme, ep.authority, ep.base_path)
                                      : u_asprintf("AWS S3 (%s)", s->v.region);
    st_endpoint_clear(&ep);
    free(aws_url);
    if (!s->v.host || !s->v.base_path || !s->v.origin || !s->v.endpoint_desc) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    return 0;
}

int st_s3_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out, char *err,
               size_t errlen)
{
    const char *bucket = loc->bucket;
    *out = NULL;
    if (!bucket || !*bucket || strchr(bucket, '/')) {
        snprintf(err, errlen, "invalid S3 bucket name '%s': use s3://bucket/key",
                 bucket ? bucket : "");
        return S3LECT_EINVAL;
    }
    s3_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->base.vt = &s3_vtable;
    int rc = ah_service_init(&s->v, cfg, NULL, S3_DEFAULT_TIMEOUT_MS, err, errlen);
    if (rc) {
        free(s);
        return rc;
    }
    int oom = 0;
    char *endpoint_url = aws_endpoint_resolve(cfg, &oom);
    if (!(s->bucket = u_strdup(bucket)) || oom) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    }
    if (rc == 0)
        rc = setup_addressing(s, endpoint_url, cfg->path_style, err, errlen);
    /* Fail early, with a message saying what to set, when there are no
     * credentials (a source that does not answer yet is retried by the
     * refresher: requests fail as transient meanwhile). */
    if (rc == 0)
        rc = ah_signer_open(&s->v.signer, cfg, err, errlen);
    free(endpoint_url);
    if (rc) {
        s3_destroy(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

/* S3 bucket naming rules: 3-63 characters of a-z, 0-9, '.' and '-', starting
 * and ending with a letter or digit, no "..", not an IPv4 address. Legacy
 * us-east-1 buckets (created before March 2018) may also have capitals and
 * '_' and up to 255 characters: accepted too (the S3 store then uses
 * path-style addressing, as AWS requires for them). */
static int check_bucket(const char *url, const char *b, size_t bl, char *err, size_t errlen)
{
    int legacy = 0;
    for (size_t i = 0; i < bl; i++) {
        char c = b[i];
        if ((c >= 'A' && c <= 'Z') || c == '_') {
            legacy = 1;
        } else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) {
            snprintf(err, errlen,
                     "lock URL '%.200s': the bucket name has an invalid character; S3 bucket "
                     "names use only a-z, 0-9, '.' and '-' (legacy ones also A-Z and '_')",
                     url);
            return S3LECT_EINVAL;
        }
    }
    if (bl < 3 || bl > (legacy ? 255u : 63u)) {
        snprintf(err, errlen,
                 "lock URL '%.200s': the bucket name is %zu characters long; S3 bucket names "
                 "have 3 to 63 (legacy names with capitals or '_' up to 255)",
                 url, bl);
        return S3LECT_EINVAL;
    }
    int alnum_ends = b[0] != '.' && b[0] != '-' && b[bl - 1] != '.' && b[bl - 1] != '-';
    int dotdot = 0, dots = 0, digits_dots = 1;
    for (size_t i = 0; i < bl; i++) {
        if (b[i] == '.') {
            dots++;
            if (i + 1 < bl && b[i + 1] == '.')
                dotdot = 1;
        } else if (!(b[i] >= '0' && b[i] <= '9')) {
            digits_dots = 0;
        }
    }
    if (!alnum_ends || dotdot) {
        snprintf(err, errlen,
                 "lock URL '%.200s': S3 bucket names start and end with a letter or digit and "
                 "have no '..'",
                 url);
        return S3LECT_EINVAL;
    }
    if (digits_dots && dots == 3) {
        snprintf(err, errlen,
                 "lock URL '%.200s': an IP address is not a bucket name; give the server with "
                 "--endpoint (endpoint setting) and the bucket here",
                 url);
        return S3LECT_EINVAL;
    }
    return 0;
}

/* S3 object keys: at most 1024 bytes of valid UTF-8, no control characters,
 * and (for a lock) no empty, "." or ".." segments. */
#define S3_KEY_MAX 1024

static int check_s3_key(const char *url, const char *key, char *err, size_t errlen)
{
    size_t n = strlen(key);
    if (n > S3_KEY_MAX) {
        snprintf(err, errlen, "lock URL: the S3 key is %zu bytes long; S3's limit is %d", n,
                 S3_KEY_MAX);
        return S3LECT_EINVAL;
    }
    for (const unsigned char *p = (const unsigned char *)key; *p;) {
        if (st_is_control(p)) {
            snprintf(err, errlen,
                     "lock URL: the S3 key has a control character (byte 0x%02x at offset %zu); "
                     "remove it",
                     *p, (size_t)(p - (const unsigned char *)key));
            return S3LECT_EINVAL;
        }
        size_t l = st_utf8_len(p);
        if (!l) {
            snprintf(err, errlen,
                     "lock URL: the S3 key is not valid UTF-8 (at offset %zu); S3 keys are UTF-8",
                     (size_t)(p - (const unsigned char *)key));
            return S3LECT_EINVAL;
        }
        p += l;
    }
    return st_check_segments(url, "key", key, n, err, errlen);
}

int st_s3_parse(const char *url, const char *b, st_location *out, char *err, size_t errlen)
{
    return st_parse_bucket_object(url, b, "s3://bucket/key", "a key", check_bucket, check_s3_key,
                                  out, err, errlen);
}

int st_s3_canonical(const st_location *loc, char **out)
{
    return st_canon_add(out, "s3://", loc->bucket, 0) || st_canon_add(out, "/", loc->key, 0);
}
