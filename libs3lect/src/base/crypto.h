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

#endif
