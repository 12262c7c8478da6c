/* SPDX-License-Identifier: Apache-2.0 */
/* cred_sts.c - STS AssumeRole (SigV4-signed) and AssumeRoleWithWebIdentity
 * (unsigned), as form-encoded POSTs to the regional STS endpoint. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cred_parse.h"
#include "cred_sources.h"
#include "crypto.h"
#include "s3_xml.h"
#include "s3lect.h"
#include "sigv4.h"
#include "util.h"

#define MAX_TOKEN_FILE (64 * 1024)

char *aws_sts_endpoint(const aws_sts_ctx *ctx)
{
    const char *e = ctx->endpoint && *ctx->endpoint ? ctx->endpoint : NULL;
    if (!e && !aws_env_true("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) {
        e = aws_env("AWS_ENDPOINT_URL_STS");
        if (!e)
            e = aws_env("AWS_ENDPOINT_URL");
    }
    if (e) {
        size_t n = strlen(e);
        while (n > 0 && e[n - 1] == '/')
            n--;
        return u_asprintf("%.*s", (int)n, e);
    }
    const char *r = ctx->region && *ctx->region ? ctx->region : "us-east-1";
    return u_asprintf("https://sts.%s.%s", r,
                      strncmp(r, "cn-", 3) == 0 ? "amazonaws.com.cn" : "amazonaws.com");
}

/* Appends "&name=value" (value form-encoded) to *q. */
static int add_param(char **q, const char *name, const char *value)
{
    char *enc = sigv4_uri_encode(value, strlen(value), 0);
    if (!enc)
        return -1;
    char *n = u_asprintf("%s&%s=%s", *q, name, enc);
    u_wipe_free(enc);
    u_wipe_free(*q);
    *q = n;
    return n ? 0 : -1;
}

/* Host header and path of an endpoint URL ("http://h:p/base"). */
static int split_url(const char *url, char **authority, char **path)
{
    const char *p = strstr(url, "://");
    if (!p)
        return -1;
    p += 3;
    size_t alen = strcspn(p, "/");
    int https = strncasecmp(url, "https", 5) == 0;
    /* Leave a default port out of Host, as curl does. */
    if (alen > 4 && https && memcmp(p + alen - 4, ":443", 4) == 0)
        *authority = u_asprintf("%.*s", (int)alen - 4, p);
    else if (alen > 3 && !https && memcmp(p + alen - 3, ":80", 3) == 0)
        *authority = u_asprintf("%.*s", (int)alen - 3, p);
    else
        *authority = u_asprintf("%.*s", (int)alen, p);
    *path = u_asprintf("%s/", p + alen);
    return *authority && *path ? 0 : -1;
}

static int transient_code(const char *code)
{
    static const char *const codes[] = {
        "Throttling",      "ThrottlingException", "RequestLimitExceeded",  "ServiceUnavailable",
        "InternalFailure", "InternalError",       "IDPCommunicationError", "RequestTimeout"};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(code, codes[i]) == 0)
            return 1;
    return 0;
}

/* Sends the form body, signed with src when given; parses the answer. */
static int sts_call(const aws_sts_ctx *ctx, const char *action, const char *role_arn,
                    const char *form, const cred_fetched *src, cred_fetched *out, char *err,
                    size_t errlen)
{
    char *url = aws_sts_endpoint(ctx);
    char *authority = NULL, *path = NULL;
    if (!url || split_url(url, &authority, &path) != 0) {
        snprintf(err, errlen, "STS endpoint '%.200s' is not a URL (http://host[:port])",
                 url ? url : "?");
        free(url);
        free(authority);
        free(path);
        return url ? S3LECT_EAUTH : S3LECT_ENOMEM;
    }
    static const char ctype[] = "application/x-www-form-urlencoded; charset=utf-8";
    char amz_date[17];
    sigv4_amz_date(time(NULL), amz_date);
    char *lines[8] = {0};
    int nl = 0, rc = 0;
    lines[nl++] = u_asprintf("Host: %s", authority);
    lines[nl++] = u_asprintf("Content-Type: %s", ctype);
    lines[nl++] = u_strdup("Accept: application/xml");
    if (src) {
        sigv4_header h[4];
        size_t nh = 0;
        h[nh++] = (sigv4_header){"Host", authority};
        h[nh++] = (sigv4_header){"Content-Type", ctype};
        h[nh++] = (sigv4_header){"x-amz-date", amz_date};
        if (src->session_token)
            h[nh++] = (sigv4_header){"x-amz-security-token", src->session_token};
        sigv4_request req = {.method = "POST",
                             .path = path,
                             .headers = h,
                             .nheaders = nh,
                             .body = form,
                             .body_len = strlen(form)};
        sigv4_params sp = {.access_key_id = src->access_key_id,
                           .secret_access_key = src->secret_access_key,
                           .session_token = src->session_token,
                           .region = ctx->region && *ctx->region ? ctx->region : "us-east-1",
                           .service = "sts",
                           .amz_date = amz_date,
                           .normalize_path = 1};
        sigv4_result sig;
        if (sigv4_sign(&req, &sp, &sig) != 0) {
            snprintf(err, errlen, "cannot sign the STS %s request", action);
            rc = S3LECT_EAUTH;
        } else {
            lines[nl++] = u_asprintf("x-amz-date: %s", amz_date);
            if (src->session_token)
                lines[nl++] = u_asprintf("x-amz-security-token: %s", src->session_token);
            lines[nl++] = u_asprintf("Authorization: %s", sig.authorization);
            sigv4_result_clear(&sig);
        }
    }
    for (int i = 0; i < nl && rc == 0; i++)
        if (!lines[i]) {
            snprintf(err, errlen, "out of memory");
            rc = S3LECT_ENOMEM;
        }
    cred_http_resp resp = {0};
    char why[300] = "";
    if (rc == 0) {
        rc = cred_http("POST", url, (const char *const *)lines, form, strlen(form), ctx->ca_file,
                       ctx->timeout_ms, ctx->abort, &resp, why, sizeof why);
        if (rc == S3LECT_ETRANSIENT)
            snprintf(err, errlen, "STS %s of %s at %s failed: %s", action, role_arn, url, why);
        else if (rc)
            snprintf(err, errlen, "out of memory");
    }
    for (int i = 0; i < nl; i++)
        u_wipe_free(lines[i]);
    if (rc == 0) {
        if (resp.status == 200) {
            rc = aws_parse_sts_response(resp.body, resp.len, out, why, sizeof why);
            if (rc)
                snprintf(err, errlen, "STS %s of %s at %s: %s", action, role_arn, url, why);
        } else {
            s3_error_body xe;
            s3_xml_parse_error(resp.body, resp.len, &xe);
            rc = resp.status >= 500 || resp.status == 429 || transient_code(xe.code)
                     ? S3LECT_ETRANSIENT
                     : S3LECT_EAUTH;
            const char *hint = "";
            if (strcmp(xe.code, "AccessDenied") == 0)
                hint = src ? ": check the role's trust policy and that the source credentials "
                             "may call sts:AssumeRole on it"
                           : ": check the role's trust policy for this identity provider";
            else if (strcmp(xe.code, "ExpiredTokenException") == 0 ||
                     strcmp(xe.code, "ExpiredToken") == 0)
                hint = src ? ": the source credentials have expired"
                           : ": the web identity token has expired (is the token file still "
                             "being rotated?)";
            else if (strcmp(xe.code, "InvalidIdentityToken") == 0)
                hint = ": the identity provider or the token is not accepted for this role";
            snprintf(err, errlen, "STS %s of %s at %s was refused: HTTP %ld%s%s%s%s%s%s%s%s",
                     action, role_arn, url, resp.status, xe.code[0] ? " " : "", xe.code,
                     xe.message[0] ? ": " : "", xe.message, xe.request_id[0] ? " (request id " : "",
                     xe.request_id, xe.request_id[0] ? ")" : "", hint);
        }
    }
    cred_http_resp_clear(&resp);
    free(url);
    free(authority);
    free(path);
    return rc;
}

int aws_sts_assume_role(const aws_sts_ctx *ctx, const cred_fetched *src, const char *role_arn,
                        const char *session_name, int duration_s, const char *external_id,
                        cred_fetched *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char *form = u_strdup("Action=AssumeRole&Version=2011-06-15");
    char dur[24];
    snprintf(dur, sizeof dur, "%d", duration_s);
    int bad = !form || add_param(&form, "RoleArn", role_arn) ||
              add_param(&form, "RoleSessionName", session_name) ||
              (duration_s > 0 && add_param(&form, "DurationSeconds", dur)) ||
              (external_id && add_param(&form, "ExternalId", external_id));
    if (bad) {
        u_wipe_free(form);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    int rc = sts_call(ctx, "AssumeRole", role_arn, form, src, out, err, errlen);
    u_wipe_free(form);
    return rc;
}

/* Reads the token file (re-read every call: EKS rotates it). */
static int read_token_file(const char *path, char **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot read the web identity token file %.300s: %s", path,
                 strerror(errno));
        return S3LECT_EAUTH;
    }
    char *buf = malloc(MAX_TOKEN_FILE + 1);
    size_t len = 0;
    int rc = 0;
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    }
    while (rc == 0) {
        ssize_t n = read(fd, buf + len, MAX_TOKEN_FILE + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "cannot read the web identity token file %.300s: %s", path,
                     strerror(errno));
            rc = S3LECT_EAUTH;
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > MAX_TOKEN_FILE) {
            snprintf(err, errlen, "the web identity token file %.300s is larger than %d bytes",
                     path, MAX_TOKEN_FILE);
            rc = S3LECT_EAUTH;
        }
    }
    close(fd);
    if (rc == 0) {
        buf[len] = '\0';
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ' ||
                           buf[len - 1] == '\t'))
            buf[--len] = '\0';
        if (len == 0) {
            snprintf(err, errlen, "the web identity token file %.300s is empty", path);
            rc = S3LECT_EAUTH;
        }
    }
    if (rc) {
        if (buf) {
            u_wipe(buf, MAX_TOKEN_FILE + 1);
            free(buf);
        }
        return rc;
    }
    *out = buf;
    return 0;
}

int aws_sts_assume_role_web_identity(const aws_sts_ctx *ctx, const char *role_arn,
                                     const char *session_name, const char *token_file,
                                     int duration_s, cred_fetched *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char *token;
    int rc = read_token_file(token_file, &token, err, errlen);
    if (rc)
        return rc;
    char *form = u_strdup("Action=AssumeRoleWithWebIdentity&Version=2011-06-15");
    char dur[24];
    snprintf(dur, sizeof dur, "%d", duration_s);
    int bad = !form || add_param(&form, "RoleArn", role_arn) ||
              add_param(&form, "RoleSessionName", session_name) ||
              (duration_s > 0 && add_param(&form, "DurationSeconds", dur)) ||
              add_param(&form, "WebIdentityToken", token);
    u_wipe(token, MAX_TOKEN_FILE + 1);
    free(token);
    if (bad) {
        u_wipe_free(form);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    rc = sts_call(ctx, "AssumeRoleWithWebIdentity", role_arn, form, NULL, out, err, errlen);
    u_wipe_free(form);
    return rc;
}
