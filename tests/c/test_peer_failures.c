/* SPDX-License-Identifier: Apache-2.0 */
/* test_peer_failures.c - every kind of failed peer check (issue 14 item 10)
 * is reported once through the ERROR event, counted in the status under
 * "peerFailures", and the follower keeps following (and then taking over)
 * through the store.
 *
 * Two electors share a file lock in a temporary directory: a leader A
 * without peer mode whose advertised address (leaderAddr) is a fake
 * endpoint run by this test, and a follower B in peer mode that long-polls
 * that address. The fake endpoint misbehaves in one way per test: a
 * certificate for another name, a certificate from another CA, a demand for
 * a client certificate B's is not signed for, a TCP listener that never
 * answers, garbage JSON, a 10 MB body, an answer sent one byte at a time, a
 * 503, and a closed port. A control run with a real peer-mode leader checks
 * that successful answers (and the 404 of a release) are no failures.
 *
 * Certificates are made at test time with the openssl command (argv[1]).
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
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "elector.h" /* peer_report_ms: a shorter report period */
#include "peer.h"
#include "s3lect.h"
#include "testutil.h"
#include "util.h"

static char *dir;
static char ca_pem[512], other_ca_pem[512], good_cert[512], good_key[512], wrong_cert[512],
    wrong_key[512], client_bundle[512], impostor_cert[512], impostor_key[512];

static void pathf(char *out, const char *name)
{
    snprintf(out, 512, "%s/%s", dir, name);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
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
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n"
             "extendedKeyUsage=serverAuth\\n' > good.ext\n"
             "printf 'subjectAltName=DNS:wrong.example\\nextendedKeyUsage=serverAuth\\n' > "
             "wrong.ext\n"
             "printf 'extendedKeyUsage=clientAuth\\n' > client.ext\n"
             "cp good.ext impostor.ext\n"
             /* good names the leader's id (leader-a); impostor: the same CA and
              * address, another node's id */
             "for who in good wrong client impostor; do\n"
             "  cn=s3lect-test-$who; [ $who = good ] && cn=leader-a\n"
             "  [ $who = impostor ] && cn=follower-c\n"
             "  $O req -new $EC -keyout $who.key -out $who.csr -subj /CN=$cn\n"
             "  $O x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out $who.pem -days 2 -extfile $who.ext\n"
             "done\n"
             "cat client.pem client.key > client-bundle.pem\n",
             dir, openssl);
    char log[600], cmd[700];
    snprintf(log, sizeof log, "%s/openssl.log", dir);
    snprintf(cmd, sizeof cmd, "sh -c \"$S3LECT_CERT_SCRIPT\" > '%s' 2>&1", log);
    setenv("S3LECT_CERT_SCRIPT", script, 1);
    if (system(cmd) != 0) {
        char *l = slurp(log, NULL);
        fprintf(stderr, "making test certificates with '%s' failed:\n%s\n", openssl,
                l ? l : "(no log)");
        free(l);
        return -1;
    }
    pathf(ca_pem, "ca.pem");
    pathf(other_ca_pem, "other-ca.pem");
    pathf(good_cert, "good.pem");
    pathf(good_key, "good.key");
    pathf(wrong_cert, "wrong.pem");
    pathf(wrong_key, "wrong.key");
    pathf(client_bundle, "client-bundle.pem");
    pathf(impostor_cert, "impostor.pem");
    pathf(impostor_key, "impostor.key");
    return 0;
}

/* ---- the fake endpoint ---- */

enum {
    FAKE_HOLD,           /* accept TCP and never answer (no TLS) */
    FAKE_GARBAGE,        /* 200 with a body that is not JSON */
    FAKE_HUGE,           /* 200 with a 10 MB body */
    FAKE_SLOW,           /* 200, then the body one byte every 100 ms */
    FAKE_STATUS,         /* 503 */
    FAKE_HANDSHAKE_ONLY, /* TLS handshake, then close (the client fails it first) */
    FAKE_PLAIN,          /* plain HTTP, no TLS */
    FAKE_RESET,          /* read the ClientHello, then reset the connection */
    FAKE_OTHER_LEADER,   /* 200 with a valid body for another leader id */
    FAKE_GO,             /* 200 as Go s3lect answers: leader-a's record, no etag, no term */
    FAKE_IMPERSONATE     /* 200 with leader-a's record and a new etag each time */
};

typedef struct fake_ep {
    int mode;
    const char *cert, *key;
    const char *client_ca; /* non-NULL: require a client certificate from this CA */
    int lfd, port;
    SSL_CTX *ctx;
    pthread_t thr;
    int stop;  /* atomic */
    int conns; /* atomic: connections accepted */
    int held[256];
    int nheld;
} fake_ep;

static int stopping(fake_ep *f)
{
    return __atomic_load_n(&f->stop, __ATOMIC_ACQUIRE);
}

/* Reads until the end of a request head (or failure / 2 s). */
static int read_head(SSL *ssl)
{
    char buf[4096];
    size_t len = 0;
    while (len < sizeof buf - 1) {
        int r = SSL_read(ssl, buf + len, (int)(sizeof buf - 1 - len));
        if (r <= 0)
            return -1;
        len += (size_t)r;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n"))
            return 0;
    }
    return -1;
}

static int send_all(SSL *ssl, const char *s, size_t n)
{
    return SSL_write(ssl, s, (int)n) == (int)n ? 0 : -1;
}

/* A complete answer with Content-Length, then the connection closes. */
static void send_answer(SSL *ssl, const char *status, const char *ctype, const char *body)
{
    char head[256], ct[80] = "";
    if (ctype)
        snprintf(ct, sizeof ct, "Content-Type: %s\r\n", ctype);
    snprintf(head, sizeof head, "HTTP/1.1 %s\r\n%sContent-Length: %zu\r\nConnection: close\r\n\r\n",
             status, ct, strlen(body));
    if (send_all(ssl, head, strlen(head)) == 0)
        send_all(ssl, body, strlen(body));
}

static void serve_tls(fake_ep *f, int fd)
{
    SSL *ssl = SSL_new(f->ctx);
    SSL_set_fd(ssl, fd);
    ERR_clear_error();
    if (SSL_accept(ssl) != 1 || f->mode == FAKE_HANDSHAKE_ONLY || read_head(ssl) != 0)
        goto out;
    char head[256];
    if (f->mode == FAKE_GARBAGE) {
        send_answer(ssl, "200 OK", "text/html", "<html>this is not the leadership endpoint</html>");
    } else if (f->mode == FAKE_OTHER_LEADER) {
        send_answer(ssl, "200 OK", "application/json",
                    "{\"leaderID\":\"someone-else\",\"leaderAddr\":\"127.0.0.1:1\","
                    "\"lastUpdated\":\"2025-01-01T00:00:00.000Z\",\"term\":1,"
                    "\"etag\":\"\\\"e1\\\"\"}");
    } else if (f->mode == FAKE_IMPERSONATE) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"leaderID\":\"leader-a\",\"leaderAddr\":\"127.0.0.1:1\","
                 "\"lastUpdated\":\"2025-01-01T00:00:00.000Z\",\"term\":1,"
                 "\"etag\":\"\\\"imp-%d\\\"\"}",
                 __atomic_load_n(&f->conns, __ATOMIC_ACQUIRE));
        send_answer(ssl, "200 OK", "application/json", body);
    } else if (f->mode == FAKE_GO) {
        send_answer(ssl, "200 OK", "application/json",
                    "{\"leaderID\":\"leader-a\",\"leaderAddr\":\"127.0.0.1:1\","
                    "\"lastUpdated\":\"2025-01-01T00:00:00Z\"}");
    } else if (f->mode == FAKE_STATUS) {
        send_answer(ssl, "503 Service Unavailable", NULL,
                    "{\"error\":\"temporarily unavailable\"}");
    } else if (f->mode == FAKE_HUGE) {
        size_t total = 10u << 20;
        snprintf(head, sizeof head,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\n\r\n{\"leaderID\":\"",
                 total);
        static char chunk[16384];
        memset(chunk, 'x', sizeof chunk);
        if (send_all(ssl, head, strlen(head)) == 0)
            for (size_t sent = 14; sent < total && !stopping(f); sent += sizeof chunk)
                if (send_all(ssl, chunk, sizeof chunk) != 0)
                    break; /* the client gave up: expected */
    } else if (f->mode == FAKE_SLOW) {
        const char *body = "{\"leaderID\":\"leader-a\",\"etag\":\"\\\"x\\\"\","
                           "\"padding\":\"..........................................\"}";
        snprintf(head, sizeof head,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\n\r\n",
                 strlen(body));
        if (send_all(ssl, head, strlen(head)) == 0)
            for (const char *p = body; *p && !stopping(f); p++) {
                if (send_all(ssl, p, 1) != 0)
                    break;
                t_sleep_ms(100);
            }
    }
out:
    SSL_free(ssl);
    ERR_clear_error();
    close(fd);
}

static void *fake_main(void *arg)
{
    fake_ep *f = arg;
    while (!stopping(f)) {
        struct pollfd p = {f->lfd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        __atomic_add_fetch(&f->conns, 1, __ATOMIC_ACQ_REL);
        if (f->mode == FAKE_PLAIN || f->mode == FAKE_RESET) {
            char buf[2048];
            struct pollfd q = {fd, POLLIN, 0};
            if (poll(&q, 1, 2000) == 1 && read(fd, buf, sizeof buf) > 0) {
                if (f->mode == FAKE_PLAIN) {
                    const char *r = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                                    "Connection: close\r\n\r\n";
                    ssize_t w = write(fd, r, strlen(r));
                    (void)w;
                } else {
                    struct linger lg = {1, 0}; /* close() sends RST */
                    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
                }
            }
            close(fd);
            continue;
        }
        if (f->mode == FAKE_HOLD) {
            if (f->nheld < (int)(sizeof f->held / sizeof f->held[0]))
                f->held[f->nheld++] = fd;
            else
                close(fd);
            continue;
        }
        struct timeval tv = {2, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        serve_tls(f, fd);
    }
    return NULL;
}

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static int fake_start(fake_ep *f)
{
    f->lfd = listen_any(&f->port);
    CHECK(f->lfd >= 0, "fake endpoint listens");
    if (f->lfd < 0)
        return -1;
    if (f->mode != FAKE_HOLD) {
        f->ctx = SSL_CTX_new(TLS_server_method());
        SSL_CTX_set_min_proto_version(f->ctx, TLS1_2_VERSION);
        int ok = SSL_CTX_use_certificate_chain_file(f->ctx, f->cert) == 1 &&
                 SSL_CTX_use_PrivateKey_file(f->ctx, f->key, SSL_FILETYPE_PEM) == 1;
        if (ok && f->client_ca) {
            ok = SSL_CTX_load_verify_locations(f->ctx, f->client_ca, NULL) == 1;
            SSL_CTX_set_verify(f->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        }
        CHECK(ok, "fake endpoint TLS context");
        if (!ok)
            return -1;
    }
    return pthread_create(&f->thr, NULL, fake_main, f) == 0 ? 0 : -1;
}

static void fake_stop(fake_ep *f)
{
    __atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
    pthread_join(f->thr, NULL);
    for (int i = 0; i < f->nheld; i++)
        close(f->held[i]);
    if (f->ctx)
        SSL_CTX_free(f->ctx);
    close(f->lfd);
}

/* ---- electors ---- */

/* Timing: a renewal every 250 ms, so a follower whose peer check fails reads
 * the store, sees the next renewal and checks the peer again: about four
 * failed checks a second. */
static s3lect_config *node_cfg(const char *lock, const char *id, const char *addr)
{
    s3lect_config *c = s3lect_config_new();
    s3lect_config_set_str(c, S3LECT_OPT_LOCK, lock);
    s3lect_config_set_str(c, S3LECT_OPT_SERVER_ID, id);
    s3lect_config_set_str(c, S3LECT_OPT_SERVER_ADDR, addr);
    /* a new lock: no leader of it can be running (new_lock_wait) */
    s3lect_config_set_int(c, S3LECT_OPT_NEW_LOCK_WAIT, 0);
    s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, 2000);
    s3lect_config_set_int(c, S3LECT_OPT_RENEW_INTERVAL, 250);
    s3lect_config_set_int(c, S3LECT_OPT_RENEW_DEADLINE, 1000);
    s3lect_config_set_int(c, S3LECT_OPT_FREQUENT_INTERVAL, 200);
    s3lect_config_set_int(c, S3LECT_OPT_INFREQUENT_INTERVAL, 500);
    s3lect_config_set_int(c, S3LECT_OPT_PEER_TIMEOUT, 400);
    /* The follower's address is never dialled: it listens on an ephemeral
     * port, so two runs of this test at once do not collide on port 1. */
    if (strcmp(addr, "127.0.0.1:1") == 0)
        s3lect_config_set_str(c, S3LECT_OPT_PEER_LISTEN, "127.0.0.1:0");
    return c;
}

typedef struct errlog {
    pthread_mutex_t mu;
    int n;
    char msg[16][1024];
    int code[16];
} errlog;

static void on_error(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    errlog *l = ud;
    pthread_mutex_lock(&l->mu);
    if (l->n < 16) {
        snprintf(l->msg[l->n], sizeof l->msg[0], "%s", s3lect_event_message(ev));
        l->code[l->n] = s3lect_event_code(ev);
    }
    l->n++;
    pthread_mutex_unlock(&l->mu);
}

static s3lect_elector *make_elector(s3lect_config *c, errlog *l)
{
    s3lect_elector *e = NULL;
    int rc = s3lect_new(c, &e);
    if (rc != 0) {
        char m[300];
        s3lect_config_errmsg(c, m, sizeof m);
        CHECK(rc == 0, "s3lect_new: %s", m);
        return NULL;
    }
    if (l)
        s3lect_set_callback(e, S3LECT_EVENT_ERROR, on_error, l, NULL);
    return e;
}

/* The count of class `key` in e's status "peerFailures", or -1; *total gets
 * the sum over all classes. */
static long long status_count(s3lect_elector *e, const char *key, long long *total, char *last,
                              size_t lastcap)
{
    char *js = NULL;
    long long v = -1;
    *total = 0;
    if (last)
        last[0] = '\0';
    if (s3lect_status_json(e, &js) != 0)
        return -1;
    cJSON *o = cJSON_Parse(js);
    const cJSON *pf = cJSON_GetObjectItemCaseSensitive(o, "peerFailures");
    const cJSON *it;
    cJSON_ArrayForEach(it, pf)
    {
        if (cJSON_IsNumber(it)) {
            *total += (long long)it->valuedouble;
            if (strcmp(it->string, key) == 0)
                v = (long long)it->valuedouble;
        }
    }
    const cJSON *lf = cJSON_GetObjectItemCaseSensitive(o, "peerLastFailure");
    if (last && cJSON_IsString(lf))
        snprintf(last, lastcap, "%s", lf->valuestring);
    cJSON_Delete(o);
    s3lect_free(js);
    return v;
}

typedef struct scenario {
    const char *name;
    int mode;
    const char *cert, *key, *client_ca; /* the fake endpoint's */
    const char *trust;                  /* the follower's peer_ca */
    const char *client_cert;            /* the follower's peer_client_cert */
    int closed_port;                    /* no endpoint at all */
    int zero_config;      /* A and B in zero-config peer mode; A advertises the fake's address
                             with its own key's fingerprint (a stale or forged record) */
    const char *cls;      /* the expected class (status key) */
    const char *words[3]; /* expected in the message */
} scenario;

static int seq;

static void run_scenario(const scenario *sc)
{
    fprintf(stderr, "-- %s\n", sc->name);
    fake_ep f = {0};
    f.mode = sc->mode;
    f.cert = sc->cert ? sc->cert : good_cert;
    f.key = sc->key ? sc->key : good_key;
    f.client_ca = sc->client_ca;
    char addr[64];
    if (sc->closed_port) {
        int port, fd = listen_any(&port);
        close(fd); /* nothing listens there now */
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    } else {
        if (fake_start(&f) != 0)
            return;
        snprintf(addr, sizeof addr, "127.0.0.1:%d", f.port);
    }
    char lock[600];
    snprintf(lock, sizeof lock, "%s/lock-%d.json", dir, ++seq);

    errlog la = {.mu = PTHREAD_MUTEX_INITIALIZER}, lb = {.mu = PTHREAD_MUTEX_INITIALIZER};
    s3lect_config *ca_ = node_cfg(lock, "leader-a", addr);
    s3lect_config *cb_ = node_cfg(lock, "follower-b", "127.0.0.1:1");
    if (sc->client_cert)
        s3lect_config_set_str(cb_, S3LECT_OPT_PEER_CLIENT_CERT, sc->client_cert);
    if (sc->zero_config) {
        s3lect_config_set_bool(ca_, S3LECT_OPT_PEER_MODE, 1);
        s3lect_config_set_str(ca_, S3LECT_OPT_PEER_LISTEN, "127.0.0.1:0");
        s3lect_config_set_bool(cb_, S3LECT_OPT_PEER_MODE, 1);
        s3lect_config_set_str(cb_, S3LECT_OPT_SERVER_ADDR, NULL); /* the default */
    }
    s3lect_elector *a = make_elector(ca_, &la), *b = make_elector(cb_, &lb);
    s3lect_config_free(ca_);
    s3lect_config_free(cb_);
    if (!a || !b)
        goto out;
    if (!sc->zero_config) {
        size_t calen;
        char *capem = slurp(sc->trust ? sc->trust : ca_pem, &calen);
        int rc = s3lect_enable_peer_mode(b, capem, calen);
        free(capem);
        CHECK(rc == 0, "[%s] enable_peer_mode: %d", sc->name, rc);
    }
    CHECK(s3lect_start(a) == 0 && s3lect_wait_for_leadership(a, 5000) == 0, "[%s] A leads",
          sc->name);
    CHECK(s3lect_start(b) == 0, "[%s] B starts", sc->name);

    /* A bounded run: one failed check, then the store (the endpoint is
     * tried again after EL_PEER_RETRY_MS, 5 minutes), so the count stays 1
     * although A renews every 100 ms. */
    long long n = 0, total = 0;
    int64_t deadline = u_mono_ms() + 8000;
    t_sleep_ms(3000);
    while ((n = status_count(b, sc->cls, &total, NULL, 0)) < 1 && u_mono_ms() < deadline)
        t_sleep_ms(100);
    CHECK(n == 1, "[%s] status peerFailures.%s counts one failure, then the store: %lld", sc->name,
          sc->cls, n);
    CHECK(total == n, "[%s] only class %s counted (%lld of %lld)", sc->name, sc->cls, n, total);
    if (total != n) {
        char *js = NULL;
        s3lect_status_json(b, &js);
        fprintf(stderr, "   status: %s\n", js ? js : "");
        s3lect_free(js);
    }

    /* Liveness: B follows A through the store meanwhile. */
    char lid[64] = "";
    s3lect_leader_id(b, lid, sizeof lid);
    CHECK(strcmp(lid, "leader-a") == 0 && !s3lect_is_leader(b), "[%s] B follows leader-a: '%s'",
          sc->name, lid);
    char last[1024];
    status_count(b, sc->cls, &total, last, sizeof last);
    CHECK(strstr(last, addr) != NULL, "[%s] peerLastFailure names the leader: %s", sc->name, last);

    /* One report, whatever the number of failures. */
    pthread_mutex_lock(&lb.mu);
    int nerr = lb.n;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", lb.n ? lb.msg[0] : "");
    int code = lb.code[0];
    pthread_mutex_unlock(&lb.mu);
    CHECK(nerr == 1, "[%s] one ERROR event for %lld failures, got %d (first: %s)", sc->name, n,
          nerr, msg);
    char tag[64];
    /* An endpoint that cannot be reached (what a crash looks like too) is
     * reported by the engine once the leader is seen renewing. */
    if (!strcmp(sc->cls, "connect") || !strcmp(sc->cls, "timeout"))
        snprintf(tag, sizeof tag, "peer mode: leader 'leader-a' holds the lock and renews it");
    else
        snprintf(tag, sizeof tag, "peer mode (%s): ", sc->cls);
    CHECK(strncmp(msg, tag, strlen(tag)) == 0, "[%s] message starts with '%s': %s", sc->name, tag,
          msg);
    CHECK(strstr(msg, addr) && strstr(msg, "check"), "[%s] names the leader and what to check: %s",
          sc->name, msg);
    for (int i = 0; i < 3 && sc->words[i]; i++)
        CHECK(strstr(msg, sc->words[i]) != NULL, "[%s] message mentions '%s': %s", sc->name,
              sc->words[i], msg);
    CHECK(code != 0, "[%s] the event has an error code", sc->name);
    CHECK(strchr(msg, '\n') == NULL && !strstr(msg, "not the leadership endpoint") &&
              !strstr(msg, "xxxxxxxx") && !strstr(msg, "padding"),
          "[%s] one line, no response body: %s", sc->name, msg);

    /* Liveness: when A releases, B takes over. */
    int64_t t0 = u_mono_ms();
    s3lect_stop(a);
    CHECK(s3lect_wait_for_leadership(b, 5000) == 0, "[%s] B takes over after A's release",
          sc->name);
    fprintf(stderr, "   %lld failures, 1 report; takeover after release %lld ms\n   %s\n", n,
            (long long)(u_mono_ms() - t0), msg);
    s3lect_stop(b);

    /* Every failed check was counted (a check cut short by the stop is not). */
    long long fin = status_count(b, sc->cls, &total, NULL, 0);
    int conns = __atomic_load_n(&f.conns, __ATOMIC_ACQUIRE);
    if (!sc->closed_port)
        CHECK(fin == conns || fin == conns - 1,
              "[%s] status counts every failed check: %lld counted, %d connections", sc->name, fin,
              conns);
    pthread_mutex_lock(&lb.mu);
    CHECK(lb.n == 1, "[%s] still one ERROR event after the run: %d", sc->name, lb.n);
    pthread_mutex_unlock(&lb.mu);
out:
    s3lect_free_elector(b);
    s3lect_free_elector(a);
    if (!sc->closed_port)
        fake_stop(&f);
}

/* s3lect_enable_peer_mode on a running follower (e.g. to rotate the CA)
 * while its election thread is in the middle of peer checks: the client
 * must never be changed under that thread (TSan and ASan watch this test),
 * and the new CA must take effect. The fake endpoint answers garbage after
 * a good handshake: with the wrong CA the checks fail as tlsCa, after the
 * rotation to the right one as malformed. */
static void test_rotate_ca_while_polling(void)
{
    fprintf(stderr, "-- rotate the CA while polling\n");
    fake_ep f = {0};
    f.mode = FAKE_SLOW; /* a check lasts about a second: rotations land inside it */
    f.cert = good_cert;
    f.key = good_key;
    if (fake_start(&f) != 0)
        return;
    char addr[64], lock[600];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f.port);
    snprintf(lock, sizeof lock, "%s/lock-rotate.json", dir);
    s3lect_config *ca_ = node_cfg(lock, "leader-a", addr);
    s3lect_config *cb_ = node_cfg(lock, "follower-b", "127.0.0.1:1");
    s3lect_config_set_int(cb_, S3LECT_OPT_PEER_TIMEOUT, 3000);
    s3lect_elector *a = make_elector(ca_, NULL), *b = make_elector(cb_, NULL);
    s3lect_config_free(ca_);
    s3lect_config_free(cb_);
    if (b) /* before start: tried again 10 ms after a failure (doubling to 120), not 5 min */
        b->eng.pdown_first = 10;
    size_t goodlen, badlen;
    char *good = slurp(ca_pem, &goodlen), *bad = slurp(other_ca_pem, &badlen);
    if (!a || !b || !good || !bad)
        goto out;
    CHECK(s3lect_enable_peer_mode(b, bad, badlen) == 0, "enable with the wrong CA");
    CHECK(s3lect_start(a) == 0 && s3lect_wait_for_leadership(a, 5000) == 0, "A leads");
    CHECK(s3lect_start(b) == 0, "B starts");
    long long total = 0, tlsca = 0;
    int64_t end = u_mono_ms() + 6000;
    while ((tlsca = status_count(b, "tlsCa", &total, NULL, 0)) < 2 && u_mono_ms() < end)
        t_sleep_ms(50);
    CHECK(tlsca >= 2, "with the wrong CA the checks fail as tlsCa (%lld)", tlsca);
    /* Rotate back and forth while checks run, ending on the right CA. */
    for (int i = 0; i < 40; i++) {
        int rc = i % 2 ? s3lect_enable_peer_mode(b, good, goodlen)
                       : s3lect_enable_peer_mode(b, bad, badlen);
        CHECK(rc == 0, "rotation %d: %d", i, rc);
        t_sleep_ms(25);
    }
    long long slow0 = status_count(b, "timeout", &total, NULL, 0);
    long long mal0 = status_count(b, "malformed", &total, NULL, 0);
    tlsca = status_count(b, "tlsCa", &total, NULL, 0);
    end = u_mono_ms() + 8000;
    long long slow = slow0, mal = mal0;
    while (u_mono_ms() < end) {
        slow = status_count(b, "timeout", &total, NULL, 0);
        mal = status_count(b, "malformed", &total, NULL, 0);
        if (slow + mal >= slow0 + mal0 + 2)
            break;
        t_sleep_ms(100);
    }
    long long tlsca2 = status_count(b, "tlsCa", &total, NULL, 0);
    CHECK(slow + mal >= slow0 + mal0 + 2 && tlsca2 <= tlsca + 1,
          "after the rotation the handshake passes (slow answers %lld -> %lld, malformed %lld "
          "-> %lld, tlsCa %lld -> %lld)",
          slow0, slow, mal0, mal, tlsca, tlsca2);
    char lid[64] = "";
    s3lect_leader_id(b, lid, sizeof lid);
    CHECK(strcmp(lid, "leader-a") == 0, "B still follows A through the store: '%s'", lid);
out:
    free(good);
    free(bad);
    s3lect_free_elector(b);
    s3lect_free_elector(a);
    fake_stop(&f);
}

/* Leader A (advertising addr; serving it in peer mode with the good
 * certificate when a_serves) leads a fresh lock, then follower B starts in
 * peer mode trusting the test CA. 0 when both run; the caller frees them. */
static int pair_start(const char *addr, int a_serves, errlog *la, errlog *lb, s3lect_elector **pa,
                      s3lect_elector **pb)
{
    char lock[600];
    snprintf(lock, sizeof lock, "%s/lock-%d.json", dir, ++seq);
    s3lect_config *ca_ = node_cfg(lock, "leader-a", addr);
    if (a_serves) {
        s3lect_config_set_bool(ca_, S3LECT_OPT_PEER_MODE, 1);
        s3lect_config_set_str(ca_, S3LECT_OPT_PEER_CERT, good_cert);
        s3lect_config_set_str(ca_, S3LECT_OPT_PEER_KEY, good_key);
        s3lect_config_set_str(ca_, S3LECT_OPT_PEER_CA, ca_pem);
    }
    s3lect_config *cb_ = node_cfg(lock, "follower-b", "127.0.0.1:1");
    s3lect_elector *a = make_elector(ca_, la), *b = make_elector(cb_, lb);
    s3lect_config_free(ca_);
    s3lect_config_free(cb_);
    *pa = a;
    *pb = b;
    if (!a || !b)
        return -1;
    size_t calen;
    char *capem = slurp(ca_pem, &calen);
    int rc = s3lect_enable_peer_mode(b, capem, calen);
    free(capem);
    CHECK(rc == 0, "enable_peer_mode");
    CHECK(s3lect_start(a) == 0 && s3lect_wait_for_leadership(a, 5000) == 0, "A leads");
    CHECK(s3lect_start(b) == 0, "B starts");
    return rc;
}

/* A leader whose endpoint answers as Go s3lect's does (no etag, no long
 * poll): the follower checks it once and then follows that leader through
 * the store at the stable period; before, every renewal of the leader sent
 * it back to the endpoint and then to the store (two reads per renewal). */
static void test_go_style_endpoint(void)
{
    fprintf(stderr, "-- a Go s3lect leader endpoint (no etag)\n");
    fake_ep f = {0};
    f.mode = FAKE_GO;
    f.cert = good_cert;
    f.key = good_key;
    if (fake_start(&f) != 0)
        return;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f.port);
    errlog la = {.mu = PTHREAD_MUTEX_INITIALIZER}, lb = {.mu = PTHREAD_MUTEX_INITIALIZER};
    s3lect_elector *a = NULL, *b = NULL;
    if (pair_start(addr, 0, &la, &lb, &a, &b) != 0)
        goto out;
    t_sleep_ms(1000);
    int c0 = __atomic_load_n(&f.conns, __ATOMIC_ACQUIRE);
    /* A renews every 250 ms: 12 renewals in 3 s. */
    t_sleep_ms(3000);
    int checks = __atomic_load_n(&f.conns, __ATOMIC_ACQUIRE) - c0;
    CHECK(c0 >= 1, "B checked the endpoint (%d)", c0);
    CHECK(checks <= 1, "then B follows through the store: %d more checks in 3 s (12 renewals)",
          checks);
    long long total = 0;
    status_count(b, "malformed", &total, NULL, 0);
    CHECK(total == 0, "an answer without an etag is not a failure: %lld", total);
    char lid[64] = "";
    s3lect_leader_id(b, lid, sizeof lid);
    CHECK(strcmp(lid, "leader-a") == 0 && !s3lect_is_leader(b), "B follows leader-a: '%s'", lid);
    pthread_mutex_lock(&lb.mu);
    CHECK(lb.n == 0, "no ERROR events on B: %d (%s)", lb.n, lb.n ? lb.msg[0] : "");
    pthread_mutex_unlock(&lb.mu);
out:
    s3lect_free_elector(b);
    s3lect_free_elector(a);
    fake_stop(&f);
}

/* Control: a real peer-mode leader. Successful long polls and the 404 that
 * tells of a release are no failures. */
static void test_success_is_not_a_failure(void)
{
    fprintf(stderr, "-- success\n");
    int port, fd = listen_any(&port);
    close(fd);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    errlog la = {.mu = PTHREAD_MUTEX_INITIALIZER}, lb = {.mu = PTHREAD_MUTEX_INITIALIZER};
    s3lect_elector *a = NULL, *b = NULL;
    if (pair_start(addr, 1, &la, &lb, &a, &b) != 0)
        goto out;
    t_sleep_ms(3000);
    long long total = 0;
    char last[600];
    status_count(b, "connect", &total, last, sizeof last);
    CHECK(total == 0 && last[0] == '\0', "no failed peer checks while A serves: %lld (%s)", total,
          last);
    s3lect_stop(a); /* the long poll ends with a 404 "not the leader" */
    CHECK(s3lect_wait_for_leadership(b, 5000) == 0, "B takes over after A's release");
    status_count(b, "connect", &total, last, sizeof last);
    CHECK(total == 0, "the release's 404 is not a failure: %lld (%s)", total, last);
    s3lect_stop(b);
    pthread_mutex_lock(&lb.mu);
    CHECK(lb.n == 0, "no ERROR events on the follower: %d (%s)", lb.n, lb.n ? lb.msg[0] : "");
    pthread_mutex_unlock(&lb.mu);
out:
    s3lect_free_elector(b);
    s3lect_free_elector(a);
}

/* A follower stopping during a long poll: the aborted check is no failure. */
static void test_stop_is_not_a_failure(void)
{
    fprintf(stderr, "-- stop during a check\n");
    fake_ep f = {.mode = FAKE_HOLD};
    if (fake_start(&f) != 0)
        return;
    char addr[64], lock[600];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f.port);
    snprintf(lock, sizeof lock, "%s/lock-%d.json", dir, ++seq);
    errlog lb = {.mu = PTHREAD_MUTEX_INITIALIZER};
    s3lect_config *ca_ = node_cfg(lock, "leader-a", addr);
    s3lect_config *cb_ = node_cfg(lock, "follower-b", "127.0.0.1:1");
    /* A check that would last about 10 s: the stop must cut it short (a
     * check ends by the lease's end whatever peer_timeout says, and its
     * timeout is at most frequent_interval: both long here). */
    s3lect_config_set_int(cb_, S3LECT_OPT_PEER_TIMEOUT, 10000);
    s3lect_config_set_int(cb_, S3LECT_OPT_LEASE_TIMEOUT, 12000);
    s3lect_config_set_int(cb_, S3LECT_OPT_RENEW_DEADLINE, 8000);
    s3lect_config_set_int(cb_, S3LECT_OPT_FREQUENT_INTERVAL, 10000);
    s3lect_config_set_int(cb_, S3LECT_OPT_INFREQUENT_INTERVAL, 10000);
    s3lect_elector *a = make_elector(ca_, NULL), *b = make_elector(cb_, &lb);
    s3lect_config_free(ca_);
    s3lect_config_free(cb_);
    if (a && b) {
        size_t calen;
        char *capem = slurp(ca_pem, &calen);
        CHECK(s3lect_enable_peer_mode(b, capem, calen) == 0, "enable_peer_mode");
        free(capem);
        CHECK(s3lect_start(a) == 0 && s3lect_wait_for_leadership(a, 5000) == 0, "A leads");
        CHECK(s3lect_start(b) == 0, "B starts");
        int64_t deadline = u_mono_ms() + 5000;
        while (__atomic_load_n(&f.conns, __ATOMIC_ACQUIRE) == 0 && u_mono_ms() < deadline)
            t_sleep_ms(20);
        CHECK(__atomic_load_n(&f.conns, __ATOMIC_ACQUIRE) > 0, "B's check reached the endpoint");
        t_sleep_ms(200);
        int64_t t0 = u_mono_ms();
        s3lect_stop(b);
        CHECK(u_mono_ms() - t0 < 2000, "the stop ends the check: %lld ms",
              (long long)(u_mono_ms() - t0));
        long long total = 0;
        status_count(b, "timeout", &total, NULL, 0);
        CHECK(total == 0, "an aborted check is not counted: %lld", total);
        pthread_mutex_lock(&lb.mu);
        CHECK(lb.n == 0, "nor reported: %d (%s)", lb.n, lb.n ? lb.msg[0] : "");
        pthread_mutex_unlock(&lb.mu);
    }
    s3lect_free_elector(b);
    s3lect_free_elector(a);
    fake_stop(&f);
}

/* The repeated report through the runtime, with the report period shortened
 * from 60 s to 1 s: one event per period, each later one saying how many
 * failures it stands for; together with the failures since the last report
 * they add up to the status counter. */
static void test_repeated_report(void)
{
    fprintf(stderr, "-- repeated report\n");
    fake_ep f = {.mode = FAKE_GARBAGE, .cert = good_cert, .key = good_key};
    if (fake_start(&f) != 0)
        return;
    char addr[64], lock[600];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f.port);
    snprintf(lock, sizeof lock, "%s/lock-%d.json", dir, ++seq);
    errlog lb = {.mu = PTHREAD_MUTEX_INITIALIZER};
    s3lect_config *ca_ = node_cfg(lock, "leader-a", addr);
    s3lect_config *cb_ = node_cfg(lock, "follower-b", "127.0.0.1:1");
    s3lect_elector *a = make_elector(ca_, NULL), *b = make_elector(cb_, &lb);
    s3lect_config_free(ca_);
    s3lect_config_free(cb_);
    if (a && b) {
        b->peer_report_ms = 1000; /* before start: no other thread reads it yet */
        b->eng.pdown_first = 10;  /* tried again after 10 ms (doubling to 120), not 5 min */
        size_t calen;
        char *capem = slurp(ca_pem, &calen);
        CHECK(s3lect_enable_peer_mode(b, capem, calen) == 0, "enable_peer_mode");
        free(capem);
        CHECK(s3lect_start(a) == 0 && s3lect_wait_for_leadership(a, 5000) == 0, "A leads");
        CHECK(s3lect_start(b) == 0, "B starts");
        t_sleep_ms(3600);
        s3lect_stop(b);
        long long total = 0, n = status_count(b, "malformed", &total, NULL, 0);
        pthread_mutex_lock(&lb.mu);
        int nev = lb.n < 16 ? lb.n : 16;
        long long covered = 0;
        int with_count = 0;
        for (int i = 0; i < nev; i++) {
            CHECK(strncmp(lb.msg[i], "peer mode (malformed): ", 23) == 0, "event %d: %s", i,
                  lb.msg[i]);
            const char *m = strstr(lb.msg[i], "[");
            long long more = 0;
            if (m &&
                sscanf(m, "[%lld more like this since the last report, not logged]", &more) == 1)
                with_count++;
            covered += 1 + more;
        }
        CHECK(nev >= 3 && nev <= 5, "one report per second in 3.6 s: %d", nev);
        CHECK(with_count >= 2 && with_count == nev - 1,
              "every report after the first says how many it stands for: %d of %d", with_count,
              nev);
        CHECK(covered <= n && n - covered <= 8,
              "the reports stand for %lld of %lld failures (the rest came after the last)", covered,
              n);
        fprintf(stderr, "   %d reports for %lld failures\n", nev, n);
        pthread_mutex_unlock(&lb.mu);
    }
    s3lect_free_elector(b);
    s3lect_free_elector(a);
    fake_stop(&f);
}

/* The rate limit itself, on a synthetic clock: one report per class per
 * window, the next one says how many were not reported. */
static void test_rate_limit(void)
{
    peer_fail_stats s;
    memset(&s, 0, sizeof s);
    uint64_t sup = 99;
    CHECK(peer_fail_note(&s, PEER_FAIL_TLS_NAME, 1000, 60000, &sup) == 1 && sup == 0,
          "first failure of a class is reported");
    int reported = 0;
    for (int i = 1; i <= 50; i++)
        reported += peer_fail_note(&s, PEER_FAIL_TLS_NAME, 1000 + i * 1000, 60000, &sup);
    CHECK(reported == 0, "then none within the window: %d", reported);
    CHECK(peer_fail_note(&s, PEER_FAIL_TIMEOUT, 30000, 60000, &sup) == 1,
          "another class has its own limit");
    CHECK(peer_fail_note(&s, PEER_FAIL_TLS_NAME, 61000, 60000, &sup) == 1 && sup == 50,
          "after the window: reported, with 50 suppressed (%llu)", (unsigned long long)sup);
    CHECK(peer_fail_note(&s, PEER_FAIL_TLS_NAME, 62000, 60000, &sup) == 0, "window restarts");
    CHECK(s.count[PEER_FAIL_TLS_NAME] == 53 && s.count[PEER_FAIL_TIMEOUT] == 1,
          "every failure counted: %llu", (unsigned long long)s.count[PEER_FAIL_TLS_NAME]);
    CHECK(peer_fail_note(&s, PEER_FAIL_NONE, 0, 60000, &sup) == 0 &&
              peer_fail_note(&s, PEER_FAIL_NCLASSES, 0, 60000, &sup) == 0,
          "no class: nothing");
    for (int i = 1; i < PEER_FAIL_NCLASSES; i++)
        CHECK(peer_fail_name(i)[0] != '\0' && peer_fail_code(i) < 0, "class %d named", i);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strstr(argv[1], "NOTFOUND")) {
        fprintf(stderr, "test_peer_failures needs the openssl command (package 'openssl') to "
                        "make test certificates\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    dir = t_tmpdir("peer-failures");
    if (make_certs(argv[1]) != 0)
        return 1;
    test_rate_limit();
    /* clang-format off */
    const scenario scenarios[] = {
        {.name = "wrong-name certificate", .mode = FAKE_HANDSHAKE_ONLY, .cert = wrong_cert,
         .key = wrong_key, .cls = "tlsName",
         .words = {"does not match its name", "subjectAltName", "--peer-cert"}},
        {.name = "unknown CA", .mode = FAKE_HANDSHAKE_ONLY, .trust = other_ca_pem, .cls = "tlsCa",
         .words = {"not accepted", "--peer-ca"}},
        {.name = "client certificate refused", .mode = FAKE_GARBAGE, .client_ca = other_ca_pem,
         .client_cert = client_bundle, .cls = "tlsClientCert",
         .words = {"refused this node", "--peer-client-cert"}},
        {.name = "client certificate missing", .mode = FAKE_GARBAGE, .client_ca = ca_pem,
         .cls = "tlsClientCert", .words = {"requires a client certificate", "--peer-client-cert"}},
        {.name = "address that never answers", .mode = FAKE_HOLD, .cls = "timeout",
         .words = {"did not complete a TLS handshake", "peer_timeout"}},
        {.name = "connection refused", .closed_port = 1, .cls = "connect",
         .words = {"cannot connect", "--addr"}},
        {.name = "reset during the handshake", .mode = FAKE_RESET, .cls = "connect",
         .words = {"closed during the TLS handshake", "--addr"}},
        {.name = "plain HTTP", .mode = FAKE_PLAIN, .cls = "tls",
         .words = {"TLS handshake", "HTTPS"}},
        {.name = "garbage JSON", .mode = FAKE_GARBAGE, .cls = "malformed",
         .words = {"not a JSON object", "peer_health_path"}},
        {.name = "another leader id", .mode = FAKE_OTHER_LEADER, .cls = "malformed",
         .words = {"is leader 'someone-else', not 'leader-a'", "--addr"}},
        {.name = "certificate of another node", .mode = FAKE_IMPERSONATE,
         .cert = impostor_cert, .key = impostor_key, .cls = "tlsId",
         .words = {"presents CN=follower-c", "not the server id 'leader-a'", "--peer-cert"}},
        {.name = "10 MB body", .mode = FAKE_HUGE, .cls = "tooLarge", .words = {"larger than"}},
        {.name = "slowloris", .mode = FAKE_SLOW, .cls = "timeout",
         .words = {"did not finish", "slow"}},
        {.name = "HTTP 503", .mode = FAKE_STATUS, .cls = "httpStatus",
         .words = {"HTTP 503", "peer_health_path"}},
        {.name = "zero-config: stale or forged key fingerprint", .mode = FAKE_GARBAGE,
         .zero_config = 1, .cls = "tlsPin", .words = {"peerKeySha256", "stale"}},
        {.name = "zero-config: leader unreachable", .closed_port = 1, .zero_config = 1,
         .cls = "connect", .words = {"cannot connect", "--addr"}},
    };
    /* clang-format on */
    const char *only = getenv("PEER_FAILURES_ONLY"); /* a substring of a scenario's name */
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (!only || strstr(scenarios[i].name, only))
            run_scenario(&scenarios[i]);
    if (!only || strstr("Go s3lect", only))
        test_go_style_endpoint();
    if (!only || strstr("success", only))
        test_success_is_not_a_failure();
    if (!only || strstr("stop during a check", only))
        test_stop_is_not_a_failure();
    if (!only || strstr("repeated report", only))
        test_repeated_report();
    if (!only || strstr("rotate the CA while polling", only))
        test_rotate_ca_while_polling();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(dir);
    return t_done("peer_failures");
}
