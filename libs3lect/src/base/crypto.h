/* SPDX-License-Identifier: Apache-2.0 */
/* crypto.h - the only door to the crypto library (OpenSSL API subset that
 * BoringSSL also provides). Nothing else includes <openssl/...>. */
#ifndef S3LECT_CRYPTO_H
#define S3LECT_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#define CR_SHA256_LEN 32

void cr_sha256(const void *data, size_t len, uint8_t out[CR_SHA256_LEN]);
void cr_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                    uint8_t out[CR_SHA256_LEN]);
/* Fills buf with cryptographically random bytes. Returns 0 or -1. */
int cr_random(void *buf, size_t len);
/* Frees the calling thread's TLS-library state (OpenSSL's per-thread random
 * generator); a thread that used cr_random calls it before it reports its
 * end, so nothing of it is left when the process exits right after. */
void cr_thread_end(void);
/* Lower-case hex of len bytes into out (2*len+1 bytes). */
void cr_hex(const uint8_t *in, size_t len, char *out);
/* A random token: 32 lower-case hex characters (16 random bytes), for
 * version attributes and scratch names. 0, or -1 without randomness. */
int cr_random_token(char out[33]);

/* Signs data with RSASSA-PKCS1-v1_5 SHA-256 (RS256) with the RSA private key
 * in pem (PKCS#8 "BEGIN PRIVATE KEY" or PKCS#1 "BEGIN RSA PRIVATE KEY",
 * unencrypted). *sig receives the allocated signature. Returns 0, or -1
 * with err saying what is wrong with the key (never any of its bytes). */
int cr_rs256_sign(const char *pem, const void *data, size_t len, uint8_t **sig, size_t *siglen,
                  char *err, size_t errlen);

/* A JWT signed with RS256: base64url(header_json) "." base64url(claims_json)
 * "." base64url(signature) (URL alphabet, no padding), allocated (a bearer
 * secret: wipe it). The header is the caller's ({"alg":"RS256","typ":"JWT","kid":...}; Azure adds
 * "x5t"). Returns NULL with err set on failure. */
char *cr_jwt_rs256(const char *header_json, const char *claims_json, const char *pem, char *err,
                   size_t errlen);

#endif
