/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_sigv4.c - SigV4 canonicalisation and signing (sigv4.c) on fuzzed
 * requests.
 *
 * Input: one flags byte, then NUL-separated fields
 *   method, path, query, payload_hash, amz_date, body, name1, value1, ...
 * flags: bit0 normalize_path, bit1 sign_body, bit2 session token,
 *        bit3 omit_session_token, bit4 use payload_hash, bit5 use amz_date
 *        (else a valid fixed date), bit6 add a Host header when absent.
 * tests/fuzz/make_seeds.py writes the AWS suite's requests in this form.
 *
 * Properties:
 * - sigv4_sign never crashes, returns 0 or -1, and on -1 leaves nothing set;
 * - it fails exactly when there is no host header or the date is bad;
 * - on success: the canonical request starts with the method and ends with
 *   the signed headers and the payload hash; signed headers are lower case,
 *   sorted, unique and include host; the string to sign carries the SHA-256
 *   of the canonical request; the signature is 64 lower-case hex digits and
 *   appears in the Authorization value;
 * - deterministic: signing again gives the same bytes;
 * - idempotent canonical forms: signing with the canonical URI and canonical
 *   query as path and query gives the same canonical request;
 * - header order does not matter when the header names are distinct.
 */
#include <stdint.h>
#include <string.h>

#include "crypto.h"
#include "fuzz.h"
#include "sigv4.h"

#define MAX_FIELDS 70

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Case-insensitive comparison of two header names after trimming whitespace. */
static int same_name(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    while (la && is_ws(*a))
        a++, la--;
    while (la && is_ws(a[la - 1]))
        la--;
    while (lb && is_ws(*b))
        b++, lb--;
    while (lb && is_ws(b[lb - 1]))
        lb--;
    return la == lb && strncasecmp(a, b, la) == 0;
}

static int valid_date(const char *d)
{
    if (strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z')
        return 0;
    for (int i = 0; i < 15; i++)
        if (i != 8 && (d[i] < '0' || d[i] > '9'))
            return 0;
    return 1;
}

static int is_hex64(const char *s)
{
    if (strlen(s) != 64)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* The n-th line (0-based) of s, copied into an allocated string. */
static char *line_of(const char *s, int n)
{
    for (; n > 0 && s; n--) {
        s = strchr(s, '\n');
        if (s)
            s++;
    }
    if (!s)
        return NULL;
    size_t l = strcspn(s, "\n");
    char *out = malloc(l + 1);
    if (out) {
        memcpy(out, s, l);
        out[l] = '\0';
    }
    return out;
}

static void same_result(const sigv4_result *a, const sigv4_result *b, const char *what)
{
    FUZZ_CHECK(strcmp(a->canonical_request, b->canonical_request) == 0,
               "%s: canonical request differs:\n%s\n----\n%s", what, a->canonical_request,
               b->canonical_request);
    FUZZ_CHECK(strcmp(a->string_to_sign, b->string_to_sign) == 0, "%s: string to sign", what);
    FUZZ_CHECK(strcmp(a->signature, b->signature) == 0, "%s: signature", what);
    FUZZ_CHECK(strcmp(a->authorization, b->authorization) == 0, "%s: authorization", what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned flags = data[0];
    /* A NUL-terminated copy of the rest, split at NULs. */
    char *buf = malloc(size);
    FUZZ_CHECK(buf != NULL, "oom");
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    const char *f[MAX_FIELDS];
    size_t nf = 0;
    for (size_t i = 0; i < size && nf < MAX_FIELDS;) {
        f[nf++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    for (size_t i = nf; i < 6; i++)
        f[i] = "";
    if (nf < 6)
        nf = 6;

    sigv4_header hs[MAX_FIELDS / 2 + 1], rev[MAX_FIELDS / 2 + 1];
    size_t nh = 0;
    int has_host = 0;
    for (size_t i = 6; i + 1 < nf; i += 2) {
        hs[nh].name = f[i];
        hs[nh].value = f[i + 1];
        has_host |= same_name(f[i], "host");
        nh++;
    }
    if ((flags & 64) && !has_host) {
        hs[nh].name = "Host";
        hs[nh].value = "bucket.example.com";
        nh++;
        has_host = 1;
    }
    const char *date = (flags & 32) ? f[4] : "20150830T123600Z";
    sigv4_request req = {
        .method = f[0],
        .path = f[1],
        .query = f[2],
        .headers = hs,
        .nheaders = nh,
        .body = f[5],
        .body_len = strlen(f[5]),
        .payload_hash = (flags & 16) ? f[3] : NULL,
    };
    sigv4_params p = {
        .access_key_id = "AKIDEXAMPLE",
        .secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        .session_token = (flags & 4) ? "session-token-example" : NULL,
        .region = "us-east-1",
        .service = "s3",
        .amz_date = date,
        .normalize_path = flags & 1,
        .sign_body = (flags >> 1) & 1,
        .omit_session_token = (flags >> 3) & 1,
    };
    sigv4_result r, r2;
    int rc = sigv4_sign(&req, &p, &r);
    FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
    if (rc != 0) {
        FUZZ_CHECK(!r.canonical_request && !r.string_to_sign && !r.authorization,
                   "failure left results");
        /* Only bad input fails (no allocation failure here): no host, bad date,
         * or an x-amz-date header disagreeing with the date. */
        int date_hdr_mismatch = 0;
        for (size_t i = 0; i < nh; i++)
            if (same_name(hs[i].name, "x-amz-date"))
                date_hdr_mismatch = 1; /* checked loosely: whitespace is collapsed */
        FUZZ_CHECK(!has_host || !valid_date(date) || date_hdr_mismatch,
                   "failed on a request with host and a valid date");
        free(buf);
        return 0;
    }
    FUZZ_CHECK(has_host && valid_date(date), "signed without host or with bad date");

    /* Shape of the results. */
    size_t ml = strlen(f[0]);
    FUZZ_CHECK(strncmp(r.canonical_request, f[0], ml) == 0 && r.canonical_request[ml] == '\n',
               "canonical request does not start with the method");
    size_t cl = strlen(r.canonical_request), sl = strlen(r.signed_headers),
           pl = strlen(r.payload_hash);
    FUZZ_CHECK(cl > sl + pl + 2 && strcmp(r.canonical_request + cl - pl, r.payload_hash) == 0 &&
                   r.canonical_request[cl - pl - 1] == '\n' &&
                   strncmp(r.canonical_request + cl - pl - 1 - sl, r.signed_headers, sl) == 0,
               "canonical request does not end with signed headers and payload hash");
    /* Signed headers: lower case, strictly sorted (unique), include host. The
     * order is checkable only when no name contains the ';' separator. */
    int semicolon = 0;
    for (size_t i = 0; i < nh; i++)
        semicolon |= strchr(hs[i].name, ';') != NULL;
    int host_signed = 0;
    const char *prev = NULL;
    size_t prev_len = 0;
    for (const char *s = r.signed_headers;; s++) {
        size_t l = strcspn(s, ";");
        for (size_t i = 0; i < l; i++)
            FUZZ_CHECK(!(s[i] >= 'A' && s[i] <= 'Z'), "upper case in signed headers");
        host_signed |= l == 4 && strncmp(s, "host", 4) == 0;
        if (prev && !semicolon) {
            int c = strncmp(prev, s, prev_len < l ? prev_len : l);
            FUZZ_CHECK(c < 0 || (c == 0 && prev_len < l), "signed headers not sorted: %s",
                       r.signed_headers);
        }
        prev = s;
        prev_len = l;
        s += l;
        if (!*s)
            break;
    }
    FUZZ_CHECK(host_signed, "host not signed: %s", r.signed_headers);
    uint8_t d[CR_SHA256_LEN];
    char hex[65];
    cr_sha256(r.canonical_request, cl, d);
    cr_hex(d, sizeof d, hex);
    char *sts_hash = line_of(r.string_to_sign, 3);
    FUZZ_CHECK(sts_hash && strcmp(sts_hash, hex) == 0,
               "string to sign does not carry the canonical request's hash");
    free(sts_hash);
    FUZZ_CHECK(strncmp(r.string_to_sign, "AWS4-HMAC-SHA256\n", 17) == 0, "algorithm line");
    FUZZ_CHECK(is_hex64(r.signature), "signature is not 64 hex digits");
    FUZZ_CHECK(strstr(r.authorization, r.signature) != NULL, "signature not in Authorization");

    /* Deterministic. */
    FUZZ_CHECK(sigv4_sign(&req, &p, &r2) == 0, "second signing failed");
    same_result(&r, &r2, "signing twice");
    sigv4_result_clear(&r2);

    /* Canonical URI and query are fixed points. The method may contain
     * newlines, so skip it by length. */
    const char *after = r.canonical_request + ml + 1;
    char *curi = line_of(after, 0), *cq = line_of(after, 1);
    FUZZ_CHECK(curi && cq, "canonical request too short");
    sigv4_request req2 = req;
    req2.path = curi;
    req2.query = cq;
    FUZZ_CHECK(sigv4_sign(&req2, &p, &r2) == 0, "signing the canonical form failed");
    same_result(&r, &r2, "canonical URI/query fed back");
    sigv4_result_clear(&r2);
    free(curi);
    free(cq);

    /* Header order: reversed, when every name is distinct. */
    int distinct = 1;
    for (size_t i = 0; i < nh && distinct; i++)
        for (size_t j = i + 1; j < nh && distinct; j++)
            distinct = !same_name(hs[i].name, hs[j].name);
    if (distinct && nh > 1) {
        for (size_t i = 0; i < nh; i++)
            rev[i] = hs[nh - 1 - i];
        sigv4_request req3 = req;
        req3.headers = rev;
        FUZZ_CHECK(sigv4_sign(&req3, &p, &r2) == 0, "signing reversed headers failed");
        same_result(&r, &r2, "headers reversed");
        sigv4_result_clear(&r2);
    }

    sigv4_result_clear(&r);
    free(buf);
    return 0;
}
