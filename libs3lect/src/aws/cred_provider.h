/* SPDX-License-Identifier: Apache-2.0 */
/* cred_provider.h - credential providers that fetch temporary credentials
 * over the network (issue 15): the interface between the provider chain
 * (cred_chain.c, whose cache in cred_cache.c refreshes in the background
 * and serves every S3 store in the process) and the providers that talk to
 * a metadata endpoint (cred_container.c: ECS and EKS Pod Identity;
 * cred_imds.c: EC2 instance metadata, IMDSv2).
 *
 * Every fetch function blocks, bounded by timeout_ms, and is called only
 * from the chain's refresher thread (never on a renewal's path). Each reads
 * the environment at call time and re-reads token files on every call.
 * Errors are one line in err that says what failed and what to check; no
 * secret, token or signature ever goes into err.
 */
#ifndef S3LECT_CRED_PROVIDER_H
#define S3LECT_CRED_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

/* Credentials as a provider fetched them. Strings are allocated; wipe and
 * free with aws_fetched_clear(). */
typedef struct aws_fetched {
    char *access_key_id;
    char *secret_access_key;
    char *session_token; /* NULL when none */
    /* A bearer token (an OAuth2 access token: GCP, Azure AD) for token
     * providers, which leave the three AWS fields NULL; NULL for AWS. */
    char *bearer;
    int64_t expires_ms;  /* wall-clock ms since the epoch; 0: does not expire */
    char principal[256]; /* role ARN, service account e-mail etc. where known; "" otherwise */
} aws_fetched;

/* Wipes the secrets (explicit_bzero-like) and frees; leaves *f zeroed. Safe on
 * a zeroed struct. */
void aws_fetched_clear(aws_fetched *f);

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
int aws_container_fetch(int64_t timeout_ms, aws_fetched *out, char *err, size_t errlen);

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
int aws_imds_fetch(int64_t timeout_ms, aws_fetched *out, char *err, size_t errlen);

/* The instance's region (IMDS placement/region), allocated, or NULL when
 * IMDS is disabled or does not answer within timeout_ms. */
char *aws_imds_region(int64_t timeout_ms);

#endif
