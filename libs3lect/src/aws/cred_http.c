/* SPDX-License-Identifier: Apache-2.0 */
/* cred_http.c - one HTTP request with a libcurl easy handle, for the
 * credential sources (STS, SSO). Bodies are capped, wiped when freed, and
 * header lines (which may hold tokens) are wiped before they are freed. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred_curl.h"
#include "cred_parse.h"
#include "cred_sources.h"
#include "s3lect.h"

#define MAX_BODY (256 * 1024)

/* ---- libcurl pieces shared with cred_metadata.c (cred_curl.h) ---- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode init_rc = CURLE_FAILED_INIT;

static void init(void)
{
    init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int aws_curl_global_init(void)
{
    pthread_once(&once, init);
    return init_rc == CURLE_OK ? 0 : -1;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    aws_body_sink *s = ud;
    size_t n = size * nmemb;
    if (n > s->max - s->len) {
        s->too_large = 1;
        return 0; /* aborts the transfer */
    }
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 1024;
        while (cap < s->len + n + 1)
            cap *= 2;
        /* Grow by copy so that no unwiped old buffer is left behind. */
        char *p = malloc(cap);
        if (!p) {
            s->oom = 1;
            return 0;
        }
        if (s->buf) {
            memcpy(p, s->buf, s->len);
            aws_wipe(s->buf, s->cap);
            free(s->buf);
        }
        s->buf = p;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    s->buf[s->len] = '\0';
    return n;
}

void aws_body_sink_clear(aws_body_sink *s)
{
    if (s->buf) {
        aws_wipe(s->buf, s->cap);
        free(s->buf);
    }
    memset(s, 0, sizeof *s);
}

void aws_curl_setup(CURL *e, const char *url, long timeout_ms, struct curl_slist *hl,
                    aws_body_sink *sink)
{
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_USERAGENT, "s3lect/" S3LECT_VERSION_STRING);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, sink);
}

void aws_curl_slist_wipe_free(struct curl_slist *hl)
{
    for (struct curl_slist *l = hl; l; l = l->next)
        aws_wipe(l->data, strlen(l->data));
    curl_slist_free_all(hl);
}

CURLcode aws_curl_perform(CURL *e, struct curl_slist *hl, long *status)
{
    CURLcode cc = curl_easy_perform(e);
    *status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    aws_curl_slist_wipe_free(hl);
    return cc;
}

/* ---- aws_http ---- */

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    const _Atomic int *abort = ud;
    return abort && *abort ? 1 : 0;
}

void aws_http_resp_clear(aws_http_resp *r)
{
    if (r->body) {
        aws_wipe(r->body, r->len);
        free(r->body);
    }
    memset(r, 0, sizeof *r);
}

int aws_http(const char *method, const char *url, const char *const *headers, const char *body,
             size_t body_len, const char *ca_file, int64_t timeout_ms, const _Atomic int *abort,
             aws_http_resp *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (aws_curl_global_init() != 0) {
        snprintf(err, errlen, "libcurl failed to initialise");
        return S3LECT_ETRANSIENT;
    }
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
        aws_curl_slist_wipe_free(hl);
        curl_easy_cleanup(e);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    char ebuf[CURL_ERROR_SIZE] = "";
    aws_body_sink s = {.max = MAX_BODY};
    if (timeout_ms <= 0)
        timeout_ms = 10000;
    aws_curl_setup(e, url, (long)timeout_ms, hl, &s);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, (void *)abort);
    if (ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, ca_file);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    long status;
    CURLcode cc = aws_curl_perform(e, hl, &status);
    curl_easy_cleanup(e);
    if (cc != CURLE_OK) {
        int too_large = s.too_large;
        aws_body_sink_clear(&s);
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
    out->body = s.buf;
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
