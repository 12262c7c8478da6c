/* SPDX-License-Identifier: Apache-2.0 */
/* aws_creds.h - where the S3 store's credentials, region and endpoint come
 * from (DESIGN §5, docs/s3.md "Credentials").
 *
 *   credentials: the provider chain (cred_chain.c), in the AWS SDKs' order:
 *     1. explicit config (access key id + secret [+ token]);
 *     2. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN;
 *     3. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN
 *        (+ AWS_ROLE_SESSION_NAME) -> STS AssumeRoleWithWebIdentity;
 *     4. the profile in the shared credentials and config files: static
 *        keys, role_arn + source_profile / credential_source /
 *        web_identity_token_file, SSO, credential_process;
 *     5. container credentials (ECS, EKS Pod Identity);
 *     6. EC2 instance metadata (IMDSv2).
 *     A profile set explicitly in the config skips 2 and 3 (as the AWS SDKs
 *     do), so naming a profile always uses that profile.
 *   profile: config, AWS_PROFILE, AWS_DEFAULT_PROFILE, "default".
 *   files: AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials;
 *     AWS_CONFIG_FILE or ~/.aws/config ("[profile NAME]" sections).
 *   region: config, AWS_REGION, AWS_DEFAULT_REGION, the profile's region,
 *     the instance's (IMDS, when none is configured anywhere), "us-east-1".
 *   endpoint: config, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
 *     "s3 = endpoint_url" or endpoint_url; none means AWS itself. The
 *     environment and profile are skipped when
 *     AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true.
 *   CA bundle for HTTPS: config, AWS_CA_BUNDLE, the system's.
 *
 * Temporary credentials are cached (cred_cache.c), one cache entry per
 * resolved source shared by every store of the process, and refreshed ahead
 * of expiry by one background thread: aws_chain_get never waits for the
 * network or a process.
 *
 * Resolution reads the environment and files at call time; call from one
 * thread at a time with respect to setenv().
 */
#ifndef S3LECT_AWS_CREDS_H
#define S3LECT_AWS_CREDS_H

#include <stddef.h>
#include <stdint.h>

#include "cred_cache.h"

struct s3lect_config;

typedef struct aws_creds {
    char *access_key_id;
    char *secret_access_key;
    char *session_token; /* NULL when none */
    /* Where they came from, for messages: "the environment
     * (AWS_ACCESS_KEY_ID)", "profile 'x' in /home/u/.aws/credentials". */
    char source[320];
} aws_creds;

/* Resolves credentials once (blocking: may call STS, a process, IMDS).
 * Returns 0, S3LECT_EAUTH when none are found or they are incomplete or the
 * source refused (err says what to set or fix), S3LECT_ETRANSIENT when the
 * source did not answer, or S3LECT_ENOMEM. On success free with
 * aws_creds_clear(). */
int aws_creds_resolve(const struct s3lect_config *cfg, aws_creds *out, char *err, size_t errlen);
/* Wipes the secrets and frees. Safe on a zeroed or cleared struct. */
void aws_creds_clear(aws_creds *c);

/* ---- the AWS provider chain (on the shared cache of cred_cache.h) ---- */

/* Resolves which source supplies the credentials for cfg and takes a
 * reference to its cache entry (creating it, and fetching the first
 * credentials on the calling thread unless CRED_CACHE_NOWAIT, when it is
 * new). Returns 0, S3LECT_EAUTH (no source, or the source refused: err
 * says what to fix), or S3LECT_ENOMEM. A source that did not answer
 * (S3LECT_ETRANSIENT) still gives a handle: the refresher retries. */
int aws_chain_open(const struct s3lect_config *cfg, int flags, cred_cache **out, char *err,
                   size_t errlen);
/* The current credentials, copied into out (free with aws_creds_clear),
 * without blocking on anything but a mutex. *gen receives their generation
 * (for cred_cache_stale). Returns 0, or S3LECT_ETRANSIENT when there are
 * none yet or they have expired (err names the source and why the refresh
 * failed). */
int aws_chain_get(cred_cache *c, aws_creds *out, uint64_t *gen, char *err, size_t errlen);

/* Reads of the shared credentials file and of the shared config file that
 * found it unreadable or malformed, since the process started. */
void aws_file_error_totals(uint64_t *credentials, uint64_t *config);
/* The latest such problem ("/home/u/.aws/config line 3: expected 'key =
 * value'..." or "cannot read /x: Permission denied"; never a value from the
 * file), once: 1 with buf filled when there is one not yet handed out and
 * not the same as one handed out less than a minute ago, else 0. */
int aws_file_problem_take(char *buf, size_t n);

/* The profile name in use (config, AWS_PROFILE, AWS_DEFAULT_PROFILE,
 * "default"); *explicit_cfg is 1 when it came from the config. */
const char *aws_profile_name(const struct s3lect_config *cfg, int *explicit_cfg);

/* How long the region lookup in instance metadata may take. */
#define AWS_IMDS_REGION_TIMEOUT_MS 1000

/* Allocated region (never NULL but on out of memory). */
char *aws_region_resolve(const struct s3lect_config *cfg);

/* Allocated endpoint URL of a service, or NULL when none is configured (use
 * AWS's): the endpoint setting, AWS_ENDPOINT_URL_<env_id> ("S3",
 * "DYNAMODB", "ROUTE_53"), AWS_ENDPOINT_URL, then the profile's
 * "<config_id>.endpoint_url" ("s3", "dynamodb") or endpoint_url. *oom is set
 * to 1 on allocation failure. */
char *aws_service_endpoint_resolve(const struct s3lect_config *cfg, const char *env_id,
                                   const char *config_id, int *oom);
/* The S3 endpoint. */
char *aws_endpoint_resolve(const struct s3lect_config *cfg, int *oom);

/* The CA bundle file to use, borrowed from cfg or the environment; NULL
 * means the system's. */
const char *aws_ca_bundle_resolve(const struct s3lect_config *cfg);

#endif
