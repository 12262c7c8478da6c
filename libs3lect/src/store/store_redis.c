/* SPDX-License-Identifier: Apache-2.0 */
/* store_redis.c - the Redis store (docs/stores.md): one hash per lock,
 *
 *   redis://[[USER]:PASSWORD@]HOST[:PORT]/KEY[?db=N]   (rediss:// for TLS)
 *
 *   field r  the record
 *   field v  its version: a fresh random token on every write (the etag)
 *   field t  the server's clock (TIME, ms) when the record was written
 *
 * Reads and writes are server-side Lua scripts (EVALSHA, EVAL when the
 * server has not cached the script yet: NOSCRIPT), so a write is one atomic
 * compare-and-swap on a single primary: create only when the key does not
 * exist, replace only when v equals the etag; otherwise the script answers
 * "lost" and the call is a precondition failure. The read script returns
 * the record, its version and stamp, and the server's TIME, for the
 * record's age by the store's clock (docs/algorithm.md "The store's
 * clock"). Redis Cluster is refused (a MOVED/ASK/CROSSSLOT/CLUSTERDOWN
 * answer, or cluster_enabled:1 in INFO when the user may run it), a
 * replica's READONLY answer names the primary as what to use.
 *
 * hiredis gives the protocol (command formatting and the reply parser);
 * the socket, the per-call deadline (poll) and TLS (OpenSSL, rediss://)
 * are s3lect's: Debian 12's hiredis 0.14 has no TLS, and its blocking
 * calls bound each read and write rather than the whole call. One
 * connection per store object, made on first use and again after any
 * failure; a call that passes its deadline drops the connection.
 *
 * Compiled with hiredis only (S3LECT_HAVE_HIREDIS; CMake S3LECT_REDIS,
 * the Go module's s3lect_redis build tag); otherwise opening a redis://
 * lock says what to install and rebuild.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "util.h"

#define RD_USAGE "redis://[[USER]:PASSWORD@]HOST[:PORT]/KEY[?db=N] (rediss:// for TLS)"
#define RD_DEFAULT_PORT "6379"

/* ---- the URL (always compiled: a redis:// lock parses everywhere) ---- */

static int rd_oom(char *err, size_t errlen)
{
    snprintf(err, errlen, "out of memory");
    return S3LECT_ENOMEM;
}

int st_redis_parse(const char *url, const char *rest, st_location *out, char *err, size_t errlen)
{
    char *shown = st_lock_display(url);
    if (!shown)
        return rd_oom(err, errlen);
    int rc = S3LECT_EINVAL, bad = 0;
    char *hostport = NULL;
    const char *ctl = st_find_control(url);
    if (ctl) {
        /* Not quoted: the URL would break the line. */
        snprintf(err, errlen,
                 "lock URL: has a control character (byte 0x%02x at offset %zu): write %s",
                 (unsigned char)*ctl, (size_t)(ctl - url), RD_USAGE);
        goto done;
    }
    if (strchr(url, '#')) {
        snprintf(err, errlen, "lock URL '%.200s' has a fragment ('#'); write %s", shown, RD_USAGE);
        goto done;
    }
    const char *q = strchr(rest, '?');
    size_t alen = strcspn(rest, "/?");
    const char *auth = rest, *at = NULL;
    for (const char *p = auth; p < auth + alen; p++)
        if (*p == '@')
            at = p;
    const char *host = at ? at + 1 : auth;
    size_t hlen = (size_t)(auth + alen - host);
    if (at) {
        const char *colon = memchr(auth, ':', (size_t)(at - auth));
        size_t ul = colon ? (size_t)(colon - auth) : (size_t)(at - auth);
        if (ul > 0 && !(out->opt1 = st_pct_decode(auth, ul, &bad)))
            goto decode;
        if (colon && !(out->opt2 = st_pct_decode(colon + 1, (size_t)(at - colon - 1), &bad)))
            goto decode;
        if (out->opt2 && !out->opt2[0]) {
            free(out->opt2);
            out->opt2 = NULL;
        }
    }
    /* HOST, HOST:PORT, [V6] or [V6]:PORT */
    size_t namelen;
    long pv;
    if (st_parse_server(shown, RD_USAGE, host, hlen, atol(RD_DEFAULT_PORT), &namelen, &pv, err,
                        errlen) != 0)
        goto done;
    if (!(hostport = u_asprintf("%.*s:%ld", (int)namelen, host, pv)))
        goto oom;
    const char *key = rest + alen + 1;
    if (rest[alen] != '/' || !*key || *key == '?') {
        snprintf(err, errlen, "lock URL '%.200s' names no key: write %s", shown, RD_USAGE);
        goto done;
    }
    size_t klen = q ? (size_t)(q - key) : strlen(key);
    if (!(out->key = st_pct_decode(key, klen, &bad)))
        goto decode;
    if ((rc = st_check_text(shown, "key", out->key, 1024, err, errlen)) != 0)
        goto done;
    st_qparam ps[] = {{"db", &out->opt3}};
    if ((rc = st_parse_query(shown, RD_USAGE, q ? q + 1 : NULL, ps, 1, NULL, err, errlen)) != 0)
        goto done;
    rc = S3LECT_EINVAL;
    if (out->opt3) {
        const char *d = out->opt3;
        size_t dl = strlen(d);
        if (dl > 5 || strspn(d, "0123456789") != dl) {
            snprintf(err, errlen, "lock URL '%.200s': db must be a database number (0, 1, ...)",
                     shown);
            goto done;
        }
        if (strcmp(d, "0") == 0) {
            free(out->opt3);
            out->opt3 = NULL;
        }
    }
    out->bucket = hostport;
    hostport = NULL;
    rc = 0;
    goto done;
decode:
    if (bad)
        snprintf(err, errlen, "lock URL '%.200s' has a malformed %%-escape", shown);
    else
        rd_oom(err, errlen);
    rc = bad ? S3LECT_EINVAL : S3LECT_ENOMEM;
    goto done;
oom:
    rc = rd_oom(err, errlen);
done:
    free(hostport);
    free(shown);
    return rc;
}

int st_redis_canonical(const st_location *loc, char **out)
{
    /* The server and key; not the user (the lock is the same for every user). */
    int tls = loc->scheme && strcmp(loc->scheme->name, "rediss") == 0;
    return st_canon_add(out, tls ? "rediss://" : "redis://", loc->bucket, 0) ||
           st_canon_add(out, "/", loc->key, 1) ||
           (loc->opt3 && st_canon_add(out, "?db=", loc->opt3, 0));
}

int st_redis_compiled(void)
{
#ifdef S3LECT_HAVE_HIREDIS
    return 1;
#else
    return 0;
#endif
}

#ifndef S3LECT_HAVE_HIREDIS

int st_redis_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                  char *err, size_t errlen)
{
    (void)cfg;
    (void)loc;
    *out = NULL;
    snprintf(err, errlen,
             "this s3lect was built without Redis support: install hiredis (Debian/Ubuntu: apt "
             "install libhiredis-dev; RHEL: dnf install hiredis-devel) and rebuild (CMake "
             "-DS3LECT_REDIS=ON; Go: -tags s3lect_redis)");
    return S3LECT_EINVAL;
}

#else /* S3LECT_HAVE_HIREDIS */

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto.h"
#include "config.h"
#include "http.h"

#define RD_DEFAULT_TIMEOUT_MS 10000
/* What the scripts run (Redis checks a script's commands against the ACL). */
#define RD_ACL "+eval +evalsha +exists +hget +hmget +hset +time"

/* KEYS[1] the lock; ARGV: record, expected version ("" to create), new version. */
static const char write_script[] =
    "local v = redis.call('HGET', KEYS[1], 'v')\n"
    "if ARGV[2] == '' then\n"
    "  if redis.call('EXISTS', KEYS[1]) == 1 then return {0, v or ''} end\n"
    "elseif v ~= ARGV[2] then return {0, v or ''} end\n"
    "local t = redis.call('TIME')\n"
    "local ms = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))\n"
    "redis.call('HSET', KEYS[1], 'r', ARGV[1], 'v', ARGV[3], 't', ms)\n"
    "return {1, ARGV[3]}\n";
/* KEYS[1] the lock: record, version, stamp (false when missing), server time. */
static const char read_script[] = "local h = redis.call('HMGET', KEYS[1], 'r', 'v', 't')\n"
                                  "local t = redis.call('TIME')\n"
                                  "return {redis.call('EXISTS', KEYS[1]), h[1], h[2], h[3], t[1], "
                                  "t[2]}\n";

typedef struct rd_store {
    st_store base;
    char *host, *port; /* host without brackets */
    char *user, *password, *db;
    char *where;  /* "HOST:PORT" (+ " as USER") for messages */
    char *origin; /* "redis://HOST:PORT": peer mode's route */
    int tls;
    char *ca_file;
    char write_sha[41], read_sha[41];
    int64_t default_timeout_ms;
    /* the connection */
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    redisReader *reader;
} rd_store;

static void conn_close(rd_store *s)
{
    if (s->ssl) {
        SSL_free(s->ssl);
        s->ssl = NULL;
    }
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    if (s->reader) {
        redisReaderFree(s->reader);
        s->reader = NULL;
    }
}

/* OpenSSL writes with write(2): a write to a connection the server closed
 * would raise SIGPIPE and kill the process. During a TLS call SIGPIPE is
 * blocked in this thread, and one it raised is taken back before the mask
 * is restored (one pending from elsewhere is left alone). */
typedef struct sigpipe_guard {
    int active, was_pending;
    sigset_t old;
} sigpipe_guard;

static void sigpipe_block(sigpipe_guard *g, int tls)
{
    g->active = tls;
    if (!tls)
        return;
    sigset_t pipe_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigemptyset(&pending);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
}

static void sigpipe_unblock(sigpipe_guard *g)
{
    if (!g->active)
        return;
    sigset_t pipe_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigemptyset(&pending);
    if (!g->was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* Waits for events on the socket until the deadline: 1 ready, 0 timed out, -1 failed. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - u_mono_ms();
        if (left <= 0)
            return 0;
        struct pollfd pfd = {fd, events, 0};
        int n = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* Drives an SSL call that wants more I/O: 1 go on, 0 timed out, -1 failed. */
static int ssl_wait(rd_store *s, int ret, int64_t deadline)
{
    int e = SSL_get_error(s->ssl, ret);
    if (e == SSL_ERROR_WANT_READ)
        return wait_fd(s->fd, POLLIN, deadline);
    if (e == SSL_ERROR_WANT_WRITE)
        return wait_fd(s->fd, POLLOUT, deadline);
    return -1;
}

static void tls_error(char *why, size_t len, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[200] = "";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    snprintf(why, len, "%s%s%s", what, buf[0] ? ": " : "", buf);
    ERR_clear_error();
}

/* Connects (TCP, then TLS for rediss://). 0, or -1 with why and *outcome. */
static int conn_open(rd_store *s, int64_t deadline, char *why, size_t wlen, int *outcome)
{
    *outcome = ST_TRANSIENT;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    int g = getaddrinfo(s->host, s->port, &hints, &res);
    if (g != 0) {
        snprintf(why, wlen, "cannot resolve %s: %s", s->host, gai_strerror(g));
        return -1;
    }
    snprintf(why, wlen, "timed out connecting");
    for (struct addrinfo *a = res; a && s->fd < 0; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            snprintf(why, wlen, "%s", strerror(errno));
            continue;
        }
        int r = connect(fd, a->ai_addr, a->ai_addrlen);
        if (r != 0 && errno == EINPROGRESS) {
            int w = wait_fd(fd, POLLOUT, deadline);
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (w == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
                r = 0;
            else if (w == 1)
                snprintf(why, wlen, "%s", strerror(soerr ? soerr : errno));
            else if (w == 0)
                snprintf(why, wlen, "timed out connecting");
        } else if (r != 0) {
            snprintf(why, wlen, "%s", strerror(errno));
        }
        if (r == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            s->fd = fd;
        } else {
            close(fd);
        }
    }
    freeaddrinfo(res);
    if (s->fd < 0)
        return -1;
    if (s->tls) {
        if (!s->ctx) {
            s->ctx = SSL_CTX_new(TLS_client_method());
            const char *ca = http_ca(s->ca_file);
            if (!s->ctx || (ca && SSL_CTX_load_verify_locations(s->ctx, ca, NULL) != 1) ||
                (!ca && SSL_CTX_set_default_verify_paths(s->ctx) != 1)) {
                tls_error(why, wlen, "cannot load the CA certificates");
                if (s->ctx)
                    SSL_CTX_free(s->ctx);
                s->ctx = NULL;
                *outcome = ST_FATAL;
                conn_close(s);
                return -1;
            }
            SSL_CTX_set_verify(s->ctx, SSL_VERIFY_PEER, NULL);
            SSL_CTX_set_min_proto_version(s->ctx, TLS1_2_VERSION);
        }
        /* The certificate must name the host: an IP address (SAN IP) or a
         * DNS name (SAN DNS, also sent as SNI). OpenSSL's and BoringSSL's
         * shared API. */
        unsigned char ip[16];
        int is_ip = inet_pton(AF_INET, s->host, ip) == 1 || inet_pton(AF_INET6, s->host, ip) == 1;
        s->ssl = SSL_new(s->ctx);
        X509_VERIFY_PARAM *vp = s->ssl ? SSL_get0_param(s->ssl) : NULL;
        if (!s->ssl || SSL_set_fd(s->ssl, s->fd) != 1 || !vp ||
            (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, s->host)
                   : X509_VERIFY_PARAM_set1_host(vp, s->host, 0)) != 1 ||
            (!is_ip && SSL_set_tlsext_host_name(s->ssl, s->host) != 1)) {
            tls_error(why, wlen, "cannot set up TLS");
            conn_close(s);
            return -1;
        }
        for (;;) {
            int r = SSL_connect(s->ssl);
            if (r == 1)
                break;
            int w = ssl_wait(s, r, deadline);
            if (w <= 0) {
                long vr = SSL_get_verify_result(s->ssl);
                if (w == 0) {
                    snprintf(why, wlen, "timed out in the TLS handshake");
                } else if (vr != X509_V_OK) {
                    snprintf(why, wlen, "TLS: the server's certificate is not trusted (%s)",
                             X509_verify_cert_error_string(vr));
                    *outcome = ST_FATAL;
                } else {
                    tls_error(why, wlen, "TLS handshake failed");
                }
                conn_close(s);
                return -1;
            }
        }
    }
    s->reader = redisReaderCreate();
    if (!s->reader) {
        snprintf(why, wlen, "out of memory");
        conn_close(s);
        return -1;
    }
    return 0;
}

static int conn_write(rd_store *s, const char *buf, size_t len, int64_t deadline)
{
    while (len > 0) {
        ssize_t n;
        if (s->ssl) {
            int r = SSL_write(s->ssl, buf, (int)len);
            if (r <= 0) {
                if (ssl_wait(s, r, deadline) <= 0)
                    return -1;
                continue;
            }
            n = r;
        } else {
            n = send(s->fd, buf, len, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if ((errno == EAGAIN || errno == EWOULDBLOCK) &&
                    wait_fd(s->fd, POLLOUT, deadline) == 1)
                    continue;
                return -1;
            }
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads one reply (NULL: the connection failed or timed out; why says so). */
static redisReply *conn_reply(rd_store *s, int64_t deadline, char *why, size_t wlen)
{
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(s->reader, &reply) != REDIS_OK) {
            snprintf(why, wlen, "a malformed answer (%s)", s->reader->errstr);
            return NULL;
        }
        if (reply)
            return reply;
        char buf[16384];
        ssize_t n;
        if (s->ssl) {
            int r = SSL_read(s->ssl, buf, sizeof buf);
            if (r <= 0) {
                int w = ssl_wait(s, r, deadline);
                if (w <= 0) {
                    snprintf(why, wlen,
                             w == 0 ? "timed out waiting for the answer"
                                    : "the connection was closed");
                    return NULL;
                }
                continue;
            }
            n = r;
        } else {
            n = recv(s->fd, buf, sizeof buf, 0);
            if (n == 0) {
                snprintf(why, wlen, "the connection was closed");
                return NULL;
            }
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    int w = wait_fd(s->fd, POLLIN, deadline);
                    if (w == 1)
                        continue;
                    snprintf(why, wlen,
                             w == 0 ? "timed out waiting for the answer" : "the connection failed");
                    return NULL;
                }
                snprintf(why, wlen, "%s", strerror(errno));
                return NULL;
            }
        }
        if (redisReaderFeed(s->reader, buf, (size_t)n) != REDIS_OK) {
            snprintf(why, wlen, "out of memory");
            return NULL;
        }
    }
}

/* Sends n commands at once and reads their n replies into replies[]. 0, or
 * -1 with why (the connection is then closed). */
static int conn_run(rd_store *s, int n, int argc[], const char **argv[], size_t *argvlen[],
                    redisReply *replies[], int64_t deadline, char *why, size_t wlen)
{
    for (int i = 0; i < n; i++)
        replies[i] = NULL;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char *cmd = NULL;
        long long len = redisFormatCommandArgv(&cmd, argc[i], argv[i], argvlen[i]);
        if (len <= 0 || !cmd) {
            snprintf(why, wlen, "out of memory");
            rc = -1;
        } else if (conn_write(s, cmd, (size_t)len, deadline) != 0) {
            snprintf(why, wlen, "cannot send the command (%s)",
                     u_mono_ms() >= deadline ? "timed out" : "the connection failed");
            rc = -1;
        }
        if (cmd)
            redisFreeCommand(cmd);
    }
    for (int i = 0; i < n && rc == 0; i++)
        if (!(replies[i] = conn_reply(s, deadline, why, wlen)))
            rc = -1;
    if (rc) {
        for (int i = 0; i < n; i++)
            if (replies[i])
                freeReplyObject(replies[i]);
        conn_close(s);
    }
    return rc;
}

/* The one line of an error reply (Redis errors are one line). */
static const char *err_text(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && r->str ? r->str : "";
}

static int starts(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* Fills out from an error reply to what (a command), with the outcome it means. */
static void reply_error(rd_store *s, const char *what, const redisReply *r, st_result *out)
{
    const char *e = err_text(r);
    if (starts(e, "MOVED ") || starts(e, "ASK ") || starts(e, "CROSSSLOT") ||
        starts(e, "CLUSTERDOWN"))
        st_result_setf(out, ST_FATAL,
                       "Redis %s is a Redis Cluster node (%.100s): s3lect supports a single "
                       "primary, not Cluster (docs/stores.md)",
                       s->where, e);
    else if (starts(e, "READONLY"))
        st_result_setf(out, ST_FATAL,
                       "Redis %s is a replica (%.100s): point the lock URL at the primary",
                       s->where, e);
    else if (starts(e, "NOPERM") || strstr(e, "can't run this command"))
        st_result_setf(out, ST_AUTH,
                       "Redis %s refused %s (%.200s): the ACL user needs " RD_ACL
                       " (+select with ?db=, +info optional) on the lock's key (~KEY) "
                       "(docs/stores.md)",
                       s->where, what, e);
    else if (starts(e, "WRONGPASS") || starts(e, "NOAUTH"))
        st_result_setf(out, ST_AUTH,
                       "Redis %s refused the login (%.150s): fix the user or password (in the "
                       "lock URL or S3LECT_REDIS_PASSWORD)",
                       s->where, e);
    else if (starts(e, "ERR AUTH") || strstr(e, "without any password configured"))
        st_result_setf(out, ST_AUTH,
                       "Redis %s has no password set but the lock URL gives one (%.150s): "
                       "remove the password or set requirepass",
                       s->where, e);
    else if (starts(e, "WRONGTYPE"))
        st_result_setf(out, ST_FATAL,
                       "the lock's key on Redis %s holds another type (%.100s): it was not "
                       "written by s3lect; delete it or use another key",
                       s->where, e);
    else if (starts(e, "ERR DB index") || strstr(e, "invalid DB index"))
        st_result_setf(out, ST_FATAL,
                       "Redis %s has no such database (%.100s): fix ?db= in the "
                       "lock URL",
                       s->where, e);
    else if (starts(e, "ERR unknown command") || starts(e, "ERR Error running script") ||
             starts(e, "ERR user_script"))
        st_result_setf(out, ST_FATAL,
                       "%s on Redis %s failed (%.200s): s3lect needs Redis 7 or "
                       "later with scripting",
                       what, s->where, e);
    else
        st_result_setf(out, ST_TRANSIENT, "%s on Redis %s failed (%.200s); will retry", what,
                       s->where, e);
}

/* A connection ready for commands (logged in, database chosen, not
 * Cluster): 0, or -1 with out set. */
static int conn_ready(rd_store *s, int64_t deadline, st_result *out)
{
    if (s->fd >= 0)
        return 0;
    char why[300];
    int outcome;
    if (conn_open(s, deadline, why, sizeof why, &outcome) != 0) {
        if (outcome == ST_FATAL)
            st_result_setf(out, outcome, "cannot use Redis %s (%s): fix the lock URL or --ca-file",
                           s->where, why);
        else
            st_result_setf(out, outcome, "cannot connect to Redis %s (%s); will retry", s->where,
                           why);
        return -1;
    }
    int n = 0, argc[3], iauth = -1, idb = -1;
    const char **argv[3];
    size_t *lens[3];
    const char *auth_argv[3] = {"AUTH", s->user ? s->user : "", s->password ? s->password : ""};
    size_t auth_len[3] = {4, strlen(auth_argv[1]), strlen(auth_argv[2])};
    if (s->password || s->user) {
        iauth = n;
        argc[n] = s->user ? 3 : 2;
        argv[n] = s->user ? auth_argv : (const char *[]){"AUTH", auth_argv[2]};
        lens[n++] = s->user ? auth_len : (size_t[]){4, auth_len[2]};
    }
    const char *db_argv[2] = {"SELECT", s->db};
    size_t db_len[2] = {6, s->db ? strlen(s->db) : 0};
    if (s->db) {
        idb = n;
        argc[n] = 2;
        argv[n] = db_argv;
        lens[n++] = db_len;
    }
    const char *info_argv[2] = {"INFO", "cluster"};
    size_t info_len[2] = {4, 7};
    int iinfo = n;
    argc[n] = 2;
    argv[n] = info_argv;
    lens[n++] = info_len;
    redisReply *rs[3];
    if (conn_run(s, n, argc, argv, lens, rs, deadline, why, sizeof why) != 0) {
        st_result_setf(out, ST_TRANSIENT, "cannot talk to Redis %s (%s); will retry", s->where,
                       why);
        return -1;
    }
    int rc = 0;
    if (iauth >= 0 && rs[iauth]->type == REDIS_REPLY_ERROR) {
        reply_error(s, "AUTH", rs[iauth], out);
        rc = -1;
    } else if (idb >= 0 && rs[idb]->type == REDIS_REPLY_ERROR) {
        reply_error(s, "SELECT", rs[idb], out);
        rc = -1;
    } else if (rs[iinfo]->type == REDIS_REPLY_STRING && rs[iinfo]->str &&
               strstr(rs[iinfo]->str, "cluster_enabled:1")) {
        st_result_setf(out, ST_FATAL,
                       "Redis %s runs in Cluster mode (cluster_enabled:1): s3lect supports a "
                       "single primary, not Cluster (docs/stores.md)",
                       s->where);
        rc = -1;
    } else if (rs[iinfo]->type == REDIS_REPLY_ERROR && !starts(err_text(rs[iinfo]), "NOPERM")) {
        /* INFO is optional (an ACL may leave it out); NOAUTH and the like are not. */
        reply_error(s, "INFO", rs[iinfo], out);
        rc = -1;
    }
    for (int i = 0; i < n; i++)
        freeReplyObject(rs[i]);
    if (rc)
        conn_close(s);
    return rc;
}

static redisReply *run_script_on(rd_store *s, const char *what, const char *script, const char *sha,
                                 const char *key, int nargs, const char *args[],
                                 const size_t arglens[], int64_t deadline, st_result *out);

/* Runs a script by its SHA, and by its text when the server lacks it.
 * Returns the reply (not an error reply), or NULL with out set. */
static redisReply *run_script(rd_store *s, const char *what, const char *script, const char *sha,
                              const char *key, int nargs, const char *args[],
                              const size_t arglens[], int64_t timeout_ms, st_result *out)
{
    int64_t deadline = u_mono_ms() + (timeout_ms > 0 ? timeout_ms : s->default_timeout_ms);
    sigpipe_guard g;
    sigpipe_block(&g, s->tls);
    redisReply *r = run_script_on(s, what, script, sha, key, nargs, args, arglens, deadline, out);
    sigpipe_unblock(&g);
    return r;
}

static redisReply *run_script_on(rd_store *s, const char *what, const char *script, const char *sha,
                                 const char *key, int nargs, const char *args[],
                                 const size_t arglens[], int64_t deadline, st_result *out)
{
    if (conn_ready(s, deadline, out) != 0)
        return NULL;
    const char *argv[8] = {"EVALSHA", sha, "1", key};
    size_t lens[8] = {7, 40, 1, strlen(key)};
    for (int i = 0; i < nargs; i++) {
        argv[4 + i] = args[i];
        lens[4 + i] = arglens[i];
    }
    int argc = 4 + nargs;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (attempt) {
            argv[0] = "EVAL";
            lens[0] = 4;
            argv[1] = script;
            lens[1] = strlen(script);
        }
        const char **av[1] = {argv};
        size_t *lv[1] = {lens};
        redisReply *r[1];
        char why[300];
        if (conn_run(s, 1, &argc, av, lv, r, deadline, why, sizeof why) != 0) {
            st_result_setf(out, ST_TRANSIENT, "%s on Redis %s failed (%s); will retry", what,
                           s->where, why);
            return NULL;
        }
        if (r[0]->type != REDIS_REPLY_ERROR)
            return r[0];
        if (attempt == 0 && starts(err_text(r[0]), "NOSCRIPT")) {
            freeReplyObject(r[0]);
            continue;
        }
        reply_error(s, what, r[0], out);
        freeReplyObject(r[0]);
        return NULL;
    }
    return NULL;
}

static int reply_ms(const redisReply *r, int64_t *out)
{
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_INTEGER))
        return -1;
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = (int64_t)r->integer;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(r->str, &end, 10);
    if (errno || end == r->str || *end)
        return -1;
    *out = (int64_t)v;
    return 0;
}

static void rd_get(st_store *st, const char *key, int64_t timeout_ms, st_result *out)
{
    rd_store *s = (rd_store *)st;
    memset(out, 0, sizeof *out);
    redisReply *r =
        run_script(s, "the read", read_script, s->read_sha, key, 0, NULL, NULL, timeout_ms, out);
    if (!r)
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 6 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        st_result_setf(out, ST_TRANSIENT, "Redis %s answered the read script unexpectedly",
                       s->where);
    } else if (r->element[0]->integer == 0) {
        /* s3lect never deletes a lock: a key it saw was lost by Redis (a
         * restart without persistence, FLUSHALL, eviction, a failover to a
         * replica that missed writes) or deleted by hand. The engine treats
         * a vanished lock as held for one lease (election.c, vanished). */
        st_result_setf(out, ST_NOT_FOUND, "no key '%s' on Redis %s", key, s->where);
    } else if (r->element[1]->type != REDIS_REPLY_STRING ||
               r->element[2]->type != REDIS_REPLY_STRING || !r->element[2]->len) {
        st_result_setf(out, ST_FATAL,
                       "key '%s' on Redis %s has no record or version: it was not written by "
                       "s3lect; delete it (DEL) or use another key",
                       key, s->where);
    } else if (st_result_set_body(out, r->element[1]->str,
                                  /* Over 64 KiB: what the record parser needs to call it
                                   * corrupt, as every object store's does (issue 38). */
                                  r->element[1]->len > ST_MAX_OBJECT ? ST_MAX_OBJECT + 1
                                                                     : r->element[1]->len) != 0 ||
               st_result_set_etag(out, r->element[2]->str) != 0) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
    } else {
        out->outcome = ST_OK;
        int64_t mod = 0, sec = 0, usec = 0;
        if (reply_ms(r->element[3], &mod) == 0 && reply_ms(r->element[4], &sec) == 0 &&
            reply_ms(r->element[5], &usec) == 0 && mod > 0 && sec > 0) {
            out->server_now_ms = sec * 1000 + usec / 1000;
            out->server_modified_ms = mod;
            out->server_res_ms = 1;
        }
    }
    freeReplyObject(r);
}

static void rd_put(st_store *st, const char *key, const void *data, size_t len,
                   const char *if_match, int64_t timeout_ms, st_result *out)
{
    rd_store *s = (rd_store *)st;
    memset(out, 0, sizeof *out);
    char version[33];
    if (cr_random_token(version) != 0) {
        st_result_setf(out, ST_TRANSIENT, "no randomness for the version");
        return;
    }
    const char *args[3] = {data ? data : "", if_match ? if_match : "", version};
    size_t lens[3] = {len, if_match ? strlen(if_match) : 0, 32};
    redisReply *r = run_script(s, if_match ? "the replace" : "the create", write_script,
                               s->write_sha, key, 3, args, lens, timeout_ms, out);
    if (!r)
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        st_result_setf(out, ST_TRANSIENT, "Redis %s answered the write script unexpectedly",
                       s->where);
    } else if (r->element[0]->integer == 1) {
        if (st_result_set_etag(out, version) != 0)
            st_result_setf(out, ST_TRANSIENT, "out of memory");
        else
            out->outcome = ST_OK;
    } else if (if_match) {
        st_result_setf(out, ST_PRECONDITION,
                       "key '%s' on Redis %s changed since version %s (or is gone): another "
                       "writer won",
                       key, s->where, if_match);
    } else {
        st_result_setf(out, ST_PRECONDITION,
                       "key '%s' on Redis %s already exists: another writer won", key, s->where);
    }
    freeReplyObject(r);
}

static void rd_destroy(st_store *st)
{
    rd_store *s = (rd_store *)st;
    if (!s)
        return;
    conn_close(s);
    if (s->ctx)
        SSL_CTX_free(s->ctx);
    if (s->password) {
        memset(s->password, 0, strlen(s->password));
        free(s->password);
    }
    free(s->host);
    free(s->port);
    free(s->user);
    free(s->db);
    free(s->where);
    free(s->origin);
    free(s->ca_file);
    free(s);
}

static const char *rd_route(const st_store *st)
{
    return ((const rd_store *)st)->origin;
}

static const st_vtable rd_vtable = {
    .name = "redis", .get = rd_get, .put = rd_put, .destroy = rd_destroy, .pool = rd_route};

static void sha_hex(const char *text, char out[41])
{
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)text, strlen(text), md);
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

int st_redis_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                  char *err, size_t errlen)
{
    *out = NULL;
    rd_store *s = calloc(1, sizeof *s);
    if (!s)
        return rd_oom(err, errlen);
    s->base.vt = &rd_vtable;
    s->fd = -1;
    s->tls = loc->scheme && strcmp(loc->scheme->name, "rediss") == 0;
    s->default_timeout_ms = cfg->request_timeout > 0 ? cfg->request_timeout : RD_DEFAULT_TIMEOUT_MS;
    /* bucket: HOST:PORT or [V6]:PORT */
    const char *hp = loc->bucket, *colon = strrchr(hp, ':');
    int v6 = hp[0] == '[';
    s->host = v6 ? u_asprintf("%.*s", (int)(colon - hp - 2), hp + 1)
                 : u_asprintf("%.*s", (int)(colon - hp), hp);
    s->port = u_strdup(colon + 1);
    const char *pw = loc->opt2 ? loc->opt2 : getenv("S3LECT_REDIS_PASSWORD");
    if (pw && !*pw)
        pw = NULL;
    s->password = pw ? u_strdup(pw) : NULL;
    s->user = loc->opt1 ? u_strdup(loc->opt1) : NULL;
    s->db = loc->opt3 ? u_strdup(loc->opt3) : NULL;
    s->ca_file = cfg->ca_file ? u_strdup(cfg->ca_file) : NULL;
    s->where = u_asprintf("%s%s%s", hp, s->user ? " as user " : "", s->user ? s->user : "");
    s->origin = u_asprintf("%s://%s", s->tls ? "rediss" : "redis", hp);
    if (!s->host || !s->port || (pw && !s->password) || (loc->opt1 && !s->user) ||
        (loc->opt3 && !s->db) || (cfg->ca_file && !s->ca_file) || !s->where || !s->origin) {
        rd_destroy(&s->base);
        return rd_oom(err, errlen);
    }
    sha_hex(write_script, s->write_sha);
    sha_hex(read_script, s->read_sha);
    *out = &s->base;
    return 0;
}

#endif /* S3LECT_HAVE_HIREDIS */
