/* SPDX-License-Identifier: Apache-2.0 */
/* test_peer_http.c - the peer endpoint's HTTP layer (peer_http.c): request
 * head parsing (valid, invalid, partial, oversized, keep-alive, query
 * decoding) and the answers, including long polls against a scripted source.
 */
#include <pthread.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"
#include "peer_fake.h"
#include "testutil.h"
#include "util.h"

static int parse(const char *s, peer_request *req)
{
    return peer_parse_request(s, strlen(s), req);
}

/* ---- parsing ---- */

static void test_valid_requests(void)
{
    peer_request r;
    const char *s = "GET /health/leadership HTTP/1.1\r\nHost: a:1\r\nAccept: */*\r\n\r\n";
    CHECK(parse(s, &r) == 1, "a plain GET parses");
    CHECK(strcmp(r.method, "GET") == 0, "method %s", r.method);
    CHECK(strcmp(r.path, "/health/leadership") == 0, "path %s", r.path);
    CHECK(r.keep_alive == 1, "HTTP/1.1 keeps the connection by default");
    CHECK(r.header_len == strlen(s), "header_len %zu of %zu", r.header_len, strlen(s));
    CHECK(r.wait_ms == 0 && r.etag[0] == '\0' && r.content_length == 0, "no query, no body");

    CHECK(parse("HEAD /x HTTP/1.0\r\n\r\n", &r) == 1 && r.keep_alive == 0,
          "HTTP/1.0 closes by default");
    CHECK(parse("GET /x HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &r) == 1 && r.keep_alive == 1,
          "HTTP/1.0 with Connection: keep-alive keeps it");
    CHECK(parse("GET /x HTTP/1.1\r\nConnection: close\r\n\r\n", &r) == 1 && r.keep_alive == 0,
          "Connection: close");
    CHECK(parse("GET /x HTTP/1.1\r\nconnection:  keep-alive ,  CLOSE \r\n\r\n", &r) == 1 &&
              r.keep_alive == 0,
          "close wins in a token list, case-insensitive, with spaces");
    CHECK(parse("GET /x HTTP/1.1\r\nConnection: upgrade\r\n\r\n", &r) == 1 && r.keep_alive == 1,
          "other connection tokens do not close");
    CHECK(parse("GET /x HTTP/1.9\r\n\r\n", &r) == 1 && r.keep_alive == 1,
          "a later HTTP/1 minor version is treated as 1.1");
    CHECK(parse("\r\n\r\nGET /x HTTP/1.1\r\n\r\n", &r) == 1 && strcmp(r.path, "/x") == 0,
          "empty lines before the request line are ignored");
    CHECK(parse("GET /x HTTP/1.1\r\nX-Empty:\r\nX-Tab:\tv\t\r\n\r\n", &r) == 1,
          "empty values and tabs are fine");
    CHECK(parse("GET /x HTTP/1.1\r\nContent-Length: 12\r\n\r\n", &r) == 1 && r.content_length == 12,
          "content length %zu", r.content_length);
    CHECK(parse("GET /x HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n", &r) == 1 &&
              r.content_length == 5,
          "repeated equal Content-Length is accepted");
    CHECK(parse("OPTIONS /x HTTP/1.1\r\n\r\n", &r) == 1 && strcmp(r.method, "OPTIONS") == 0,
          "other methods parse (answered 405)");
}

static void test_query(void)
{
    peer_request r;
    CHECK(parse("GET /health/leadership?wait=5000&etag=%22abc%22 HTTP/1.1\r\n\r\n", &r) == 1,
          "query parses");
    CHECK(strcmp(r.path, "/health/leadership") == 0, "path without query: %s", r.path);
    CHECK(r.wait_ms == 5000, "wait %lld", (long long)r.wait_ms);
    CHECK(strcmp(r.etag, "\"abc\"") == 0, "etag decoded: %s", r.etag);

    CHECK(parse("GET /x?etag=1-ab%2Bc+d&wait=1&wait=250 HTTP/1.1\r\n\r\n", &r) == 1 &&
              strcmp(r.etag, "1-ab+c d") == 0 && r.wait_ms == 250,
          "%%2B is '+', '+' is a space, the last wait wins: etag '%s' wait %lld", r.etag,
          (long long)r.wait_ms);
    CHECK(parse("GET /x?wait=99999999999999999999999999&etag=e HTTP/1.1\r\n\r\n", &r) == 1 &&
              r.wait_ms == PEER_MAX_WAIT_MS,
          "huge wait is capped at %d: %lld", PEER_MAX_WAIT_MS, (long long)r.wait_ms);
    CHECK(parse("GET /x?wait=60001 HTTP/1.1\r\n\r\n", &r) == 1 && r.wait_ms == PEER_MAX_WAIT_MS,
          "wait just over the cap");
    CHECK(parse("GET /x?foo=%zz&bar&=&&wait=7 HTTP/1.1\r\n\r\n", &r) == 1 && r.wait_ms == 7,
          "unknown and empty parameters are ignored");
    CHECK(parse("GET /x? HTTP/1.1\r\n\r\n", &r) == 1 && r.wait_ms == 0, "empty query");
    CHECK(parse("GET /x?process=0123456789abcdef0123456789ABCDEF HTTP/1.1\r\n\r\n", &r) == 1 &&
              strcmp(r.process, "0123456789abcdef0123456789ABCDEF") == 0,
          "process token: '%s'", r.process);
    CHECK(parse("GET /x?process=0123 HTTP/1.1\r\n\r\n", &r) == 1 && !r.process[0],
          "a short process token names none");
    CHECK(parse("GET /x?process=0123456789abcdef0123456789abcdeg HTTP/1.1\r\n\r\n", &r) == 1 &&
              !r.process[0],
          "a process token that is not hex names none");
    CHECK(parse("GET /x?process=0123456789abcdef0123456789abcdef0 HTTP/1.1\r\n\r\n", &r) == 1 &&
              !r.process[0],
          "a long process token names none");
    CHECK(parse("GET /health%2Fleadership HTTP/1.1\r\n\r\n", &r) == 1 &&
              strcmp(r.path, "/health/leadership") == 0,
          "path is percent-decoded: %s", r.path);

    const char *bad[] = {
        "GET /x?wait=abc HTTP/1.1\r\n\r\n",   "GET /x?wait= HTTP/1.1\r\n\r\n",
        "GET /x?wait=-5 HTTP/1.1\r\n\r\n",    "GET /x?wait=1.5 HTTP/1.1\r\n\r\n",
        "GET /x?etag=%zz HTTP/1.1\r\n\r\n",   "GET /x?etag=%4 HTTP/1.1\r\n\r\n",
        "GET /x?etag=a%00b HTTP/1.1\r\n\r\n", "GET /x%00 HTTP/1.1\r\n\r\n",
        "GET /x#frag HTTP/1.1\r\n\r\n",       "GET /x?etag=%2 HTTP/1.1\r\n\r\n",
        "GET /%GG HTTP/1.1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(parse(bad[i], &r) == -400, "'%.40s' is malformed", bad[i]);

    /* An etag that does not fit the buffer is refused, never truncated. */
    char buf[1024];
    char longetag[300];
    memset(longetag, 'e', sizeof longetag - 1);
    longetag[sizeof longetag - 1] = '\0';
    snprintf(buf, sizeof buf, "GET /x?wait=10&etag=%s HTTP/1.1\r\n\r\n", longetag);
    CHECK(parse(buf, &r) == -400, "a 299-byte etag is refused");
    char fits[sizeof r.etag];
    memset(fits, 'f', sizeof fits - 1);
    fits[sizeof fits - 1] = '\0';
    snprintf(buf, sizeof buf, "GET /x?etag=%s HTTP/1.1\r\n\r\n", fits);
    CHECK(parse(buf, &r) == 1 && strlen(r.etag) == sizeof r.etag - 1, "an etag of %zu bytes fits",
          sizeof r.etag - 1);

    char longpath[400];
    memset(longpath, 'p', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    snprintf(buf, sizeof buf, "GET %s HTTP/1.1\r\n\r\n", longpath);
    CHECK(parse(buf, &r) == -400, "a path longer than the buffer is refused");
}

static void test_target(void)
{
    peer_request r;
    CHECK(peer_parse_target("/health/leadership?wait=100&etag=x", &r) == 1 &&
              strcmp(r.path, "/health/leadership") == 0 && r.wait_ms == 100 &&
              strcmp(r.etag, "x") == 0 && strcmp(r.method, "GET") == 0,
          "path and query");
    CHECK(peer_parse_target("wait=100&etag=%22q%22", &r) == 1 && r.path[0] == '\0' &&
              r.wait_ms == 100 && strcmp(r.etag, "\"q\"") == 0,
          "a bare query string");
    CHECK(peer_parse_target("?etag=y", &r) == 1 && strcmp(r.etag, "y") == 0 && r.wait_ms == 0,
          "a query with its '?'");
    CHECK(peer_parse_target("/h?xfer=1&etag=x", &r) == 1 && r.xfer == 1,
          "xfer=1: a transfer request is in the record");
    CHECK(peer_parse_target("/h?xfer=2", &r) == 1 && r.xfer == 0 &&
              peer_parse_target("/h?xfer=11", &r) == 1 && r.xfer == 0 &&
              peer_parse_target("/h?etag=x", &r) == 1 && r.xfer == 0,
          "anything but xfer=1 is no hint");
    CHECK(peer_parse_target(NULL, &r) == 1 && r.path[0] == '\0', "NULL is an empty target");
    CHECK(peer_parse_target("", &r) == 1, "empty target");
    CHECK(peer_parse_target("/a b", &r) == -400, "space in target");
    CHECK(peer_parse_target("wait=x", &r) == -400, "bad wait");
}

static void test_invalid_requests(void)
{
    peer_request r;
    const struct {
        const char *req;
        int want;
    } cases[] = {
        {"GET /x HTTP/1.1\n\n", -400},
        {"GET /x HTTP/1.1\r\nHost: a\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nHost: a\rb\r\n\r\n", -400},
        {"GET /x HTTP/2.0\r\n\r\n", -505},
        {"GET /x HTTP/0.9\r\n\r\n", -505},
        {"GET /x HTTP/1.10\r\n\r\n", -400},
        {"GET /x http/1.1\r\n\r\n", -400},
        {"GET /x\r\n\r\n", -400},
        {"GET x HTTP/1.1\r\n\r\n", -400},
        {"GET http://a/x HTTP/1.1\r\n\r\n", -400},
        {"GET  /x HTTP/1.1\r\n\r\n", -400},
        {"GET /x  HTTP/1.1\r\n\r\n", -400},
        {" GET /x HTTP/1.1\r\n\r\n", -400},
        {"G(T /x HTTP/1.1\r\n\r\n", -400},
        {"VERYLONGMETHODNAME /x HTTP/1.1\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nNo colon\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nName : v\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\n: v\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nA: b\r\n  folded\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nA: b\x01\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nA: b\x7f\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nContent-Length: 10000000\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nContent-Length: 99999999999999999999999999\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nContent-Length:\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", -400},
        {"GET /x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", -400},
        /* Rejected before the head is complete. */
        {"GARBAGE\r\n", -400},
        {"GET /x HTTP/3.0\r\nHost: a", -505},
        {"GET /x HTTP/1.1\r\nBad Header\r\nmore", -400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = parse(cases[i].req, &r);
        CHECK(rc == cases[i].want, "case %zu '%.30s': got %d, want %d", i, cases[i].req, rc,
              cases[i].want);
    }
    /* An embedded NUL (strlen would stop there, so pass the length). */
    const char nul[] = "GET /x HTTP/1.1\r\nA: b\0c\r\n\r\n";
    CHECK(peer_parse_request(nul, sizeof nul - 1, &r) == -400, "NUL in a header value");
    const char nul2[] = "GET /x\0 HTTP/1.1\r\n\r\n";
    CHECK(peer_parse_request(nul2, sizeof nul2 - 1, &r) == -400, "NUL in the request line");
}

static void test_partial(void)
{
    const char *s = "GET /health/leadership?wait=100&etag=%22e%22 HTTP/1.1\r\n"
                    "Host: 127.0.0.1:8443\r\nConnection: keep-alive\r\n\r\n";
    size_t n = strlen(s);
    peer_request r;
    int all_zero = 1;
    for (size_t i = 0; i < n; i++) {
        /* Each prefix in its own exact-size allocation, so ASan sees any over-read. */
        char *p = malloc(i ? i : 1);
        memcpy(p, s, i);
        int rc = peer_parse_request(p, i, &r);
        free(p);
        if (rc != 0) {
            CHECK(rc == 0, "prefix of %zu bytes: got %d, want 0 (need more)", i, rc);
            all_zero = 0;
            break;
        }
    }
    CHECK(all_zero, "every strict prefix needs more bytes");
    CHECK(peer_parse_request(s, n, &r) == 1 && r.header_len == n, "the whole head parses");
    CHECK(peer_parse_request(NULL, 0, &r) == 0, "no bytes: need more");

    /* Pipelined requests and a body: header_len stops at the first head. */
    char two[512];
    snprintf(two, sizeof two, "%s%s", s, "GET /b HTTP/1.1\r\n\r\n");
    CHECK(parse(two, &r) == 1 && r.header_len == n && r.wait_ms == 100, "first of two requests");
    const char *withbody = "GET /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
    CHECK(parse(withbody, &r) == 1 && r.header_len == strlen(withbody) - 3 && r.content_length == 3,
          "head and body");
}

static void test_oversized(void)
{
    peer_request r;
    size_t cap = PEER_MAX_HEADER + 64;
    char *buf = malloc(cap);
    /* A head of exactly PEER_MAX_HEADER bytes is fine; one byte more is 431. */
    const char *line = "GET /x HTTP/1.1\r\nX-Pad: ";
    for (int extra = 0; extra <= 1; extra++) {
        size_t total = PEER_MAX_HEADER + (size_t)extra;
        size_t pad = total - strlen(line) - 4;
        memcpy(buf, line, strlen(line));
        memset(buf + strlen(line), 'a', pad);
        memcpy(buf + strlen(line) + pad, "\r\n\r\n", 4);
        int rc = peer_parse_request(buf, total, &r);
        if (extra == 0)
            CHECK(rc == 1 && r.header_len == total, "%zu-byte head: got %d", total, rc);
        else
            CHECK(rc == -431, "%zu-byte head: got %d, want -431", total, rc);
    }
    /* Bytes without an end, up to the limit: 431 once the limit is reached. */
    memcpy(buf, line, strlen(line));
    memset(buf + strlen(line), 'b', cap - strlen(line));
    CHECK(peer_parse_request(buf, PEER_MAX_HEADER - 1, &r) == 0, "below the limit: need more");
    CHECK(peer_parse_request(buf, PEER_MAX_HEADER, &r) == -431, "at the limit: too large");
    CHECK(peer_parse_request(buf, cap, &r) == -431, "past the limit: too large");
    free(buf);

    /* Too many header lines. */
    char many[PEER_MAX_HEADER];
    size_t o = (size_t)snprintf(many, sizeof many, "GET /x HTTP/1.1\r\n");
    for (int i = 0; i < 150; i++)
        o += (size_t)snprintf(many + o, sizeof many - o, "A%d: b\r\n", i);
    o += (size_t)snprintf(many + o, sizeof many - o, "\r\n");
    CHECK(o < sizeof many, "test head fits");
    CHECK(peer_parse_request(many, o, &r) == -431, "150 header lines are too many");
}

/* ---- answers ---- */

static int failing_view(void *ctx, peer_view *v)
{
    (void)ctx;
    (void)v;
    return S3LECT_ENOMEM;
}

static void answer(const peer_source *src, const char *target, const char *method, int *status,
                   char **body, int *rc)
{
    peer_request r;
    CHECK(peer_parse_target(target, &r) == 1, "target %s", target);
    snprintf(r.method, sizeof r.method, "%s", method);
    *rc = peer_answer(src, "/health/leadership", &r, status, body);
}

static void test_answers(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    peer_source src = fake_source_of(&f);
    int status, rc;
    char *body;

    answer(&src, "/health/leadership", "GET", &status, &body, &rc);
    CHECK(rc == 0 && status == 200, "leading: 200 (got %d)", status);
    CHECK(body && strstr(body, "\"etag\":\"\\\"e1\\\"\"") &&
              strstr(body, "\"leaderID\":\"node-1\""),
          "body is the record with etag: %s", body ? body : "(null)");
    free(body);

    answer(&src, "/health/leadership", "HEAD", &status, &body, &rc);
    CHECK(rc == 0 && status == 200 && body, "HEAD answers like GET (the server drops the body)");
    free(body);

    answer(&src, "/health/leadership", "POST", &status, &body, &rc);
    CHECK(rc == 0 && status == 405 && body && strstr(body, "\"error\""), "POST: 405 (%d)", status);
    free(body);
    answer(&src, "/health/leadership", "get", &status, &body, &rc);
    CHECK(status == 405, "methods are case-sensitive: %d", status);
    free(body);

    answer(&src, "/other", "GET", &status, &body, &rc);
    CHECK(rc == 0 && status == 404 && body && strstr(body, "not found"), "other path: 404");
    free(body);
    answer(&src, "/other", "POST", &status, &body, &rc);
    CHECK(status == 404, "other path, other method: 404 (%d)", status);
    free(body);
    answer(&src, "/health/leadership/", "GET", &status, &body, &rc);
    CHECK(status == 404, "the path matches exactly: %d", status);
    free(body);

    fake_set(&f, 0, NULL);
    answer(&src, "/health/leadership", "GET", &status, &body, &rc);
    CHECK(rc == 0 && status == 404 && body && strstr(body, "not the leader"),
          "not leading: 404 with a JSON error (%d %s)", status, body ? body : "");
    free(body);

    /* Not leading: a long poll answers at once. */
    int waits = fake_count(&f, &f.waits);
    int64_t t0 = u_mono_ms();
    answer(&src, "/health/leadership?wait=3000&etag=%22e1%22", "GET", &status, &body, &rc);
    CHECK(status == 404 && u_mono_ms() - t0 < 1000 && fake_count(&f, &f.waits) == waits,
          "no long poll while not leading");
    free(body);

    /* Leading, other etag: at once, with the current state. */
    fake_set(&f, 1, "\"e2\"");
    t0 = u_mono_ms();
    answer(&src, "/health/leadership?wait=3000&etag=%22e1%22", "GET", &status, &body, &rc);
    CHECK(status == 200 && body && strstr(body, "e2") && u_mono_ms() - t0 < 1000 &&
              fake_count(&f, &f.waits) == waits,
          "stale etag: answered at once");
    free(body);

    /* Same etag but wait=0: at once. */
    answer(&src, "/health/leadership?etag=%22e2%22", "GET", &status, &body, &rc);
    CHECK(status == 200 && fake_count(&f, &f.waits) == waits, "no wait without wait=");
    free(body);

    /* Same etag, nothing changes: answered when the wait ends. */
    t0 = u_mono_ms();
    answer(&src, "/health/leadership?wait=400&etag=%22e2%22", "GET", &status, &body, &rc);
    int64_t took = u_mono_ms() - t0;
    CHECK(status == 200 && body && strstr(body, "e2"), "timeout: 200 with the same etag");
    CHECK(took >= 390 && took < 3000, "held for the wait: %lld ms", (long long)took);
    CHECK(fake_count(&f, &f.waits) > waits, "the source was waited on");
    free(body);

    /* A failing view: an error code, no body. */
    peer_source bad = {failing_view, fake_wait, &f, NULL, NULL, ""};
    answer(&bad, "/health/leadership", "GET", &status, &body, &rc);
    CHECK(rc == S3LECT_ENOMEM && body == NULL && status == 503, "view failure: rc %d status %d", rc,
          status);
    free(body);

    peer_view_clear(NULL);
    peer_view v = {1, strdup("x"), strdup("{}"), 3, strdup("{}"), ""};
    peer_view_clear(&v);
    CHECK(v.etag == NULL && v.body == NULL && v.leading == 0 && v.released == NULL,
          "peer_view_clear frees and zeroes");
    fake_destroy(&f);
}

typedef struct changer {
    fake_source *f;
    int64_t delay_ms;
    int leading;
    const char *etag;
    int stop;
} changer;

static void *change_later(void *arg)
{
    changer *c = arg;
    t_sleep_ms(c->delay_ms);
    if (c->stop)
        fake_stop(c->f);
    else
        fake_set(c->f, c->leading, c->etag);
    return NULL;
}

static void long_poll_case(const char *what, changer ch, int want_status, const char *want_in_body)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    ch.f = &f;
    peer_source src = fake_source_of(&f);
    pthread_t th;
    pthread_create(&th, NULL, change_later, &ch);
    int status, rc;
    char *body;
    int64_t t0 = u_mono_ms();
    answer(&src, "/health/leadership?wait=20000&etag=%22e1%22", "GET", &status, &body, &rc);
    int64_t took = u_mono_ms() - t0;
    pthread_join(th, NULL);
    CHECK(rc == 0 && status == want_status, "%s: status %d, want %d", what, status, want_status);
    CHECK(took >= ch.delay_ms - 10 && took < ch.delay_ms + 5000,
          "%s: answered after the change (%lld ms, change at %lld ms)", what, (long long)took,
          (long long)ch.delay_ms);
    CHECK(body && strstr(body, want_in_body), "%s: body %s", what, body ? body : "(null)");
    free(body);
    fake_destroy(&f);
}

static void test_long_poll_wakeups(void)
{
    long_poll_case("renewal", (changer){NULL, 300, 1, "\"e2\"", 0}, 200, "e2");
    long_poll_case("step-down", (changer){NULL, 300, 0, NULL, 0}, 404, "not the leader");
    /* A version bump that changes nothing visible keeps the poll going. */
    long_poll_case("stop of the source", (changer){NULL, 300, 1, NULL, 1}, 200, "e1");
}

/* A version change with the same etag and leadership keeps the long poll. */
static void test_spurious_change(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    peer_source src = fake_source_of(&f);
    changer ch = {&f, 200, 1, "\"e1\"", 0};
    pthread_t th;
    pthread_create(&th, NULL, change_later, &ch);
    int status, rc;
    char *body;
    int64_t t0 = u_mono_ms();
    answer(&src, "/health/leadership?wait=800&etag=%22e1%22", "GET", &status, &body, &rc);
    int64_t took = u_mono_ms() - t0;
    pthread_join(th, NULL);
    CHECK(status == 200 && took >= 790, "unchanged etag after a version bump: held %lld ms",
          (long long)took);
    free(body);
    fake_destroy(&f);
}

/* ---- shared listener: ?incarnation= and the batch (issue 28) ---- */

static void test_incarnation_and_bodies(void)
{
    peer_request r;
    CHECK(
        parse("GET /h?incarnation=0123456789abcdefABCDEF0123456789&wait=5&etag=e HTTP/1.1\r\n\r\n",
              &r) == 1 &&
            strcmp(r.incarnation, "0123456789abcdefABCDEF0123456789") == 0 && r.wait_ms == 5,
        "incarnation parsed: %s", r.incarnation);
    CHECK(parse("GET /h HTTP/1.1\r\n\r\n", &r) == 1 && r.incarnation[0] == '\0', "absent: empty");
    CHECK(parse("GET /h?incarnation=xyz HTTP/1.1\r\n\r\n", &r) == -400, "not hex: 400");
    CHECK(parse("GET /h?incarnation= HTTP/1.1\r\n\r\n", &r) == -400, "empty: 400");
    char longq[300];
    snprintf(longq, sizeof longq, "GET /h?incarnation=%0*d HTTP/1.1\r\n\r\n", PEER_INC_MAX + 1, 0);
    CHECK(parse(longq, &r) == -400, "longer than %d: 400", PEER_INC_MAX);

    /* Bodies: a batch (POST) up to 1 MiB, more is 413; other methods up to 64 KiB. */
    CHECK(parse("POST /h HTTP/1.1\r\nContent-Length: 1048576\r\n\r\n", &r) == 1 &&
              r.content_length == PEER_MAX_BATCH_BODY,
          "POST of 1 MiB");
    CHECK(parse("POST /h HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n", &r) == -413,
          "POST over 1 MiB: 413");
    CHECK(parse("POST /h HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", &r) == -413,
          "POST huge: 413");
    CHECK(parse("GET /h HTTP/1.1\r\nContent-Length: 65537\r\n\r\n", &r) == -400,
          "GET over 64 KiB: 400");
}

static int batch(const char *json, peer_batch *b)
{
    return peer_parse_batch(json, strlen(json), b);
}

static void test_batch_parse(void)
{
    peer_batch b;
    const char *ok = "{\"wait\":25000,\"locks\":[{\"incarnation\":\"00ff\",\"term\":3,\"etag\":"
                     "\"\\\"e1\\\"\"},{\"incarnation\":\"AB\",\"term\":0,\"etag\":\"\"}]}";
    CHECK(batch(ok, &b) == 0 && b.n == 2 && b.wait_ms == 25000, "two entries: n %zu wait %lld", b.n,
          (long long)b.wait_ms);
    CHECK(b.n == 2 && strcmp(b.e[0].incarnation, "00ff") == 0 && b.e[0].term == 3 &&
              strcmp(b.e[0].etag, "\"e1\"") == 0 && strcmp(b.e[1].incarnation, "AB") == 0 &&
              b.e[1].term == 0 && b.e[1].etag[0] == '\0',
          "entries as sent");
    peer_batch_free(&b);
    CHECK(batch("{\"wait\":999999,\"locks\":[{\"incarnation\":\"a\",\"term\":1,\"etag\":\"\"}]}",
                &b) == 0 &&
              b.wait_ms == PEER_MAX_WAIT_MS,
          "wait capped at %d", PEER_MAX_WAIT_MS);
    peer_batch_free(&b);

    const char *bad[] = {
        "",
        "[]",
        "{\"locks\":[{\"incarnation\":\"a\",\"term\":1,\"etag\":\"\"}]}",
        "{\"wait\":-1,\"locks\":[{\"incarnation\":\"a\",\"term\":1,\"etag\":\"\"}]}",
        "{\"wait\":\"5\",\"locks\":[{\"incarnation\":\"a\",\"term\":1,\"etag\":\"\"}]}",
        "{\"wait\":5,\"locks\":[]}",
        "{\"wait\":5,\"locks\":{}}",
        "{\"wait\":5,\"locks\":[{\"term\":1,\"etag\":\"\"}]}",
        "{\"wait\":5,\"locks\":[{\"incarnation\":\"a\",\"etag\":\"\"}]}",
        "{\"wait\":5,\"locks\":[{\"incarnation\":\"a\",\"term\":1}]}",
        "{\"wait\":5,\"locks\":[{\"incarnation\":\"g\",\"term\":1,\"etag\":\"\"}]}",
        "{\"wait\":5,\"locks\":[{\"incarnation\":\"\",\"term\":1,\"etag\":\"\"}]}",
        "{\"wait\":5,\"locks\":[{\"incarnation\":\"a\",\"term\":1.5,\"etag\":\"\"}]}",
        "{\"wait\":5,\"locks\":[{\"incarnation\":\"a\",\"term\":-2,\"etag\":\"\"}]}",
        "{\"wait\":5,\"locks\":[{\"incarnation\":\"a\",\"term\":1,\"etag\":\"a\\nb\"}]}",
        "{\"wait\":5,\"locks\":[7]}",
        "{\"wait\":5,\"locks\":[{\"incarnation\":\"a\",\"term\":1,\"etag\":\"\"}]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = batch(bad[i], &b);
        CHECK(rc == -400 && b.n == 0 && !b.e, "bad batch %zu (%s): %d", i, bad[i], rc);
    }
    /* Entry limit: 4096 fine, 4097 refused. */
    for (int extra = 0; extra <= 1; extra++) {
        size_t n = PEER_MAX_BATCH_LOCKS + (size_t)extra, cap = 64 + n * 60, o = 0;
        char *j = malloc(cap);
        o += (size_t)snprintf(j + o, cap - o, "{\"wait\":1,\"locks\":[");
        for (size_t i = 0; i < n; i++)
            o += (size_t)snprintf(j + o, cap - o,
                                  "%s{\"incarnation\":\"%zx\",\"term\":1,\"etag\":\"\"}",
                                  i ? "," : "", i + 1);
        o += (size_t)snprintf(j + o, cap - o, "]}");
        int rc = peer_parse_batch(j, o, &b);
        CHECK(extra ? rc == -400 : rc == 0 && b.n == n, "%zu entries: %d", n, rc);
        peer_batch_free(&b);
        free(j);
    }
    /* Over 1 MiB (whatever the content): 413. */
    CHECK(peer_parse_batch("{}", PEER_MAX_BATCH_BODY + 1, &b) == -413, "over 1 MiB");

    /* The answer. */
    peer_batch_item items[4] = {{"00ff", 200, "{\"leaderID\":\"n\",\"term\":3}", 0, NULL},
                                {"ab", 404, NULL, 0, NULL},
                                {"cd", 404, NULL, 1, "{\"leaderID\":\"\"}"},
                                {"ef", 404, NULL, 0, "{\"leaderID\":\"\",\"etag\":\"e\"}"}};
    char *out = peer_batch_answer(items, 2);
    CHECK(out && strcmp(out, "{\"locks\":[{\"incarnation\":\"00ff\",\"status\":200,\"record\":"
                             "{\"leaderID\":\"n\",\"term\":3}},{\"incarnation\":\"ab\",\"status\":"
                             "404}]}") == 0,
          "answer: %s", out ? out : "(null)");
    cJSON *parsed = out ? cJSON_Parse(out) : NULL;
    CHECK(parsed != NULL, "the answer is JSON");
    cJSON_Delete(parsed);
    free(out);
    out = peer_batch_answer(items + 2, 1);
    CHECK(out && strcmp(out, "{\"locks\":[{\"incarnation\":\"cd\",\"status\":404,\"yield\":"
                             "true}]}") == 0,
          "answer with yield (and never a released record with it): %s", out ? out : "(null)");
    free(out);
    out = peer_batch_answer(items + 3, 1);
    CHECK(out && strcmp(out, "{\"locks\":[{\"incarnation\":\"ef\",\"status\":404,\"released\":"
                             "{\"leaderID\":\"\",\"etag\":\"e\"}}]}") == 0,
          "the successor's answer with the released record: %s", out ? out : "(null)");
    free(out);
    out = peer_batch_answer(items, 0);
    CHECK(out && strcmp(out, "{\"locks\":[]}") == 0, "empty answer: %s", out ? out : "(null)");
    free(out);
}

int main(void)
{
    test_valid_requests();
    test_query();
    test_target();
    test_invalid_requests();
    test_partial();
    test_oversized();
    test_answers();
    test_long_poll_wakeups();
    test_spurious_change();
    test_incarnation_and_bodies();
    test_batch_parse();
    return t_done("peer_http");
}
