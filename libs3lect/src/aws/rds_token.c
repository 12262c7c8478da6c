/* SPDX-License-Identifier: Apache-2.0 */
/* rds_token.c - IAM database authentication tokens (rds_token.h).
 *
 * The token is what the AWS SDKs' "generate DB auth token" makes: a GET of
 * https://HOST:PORT/?Action=connect&DBUser=USER presigned for the service
 * rds-db (X-Amz-Expires=900, the host header signed, the hash of an empty
 * payload), written without its "https://". The database checks it with
 * IAM; the client only signs, so nothing here touches the network but the
 * credential chain.
 *
 * Two small caches, both under one mutex:
 *   - chain handles, one per credential configuration (profile, explicit
 *     keys, ...): a reference to the shared cache entry of aws_chain_open is
 *     kept, so temporary credentials are fetched once and refreshed in the
 *     background instead of on every connect; a static source (keys in the
 *     environment or a file) is looked up again on every call, so new keys
 *     there are seen at the next connect;
 *   - tokens, per (host, port, user, region, credentials): the credentials
 *     are told apart by a SHA-256 of the keys, never kept themselves, so a
 *     refresh (a new generation) gives a new token.
 */
#include "rds_token.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aws_creds.h"
#include "config.h"
#include "crypto.h"
#include "s3lect.h"
#include "sigv4.h"
#include "util.h"

#define RDS_SERVICE "rds-db"
#define RDS_MAX_TOKENS 16
#define RDS_MAX_CHAINS 8

/* ---- the token itself ---- */

/* A host name or IP address as a client connects to it: letters, digits,
 * '.', '-', '_' and ':' (an IPv6 address), at most 253 bytes. */
static int host_ok(const char *h)
{
    size_t n = h ? strlen(h) : 0;
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_' || c == ':'))
            return 0;
    }
    return 1;
}

/* A database user name: not empty, no control characters, at most 256 bytes
 * (percent-encoded in the token). */
static int user_ok(const char *u)
{
    size_t n = u ? strlen(u) : 0;
    if (n == 0 || n > 256)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)u[i] < 0x20 || u[i] == 0x7f)
            return 0;
    return 1;
}

char *rds_token_build(const rds_token_params *p)
{
    if (!p || !host_ok(p->host) || p->port < 1 || p->port > 65535 || !user_ok(p->user) ||
        !p->region || !cfg_region_valid(p->region) || !p->access_key_id || !*p->access_key_id ||
        !p->secret_access_key || !*p->secret_access_key)
        return NULL;
    char amz_date[17], date8[9];
    sigv4_amz_date(p->now, amz_date);
    memcpy(date8, amz_date, 8);
    date8[8] = '\0';
    int has_token = p->session_token && *p->session_token;
    char *hostport = u_asprintf(strchr(p->host, ':') ? "[%s]:%d" : "%s:%d", p->host, p->port);
    char *credential =
        u_asprintf("%s/%s/%s/" RDS_SERVICE "/aws4_request", p->access_key_id, date8, p->region);
    char *enc_user = sigv4_uri_encode(p->user, strlen(p->user), 0);
    char *enc_cred = credential ? sigv4_uri_encode(credential, strlen(credential), 0) : NULL;
    char *enc_tok =
        has_token ? sigv4_uri_encode(p->session_token, strlen(p->session_token), 0) : NULL;
    char *query = NULL, *out = NULL;
    if (hostport && enc_user && enc_cred && (!has_token || enc_tok))
        query = u_asprintf("Action=connect&DBUser=%s&X-Amz-Algorithm=AWS4-HMAC-SHA256"
                           "&X-Amz-Credential=%s&X-Amz-Date=%s&X-Amz-Expires=%d"
                           "&X-Amz-SignedHeaders=host%s%s",
                           enc_user, enc_cred, amz_date, RDS_TOKEN_EXPIRES_S,
                           has_token ? "&X-Amz-Security-Token=" : "", has_token ? enc_tok : "");
    if (query) {
        sigv4_header h = {"host", hostport};
        sigv4_request rq = {
            .method = "GET", .path = "/", .query = query, .headers = &h, .nheaders = 1};
        sigv4_params sp = {.access_key_id = p->access_key_id,
                           .secret_access_key = p->secret_access_key,
                           .session_token = p->session_token,
                           .region = p->region,
                           .service = RDS_SERVICE,
                           .amz_date = amz_date,
                           .normalize_path = 1,
                           .presign = 1};
        sigv4_result r;
        if (sigv4_sign(&rq, &sp, &r) == 0) {
            out = u_asprintf("%s/?%s&X-Amz-Signature=%s", hostport, query, r.signature);
            u_wipe(r.signature, sizeof r.signature);
            sigv4_result_clear(&r);
        }
    }
    free(hostport);
    free(credential);
    free(enc_user);
    free(enc_cred);
    u_wipe_free(enc_tok);
    u_wipe_free(query);
    return out;
}

/* ---- the caches ---- */

typedef struct rds_chain {
    struct rds_chain *next;
    char *key; /* the credential configuration (secrets only as a hash) */
    cred_cache *chain;
} rds_chain;

typedef struct rds_tok {
    struct rds_tok *next;
    char *host, *user, *region;
    int port;
    uint8_t creds[CR_SHA256_LEN]; /* SHA-256 of the keys that signed it */
    char *token;
    int64_t made_ms; /* mono */
} rds_tok;

static pthread_mutex_t rds_mu = PTHREAD_MUTEX_INITIALIZER;
static rds_chain *chains;
static rds_tok *tokens;

static void tok_free(rds_tok *t)
{
    free(t->host);
    free(t->user);
    free(t->region);
    u_wipe_free(t->token);
    free(t);
}

void rds_token_cache_clear(void)
{
    pthread_mutex_lock(&rds_mu);
    rds_chain *c = chains;
    rds_tok *t = tokens;
    chains = NULL;
    tokens = NULL;
    pthread_mutex_unlock(&rds_mu);
    while (c) {
        rds_chain *n = c->next;
        cred_cache_release(c->chain);
        free(c->key);
        free(c);
        c = n;
    }
    while (t) {
        rds_tok *n = t->next;
        tok_free(t);
        t = n;
    }
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

/* What aws_chain_open resolves from (the environment and files aside):
 * explicit secrets go in as a hash. */
static char *chain_key(const struct s3lect_config *cfg)
{
    uint8_t d[CR_SHA256_LEN];
    char hex[2 * CR_SHA256_LEN + 1];
    char *secrets = u_asprintf("%s\n%s", nz(cfg->secret_access_key), nz(cfg->session_token));
    if (!secrets)
        return NULL;
    cr_sha256(secrets, strlen(secrets), d);
    u_wipe_free(secrets);
    cr_hex(d, sizeof d, hex);
    return u_asprintf("%s\n%s\n%s\n%s\n%s\n%s\n%lld", nz(cfg->profile), nz(cfg->access_key_id), hex,
                      nz(cfg->region), nz(cfg->endpoint), nz(cfg->ca_file),
                      (long long)cfg->request_timeout);
}

/* A reference to cfg's credential chain (release it). The first time a
 * source that is refreshed in the background is used, one more reference
 * is kept here, so its cache entry (and its credentials) outlive the call
 * and later connects do not fetch again. */
static int chain_take(const struct s3lect_config *cfg, cred_cache **out, char *err, size_t errlen)
{
    int rc = aws_chain_open(cfg, 0, out, err, errlen);
    if (rc != 0 || cred_cache_is_static(*out))
        return rc;
    char *key = chain_key(cfg);
    if (!key)
        return 0; /* nothing kept: the next call fetches again */
    pthread_mutex_lock(&rds_mu);
    int n = 0, have = 0;
    for (rds_chain *c = chains; c; c = c->next, n++)
        have |= strcmp(c->key, key) == 0;
    rds_chain *c = !have && n < RDS_MAX_CHAINS ? calloc(1, sizeof *c) : NULL;
    char ignored[256];
    if (c && aws_chain_open(cfg, CRED_CACHE_NOWAIT, &c->chain, ignored, sizeof ignored) == 0) {
        c->key = key;
        key = NULL;
        c->next = chains;
        chains = c;
        c = NULL;
    }
    pthread_mutex_unlock(&rds_mu);
    free(c);
    free(key);
    return 0;
}

static void creds_digest(const aws_creds *c, uint8_t out[CR_SHA256_LEN])
{
    char *s =
        u_asprintf("%s\n%s\n%s", c->access_key_id, c->secret_access_key, nz(c->session_token));
    if (!s) {
        memset(out, 0, CR_SHA256_LEN);
        return;
    }
    cr_sha256(s, strlen(s), out);
    u_wipe_free(s);
}

/* The region of an RDS endpoint name: NAME.ID.REGION.rds.amazonaws.com(.cn),
 * or NULL. */
static char *region_of_host(const char *host)
{
    static const char *const suffixes[] = {".rds.amazonaws.com", ".rds.amazonaws.com.cn"};
    size_t n = strlen(host);
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        size_t sl = strlen(suffixes[i]);
        if (n <= sl || strcasecmp(host + n - sl, suffixes[i]) != 0)
            continue;
        size_t end = n - sl, start = end;
        while (start > 0 && host[start - 1] != '.')
            start--;
        if (start == 0 || end - start > 64)
            return NULL;
        char *r = u_asprintf("%.*s", (int)(end - start), host + start);
        if (r && !cfg_region_valid(r)) {
            free(r);
            return NULL;
        }
        return r;
    }
    return NULL;
}

int rds_token_get(const struct s3lect_config *cfg, const char *host, int port, const char *user,
                  const char *region, char **token, char *err, size_t errlen)
{
    *token = NULL;
    if (!host_ok(host) || port < 1 || port > 65535) {
        snprintf(err, errlen,
                 "IAM database authentication needs the database's host name and port (got "
                 "'%.100s' port %d)",
                 host ? host : "", port);
        return S3LECT_EINVAL;
    }
    if (!user_ok(user)) {
        snprintf(err, errlen,
                 "IAM database authentication needs the database user's name: put USER@ in the "
                 "lock URL");
        return S3LECT_EINVAL;
    }
    /* ?region=, else the endpoint's own, else the AWS chain's. */
    char *reg = region && *region ? u_strdup(region) : region_of_host(host);
    if (!reg)
        reg = aws_region_resolve(cfg);
    if (!reg) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (!cfg_region_valid(reg)) {
        snprintf(err, errlen,
                 "region '%.80s' is not a region name: fix the lock URL's region=, --region, "
                 "AWS_REGION or the profile's region",
                 reg);
        free(reg);
        return S3LECT_EINVAL;
    }
    cred_cache *chain = NULL;
    int rc = chain_take(cfg, &chain, err, errlen);
    if (rc != 0) {
        free(reg);
        return rc;
    }
    aws_creds creds;
    rc = aws_chain_get(chain, &creds, NULL, err, errlen);
    cred_cache_release(chain);
    if (rc != 0) {
        free(reg);
        return rc;
    }
    uint8_t digest[CR_SHA256_LEN];
    creds_digest(&creds, digest);
    int64_t now = u_mono_ms();

    pthread_mutex_lock(&rds_mu);
    for (rds_tok *t = tokens; t; t = t->next)
        if (t->port == port && strcmp(t->host, host) == 0 && strcmp(t->user, user) == 0 &&
            strcmp(t->region, reg) == 0 && memcmp(t->creds, digest, sizeof digest) == 0 &&
            now - t->made_ms < (int64_t)RDS_TOKEN_REUSE_S * 1000)
            *token = u_strdup(t->token);
    pthread_mutex_unlock(&rds_mu);
    if (*token) {
        aws_creds_clear(&creds);
        free(reg);
        return 0;
    }

    rds_token_params p = {.host = host,
                          .port = port,
                          .user = user,
                          .region = reg,
                          .access_key_id = creds.access_key_id,
                          .secret_access_key = creds.secret_access_key,
                          .session_token = creds.session_token,
                          .now = time(NULL)};
    char *tok = rds_token_build(&p);
    aws_creds_clear(&creds);
    rds_tok *e = tok ? calloc(1, sizeof *e) : NULL;
    char *mine = tok ? u_strdup(tok) : NULL;
    if (!tok || !e || !mine || !(e->host = u_strdup(host)) || !(e->user = u_strdup(user)) ||
        !(e->region = u_strdup(reg))) {
        if (e)
            tok_free(e);
        u_wipe_free(tok);
        u_wipe_free(mine);
        free(reg);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    free(reg);
    e->port = port;
    memcpy(e->creds, digest, sizeof digest);
    e->token = mine;
    e->made_ms = now;
    /* Replace this (host, port, user, region)'s token; drop the oldest
     * beyond the bound. */
    rds_tok *gone = NULL;
    pthread_mutex_lock(&rds_mu);
    int n = 0;
    for (rds_tok **pp = &tokens; *pp;) {
        rds_tok *t = *pp;
        if ((t->port == port && strcmp(t->host, host) == 0 && strcmp(t->user, user) == 0 &&
             strcmp(t->region, e->region) == 0) ||
            ++n >= RDS_MAX_TOKENS) {
            *pp = t->next;
            t->next = gone;
            gone = t;
        } else {
            pp = &t->next;
        }
    }
    e->next = tokens;
    tokens = e;
    pthread_mutex_unlock(&rds_mu);
    while (gone) {
        rds_tok *next = gone->next;
        tok_free(gone);
        gone = next;
    }
    *token = tok;
    return 0;
}
