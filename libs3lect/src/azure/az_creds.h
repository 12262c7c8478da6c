/* SPDX-License-Identifier: Apache-2.0 */
/* az_creds.h - Microsoft Entra ID (Azure AD) access tokens for the Azure
 * Blob store when no explicit credential (az_auth.h) is set: the sources of
 * the Azure SDKs' DefaultAzureCredential, in its order, each a bearer-token
 * provider on the aws layer's credential cache (cred_cache.h: shared,
 * refreshed in the background ahead of expiry, backed off, reported):
 *
 *   1. environment: AZURE_TENANT_ID + AZURE_CLIENT_ID + AZURE_CLIENT_SECRET
 *      (client credentials) or + AZURE_CLIENT_CERTIFICATE_PATH (a PEM with
 *      the private key and certificate: a client assertion JWT signed RS256,
 *      x5t the certificate's SHA-1 thumbprint);
 *   2. workload identity (AKS): AZURE_FEDERATED_TOKEN_FILE (re-read at every
 *      refresh) + AZURE_CLIENT_ID + AZURE_TENANT_ID, the file's token sent as
 *      the client assertion (jwt-bearer);
 *      1 and 2 post to AZURE_AUTHORITY_HOST (default
 *      https://login.microsoftonline.com) /TENANT/oauth2/v2.0/token with
 *      scope https://storage.azure.com/.default;
 *   3. managed identity: App Service / Functions / Container Apps
 *      (IDENTITY_ENDPOINT + IDENTITY_HEADER, api-version 2019-08-01), else
 *      the VM's IMDS (AZURE_POD_IDENTITY_AUTHORITY_HOST, else
 *      http://169.254.169.254; api-version 2018-02-01, Metadata: true),
 *      resource https://storage.azure.com/, AZURE_CLIENT_ID selecting a
 *      user-assigned identity.
 *
 * An http:// authority host is accepted on a loopback address only (tests);
 * the managed identity endpoints are http by design. Tokens, secrets and
 * assertions never go into a message; the principal shown is the token's
 * appid/oid claims.
 */
#ifndef S3LECT_AZ_CREDS_H
#define S3LECT_AZ_CREDS_H

#include <stddef.h>
#include <stdint.h>

#include "cred_cache.h"

struct s3lect_config;

#define AZ_SCOPE "https://storage.azure.com/.default"
#define AZ_RESOURCE "https://storage.azure.com/"

/* Resolves the Entra ID source for cfg and takes a reference to its cache
 * entry (cred_cache_bearer, cred_cache_describe, cred_cache_stale,
 * cred_cache_release). flags: CRED_CACHE_NOWAIT. Returns 0, S3LECT_EAUTH
 * (none answered or configured wrongly: err says what to set) or
 * S3LECT_ENOMEM. */
int az_chain_open(const struct s3lect_config *cfg, int flags, cred_cache **out, char *err,
                  size_t errlen);

/* Parses a token answer: access_token and expires_in (number or string) or
 * expires_on (epoch seconds); principal from the token's appid/oid claims.
 * Returns 0 or S3LECT_EAUTH (err says what is missing; never the token). */
int az_parse_token(const char *body, size_t len, int64_t now_ms, cred_fetched *out, char *err,
                   size_t errlen);

#endif
