/* SPDX-License-Identifier: Apache-2.0 */
/* test_base64.c - the library's base64: what each caller's decoder accepts
 * and refuses, pinned (a token, a JWT's claims, an etcd value, a Route 53
 * TXT record and an Azure account key are decoded with it: accepting more
 * or less than before is a behaviour change), and what the encoder writes
 * in each alphabet, with and without padding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "util.h"

/* The strict decoder (etcd values, Route 53 records, Azure account keys):
 * standard alphabet, '=' padding required. Returns the length or -1. */
static long strict_dec(const char *in, size_t len, uint8_t *out)
{
    return u_unbase64(in, len, U_B64_STRICT, out);
}

/* The lenient decoder (JWT parts: Azure's token claims): both alphabets,
 * padding optional. Returns the length or -1. */
static long lenient_dec(const char *in, size_t len, uint8_t *out)
{
    return u_unbase64(in, len, U_B64_LENIENT, out);
}

/* An expected outcome: NULL is "refused", else the decoded bytes (len). */
typedef struct {
    const char *bytes;
    size_t len;
} want;
#define NO                                                                                         \
    {                                                                                              \
        NULL, 0                                                                                    \
    }
#define YES(s)                                                                                     \
    {                                                                                              \
        s, sizeof s - 1                                                                            \
    }

static const struct {
    const char *in;
    size_t inlen; /* 0: strlen(in) */
    want strict, lenient;
} cases[] = {
    {"", 0, YES(""), YES("")},
    {"Zg==", 0, YES("f"), YES("f")},
    {"Zm8=", 0, YES("fo"), YES("fo")},
    {"Zm9v", 0, YES("foo"), YES("foo")},
    {"Zm9vYg==", 0, YES("foob"), YES("foob")},
    {"Zm9vYmE=", 0, YES("fooba"), YES("fooba")},
    {"Zm9vYmFy", 0, YES("foobar"), YES("foobar")},
    /* padding left out or overdone: only the lenient one takes it */
    {"Zg", 0, NO, YES("f")},
    {"Zg=", 0, NO, YES("f")},
    {"Zg===", 0, NO, YES("f")},
    {"Zm8", 0, NO, YES("fo")},
    {"Zm9vYg", 0, NO, YES("foob")},
    {"====", 0, NO, YES("")},
    {"=", 0, NO, YES("")},
    /* non-zero bits after the last byte are ignored by both */
    {"Zm9=", 0, YES("fo"), YES("fo")},
    {"Zh==", 0, YES("f"), YES("f")},
    /* the two alphabets */
    {"+/8=", 0, YES("\xfb\xff"), YES("\xfb\xff")},
    {"-_8=", 0, NO, YES("\xfb\xff")},
    {"-_8", 0, NO, YES("\xfb\xff")},
    {"+_8=", 0, NO, YES("\xfb\xff")},
    {"-/8", 0, NO, YES("\xfb\xff")},
    {"abc", 0, NO, YES("\x69\xb7")},
    {"+w==", 0, YES("\xfb"), YES("\xfb")},
    /* refused by both */
    {"Zm9vY", 0, NO, NO},
    {"Zm9vY===", 0, NO, NO},
    {"Zm9v!", 0, NO, NO},
    {"ab=c", 0, NO, NO},
    {"a===", 0, NO, NO},
    {"=abc", 0, NO, NO},
    {"YQ==YQ==", 0, NO, NO},
    {"Zg=a", 0, NO, NO},
    {" Zg=", 0, NO, NO},
    {"Zg==\n", 0, NO, NO},
    {"Zm9v\nYmFy", 0, NO, NO},
    {"Zm.v", 0, NO, NO},
    {"Z\0g=", 4, NO, NO},
    {"Zm9v\0", 5, NO, NO},
};

static void check_dec(const char *which, long (*dec)(const char *, size_t, uint8_t *),
                      const char *in, size_t len, want w)
{
    uint8_t out[64];
    memset(out, 0xaa, sizeof out);
    long n = dec(in, len, out);
    if (!w.bytes)
        CHECK(n == -1, "%s refuses '%.*s' (%zu characters): %ld", which, (int)len, in, len, n);
    else
        CHECK(n == (long)w.len && memcmp(out, w.bytes, w.len) == 0,
              "%s decodes '%.*s' to %zu bytes: %ld", which, (int)len, in, w.len, n);
}

static void acceptance(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = cases[i].inlen ? cases[i].inlen : strlen(cases[i].in);
        check_dec("strict", strict_dec, cases[i].in, len, cases[i].strict);
        check_dec("lenient", lenient_dec, cases[i].in, len, cases[i].lenient);
    }
}

/* Every byte value through both decoders, from the encoder's text. */
static void round_trip(void)
{
    uint8_t in[256], dec[256 / 3 * 3 + 6];
    char text[4 * ((sizeof in + 2) / 3) + 1];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (uint8_t)(255 - i);
    for (size_t n = 0; n <= sizeof in; n += n < 8 ? 1 : 37) {
        size_t l = u_base64(in, n, 0, text);
        CHECK(l == 4 * ((n + 2) / 3) && strlen(text) == l, "encoded length of %zu bytes", n);
        CHECK(strict_dec(text, l, dec) == (long)n && memcmp(dec, in, n) == 0, "strict %zu", n);
        CHECK(lenient_dec(text, l, dec) == (long)n && memcmp(dec, in, n) == 0, "lenient %zu", n);
        char *url = u_base64_dup(in, n, U_B64_URL | U_B64_NOPAD);
        CHECK(url && strlen(url) == (4 * n + 2) / 3 && !strpbrk(url, "+/="),
              "url text of %zu bytes", n);
        CHECK(url && lenient_dec(url, strlen(url), dec) == (long)n && memcmp(dec, in, n) == 0,
              "lenient url %zu", n);
        free(url);
    }
}

#define E(in, std, url)                                                                            \
    {                                                                                              \
        in, std, url, sizeof in - 1                                                                \
    }
static void encoder(void)
{
    static const struct {
        const char *in, *std, *url;
        size_t len;
    } v[] = {E("", "", ""),
             E("f", "Zg==", "Zg"),
             E("fo", "Zm8=", "Zm8"),
             E("foo", "Zm9v", "Zm9v"),
             E("foob", "Zm9vYg==", "Zm9vYg"),
             E("fooba", "Zm9vYmE=", "Zm9vYmE"),
             E("foobar", "Zm9vYmFy", "Zm9vYmFy"),
             E("\xfb", "+w==", "-w"),
             E("\xfb\xff", "+/8=", "-_8"),
             E("\xfb\xff\x00\x61\x62", "+/8AYWI=", "-_8AYWI")};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char out[16];
        size_t n = v[i].len;
        size_t l = u_base64(v[i].in, n, 0, out);
        CHECK(l == strlen(v[i].std) && strcmp(out, v[i].std) == 0, "base64 %zu bytes: %s", n, out);
        char *u = u_base64_dup(v[i].in, n, U_B64_URL | U_B64_NOPAD);
        CHECK(u && strcmp(u, v[i].url) == 0, "base64url %zu bytes: %s", n, u ? u : "NULL");
        CHECK(u_base64_len(n, U_B64_URL | U_B64_NOPAD) == strlen(v[i].url), "length %zu", n);
        free(u);
        /* the other two: the URL alphabet padded, the standard one unpadded */
        char want[16];
        size_t ul = strlen(v[i].url);
        snprintf(want, sizeof want, "%s%.*s", v[i].url, (int)(strlen(v[i].std) - ul), "==");
        l = u_base64(v[i].in, n, U_B64_URL, out);
        CHECK(l == u_base64_len(n, U_B64_URL) && strcmp(out, want) == 0, "url padded: %s", out);
        u = u_base64_dup(v[i].in, n, U_B64_NOPAD);
        CHECK(u && strlen(u) == ul && strncmp(u, v[i].std, ul) == 0, "std unpadded: %s",
              u ? u : "NULL");
        CHECK(u_base64_len(n, U_B64_NOPAD) == ul && u_base64_len(n, 0) == strlen(v[i].std),
              "lengths of %zu bytes", n);
        free(u);
    }
}

int main(void)
{
    acceptance();
    round_trip();
    encoder();
    return t_done("base64");
}
