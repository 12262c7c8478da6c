/* SPDX-License-Identifier: Apache-2.0 */
/* fence.c - fenced writes, the protocol without I/O (fence.h). */
#include "fence.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "util.h"

#define FN_TOKEN_PREFIX "s3lect-fence.1."
#define FN_MAX_NONCE 64

void fn_header_clear(fn_header *h)
{
    free(h->holder);
    free(h->lock);
    free(h->nonce);
    memset(h, 0, sizeof *h);
}

/* Text without control characters (C0, DEL), 1..max bytes (min 0 for the lock). */
static int fn_text_ok(const char *s, size_t min, size_t max)
{
    size_t n = s ? strlen(s) : 0;
    if (!s || n < min || n > max)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 0;
    return 1;
}

static char *fn_text(const cJSON *o, const char *name, size_t min, size_t max, int *bad)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(it) || !fn_text_ok(it->valuestring, min, max)) {
        *bad = 1;
        return NULL;
    }
    char *s = u_strdup(it->valuestring);
    if (!s)
        *bad = 1;
    return s;
}

int fn_parse(const char *data, size_t len, fn_header *h, const char **body, size_t *body_len)
{
    memset(h, 0, sizeof *h);
    size_t m = strlen(FN_MAGIC);
    if (len < m || memcmp(data, FN_MAGIC, m) != 0) {
        *body = data;
        *body_len = len;
        return FN_PLAIN;
    }
    *body = NULL;
    *body_len = 0;
    size_t lim = len < FN_MAX_HEADER ? len : FN_MAX_HEADER;
    const char *nl = memchr(data, '\n', lim);
    if (!nl)
        return FN_BAD;
    cJSON *root = cJSON_ParseWithLength(data + m, (size_t)(nl - data) - m);
    const cJSON *term = cJSON_GetObjectItemCaseSensitive(root, "term");
    const cJSON *del = cJSON_GetObjectItemCaseSensitive(root, "deleted");
    int bad = !cJSON_IsObject(root) || !cJSON_IsNumber(term) || term->valuedouble < 1 ||
              term->valuedouble > (double)FN_MAX_TERM ||
              term->valuedouble != (double)(int64_t)term->valuedouble ||
              (del && !cJSON_IsBool(del));
    if (!bad) {
        h->term = (int64_t)term->valuedouble;
        h->deleted = cJSON_IsTrue(del);
        h->holder = fn_text(root, "holder", 1, FN_MAX_HOLDER, &bad);
        h->lock = bad ? NULL : fn_text(root, "lock", 0, FN_MAX_LOCK, &bad);
        h->nonce = bad ? NULL : fn_text(root, "nonce", 1, FN_MAX_NONCE, &bad);
    }
    cJSON_Delete(root);
    if (bad) {
        fn_header_clear(h);
        return FN_BAD;
    }
    *body = nl + 1;
    *body_len = len - (size_t)(nl + 1 - data);
    return FN_FENCED;
}

char *fn_encode(const fn_header *h, const void *body, size_t len, size_t *out_len)
{
    char nonce[33];
    if (h->term < 1 || h->term > FN_MAX_TERM || !fn_text_ok(h->holder, 1, FN_MAX_HOLDER) ||
        !fn_text_ok(h->lock ? h->lock : "", 0, FN_MAX_LOCK) || cr_random_token(nonce) != 0)
        return NULL;
    /* The strings by cJSON (escaped); the term in whole digits: cJSON prints
     * a number with 15 significant digits when that reads back within its
     * tolerance, and 2^53 - 1 would come back as 9007199254740990. */
    cJSON *root = cJSON_CreateObject();
    int bad = !root || !cJSON_AddStringToObject(root, "holder", h->holder) ||
              !cJSON_AddStringToObject(root, "lock", h->lock ? h->lock : "") ||
              !cJSON_AddStringToObject(root, "nonce", nonce) ||
              (h->deleted && !cJSON_AddTrueToObject(root, "deleted"));
    char *rest = bad ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    char *json = rest && rest[0] == '{'
                     ? u_asprintf("{\"term\":%lld,%s", (long long)h->term, rest + 1)
                     : NULL;
    free(rest);
    if (!json)
        return NULL;
    size_t m = strlen(FN_MAGIC), j = strlen(json);
    char *out = NULL;
    if (m + j + 1 <= FN_MAX_HEADER && len <= SIZE_MAX - (m + j + 2))
        out = malloc(m + j + 1 + len + 1);
    if (out) {
        memcpy(out, FN_MAGIC, m);
        memcpy(out + m, json, j);
        out[m + j] = '\n';
        if (len)
            memcpy(out + m + j + 1, body, len);
        out[m + j + 1 + len] = '\0';
        *out_len = m + j + 1 + len;
    }
    free(json);
    return out;
}

int fn_may_write(int64_t term, const char *holder, const fn_header *h)
{
    if (term < 1)
        return 0;
    if (h->term < term)
        return 1;
    return h->term == term && holder && h->holder && strcmp(holder, h->holder) == 0;
}

char *fn_token_encode(int64_t term, const char *holder, const char *lock)
{
    if (term < 1 || term > FN_MAX_TERM || !fn_text_ok(holder, 1, FN_MAX_HOLDER) ||
        !fn_text_ok(lock, 0, FN_MAX_LOCK))
        return NULL;
    char *h = u_base64_dup(holder, strlen(holder), U_B64_URL | U_B64_NOPAD);
    char *l = u_base64_dup(lock, strlen(lock), U_B64_URL | U_B64_NOPAD);
    char *out = h && l ? u_asprintf(FN_TOKEN_PREFIX "%lld.%s.%s", (long long)term, h, l) : NULL;
    free(h);
    free(l);
    return out;
}

/* Decodes base64url text s[0..n) into an allocated string of at most max
 * bytes without control characters (min 1 unless allow_empty). */
static char *fn_token_text(const char *s, size_t n, size_t max, int allow_empty)
{
    if (n > 4 * (max / 3 + 1))
        return NULL;
    uint8_t *buf = malloc(U_UNBASE64_MAX(n) + 1);
    long got = buf ? u_unbase64(s, n, U_B64_LENIENT, buf) : -1;
    if (got < 0 || memchr(buf, '\0', (size_t)got)) {
        free(buf);
        return NULL;
    }
    buf[got] = '\0';
    if (!fn_text_ok((char *)buf, allow_empty ? 0 : 1, max)) {
        free(buf);
        return NULL;
    }
    return (char *)buf;
}

int fn_token_parse(const char *token, int64_t *term, char **holder, char **lock)
{
    size_t p = strlen(FN_TOKEN_PREFIX);
    if (!token || strncmp(token, FN_TOKEN_PREFIX, p) != 0)
        return -1;
    const char *t = token + p, *d1 = strchr(t, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    if (!d1 || !d2 || strchr(d2 + 1, '.') || d1 == t || d1 - t > 16)
        return -1;
    int64_t v = 0;
    for (const char *c = t; c < d1; c++) {
        if (*c < '0' || *c > '9')
            return -1;
        v = v * 10 + (*c - '0');
    }
    if (v < 1 || v > FN_MAX_TERM)
        return -1;
    char *h = fn_token_text(d1 + 1, (size_t)(d2 - d1 - 1), FN_MAX_HOLDER, 0);
    char *l = h ? fn_token_text(d2 + 1, strlen(d2 + 1), FN_MAX_LOCK, 1) : NULL;
    if (!h || !l) {
        free(h);
        free(l);
        return -1;
    }
    *term = v;
    *holder = h;
    *lock = l;
    return 0;
}
