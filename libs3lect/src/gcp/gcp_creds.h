/* SPDX-License-Identifier: Apache-2.0 */
/* gcp_creds.h - where the GCS store's access token comes from (docs/stores.md
 * "Google Cloud Storage"): the sources Google's client libraries use, in
 * their order, each a bearer-token provider on the credential cache of the
 * aws layer (cred_cache.h: shared, refreshed in the background ahead of
 * expiry, backed off, reported):
 *
 *   1. GOOGLE_OAUTH_ACCESS_TOKEN: an access token as is (never refreshed);
 *   2. GOOGLE_APPLICATION_CREDENTIALS: a JSON credentials file;
 *   3. gcloud's application-default credentials,
 *      $CLOUDSDK_CONFIG/application_default_credentials.json (default
 *      ~/.config/gcloud/...);
 *      a file of type service_account (a JWT signed RS256 with its key,
 *      exchanged at token_uri), authorized_user (its refresh token) or
 *      external_account (workload identity federation: a subject token from
 *      credential_source.file exchanged at the STS token_url, then the
 *      optional service_account_impersonation_url);
 *   4. the metadata server (GCE, GKE Workload Identity, Cloud Run):
 *      GCE_METADATA_HOST, else 169.254.169.254, with Metadata-Flavor: Google.
 *
 * Without any of them, requests to an emulator (STORAGE_EMULATOR_HOST, or an
 * http:// endpoint on a loopback address) go without a token; to anything
 * else the chain ends at the metadata server and fails there with a message
 * saying what to set: never unauthenticated by accident.
 *
 * Tokens, keys, refresh tokens, client secrets and assertions never go into
 * a message.
 */
#ifndef S3LECT_GCP_CREDS_H
#define S3LECT_GCP_CREDS_H

#include <stddef.h>
#include <stdint.h>

#include "cred_cache.h"

struct s3lect_config;

enum {
    GCP_CHAIN_NOWAIT = CRED_CACHE_NOWAIT, /* the first fetch on the refresher, not here */
    GCP_CHAIN_OPTIONAL = 2 /* no source configured (1-3, GCE_METADATA_HOST): 0 and *out NULL */
};

/* The OAuth2 scope asked for (read and write of objects). */
#define GCP_SCOPE_STORAGE "https://www.googleapis.com/auth/devstorage.read_write"
#define GCP_SCOPE_CLOUD "https://www.googleapis.com/auth/cloud-platform"

/* Resolves the source of the token for cfg and takes a reference to its
 * cache entry (cred_cache_bearer, cred_cache_describe, cred_cache_stale,
 * cred_cache_release). Returns 0, S3LECT_EAUTH (none, or the source refused:
 * err says what to fix) or S3LECT_ENOMEM. */
int gcp_chain_open(const struct s3lect_config *cfg, int flags, cred_cache **out, char *err,
                   size_t errlen);

/* Parses a token endpoint's JSON answer: access_token (or accessToken) and
 * expires_in (seconds; or expireTime, RFC 3339) into out. Returns 0 or
 * S3LECT_EAUTH with err saying what is missing (never the token). */
int gcp_parse_token(const char *body, size_t len, int64_t now_ms, cred_fetched *out, char *err,
                    size_t errlen);

#endif
