/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_cred_metadata.c - the answer parsers of the container and
 * instance-metadata credential providers (aws/cred_metadata.c).
 *
 * Properties, for both flavours (container, IMDS):
 * - aws_md_parse_creds never crashes and returns 0 or S3LECT_EAUTH;
 * - on 0: the key id and secret are set and are printable ASCII without
 *   spaces; an IMDS answer always has a session token and an expiry; the
 *   principal is NUL-terminated printable ASCII;
 * - on failure: nothing is left in *out, and err is one NUL-terminated line
 *   of printable ASCII that never contains the secret or session token
 *   (20 bytes or more: shorter ones can be words of the message) that a
 *   successful parse of the same input under the other flavour found;
 * - parsing is deterministic;
 * - aws_md_parse_role returns 0 or -1, and on 0 a 1..128 byte name of
 *   [A-Za-z0-9+=,.@_-].
 */
#include <stdint.h>
#include <string.h>

#include "cred_metadata.h"
#include "fuzz.h"
#include "s3lect.h"

static int printable_nospace(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

static void check_line(const char *s, size_t cap, const char *what)
{
    FUZZ_CHECK(memchr(s, '\0', cap) != NULL, "%s not NUL-terminated", what);
    for (; *s; s++)
        FUZZ_CHECK((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f, "%s: byte 0x%02x", what,
                   (unsigned char)*s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    cred_fetched f[2], g;
    char err[2][256];
    int rc[2];
    for (int fl = 0; fl < 2; fl++) {
        memset(err[fl], 'x', sizeof err[fl]);
        err[fl][sizeof err[fl] - 1] = '\0';
        rc[fl] = aws_md_parse_creds(body, size, fl, &f[fl], err[fl], sizeof err[fl]);
        FUZZ_CHECK(rc[fl] == 0 || rc[fl] == S3LECT_EAUTH, "flavour %d returned %d", fl, rc[fl]);
        if (rc[fl] == 0) {
            FUZZ_CHECK(printable_nospace(f[fl].access_key_id), "bad key id");
            FUZZ_CHECK(printable_nospace(f[fl].secret_access_key), "bad secret");
            FUZZ_CHECK(!f[fl].session_token || printable_nospace(f[fl].session_token),
                       "bad session token");
            FUZZ_CHECK(fl != AWS_MD_IMDS || (f[fl].session_token && f[fl].expires_ms > 0),
                       "IMDS answer without token or expiry");
            FUZZ_CHECK(f[fl].expires_ms >= 0, "negative expiry");
            check_line(f[fl].principal, sizeof f[fl].principal, "principal");
        } else {
            FUZZ_CHECK(!f[fl].access_key_id && !f[fl].secret_access_key && !f[fl].session_token &&
                           f[fl].expires_ms == 0 && f[fl].principal[0] == '\0',
                       "failure left values");
            check_line(err[fl], sizeof err[fl], "err");
            FUZZ_CHECK(err[fl][0] != '\0', "empty message");
        }
        /* Deterministic. */
        char err2[256];
        int rc2 = aws_md_parse_creds(body, size, fl, &g, err2, sizeof err2);
        FUZZ_CHECK(rc2 == rc[fl], "not deterministic: %d then %d", rc[fl], rc2);
        if (rc2 == 0) {
            FUZZ_CHECK(strcmp(g.secret_access_key, f[fl].secret_access_key) == 0 &&
                           g.expires_ms == f[fl].expires_ms,
                       "not deterministic");
            cred_fetched_clear(&g);
        } else {
            FUZZ_CHECK(strcmp(err2, err[fl]) == 0, "message not deterministic");
        }
    }
    /* A message never quotes a secret the same bytes hold. */
    for (int fl = 0; fl < 2; fl++) {
        const cred_fetched *ok = rc[0] == 0 ? &f[0] : rc[1] == 0 ? &f[1] : NULL;
        if (rc[fl] != 0 && ok) {
            FUZZ_CHECK(strlen(ok->secret_access_key) < 20 ||
                           strstr(err[fl], ok->secret_access_key) == NULL,
                       "message quotes the secret");
            FUZZ_CHECK(!ok->session_token || strlen(ok->session_token) < 20 ||
                           strstr(err[fl], ok->session_token) == NULL,
                       "message quotes the session token");
        }
    }
    for (int fl = 0; fl < 2; fl++)
        if (rc[fl] == 0)
            cred_fetched_clear(&f[fl]);

    char role[129];
    memset(role, 'z', sizeof role);
    int r = aws_md_parse_role(body, size, role, sizeof role);
    FUZZ_CHECK(r == 0 || r == -1, "parse_role returned %d", r);
    if (r == 0) {
        size_t n = strnlen(role, sizeof role);
        FUZZ_CHECK(n >= 1 && n <= 128, "role length %zu", n);
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(strchr("+=,.@_-", role[i]) || (role[i] >= 'A' && role[i] <= 'Z') ||
                           (role[i] >= 'a' && role[i] <= 'z') || (role[i] >= '0' && role[i] <= '9'),
                       "role byte 0x%02x", (unsigned char)role[i]);
    }
    return 0;
}
