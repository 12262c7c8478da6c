/* SPDX-License-Identifier: Apache-2.0 */
/* util.h - small helpers shared by the layers: strings, clocks, buffers. */
#ifndef S3LECT_UTIL_H
#define S3LECT_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* strdup that accepts NULL (returns NULL). */
char *u_strdup(const char *s);
/* Replaces *dst with a copy of src (NULL allowed). Returns 0 or -1 on OOM. */
int u_setstr(char **dst, const char *src);
/* Copies src into buf with snprintf semantics; returns strlen(src). */
size_t u_copyout(const char *src, char *buf, size_t buflen);
/* Formats into an allocated string; NULL on OOM. */
char *u_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *u_vasprintf(const char *fmt, va_list ap);
/* 1 if a and b are equal strings (both NULL counts as equal, NULL == ""). */
int u_streq(const char *a, const char *b);

/* Value of a hex digit, or -1. */
int u_hexval(unsigned char c);

/* Zeroes n bytes at p in a way the compiler keeps (secrets). */
void u_wipe(void *p, size_t n);
/* Wipes the string s and frees it (NULL: nothing). */
void u_wipe_free(char *s);
/* The home directory (HOME, else the password database), allocated; NULL if
 * none. */
char *u_home_dir(void);

/* Percent-encodes in[0..len) (RFC 3986): every byte but the unreserved
 * characters (A-Z a-z 0-9 - . _ ~) and, with keep_slash, '/' becomes %XX
 * (upper-case hex). u_pct_encode_into writes into out, which holds at
 * least 3 * len + 1 bytes, and returns the length written; u_pct_encode
 * allocates (NULL when out of memory). The one encoder of the library:
 * SigV4's canonical URI and query, object names in URLs, form bodies. */
size_t u_pct_encode_into(const char *in, size_t len, int keep_slash, char *out);
char *u_pct_encode(const char *in, size_t len, int keep_slash);
/* Base64 (RFC 4648), the one encoder and decoder of the library. flags:
 * U_B64_URL writes the URL alphabet ('-' and '_' for '+' and '/'),
 * U_B64_NOPAD leaves out the '=' padding (JWTs are both). u_base64_len is
 * the text's length for len bytes; u_base64 writes the text of len bytes
 * (NUL-ended) into out, which holds u_base64_len(len, flags) + 1 bytes,
 * and returns its length; u_base64_dup allocates it (NULL when out of
 * memory). */
#define U_B64_URL 1
#define U_B64_NOPAD 2
size_t u_base64_len(size_t len, int flags);
size_t u_base64(const void *in, size_t len, int flags, char *out);
char *u_base64_dup(const void *in, size_t len, int flags);
/* How much a decoder accepts (security-relevant: pinned by
 * tests/c/test_base64.c).
 *   U_B64_STRICT: the standard alphabet, whole quanta of 4 characters, the
 *     last one ending in at most two '=' (Azure account keys, etcd values,
 *     Route 53 records: text the library or a service wrote padded).
 *   U_B64_LENIENT: either alphabet (both may mix), '=' padding optional and
 *     any number of it at the end (JWT parts).
 * Both refuse any other character (spaces, newlines, NUL, '=' inside) and a
 * length that leaves a lone character, and ignore the unused bits of the
 * last character. */
typedef enum { U_B64_STRICT, U_B64_LENIENT } u_b64_mode;
/* Decodes len characters into out (at least U_UNBASE64_MAX(len) bytes).
 * Returns the length, or -1 if in is not base64 for mode. */
#define U_UNBASE64_MAX(len) ((len) / 4 * 3 + 2)
long u_unbase64(const char *in, size_t len, u_b64_mode mode, uint8_t *out);

/* Clocks in milliseconds. u_mono_ms is CLOCK_BOOTTIME (never stepped, and it
 * counts suspend): every lease and deadline uses it. u_wall_ms may step. */
int64_t u_mono_ms(void);
int64_t u_wall_ms(void);
/* Test seam: the boot clock jumps forward by ms while CLOCK_MONOTONIC does
 * not, exactly as after a suspend of that length. */
void u_test_suspend(int64_t ms);
/* Absolute CLOCK_MONOTONIC time (for pthread_cond_timedwait on a condition
 * variable with that clock) at which the u_mono_ms deadline falls, waiting at
 * most cap_ms (if > 0). Callers re-read u_mono_ms after each wake: a suspend
 * during the wait makes it end late by the boot clock. */
struct timespec u_cond_deadline(int64_t mono_ms, int64_t cap_ms);

/* Formats wall-clock ms as RFC 3339 UTC with milliseconds into out (>= 32 bytes). */
void u_format_rfc3339(int64_t wall_ms, char *out, size_t outlen);
/* Parses RFC 3339 (any fraction digits, Z or +hh:mm offset). Returns 0 and ms, or -1. */
int u_parse_rfc3339(const char *s, int64_t *wall_ms);

/* Small deterministic PRNG (xorshift64*), used for jitter only. */
typedef struct u_rng {
    uint64_t s;
} u_rng;
void u_rng_seed(u_rng *r, uint64_t seed);
uint64_t u_rng_next(u_rng *r);
/* Returns v scaled by a uniform factor in [1 - frac, 1 + frac]. */
int64_t u_jitter(u_rng *r, int64_t v, double frac);

#endif
