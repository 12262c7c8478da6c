/* SPDX-License-Identifier: Apache-2.0 */
/* store.c - what every store shares: results, the helpers of the lock URL
 * parsers, the lock as it may be shown, and the calls (st_get, st_put,
 * st_destroy, and the one transfer driver of the begin/finish stores). No
 * store is named here: the scheme table (schemes.c) names them. */
#include "store.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
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

/* ---- helpers of the stores' URL parsers ---- */

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

int st_parse_server(const char *url, const char *usage, const char *h, size_t hlen, long def_port,
                    size_t *namelen, long *port, char *err, size_t errlen)
{
    const char *p = NULL;
    *namelen = hlen;
    if (hlen > 0 && h[0] == '[') {
        const char *close = memchr(h, ']', hlen);
        if (!close || close == h + 1) {
            snprintf(err, errlen, "lock URL '%.200s': an IPv6 host is [ADDRESS]: write %s", url,
                     usage);
            return S3LECT_EINVAL;
        }
        *namelen = (size_t)(close + 1 - h);
        if (close + 1 < h + hlen) {
            if (close[1] != ':') {
                snprintf(err, errlen, "lock URL '%.200s': write [ADDRESS]:PORT: %s", url, usage);
                return S3LECT_EINVAL;
            }
            p = close + 2;
        }
    } else {
        const char *c = memchr(h, ':', hlen);
        if (c) {
            *namelen = (size_t)(c - h);
            p = c + 1;
        }
    }
    if (*namelen == 0) {
        snprintf(err, errlen, "lock URL '%.200s' names no server: write %s", url, usage);
        return S3LECT_EINVAL;
    }
    for (size_t i = 0; i < *namelen; i++) {
        unsigned char c = (unsigned char)h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_' ||
              (h[0] == '[' && (c == '[' || c == ']' || c == ':')))) {
            snprintf(err, errlen, "lock URL '%.200s': host '%.*s' is not a host name or address",
                     url, (int)(*namelen < 100 ? *namelen : 100), h);
            return S3LECT_EINVAL;
        }
    }
    *port = def_port;
    if (p) {
        size_t plen = (size_t)(h + hlen - p);
        long pv = 0;
        for (size_t i = 0; i < plen; i++)
            pv = (p[i] >= '0' && p[i] <= '9' && pv < 100000) ? pv * 10 + (p[i] - '0') : 100000;
        if (plen == 0 || pv < 1 || pv > 65535) {
            snprintf(err, errlen, "lock URL '%.200s': the port must be a number from 1 to 65535",
                     url);
            return S3LECT_EINVAL;
        }
        *port = pv;
    }
    return 0;
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

char *st_sibling_key(const st_store *s, const char *key, const char *tag)
{
    return s->vt->scratch_key ? s->vt->scratch_key(key, tag) : u_asprintf("%s%s", key, tag);
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

/* st_http_date_ms: store.h. */
int st_http_date_ms(const char *s, int64_t *ms)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    char mon[4] = "";
    int day, year, h, mi, sec, used = 0;
    if (sscanf(s, "%*3[A-Za-z], %2d %3[A-Za-z] %4d %2d:%2d:%2d GMT%n", &day, mon, &year, &h, &mi,
               &sec, &used) != 6 ||
        used == 0 || s[used] != '\0' || strlen(mon) != 3)
        return -1;
    const char *m = strstr(months, mon);
    if (!m || (m - months) % 3 != 0 || day < 1 || day > 31 || year < 1970 || h > 23 || mi > 59 ||
        sec > 60)
        return -1;
    struct tm tm = {.tm_year = year - 1900,
                    .tm_mon = (int)((m - months) / 3),
                    .tm_mday = day,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec};
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return -1;
    *ms = (int64_t)t * 1000;
    return 0;
}

int st_parse_bucket_object(
    const char *url, const char *rest, const char *form, const char *an_object,
    int (*check_bucket)(const char *url, const char *b, size_t bl, char *err, size_t errlen),
    int (*check_object)(const char *url, const char *key, char *err, size_t errlen),
    st_location *out, char *err, size_t errlen)
{
    const char *slash = strchr(rest, '/');
    size_t sl = strcspn(form, "/");
    if (!slash || slash == rest || !slash[1]) {
        snprintf(err, errlen,
                 "lock URL '%.200s' needs a bucket and %s: %.*s/bucket/path/to/leader.json", url,
                 an_object, (int)sl + 1, form);
        return S3LECT_EINVAL;
    }
    if (strpbrk(url, "?#")) {
        snprintf(err, errlen,
                 "lock URL '%.200s' has a query or fragment ('?' or '#'); lock URLs take neither: "
                 "%s",
                 url, form);
        return S3LECT_EINVAL;
    }
    size_t bl = (size_t)(slash - rest);
    int rc = check_bucket(url, rest, bl, err, errlen);
    if (!rc)
        rc = check_object(url, slash + 1, err, errlen);
    if (rc)
        return rc;
    out->bucket = malloc(bl + 1);
    out->key = u_strdup(slash + 1);
    if (!out->bucket || !out->key) {
        st_location_clear(out);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    memcpy(out->bucket, rest, bl);
    out->bucket[bl] = '\0';
    return 0;
}
