/* SPDX-License-Identifier: Apache-2.0 */
/* test_peer_tls.c - the peer server (peer_server.c) and client
 * (peer_client.c) over real TLS on 127.0.0.1.
 *
 * Certificates are made at test time with the openssl command (argv[1]) in
 * a temporary directory: a CA, a server certificate for 127.0.0.1, ::1 and
 * localhost, a client certificate, and a second, unrelated CA. The server
 * serves a scripted source (peer_fake.h). Raw HTTP checks use a TLS client
 * written against the OpenSSL API, so they see exactly the bytes served.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "config.h"
#include "peer.h"
#include "peer_fake.h"
#include "record.h"
#include "store.h"
#include "testutil.h"
#include "util.h"

#define PATH "/health/leadership"

static char *dir;
static char ca_path[512], ca_pem_path[512], server_cert[512], server_key[512], client_bundle[512],
    other_ca[512];

static void pathf(char *out, const char *name)
{
    snprintf(out, 512, "%s/%s", dir, name);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int make_certs(const char *openssl)
{
    char script[4096];
    snprintf(script, sizeof script,
             "set -e; cd '%s'; O='%s'\n"
             "EC='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
             "for ca in ca other-ca; do\n"
             "  $O req -x509 $EC -keyout $ca.key -out $ca.pem -days 2 -subj /CN=s3lect-test-$ca "
             "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign\n"
             "done\n"
             "printf 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\\n"
             "extendedKeyUsage=serverAuth\\n' > server.ext\n"
             "printf 'extendedKeyUsage=clientAuth\\n' > client.ext\n"
             "for who in server client; do\n"
             /* the server certificate names the leader id the checks expect */
             "  cn=s3lect-test-$who; [ $who = server ] && cn=node-1\n"
             "  $O req -new $EC -keyout $who.key -out $who.csr -subj /CN=$cn\n"
             "  $O x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out $who.pem -days 2 -extfile $who.ext\n"
             "done\n"
             "cat client.pem client.key > client-bundle.pem\n",
             dir, openssl);
    char log[600], cmd[5000];
    snprintf(log, sizeof log, "%s/openssl.log", dir);
    snprintf(cmd, sizeof cmd, "sh -c \"$S3LECT_CERT_SCRIPT\" > '%s' 2>&1", log);
    setenv("S3LECT_CERT_SCRIPT", script, 1);
    int rc = system(cmd);
    if (rc != 0) {
        char *l = slurp(log);
        fprintf(stderr, "making test certificates with '%s' failed:\n%s\n", openssl,
                l ? l : "(no log)");
        free(l);
        return -1;
    }
    pathf(ca_path, "ca.pem");
    pathf(ca_pem_path, "ca.pem");
    pathf(server_cert, "server.pem");
    pathf(server_key, "server.key");
    pathf(client_bundle, "client-bundle.pem");
    pathf(other_ca, "other-ca.pem");
    return 0;
}

/* ---- set-up helpers ---- */

static s3lect_config *server_cfg(const char *listen, int pem_bytes)
{
    s3lect_config *c = s3lect_config_new();
    s3lect_config_set_str(c, S3LECT_OPT_PEER_LISTEN, listen);
    if (pem_bytes) {
        char *cert = slurp(server_cert), *key = slurp(server_key), *ca = slurp(ca_path);
        s3lect_config_set_bytes(c, S3LECT_OPT_PEER_CERT, cert, strlen(cert));
        s3lect_config_set_bytes(c, S3LECT_OPT_PEER_KEY, key, strlen(key));
        s3lect_config_set_bytes(c, S3LECT_OPT_PEER_CA, ca, strlen(ca));
        free(cert);
        free(key);
        free(ca);
    } else {
        s3lect_config_set_str(c, S3LECT_OPT_PEER_CERT, server_cert);
        s3lect_config_set_str(c, S3LECT_OPT_PEER_KEY, server_key);
        s3lect_config_set_str(c, S3LECT_OPT_PEER_CA, ca_path);
    }
    return c;
}

static peer_server *start_server(fake_source *f, int mtls, int pem_bytes, int *port)
{
    s3lect_config *c = server_cfg("127.0.0.1:0", pem_bytes);
    peer_source src = fake_source_of(f);
    peer_server *s = NULL;
    char err[512] = "";
    int rc = peer_server_start(c, NULL, &src, mtls, &s, err, sizeof err);
    CHECK(rc == 0 && s, "server starts: %d %s", rc, err);
    *port = s ? peer_server_port(s) : 0;
    CHECK(*port > 0, "ephemeral port reported: %d", *port);
    s3lect_config_free(c);
    return s;
}

/* ca: a path or PEM text, or NULL; cert: the client bundle (path or PEM) or NULL. */
static peer_client *make_client(const char *ca, const char *cert)
{
    s3lect_config *c = s3lect_config_new();
    if (ca)
        s3lect_config_set_str(c, S3LECT_OPT_PEER_CA, ca);
    if (cert)
        s3lect_config_set_str(c, S3LECT_OPT_PEER_CLIENT_CERT, cert);
    peer_client *pc = NULL;
    char err[512] = "";
    int rc = peer_client_new(c, &pc, err, sizeof err);
    CHECK(rc == 0 && pc, "client created: %d %s", rc, err);
    s3lect_config_free(c);
    return pc;
}

static void check_peer(peer_client *pc, int port, const char *etag, int64_t wait_ms,
                       const char *expect_id, st_result *out)
{
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    /* 10 s on top of the wait: a TLS handshake under TSan on a loaded
     * 2-core machine (the test command beside the other sanitizer builds)
     * took more than 3 s once (issue 38 item 12); no check here relies on
     * the timeout firing. */
    peer_client_check(pc, addr, PATH, etag, wait_ms, 10000, expect_id, NULL, out);
}

/* ---- a raw TLS client (OpenSSL API) ---- */

typedef struct tcli {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    char buf[1 << 16];
    size_t len;
} tcli;

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Connects and handshakes; max_version 0 = library default. Returns 0, or
 * -1 with the OpenSSL reason code of the failure in *reason. */
static int tcli_open(tcli *t, int port, int max_version, unsigned long *reason)
{
    memset(t, 0, sizeof *t);
    *reason = 0;
    t->fd = tcp_connect(port);
    if (t->fd < 0)
        return -1;
    t->ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(t->ctx, ca_path, NULL);
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    if (max_version) {
        SSL_CTX_set_min_proto_version(t->ctx, 0);
        SSL_CTX_set_max_proto_version(t->ctx, max_version);
    }
    if (max_version && max_version < TLS1_2_VERSION) {
        /* Let this client really offer TLS 1.1, so that it is the server that refuses. */
        SSL_CTX_set_security_level(t->ctx, 0);
        SSL_CTX_set_cipher_list(t->ctx, "DEFAULT:@SECLEVEL=0");
    }
    t->ssl = SSL_new(t->ctx);
    SSL_set_fd(t->ssl, t->fd);
    SSL_set_tlsext_host_name(t->ssl, "localhost");
    ERR_clear_error();
    if (SSL_connect(t->ssl) != 1) {
        *reason = ERR_GET_REASON(ERR_peek_last_error());
        ERR_clear_error();
        return -1;
    }
    return 0;
}

static void tcli_close(tcli *t)
{
    if (t->ssl)
        SSL_free(t->ssl);
    if (t->ctx)
        SSL_CTX_free(t->ctx);
    if (t->fd >= 0)
        close(t->fd);
    memset(t, 0, sizeof *t);
    t->fd = -1;
}

static int tcli_send(tcli *t, const char *s, size_t n)
{
    ERR_clear_error();
    return SSL_write(t->ssl, s, (int)n) == (int)n ? 0 : -1;
}

/* Reads one response. Returns the status (0 on EOF or error); fills hdr
 * (the head) and body. */
static int tcli_response(tcli *t, int head_only, char *hdr, size_t hcap, char *body, size_t bcap)
{
    char *end;
    while (!(end = memmem(t->buf, t->len, "\r\n\r\n", 4))) {
        int r = SSL_read(t->ssl, t->buf + t->len, (int)(sizeof t->buf - t->len));
        if (r <= 0)
            return 0;
        t->len += (size_t)r;
    }
    size_t hl = (size_t)(end - t->buf) + 4;
    snprintf(hdr, hcap, "%.*s", (int)hl, t->buf);
    size_t clen = 0;
    const char *cl = strcasestr(hdr, "\r\nContent-Length:");
    if (cl)
        clen = strtoul(cl + 17, NULL, 10);
    if (head_only)
        clen = 0;
    while (t->len < hl + clen) {
        int r = SSL_read(t->ssl, t->buf + t->len, (int)(sizeof t->buf - t->len));
        if (r <= 0)
            return 0;
        t->len += (size_t)r;
    }
    snprintf(body, bcap, "%.*s", (int)clen, t->buf + hl);
    memmove(t->buf, t->buf + hl + clen, t->len - hl - clen);
    t->len -= hl + clen;
    int status = 0;
    sscanf(hdr, "HTTP/1.1 %d", &status);
    return status;
}

/* 1 if the server closed the connection (EOF) within timeout_ms; data or
 * TLS records that are not application data (session tickets) do not count. */
static int tcli_eof_within(tcli *t, int64_t timeout_ms)
{
    int64_t deadline = u_mono_ms() + timeout_ms;
    int fl = fcntl(t->fd, F_GETFL);
    fcntl(t->fd, F_SETFL, fl | O_NONBLOCK);
    int eof = 0;
    while (!eof && u_mono_ms() < deadline) {
        struct pollfd p = {t->fd, POLLIN, 0};
        if (SSL_pending(t->ssl) == 0 && poll(&p, 1, 50) <= 0)
            continue;
        char c;
        ERR_clear_error();
        int r = SSL_read(t->ssl, &c, 1);
        if (r <= 0 && SSL_get_error(t->ssl, r) != SSL_ERROR_WANT_READ)
            eof = 1;
        ERR_clear_error();
    }
    fcntl(t->fd, F_SETFL, fl);
    return eof;
}

/* ---- tests ---- */

static void test_check_ok(void)
{
    for (int pem = 0; pem <= 1; pem++) {
        fake_source f;
        fake_init(&f, 1, "\"e1\"");
        int port;
        peer_server *s = start_server(&f, 0, pem, &port);
        char *ca = pem ? slurp(ca_path) : NULL;
        peer_client *pc = make_client(pem ? ca : ca_path, NULL);
        st_result r;
        check_peer(pc, port, NULL, 0, "node-1", &r);
        CHECK(r.outcome == ST_OK, "[%s] leading: OK (%s)", pem ? "pem" : "path",
              r.message ? r.message : "");
        CHECK(r.http_status == 200, "HTTP %d", r.http_status);
        CHECK(r.etag && strcmp(r.etag, "\"e1\"") == 0, "etag %s", r.etag ? r.etag : "(null)");
        CHECK(r.body && strstr(r.body, "\"leaderID\":\"node-1\"") && strstr(r.body, "\"term\":7"),
              "body %s", r.body ? r.body : "(null)");
        st_result_clear(&r);

        /* NULL expect_id: no id check. */
        check_peer(pc, port, NULL, 0, NULL, &r);
        CHECK(r.outcome == ST_OK, "no expected id: OK");
        st_result_clear(&r);
        peer_client_free(pc);
        free(ca);
        peer_server_stop(s);
        fake_destroy(&f);
    }
}

static void test_check_failures(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    int port;
    peer_server *s = start_server(&f, 0, 0, &port);
    peer_client *pc = make_client(ca_path, NULL);
    st_result r;

    check_peer(pc, port, NULL, 0, "node-2", &r);
    CHECK(r.outcome == ST_TRANSIENT && r.message && strstr(r.message, "node-1") &&
              strstr(r.message, "node-2"),
          "another leader id: TRANSIENT naming both (%s)", r.message ? r.message : "");
    st_result_clear(&r);

    fake_set(&f, 0, NULL);
    check_peer(pc, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_TRANSIENT && r.http_status == 404 && r.message &&
              strstr(r.message, "not leading"),
          "not leading: TRANSIENT, HTTP 404 (%d, %s)", r.http_status, r.message ? r.message : "");
    st_result_clear(&r);
    fake_set(&f, 1, NULL);

    peer_client *wrong = make_client(other_ca, NULL);
    check_peer(wrong, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_TRANSIENT && r.message && strstr(r.message, "certificate"),
          "wrong CA: TRANSIENT about the certificate (%s)", r.message ? r.message : "");
    st_result_clear(&r);
    peer_client_free(wrong);

    /* The CA can be replaced at run time. */
    peer_client *later = make_client(other_ca, NULL);
    char *ca = slurp(ca_path);
    CHECK(peer_client_set_ca(later, ca, strlen(ca)) == 0, "set_ca");
    check_peer(later, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_OK, "after set_ca: OK (%s)", r.message ? r.message : "");
    st_result_clear(&r);
    free(ca);
    peer_client_free(later);

    /* A bad address from the record never reaches the URL. */
    peer_client_check(pc, "evil.example/x?", PATH, NULL, 0, 1000, "node-1", NULL, &r);
    CHECK(r.outcome == ST_TRANSIENT && r.message && strstr(r.message, "host:port"),
          "bad address refused (%s)", r.message ? r.message : "");
    st_result_clear(&r);

    /* Nobody listening. */
    int dead = tcp_connect(port); /* keep port known; pick a closed one */
    close(dead);
    peer_server_stop(s);
    int64_t t0 = u_mono_ms();
    check_peer(pc, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_TRANSIENT && u_mono_ms() - t0 < 3500,
          "stopped server: TRANSIENT quickly (%s)", r.message ? r.message : "");
    st_result_clear(&r);
    peer_client_free(pc);
    fake_destroy(&f);

    /* The answer must be an s3lect endpoint: no etag → TRANSIENT is
     * covered by construction (fake always sends one); a body that is not
     * JSON is checked against a server answering other paths. */
    fake_init(&f, 1, "\"e1\"");
    s = start_server(&f, 0, 0, &port);
    pc = make_client(ca_path, NULL);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    peer_client_check(pc, addr, "/elsewhere", NULL, 0, 3000, "node-1", NULL, &r);
    CHECK(r.outcome == ST_TRANSIENT && r.http_status == 404, "other path: 404 → TRANSIENT");
    st_result_clear(&r);
    peer_client_free(pc);
    peer_server_stop(s);
    fake_destroy(&f);
}

typedef struct later_change {
    fake_source *f;
    int64_t delay_ms;
    const char *etag;
    int leading;
} later_change;

static void *do_later_change(void *arg)
{
    later_change *c = arg;
    t_sleep_ms(c->delay_ms);
    fake_set(c->f, c->leading, c->etag);
    return NULL;
}

static void test_long_poll(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    int port;
    peer_server *s = start_server(&f, 0, 0, &port);
    peer_client *pc = make_client(ca_path, NULL);
    st_result r;

    /* Renewal: answered when the etag changes. */
    later_change ch = {&f, 300, "\"e2\"", 1};
    pthread_t th;
    pthread_create(&th, NULL, do_later_change, &ch);
    int64_t t0 = u_mono_ms();
    check_peer(pc, port, "\"e1\"", 20000, "node-1", &r);
    int64_t took = u_mono_ms() - t0;
    pthread_join(th, NULL);
    CHECK(r.outcome == ST_OK && r.etag && strcmp(r.etag, "\"e2\"") == 0,
          "long poll returns the new etag (%s)", r.etag ? r.etag : r.message);
    CHECK(took >= 290 && took < 5000, "answered at the change: %lld ms", (long long)took);
    st_result_clear(&r);

    /* Wait ends with no change: 200 with the same etag. */
    t0 = u_mono_ms();
    check_peer(pc, port, "\"e2\"", 600, "node-1", &r);
    took = u_mono_ms() - t0;
    CHECK(r.outcome == ST_OK && r.etag && strcmp(r.etag, "\"e2\"") == 0, "timeout: same etag");
    CHECK(took >= 590 && took < 4000, "held for the wait: %lld ms", (long long)took);
    st_result_clear(&r);

    /* Step-down during the poll: 404 at once → TRANSIENT. */
    later_change down = {&f, 300, NULL, 0};
    pthread_create(&th, NULL, do_later_change, &down);
    t0 = u_mono_ms();
    check_peer(pc, port, "\"e2\"", 20000, "node-1", &r);
    took = u_mono_ms() - t0;
    pthread_join(th, NULL);
    CHECK(r.outcome == ST_TRANSIENT && r.http_status == 404 && took < 5000,
          "step-down ends the poll with 404 after %lld ms", (long long)took);
    st_result_clear(&r);

    peer_client_free(pc);
    peer_server_stop(s);
    fake_destroy(&f);
}

typedef struct flag_later {
    volatile int *flag;
    int64_t delay_ms;
} flag_later;

static void *set_flag_later(void *arg)
{
    flag_later *fl = arg;
    t_sleep_ms(fl->delay_ms);
    __atomic_store_n(fl->flag, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_abort(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    int port;
    peer_server *s = start_server(&f, 0, 0, &port);
    peer_client *pc = make_client(ca_path, NULL);
    volatile int abort_flag = 0;
    flag_later fl = {&abort_flag, 300};
    pthread_t th;
    pthread_create(&th, NULL, set_flag_later, &fl);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    st_result r;
    int64_t t0 = u_mono_ms();
    peer_client_check(pc, addr, PATH, "\"e1\"", 30000, 3000, "node-1", &abort_flag, &r);
    int64_t took = u_mono_ms() - t0;
    pthread_join(th, NULL);
    CHECK(r.outcome == ST_TRANSIENT && r.message && strstr(r.message, "stopped"),
          "abort: TRANSIENT 'stopped' (%s)", r.message ? r.message : "");
    CHECK(took >= 290 && took < 1500, "abort ends the long poll promptly: %lld ms",
          (long long)took);
    st_result_clear(&r);

    /* Already set: returns at once. */
    t0 = u_mono_ms();
    peer_client_check(pc, addr, PATH, "\"e1\"", 30000, 3000, "node-1", &abort_flag, &r);
    CHECK(r.outcome == ST_TRANSIENT && u_mono_ms() - t0 < 500, "flag set before the call");
    st_result_clear(&r);

    /* The client still works afterwards. */
    peer_client_check(pc, addr, PATH, NULL, 0, 3000, "node-1", NULL, &r);
    CHECK(r.outcome == ST_OK, "check after an abort: OK (%s)", r.message ? r.message : "");
    st_result_clear(&r);
    peer_client_free(pc);
    peer_server_stop(s);
    fake_destroy(&f);
}

static void test_mtls(void)
{
    for (int pem = 0; pem <= 1; pem++) {
        fake_source f;
        fake_init(&f, 1, "\"e1\"");
        int port;
        peer_server *s = start_server(&f, 1, pem, &port);
        st_result r;

        peer_client *anon = make_client(ca_path, NULL);
        check_peer(anon, port, NULL, 0, "node-1", &r);
        CHECK(r.outcome == ST_TRANSIENT, "[%s] mTLS: a client without a certificate is refused",
              pem ? "pem" : "path");
        st_result_clear(&r);
        peer_client_free(anon);

        char *bundle = pem ? slurp(client_bundle) : NULL;
        peer_client *withcert = make_client(ca_path, pem ? bundle : client_bundle);
        check_peer(withcert, port, NULL, 0, "node-1", &r);
        CHECK(r.outcome == ST_OK, "[%s] mTLS: a client with a certificate is served (%s)",
              pem ? "pem" : "path", r.message ? r.message : "");
        st_result_clear(&r);
        peer_client_free(withcert);
        free(bundle);

        /* The raw client has no certificate either. */
        tcli t;
        unsigned long reason;
        int ok = tcli_open(&t, port, 0, &reason) == 0;
        char hdr[2048], body[2048];
        int status = 0;
        const char *get = "GET " PATH " HTTP/1.1\r\n\r\n";
        if (ok && tcli_send(&t, get, strlen(get)) == 0)
            status = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
        CHECK(status == 0, "[%s] mTLS: no answer without a certificate (status %d)",
              pem ? "pem" : "path", status);
        tcli_close(&t);
        peer_server_stop(s);
        fake_destroy(&f);
    }
}

typedef struct poller {
    peer_client *pc;
    int port;
    st_result r;
    int64_t done_ms;
} poller;

static void *poll_thread(void *arg)
{
    poller *p = arg;
    check_peer(p->pc, p->port, "\"e1\"", 30000, "node-1", &p->r);
    p->done_ms = u_mono_ms();
    return NULL;
}

/* A stop while a long poll is blocked returns promptly, even when the
 * source's wait never wakes up by itself. */
static void test_stop_during_poll(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    f.deaf = 1;
    int port;
    peer_server *s = start_server(&f, 0, 0, &port);
    poller p = {make_client(ca_path, NULL), port, {0}, 0};
    pthread_t th;
    pthread_create(&th, NULL, poll_thread, &p);
    int64_t deadline = u_mono_ms() + 10000;
    /* The server re-checks a parked long poll with view() (this source
     * has no state callback): a second view is the poll parked. */
    while (fake_count(&f, &f.view_calls) < 2 && u_mono_ms() < deadline)
        t_sleep_ms(10);
    CHECK(fake_count(&f, &f.view_calls) >= 2, "the long poll reached the source");
    t_sleep_ms(200);
    int64_t t0 = u_mono_ms();
    peer_server_stop(s);
    int64_t took = u_mono_ms() - t0;
    pthread_join(th, NULL);
    CHECK(took < 1500, "stop with a blocked long poll took %lld ms", (long long)took);
    CHECK(p.r.outcome == ST_TRANSIENT && p.done_ms - t0 < 3000,
          "the follower sees the stop at once (%lld ms, %s)", (long long)(p.done_ms - t0),
          p.r.message ? p.r.message : "");
    st_result_clear(&p.r);
    peer_client_free(p.pc);
    fake_destroy(&f);
}

static int send_str(tcli *t, const char *s)
{
    return tcli_send(t, s, strlen(s));
}

/* A long poll whose client goes away stops waiting on the source. */
static void test_client_gone(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    int port;
    peer_server *s = start_server(&f, 0, 0, &port);
    tcli t;
    unsigned long reason;
    CHECK(tcli_open(&t, port, 0, &reason) == 0, "connect");
    send_str(&t, "GET " PATH "?wait=30000&etag=%22e1%22 HTTP/1.1\r\n\r\n");
    int64_t deadline = u_mono_ms() + 5000;
    while (fake_count(&f, &f.view_calls) == 0 && u_mono_ms() < deadline)
        t_sleep_ms(10);
    int w0 = fake_count(&f, &f.view_calls);
    t_sleep_ms(400);
    int w1 = fake_count(&f, &f.view_calls);
    CHECK(w0 > 0 && w1 > w0, "the long poll is waiting (%d → %d re-checks)", w0, w1);
    tcli_close(&t);
    t_sleep_ms(500);
    int w2 = fake_count(&f, &f.view_calls);
    t_sleep_ms(500);
    int w3 = fake_count(&f, &f.view_calls);
    CHECK(w3 == w2, "no more re-checks once the client left (%d → %d)", w2, w3);
    peer_server_stop(s);
    fake_destroy(&f);
}

/* What a Go s3lect follower or any HTTP client sees. */
static void test_raw_http(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    int port;
    peer_server *s = start_server(&f, 0, 0, &port);
    tcli t;
    unsigned long reason;
    char hdr[4096], body[8192];
    CHECK(tcli_open(&t, port, 0, &reason) == 0, "raw TLS client connects (%lu)", reason);

    /* Several requests on one kept-alive connection. */
    send_str(&t, "GET " PATH " HTTP/1.1\r\nHost: localhost\r\n\r\n");
    int st = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    CHECK(st == 200, "GET: %d", st);
    CHECK(strcasestr(hdr, "Content-Type: application/json") != NULL, "JSON: %s", hdr);
    CHECK(strcasestr(hdr, "Connection: keep-alive") != NULL, "keep-alive: %s", hdr);
    CHECK(strstr(body, "\"leaderID\":\"node-1\"") && strstr(body, "\"etag\""), "body: %s", body);
    size_t getlen = strlen(body);

    send_str(&t, "HEAD " PATH " HTTP/1.1\r\n\r\n");
    st = tcli_response(&t, 1, hdr, sizeof hdr, body, sizeof body);
    char want[64];
    snprintf(want, sizeof want, "Content-Length: %zu", getlen);
    CHECK(st == 200 && strstr(hdr, want), "HEAD: %d, %s in %s", st, want, hdr);

    send_str(&t, "PUT " PATH " HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
    st = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    CHECK(st == 405 && strstr(hdr, "Allow: GET, HEAD, POST"), "PUT: %d with Allow (%s)", st, hdr);

    /* POST is the batch: a body that is not one is 400, on a kept-alive connection. */
    send_str(&t, "POST " PATH " HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
    st = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    CHECK(st == 400 && strstr(body, "malformed batch"), "POST not a batch: %d %s", st, body);

    send_str(&t, "GET /nope HTTP/1.1\r\n\r\n");
    st = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    CHECK(st == 404 && strstr(body, "\"error\""), "other path: %d %s", st, body);

    /* A GET with a body, then two pipelined requests in one write. */
    send_str(&t, "GET " PATH " HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET " PATH
                 " HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\n\r\n");
    int s1 = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    int s2 = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    int s3 = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    CHECK(s1 == 200 && s2 == 200 && s3 == 404, "body discarded, pipelining: %d %d %d", s1, s2, s3);

    /* Not leading: 404. */
    fake_set(&f, 0, NULL);
    send_str(&t, "GET " PATH " HTTP/1.1\r\n\r\n");
    st = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    CHECK(st == 404 && strstr(body, "not the leader"), "not leading: %d %s", st, body);
    fake_set(&f, 1, NULL);

    /* Malformed: 400 and the connection closes. */
    send_str(&t, "GARBAGE\r\n\r\n");
    st = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    CHECK(st == 400 && strcasestr(hdr, "Connection: close"), "garbage: %d (%s)", st, hdr);
    CHECK(tcli_eof_within(&t, 3000), "closed after 400");
    tcli_close(&t);

    /* HTTP/1.0: answered, then closed. */
    CHECK(tcli_open(&t, port, 0, &reason) == 0, "reconnect");
    send_str(&t, "GET " PATH " HTTP/1.0\r\n\r\n");
    st = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    CHECK(st == 200 && strcasestr(hdr, "Connection: close"), "HTTP/1.0: %d", st);
    CHECK(tcli_eof_within(&t, 3000), "HTTP/1.0 connection closed");
    tcli_close(&t);

    /* Bad version, oversized head: 505, 431. */
    CHECK(tcli_open(&t, port, 0, &reason) == 0, "reconnect");
    send_str(&t, "GET " PATH " HTTP/2.0\r\n\r\n");
    st = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    CHECK(st == 505, "HTTP/2.0 over HTTP/1 framing: %d", st);
    tcli_close(&t);
    /* Oversized heads: 431 for 64 KiB (the server drains what follows its
     * answer, so the client reads it); 1 MiB is answered or cut off, and
     * the connection ends either way. */
    for (int mib = 0; mib <= 1; mib++) {
        CHECK(tcli_open(&t, port, 0, &reason) == 0, "reconnect");
        size_t big = mib ? 1024 * 1024 : 64 * 1024;
        char *huge = malloc(big + 64);
        int n = snprintf(huge, 64, "GET " PATH " HTTP/1.1\r\nX-Big: ");
        memset(huge + n, 'a', big);
        memcpy(huge + n + big, "\r\n\r\n", 4);
        int64_t t0 = u_mono_ms();
        tcli_send(&t, huge, (size_t)n + big + 4); /* may fail part-way once the server closes */
        free(huge);
        st = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
        if (!mib)
            CHECK(st == 431 && strstr(body, "too large"), "64 KiB header: %d %s", st, body);
        CHECK(st == 431 || st == 0, "%s header: 431 or cut off (%d)", mib ? "1 MiB" : "64 KiB", st);
        CHECK(tcli_eof_within(&t, 5000) && u_mono_ms() - t0 < 8000,
              "connection with an oversized head ends promptly");
        tcli_close(&t);
    }

    /* And the endpoint still serves. */
    peer_client *pc = make_client(ca_path, NULL);
    st_result r;
    check_peer(pc, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_OK, "served after the bad requests (%s)", r.message ? r.message : "");
    st_result_clear(&r);
    peer_client_free(pc);
    peer_server_stop(s);
    fake_destroy(&f);
}

static void test_tls_versions(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    int port;
    peer_server *s = start_server(&f, 0, 0, &port);
    tcli t;
    unsigned long reason;
    CHECK(tcli_open(&t, port, TLS1_2_VERSION, &reason) == 0, "TLS 1.2 client accepted (%lu)",
          reason);
    tcli_close(&t);
    int rc = tcli_open(&t, port, TLS1_1_VERSION, &reason);
    CHECK(rc != 0, "TLS 1.1 client refused");
    CHECK(reason == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION || reason == SSL_R_UNSUPPORTED_PROTOCOL,
          "refused by the server for its protocol version (reason %lu: %s)", reason,
          ERR_reason_error_string(ERR_PACK(ERR_LIB_SSL, 0, reason)));
    tcli_close(&t);
    peer_server_stop(s);
    fake_destroy(&f);
}

typedef struct slow {
    int port;
    int64_t start_ms, closed_ms;
    int handshake_ok;
    size_t sent;
} slow;

/* Handshakes, then sends a request head one byte per second until the
 * server closes the connection (or 30 s pass). */
static void *slowloris(void *arg)
{
    slow *sl = arg;
    tcli t;
    unsigned long reason;
    sl->start_ms = u_mono_ms();
    if (tcli_open(&t, sl->port, 0, &reason) != 0) {
        tcli_close(&t);
        return NULL;
    }
    sl->handshake_ok = 1;
    const char *req = "GET " PATH " HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa"
                      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    for (size_t i = 0; i < strlen(req) && u_mono_ms() - sl->start_ms < 30000; i++) {
        if (tcli_send(&t, req + i, 1) != 0)
            break;
        sl->sent++;
        if (tcli_eof_within(&t, 1000))
            break;
    }
    sl->closed_ms = u_mono_ms();
    tcli_close(&t);
    return NULL;
}

static void test_slowloris(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    int port;
    peer_server *s = start_server(&f, 0, 0, &port);
    slow sl = {port, 0, 0, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, slowloris, &sl);
    t_sleep_ms(1500);
    peer_client *pc = make_client(ca_path, NULL);
    for (int i = 0; i < 3; i++) {
        st_result r;
        int64_t t0 = u_mono_ms();
        check_peer(pc, port, NULL, 0, "node-1", &r);
        CHECK(r.outcome == ST_OK && u_mono_ms() - t0 < 2000,
              "served while a slow client dribbles (%lld ms, %s)", (long long)(u_mono_ms() - t0),
              r.message ? r.message : "");
        st_result_clear(&r);
        t_sleep_ms(500);
    }
    pthread_join(th, NULL);
    int64_t lived = sl.closed_ms - sl.start_ms;
    CHECK(sl.handshake_ok && sl.sent >= 5, "the slow client got going (%zu bytes)", sl.sent);
    CHECK(lived >= 9000 && lived < 16000,
          "the server drops a head that takes over 10 s: closed after %lld ms, %zu bytes",
          (long long)lived, sl.sent);
    peer_client_free(pc);
    peer_server_stop(s);
    fake_destroy(&f);
}

/* Connections that never say anything fill the table; a new client is
 * refused while they last and served once they time out or close. */
static void test_max_conns(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    int port;
    peer_server *s = start_server(&f, 0, 0, &port);
    enum { EXTRA = 8, N = PEER_MAX_CONNS + EXTRA };
    for (int phase = 0; phase < 2; phase++) {
        int fds[N];
        int64_t opened = u_mono_ms();
        for (int i = 0; i < N; i++)
            fds[i] = tcp_connect(port);
        /* The ones over the limit are closed at once. */
        int closed = 0;
        int64_t deadline = u_mono_ms() + 5000;
        int seen[N];
        memset(seen, 0, sizeof seen);
        while (closed < EXTRA && u_mono_ms() < deadline) {
            for (int i = 0; i < N; i++) {
                struct pollfd p = {fds[i], POLLIN, 0};
                char c;
                if (!seen[i] && poll(&p, 1, 0) > 0 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0) {
                    seen[i] = 1;
                    closed++;
                }
            }
            t_sleep_ms(20);
        }
        CHECK(closed == EXTRA, "[phase %d] %d connections over the limit closed at once (%d)",
              phase, EXTRA, closed);
        peer_client *pc = make_client(ca_path, NULL);
        st_result r;
        check_peer(pc, port, NULL, 0, "node-1", &r);
        CHECK(r.outcome == ST_TRANSIENT, "[phase %d] a client is refused while the table is full",
              phase);
        st_result_clear(&r);
        if (phase == 1) {
            for (int i = 0; i < N; i++)
                close(fds[i]);
        }
        /* Served once they time out (phase 0) or close (phase 1). */
        int ok = 0;
        int64_t t_ok = 0;
        deadline = u_mono_ms() + 25000;
        while (!ok && u_mono_ms() < deadline) {
            check_peer(pc, port, NULL, 0, "node-1", &r);
            ok = r.outcome == ST_OK;
            t_ok = u_mono_ms() - opened;
            st_result_clear(&r);
            if (!ok)
                t_sleep_ms(250);
        }
        CHECK(ok, "[phase %d] served after the idle connections %s", phase,
              phase ? "closed" : "timed out");
        if (phase == 0)
            CHECK(t_ok >= 9000 && t_ok < 20000, "idle connections held slots for ~10 s: %lld ms",
                  (long long)t_ok);
        else
            CHECK(t_ok < 5000, "slots freed at once when closed: %lld ms", (long long)t_ok);
        if (phase == 0) {
            for (int i = 0; i < N; i++)
                close(fds[i]);
        }
        peer_client_free(pc);
    }
    peer_server_stop(s);
    fake_destroy(&f);
}

static void expect_start_error(s3lect_config *c, int mtls, const char *want, const char *what)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    peer_source src = fake_source_of(&f);
    peer_server *s = NULL;
    char err[512] = "";
    int rc = peer_server_start(c, NULL, &src, mtls, &s, err, sizeof err);
    CHECK(rc != 0 && s == NULL && strstr(err, want), "%s: rc %d, message '%s' should mention '%s'",
          what, rc, err, want);
    if (s)
        peer_server_stop(s);
    s3lect_config_free(c);
    fake_destroy(&f);
}

static void test_start_errors(void)
{
    s3lect_config *c = server_cfg("127.0.0.1:0", 0);
    s3lect_config_set_str(c, S3LECT_OPT_PEER_LISTEN, "no-port");
    expect_start_error(c, 0, "host:port", "listen address without a port");

    c = server_cfg("127.0.0.1:0", 0);
    s3lect_config_set_str(c, S3LECT_OPT_PEER_LISTEN, NULL);
    expect_start_error(c, 0, "peer_listen", "no address at all");

    c = server_cfg("", 0);
    s3lect_config_set_str(c, S3LECT_OPT_PEER_LISTEN, NULL);
    s3lect_config_set_str(c, S3LECT_OPT_SERVER_ADDR, "127.0.0.1:0");
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    peer_source src = fake_source_of(&f);
    peer_server *s = NULL;
    char err[512] = "";
    CHECK(peer_server_start(c, NULL, &src, 0, &s, err, sizeof err) == 0 && peer_server_port(s) > 0,
          "falls back to server_addr: %s", err);
    peer_server_stop(s);
    s3lect_config_free(c);
    fake_destroy(&f);

    c = server_cfg("127.0.0.1:0", 0);
    s3lect_config_set_str(c, S3LECT_OPT_PEER_CERT, NULL);
    expect_start_error(c, 0, "peer_cert", "no certificate");

    char missing[600];
    snprintf(missing, sizeof missing, "%s/missing.pem", dir);
    c = server_cfg("127.0.0.1:0", 0);
    s3lect_config_set_str(c, S3LECT_OPT_PEER_CERT, missing);
    expect_start_error(c, 0, "missing.pem", "certificate file missing");

    c = server_cfg("127.0.0.1:0", 0);
    s3lect_config_set_str(c, S3LECT_OPT_PEER_CERT, "-----BEGIN CERTIFICATE-----\nnope\n");
    expect_start_error(c, 0, "peer_cert", "broken PEM");

    char ckey[600];
    snprintf(ckey, sizeof ckey, "%s/client.key", dir);
    c = server_cfg("127.0.0.1:0", 0);
    s3lect_config_set_str(c, S3LECT_OPT_PEER_KEY, ckey);
    expect_start_error(c, 0, "does not belong", "key of another certificate");

    c = server_cfg("127.0.0.1:0", 0);
    s3lect_config_set_str(c, S3LECT_OPT_PEER_CA, NULL);
    expect_start_error(c, 1, "peer_ca", "mTLS without a CA");

    c = server_cfg("127.0.0.1:0", 0);
    s3lect_config_set_str(c, S3LECT_OPT_PEER_LISTEN, "192.0.2.1:0");
    expect_start_error(c, 0, "cannot listen", "non-local address");

    /* A port in use. */
    fake_init(&f, 1, "\"e1\"");
    int port;
    s = start_server(&f, 0, 0, &port);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    c = server_cfg(addr, 0);
    expect_start_error(c, 0, "cannot listen", "port in use");
    peer_server_stop(s);
    fake_destroy(&f);

    /* A missing CA file is reported when the client is made. */
    c = s3lect_config_new();
    s3lect_config_set_str(c, S3LECT_OPT_PEER_CA, missing);
    peer_client *pc = NULL;
    CHECK(peer_client_new(c, &pc, err, sizeof err) != 0 && !pc && strstr(err, "missing.pem"),
          "client with a missing CA file: %s", err);
    s3lect_config_free(c);
}

static void test_ipv6(void)
{
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {0};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    int have = probe >= 0 && bind(probe, (struct sockaddr *)&a, sizeof a) == 0;
    if (probe >= 0)
        close(probe);
    if (!have) {
        printf("SKIP ipv6: this machine has no ::1 loopback\n");
        return;
    }
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    s3lect_config *c = server_cfg("[::1]:0", 0);
    peer_source src = fake_source_of(&f);
    peer_server *s = NULL;
    char err[512] = "";
    CHECK(peer_server_start(c, NULL, &src, 0, &s, err, sizeof err) == 0, "listen on [::1]: %s",
          err);
    s3lect_config_free(c);
    if (!s) {
        fake_destroy(&f);
        return;
    }
    peer_client *pc = make_client(ca_path, NULL);
    char addr[64];
    snprintf(addr, sizeof addr, "[::1]:%d", peer_server_port(s));
    st_result r;
    peer_client_check(pc, addr, PATH, NULL, 0, 3000, "node-1", NULL, &r);
    CHECK(r.outcome == ST_OK, "check over IPv6 (%s)", r.message ? r.message : "");
    st_result_clear(&r);
    peer_client_free(pc);
    peer_server_stop(s);
    fake_destroy(&f);
}

/* Zero-config: an identity made in memory; a follower pinning its key gets
 * through without any CA, one pinning another key or verifying with a CA
 * does not, and a changed pin never reuses the pinned connection. */
static void test_zero_config(void)
{
    peer_identity *id = NULL, *other = NULL;
    char pin[PEER_PIN_LEN + 1], pin2[PEER_PIN_LEN + 1], err[512] = "";
    CHECK(peer_identity_new(&id, pin, err, sizeof err) == 0 && id, "identity: %s", err);
    CHECK(peer_identity_new(&other, pin2, err, sizeof err) == 0 && other, "second: %s", err);
    CHECK(strlen(pin) == PEER_PIN_LEN && rec_peer_key_valid(pin), "pin is base64 SHA-256: %s", pin);
    CHECK(strcmp(pin, pin2) != 0, "every identity has its own key");
    peer_identity_free(other);

    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    s3lect_config *c = s3lect_config_new();
    s3lect_config_set_str(c, S3LECT_OPT_PEER_LISTEN, "127.0.0.1:0");
    peer_source src = fake_source_of(&f);
    peer_server *s = NULL, *s2 = NULL;
    CHECK(peer_server_start(c, id, &src, 0, &s, err, sizeof err) == 0 && s,
          "server with no certificate configured starts on its identity: %s", err);
    CHECK(peer_server_start(c, id, &src, 1, &s2, err, sizeof err) != 0 && strstr(err, "mTLS"),
          "mTLS with a zero-config identity is refused: %s", err);
    int port = s ? peer_server_port(s) : 0;

    peer_client *pc = make_client(NULL, NULL); /* no CA at all */
    st_result r;
    peer_client_set_pin(pc, pin);
    check_peer(pc, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_OK && peer_client_last_failure(pc) == PEER_FAIL_NONE,
          "the pinned key authenticates the leader: %s", r.message ? r.message : "");
    st_result_clear(&r);

    peer_client_set_pin(pc, pin2); /* a stale or forged record's key */
    check_peer(pc, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_TRANSIENT && peer_client_last_failure(pc) == PEER_FAIL_TLS_PIN,
          "another key is refused as tlsPin: class %d (%s)", peer_client_last_failure(pc),
          r.message ? r.message : "");
    CHECK(r.message && strstr(r.message, "peerKeySha256") && strstr(r.message, "127.0.0.1:"),
          "the message names the record field and the leader: %s", r.message ? r.message : "");
    CHECK(strcmp(peer_fail_name(PEER_FAIL_TLS_PIN), "tlsPin") == 0 &&
              peer_fail_code(PEER_FAIL_TLS_PIN) == S3LECT_ETRANSIENT,
          "tlsPin: a transient failure (the record may just be stale)");
    st_result_clear(&r);

    peer_client_set_pin(pc, pin);
    check_peer(pc, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_OK, "the right pin again: OK (%s)", r.message ? r.message : "");
    st_result_clear(&r);

    peer_client_set_pin(pc, NULL); /* no pin: the CA decides, and none signed it */
    check_peer(pc, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_TRANSIENT && peer_client_last_failure(pc) == PEER_FAIL_TLS_CA,
          "without the pin the self-signed certificate is not trusted: class %d",
          peer_client_last_failure(pc));
    st_result_clear(&r);
    peer_client_free(pc);

    pc = make_client(ca_path, NULL); /* a CA the identity is not signed by */
    check_peer(pc, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_TRANSIENT && peer_client_last_failure(pc) == PEER_FAIL_TLS_CA,
          "with a CA and no pin: refused (%s)", r.message ? r.message : "");
    st_result_clear(&r);
    peer_client_set_pin(pc, "short");
    check_peer(pc, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_TRANSIENT && peer_client_last_failure(pc) == PEER_FAIL_TLS_CA,
          "a malformed pin is no pin (%s)", r.message ? r.message : "");
    st_result_clear(&r);
    peer_client_free(pc);

    peer_server_stop(s);
    s3lect_config_free(c);
    fake_destroy(&f);
    peer_identity_free(id);
}

/* ---- one listener for several electors (issue 28) ---- */

#define INC_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define INC_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define INC_C "cccccccccccccccccccccccccccccccc"

static peer_server *register_on(const char *listen, int pem_bytes, const char *inc,
                                const peer_source *src, char *err, size_t errlen)
{
    s3lect_config *c = server_cfg(listen, pem_bytes);
    peer_server *s = NULL;
    err[0] = '\0';
    peer_server_register(c, NULL, inc, src, 0, &s, err, errlen);
    s3lect_config_free(c);
    return s;
}

/* One raw request on a new connection: its status, body in body. */
static int raw_get(int port, const char *target, char *body, size_t bcap)
{
    tcli t;
    unsigned long reason;
    body[0] = '\0';
    if (tcli_open(&t, port, 0, &reason) != 0) {
        tcli_close(&t);
        return -1;
    }
    char req[512], hdr[4096];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", target);
    send_str(&t, req);
    int st = tcli_response(&t, 0, hdr, sizeof hdr, body, bcap);
    tcli_close(&t);
    return st;
}

static void test_shared_listener(void)
{
    fake_source fa, fb;
    fake_init(&fa, 1, "\"ea\"");
    fake_init(&fb, 1, "\"eb\"");
    peer_source sa = fake_source_of(&fa), sb = fake_source_notified(&fb);
    char err[512], body[8192];
    peer_server *a = register_on("127.0.0.1:0", 0, INC_A, &sa, err, sizeof err);
    CHECK(a, "A registers: %s", err);
    peer_server *b = register_on("127.0.0.1:0", 0, INC_B, &sb, err, sizeof err);
    CHECK(b, "B registers: %s", err);
    int port = peer_server_port(a);
    CHECK(port > 0 && port == peer_server_port(b), "one listener, one port (%d, %d)", port,
          peer_server_port(b));

    int st = raw_get(port, PATH "?incarnation=" INC_A, body, sizeof body);
    CHECK(st == 200 && strstr(body, "\\\"ea\\\"") && !strstr(body, "\\\"eb\\\""),
          "A answers: %d %s", st, body);
    st = raw_get(port, PATH "?incarnation=" INC_B, body, sizeof body);
    CHECK(st == 200 && strstr(body, "\\\"eb\\\"") && !strstr(body, "\\\"ea\\\""),
          "B answers: %d %s", st, body);
    st = raw_get(port, PATH "?incarnation=" INC_C, body, sizeof body);
    CHECK(st == 404 && strstr(body, "not the leader"), "unknown incarnation: %d %s", st, body);
    st = raw_get(port, PATH, body, sizeof body);
    CHECK(st == 404 && strstr(body, "several locks") && strstr(body, "?incarnation="),
          "no incarnation with two electors: %d %s", st, body);
    st = raw_get(port, PATH "?incarnation=xyz", body, sizeof body);
    CHECK(st == 400, "an incarnation that is not hex: %d", st);

    /* The follower's check names the incarnation. */
    peer_client *pc = make_client(ca_path, NULL);
    st_result r;
    peer_client_set_incarnation(pc, INC_B);
    check_peer(pc, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_OK && r.etag && strcmp(r.etag, "\"eb\"") == 0,
          "check with ?incarnation= reaches B: %s", r.message ? r.message : "");
    st_result_clear(&r);
    /* ...and A's long poll is held until its wait ends. */
    int64_t t0 = u_mono_ms();
    peer_client_set_incarnation(pc, INC_A);
    check_peer(pc, port, "\"ea\"", 300, "node-1", &r);
    int64_t held = u_mono_ms() - t0;
    CHECK(r.outcome == ST_OK && held >= 250, "A's long poll is held until the wait ends (%lld ms)",
          (long long)held);
    st_result_clear(&r);

    /* An explicit port in use with the same setup is shared; with another, refused. */
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    fake_source fc;
    fake_init(&fc, 0, "");
    peer_source sc = fake_source_of(&fc);
    peer_server *c2 = register_on(listen, 0, INC_C, &sc, err, sizeof err);
    CHECK(!c2 && strstr(err, "cannot listen"), "\"127.0.0.1:0\" and %s are two addresses: %s",
          listen, err);
    peer_server_stop(c2);

    /* A stops with a grace while B stays: A's requests get 404 "not the
     * leader" meanwhile (without A's source: it is gone), and B is the only
     * live elector, so it answers without an incarnation. */
    int64_t t0s = u_mono_ms();
    peer_server_stop_after(a, 400);
    CHECK(u_mono_ms() - t0s < 100, "stop_after does not wait while others remain");
    fake_destroy(&fa); /* its source is not used any more */
    st = raw_get(port, PATH "?incarnation=" INC_A, body, sizeof body);
    CHECK(st == 404 && strstr(body, "not the leader"), "stopped, in its grace: %d %s", st, body);
    st = raw_get(port, PATH, body, sizeof body);
    CHECK(st == 200 && strstr(body, "\\\"eb\\\""), "the single live elector answers: %d %s", st,
          body);
    t_sleep_ms(600);
    st = raw_get(port, PATH "?incarnation=" INC_A, body, sizeof body);
    CHECK(st == 404, "after the grace: unknown, 404 (%d)", st);
    /* The last one waits its grace itself: the port is closed when it returns. */
    fake_set(&fb, 0, NULL);
    t0s = u_mono_ms();
    peer_server_stop_after(b, 300);
    int64_t took = u_mono_ms() - t0s;
    CHECK(took >= 280 && took < 2000, "the last elector's stop waits its grace (%lld ms)",
          (long long)took);
    int fd = tcp_connect(port);
    CHECK(fd < 0, "the listener is closed when the last stop returns");
    if (fd >= 0)
        close(fd);
    peer_client_free(pc);
    fake_destroy(&fb);
    fake_destroy(&fc);
}

static void test_explicit_port_conflict(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    peer_source src = fake_source_of(&f);
    char err[512];
    int free_port = 0;
    {
        peer_server *p = register_on("127.0.0.1:0", 0, INC_C, &src, err, sizeof err);
        free_port = peer_server_port(p);
        peer_server_stop(p);
    }
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", free_port);
    peer_server *a = register_on(listen, 0, INC_A, &src, err, sizeof err);
    CHECK(a, "explicit port: %s", err);
    peer_server *b = register_on(listen, 0, INC_B, &src, err, sizeof err);
    CHECK(b && peer_server_port(b) == free_port, "same setup: shared (%s)", err);
    peer_server *c = register_on(listen, 1, INC_C, &src, err, sizeof err);
    CHECK(!c && strstr(err, "already used in this process") && strstr(err, "peer_listen"),
          "another TLS setup on that port is refused: %s", err);
    peer_server *d = register_on(listen, 0, INC_A, &src, err, sizeof err);
    CHECK(!d && strstr(err, "already registered"), "an incarnation twice: %s", err);
    peer_server_stop(c);
    peer_server_stop(d);
    peer_server_stop(a);
    peer_server_stop(b);
    int fd = tcp_connect(free_port);
    CHECK(fd < 0, "the last one closes the port at once");
    if (fd >= 0)
        close(fd);
    fake_destroy(&f);
}

/* ---- batch ---- */

typedef struct batch_call {
    int port;
    const char *body;
    int status;
    char resp[16384];
    int64_t took, done_at;
} batch_call;

static void *batch_thread(void *arg)
{
    batch_call *b = arg;
    tcli t;
    unsigned long reason;
    int status = -1;
    if (tcli_open(&t, b->port, 0, &reason) == 0) {
        char req[1024], hdr[4096];
        snprintf(req, sizeof req,
                 "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\n\r\n",
                 PATH, strlen(b->body));
        int64_t t0 = u_mono_ms();
        send_str(&t, req);
        send_str(&t, b->body);
        status = tcli_response(&t, 0, hdr, sizeof hdr, b->resp, sizeof b->resp);
        b->done_at = u_mono_ms();
        b->took = b->done_at - t0;
    }
    tcli_close(&t);
    __atomic_store_n(&b->status, status, __ATOMIC_RELEASE);
    return NULL;
}

/* ---- one successor: only a follower that read the store (issue 38) ---- */

typedef struct get_call {
    int port;
    char target[512];
    int status;
    char resp[4096];
} get_call;

static void *get_thread(void *arg)
{
    get_call *g = arg;
    tcli t;
    unsigned long reason;
    int status = -1;
    if (tcli_open(&t, g->port, 0, &reason) == 0) {
        char req[1024], hdr[4096];
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", g->target);
        send_str(&t, req);
        status = tcli_response(&t, 0, hdr, sizeof hdr, g->resp, sizeof g->resp);
    }
    tcli_close(&t);
    __atomic_store_n(&g->status, status, __ATOMIC_RELEASE);
    return NULL;
}

#define SUCC_KEY "0123456789abcdef0123456789abcdef"

/* Long polls of two processes wait on a leader whose records carry a
 * successor key; one of them presents it (it read the record from the
 * store), the other only a process token and the etag this endpoint shows
 * (a forger). When leadership ends, the forger is told to yield and the
 * store reader is named, whichever asked first. */
static void test_successor_needs_the_key(void)
{
    for (int forger_first = 0; forger_first < 2; forger_first++) {
        fake_source f;
        fake_init(&f, 1, "\"s1\"");
        peer_source src = fake_source_notified(&f);
        memcpy(src.succ_key, SUCC_KEY, sizeof src.succ_key);
        char err[512];
        peer_server *s = register_on("127.0.0.1:0", 0, INC_A, &src, err, sizeof err);
        CHECK(s != NULL, "registered: %s", err);
        if (!s) {
            fake_destroy(&f);
            continue;
        }
        int port = peer_server_port(s);
        get_call forged = {.port = port}, real = {.port = port};
        snprintf(forged.target, sizeof forged.target,
                 PATH "?incarnation=" INC_A "&wait=5000&etag=%%22s1%%22&process=%s",
                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
        snprintf(real.target, sizeof real.target,
                 PATH "?incarnation=" INC_A "&wait=5000&etag=%%22s1%%22&process=%s&proof=" SUCC_KEY,
                 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
        pthread_t t1, t2;
        pthread_create(&t1, NULL, get_thread, forger_first ? &forged : &real);
        t_sleep_ms(200);
        pthread_create(&t2, NULL, get_thread, forger_first ? &real : &forged);
        t_sleep_ms(300);
        fake_set(&f, 0, NULL); /* leadership ends */
        peer_server_notify(s);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        CHECK(forged.status == 404 && strstr(forged.resp, "\"yield\":true"),
              "%s: the forger is told to yield: %d %s",
              forger_first ? "forger first" : "forger second", forged.status, forged.resp);
        CHECK(real.status == 404 && !strstr(real.resp, "yield"),
              "%s: the follower that read the store is named: %d %s",
              forger_first ? "forger first" : "forger second", real.status, real.resp);
        peer_server_stop(s);
        fake_destroy(&f);
    }
}

static void test_batch(void)
{
    fake_source fa, fb;
    fake_init(&fa, 1, "\"ea\"");
    fake_init(&fb, 1, "\"eb\"");
    snprintf(fb.leader_id, sizeof fb.leader_id, "node-2");
    fb.term = 9;
    /* Both with the state callback: only peer_server_notify (or the
     * one-second safety re-check) wakes a batch. */
    peer_source sa = fake_source_notified(&fa), sb = fake_source_notified(&fb);
    char err[512];
    peer_server *a = register_on("127.0.0.1:0", 0, INC_A, &sa, err, sizeof err);
    peer_server *b = register_on("127.0.0.1:0", 0, INC_B, &sb, err, sizeof err);
    CHECK(a && b, "registered: %s", err);
    int port = peer_server_port(a);
    const char *both = "{\"wait\":3000,\"locks\":[{\"incarnation\":\"" INC_A
                       "\",\"term\":7,\"etag\":\"\\\"ea\\\"\"},{\"incarnation\":\"" INC_B
                       "\",\"term\":9,\"etag\":\"\\\"eb\\\"\"}]}";

    /* A renewal (same term, new etag) answers, after the gathering, with
     * that lock alone and its new etag (the follower's lease clock restarts
     * from it: docs/peer.md "Batched follower checks"). */
    batch_call bc = {port, both, 0, "", 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, batch_thread, &bc);
    t_sleep_ms(300);
    fake_set(&fa, 1, "\"ea2\""); /* renewal of A */
    int64_t renewed = u_mono_ms();
    peer_server_notify(a);
    pthread_join(th, NULL);
    CHECK(bc.status == 200 && bc.done_at - renewed >= PEER_BATCH_GATHER_MS - 5 &&
              bc.done_at - renewed < 500,
          "a renewal answers the batch after the gathering (%d, %lld ms after it)", bc.status,
          (long long)(bc.done_at - renewed));
    CHECK(strstr(bc.resp, INC_A) && !strstr(bc.resp, INC_B) && strstr(bc.resp, "\"status\":200") &&
              strstr(bc.resp, "ea2") && strstr(bc.resp, "\"term\":7"),
          "only the renewed lock, with its new etag: %s", bc.resp);

    /* A new term answers at once, without gathering. */
    const char *renewed_a = "{\"wait\":3000,\"locks\":[{\"incarnation\":\"" INC_A
                            "\",\"term\":7,\"etag\":\"\\\"ea2\\\"\"},{\"incarnation\":\"" INC_B
                            "\",\"term\":9,\"etag\":\"\\\"eb\\\"\"}]}";
    batch_call bt = {port, renewed_a, 0, "", 0, 0};
    pthread_create(&th, NULL, batch_thread, &bt);
    t_sleep_ms(300);
    int early = __atomic_load_n(&bt.status, __ATOMIC_ACQUIRE);
    CHECK(early == 0, "nothing changed: the batch waits (%d)", early);
    fake_set_term(&fb, 10, "\"eb3\""); /* B: a new term */
    int64_t termed = u_mono_ms();
    peer_server_notify(b);
    pthread_join(th, NULL);
    CHECK(bt.status == 200 && bt.done_at - termed < PEER_BATCH_GATHER_MS,
          "the batch answers a new term at once (%d after %lld ms)", bt.status,
          (long long)(bt.done_at - termed));
    CHECK(strstr(bt.resp, INC_B) && !strstr(bt.resp, INC_A) && strstr(bt.resp, "\"status\":200") &&
              strstr(bt.resp, "\"term\":10") && strstr(bt.resp, "eb3") &&
              strstr(bt.resp, "\"node-2\""),
          "only the changed lock, with its record: %s", bt.resp);

    /* Leadership ends: 404 for that entry. */
    const char *now_b =
        "{\"wait\":3000,\"locks\":[{\"incarnation\":\"" INC_A
        "\",\"term\":7,\"etag\":\"\"},{\"incarnation\":\"" INC_B "\",\"term\":10,\"etag\":\"\"}]}";
    batch_call bd = {port, now_b, 0, "", 0, 0};
    pthread_create(&th, NULL, batch_thread, &bd);
    t_sleep_ms(300);
    fake_set(&fa, 0, NULL);
    int64_t notified = u_mono_ms();
    peer_server_notify(a); /* without it only the 1 s safety re-check would see it */
    pthread_join(th, NULL);
    CHECK(bd.status == 200 && bd.done_at - notified < 400 && strstr(bd.resp, INC_A) &&
              !strstr(bd.resp, INC_B) && strstr(bd.resp, "\"status\":404") &&
              !strstr(bd.resp, "record"),
          "the end of leadership answers %lld ms after the notification: %s",
          (long long)(bd.done_at - notified), bd.resp);
    fake_set(&fa, 1, NULL);

    /* Nothing changes: every entry at the wait. */
    const char *quiet =
        "{\"wait\":400,\"locks\":[{\"incarnation\":\"" INC_A
        "\",\"term\":7,\"etag\":\"\"},{\"incarnation\":\"" INC_B "\",\"term\":10,\"etag\":\"\"}]}";
    batch_call be = {port, quiet, 0, "", 0, 0};
    batch_thread(&be);
    CHECK(be.status == 200 && be.took >= 350 && be.took < 1500 && strstr(be.resp, INC_A) &&
              strstr(be.resp, INC_B) && !strstr(be.resp, "\"status\":404"),
          "at the wait, every entry with its state (%lld ms): %s", (long long)be.took, be.resp);

    /* An unknown lock is changed at once; a stale term too. */
    const char *unknown =
        "{\"wait\":5000,\"locks\":[{\"incarnation\":\"" INC_C
        "\",\"term\":1,\"etag\":\"\"},{\"incarnation\":\"" INC_A "\",\"term\":3,\"etag\":\"\"}]}";
    batch_call bf = {port, unknown, 0, "", 0, 0};
    batch_thread(&bf);
    CHECK(bf.status == 200 && bf.took < 500 && strstr(bf.resp, INC_C "\",\"status\":404") &&
              strstr(bf.resp, INC_A "\",\"status\":200"),
          "unknown and stale entries answer at once (%lld ms): %s", (long long)bf.took, bf.resp);

    /* Errors. */
    const char *bad[] = {
        "{\"wait\":10}", "{\"wait\":10,\"locks\":[]}",
        "{\"wait\":10,\"locks\":[{\"incarnation\":\"zz\",\"term\":1,\"etag\":\"\"}]}", "not json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        batch_call bg = {port, bad[i], 0, "", 0, 0};
        batch_thread(&bg);
        CHECK(bg.status == 400, "%s: 400 (%d)", bad[i], bg.status);
    }
    tcli t;
    unsigned long reason;
    char hdr[4096], body[4096];
    CHECK(tcli_open(&t, port, 0, &reason) == 0, "connect");
    send_str(&t, "POST " PATH " HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n{");
    int st = tcli_response(&t, 0, hdr, sizeof hdr, body, sizeof body);
    CHECK(st == 413 && strcasestr(hdr, "Connection: close"), "over 1 MiB: 413 and close (%d)", st);
    tcli_close(&t);

    peer_server_stop(a);
    peer_server_stop(b);
    fake_destroy(&fa);
    fake_destroy(&fb);
}

/* Full of kept-alive idle connections: a new client is served, and the
 * longest idle connection is the one closed for it. */
static void test_evict_idle(void)
{
    struct rlimit old, lim;
    getrlimit(RLIMIT_NOFILE, &old);
    lim = old;
    if (lim.rlim_cur < 1400)
        lim.rlim_cur = lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= 1400 ? 1400 : lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    if (lim.rlim_cur < 1400) {
        fprintf(stderr, "test_evict_idle: skipped (descriptor limit %llu < 1400)\n",
                (unsigned long long)lim.rlim_cur);
        return;
    }
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    int port;
    peer_server *s = start_server(&f, 0, 0, &port);
    tcli *t = calloc(PEER_MAX_CONNS, sizeof *t);
    char hdr[4096], body[8192];
    int ok = 0;
    for (int i = 0; i < PEER_MAX_CONNS; i++) {
        unsigned long reason;
        if (tcli_open(&t[i], port, 0, &reason) != 0)
            break;
        send_str(&t[i], "GET " PATH " HTTP/1.1\r\n\r\n");
        if (tcli_response(&t[i], 0, hdr, sizeof hdr, body, sizeof body) == 200)
            ok++;
    }
    CHECK(ok == PEER_MAX_CONNS, "%d kept-alive connections served (%d)", PEER_MAX_CONNS, ok);
    peer_client *pc = make_client(ca_path, NULL);
    st_result r;
    check_peer(pc, port, NULL, 0, "node-1", &r);
    CHECK(r.outcome == ST_OK, "a new client is served when the table is full of idle ones: %s",
          r.message ? r.message : "");
    st_result_clear(&r);
    int first_eof = -1;
    for (int i = 0; i < PEER_MAX_CONNS && first_eof < 0; i++)
        if (tcli_eof_within(&t[i], i == 0 ? 2000 : 1))
            first_eof = i;
    CHECK(first_eof == 0, "the longest idle connection made room (closed: %d)", first_eof);
    send_str(&t[PEER_MAX_CONNS - 1], "GET " PATH " HTTP/1.1\r\n\r\n");
    CHECK(tcli_response(&t[PEER_MAX_CONNS - 1], 0, hdr, sizeof hdr, body, sizeof body) == 200,
          "the most recent one still works");
    for (int i = 0; i < PEER_MAX_CONNS; i++)
        tcli_close(&t[i]);
    free(t);
    peer_client_free(pc);
    peer_server_stop(s);
    fake_destroy(&f);
    setrlimit(RLIMIT_NOFILE, &old);
}

/* Many pipelined requests in one write are all answered, in order. */
static void test_pipelined_many(void)
{
    fake_source f;
    fake_init(&f, 1, "\"e1\"");
    int port;
    peer_server *s = start_server(&f, 0, 0, &port);
    tcli t;
    unsigned long reason;
    CHECK(tcli_open(&t, port, 0, &reason) == 0, "connect");
    enum { N = 40 };
    char req[N * 64];
    size_t o = 0;
    for (int i = 0; i < N; i++)
        o += (size_t)snprintf(req + o, sizeof req - o, "%s %s HTTP/1.1\r\n\r\n",
                              i % 3 == 2 ? "HEAD" : "GET", i % 5 == 4 ? "/nope" : PATH);
    tcli_send(&t, req, o);
    int ok = 0;
    for (int i = 0; i < N; i++) {
        char hdr[4096], body[8192];
        int st = tcli_response(&t, i % 3 == 2, hdr, sizeof hdr, body, sizeof body);
        ok += st == (i % 5 == 4 ? 404 : 200);
    }
    CHECK(ok == N, "%d pipelined requests answered in order (%d)", N, ok);
    tcli_close(&t);
    peer_server_stop(s);
    fake_destroy(&f);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strstr(argv[1], "NOTFOUND")) {
        fprintf(stderr, "test_peer_tls needs the openssl command (package 'openssl') to make "
                        "test certificates\n");
        return 1;
    }
    /* The raw test client writes to connections the server may have closed. */
    signal(SIGPIPE, SIG_IGN);
    dir = t_tmpdir("peer-tls");
    if (make_certs(argv[1]) != 0)
        return 1;
    test_check_ok();
    test_check_failures();
    test_long_poll();
    test_abort();
    test_mtls();
    test_stop_during_poll();
    test_raw_http();
    test_client_gone();
    test_tls_versions();
    test_start_errors();
    test_ipv6();
    test_slowloris();
    test_max_conns();
    test_zero_config();
    test_shared_listener();
    test_explicit_port_conflict();
    test_batch();
    test_successor_needs_the_key();
    test_evict_idle();
    test_pipelined_many();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(dir);
    return t_done("peer_tls");
}
