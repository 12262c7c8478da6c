/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_cred_sts_xml.c - the STS answer parser (aws_parse_sts_response).
 *
 * Properties:
 * - no crash, no read past len (exact-size copy of the input);
 * - success means all three of key id, secret and session token, printable
 *   ASCII without spaces (they go into HTTP headers), an expiration, and a
 *   principal of printable ASCII;
 * - failure leaves nothing allocated and a one-line message;
 * - deterministic.
 */
#include <stdint.h>
#include <string.h>

#include "cred_parse.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    cred_fetched f, g;
    char err[300], err2[300];
    int rc = aws_parse_sts_response(buf, size, &f, err, sizeof err);
    int rc2 = aws_parse_sts_response(buf, size, &g, err2, sizeof err2);
    FUZZ_CHECK(rc == rc2, "not deterministic");
    if (rc == 0) {
        FUZZ_CHECK(fuzz_header_safe(f.access_key_id) && fuzz_header_safe(f.secret_access_key) &&
                       fuzz_header_safe(f.session_token),
                   "credentials not header-safe");
        FUZZ_CHECK(f.expires_ms != 0, "no expiration");
        FUZZ_CHECK(memchr(f.principal, '\0', sizeof f.principal) != NULL, "principal unterminated");
        for (const char *p = f.principal; *p; p++)
            FUZZ_CHECK(*p >= 0x20 && *p < 0x7F, "principal not printable");
        FUZZ_CHECK(strcmp(f.session_token, g.session_token) == 0 &&
                       strcmp(f.principal, g.principal) == 0,
                   "not deterministic");
    } else {
        FUZZ_CHECK(!f.access_key_id && !f.secret_access_key && !f.session_token,
                   "fields left on failure");
        FUZZ_CHECK_MSG(err, sizeof err);
        FUZZ_CHECK(strcmp(err, err2) == 0, "not deterministic");
    }
    cred_fetched_clear(&f);
    cred_fetched_clear(&g);
    free(buf);
    return 0;
}
