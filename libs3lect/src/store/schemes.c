/* SPDX-License-Identifier: Apache-2.0 */
/* schemes.c - the scheme table: lock URLs parsed by the store they name,
 * and opening the store a location names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "store.h"
#include "util.h"

/* "s3" in "s3://...": the length of a leading URI scheme (RFC 3986: a letter,
 * then letters, digits, '+', '-', '.') followed by ':', else 0. */
static size_t scheme_len(const char *url)
{
    const char *p = url;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
        return 0;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '+' || *p == '-' || *p == '.')
        p++;
    return *p == ':' ? (size_t)(p - url) : 0;
}

/* ---- the scheme table ---- */

static const st_scheme schemes[] = {
    {"s3", NULL, st_s3_parse, st_s3_open, st_s3_canonical, "s3://bucket/key (two slashes)",
     ST_SCHEME_AWS, "an S3 object (AWS or an S3-compatible server)", "s3://BUCKET/KEY"},
    {"file", NULL, st_file_parse, st_file_open, st_file_canonical,
     "file:///dir/key (three slashes) or a plain path", ST_SCHEME_PATHS, "a local file",
     "file:///DIR/KEY or a path"},
    {"dynamodb", NULL, st_dynamodb_parse, st_dynamodb_open, st_dynamodb_canonical, NULL,
     ST_SCHEME_AWS, "a DynamoDB item", "dynamodb://TABLE/KEY"},
    {"postgres", "postgresql", st_postgres_parse, st_postgres_open, st_postgres_canonical, NULL, 0,
     "a PostgreSQL row", "postgres://HOST/DB?key=NAME"},
    {"route53", NULL, st_route53_parse, st_route53_open, st_route53_canonical, NULL, ST_SCHEME_AWS,
     "a Route 53 record", "route53://ZONE_ID/NAME"},
    {"gs", NULL, st_gcs_parse, st_gcs_open, st_gcs_canonical, "gs://bucket/object (two slashes)", 0,
     "a Google Cloud Storage object", "gs://BUCKET/OBJECT"},
    {"az", NULL, st_azure_parse, st_azure_open, st_azure_canonical,
     "az://ACCOUNT/CONTAINER/BLOB (two slashes)", 0, "an Azure blob",
     "az://ACCOUNT/CONTAINER/BLOB or https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB"},
    {"https", NULL, st_azure_https_parse, st_azure_open, st_azure_canonical, NULL, 0, NULL, NULL},
    {"etcd", "etcds", st_etcd_parse, st_etcd_open, st_etcd_canonical,
     "etcd://HOST:PORT/KEY (two slashes)", 0, "an etcd key",
     "etcd://HOST:PORT[,HOST:PORT...]/KEY (etcds:// for TLS)"},
    {"redis", NULL, st_redis_parse, st_redis_open, st_redis_canonical, "redis://HOST:PORT/KEY", 0,
     "a Redis key", "redis://[[USER]:PASSWORD@]HOST:PORT/KEY (rediss:// for TLS)"},
    {"rediss", NULL, st_redis_parse, st_redis_open, st_redis_canonical, "rediss://HOST:PORT/KEY", 0,
     NULL, NULL},
};
#define NSCHEMES (sizeof schemes / sizeof schemes[0])

size_t st_scheme_count(void)
{
    return NSCHEMES;
}

const st_scheme *st_scheme_at(size_t i)
{
    return i < NSCHEMES ? &schemes[i] : NULL;
}

/* The row whose name or alias is url[0..sl) (case-insensitive), or NULL. */
static const st_scheme *scheme_find(const char *url, size_t sl)
{
    for (size_t i = 0; i < NSCHEMES; i++) {
        const char *names[] = {schemes[i].name, schemes[i].alias};
        for (int k = 0; k < 2; k++)
            if (names[k] && strlen(names[k]) == sl && strncasecmp(url, names[k], sl) == 0)
                return &schemes[i];
    }
    return NULL;
}

char *st_location_canonical(const st_location *loc, const char *url)
{
    if (!loc->scheme || !loc->scheme->canonical)
        return st_lock_canonical(url);
    char *out = u_strdup("");
    if (out && loc->scheme->canonical(loc, &out)) {
        free(out);
        return NULL;
    }
    return out;
}

char *st_lock_canonical(const char *url)
{
    st_location loc;
    char err[512];
    if (!url || st_location_parse(url, &loc, err, sizeof err) != 0)
        return st_lock_display(url);
    char *out = st_location_canonical(&loc, url);
    st_location_clear(&loc);
    return out;
}

static int location_parse(const char *url, st_location *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!url || !url[0]) {
        snprintf(err, errlen, "empty lock location: use s3://bucket/key or file:///dir/key");
        return S3LECT_EINVAL;
    }
    size_t sl = scheme_len(url);
    const st_scheme *sc = NULL;
    const char *rest = NULL;
    if (sl == 0) {
        for (size_t i = 0; i < NSCHEMES && !sc; i++)
            if (schemes[i].flags & ST_SCHEME_PATHS)
                sc = &schemes[i];
    } else if ((sc = scheme_find(url, sl)) != NULL) {
        /* Schemes are case-insensitive (RFC 3986 3.1): S3:// is s3://. */
        if (strncmp(url + sl, "://", 3) == 0) {
            rest = url + sl + 3;
        } else if (sc->form) {
            snprintf(err, errlen, "lock URL '%.200s' is malformed: write %s", url, sc->form);
            return S3LECT_EINVAL;
        } else {
            sc = NULL;
        }
    }
    if (sc) {
        int rc = sc->parse(url, rest, out, err, errlen);
        if (rc)
            st_location_clear(out);
        else
            out->scheme = sc;
        return rc;
    }
    if (strncmp(url + sl, "://", 3) == 0 && ((sl == 4 && strncasecmp(url, "http", 4) == 0) ||
                                             (sl == 5 && strncasecmp(url, "https", 5) == 0)))
        snprintf(err, errlen,
                 "'%.200s' is a server's address, not a lock URL: for S3 or an S3-compatible "
                 "server (MinIO, Ceph, R2...) write --lock s3://BUCKET/KEY --endpoint "
                 "%.*s://HOST:PORT (the endpoint without the bucket and key)",
                 url, (int)sl, url);
    else {
        /* Every store's lock URL, from the table. */
        char list[1024];
        size_t n = 0;
        for (size_t i = 0; i < NSCHEMES; i++)
            if (schemes[i].usage && n < sizeof list) /* its first form: "az://A/C/B" */
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%.*s%s", n ? ", " : "",
                                      (int)strcspn(schemes[i].usage, " "), schemes[i].usage,
                                      schemes[i].flags & ST_SCHEME_PATHS ? " (or a path)" : "");
        if (strncmp(url + sl, "://", 3) == 0)
            snprintf(err, errlen, "unsupported lock URL scheme '%.*s:': use %s (docs/stores.md)",
                     (int)(sl < 20 ? sl : 20), url, list);
        else
            snprintf(err, errlen,
                     "unsupported lock URL scheme '%.*s:': use %s (for a file whose name has ':', "
                     "write ./%.100s)",
                     (int)(sl < 20 ? sl : 20), url, list, url);
    }
    return S3LECT_EINVAL;
}

int st_location_parse(const char *url, st_location *out, char *err, size_t errlen)
{
    int rc = location_parse(url, out, err, errlen);
    if (rc == 0 || !url)
        return rc;
    /* The message quotes the URL: when it holds a password, say the same of
     * the URL as shown (password replaced by ***) instead. */
    char *shown = st_lock_display(url);
    if (!shown || strcmp(shown, url) != 0) {
        st_location tmp;
        if (!shown || location_parse(shown, &tmp, err, errlen) == 0) {
            if (shown)
                st_location_clear(&tmp);
            snprintf(err, errlen, "lock URL '%.200s' is not valid", shown ? shown : "");
        }
    }
    free(shown);
    return rc;
}

int st_lock_location(const s3lect_config *cfg, st_location *out, char *err, size_t errlen)
{
    if (!cfg->custom)
        return st_location_parse(cfg->lock, out, err, errlen);
    /* The key is the lock string's key part, or the whole string without a scheme. */
    char *key = NULL;
    if (strstr(cfg->lock, "://") && st_location_parse(cfg->lock, out, err, errlen) == 0) {
        key = out->key;
        out->key = NULL;
        st_location_clear(out);
    } else {
        memset(out, 0, sizeof *out);
        key = u_strdup(cfg->lock);
    }
    if (!key) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    out->scheme = &st_custom_scheme;
    out->key = key;
    return 0;
}

int st_open(const s3lect_config *cfg, const st_location *loc, st_store **out, char *err,
            size_t errlen)
{
    *out = NULL;
    return loc->scheme->open(cfg, loc, out, err, errlen);
}

int st_open_config(const s3lect_config *cfg, st_store **out, char **key_out, char *err,
                   size_t errlen)
{
    *out = NULL;
    *key_out = NULL;
    st_location loc;
    int rc = st_lock_location(cfg, &loc, err, errlen);
    if (rc)
        return rc;
    rc = st_open(cfg, &loc, out, err, errlen);
    if (rc == 0) {
        *key_out = loc.key;
        loc.key = NULL;
    }
    st_location_clear(&loc);
    return rc;
}
