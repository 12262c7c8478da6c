/* SPDX-License-Identifier: Apache-2.0 */
/* test_crypto_jwt.c - RS256 JWTs (base/crypto.c): a JWT
 * signed with a freshly generated RSA key verifies with OpenSSL against its
 * public key; what is not an RSA private key is refused with a message that
 * holds none of the key's text. */
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "testutil.h"
#include "util.h"

static char *pem_of(EVP_PKEY *k, int private_key)
{
    BIO *b = BIO_new(BIO_s_mem());
    if (private_key)
        PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
    else
        PEM_write_bio_PUBKEY(b, k);
    char *data;
    long n = BIO_get_mem_data(b, &data);
    char *s = malloc((size_t)n + 1);
    memcpy(s, data, (size_t)n);
    s[n] = '\0';
    BIO_free(b);
    return s;
}

static EVP_PKEY *keygen(int type)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(type, NULL);
    EVP_PKEY *k = NULL;
    if (!c || EVP_PKEY_keygen_init(c) != 1)
        return NULL;
    if (type == EVP_PKEY_RSA)
        EVP_PKEY_CTX_set_rsa_keygen_bits(c, 2048);
    else
        EVP_PKEY_CTX_set_ec_paramgen_curve_nid(c, NID_X9_62_prime256v1);
    if (EVP_PKEY_keygen(c, &k) != 1)
        k = NULL;
    EVP_PKEY_CTX_free(c);
    return k;
}

static char *part(const char *jwt, int n)
{
    const char *p = jwt;
    for (int i = 0; i < n; i++)
        p = strchr(p, '.') + 1;
    size_t len = strcspn(p, ".");
    char *s = malloc(U_UNBASE64_MAX(len) + 1);
    long l = u_unbase64(p, len, U_B64_LENIENT, (uint8_t *)s);
    if (l < 0) {
        free(s);
        return NULL;
    }
    s[l] = '\0';
    return s;
}

static void t_jwt(void)
{
    EVP_PKEY *k = keygen(EVP_PKEY_RSA);
    CHECK(k != NULL, "RSA key generated");
    if (!k)
        return;
    char *priv = pem_of(k, 1), *pub = pem_of(k, 0);
    const char *hdr = "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"k1\"}";
    const char *claims = "{\"iss\":\"sa@p.iam.gserviceaccount.com\",\"exp\":2}";
    char err[256] = "";
    char *jwt = cr_jwt_rs256(hdr, claims, priv, err, sizeof err);
    CHECK(jwt != NULL, "signed: %s", err);
    if (jwt) {
        char *h = part(jwt, 0), *c = part(jwt, 1);
        CHECK(h && strcmp(h, hdr) == 0, "header round-trips: %s", h ? h : "NULL");
        CHECK(c && strcmp(c, claims) == 0, "claims round-trip");
        free(h);
        free(c);
        /* Verify the signature with OpenSSL and the public key. */
        const char *dot2 = strrchr(jwt, '.');
        size_t s64len = strlen(dot2 + 1);
        uint8_t *sig = malloc(U_UNBASE64_MAX(s64len));
        long n = u_unbase64(dot2 + 1, s64len, U_B64_LENIENT, sig);
        CHECK(n == 256 && !strpbrk(dot2 + 1, "+/="), "256-byte signature, base64url unpadded");
        size_t siglen = n > 0 ? (size_t)n : 0;
        BIO *b = BIO_new_mem_buf(pub, -1);
        EVP_PKEY *pk = PEM_read_bio_PUBKEY(b, NULL, NULL, NULL);
        BIO_free(b);
        EVP_MD_CTX *m = EVP_MD_CTX_new();
        int ok = EVP_DigestVerifyInit(m, NULL, EVP_sha256(), NULL, pk) == 1 &&
                 EVP_DigestVerifyUpdate(m, jwt, (size_t)(dot2 - jwt)) == 1 &&
                 EVP_DigestVerifyFinal(m, sig, siglen) == 1;
        CHECK(ok, "the signature verifies with the public key");
        /* And not over other data. */
        EVP_MD_CTX_free(m);
        m = EVP_MD_CTX_new();
        ok = EVP_DigestVerifyInit(m, NULL, EVP_sha256(), NULL, pk) == 1 &&
             EVP_DigestVerifyUpdate(m, jwt, (size_t)(dot2 - jwt) - 1) == 1 &&
             EVP_DigestVerifyFinal(m, sig, siglen) == 1;
        CHECK(!ok, "the signature does not verify other data");
        EVP_MD_CTX_free(m);
        EVP_PKEY_free(pk);
        free(sig);
        free(jwt);
    }
    /* A public key, an EC key, garbage: refused, and the message shows no key text. */
    EVP_PKEY *ec = keygen(EVP_PKEY_EC);
    char *ecpem = ec ? pem_of(ec, 1) : NULL;
    const char *bad[] = {pub, ecpem ? ecpem : "x", "-----BEGIN PRIVATE KEY-----\nAAAA\n", ""};
    for (size_t i = 0; i < 4; i++) {
        err[0] = '\0';
        char *j = cr_jwt_rs256(hdr, claims, bad[i], err, sizeof err);
        CHECK(j == NULL && err[0], "bad key %zu refused", i);
        CHECK(!strstr(err, "AAAA") && !strstr(err, "MII"), "no key text in '%s'", err);
        free(j);
    }
    free(ecpem);
    EVP_PKEY_free(ec);
    free(priv);
    free(pub);
    EVP_PKEY_free(k);
}

int main(void)
{
    t_jwt();
    return t_done("crypto_jwt");
}
