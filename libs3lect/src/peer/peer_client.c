/* SPDX-License-Identifier: Apache-2.0 */
/* peer_client.c - the follower's check of the leader's endpoint (DESIGN §6):
 * GET https://{leaderAddr}{path}?wait=&etag= over one kept-alive libcurl
 * connection, verified against peer_ca with TLS >= 1.2, optionally with a
 * client certificate (mTLS).
 *
 * The transfer runs through a private multi handle and is polled every
 * PEER_ABORT_POLL_MS, so that a stop (the abort flag) ends even a long poll
 * within that period; the multi handle also keeps the connection between
 * checks. Every failure is ST_TRANSIENT: the caller falls back to S3. Each
 * failure is also sorted into a class (peer.h PEER_FAIL_*) and gets a message
 * that says what is wrong and what to check; the runtime counts the classes
 * and reports each once per PEER_FAIL_REPORT_MS. Messages never carry the
 * answer's body (only a sanitised, shortened leader id from it).
 */
#include <curl/curl.h>
#include <cjson/cJSON.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "crypto.h"
#include "http.h"
#include "peer.h"
#include "util.h"

#define PEER_ABORT_POLL_MS 50
/* PEER_MAX_RESPONSE (peer.h): a record is at most 64 KiB; the served body
 * adds etag and term. */

typedef struct pem_or_path {
    char *data; /* NUL-terminated copy */
    size_t len;
    int pem; /* 1: PEM bytes, 0: a file path */
} pem_or_path;

/* The answer's body, at most PEER_MAX_RESPONSE bytes (http.h). */
typedef http_body response;

struct peer_client {
    CURLM *multi;
    CURL *curl;
    pem_or_path ca, client_cert;
    char errbuf[CURL_ERROR_SIZE];
    char alert[160];            /* the last TLS alert the leader sent in this check ("" if none) */
    int cert_requested;         /* the leader asked for a client certificate (mTLS) */
    int last_fail;              /* PEER_FAIL_* of the last check */
    char pin[PEER_PIN_LEN + 1]; /* pinned leader key for the next checks ("" = none) */
    char used_pin[PEER_PIN_LEN + 1]; /* the pin of the last check sent */
    char inc[PEER_INC_MAX + 1];      /* the leader's incarnation, sent ("" = not sent) */
    char proof[33];                  /* the record's succKey for the next checks ("": none) */
    int xfer; /* the next checks tell the leader a transfer request is in its record */
    /* The check in flight (between begin and finish). */
    response resp;
    char *where, *addr, *path, *expect_id;
    int64_t wait_ms, timeout_ms;
    /* CA mode: the leader's certificate must name the server id the record
     * names (docs/peer.md "Whose answer counts"); each CA-mode check makes
     * its own connection (setup), so its certificate is that transfer's. */
    int id_done;       /* the identity of this check's server was judged */
    int id_result;     /* ID_* */
    char id_seen[200]; /* the names the certificate presents (sanitised) */
    int fresh_next;    /* make a new connection for the next check */
    /* A batch (peer_client_begin_batch): the body it posts and its headers. */
    char *post;
    struct curl_slist *hdrs;
};

enum { ID_OK = 0, ID_MISMATCH, ID_UNREADABLE, ID_UNKNOWN_CONN };

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
    int rc = http_global_init(err, errlen);
    if (rc)
        return rc;
    peer_client *c = calloc(1, sizeof *c);
    /* c->curl is made by the first check that needs it (ensure_curl):
     * zero-config followers check through their process's batches
     * (runtime/peer_hub.c) and never do, and an easy handle is several KiB
     * per elector (issue 44 item 4). */
    if (!c || (cfg && pp_set(&c->ca, cfg->peer_ca.data, cfg->peer_ca.len) != 0) ||
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

static void inflight_clear(peer_client *c)
{
    http_body_clear(&c->resp);
    free(c->where);
    free(c->addr);
    free(c->path);
    free(c->expect_id);
    c->where = c->addr = c->path = c->expect_id = NULL;
    free(c->post);
    c->post = NULL;
    curl_slist_free_all(c->hdrs);
    c->hdrs = NULL;
}

void peer_client_free(peer_client *c)
{
    if (!c)
        return;
    inflight_clear(c);
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
    if (c->curl)
        curl_easy_reset(c->curl); /* drop the handle's pointer to the old bytes */
    c->fresh_next = 1;            /* nothing verified under the old CA is reused */
    return pp_set(&c->ca, pem, len);
}

void peer_client_set_pin(peer_client *c, const char *pin)
{
    if (c)
        snprintf(c->pin, sizeof c->pin, "%s", pin && strlen(pin) == PEER_PIN_LEN ? pin : "");
}

void peer_client_set_proof(peer_client *c, const char *proof)
{
    if (c)
        snprintf(c->proof, sizeof c->proof, "%s",
                 proof && strlen(proof) == 32 && strspn(proof, "0123456789abcdef") == 32 ? proof
                                                                                         : "");
}

void peer_client_set_xfer(peer_client *c, int on)
{
    if (c)
        c->xfer = on != 0;
}

void peer_client_set_incarnation(peer_client *c, const char *inc)
{
    if (!c)
        return;
    c->inc[0] = '\0';
    size_t n = inc ? strnlen(inc, PEER_INC_MAX + 1) : 0;
    if (n == 0 || n > PEER_INC_MAX)
        return;
    for (size_t i = 0; i < n; i++)
        if (u_hexval((unsigned char)inc[i]) < 0)
            return; /* from the record: only hex goes into the URL */
    memcpy(c->inc, inc, n + 1);
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

/* libcurl's trace text, watched only for a TLS alert from the leader: with
 * TLS 1.3 a leader that refuses our client certificate says so in an alert
 * after the handshake, and the error text of the failed read that follows
 * often does not name it. Nothing here is logged or kept but that line. */
static int on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *ud)
{
    (void)h;
    peer_client *c = ud;
    static const char tag[] = "(IN), TLS alert, ", req[] = "(IN), TLS handshake, Request CERT";
    if (type != CURLINFO_TEXT || size < sizeof tag)
        return 0;
    if (memmem(data, size, req, sizeof req - 1))
        c->cert_requested = 1;
    const char *p = memmem(data, size, tag, sizeof tag - 1);
    if (!p)
        return 0;
    p += sizeof tag - 1;
    size_t n = size - (size_t)(p - data), o = 0;
    for (size_t i = 0; i < n && o + 1 < sizeof c->alert && p[i] != '\n' && p[i] != '\r'; i++)
        c->alert[o++] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
    while (o > 0 && (c->alert[o - 1] == ':' || c->alert[o - 1] == ' '))
        o--; /* "unknown CA (560):" */
    c->alert[o] = '\0';
    /* OpenSSL 3.0 has no name for certificate_required (116). */
    const char *num = strrchr(c->alert, '(');
    if (strncmp(c->alert, "unknown (", 9) == 0 && num && (atoi(num + 1) & 0xff) == 116)
        snprintf(c->alert, sizeof c->alert, "certificate required (116)");
    return 0;
}

/* ---- whose answer counts (CA mode) ---- */

/* Judges the server of this transfer once, when its answer begins: in CA
 * mode (no pinned key) its certificate must name the leader id the record
 * names. Returns 1 to go on, 0 to abort the transfer (c->id_result says
 * why). With a pinned key the key alone decides (libcurl checked it). */
static int judge_server(peer_client *c)
{
    c->id_done = 1;
    c->id_result = ID_OK;
    if (c->used_pin[0] || !c->expect_id)
        return 1;
    long nconn = 0;
    curl_easy_getinfo(c->curl, CURLINFO_NUM_CONNECTS, &nconn);
    if (nconn <= 0) {
        /* A reused connection: setup forbids it in CA mode, so this is
         * defence only -- nothing says whose it is. */
        c->id_result = ID_UNKNOWN_CONN;
        c->fresh_next = 1;
        return 0;
    }
    X509 *cert = peer_leaf_of_transfer(c->curl);
    if (!cert) {
        snprintf(c->id_seen, sizeof c->id_seen, "a certificate this node cannot read");
        c->id_result = ID_UNREADABLE;
        return 0;
    }
    int named = peer_cert_names_id(cert, c->expect_id, c->id_seen, sizeof c->id_seen);
    X509_free(cert);
    if (named)
        return 1;
    c->id_result = ID_MISMATCH;
    return 0;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
    (void)data;
    peer_client *c = ud;
    if (!c->id_done && !judge_server(c))
        return 0; /* aborts the transfer: the body is never read */
    return size * nmemb;
}

static void setup(peer_client *c, const char *url, int64_t total_ms, int64_t connect_ms,
                  response *resp)
{
    CURL *e = c->curl;
    curl_easy_reset(e);
    resp->max = PEER_MAX_RESPONSE;
    http_easy_common(e, url, (long)total_ms, (long)connect_ms, c->errbuf, resp);
    c->alert[0] = '\0';
    c->cert_requested = 0;
    curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, on_debug);
    curl_easy_setopt(e, CURLOPT_DEBUGDATA, c);
    curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTPS);
#endif
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (c->pin[0]) {
        /* Zero-config: the key the lock record names is the only trust
         * anchor (self-signed certificate, no name: docs/peer.md). */
        char pinned[sizeof "sha256//" + PEER_PIN_LEN];
        snprintf(pinned, sizeof pinned, "sha256//%s", c->pin);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
        curl_easy_setopt(e, CURLOPT_PINNEDPUBLICKEY, pinned);
    } else {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
        set_blob_opt(e, CURLOPT_CAINFO_BLOB, CURLOPT_CAINFO, &c->ca);
    }
    /* CA mode: the leader's certificate must name the record's holder, and
     * libcurl shows a certificate only on the connection a transfer makes.
     * Electors of one process share libcurl's pool, so a pooled connection
     * may be another client's: each CA-mode check makes its own connection
     * and closes it after (one TLS handshake per long poll), and so every
     * answer is judged by the certificate it came over. */
    if (!c->pin[0]) {
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    }
    /* A connection authenticated under one pin (or the CA) is never reused
     * under another: libcurl's reuse check does not compare pins. */
    if (strcmp(c->pin, c->used_pin) != 0 || c->fresh_next) {
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
        memcpy(c->used_pin, c->pin, sizeof c->pin);
        c->fresh_next = 0;
    }
    /* The certificate of each new connection, to check whose it is. */
    c->id_done = 0;
    c->id_result = ID_OK;
    c->id_seen[0] = '\0';
    curl_easy_setopt(e, CURLOPT_CERTINFO, c->pin[0] ? 0L : 1L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
    if (c->client_cert.data) {
        /* One PEM holds the certificate and its key. */
        curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
        set_blob_opt(e, CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERT, &c->client_cert);
        set_blob_opt(e, CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEY, &c->client_cert);
    }
}

/* Runs the transfer, checking *abort_flag between polls. Returns the
 * transfer's result, or CURLE_ABORTED_BY_CALLBACK when aborted. */
static CURLcode perform(peer_client *c, const volatile int *abort_flag)
{
    CURLcode result = CURLE_ABORTED_BY_CALLBACK;
    if (!c->multi && !(c->multi = curl_multi_init()))
        return CURLE_OUT_OF_MEMORY;
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

/* ---- failures ---- */

static const char *const fail_names[PEER_FAIL_NCLASSES] = {
    "",           "connect",  "timeout",   "tlsName", "tlsCa",  "tlsClientCert", "tls",
    "httpStatus", "tooLarge", "malformed", "other",   "tlsPin", "tlsId",
};

const char *peer_fail_name(int cls)
{
    return cls > 0 && cls < PEER_FAIL_NCLASSES ? fail_names[cls] : "";
}

int peer_fail_code(int cls)
{
    switch (cls) {
    case PEER_FAIL_TLS_NAME:
    case PEER_FAIL_TLS_CA:
    case PEER_FAIL_TLS:
    case PEER_FAIL_HTTP_STATUS:
    case PEER_FAIL_TOO_LARGE:
    case PEER_FAIL_MALFORMED:
    case PEER_FAIL_TLS_ID:
        return S3LECT_EINVAL; /* configuration: the wrong CA, name, address or path */
    case PEER_FAIL_TLS_CLIENT:
        return S3LECT_EAUTH; /* the leader refused our client certificate */
    case PEER_FAIL_OTHER:
        return S3LECT_EIO;
    default:
        return S3LECT_ETRANSIENT; /* connect, timeout, tlsPin (a stale record) */
    }
}

int peer_fail_note(peer_fail_stats *s, int cls, int64_t now, int64_t window, uint64_t *suppressed)
{
    *suppressed = 0;
    if (cls <= PEER_FAIL_NONE || cls >= PEER_FAIL_NCLASSES)
        return 0;
    s->count[cls]++;
    if (s->reported[cls] && now - s->reported_at[cls] < window) {
        s->suppressed[cls]++;
        return 0;
    }
    *suppressed = s->suppressed[cls];
    s->suppressed[cls] = 0;
    s->reported[cls] = 1;
    s->reported_at[cls] = now;
    return 1;
}

int peer_client_last_failure(const peer_client *c)
{
    return c ? c->last_fail : PEER_FAIL_NONE;
}

/* Copies at most 64 printable ASCII characters of a value from the answer
 * (attacker-controlled) for a message; anything else becomes '?'. */
static void sanitize(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (; in && *in && o + 4 < cap && o < 64; in++)
        out[o++] = (*in >= 0x20 && *in < 0x7f) ? *in : '?';
    if (in && *in && o + 4 <= cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* Finds an alert the leader sent during (or right after, with TLS 1.3) the
 * handshake in libcurl's error text. Alerts about certificates mean it did
 * not accept ours (mTLS). */
static int tls_alert_class(const char *why, const char *alert)
{
    char low[CURL_ERROR_SIZE + 200];
    /* alert: the alert's description ("unknown CA (560):"); why: libcurl's
     * error text, which may name it too ("tlsv1 alert unknown ca"). */
    snprintf(low, sizeof low, "%s%s %s", alert[0] ? "alert " : "", alert, why);
    for (char *p = low; *p; p++)
        *p = *p == '_' ? ' ' : (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : *p;
    if (!strstr(low, "alert"))
        return PEER_FAIL_NONE;
    /* The trace gives the alert as "<description> (<level << 8 | code>):";
     * older OpenSSL names certificate_required (116) "unknown". */
    const char *num = alert[0] ? strrchr(alert, '(') : NULL;
    if (num) {
        switch (atoi(num + 1) & 0xff) {
        case 42:  /* bad_certificate */
        case 43:  /* unsupported_certificate */
        case 44:  /* certificate_revoked */
        case 45:  /* certificate_expired */
        case 46:  /* certificate_unknown */
        case 48:  /* unknown_ca */
        case 49:  /* access_denied */
        case 116: /* certificate_required */
            return PEER_FAIL_TLS_CLIENT;
        default:
            break;
        }
    }
    static const char *const cert_alerts[] = {
        "certificate required",    "bad certificate",     "unknown ca",
        "certificate unknown",     "certificate expired", "certificate revoked",
        "unsupported certificate", "access denied"};
    for (size_t i = 0; i < sizeof cert_alerts / sizeof cert_alerts[0]; i++)
        if (strstr(low, cert_alerts[i]))
            return PEER_FAIL_TLS_CLIENT;
    return PEER_FAIL_TLS;
}

static int fail(st_result *out, int cls, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(st_result *out, int cls, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    st_result_setf(out, ST_TRANSIENT, "%s", msg);
    return cls;
}

/* Classifies a failed transfer. addr is the leader's host:port. */
static int transport_failure(peer_client *c, CURLcode cc, const char *addr, int64_t wait_ms,
                             int64_t timeout_ms, int has_client_cert, st_result *out)
{
    const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc);
    int alert = tls_alert_class(why, c->alert);
    /* Prefer the leader's alert to a follow-up error text ("getpeername() failed"). */
    char whybuf[CURL_ERROR_SIZE + 200];
    if (c->alert[0]) {
        snprintf(whybuf, sizeof whybuf, "TLS alert from the leader: %s", c->alert);
        why = whybuf;
    }
    switch (cc) {
    case CURLE_OPERATION_TIMEDOUT: {
        long status = 0, new_conns = 0;
        curl_off_t appconnect = 0, got = 0;
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(c->curl, CURLINFO_NUM_CONNECTS, &new_conns);
        curl_easy_getinfo(c->curl, CURLINFO_APPCONNECT_TIME_T, &appconnect);
        curl_easy_getinfo(c->curl, CURLINFO_SIZE_DOWNLOAD_T, &got);
        if (new_conns > 0 && appconnect == 0)
            return fail(out, PEER_FAIL_TIMEOUT,
                        "leader %s did not complete a TLS handshake within %lld ms "
                        "(peer_timeout): check that its --addr is reachable from this node and "
                        "serves the peer endpoint, or raise peer_timeout",
                        addr, (long long)timeout_ms);
        if (status != 0 || got > 0)
            return fail(out, PEER_FAIL_TIMEOUT,
                        "leader %s started an answer (%lld bytes) but did not finish it within "
                        "%lld ms (long-poll wait %lld ms + peer_timeout): a stalled or very slow "
                        "sender; check the network to the leader and what listens at its --addr",
                        addr, (long long)got, (long long)(wait_ms + timeout_ms),
                        (long long)wait_ms);
        return fail(out, PEER_FAIL_TIMEOUT,
                    "leader %s accepted the check but sent no answer within %lld ms (long-poll "
                    "wait %lld ms + peer_timeout); check that its --addr is an s3lect peer "
                    "endpoint, or raise peer_timeout",
                    addr, (long long)(wait_ms + timeout_ms), (long long)wait_ms);
    }
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return fail(out, PEER_FAIL_CONNECT,
                    "cannot connect to leader %s (%s); check that its --addr is reachable from "
                    "this node and its peer endpoint is up (a leader that just stopped or "
                    "crashed shows this too)",
                    addr, why);
    case CURLE_PEER_FAILED_VERIFICATION: {
        /* libcurl checks the name itself after the chain verified; its text
         * says "... target host name ..." (OpenSSL, GnuTLS backends). */
        if (strstr(why, "host name") || strstr(why, "subject name") || strstr(why, "common name"))
            return fail(out, PEER_FAIL_TLS_NAME,
                        "the TLS certificate of leader %s does not match its name (%s); check "
                        "that the leader's certificate (peer_cert, --peer-cert) lists the host "
                        "of its --addr in subjectAltName",
                        addr, why);
        return fail(out, PEER_FAIL_TLS_CA,
                    "the TLS certificate of leader %s was not accepted (%s); check that "
                    "peer_ca (--peer-ca) holds the CA that signed it, and its validity dates",
                    addr, why);
    }
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        return fail(out, PEER_FAIL_TLS_PIN,
                    "the public key of leader %s is not the one its lock record names "
                    "(peerKeySha256): another process answers at its --addr, or the record is "
                    "stale (a leader restarted on the same address shows this until its next "
                    "renewal); check that every node advertises an address of its own",
                    addr);
    case CURLE_SSL_CACERT_BADFILE:
        return fail(out, PEER_FAIL_TLS_CA,
                    "cannot load the CA bundle to verify leader %s (%s); check peer_ca "
                    "(--peer-ca): PEM text or a readable PEM file",
                    addr, why);
    case CURLE_SSL_CERTPROBLEM:
        return fail(out, PEER_FAIL_TLS_CLIENT,
                    "cannot use this node's client certificate for leader %s (%s); check "
                    "peer_client_cert (--peer-client-cert: certificate and key in one PEM)",
                    addr, why);
    default:
        break;
    }
    long status = 0;
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    if (alert == PEER_FAIL_NONE && c->cert_requested && status == 0 &&
        (cc == CURLE_SSL_CONNECT_ERROR || cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR ||
         cc == CURLE_GOT_NOTHING))
        /* With TLS 1.3 the leader judges our certificate after the handshake;
         * its alert can be lost when we write before reading it and the
         * connection is already reset. */
        return fail(out, PEER_FAIL_TLS_CLIENT,
                    has_client_cert
                        ? "leader %s asked for a client certificate (mTLS) and closed the "
                          "connection without an answer: it most likely refused this node's "
                          "certificate; check that peer_client_cert (--peer-client-cert) is "
                          "signed by a CA in the leader's peer_ca"
                        : "leader %s requires a client certificate (mTLS) and closed the "
                          "connection without an answer; check that this node has "
                          "peer_client_cert (--peer-client-cert) signed by a CA in the leader's "
                          "peer_ca",
                    addr);
    if (alert == PEER_FAIL_TLS_CLIENT)
        return fail(out, PEER_FAIL_TLS_CLIENT,
                    has_client_cert
                        ? "leader %s refused this node's client certificate (%s); check that "
                          "peer_client_cert (--peer-client-cert) is signed by a CA in the "
                          "leader's peer_ca (mTLS)"
                        : "leader %s requires a client certificate (mTLS) and refused this node "
                          "(%s); check that this node has peer_client_cert "
                          "(--peer-client-cert) signed by a CA in the leader's peer_ca",
                    addr, why);
    if (cc == CURLE_SSL_CONNECT_ERROR && alert == PEER_FAIL_NONE &&
        (strstr(why, "reset by peer") || strstr(why, "Broken pipe") ||
         strstr(why, "SSL_ERROR_SYSCALL") || strstr(why, "unexpected eof") ||
         strstr(why, "Connection refused")))
        /* The connection went away under the handshake: a network event (a
         * leader that was just killed), not a TLS disagreement. */
        return fail(out, PEER_FAIL_CONNECT,
                    "the connection to leader %s closed during the TLS handshake (%s); check "
                    "that its --addr is reachable from this node and its peer endpoint is up (a "
                    "leader that just stopped or crashed shows this too)",
                    addr, why);
    switch (cc) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_USE_SSL_FAILED:
        return fail(out, PEER_FAIL_TLS,
                    "TLS handshake with leader %s failed (%s); check that its --addr serves the "
                    "s3lect peer endpoint over HTTPS (TLS 1.2 or newer)",
                    addr, why);
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        if (alert == PEER_FAIL_TLS)
            return fail(out, PEER_FAIL_TLS,
                        "TLS with leader %s failed (%s); check its peer_cert "
                        "and this node's peer_ca",
                        addr, why);
        return fail(out, PEER_FAIL_CONNECT,
                    "the connection to leader %s closed before a complete answer (%s); check "
                    "the network to the leader (a leader that just stopped or crashed shows "
                    "this too)",
                    addr, why);
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_HTTP2:
    case CURLE_BAD_CONTENT_ENCODING:
        return fail(out, PEER_FAIL_MALFORMED,
                    "leader %s sent an answer that is not HTTP/1.1 (%s); check that its --addr "
                    "is an s3lect peer endpoint",
                    addr, why);
    default:
        return fail(out, PEER_FAIL_OTHER, "peer check of leader %s failed: %s", addr, why);
    }
}

static int validate(const response *resp, const char *addr, const char *expect_id, st_result *out)
{
    cJSON *root = cJSON_ParseWithLength(resp->body ? resp->body : "", resp->len);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "leaderID");
    const cJSON *etag = cJSON_GetObjectItemCaseSensitive(root, "etag");
    int cls = PEER_FAIL_NONE;
    char got[80], want[80];
    if (!cJSON_IsObject(root))
        cls = fail(out, PEER_FAIL_MALFORMED,
                   "the answer of leader %s is not a JSON object (%zu bytes); check that its "
                   "--addr and peer_health_path name an s3lect peer endpoint",
                   addr, resp->len);
    else if (!cJSON_IsString(id))
        cls = fail(out, PEER_FAIL_MALFORMED,
                   "the answer of leader %s has no leaderID; check that its --addr and "
                   "peer_health_path name an s3lect peer endpoint",
                   addr);
    else if (expect_id && strcmp(id->valuestring, expect_id) != 0) {
        sanitize(id->valuestring, got, sizeof got);
        sanitize(expect_id, want, sizeof want);
        cls = fail(out, PEER_FAIL_MALFORMED,
                   "the node at %s is leader '%s', not '%s' as the lock record says; check that "
                   "every node advertises its own --addr and that it serves this lock",
                   addr, got, want);
    } else if (!cJSON_IsString(etag) || !etag->valuestring[0]) {
        /* The leader the record names answers, but without an etag: a Go
         * s3lect endpoint (or another that cannot long-poll). Not a failure:
         * OK without an etag tells the engine to follow this leader through
         * the store at the stable (infrequent) period. */
        if (st_result_set_body(out, resp->body, resp->len) != 0)
            cls = fail(out, PEER_FAIL_OTHER, "peer check of leader %s: out of memory", addr);
        else
            out->outcome = ST_OK;
    } else if (st_result_set_body(out, resp->body, resp->len) != 0 ||
               st_result_set_etag(out, etag->valuestring) != 0)
        cls = fail(out, PEER_FAIL_OTHER, "peer check of leader %s: out of memory", addr);
    else
        out->outcome = ST_OK;
    cJSON_Delete(root);
    return cls;
}

/* The check's target: a leader address that is host:port (else the
 * connect class, out filled, -1 - class), the default path, the wait
 * clamped to PEER_MAX_WAIT_MS and a default timeout; sets c->where. */
static int target(peer_client *c, const char *addr, const char **path, int64_t *wait_ms,
                  int64_t *timeout_ms, st_result *out)
{
    if (!*path || (*path)[0] != '/')
        *path = CFG_DEFAULT_PEER_HEALTH_PATH;
    if (!valid_addr(addr)) {
        char a[80];
        sanitize(addr ? addr : "", a, sizeof a);
        return -1 - fail(out, PEER_FAIL_CONNECT,
                         "the leader's address '%s' in the lock record is not host:port; check "
                         "the leader's --addr (server_addr)",
                         a);
    }
    if (*wait_ms < 0)
        *wait_ms = 0;
    if (*wait_ms > PEER_MAX_WAIT_MS)
        *wait_ms = PEER_MAX_WAIT_MS;
    if (*timeout_ms <= 0)
        *timeout_ms = 3000;
    c->where = u_asprintf("https://%s%s", addr, *path);
    return PEER_FAIL_NONE;
}

static char process_token[PEER_PROCESS_LEN + 1];
static pthread_once_t process_token_once = PTHREAD_ONCE_INIT;

static void make_process_token(void)
{
    uint8_t rnd[PEER_PROCESS_LEN / 2];
    if (cr_random(rnd, sizeof rnd) != 0) {
        /* Not a secret (it orders successors): unique enough without one. */
        uint64_t a[2] = {(uint64_t)u_mono_ms(), (uint64_t)getpid()};
        memcpy(rnd, a, sizeof rnd);
    }
    cr_hex(rnd, sizeof rnd, process_token);
}

const char *peer_process_token(void)
{
    pthread_once(&process_token_once, make_process_token);
    return process_token;
}

/* The easy handle, made on first use (peer_client_new says why); 0 or -1. */
static int ensure_curl(peer_client *c)
{
    if (!c->curl)
        c->curl = curl_easy_init();
    return c->curl ? 0 : -1;
}

/* Prepares the check on c->curl. Returns PEER_FAIL_NONE with c->curl ready,
 * or -1 - class when it ended at once (out filled). */
static int begin(peer_client *c, const char *addr, const char *path, const char *etag,
                 int64_t wait_ms, int64_t timeout_ms, const char *expect_id, st_result *out)
{
    memset(out, 0, sizeof *out);
    inflight_clear(c);
    if (ensure_curl(c) != 0)
        return -1 - fail(out, PEER_FAIL_OTHER, "peer check of leader %s: out of memory", addr);
    int rc = target(c, addr, &path, &wait_ms, &timeout_ms, out);
    if (rc != PEER_FAIL_NONE)
        return rc;
    char *url = NULL;
    /* "?incarnation=" names the elector on a shared listener (hex only). */
    const char *isep = c->inc[0] ? "?incarnation=" : "", *inc = c->inc;
    if (c->where && wait_ms > 0 && etag && *etag) {
        char *eetag = curl_easy_escape(c->curl, etag, 0);
        url = eetag
                  ? u_asprintf("%s%s%s%swait=%lld&etag=%s&process=%s%s%s%s", c->where, isep, inc,
                               inc[0] ? "&" : "?", (long long)wait_ms, eetag, peer_process_token(),
                               c->proof[0] ? "&proof=" : "", c->proof, c->xfer ? "&xfer=1" : "")
                  : NULL;
        curl_free(eetag);
    } else if (c->where) {
        url = u_asprintf("%s%s%s%sprocess=%s%s%s%s", c->where, isep, inc, inc[0] ? "&" : "?",
                         peer_process_token(), c->proof[0] ? "&proof=" : "", c->proof,
                         c->xfer ? "&xfer=1" : "");
        wait_ms = 0;
    }
    c->addr = u_strdup(addr);
    c->path = u_strdup(path);
    c->expect_id = expect_id ? u_strdup(expect_id) : NULL;
    c->wait_ms = wait_ms;
    c->timeout_ms = timeout_ms;
    if (!url || !c->addr || !c->path || (expect_id && !c->expect_id)) {
        free(url);
        inflight_clear(c);
        return -1 - fail(out, PEER_FAIL_OTHER, "peer check of leader %s: out of memory", addr);
    }
    setup(c, url, wait_ms + timeout_ms, timeout_ms, &c->resp);
    free(url);
    return PEER_FAIL_NONE;
}

/* Classifies the finished transfer (cc) of the check begin prepared. */
int peer_failure_kind(int cls)
{
    if (cls == PEER_FAIL_NONE)
        return ST_PEER_OK;
    return cls == PEER_FAIL_CONNECT || cls == PEER_FAIL_TIMEOUT ? ST_PEER_UNREACHABLE
                                                                : ST_PEER_FAILED;
}

/* A "not the leader" answer (docs/peer.md "One successor"): "yield":true
 * (another follower was named to take over first) sets out->peer_yield; the
 * released record handed to the successor makes out that record, as if read
 * from the store (ST_OK, peer_released). */
static void not_leader_answer(const char *body, size_t len, st_result *out)
{
    cJSON *o = cJSON_ParseWithLength(body, len);
    char *rb = NULL, *re = NULL;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "yield")))
        out->peer_yield = 1;
    else if (peer_released_record(cJSON_GetObjectItemCaseSensitive(o, "released"), &rb, &re) &&
             st_result_set_body(out, rb, strlen(rb)) == 0 && st_result_set_etag(out, re) == 0) {
        out->outcome = ST_OK;
        out->peer_released = 1;
    }
    free(rb);
    free(re);
    cJSON_Delete(o);
}

static int finish(peer_client *c, CURLcode cc, int aborted, st_result *out)
{
    const char *addr = c->addr, *path = c->path;
    response *resp = &c->resp;
    long status = 0;
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    out->http_status = (int)status;
    int cls = PEER_FAIL_NONE;
    if (cc != CURLE_OK && aborted)
        /* A stop interrupted the check: not a failure of the leader. */
        st_result_setf(out, ST_TRANSIENT, "peer check of %s: stopped", c->where);
    else if (cc == CURLE_WRITE_ERROR && c->id_result == ID_UNKNOWN_CONN)
        /* Not this leader's fault: the next check makes its own connection;
         * the store is read meanwhile. Not a failure. */
        st_result_setf(out, ST_TRANSIENT,
                       "peer check of %s: a reused connection of unknown origin (not used)",
                       c->where);
    else if (cc == CURLE_WRITE_ERROR && c->id_result != ID_OK) {
        char want[80];
        sanitize(c->expect_id, want, sizeof want);
        cls = fail(out, PEER_FAIL_TLS_ID,
                   "the TLS certificate at leader %s presents %s, not the server id '%s' the lock "
                   "record names: its answer does not count (another process answers at that "
                   "address, or the leader's certificate does not name its id); check that each "
                   "node's peer_cert (--peer-cert) names its own --id (CN or a DNS/URI "
                   "subjectAltName) and that every node advertises an address of its own",
                   addr, c->id_seen, want);
    } else if (cc == CURLE_WRITE_ERROR && resp->too_large)
        cls = fail(out, PEER_FAIL_TOO_LARGE,
                   "the answer of leader %s is larger than %d bytes: not an s3lect peer "
                   "endpoint; check its --addr and peer_health_path",
                   addr, PEER_MAX_RESPONSE);
    else if (cc != CURLE_OK)
        cls = transport_failure(c, cc, addr, c->wait_ms, c->timeout_ms, c->client_cert.data != NULL,
                                out);
    else if (status == 404 && resp->body && strstr(resp->body, "not the leader")) {
        /* The endpoint's own answer that this node does not lead (now): how a
         * long poll learns of a release. Not a failure. */
        st_result_setf(out, ST_TRANSIENT,
                       "peer check of %s: the node there is not leading (HTTP 404)", c->where);
        not_leader_answer(resp->body, resp->len, out);
    } else if (status != 200)
        cls = fail(out, PEER_FAIL_HTTP_STATUS,
                   "leader %s answered HTTP %ld to GET %s; check peer_health_path (the same on "
                   "every node; default /health/leadership) and that its --addr is an s3lect "
                   "peer endpoint",
                   addr, status, path);
    else
        cls = validate(resp, addr, c->expect_id, out);
    inflight_clear(c);
    return cls;
}

void *peer_client_begin(peer_client *c, const char *addr, const char *path, const char *etag,
                        int64_t wait_ms, int64_t timeout_ms, const char *expect_id, st_result *out)
{
    int rc = begin(c, addr, path, etag, wait_ms, timeout_ms, expect_id, out);
    if (rc < 0) {
        c->last_fail = -1 - rc;
        return NULL;
    }
    return c->curl;
}

void peer_client_finish(peer_client *c, int curl_code, int aborted, st_result *out)
{
    c->last_fail = finish(c, (CURLcode)curl_code, aborted, out);
}

void peer_client_check(peer_client *c, const char *addr, const char *path, const char *etag,
                       int64_t wait_ms, int64_t timeout_ms, const char *expect_id,
                       const volatile int *abort_flag, st_result *out)
{
    if (!peer_client_begin(c, addr, path, etag, wait_ms, timeout_ms, expect_id, out))
        return;
    CURLcode cc = perform(c, abort_flag);
    int aborted = abort_flag && __atomic_load_n(abort_flag, __ATOMIC_ACQUIRE);
    peer_client_finish(c, cc, aborted, out);
}

/* ---- batched checks ---- */

void *peer_client_begin_batch(peer_client *c, const char *addr, const char *path, char *body,
                              size_t body_len, size_t n, int64_t wait_ms, int64_t timeout_ms,
                              st_result *out)
{
    memset(out, 0, sizeof *out);
    inflight_clear(c);
    c->post = body;
    c->last_fail = PEER_FAIL_NONE;
    if (ensure_curl(c) != 0) {
        c->last_fail = fail(out, PEER_FAIL_OTHER, "peer check of leader %s: out of memory", addr);
        inflight_clear(c);
        return NULL;
    }
    int rc = target(c, addr, &path, &wait_ms, &timeout_ms, out);
    if (rc != PEER_FAIL_NONE) {
        c->last_fail = -1 - rc;
        inflight_clear(c);
        return NULL;
    }
    c->addr = u_strdup(addr);
    c->path = u_strdup(path);
    c->wait_ms = wait_ms;
    c->timeout_ms = timeout_ms;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    /* No "Expect: 100-continue" round trip before the body. */
    struct curl_slist *h2 = h ? curl_slist_append(h, "Expect:") : NULL;
    c->hdrs = h2 ? h2 : h;
    if (!body || !c->where || !c->addr || !c->path || !h2 || !c->pin[0]) {
        c->last_fail = fail(out, PEER_FAIL_OTHER,
                            c->pin[0] ? "peer check of leader %s: out of memory"
                                      : "peer check of leader %s: a batch needs a pinned key",
                            addr);
        inflight_clear(c);
        return NULL;
    }
    char *url = u_asprintf("%s?process=%s", c->where, peer_process_token());
    if (!url) {
        c->last_fail = fail(out, PEER_FAIL_OTHER, "peer check of leader %s: out of memory", addr);
        inflight_clear(c);
        return NULL;
    }
    setup(c, url, wait_ms + timeout_ms, timeout_ms, &c->resp);
    free(url);
    /* Up to one record per entry. */
    size_t max = n < PEER_BATCH_MAX_ANSWER / PEER_MAX_RESPONSE ? (n ? n : 1) * PEER_MAX_RESPONSE
                                                               : PEER_BATCH_MAX_ANSWER;
    c->resp.max = max;
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->hdrs);
    curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, c->post);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    return c->curl;
}

int peer_client_finish_batch(peer_client *c, int curl_code, const peer_batch_lock *ents, size_t n,
                             peer_batch_result *ans, st_result *out)
{
    memset(out, 0, sizeof *out);
    CURLcode cc = (CURLcode)curl_code;
    const char *addr = c->addr ? c->addr : "?";
    response *resp = &c->resp;
    long status = 0;
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    out->http_status = (int)status;
    int cls = PEER_FAIL_NONE, rv = PEER_BATCH_FAILED;
    char why[120] = "";
    if (cc == CURLE_WRITE_ERROR && resp->too_large)
        cls = fail(out, PEER_FAIL_TOO_LARGE,
                   "the batch answer of leader %s is larger than %zu bytes: not an s3lect peer "
                   "endpoint; check its --addr and peer_health_path",
                   addr, resp->max);
    else if (cc != CURLE_OK)
        cls = transport_failure(c, cc, addr, c->wait_ms, c->timeout_ms, 0, out);
    else if (status == 404 || status == 405)
        rv = PEER_BATCH_UNSUPPORTED; /* a Go s3lect endpoint, an older s3lect: single checks */
    else if (status != 200)
        cls = fail(out, PEER_FAIL_HTTP_STATUS,
                   "leader %s answered HTTP %ld to a batched check (POST %s); check "
                   "peer_health_path (the same on every node) and that its --addr is an s3lect "
                   "peer endpoint",
                   addr, status, c->path ? c->path : "");
    else if (peer_batch_read(resp->body, resp->len, ents, n, ans, why, sizeof why) != 0 &&
             strcmp(why, PEER_BATCH_NONE_ANSWERED) == 0)
        /* Not malformed (issue 38): an older leader answered so when its
         * leadership changed and came back while it made the answer. */
        cls = fail(out, PEER_FAIL_OTHER,
                   "leader %s answered the batched check with no entry (its leadership changed "
                   "while it answered); reading the store meanwhile",
                   addr);
    else if (why[0])
        cls = fail(out, PEER_FAIL_MALFORMED,
                   "the batch answer of leader %s is malformed (%s): no entry of it counts; check "
                   "that its --addr is an s3lect peer endpoint and that every node advertises "
                   "an address of its own",
                   addr, why);
    else
        rv = PEER_BATCH_ANSWERED;
    c->last_fail = cls;
    inflight_clear(c);
    return rv;
}
