/* SPDX-License-Identifier: Apache-2.0 */
/* cred_parse.h - parsers for the answers of credential sources (issue 15):
 * the JSON a credential_process prints, the SSO token cache file that
 * `aws sso login` writes, the SSO portal's GetRoleCredentials answer and
 * STS's AssumeRole / AssumeRoleWithWebIdentity XML.
 *
 * Pure functions, no I/O; safe on any input bytes (fuzzed:
 * tests/fuzz/fuzz_cred_json.c, fuzz_cred_sts_xml.c). Error messages say
 * which field is missing or malformed and never quote the input (it holds
 * secrets). Every copy of a secret the parser makes is wiped before it is
 * freed.
 */
#ifndef S3LECT_CRED_PARSE_H
#define S3LECT_CRED_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "cred_sources.h"

/* credential_process output, Version 1:
 * {"Version": 1, "AccessKeyId": .., "SecretAccessKey": .., "SessionToken": ..,
 *  "Expiration": "RFC 3339"} (SessionToken and Expiration optional).
 * Returns 0 or S3LECT_EAUTH (err says what is wrong). */
int aws_parse_process_output(const char *buf, size_t len, cred_fetched *out, char *err,
                             size_t errlen);

/* The SSO token cache file: {"accessToken": .., "expiresAt": "RFC 3339", ...}.
 * On success *token is allocated (wipe and free it). Returns 0 or S3LECT_EAUTH. */
int aws_parse_sso_token(const char *buf, size_t len, char **token, int64_t *expires_ms, char *err,
                        size_t errlen);

/* GetRoleCredentials: {"roleCredentials": {"accessKeyId", "secretAccessKey",
 * "sessionToken", "expiration": ms since the epoch}}. Returns 0 or S3LECT_EAUTH. */
int aws_parse_sso_role_credentials(const char *buf, size_t len, cred_fetched *out, char *err,
                                   size_t errlen);

/* STS AssumeRole / AssumeRoleWithWebIdentity success answer:
 * <Credentials><AccessKeyId/><SecretAccessKey/><SessionToken/><Expiration/>
 * </Credentials> and <AssumedRoleUser><Arn/></AssumedRoleUser> (the
 * principal). Returns 0 or S3LECT_EAUTH. */
int aws_parse_sts_response(const char *buf, size_t len, cred_fetched *out, char *err,
                           size_t errlen);

/* The decoded text of the first element named tag within [s, end), trimmed
 * of surrounding whitespace, or NULL when there is none or it is empty
 * (*oom set when out of memory). Decodes the five named XML entities and
 * ASCII character references; anything else is kept as is. *after (if not
 * NULL) receives where the element's text ends. STS answers, Route 53. */
char *aws_xml_text(const char *s, const char *end, const char *tag, const char **after, int *oom);

#endif
