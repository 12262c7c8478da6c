/* SPDX-License-Identifier: Apache-2.0 */
/* store.c - results, lock locations, and opening the store a config names. */
#include "store.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "util.h"

void st_result_clear(st_result *r)
{
    free(r->body);
    free(r->etag);
    free(r->message);
    free(r->warning);
    memset(r, 0, sizeof *r);
}

int st_result_set_body(st_result *r, const void *data, size_t len)
{
    char *b = malloc(len + 1);
    if (!b)
        return S3LECT_ENOMEM;
    if (len)
        memcpy(b, data, len);
    b[len] = '\0';
    free(r->body);
    r->body = b;
    r->body_len = len;
    return 0;
}

int st_result_set_etag(st_result *r, const char *etag)
{
    return u_setstr(&r->etag, etag) ? S3LECT_ENOMEM : 0;
}

int st_result_setf(st_result *r, int outcome, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = u_vasprintf(fmt, ap);
    va_end(ap);
    free(r->message);
    r->message = m;
    r->outcome = outcome;
    return m ? 0 : S3LECT_ENOMEM;
}

void st_location_clear(st_location *loc)
{
    free(loc->bucket);
    free(loc->key);
    free(loc->opt1);
    free(loc->opt2);
    free(loc->opt3);
    memset(loc, 0, sizeof *loc);
}

/* Length of one UTF-8 sequence at p (1..4), or 0 if it is not valid UTF-8
 * (overlong forms, surrogates and code points above U+10FFFF included). */
size_t st_utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned min, cp;
    if ((c & 0xe0) == 0xc0) {
        n = 2, min = 0x80, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3, min = 0x800, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* Control characters: C0, DEL, and (in UTF-8) C1. */
int st_is_control(const unsigned char *p)
{
    return p[0] < 0x20 || p[0] == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f);
}

/* The first control character in s, or NULL. */
const char *st_find_control(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (st_is_control(p))
            return (const char *)p;
    return NULL;
}

/* Checks '/'-separated segments of path[0..n): none empty, none "." or "..".
 * Returns 0, or writes a message naming what (a "key", a "path") and fails. */
int st_check_segments(const char *url, const char *what, const char *path, size_t n, char *err,
                      size_t errlen)
{
    const char *p = path, *end = path + n;
    while (p <= end) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        const char *se = slash ? slash : end;
        size_t sl = (size_t)(se - p);
        if (sl == 0) {
            snprintf(err, errlen,
                     "lock URL '%.200s': the %s has an empty segment ('//', or '/' at the start or "
                     "end); remove it",
                     url, what);
            return S3LECT_EINVAL;
        }
        if ((sl == 1 && p[0] == '.') || (sl == 2 && p[0] == '.' && p[1] == '.')) {
            snprintf(err, errlen,
                     "lock URL '%.200s': the %s has a '%.*s' segment; write the path without "
                     "'.' and '..'",
                     url, what, (int)sl, p);
            return S3LECT_EINVAL;
        }
        if (!slash)
            break;
        p = slash + 1;
    }
    return 0;
}

/* A lock's file name must leave room for the store's ".lock" and temporary
 * names ("." KEY "." pid "." random ".tmp") within NAME_MAX (255). */
#define FILE_NAME_MAX 200
#define FILE_PATH_MAX 4000

static int split_path(const char *url, const char *path, st_location *out, char *err, size_t errlen)
{
    size_t n = strlen(path);
    const char *ctl = st_find_control(path);
    if (ctl) {
        snprintf(err, errlen,
                 "lock path has a control character (byte 0x%02x at offset %zu): "
                 "remove it",
                 (unsigned char)*ctl, (size_t)(ctl - path));
        return S3LECT_EINVAL;
    }
    if (n > FILE_PATH_MAX) {
        snprintf(err, errlen, "lock path is %zu bytes long; the limit is %d", n, FILE_PATH_MAX);
        return S3LECT_EINVAL;
    }
    if (n == 0 || path[n - 1] == '/') {
        snprintf(err, errlen,
                 "lock path '%.200s' names a directory: add a file name, e.g. %.200sleader.json",
                 url, n ? url : "./");
        return S3LECT_EINVAL;
    }
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        snprintf(err, errlen,
                 "lock path '%.200s' names a directory: the lock must be a file inside one, e.g. "
                 "%.200s/leader.json",
                 url, url);
        return S3LECT_EINVAL;
    }
    if (strlen(name) > FILE_NAME_MAX) {
        snprintf(err, errlen,
                 "lock file name is %zu bytes long; the limit is %d (the store adds suffixes)",
                 strlen(name), FILE_NAME_MAX);
        return S3LECT_EINVAL;
    }
    if (!slash) {
        out->bucket = u_strdup(".");
        out->key = u_strdup(path);
    } else {
        size_t dl = slash == path ? 1 : (size_t)(slash - path);
        out->bucket = malloc(dl + 1);
        if (out->bucket) {
            memcpy(out->bucket, path, dl);
            out->bucket[dl] = '\0';
        }
        out->key = u_strdup(slash + 1);
    }
    if (!out->bucket || !out->key) {
        st_location_clear(out);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    return 0;
}

/* S3 bucket naming rules: 3-63 characters of a-z, 0-9, '.' and '-', starting
 * and ending with a letter or digit, no "..", not an IPv4 address. Legacy
 * us-east-1 buckets (created before March 2018) may also have capitals and
 * '_' and up to 255 characters: accepted too (the S3 store then uses
 * path-style addressing, as AWS requires for them). */
static int check_bucket(const char *url, const char *b, size_t bl, char *err, size_t errlen)
{
    int legacy = 0;
    for (size_t i = 0; i < bl; i++) {
        char c = b[i];
        if ((c >= 'A' && c <= 'Z') || c == '_') {
            legacy = 1;
        } else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) {
            snprintf(err, errlen,
                     "lock URL '%.200s': the bucket name has an invalid character; S3 bucket "
                     "names use only a-z, 0-9, '.' and '-' (legacy ones also A-Z and '_')",
                     url);
            return S3LECT_EINVAL;
        }
    }
    if (bl < 3 || bl > (legacy ? 255u : 63u)) {
        snprintf(err, errlen,
                 "lock URL '%.200s': the bucket name is %zu characters long; S3 bucket names "
                 "have 3 to 63 (legacy names with capitals or '_' up to 255)",
                 url, bl);
        return S3LECT_EINVAL;
    }
    int alnum_ends = b[0] != '.' && b[0] != '-' && b[bl - 1] != '.' && b[bl - 1] != '-';
    int dotdot = 0, dots = 0, digits_dots = 1;
    for (size_t i = 0; i < bl; i++) {
        if (b[i] == '.') {
            dots++;
            if (i + 1 < bl && b[i + 1] == '.')
                dotdot = 1;
        } else if (!(b[i] >= '0' && b[i] <= '9')) {
            digits_dots = 0;
        }
    }
    if (!alnum_ends || dotdot) {
        snprintf(err, errlen,
                 "lock URL '%.200s': S3 bucket names start and end with a letter or digit and "
                 "have no '..'",
                 url);
        return S3LECT_EINVAL;
    }
    if (digits_dots && dots == 3) {
        snprintf(err, errlen,
                 "lock URL '%.200s': an IP address is not a bucket name; give the server with "
                 "--endpoint (endpoint setting) and the bucket here",
                 url);
        return S3LECT_EINVAL;
    }
    return 0;
}

/* S3 object keys: at most 1024 bytes of valid UTF-8, no control characters,
 * and (for a lock) no empty, "." or ".." segments. */
#define S3_KEY_MAX 1024

static int check_s3_key(const char *url, const char *key, char *err, size_t errlen)
{
    size_t n = strlen(key);
    if (n > S3_KEY_MAX) {
        snprintf(err, errlen, "lock URL: the S3 key is %zu bytes long; S3's limit is %d", n,
                 S3_KEY_MAX);
        return S3LECT_EINVAL;
    }
    for (const unsigned char *p = (const unsigned char *)key; *p;) {
        if (st_is_control(p)) {
            snprintf(err, errlen,
                     "lock URL: the S3 key has a control character (byte 0x%02x at offset %zu); "
                     "remove it",
                     *p, (size_t)(p - (const unsigned char *)key));
            return S3LECT_EINVAL;
        }
        size_t l = st_utf8_len(p);
        if (!l) {
            snprintf(err, errlen,
                     "lock URL: the S3 key is not valid UTF-8 (at offset %zu); S3 keys are UTF-8",
                     (size_t)(p - (const unsigned char *)key));
            return S3LECT_EINVAL;
        }
        p += l;
    }
    return st_check_segments(url, "key", key, n, err, errlen);
}

/* "s3" in "s3://...": the length of a leading URI scheme (RFC 3986: a letter,
 * then letters, digits, '+', '-', '.') followed by ':', else 0. */
static size_t scheme_len(const char *url)
{
    const char *p = url;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
        return 0;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '+' || *p == '-' || *p == '.')
        p++;
    return *p == ':' ? (size_t)(p - url) : 0;
}

int st_s3_parse(const char *url, const char *b, st_location *out, char *err, size_t errlen)
{
    const char *slash = strchr(b, '/');
    if (!slash || slash == b || !slash[1]) {
        snprintf(err, errlen,
                 "lock URL '%.200s' needs a bucket and a key: s3://bucket/path/to/leader.json",
                 url);
        return S3LECT_EINVAL;
    }
    if (strpbrk(url, "?#")) {
        snprintf(err, errlen,
                 "lock URL '%.200s' has a query or fragment ('?' or '#'); lock URLs take neither: "
                 "s3://bucket/key",
                 url);
        return S3LECT_EINVAL;
    }
    size_t bl = (size_t)(slash - b);
    int rc = check_bucket(url, b, bl, err, errlen);
    if (!rc)
        rc = check_s3_key(url, slash + 1, err, errlen);
    if (rc)
        return rc;
    out->bucket = malloc(bl + 1);
    out->key = u_strdup(slash + 1);
    if (!out->bucket || !out->key) {
        st_location_clear(out);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    memcpy(out->bucket, b, bl);
    out->bucket[bl] = '\0';
    return 0;
}

int st_file_parse(const char *url, const char *p, st_location *out, char *err, size_t errlen)
{
    if (!p)
        return split_path(url, url, out, err, errlen);
    if (strncmp(p, "localhost/", 10) == 0)
        p += 9;
    if (p[0] != '/') {
        snprintf(err, errlen,
                 "file URL '%.200s' must be absolute: file:///dir/leader.json (three slashes)",
                 url);
        return S3LECT_EINVAL;
    }
    if (strpbrk(p, "?#")) {
        snprintf(err, errlen,
                 "lock URL '%.200s' has a query or fragment ('?' or '#'); file URLs take neither "
                 "(give a plain path if the name really has them)",
                 url);
        return S3LECT_EINVAL;
    }
    if (!st_find_control(p) && p[1] != '\0' && p[strlen(p) - 1] != '/') {
        int rc = st_check_segments(url, "path", p + 1, strlen(p + 1), err, errlen);
        if (rc)
            return rc;
    }
    return split_path(url, p, out, err, errlen);
}

/* ---- dynamodb://, postgres://, route53:// ---- */

/* Decodes the %XX escapes of in[0..n) into an allocated string. NULL with
 * *bad = 1 on a malformed escape or an escaped NUL; NULL with *bad = 0 when
 * out of memory. */
char *st_pct_decode(const char *in, size_t n, int *bad)
{
    char *out = malloc(n + 1), *o = out;
    *bad = 0;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (in[i] != '%') {
            *o++ = in[i];
            continue;
        }
        int hi = i + 1 < n ? u_hexval((unsigned char)in[i + 1]) : -1;
        int lo = i + 2 < n ? u_hexval((unsigned char)in[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            free(out);
            *bad = 1;
            return NULL;
        }
        *o++ = (char)(hi * 16 + lo);
        i += 2;
    }
    *o = '\0';
    return out;
}

/* Checks a name or value: non-empty, at most max bytes of valid UTF-8
 * without control characters. what names it in the message. */
int st_check_text(const char *url, const char *what, const char *v, size_t max, char *err,
                  size_t errlen)
{
    size_t n = strlen(v);
    if (n == 0 || n > max) {
        snprintf(err, errlen, "lock URL '%.200s': the %s is %zu bytes long; it must have 1 to %zu",
                 url, what, n, max);
        return S3LECT_EINVAL;
    }
    for (const unsigned char *p = (const unsigned char *)v; *p;) {
        size_t l = st_is_control(p) ? 0 : st_utf8_len(p);
        if (!l) {
            snprintf(err, errlen,
                     "lock URL '%.200s': the %s has a control character or is not UTF-8 (at "
                     "offset %zu)",
                     url, what, (size_t)(p - (const unsigned char *)v));
            return S3LECT_EINVAL;
        }
        p += l;
    }
    return 0;
}

/* Is every byte of s in the set: letters, digits and extra? */
int st_only_chars(const char *s, const char *extra)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr(extra, *s)))
            return 0;
    return 1;
}

/* Splits query q ("a=b&c=d") into params (decoded). A parameter not in
 * params is appended, as written, to *rest ("&"-joined) when rest is not
 * NULL, and refused otherwise. Duplicates and empty values are refused. */
int st_parse_query(const char *url, const char *usage, const char *q, const st_qparam *params,
                   size_t np, char **rest, char *err, size_t errlen)
{
    while (q && *q) {
        size_t len = strcspn(q, "&");
        const char *eq = memchr(q, '=', len);
        size_t nl = eq ? (size_t)(eq - q) : len;
        const st_qparam *hit = NULL;
        for (size_t i = 0; i < np; i++)
            if (strlen(params[i].name) == nl && strncmp(q, params[i].name, nl) == 0)
                hit = &params[i];
        if (hit) {
            if (!eq || eq + 1 == q + len) {
                snprintf(err, errlen, "lock URL '%.200s': parameter '%s' needs a value (%s)", url,
                         hit->name, usage);
                return S3LECT_EINVAL;
            }
            if (*hit->dst) {
                snprintf(err, errlen, "lock URL '%.200s': parameter '%s' is given twice", url,
                         hit->name);
                return S3LECT_EINVAL;
            }
            int bad;
            *hit->dst = st_pct_decode(eq + 1, (size_t)(q + len - eq - 1), &bad);
            if (!*hit->dst) {
                if (bad)
                    snprintf(err, errlen,
                             "lock URL '%.200s': parameter '%s' has a malformed %%-escape", url,
                             hit->name);
                else
                    snprintf(err, errlen, "out of memory");
                return bad ? S3LECT_EINVAL : S3LECT_ENOMEM;
            }
        } else if (rest && len) {
            char *r =
                *rest ? u_asprintf("%s&%.*s", *rest, (int)len, q) : u_asprintf("%.*s", (int)len, q);
            if (!r) {
                snprintf(err, errlen, "out of memory");
                return S3LECT_ENOMEM;
            }
            free(*rest);
            *rest = r;
        } else if (len) {
            snprintf(err, errlen, "lock URL '%.200s': unknown parameter '%.*s' (%s)", url,
                     (int)(nl < 60 ? nl : 60), q, usage);
            return S3LECT_EINVAL;
        }
        q += len;
        if (*q == '&')
            q++;
    }
    return 0;
}

#define DDB_USAGE                                                                                  \
    "dynamodb://TABLE/KEY, optionally ?partition_key=ATTR (default LockID) and "                   \
    "&sort_key=ATTR&sort_value=VALUE"

int st_dynamodb_parse(const char *url, const char *b, st_location *out, char *err, size_t errlen)
{
    if (strchr(b, '#')) {
        snprintf(err, errlen, "lock URL '%.200s' has a fragment ('#'); write %s", url, DDB_USAGE);
        return S3LECT_EINVAL;
    }
    const char *q = strchr(b, '?');
    size_t pl = q ? (size_t)(q - b) : strlen(b);
    const char *slash = memchr(b, '/', pl);
    if (!slash || slash == b || slash + 1 == b + pl) {
        snprintf(err, errlen, "lock URL '%.200s' needs a table and a key: %s", url, DDB_USAGE);
        return S3LECT_EINVAL;
    }
    int bad = 0, rc;
    out->bucket = u_asprintf("%.*s", (int)(slash - b), b);
    out->key = st_pct_decode(slash + 1, (size_t)(b + pl - slash - 1), &bad);
    if (bad) {
        snprintf(err, errlen, "lock URL '%.200s': the key has a malformed %%-escape", url);
        return S3LECT_EINVAL;
    }
    if (!out->bucket || !out->key) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    size_t tl = strlen(out->bucket);
    if (tl < 3 || tl > 255 || !st_only_chars(out->bucket, "_.-")) {
        snprintf(err, errlen,
                 "lock URL '%.200s': '%.100s' is not a DynamoDB table name (3 to 255 of a-z, "
                 "A-Z, 0-9, '_', '-', '.')",
                 url, out->bucket);
        return S3LECT_EINVAL;
    }
    if ((rc = st_check_text(url, "key", out->key, 2048, err, errlen)) != 0)
        return rc;
    st_qparam ps[] = {
        {"partition_key", &out->opt1}, {"sort_key", &out->opt2}, {"sort_value", &out->opt3}};
    if ((rc = st_parse_query(url, DDB_USAGE, q ? q + 1 : NULL, ps, 3, NULL, err, errlen)) != 0)
        return rc;
    if (!out->opt1 && !(out->opt1 = u_strdup("LockID"))) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (!out->opt2 != !out->opt3) {
        snprintf(err, errlen,
                 "lock URL '%.200s': sort_key and sort_value go together (the table's sort key "
                 "attribute and the value the lock's item has in it)",
                 url);
        return S3LECT_EINVAL;
    }
    const char *names[] = {out->opt1, out->opt2};
    for (int i = 0; i < 2; i++) {
        if (names[i] && (strlen(names[i]) > 255 || !st_only_chars(names[i], "_.-"))) {
            snprintf(err, errlen,
                     "lock URL '%.200s': attribute name '%.100s' must have 1 to 255 of a-z, A-Z, "
                     "0-9, '_', '-', '.'",
                     url, names[i]);
            return S3LECT_EINVAL;
        }
    }
    if (out->opt2 && strcmp(out->opt1, out->opt2) == 0) {
        snprintf(err, errlen,
                 "lock URL '%.200s': partition_key and sort_key are the same attribute", url);
        return S3LECT_EINVAL;
    }
    if (out->opt3 && (rc = st_check_text(url, "sort_value", out->opt3, 1024, err, errlen)) != 0)
        return rc;
    return 0;
}

#define PG_USAGE "postgres://[USER@HOST[:PORT]]/DB?key=NAME[&table=TABLE][&libpq parameters]"

/* A table name: identifier or schema.identifier, each [A-Za-z_][A-Za-z0-9_]*
 * of at most 63 bytes (it is quoted in SQL: case is kept). */
static int pg_table_ok(const char *t)
{
    const char *dot = strchr(t, '.');
    for (int part = 0; part < (dot ? 2 : 1); part++) {
        const char *p = part ? dot + 1 : t;
        size_t n = part || !dot ? strlen(p) : (size_t)(dot - t);
        if (n == 0 || n > 63 || (p[0] >= '0' && p[0] <= '9'))
            return 0;
        for (size_t i = 0; i < n; i++)
            if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
                  (p[i] >= '0' && p[i] <= '9') || p[i] == '_'))
                return 0;
    }
    return 1;
}

int st_postgres_parse(const char *url, const char *after, st_location *out, char *err,
                      size_t errlen)
{
    (void)after; /* libpq parses the connection part: the whole URL */
    char *shown = st_lock_display(url);
    if (!shown) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    int rc = 0;
    char *rest = NULL;
    const char *q = strchr(url, '?');
    if (strchr(url, '#')) {
        snprintf(err, errlen, "lock URL '%.200s' has a fragment ('#'); write %s", shown, PG_USAGE);
        rc = S3LECT_EINVAL;
        goto done;
    }
    st_qparam ps[] = {{"key", &out->key}, {"table", &out->opt1}};
    if ((rc = st_parse_query(shown, PG_USAGE, q ? q + 1 : NULL, ps, 2, &rest, err, errlen)) != 0)
        goto done;
    if (!out->key) {
        snprintf(err, errlen,
                 "lock URL '%.200s' names no lock: add ?key=NAME (the lock's row; one table holds "
                 "many locks): %s",
                 shown, PG_USAGE);
        rc = S3LECT_EINVAL;
        goto done;
    }
    if ((rc = st_check_text(shown, "key", out->key, 1024, err, errlen)) != 0)
        goto done;
    if (!out->opt1 && !(out->opt1 = u_strdup("s3lect_locks"))) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
        goto done;
    }
    if (!pg_table_ok(out->opt1)) {
        snprintf(err, errlen,
                 "lock URL '%.200s': table '%.100s' must be NAME or SCHEMA.NAME, each a letter or "
                 "'_' then letters, digits or '_' (at most 63)",
                 shown, out->opt1);
        rc = S3LECT_EINVAL;
        goto done;
    }
    size_t base = q ? (size_t)(q - url) : strlen(url);
    out->bucket =
        rest ? u_asprintf("%.*s?%s", (int)base, url, rest) : u_asprintf("%.*s", (int)base, url);
    if (!out->bucket) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
        goto done;
    }
done:
    free(rest);
    free(shown);
    return rc;
}

#define R53_USAGE "route53://HOSTED_ZONE_ID/RECORD.NAME.IN.THE.ZONE"

int st_route53_parse(const char *url, const char *b, st_location *out, char *err, size_t errlen)
{
    if (strpbrk(b, "?#")) {
        snprintf(err, errlen, "lock URL '%.200s' has a query or fragment; write %s", url,
                 R53_USAGE);
        return S3LECT_EINVAL;
    }
    const char *slash = strchr(b, '/');
    if (!slash || slash == b || !slash[1] || strchr(slash + 1, '/')) {
        snprintf(err, errlen, "lock URL '%.200s' needs a hosted zone id and a record name: %s", url,
                 R53_USAGE);
        return S3LECT_EINVAL;
    }
    size_t zl = (size_t)(slash - b);
    out->bucket = u_asprintf("%.*s", (int)zl, b);
    const char *name = slash + 1;
    size_t nl = strlen(name);
    if (nl && name[nl - 1] == '.')
        nl--;
    out->key = u_asprintf("%.*s.", (int)nl, name);
    if (!out->bucket || !out->key) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (zl > 32 || !st_only_chars(out->bucket, "")) {
        snprintf(err, errlen,
                 "lock URL '%.200s': '%.60s' is not a hosted zone id (letters and digits, e.g. "
                 "Z0123456789ABCDEFGHIJ; without /hostedzone/)",
                 url, out->bucket);
        return S3LECT_EINVAL;
    }
    for (char *c = out->key; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    /* Labels of letters, digits, '-' and '_', 1 to 63 each, 253 in all. */
    int ok = nl >= 1 && nl <= 253 && st_only_chars(out->key, "-_.");
    for (const char *p = out->key; ok && *p;) {
        size_t ll = strcspn(p, ".");
        ok = ll >= 1 && ll <= 63;
        p += ll + 1;
    }
    if (!ok) {
        snprintf(err, errlen,
                 "lock URL '%.200s': '%.200s' is not a DNS record name (labels of 1 to 63 "
                 "letters, digits, '-' or '_', 253 in all); write %s",
                 url, name, R53_USAGE);
        return S3LECT_EINVAL;
    }
    return 0;
}

char *st_lock_display(const char *url)
{
    if (!url)
        return u_strdup("");
    char *out = u_strdup(url);
    if (!out)
        return NULL;
    const char *sep = strstr(url, "://");
    if (!sep)
        return out;
    /* user:password@ in the authority */
    const char *auth = sep + 3;
    size_t al = strcspn(auth, "/?#");
    const char *at = NULL;
    for (const char *p = auth; p < auth + al; p++)
        if (*p == '@')
            at = p;
    if (at) {
        const char *colon = memchr(auth, ':', (size_t)(at - auth));
        if (colon) {
            char *r = u_asprintf("%.*s***%s", (int)(colon + 1 - url), url, at);
            free(out);
            if (!r)
                return NULL;
            out = r;
        }
    }
    /* password=... in the query */
    char *q = strchr(out, '?');
    while (q) {
        char *p = q + 1;
        if (strncmp(p, "password=", 9) == 0) {
            size_t vl = strcspn(p + 9, "&#");
            char *r = u_asprintf("%.*s***%s", (int)(p + 9 - out), out, p + 9 + vl);
            if (!r) {
                free(out);
                return NULL;
            }
            size_t off = (size_t)(p - out);
            free(out);
            out = r;
            p = out + off;
        }
        q = strchr(p, '&');
    }
    return out;
}

/* Appends v to *out, percent-encoding what would make a query ambiguous. */
int st_canon_add(char **out, const char *prefix, const char *v, int encode)
{
    size_t n = strlen(*out), pl = strlen(prefix), vl = strlen(v);
    char *r = realloc(*out, n + pl + 3 * vl + 1);
    if (!r)
        return -1;
    memcpy(r + n, prefix, pl);
    n += pl;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (encode && (*p <= 0x20 || *p >= 0x7f || strchr("&#%=?+", *p)))
            n += (size_t)sprintf(r + n, "%%%02X", *p);
        else
            r[n++] = (char)*p;
    }
    r[n] = '\0';
    *out = r;
    return 0;
}

/* path made absolute against the working directory, with "", "." and ".."
 * components resolved lexically. */
static char *abs_lexical(const char *path)
{
    char cwd[4096] = "/";
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, "/");
    char *joined = path[0] == '/' ? u_strdup(path) : u_asprintf("%s/%s", cwd, path);
    char *out = joined ? malloc(strlen(joined) + 2) : NULL;
    if (!out) {
        free(joined);
        return NULL;
    }
    size_t o = 0;
    for (char *tok = joined; *tok;) {
        size_t l = strcspn(tok, "/");
        if (l == 0 || (l == 1 && tok[0] == '.')) {
            /* nothing */
        } else if (l == 2 && tok[0] == '.' && tok[1] == '.') {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--; /* the slash before the dropped component */
        } else {
            out[o++] = '/';
            memcpy(out + o, tok, l);
            o += l;
        }
        tok += l;
        if (*tok == '/')
            tok++;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    free(joined);
    return out;
}

int st_s3_canonical(const st_location *loc, char **out)
{
    return st_canon_add(out, "s3://", loc->bucket, 0) || st_canon_add(out, "/", loc->key, 0);
}

int st_file_canonical(const st_location *loc, char **out)
{
    char *dir = abs_lexical(loc->bucket);
    int rc = !dir || st_canon_add(out, "file://", dir, 0) ||
             st_canon_add(out, strcmp(dir, "/") ? "/" : "", loc->key, 0);
    free(dir);
    return rc;
}

int st_dynamodb_canonical(const st_location *loc, char **out)
{
    int rc = st_canon_add(out, "dynamodb://", loc->bucket, 0) ||
             st_canon_add(out, "/", loc->key, 1) ||
             st_canon_add(out, "?partition_key=", loc->opt1, 1);
    if (loc->opt2 && loc->opt3)
        rc = rc || st_canon_add(out, "&sort_key=", loc->opt2, 1) ||
             st_canon_add(out, "&sort_value=", loc->opt3, 1);
    return rc;
}

int st_route53_canonical(const st_location *loc, char **out)
{
    return st_canon_add(out, "route53://", loc->bucket, 0) || st_canon_add(out, "/", loc->key, 0);
}

int st_postgres_canonical(const st_location *loc, char **out)
{
    /* The connection part (libpq's) as shown, scheme in lower case. */
    char *shown = st_lock_display(loc->bucket);
    const char *sep = shown ? strstr(shown, "://") : NULL;
    const char *q = shown ? strchr(shown, '?') : NULL;
    int rc = !sep || st_canon_add(out, "postgres", sep, 0) ||
             st_canon_add(out, q ? "&key=" : "?key=", loc->key, 1) ||
             st_canon_add(out, "&table=", loc->opt1, 1);
    free(shown);
    return rc;
}

/* ---- the scheme table ---- */

static const st_scheme schemes[] = {
    {"s3", NULL, st_s3_parse, st_s3_open, st_s3_canonical, "s3://bucket/key (two slashes)",
     ST_SCHEME_AWS},
    {"file", NULL, st_file_parse, st_file_open, st_file_canonical,
     "file:///dir/key (three slashes) or a plain path", ST_SCHEME_PATHS},
    {"dynamodb", NULL, st_dynamodb_parse, st_dynamodb_open, st_dynamodb_canonical, NULL,
     ST_SCHEME_AWS},
    {"postgres", "postgresql", st_postgres_parse, st_postgres_open, st_postgres_canonical, NULL, 0},
    {"route53", NULL, st_route53_parse, st_route53_open, st_route53_canonical, NULL, ST_SCHEME_AWS},
};
#define NSCHEMES (sizeof schemes / sizeof schemes[0])

/* The row whose name or alias is url[0..sl) (case-insensitive), or NULL. */
static const st_scheme *scheme_find(const char *url, size_t sl)
{
    for (size_t i = 0; i < NSCHEMES; i++) {
        const char *names[] = {schemes[i].name, schemes[i].alias};
        for (int k = 0; k < 2; k++)
            if (names[k] && strlen(names[k]) == sl && strncasecmp(url, names[k], sl) == 0)
                return &schemes[i];
    }
    return NULL;
}

char *st_location_canonical(const st_location *loc, const char *url)
{
    if (!loc->scheme || !loc->scheme->canonical)
        return st_lock_canonical(url);
    char *out = u_strdup("");
    if (out && loc->scheme->canonical(loc, &out)) {
        free(out);
        return NULL;
    }
    return out;
}

char *st_lock_canonical(const char *url)
{
    st_location loc;
    char err[512];
    if (!url || st_location_parse(url, &loc, err, sizeof err) != 0)
        return st_lock_display(url);
    char *out = st_location_canonical(&loc, url);
    st_location_clear(&loc);
    return out;
}

static int location_parse(const char *url, st_location *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!url || !url[0]) {
        snprintf(err, errlen, "empty lock location: use s3://bucket/key or file:///dir/key");
        return S3LECT_EINVAL;
    }
    size_t sl = scheme_len(url);
    const st_scheme *sc = NULL;
    const char *rest = NULL;
    if (sl == 0) {
        for (size_t i = 0; i < NSCHEMES && !sc; i++)
            if (schemes[i].flags & ST_SCHEME_PATHS)
                sc = &schemes[i];
    } else if ((sc = scheme_find(url, sl)) != NULL) {
        /* Schemes are case-insensitive (RFC 3986 3.1): S3:// is s3://. */
        if (strncmp(url + sl, "://", 3) == 0) {
            rest = url + sl + 3;
        } else if (sc->form) {
            snprintf(err, errlen, "lock URL '%.200s' is malformed: write %s", url, sc->form);
            return S3LECT_EINVAL;
        } else {
            sc = NULL;
        }
    }
    if (sc) {
        int rc = sc->parse(url, rest, out, err, errlen);
        if (rc)
            st_location_clear(out);
        else
            out->scheme = sc;
        return rc;
    }
    if (strncmp(url + sl, "://", 3) == 0)
        snprintf(err, errlen,
                 "unsupported lock URL scheme '%.*s:': use s3://bucket/key, file:///dir/key, a "
                 "path, dynamodb://TABLE/KEY, postgres://HOST/DB?key=NAME or "
                 "route53://ZONE_ID/NAME",
                 (int)(sl < 20 ? sl : 20), url);
    else
        snprintf(err, errlen,
                 "unsupported lock URL scheme '%.*s:': use s3://bucket/key, file:///dir/key, a "
                 "path (for a file whose name has ':', write ./%.100s), dynamodb://, "
                 "postgres:// or route53://",
                 (int)(sl < 20 ? sl : 20), url, url);
    return S3LECT_EINVAL;
}

int st_location_parse(const char *url, st_location *out, char *err, size_t errlen)
{
    int rc = location_parse(url, out, err, errlen);
    if (rc == 0 || !url)
        return rc;
    /* The message quotes the URL: when it holds a password, say the same of
     * the URL as shown (password replaced by ***) instead. */
    char *shown = st_lock_display(url);
    if (!shown || strcmp(shown, url) != 0) {
        st_location tmp;
        if (!shown || location_parse(shown, &tmp, err, errlen) == 0) {
            if (shown)
                st_location_clear(&tmp);
            snprintf(err, errlen, "lock URL '%.200s' is not valid", shown ? shown : "");
        }
    }
    free(shown);
    return rc;
}

int st_lock_location(const s3lect_config *cfg, st_location *out, char *err, size_t errlen)
{
    if (!cfg->custom)
        return st_location_parse(cfg->lock, out, err, errlen);
    /* The key is the lock string's key part, or the whole string without a scheme. */
    char *key = NULL;
    if (strstr(cfg->lock, "://") && st_location_parse(cfg->lock, out, err, errlen) == 0) {
        key = out->key;
        out->key = NULL;
        st_location_clear(out);
    } else {
        memset(out, 0, sizeof *out);
        key = u_strdup(cfg->lock);
    }
    if (!key) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    out->scheme = &st_custom_scheme;
    out->key = key;
    return 0;
}

int st_open(const s3lect_config *cfg, const st_location *loc, st_store **out, char *err,
            size_t errlen)
{
    *out = NULL;
    return loc->scheme->open(cfg, loc, out, err, errlen);
}

int st_open_config(const s3lect_config *cfg, st_store **out, char **key_out, char *err,
                   size_t errlen)
{
    *out = NULL;
    *key_out = NULL;
    st_location loc;
    int rc = st_lock_location(cfg, &loc, err, errlen);
    if (rc)
        return rc;
    rc = st_open(cfg, &loc, out, err, errlen);
    if (rc == 0) {
        *key_out = loc.key;
        loc.key = NULL;
    }
    st_location_clear(&loc);
    return rc;
}

/* ---- calls ---- */

void *st_easy(st_store *s, st_result *out)
{
    if (!s->easy && !(s->easy = curl_easy_init())) {
        memset(out, 0, sizeof *out);
        st_result_setf(out, ST_TRANSIENT, "libcurl could not create a handle");
    }
    return s->easy;
}

void st_transfer(st_store *s, const char *key, int put, const void *data, size_t len,
                 const char *if_match, int64_t timeout_ms, st_result *out)
{
    CURL *h = st_easy(s, out);
    st_xfer *x = h ? s->vt->begin(s, h, key, put, data, len, if_match, timeout_ms, out) : NULL;
    if (x)
        s->vt->finish(s, x, curl_easy_perform(h), out);
}

void st_get(st_store *s, const char *key, int64_t timeout_ms, st_result *out)
{
    if (s->vt->get)
        s->vt->get(s, key, timeout_ms, out);
    else
        st_transfer(s, key, 0, NULL, 0, NULL, timeout_ms, out);
}

void st_put(st_store *s, const char *key, const void *data, size_t len, const char *if_match,
            int64_t timeout_ms, st_result *out)
{
    if (s->vt->put)
        s->vt->put(s, key, data, len, if_match, timeout_ms, out);
    else
        st_transfer(s, key, 1, data, len, if_match, timeout_ms, out);
}

void st_destroy(st_store *s)
{
    if (!s)
        return;
    if (s->easy)
        curl_easy_cleanup(s->easy);
    s->easy = NULL;
    s->vt->destroy(s);
}
