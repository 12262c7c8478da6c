/* SPDX-License-Identifier: Apache-2.0 */
/* cred_http.c - one HTTP request with a libcurl easy handle, for the
 * credential sources (STS, SSO, GCP's and Azure's token endpoints), and
 * the OAuth2 token call and answer on it. Bodies are capped, wiped when freed, and
 * header lines (which may hold tokens) are wiped before they are freed. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred_curl.h"
#include "cred_http.h"
#include "s3lect.h"
#include "util.h"

#define MAX_BODY (256 * 1024)

/* ---- libcurl pieces shared with cred_metadata.c (cred_curl.h) ---- */

void cred_curl_setup(CURL *e, const char *url, long timeout_ms, struct curl_slist *hl,
                     http_body *sink)
{
    http_easy_common(e, url, timeout_ms, timeout_ms, NULL, sink);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
}

void cred_curl_slist_wipe_free(struct curl_slist *hl)
{
    for (struct curl_slist *l = hl; l; l = l->next)
        u_wipe(l->data, strlen(l->data));
    curl_slist_free_all(hl);
}

CURLcode cred_curl_perform(CURL *e, struct curl_slist *hl, long *status)
{
    CURLcode cc = curl_easy_perform(e);
    *status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    cred_curl_slist_wipe_free(hl);
    return cc;
}

/* ---- JSON answers ---- */

static void json_wipe(cJSON *j)
{
    for (cJSON *c = j; c; c = c->next) {
        if (c->valuestring)
            u_wipe(c->valuestring, strlen(c->valuestring));
        if (c->child)
            json_wipe(c->child);
    }
}

void cred_json_wipe_delete(cJSON *j)
{
    if (!j)
        return;
    json_wipe(j);
    cJSON_Delete(j);
}

/* A JSON number, or a string of digits, as an integer; 0 when neither. */
static int64_t json_int(const cJSON *j, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
    if (v && cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 1e15)
        return (int64_t)v->valuedouble;
    if (v && cJSON_IsString(v) && v->valuestring)
        return atoll(v->valuestring) > 0 ? atoll(v->valuestring) : 0;
    return 0;
}

int cred_parse_bearer(const char *buf, size_t len, int64_t now_ms, cred_fetched *out, char *err,
                      size_t errlen)
{
    cJSON *j = cJSON_ParseWithLength(buf, len);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        snprintf(err, errlen, "the answer is not a JSON object");
        return S3LECT_EAUTH;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "access_token");
    if (!t || !cJSON_IsString(t))
        t = cJSON_GetObjectItemCaseSensitive(j, "accessToken");
    const char *tok = t && cJSON_IsString(t) && t->valuestring[0] ? t->valuestring : NULL;
    const cJSON *et = cJSON_GetObjectItemCaseSensitive(j, "expireTime");
    int64_t in = json_int(j, "expires_in"), on = json_int(j, "expires_on"), exp = 0;
    if (on > 0)
        exp = on * 1000;
    else if (in > 0)
        exp = now_ms + in * 1000;
    else if (et && cJSON_IsString(et) && u_parse_rfc3339(et->valuestring, &exp) != 0)
        exp = 0;
    int rc = 0;
    if (!tok) {
        snprintf(err, errlen, "the answer has no access_token");
        rc = S3LECT_EAUTH;
    } else if (exp <= 0) {
        snprintf(err, errlen, "the answer has no expires_in, expires_on or expireTime");
        rc = S3LECT_EAUTH;
    } else if (strpbrk(tok, "\r\n")) {
        snprintf(err, errlen, "the access token has a line break");
        rc = S3LECT_EAUTH;
    } else if (!(out->bearer = u_strdup(tok))) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    } else {
        out->expires_ms = exp;
    }
    if (tok)
        u_wipe((char *)tok, strlen(tok));
    cJSON_Delete(j);
    return rc;
}

/* ---- cred_http ---- */

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    const _Atomic int *abort = ud;
    return abort && *abort ? 1 : 0;
}

void cred_http_resp_clear(cred_http_resp *r)
{
    if (r->body) {
        u_wipe(r->body, r->len);
        free(r->body);
    }
    memset(r, 0, sizeof *r);
}

int cred_http(const char *method, const char *url, const char *const *headers, const char *body,
              size_t body_len, const char *ca_file, int64_t timeout_ms, const _Atomic int *abort,
              cred_http_resp *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (http_global_init(err, errlen) != 0)
        return S3LECT_ETRANSIENT;
    CURL *e = curl_easy_init();
    if (!e) {
        snprintf(err, errlen, "libcurl could not create a handle");
        return S3LECT_ENOMEM;
    }
    struct curl_slist *hl = NULL;
    int oom = 0;
    for (size_t i = 0; headers && headers[i] && !oom; i++) {
        struct curl_slist *l = curl_slist_append(hl, headers[i]);
        if (l)
            hl = l;
        else
            oom = 1;
    }
    if (!oom) {
        struct curl_slist *l = curl_slist_append(hl, "Expect:");
        if (l)
            hl = l;
        else
            oom = 1;
    }
    if (oom) {
        cred_curl_slist_wipe_free(hl);
        curl_easy_cleanup(e);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    char ebuf[CURL_ERROR_SIZE] = "";
    http_body s = {.max = MAX_BODY};
    if (timeout_ms <= 0)
        timeout_ms = 10000;
    cred_curl_setup(e, url, (long)timeout_ms, hl, &s);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, (void *)abort);
    http_set_ca(e, ca_file);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    long status;
    CURLcode cc = cred_curl_perform(e, hl, &status);
    curl_easy_cleanup(e);
    if (cc != CURLE_OK) {
        int too_large = s.too_large;
        http_body_clear(&s);
        if (too_large)
            snprintf(err, errlen, "the answer is larger than %d bytes", MAX_BODY);
        else if (cc == CURLE_ABORTED_BY_CALLBACK)
            snprintf(err, errlen, "cancelled (s3lect is stopping)");
        else if (cc == CURLE_OPERATION_TIMEDOUT)
            snprintf(err, errlen, "no answer within %lld ms", (long long)timeout_ms);
        else
            snprintf(err, errlen, "%s", ebuf[0] ? ebuf : curl_easy_strerror(cc));
        return S3LECT_ETRANSIENT;
    }
    out->status = status;
    out->body = s.body;
    out->len = s.len;
    if (!out->body) {
        out->body = calloc(1, 1);
        if (!out->body) {
            snprintf(err, errlen, "out of memory");
            return S3LECT_ENOMEM;
        }
    }
    return 0;
}

int cred_token_call(const char *method, const char *url, const char *const *headers,
                    const char *body, const char *what, const char *ca_file, int64_t timeout_ms,
                    const _Atomic int *abort, cred_fetched *out, char *err, size_t errlen)
{
    cred_http_resp r;
    char e[300] = "";
    int rc = cred_http(method, url, headers, body, body ? strlen(body) : 0, ca_file, timeout_ms,
                       abort, &r, e, sizeof e);
    if (rc) {
        snprintf(err, errlen, "%s did not answer: %s", what, e);
        return rc;
    }
    if (r.status == 200) {
        rc = cred_parse_bearer(r.body, r.len, u_wall_ms(), out, e, sizeof e);
        if (rc)
            snprintf(err, errlen, "%s gave no usable token: %s", what, e);
    } else {
        /* OAuth2: {"error":"invalid_grant","error_description":"..."} (Entra
         * ID, IMDS and App Service too); Google APIs: {"error":{"message":
         * "..."}}. Neither holds a secret. */
        cJSON *j = cJSON_ParseWithLength(r.body ? r.body : "", r.len);
        const cJSON *ev = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
        const cJSON *dv = j ? cJSON_GetObjectItemCaseSensitive(j, "error_description") : NULL;
        if (ev && cJSON_IsObject(ev))
            dv = cJSON_GetObjectItemCaseSensitive(ev, "message");
        const char *code = ev && cJSON_IsString(ev) ? ev->valuestring : NULL;
        const char *desc = dv && cJSON_IsString(dv) ? dv->valuestring : NULL;
        char detail[320] = "";
        if (code || desc)
            snprintf(detail, sizeof detail, " (%.80s%s%.220s)", code ? code : "",
                     code && desc ? ": " : "", desc ? desc : "");
        for (char *c = detail; *c; c++)
            if ((unsigned char)*c < 0x20)
                *c = ' ';
        cJSON_Delete(j);
        int transient = r.status == 408 || r.status == 429 || r.status >= 500;
        snprintf(err, errlen, "%s answered HTTP %ld%s", what, r.status, detail);
        rc = transient ? S3LECT_ETRANSIENT : S3LECT_EAUTH;
    }
    cred_http_resp_clear(&r);
    return rc;
}
