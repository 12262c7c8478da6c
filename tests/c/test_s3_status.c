/* SPDX-License-Identifier: Apache-2.0 */
/* test_s3_status.c - the S3 store against a canned HTTP server on loopback.
 *
 * A unit test of one layer (store_s3.c): a tiny in-process server answers
 * each request with the status, headers and body the test sets, and keeps
 * what the client sent. Checks the status → outcome mapping of DESIGN §5,
 * the messages (IAM action, bucket, no secrets), the request itself (signed
 * headers, conditions, content type, ETag quoting), keep-alive, timeouts and
 * connection errors. The real-server tests are in tests/s3/test_s3_store.py.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "s3_test.h"
#include "sigv4.h"
#include "store.h"
#include "util.h"

#define SECRET "s3lect-test-secret-NEVER-SHOWN"
#define TOKEN "s3lect-test-session-token-NEVER-SHOWN"

/* ---- the canned server ---- */

typedef struct canned {
    int status;
    char headers[1024]; /* extra header lines, each ending in \r\n */
    char *body;         /* allocated */
    size_t body_len;
    int hang; /* do not answer; wait until the client goes away */
} canned;

typedef struct captured {
    char method[16];
    char path[1024];
    char headers[8192]; /* raw header block */
    char body[4096];
    size_t body_len;
} captured;

typedef struct server {
    int fd;
    int port;
    pthread_t th;
    pthread_mutex_t mu;
    canned reply;
    captured last;
    int requests;
    int connections;
    int stop;
} server;

static int read_request(int fd, char *buf, size_t cap, size_t *used, captured *out)
{
    /* Read until the end of the headers, then the body by Content-Length. */
    char *hdr_end = NULL;
    while (!(hdr_end = memmem(buf, *used, "\r\n\r\n", 4))) {
        if (*used + 1 >= cap)
            return -1;
        ssize_t n = recv(fd, buf + *used, cap - 1 - *used, 0);
        if (n <= 0)
            return -1;
        *used += (size_t)n;
    }
    size_t hlen = (size_t)(hdr_end - buf) + 4;
    size_t clen = 0;
    const char *cl = memmem(buf, hlen, "\r\nContent-Length:", 17);
    if (!cl)
        cl = memmem(buf, hlen, "\r\ncontent-length:", 17);
    if (cl)
        clen = (size_t)strtoul(cl + 17, NULL, 10);
    while (*used < hlen + clen) {
        if (*used + 1 >= cap)
            return -1;
        ssize_t n = recv(fd, buf + *used, cap - 1 - *used, 0);
        if (n <= 0)
            return -1;
        *used += (size_t)n;
    }
    memset(out, 0, sizeof *out);
    sscanf(buf, "%15s %1023s", out->method, out->path);
    size_t first_line = (size_t)((char *)memchr(buf, '\n', hlen) - buf) + 1;
    size_t hcopy = hlen - first_line;
    if (hcopy >= sizeof out->headers)
        hcopy = sizeof out->headers - 1;
    memcpy(out->headers, buf + first_line, hcopy);
    out->body_len = clen < sizeof out->body - 1 ? clen : sizeof out->body - 1;
    memcpy(out->body, buf + hlen, out->body_len);
    /* Keep what follows (a pipelined request) for the next round. */
    memmove(buf, buf + hlen + clen, *used - hlen - clen);
    *used -= hlen + clen;
    return 0;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void serve_connection(server *s, int fd)
{
    static char buf[3 * 1024 * 1024];
    size_t used = 0;
    for (;;) {
        captured req;
        if (read_request(fd, buf, sizeof buf, &used, &req) != 0)
            break;
        pthread_mutex_lock(&s->mu);
        s->last = req;
        s->requests++;
        canned r = s->reply;
        char *body = NULL;
        if (r.body) {
            body = malloc(r.body_len + 1);
            memcpy(body, r.body, r.body_len);
        }
        pthread_mutex_unlock(&s->mu);
        if (r.hang) {
            /* Wait (bounded) for the client to give up and close. */
            struct pollfd p = {fd, POLLIN, 0};
            poll(&p, 1, 10000);
            free(body);
            break;
        }
        char head[2048];
        int n = snprintf(head, sizeof head, "HTTP/1.1 %d Canned\r\nContent-Length: %zu\r\n%s\r\n",
                         r.status, r.body_len, r.headers);
        send_all(fd, head, (size_t)n);
        if (body)
            send_all(fd, body, r.body_len);
        free(body);
    }
    close(fd);
}

static void *serve(void *arg)
{
    server *s = arg;
    for (;;) {
        int fd = accept(s->fd, NULL, NULL);
        pthread_mutex_lock(&s->mu);
        int stop = s->stop;
        if (fd >= 0 && !stop)
            s->connections++;
        pthread_mutex_unlock(&s->mu);
        if (stop) {
            if (fd >= 0)
                close(fd);
            return NULL;
        }
        if (fd < 0)
            continue;
        serve_connection(s, fd);
    }
}

static void server_start(server *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s->fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->fd, 16) != 0) {
        perror("canned server");
        exit(2);
    }
    socklen_t len = sizeof a;
    getsockname(s->fd, (struct sockaddr *)&a, &len);
    s->port = ntohs(a.sin_port);
    pthread_create(&s->th, NULL, serve, s);
}

static void server_stop(server *s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_mutex_unlock(&s->mu);
    /* Wake accept() with one last connection. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(fd, (struct sockaddr *)&a, sizeof a);
    close(fd);
    pthread_join(s->th, NULL);
    close(s->fd);
    free(s->reply.body);
}

static void set_reply(server *s, int status, const char *headers, const char *body)
{
    pthread_mutex_lock(&s->mu);
    free(s->reply.body);
    memset(&s->reply, 0, sizeof s->reply);
    s->reply.status = status;
    snprintf(s->reply.headers, sizeof s->reply.headers, "%s", headers ? headers : "");
    if (body) {
        s->reply.body = strdup(body);
        s->reply.body_len = strlen(body);
    }
    pthread_mutex_unlock(&s->mu);
}

static void set_big_reply(server *s, size_t len)
{
    pthread_mutex_lock(&s->mu);
    free(s->reply.body);
    memset(&s->reply, 0, sizeof s->reply);
    s->reply.status = 200;
    snprintf(s->reply.headers, sizeof s->reply.headers, "ETag: \"big\"\r\n");
    s->reply.body = malloc(len);
    memset(s->reply.body, 'x', len);
    s->reply.body_len = len;
    pthread_mutex_unlock(&s->mu);
}

static void set_hang(server *s)
{
    set_reply(s, 200, NULL, NULL);
    pthread_mutex_lock(&s->mu);
    s->reply.hang = 1;
    pthread_mutex_unlock(&s->mu);
}

static captured last_request(server *s)
{
    pthread_mutex_lock(&s->mu);
    captured c = s->last;
    pthread_mutex_unlock(&s->mu);
    return c;
}

/* Value of a request header (case-insensitive name), or NULL. */
static const char *req_header(const captured *c, const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    const char *p = c->headers;
    while (*p) {
        const char *eol = strstr(p, "\r\n");
        if (!eol)
            break;
        if ((size_t)(eol - p) > n && strncasecmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            while (*v == ' ')
                v++;
            size_t len = (size_t)(eol - v);
            if (len >= cap)
                len = cap - 1;
            memcpy(buf, v, len);
            buf[len] = '\0';
            return buf;
        }
        p = eol + 2;
    }
    return NULL;
}

/* Recomputes the signature from what arrived on the wire: proves that the
 * request sent is the request signed (method, path, every signed header). */
static void check_signature(const captured *c, const char *region, const char *what)
{
    char auth[1024], date[64];
    CHECK(req_header(c, "Authorization", auth, sizeof auth) != NULL, "%s: no Authorization", what);
    CHECK(req_header(c, "x-amz-date", date, sizeof date) != NULL, "%s: no x-amz-date", what);
    const char *sh = strstr(auth, "SignedHeaders=");
    const char *sig = strstr(auth, "Signature=");
    if (!sh || !sig) {
        CHECK(0, "%s: malformed Authorization", what);
        return;
    }
    char names[512];
    sscanf(sh + 14, "%511[^,]", names);
    sigv4_header hs[16];
    char values[16][1024];
    size_t nh = 0;
    char *save = NULL;
    for (char *nm = strtok_r(names, ";", &save); nm && nh < 16; nm = strtok_r(NULL, ";", &save)) {
        CHECK(req_header(c, nm, values[nh], sizeof values[nh]) != NULL,
              "%s: signed header %s was not sent", what, nm);
        hs[nh] = (sigv4_header){nm, values[nh]};
        nh++;
    }
    sigv4_request r = {.method = c->method,
                       .path = c->path,
                       .headers = hs,
                       .nheaders = nh,
                       .body = c->body,
                       .body_len = c->body_len};
    sigv4_params p = {.access_key_id = "AKIDTEST",
                      .secret_access_key = SECRET,
                      .region = region,
                      .service = "s3",
                      .amz_date = date,
                      .sign_body = 1};
    sigv4_result res;
    CHECK(sigv4_sign(&r, &p, &res) == 0, "%s: re-signing failed", what);
    CHECK(strncmp(sig + 10, res.signature, 64) == 0, "%s: the signature does not match the wire",
          what);
    /* The body's hash is what was signed. */
    char h[128];
    CHECK(req_header(c, "x-amz-content-sha256", h, sizeof h) && strcmp(h, res.payload_hash) == 0,
          "%s: x-amz-content-sha256 is not the body's hash", what);
    sigv4_result_clear(&res);
}

/* ---- helpers ---- */

static s3lect_config *make_cfg(int port, const char *token)
{
    s3lect_config *cfg = s3lect_config_new();
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", port);
    s3lect_config_set_str(cfg, S3LECT_OPT_ENDPOINT, ep);
    s3lect_config_set_str(cfg, S3LECT_OPT_REGION, "us-east-1");
    s3lect_config_set_str(cfg, S3LECT_OPT_ACCESS_KEY_ID, "AKIDTEST");
    s3lect_config_set_str(cfg, S3LECT_OPT_SECRET_ACCESS_KEY, SECRET);
    if (token)
        s3lect_config_set_str(cfg, S3LECT_OPT_SESSION_TOKEN, token);
    return cfg;
}

/* st_s3_open on a location naming bucket. */
static int s3_open_bucket(const s3lect_config *cfg, const char *bucket, st_store **out, char *err,
                          size_t errlen)
{
    st_location loc = {.bucket = (char *)bucket, .key = (char *)"k"};
    return st_s3_open(cfg, &loc, out, err, errlen);
}

static st_store *open_store(const s3lect_config *cfg, const char *bucket)
{
    st_store *st = NULL;
    char err[512] = "";
    int rc = s3_open_bucket(cfg, bucket, &st, err, sizeof err);
    CHECK(rc == 0 && st, "st_s3_open: %d %s", rc, err);
    return st;
}

static void check_no_secrets(const st_result *r, const char *what)
{
    const char *m = r->message ? r->message : "";
    CHECK(!strstr(m, SECRET) && !strstr(m, TOKEN) && !strstr(m, "Signature="),
          "%s: message leaks a secret: %s", what, m);
}

static void expect(const st_result *r, int outcome, const char *needle1, const char *needle2,
                   const char *what)
{
    CHECK(r->outcome == outcome, "%s: outcome %d, want %d (%s)", what, r->outcome, outcome,
          r->message ? r->message : "");
    if (needle1)
        CHECK(r->message && strstr(r->message, needle1), "%s: message [%s] lacks [%s]", what,
              r->message ? r->message : "", needle1);
    if (needle2)
        CHECK(r->message && strstr(r->message, needle2), "%s: message [%s] lacks [%s]", what,
              r->message ? r->message : "", needle2);
    check_no_secrets(r, what);
}

static const char *xml_error(char *buf, size_t cap, const char *code, const char *msg)
{
    snprintf(buf, cap,
             "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s"
             "</Message><BucketName>lock-bucket</BucketName><RequestId>REQ123</RequestId></Error>",
             code, msg);
    return buf;
}

/* ---- tests ---- */

static void test_get_put_wire(server *srv)
{
    s3lect_config *cfg = make_cfg(srv->port, NULL);
    st_store *st = open_store(cfg, "lock-bucket");
    if (!st)
        goto out;
    st_result r = {0};
    char hv[512];

    set_reply(srv, 200, "ETag: \"9b2cf535f27731c974343645a3985328\"\r\n", "{\"leaderID\":\"a\"}");
    st_get(st, "dir/my key+1.json", 5000, &r);
    expect(&r, ST_OK, NULL, NULL, "GET 200");
    CHECK_STR(r.etag, "\"9b2cf535f27731c974343645a3985328\"", "ETag kept exactly, quotes included");
    CHECK_STR(r.body, "{\"leaderID\":\"a\"}", "GET body");
    CHECK_INT(r.body_len, 16, "GET body length");
    CHECK_INT(r.http_status, 200, "http status");
    st_result_clear(&r);
    captured c = last_request(srv);
    CHECK_STR(c.method, "GET", "method");
    CHECK_STR(c.path, "/lock-bucket/dir/my%20key%2B1.json", "path-style, key percent-encoded");
    char host[64];
    snprintf(host, sizeof host, "127.0.0.1:%d", srv->port);
    CHECK_STR(req_header(&c, "Host", hv, sizeof hv), host, "Host header");
    CHECK(req_header(&c, "Authorization", hv, sizeof hv) &&
              strncmp(hv, "AWS4-HMAC-SHA256 Credential=AKIDTEST/", 37) == 0 &&
              strstr(hv, "/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;"
                         "x-amz-date, Signature="),
          "GET Authorization header: %s", hv);
    CHECK(!req_header(&c, "If-Match", hv, sizeof hv) && !req_header(&c, "Expect", hv, sizeof hv),
          "GET carries no condition and no Expect");
    check_signature(&c, "us-east-1", "GET");

    /* Create-if-absent. */
    const char *body = "{\"leaderID\":\"node-1\",\"term\":1}";
    set_reply(srv, 200, "ETag: \"new-etag-1\"\r\n", NULL);
    st_put(st, "dir/lock.json", body, strlen(body), NULL, 5000, &r);
    expect(&r, ST_OK, NULL, NULL, "PUT If-None-Match 200");
    CHECK_STR(r.etag, "\"new-etag-1\"", "PUT returns the new ETag exactly");
    st_result_clear(&r);
    c = last_request(srv);
    CHECK_STR(c.method, "PUT", "method");
    CHECK_STR(c.path, "/lock-bucket/dir/lock.json", "PUT path");
    CHECK_STR(req_header(&c, "If-None-Match", hv, sizeof hv), "*", "If-None-Match: *");
    CHECK(!req_header(&c, "If-Match", hv, sizeof hv), "no If-Match on create");
    CHECK_STR(req_header(&c, "Content-Type", hv, sizeof hv), "application/json", "content type");
    CHECK_STR(c.body, body, "PUT body sent as is");
    CHECK(req_header(&c, "Authorization", hv, sizeof hv) &&
              strstr(hv, "SignedHeaders=content-type;host;if-none-match;x-amz-content-sha256;"
                         "x-amz-date,"),
          "conditions and content type are signed: %s", hv);
    check_signature(&c, "us-east-1", "PUT create");

    /* Compare-and-swap: the ETag goes back exactly as received. */
    set_reply(srv, 200, "etag: \"new-etag-2\"\r\n", NULL);
    st_put(st, "dir/lock.json", body, strlen(body), "\"new-etag-1\"", 5000, &r);
    expect(&r, ST_OK, NULL, NULL, "PUT If-Match 200");
    CHECK_STR(r.etag, "\"new-etag-2\"", "lower-case etag header is read too");
    st_result_clear(&r);
    c = last_request(srv);
    CHECK_STR(req_header(&c, "If-Match", hv, sizeof hv), "\"new-etag-1\"", "If-Match with quotes");
    CHECK(!req_header(&c, "If-None-Match", hv, sizeof hv), "no If-None-Match on CAS");
    check_signature(&c, "us-east-1", "PUT CAS");

    /* An empty body is a valid PUT too. */
    set_reply(srv, 200, "ETag: \"e\"\r\n", NULL);
    st_put(st, "k", "", 0, NULL, 5000, &r);
    expect(&r, ST_OK, NULL, NULL, "empty PUT");
    st_result_clear(&r);
    c = last_request(srv);
    CHECK_STR(req_header(&c, "Content-Length", hv, sizeof hv), "0", "empty PUT length");

    /* Keep-alive: every request above went over one connection. */
    pthread_mutex_lock(&srv->mu);
    int conns = srv->connections;
    pthread_mutex_unlock(&srv->mu);
    CHECK_INT(conns, 1, "requests reuse one connection");
    st_destroy(st);
out:
    s3lect_config_free(cfg);
}

static void test_status_mapping(server *srv)
{
    s3lect_config *cfg = make_cfg(srv->port, NULL);
    st_store *st = open_store(cfg, "lock-bucket");
    if (!st)
        goto out;
    st_result r = {0};
    char x[1024];
    const char *body = "{}";

    set_reply(srv, 412, NULL,
              xml_error(x, sizeof x, "PreconditionFailed",
                        "At least one of the pre-conditions "
                        "you specified did not hold"));
    st_put(st, "lock.json", body, 2, "\"old\"", 5000, &r);
    expect(&r, ST_PRECONDITION, "\"old\"", "lock.json", "412 on If-Match");
    st_result_clear(&r);
    st_put(st, "lock.json", body, 2, NULL, 5000, &r);
    expect(&r, ST_PRECONDITION, "already exists", NULL, "412 on If-None-Match");
    st_result_clear(&r);

    set_reply(srv, 409, NULL,
              xml_error(x, sizeof x, "ConditionalRequestConflict", "A conflicting operation"));
    st_put(st, "lock.json", body, 2, "\"old\"", 5000, &r);
    /* AWS answers 409 when conditional writes race: the outcome is unknown
     * (the engine reads back), not "another writer won". */
    expect(&r, ST_TRANSIENT, "read back", NULL, "409 ConditionalRequestConflict");
    st_result_clear(&r);

    set_reply(srv, 404, NULL, xml_error(x, sizeof x, "NoSuchKey", "The key does not exist."));
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_NOT_FOUND, NULL, NULL, "404 NoSuchKey");
    CHECK(r.etag == NULL && r.body == NULL, "no etag or body on NOT_FOUND");
    st_result_clear(&r);

    set_reply(srv, 404, NULL, xml_error(x, sizeof x, "NoSuchBucket", "No such bucket"));
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_FATAL, "bucket 'lock-bucket' does not exist", "create it", "404 NoSuchBucket");
    st_result_clear(&r);

    set_reply(srv, 403, NULL, xml_error(x, sizeof x, "AccessDenied", "Access Denied"));
    st_put(st, "lock.json", body, 2, NULL, 5000, &r);
    expect(&r, ST_AUTH, "s3:PutObject", "arn:aws:s3:::lock-bucket/lock.json", "403 on PUT");
    CHECK(r.message && strstr(r.message, "REQ123"), "the request id is in the message");
    st_result_clear(&r);
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_AUTH, "s3:GetObject", "lock-bucket", "403 on GET");
    st_result_clear(&r);

    set_reply(srv, 403, NULL,
              xml_error(x, sizeof x, "SignatureDoesNotMatch",
                        "The request signature we calculated does not match the signature"));
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_AUTH, "secret", "lock-bucket", "403 SignatureDoesNotMatch");
    CHECK(r.message && strstr(r.message, "configuration"), "message names the credential source");
    st_result_clear(&r);

    set_reply(srv, 403, NULL, xml_error(x, sizeof x, "InvalidAccessKeyId", "unknown key"));
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_AUTH, "AKIDTEST", NULL, "403 InvalidAccessKeyId");
    st_result_clear(&r);

    set_reply(srv, 401, NULL, NULL);
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_AUTH, "s3:GetObject", NULL, "401 without body");
    st_result_clear(&r);

    set_reply(srv, 400, NULL, xml_error(x, sizeof x, "ExpiredToken", "token expired"));
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_AUTH, "refresh", NULL, "400 ExpiredToken");
    st_result_clear(&r);

    set_reply(srv, 403, NULL, xml_error(x, sizeof x, "RequestTimeTooSkewed", "skewed"));
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_AUTH, "clock", NULL, "403 RequestTimeTooSkewed");
    st_result_clear(&r);

    set_reply(srv, 503, NULL, xml_error(x, sizeof x, "SlowDown", "Please reduce your rate"));
    st_put(st, "lock.json", body, 2, "\"e\"", 5000, &r);
    expect(&r, ST_TRANSIENT, "SlowDown", "retry", "503 SlowDown");
    st_result_clear(&r);
    set_reply(srv, 500, NULL, xml_error(x, sizeof x, "InternalError", "oops"));
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_TRANSIENT, NULL, NULL, "500");
    st_result_clear(&r);
    set_reply(srv, 502, NULL, "<html>bad gateway</html>");
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_TRANSIENT, "HTTP 502", NULL, "502 with HTML");
    st_result_clear(&r);
    set_reply(srv, 429, NULL, NULL);
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_TRANSIENT, NULL, NULL, "429");
    st_result_clear(&r);

    set_reply(srv, 501, NULL, xml_error(x, sizeof x, "NotImplemented", "If-Match not supported"));
    st_put(st, "lock.json", body, 2, "\"e\"", 5000, &r);
    expect(&r, ST_FATAL, "conditional writes", NULL, "501 NotImplemented");
    st_result_clear(&r);

    set_reply(srv, 301, "x-amz-bucket-region: eu-west-1\r\n",
              xml_error(x, sizeof x, "PermanentRedirect", "use the right endpoint"));
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_FATAL, "eu-west-1", "--region", "301 to another region");
    st_result_clear(&r);

    set_reply(srv, 400, NULL,
              xml_error(x, sizeof x, "AuthorizationHeaderMalformed", "region 'us-east-1' wrong"));
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_FATAL, "region", NULL, "400 AuthorizationHeaderMalformed");
    st_result_clear(&r);

    set_reply(srv, 200, NULL, "{}");
    st_get(st, "lock.json", 5000, &r);
    expect(&r, ST_FATAL, "ETag", NULL, "200 without ETag");
    st_result_clear(&r);

    set_reply(srv, 400, NULL, "\x1b[31m<Error><Code>Bad\x07</Code></Error>");
    st_get(st, "lock.json", 5000, &r);
    CHECK(r.outcome == ST_FATAL && r.message && !strchr(r.message, '\x1b') &&
              !strchr(r.message, '\x07'),
          "control characters from the server never reach messages: %s",
          r.message ? r.message : "");
    st_result_clear(&r);

    /* A body over the read limit is cut (the record layer calls it corrupt). */
    set_big_reply(srv, 1536 * 1024);
    st_get(st, "lock.json", 10000, &r);
    CHECK(r.outcome == ST_OK && r.body_len == 1024 * 1024, "big body cut at 1 MiB: %d %zu",
          r.outcome, r.body_len);
    st_result_clear(&r);
    st_destroy(st);
out:
    s3lect_config_free(cfg);
}

static void test_session_token_and_virtual_host(server *srv)
{
    s3lect_config *cfg = make_cfg(srv->port, TOKEN);
    st_store *st = open_store(cfg, "lock-bucket");
    st_result r = {0};
    char hv[512];
    if (st) {
        set_reply(srv, 200, "ETag: \"t\"\r\n", "{}");
        st_get(st, "k.json", 5000, &r);
        expect(&r, ST_OK, NULL, NULL, "GET with session token");
        st_result_clear(&r);
        captured c = last_request(srv);
        CHECK_STR(req_header(&c, "x-amz-security-token", hv, sizeof hv), TOKEN, "token sent");
        CHECK(req_header(&c, "Authorization", hv, sizeof hv) &&
                  strstr(hv, "x-amz-security-token, Signature="),
              "token signed: %s", hv);
        set_reply(srv, 403, NULL, NULL);
        st_get(st, "k.json", 5000, &r);
        expect(&r, ST_AUTH, NULL, NULL, "403 with a token: never echoes it");
        st_result_clear(&r);
        st_destroy(st);
    }
    s3lect_config_free(cfg);

    /* Forced virtual-hosted addressing: bucket in the Host, key as the path. */
    cfg = make_cfg(srv->port, NULL);
    char ep[64];
    snprintf(ep, sizeof ep, "http://localhost:%d", srv->port);
    s3lect_config_set_str(cfg, S3LECT_OPT_ENDPOINT, ep);
    s3lect_config_set_bool(cfg, S3LECT_OPT_PATH_STYLE, 0);
    st = open_store(cfg, "lock-bucket");
    if (st) {
        set_reply(srv, 200, "ETag: \"v\"\r\n", "{}");
        st_get(st, "a/b.json", 5000, &r);
        expect(&r, ST_OK, NULL, NULL, "virtual-hosted GET");
        st_result_clear(&r);
        captured c = last_request(srv);
        char want[96];
        snprintf(want, sizeof want, "lock-bucket.localhost:%d", srv->port);
        CHECK_STR(req_header(&c, "Host", hv, sizeof hv), want, "virtual-hosted Host");
        CHECK_STR(c.path, "/a/b.json", "virtual-hosted path");
        check_signature(&c, "us-east-1", "virtual-hosted");
        st_destroy(st);
    }
    /* ... which an IP endpoint cannot do. */
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", srv->port);
    s3lect_config_set_str(cfg, S3LECT_OPT_ENDPOINT, ep);
    st_store *bad = NULL;
    char err[512] = "";
    CHECK(s3_open_bucket(cfg, "lock-bucket", &bad, err, sizeof err) == S3LECT_EINVAL && !bad,
          "virtual-hosted on an IP endpoint is refused");
    CHECK(strstr(err, "path-style") != NULL, "the message names the fix: %s", err);
    /* Auto addressing with an endpoint path prefix. */
    s3lect_config_set_bool(cfg, S3LECT_OPT_PATH_STYLE, 1);
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d/prefix/", srv->port);
    s3lect_config_set_str(cfg, S3LECT_OPT_ENDPOINT, ep);
    st = open_store(cfg, "lock-bucket");
    if (st) {
        set_reply(srv, 200, "ETag: \"p\"\r\n", "{}");
        st_get(st, "k", 5000, &r);
        expect(&r, ST_OK, NULL, NULL, "GET with an endpoint path");
        st_result_clear(&r);
        captured c = last_request(srv);
        CHECK_STR(c.path, "/prefix/lock-bucket/k", "endpoint path kept before the bucket");
        st_destroy(st);
    }
    s3lect_config_free(cfg);
}

static void test_timeout_and_refused(server *srv)
{
    s3lect_config *cfg = make_cfg(srv->port, NULL);
    st_store *st = open_store(cfg, "lock-bucket");
    st_result r = {0};
    if (st) {
        set_hang(srv);
        int64_t t0 = u_mono_ms();
        st_get(st, "k", 300, &r);
        int64_t took = u_mono_ms() - t0;
        expect(&r, ST_TRANSIENT, "timed out", NULL, "a server that never answers");
        CHECK(took >= 250 && took < 5000, "the per-request timeout is honoured (%lld ms)",
              (long long)took);
        st_result_clear(&r);
        st_destroy(st);
    }
    s3lect_config_free(cfg);

    /* A port nobody listens on: take one, close it. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    int port = ntohs(a.sin_port);
    close(fd);
    cfg = make_cfg(port, NULL);
    st = open_store(cfg, "lock-bucket");
    if (st) {
        st_put(st, "k", "{}", 2, NULL, 2000, &r);
        expect(&r, ST_TRANSIENT, "connection", NULL, "connection refused");
        st_result_clear(&r);
        st_destroy(st);
    }
    s3lect_config_free(cfg);
}

static void test_open_errors(void)
{
    s3lect_config *cfg = make_cfg(9, NULL);
    st_store *st = NULL;
    char err[512];
    struct {
        const char *endpoint;
        const char *needle;
    } bad[] = {
        {"ftp://x", "http://"},  {"127.0.0.1:9000", "http://"}, {"http://", "no host"},
        {"http://h:0", "port"},  {"http://h:99999", "port"},    {"http://u:p@h", "user"},
        {"http://[::1", "IPv6"}, {"http://h/?q", "query"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s3lect_config_set_str(cfg, S3LECT_OPT_ENDPOINT, bad[i].endpoint);
        err[0] = '\0';
        int rc = s3_open_bucket(cfg, "b", &st, err, sizeof err);
        CHECK(rc == S3LECT_EINVAL && !st && strstr(err, bad[i].needle),
              "endpoint %s: rc %d, message [%s] should mention [%s]", bad[i].endpoint, rc, err,
              bad[i].needle);
    }
    s3lect_config_free(cfg);

    /* No credentials anywhere: the open fails with what to set. */
    const char *vars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",       "AWS_SESSION_TOKEN",
                          "AWS_PROFILE",       "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    char *home = t_tmpdir("s3home");
    setenv("HOME", home, 1);
    cfg = s3lect_config_new();
    s3lect_config_set_str(cfg, S3LECT_OPT_ENDPOINT, "http://127.0.0.1:9");
    int rc = s3_open_bucket(cfg, "b", &st, err, sizeof err);
    CHECK(rc == S3LECT_EAUTH && !st && strstr(err, "AWS_ACCESS_KEY_ID"),
          "no credentials: rc %d [%s]", rc, err);
    setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    rc = s3_open_bucket(cfg, "b", &st, err, sizeof err);
    CHECK(rc == 0 && st, "credentials from the environment: rc %d [%s]", rc, err);
    st_destroy(st);
    s3lect_config_free(cfg);
    rmdir(home);
    free(home);
}

int main(void)
{
    server srv;
    server_start(&srv);
    test_get_put_wire(&srv);
    test_status_mapping(&srv);
    test_session_token_and_virtual_host(&srv);
    test_timeout_and_refused(&srv);
    server_stop(&srv);
    test_open_errors();
    return t_finish("test_s3_status");
}
