/* SPDX-License-Identifier: Apache-2.0 */
/* sigv4.h - AWS Signature Version 4, header signing (DESIGN §5).
 *
 * Pure functions over the crypto layer: no I/O, no clock, no globals, so the
 * signer is checked byte for byte against the AWS test suite
 * (tests/data/aws-sigv4). Thread-safe.
 */
#ifndef S3LECT_SIGV4_H
#define S3LECT_SIGV4_H

#include <stddef.h>
#include <time.h>

typedef struct sigv4_header {
    const char *name; /* any case; duplicates are joined with ',' in order */
    const char *value;
} sigv4_header;

typedef struct sigv4_request {
    const char *method; /* "GET", "PUT", ... */
    /* Path as sent on the wire (percent-encoded) or raw: it is decoded and
     * re-encoded, so both give the same canonical URI. No query part. */
    const char *path;
    const char *query; /* without '?'; NULL or "" for none */
    /* Headers to sign (must include host). x-amz-date, x-amz-content-sha256
     * (when sign_body) and x-amz-security-token (unless omitted) are added to
     * the signed set when absent; the caller must then send them too. */
    const sigv4_header *headers;
    size_t nheaders;
    const void *body; /* payload, hashed unless payload_hash is given */
    size_t body_len;
    /* Lower-case hex SHA-256 of the body (or "UNSIGNED-PAYLOAD"). NULL: taken
     * from an x-amz-content-sha256 header if present, else computed. */
    const char *payload_hash;
} sigv4_request;

typedef struct sigv4_params {
    const char *access_key_id;
    const char *secret_access_key;
    const char *session_token; /* NULL or "" for none */
    const char *region;
    const char *service;  /* "s3" */
    const char *amz_date; /* "YYYYMMDDTHHMMSSZ" (see sigv4_amz_date) */
    /* Remove "." and ".." segments and empty segments from the path. Every
     * service but S3 does; S3 signs the path exactly as sent. */
    int normalize_path;
    /* Sign the payload hash in an x-amz-content-sha256 header (S3 does). */
    int sign_body;
    /* Leave x-amz-security-token out of the signature (some services want it
     * added after signing); the caller still sends it. */
    int omit_session_token;
    /* A presigned request (query-string authentication): the caller's query
     * carries X-Amz-Algorithm, -Credential, -Date, -Expires, -SignedHeaders
     * (and -Security-Token), so x-amz-date and x-amz-security-token are not
     * added to the signed headers; authorization is then of no use. */
    int presign;
} sigv4_params;

typedef struct sigv4_result {
    char *canonical_request; /* allocated; for tests and debugging, never log it with secrets */
    char *string_to_sign;    /* allocated */
    char *signed_headers;    /* allocated: "host;x-amz-date" */
    char *authorization;     /* allocated: value of the Authorization header */
    char signature[65];      /* lower-case hex */
    char payload_hash[65];   /* the hash that was signed (or "UNSIGNED-PAYLOAD") */
} sigv4_result;

/* Signs a request. Returns 0, or -1 on bad input (missing host header,
 * malformed amz_date, x-amz-date header disagreeing with amz_date) or out of
 * memory. On success the caller frees *out with sigv4_result_clear(); on
 * failure *out holds nothing to free. */
int sigv4_sign(const sigv4_request *req, const sigv4_params *p, sigv4_result *out);
void sigv4_result_clear(sigv4_result *r);

/* Formats t (UTC) as "YYYYMMDDTHHMMSSZ". */
void sigv4_amz_date(time_t t, char out[17]);

/* Percent-encodes len bytes of in the way SigV4 and S3 want: everything but
 * A-Z a-z 0-9 - . _ ~ becomes %XX (upper-case hex); '/' is kept when
 * keep_slash. Returns an allocated string or NULL on out of memory. */
char *sigv4_uri_encode(const char *in, size_t len, int keep_slash);

#endif
