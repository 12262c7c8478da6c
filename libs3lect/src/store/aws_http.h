/* SPDX-License-Identifier: Apache-2.0 */
/* aws_http.h - what the AWS stores (S3, DynamoDB, Route 53) share: the
 * credential handle a store signs with, endpoint parsing, one signed libcurl
 * request and its captured response, and transport-failure messages.
 *
 * Nothing here logs; messages never contain a secret, a session token or a
 * signature (header lists holding a token are wiped when freed).
 */
#ifndef S3LECT_AWS_HTTP_H
#define S3LECT_AWS_HTTP_H

#include <curl/curl.h>
#include <stdint.h>

#include "aws_creds.h"
#include "config.h"
#include "http.h"
#include "sigv4.h"
#include "http_store.h"
#include "store.h"

/* ---- credentials ---- */

/* A store's handle on the process's shared credential cache entry. A copy of
 * the current credentials is taken for each request without waiting for a
 * refresh. After an AUTH answer (ah_signer_refused) a static source is
 * resolved again and a refreshed one is refreshed once, in the background. */
typedef struct ah_signer {
    struct s3lect_config credcfg; /* only the credential fields are set */
    cred_cache *chain;
    aws_creds creds; /* the copy the current request is signed with */
    uint64_t creds_gen;
    uint64_t creds_failures_seen; /* refresh failures already reported */
    int64_t creds_warned_at;      /* mono ms of the last such report */
    int creds_stale;
} ah_signer;

/* Copies cfg's credential settings and opens the chain (fails early, with a
 * message saying what to set, when there are no credentials). */
int ah_signer_open(ah_signer *g, const struct s3lect_config *cfg, char *err, size_t errlen);
void ah_signer_clear(ah_signer *g);
/* Takes the current credentials into g->creds. Returns 0, or -1 with out
 * set (AUTH or TRANSIENT). A refresh failure while the current credentials
 * are still valid becomes out->warning, at most once a minute. */
int ah_signer_creds(ah_signer *g, st_result *out);
/* The service refused the credentials: re-resolve before the next request. */
static inline void ah_signer_refused(ah_signer *g)
{
    g->creds_stale = 1;
}

/* ---- one request ---- */

#define AH_MAX_BODY (1024 * 1024)

typedef struct ah_response {
    http_body data; /* at most AH_MAX_BODY: a longer one is cut (data.too_large) */
    char etag[512];
    char bucket_region[64];
    char date[64], last_modified[64]; /* the Date and Last-Modified headers */
} ah_response;

typedef struct ah_request {
    const char *method;  /* "GET", "PUT", "POST" */
    const char *origin;  /* "scheme://host[:port]" */
    const char *host;    /* Host header */
    const char *path;    /* as sent (percent-encoded) */
    const char *query;   /* without '?', or NULL */
    const char *service; /* SigV4 service: "s3", "dynamodb", "route53" */
    const char *region;
    const sigv4_header *headers; /* extra headers to send and sign */
    size_t nheaders;
    const void *body;
    size_t body_len;
    int s3; /* S3 signing: path as is, x-amz-content-sha256 signed */
    int64_t timeout_ms;
    const char *ca_file;
} ah_request;

/* The state of one request prepared on a libcurl easy handle. */
typedef struct ah_call {
    CURL *easy;
    struct curl_slist *headers; /* may hold the session token: wiped when freed */
    ah_response resp;
    char errbuf[CURL_ERROR_SIZE];
} ah_call;

/* Signs rq with g's current credentials (ah_signer_creds first) and sets it
 * up on easy (reset first; keep-alive connections stay in the handle or the
 * runtime's multi). Returns 0, or -1 with out set. */
int ah_call_prepare(ah_call *c, void *easy, ah_signer *g, const ah_request *rq, st_result *out);
/* Detaches the handle from c and frees what c holds (wiping the headers). */
void ah_call_release(ah_call *c);
/* Did the transfer fail below HTTP (a CURLcode other than OK or our own cut
 * of an over-long body)? */
int ah_call_transport_failed(const ah_call *c, int curl_code);

/* ---- one AWS service as a store talks to it ---- */

typedef struct ah_service {
    char *endpoint_desc; /* for messages: "http://127.0.0.1:9000" or "AWS S3 (us-east-1)" */
    char *origin;        /* "scheme://host[:port]" the requests go to */
    char *host;          /* Host header */
    char *base_path;     /* the endpoint's path ("" or "/prefix"; S3 adds "/bucket") */
    char *region;        /* the region requests are signed for */
    char *ca_file;
    int64_t default_timeout_ms;
    ah_signer signer;
} ah_service;

/* libcurl, the default timeout (the request timeout setting, else
 * default_ms), the region (fixed_region, else the configured one, checked)
 * and the CA bundle. On failure v holds nothing to free. */
int ah_service_init(ah_service *v, const struct s3lect_config *cfg, const char *fixed_region,
                    int64_t default_ms, char *err, size_t errlen);
/* origin, host, base_path and endpoint_desc from the configured endpoint
 * (url; what names it in messages) or, without one, aws_url described as
 * aws_desc. */
int ah_service_endpoint(ah_service *v, const char *url, const char *aws_url, const char *what,
                        const char *aws_desc, char *err, size_t errlen);
void ah_service_clear(ah_service *v);

#endif
