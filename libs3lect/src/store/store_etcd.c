/* SPDX-License-Identifier: Apache-2.0 */
/* store_etcd.c - the etcd store (etcd://HOST:PORT[,HOST:PORT...]/KEY,
 * etcds:// for TLS): etcd's v3 JSON gateway (3.4 and later: /v3/) over the
 * shared HTTP layer, in the asynchronous begin/finish form the S3 store has
 * (peer mode, the connection pool and max_connections work the same).
 *
 *   read:    POST /v3/kv/range {"key": K}
 *            the value; the key's mod_revision is the etag
 *   create:  POST /v3/kv/txn compare create_revision(K) == 0, then put
 *   replace: POST /v3/kv/txn compare mod_revision(K) == ETAG, then put
 *            (the release too); "succeeded" false is a lost race
 *
 * Keys and values travel base64-encoded. A txn runs through raft: it is
 * linearizable, one writer wins each compare. The response header's
 * revision and raft term are no clock: server_now_ms stays 0 and the
 * engine keeps its own clock rules (as for DynamoDB).
 *
 * Several endpoints are tried in turn: a transport failure or an
 * "unavailable" answer of one moves the next request to the next one.
 * With a user (URL user-info, or S3LECT_ETCD_USER and S3LECT_ETCD_PASSWORD)
 * the store authenticates (POST /v3/auth/authenticate, a blocking call in
 * begin, only when it holds no valid token) and sends the token in the
 * Authorization header; an expired token is replaced on the next request.
 * Messages never hold the password or the token.
 *
 * Those extra requests are made inside the call, so the store is a blocking
 * one (get/put, run on the runtime's workers), not begin/finish on the
 * loop thread: see etcd_blocking.
 */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_store.h"
#include "config.h"
#include "http.h"
#include "store.h"
#include "util.h"

#define ETCD_DEFAULT_TIMEOUT_MS 10000
#define ETCD_DEFAULT_PORT "2379"
#define ETCD_MAX_BODY (1024 * 1024)
#define ETCD_MAX_ENDPOINTS 16

typedef struct etcd_store {
    st_store base;
    char **eps; /* "http[s]://host:port" */
    size_t neps, cur;
    char *eps_desc; /* the endpoints, for messages */
    char *ca_file, *cert, *cert_key;
    char *user, *password; /* password and token: wiped when freed */
    char *token;
    int64_t default_timeout_ms;
} etcd_store;

/* ---- request state ---- */

struct st_xfer {
    etcd_store *s;
    char *key;
    int put, create;
    char *if_match;
    int64_t timeout_ms;
    int64_t deadline; /* mono ms: the whole call's end (timeout_ms from its start) */
    size_t ep;        /* the endpoint this request went to */
    int had_token;
    CURL *easy;
    struct curl_slist *headers; /* holds the token: wiped when freed */
    http_body data;
    char errbuf[CURL_ERROR_SIZE];
};

static void xfer_free(st_xfer *x)
{
    if (!x)
        return;
    if (x->easy) {
        curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, NULL);
    }
    http_headers_free(x->headers);
    http_body_clear(&x->data);
    free(x->key);
    free(x->if_match);
    free(x);
}

/* The options every etcd request has: URL, timeouts, TLS. */
static void easy_setup(etcd_store *s, CURL *e, const char *url, int64_t timeout_ms, char *errbuf,
                       http_body *body, struct curl_slist *hl)
{
    http_easy_common(e, url, (long)timeout_ms, (long)timeout_ms, errbuf, body);
    /* the method's body is the caller's (no copy of a password) */
    http_easy_request(e, hl, NULL, NULL, NULL, NULL, 0);
    if (strncmp(url, "https:", 6) == 0) {
        http_set_ca(e, s->ca_file);
        if (s->cert) {
            curl_easy_setopt(e, CURLOPT_SSLCERT, s->cert);
            curl_easy_setopt(e, CURLOPT_SSLKEY, s->cert_key ? s->cert_key : s->cert);
        }
    }
    curl_easy_setopt(e, CURLOPT_POST, 1L);
}

/* etcd's error answer ({"error": ..., "message": ..., "code": N}). */
static void error_detail(const http_body *b, long status, char *out, size_t n, int *code)
{
    *code = -1;
    cJSON *j = b->body ? cJSON_ParseWithLength(b->body, b->len) : NULL;
    const cJSON *m = j ? cJSON_GetObjectItemCaseSensitive(j, "message") : NULL;
    if (!m || !cJSON_IsString(m))
        m = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
    const cJSON *c = j ? cJSON_GetObjectItemCaseSensitive(j, "code") : NULL;
    if (c && cJSON_IsNumber(c))
        *code = c->valueint;
    st_http_detail(b, status, m && cJSON_IsString(m) ? m->valuestring : NULL, out, n);
    cJSON_Delete(j);
}

/* Moves the next request to the next endpoint, when this one failed. */
static void next_endpoint(etcd_store *s, size_t failed)
{
    if (s->neps > 1 && s->cur == failed)
        s->cur = (failed + 1) % s->neps;
}

static void where_text(const etcd_store *s, size_t ep, char *out, size_t n)
{
    if (s->neps > 1)
        snprintf(out, n, "%s (endpoints %s)", s->eps[ep], s->eps_desc);
    else
        snprintf(out, n, "%s", s->eps[ep]);
}

/* POST /v3/auth/authenticate on the current endpoint: a new token, or -1
 * with out set. Blocking (bounded by timeout_ms). */
static int authenticate(etcd_store *s, int64_t timeout_ms, st_result *out)
{
    size_t ep = s->cur;
    char where[1200];
    where_text(s, ep, where, sizeof where);
    cJSON *j = cJSON_CreateObject();
    char *body = NULL;
    if (j && cJSON_AddStringToObject(j, "name", s->user) &&
        cJSON_AddStringToObject(j, "password", s->password ? s->password : ""))
        body = cJSON_PrintUnformatted(j);
    if (j) {
        /* the password's copy inside the JSON tree */
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "password");
        if (p && cJSON_IsString(p))
            u_wipe(p->valuestring, strlen(p->valuestring));
        cJSON_Delete(j);
    }
    char *url = u_asprintf("%s/v3/auth/authenticate", s->eps[ep]);
    CURL *e = curl_easy_init();
    struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = hl ? curl_slist_append(hl, "Expect:") : NULL;
    if (!body || !url || !e || !h2) {
        u_wipe_free(body);
        free(url);
        if (e)
            curl_easy_cleanup(e);
        curl_slist_free_all(hl);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return -1;
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    http_body data = {.max = 64 * 1024};
    easy_setup(s, e, url, timeout_ms, errbuf, &data, hl);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    CURLcode cc = curl_easy_perform(e);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(e);
    curl_slist_free_all(hl);
    u_wipe_free(body);
    free(url);
    int rc = -1;
    if (cc != CURLE_OK) {
        char what[300];
        snprintf(what, sizeof what, "authenticating as etcd user '%.100s'", s->user);
        st_transport_failure(cc, errbuf, what, where, timeout_ms, out);
        if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST)
            rc = -2; /* nothing sent: the caller tries the next endpoint */
        if (out->outcome == ST_TRANSIENT)
            next_endpoint(s, ep);
        else
            st_result_setf(out, ST_FATAL,
                           "%s: cannot talk to %s (%s): check the endpoints and, for etcds://, "
                           "the CA (--ca-file) and the client certificate (cert=, cert_key=)",
                           what, where, errbuf[0] ? errbuf : curl_easy_strerror(cc));
    } else if (status != 200) {
        char detail[300];
        int code;
        error_detail(&data, status, detail, sizeof detail, &code);
        if (strstr(detail, "authentication is not enabled"))
            st_result_setf(out, ST_AUTH,
                           "etcd at %s has authentication disabled (%s): drop the user '%.100s' "
                           "from the lock URL (and S3LECT_ETCD_USER), or enable it (etcdctl auth "
                           "enable)",
                           where, detail, s->user);
        else if (status == 400 || status == 401 || status == 403 || code == 3 || code == 16)
            st_result_setf(out, ST_AUTH,
                           "etcd at %s refused user '%.100s' (%s): check the user name and "
                           "password (the URL's user-info, or S3LECT_ETCD_USER and "
                           "S3LECT_ETCD_PASSWORD)",
                           where, s->user, detail);
        else if (status == 404 || status == 501)
            st_result_setf(out, ST_FATAL,
                           "etcd at %s has no v3 JSON gateway for authentication (%s): s3lect "
                           "needs etcd 3.4 or later",
                           where, detail);
        else {
            st_result_setf(out, ST_TRANSIENT,
                           "authenticating as etcd user '%.100s' at %s failed (%s); will retry",
                           s->user, where, detail);
            next_endpoint(s, ep);
        }
    } else {
        cJSON *r = data.body ? cJSON_ParseWithLength(data.body, data.len) : NULL;
        const cJSON *t = r ? cJSON_GetObjectItemCaseSensitive(r, "token") : NULL;
        if (t && cJSON_IsString(t) && t->valuestring[0] && !strpbrk(t->valuestring, "\r\n")) {
            u_wipe_free(s->token);
            s->token = u_strdup(t->valuestring);
            rc = s->token ? 0 : -1;
            if (rc)
                st_result_setf(out, ST_TRANSIENT, "out of memory");
        } else {
            st_result_setf(out, ST_FATAL,
                           "etcd at %s accepted user '%.100s' but sent no token: is "
                           "authentication enabled (etcdctl auth enable)?",
                           where, s->user);
        }
        if (t && cJSON_IsString(t))
            u_wipe(t->valuestring, strlen(t->valuestring));
        cJSON_Delete(r);
    }
    http_body_clear(&data);
    return rc;
}

/* The request's headers, with the current token; NULL when out of memory. */
static struct curl_slist *make_headers(const etcd_store *s)
{
    struct curl_slist *hl = NULL;
    int oom = 0;
    http_header_add(&hl, &oom, "Expect", NULL);
    http_header_add(&hl, &oom, "Content-Type", "application/json");
    if (s->token)
        http_header_add(&hl, &oom, "Authorization", s->token);
    if (oom) {
        http_headers_free(hl);
        return NULL;
    }
    return hl;
}

static st_xfer *etcd_begin(st_store *st, void *easy, const char *key, int put, const void *body,
                           size_t len, const char *if_match, int64_t timeout_ms, st_result *out)
{
    etcd_store *s = (etcd_store *)st;
    memset(out, 0, sizeof *out);
    if (!key || !*key) {
        st_result_setf(out, ST_FATAL, "empty etcd key: use etcd://HOST:PORT/path/to/leader");
        return NULL;
    }
    if (put && if_match &&
        (!*if_match || strspn(if_match, "0123456789") != strlen(if_match) ||
         strlen(if_match) > 20)) {
        st_result_setf(out, ST_PRECONDITION,
                       "etcd key '%.200s': '%.40s' is not an etcd revision, so it matches no "
                       "version of the key",
                       key, if_match);
        return NULL;
    }
    st_xfer *x = calloc(1, sizeof *x);
    if (!x || !(x->key = u_strdup(key)) ||
        (put && if_match && !(x->if_match = u_strdup(if_match)))) {
        xfer_free(x);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    x->s = s;
    x->put = put;
    x->create = put && !if_match;
    x->timeout_ms = timeout_ms > 0 ? timeout_ms : s->default_timeout_ms;
    x->deadline = u_mono_ms() + x->timeout_ms;
    x->data.max = ETCD_MAX_BODY;
    if (s->user && !s->token) {
        int rc = authenticate(s, x->timeout_ms, out);
        for (size_t i = 1; rc == -2 && i < s->neps; i++) {
            st_result_clear(out);
            memset(out, 0, sizeof *out);
            rc = authenticate(s, x->timeout_ms, out);
        }
        if (rc != 0) {
            xfer_free(x);
            return NULL;
        }
    }
    x->ep = s->cur;
    x->had_token = s->token != NULL;
    char *k64 = u_base64_dup(key, strlen(key), 0);
    char *v64 = put ? u_base64_dup(body ? body : "", len, 0) : NULL;
    char *json = NULL, *url = u_asprintf("%s/v3/kv/%s", s->eps[x->ep], put ? "txn" : "range");
    if (k64 && (!put || v64)) {
        if (!put)
            json = u_asprintf("{\"key\":\"%s\"}", k64);
        else if (x->create)
            json = u_asprintf("{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":"
                              "\"EQUAL\",\"create_revision\":\"0\"}],\"success\":[{"
                              "\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}]}",
                              k64, k64, v64);
        else
            json = u_asprintf("{\"compare\":[{\"key\":\"%s\",\"target\":\"MOD\",\"result\":"
                              "\"EQUAL\",\"mod_revision\":\"%s\"}],\"success\":[{"
                              "\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}]}",
                              k64, if_match, k64, v64);
    }
    free(k64);
    free(v64);
    struct curl_slist *hl = json && url ? make_headers(s) : NULL;
    int oom = !hl;
    x->headers = hl;
    if (oom) {
        free(url);
        free(json);
        xfer_free(x);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    CURL *e = easy;
    x->easy = e;
    curl_easy_reset(e);
    /* With several endpoints the first attempt gets half the time, so that
     * one member that accepts and never answers (cut from the quorum) leaves
     * time for the next within the renew deadline (issue 38): at least two
     * attempts fit in every call. */
    int64_t attempt = s->neps > 1 ? x->timeout_ms / 2 : x->timeout_ms;
    easy_setup(s, e, url, attempt > 0 ? attempt : 1, x->errbuf, &x->data, hl);
    free(url);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(json));
    curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, json);
    free(json);
    return x;
}

/* A decimal revision from a JSON string or number into out; -1 if none. */
static int revision(const cJSON *v, char *out, size_t n)
{
    if (v && cJSON_IsString(v) && v->valuestring[0] && strlen(v->valuestring) < n &&
        strspn(v->valuestring, "0123456789") == strlen(v->valuestring)) {
        snprintf(out, n, "%s", v->valuestring);
        return 0;
    }
    if (v && cJSON_IsNumber(v) && v->valuedouble >= 1) {
        snprintf(out, n, "%.0f", v->valuedouble);
        return 0;
    }
    return -1;
}

static void http_failure(st_xfer *x, long status, st_result *out)
{
    etcd_store *s = x->s;
    char detail[300], where[1200];
    int code;
    error_detail(&x->data, status, detail, sizeof detail, &code);
    where_text(s, x->ep, where, sizeof where);
    const char *op = x->put ? "txn (write)" : "range (read)";
    int bad_token = strstr(detail, "invalid auth token") != NULL ||
                    strstr(detail, "auth token") != NULL || status == 401 || code == 16;
    if (bad_token && x->had_token) {
        /* Expired (--auth-token-ttl) or revoked: the next request
         * authenticates again. */
        u_wipe_free(s->token);
        s->token = NULL;
        st_result_setf(out, ST_TRANSIENT,
                       "etcd %s of key '%.200s' at %s: the auth token was refused (%s); "
                       "authenticating again; will retry",
                       op, x->key, where, detail);
    } else if (strstr(detail, "user name is empty") || (bad_token && !s->user)) {
        st_result_setf(out, ST_AUTH,
                       "etcd at %s requires authentication (%s): put USER:PASSWORD@ in the lock "
                       "URL or set S3LECT_ETCD_USER and S3LECT_ETCD_PASSWORD",
                       where, detail);
    } else if (status == 403 || code == 7 || strstr(detail, "permission denied")) {
        st_result_setf(out, ST_AUTH,
                       "etcd %s of key '%.200s' refused for user '%.100s' (%s): grant its role "
                       "readwrite on a key range holding the key (etcdctl role grant-permission "
                       "ROLE readwrite --prefix=true PREFIX)",
                       op, x->key, s->user ? s->user : "(none)", detail);
    } else if (bad_token) {
        st_result_setf(out, ST_AUTH, "etcd %s of key '%.200s' at %s: authentication refused (%s)",
                       op, x->key, where, detail);
    } else if (status == 404 || status == 501) {
        st_result_setf(out, ST_FATAL,
                       "etcd at %s has no v3 JSON gateway (%s): s3lect needs etcd 3.4 or later "
                       "(/v3/ paths)",
                       where, detail);
    } else if (status == 408 || status == 429 || status >= 500 || code == 14 || code == 4) {
        next_endpoint(s, x->ep);
        st_result_setf(out, ST_TRANSIENT,
                       "etcd %s of key '%.200s': temporary failure at %s (%s); "
                       "will retry",
                       op, x->key, where, detail);
    } else {
        st_result_setf(out, ST_FATAL, "etcd %s of key '%.200s' failed at %s (%s)", op, x->key,
                       where, detail);
    }
}

static void etcd_finish(st_store *st, st_xfer *x, int curl_code, st_result *out)
{
    etcd_store *s = (etcd_store *)st;
    long status = st_http_finish_start(x->easy, out);
    CURLcode cc = (CURLcode)curl_code;
    /* The same request goes to the next endpoint, within the call's time:
     * after a refused connection (nothing was sent: a write too), each
     * connect bounded by a second, so one member down costs no failed call;
     * and after a member that accepted it and did not answer in its half of
     * the time (cut from the quorum, overloaded). A write may have been
     * applied there after all; resent, it then fails its revision compare,
     * which the elector reads back as it does any resent copy of its own
     * write. */
    for (size_t tries = 1; tries < s->neps; tries++) {
        int refused = cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST;
        int64_t left = x->deadline - u_mono_ms();
        if (!(refused || cc == CURLE_OPERATION_TIMEDOUT) || left < 50)
            break;
        next_endpoint(s, x->ep);
        x->ep = s->cur;
        char *url = u_asprintf("%s/v3/kv/%s", s->eps[x->ep], x->put ? "txn" : "range");
        if (!url)
            break;
        http_body_clear(&x->data);
        x->errbuf[0] = '\0';
        curl_easy_setopt(x->easy, CURLOPT_URL, url);
        curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)left);
        curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)(left < 1000 ? left : 1000));
        cc = curl_easy_perform(x->easy);
        free(url);
        status = 0;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
        out->http_status = (int)status;
    }
    /* A token etcd no longer knows (expired: --auth-token-ttl, or revoked)
     * is refused before anything is applied: authenticate again and send
     * the same request once more, so an expiry costs no failed call. */
    if (cc == CURLE_OK && status == 401 && x->had_token && s->user && x->data.body &&
        strstr(x->data.body, "invalid auth token")) {
        u_wipe_free(s->token);
        s->token = NULL;
        st_result tmp = {0};
        size_t ep = s->cur;
        s->cur = x->ep; /* authenticate where the request goes */
        int arc = authenticate(s, x->timeout_ms, &tmp);
        if (s->cur == x->ep)
            s->cur = ep;
        if (arc != 0) { /* its reason (a changed password, no member answering) */
            char *w = out->warning;
            *out = tmp;
            out->warning = w;
            xfer_free(x);
            return;
        }
        struct curl_slist *hl = make_headers(s);
        if (hl) {
            curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, hl);
            http_headers_free(x->headers);
            x->headers = hl;
            http_body_clear(&x->data);
            x->errbuf[0] = '\0';
            cc = curl_easy_perform(x->easy);
            status = 0;
            curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
            out->http_status = (int)status;
        }
    }
    curl_code = (int)cc;
    char where[1200];
    where_text(s, x->ep, where, sizeof where);
    if (http_transport_failed(cc, &x->data)) {
        char what[400];
        snprintf(what, sizeof what, "etcd %s of key '%.200s'", x->put ? "txn" : "range", x->key);
        st_transport_failure(curl_code, x->errbuf, what, where, x->timeout_ms, out);
        if (out->outcome == ST_FATAL)
            st_result_setf(out, ST_FATAL,
                           "%s: cannot talk to %s (%s): check the endpoints and, for etcds://, "
                           "the CA (--ca-file) and the client certificate (cert=, cert_key=)",
                           what, where, x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc));
        else if (strstr(x->errbuf, "certificate"))
            st_result_setf(out, ST_TRANSIENT,
                           "%s: the TLS handshake with %s failed (%s): the server needs a client "
                           "certificate it trusts (cert=, cert_key=); will retry",
                           what, where, x->errbuf);
        if (out->outcome == ST_TRANSIENT)
            next_endpoint(s, x->ep);
        xfer_free(x);
        return;
    }
    if (status != 200) {
        http_failure(x, status, out);
        xfer_free(x);
        return;
    }
    cJSON *j = x->data.body ? cJSON_ParseWithLength(x->data.body, x->data.len) : NULL;
    const cJSON *hdr = j ? cJSON_GetObjectItemCaseSensitive(j, "header") : NULL;
    char rev[32];
    if (!hdr || !cJSON_IsObject(hdr) ||
        revision(cJSON_GetObjectItemCaseSensitive(hdr, "revision"), rev, sizeof rev) != 0) {
        st_result_setf(out, ST_FATAL,
                       "etcd %s of key '%.200s': the answer of %s is not etcd's (no header "
                       "revision): is this an etcd v3 endpoint?",
                       x->put ? "txn" : "range", x->key, where);
    } else if (x->put) {
        const cJSON *ok = cJSON_GetObjectItemCaseSensitive(j, "succeeded");
        if (cJSON_IsTrue(ok)) {
            /* The txn's revision is the key's new mod_revision. */
            if (st_result_set_etag(out, rev) != 0)
                st_result_setf(out, ST_TRANSIENT, "out of memory");
            else
                out->outcome = ST_OK;
        } else if (x->create) {
            st_result_setf(out, ST_PRECONDITION,
                           "etcd key '%.200s' already exists: another writer won", x->key);
        } else {
            st_result_setf(out, ST_PRECONDITION,
                           "etcd key '%.200s' changed since revision %s: another writer won",
                           x->key, x->if_match);
        }
    } else {
        const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(j, "kvs");
        const cJSON *kv = kvs && cJSON_IsArray(kvs) ? cJSON_GetArrayItem(kvs, 0) : NULL;
        char mod[32];
        if (!kv) {
            st_result_setf(out, ST_NOT_FOUND, "etcd key '%.200s' does not exist", x->key);
        } else if (revision(cJSON_GetObjectItemCaseSensitive(kv, "mod_revision"), mod,
                            sizeof mod) != 0) {
            st_result_setf(out, ST_FATAL, "etcd range of key '%.200s' at %s: no mod_revision",
                           x->key, where);
        } else {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, "value");
            const char *vs = v && cJSON_IsString(v) ? v->valuestring : "";
            size_t vl = strlen(vs);
            uint8_t *dec = malloc(U_UNBASE64_MAX(vl));
            long n = dec ? u_unbase64(vs, vl, U_B64_STRICT, dec) : -1;
            if (!dec)
                st_result_setf(out, ST_TRANSIENT, "out of memory");
            else if (n < 0 || (v && !cJSON_IsString(v)))
                st_result_setf(out, ST_FATAL,
                               "etcd range of key '%.200s' at %s: the value is not base64", x->key,
                               where);
            else if (st_result_set_etag(out, mod) != 0 ||
                     /* Over 64 KiB: enough for the record parser to call it
                      * corrupt, as every object store's does (issue 38). */
                     st_result_set_body(out, dec,
                                        n > ST_MAX_OBJECT ? ST_MAX_OBJECT + 1 : (size_t)n) != 0)
                st_result_setf(out, ST_TRANSIENT, "out of memory");
            else
                out->outcome = ST_OK;
            free(dec);
        }
    }
    cJSON_Delete(j);
    xfer_free(x);
}

static const char *etcd_pool(const st_store *st)
{
    const etcd_store *s = (const etcd_store *)st;
    return s->eps[0];
}

static void etcd_destroy(st_store *st)
{
    etcd_store *s = (etcd_store *)st;
    if (!s)
        return;
    for (size_t i = 0; i < s->neps; i++)
        free(s->eps[i]);
    free(s->eps);
    free(s->eps_desc);
    free(s->ca_file);
    free(s->cert);
    free(s->cert_key);
    free(s->user);
    u_wipe_free(s->password);
    u_wipe_free(s->token);
    free(s);
}

/* A blocking store (the runtime runs its calls on its workers, as
 * PostgreSQL's), not an asynchronous one: authenticating, the retry after a
 * refused token and the next endpoint after a refused connection are
 * requests of their own made inside one call, and in an asynchronous store
 * they would block the runtime's loop thread, and with it the timers of
 * every other elector of the process (their step-downs among them). */
static void etcd_blocking(st_store *st, const char *key, int put, const void *body, size_t len,
                          const char *if_match, int64_t timeout_ms, st_result *out)
{
    CURL *h = st_easy(st, out);
    st_xfer *x = h ? etcd_begin(st, h, key, put, body, len, if_match, timeout_ms, out) : NULL;
    if (x)
        etcd_finish(st, x, curl_easy_perform(h), out);
}

static void etcd_get(st_store *st, const char *key, int64_t timeout_ms, st_result *out)
{
    etcd_blocking(st, key, 0, NULL, 0, NULL, timeout_ms, out);
}

static void etcd_put(st_store *st, const char *key, const void *data, size_t len,
                     const char *if_match, int64_t timeout_ms, st_result *out)
{
    etcd_blocking(st, key, 1, data, len, if_match, timeout_ms, out);
}

static const st_vtable etcd_vtable = {
    .name = "etcd", .get = etcd_get, .put = etcd_put, .destroy = etcd_destroy, .pool = etcd_pool};

int st_etcd_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out, char *err,
                 size_t errlen)
{
    *out = NULL;
    int rc = http_global_init(err, errlen);
    if (rc)
        return rc;
    etcd_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->base.vt = &etcd_vtable;
    s->default_timeout_ms =
        cfg->request_timeout > 0 ? cfg->request_timeout : ETCD_DEFAULT_TIMEOUT_MS;
    /* bucket: "http://H1:P1,H2:P2" or "https://..." */
    const char *sep = strstr(loc->bucket, "://");
    const char *scheme_end = sep ? sep : loc->bucket;
    const char *list = sep ? sep + 3 : loc->bucket;
    int oom = 0;
    s->eps = calloc(ETCD_MAX_ENDPOINTS, sizeof *s->eps);
    oom |= !s->eps;
    for (const char *p = list; !oom && *p && s->neps < ETCD_MAX_ENDPOINTS;) {
        size_t n = strcspn(p, ",");
        if (!(s->eps[s->neps] = u_asprintf("%.*s://%.*s", (int)(scheme_end - loc->bucket),
                                           loc->bucket, (int)n, p)))
            oom = 1;
        else
            s->neps++;
        p += n + (p[n] == ',');
    }
    if (!oom) {
        size_t total = 1;
        for (size_t i = 0; i < s->neps; i++)
            total += strlen(s->eps[i]) + 2;
        if ((s->eps_desc = calloc(1, total)) != NULL) {
            for (size_t i = 0; i < s->neps; i++) {
                if (i)
                    strcat(s->eps_desc, ", ");
                strcat(s->eps_desc, s->eps[i]);
            }
        }
        oom = !s->eps_desc;
    }
    const char *user = loc->opt1, *password = loc->opt2;
    const char *env_user = getenv("S3LECT_ETCD_USER");
    if (!user && env_user && *env_user)
        user = env_user;
    if (user && !password)
        password = getenv("S3LECT_ETCD_PASSWORD");
    if (!oom && ((cfg->ca_file && !(s->ca_file = u_strdup(cfg->ca_file))) ||
                 (user && !(s->user = u_strdup(user))) ||
                 (password && !(s->password = u_strdup(password)))))
        oom = 1;
    if (!oom && loc->opt3) {
        /* "CERT\nKEY" */
        size_t n = strcspn(loc->opt3, "\n");
        s->cert = n ? u_asprintf("%.*s", (int)n, loc->opt3) : NULL;
        s->cert_key = loc->opt3[n] && loc->opt3[n + 1] ? u_strdup(loc->opt3 + n + 1) : NULL;
        oom = (n && !s->cert) || (loc->opt3[n] && loc->opt3[n + 1] && !s->cert_key);
    }
    if (!oom && s->neps == 0) {
        snprintf(err, errlen, "etcd lock URL names no endpoint");
        etcd_destroy(&s->base);
        return S3LECT_EINVAL;
    }
    if (oom) {
        snprintf(err, errlen, "out of memory");
        etcd_destroy(&s->base);
        return S3LECT_ENOMEM;
    }
    if (s->user && !s->password) {
        snprintf(err, errlen,
                 "etcd user '%.100s' has no password: put it in the lock URL "
                 "(etcd://USER:PASSWORD@HOST:PORT/KEY) or set S3LECT_ETCD_PASSWORD",
                 s->user);
        etcd_destroy(&s->base);
        return S3LECT_EINVAL;
    }
    *out = &s->base;
    return 0;
}

/* ---- the lock URL ---- */

static int usage(const char *url, const char *what, char *err, size_t errlen)
{
    char *shown = st_lock_display(url);
    for (unsigned char *p = (unsigned char *)shown; p && *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = '?'; /* one line */
    snprintf(err, errlen,
             "lock URL '%.200s': %s; write etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/KEY"
             " (etcds:// for TLS, ?cert=FILE&cert_key=FILE for a client certificate)",
             shown ? shown : "", what);
    free(shown);
    return S3LECT_EINVAL;
}

/* One endpoint "host[:port]" or "[v6][:port]": appended to *list, lower
 * case, the port defaulted. */
static int add_endpoint(const char *url, const char *p, size_t n, char **list, char *err,
                        size_t errlen)
{
    const char *host = p, *port = NULL;
    size_t hl;
    if (n && p[0] == '[') {
        const char *close = memchr(p, ']', n);
        if (!close)
            return usage(url, "an IPv6 endpoint lacks its ']'", err, errlen);
        hl = (size_t)(close + 1 - p);
        for (const char *c = p + 1; c < close; c++)
            if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') ||
                  (*c >= 'A' && *c <= 'F') || *c == ':' || *c == '.'))
                return usage(url, "an IPv6 endpoint has an invalid character", err, errlen);
        if (close + 1 < p + n) {
            if (close[1] != ':')
                return usage(url, "an endpoint has text after its ']'", err, errlen);
            port = close + 2;
        }
    } else {
        const char *colon = memchr(p, ':', n);
        hl = colon ? (size_t)(colon - p) : n;
        if (colon)
            port = colon + 1;
        for (size_t i = 0; i < hl; i++) {
            char c = host[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '.' || c == '_'))
                return usage(url, "an endpoint's host name has an invalid character", err, errlen);
        }
    }
    if (hl == 0 || (hl == 2 && host[0] == '['))
        return usage(url, "an endpoint has no host", err, errlen);
    size_t pl = port ? (size_t)(p + n - port) : 0;
    if (port && (pl == 0 || pl > 5 || strspn(port, "0123456789") < pl || atoi(port) < 1 ||
                 atoi(port) > 65535))
        return usage(url, "an endpoint's port is not a number from 1 to 65535", err, errlen);
    char *r = u_asprintf("%s%s%.*s:%.*s", *list, **list ? "," : "", (int)hl, host,
                         port ? (int)pl : (int)strlen(ETCD_DEFAULT_PORT),
                         port ? port : ETCD_DEFAULT_PORT);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    for (char *c = r + strlen(*list); *c && *c != ':'; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    free(*list);
    *list = r;
    return 0;
}

int st_etcd_parse(const char *url, const char *rest, st_location *out, char *err, size_t errlen)
{
    int tls = strncasecmp(url, "etcds:", 6) == 0;
    if (strchr(url, '#'))
        return usage(url, "lock URLs take no fragment ('#')", err, errlen);
    size_t al = strcspn(rest, "/?");
    if (rest[al] != '/' || !rest[al + 1] || rest[al + 1] == '?')
        return usage(url, "it needs endpoints and a key", err, errlen);
    const char *auth = rest, *at = NULL;
    for (const char *p = auth; p < auth + al; p++)
        if (*p == '@')
            at = p;
    const char *hosts = at ? at + 1 : auth;
    size_t hlen = (size_t)(auth + al - hosts);
    int rc = 0, bad = 0;
    if (at) {
        const char *colon = memchr(auth, ':', (size_t)(at - auth));
        size_t ul = colon ? (size_t)(colon - auth) : (size_t)(at - auth);
        if (ul == 0)
            return usage(url, "the user-info has no user name", err, errlen);
        out->opt1 = st_pct_decode(auth, ul, &bad);
        if (out->opt1 && colon)
            out->opt2 = st_pct_decode(colon + 1, (size_t)(at - colon - 1), &bad);
        if (!out->opt1 || (colon && !out->opt2)) {
            if (bad)
                return usage(url, "the user-info has a malformed %-escape", err, errlen);
            snprintf(err, errlen, "out of memory");
            return S3LECT_ENOMEM;
        }
    }
    char *list = u_strdup("");
    if (!list) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    size_t count = 0;
    for (const char *p = hosts; !rc;) {
        size_t n = strcspn(p, ",");
        if (n > (size_t)(hosts + hlen - p))
            n = (size_t)(hosts + hlen - p);
        if (++count > ETCD_MAX_ENDPOINTS)
            rc = usage(url, "more than 16 endpoints", err, errlen);
        else if (n == 0)
            rc = usage(url, "an endpoint is empty", err, errlen);
        else
            rc = add_endpoint(url, p, n, &list, err, errlen);
        p += n;
        if (p >= hosts + hlen)
            break;
        p++; /* ',' */
    }
    if (rc) {
        free(list);
        return rc;
    }
    out->bucket = u_asprintf("%s://%s", tls ? "https" : "http", list);
    free(list);
    const char *key = rest + al + 1;
    size_t kl = strcspn(key, "?");
    out->key = u_asprintf("%.*s", (int)kl, key);
    if (!out->bucket || !out->key) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (strlen(out->key) > 1024)
        return usage(url, "the key is longer than 1024 bytes", err, errlen);
    for (const unsigned char *p = (const unsigned char *)out->key; *p;) {
        size_t l = st_utf8_len(p);
        if (st_is_control(p) || !l)
            return usage(url, "the key has a control character or is not valid UTF-8", err, errlen);
        p += l;
    }
    if (key[kl] == '?') {
        char *cert = NULL, *cert_key = NULL;
        const st_qparam qp[] = {{"cert", &cert}, {"cert_key", &cert_key}};
        rc = st_parse_query(url,
                            "etcds://HOST:PORT/KEY?cert=FILE&cert_key=FILE (the only parameters)",
                            key + kl + 1, qp, 2, NULL, err, errlen);
        if (!rc && !tls && (cert || cert_key))
            rc = usage(url, "cert= and cert_key= need TLS: etcds://", err, errlen);
        if (!rc && cert_key && !cert)
            rc = usage(url, "cert_key= needs cert=", err, errlen);
        if (!rc && ((cert && strchr(cert, '\n')) || (cert_key && strchr(cert_key, '\n'))))
            rc = usage(url, "a certificate path has a newline", err, errlen);
        if (!rc && cert && !(out->opt3 = u_asprintf("%s\n%s", cert, cert_key ? cert_key : ""))) {
            snprintf(err, errlen, "out of memory");
            rc = S3LECT_ENOMEM;
        }
        free(cert);
        free(cert_key);
        if (rc)
            return rc;
    }
    return 0;
}

int st_etcd_canonical(const st_location *loc, char **out)
{
    int tls = strncmp(loc->bucket, "https://", 8) == 0;
    const char *list = strstr(loc->bucket, "://");
    list = list ? list + 3 : loc->bucket;
    return st_canon_add(out, tls ? "etcds://" : "etcd://", list, 0) ||
           st_canon_add(out, "/", loc->key, 0);
}
