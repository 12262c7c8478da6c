/* SPDX-License-Identifier: Apache-2.0 */
/* cred_sso.c - IAM Identity Center (SSO): the token `aws sso login` cached
 * under ~/.aws/sso/cache/<sha1>.json, exchanged at the portal's
 * GetRoleCredentials for role credentials. s3lect never logs in itself (that
 * needs a browser): an expired token gets a message naming the command. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred_parse.h"
#include "cred_sources.h"
#include "s3lect.h"
#include "sigv4.h"
#include "util.h"

#define MAX_CACHE_FILE (256 * 1024)

/* ---- SHA-1 (FIPS 180-4), only to name the cache file ---- */

static uint32_t rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const unsigned char *p)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5A827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ED9EBA1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8F1BBCDC;
        } else {
            f = b ^ c ^ d;
            k = 0xCA62C1D6;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void aws_sha1_hex(const char *s, char out[41])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    size_t len = strlen(s), i = 0;
    unsigned char block[64];
    for (; i + 64 <= len; i += 64)
        sha1_block(h, (const unsigned char *)s + i);
    size_t rest = len - i;
    memset(block, 0, sizeof block);
    memcpy(block, s + i, rest);
    block[rest] = 0x80;
    if (rest >= 56) {
        sha1_block(h, block);
        memset(block, 0, sizeof block);
    }
    uint64_t bits = (uint64_t)len * 8;
    for (int j = 0; j < 8; j++)
        block[63 - j] = (unsigned char)(bits >> (8 * j));
    sha1_block(h, block);
    for (int j = 0; j < 5; j++)
        snprintf(out + 8 * j, 9, "%08x", h[j]);
}

/* ---- the cached token ---- */

static int read_file(const char *path, char **buf, size_t *len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return errno ? errno : EIO;
    char *b = malloc(MAX_CACHE_FILE + 1);
    if (!b) {
        fclose(f);
        return ENOMEM;
    }
    size_t n = fread(b, 1, MAX_CACHE_FILE + 1, f);
    int bad = ferror(f) || n > MAX_CACHE_FILE;
    fclose(f);
    if (bad) {
        u_wipe(b, MAX_CACHE_FILE + 1);
        free(b);
        return EFBIG;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

int aws_sso_fetch(const aws_sso_params *p, cred_fetched *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char login[300];
    snprintf(login, sizeof login, "run 'aws sso login --profile %s'", p->profile);
    if (!p->start_url || !p->region || !p->account_id || !p->role_name) {
        snprintf(err, errlen,
                 "SSO profile '%s' needs sso_start_url, sso_region (in the profile or its "
                 "[sso-session]), sso_account_id and sso_role_name; %s is missing",
                 p->profile,
                 !p->start_url    ? "sso_start_url"
                 : !p->region     ? "sso_region"
                 : !p->account_id ? "sso_account_id"
                                  : "sso_role_name");
        return S3LECT_EAUTH;
    }
    char hash[41];
    aws_sha1_hex(p->session_name ? p->session_name : p->start_url, hash);
    char *home = u_home_dir();
    char *path = home ? u_asprintf("%s/.aws/sso/cache/%s.json", home, hash) : NULL;
    free(home);
    if (!path) {
        snprintf(err, errlen, "SSO profile '%s': no home directory for ~/.aws/sso/cache",
                 p->profile);
        return S3LECT_EAUTH;
    }
    char *buf = NULL, *token = NULL;
    size_t len = 0;
    int64_t expires = 0;
    int e = read_file(path, &buf, &len);
    if (e) {
        snprintf(err, errlen, "SSO profile '%s': no cached SSO token (%s: %s): %s", p->profile,
                 path, strerror(e), login);
        free(path);
        return S3LECT_EAUTH;
    }
    char why[200];
    int rc = aws_parse_sso_token(buf, len, &token, &expires, why, sizeof why);
    u_wipe(buf, len);
    free(buf);
    if (rc) {
        snprintf(err, errlen, "SSO profile '%s': %s (%s): %s", p->profile, why, path, login);
        free(path);
        return rc;
    }
    free(path);
    if (expires <= u_wall_ms()) {
        char when[40];
        u_format_rfc3339(expires, when, sizeof when);
        snprintf(err, errlen, "SSO profile '%s': the SSO session expired at %s: %s", p->profile,
                 when, login);
        u_wipe_free(token);
        return S3LECT_EAUTH;
    }
    const char *base = aws_env_true("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
                           ? NULL
                           : aws_env("AWS_ENDPOINT_URL_SSO");
    char *ep = base ? u_strdup(base) : u_asprintf("https://portal.sso.%s.amazonaws.com", p->region);
    char *role = sigv4_uri_encode(p->role_name, strlen(p->role_name), 0);
    char *acct = sigv4_uri_encode(p->account_id, strlen(p->account_id), 0);
    char *url =
        ep && role && acct
            ? u_asprintf("%s/federation/credentials?role_name=%s&account_id=%s", ep, role, acct)
            : NULL;
    char *hdr = u_asprintf("x-amz-sso_bearer_token: %s", token);
    u_wipe_free(token);
    free(role);
    free(acct);
    if (!url || !hdr) {
        free(ep);
        free(url);
        u_wipe_free(hdr);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    const char *headers[] = {hdr, "Accept: application/json", NULL};
    cred_http_resp resp = {0};
    rc = cred_http("GET", url, headers, NULL, 0, p->ca_file, p->timeout_ms, p->abort, &resp, why,
                   sizeof why);
    u_wipe_free(hdr);
    free(url);
    if (rc == S3LECT_ETRANSIENT) {
        snprintf(err, errlen, "SSO GetRoleCredentials for profile '%s' at %s failed: %s",
                 p->profile, ep, why);
    } else if (rc) {
        snprintf(err, errlen, "out of memory");
    } else if (resp.status == 401 || resp.status == 403) {
        snprintf(err, errlen,
                 "the SSO portal at %s refused the cached SSO token of profile '%s' (HTTP %ld): "
                 "the session expired or was revoked, or role %s in account %s is not assigned: "
                 "%s",
                 ep, p->profile, resp.status, p->role_name, p->account_id, login);
        rc = S3LECT_EAUTH;
    } else if (resp.status != 200) {
        snprintf(err, errlen, "SSO GetRoleCredentials for profile '%s' at %s answered HTTP %ld",
                 p->profile, ep, resp.status);
        rc = resp.status >= 500 || resp.status == 429 ? S3LECT_ETRANSIENT : S3LECT_EAUTH;
    } else {
        rc = aws_parse_sso_role_credentials(resp.body, resp.len, out, why, sizeof why);
        if (rc)
            snprintf(err, errlen, "SSO profile '%s': %s", p->profile, why);
        else
            snprintf(out->principal, sizeof out->principal, "role %.64s in account %.20s (SSO)",
                     p->role_name, p->account_id);
    }
    cred_http_resp_clear(&resp);
    free(ep);
    return rc;
}
