/* SPDX-License-Identifier: Apache-2.0 */
/* http.c - libcurl's global initialisation, the response-body accumulator
 * and the common easy-handle options (http.h). */
#include "http.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3lect.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode init_rc = CURLE_FAILED_INIT;

static void init(void)
{
    init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int http_global_init(char *err, size_t errlen)
{
    pthread_once(&once, init);
    if (init_rc == CURLE_OK)
        return 0;
    if (err && errlen)
        snprintf(err, errlen, "libcurl failed to initialise: %s", curl_easy_strerror(init_rc));
    return S3LECT_EIO;
}

static void wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

void http_body_clear(http_body *b)
{
    if (b->body) {
        wipe(b->body, b->cap);
        free(b->body);
    }
    size_t max = b->max;
    memset(b, 0, sizeof *b);
    b->max = max;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    http_body *b = ud;
    size_t n = size * nmemb, take = n;
    if (take > b->max - b->len) {
        b->too_large = 1;
        take = b->max - b->len;
    }
    if (b->len + take + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + take + 1)
            cap *= 2;
        /* Grow by copy so that no unwiped old buffer is left behind. */
        char *p = malloc(cap);
        if (!p) {
            b->oom = 1;
            return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
        }
        if (b->body) {
            memcpy(p, b->body, b->len);
            wipe(b->body, b->cap);
            free(b->body);
        }
        b->body = p;
        b->cap = cap;
    }
    memcpy(b->body + b->len, data, take);
    b->len += take;
    b->body[b->len] = '\0';
    return b->too_large ? 0 : n;
}

void http_easy_common(CURL *e, const char *url, long total_ms, long connect_ms, char *errbuf,
                      http_body *body)
{
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, total_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "s3lect/" S3LECT_VERSION_STRING);
    if (errbuf) {
        errbuf[0] = '\0';
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    }
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, body);
}
