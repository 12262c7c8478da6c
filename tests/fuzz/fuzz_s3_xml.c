/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_s3_xml.c - the S3 XML error parser and status classifier (s3_xml.c).
 *
 * Properties:
 * - s3_xml_parse_error never crashes and never reads past len;
 * - it returns 1 exactly when a code was found;
 * - every field is NUL-terminated inside its array, is well-formed UTF-8
 *   (no overlong forms, surrogates or code points past U+10FFFF) and holds
 *   no C0/C1 control characters (messages are printed to terminals), and
 *   has no trailing spaces;
 * - parsing is deterministic, and parsing a copy followed by more bytes
 *   after the closing </Error> finds the same code;
 * - s3_classify maps any status and code to one of the store outcomes.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "s3_xml.h"
#include "store.h"

/* Length of a well-formed UTF-8 sequence at s (RFC 3629), 0 if ill-formed. */
static size_t wf_utf8(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (n > avail || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

static void check_field(const char *f, size_t cap, const char *name)
{
    const char *nul = memchr(f, '\0', cap);
    FUZZ_CHECK(nul != NULL, "%s not NUL-terminated", name);
    size_t len = (size_t)(nul - f);
    const unsigned char *s = (const unsigned char *)f;
    for (size_t i = 0; i < len;) {
        size_t n = wf_utf8(s + i, len - i);
        FUZZ_CHECK(n > 0, "%s: ill-formed UTF-8 at byte %zu: \"%s\"", name, i, f);
        FUZZ_CHECK(!(n == 1 && (s[i] < 0x20 || s[i] == 0x7F)), "%s: control byte 0x%02x", name,
                   s[i]);
        FUZZ_CHECK(!(n == 2 && s[i] == 0xC2 && s[i + 1] < 0xA0), "%s: C1 control U+%04X", name,
                   s[i + 1]);
        i += n;
    }
    FUZZ_CHECK(len == 0 || f[len - 1] != ' ', "%s: trailing space: \"%s\"", name, f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    s3_error_body e, e2;
    int found = s3_xml_parse_error((const char *)data, size, &e);
    FUZZ_CHECK(found == 0 || found == 1, "returned %d", found);
    check_field(e.code, sizeof e.code, "code");
    check_field(e.message, sizeof e.message, "message");
    check_field(e.request_id, sizeof e.request_id, "request_id");
    check_field(e.bucket, sizeof e.bucket, "bucket");
    FUZZ_CHECK(found == (e.code[0] != '\0'), "return value %d but code \"%s\"", found, e.code);
    /* (Without a code the other fields may still be filled: the store shows
     * a <Message> even from a body without <Code>.) */

    FUZZ_CHECK(s3_xml_parse_error((const char *)data, size, &e2) == found &&
                   memcmp(&e, &e2, sizeof e) == 0,
               "not deterministic");

    /* Bytes after a complete document do not change its code. */
    static const char close_tag[] = "</Error>";
    const char *end = size >= 8 ? memmem(data, size, close_tag, 8) : NULL;
    if (end) {
        size_t keep = (size_t)(end - (const char *)data) + 8;
        char *copy = malloc(keep + 32);
        FUZZ_CHECK(copy != NULL, "oom");
        memcpy(copy, data, keep);
        memcpy(copy + keep, "<Code>Trailer</Code>garbage&#1", 30);
        s3_xml_parse_error(copy, keep, &e2); /* exactly the document */
        s3_error_body e3;
        s3_xml_parse_error(copy, keep + 30, &e3);
        if (e2.code[0])
            FUZZ_CHECK(strcmp(e2.code, e3.code) == 0, "trailing bytes changed code %s -> %s",
                       e2.code, e3.code);
        free(copy);
    }

    /* The classifier: any status (from the first bytes) with the parsed code. */
    long status = size >= 2 ? (long)((data[0] << 8 | data[1]) % 1000) : 500;
    int st = s3_classify(status, found ? e.code : NULL);
    FUZZ_CHECK(st == ST_OK || st == ST_NOT_FOUND || st == ST_PRECONDITION || st == ST_AUTH ||
                   st == ST_TRANSIENT || st == ST_FATAL,
               "s3_classify(%ld, %s) = %d", status, e.code, st);
    FUZZ_CHECK(!(status >= 200 && status < 300) || st == ST_OK, "2xx not OK");
    FUZZ_CHECK(s3_classify(status, "SlowDown") == ST_TRANSIENT || (status >= 200 && status < 300),
               "SlowDown not transient for %ld", status);
    return 0;
}
