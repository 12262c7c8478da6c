/* SPDX-License-Identifier: Apache-2.0 */
/* cred_metadata.h - internals shared by the container (cred_container.c) and
 * instance-metadata (cred_imds.c) credential providers, and exposed to the
 * unit tests and fuzzers: the answer parser, URL composition and host rules,
 * and one bounded HTTP exchange. The public contract is cred_sources.h.
 */
#ifndef S3LECT_CRED_METADATA_H
#define S3LECT_CRED_METADATA_H

#include <stddef.h>
#include <stdint.h>

#include "cred_sources.h"

/* Largest answer body read from a metadata endpoint (credentials JSON). */
#define AWS_MD_MAX_BODY 65536
/* Largest authorization token (container) or IMDS session token accepted. */
#define AWS_MD_MAX_TOKEN 16384

/* Which endpoint's answer is parsed. The container endpoint's Token and
 * Expiration are optional (long-term keys from a local credentials server);
 * IMDS always sends both, and a Code that must be "Success". */
enum { AWS_MD_CONTAINER = 0, AWS_MD_IMDS = 1 };

/* Parses a credentials answer (len bytes, need not be NUL-terminated) into
 * *out: AccessKeyId, SecretAccessKey, Token, Expiration (RFC 3339), RoleArn.
 * Returns 0, S3LECT_EAUTH (err: one line naming what is wrong, never a
 * value) or S3LECT_ENOMEM. On failure *out is cleared. Wipes every copy of
 * the secrets it made. */
int aws_md_parse_creds(const char *body, size_t len, int flavour, cred_fetched *out, char *err,
                       size_t errlen);

/* Parses IMDS's answer to .../security-credentials/: the first non-empty line
 * is the role name (1..128 of [A-Za-z0-9+=,.@_-]). Returns 0 with the name in
 * role, or -1. */
int aws_md_parse_role(const char *body, size_t len, char *role, size_t rolelen);

/* The container endpoint's URL from the environment: RELATIVE_URI (which must
 * start with '/') under http://169.254.170.2, else FULL_URI when its host is
 * allowed (aws_md_full_uri_allowed). *url is allocated; *var names the
 * variable it came from; display (>= 128 bytes) gets scheme://host[:port]
 * for messages (the path may be a capability and is never shown). Returns 0,
 * S3LECT_EAUTH (err says why) or S3LECT_ENOMEM. */
int aws_md_container_url(char **url, const char **var, char *display, size_t displaylen, char *err,
                         size_t errlen);

/* 1 when FULL_URI may be fetched: https with any host; http only to a
 * literal loopback address (127.0.0.0/8, ::1), "localhost", 169.254.170.2
 * (ECS), 169.254.170.23 or fd00:ec2::23 (EKS Pod Identity). Else 0 with the
 * reason in err. */
int aws_md_full_uri_allowed(const char *url, char *err, size_t errlen);

/* The IMDS base URL (no trailing '/') into buf: AWS_EC2_METADATA_SERVICE_ENDPOINT,
 * else by AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE (IPv4 default, IPv6).
 * Returns 0 or S3LECT_EAUTH (an invalid endpoint or mode; err says which). */
int aws_md_imds_endpoint(char *buf, size_t buflen, char *err, size_t errlen);

/* 1 when the environment variable is "true" in any case. */
int aws_md_env_true(const char *name);

/* One HTTP exchange, bounded by deadline_ms (u_mono_ms). */
typedef struct aws_md_req {
    const char *url;
    int put;                  /* PUT with an empty body, else GET */
    const char *header_name;  /* optional extra header (may carry a secret) */
    const char *header_value; /* wiped from libcurl's copy after the exchange */
    const char *header2_name; /* optional second header, not secret */
    const char *header2_value;
    size_t max_body; /* larger answers fail */
    int64_t deadline_ms;
} aws_md_req;

typedef struct aws_md_resp {
    long status; /* 0 when no answer */
    char *body;  /* NUL-terminated, allocated (wipe: may hold secrets) */
    size_t len;
    int timed_out;
    int too_large;
    char why[160]; /* libcurl's generic reason when no answer */
} aws_md_resp;

/* Returns 0 when an HTTP answer arrived (any status), -1 otherwise (resp->why,
 * resp->timed_out), S3LECT_ENOMEM. Never follows redirects; never goes
 * through a proxy for loopback or link-local metadata hosts. */
int aws_md_http(void *curl, const aws_md_req *req, aws_md_resp *resp);
void aws_md_resp_clear(aws_md_resp *resp);
/* curl_easy_init after libcurl's global init (once per process). */
void *aws_md_curl_new(void);
void aws_md_curl_free(void *curl);

/* Reads a small file (at most max bytes) into an allocated NUL-terminated
 * string, trailing whitespace removed. Returns 0, -1 with errno set, or -2
 * when larger than max. */
int aws_md_read_small_file(const char *path, size_t max, char **out);

#endif
