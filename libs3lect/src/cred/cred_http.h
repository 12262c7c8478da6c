/* SPDX-License-Identifier: Apache-2.0 */
/* cred_http.h - the small HTTP client of the credential sources (cred_http.c)
 * and the OAuth2 token call on it: AWS's (STS, SSO), GCP's and Azure's token
 * providers. Bodies and header lines (which may hold tokens) are wiped
 * before they are freed; no secret ever goes into an error message.
 */
#ifndef S3LECT_CRED_HTTP_H
#define S3LECT_CRED_HTTP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cred_cache.h"

struct cJSON;

typedef struct cred_http_resp {
    long status;
    char *body; /* NUL-terminated; wiped when cleared */
    size_t len;
} cred_http_resp;

/* One request. headers: NULL-terminated "Name: value" lines (may hold
 * tokens: they are wiped). Returns 0 when an HTTP answer arrived (any
 * status), S3LECT_ETRANSIENT when none did (err says why), S3LECT_ENOMEM. */
int cred_http(const char *method, const char *url, const char *const *headers, const char *body,
              size_t body_len, const char *ca_file, int64_t timeout_ms, const _Atomic int *abort,
              cred_http_resp *out, char *err, size_t errlen);
void cred_http_resp_clear(cred_http_resp *r);

/* One request to an OAuth2 token endpoint (GCP's and Azure's sources), its
 * answer parsed by cred_parse_bearer into out. what names the endpoint in
 * messages ("the token endpoint https://..."). A refusal's message carries
 * the answer's error and error_description (or Google's error.message),
 * which hold no secret. Returns 0; S3LECT_ETRANSIENT when no answer came or
 * on 408, 429 and 5xx; S3LECT_EAUTH otherwise. */
int cred_token_call(const char *method, const char *url, const char *const *headers,
                    const char *body, const char *what, const char *ca_file, int64_t timeout_ms,
                    const _Atomic int *abort, cred_fetched *out, char *err, size_t errlen);

/* An OAuth2 token answer (GCP's and Azure's token endpoints, GCP's STS and
 * metadata server, Azure IMDS and App Service): the access token
 * (access_token, or accessToken) into out->bearer and its expiry into
 * out->expires_ms, from expires_on (seconds since the epoch, a number or a
 * string: IMDS, App Service), else expires_in (seconds, a number or a
 * string), else expireTime (RFC 3339: IAM Credentials). Returns 0 or
 * S3LECT_EAUTH (err says which field is missing), S3LECT_ENOMEM. */
int cred_parse_bearer(const char *buf, size_t len, int64_t now_ms, cred_fetched *out, char *err,
                      size_t errlen);

/* Wipes every string value of a JSON document, at any depth, then deletes
 * it (NULL is fine): answers and the documents built to send hold secrets. */
void cred_json_wipe_delete(struct cJSON *j);

#endif
