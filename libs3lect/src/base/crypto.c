/* SPDX-License-Identifier: Apache-2.0 */
/* crypto.c - SHA-256, HMAC-SHA256 and random bytes on the OpenSSL API subset
 * that BoringSSL shares (one-shot SHA256(), HMAC(), RAND_bytes()). */
#include "crypto.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
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
