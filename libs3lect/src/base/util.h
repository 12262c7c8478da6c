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
/* Standard base64 (RFC 4648, with '=' padding) of len bytes into out, which
 * holds at least 4 * ((len + 2) / 3) + 1 bytes. Returns the text's length. */
size_t u_base64(const uint8_t *in, size_t len, char *out);
/* Decodes len characters of padded standard base64 into out (at least
 * len / 4 * 3 bytes). Returns the length, or -1 if in is not base64. */
long u_unbase64(const char *in, size_t len, uint8_t *out);

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
