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

#include "aws_creds.h"
#include "config.h"
#include "crypto.h"
#include "s3_xml.h"
#include "sigv4.h"
#include "store.h"
#include "util.h"

/* Bodies are read up to this size; a longer lock object is cut here (the
 * record layer then reports it as corrupt: records are at most 64 KiB). */
#define S3_MAX_BODY (1024 * 1024)
#define S3_DEFAULT_TIMEOUT_MS 10000

typedef struct s3_store {
    st_store base;
    CURL *curl; /* created by the first blocking request (the CLI); the runtime brings its own */
    char *bucket;
    char *endpoint_desc; /* for messages: "http://127.0.0.1:9000" or "AWS S3 (us-east-1)" */
    char *origin;        /* "scheme://host[:port]" the requests go to */
    char *host;          /* Host header: host[:port], with "bucket." when virtual-hosted */
    char *path_prefix;   /* endpoint base path, plus "/bucket" when path-style */
    char *region;
    char *ca_file;
    int64_t default_timeout_ms;
    /* Credentials: a handle on the process's shared cache entry for their
     * source (aws_creds.h); a copy of the current ones is taken for each
     * request without waiting for any refresh. After an AUTH answer a static
     * source is resolved again (rotated keys or a fixed file are picked up
     * without a restart) and a refreshed source is refreshed once, now, in
     * the background. */
    struct s3lect_config credcfg;
    aws_chain *chain;
    aws_creds creds; /* the copy the current request is signed with */
    uint64_t creds_gen;
    uint64_t creds_failures_seen; /* refresh failures already reported */
    int64_t creds_warned_at;      /* mono ms of the last such report */
    int creds_stale;
} s3_store;

/* ---- one-time libcurl set-up ---- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- endpoint parsing and addressing ---- */

typedef struct endpoint {
    int https;
    char *host;      /* without brackets for IPv6 */
    char *authority; /* host[:port] as it goes in the Host header (brackets kept) */
    char *base_path; /* "" or "/prefix" without trailing slash */
} endpoint;

static void endpoint_clear(endpoint *e)
{
    free(e->host);
    free(e->authority);
    free(e->base_path);
    memset(e, 0, sizeof *e);
}

static int parse_endpoint(const char *url, endpoint *e, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    const char *p;
    if (strncasecmp(url, "https://", 8) == 0) {
        e->https = 1;
        p = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        p = url + 7;
    } else {
        snprintf(err, errlen,
                 "S3 endpoint '%.200s' must start with http:// or https:// "
                 "(e.g. http://127.0.0.1:9000)",
                 url);
        return S3LECT_EINVAL;
    }
    size_t alen = strcspn(p, "/?#");
    const char *rest = p + alen;
    if (strpbrk(rest, "?#") || memchr(p, '@', alen)) {
        snprintf(err, errlen,
                 "S3 endpoint '%.200s' may not contain user info, a query or a fragment", url);
        return S3LECT_EINVAL;
    }
    const char *host = p, *port = NULL;
    size_t hlen;
    if (*p == '[') {
        const char *close = memchr(p, ']', alen);
        if (!close) {
            snprintf(err, errlen, "S3 endpoint '%.200s': unclosed '[' in the IPv6 address", url);
            return S3LECT_EINVAL;
        }
        host = p + 1;
        hlen = (size_t)(close - host);
        if (close + 1 < p + alen) {
            if (close[1] != ':') {
                snprintf(err, errlen, "S3 endpoint '%.200s': expected ':port' after ']'", url);
                return S3LECT_EINVAL;
            }
            port = close + 2;
        }
    } else {
        const char *colon = memchr(p, ':', alen);
        hlen = colon ? (size_t)(colon - p) : alen;
        port = colon ? colon + 1 : NULL;
    }
    if (hlen == 0) {
        snprintf(err, errlen, "S3 endpoint '%.200s' has no host name", url);
        return S3LECT_EINVAL;
    }
    long portnum = 0;
    if (port) {
        char *endp;
        portnum = strtol(port, &endp, 10);
        if (endp != p + alen || endp == port || portnum < 1 || portnum > 65535) {
            snprintf(err, errlen, "S3 endpoint '%.200s' has an invalid port", url);
            return S3LECT_EINVAL;
        }
    }
    /* The default port is left out of Host, as every HTTP client does. */
    int default_port = !port || portnum == (e->https ? 443 : 80);
    size_t blen = strlen(rest);
    while (blen > 0 && rest[blen - 1] == '/')
        blen--;
    e->host = malloc(hlen + 1);
    e->authority = default_port ? u_asprintf("%.*s", (int)(host - p + hlen + (*p == '[')), p)
                                : u_asprintf("%.*s", (int)alen, p);
    e->base_path = u_asprintf("%.*s", (int)blen, rest);
    if (!e->host || !e->authority || !e->base_path) {
        endpoint_clear(e);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    memcpy(e->host, host, hlen);
    e->host[hlen] = '\0';
    for (char *c = e->host; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    return 0;
}

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

/* ---- responses ---- */

typedef struct response {
    char *body;
    size_t len, cap;
    int truncated;
    char etag[512];
    char bucket_region[64];
} response;

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    response *r = ud;
    size_t n = size * nmemb;
    if (r->len + n > S3_MAX_BODY) {
        r->truncated = 1;
        n = S3_MAX_BODY - r->len;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *p = realloc(r->body, cap);
        if (!p)
            return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
        r->body = p;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = '\0';
    return r->truncated ? 0 : size * nmemb;
}

/* Copies a header's value (after "Name:") without surrounding whitespace. */
static void header_value(const char *line, size_t n, size_t name_len, char *dst, size_t cap)
{
    const char *v = line + name_len;
    const char *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t len = (size_t)(end - v);
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *ud)
{
    response *r = ud;
    size_t n = size * nmemb;
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* A new response (after 100 Continue): forget the previous headers. */
        r->etag[0] = '\0';
        r->bucket_region[0] = '\0';
    } else if (n > 5 && strncasecmp(line, "ETag:", 5) == 0) {
        header_value(line, n, 5, r->etag, sizeof r->etag);
    } else if (n > 20 && strncasecmp(line, "x-amz-bucket-region:", 20) == 0) {
        header_value(line, n, 20, r->bucket_region, sizeof r->bucket_region);
    }
    return n;
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

static void set_http_failure(const req_ctx *c, long status, const response *resp,
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
                           c->action, s->bucket, detail, s->creds.source,
                           s->creds.access_key_id ? s->creds.access_key_id : "?");
        else if (strcmp(code, "InvalidAccessKeyId") == 0)
            st_result_setf(out, outcome,
                           "S3 does not know access key id %s from %s (%s): use credentials of "
                           "an account that owns bucket '%s'",
                           s->creds.access_key_id ? s->creds.access_key_id : "?", s->creds.source,
                           detail, s->bucket);
        else if (strcmp(code, "ExpiredToken") == 0 || strcmp(code, "InvalidToken") == 0 ||
                 strcmp(code, "TokenRefreshRequired") == 0)
            st_result_setf(out, outcome,
                           "the session token from %s was refused for %s on bucket '%s' (%s): "
                           "refresh the credentials",
                           s->creds.source, c->action, s->bucket, detail);
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
                           s->creds.source, c->action, s->bucket, c->key, detail, s->bucket);
        else
            st_result_setf(out, outcome,
                           "access denied: the credentials from %s lack %s on "
                           "arn:aws:s3:::%s/%s (%s); grant s3:GetObject and s3:PutObject on the "
                           "lock key",
                           s->creds.source, c->action, s->bucket, c->key, detail);
        break;
    case ST_FATAL:
        if (strcmp(code, "NoSuchBucket") == 0)
            st_result_setf(out, outcome,
                           "bucket '%s' does not exist at %s (%s): create it or fix the lock URL",
                           s->bucket, s->endpoint_desc, detail);
        else if (resp->bucket_region[0] && strcmp(resp->bucket_region, s->region) != 0)
            st_result_setf(out, outcome,
                           "bucket '%s' is in region %s, not %s (%s): set the region "
                           "(--region %s or AWS_REGION)",
                           s->bucket, resp->bucket_region, s->region, detail, resp->bucket_region);
        else if (strcmp(code, "AuthorizationHeaderMalformed") == 0 ||
                 (status >= 300 && status < 400))
            st_result_setf(out, outcome,
                           "%s s3://%s/%s was refused at %s (%s): check the region (now %s) and "
                           "the endpoint",
                           c->method, s->bucket, c->key, s->endpoint_desc, detail, s->region);
        else if (status == 501)
            st_result_setf(out, outcome,
                           "the server at %s does not implement %s s3://%s/%s (%s): s3lect needs "
                           "conditional writes (If-Match/If-None-Match); run 's3lect "
                           "check-store' to test a store",
                           s->endpoint_desc, c->method, s->bucket, c->key, detail);
        else
            st_result_setf(out, outcome, "%s s3://%s/%s failed at %s (%s)", c->method, s->bucket,
                           c->key, s->endpoint_desc, detail);
        break;
    default:
        if (status == 409)
            st_result_setf(out, outcome,
                           "%s s3://%s/%s raced another conditional write at %s (%s); whether "
                           "it landed is unknown: will read back",
                           c->method, s->bucket, c->key, s->endpoint_desc, detail);
        else
            st_result_setf(out, outcome, "%s s3://%s/%s: temporary failure at %s (%s); will retry",
                           c->method, s->bucket, c->key, s->endpoint_desc, detail);
        break;
    }
}

static void set_transport_failure(const req_ctx *c, CURLcode cc, const char *errbuf, st_result *out)
{
    s3_store *s = c->s;
    const char *why = errbuf[0] ? errbuf : curl_easy_strerror(cc);
    switch (cc) {
    case CURLE_OPERATION_TIMEDOUT:
        st_result_setf(out, ST_TRANSIENT, "%s s3://%s/%s timed out after %lld ms at %s (%s)",
                       c->method, s->bucket, c->key, (long long)c->timeout_ms, s->endpoint_desc,
                       why);
        break;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_CRL_BADFILE:
        st_result_setf(out, ST_FATAL,
                       "%s s3://%s/%s: cannot talk to %s (%s): check the endpoint and, for "
                       "HTTPS, the CA bundle (--ca-file or AWS_CA_BUNDLE)",
                       c->method, s->bucket, c->key, s->endpoint_desc, why);
        break;
    default:
        st_result_setf(out, ST_TRANSIENT, "%s s3://%s/%s: connection to %s failed (%s); will retry",
                       c->method, s->bucket, c->key, s->endpoint_desc, why);
        break;
    }
}

/* ---- requests ---- */

/* A refresh of temporary credentials failed while the current ones are
 * still valid: the request goes on with them, and the failure is handed to
 * the runtime as a warning (an ERROR event, logged by the CLI), at most once
 * a minute, so the operator can fix the source before they expire. */
#define CREDS_WARN_EVERY_MS 60000
static void note_refresh_failure(s3_store *s, st_result *out)
{
    /* The usual case costs a counter read: no new failure, or one reported
     * less than a minute ago. */
    if (aws_chain_is_static(s->chain) || aws_chain_failures(s->chain) <= s->creds_failures_seen)
        return;
    int64_t now = u_mono_ms();
    if (s->creds_warned_at && now - s->creds_warned_at < CREDS_WARN_EVERY_MS)
        return;
    aws_chain_info info;
    aws_chain_describe(s->chain, &info);
    if (info.failures <= s->creds_failures_seen || !info.last_error[0])
        return;
    s->creds_failures_seen = info.failures;
    s->creds_warned_at = now;
    char until[40] = "";
    if (info.expires_ms > 0)
        u_format_rfc3339(info.expires_ms, until, sizeof until);
    out->warning = u_asprintf("refreshing the credentials from %s failed (%s); the current ones "
                              "are still used%s%s",
                              info.source, info.last_error, until[0] ? " until " : "", until);
}

static int ensure_creds(s3_store *s, st_result *out)
{
    char err[600];
    if (s->creds_stale) {
        s->creds_stale = 0;
        if (aws_chain_is_static(s->chain)) {
            aws_chain *fresh;
            int rc = aws_chain_open(&s->credcfg, AWS_CHAIN_NOWAIT, &fresh, err, sizeof err);
            if (rc != 0) {
                aws_creds_clear(&s->creds);
                st_result_setf(out, rc == S3LECT_EAUTH ? ST_AUTH : ST_TRANSIENT, "%s", err);
                s->creds_stale = 1;
                return -1;
            }
            aws_chain_release(s->chain);
            s->chain = fresh;
        } else {
            aws_chain_stale(s->chain, s->creds_gen);
        }
    }
    aws_creds fresh;
    int rc = aws_chain_get(s->chain, &fresh, &s->creds_gen, err, sizeof err);
    if (rc != 0) {
        st_result_setf(out, ST_TRANSIENT, "%s; will retry", err);
        return -1;
    }
    aws_creds_clear(&s->creds);
    s->creds = fresh;
    note_refresh_failure(s, out);
    return 0;
}

static struct curl_slist *add_header(struct curl_slist *list, int *oom, const char *name,
                                     const char *value)
{
    if (*oom)
        return list;
    char *line = u_asprintf("%s: %s", name, value);
    struct curl_slist *l = line ? curl_slist_append(list, line) : NULL;
    if (line) {
        memset(line, 0, strlen(line)); /* may be the session token */
        free(line);
    }
    if (!l) {
        *oom = 1;
        return list;
    }
    return l;
}

/* One request in flight: what finish() needs once the transfer is over. */
struct st_xfer {
    req_ctx c;
    char *key; /* c.key points here */
    CURL *easy;
    struct curl_slist *headers; /* may hold the session token: wiped when freed */
    response resp;
    char errbuf[CURL_ERROR_SIZE];
};

static void xfer_free(st_xfer *x)
{
    if (!x)
        return;
    for (struct curl_slist *l = x->headers; l; l = l->next)
        memset(l->data, 0, strlen(l->data));
    curl_slist_free_all(x->headers);
    free(x->resp.body);
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
        x->key, put ? if_match : NULL, timeout_ms > 0 ? timeout_ms : s->default_timeout_ms};
    x->easy = easy;
    req_ctx *c = &x->c;
    if (ensure_creds(s, out) != 0) {
        xfer_free(x);
        return NULL;
    }
    char *ekey = sigv4_uri_encode(c->key, strlen(c->key), 1);
    char *path = ekey ? u_asprintf("%s/%s", s->path_prefix, ekey) : NULL;
    char *url = path ? u_asprintf("%s%s", s->origin, path) : NULL;
    free(ekey);
    if (!url) {
        free(path);
        xfer_free(x);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    if (!body)
        body = "";

    char amz_date[17], payload_hash[65];
    uint8_t digest[CR_SHA256_LEN];
    sigv4_amz_date(time(NULL), amz_date);
    cr_sha256(put ? body : "", put ? len : 0, digest);
    cr_hex(digest, sizeof digest, payload_hash);

    const char *token = s->creds.session_token;
    sigv4_header h[7];
    size_t nh = 0;
    h[nh++] = (sigv4_header){"Host", s->host};
    h[nh++] = (sigv4_header){"x-amz-date", amz_date};
    h[nh++] = (sigv4_header){"x-amz-content-sha256", payload_hash};
    if (token)
        h[nh++] = (sigv4_header){"x-amz-security-token", token};
    if (put) {
        h[nh++] = (sigv4_header){"Content-Type", "application/json"};
        if (c->if_match)
            h[nh++] = (sigv4_header){"If-Match", c->if_match};
        else
            h[nh++] = (sigv4_header){"If-None-Match", "*"};
    }
    sigv4_request sreq = {.method = c->method,
                          .path = path,
                          .headers = h,
                          .nheaders = nh,
                          .payload_hash = payload_hash};
    sigv4_params sp = {.access_key_id = s->creds.access_key_id,
                       .secret_access_key = s->creds.secret_access_key,
                       .session_token = token,
                       .region = s->region,
                       .service = "s3",
                       .amz_date = amz_date,
                       .normalize_path = 0,
                       .sign_body = 1};
    sigv4_result sig;
    if (sigv4_sign(&sreq, &sp, &sig) != 0) {
        free(path);
        free(url);
        st_result_setf(out, ST_FATAL, "cannot sign the request for s3://%s/%s", s->bucket, c->key);
        xfer_free(x);
        return NULL;
    }
    free(path);

    struct curl_slist *hl = NULL;
    int oom = 0;
    for (size_t i = 0; i < nh; i++)
        hl = add_header(hl, &oom, h[i].name, h[i].value);
    hl = add_header(hl, &oom, "Authorization", sig.authorization);
    if (!oom) {
        /* No "Expect: 100-continue" round trip and no default Accept. */
        struct curl_slist *l = curl_slist_append(hl, "Expect:");
        l = l ? curl_slist_append(l, "Accept:") : NULL;
        oom = !l;
        if (l)
            hl = l;
    }
    sigv4_result_clear(&sig);
    x->headers = hl;
    if (oom) {
        free(url);
        xfer_free(x);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }

    CURL *e = easy;
    /* reset keeps the handle's connection; the connections themselves live
     * in the multi handle's pool (keep-alive) when the runtime runs it. */
    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* S3 signs the path exactly as sent */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "s3lect/" S3LECT_VERSION_STRING);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &x->resp);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &x->resp);
    if (s->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, s->ca_file);
    if (put) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body);
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    free(url);
    return x;
}

static void s3_finish(st_store *st, st_xfer *x, int curl_code, st_result *out)
{
    s3_store *s = (s3_store *)st;
    CURLcode cc = (CURLcode)curl_code;
    req_ctx *c = &x->c;
    response *resp = &x->resp;
    int put = strcmp(c->method, "PUT") == 0;
    char *warning = out->warning; /* set by begin (a failed credential refresh): kept */
    memset(out, 0, sizeof *out);
    out->warning = warning;
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    out->http_status = (int)status;
    /* The handle must not keep pointers into x (freed below). */
    curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, NULL);
    if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && resp->truncated)) {
        set_transport_failure(c, cc, x->errbuf, out);
    } else {
        s3_error_body xe = {0};
        int outcome = s3_classify(status, NULL);
        if (outcome != ST_OK) {
            s3_xml_parse_error(resp->body, resp->len, &xe);
            outcome = s3_classify(status, xe.code);
        }
        if (outcome != ST_OK) {
            set_http_failure(c, status, resp, &xe, outcome, out);
            if (outcome == ST_AUTH)
                s->creds_stale = 1;
        } else if (!resp->etag[0]) {
            st_result_setf(out, ST_FATAL,
                           "%s s3://%s/%s: the server at %s sent no ETag; s3lect needs ETags "
                           "for conditional writes",
                           c->method, s->bucket, c->key, s->endpoint_desc);
        } else if (st_result_set_etag(out, resp->etag) != 0 ||
                   (!put &&
                    st_result_set_body(out, resp->body ? resp->body : "", resp->len) != 0)) {
            st_result_setf(out, ST_TRANSIENT, "out of memory");
        } else {
            out->outcome = ST_OK;
        }
    }
    xfer_free(x);
}

/* Performs one request on the store's own handle (blocking: the CLI). */
static void s3_request(s3_store *s, const char *key, int put, const void *body, size_t len,
                       const char *if_match, int64_t timeout_ms, st_result *out)
{
    if (!s->curl && !(s->curl = curl_easy_init())) {
        memset(out, 0, sizeof *out);
        st_result_setf(out, ST_TRANSIENT, "libcurl could not create a handle");
        return;
    }
    st_xfer *x = s3_begin(&s->base, s->curl, key, put, body, len, if_match, timeout_ms, out);
    if (x)
        s3_finish(&s->base, x, curl_easy_perform(s->curl), out);
}

static void s3_get(st_store *st, const char *key, int64_t timeout_ms, st_result *out)
{
    s3_request((s3_store *)st, key, 0, NULL, 0, NULL, timeout_ms, out);
}

static void s3_put(st_store *st, const char *key, const void *data, size_t len,
                   const char *if_match, int64_t timeout_ms, st_result *out)
{
    s3_request((s3_store *)st, key, 1, data, len, if_match, timeout_ms, out);
}

static const char *s3_pool(const st_store *st)
{
    return ((const s3_store *)st)->origin;
}

static void free_credcfg(struct s3lect_config *c)
{
    free(c->access_key_id);
    if (c->secret_access_key) {
        memset(c->secret_access_key, 0, strlen(c->secret_access_key));
        free(c->secret_access_key);
    }
    if (c->session_token) {
        memset(c->session_token, 0, strlen(c->session_token));
        free(c->session_token);
    }
    free(c->profile);
    free(c->region);
    free(c->ca_file);
}

static void s3_destroy(st_store *st)
{
    s3_store *s = (s3_store *)st;
    if (!s)
        return;
    if (s->curl)
        curl_easy_cleanup(s->curl);
    free(s->bucket);
    free(s->endpoint_desc);
    free(s->origin);
    free(s->host);
    free(s->path_prefix);
    free(s->region);
    free(s->ca_file);
    free_credcfg(&s->credcfg);
    aws_creds_clear(&s->creds);
    aws_chain_release(s->chain);
    free(s);
}

static const st_vtable s3_vtable = {"s3", s3_get, s3_put, s3_destroy, s3_begin, s3_finish, s3_pool};

/* Works out origin, Host and path prefix from the endpoint and addressing. */
static int setup_addressing(s3_store *s, const char *endpoint_url, int path_style, char *err,
                            size_t errlen)
{
    endpoint ep;
    char *aws_url = NULL;
    if (!endpoint_url) {
        const char *suffix =
            strncmp(s->region, "cn-", 3) == 0 ? "amazonaws.com.cn" : "amazonaws.com";
        aws_url = u_asprintf("https://s3.%s.%s", s->region, suffix);
        if (!aws_url) {
            snprintf(err, errlen, "out of memory");
            return S3LECT_ENOMEM;
        }
    }
    int rc = parse_endpoint(endpoint_url ? endpoint_url : aws_url, &ep, err, errlen);
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
            endpoint_clear(&ep);
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
        s->host = u_strdup(ep.authority);
        s->path_prefix = u_asprintf("%s/%s", ep.base_path, s->bucket);
    } else {
        s->host = u_asprintf("%s.%s", s->bucket, ep.authority);
        s->path_prefix = u_strdup(ep.base_path);
    }
    s->origin = s->host ? u_asprintf("%s://%s", scheme, s->host) : NULL;
    s->endpoint_desc = endpoint_url ? u_asprintf("%s://%s%s", scheme, ep.authority, ep.base_path)
                                    : u_asprintf("AWS S3 (%s)", s->region);
    endpoint_clear(&ep);
    free(aws_url);
    if (!s->host || !s->path_prefix || !s->origin || !s->endpoint_desc) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    return 0;
}

int st_s3_open(const struct s3lect_config *cfg, const char *bucket, st_store **out, char *err,
               size_t errlen)
{
    *out = NULL;
    if (!bucket || !*bucket || strchr(bucket, '/')) {
        snprintf(err, errlen, "invalid S3 bucket name '%s': use s3://bucket/key",
                 bucket ? bucket : "");
        return S3LECT_EINVAL;
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        snprintf(err, errlen, "libcurl failed to initialise: %s", curl_easy_strerror(curl_init_rc));
        return S3LECT_EIO;
    }
    s3_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->base.vt = &s3_vtable;
    s->default_timeout_ms = cfg->request_timeout > 0 ? cfg->request_timeout : S3_DEFAULT_TIMEOUT_MS;
    s->bucket = u_strdup(bucket);
    s->region = aws_region_resolve(cfg);
    s->ca_file = u_strdup(aws_ca_bundle_resolve(cfg));
    s->credcfg.access_key_id = u_strdup(cfg->access_key_id);
    s->credcfg.secret_access_key = u_strdup(cfg->secret_access_key);
    s->credcfg.session_token = u_strdup(cfg->session_token);
    s->credcfg.profile = u_strdup(cfg->profile);
    s->credcfg.region = u_strdup(cfg->region);
    s->credcfg.ca_file = u_strdup(cfg->ca_file);
    s->credcfg.request_timeout = cfg->request_timeout;
    int oom = 0;
    char *endpoint_url = aws_endpoint_resolve(cfg, &oom);
    int rc = 0;
    if (!s->bucket || !s->region || oom || (aws_ca_bundle_resolve(cfg) && !s->ca_file) ||
        (cfg->access_key_id && !s->credcfg.access_key_id) ||
        (cfg->secret_access_key && !s->credcfg.secret_access_key) ||
        (cfg->session_token && !s->credcfg.session_token) ||
        (cfg->profile && !s->credcfg.profile) || (cfg->region && !s->credcfg.region) ||
        (cfg->ca_file && !s->credcfg.ca_file)) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    } else if (!cfg_region_valid(s->region)) {
        snprintf(err, errlen,
                 "region '%.80s' is not a region name (letters, digits, '-' and '_', at most 64): "
                 "fix --region, AWS_REGION, AWS_DEFAULT_REGION or the profile's region",
                 s->region);
        rc = S3LECT_EINVAL;
    }
    if (rc == 0)
        rc = setup_addressing(s, endpoint_url, cfg->path_style, err, errlen);
    /* Fail early, with a message saying what to set, when there are no
     * credentials (a source that does not answer yet is retried by the
     * refresher: requests fail as transient meanwhile). */
    if (rc == 0)
        rc = aws_chain_open(&s->credcfg, 0, &s->chain, err, errlen);
    free(endpoint_url);
    if (rc) {
        s3_destroy(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}
