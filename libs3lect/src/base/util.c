/* SPDX-License-Identifier: Apache-2.0 */
#include "util.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

char *u_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

int u_setstr(char **dst, const char *src)
{
    char *copy = NULL;
    if (src && !(copy = u_strdup(src)))
        return -1;
    free(*dst);
    *dst = copy;
    return 0;
}

size_t u_copyout(const char *src, char *buf, size_t buflen)
{
    if (!src)
        src = "";
    size_t n = strlen(src);
    if (buf && buflen > 0) {
        size_t c = n < buflen - 1 ? n : buflen - 1;
        memcpy(buf, src, c);
        buf[c] = '\0';
    }
    return n;
}

char *u_vasprintf(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return NULL;
    char *p = malloc((size_t)n + 1);
    if (p)
        vsnprintf(p, (size_t)n + 1, fmt, ap);
    return p;
}

char *u_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = u_vasprintf(fmt, ap);
    va_end(ap);
    return p;
}

int u_streq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

size_t u_base64_len(size_t len, int flags)
{
    return flags & U_B64_NOPAD ? (4 * len + 2) / 3 : 4 * ((len + 2) / 3);
}

size_t u_base64(const void *data, size_t len, int flags, char *out)
{
    static const char std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static const char url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const char *abc = flags & U_B64_URL ? url : std;
    const uint8_t *in = data;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        out[o++] = abc[(v >> 18) & 63];
        out[o++] = abc[(v >> 12) & 63];
        if (i + 1 < len)
            out[o++] = abc[(v >> 6) & 63];
        else if (!(flags & U_B64_NOPAD))
            out[o++] = '=';
        if (i + 2 < len)
            out[o++] = abc[v & 63];
        else if (!(flags & U_B64_NOPAD))
            out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

char *u_base64_dup(const void *data, size_t len, int flags)
{
    char *out = malloc(u_base64_len(len, flags) + 1);
    if (out)
        u_base64(data, len, flags, out);
    return out;
}

/* The value of a base64 character: the standard alphabet's, and with url
 * also the URL alphabet's ('-' and '_' for '+' and '/'); -1 for any other. */
static int b64val(char c, int url)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || (url && c == '-'))
        return 62;
    if (c == '/' || (url && c == '_'))
        return 63;
    return -1;
}

long u_unbase64(const char *in, size_t len, u_b64_mode mode, uint8_t *out)
{
    size_t n = len;
    if (mode == U_B64_STRICT) {
        /* whole quanta; one or two '=' may end the last one */
        if (len % 4 != 0)
            return -1;
        for (int pad = 0; pad < 2 && n > 0 && in[n - 1] == '='; pad++)
            n--;
    } else {
        while (n > 0 && in[n - 1] == '=')
            n--;
    }
    if (n % 4 == 1)
        return -1;
    long o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64val(in[i], mode == U_B64_LENIENT);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return o;
}

int u_hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Every lease and deadline is computed on CLOCK_BOOTTIME: unlike
 * CLOCK_MONOTONIC it keeps counting while the machine is suspended, so a
 * leader whose host slept past its deadline is not leader when it wakes.
 * Neither clock is stepped by settimeofday or NTP. */
static int64_t suspended_ms; /* test seam: time "slept" on top of the boot clock */

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t u_mono_ms(void)
{
    return clock_ms(CLOCK_BOOTTIME) + __atomic_load_n(&suspended_ms, __ATOMIC_RELAXED);
}

void u_test_suspend(int64_t ms)
{
    __atomic_add_fetch(&suspended_ms, ms, __ATOMIC_RELAXED);
}

struct timespec u_cond_deadline(int64_t mono_ms, int64_t cap_ms)
{
    int64_t now = u_mono_ms();
    int64_t left = mono_ms - now;
    if (left < 0)
        left = 0;
    if (cap_ms > 0 && left > cap_ms)
        left = cap_ms;
    int64_t at = clock_ms(CLOCK_MONOTONIC);
    if (left > INT64_MAX / 4 - at)
        left = INT64_MAX / 4 - at; /* "for ever" */
    at += left;
    struct timespec ts = {(time_t)(at / 1000), (long)(at % 1000) * 1000000L};
    return ts;
}

int64_t u_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

void u_format_rfc3339(int64_t wall_ms, char *out, size_t outlen)
{
    int64_t secs = wall_ms >= 0 ? wall_ms / 1000 : (wall_ms - 999) / 1000;
    int ms = (int)(wall_ms - secs * 1000);
    int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
    int64_t sod = secs - days * 86400;
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    snprintf(out, outlen, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)y, m, d,
             (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60), ms);
}

static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

int u_parse_rfc3339(const char *s, int64_t *wall_ms)
{
    int Y, M, D, h, mi, se, ms = 0;
    const char *p = s;
    if (!s || digits(&p, 4, &Y) || *p++ != '-' || digits(&p, 2, &M) || *p++ != '-' ||
        digits(&p, 2, &D) || (*p != 'T' && *p != 't' && *p != ' '))
        return -1;
    p++;
    if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' || digits(&p, 2, &se))
        return -1;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || mi > 59 || se > 60)
        return -1;
    if (*p == '.') {
        p++;
        int n = 0, scale = 100;
        while (*p >= '0' && *p <= '9') {
            if (n < 3)
                ms += (*p - '0') * scale;
            scale /= 10;
            p++;
            n++;
        }
        if (n == 0)
            return -1;
    }
    int off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1, oh, om;
        if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om) || oh > 23 || om > 59)
            return -1;
        off = sign * (oh * 60 + om);
    } else {
        return -1;
    }
    if (*p)
        return -1;
    int64_t days = days_from_civil(Y, M, D);
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + se - (int64_t)off * 60;
    *wall_ms = secs * 1000 + ms;
    return 0;
}

void u_rng_seed(u_rng *r, uint64_t seed)
{
    r->s = seed ? seed : 0x9E3779B97F4A7C15ULL;
}

uint64_t u_rng_next(u_rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

int64_t u_jitter(u_rng *r, int64_t v, double frac)
{
    double u = (double)(u_rng_next(r) >> 11) / (double)(1ULL << 53); /* [0,1) */
    double f = 1.0 - frac + 2.0 * frac * u;
    return (int64_t)((double)v * f);
}

void u_wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

void u_wipe_free(char *s)
{
    if (s) {
        u_wipe(s, strlen(s));
        free(s);
    }
}

char *u_home_dir(void)
{
    const char *h = getenv("HOME");
    if (h && *h)
        return strdup(h);
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &res) == 0 && res && res->pw_dir)
        return strdup(res->pw_dir);
    return NULL;
}

size_t u_pct_encode_into(const char *in, size_t len, int keep_slash, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    char *p = out;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
            *p++ = (char)c;
        } else {
            *p++ = '%';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    *p = '\0';
    return (size_t)(p - out);
}

char *u_pct_encode(const char *in, size_t len, int keep_slash)
{
    char *out = malloc(3 * len + 1);
    if (out)
        u_pct_encode_into(in, len, keep_slash, out);
    return out;
}
