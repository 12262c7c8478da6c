/* SPDX-License-Identifier: Apache-2.0 */
/* http_store.h - what every store that speaks HTTP shares, whatever its
 * cloud: the endpoint setting parsed, and a transfer that failed below HTTP
 * classified (issue 40 item 3: these were in aws_http.h, which the GCS,
 * Azure and etcd stores included for them). */
#ifndef S3LECT_HTTP_STORE_H
#define S3LECT_HTTP_STORE_H

#include <stdint.h>

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

#endif
