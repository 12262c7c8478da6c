/* SPDX-License-Identifier: Apache-2.0 */
/* http_store.c - what the HTTP stores share (http_store.h): endpoints,
 * transport failures, answers and bearer tokens. */
#include "http_store.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

/* ---- endpoints ---- */

void st_endpoint_clear(st_endpoint *e)
{
    free(e->host);
    free(e->authority);
    free(e->base_path);
    memset(e, 0, sizeof *e);
}

int st_endpoint_parse(const char *url, const char *what, st_endpoint *e, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    const char *p;
    if (strncasecmp(url, "https://", 8) == 0) {
        e->https = 1;
        p = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        p = url + 7;
    } else {
        snprintf(err, errlen,
                 "%s '%.200s' must start with http:// or https:// (e.g. http://127.0.0.1:9000)",
                 what, url);
        return S3LECT_EINVAL;
    }
    size_t alen = strcspn(p, "/?#");
    const char *rest = p + alen;
    if (strpbrk(rest, "?#") || memchr(p, '@', alen)) {
        snprintf(err, errlen, "%s '%.200s' may not contain user info, a query or a fragment", what,
                 url);
        return S3LECT_EINVAL;
    }
    const char *host = p, *port = NULL;
    size_t hlen;
    if (*p == '[') {
        const char *close = memchr(p, ']', alen);
        if (!close) {
            snprintf(err, errlen, "%s '%.200s': unclosed '[' in the IPv6 address", what, url);
            return S3LECT_EINVAL;
        }
        host = p + 1;
        hlen = (size_t)(close - host);
        if (close + 1 < p + alen) {
            if (close[1] != ':') {
                snprintf(err, errlen, "%s '%.200s': expected ':port' after ']'", what, url);
                return S3LECT_EINVAL;
            }
            port = close + 2;
        }
    } else {
        const char *colon = memchr(p, ':', alen);
        hlen = colon ? (size_t)(colon - p) : alen;
        port = colon ? colon + 1 : NULL;
    }
    if (hlen == 0) {
        snprintf(err, errlen, "%s '%.200s' has no host name", what, url);
        return S3LECT_EINVAL;
    }
    long portnum = 0;
    if (port) {
        char *endp;
        portnum = strtol(port, &endp, 10);
        if (endp != p + alen || endp == port || portnum < 1 || portnum > 65535) {
            snprintf(err, errlen, "%s '%.200s' has an invalid port", what, url);
            return S3LECT_EINVAL;
        }
    }
    /* The default port is left out of Host, as every HTTP client does. */
    int default_port = !port || portnum == (e->https ? 443 : 80);
    size_t blen = strlen(rest);
    while (blen > 0 && rest[blen - 1] == '/')
        blen--;
    e->host = malloc(hlen + 1);
    e->authority = default_port ? u_asprintf("%.*s", (int)(host - p + hlen + (*p == '[')), p)
                                : u_asprintf("%.*s", (int)alen, p);
    e->base_path = u_asprintf("%.*s", (int)blen, rest);
    if (!e->host || !e->authority || !e->base_path) {
        st_endpoint_clear(e);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    memcpy(e->host, host, hlen);
    e->host[hlen] = '\0';
    for (char *c = e->host; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    return 0;
}

void st_transport_failure(int curl_code, const char *errbuf, const char *what, const char *where,
                          int64_t timeout_ms, st_result *out)
{
    CURLcode cc = (CURLcode)curl_code;
    const char *why = errbuf && errbuf[0] ? errbuf : curl_easy_strerror(cc);
    switch (cc) {
    case CURLE_OPERATION_TIMEDOUT:
        st_result_setf(out, ST_TRANSIENT, "%s timed out after %lld ms at %s (%s)", what,
                       (long long)timeout_ms, where, why);
        break;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_CRL_BADFILE:
        st_result_setf(out, ST_FATAL,
                       "%s: cannot talk to %s (%s): check the endpoint and, for HTTPS, the CA "
                       "bundle (--ca-file or AWS_CA_BUNDLE)",
                       what, where, why);
        break;
    default:
        st_result_setf(out, ST_TRANSIENT, "%s: connection to %s failed (%s); will retry", what,
                       where, why);
        break;
    }
}

/* ---- answers ---- */

long st_http_finish_start(void *easy, st_result *out)
{
    char *warning = out->warning;
    memset(out, 0, sizeof *out);
    out->warning = warning;
    long status = 0;
    curl_easy_getinfo((CURL *)easy, CURLINFO_RESPONSE_CODE, &status);
    out->http_status = (int)status;
    return status;
}

void st_http_detail(const http_body *b, long status, const char *message, char *out, size_t n)
{
    if (message)
        snprintf(out, n, "HTTP %ld: %.200s", status, message);
    else if (b->body && b->len && b->len < 200 && !strpbrk(b->body, "<{"))
        snprintf(out, n, "HTTP %ld: %.*s", status, (int)strcspn(b->body, "\r\n"), b->body);
    else
        snprintf(out, n, "HTTP %ld", status);
}

void st_result_http_ok(st_result *out, const char *etag, const http_body *body, const char *date,
                       const char *last_modified)
{
    if (st_result_set_etag(out, etag) != 0 ||
        (body && st_result_set_body(out, body->body ? body->body : "", body->len) != 0)) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return;
    }
    out->outcome = ST_OK;
    /* Both HTTP dates are whole seconds (the fraction dropped). */
    if (body && st_http_date_ms(date, &out->server_now_ms) == 0 &&
        st_http_date_ms(last_modified, &out->server_modified_ms) != 0)
        out->server_now_ms = 0;
    if (out->server_now_ms > 0)
        out->server_res_ms = 1000;
}

/* ---- bearer tokens ---- */

#define BEARER_WARN_EVERY_MS 60000

int st_bearer_take(st_bearer *b, char **token, st_result *out)
{
    *token = NULL;
    if (!b->chain)
        return 0;
    if (b->stale) {
        b->stale = 0;
        cred_cache_stale(b->chain, b->gen);
    }
    char err[700];
    int rc = cred_cache_bearer(b->chain, token, &b->gen, err, sizeof err);
    if (rc) {
        st_result_setf(out, rc == S3LECT_EAUTH ? ST_AUTH : ST_TRANSIENT, "%s; will retry", err);
        return -1;
    }
    out->warning = cred_cache_refresh_warning(b->chain, &b->failures_seen, &b->warned_at,
                                              BEARER_WARN_EVERY_MS);
    return 0;
}

void st_bearer_clear(st_bearer *b)
{
    if (b->chain)
        cred_cache_release(b->chain);
    memset(b, 0, sizeof *b);
}
