/* SPDX-License-Identifier: Apache-2.0 */
/* crypto.c - SHA-256, HMAC-SHA256, random bytes and RS256 (JWTs)
 * on the OpenSSL API subset that BoringSSL shares (one-shot SHA256(),
 * HMAC(), RAND_bytes(), PEM_read_bio_PrivateKey, EVP_DigestSign*). */
#include "crypto.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

void cr_sha256(const void *data, size_t len, uint8_t out[CR_SHA256_LEN])
{
    SHA256((const unsigned char *)data, len, out);
}

void cr_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                    uint8_t out[CR_SHA256_LEN])
{
    unsigned int outlen = CR_SHA256_LEN;
    HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)data, len, out, &outlen);
}

int cr_random(void *buf, size_t len)
{
    return RAND_bytes((unsigned char *)buf, (int)len) == 1 ? 0 : -1;
}

void cr_thread_end(void)
{
#if !defined(OPENSSL_IS_BORINGSSL)
    OPENSSL_thread_stop();
#endif
}

void cr_hex(const uint8_t *in, size_t len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = hex[in[i] >> 4];
        out[2 * i + 1] = hex[in[i] & 15];
    }
    out[2 * len] = '\0';
}

/* ---- RS256 and JWTs (GCP service accounts, Azure client certificates) ---- */

int cr_rs256_sign(const char *pem, const void *data, size_t len, uint8_t **sig, size_t *siglen,
                  char *err, size_t errlen)
{
    *sig = NULL;
    *siglen = 0;
    BIO *bio = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    ERR_clear_error();
    if (!key) {
        snprintf(err, errlen,
                 "the private key is not an unencrypted PEM private key (BEGIN PRIVATE KEY)");
        return -1;
    }
    if (EVP_PKEY_id(key) != EVP_PKEY_RSA) {
        EVP_PKEY_free(key);
        snprintf(err, errlen, "the private key is not an RSA key (RS256 needs one)");
        return -1;
    }
    int rc = -1;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    size_t n = 0;
    uint8_t *buf = NULL;
    if (ctx && EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
        EVP_DigestSignUpdate(ctx, data, len) == 1 && EVP_DigestSignFinal(ctx, NULL, &n) == 1 &&
        (buf = malloc(n ? n : 1)) != NULL && EVP_DigestSignFinal(ctx, buf, &n) == 1) {
        *sig = buf;
        *siglen = n;
        buf = NULL;
        rc = 0;
    } else {
        snprintf(err, errlen, "cannot sign with the private key (RS256)");
    }
    free(buf);
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(key);
    ERR_clear_error();
    return rc;
}

char *cr_jwt_rs256(const char *header_json, const char *claims_json, const char *pem, char *err,
                   size_t errlen)
{
    enum { JWT = U_B64_URL | U_B64_NOPAD };
    char *h = u_base64_dup(header_json, strlen(header_json), JWT);
    char *c = u_base64_dup(claims_json, strlen(claims_json), JWT);
    char *input = h && c ? u_asprintf("%s.%s", h, c) : NULL, *sig64 = NULL, *jwt = NULL;
    uint8_t *sig = NULL;
    size_t siglen = 0;
    if (!input)
        goto oom;
    if (cr_rs256_sign(pem, input, strlen(input), &sig, &siglen, err, errlen) != 0)
        goto out;
    sig64 = u_base64_dup(sig, siglen, JWT);
    jwt = sig64 ? u_asprintf("%s.%s", input, sig64) : NULL;
    if (jwt)
        goto out;
oom:
    snprintf(err, errlen, "out of memory");
out:
    free(h);
    free(c);
    free(input);
    free(sig);
    free(sig64);
    return jwt;
}

int cr_random_token(char out[33])
{
    uint8_t b[16];
    if (cr_random(b, sizeof b) != 0)
        return -1;
    cr_hex(b, sizeof b, out);
    return 0;
}
