/* SPDX-License-Identifier: Apache-2.0 */
/* gcp_aws.h - the AWS identity source of Google's workload identity
 * federation (an external_account file whose credential_source has
 * environment_id "aws1"): the one file of gcp/ that uses AWS's credential
 * sources and SigV4 (tests/check_layers.py allows gcp_aws.c alone to include
 * headers of aws/).
 */
#ifndef S3LECT_GCP_AWS_H
#define S3LECT_GCP_AWS_H

#include <stddef.h>
#include <stdint.h>

/* The subject token of an AWS identity: a GetCallerIdentity request signed
 * with SigV4 for the STS of the region (AWS_REGION, AWS_DEFAULT_REGION, else
 * instance metadata's), with the AWS credentials the way Google's libraries
 * take them for this source, serialized as Google's security token service
 * wants it (JSON of url, method and headers, percent-encoded), allocated
 * into *tok (a secret: wipe it). path names the credentials file in
 * messages; vurl is its regional_cred_verification_url (NULL: STS's
 * default); audience its audience. Returns 0, S3LECT_EAUTH (no region, no
 * AWS credentials or they were refused, a malformed URL), S3LECT_ETRANSIENT
 * or S3LECT_ENOMEM. */
int gcp_aws_subject_token(const char *path, const char *vurl, const char *audience,
                          int64_t timeout_ms, char **tok, char *err, size_t errlen);

#endif
