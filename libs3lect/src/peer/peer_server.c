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
 * One listener per (listen address, TLS setup, health path) serves every
 * elector of the process registered on it (peer_server_register); requests
 * name the elector by ?incarnation= (docs/peer.md "One listener per
 * process"). ONE server thread drives every listener and connection of the
 * process: a poll() loop over the listening sockets, the connections and a
 * wake eventfd, with TLS non-blocking (SSL_accept/read/write and
 * SSL_get_error's WANT_READ/WANT_WRITE). A long poll (GET with wait/etag)
 * or a batch (POST) is state on its connection, re-checked when the runtime
 * signals a change (peer_server_notify), at its deadline, and every
 * PEER_SAFETY_RECHECK_MS. Each connection has a deadline for its state
 * (handshake and head, idle, body, write, linger), so slow clients are
 * dropped; at most PEER_MAX_CONNS connections per process, beyond that the
 * longest idle kept-alive one is closed (or the new one, when none is idle).
 *
 * The server thread runs with SIGPIPE blocked: a write to a closed
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
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
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

/* Certificate, key and CA files are read up to this size. */
#define PEER_MAX_PEM (1024 * 1024)
#define PEER_DEFAULT_HEALTH_PATH "/health/leadership"

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
    char pin[PEER_PIN_LEN + 1];
    int refs; /* under id_mu */
};

static pthread_mutex_t id_mu = PTHREAD_MUTEX_INITIALIZER;
static peer_identity *shared_id; /* under id_mu */

void peer_identity_free(peer_identity *id)
{
    if (!id)
        return;
    pthread_mutex_lock(&id_mu);
    int last = --id->refs <= 0;
    if (last && shared_id == id)
        shared_id = NULL;
    pthread_mutex_unlock(&id_mu);
    if (!last)
        return;
    EVP_PKEY_free(id->key);
    X509_free(id->cert);
    free(id);
}

const char *peer_identity_pin(const peer_identity *id)
{
    return id ? id->pin : "";
}

int peer_identity_shared(peer_identity **out, char pin[PEER_PIN_LEN + 1], char *err, size_t errlen)
{
    pthread_mutex_lock(&id_mu);
    int rc = 0;
    if (!shared_id)
        rc = peer_identity_new(&shared_id, pin, err, errlen);
    else
        shared_id->refs++;
    if (rc == 0)
        memcpy(pin, shared_id->pin, PEER_PIN_LEN + 1);
    *out = rc == 0 ? shared_id : NULL;
    pthread_mutex_unlock(&id_mu);
    return rc;
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
        memcpy(id->pin, pin, PEER_PIN_LEN + 1);
        id->refs = 1;
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
    int fd = u_listen(res, !host[0], SOCK_NONBLOCK, 1024, NULL, &last_errno);
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

/* ---- the process-wide registry ------------------------------------------------ */

/* Handshake plus the complete first request head; for later requests on a
 * kept-alive connection, the head (and a batch's body) from its first byte. */
#define PEER_HEAD_TIMEOUT_MS 10000
/* A kept-alive connection may sit idle this long between requests. */
#define PEER_IDLE_TIMEOUT_MS 30000
/* Writing one response. */
#define PEER_WRITE_TIMEOUT_MS 10000
/* Pending long polls are re-checked this often when a source cannot tell
 * its changes (no state callback), else every PEER_SAFETY_RECHECK_MS. */
#define PEER_RECHECK_MS 100
#define PEER_SAFETY_RECHECK_MS 1000
/* After an error answer the rest of the client's request is read and
 * dropped for at most this long and this much, so that closing the socket
 * does not reset the connection before the client has read the answer. */
#define PEER_LINGER_MS 2000
#define PEER_LINGER_BYTES (256 * 1024)
#define PEER_HASH 1024

struct listener;

/* One elector's registration on a listener (peer.h: peer_server). */
struct peer_server {
    struct listener *l;
    struct peer_server *next, *prev, *hnext;
    struct peer_server *tnext, *tprev; /* the listener's stopped ones, oldest first */
    char inc[PEER_INC_MAX + 1];        /* "" when registered without one */
    peer_source src;
    int port;
    int tomb; /* stopped: answers "not the leader" until tomb_until */
    int64_t tomb_until;
    char *tomb_released; /* stopped: the released record its elector wrote, if any */
    uint64_t gen;        /* atomic: bumped by peer_server_notify */
    /* The successor (server thread only): a "not the leader" answer at view
     * version nom_ver has named one follower to take over first. */
    int nom_set;
    uint64_t nom_ver;
};

typedef struct listener {
    struct listener *next;
    char *addr;
    uint8_t key[CR_SHA256_LEN]; /* the TLS setup and health path */
    int explicit_port;
    char *health_path;
    SSL_CTX *ctx;
    int lfd, port;
    peer_server *regs;
    peer_server *thead, *ttail; /* stopped registrations, in the order they stopped */
    peer_server *hash[PEER_HASH];
    int nlive, nregs;
    int closing; /* no registration left: the server thread closes it */
} listener;

enum { C_HANDSHAKE, C_HEAD, C_BODY, C_GET, C_BATCH, C_WRITE, C_LINGER, C_CLOSED };

typedef struct conn {
    struct conn *next;
    listener *l;
    int fd;
    SSL *ssl;
    int state;
    short want;       /* poll events the TLS layer waits for */
    int64_t deadline; /* of the current state */
    int64_t accepted_ms, idle_since, head_started;
    int first; /* no request answered yet */
    int local; /* the request came from this process (its ?process= token) */
    peer_request req;
    size_t len; /* bytes in buf */
    char buf[PEER_MAX_HEADER];
    char *body; /* a batch's body (POST), NULL when the body is dropped */
    size_t body_len, body_need;
    char *out; /* the answer being written */
    size_t out_len, out_off;
    int keep, linger_after;
    size_t lingered;
    /* C_GET: the registration and the version the answer waits to change. */
    peer_server *reg;
    uint64_t ver, gen;
    int64_t wait_deadline;
    /* C_BATCH */
    peer_batch batch;
    uint64_t *gens;     /* per entry: the registration's gen at the last check */
    peer_server **regs; /* per entry: its registration (NULL: none), as of regs_epoch */
    uint64_t regs_epoch;
    int64_t gather_at;
    int64_t checked_at; /* full re-check */
} conn;

static struct {
    pthread_mutex_t life; /* serialises register/unregister (thread start/join) */
    pthread_mutex_t mu;   /* everything below; the server thread holds it except in poll() */
    pthread_cond_t cv;
    listener *ls;
    conn *conns;
    int nconns;
    int wakefd;          /* eventfd, kept for the process lifetime once made */
    int running, joiner; /* a thread runs; peer_server_stop will join it */
    pthread_t thread;
    uint64_t iter;
    int slow_sources; /* registrations without a state callback */
    int64_t accept_paused_until;
    uint64_t reg_epoch; /* bumped whenever a registration is forgotten */
} g = {.life = PTHREAD_MUTEX_INITIALIZER,
       .mu = PTHREAD_MUTEX_INITIALIZER,
       .cv = PTHREAD_COND_INITIALIZER,
       .wakefd = -1};

static void wake_server(void)
{
    int fd = __atomic_load_n(&g.wakefd, __ATOMIC_ACQUIRE);
    if (fd < 0)
        return;
    uint64_t one = 1;
    ssize_t w;
    do
        w = write(fd, &one, sizeof one);
    while (w < 0 && errno == EINTR);
}

void peer_server_notify(peer_server *s)
{
    if (!s)
        return;
    __atomic_add_fetch(&s->gen, 1, __ATOMIC_RELEASE);
    wake_server();
}

static uint32_t inc_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % PEER_HASH;
}

/* The registration for an incarnation (live or stopped), or NULL. */
static peer_server *lookup(listener *l, const char *inc)
{
    for (peer_server *r = l->hash[inc_hash(inc)]; r; r = r->hnext)
        if (strcmp(r->inc, inc) == 0)
            return r;
    return NULL;
}

/* The state of a registration (a stopped one never leads). */
static void reg_state(peer_server *r, peer_state *st)
{
    memset(st, 0, sizeof *st);
    if (r->tomb)
        return;
    if (r->src.state) {
        r->src.state(r->src.ctx, st);
        return;
    }
    peer_view v = {0};
    if (r->src.view(r->src.ctx, &v) == 0) {
        st->version = v.version;
        st->leading = v.leading && v.body;
        cJSON *o = st->leading ? cJSON_Parse(v.body) : NULL;
        cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "term");
        st->term = cJSON_IsNumber(t) ? (int64_t)t->valuedouble : 0;
        st->etag_hash = peer_etag_hash(st->leading && v.etag ? v.etag : "");
        cJSON_Delete(o);
    }
    peer_view_clear(&v);
}

static int reg_view(peer_server *r, peer_view *v)
{
    memset(v, 0, sizeof *v);
    if (r->tomb) {
        v->etag = u_strdup("");
        v->released = r->tomb_released ? u_strdup(r->tomb_released) : NULL;
        return v->etag && (v->released || !r->tomb_released) ? 0 : S3LECT_ENOMEM;
    }
    return r->src.view(r->src.ctx, v);
}

/* ---- connection I/O ------------------------------------------------------- */

static void conn_close(conn *c)
{
    if (c->state == C_CLOSED)
        return;
    ERR_clear_error();
    SSL_free(c->ssl);
    c->ssl = NULL;
    close(c->fd);
    c->fd = -1;
    c->state = C_CLOSED;
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

/* Reads into dst. Returns the count, 0 when it would block (c->want set), -1 on close or error. */
static long tls_read(conn *c, char *dst, size_t cap)
{
    ERR_clear_error();
    int r = SSL_read(c->ssl, dst, cap > INT_MAX ? INT_MAX : (int)cap);
    if (r > 0)
        return r;
    c->want = ssl_wants(c, r);
    return c->want ? 0 : -1;
}

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
    case 413:
        return "Content Too Large";
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

static void step(conn *c, int64_t now);

/* Queues the answer and starts writing it. */
static void respond(conn *c, int status, const char *body, int head_only, int keep, int linger)
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
                 status, reason_phrase(status), blen,
                 status == 405 ? "Allow: GET, HEAD, POST\r\n" : "", keep ? "keep-alive" : "close");
    size_t total = (size_t)hl + (head_only ? 0 : blen);
    free(c->out);
    c->out = hl > 0 && (size_t)hl < sizeof hdr ? malloc(total) : NULL;
    if (!c->out) {
        conn_close(c);
        return;
    }
    memcpy(c->out, hdr, (size_t)hl);
    if (!head_only && blen)
        memcpy(c->out + hl, body, blen);
    c->out_len = total;
    c->out_off = 0;
    c->keep = keep;
    c->linger_after = linger;
    c->state = C_WRITE;
    c->want = POLLOUT;
    c->deadline = u_mono_ms() + PEER_WRITE_TIMEOUT_MS;
}

static void respond_error(conn *c, int status)
{
    const char *body = status == 431   ? "{\"error\":\"request head too large\"}"
                       : status == 505 ? "{\"error\":\"only HTTP/1.0 and HTTP/1.1 are supported\"}"
                       : status == 413 ? "{\"error\":\"request body too large (at most 1 MiB)\"}"
                                       : "{\"error\":\"malformed request\"}";
    respond(c, status, body, 0, 0, 1);
}

static void batch_clear(conn *c)
{
    peer_batch_free(&c->batch);
    free(c->gens);
    c->gens = NULL;
    free(c->regs);
    c->regs = NULL;
    free(c->body);
    c->body = NULL;
}

/* ---- answering ---------------------------------------------------------------- */

static const char NOT_LEADER[] = "{\"error\":\"this node is not the leader\"}";
static const char NOT_LEADER_YIELD[] = "{\"error\":\"this node is not the leader\",\"yield\":true}";

/* 1 when x is a pending long poll or batch on r. */
static int waits_on(const conn *x, const peer_server *r)
{
    if (x->state == C_GET)
        return x->reg == r;
    if (x->state == C_BATCH)
        for (size_t i = 0; i < x->batch.n; i++)
            if (strcmp(x->batch.e[i].incarnation, r->inc) == 0)
                return 1;
    return 0;
}

/* One successor (docs/peer.md): whether c's "not the leader" answer about r
 * (at view version ver) tells its follower to yield. The first s3lect
 * follower told of a version of r that does not lead takes over at once; the
 * others are told to yield: they read the store a moment later, and find the
 * new leader there rather than all racing to write the released record.
 * Followers of this process's own electors yield while one of another
 * process waits (this process may be stopping them all: SIGTERM). Only
 * ordering: every write stays conditional, and a successor that does not
 * take over leaves the lock to the others' next read. */
static int answer_yields(conn *c, peer_server *r, uint64_t ver, const char *proof)
{
    if (!r || !c->req.process[0])
        return 0; /* a health probe, an older s3lect: neither named nor told */
    /* Only a follower that read the lock from the store (it presents the
     * record's succKey, which this endpoint never shows) can be named: any
     * client can send a process token and the etag it read here, and one
     * named in place of the real followers made them all wait (issue 38). */
    if (r->src.succ_key[0] && strcmp(proof ? proof : "", r->src.succ_key) != 0)
        return 1;
    if (r->nom_set && (r->tomb || r->nom_ver == ver))
        return 1;
    if (c->local)
        for (conn *x = g.conns; x; x = x->next)
            if (x != c && !x->local && x->req.process[0] && waits_on(x, r))
                return 1;
    r->nom_set = 1;
    r->nom_ver = ver;
    return 0;
}
static const char SEVERAL[] =
    "{\"error\":\"this endpoint serves several locks: name one with ?incarnation=\"}";

/* Answers c's GET from the view of r now (NULL: not the leader). */
static void answer_get(conn *c, peer_server *r)
{
    int head = strcmp(c->req.method, "HEAD") == 0;
    peer_view v;
    int status = 404;
    char *body = NULL;
    int rc = r ? reg_view(r, &v) : (memset(&v, 0, sizeof v), 0);
    if (rc == 0 && r)
        rc = peer_answer_view(&v, &status, &body);
    if (rc == 0 && status == 404) {
        /* "Not the leader": to the successor with the released record, to
         * the others with "yield" (answer_yields). */
        free(body);
        body = NULL;
        if (answer_yields(c, r, v.version, c->req.proof))
            body = u_strdup(NOT_LEADER_YIELD);
        else if (v.released)
            body = u_asprintf("{\"error\":\"this node is not the leader\",\"released\":%s}",
                              v.released);
        else
            body = u_strdup(NOT_LEADER);
        if (!body)
            rc = S3LECT_ENOMEM;
    }
    peer_view_clear(&v);
    if (rc != 0)
        respond(c, 503, "{\"error\":\"temporarily unavailable\"}", head, c->req.keep_alive, 0);
    else
        respond(c, status, body ? body : NOT_LEADER, head, c->req.keep_alive, 0);
    free(body);
}

/* Re-checks a pending GET. full: ignore the registration's gen. */
/* A long poll's view of r: answers 503 when it cannot be built (-1), else
 * notes its version and says whether the poll is held (1) or is to be
 * answered now (0). */
static int poll_view(conn *c, peer_server *r)
{
    peer_view v;
    if (reg_view(r, &v) != 0) {
        peer_view_clear(&v);
        respond(c, 503, "{\"error\":\"temporarily unavailable\"}", 0, c->req.keep_alive, 0);
        return -1;
    }
    int hold = peer_should_hold(&c->req, &v);
    c->ver = v.version;
    peer_view_clear(&v);
    return hold;
}

static void check_get(conn *c, int64_t now, int full)
{
    peer_server *r = c->reg;
    if (!r || r->tomb || now >= c->wait_deadline) {
        answer_get(c, r);
        return;
    }
    uint64_t gen = __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE);
    if (!full && gen == c->gen)
        return;
    c->gen = gen;
    if (r->src.state) {
        peer_state st;
        reg_state(r, &st);
        if (st.version == c->ver && st.leading)
            return;
    }
    int hold = poll_view(c, r);
    if (hold == 0)
        answer_get(c, r);
}

static void start_get(conn *c, int64_t now)
{
    listener *l = c->l;
    peer_server *r = NULL;
    if (c->req.incarnation[0]) {
        r = lookup(l, c->req.incarnation);
    } else if (l->nlive > 1) {
        respond(c, 404, SEVERAL, strcmp(c->req.method, "HEAD") == 0, c->req.keep_alive, 0);
        return;
    } else {
        for (peer_server *x = l->regs; x; x = x->next)
            if (!x->tomb || !r)
                r = x; /* the live one, else a stopped one */
    }
    if (!r || r->tomb || c->req.wait_ms <= 0 || !c->req.etag[0]) {
        answer_get(c, r);
        return;
    }
    c->reg = r;
    c->gen = __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE);
    c->wait_deadline = now + c->req.wait_ms;
    int hold = poll_view(c, r);
    if (hold <= 0) {
        if (hold == 0)
            answer_get(c, r);
        return;
    }
    c->state = C_GET;
    c->want = 0;
    c->checked_at = now;
}

/* How the entry's lock has changed for the follower that sent it: 0 not at
 * all, CH_RENEWED a renewal (same leader and term, another etag: the
 * follower's lease clock restarts from its receipt), CH_LEADERSHIP the end
 * of this leadership or another term (a release: answered at once). */
enum { CH_NONE = 0, CH_RENEWED = 1, CH_LEADERSHIP = 2 };
static int entry_changed(listener *l, const peer_batch_entry *e)
{
    peer_server *r = lookup(l, e->incarnation);
    if (!r || r->tomb)
        return CH_LEADERSHIP;
    peer_state st;
    reg_state(r, &st);
    if (!st.leading || st.term != e->term)
        return CH_LEADERSHIP;
    /* An entry without an etag asks about leadership alone. */
    return e->etag[0] && st.etag_hash != peer_etag_hash(e->etag) ? CH_RENEWED : CH_NONE;
}

static void answer_batch(conn *c, int changed_only)
{
    listener *l = c->l;
    size_t n = c->batch.n, k = 0;
    peer_batch_item *items = calloc(n ? n : 1, sizeof *items);
    char **bodies = calloc(n ? n : 1, sizeof *bodies);
    if (!items || !bodies) {
        free(items);
        free(bodies);
        respond(c, 503, "{\"error\":\"temporarily unavailable\"}", 0, c->req.keep_alive, 0);
        batch_clear(c);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const peer_batch_entry *e = &c->batch.e[i];
        if (changed_only && !entry_changed(l, e))
            continue;
        peer_server *r = lookup(l, e->incarnation);
        peer_view v;
        int status = 404;
        uint64_t ver = 0;
        char *released = NULL;
        if (r && reg_view(r, &v) == 0) {
            if (!r->tomb && v.leading && v.body) {
                status = 200;
                bodies[k] = v.body;
                v.body = NULL;
            }
            ver = v.version;
            released = v.released;
            v.released = NULL;
        }
        if (r)
            peer_view_clear(&v);
        items[k].incarnation = e->incarnation;
        items[k].status = status;
        items[k].yield = status == 404 && answer_yields(c, r, ver, e->proof);
        if (status == 404 && !items[k].yield && released) {
            bodies[k] = released; /* the successor's: freed with the bodies */
            released = NULL;
            items[k].released = bodies[k];
        }
        free(released);
        items[k].record = status == 200 ? bodies[k] : NULL;
        k++;
    }
    if (changed_only && k == 0 && n > 0) {
        /* What changed changed back while the answer was made (a leader
         * that stepped down and took its record back): an answer naming no
         * lock reads as malformed to a follower; answer every entry with its
         * state instead (issue 38). */
        for (size_t i = 0; i < n; i++)
            free(bodies[i]);
        free(items);
        free(bodies);
        answer_batch(c, 0);
        return;
    }
    char *out = peer_batch_answer(items, k);
    for (size_t i = 0; i < k; i++)
        free(bodies[i]);
    free(items);
    free(bodies);
    batch_clear(c);
    if (!out) {
        respond(c, 503, "{\"error\":\"temporarily unavailable\"}", 0, c->req.keep_alive, 0);
        return;
    }
    respond(c, 200, out, 0, c->req.keep_alive, 0);
    free(out);
}

/* Re-checks a pending batch. full: every entry, else those whose
 * registration was notified since the last check. A release or a change of
 * leader or term is answered at once (a successor is waiting for it); a
 * renewal waits PEER_BATCH_GATHER_MS for others to answer with it, which at
 * scale (thousands of locks renewed every few seconds on one connection)
 * turns one answer per renewal into one per gathering, and costs a
 * follower's lease clock at most that much. */
static void check_batch(conn *c, int64_t now, int full)
{
    listener *l = c->l;
    int changed = c->gather_at != 0 ? CH_RENEWED : CH_NONE;
    if (c->regs_epoch != g.reg_epoch) {
        /* Resolved once per change of the registrations, not per check:
         * thousands of entries are re-checked at every notification. */
        for (size_t i = 0; i < c->batch.n; i++)
            c->regs[i] = lookup(l, c->batch.e[i].incarnation);
        c->regs_epoch = g.reg_epoch;
    }
    for (size_t i = 0; i < c->batch.n && changed != CH_LEADERSHIP; i++) {
        peer_batch_entry *e = &c->batch.e[i];
        peer_server *r = c->regs[i];
        if (!r || r->tomb) {
            changed = CH_LEADERSHIP;
            break;
        }
        uint64_t gen = __atomic_load_n(&r->gen, __ATOMIC_ACQUIRE);
        if (!full && gen == c->gens[i])
            continue;
        c->gens[i] = gen;
        int ch = entry_changed(l, e);
        if (ch > changed)
            changed = ch;
    }
    if (changed == CH_RENEWED && !c->gather_at)
        c->gather_at = now + PEER_BATCH_GATHER_MS;
    if (changed == CH_LEADERSHIP || (changed == CH_RENEWED && now >= c->gather_at))
        answer_batch(c, 1);
    else if (changed == CH_NONE && now >= c->wait_deadline)
        answer_batch(c, 0);
}

static void start_batch(conn *c, int64_t now)
{
    int rc = peer_parse_batch(c->body, c->body_len, &c->batch);
    free(c->body);
    c->body = NULL;
    if (rc != 0) {
        respond(c,
                rc == -413   ? 413
                : rc == -500 ? 503
                             : 400,
                rc == -500
                    ? "{\"error\":\"temporarily unavailable\"}"
                    : "{\"error\":\"malformed batch: expected {\\\"wait\\\":ms,\\\"locks\\\":"
                      "[{\\\"incarnation\\\":hex,\\\"term\\\":n,\\\"etag\\\":s},...]} "
                      "with 1 to 4096 locks\"}",
                0, c->req.keep_alive, 0);
        return;
    }
    c->gens = calloc(c->batch.n, sizeof *c->gens);
    c->regs = calloc(c->batch.n, sizeof *c->regs);
    c->regs_epoch = g.reg_epoch - 1; /* resolved at the first check */
    if (!c->gens || !c->regs) {
        batch_clear(c);
        respond(c, 503, "{\"error\":\"temporarily unavailable\"}", 0, c->req.keep_alive, 0);
        return;
    }
    c->state = C_BATCH;
    c->want = 0;
    c->gather_at = 0;
    c->wait_deadline = now + c->batch.wait_ms;
    c->checked_at = now;
    check_batch(c, now, 1);
}

/* A complete request (and body): answer it or park it. */
static void dispatch(conn *c, int64_t now)
{
    int status;
    char *body = NULL;
    int early = peer_answer_early(c->l->health_path, &c->req, 1, &status, &body);
    if (early) {
        if (early < 0)
            conn_close(c);
        else
            respond(c, status, body, strcmp(c->req.method, "HEAD") == 0, c->req.keep_alive, 0);
        free(body);
        return;
    }
    c->local = c->req.process[0] && strcmp(c->req.process, peer_process_token()) == 0;
    if (strcmp(c->req.method, "POST") == 0)
        start_batch(c, now);
    else
        start_get(c, now);
}

/* ---- the connection's state machine -------------------------------------------- */

static void start_head(conn *c, int64_t now)
{
    c->state = C_HEAD;
    c->want = POLLIN;
    c->idle_since = now;
    c->head_started = 0;
    c->reg = NULL;
}

static void after_head(conn *c, int64_t now)
{
    size_t head = c->req.header_len;
    size_t cl = c->req.content_length;
    int post = strcmp(c->req.method, "POST") == 0;
    size_t inbuf = c->len - head < cl ? c->len - head : cl;
    c->body = NULL;
    c->body_len = 0;
    c->body_need = cl;
    if (post) {
        c->body = malloc(cl ? cl : 1);
        if (!c->body) {
            conn_close(c);
            return;
        }
        memcpy(c->body, c->buf + head, inbuf);
    }
    c->body_len = inbuf;
    memmove(c->buf, c->buf + head + inbuf, c->len - head - inbuf);
    c->len -= head + inbuf;
    c->state = C_BODY;
    c->want = POLLIN;
    c->deadline = (c->head_started ? c->head_started : now) + PEER_HEAD_TIMEOUT_MS;
    if (c->first)
        c->deadline = c->accepted_ms + PEER_HEAD_TIMEOUT_MS;
    if (c->body_len < c->body_need && c->deadline < now + PEER_HEAD_TIMEOUT_MS)
        c->deadline = now + PEER_HEAD_TIMEOUT_MS; /* a body of up to 1 MiB */
}

static void do_head(conn *c, int64_t now)
{
    for (;;) {
        if (c->len > 0) {
            int rc = peer_parse_request(c->buf, c->len, &c->req);
            if (rc < 0) {
                respond_error(c, -rc);
                return;
            }
            if (rc == 1) {
                after_head(c, now);
                return;
            }
            if (!c->head_started)
                c->head_started = now;
        }
        long n = tls_read(c, c->buf + c->len, sizeof c->buf - c->len);
        if (n < 0) {
            conn_close(c);
            return;
        }
        if (n == 0)
            break;
        c->len += (size_t)n;
    }
    c->deadline = c->first          ? c->accepted_ms + PEER_HEAD_TIMEOUT_MS
                  : c->head_started ? c->head_started + PEER_HEAD_TIMEOUT_MS
                                    : c->idle_since + PEER_IDLE_TIMEOUT_MS;
}

static void do_body(conn *c, int64_t now)
{
    char scratch[4096];
    while (c->body_len < c->body_need) {
        size_t want = c->body_need - c->body_len;
        char *dst = c->body ? c->body + c->body_len : scratch;
        if (!c->body && want > sizeof scratch)
            want = sizeof scratch;
        long n = tls_read(c, dst, want);
        if (n < 0) {
            conn_close(c);
            return;
        }
        if (n == 0)
            return;
        c->body_len += (size_t)n;
    }
    dispatch(c, now);
}

static void do_write(conn *c, int64_t now)
{
    while (c->out_off < c->out_len) {
        ERR_clear_error();
        size_t n = c->out_len - c->out_off;
        int r = SSL_write(c->ssl, c->out + c->out_off, n > INT_MAX ? INT_MAX : (int)n);
        if (r <= 0) {
            c->want = ssl_wants(c, r);
            if (!c->want)
                conn_close(c);
            return;
        }
        c->out_off += (size_t)r;
    }
    free(c->out);
    c->out = NULL;
    c->first = 0;
    if (c->linger_after) {
        /* close_notify, half-close, and drop what the client still sends
         * (bounded), so the answer to a bad request is not lost to a reset. */
        ERR_clear_error();
        SSL_shutdown(c->ssl);
        shutdown(c->fd, SHUT_WR);
        c->state = C_LINGER;
        c->want = POLLIN;
        c->lingered = 0;
        c->deadline = now + PEER_LINGER_MS;
        return;
    }
    if (!c->keep) {
        ERR_clear_error();
        SSL_shutdown(c->ssl); /* one non-blocking close_notify; no wait for the reply */
        conn_close(c);
        return;
    }
    start_head(c, now);
    do_head(c, now); /* a pipelined request may be in buf already */
}

static void do_linger(conn *c)
{
    char scratch[4096];
    while (c->lingered < PEER_LINGER_BYTES) {
        ssize_t n = recv(c->fd, scratch, sizeof scratch, MSG_DONTWAIT);
        if (n > 0) {
            c->lingered += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        break;
    }
    conn_close(c);
}

/* Runs c's state machine as far as it goes without blocking. */
static void step(conn *c, int64_t now)
{
    switch (c->state) {
    case C_HANDSHAKE: {
        ERR_clear_error();
        int r = SSL_accept(c->ssl);
        if (r == 1) {
            start_head(c, now);
            do_head(c, now);
            return;
        }
        c->want = ssl_wants(c, r);
        if (!c->want)
            conn_close(c);
        return;
    }
    case C_HEAD:
        do_head(c, now);
        return;
    case C_BODY:
        do_body(c, now);
        return;
    case C_WRITE:
        do_write(c, now);
        return;
    case C_LINGER:
        do_linger(c);
        return;
    default:
        return;
    }
}

/* Drives c until it waits for its socket, a change or a deadline. Every
 * step either changes the state or leaves it waiting (want set), so this
 * ends; it must not stop early: pipelined requests already read into
 * c->buf would wait for a POLLIN that never comes. */
static void run(conn *c, int64_t now)
{
    for (;;) {
        int before = c->state;
        step(c, now);
        /* A state that finished without waiting (answered at once) goes on. */
        if (c->state == C_CLOSED || c->state == C_GET || c->state == C_BATCH ||
            (c->state == before && c->want))
            return;
    }
}

/* 1 when the client closed or reset a parked connection. */
static int gone(short revents)
{
    return (revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* ---- the server thread ----------------------------------------------------------- */

static void accept_on(listener *l, int64_t now)
{
    for (;;) {
        int fd = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                g.accept_paused_until = now + 100; /* back off instead of spinning */
            return;
        }
        if (g.nconns >= PEER_MAX_CONNS) {
            /* Full: the longest idle kept-alive connection makes room, else the new one goes. */
            conn *old = NULL;
            for (conn *c = g.conns; c; c = c->next)
                if (c->state == C_HEAD && !c->first && c->len == 0 && !c->head_started &&
                    (!old || c->idle_since <= old->idle_since))
                    old = c; /* newest first: on a tie the older one wins */
            if (!old) {
                close(fd);
                continue;
            }
            conn_close(old);
        }
        conn *c = calloc(1, sizeof *c);
        SSL *ssl = c ? SSL_new(l->ctx) : NULL;
        if (!ssl || SSL_set_fd(ssl, fd) != 1) {
            SSL_free(ssl);
            free(c);
            close(fd);
            ERR_clear_error();
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->l = l;
        c->fd = fd;
        c->ssl = ssl;
        c->first = 1;
        c->accepted_ms = now;
        c->state = C_HANDSHAKE;
        c->want = POLLIN;
        c->deadline = now + PEER_HEAD_TIMEOUT_MS;
        c->next = g.conns;
        g.conns = c;
        g.nconns++;
        run(c, now);
    }
}

static void free_conn(conn *c)
{
    conn_close(c);
    batch_clear(c);
    free(c->out);
    free(c);
}

static void free_listener(listener *l)
{
    if (l->lfd >= 0)
        close(l->lfd);
    SSL_CTX_free(l->ctx);
    free(l->addr);
    free(l->health_path);
    free(l);
}

/* Under g.mu: drops closed connections, stopped registrations whose time
 * is up, and listeners left without registrations (with their connections). */
/* Takes r (already off l->regs) out of l's incarnation hash and off every
 * connection that waits on it, and uncounts it. */
static void forget_reg(listener *l, peer_server *r)
{
    for (peer_server **hp = &l->hash[inc_hash(r->inc)]; *hp; hp = &(*hp)->hnext)
        if (*hp == r) {
            *hp = r->hnext;
            break;
        }
    for (conn *c = g.conns; c; c = c->next)
        if (c->reg == r)
            c->reg = NULL;
    g.reg_epoch++; /* batches resolve their entries again */
    l->nregs--;
}

/* Takes r off l's stopped registrations, if it is on them. */
static void untomb(listener *l, peer_server *r)
{
    if (!r->tprev && l->thead != r)
        return;
    if (r->tprev)
        r->tprev->tnext = r->tnext;
    else
        l->thead = r->tnext;
    if (r->tnext)
        r->tnext->tprev = r->tprev;
    else
        l->ttail = r->tprev;
    r->tnext = r->tprev = NULL;
}

/* Takes r off l->regs (and off the stopped ones). */
static void unlink_reg(listener *l, peer_server *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else if (l->regs == r)
        l->regs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->next = r->prev = NULL;
    untomb(l, r);
}

/* Drops the stopped registrations whose grace is over: the oldest first
 * (one whose shorter grace ends before an older one's waits for it, answering
 * "not the leader" a little longer, as it would after it). Without one due,
 * this costs nothing however many registrations there are. */
static void expire_tombs(listener *l, int64_t now)
{
    peer_server *r;
    while ((r = l->thead) != NULL && now >= r->tomb_until) {
        untomb(l, r);
        unlink_reg(l, r);
        forget_reg(l, r);
        free(r->tomb_released);
        free(r);
    }
    if (l->nregs == 0)
        l->closing = 1;
}

static void cleanup(int64_t now)
{
    for (listener *l = g.ls; l; l = l->next)
        expire_tombs(l, now);
    for (conn **pp = &g.conns; *pp;) {
        conn *c = *pp;
        if (c->l->closing)
            conn_close(c);
        if (c->state == C_CLOSED) {
            *pp = c->next;
            g.nconns--;
            free_conn(c);
        } else {
            pp = &c->next;
        }
    }
    for (listener **pp = &g.ls; *pp;) {
        listener *l = *pp;
        if (l->closing) {
            *pp = l->next;
            free_listener(l);
        } else {
            pp = &l->next;
        }
    }
}

static int64_t min_deadline(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static void *server_main(void *arg)
{
    (void)arg;
    size_t cap = 0;
    struct pollfd *pf = NULL;
    void **who = NULL; /* per pollfd: a listener or a connection */
    int *is_l = NULL;
    int64_t last_full = u_mono_ms();
    pthread_mutex_lock(&g.mu);
    for (;;) {
        int64_t now = u_mono_ms();
        cleanup(now);
        if (!g.ls) {
            if (!g.joiner)
                pthread_detach(pthread_self()); /* nobody waits for this exit */
            g.running = 0;
            g.iter++;
            pthread_cond_broadcast(&g.cv);
            break;
        }
        /* Deadlines and pending re-checks. */
        int64_t recheck = g.slow_sources ? PEER_RECHECK_MS : PEER_SAFETY_RECHECK_MS;
        int full = now - last_full >= recheck;
        if (full)
            last_full = now;
        int64_t next = now + PEER_IDLE_TIMEOUT_MS; /* nothing pending: sleep until woken */
        int pending = 0;
        size_t need = 1 + (size_t)g.nconns;
        for (listener *l = g.ls; l; l = l->next)
            need++;
        if (need > cap) {
            size_t nc = need * 2;
            struct pollfd *npf = realloc(pf, nc * sizeof *pf);
            if (npf)
                pf = npf;
            void **nw = npf ? realloc(who, nc * sizeof *who) : NULL;
            if (nw)
                who = nw;
            int *ni = nw ? realloc(is_l, nc * sizeof *is_l) : NULL;
            if (ni)
                is_l = ni;
            if (ni)
                cap = nc;
        }
        if (cap == 0 || !pf || !who || !is_l) { /* out of memory: try again in a moment */
            pthread_mutex_unlock(&g.mu);
            poll(NULL, 0, 100);
            pthread_mutex_lock(&g.mu);
            continue;
        }
        size_t n = 0;
        pf[n] = (struct pollfd){g.wakefd, POLLIN, 0};
        who[n] = NULL;
        is_l[n++] = 0;
        if (now >= g.accept_paused_until) {
            for (listener *l = g.ls; l && n < cap; l = l->next) {
                pf[n] = (struct pollfd){l->lfd, POLLIN, 0};
                who[n] = l;
                is_l[n++] = 1;
            }
        } else {
            next = min_deadline(next, g.accept_paused_until);
        }
        for (conn *c = g.conns; c && n < cap; c = c->next) {
            if (c->state == C_GET || c->state == C_BATCH) {
                if (c->state == C_GET)
                    check_get(c, now, full);
                else
                    check_batch(c, now, full);
                if (c->state == C_WRITE)
                    run(c, now);
            } else if (now >= c->deadline) {
                conn_close(c); /* slow (slowloris), idle or stuck */
            }
            if (c->state == C_CLOSED)
                continue;
            short ev = c->state == C_GET || c->state == C_BATCH ? POLLRDHUP : c->want;
            pf[n] = (struct pollfd){c->fd, ev, 0};
            who[n] = c;
            is_l[n++] = 0;
            pending |= c->state == C_GET || c->state == C_BATCH;
            if (c->state == C_GET)
                next = min_deadline(next, c->wait_deadline);
            else if (c->state == C_BATCH)
                next = min_deadline(next, c->gather_at ? c->gather_at : c->wait_deadline);
            else
                next = min_deadline(next, c->deadline);
        }
        if (pending)
            next = min_deadline(next, now + recheck);
        for (listener *l = g.ls; l; l = l->next)
            if (l->thead)
                next = min_deadline(next, l->thead->tomb_until);
        g.iter++;
        pthread_cond_broadcast(&g.cv);
        pthread_mutex_unlock(&g.mu);

        int64_t left = next - now;
        if (left < 0)
            left = 0;
        int pr = poll(pf, (nfds_t)n, left > INT_MAX ? INT_MAX : (int)left);

        pthread_mutex_lock(&g.mu);
        now = u_mono_ms();
        if (pr <= 0)
            continue;
        if (pf[0].revents) {
            uint64_t v;
            while (read(g.wakefd, &v, sizeof v) > 0) {
            }
        }
        for (size_t i = 1; i < n; i++) {
            if (!pf[i].revents)
                continue;
            if (is_l[i]) {
                listener *l = who[i];
                if (!l->closing)
                    accept_on(l, now);
                continue;
            }
            conn *c = who[i];
            if (c->state == C_CLOSED || c->l->closing)
                continue;
            if (c->state == C_GET || c->state == C_BATCH) {
                if (gone(pf[i].revents))
                    conn_close(c); /* the follower went away: nothing to answer */
                continue;
            }
            if ((pf[i].revents & (POLLHUP | POLLERR | POLLNVAL)) && c->state != C_LINGER &&
                !(pf[i].revents & POLLIN)) {
                conn_close(c);
                continue;
            }
            run(c, now);
        }
    }
    pthread_mutex_unlock(&g.mu);
    free(pf);
    free(who);
    free(is_l);
    return NULL;
}

/* ---- public ---------------------------------------------------------------------- */

/* The TLS setup and health path as a key: electors share a listener only
 * when theirs are byte-identical. */
static int setup_key(const struct s3lect_config *cfg, const peer_identity *id, int mtls,
                     const char *hp, uint8_t key[CR_SHA256_LEN])
{
    const cfg_blob none = {0};
    const cfg_blob *parts[3] = {id ? &none : &cfg->peer_cert, id ? &none : &cfg->peer_key,
                                mtls ? &cfg->peer_ca : &none};
    size_t len = 64 + strlen(hp) + (id ? PEER_PIN_LEN : 0);
    for (int i = 0; i < 3; i++)
        len += parts[i]->len + 24;
    char *buf = malloc(len);
    if (!buf)
        return -1;
    size_t o = (size_t)snprintf(buf, len, "%s|%d|%s|", id ? "zero" : "cert", mtls,
                                id ? peer_identity_pin(id) : "");
    o += (size_t)snprintf(buf + o, len - o, "%s|", hp);
    for (int i = 0; i < 3; i++) {
        o += (size_t)snprintf(buf + o, len - o, "%zu:", parts[i]->len);
        if (parts[i]->len)
            memcpy(buf + o, parts[i]->data, parts[i]->len);
        o += parts[i]->len;
    }
    cr_sha256(buf, o, key);
    free(buf);
    return 0;
}

static int port_is_zero(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    return colon && strcmp(colon + 1, "0") == 0;
}

/* The server thread does not survive fork(): a child that starts electors
 * gets a registry and an identity of its own (the parent's memory and
 * listening sockets are left as they are; they close on exec). */
static void forget_in_child(void)
{
    pthread_mutex_init(&g.life, NULL);
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    if (g.wakefd >= 0)
        close(g.wakefd); /* shared with the parent: its wake-ups are not ours */
    g.wakefd = -1;
    g.ls = NULL;
    g.conns = NULL;
    g.nconns = 0;
    g.running = g.joiner = 0;
    g.slow_sources = 0;
    pthread_mutex_init(&id_mu, NULL);
    shared_id = NULL;
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_init(void)
{
    pthread_atfork(NULL, NULL, forget_in_child);
}

int peer_server_register(const struct s3lect_config *cfg, const peer_identity *id,
                         const char *incarnation, const peer_source *src, int mtls,
                         peer_server **out, char *err, size_t errlen)
{
    pthread_once(&fork_once, fork_init);
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
    size_t il = incarnation ? strlen(incarnation) : 0;
    if (il > PEER_INC_MAX) {
        snprintf(err, errlen, "peer server: incarnation too long");
        return S3LECT_EINVAL;
    }
    uint8_t key[CR_SHA256_LEN];
    peer_server *r = calloc(1, sizeof *r);
    if (!r || setup_key(cfg, id, mtls, hp, key) != 0) {
        free(r);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    memcpy(r->inc, incarnation ? incarnation : "", il + 1);
    r->src = *src;

    pthread_mutex_lock(&g.life);
    int rc = 0;
    listener *fresh = NULL;
    if (g.wakefd < 0) {
        int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0) {
            snprintf(err, errlen, "peer server: eventfd: %s", strerror(errno));
            rc = S3LECT_EIO;
            goto out;
        }
        __atomic_store_n(&g.wakefd, fd, __ATOMIC_RELEASE);
    }
    /* Only registrations change the set of listeners (g.life), so what is
     * found here is still there below; the server thread only closes
     * listeners that have no registration, and a found one keeps its. */
    pthread_mutex_lock(&g.mu);
    listener *l = NULL;
    for (listener *x = g.ls; x; x = x->next) {
        if (x->closing || strcmp(x->addr, addr) != 0)
            continue;
        if (memcmp(x->key, key, sizeof key) == 0) {
            l = x;
            break;
        }
        if (x->explicit_port) {
            pthread_mutex_unlock(&g.mu);
            snprintf(err, errlen,
                     "peer listen address %.200s is already used in this process by an elector "
                     "with another TLS setup or health path (peer_cert, peer_key, peer_ca, mTLS, "
                     "peer_health_path): give every elector on that address the same setup, or "
                     "this one another peer_listen address",
                     addr);
            rc = S3LECT_EINVAL;
            goto out;
        }
    }
    if (il && l && lookup(l, r->inc)) {
        pthread_mutex_unlock(&g.mu);
        snprintf(err, errlen, "peer server: incarnation %s is already registered", r->inc);
        rc = S3LECT_EINVAL;
        goto out;
    }
    if (l)
        r->l = l; /* registered below without letting go of g.mu: it stays open */
    else
        pthread_mutex_unlock(&g.mu);
    if (!l) {
        fresh = calloc(1, sizeof *fresh);
        if (!fresh || !(fresh->addr = u_strdup(addr)) || !(fresh->health_path = u_strdup(hp))) {
            if (fresh)
                free(fresh->addr);
            free(fresh);
            snprintf(err, errlen, "out of memory");
            rc = S3LECT_ENOMEM;
            goto out;
        }
        fresh->lfd = -1;
        memcpy(fresh->key, key, sizeof key);
        fresh->explicit_port = !port_is_zero(addr);
        if (!(fresh->ctx = make_ctx(cfg, id, mtls, err, errlen))) {
            free_listener(fresh);
            rc = S3LECT_EINVAL;
            goto out;
        }
        if (listen_on(addr, &fresh->lfd, &fresh->port, err, errlen) != 0) {
            free_listener(fresh);
            rc = S3LECT_EIO;
            goto out;
        }
        pthread_mutex_lock(&g.mu);
        l = fresh;
    }
    if (!g.running) {
        /* The server thread runs with SIGPIPE blocked: a write to a closed
         * connection fails with EPIPE instead of killing the process. */
        sigset_t block, old;
        sigemptyset(&block);
        sigaddset(&block, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        int perr = u_thread_create(&g.thread, NULL, server_main, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (perr != 0) {
            pthread_mutex_unlock(&g.mu);
            snprintf(err, errlen, "peer server: cannot start a thread: %s", strerror(perr));
            if (fresh)
                free_listener(fresh);
            rc = S3LECT_EIO;
            goto out;
        }
        g.running = 1;
        g.joiner = 0;
    }
    if (fresh) {
        fresh->next = g.ls;
        g.ls = fresh;
    }
    r->l = l;
    r->port = l->port;
    r->next = l->regs;
    r->prev = NULL;
    if (l->regs)
        l->regs->prev = r;
    l->regs = r;
    uint32_t h = inc_hash(r->inc);
    r->hnext = l->hash[h];
    l->hash[h] = r;
    l->nregs++;
    l->nlive++;
    if (!r->src.state)
        g.slow_sources++;
    pthread_mutex_unlock(&g.mu);
    wake_server();
    *out = r;
    pthread_mutex_unlock(&g.life);
    return 0;
out:
    free(r);
    pthread_mutex_unlock(&g.life);
    return rc;
}

int peer_server_start(const struct s3lect_config *cfg, const peer_identity *id,
                      const peer_source *src, int mtls, peer_server **out, char *err, size_t errlen)
{
    return peer_server_register(cfg, id, NULL, src, mtls, out, err, errlen);
}

int peer_server_port(const peer_server *s)
{
    return s ? s->port : 0;
}

/* Under g.mu: takes r off its listener now (no callback of its source
 * runs after this). */
static void remove_reg(peer_server *r)
{
    listener *l = r->l;
    unlink_reg(l, r);
    forget_reg(l, r);
    if (!r->tomb) {
        l->nlive--;
        if (!r->src.state)
            g.slow_sources--;
    }
    if (l->nregs == 0)
        l->closing = 1;
}

void peer_server_stop_after(peer_server *s, int64_t grace_ms)
{
    if (!s)
        return;
    pthread_mutex_lock(&g.mu);
    int last = s->l->nlive <= 1;
    if (grace_ms <= 0 || last) {
        pthread_mutex_unlock(&g.mu);
        /* The listener's last elector waits out the grace itself (its
         * source still answers "not the leader"), so that the port is
         * closed when its stop returns, as with a listener of its own. */
        struct timespec ts = {(time_t)(grace_ms / 1000), (long)(grace_ms % 1000) * 1000000L};
        while (grace_ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        peer_server_stop(s);
        return;
    }
    /* From now on it answers "not the leader" without its source (which
     * its owner may free), until the server thread drops it. */
    /* The released record outlives the source: the successor may ask after. */
    peer_view v;
    memset(&v, 0, sizeof v);
    if (s->src.view && s->src.view(s->src.ctx, &v) == 0 && !v.leading) {
        s->tomb_released = v.released;
        v.released = NULL;
    }
    peer_view_clear(&v);
    s->tomb = 1;
    s->tomb_until = u_mono_ms() + grace_ms;
    s->tprev = s->l->ttail;
    s->tnext = NULL;
    if (s->l->ttail)
        s->l->ttail->tnext = s;
    else
        s->l->thead = s;
    s->l->ttail = s;
    s->l->nlive--;
    if (!s->src.state)
        g.slow_sources--;
    memset(&s->src, 0, sizeof s->src);
    pthread_mutex_unlock(&g.mu);
    wake_server();
}

void peer_server_stop(peer_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&g.life);
    pthread_mutex_lock(&g.mu);
    expire_tombs(s->l, u_mono_ms()); /* those whose grace is over go now, with s */
    remove_reg(s);
    int closing = s->l->closing;
    free(s->tomb_released);
    free(s);
    int last = 1;
    for (listener *l = g.ls; l; l = l->next)
        if (!l->closing)
            last = 0;
    int join = 0;
    if (closing && !g.running)
        cleanup(u_mono_ms()); /* no server thread (it could not start): close it here */
    if (closing && g.running) {
        /* Wait until the server thread has closed the listener (its port
         * is free again), or has exited when it was the last one. */
        if (last)
            g.joiner = 1;
        join = last;
        uint64_t target = g.iter + 1;
        wake_server();
        while (g.running && g.iter < target)
            pthread_cond_wait(&g.cv, &g.mu);
        if (last)
            while (g.running)
                pthread_cond_wait(&g.cv, &g.mu);
    }
    pthread_t t = g.thread;
    pthread_mutex_unlock(&g.mu);
    if (join) {
        pthread_join(t, NULL);
        pthread_mutex_lock(&g.mu);
        g.joiner = 0;
        pthread_mutex_unlock(&g.mu);
    }
    pthread_mutex_unlock(&g.life);
}
