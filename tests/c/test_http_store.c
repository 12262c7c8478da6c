/* SPDX-License-Identifier: Apache-2.0 */
/* test_http_store.c - the pieces the HTTP stores share (store/http_store.c,
 * base/http.c): a 2xx answer into the result (etag, body, the store's
 * clock), an error answer's detail, the start of a finish, wiped header
 * lists, what counts as a failure below HTTP, and a bearer handle without
 * a chain. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "http_store.h"
#include "testutil.h"
#include "util.h"

#define DATE "Tue, 02 Jan 2024 03:04:05 GMT"
#define EARLIER "Tue, 02 Jan 2024 03:04:00 GMT"

static void ok_answers(void)
{
    http_body b = {.body = "{\"a\":1}", .len = 7};
    st_result r = {0};
    st_result_http_ok(&r, "\"e1\"", &b, DATE, EARLIER);
    CHECK(r.outcome == ST_OK && r.etag && strcmp(r.etag, "\"e1\"") == 0, "read: etag");
    CHECK(r.body && r.body_len == 7 && memcmp(r.body, b.body, 7) == 0, "read: body");
    CHECK(r.server_now_ms == 1704164645000 && r.server_modified_ms == 1704164640000 &&
              r.server_res_ms == 1000,
          "read: the store's clock %lld %lld", (long long)r.server_now_ms,
          (long long)r.server_modified_ms);
    st_result_clear(&r);

    /* a date that does not parse: no clock at all */
    memset(&r, 0, sizeof r);
    st_result_http_ok(&r, "g", &b, DATE, "yesterday");
    CHECK(r.outcome == ST_OK && r.server_now_ms == 0 && r.server_modified_ms == 0 &&
              r.server_res_ms == 0,
          "no Last-Modified: no clock");
    st_result_clear(&r);
    memset(&r, 0, sizeof r);
    st_result_http_ok(&r, "g", &b, "", EARLIER);
    CHECK(r.outcome == ST_OK && r.server_now_ms == 0 && r.server_res_ms == 0, "no Date: no clock");
    st_result_clear(&r);

    /* a write: the new etag only */
    memset(&r, 0, sizeof r);
    st_result_http_ok(&r, "7", NULL, DATE, EARLIER);
    CHECK(r.outcome == ST_OK && strcmp(r.etag, "7") == 0 && !r.body && r.server_now_ms == 0 &&
              r.server_modified_ms == 0,
          "write: etag, no body, no clock");
    st_result_clear(&r);

    /* an empty read body is a body of 0 bytes */
    http_body none = {0};
    memset(&r, 0, sizeof r);
    st_result_http_ok(&r, "e", &none, DATE, EARLIER);
    CHECK(r.outcome == ST_OK && r.body && r.body_len == 0, "empty body");
    st_result_clear(&r);
}

static void details(void)
{
    char d[300];
    http_body plain = {.body = "slow down\r\nmore", .len = 15};
    st_http_detail(&plain, 503, "the service says so", d, sizeof d);
    CHECK(strcmp(d, "HTTP 503: the service says so") == 0, "service message: %s", d);
    st_http_detail(&plain, 503, NULL, d, sizeof d);
    CHECK(strcmp(d, "HTTP 503: slow down") == 0, "first line of a short body: %s", d);
    http_body json = {.body = "{\"x\":1}", .len = 7};
    st_http_detail(&json, 400, NULL, d, sizeof d);
    CHECK(strcmp(d, "HTTP 400") == 0, "no JSON in the detail: %s", d);
    http_body xml = {.body = "<Error/>", .len = 8};
    st_http_detail(&xml, 403, NULL, d, sizeof d);
    CHECK(strcmp(d, "HTTP 403") == 0, "no XML in the detail: %s", d);
    char big[300];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    http_body long_body = {.body = big, .len = sizeof big - 1};
    st_http_detail(&long_body, 500, NULL, d, sizeof d);
    CHECK(strcmp(d, "HTTP 500") == 0, "no long body in the detail: %s", d);
    http_body empty = {0};
    st_http_detail(&empty, 404, NULL, d, sizeof d);
    CHECK(strcmp(d, "HTTP 404") == 0, "no body: %s", d);
}

static void finish_start(void)
{
    CURL *e = curl_easy_init();
    st_result r = {0};
    r.outcome = ST_FATAL;
    r.http_status = 99;
    r.warning = u_strdup("refresh failed");
    long status = st_http_finish_start(e, &r);
    CHECK(status == 0 && r.http_status == 0 && r.outcome == 0 && !r.message,
          "a handle that sent nothing: status 0, result cleared");
    CHECK(r.warning && strcmp(r.warning, "refresh failed") == 0, "begin's warning kept");
    st_result_clear(&r);
    curl_easy_cleanup(e);
}

static void headers(void)
{
    struct curl_slist *hl = NULL;
    int oom = 0;
    http_header_add(&hl, &oom, "Expect", NULL);
    http_header_add(&hl, &oom, "Authorization", "Bearer t0ken");
    CHECK(!oom && hl && strcmp(hl->data, "Expect:") == 0 && hl->next &&
              strcmp(hl->next->data, "Authorization: Bearer t0ken") == 0 && !hl->next->next,
          "header lines");
    oom = 1; /* once out of memory, nothing more is added */
    http_header_add(&hl, &oom, "Accept", NULL);
    CHECK(!hl->next->next, "nothing added after oom");
    http_headers_free(hl);
    http_headers_free(NULL);

    http_body b = {0};
    CHECK(!http_transport_failed(CURLE_OK, &b), "OK");
    CHECK(http_transport_failed(CURLE_WRITE_ERROR, &b), "a write error");
    CHECK(http_transport_failed(CURLE_COULDNT_CONNECT, &b), "refused");
    b.too_large = 1;
    CHECK(!http_transport_failed(CURLE_WRITE_ERROR, &b), "our own cut of a long body");
    CHECK(http_transport_failed(CURLE_OPERATION_TIMEDOUT, &b), "timeout");
}

static void bearer(void)
{
    st_bearer b = {0};
    st_result r = {0};
    char *token = (char *)"x";
    CHECK(st_bearer_take(&b, &token, &r) == 0 && token == NULL && !r.warning && r.outcome == 0,
          "no chain: no token, no error");
    st_bearer_refused(&b);
    CHECK(b.stale == 1, "refused marks stale");
    st_bearer_clear(&b);
    CHECK(b.stale == 0 && !b.chain, "cleared");
}

int main(void)
{
    if (http_global_init(NULL, 0) != 0)
        return 1;
    ok_answers();
    details();
    finish_start();
    headers();
    bearer();
    return t_done("http_store");
}
