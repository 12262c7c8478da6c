/* SPDX-License-Identifier: Apache-2.0 */
/* peer_tls.c - the leadership endpoint's TLS: certificate, key and CA
 * material, the server context, and the zero-config identity (a P-256 key
 * and a self-signed certificate made once per process). The only file of
 * the library that uses the SSL API directly (peer_server.c says why). */
#include "peer_server_int.h"

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

/* In a child after fork (peer_server.c's atfork handler): the parent's
 * shared identity is not ours, and its lock may have been held. */
void ps_identity_forget_in_child(void)
{
    pthread_mutex_init(&id_mu, NULL);
    shared_id = NULL;
}

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
        u_base64(sum, sizeof sum, 0, pin);
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

SSL_CTX *ps_make_ctx(const struct s3lect_config *cfg, const peer_identity *id, int mtls, char *err,
                     size_t errlen)
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
