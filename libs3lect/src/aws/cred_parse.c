/* SPDX-License-Identifier: Apache-2.0 */
/* cred_parse.c - parsers for credential sources' answers (cred_parse.h). */
#include "cred_parse.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred_http.h"
#include "s3lect.h"
#include "util.h"

/* A key, secret or token goes into HTTP headers: printable ASCII without
 * spaces only (no header injection, no surprise in the signature). */
static int token_chars_ok(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++)
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7E)
            return 0;
    return 1;
}

/* Checks what a parser filled in; on failure clears out. */
static int finish(cred_fetched *out, const char *what, char *err, size_t errlen)
{
    const char *bad = !out->access_key_id                   ? "has no access key id"
                      : !out->secret_access_key             ? "has no secret access key"
                      : !token_chars_ok(out->access_key_id) ? "has an access key id with "
                                                              "characters that are not printable "
                                                              "ASCII"
                      : !token_chars_ok(out->secret_access_key)
                          ? "has a secret access key with characters that are not printable ASCII"
                      : out->session_token && !token_chars_ok(out->session_token)
                          ? "has a session token with characters that are not printable ASCII"
                          : NULL;
    if (bad) {
        snprintf(err, errlen, "%s %s", what, bad);
        cred_fetched_clear(out);
        return S3LECT_EAUTH;
    }
    return 0;
}

/* ---- JSON ---- */

static cJSON *json_parse(const char *buf, size_t len)
{
    if (!buf)
        return NULL;
    return cJSON_ParseWithLength(buf, len);
}

/* A string member (case-sensitive name) copied, or NULL when absent or not a
 * non-empty string. *oom set on allocation failure. */
static char *json_str(const cJSON *obj, const char *name, int *oom)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!cJSON_IsString(v) || !v->valuestring || !*v->valuestring)
        return NULL;
    char *s = strdup(v->valuestring);
    if (!s)
        *oom = 1;
    return s;
}

int aws_parse_process_output(const char *buf, size_t len, cred_fetched *out, char *err,
                             size_t errlen)
{
    static const char what[] = "the output of credential_process";
    memset(out, 0, sizeof *out);
    cJSON *j = json_parse(buf, len);
    if (!cJSON_IsObject(j)) {
        snprintf(err, errlen,
                 "%s is not a JSON object (it must print {\"Version\": 1, \"AccessKeyId\": ..., "
                 "\"SecretAccessKey\": ...} on stdout, and nothing else)",
                 what);
        cred_json_wipe_delete(j);
        return S3LECT_EAUTH;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "Version");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1.0) {
        if (cJSON_IsNumber(ver))
            snprintf(err, errlen, "%s has \"Version\": %g; only version 1 is supported", what,
                     ver->valuedouble);
        else
            snprintf(err, errlen, "%s has no \"Version\": 1", what);
        cred_json_wipe_delete(j);
        return S3LECT_EAUTH;
    }
    int oom = 0;
    out->access_key_id = json_str(j, "AccessKeyId", &oom);
    out->secret_access_key = json_str(j, "SecretAccessKey", &oom);
    out->session_token = json_str(j, "SessionToken", &oom);
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(j, "Expiration");
    int rc = 0;
    if (oom) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    } else if (exp && !cJSON_IsNull(exp) &&
               (!cJSON_IsString(exp) || !exp->valuestring ||
                u_parse_rfc3339(exp->valuestring, &out->expires_ms) != 0)) {
        snprintf(err, errlen,
                 "%s has an \"Expiration\" that is not an RFC 3339 time (e.g. "
                 "\"2030-01-02T03:04:05Z\")",
                 what);
        rc = S3LECT_EAUTH;
    } else if (!out->access_key_id || !out->secret_access_key) {
        snprintf(err, errlen, "%s lacks \"%s\"", what,
                 !out->access_key_id ? "AccessKeyId" : "SecretAccessKey");
        rc = S3LECT_EAUTH;
    }
    cred_json_wipe_delete(j);
    if (rc) {
        cred_fetched_clear(out);
        return rc;
    }
    return finish(out, what, err, errlen);
}

int aws_parse_sso_token(const char *buf, size_t len, char **token, int64_t *expires_ms, char *err,
                        size_t errlen)
{
    *token = NULL;
    *expires_ms = 0;
    cJSON *j = json_parse(buf, len);
    int oom = 0, rc = 0;
    if (!cJSON_IsObject(j)) {
        snprintf(err, errlen, "the SSO token cache file is not a JSON object");
        rc = S3LECT_EAUTH;
    } else {
        *token = json_str(j, "accessToken", &oom);
        const cJSON *exp = cJSON_GetObjectItemCaseSensitive(j, "expiresAt");
        if (oom) {
            snprintf(err, errlen, "out of memory");
            rc = S3LECT_ENOMEM;
        } else if (!*token || !token_chars_ok(*token)) {
            snprintf(err, errlen, "the SSO token cache file has no usable \"accessToken\"");
            rc = S3LECT_EAUTH;
        } else if (!cJSON_IsString(exp) || !exp->valuestring ||
                   u_parse_rfc3339(exp->valuestring, expires_ms) != 0) {
            snprintf(err, errlen, "the SSO token cache file has no \"expiresAt\" in RFC 3339 form");
            rc = S3LECT_EAUTH;
        }
    }
    cred_json_wipe_delete(j);
    if (rc) {
        u_wipe_free(*token);
        *token = NULL;
        *expires_ms = 0;
    }
    return rc;
}

int aws_parse_sso_role_credentials(const char *buf, size_t len, cred_fetched *out, char *err,
                                   size_t errlen)
{
    static const char what[] = "the SSO portal's answer";
    memset(out, 0, sizeof *out);
    cJSON *j = json_parse(buf, len);
    const cJSON *rc_obj =
        cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "roleCredentials") : NULL;
    int oom = 0, rc = 0;
    if (!cJSON_IsObject(rc_obj)) {
        snprintf(err, errlen, "%s has no \"roleCredentials\" object", what);
        rc = S3LECT_EAUTH;
    } else {
        out->access_key_id = json_str(rc_obj, "accessKeyId", &oom);
        out->secret_access_key = json_str(rc_obj, "secretAccessKey", &oom);
        out->session_token = json_str(rc_obj, "sessionToken", &oom);
        const cJSON *exp = cJSON_GetObjectItemCaseSensitive(rc_obj, "expiration");
        if (oom) {
            snprintf(err, errlen, "out of memory");
            rc = S3LECT_ENOMEM;
        } else if (!cJSON_IsNumber(exp) || !isfinite(exp->valuedouble) || exp->valuedouble < 1.0 ||
                   exp->valuedouble > 1e15) {
            snprintf(err, errlen, "%s has no \"expiration\" (milliseconds since 1970)", what);
            rc = S3LECT_EAUTH;
        } else {
            out->expires_ms = (int64_t)exp->valuedouble;
        }
    }
    cred_json_wipe_delete(j);
    if (rc) {
        cred_fetched_clear(out);
        return rc;
    }
    return finish(out, what, err, errlen);
}

/* ---- XML ---- */

char *aws_xml_text(const char *s, const char *end, const char *tag, const char **after, int *oom)
{
    size_t tlen = strlen(tag);
    while (s < end) {
        const char *lt = memchr(s, '<', (size_t)(end - s));
        if (!lt)
            return NULL;
        const char *name = lt + 1;
        const char *gt = memchr(name, '>', (size_t)(end - name));
        if (!gt)
            return NULL;
        s = gt + 1;
        if ((size_t)(gt - name) < tlen || memcmp(name, tag, tlen) != 0)
            continue;
        char next = name[tlen];
        if (next != '>' && next != ' ' && next != '\t' && next != '\r' && next != '\n')
            continue;
        if (gt[-1] == '/') /* <Tag/> */
            return NULL;
        const char *tend = memchr(s, '<', (size_t)(end - s));
        if (!tend)
            tend = end;
        if (after)
            *after = tend;
        char *out = malloc((size_t)(tend - s) + 1);
        if (!out) {
            *oom = 1;
            return NULL;
        }
        size_t n = 0;
        for (const char *p = s; p < tend;) {
            static const struct {
                const char *ent;
                char ch;
            } named[] = {
                {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
            int done = 0;
            if (*p == '&') {
                for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
                    size_t el = strlen(named[i].ent);
                    if ((size_t)(tend - p) >= el && memcmp(p, named[i].ent, el) == 0) {
                        out[n++] = named[i].ch;
                        p += el;
                        done = 1;
                        break;
                    }
                }
                if (!done && tend - p >= 4 && p[1] == '#') {
                    const char *q = p + 2;
                    unsigned v = 0;
                    int digits = 0;
                    while (q < tend && *q >= '0' && *q <= '9' && digits < 3) {
                        v = v * 10 + (unsigned)(*q++ - '0');
                        digits++;
                    }
                    if (digits && q < tend && *q == ';' && v > 0 && v < 128) {
                        out[n++] = (char)v;
                        p = q + 1;
                        done = 1;
                    }
                }
            }
            if (!done)
                out[n++] = *p++;
        }
        out[n] = '\0';
        /* trim surrounding whitespace */
        size_t a = 0;
        while (out[a] == ' ' || out[a] == '\t' || out[a] == '\r' || out[a] == '\n')
            a++;
        while (n > a && (out[n - 1] == ' ' || out[n - 1] == '\t' || out[n - 1] == '\r' ||
                         out[n - 1] == '\n'))
            n--;
        memmove(out, out + a, n - a);
        u_wipe(out + (n - a), (size_t)(tend - s) + 1 - (n - a));
        out[n - a] = '\0';
        if (!*out) {
            free(out);
            return NULL;
        }
        return out;
    }
    return NULL;
}

int aws_parse_sts_response(const char *buf, size_t len, cred_fetched *out, char *err, size_t errlen)
{
    static const char what[] = "STS's answer";
    memset(out, 0, sizeof *out);
    if (!buf) {
        snprintf(err, errlen, "%s is empty", what);
        return S3LECT_EAUTH;
    }
    const char *end = buf + len;
    /* Only inside <Credentials>...</Credentials>. */
    const char *cs = NULL;
    for (const char *p = buf; p + 13 <= end; p++) {
        if (*p == '<' && memcmp(p, "<Credentials>", 13) == 0) {
            cs = p + 13;
            break;
        }
    }
    if (!cs) {
        snprintf(err, errlen, "%s has no <Credentials> element", what);
        return S3LECT_EAUTH;
    }
    const char *ce = end;
    for (const char *p = cs; p + 14 <= end; p++) {
        if (*p == '<' && memcmp(p, "</Credentials>", 14) == 0) {
            ce = p;
            break;
        }
    }
    int oom = 0;
    out->access_key_id = aws_xml_text(cs, ce, "AccessKeyId", NULL, &oom);
    out->secret_access_key = aws_xml_text(cs, ce, "SecretAccessKey", NULL, &oom);
    out->session_token = aws_xml_text(cs, ce, "SessionToken", NULL, &oom);
    char *exp = aws_xml_text(cs, ce, "Expiration", NULL, &oom);
    char *arn = NULL;
    for (const char *p = buf; p + 17 <= end; p++) {
        if (*p == '<' && memcmp(p, "<AssumedRoleUser>", 17) == 0) {
            arn = aws_xml_text(p + 17, end, "Arn", NULL, &oom);
            break;
        }
    }
    int rc = 0;
    if (oom) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    } else if (!out->access_key_id || !out->secret_access_key || !out->session_token) {
        snprintf(err, errlen, "%s lacks <%s>", what,
                 !out->access_key_id       ? "AccessKeyId"
                 : !out->secret_access_key ? "SecretAccessKey"
                                           : "SessionToken");
        rc = S3LECT_EAUTH;
    } else if (!exp || u_parse_rfc3339(exp, &out->expires_ms) != 0) {
        snprintf(err, errlen, "%s has no <Expiration> in RFC 3339 form", what);
        rc = S3LECT_EAUTH;
    }
    if (rc == 0 && arn) {
        /* The principal is shown to users: printable ASCII only. */
        size_t n = 0;
        for (const char *a = arn; *a && n + 1 < sizeof out->principal; a++)
            out->principal[n++] = (*a >= 0x20 && *a < 0x7F) ? *a : '?';
        out->principal[n] = '\0';
    }
    free(exp);
    free(arn);
    if (rc) {
        cred_fetched_clear(out);
        return rc;
    }
    return finish(out, what, err, errlen);
}
