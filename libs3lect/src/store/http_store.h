/* SPDX-License-Identifier: Apache-2.0 */
/* http_store.h - what every store that speaks HTTP shares, whatever its
 * cloud: the endpoint setting parsed, a transfer that failed below HTTP
 * classified, the start of a finish, an error answer's detail, a 2xx
 * answer made into the result, and a bearer token taken from the shared
 * credential cache (issue 40 item 3: the S3, DynamoDB, Route 53, GCS,
 * Azure and etcd stores each had their own copy). Which status means which
 * outcome stays each store's own: the services differ there. */
#ifndef S3LECT_HTTP_STORE_H
#define S3LECT_HTTP_STORE_H

#include <stdint.h>

#include "cred_cache.h"
#include "http.h"
#include "store.h"

/* ---- endpoints ---- */

typedef struct st_endpoint {
    int https;
    char *host;      /* without brackets for IPv6, lower case */
    char *authority; /* host[:port] as it goes in the Host header (brackets kept) */
    char *base_path; /* "" or "/prefix" without trailing slash */
} st_endpoint;

/* Parses "http(s)://host[:port][/path]". what names the setting in messages
 * ("S3 endpoint"). */
int st_endpoint_parse(const char *url, const char *what, st_endpoint *e, char *err, size_t errlen);
void st_endpoint_clear(st_endpoint *e);

/* Fills out for a transfer that failed below HTTP: TRANSIENT (timeouts,
 * refused or reset connections) or FATAL (bad URL, TLS verification). what
 * names the request ("GET s3://b/k"), where the server ("AWS S3 (eu-west-1)"). */
void st_transport_failure(int curl_code, const char *errbuf, const char *what, const char *where,
                          int64_t timeout_ms, st_result *out);

/* ---- answers ---- */

/* The start of every finish: clears out but keeps out->warning (set by
 * begin: a failed credential refresh), and returns the HTTP status of the
 * transfer on easy (0 when none came), also put in out->http_status. */
long st_http_finish_start(void *easy, st_result *out);

/* An error answer's detail for messages, into out: "HTTP 503: message"
 * with the service's own message (NULL: none), else "HTTP 503: line" with
 * the first line of a short body that is neither XML nor JSON, else
 * "HTTP 503". */
void st_http_detail(const http_body *b, long status, const char *message, char *out, size_t n);

/* A 2xx answer into out: the etag and, for a read (body not NULL), the
 * body and the store's clock, Date as server_now_ms and Last-Modified as
 * server_modified_ms (whole seconds: server_res_ms 1000) when both parse,
 * else neither (docs/algorithm.md "The store's clock"). OK, or TRANSIENT
 * when out of memory. */
void st_result_http_ok(st_result *out, const char *etag, const http_body *body, const char *date,
                       const char *last_modified);

/* ---- bearer tokens (GCS, Azure's Entra ID) ---- */

/* A store's handle on the process's shared token cache entry. */
typedef struct st_bearer {
    cred_cache *chain;      /* NULL: no token (an emulator, or another credential) */
    uint64_t gen;           /* the generation of the token last taken */
    uint64_t failures_seen; /* refresh failures already reported */
    int64_t warned_at;      /* mono ms of the last such report */
    int stale;              /* the last token was refused: ask for a fresh one */
} st_bearer;

/* The token for the next request into *token (allocated, a secret: wipe
 * it; NULL without a chain). Returns 0, or -1 with out set (AUTH or
 * TRANSIENT, "; will retry"). A refresh failure while the current token is
 * still valid becomes out->warning, at most once a minute. */
int st_bearer_take(st_bearer *b, char **token, st_result *out);
/* The service refused the token: the next take asks for a fresh one. */
static inline void st_bearer_refused(st_bearer *b)
{
    b->stale = 1;
}
/* Releases the chain (NULL: nothing). */
void st_bearer_clear(st_bearer *b);

#endif
