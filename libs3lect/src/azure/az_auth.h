/* SPDX-License-Identifier: Apache-2.0 */
/* az_auth.h - how the Azure Blob store authorizes its requests: the
 * explicitly given credentials (a connection string, an account key for
 * Shared Key, a SAS token) and the Shared Key signature ("Authorize with
 * Shared Key", Storage REST API).
 *
 * Sources, first found wins (docs/stores.md "Azure Blob Storage"):
 *   AZURE_STORAGE_CONNECTION_STRING (AccountKey, else SharedAccessSignature;
 *     BlobEndpoint / EndpointSuffix / DefaultEndpointsProtocol give the
 *     endpoint), AZURE_STORAGE_KEY (Shared Key; AZURE_STORAGE_ACCOUNT, when
 *     set, must name the lock's account), AZURE_STORAGE_SAS_TOKEN.
 *
 * Nothing here logs; messages never contain a key, a SAS signature or a
 * Shared Key signature.
 */
#ifndef S3LECT_AZ_AUTH_H
#define S3LECT_AZ_AUTH_H

#include <stddef.h>
#include <stdint.h>

enum { AZ_CRED_NONE = 0, AZ_CRED_SHARED_KEY = 1, AZ_CRED_SAS = 2 };

typedef struct az_creds {
    int kind;
    char source[96]; /* where they came from: "AZURE_STORAGE_KEY" */
    uint8_t *key;    /* Shared Key: the decoded account key */
    size_t key_len;
    char *sas;           /* SAS: the token, without a leading '?' */
    char *blob_endpoint; /* the connection string's blob endpoint, or NULL */
} az_creds;

/* The explicitly given credentials for account (see above). Returns 0 with
 * out->kind AZ_CRED_NONE when none is set, 0 with credentials, or
 * S3LECT_EINVAL / S3LECT_ENOMEM with a one-line message in err. */
int az_creds_resolve(const char *account, az_creds *out, char *err, size_t errlen);
/* Wipes and frees what c holds. */
void az_creds_clear(az_creds *c);

/* One request header as sent (name as written; matched case-insensitively). */
typedef struct az_header {
    const char *name, *value;
} az_header;

/* The Shared Key string to sign (version 2015-02-21 and later: an empty
 * Content-Length for a zero length): the verb, the standard headers in
 * their fixed order (Date left empty: x-ms-date is sent), the x-ms-
 * headers (lower-cased, sorted) and the resource "/ACCOUNT/PATH" followed
 * by the query's parameters (names lower-cased and sorted, values decoded).
 * path is as sent (percent-encoded); query without '?' or NULL. Allocated;
 * NULL on out of memory. */
char *az_sharedkey_string(const char *method, const az_header *h, size_t nh, const char *account,
                          const char *path, const char *query);
/* "SharedKey ACCOUNT:base64(HMAC-SHA256(key, sts))". Allocated; NULL on
 * out of memory. */
char *az_sharedkey_authorization(const char *account, const uint8_t *key, size_t key_len,
                                 const char *sts);
/* An RFC 1123 date ("Sun, 06 Nov 1994 08:49:37 GMT") of t (x-ms-date). */
void az_http_date(int64_t unix_s, char out[32]);

#endif
