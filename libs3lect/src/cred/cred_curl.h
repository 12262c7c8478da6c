/* SPDX-License-Identifier: Apache-2.0 */
/* cred_curl.h - the libcurl pieces (on base/http.h) that both HTTP helpers
 * of the credential sources use: cred_http (cred_http.c: STS, SSO) and aws_md_http
 * (cred_metadata.c: container and instance metadata). Defined in
 * cred_http.c. Every buffer that may hold a secret is wiped before it is
 * freed. */
#ifndef S3LECT_CRED_CURL_H
#define S3LECT_CRED_CURL_H

#include <curl/curl.h>
#include <stddef.h>

#include "http.h"

/* Sets up e for one exchange: the URL, no signals, timeout_ms for the whole
 * exchange and for connecting, no redirects, http and https only, s3lect's
 * User-Agent (http_easy_common), the header list hl, and the body into
 * *sink (http.h: wiped when cleared). */
void cred_curl_setup(CURL *e, const char *url, long timeout_ms, struct curl_slist *hl,
                     http_body *sink);

/* Performs the exchange set up on e; *status gets the HTTP status (0 when
 * no answer). The header lines (which may hold tokens) are wiped and freed
 * afterwards, and e no longer refers to them. */
CURLcode cred_curl_perform(CURL *e, struct curl_slist *hl, long *status);

/* Wipes every line of a header list and frees it (NULL is fine). */
void cred_curl_slist_wipe_free(struct curl_slist *hl);

#endif
