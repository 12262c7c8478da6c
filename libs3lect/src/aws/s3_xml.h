/* SPDX-License-Identifier: Apache-2.0 */
/* s3_xml.h - reading S3's answers: the XML error body and the mapping of an
 * HTTP status plus error code to a store outcome (DESIGN §5).
 *
 * Pure functions, no I/O; safe on any input bytes (fuzzed). Thread-safe.
 */
#ifndef S3LECT_S3_XML_H
#define S3LECT_S3_XML_H

#include <stddef.h>

/* Fields of an S3 error body (<Error><Code>..</Code><Message>..</Message>..).
 * Values are entity-decoded, control characters replaced by spaces, and
 * truncated (at a UTF-8 character boundary) to fit; "" when absent. */
typedef struct s3_error_body {
    char code[64];
    char message[256];
    char request_id[128];
    char bucket[128]; /* <BucketName>, sent with NoSuchBucket */
} s3_error_body;

/* Parses an error body of len bytes (need not be NUL-terminated). Returns 1
 * when a <Code> element was found, else 0 (out is then all ""). */
int s3_xml_parse_error(const char *body, size_t len, s3_error_body *out);

/* The store outcome (ST_* of store.h) for an HTTP answer with this status and
 * XML error code (NULL or "" when none):
 *   2xx → OK; 404 → NOT_FOUND, but NoSuchBucket → FATAL; 412, 409 →
 *   PRECONDITION; 401, 403 and the credential errors S3 sends as 400
 *   (ExpiredToken, InvalidToken, InvalidAccessKeyId, SignatureDoesNotMatch)
 *   → AUTH; 5xx, 429, 408, SlowDown, RequestTimeout, 307 → TRANSIENT, but
 *   501 NotImplemented → FATAL (the server lacks conditional writes); any
 *   other 3xx/4xx → FATAL (wrong region, endpoint or request). */
int s3_classify(long http_status, const char *code);

#endif
