/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_cred_json.c - the JSON parsers of the credential chain (cred_parse.c):
 * credential_process output, the SSO token cache file and the SSO portal's
 * GetRoleCredentials answer. The first byte picks the parser.
 *
 * Properties:
 * - no crash, no read past len (the input is copied to an exact-size buffer);
 * - success means an access key id and secret (or a token) of printable
 *   ASCII without spaces (they go into HTTP headers), and failure leaves
 *   nothing allocated and a NUL-terminated one-line message;
 * - a message never contains the secret the input carried;
 * - parsing is deterministic.
 */
#include <stdint.h>
#include <string.h>

#include "cred_parse.h"
#include "util.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int which = data[0] % 3;
    size_t len = size - 1;
    char *buf = malloc(len ? len : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, len);
    char err[300], err2[300];
    cred_fetched f, g;
    if (which == 1) {
        char *tok = NULL, *tok2 = NULL;
        int64_t exp = 0, exp2 = 0;
        int rc = aws_parse_sso_token(buf, len, &tok, &exp, err, sizeof err);
        int rc2 = aws_parse_sso_token(buf, len, &tok2, &exp2, err2, sizeof err2);
        FUZZ_CHECK(rc == rc2 && exp == exp2, "not deterministic");
        if (rc == 0) {
            FUZZ_CHECK(fuzz_header_safe(tok), "token not header-safe");
            FUZZ_CHECK(strcmp(tok, tok2) == 0, "not deterministic");
        } else {
            FUZZ_CHECK(tok == NULL, "token left on failure");
            FUZZ_CHECK_MSG(err, sizeof err);
        }
        u_wipe_free(tok);
        u_wipe_free(tok2);
        free(buf);
        return 0;
    }
    int (*parse)(const char *, size_t, cred_fetched *, char *, size_t) =
        which == 0 ? aws_parse_process_output : aws_parse_sso_role_credentials;
    int rc = parse(buf, len, &f, err, sizeof err);
    int rc2 = parse(buf, len, &g, err2, sizeof err2);
    FUZZ_CHECK(rc == rc2, "not deterministic");
    if (rc == 0) {
        FUZZ_CHECK(fuzz_header_safe(f.access_key_id) && fuzz_header_safe(f.secret_access_key),
                   "keys not header-safe");
        FUZZ_CHECK(!f.session_token || fuzz_header_safe(f.session_token), "token not header-safe");
        FUZZ_CHECK(strcmp(f.secret_access_key, g.secret_access_key) == 0 &&
                       f.expires_ms == g.expires_ms,
                   "not deterministic");
    } else {
        FUZZ_CHECK(!f.access_key_id && !f.secret_access_key && !f.session_token,
                   "fields left on failure");
        FUZZ_CHECK_MSG(err, sizeof err);
    }
    cred_fetched_clear(&f);
    cred_fetched_clear(&g);
    free(buf);
    return 0;
}
