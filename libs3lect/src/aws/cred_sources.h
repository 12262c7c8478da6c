/* SPDX-License-Identifier: Apache-2.0 */
/* cred_sources.h - the pieces the credential chain (cred_chain.c) is built
 * from (on the cache of cred_cache.h and the HTTP client of cred_http.h):
 * the shared files' sections, STS, the credential process, SSO, and the providers
 * that talk to a metadata endpoint (cred_container.c: ECS and EKS Pod
 * Identity; cred_imds.c: EC2 instance metadata, IMDSv2). Internal to the
 * credential layers (aws, gcp, azure).
 *
 * Every fetch blocks for at most its timeout and gives up early when *abort
 * becomes non-zero (the chain's refresher is stopping). Errors are one line
 * that says what failed and what to do; no secret, token or signature ever
 * goes into one.
 */
#ifndef S3LECT_CRED_SOURCES_H
#define S3LECT_CRED_SOURCES_H

#include <stddef.h>
#include <stdint.h>

#include "cred_cache.h"
#include "cred_http.h"

/* ---- container credentials (cred_container.c) ---- */

/* 1 when AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or
 * AWS_CONTAINER_CREDENTIALS_FULL_URI is set (non-empty). */
int aws_container_configured(void);

/* GET the container credentials endpoint: http://169.254.170.2 + RELATIVE_URI,
 * or FULL_URI (allowed hosts as the AWS SDKs allow them: https anywhere;
 * http only to loopback, 169.254.170.2 (ECS) and 169.254.170.23 / fd00:ec2::23
 * (EKS Pod Identity)), with the Authorization header from
 * AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (re-read every call) or
 * AWS_CONTAINER_AUTHORIZATION_TOKEN. Parses AccessKeyId, SecretAccessKey,
 * Token, Expiration (RFC 3339), and RoleArn where present.
 * Returns 0, S3LECT_EAUTH (refused, host not allowed, malformed answer) or
 * S3LECT_ETRANSIENT (no answer, 5xx, timeout). */
int aws_container_fetch(int64_t timeout_ms, cred_fetched *out, char *err, size_t errlen);

/* ---- EC2 instance metadata (cred_imds.c) ---- */

/* 0 when AWS_EC2_METADATA_DISABLED is "true" (any case), else 1. */
int aws_imds_enabled(void);

/* IMDSv2: PUT /latest/api/token (X-aws-ec2-metadata-token-ttl-seconds), then
 * GET /latest/meta-data/iam/security-credentials/ (the role name) and
 * .../security-credentials/<role>, with the token. Endpoint:
 * AWS_EC2_METADATA_SERVICE_ENDPOINT, else by AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE
 * (IPv4: http://169.254.169.254, IPv6: http://[fd00:ec2::254]). Falls back to
 * IMDSv1 only where the SDKs do (token PUT answered 403/404/405: IMDSv1
 * allowed unless AWS_EC2_METADATA_V1_DISABLED is true). Returns 0,
 * S3LECT_EAUTH (no role attached, refused, malformed) or S3LECT_ETRANSIENT. */
int aws_imds_fetch(int64_t timeout_ms, cred_fetched *out, char *err, size_t errlen);

/* The instance's region (IMDS placement/region), allocated, or NULL when
 * IMDS is disabled or does not answer within timeout_ms. */
char *aws_imds_region(int64_t timeout_ms);

/* ---- environment and shared files (aws_creds.c) ---- */

/* getenv that treats "" as unset. */
const char *aws_env(const char *name);
/* 1 when the variable is "true" (any case) or "1". */
int aws_env_true(const char *name);
/* The shared file: the variable's value (leading "~/" expanded) else ~/.aws/<name>. */
char *aws_shared_file_path(const char *var, const char *name);

typedef struct aws_kv {
    char *key; /* lower case; "sub.key" for the indented lines of a "sub =" block */
    char *val;
} aws_kv;

/* One section of the shared files, merged (the credentials file's values win
 * over the config file's, as in the SDKs). */
typedef struct aws_section {
    aws_kv *kv;
    size_t n, cap;
    int found;         /* the section exists in either file */
    char where[600];   /* "/home/u/.aws/config" or "... and ..." for messages */
    char problem[700]; /* the first file found unreadable or malformed ("" if none) */
} aws_section;

/* Reads profile NAME from the credentials file ("[NAME]") and the config
 * file ("[profile NAME]", or "[default]"). Returns 0 (out->found tells
 * whether it exists) or S3LECT_ENOMEM. */
int aws_profile_read(const char *cred_path, const char *conf_path, const char *name,
                     aws_section *out);
/* Reads "[sso-session NAME]" from the config file. */
int aws_sso_session_read(const char *conf_path, const char *name, aws_section *out);
/* The value of key (lower case), or NULL when absent or empty. */
const char *aws_section_get(const aws_section *s, const char *key);
/* Wipes the values (they may be secrets) and frees. */
void aws_section_clear(aws_section *s);

/* ---- STS (cred_sts.c) ---- */

typedef struct aws_sts_ctx {
    const char *region;   /* for the regional endpoint and the signature */
    const char *endpoint; /* NULL: AWS_ENDPOINT_URL_STS, AWS_ENDPOINT_URL, https://sts.REGION... */
    const char *ca_file;
    int64_t timeout_ms;
    const _Atomic int *abort;
} aws_sts_ctx;

/* The STS endpoint for ctx (allocated): ctx->endpoint, AWS_ENDPOINT_URL_STS,
 * AWS_ENDPOINT_URL (unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS), else
 * https://sts.REGION.amazonaws.com (.com.cn in China). */
char *aws_sts_endpoint(const aws_sts_ctx *ctx);

/* AssumeRole, signed (SigV4, service "sts") with src. duration_s 0: STS's
 * default; external_id may be NULL. Returns 0, S3LECT_EAUTH (refused,
 * malformed answer) or S3LECT_ETRANSIENT (no answer, throttled, 5xx). */
int aws_sts_assume_role(const aws_sts_ctx *ctx, const cred_fetched *src, const char *role_arn,
                        const char *session_name, int duration_s, const char *external_id,
                        cred_fetched *out, char *err, size_t errlen);

/* AssumeRoleWithWebIdentity (unsigned) with the token read from token_file
 * now (EKS rotates it). */
int aws_sts_assume_role_web_identity(const aws_sts_ctx *ctx, const char *role_arn,
                                     const char *session_name, const char *token_file,
                                     int duration_s, cred_fetched *out, char *err, size_t errlen);

/* ---- credential_process (cred_process.c) ---- */

/* Default bound on a credential process, overridden by
 * S3LECT_CREDENTIAL_PROCESS_TIMEOUT (seconds, fractions allowed). */
#define AWS_PROCESS_TIMEOUT_MS 30000
int64_t aws_process_timeout_ms(void);

/* Runs command with /bin/sh -c (as the Go, Java and Rust SDKs do), stdin
 * from /dev/null, stderr passed through, stdout read (at most 64 KiB, never
 * logged) and parsed as Version 1 JSON. Killed (its process group) after
 * timeout_ms. what names it in messages ("credential_process of profile 'x'"). */
int aws_process_fetch(const char *command, const char *what, int64_t timeout_ms,
                      const _Atomic int *abort, cred_fetched *out, char *err, size_t errlen);

/* ---- SSO (cred_sso.c) ---- */

typedef struct aws_sso_params {
    const char *profile;      /* for messages ("aws sso login --profile X") */
    const char *session_name; /* sso_session form; NULL for the legacy form */
    const char *start_url;
    const char *region; /* sso_region */
    const char *account_id;
    const char *role_name;
    const char *ca_file;
    int64_t timeout_ms;
    const _Atomic int *abort;
} aws_sso_params;

/* Lower-case hex SHA-1 of s into out (41 bytes): the cache file's name. */
void aws_sha1_hex(const char *s, char out[41]);

/* Reads the cached token (~/.aws/sso/cache/<sha1>.json) and calls the
 * portal's GetRoleCredentials (AWS_ENDPOINT_URL_SSO, else
 * https://portal.sso.REGION.amazonaws.com). */
int aws_sso_fetch(const aws_sso_params *p, cred_fetched *out, char *err, size_t errlen);

#endif
