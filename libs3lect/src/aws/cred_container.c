/* SPDX-License-Identifier: Apache-2.0 */
/* cred_container.c - container credentials (cred_sources.h): ECS task roles
 * (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI under http://169.254.170.2) and EKS
 * Pod Identity or any local credentials server
 * (AWS_CONTAINER_CREDENTIALS_FULL_URI, with the SDKs' host rule), with the
 * Authorization header from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (re-read
 * every call) or AWS_CONTAINER_AUTHORIZATION_TOKEN.
 *
 * Messages name the variable and scheme://host:port, never the URL's path
 * (ECS's relative URI identifies the task's credentials), the token or an
 * answer's secrets.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred_metadata.h"
#include "s3lect.h"
#include "util.h"

int aws_container_configured(void)
{
    const char *rel = getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    const char *full = getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    return (rel && *rel) || (full && *full);
}

/* An Authorization value: printable ASCII (spaces and tabs allowed, no line
 * breaks or other controls: they would end the header). */
static int auth_value_ok(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

/* The authorization token, allocated, or NULL when none is configured.
 * Returns 0, S3LECT_EAUTH or S3LECT_ENOMEM. */
static int auth_token(char **out, char *err, size_t errlen)
{
    *out = NULL;
    const char *file = getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    const char *what;
    if (file && *file) {
        what = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE";
        int r = aws_md_read_small_file(file, AWS_MD_MAX_TOKEN, out);
        if (r == -2) {
            snprintf(err, errlen, "%s %s is larger than %d bytes", what, file, AWS_MD_MAX_TOKEN);
            return S3LECT_EAUTH;
        }
        if (r != 0) {
            if (errno == ENOMEM) {
                snprintf(err, errlen, "out of memory");
                return S3LECT_ENOMEM;
            }
            snprintf(err, errlen, "cannot read %s %s: %s", what, file, strerror(errno));
            return S3LECT_EAUTH;
        }
        if (!**out) {
            free(*out);
            *out = NULL;
            snprintf(err, errlen, "%s %s is empty", what, file);
            return S3LECT_EAUTH;
        }
    } else {
        const char *tok = getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN");
        if (!tok || !*tok)
            return 0;
        what = "AWS_CONTAINER_AUTHORIZATION_TOKEN";
        if (strlen(tok) > AWS_MD_MAX_TOKEN) {
            snprintf(err, errlen, "%s is longer than %d bytes", what, AWS_MD_MAX_TOKEN);
            return S3LECT_EAUTH;
        }
        *out = u_strdup(tok);
        if (!*out) {
            snprintf(err, errlen, "out of memory");
            return S3LECT_ENOMEM;
        }
    }
    if (!auth_value_ok(*out)) {
        u_wipe_free(*out);
        *out = NULL;
        snprintf(err, errlen, "%s%s holds a line break or control character", what,
                 file && *file ? "'s file" : "");
        return S3LECT_EAUTH;
    }
    return 0;
}

/* A printable, short copy of an error answer's field for a message; empty
 * when absent, not printable or containing the token. */
static void error_field(const cJSON *j, const char *a, const char *b, const char *token, char *out,
                        size_t outlen)
{
    out[0] = '\0';
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, a);
    if (!m)
        m = cJSON_GetObjectItemCaseSensitive(j, b);
    if (!cJSON_IsString(m) || !m->valuestring)
        return;
    const char *s = m->valuestring;
    if (token && *token && strstr(s, token))
        return;
    size_t n = 0;
    for (; s[n] && n + 1 < outlen && n < 120; n++) {
        unsigned char c = (unsigned char)s[n];
        if (c < 0x20 || c >= 0x7f)
            return;
        out[n] = s[n];
    }
    if (s[n]) { /* cut: mark it */
        size_t k = n > 3 ? n - 3 : 0;
        memcpy(out + k, "...", 3);
        n = k + 3;
    }
    out[n] = '\0';
}

static void describe_error_answer(const aws_md_resp *r, const char *token, char *out, size_t outlen)
{
    out[0] = '\0';
    cJSON *j = cJSON_ParseWithLength(r->body, r->len);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return;
    }
    char code[64], msg[128];
    error_field(j, "code", "Code", token, code, sizeof code);
    error_field(j, "message", "Message", token, msg, sizeof msg);
    cJSON_Delete(j);
    if (code[0] && msg[0])
        snprintf(out, outlen, ": %s: %s", code, msg);
    else if (code[0] || msg[0])
        snprintf(out, outlen, ": %s", code[0] ? code : msg);
}

int aws_container_fetch(int64_t timeout_ms, cred_fetched *out, char *err, size_t errlen)
{
    int64_t deadline = u_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    memset(out, 0, sizeof *out);
    char *url = NULL, *token = NULL, display[160];
    const char *var = NULL;
    int rc = aws_md_container_url(&url, &var, display, sizeof display, err, errlen);
    if (rc != 0)
        return rc;
    rc = auth_token(&token, err, errlen);
    if (rc != 0) {
        free(url);
        return rc;
    }
    void *curl = aws_md_curl_new();
    if (!curl) {
        u_wipe_free(token);
        free(url);
        snprintf(err, errlen, "libcurl failed to initialise");
        return S3LECT_ENOMEM;
    }
    aws_md_req req = {.url = url,
                      .header_name = token ? "Authorization" : NULL,
                      .header_value = token,
                      .max_body = AWS_MD_MAX_BODY,
                      .deadline_ms = deadline};
    aws_md_resp resp;
    int hr = aws_md_http(curl, &req, &resp);
    aws_md_curl_free(curl);
    free(url);
    if (hr == S3LECT_ENOMEM) {
        rc = S3LECT_ENOMEM;
        snprintf(err, errlen, "out of memory");
    } else if (hr != 0) {
        if (resp.too_large) {
            rc = S3LECT_EAUTH;
            snprintf(err, errlen, "container credentials (%s %s): answer larger than %d bytes", var,
                     display, AWS_MD_MAX_BODY);
        } else {
            rc = S3LECT_ETRANSIENT;
            if (resp.timed_out)
                snprintf(err, errlen, "container credentials (%s %s): no answer within %lld ms",
                         var, display, (long long)timeout_ms);
            else
                snprintf(err, errlen, "container credentials (%s %s): %s", var, display, resp.why);
        }
    } else if (resp.status != 200) {
        char detail[200];
        describe_error_answer(&resp, token, detail, sizeof detail);
        rc = resp.status >= 500 || resp.status == 429 ? S3LECT_ETRANSIENT : S3LECT_EAUTH;
        const char *hint = resp.status == 401 || resp.status == 403
                               ? " (check AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE])"
                               : "";
        snprintf(err, errlen, "container credentials (%s %s): HTTP %ld%s%s", var, display,
                 resp.status, detail, hint);
    } else {
        char perr[200];
        rc = aws_md_parse_creds(resp.body, resp.len, AWS_MD_CONTAINER, out, perr, sizeof perr);
        if (rc != 0)
            snprintf(err, errlen, "container credentials (%s %s): %s", var, display, perr);
    }
    aws_md_resp_clear(&resp);
    u_wipe_free(token);
    return rc;
}
