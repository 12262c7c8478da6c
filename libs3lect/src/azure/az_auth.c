/* SPDX-License-Identifier: Apache-2.0 */
/* az_auth.c - the Azure Blob store's explicit credentials and the Shared
 * Key signature (az_auth.h). */
#include "az_auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "crypto.h"
#include "s3lect.h"
#include "util.h"

void az_creds_clear(az_creds *c)
{
    if (c->key) {
        volatile uint8_t *p = c->key;
        for (size_t i = 0; i < c->key_len; i++)
            p[i] = 0;
        free(c->key);
    }
    u_wipe_free(c->sas);
    free(c->blob_endpoint);
    memset(c, 0, sizeof *c);
}

static int set_key(az_creds *c, const char *b64, const char *source, char *err, size_t errlen)
{
    size_t n = strlen(b64);
    c->key = malloc(U_UNBASE64_MAX(n));
    if (!c->key) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    long len = (n % 4 == 0 && n > 0) ? u_unbase64(b64, n, U_B64_STRICT, c->key) : -1;
    if (len <= 0) {
        snprintf(err, errlen,
                 "the Azure storage account key from %s is not base64: give the key as the "
                 "portal or 'az storage account keys list' shows it",
                 source);
        return S3LECT_EINVAL;
    }
    c->key_len = (size_t)len;
    c->kind = AZ_CRED_SHARED_KEY;
    snprintf(c->source, sizeof c->source, "%s", source);
    return 0;
}

static int set_sas(az_creds *c, const char *sas, const char *source, char *err, size_t errlen)
{
    while (*sas == '?')
        sas++;
    if (!*sas || strpbrk(sas, " \t\r\n#") || !strstr(sas, "sig=")) {
        snprintf(err, errlen,
                 "the SAS token from %s is not a SAS token (a query string with sig=...): "
                 "give it as 'az storage container generate-sas' prints it",
                 source);
        return S3LECT_EINVAL;
    }
    if (!(c->sas = u_strdup(sas))) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    c->kind = AZ_CRED_SAS;
    snprintf(c->source, sizeof c->source, "%s", source);
    return 0;
}

/* The value of name in a connection string ("A=b;C=d"), allocated, or NULL
 * (*oom set when out of memory). */
static char *cs_get(const char *cs, const char *name, int *oom)
{
    size_t nl = strlen(name);
    for (const char *p = cs; *p;) {
        size_t len = strcspn(p, ";");
        const char *eq = memchr(p, '=', len);
        while (*p == ' ')
            p++, len--;
        if (eq && (size_t)(eq - p) == nl && strncasecmp(p, name, nl) == 0) {
            char *v = u_asprintf("%.*s", (int)(p + len - eq - 1), eq + 1);
            if (!v)
                *oom = 1;
            return v;
        }
        p += len;
        if (*p == ';')
            p++;
    }
    return NULL;
}

#define CS_ENV "AZURE_STORAGE_CONNECTION_STRING"

static int from_connection_string(const char *account, const char *cs, az_creds *out, char *err,
                                  size_t errlen)
{
    int oom = 0, rc = 0;
    char *name = cs_get(cs, "AccountName", &oom);
    char *key = cs_get(cs, "AccountKey", &oom);
    char *sas = cs_get(cs, "SharedAccessSignature", &oom);
    char *blob = cs_get(cs, "BlobEndpoint", &oom);
    char *suffix = cs_get(cs, "EndpointSuffix", &oom);
    char *proto = cs_get(cs, "DefaultEndpointsProtocol", &oom);
    if (oom) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    } else if (name && strcmp(name, account) != 0) {
        snprintf(err, errlen,
                 "%s is for storage account '%.64s', but the lock names account '%.64s': use "
                 "the connection string of the lock's account",
                 CS_ENV, name, account);
        rc = S3LECT_EINVAL;
    } else if (key) {
        rc = set_key(out, key, CS_ENV " (AccountKey)", err, errlen);
    } else if (sas) {
        rc = set_sas(out, sas, CS_ENV " (SharedAccessSignature)", err, errlen);
    } else {
        snprintf(err, errlen,
                 "%s has neither AccountKey nor SharedAccessSignature: s3lect needs one of them "
                 "(or unset it to use another credential source)",
                 CS_ENV);
        rc = S3LECT_EINVAL;
    }
    if (rc == 0 && (blob || suffix)) {
        if (blob)
            out->blob_endpoint = u_strdup(blob);
        else
            out->blob_endpoint =
                u_asprintf("%s://%s.blob.%s", proto ? proto : "https", account, suffix);
        if (!out->blob_endpoint) {
            snprintf(err, errlen, "out of memory");
            rc = S3LECT_ENOMEM;
        }
    }
    free(name);
    u_wipe_free(key);
    u_wipe_free(sas);
    free(blob);
    free(suffix);
    free(proto);
    return rc;
}

int az_creds_resolve(const char *account, az_creds *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *cs = getenv("AZURE_STORAGE_CONNECTION_STRING");
    const char *key = getenv("AZURE_STORAGE_KEY");
    const char *acct = getenv("AZURE_STORAGE_ACCOUNT");
    const char *sas = getenv("AZURE_STORAGE_SAS_TOKEN");
    int rc = 0;
    if (cs && *cs) {
        rc = from_connection_string(account, cs, out, err, errlen);
    } else if (key && *key) {
        if (acct && *acct && strcmp(acct, account) != 0) {
            snprintf(err, errlen,
                     "AZURE_STORAGE_KEY is the key of account '%.64s' (AZURE_STORAGE_ACCOUNT), "
                     "but the lock names account '%.64s': give the key of the lock's account",
                     acct, account);
            rc = S3LECT_EINVAL;
        } else {
            rc = set_key(out, key, "AZURE_STORAGE_KEY", err, errlen);
        }
    } else if (sas && *sas) {
        rc = set_sas(out, sas, "AZURE_STORAGE_SAS_TOKEN", err, errlen);
    }
    if (rc)
        az_creds_clear(out);
    return rc;
}

/* ---- Shared Key ---- */

static const char *find_header(const az_header *h, size_t nh, const char *name)
{
    for (size_t i = 0; i < nh; i++)
        if (strcasecmp(h[i].name, name) == 0)
            return h[i].value;
    return NULL;
}

/* A growing string; oom set on failure (later appends do nothing). */
typedef struct sbuf {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* A header value with surrounding whitespace trimmed and inner runs of
 * whitespace folded to one space (as the spec canonicalizes them). */
static void sb_value(sbuf *b, const char *v)
{
    while (*v == ' ' || *v == '\t')
        v++;
    int space = 0;
    for (; *v; v++) {
        if (*v == ' ' || *v == '\t' || *v == '\r' || *v == '\n') {
            space = 1;
            continue;
        }
        if (space)
            sb_add(b, " ", 1);
        space = 0;
        sb_add(b, v, 1);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* %XX-decoded copy of s[0..n) ('+' kept: Azure does not treat it as a space
 * in the canonical form). */
static char *pct_decode(const char *s, size_t n)
{
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < n && (hi = u_hexval((unsigned char)s[i + 1])) >= 0 &&
            (lo = u_hexval((unsigned char)s[i + 2])) >= 0) {
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    return out;
}

char *az_sharedkey_string(const char *method, const az_header *h, size_t nh, const char *account,
                          const char *path, const char *query)
{
    static const char *const std_headers[] = {"Content-Encoding",
                                              "Content-Language",
                                              "Content-Length",
                                              "Content-MD5",
                                              "Content-Type",
                                              "Date",
                                              "If-Modified-Since",
                                              "If-Match",
                                              "If-None-Match",
                                              "If-Unmodified-Since",
                                              "Range"};
    sbuf b = {0};
    sb_str(&b, method);
    sb_str(&b, "\n");
    for (size_t i = 0; i < sizeof std_headers / sizeof std_headers[0]; i++) {
        const char *v = find_header(h, nh, std_headers[i]);
        if (v && !(i == 2 && strcmp(v, "0") == 0))
            sb_value(&b, v);
        sb_str(&b, "\n");
    }
    /* x-ms- headers: "name:value\n", names lower-cased, sorted. */
    char **lines = calloc(nh ? nh : 1, sizeof *lines);
    size_t nl = 0;
    if (!lines)
        b.oom = 1;
    for (size_t i = 0; lines && i < nh; i++) {
        if (strncasecmp(h[i].name, "x-ms-", 5) != 0)
            continue;
        sbuf l = {0};
        for (const char *c = h[i].name; *c; c++) {
            char lc = (*c >= 'A' && *c <= 'Z') ? (char)(*c - 'A' + 'a') : *c;
            sb_add(&l, &lc, 1);
        }
        sb_str(&l, ":");
        sb_value(&l, h[i].value);
        if (l.oom) {
            free(l.s);
            b.oom = 1;
            continue;
        }
        lines[nl++] = l.s;
    }
    if (lines)
        qsort(lines, nl, sizeof *lines, cmp_str);
    for (size_t i = 0; i < nl; i++) {
        sb_str(&b, lines[i]);
        sb_str(&b, "\n");
        free(lines[i]);
    }
    free(lines);
    sb_str(&b, "/");
    sb_str(&b, account);
    sb_str(&b, path);
    /* The query: "\nname:value" per parameter, sorted by name. */
    if (query && *query) {
        size_t np = 1;
        for (const char *c = query; *c; c++)
            np += *c == '&';
        char **params = calloc(np, sizeof *params);
        size_t n = 0;
        if (!params)
            b.oom = 1;
        for (const char *p = query; params && *p;) {
            size_t len = strcspn(p, "&");
            const char *eq = memchr(p, '=', len);
            size_t kl = eq ? (size_t)(eq - p) : len;
            char *k = pct_decode(p, kl);
            char *v = eq ? pct_decode(eq + 1, len - kl - 1) : u_strdup("");
            char *line = NULL;
            if (k && v) {
                for (char *c = k; *c; c++)
                    if (*c >= 'A' && *c <= 'Z')
                        *c = (char)(*c - 'A' + 'a');
                line = u_asprintf("%s:%s", k, v);
            }
            free(k);
            free(v);
            if (!line)
                b.oom = 1;
            else
                params[n++] = line;
            p += len;
            if (*p == '&')
                p++;
        }
        if (params)
            qsort(params, n, sizeof *params, cmp_str);
        for (size_t i = 0; i < n; i++) {
            sb_str(&b, "\n");
            sb_str(&b, params[i]);
            free(params[i]);
        }
        free(params);
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *az_sharedkey_authorization(const char *account, const uint8_t *key, size_t key_len,
                                 const char *sts)
{
    uint8_t mac[CR_SHA256_LEN];
    char sig[64];
    cr_hmac_sha256(key, key_len, sts, strlen(sts), mac);
    u_base64(mac, sizeof mac, 0, sig);
    return u_asprintf("SharedKey %s:%s", account, sig);
}

void az_http_date(int64_t unix_s, char out[32])
{
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, 32, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7], tm.tm_mday,
             months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}
