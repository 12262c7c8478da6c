/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_peer_request.c - the peer endpoint's request parser (peer_http.c).
 *
 * Properties:
 * - peer_parse_request never crashes and never reads past len (every call
 *   gets a buffer of exactly len bytes, so ASan sees a read past the end);
 * - it returns 1, 0 (need more), -400, -413 (a POST body over 1 MiB), -431 or -505;
 * - on 1: header_len <= len and <= PEER_MAX_HEADER, the head ends with
 *   CRLF CRLF, the fields are NUL-terminated inside their arrays, the method
 *   is a non-empty token, the path starts with '/', wait_ms is within
 *   [0, PEER_MAX_WAIT_MS], keep_alive is 0 or 1;
 * - incremental parsing is consistent: a prefix of a complete head returns
 *   0; the head alone returns 1 with the same fields; for an erroneous input
 *   every prefix returns 0 or the same error (a server reading bytes as they
 *   come decides the same as one that got them all at once);
 * - peer_parse_target on the request's target gives the same path, etag and
 *   wait; on any NUL-terminated string it returns 1 or -400.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "peer.h"

static int parse_copy(const uint8_t *data, size_t n, peer_request *req)
{
    char *b = malloc(n ? n : 1);
    FUZZ_CHECK(b != NULL, "oom");
    memcpy(b, data, n);
    int rc = peer_parse_request(b, n, req);
    free(b);
    return rc;
}

static int terminated(const char *f, size_t cap)
{
    return memchr(f, '\0', cap) != NULL;
}

static void same_request(const peer_request *a, const peer_request *b, const char *what)
{
    FUZZ_CHECK(strcmp(a->method, b->method) == 0 && strcmp(a->path, b->path) == 0 &&
                   strcmp(a->etag, b->etag) == 0 && strcmp(a->incarnation, b->incarnation) == 0 &&
                   a->wait_ms == b->wait_ms && a->keep_alive == b->keep_alive &&
                   a->header_len == b->header_len && a->content_length == b->content_length,
               "%s: parsed differently", what);
}

static void check_prefix(const uint8_t *data, size_t k, int full, const peer_request *freq)
{
    peer_request p;
    int rc = parse_copy(data, k, &p);
    if (full == 1) {
        if (k < freq->header_len)
            FUZZ_CHECK(rc == 0, "prefix of %zu of a %zu-byte head returned %d", k, freq->header_len,
                       rc);
        else
            FUZZ_CHECK(rc == 1, "%zu bytes holding the whole head returned %d", k, rc);
        if (rc == 1)
            same_request(&p, freq, "head plus fewer trailing bytes");
    } else {
        FUZZ_CHECK(rc == 0 || rc == full, "prefix of %zu bytes returned %d, the whole input %d", k,
                   rc, full);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    peer_request req;
    int rc = parse_copy(data, size, &req);
    FUZZ_CHECK(rc == 1 || rc == 0 || rc == -400 || rc == -413 || rc == -431 || rc == -505,
               "returned %d", rc);
    FUZZ_CHECK(terminated(req.method, sizeof req.method) && terminated(req.path, sizeof req.path) &&
                   terminated(req.etag, sizeof req.etag) &&
                   terminated(req.incarnation, sizeof req.incarnation),
               "a field is not NUL-terminated");
    if (rc == 1) {
        size_t h = req.header_len;
        FUZZ_CHECK(h <= size && h <= PEER_MAX_HEADER && h >= 4, "header_len %zu of %zu", h, size);
        FUZZ_CHECK(memcmp(data + h - 4, "\r\n\r\n", 4) == 0, "head does not end with CRLFCRLF");
        FUZZ_CHECK(req.method[0] != '\0', "empty method");
        FUZZ_CHECK(req.path[0] == '/', "path \"%s\" does not start with '/'", req.path);
        FUZZ_CHECK(req.wait_ms >= 0 && req.wait_ms <= PEER_MAX_WAIT_MS, "wait_ms %lld",
                   (long long)req.wait_ms);
        FUZZ_CHECK(req.keep_alive == 0 || req.keep_alive == 1, "keep_alive %d", req.keep_alive);
        FUZZ_CHECK(req.content_length <=
                       (strcmp(req.method, "POST") == 0 ? PEER_MAX_BATCH_BODY : PEER_MAX_BODY),
                   "content_length %zu", req.content_length);
    } else if (rc == 0) {
        FUZZ_CHECK(size < PEER_MAX_HEADER, "needs more after %zu bytes", size);
    }

    /* Prefixes: all of them for short inputs, a sample otherwise. */
    if (size <= 200) {
        for (size_t k = 0; k < size; k++)
            check_prefix(data, k, rc, &req);
    } else {
        size_t ks[12] = {0, size - 1, size / 2, size / 3};
        size_t nk = 4;
        if (rc == 1 && req.header_len > 0) {
            ks[nk++] = req.header_len - 1;
            ks[nk++] = req.header_len;
        }
        uint32_t h = 2166136261u; /* FNV-1a of the input picks the rest */
        for (size_t i = 0; i < size; i++)
            h = (h ^ data[i]) * 16777619u;
        while (nk < sizeof ks / sizeof ks[0]) {
            h = h * 1103515245u + 12345u;
            ks[nk++] = h % size;
        }
        for (size_t i = 0; i < nk; i++)
            check_prefix(data, ks[i], rc, &req);
    }

    /* The target alone, through peer_parse_target. */
    if (rc == 1) {
        size_t pos = 0;
        while (pos + 1 < size && data[pos] == '\r' && data[pos + 1] == '\n')
            pos += 2;
        const uint8_t *sp1 = memchr(data + pos, ' ', req.header_len - pos);
        FUZZ_CHECK(sp1 != NULL, "no space in the request line");
        const uint8_t *sp2 = memchr(sp1 + 1, ' ', (size_t)(data + req.header_len - sp1 - 1));
        FUZZ_CHECK(sp2 != NULL, "no second space in the request line");
        size_t tl = (size_t)(sp2 - sp1 - 1);
        char *target = malloc(tl + 1);
        FUZZ_CHECK(target != NULL, "oom");
        memcpy(target, sp1 + 1, tl);
        target[tl] = '\0';
        peer_request t;
        int trc = peer_parse_target(target, &t);
        FUZZ_CHECK(trc == 1, "target \"%s\" of a valid request returned %d", target, trc);
        FUZZ_CHECK(strcmp(t.path, req.path) == 0 && strcmp(t.etag, req.etag) == 0 &&
                       t.wait_ms == req.wait_ms,
                   "peer_parse_target(\"%s\") differs from the request", target);
        free(target);
    }

    /* Any bytes as a target string (up to the first NUL). */
    char *s = malloc(size + 1);
    FUZZ_CHECK(s != NULL, "oom");
    memcpy(s, data, size);
    s[size] = '\0';
    peer_request t;
    int trc = peer_parse_target(s, &t);
    FUZZ_CHECK(trc == 1 || trc == -400, "peer_parse_target returned %d", trc);
    FUZZ_CHECK(terminated(t.path, sizeof t.path) && terminated(t.etag, sizeof t.etag) &&
                   t.wait_ms >= 0 && t.wait_ms <= PEER_MAX_WAIT_MS,
               "peer_parse_target result out of range");
    free(s);
    return 0;
}
