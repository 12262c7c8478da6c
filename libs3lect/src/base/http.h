/* SPDX-License-Identifier: Apache-2.0 */
/* http.h - what every libcurl user in s3lect shares (the credential
 * fetches, the peer client, the AWS stores and the runtime that drives
 * their transfers): libcurl's global initialisation, once per process; the
 * response-body accumulator; and the easy-handle options every request
 * sets. Each user adds its own options (TLS trust, headers, methods) after
 * http_easy_common. */
#ifndef S3LECT_HTTP_H
#define S3LECT_HTTP_H

#include <curl/curl.h>
#include <stddef.h>

/* libcurl's global initialisation, once per process (the first call does
 * it; later calls return its result). Returns 0, or S3LECT_EIO and writes
 * why into err (when err is not NULL). */
int http_global_init(char *err, size_t errlen);

/* A response body, collected by the write callback http_easy_common sets:
 * NUL-terminated in body (NULL when nothing arrived), at most max bytes. A
 * longer answer keeps its first max bytes, sets too_large and aborts the
 * transfer (CURLE_WRITE_ERROR); running out of memory sets oom and aborts
 * it too. The buffer grows by copy and old buffers are wiped, so a body
 * that holds a secret (credentials) leaves no copy behind. */
typedef struct http_body {
    char *body;
    size_t len, cap, max;
    int too_large, oom;
} http_body;

/* Wipes and frees the body and zeroes b except for max. */
void http_body_clear(http_body *b);

/* Sets the options every request has: the URL, no signals, total_ms for the
 * whole exchange and connect_ms for connecting, s3lect's User-Agent, errbuf
 * (CURL_ERROR_SIZE bytes, or NULL) for libcurl's message, and the body into
 * *body. Call after curl_easy_reset. */
void http_easy_common(CURL *e, const char *url, long total_ms, long connect_ms, char *errbuf,
                      http_body *body);

/* The options a store's request adds after http_easy_common (and its TLS
 * trust): HTTP/1.1 with TCP keep-alive, the header list hl, on_header with
 * ud for the response's header lines (NULL: none), and the method: "GET",
 * or with body (len bytes, copied by libcurl) "POST" or any other
 * (CURLOPT_CUSTOMREQUEST). method NULL leaves the method to the caller. */
void http_easy_request(CURL *e, struct curl_slist *hl, curl_write_callback on_header, void *ud,
                       const char *method, const void *body, size_t len);
/* Did a transfer fail below HTTP: a CURLcode other than OK and other than
 * the abort of an over-long body (b->too_large, which the caller judges
 * from the status and the first max bytes)? */
int http_transport_failed(int curl_code, const http_body *b);

/* Request header lists that may hold a secret (a token, a signature):
 * http_header_add appends "name: value" (wiping its own copy of the line),
 * or with value NULL "name:", which removes libcurl's own header of that
 * name (Expect:, Accept:); out of memory sets *oom, and once *oom is set it adds nothing.
 * http_headers_free wipes every line and frees the list (NULL: nothing). */
void http_header_add(struct curl_slist **hl, int *oom, const char *name, const char *value);
void http_headers_free(struct curl_slist *hl);

/* The CA bundle to trust for public TLS when none is configured: NULL when
 * libcurl's own default (its built-in CA file or directory) is there, else
 * SSL_CERT_FILE when set and readable, else the first readable of the
 * distributions' usual bundle files (Debian, RHEL and Amazon Linux, SUSE,
 * Alpine). A libcurl built elsewhere (the release wheel and static CLI
 * name Debian's path) then still trusts the system's CAs on RHEL; none
 * found: NULL, and verification fails as before (never open). Computed
 * once per process. */
const char *http_system_ca(void);

/* The one rule for the CA bundle a connection to a server trusts: ca_file
 * (the configured one) when given, else the system's (http_system_ca);
 * NULL: the TLS library's own default. http_set_ca sets it on e
 * (CURLOPT_CAINFO) when there is one. */
const char *http_ca(const char *ca_file);
void http_set_ca(CURL *e, const char *ca_file);

/* A response header line's value (what follows the name_len bytes of
 * "Name:") without surrounding blanks or the line end, as a NUL-terminated
 * string cut to cap bytes (for libcurl's header callbacks; line is not
 * NUL-terminated, n is its length). */
void http_header_value(const char *line, size_t n, size_t name_len, char *dst, size_t cap);
/* The choice http_system_ca makes, from the given built-in file and
 * directory (NULL: none), SSL_CERT_FILE's value and candidates (tests). */
const char *http_pick_ca(const char *builtin_file, const char *builtin_dir, const char *env_file,
                         const char *const *cands, size_t n);

#endif
