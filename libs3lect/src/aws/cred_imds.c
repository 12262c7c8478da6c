/* SPDX-License-Identifier: Apache-2.0 */
/* cred_imds.c - EC2 instance metadata credentials and region
 * (cred_sources.h): IMDSv2 (a session token from PUT /latest/api/token, sent
 * with every GET), with the SDKs' fallback to IMDSv1 only when the token
 * request is answered 403, 404 or 405 and AWS_EC2_METADATA_V1_DISABLED is not
 * true. AWS_EC2_METADATA_DISABLED, AWS_EC2_METADATA_SERVICE_ENDPOINT and
 * AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE are read at every call.
 *
 * A new session token is fetched for every call (calls are rare: one per
 * refresh); it is wiped after use and never appears in a message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred_metadata.h"
#include "s3lect.h"
#include "util.h"

#define TOKEN_TTL_HEADER "X-aws-ec2-metadata-token-ttl-seconds"
#define TOKEN_HEADER "X-aws-ec2-metadata-token"
#define TOKEN_TTL "21600" /* seconds, the SDKs' default */
#define CREDS_PATH "/latest/meta-data/iam/security-credentials/"

int aws_imds_enabled(void)
{
    return !aws_md_env_true("AWS_EC2_METADATA_DISABLED");
}

typedef struct imds {
    void *curl;
    char base[1024];
    char *token; /* NULL: IMDSv1 */
    int64_t deadline, timeout_ms;
} imds;

static void imds_close(imds *m)
{
    u_wipe_free(m->token);
    m->token = NULL;
    aws_md_curl_free(m->curl);
    m->curl = NULL;
}

/* A session token: printable ASCII without spaces. */
static int token_ok(const char *s, size_t len)
{
    if (len == 0 || len > AWS_MD_MAX_TOKEN || strlen(s) != len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return 0;
    return 1;
}

static void no_answer(const imds *m, const aws_md_resp *r, const char *what, char *err,
                      size_t errlen)
{
    if (r->timed_out)
        snprintf(err, errlen,
                 "instance metadata %s: no answer from %s within %lld ms (not on EC2? "
                 "AWS_EC2_METADATA_DISABLED=true skips it)",
                 what, m->base, (long long)m->timeout_ms);
    else
        snprintf(err, errlen,
                 "instance metadata %s: %s: %s (not on EC2? AWS_EC2_METADATA_DISABLED=true skips "
                 "it)",
                 what, m->base, r->why);
}

/* Opens a session: endpoint, then the token or the IMDSv1 fallback. */
static int imds_open(imds *m, int64_t timeout_ms, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    m->timeout_ms = timeout_ms;
    m->deadline = u_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    if (!aws_imds_enabled()) {
        snprintf(err, errlen, "instance metadata is disabled (AWS_EC2_METADATA_DISABLED=true)");
        return S3LECT_EAUTH;
    }
    int rc = aws_md_imds_endpoint(m->base, sizeof m->base, err, errlen);
    if (rc != 0)
        return rc;
    m->curl = aws_md_curl_new();
    if (!m->curl) {
        snprintf(err, errlen, "libcurl failed to initialise");
        return S3LECT_ENOMEM;
    }
    char url[1100];
    snprintf(url, sizeof url, "%s/latest/api/token", m->base);
    aws_md_req req = {.url = url,
                      .put = 1,
                      .header2_name = TOKEN_TTL_HEADER,
                      .header2_value = TOKEN_TTL,
                      .max_body = AWS_MD_MAX_TOKEN,
                      .deadline_ms = m->deadline};
    aws_md_resp r;
    int hr = aws_md_http(m->curl, &req, &r);
    if (hr == S3LECT_ENOMEM) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    } else if (hr != 0) {
        if (r.too_large) {
            snprintf(err, errlen, "instance metadata session token from %s is too large", m->base);
            rc = S3LECT_EAUTH;
        } else {
            no_answer(m, &r, "session token", err, errlen);
            rc = S3LECT_ETRANSIENT;
        }
    } else if (r.status == 200) {
        if (token_ok(r.body, r.len)) {
            m->token = r.body; /* kept; wiped by imds_close */
            r.body = NULL;
            r.len = 0;
            rc = 0;
        } else {
            snprintf(err, errlen, "instance metadata at %s answered a malformed session token",
                     m->base);
            rc = S3LECT_EAUTH;
        }
    } else if (r.status == 403 || r.status == 404 || r.status == 405) {
        if (aws_md_env_true("AWS_EC2_METADATA_V1_DISABLED")) {
            snprintf(err, errlen,
                     "instance metadata at %s refused a session token (HTTP %ld) and the IMDSv1 "
                     "fallback is disabled (AWS_EC2_METADATA_V1_DISABLED=true)",
                     m->base, r.status);
            rc = S3LECT_EAUTH;
        } else {
            rc = 0; /* IMDSv1 */
        }
    } else {
        snprintf(err, errlen, "instance metadata at %s: session token request answered HTTP %ld",
                 m->base, r.status);
        rc = r.status >= 500 || r.status == 429 ? S3LECT_ETRANSIENT : S3LECT_EAUTH;
    }
    aws_md_resp_clear(&r);
    if (rc != 0)
        imds_close(m);
    return rc;
}

/* GET base+path with the session token. Returns 0 with an answer in *r (any
 * status), or an error with err filled. */
static int imds_get(imds *m, const char *path, size_t max_body, const char *what, aws_md_resp *r,
                    char *err, size_t errlen)
{
    char url[1400];
    snprintf(url, sizeof url, "%s%s", m->base, path);
    aws_md_req req = {.url = url,
                      .header_name = m->token ? TOKEN_HEADER : NULL,
                      .header_value = m->token,
                      .max_body = max_body,
                      .deadline_ms = m->deadline};
    int hr = aws_md_http(m->curl, &req, r);
    if (hr == S3LECT_ENOMEM) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (hr != 0) {
        int big = r->too_large;
        if (big)
            snprintf(err, errlen, "instance metadata %s from %s: answer larger than %zu bytes",
                     what, m->base, max_body);
        else
            no_answer(m, r, what, err, errlen);
        aws_md_resp_clear(r);
        return big ? S3LECT_EAUTH : S3LECT_ETRANSIENT;
    }
    return 0;
}

/* An error for a non-200 answer to a GET. */
static int imds_status_error(const imds *m, long status, const char *what, char *err, size_t errlen)
{
    if (status == 401)
        snprintf(err, errlen,
                 m->token ? "instance metadata %s at %s: the session token was refused (HTTP 401)"
                          : "instance metadata %s at %s: HTTP 401, IMDSv2 is required but the "
                            "session token request was refused",
                 what, m->base);
    else
        snprintf(err, errlen, "instance metadata %s at %s: HTTP %ld", what, m->base, status);
    return status >= 500 || status == 429 ? S3LECT_ETRANSIENT : S3LECT_EAUTH;
}

int aws_imds_fetch(int64_t timeout_ms, cred_fetched *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    imds m;
    int rc = imds_open(&m, timeout_ms, err, errlen);
    if (rc != 0)
        return rc;
    aws_md_resp r;
    char role[129];
    rc = imds_get(&m, CREDS_PATH, 4096, "role name", &r, err, errlen);
    if (rc != 0)
        goto done;
    if (r.status == 404) {
        snprintf(err, errlen,
                 "instance metadata at %s: no IAM role is attached to this instance (HTTP 404 for "
                 "the role name; attach an instance profile)",
                 m.base);
        rc = S3LECT_EAUTH;
    } else if (r.status != 200) {
        rc = imds_status_error(&m, r.status, "role name", err, errlen);
    } else if (aws_md_parse_role(r.body, r.len, role, sizeof role) != 0) {
        snprintf(err, errlen, "instance metadata at %s answered a malformed role name", m.base);
        rc = S3LECT_EAUTH;
    }
    aws_md_resp_clear(&r);
    if (rc != 0)
        goto done;

    char path[sizeof CREDS_PATH + sizeof role];
    snprintf(path, sizeof path, "%s%s", CREDS_PATH, role);
    rc = imds_get(&m, path, AWS_MD_MAX_BODY, "credentials", &r, err, errlen);
    if (rc != 0)
        goto done;
    if (r.status == 404) {
        snprintf(err, errlen,
                 "instance metadata at %s: no credentials for role %s (HTTP 404; was the instance "
                 "profile changed?)",
                 m.base, role);
        rc = S3LECT_EAUTH;
    } else if (r.status != 200) {
        rc = imds_status_error(&m, r.status, "credentials", err, errlen);
    } else {
        char perr[200];
        rc = aws_md_parse_creds(r.body, r.len, AWS_MD_IMDS, out, perr, sizeof perr);
        if (rc != 0)
            snprintf(err, errlen, "%s (role %s at %s)", perr, role, m.base);
        else if (!out->principal[0])
            u_copyout(role, out->principal, sizeof out->principal);
    }
    aws_md_resp_clear(&r);
done:
    imds_close(&m);
    return rc;
}

char *aws_imds_region(int64_t timeout_ms)
{
    imds m;
    char err[256];
    if (imds_open(&m, timeout_ms, err, sizeof err) != 0)
        return NULL;
    aws_md_resp r;
    char *region = NULL;
    if (imds_get(&m, "/latest/meta-data/placement/region", 256, "region", &r, err, sizeof err) ==
        0) {
        if (r.status == 200) {
            size_t n = r.len;
            while (n > 0 &&
                   (r.body[n - 1] == '\n' || r.body[n - 1] == '\r' || r.body[n - 1] == ' '))
                n--;
            int ok = n > 0 && n <= 32 && strlen(r.body) >= n;
            for (size_t i = 0; ok && i < n; i++) {
                char c = r.body[i];
                ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
            }
            if (ok) {
                region = malloc(n + 1);
                if (region) {
                    memcpy(region, r.body, n);
                    region[n] = '\0';
                }
            }
        }
        aws_md_resp_clear(&r);
    }
    imds_close(&m);
    return region;
}
