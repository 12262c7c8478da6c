/* SPDX-License-Identifier: Apache-2.0 */
/* aws_http.c - credentials, endpoints and signed requests shared by the
 * AWS stores (aws_http.h). */
#include "aws_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cred_parse.h"
#include "crypto.h"
#include "util.h"

/* ---- credentials ---- */

int ah_signer_open(ah_signer *g, const struct s3lect_config *cfg, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    struct s3lect_config *c = &g->credcfg;
    c->access_key_id = u_strdup(cfg->access_key_id);
    c->secret_access_key = u_strdup(cfg->secret_access_key);
    c->session_token = u_strdup(cfg->session_token);
    c->profile = u_strdup(cfg->profile);
    c->region = u_strdup(cfg->region);
    c->ca_file = u_strdup(cfg->ca_file);
    c->request_timeout = cfg->request_timeout;
    if ((cfg->access_key_id && !c->access_key_id) ||
        (cfg->secret_access_key && !c->secret_access_key) ||
        (cfg->session_token && !c->session_token) || (cfg->profile && !c->profile) ||
        (cfg->region && !c->region) || (cfg->ca_file && !c->ca_file)) {
        ah_signer_clear(g);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    int rc = aws_chain_open(&g->credcfg, 0, &g->chain, err, errlen);
    if (rc)
        ah_signer_clear(g);
    return rc;
}

void ah_signer_clear(ah_signer *g)
{
    struct s3lect_config *c = &g->credcfg;
    free(c->access_key_id);
    u_wipe_free(c->secret_access_key);
    u_wipe_free(c->session_token);
    free(c->profile);
    free(c->region);
    free(c->ca_file);
    aws_creds_clear(&g->creds);
    if (g->chain)
        cred_cache_release(g->chain);
    memset(g, 0, sizeof *g);
}

/* A refresh of temporary credentials failed while the current ones are
 * still valid: the request goes on with them, and the failure is handed to
 * the runtime as a warning (an ERROR event, logged by the CLI), at most once
 * a minute, so the operator can fix the source before they expire. */
#define CREDS_WARN_EVERY_MS 60000
static void note_refresh_failure(ah_signer *g, st_result *out)
{
    out->warning = cred_cache_refresh_warning(g->chain, &g->creds_failures_seen,
                                              &g->creds_warned_at, CREDS_WARN_EVERY_MS);
}

int ah_signer_creds(ah_signer *g, st_result *out)
{
    char err[600];
    if (g->creds_stale) {
        g->creds_stale = 0;
        if (cred_cache_is_static(g->chain)) {
            cred_cache *fresh;
            int rc = aws_chain_open(&g->credcfg, CRED_CACHE_NOWAIT, &fresh, err, sizeof err);
            if (rc != 0) {
                aws_creds_clear(&g->creds);
                st_result_setf(out, rc == S3LECT_EAUTH ? ST_AUTH : ST_TRANSIENT, "%s", err);
                g->creds_stale = 1;
                return -1;
            }
            cred_cache_release(g->chain);
            g->chain = fresh;
        } else {
            cred_cache_stale(g->chain, g->creds_gen);
        }
    }
    aws_creds fresh;
    int rc = aws_chain_get(g->chain, &fresh, &g->creds_gen, err, sizeof err);
    if (rc != 0) {
        st_result_setf(out, ST_TRANSIENT, "%s; will retry", err);
        return -1;
    }
    aws_creds_clear(&g->creds);
    g->creds = fresh;
    note_refresh_failure(g, out);
    char problem[700];
    if (!out->warning && aws_file_problem_take(problem, sizeof problem))
        out->warning = u_asprintf("%s", problem);
    return 0;
}

/* ---- responses ---- */

static size_t on_header(char *line, size_t size, size_t nmemb, void *ud)
{
    ah_response *r = ud;
    size_t n = size * nmemb;
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* A new response (after 100 Continue): forget the previous headers. */
        r->etag[0] = '\0';
        r->bucket_region[0] = '\0';
        r->date[0] = r->last_modified[0] = '\0';
    } else if (n > 5 && strncasecmp(line, "Date:", 5) == 0) {
        http_header_value(line, n, 5, r->date, sizeof r->date);
    } else if (n > 14 && strncasecmp(line, "Last-Modified:", 14) == 0) {
        http_header_value(line, n, 14, r->last_modified, sizeof r->last_modified);
    } else if (n > 5 && strncasecmp(line, "ETag:", 5) == 0) {
        http_header_value(line, n, 5, r->etag, sizeof r->etag);
    } else if (n > 20 && strncasecmp(line, "x-amz-bucket-region:", 20) == 0) {
        http_header_value(line, n, 20, r->bucket_region, sizeof r->bucket_region);
    }
    return n;
}

/* ---- requests ---- */

#define AH_MAX_HEADERS 12

int ah_call_prepare(ah_call *c, void *easy, ah_signer *g, const ah_request *rq, st_result *out)
{
    memset(c, 0, sizeof *c);
    c->easy = easy;
    if (rq->nheaders > AH_MAX_HEADERS - 4) {
        st_result_setf(out, ST_FATAL, "too many request headers");
        return -1;
    }
    const void *body = rq->body ? rq->body : "";
    char amz_date[17], payload_hash[65];
    uint8_t digest[CR_SHA256_LEN];
    sigv4_amz_date(time(NULL), amz_date);
    cr_sha256(body, rq->body_len, digest);
    cr_hex(digest, sizeof digest, payload_hash);

    const char *token = g->creds.session_token;
    sigv4_header h[AH_MAX_HEADERS];
    size_t nh = 0;
    h[nh++] = (sigv4_header){"Host", rq->host};
    h[nh++] = (sigv4_header){"x-amz-date", amz_date};
    if (rq->s3)
        h[nh++] = (sigv4_header){"x-amz-content-sha256", payload_hash};
    if (token)
        h[nh++] = (sigv4_header){"x-amz-security-token", token};
    for (size_t i = 0; i < rq->nheaders; i++)
        h[nh++] = rq->headers[i];
    sigv4_request sreq = {.method = rq->method,
                          .path = rq->path,
                          .query = rq->query,
                          .headers = h,
                          .nheaders = nh,
                          .payload_hash = payload_hash};
    sigv4_params sp = {.access_key_id = g->creds.access_key_id,
                       .secret_access_key = g->creds.secret_access_key,
                       .session_token = token,
                       .region = rq->region,
                       .service = rq->service,
                       .amz_date = amz_date,
                       .normalize_path = !rq->s3,
                       .sign_body = rq->s3};
    sigv4_result sig;
    if (sigv4_sign(&sreq, &sp, &sig) != 0) {
        st_result_setf(out, ST_FATAL, "cannot sign the %s request to %s", rq->service, rq->origin);
        return -1;
    }
    struct curl_slist *hl = NULL;
    int oom = 0;
    for (size_t i = 0; i < nh; i++) /* x-amz-security-token: wiped with the list */
        http_header_add(&hl, &oom, h[i].name, h[i].value);
    http_header_add(&hl, &oom, "Authorization", sig.authorization);
    sigv4_result_clear(&sig);
    /* No "Expect: 100-continue" round trip and no default Accept. */
    http_header_add(&hl, &oom, "Expect", NULL);
    http_header_add(&hl, &oom, "Accept", NULL);
    char *url = u_asprintf("%s%s%s%s", rq->origin, rq->path, rq->query && *rq->query ? "?" : "",
                           rq->query && *rq->query ? rq->query : "");
    c->headers = hl;
    if (oom || !url) {
        free(url);
        ah_call_release(c); /* the caller's release is then a no-op */
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return -1;
    }

    CURL *e = easy;
    /* reset keeps the handle's connection; the connections themselves live
     * in the multi handle's pool (keep-alive) when the runtime runs it. */
    curl_easy_reset(e);
    c->resp.data.max = AH_MAX_BODY;
    http_easy_common(e, url, (long)rq->timeout_ms, (long)rq->timeout_ms, c->errbuf, &c->resp.data);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* the path is signed exactly as sent */
    http_easy_request(e, hl, on_header, &c->resp, rq->method, body, rq->body_len);
    /* The configured bundle, else the system's where libcurl's built-in
     * one is missing (a release build on another distribution). */
    http_set_ca(e, rq->ca_file);
    free(url);
    return 0;
}

void ah_call_release(ah_call *c)
{
    if (c->easy) {
        /* The handle must not keep pointers into c. */
        curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(c->easy, CURLOPT_ERRORBUFFER, NULL);
    }
    http_headers_free(c->headers);
    http_body_clear(&c->resp.data);
    memset(c, 0, sizeof *c);
}

int ah_call_transport_failed(const ah_call *c, int curl_code)
{
    return http_transport_failed(curl_code, &c->resp.data);
}

/* ---- one AWS service ---- */

int ah_service_init(ah_service *v, const struct s3lect_config *cfg, const char *fixed_region,
                    int64_t default_ms, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    int rc = http_global_init(err, errlen);
    if (rc)
        return rc;
    v->default_timeout_ms = cfg->request_timeout > 0 ? cfg->request_timeout : default_ms;
    v->region = fixed_region ? u_strdup(fixed_region) : aws_region_resolve(cfg);
    v->ca_file = u_strdup(aws_ca_bundle_resolve(cfg));
    if (!v->region || (aws_ca_bundle_resolve(cfg) && !v->ca_file)) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    } else if (!cfg_region_valid(v->region)) {
        snprintf(err, errlen,
                 "region '%.80s' is not a region name (letters, digits, '-' and '_', at most 64): "
                 "fix --region, AWS_REGION, AWS_DEFAULT_REGION or the profile's region",
                 v->region);
        rc = S3LECT_EINVAL;
    }
    if (rc)
        ah_service_clear(v);
    return rc;
}

int ah_service_endpoint(ah_service *v, const char *url, const char *aws_url, const char *what,
                        const char *aws_desc, char *err, size_t errlen)
{
    st_endpoint ep;
    int rc = st_endpoint_parse(url ? url : aws_url, what, &ep, err, errlen);
    if (rc)
        return rc;
    const char *scheme = ep.https ? "https" : "http";
    v->host = u_strdup(ep.authority);
    v->base_path = u_strdup(ep.base_path);
    v->origin = u_asprintf("%s://%s", scheme, ep.authority);
    v->endpoint_desc =
        url ? u_asprintf("%s://%s%s", scheme, ep.authority, ep.base_path) : u_strdup(aws_desc);
    st_endpoint_clear(&ep);
    if (!v->host || !v->base_path || !v->origin || !v->endpoint_desc) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    return 0;
}

void ah_service_clear(ah_service *v)
{
    free(v->endpoint_desc);
    free(v->origin);
    free(v->host);
    free(v->base_path);
    free(v->region);
    free(v->ca_file);
    ah_signer_clear(&v->signer);
    memset(v, 0, sizeof *v);
}
