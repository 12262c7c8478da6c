/* SPDX-License-Identifier: Apache-2.0 */
/* cred_curl.h - the libcurl pieces that both HTTP helpers of the credential
 * sources use: aws_http (cred_http.c: STS, SSO) and aws_md_http
 * (cred_metadata.c: container and instance metadata). Defined in
 * cred_http.c. Every buffer that may hold a secret is wiped before it is
 * freed. */
#ifndef S3LECT_CRED_CURL_H
#define S3LECT_CRED_CURL_H

#include <curl/curl.h>
#include <stddef.h>

/* libcurl's global initialisation, once per process. Returns 0, or -1 when
 * it failed. */
int aws_curl_global_init(void);

/* An answer body collected by aws_curl_on_body: NUL-terminated in buf, at
 * most max bytes (a larger answer sets too_large and aborts the transfer;
 * running out of memory sets oom). The buffer grows by copy, so no unwiped
 * old buffer is left behind. */
typedef struct aws_body_sink {
    char *buf;
    size_t len, cap, max;
    int too_large, oom;
} aws_body_sink;

/* Wipes and frees the body and zeroes the sink. */
void aws_body_sink_clear(aws_body_sink *s);

/* Sets up e for one exchange: the URL, no signals, timeout_ms for the whole
 * exchange and for connecting, no redirects, http and https only, s3lect's
 * User-Agent, the header list hl, and the body into *sink. */
void aws_curl_setup(CURL *e, const char *url, long timeout_ms, struct curl_slist *hl,
                    aws_body_sink *sink);

/* Performs the exchange set up on e; *status gets the HTTP status (0 when
 * no answer). The header lines (which may hold tokens) are wiped and freed
 * afterwards, and e no longer refers to them. */
CURLcode aws_curl_perform(CURL *e, struct curl_slist *hl, long *status);

/* Wipes every line of a header list and frees it (NULL is fine). */
void aws_curl_slist_wipe_free(struct curl_slist *hl);

#endif
