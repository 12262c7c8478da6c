/* peer_client.c - the follower's check of the leader's endpoint (DESIGN §6):
 * GET https://{leaderAddr}{path}?wait=&etag= over one kept-alive libcurl
 * connection, verified against peer_ca with TLS >= 1.2, optionally with a
 * client certificate (mTLS).
 *
 * The transfer runs through a private multi handle and is polled every
 * PEER_ABORT_POLL_MS, so that a stop (the abort flag) ends even a long poll
 * within that period; the multi handle also keeps the connection between
 * checks. Every failure is ST_TRANSIENT: the caller falls back to S3.
 */
#include <curl/curl.h>
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "peer.h"
#include "util.h"

#define PEER_ABORT_POLL_MS 50
/* A record is at most 64 KiB; the served body adds etag and term. */
#define PEER_MAX_RESPONSE (256 * 1024)

typedef struct pem_or_path {
    char *data; /* NUL-terminated copy */
    size_t len;
    int pem; /* 1: PEM bytes, 0: a file path */
} pem_or_path;

struct peer_client {
    CURLM *multi;
    CURL *curl;
    pem_or_path ca, client_cert;
    char errbuf[CURL_ERROR_SIZE];
};

typedef struct response {
    char *body;
    size_t len, cap;
    int too_large;
} response;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int looks_pem(const char *d, size_t n)
{
    size_t i = 0;
    while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\r' || d[i] == '\n'))
        i++;
    return n - i >= 10 && memcmp(d + i, "-----BEGIN", 10) == 0;
}

static void pp_clear(pem_or_path *p)
{
    if (p->data) {
        memset(p->data, 0, p->len); /* the client certificate blob holds a private key */
        free(p->data);
    }
    memset(p, 0, sizeof *p);
}

static int pp_set(pem_or_path *p, const void *data, size_t len)
{
    pp_clear(p);
    if (!data || len == 0)
        return 0;
    if (!(p->data = malloc(len + 1)))
        return S3LECT_ENOMEM;
    memcpy(p->data, data, len);
    p->data[len] = '\0';
    p->len = len;
    p->pem = looks_pem(p->data, len);
    return 0;
}

int peer_client_new(const struct s3lect_config *cfg, peer_client **out, char *err, size_t errlen)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        snprintf(err, errlen, "libcurl initialisation failed: %s",
                 curl_easy_strerror(curl_init_rc));
        return S3LECT_EIO;
    }
    peer_client *c = calloc(1, sizeof *c);
    if (!c || !(c->multi = curl_multi_init()) || !(c->curl = curl_easy_init()) ||
        (cfg && pp_set(&c->ca, cfg->peer_ca.data, cfg->peer_ca.len) != 0) ||
        (cfg && pp_set(&c->client_cert, cfg->peer_client_cert.data, cfg->peer_client_cert.len))) {
        peer_client_free(c);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    /* A path that names a file the follower cannot read is a configuration
     * error worth reporting now rather than as a TLS failure later. */
    const pem_or_path *files[] = {&c->ca, &c->client_cert};
    const char *names[] = {"peer_ca", "peer_client_cert"};
    for (int i = 0; i < 2; i++) {
        FILE *f = files[i]->data && !files[i]->pem ? fopen(files[i]->data, "rb") : NULL;
        if (files[i]->data && !files[i]->pem && !f) {
            snprintf(err, errlen, "cannot open %s file '%.200s' (expected PEM text or a path)",
                     names[i], files[i]->data);
            peer_client_free(c);
            return S3LECT_EINVAL;
        }
        if (f)
            fclose(f);
    }
    *out = c;
    return 0;
}

void peer_client_free(peer_client *c)
{
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    if (c->multi)
        curl_multi_cleanup(c->multi);
    pp_clear(&c->ca);
    pp_clear(&c->client_cert);
    free(c);
}

int peer_client_set_ca(peer_client *c, const void *pem, size_t len)
{
    if (!c)
        return S3LECT_EINVAL;
    curl_easy_reset(c->curl); /* drop the handle's pointer to the old bytes */
    return pp_set(&c->ca, pem, len);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    response *r = ud;
    size_t n = size * nmemb;
    if (r->len + n > PEER_MAX_RESPONSE) {
        r->too_large = 1;
        return 0; /* aborts the transfer */
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *p = realloc(r->body, cap);
        if (!p)
            return 0;
        r->body = p;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

/* leaderAddr comes from the lock record: only host:port characters may go
 * into the URL. */
static int valid_addr(const char *a)
{
    if (!a || !*a || strlen(a) > 300)
        return 0;
    for (const char *p = a; *p; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '-' || ch == '_' || ch == ':' || ch == '[' || ch == ']' ||
              ch == '%'))
            return 0;
    }
    return 1;
}

static void set_blob_opt(CURL *e, CURLoption blob_opt, CURLoption path_opt, const pem_or_path *p)
{
    if (!p->data)
        return;
    if (p->pem) {
        struct curl_blob b = {p->data, p->len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(e, blob_opt, &b);
    } else {
        curl_easy_setopt(e, path_opt, p->data);
    }
}

static void setup(peer_client *c, const char *url, int64_t total_ms, int64_t connect_ms,
                  response *resp)
{
    CURL *e = c->curl;
    curl_easy_reset(e);
    c->errbuf[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTPS);
#endif
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)total_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    set_blob_opt(e, CURLOPT_CAINFO_BLOB, CURLOPT_CAINFO, &c->ca);
    if (c->client_cert.data) {
        /* One PEM holds the certificate and its key. */
        curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
        set_blob_opt(e, CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERT, &c->client_cert);
        set_blob_opt(e, CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEY, &c->client_cert);
    }
    curl_easy_setopt(e, CURLOPT_USERAGENT, "s3lect/" S3LECT_VERSION_STRING);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, resp);
}

/* Runs the transfer, checking *abort_flag between polls. Returns the
 * transfer's result, or CURLE_ABORTED_BY_CALLBACK when aborted. */
static CURLcode perform(peer_client *c, const volatile int *abort_flag)
{
    CURLcode result = CURLE_ABORTED_BY_CALLBACK;
    if (curl_multi_add_handle(c->multi, c->curl) != CURLM_OK)
        return CURLE_FAILED_INIT;
    for (;;) {
        if (abort_flag && __atomic_load_n(abort_flag, __ATOMIC_ACQUIRE))
            break;
        int running = 0;
        if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
            result = CURLE_FAILED_INIT;
            break;
        }
        CURLMsg *m;
        int queued, done = 0;
        while ((m = curl_multi_info_read(c->multi, &queued)) != NULL) {
            if (m->msg == CURLMSG_DONE && m->easy_handle == c->curl) {
                result = m->data.result;
                done = 1;
            }
        }
        if (done)
            break;
        curl_multi_poll(c->multi, NULL, 0, PEER_ABORT_POLL_MS, NULL);
    }
    curl_multi_remove_handle(c->multi, c->curl);
    return result;
}

static void transport_failure(peer_client *c, CURLcode cc, const char *where, int64_t total_ms,
                              st_result *out)
{
    const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc);
    switch (cc) {
    case CURLE_ABORTED_BY_CALLBACK:
        st_result_setf(out, ST_TRANSIENT, "peer check of %s: stopped", where);
        break;
    case CURLE_OPERATION_TIMEDOUT:
        st_result_setf(out, ST_TRANSIENT, "peer check of %s: no answer within %lld ms (%s)", where,
                       (long long)total_ms, why);
        break;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
        st_result_setf(out, ST_TRANSIENT,
                       "peer check of %s: the leader's certificate was not accepted (%s); check "
                       "peer_ca and that the certificate names this address",
                       where, why);
        break;
    case CURLE_SSL_CERTPROBLEM:
        st_result_setf(out, ST_TRANSIENT,
                       "peer check of %s: cannot use the client certificate (%s); check "
                       "peer_client_cert (certificate and key in one PEM)",
                       where, why);
        break;
    default:
        st_result_setf(out, ST_TRANSIENT, "peer check of %s failed: %s", where, why);
        break;
    }
}

static void validate(const response *resp, const char *where, const char *expect_id, st_result *out)
{
    cJSON *root = cJSON_ParseWithLength(resp->body ? resp->body : "", resp->len);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "leaderID");
    const cJSON *etag = cJSON_GetObjectItemCaseSensitive(root, "etag");
    if (!cJSON_IsObject(root))
        st_result_setf(out, ST_TRANSIENT, "peer check of %s: the answer is not a JSON object",
                       where);
    else if (!cJSON_IsString(id))
        st_result_setf(out, ST_TRANSIENT, "peer check of %s: the answer has no leaderID", where);
    else if (expect_id && strcmp(id->valuestring, expect_id) != 0)
        st_result_setf(out, ST_TRANSIENT,
                       "peer check of %s: the node there is leader '%.100s', not '%.100s'", where,
                       id->valuestring, expect_id);
    else if (!cJSON_IsString(etag) || !etag->valuestring[0])
        st_result_setf(out, ST_TRANSIENT,
                       "peer check of %s: the answer has no etag (not an s3lect peer endpoint?)",
                       where);
    else if (st_result_set_body(out, resp->body, resp->len) != 0 ||
             st_result_set_etag(out, etag->valuestring) != 0)
        st_result_setf(out, ST_TRANSIENT, "peer check of %s: out of memory", where);
    else
        out->outcome = ST_OK;
    cJSON_Delete(root);
}

void peer_client_check(peer_client *c, const char *addr, const char *path, const char *etag,
                       int64_t wait_ms, int64_t timeout_ms, const char *expect_id,
                       const volatile int *abort_flag, st_result *out)
{
    memset(out, 0, sizeof *out);
    if (!path || path[0] != '/')
        path = "/health/leadership";
    if (!valid_addr(addr)) {
        st_result_setf(out, ST_TRANSIENT,
                       "peer check: the leader's address '%.100s' is not host:port",
                       addr ? addr : "");
        return;
    }
    if (wait_ms < 0)
        wait_ms = 0;
    if (wait_ms > PEER_MAX_WAIT_MS)
        wait_ms = PEER_MAX_WAIT_MS;
    if (timeout_ms <= 0)
        timeout_ms = 3000;
    char where[400];
    snprintf(where, sizeof where, "https://%s%s", addr, path);

    char *url;
    if (wait_ms > 0 && etag && *etag) {
        char *eetag = curl_easy_escape(c->curl, etag, 0);
        url = eetag ? u_asprintf("%s?wait=%lld&etag=%s", where, (long long)wait_ms, eetag) : NULL;
        curl_free(eetag);
    } else {
        url = u_strdup(where);
        wait_ms = 0;
    }
    if (!url) {
        st_result_setf(out, ST_TRANSIENT, "peer check of %s: out of memory", where);
        return;
    }
    response resp = {0};
    int64_t total_ms = wait_ms + timeout_ms;
    setup(c, url, total_ms, timeout_ms, &resp);
    CURLcode cc = perform(c, abort_flag);
    free(url);
    long status = 0;
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    out->http_status = (int)status;
    if (cc == CURLE_WRITE_ERROR && resp.too_large)
        st_result_setf(out, ST_TRANSIENT, "peer check of %s: the answer is larger than %d bytes",
                       where, PEER_MAX_RESPONSE);
    else if (cc != CURLE_OK)
        transport_failure(c, cc, where, total_ms, out);
    else if (status == 404)
        st_result_setf(out, ST_TRANSIENT,
                       "peer check of %s: the node there is not leading (HTTP 404)", where);
    else if (status != 200)
        st_result_setf(out, ST_TRANSIENT, "peer check of %s: HTTP %ld", where, status);
    else
        validate(&resp, where, expect_id, out);
    free(resp.body);
}
