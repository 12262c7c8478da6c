/* aws_creds.h - where the S3 store's credentials, region and endpoint come
 * from (DESIGN §5, docs/s3.md):
 *
 *   credentials: explicit config (access key id + secret [+ token]), then
 *     AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, then the
 *     profile in the shared credentials file, then in the shared config file.
 *     A profile set explicitly in the config skips the environment (as the
 *     AWS SDKs do), so naming a profile always uses that profile.
 *   profile: config, AWS_PROFILE, AWS_DEFAULT_PROFILE, "default".
 *   files: AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials;
 *     AWS_CONFIG_FILE or ~/.aws/config ("[profile NAME]" sections).
 *   region: config, AWS_REGION, AWS_DEFAULT_REGION, the profile's region,
 *     "us-east-1".
 *   endpoint: config, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
 *     "s3 = endpoint_url" or endpoint_url; none means AWS itself. The
 *     environment and profile are skipped when
 *     AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true.
 *   CA bundle for HTTPS: config, AWS_CA_BUNDLE, the system's.
 *
 * Reads the environment and files at call time; call from one thread at a
 * time with respect to setenv().
 */
#ifndef S3LECT_AWS_CREDS_H
#define S3LECT_AWS_CREDS_H

#include <stddef.h>

struct s3lect_config;

typedef struct aws_creds {
    char *access_key_id;
    char *secret_access_key;
    char *session_token; /* NULL when none */
    /* Where they came from, for messages: "the environment
     * (AWS_ACCESS_KEY_ID)", "profile 'x' in /home/u/.aws/credentials". */
    char source[320];
} aws_creds;

/* Resolves credentials. Returns 0, S3LECT_EAUTH when none are found or they
 * are incomplete (err says what to set), or S3LECT_ENOMEM. On success free
 * with aws_creds_clear(). */
int aws_creds_resolve(const struct s3lect_config *cfg, aws_creds *out, char *err, size_t errlen);
/* Wipes the secrets and frees. Safe on a zeroed or cleared struct. */
void aws_creds_clear(aws_creds *c);

/* Allocated region (never NULL but on out of memory). */
char *aws_region_resolve(const struct s3lect_config *cfg);

/* Allocated endpoint URL, or NULL when none is configured (use AWS). *oom is
 * set to 1 on allocation failure. */
char *aws_endpoint_resolve(const struct s3lect_config *cfg, int *oom);

/* The CA bundle file to use, borrowed from cfg or the environment; NULL
 * means the system's. */
const char *aws_ca_bundle_resolve(const struct s3lect_config *cfg);

#endif
