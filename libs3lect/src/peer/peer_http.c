/* SPDX-License-Identifier: Apache-2.0 */
/* peer_http.c - the peer endpoint's HTTP layer: parsing one request head and
 * computing the answer (DESIGN §6). No I/O, no clocks except the long-poll
 * deadline, no allocation while parsing; every read is bounded by the length
 * passed in, so it can be fuzzed directly.
 *
 * Grammar accepted (RFC 9112, strict where it costs nothing):
 *   *( CRLF ) method SP origin-form SP "HTTP/1." DIGIT CRLF
 *   *( field-name ":" OWS field-value OWS CRLF ) CRLF
 * Line ends must be CRLF; obsolete line folding, bare CR or LF, NUL and other
 * control bytes are rejected. Transfer-Encoding is refused (a GET has no body
 * worth chunking); Content-Length up to PEER_MAX_BODY is accepted so that the
 * server can read and discard the body.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"
#include "s3lect.h"
#include "util.h"

/* Header lines per request; more → 431. */
#define PEER_MAX_FIELDS 100

void peer_view_clear(peer_view *v)
{
    if (!v)
        return;
    free(v->etag);
    free(v->body);
    free(v->released);
    memset(v, 0, sizeof *v);
}

/* ---- character classes ---- */

static int is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* Case-insensitive comparison of s[0..n) with the NUL-terminated lower-case word. */
static int ieq(const char *s, size_t n, const char *word)
{
    size_t i = 0;
    for (; i < n && word[i]; i++)
        if (lower((unsigned char)s[i]) != (unsigned char)word[i])
            return 0;
    return i == n && word[i] == '\0';
}

/* ---- percent-decoding ---- */

/* Decodes s[0..n) into out (cap bytes including the NUL). '+' becomes a
 * space when plus_is_space (query strings). Returns the decoded length, -1
 * for a malformed escape or an encoded NUL, -2 when it does not fit. */
static long pct_decode(const char *s, size_t n, int plus_is_space, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            if (n - i < 3)
                return -1;
            int hi = u_hexval((unsigned char)s[i + 1]), lo = u_hexval((unsigned char)s[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return -1;
            c = (unsigned char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (o + 1 >= cap)
            return -2;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return (long)o;
}

/* ---- request target: "/path?wait=ms&etag=..." ---- */

static int parse_wait(const char *v, size_t n, int64_t *out)
{
    if (n == 0)
        return -1;
    int64_t ms = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit((unsigned char)v[i]))
            return -1;
        if (ms < PEER_MAX_WAIT_MS)
            ms = ms * 10 + (v[i] - '0');
    }
    *out = ms > PEER_MAX_WAIT_MS ? PEER_MAX_WAIT_MS : ms;
    return 0;
}

/* Parses the query string q[0..n). Unknown parameters are ignored; for a
 * repeated one the last wins. Returns 0 or -400. */
static int parse_query(const char *q, size_t n, peer_request *req)
{
    size_t i = 0;
    while (i < n) {
        size_t end = i;
        while (end < n && q[end] != '&')
            end++;
        const char *kv = q + i;
        size_t kvlen = end - i;
        const char *eq = memchr(kv, '=', kvlen);
        size_t klen = eq ? (size_t)(eq - kv) : kvlen;
        const char *val = eq ? eq + 1 : kv + kvlen;
        size_t vlen = eq ? kvlen - klen - 1 : 0;
        char key[16];
        long kl = pct_decode(kv, klen, 1, key, sizeof key); /* < 0: not ours, ignored */
        if (kl >= 0 && strcmp(key, "wait") == 0) {
            char num[32];
            long nl = pct_decode(val, vlen, 1, num, sizeof num);
            if (nl == -1)
                return -400;
            if (nl == -2) /* very long digit string: validate it raw */
                nl = -1;
            if (nl >= 0 ? parse_wait(num, (size_t)nl, &req->wait_ms)
                        : parse_wait(val, vlen, &req->wait_ms))
                return -400;
        } else if (kl >= 0 && strcmp(key, "incarnation") == 0) {
            /* Hex only (what the record holds); anything else names no elector. */
            long il = pct_decode(val, vlen, 1, req->incarnation, sizeof req->incarnation);
            int ok = il > 0;
            for (long j = 0; ok && j < il; j++)
                ok = u_hexval((unsigned char)req->incarnation[j]) >= 0;
            if (!ok) {
                req->incarnation[0] = '\0';
                return -400;
            }
        } else if (kl >= 0 && strcmp(key, "process") == 0) {
            /* Hex of the token's length only; anything else names no
             * process (ignored: it only orders successors). */
            long pl = pct_decode(val, vlen, 1, req->process, sizeof req->process);
            int ok = pl == PEER_PROCESS_LEN;
            for (long j = 0; ok && j < pl; j++)
                ok = u_hexval((unsigned char)req->process[j]) >= 0;
            if (!ok)
                req->process[0] = '\0';
        } else if (kl >= 0 && strcmp(key, "proof") == 0) {
            /* The record's succKey: 32 lower-case hex digits, else none. */
            long pl = pct_decode(val, vlen, 1, req->proof, sizeof req->proof);
            int ok = pl == 32;
            for (long j = 0; ok && j < pl; j++)
                ok = (req->proof[j] >= '0' && req->proof[j] <= '9') ||
                     (req->proof[j] >= 'a' && req->proof[j] <= 'f');
            if (!ok)
                req->proof[0] = '\0';
        } else if (kl >= 0 && strcmp(key, "xfer") == 0) {
            req->xfer = vlen == 1 && val[0] == '1';
        } else if (kl >= 0 && strcmp(key, "etag") == 0) {
            /* An etag that does not fit cannot be ours: refuse it rather
             * than compare a truncated copy. */
            if (pct_decode(val, vlen, 1, req->etag, sizeof req->etag) < 0) {
                req->etag[0] = '\0';
                return -400;
            }
        }
        i = end + 1;
    }
    return 0;
}

/* Parses an origin-form target t[0..n): visible ASCII, starts with '/', no
 * fragment. Fills path (decoded), etag and wait_ms. Returns 0 or -400. */
static int parse_origin_form(const char *t, size_t n, peer_request *req)
{
    if (n == 0 || t[0] != '/')
        return -400;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c <= 0x20 || c >= 0x7f || c == '#')
            return -400;
    }
    const char *q = memchr(t, '?', n);
    size_t plen = q ? (size_t)(q - t) : n;
    if (pct_decode(t, plen, 0, req->path, sizeof req->path) < 0) {
        req->path[0] = '\0';
        return -400;
    }
    return q ? parse_query(q + 1, n - plen - 1, req) : 0;
}

int peer_parse_target(const char *target, peer_request *req)
{
    memset(req, 0, sizeof *req);
    memcpy(req->method, "GET", 4);
    if (!target)
        return 1;
    size_t n = strnlen(target, PEER_MAX_HEADER + 1);
    if (n > PEER_MAX_HEADER)
        return -400;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)target[i];
        if (c <= 0x20 || c >= 0x7f || c == '#')
            return -400;
    }
    int rc;
    if (n == 0)
        rc = 0;
    else if (target[0] == '/')
        rc = parse_origin_form(target, n, req);
    else if (target[0] == '?') /* query only: the caller names the path */
        rc = parse_query(target + 1, n - 1, req);
    else /* a bare query string, as most HTTP frameworks hand it over */
        rc = parse_query(target, n, req);
    return rc ? rc : 1;
}

/* ---- request head ---- */

/* Parses "METHOD SP target SP HTTP/1.x" in line[0..n). Sets *minor. */
static int parse_request_line(const char *line, size_t n, peer_request *req, int *minor)
{
    const char *sp1 = memchr(line, ' ', n);
    if (!sp1 || sp1 == line)
        return -400;
    size_t mlen = (size_t)(sp1 - line);
    if (mlen >= sizeof req->method)
        return -400;
    for (size_t i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)line[i]))
            return -400;
    memcpy(req->method, line, mlen);
    req->method[mlen] = '\0';

    const char *tgt = sp1 + 1;
    const char *end = line + n;
    const char *sp2 = memchr(tgt, ' ', (size_t)(end - tgt));
    if (!sp2)
        return -400;
    const char *ver = sp2 + 1;
    size_t vlen = (size_t)(end - ver);
    if (vlen != 8 || memcmp(ver, "HTTP/", 5) != 0 || !is_digit((unsigned char)ver[5]) ||
        ver[6] != '.' || !is_digit((unsigned char)ver[7]))
        return -400;
    if (ver[5] != '1')
        return -505;
    *minor = ver[7] - '0';
    return parse_origin_form(tgt, (size_t)(sp2 - tgt), req);
}

/* Trims optional whitespace (SP / HTAB) on both ends of v[0..*n). */
static const char *trim_ows(const char *v, size_t *n)
{
    while (*n && (v[0] == ' ' || v[0] == '\t')) {
        v++;
        (*n)--;
    }
    while (*n && (v[*n - 1] == ' ' || v[*n - 1] == '\t'))
        (*n)--;
    return v;
}

typedef struct head_state {
    int conn_close, conn_keep_alive;
    int have_length;
} head_state;

static int parse_field(const char *line, size_t n, peer_request *req, head_state *hs)
{
    const char *colon = memchr(line, ':', n);
    if (!colon || colon == line)
        return -400;
    size_t nlen = (size_t)(colon - line);
    for (size_t i = 0; i < nlen; i++)
        if (!is_tchar((unsigned char)line[i])) /* also rejects "Name :" and folding */
            return -400;
    size_t vlen = n - nlen - 1;
    const char *v = trim_ows(colon + 1, &vlen);
    for (size_t i = 0; i < vlen; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return -400;
    }
    if (ieq(line, nlen, "content-length")) {
        if (vlen == 0)
            return -400;
        /* A batch (POST) may carry up to 1 MiB (more: 413); other methods'
         * bodies are read and dropped, up to PEER_MAX_BODY (more: 400). */
        int post = strcmp(req->method, "POST") == 0;
        size_t limit = post ? PEER_MAX_BATCH_BODY : PEER_MAX_BODY;
        size_t len = 0;
        for (size_t i = 0; i < vlen; i++) {
            if (!is_digit((unsigned char)v[i]))
                return -400;
            if (len <= limit)
                len = len * 10 + (size_t)(v[i] - '0');
        }
        if (len > limit)
            return post ? -413 : -400;
        if (hs->have_length && len != req->content_length)
            return -400;
        hs->have_length = 1;
        req->content_length = len;
    } else if (ieq(line, nlen, "transfer-encoding")) {
        return -400;
    } else if (ieq(line, nlen, "connection")) {
        size_t i = 0;
        while (i < vlen) {
            size_t e = i;
            while (e < vlen && v[e] != ',')
                e++;
            size_t tlen = e - i;
            const char *tok = trim_ows(v + i, &tlen);
            if (ieq(tok, tlen, "close"))
                hs->conn_close = 1;
            else if (ieq(tok, tlen, "keep-alive"))
                hs->conn_keep_alive = 1;
            i = e + 1;
        }
    }
    return 0;
}

/* Finds the next CRLF in buf[from..lim). Returns its offset, or lim when
 * there is none; -1 for a bare CR or LF, or a NUL byte. */
static long find_crlf(const char *buf, size_t from, size_t lim)
{
    for (size_t i = from; i < lim; i++) {
        char c = buf[i];
        if (c == '\0' || c == '\n')
            return -1;
        if (c == '\r') {
            if (i + 1 == lim)
                return (long)lim; /* the LF may still come */
            return buf[i + 1] == '\n' ? (long)i : -1;
        }
    }
    return (long)lim;
}

int peer_parse_request(const char *buf, size_t len, peer_request *req)
{
    memset(req, 0, sizeof *req);
    if (!buf)
        return 0;
    size_t lim = len < PEER_MAX_HEADER ? len : PEER_MAX_HEADER;
    size_t pos = 0;
    /* Tolerate empty lines before the request line (RFC 9112 §2.2). */
    while (pos + 1 < lim && buf[pos] == '\r' && buf[pos + 1] == '\n')
        pos += 2;

    int minor = 1, have_line = 0, fields = 0, rc;
    head_state hs = {0};
    for (;;) {
        long eol = find_crlf(buf, pos, lim);
        if (eol < 0)
            return -400;
        if ((size_t)eol == lim)
            return len >= PEER_MAX_HEADER ? -431 : 0;
        size_t n = (size_t)eol - pos;
        const char *line = buf + pos;
        pos = (size_t)eol + 2;
        if (!have_line) {
            if ((rc = parse_request_line(line, n, req, &minor)) != 0)
                return rc;
            have_line = 1;
            continue;
        }
        if (n == 0)
            break;
        if (++fields > PEER_MAX_FIELDS)
            return -431;
        if ((rc = parse_field(line, n, req, &hs)) != 0)
            return rc;
    }
    req->header_len = pos;
    req->keep_alive = hs.conn_close ? 0 : minor >= 1 ? 1 : hs.conn_keep_alive;
    return 1;
}

/* ---- answering ---- */

static int set_answer(int status, const char *text, int *out_status, char **body)
{
    *out_status = status;
    *body = u_strdup(text);
    return *body ? 0 : S3LECT_ENOMEM;
}

static int same_etag(const peer_request *req, const peer_view *v)
{
    return req->etag[0] && v->etag && strcmp(req->etag, v->etag) == 0;
}

int peer_answer_early(const char *health_path, const peer_request *req, int allow_post, int *status,
                      char **body)
{
    *status = 500;
    *body = NULL;
    if (!health_path || strcmp(req->path, health_path) != 0)
        return set_answer(404, "{\"error\":\"not found\"}", status, body) ? -1 : 1;
    if (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0 ||
        (allow_post && strcmp(req->method, "POST") == 0))
        return 0;
    return set_answer(405,
                      allow_post ? "{\"error\":\"method not allowed: use GET, HEAD or POST\"}"
                                 : "{\"error\":\"method not allowed: use GET or HEAD\"}",
                      status, body)
               ? -1
               : 1;
}

int peer_should_hold(const peer_request *req, const peer_view *v)
{
    return v->leading && req->wait_ms > 0 && same_etag(req, v);
}

int peer_answer_view(peer_view *v, int *status, char **body)
{
    if (v->leading && v->body) {
        *status = 200;
        *body = v->body;
        v->body = NULL;
        return 0;
    }
    return set_answer(404, "{\"error\":\"this node is not the leader\"}", status, body);
}

/* ---- batch ---- */

void peer_batch_free(peer_batch *b)
{
    if (!b)
        return;
    free(b->e);
    memset(b, 0, sizeof *b);
}

/* A JSON number that is a whole number in [0, 2^53]. */
static int whole(const cJSON *n, int64_t *out)
{
    if (!cJSON_IsNumber(n))
        return 0;
    double d = n->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != (double)(int64_t)d)
        return 0;
    *out = (int64_t)d;
    return 1;
}

static int parse_entry(const cJSON *o, peer_batch_entry *e)
{
    if (!cJSON_IsObject(o))
        return -1;
    const cJSON *inc = cJSON_GetObjectItemCaseSensitive(o, "incarnation");
    const cJSON *term = cJSON_GetObjectItemCaseSensitive(o, "term");
    const cJSON *etag = cJSON_GetObjectItemCaseSensitive(o, "etag");
    if (!cJSON_IsString(inc) || !cJSON_IsString(etag) || !whole(term, &e->term))
        return -1;
    size_t il = strlen(inc->valuestring), el = strlen(etag->valuestring);
    if (il == 0 || il > PEER_INC_MAX || el >= sizeof e->etag)
        return -1;
    for (size_t i = 0; i < il; i++)
        if (u_hexval((unsigned char)inc->valuestring[i]) < 0)
            return -1;
    for (size_t i = 0; i < el; i++) {
        unsigned char c = (unsigned char)etag->valuestring[i];
        if (c < 0x20 || c == 0x7f)
            return -1;
    }
    memcpy(e->incarnation, inc->valuestring, il + 1);
    memcpy(e->etag, etag->valuestring, el + 1);
    /* Optional: the record's succKey (anything else reads as none). */
    const cJSON *proof = cJSON_GetObjectItemCaseSensitive(o, "proof");
    if (cJSON_IsString(proof) && strlen(proof->valuestring) == 32 &&
        strspn(proof->valuestring, "0123456789abcdef") == 32)
        memcpy(e->proof, proof->valuestring, 33);
    return 0;
}

int peer_parse_batch(const char *body, size_t len, peer_batch *out)
{
    memset(out, 0, sizeof *out);
    if (len > PEER_MAX_BATCH_BODY)
        return -413;
    if (!body || len == 0)
        return -400;
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root)
        return -400; /* malformed (cJSON gives no separate out-of-memory answer) */
    int rc = -400;
    const cJSON *wait = cJSON_GetObjectItemCaseSensitive(root, "wait");
    const cJSON *locks = cJSON_GetObjectItemCaseSensitive(root, "locks");
    int64_t w = 0;
    int n = cJSON_IsArray(locks) ? cJSON_GetArraySize(locks) : -1;
    if (!cJSON_IsObject(root) || !cJSON_IsNumber(wait) || n <= 0 || n > PEER_MAX_BATCH_LOCKS)
        goto done;
    /* A fraction or a huge wait is capped like GET's ?wait=; negative is wrong. */
    if (!(wait->valuedouble >= 0))
        goto done;
    w = wait->valuedouble >= PEER_MAX_WAIT_MS ? PEER_MAX_WAIT_MS : (int64_t)wait->valuedouble;
    out->e = calloc((size_t)n, sizeof *out->e);
    if (!out->e) {
        rc = -500;
        goto done;
    }
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, locks)
    {
        if (parse_entry(it, &out->e[i]) != 0)
            goto done;
        i++;
    }
    out->n = i;
    out->wait_ms = w;
    rc = 0;
done:
    cJSON_Delete(root);
    if (rc != 0)
        peer_batch_free(out);
    return rc;
}

char *peer_batch_answer(const peer_batch_item *items, size_t n)
{
    size_t cap = 16;
    for (size_t i = 0; i < n; i++)
        cap += 96 + strlen(items[i].incarnation) +
               (items[i].status == 200 && items[i].record ? strlen(items[i].record) : 0) +
               (items[i].status == 404 && items[i].released ? strlen(items[i].released) : 0);
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t o = 0;
    o += (size_t)snprintf(out + o, cap - o, "{\"locks\":[");
    for (size_t i = 0; i < n; i++) {
        const peer_batch_item *it = &items[i];
        int rec = it->status == 200 && it->record;
        int rel = it->status == 404 && it->released && !it->yield;
        o += (size_t)snprintf(
            out + o, cap - o, "%s{\"incarnation\":\"%s\",\"status\":%d%s%s%s%s%s}", i ? "," : "",
            it->incarnation, it->status, rec ? ",\"record\":" : "", rec ? it->record : "",
            it->status == 404 && it->yield ? ",\"yield\":true" : "", rel ? ",\"released\":" : "",
            rel ? it->released : "");
    }
    snprintf(out + o, cap - o, "]}");
    return out;
}

int peer_answer(const peer_source *src, const char *health_path, const peer_request *req,
                int *status, char **body)
{
    int early = peer_answer_early(health_path, req, 0, status, body);
    if (early)
        return early < 0 ? S3LECT_ENOMEM : 0;

    peer_view v = {0};
    int rc = src->view(src->ctx, &v);
    if (rc != 0) {
        peer_view_clear(&v);
        *status = 503;
        return rc;
    }
    /* Long poll: hold the answer while we lead and the follower already has
     * our current etag, until it changes, leadership ends or the wait ends. */
    if (v.leading && req->wait_ms > 0 && same_etag(req, &v)) {
        int64_t deadline = u_mono_ms() + req->wait_ms;
        while (v.leading && same_etag(req, &v)) {
            int w = src->wait(src->ctx, v.version, deadline);
            peer_view_clear(&v);
            if ((rc = src->view(src->ctx, &v)) != 0) {
                peer_view_clear(&v);
                *status = 503;
                return rc;
            }
            if (w != 1 || u_mono_ms() >= deadline)
                break;
        }
    }
    rc = peer_answer_view(&v, status, body);
    peer_view_clear(&v);
    return rc;
}
