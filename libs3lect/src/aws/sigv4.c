/* SPDX-License-Identifier: Apache-2.0 */
/* sigv4.c - AWS Signature Version 4 header signing.
 *
 * Canonical request = method \n canonical URI \n canonical query \n
 * canonical headers \n signed headers \n payload hash; the string to sign
 * hashes it under a date/region/service scope; the signing key is an HMAC
 * chain from the secret. Every step is compared against the AWS suite.
 */
#include "sigv4.h"
#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"

#define ALGORITHM "AWS4-HMAC-SHA256"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* ---- a small growable string; any allocation failure sticks in oom ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

/* Room for n more bytes and the NUL; -1 (oom set) when there is none. */
static int sb_reserve(sbuf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    return 0;
}

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (sb_reserve(b, n) != 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

static void sb_putc(sbuf *b, char c)
{
    sb_putn(b, &c, 1);
}

/* Returns the string (never NULL unless out of memory) and resets b. */
static char *sb_take(sbuf *b)
{
    if (!b->oom && !b->p)
        sb_putn(b, "", 0);
    char *p = b->oom ? NULL : b->p;
    if (b->oom)
        free(b->p);
    memset(b, 0, sizeof *b);
    return p;
}

/* ---- encoding ---- */

/* Appends in[0..len) percent-encoded (u_pct_encode_into), in place. */
static void sb_encode(sbuf *b, const char *in, size_t len, int keep_slash)
{
    if (sb_reserve(b, 3 * len) == 0)
        b->len += u_pct_encode_into(in, len, keep_slash, b->p + b->len);
}

char *sigv4_uri_encode(const char *in, size_t len, int keep_slash)
{
    return u_pct_encode(in, len, keep_slash);
}

/* Decodes %XX escapes of in[0..len) into b; a '%' not followed by two hex
 * digits is kept literally. */
static void sb_decode(sbuf *b, const char *in, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (in[i] == '%' && i + 2 < len && u_hexval((unsigned char)in[i + 1]) >= 0 &&
            u_hexval((unsigned char)in[i + 2]) >= 0) {
            sb_putc(b, (char)(u_hexval((unsigned char)in[i + 1]) * 16 +
                              u_hexval((unsigned char)in[i + 2])));
            i += 2;
        } else {
            sb_putc(b, in[i]);
        }
    }
}

/* ---- canonical URI ---- */

/* Removes empty, "." and ".." segments (RFC 3986 §5.2.4 plus collapsing of
 * repeated slashes, as the AWS suite expects). Writes into b. */
static void normalize_path(sbuf *b, const char *p, size_t len)
{
    /* Segment start offsets into b: b holds "/seg1/seg2". */
    size_t *starts = malloc((len / 2 + 2) * sizeof *starts);
    size_t nseg = 0;
    int trailing = 0;
    if (!starts) {
        b->oom = 1;
        return;
    }
    size_t i = 0;
    while (i < len) {
        while (i < len && p[i] == '/')
            i++;
        size_t s = i;
        while (i < len && p[i] != '/')
            i++;
        size_t n = i - s;
        trailing = (i == len && n == 0) || (n == 1 && p[s] == '.') ||
                   (n == 2 && p[s] == '.' && p[s + 1] == '.');
        if (n == 0 || (n == 1 && p[s] == '.'))
            continue;
        if (n == 2 && p[s] == '.' && p[s + 1] == '.') {
            if (nseg > 0)
                b->len = starts[--nseg];
            continue;
        }
        starts[nseg++] = b->len;
        sb_putc(b, '/');
        sb_putn(b, p + s, n);
    }
    if (b->len == 0 || trailing)
        sb_putc(b, '/');
    if (!b->oom)
        b->p[b->len] = '\0';
    free(starts);
}

static char *canonical_uri(const char *path, int normalize)
{
    sbuf raw = {0}, norm = {0}, out = {0};
    const char *src;
    size_t srclen;
    if (!path || !*path)
        path = "/";
    sb_decode(&raw, path, strlen(path));
    if (raw.oom)
        return sb_take(&raw);
    src = raw.p;
    srclen = raw.len;
    if (normalize) {
        normalize_path(&norm, src, srclen);
        if (norm.oom) {
            free(raw.p);
            return sb_take(&norm);
        }
        src = norm.p;
        srclen = norm.len;
    }
    sb_encode(&out, src, srclen, 1);
    free(raw.p);
    free(norm.p);
    return sb_take(&out);
}

/* ---- canonical query ---- */

typedef struct qparam {
    char *key, *value; /* encoded */
} qparam;

static int qparam_cmp(const void *a, const void *b)
{
    const qparam *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->value, y->value);
}

static char *encode_component(const char *s, size_t len)
{
    sbuf raw = {0}, out = {0};
    sb_decode(&raw, s, len);
    if (raw.oom)
        return NULL;
    sb_encode(&out, raw.p ? raw.p : "", raw.len, 0);
    free(raw.p);
    return sb_take(&out);
}

static char *canonical_query(const char *q)
{
    sbuf out = {0};
    size_t n = 0, cap = 1;
    qparam *ps;
    if (!q || !*q)
        return strdup("");
    for (const char *c = q; *c; c++)
        cap += *c == '&';
    ps = calloc(cap, sizeof *ps);
    if (!ps)
        return NULL;
    const char *s = q;
    int oom = 0;
    while (*s && !oom) {
        const char *e = strchr(s, '&');
        size_t plen = e ? (size_t)(e - s) : strlen(s);
        if (plen > 0) {
            const char *eq = memchr(s, '=', plen);
            size_t klen = eq ? (size_t)(eq - s) : plen;
            ps[n].key = encode_component(s, klen);
            ps[n].value = eq ? encode_component(eq + 1, plen - klen - 1) : strdup("");
            oom = !ps[n].key || !ps[n].value;
            n++;
        }
        s += plen + (e ? 1 : 0);
    }
    if (!oom) {
        qsort(ps, n, sizeof *ps, qparam_cmp);
        for (size_t i = 0; i < n; i++) {
            if (i)
                sb_putc(&out, '&');
            sb_puts(&out, ps[i].key);
            sb_putc(&out, '=');
            sb_puts(&out, ps[i].value);
        }
    }
    for (size_t i = 0; i < n; i++) {
        free(ps[i].key);
        free(ps[i].value);
    }
    free(ps);
    if (oom) {
        free(out.p);
        return NULL;
    }
    return sb_take(&out);
}

/* ---- canonical headers ---- */

typedef struct chdr {
    char *name;  /* lower case */
    char *value; /* trimmed, inner whitespace runs (incl. folded lines) collapsed */
    size_t order;
} chdr;

static int chdr_cmp(const void *a, const void *b)
{
    const chdr *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static char *lower_trim(const char *s)
{
    sbuf b = {0};
    size_t len = strlen(s);
    while (len && is_ws(s[len - 1]))
        len--;
    while (len && is_ws(*s)) {
        s++;
        len--;
    }
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        sb_putc(&b, (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c);
    }
    return sb_take(&b);
}

static char *collapse_ws(const char *s)
{
    sbuf b = {0};
    int pending = 0;
    while (is_ws(*s))
        s++;
    for (; *s; s++) {
        if (is_ws(*s)) {
            pending = 1;
            continue;
        }
        if (pending)
            sb_putc(&b, ' ');
        pending = 0;
        sb_putc(&b, *s);
    }
    return sb_take(&b);
}

static const char *find_header(const chdr *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(h[i].name, name) == 0)
            return h[i].value;
    return NULL;
}

static int push_header(chdr *h, size_t *n, const char *name, const char *value)
{
    h[*n].name = lower_trim(name);
    h[*n].value = collapse_ws(value ? value : "");
    h[*n].order = *n;
    (*n)++;
    return h[*n - 1].name && h[*n - 1].value ? 0 : -1;
}

static void free_headers(chdr *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(h[i].name);
        free(h[i].value);
    }
    free(h);
}

static int valid_amz_date(const char *d)
{
    if (!d || strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z')
        return 0;
    for (int i = 0; i < 15; i++)
        if (i != 8 && (d[i] < '0' || d[i] > '9'))
            return 0;
    return 1;
}

/* ---- signing ---- */

static void hmac(const uint8_t *key, size_t keylen, const char *msg, uint8_t out[CR_SHA256_LEN])
{
    cr_hmac_sha256(key, keylen, msg, strlen(msg), out);
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
    uint8_t d[CR_SHA256_LEN];
    cr_sha256(data, len, d);
    cr_hex(d, sizeof d, out);
}

/* Derives the signing key (an HMAC chain from "AWS4" + secret over date,
 * region, service, "aws4_request") and signs sts. Returns 0 or -1 (OOM). */
static int compute_signature(const sigv4_params *p, const char *date8, const char *sts,
                             char out[65])
{
    uint8_t k[CR_SHA256_LEN], k2[CR_SHA256_LEN], sig[CR_SHA256_LEN];
    char small[256];
    size_t slen = strlen(p->secret_access_key);
    char *key = slen + 4 <= sizeof small ? small : malloc(slen + 4);
    if (!key)
        return -1;
    memcpy(key, "AWS4", 4);
    memcpy(key + 4, p->secret_access_key, slen);
    hmac((const uint8_t *)key, slen + 4, date8, k);
    /* The secret must not linger on the stack or in freed heap memory. */
    memset(key, 0, slen + 4);
    if (key != small)
        free(key);
    /* Separate buffers: the crypto layer does not promise that key and output may alias. */
    hmac(k, sizeof k, p->region, k2);
    hmac(k2, sizeof k2, p->service, k);
    hmac(k, sizeof k, "aws4_request", k2);
    hmac(k2, sizeof k2, sts, sig);
    memset(k, 0, sizeof k);
    memset(k2, 0, sizeof k2);
    cr_hex(sig, sizeof sig, out);
    return 0;
}

void sigv4_result_clear(sigv4_result *r)
{
    if (!r)
        return;
    free(r->canonical_request);
    free(r->string_to_sign);
    free(r->signed_headers);
    free(r->authorization);
    memset(r, 0, sizeof *r);
}

int sigv4_sign(const sigv4_request *req, const sigv4_params *p, sigv4_result *out)
{
    memset(out, 0, sizeof *out);
    if (!req || !p || !req->method || !p->access_key_id || !p->secret_access_key || !p->region ||
        !p->service || !valid_amz_date(p->amz_date))
        return -1;

    size_t n = 0;
    chdr *h = calloc(req->nheaders + 3, sizeof *h);
    if (!h)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < req->nheaders && rc == 0; i++)
        rc = push_header(h, &n, req->headers[i].name, req->headers[i].value);
    if (rc || !find_header(h, n, "host")) {
        free_headers(h, n);
        return -1;
    }

    /* Payload hash: explicit, else the caller's x-amz-content-sha256, else computed. */
    const char *given =
        req->payload_hash ? req->payload_hash : find_header(h, n, "x-amz-content-sha256");
    if (given && strlen(given) < sizeof out->payload_hash)
        memcpy(out->payload_hash, given, strlen(given) + 1);
    else if (req->body_len)
        sha256_hex(req->body, req->body_len, out->payload_hash);
    else
        memcpy(out->payload_hash, EMPTY_SHA256, sizeof EMPTY_SHA256);

    const char *date_hdr = find_header(h, n, "x-amz-date");
    if (date_hdr && strcmp(date_hdr, p->amz_date) != 0)
        rc = -1;
    if (rc == 0 && !date_hdr && !p->presign)
        rc = push_header(h, &n, "x-amz-date", p->amz_date);
    if (rc == 0 && p->sign_body && !find_header(h, n, "x-amz-content-sha256"))
        rc = push_header(h, &n, "x-amz-content-sha256", out->payload_hash);
    int token = p->session_token && *p->session_token;
    if (rc == 0 && token && !p->omit_session_token && !p->presign &&
        !find_header(h, n, "x-amz-security-token"))
        rc = push_header(h, &n, "x-amz-security-token", p->session_token);
    if (rc) {
        free_headers(h, n);
        return -1;
    }
    qsort(h, n, sizeof *h, chdr_cmp);

    sbuf canon = {0}, signed_h = {0};
    char *uri = canonical_uri(req->path, p->normalize_path);
    char *query = canonical_query(req->query);
    sb_puts(&canon, req->method);
    sb_putc(&canon, '\n');
    sb_puts(&canon, uri ? uri : "");
    sb_putc(&canon, '\n');
    sb_puts(&canon, query ? query : "");
    sb_putc(&canon, '\n');
    for (size_t i = 0; i < n; i++) {
        int same_as_prev = i > 0 && strcmp(h[i].name, h[i - 1].name) == 0;
        if (same_as_prev) {
            sb_putc(&canon, ',');
        } else {
            if (i > 0) {
                sb_putc(&canon, '\n');
                sb_putc(&signed_h, ';');
            }
            sb_puts(&canon, h[i].name);
            sb_putc(&canon, ':');
            sb_puts(&signed_h, h[i].name);
        }
        sb_puts(&canon, h[i].value);
    }
    sb_puts(&canon, "\n\n");
    sb_puts(&canon, signed_h.p ? signed_h.p : "");
    sb_putc(&canon, '\n');
    sb_puts(&canon, out->payload_hash);
    int bad = !uri || !query;
    free(uri);
    free(query);
    free_headers(h, n);
    out->canonical_request = sb_take(&canon);
    out->signed_headers = sb_take(&signed_h);
    if (bad || !out->canonical_request || !out->signed_headers) {
        sigv4_result_clear(out);
        return -1;
    }

    char date8[9], creq_hash[65];
    memcpy(date8, p->amz_date, 8);
    date8[8] = '\0';
    sha256_hex(out->canonical_request, strlen(out->canonical_request), creq_hash);

    sbuf scope = {0}, sts = {0}, auth = {0};
    sb_puts(&scope, date8);
    sb_putc(&scope, '/');
    sb_puts(&scope, p->region);
    sb_putc(&scope, '/');
    sb_puts(&scope, p->service);
    sb_puts(&scope, "/aws4_request");
    char *scope_s = sb_take(&scope);

    sb_puts(&sts, ALGORITHM "\n");
    sb_puts(&sts, p->amz_date);
    sb_putc(&sts, '\n');
    sb_puts(&sts, scope_s ? scope_s : "");
    sb_putc(&sts, '\n');
    sb_puts(&sts, creq_hash);
    out->string_to_sign = sb_take(&sts);
    if (!scope_s || !out->string_to_sign) {
        free(scope_s);
        sigv4_result_clear(out);
        return -1;
    }

    if (compute_signature(p, date8, out->string_to_sign, out->signature) != 0) {
        free(scope_s);
        sigv4_result_clear(out);
        return -1;
    }

    sb_puts(&auth, ALGORITHM " Credential=");
    sb_puts(&auth, p->access_key_id);
    sb_putc(&auth, '/');
    sb_puts(&auth, scope_s);
    sb_puts(&auth, ", SignedHeaders=");
    sb_puts(&auth, out->signed_headers);
    sb_puts(&auth, ", Signature=");
    sb_puts(&auth, out->signature);
    free(scope_s);
    out->authorization = sb_take(&auth);
    if (!out->authorization) {
        sigv4_result_clear(out);
        return -1;
    }
    return 0;
}

void sigv4_amz_date(time_t t, char out[17])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}
