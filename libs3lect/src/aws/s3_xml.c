/* SPDX-License-Identifier: Apache-2.0 */
/* s3_xml.c - S3 error bodies and status classification.
 *
 * No XML library: S3 error documents are flat, and all we want is the text
 * of a few elements. The scanner never reads past len, never recurses and
 * copies at most the destination size, so any byte string is safe.
 */
#include "s3_xml.h"

#include <string.h>

#include "s3lect.h"

/* Appends the UTF-8 encoding of code point cp to dst. */
static size_t put_utf8(char *dst, size_t room, unsigned long cp)
{
    unsigned char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (unsigned char)(0xF0 | (cp >> 18));
        b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    if (n > room)
        return 0;
    memcpy(dst, b, n);
    return n;
}

/* Decodes an entity starting at s[0] == '&' (at most end - s bytes). On
 * success writes the code point to *cp and returns the entity's length;
 * returns 0 when it is not an entity we know (the '&' is then kept). */
static size_t decode_entity(const char *s, const char *end, unsigned long *cp)
{
    static const struct {
        const char *name;
        char ch;
    } named[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
    size_t avail = (size_t)(end - s) - 1;
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        size_t n = strlen(named[i].name);
        if (avail >= n && memcmp(s + 1, named[i].name, n) == 0) {
            *cp = (unsigned char)named[i].ch;
            return n + 1;
        }
    }
    if (avail >= 3 && s[1] == '#') {
        int hex = s[2] == 'x' || s[2] == 'X';
        size_t i = hex ? 3 : 2;
        unsigned long v = 0;
        size_t digits = 0;
        for (; s + i < end && digits < 8; i++, digits++) {
            char c = s[i];
            int d = c >= '0' && c <= '9'          ? c - '0'
                    : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                  : -1;
            if (d < 0)
                break;
            v = v * (hex ? 16 : 10) + (unsigned long)d;
        }
        if (digits > 0 && s + i < end && s[i] == ';' && v > 0 && v <= 0x10FFFF &&
            !(v >= 0xD800 && v <= 0xDFFF)) {
            *cp = v;
            return i + 1;
        }
    }
    return 0;
}

/* C0 and C1 control characters (C1 includes the 8-bit terminal CSI). */
static int is_control(unsigned long cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp < 0xA0);
}

/* Length of the well-formed UTF-8 sequence at s (1..4), or 0 if the bytes
 * there are not one. */
static size_t utf8_seq_len(const char *s, const char *end)
{
    unsigned char c = (unsigned char)*s;
    size_t n = c < 0x80                ? 1
               : c >= 0xC2 && c < 0xE0 ? 2
               : c >= 0xE0 && c < 0xF0 ? 3
               : c >= 0xF0 && c < 0xF5 ? 4
                                       : 0;
    if (n == 0 || n > (size_t)(end - s))
        return 0;
    /* No overlong forms, surrogates or code points past U+10FFFF (RFC 3629). */
    unsigned char c1 = n > 1 ? (unsigned char)s[1] : 0;
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
        (c == 0xF4 && c1 > 0x8F))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

/* Copies the text s[0..n) into dst (size cap), decoding entities, turning
 * control characters into spaces and invalid UTF-8 bytes into '?', trimming surrounding whitespace,
 * and never cutting a UTF-8 sequence in half. */
static void copy_text(char *dst, size_t cap, const char *s, size_t n)
{
    const char *end = s + n;
    size_t len = 0;
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n'))
        s++;
    while (s < end && len + 1 < cap) {
        unsigned long cp;
        size_t used;
        if (*s == '&' && (used = decode_entity(s, end, &cp)) > 0) {
            size_t w = put_utf8(dst + len, cap - 1 - len, is_control(cp) ? ' ' : cp);
            if (w == 0)
                break;
            len += w;
            s += used;
            continue;
        }
        unsigned char c = (unsigned char)*s;
        size_t seq = utf8_seq_len(s, end);
        if (len + (seq ? seq : 1) + 1 > cap)
            break;
        if (seq == 0) { /* not UTF-8: keep the message printable */
            dst[len++] = '?';
            seq = 1;
        } else if (seq == 1) {
            dst[len++] = is_control(c) ? ' ' : (char)c;
        } else if (seq == 2 && is_control(((c & 0x1Fu) << 6) | ((unsigned char)s[1] & 0x3Fu))) {
            dst[len++] = ' ';
        } else {
            memcpy(dst + len, s, seq);
            len += seq;
        }
        s += seq;
    }
    while (len > 0 && dst[len - 1] == ' ')
        len--;
    dst[len] = '\0';
}

static const char *find_byte(const char *s, const char *end, char c)
{
    const void *p = memchr(s, c, (size_t)(end - s));
    return p ? p : end;
}

int s3_xml_parse_error(const char *body, size_t len, s3_error_body *out)
{
    static const struct {
        const char *tag;
        size_t off, cap;
    } fields[] = {
        {"Code", offsetof(s3_error_body, code), sizeof out->code},
        {"Message", offsetof(s3_error_body, message), sizeof out->message},
        {"RequestId", offsetof(s3_error_body, request_id), sizeof out->request_id},
        {"BucketName", offsetof(s3_error_body, bucket), sizeof out->bucket},
    };
    enum { NFIELDS = sizeof fields / sizeof fields[0] };
    int seen[NFIELDS] = {0};
    memset(out, 0, sizeof *out);
    if (!body)
        return 0;
    const char *s = body, *end = body + len;
    while (s < end) {
        s = find_byte(s, end, '<');
        if (s >= end)
            break;
        const char *name = s + 1;
        const char *gt = find_byte(name, end, '>');
        if (gt >= end)
            break;
        s = gt + 1;
        /* Only plain opening tags (<Name> or <Name attr...>) start a field. */
        if (name < gt && (*name == '/' || *name == '?' || *name == '!'))
            continue;
        size_t nlen = 0;
        while (name + nlen < gt && name[nlen] != ' ' && name[nlen] != '\t' && name[nlen] != '\r' &&
               name[nlen] != '\n' && name[nlen] != '/')
            nlen++;
        if (gt[-1] == '/') /* <Empty/> */
            continue;
        for (int i = 0; i < NFIELDS; i++) {
            if (seen[i] || nlen != strlen(fields[i].tag) || memcmp(name, fields[i].tag, nlen) != 0)
                continue;
            const char *text_end = find_byte(s, end, '<');
            copy_text((char *)out + fields[i].off, fields[i].cap, s, (size_t)(text_end - s));
            seen[i] = 1;
            s = text_end;
            break;
        }
    }
    return out->code[0] != '\0';
}

static int code_is(const char *code, const char *want)
{
    return code && strcmp(code, want) == 0;
}

int s3_classify(long status, const char *code)
{
    if (status >= 200 && status < 300)
        return S3LECT_STORE_OK;
    if (code_is(code, "SlowDown") || code_is(code, "RequestTimeout") ||
        code_is(code, "InternalError") || code_is(code, "ServiceUnavailable"))
        return S3LECT_STORE_TRANSIENT;
    if (code_is(code, "ExpiredToken") || code_is(code, "InvalidToken") ||
        code_is(code, "TokenRefreshRequired") || code_is(code, "InvalidAccessKeyId") ||
        code_is(code, "SignatureDoesNotMatch") || code_is(code, "AccessDenied"))
        return S3LECT_STORE_AUTH;
    switch (status) {
    case 404:
        return code_is(code, "NoSuchBucket") ? S3LECT_STORE_FATAL : S3LECT_STORE_NOT_FOUND;
    case 409: /* ConditionalRequestConflict: raced another conditional write;
               * whether it landed is unknown, so it is read back (transient) */
        return S3LECT_STORE_TRANSIENT;
    case 412:
        return S3LECT_STORE_PRECONDITION;
    case 401:
    case 403:
        return S3LECT_STORE_AUTH;
    case 307: /* S3 redirects for a while after a bucket is created */
    case 408:
    case 429:
        return S3LECT_STORE_TRANSIENT;
    case 501:
        return S3LECT_STORE_FATAL;
    default:
        break;
    }
    if (status >= 500 && status < 600)
        return S3LECT_STORE_TRANSIENT;
    if (status >= 300 && status < 500)
        return S3LECT_STORE_FATAL;
    return S3LECT_STORE_TRANSIENT;
}
