/* SPDX-License-Identifier: Apache-2.0 */
/* rds_token.h - IAM database authentication tokens for Amazon RDS and
 * Aurora (PostgreSQL, MySQL): the password a store sends instead of a
 * secret when its lock URL says ?auth=aws-iam (docs/stores.md).
 *
 * A token is a SigV4 presigned "connect" request for the service rds-db,
 * without a scheme:
 *
 *   HOST:PORT/?Action=connect&DBUser=USER&X-Amz-Algorithm=AWS4-HMAC-SHA256
 *     &X-Amz-Credential=...&X-Amz-Date=...&X-Amz-Expires=900
 *     &X-Amz-SignedHeaders=host[&X-Amz-Security-Token=...]&X-Amz-Signature=...
 *
 * valid for 15 minutes. The credentials come from the AWS chain of the
 * S3 and DynamoDB stores (aws_creds.h: the same config knobs and the same
 * shared credential cache). A token is a secret: never log it.
 */
#ifndef S3LECT_RDS_TOKEN_H
#define S3LECT_RDS_TOKEN_H

#include <stddef.h>
#include <time.h>

struct s3lect_config;

/* The token's validity, X-Amz-Expires (AWS fixes it at 15 minutes). */
#define RDS_TOKEN_EXPIRES_S 900
/* How long rds_token_get hands out the same token (with the same
 * credentials): reconnects do not sign again, and a token is never
 * handed out with less than 5 minutes of validity left. */
#define RDS_TOKEN_REUSE_S 600

/* A token for user at host:port (host as the client connects to it: the
 * instance's or cluster's endpoint name), signed for region (NULL: the
 * chain's region, aws_region_resolve: cfg->region, AWS_REGION,
 * AWS_DEFAULT_REGION, the profile's...) with the credentials of cfg's AWS
 * chain (cfg->profile, explicit keys, the environment, ...). Tokens are
 * cached per (host, port, user, region, credentials) for RDS_TOKEN_REUSE_S:
 * new credentials (a refresh of temporary ones, new static keys) give a new
 * token. Thread-safe. Returns 0 with *token allocated (wipe and free with
 * u_wipe_free), S3LECT_EAUTH (no credentials, or the source refused: err
 * says what to fix), S3LECT_ETRANSIENT (the source did not answer yet),
 * S3LECT_EINVAL (bad host, user or region) or S3LECT_ENOMEM. err never
 * holds the token or a key. */
int rds_token_get(const struct s3lect_config *cfg, const char *host, int port, const char *user,
                  const char *region, char **token, char *err, size_t errlen);

/* ---- the pure part, for tests ---- */

typedef struct rds_token_params {
    const char *host;
    int port;
    const char *user;
    const char *region;
    const char *access_key_id;
    const char *secret_access_key;
    const char *session_token; /* NULL or "" for none */
    time_t now;                /* the signing time (X-Amz-Date) */
} rds_token_params;

/* Builds the token for p (no I/O, no clock). Returns an allocated string or
 * NULL on bad input or out of memory. */
char *rds_token_build(const rds_token_params *p);

/* Drops every cached token and the credential handles held for them (tests;
 * also called at library teardown where there is one). */
void rds_token_cache_clear(void);

#endif
