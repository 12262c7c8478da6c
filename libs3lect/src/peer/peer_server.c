/* SPDX-License-Identifier: Apache-2.0 */
/* peer_server.c - the leader's HTTPS leadership endpoint (DESIGN §6).
 *
 * DESIGN §2 routes crypto through crypto.h. A TLS server needs the whole SSL
 * API (contexts, certificates, non-blocking handshakes), which a hash-sized
 * interface cannot express without re-inventing it, so the TLS code lives
 * here, and only here. It uses the OpenSSL API subset that BoringSSL also
 * provides (TLS_server_method, SSL_CTX_set_min_proto_version, PEM_read_bio_*,
 * X509_STORE_add_cert, SSL_accept/read/write on non-blocking sockets), so the
 * library builds with either (-DS3LECT_TLS=OpenSSL|BoringSSL).
 *
 * Threads: one acceptor and one thread per connection, at most
 * PEER_MAX_CONNS; beyond that a new connection is accepted and closed at
 * once. Every socket wait is a poll() on the socket and the server's wake
 * pipe with a deadline, so slow clients are dropped when their deadline
 * passes and peer_server_stop() wakes every thread at once. Long polls wait
 * on the source in short slices, so a stop or a vanished client ends them
 * even when the source itself does not wake up.
 *
 * All server threads run with SIGPIPE blocked: a write to a closed
 * connection fails with EPIPE instead of killing the process.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "config.h"
#include "crypto.h"
#include "peer.h"
#include "s3lect.h"
#include "net.h"
#include "proc.h"
#include "util.h"

/* Handshake plus the complete first request head; for later requests on a
 * kept-alive connection, the head from its first byte. */
#define PEER_HEAD_TIMEOUT_MS 10000
/* A kept-alive connection may sit idle this long between requests. */
#define PEER_IDLE_TIMEOUT_MS 30000
/* Writing one response. */
#define PEER_WRITE_TIMEOUT_MS 10000
/* Long polls re-check the server's stop flag and the client at this period. */
#define PEER_WAIT_SLICE_MS 100
/* After an error answer the rest of the client's request is read and
 * dropped for at most this long and this much, so that closing the socket
 * does not reset the connection before the client has read the answer. */
#define PEER_LINGER_MS 2000
#define PEER_LINGER_BYTES (256 * 1024)
/* Certificate, key and CA files are read up to this size. */
#define PEER_MAX_PEM (1024 * 1024)
#define PEER_DEFAULT_HEALTH_PATH "/health/leadership"

typedef struct conn {
    struct peer_server *srv;
    struct conn *next;
    pthread_t thread;
    int fd;
    SSL *ssl;
    int done; /* atomic: the thread has finished and may be joined */
    int64_t accepted_ms;
    size_t len; /* bytes in buf */
    char buf[PEER_MAX_HEADER];
} conn;

struct peer_server {
    SSL_CTX *ctx;
    int lfd;
    int port;
    int wake[2];  /* written once on stop; never drained, so it stays readable */
    int stopping; /* atomic */
    int acceptor_started;
    pthread_t acceptor;
    pthread_mutex_t mu;
    conn *conns; /* live and finished-but-unjoined connections */
    int nconns;
    peer_source src;
    char *health_path;
};

static int is_stopping(peer_server *s)
{
    return __atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE);
}

/* ---- TLS context ---------------------------------------------------------- */

/* Puts the most specific OpenSSL error (or `fallback`) into buf and clears the queue. */
static void tls_errstr(char *buf, size_t len, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    if (e) {
        char tmp[256];
        ERR_error_string_n(e, tmp, sizeof tmp);
        snprintf(buf, len, "%s", tmp);
    } else {
        snprintf(buf, len, "%s", fallback);
    }
    ERR_clear_error();
}

/* Never prompt on a terminal for a pass phrase: encrypted keys are refused. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return 0;
}

static int is_pem(const char *data, size_t len)
{
    size_t i = 0;
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n'))
        i++;
    return len - i >= 10 && memcmp(data + i, "-----BEGIN", 10) == 0;
}

/* PEM bytes of a config blob: the blob itself when it is PEM, else the
 * contents of the file it names. *owned is set when the bytes were read
 * from a file (free them). Returns 0, or -1 with a message in err. */
static int blob_pem(const cfg_blob *b, const char *what, const char **pem, size_t *len,
                    char **owned, char *err, size_t errlen)
{
    *owned = NULL;
    if (is_pem(b->data, b->len)) {
        *pem = b->data;
        *len = b->len;
        return 0;
    }
    if (memchr(b->data, '\0', b->len)) {
        snprintf(err, errlen, "%s is neither PEM text (-----BEGIN ...) nor a file path", what);
        return -1;
    }
    FILE *f = fopen(b->data, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s file '%.200s': %s", what, b->data, strerror(errno));
        return -1;
    }
    char *buf = malloc(PEER_MAX_PEM + 1);
    size_t n = buf ? fread(buf, 1, PEER_MAX_PEM + 1, f) : 0;
    int rerr = ferror(f);
    fclose(f);
    if (!buf || rerr || n > PEER_MAX_PEM) {
        snprintf(err, errlen, "cannot read %s file '%.200s': %s", what, b->data,
                 !buf   ? "out of memory"
                 : rerr ? "read error"
                        : "larger than 1 MiB");
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    if (!is_pem(buf, n)) {
        snprintf(err, errlen, "%s file '%.200s' is not PEM (expected -----BEGIN ...)", what,
                 b->data);
        free(buf);
        return -1;
    }
    *pem = buf;
    *len = n;
    *owned = buf;
    return 0;
}

static int has_blob(const cfg_blob *b)
{
    return b->data && b->len > 0;
}

static int load_cert_chain(SSL_CTX *ctx, const char *pem, size_t len, char *err, size_t errlen)
{
    char why[256];
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    X509 *leaf = bio ? PEM_read_bio_X509(bio, NULL, no_passphrase, NULL) : NULL;
    if (!leaf || SSL_CTX_use_certificate(ctx, leaf) != 1) {
        tls_errstr(why, sizeof why, "no certificate found");
        snprintf(err, errlen, "peer_cert: cannot use the certificate (%s)", why);
        X509_free(leaf);
        BIO_free(bio);
        return -1;
    }
    X509_free(leaf);
    X509 *x;
    while ((x = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL)) != NULL) {
        if (SSL_CTX_add_extra_chain_cert(ctx, x) != 1) { /* takes x on success */
            X509_free(x);
            tls_errstr(why, sizeof why, "unknown error");
            snprintf(err, errlen, "peer_cert: cannot add a chain certificate (%s)", why);
            BIO_free(bio);
            return -1;
        }
    }
    ERR_clear_error(); /* the read that ended the loop */
    BIO_free(bio);
    return 0;
}

static int load_key(SSL_CTX *ctx, const char *pem, size_t len, char *err, size_t errlen)
{
    char why[256];
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
    BIO_free(bio);
    if (!key) {
        tls_errstr(why, sizeof why, "no private key found");
        snprintf(err, errlen,
                 "peer_key: cannot read the private key (%s); it must be an unencrypted PEM key",
                 why);
        return -1;
    }
    /* OpenSSL checks the pair here already, BoringSSL in the call below. */
    int ok = SSL_CTX_use_PrivateKey(ctx, key) == 1;
    EVP_PKEY_free(key);
    if (!ok || SSL_CTX_check_private_key(ctx) != 1) {
        tls_errstr(why, sizeof why, "mismatch");
        snprintf(err, errlen, "peer_key does not belong to the certificate in peer_cert (%s)", why);
        return -1;
    }
    return 0;
}

/* Trusts every certificate in pem for client verification and names them
 * to clients as acceptable issuers. */
static int load_client_ca(SSL_CTX *ctx, const char *pem, size_t len, char *err, size_t errlen)
{
    char why[256];
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    int count = 0;
    X509 *x;
    while (bio && (x = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL)) != NULL) {
        int ok = X509_STORE_add_cert(store, x) == 1 && SSL_CTX_add_client_CA(ctx, x) == 1;
        X509_free(x);
        if (!ok) {
            tls_errstr(why, sizeof why, "unknown error");
            snprintf(err, errlen, "peer_ca: cannot add a CA certificate (%s)", why);
            BIO_free(bio);
            return -1;
        }
        count++;
    }
    ERR_clear_error();
    BIO_free(bio);
    if (count == 0) {
        snprintf(err, errlen, "peer_ca contains no PEM certificate");
        return -1;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    return 0;
}

/* ---- zero-config identity ----------------------------------------------------- */

struct peer_identity {
    EVP_PKEY *key;
    X509 *cert;
};

void peer_identity_free(peer_identity *id)
{
    if (!id)
        return;
    EVP_PKEY_free(id->key);
    X509_free(id->cert);
    free(id);
}

static EVP_PKEY *make_p256_key(void)
{
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *kc = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, NULL);
    if (kc && EVP_PKEY_keygen_init(kc) == 1 &&
        EVP_PKEY_CTX_set_ec_paramgen_curve_nid(kc, NID_X9_62_prime256v1) == 1 &&
        EVP_PKEY_keygen(kc, &key) != 1)
        key = NULL;
    EVP_PKEY_CTX_free(kc);
    return key;
}

/* A self-signed certificate for key: subject = issuer = "CN=s3lect peer
 * endpoint", a random serial, valid from an hour ago for ten years (the pin,
 * not the dates, authenticates it; a follower never checks them). */
static X509 *make_self_signed(EVP_PKEY *key)
{
    X509 *x = X509_new();
    uint8_t rnd[8];
    uint64_t serial = 0;
    if (!x || cr_random(rnd, sizeof rnd) != 0)
        goto fail;
    memcpy(&serial, rnd, sizeof serial);
    X509_NAME *name = X509_get_subject_name(x);
    int ok =
        X509_set_version(x, 2) == 1 && /* v3 */
        ASN1_INTEGER_set(X509_get_serialNumber(x), (long)(serial >> 2) | 1) == 1 &&
        X509_gmtime_adj(X509_getm_notBefore(x), -3600) != NULL &&
        X509_gmtime_adj(X509_getm_notAfter(x), 10L * 366 * 24 * 3600) != NULL &&
        X509_set_pubkey(x, key) == 1 && name &&
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                   (const unsigned char *)"s3lect peer endpoint", -1, -1, 0) == 1 &&
        X509_set_issuer_name(x, name) == 1 && X509_sign(x, key, EVP_sha256()) > 0;
    if (ok)
        return x;
fail:
    X509_free(x);
    return NULL;
}

int peer_identity_new(peer_identity **out, char pin[PEER_PIN_LEN + 1], char *err, size_t errlen)
{
    *out = NULL;
    pin[0] = '\0';
    ERR_clear_error();
    peer_identity *id = calloc(1, sizeof *id);
    unsigned char *der = NULL;
    int n = -1;
    if (id && (id->key = make_p256_key()) != NULL && (id->cert = make_self_signed(id->key)) &&
        (n = i2d_PUBKEY(id->key, &der)) > 0) {
        uint8_t sum[CR_SHA256_LEN];
        cr_sha256(der, (size_t)n, sum);
        u_base64(sum, sizeof sum, pin);
        OPENSSL_free(der);
        *out = id;
        return 0;
    }
    char why[256];
    tls_errstr(why, sizeof why, "out of memory");
    snprintf(err, errlen, "cannot make the peer endpoint's key and certificate (%s)", why);
    OPENSSL_free(der);
    peer_identity_free(id);
    return S3LECT_EIO;
}

static SSL_CTX *make_ctx(const struct s3lect_config *cfg, const peer_identity *id, int mtls,
                         char *err, size_t errlen)
{
    if (id && mtls) {
        snprintf(err, errlen,
                 "client certificate verification (mTLS) needs the leader's own peer_cert and "
                 "peer_key (zero-config peer mode does not verify clients)");
        return NULL;
    }
    if (!id && (!has_blob(&cfg->peer_cert) || !has_blob(&cfg->peer_key))) {
        snprintf(err, errlen,
                 "peer mode needs a server certificate and key: set peer_cert and peer_key "
                 "(PEM text or file paths; see docs/peer.md)");
        return NULL;
    }
    if (mtls && !has_blob(&cfg->peer_ca)) {
        snprintf(err, errlen,
                 "client certificate verification (mTLS) needs peer_ca: the CA that signed the "
                 "followers' certificates");
        return NULL;
    }
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        char why[256];
        tls_errstr(why, sizeof why, "out of memory");
        snprintf(err, errlen, "cannot create the TLS context (%s)", why);
        return NULL;
    }
    static const unsigned char sid_ctx[] = "s3lect-peer";
    int ok = SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
             SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof sid_ctx - 1) == 1;
    if (!ok) {
        snprintf(err, errlen, "cannot configure the TLS context");
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (id) {
        if (SSL_CTX_use_certificate(ctx, id->cert) != 1 ||
            SSL_CTX_use_PrivateKey(ctx, id->key) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
            char why[256];
            tls_errstr(why, sizeof why, "unknown error");
            snprintf(err, errlen, "cannot use the peer endpoint's own certificate (%s)", why);
            SSL_CTX_free(ctx);
            return NULL;
        }
        return ctx;
    }
    const struct {
        const cfg_blob *blob;
        const char *name;
        int (*load)(SSL_CTX *, const char *, size_t, char *, size_t);
    } parts[] = {{&cfg->peer_cert, "peer_cert", load_cert_chain},
                 {&cfg->peer_key, "peer_key", load_key},
                 {&cfg->peer_ca, "peer_ca", load_client_ca}};
    size_t nparts = mtls ? 3 : 2;
    for (size_t i = 0; i < nparts; i++) {
        const char *pem;
        size_t len;
        char *owned;
        if (blob_pem(parts[i].blob, parts[i].name, &pem, &len, &owned, err, errlen) != 0) {
            SSL_CTX_free(ctx);
            return NULL;
        }
        int rc = parts[i].load(ctx, pem, len, err, errlen);
        if (owned) {
            memset(owned, 0, len); /* may be the private key */
            free(owned);
        }
        if (rc != 0) {
            SSL_CTX_free(ctx);
            return NULL;
        }
    }
    return ctx;
}

/* ---- listening -------------------------------------------------------------- */

/* Splits "host:port", "[v6]:port" or ":port" (all interfaces). */
static int split_hostport(const char *addr, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon;
    size_t hlen;
    const char *h = addr;
    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');
        if (!close || close[1] != ':')
            return -1;
        h = addr + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon || memchr(addr, ':', (size_t)(colon - addr)))
            return -1; /* no port, or an IPv6 address without brackets */
        hlen = (size_t)(colon - addr);
    }
    const char *p = colon + 1;
    size_t plen = strlen(p);
    if (hlen >= hcap || plen == 0 || plen >= pcap || plen > 5)
        return -1;
    long v = 0;
    for (size_t i = 0; i < plen; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    if (v > 65535)
        return -1;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    memcpy(port, p, plen + 1);
    return 0;
}

int peer_split_host(const char *addr, char *host, size_t cap)
{
    char port[8];
    return split_hostport(addr, host, cap, port, sizeof port);
}

void peer_join_hostport(const char *host, int port, char *out, size_t cap)
{
    snprintf(out, cap, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

int peer_route_host(const char *origin, char *host, size_t cap, char *err, size_t errlen)
{
    if (!origin || !*origin) {
        snprintf(host, cap, "127.0.0.1");
        return 0;
    }
    const char *p = strstr(origin, "://");
    int https = strncmp(origin, "https", 5) == 0;
    p = p ? p + 3 : origin;
    char h[256], port[8];
    size_t n = strcspn(p, "/?#");
    char hp[300];
    if (n >= sizeof hp)
        n = sizeof hp - 1;
    memcpy(hp, p, n);
    hp[n] = '\0';
    if (split_hostport(hp, h, sizeof h, port, sizeof port) != 0) {
        /* no port: the scheme's */
        size_t hl = strlen(hp);
        if (hp[0] == '[' && hl > 2 && hp[hl - 1] == ']') {
            memcpy(h, hp + 1, hl - 2);
            h[hl - 2] = '\0';
        } else {
            snprintf(h, sizeof h, "%s", hp);
        }
        snprintf(port, sizeof port, "%s", https ? "443" : "80");
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_flags = AI_NUMERICSERV;
    int gai = getaddrinfo(h, port, &hints, &res);
    int last = 0;
    for (struct addrinfo *ai = gai == 0 ? res : NULL; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last = errno;
            continue;
        }
        struct sockaddr_storage ss = {0}; /* read below even when !ok */
        socklen_t sl = sizeof ss;
        int ok = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
                 getsockname(fd, (struct sockaddr *)&ss, &sl) == 0;
        last = ok ? 0 : errno;
        close(fd);
        const void *a = ss.ss_family == AF_INET6
                            ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                            : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
        if (ok && inet_ntop(ss.ss_family, a, host, (socklen_t)cap)) {
            freeaddrinfo(res);
            return 0;
        }
    }
    if (res)
        freeaddrinfo(res);
    snprintf(err, errlen,
             "cannot tell which address followers reach this node at (no route to the store "
             "%.100s: %s); set server_addr (--addr) to this node's host:port",
             h, gai != 0 ? gai_strerror(gai) : strerror(last ? last : EHOSTUNREACH));
    return -1;
}

static int listen_on(const char *addr, int *fd_out, int *port_out, char *err, size_t errlen)
{
    char host[256], port[8];
    if (split_hostport(addr, host, sizeof host, port, sizeof port) != 0) {
        snprintf(err, errlen,
                 "peer listen address '%.200s' is not host:port (e.g. 0.0.0.0:8443, "
                 "[::1]:8443 or :8443 for all interfaces)",
                 addr);
        return -1;
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "peer listen address '%.200s': %s", addr, gai_strerror(gai));
        return -1;
    }
    int last_errno = 0;
    /* ":PORT" (no host): every address, IPv6 and IPv4 where the system has
     * IPv6 (the advertised address, the route to the store, may be either). */
    int fd = u_listen(res, !host[0], SOCK_NONBLOCK, 64, NULL, &last_errno);
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen,
                 "cannot listen on %.200s: %s (set peer_listen to a local address, e.g. "
                 "0.0.0.0:8443)",
                 addr, strerror(last_errno));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        snprintf(err, errlen, "cannot listen on %.200s: getsockname: %s", addr, strerror(errno));
        close(fd);
        return -1;
    }
    *port_out = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    return 0;
}

/* ---- connection I/O ------------------------------------------------------- */

/* Waits until c->fd has `events`, the server stops or the deadline passes.
 * Returns 1 when ready (errors and hang-ups count: the next call sees them),
 * 0 on timeout, -1 when stopping. */
static int wait_fd(conn *c, short events, int64_t deadline)
{
    for (;;) {
        if (is_stopping(c->srv))
            return -1;
        int64_t left = deadline - u_mono_ms();
        if (left <= 0)
            return 0;
        struct pollfd p[2] = {{c->fd, events, 0}, {c->srv->wake[0], POLLIN, 0}};
        int r = poll(p, 2, left > INT_MAX ? INT_MAX : (int)left);
        if (r < 0 && errno != EINTR)
            return -1;
        if (r > 0 && p[1].revents)
            return -1;
        if (r > 0 && p[0].revents)
            return 1;
    }
}

/* Maps an SSL result to the poll events to wait for, or 0 for a hard error. */
static short ssl_wants(conn *c, int r)
{
    switch (SSL_get_error(c->ssl, r)) {
    case SSL_ERROR_WANT_READ:
        return POLLIN;
    case SSL_ERROR_WANT_WRITE:
        return POLLOUT;
    default:
        return 0;
    }
}

static int tls_accept(conn *c, int64_t deadline)
{
    for (;;) {
        ERR_clear_error();
        int r = SSL_accept(c->ssl);
        if (r == 1)
            return 0;
        short ev = ssl_wants(c, r);
        if (!ev || wait_fd(c, ev, deadline) != 1)
            return -1;
    }
}

/* Reads up to cap bytes. Returns the count, or 0 on close, error, timeout or stop. */
static size_t tls_read(conn *c, char *dst, size_t cap, int64_t deadline)
{
    for (;;) {
        ERR_clear_error();
        int r = SSL_read(c->ssl, dst, cap > INT_MAX ? INT_MAX : (int)cap);
        if (r > 0)
            return (size_t)r;
        short ev = ssl_wants(c, r);
        if (!ev || wait_fd(c, ev, deadline) != 1)
            return 0;
    }
}

static int tls_write_all(conn *c, const char *p, size_t n, int64_t deadline)
{
    while (n > 0) {
        ERR_clear_error();
        int r = SSL_write(c->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        short ev = ssl_wants(c, r);
        if (!ev || wait_fd(c, ev, deadline) != 1)
            return -1;
    }
    return 0;
}

/* ---- HTTP over one connection ----------------------------------------------- */

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Internal Server Error";
    }
}

static int send_response(conn *c, int status, const char *body, int head_only, int keep_alive)
{
    size_t blen = body ? strlen(body) : 0;
    char hdr[256];
    int hl =
        snprintf(hdr, sizeof hdr,
                 "HTTP/1.1 %d %s\r\n"
                 "Content-Type: application/json\r\n"
                 "Content-Length: %zu\r\n"
                 "Cache-Control: no-store\r\n"
                 "%s"
                 "Connection: %s\r\n\r\n",
                 status, reason_phrase(status), blen, status == 405 ? "Allow: GET, HEAD\r\n" : "",
                 keep_alive ? "keep-alive" : "close");
    if (hl < 0 || (size_t)hl >= sizeof hdr)
        return -1;
    size_t total = (size_t)hl + (head_only ? 0 : blen);
    char *out = malloc(total);
    if (!out)
        return -1;
    memcpy(out, hdr, (size_t)hl);
    if (!head_only && blen)
        memcpy(out + hl, body, blen);
    int rc = tls_write_all(c, out, total, u_mono_ms() + PEER_WRITE_TIMEOUT_MS);
    free(out);
    return rc;
}

static int send_error(conn *c, int status)
{
    const char *body = status == 431   ? "{\"error\":\"request head too large\"}"
                       : status == 505 ? "{\"error\":\"only HTTP/1.0 and HTTP/1.1 are supported\"}"
                                       : "{\"error\":\"malformed request\"}";
    return send_response(c, status, body, 0, 0);
}

/* Reads one request head into c->buf. Returns 1 with *req filled and
 * *deadline set to the request's deadline, 0 when the connection should
 * close quietly (closed, timed out, stopping), or a negative HTTP status. */
static int read_request(conn *c, int first, peer_request *req, int64_t *deadline)
{
    int64_t head_deadline = first ? c->accepted_ms + PEER_HEAD_TIMEOUT_MS : 0;
    int64_t idle_deadline = u_mono_ms() + PEER_IDLE_TIMEOUT_MS;
    for (;;) {
        if (c->len > 0) {
            int rc = peer_parse_request(c->buf, c->len, req);
            if (rc != 0) {
                *deadline = head_deadline ? head_deadline : u_mono_ms() + PEER_HEAD_TIMEOUT_MS;
                return rc;
            }
            if (!head_deadline) /* the clock for a complete head starts at its first byte */
                head_deadline = u_mono_ms() + PEER_HEAD_TIMEOUT_MS;
        }
        if (c->len >= sizeof c->buf)
            return -431; /* not reached: the parser reports it first */
        size_t n = tls_read(c, c->buf + c->len, sizeof c->buf - c->len,
                            head_deadline ? head_deadline : idle_deadline);
        if (n == 0)
            return 0;
        c->len += n;
    }
}

/* Drops the request head and its body (read and discarded) from the
 * connection, keeping any bytes of a following request. */
static int consume_request(conn *c, const peer_request *req, int64_t deadline)
{
    size_t head = req->header_len;
    size_t body_in_buf = c->len - head < req->content_length ? c->len - head : req->content_length;
    size_t rest = req->content_length - body_in_buf;
    size_t used = head + body_in_buf;
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
    char scratch[4096];
    while (rest > 0) {
        size_t n = tls_read(c, scratch, rest < sizeof scratch ? rest : sizeof scratch, deadline);
        if (n == 0)
            return -1;
        rest -= n;
    }
    return 0;
}

/* 1 when the client has closed or reset the connection. */
static int client_gone(conn *c)
{
    struct pollfd p = {c->fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* The source as one connection sees it: long polls wait in slices so that a
 * stop or a client that went away ends them. */
static int conn_view(void *ctx, peer_view *v)
{
    conn *c = ctx;
    return c->srv->src.view(c->srv->src.ctx, v);
}

static int conn_wait(void *ctx, uint64_t version, int64_t deadline)
{
    conn *c = ctx;
    const peer_source *src = &c->srv->src;
    for (;;) {
        if (is_stopping(c->srv) || client_gone(c))
            return -1;
        int64_t now = u_mono_ms();
        if (now >= deadline)
            return 0;
        int64_t slice = deadline - now > PEER_WAIT_SLICE_MS ? now + PEER_WAIT_SLICE_MS : deadline;
        int r = src->wait(src->ctx, version, slice);
        if (r != 0)
            return r;
    }
}

/* Answers one parsed request. Returns 1 to keep the connection open. */
static int serve(conn *c, const peer_request *req)
{
    peer_source csrc = {conn_view, conn_wait, c};
    int status;
    char *body = NULL;
    int rc = peer_answer(&csrc, c->srv->health_path, req, &status, &body);
    if (is_stopping(c->srv)) { /* stopping: close without an answer */
        free(body);
        return 0;
    }
    if (rc != 0) {
        free(body);
        body = NULL;
        status = 503;
    }
    int keep = req->keep_alive;
    int w = send_response(c, status, body ? body : "{\"error\":\"temporarily unavailable\"}",
                          strcmp(req->method, "HEAD") == 0, keep);
    free(body);
    return w == 0 && keep;
}

/* Sends close_notify, half-closes, and drops what the client still sends
 * (bounded), so the answer to a bad request is not lost to a reset. */
static void linger_close(conn *c)
{
    ERR_clear_error();
    SSL_shutdown(c->ssl);
    shutdown(c->fd, SHUT_WR);
    int64_t deadline = u_mono_ms() + PEER_LINGER_MS;
    size_t total = 0;
    char scratch[4096];
    while (total < PEER_LINGER_BYTES && wait_fd(c, POLLIN, deadline) == 1) {
        ssize_t n = recv(c->fd, scratch, sizeof scratch, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            break;
        if (n > 0)
            total += (size_t)n;
    }
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    if (tls_accept(c, c->accepted_ms + PEER_HEAD_TIMEOUT_MS) == 0) {
        int bad = 0;
        for (int first = 1;; first = 0) {
            peer_request req;
            int64_t deadline;
            int rc = read_request(c, first, &req, &deadline);
            if (rc < 0)
                bad = send_error(c, -rc) == 0;
            if (rc <= 0 || consume_request(c, &req, deadline) != 0 || !serve(c, &req))
                break;
        }
        if (bad) {
            linger_close(c);
        } else if (!is_stopping(c->srv)) {
            ERR_clear_error();
            SSL_shutdown(c->ssl); /* one non-blocking close_notify; no wait for the reply */
        }
    }
    ERR_clear_error();
    SSL_free(c->ssl);
    c->ssl = NULL;
    close(c->fd);
    c->fd = -1;
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ---- acceptor ------------------------------------------------------------------ */

/* Joins and frees the connections whose threads have finished. */
static void reap(peer_server *s, int all)
{
    conn *dead = NULL;
    pthread_mutex_lock(&s->mu);
    for (conn **pp = &s->conns; *pp;) {
        conn *c = *pp;
        if (all || __atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) {
            *pp = c->next;
            c->next = dead;
            dead = c;
            s->nconns--;
        } else {
            pp = &c->next;
        }
    }
    pthread_mutex_unlock(&s->mu);
    while (dead) {
        conn *c = dead;
        dead = c->next;
        pthread_join(c->thread, NULL);
        free(c);
    }
}

static void start_conn(peer_server *s, int fd)
{
    reap(s, 0);
    pthread_mutex_lock(&s->mu);
    int full = s->nconns >= PEER_MAX_CONNS;
    pthread_mutex_unlock(&s->mu);
    conn *c = full ? NULL : calloc(1, sizeof *c);
    SSL *ssl = c ? SSL_new(s->ctx) : NULL;
    if (!ssl || SSL_set_fd(ssl, fd) != 1) {
        SSL_free(ssl);
        free(c);
        close(fd);
        ERR_clear_error();
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->srv = s;
    c->fd = fd;
    c->ssl = ssl;
    c->accepted_ms = u_mono_ms();
    /* Only the acceptor adds connections, so the count checked above holds. */
    pthread_mutex_lock(&s->mu);
    if (u_thread_create(&c->thread, NULL, conn_main, c) != 0) {
        pthread_mutex_unlock(&s->mu);
        SSL_free(ssl);
        close(fd);
        free(c);
        return;
    }
    c->next = s->conns;
    s->conns = c;
    s->nconns++;
    pthread_mutex_unlock(&s->mu);
}

static void *acceptor_main(void *arg)
{
    peer_server *s = arg;
    while (!is_stopping(s)) {
        struct pollfd p[2] = {{s->lfd, POLLIN, 0}, {s->wake[0], POLLIN, 0}};
        int r = poll(p, 2, -1);
        if (r < 0 || p[1].revents)
            continue; /* EINTR, or stop: the loop condition decides */
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            start_conn(s, fd);
        } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* Out of descriptors or memory: back off instead of spinning. */
            struct pollfd w = {s->wake[0], POLLIN, 0};
            poll(&w, 1, 100);
        }
    }
    return NULL;
}

/* ---- public ---------------------------------------------------------------------- */

int peer_server_start(const struct s3lect_config *cfg, const peer_identity *id,
                      const peer_source *src, int mtls, peer_server **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cfg || !src || !src->view || !src->wait) {
        snprintf(err, errlen, "peer server: invalid arguments");
        return S3LECT_EINVAL;
    }
    const char *addr = cfg->peer_listen && *cfg->peer_listen ? cfg->peer_listen : cfg->server_addr;
    if (!addr || !*addr) {
        snprintf(err, errlen,
                 "peer mode needs an address to listen on: set peer_listen or server_addr "
                 "(host:port)");
        return S3LECT_EINVAL;
    }
    const char *hp = cfg->peer_health_path && *cfg->peer_health_path ? cfg->peer_health_path
                                                                     : PEER_DEFAULT_HEALTH_PATH;
    if (hp[0] != '/' || strlen(hp) >= sizeof(((peer_request *)0)->path)) {
        snprintf(err, errlen, "peer_health_path must start with '/' and be shorter than %zu bytes",
                 sizeof(((peer_request *)0)->path));
        return S3LECT_EINVAL;
    }

    peer_server *s = calloc(1, sizeof *s);
    if (!s || !(s->health_path = u_strdup(hp))) {
        free(s);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->lfd = -1;
    s->wake[0] = s->wake[1] = -1;
    s->src = *src;
    pthread_mutex_init(&s->mu, NULL);
    int rc = S3LECT_EINVAL;
    if (!(s->ctx = make_ctx(cfg, id, mtls, err, errlen)))
        goto fail;
    if (listen_on(addr, &s->lfd, &s->port, err, errlen) != 0) {
        rc = S3LECT_EIO;
        goto fail;
    }
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        snprintf(err, errlen, "peer server: pipe: %s", strerror(errno));
        rc = S3LECT_EIO;
        goto fail;
    }
    /* Server threads inherit a mask with SIGPIPE blocked. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int perr = u_thread_create(&s->acceptor, NULL, acceptor_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (perr != 0) {
        snprintf(err, errlen, "peer server: cannot start a thread: %s", strerror(perr));
        rc = S3LECT_EIO;
        goto fail;
    }
    s->acceptor_started = 1;
    *out = s;
    return 0;
fail:
    peer_server_stop(s);
    return rc;
}

int peer_server_port(const peer_server *s)
{
    return s ? s->port : 0;
}

void peer_server_stop(peer_server *s)
{
    if (!s)
        return;
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
    if (s->wake[1] >= 0) {
        ssize_t w;
        do
            w = write(s->wake[1], "x", 1);
        while (w < 0 && errno == EINTR);
    }
    if (s->acceptor_started)
        pthread_join(s->acceptor, NULL);
    reap(s, 1); /* every connection thread sees the wake pipe and exits */
    if (s->lfd >= 0)
        close(s->lfd);
    for (int i = 0; i < 2; i++)
        if (s->wake[i] >= 0)
            close(s->wake[i]);
    SSL_CTX_free(s->ctx);
    pthread_mutex_destroy(&s->mu);
    free(s->health_path);
    free(s);
}
