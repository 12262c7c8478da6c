/* store.c - results, lock locations, and opening the store a config names. */
#include "store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"

void st_result_clear(st_result *r)
{
    free(r->body);
    free(r->etag);
    free(r->message);
    memset(r, 0, sizeof *r);
}

int st_result_set_body(st_result *r, const void *data, size_t len)
{
    char *b = malloc(len + 1);
    if (!b)
        return S3LECT_ENOMEM;
    if (len)
        memcpy(b, data, len);
    b[len] = '\0';
    free(r->body);
    r->body = b;
    r->body_len = len;
    return 0;
}

int st_result_set_etag(st_result *r, const char *etag)
{
    return u_setstr(&r->etag, etag) ? S3LECT_ENOMEM : 0;
}

int st_result_setf(st_result *r, int outcome, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = u_vasprintf(fmt, ap);
    va_end(ap);
    free(r->message);
    r->message = m;
    r->outcome = outcome;
    return m ? 0 : S3LECT_ENOMEM;
}

void st_location_clear(st_location *loc)
{
    free(loc->bucket);
    free(loc->key);
    memset(loc, 0, sizeof *loc);
}

static int split_path(const char *path, st_location *out, char *err, size_t errlen)
{
    size_t n = strlen(path);
    if (n == 0 || path[n - 1] == '/') {
        snprintf(err, errlen,
                 "lock path '%.200s' names a directory: add a file name, e.g. %.200sleader.json",
                 path, n ? path : "./");
        return S3LECT_EINVAL;
    }
    const char *slash = strrchr(path, '/');
    out->kind = ST_LOC_FILE;
    if (!slash) {
        out->bucket = u_strdup(".");
        out->key = u_strdup(path);
    } else {
        size_t dl = slash == path ? 1 : (size_t)(slash - path);
        out->bucket = malloc(dl + 1);
        if (out->bucket) {
            memcpy(out->bucket, path, dl);
            out->bucket[dl] = '\0';
        }
        out->key = u_strdup(slash + 1);
    }
    if (!out->bucket || !out->key) {
        st_location_clear(out);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    return 0;
}

int st_location_parse(const char *url, st_location *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!url || !url[0]) {
        snprintf(err, errlen, "empty lock location: use s3://bucket/key or file:///dir/key");
        return S3LECT_EINVAL;
    }
    const char *sep = strstr(url, "://");
    if (!sep)
        return split_path(url, out, err, errlen);
    size_t sl = (size_t)(sep - url);
    if (sl == 2 && strncmp(url, "s3", 2) == 0) {
        const char *b = sep + 3, *slash = strchr(b, '/');
        if (!slash || slash == b || !slash[1]) {
            snprintf(err, errlen,
                     "lock URL '%.200s' needs a bucket and a key: s3://bucket/path/to/leader.json",
                     url);
            return S3LECT_EINVAL;
        }
        size_t bl = (size_t)(slash - b);
        for (size_t i = 0; i < bl; i++) {
            char c = b[i];
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
                  c == '_' || (c >= 'A' && c <= 'Z'))) {
                snprintf(err, errlen,
                         "bucket name in '%.200s' has an invalid character '%c': bucket names use "
                         "a-z, 0-9, '.' and '-'",
                         url, c);
                return S3LECT_EINVAL;
            }
        }
        out->kind = ST_LOC_S3;
        out->bucket = malloc(bl + 1);
        out->key = u_strdup(slash + 1);
        if (!out->bucket || !out->key) {
            st_location_clear(out);
            snprintf(err, errlen, "out of memory");
            return S3LECT_ENOMEM;
        }
        memcpy(out->bucket, b, bl);
        out->bucket[bl] = '\0';
        return 0;
    }
    if (sl == 4 && strncmp(url, "file", 4) == 0) {
        const char *p = sep + 3;
        if (strncmp(p, "localhost/", 10) == 0)
            p += 9;
        if (p[0] != '/') {
            snprintf(err, errlen,
                     "file URL '%.200s' must be absolute: file:///dir/leader.json (three slashes)",
                     url);
            return S3LECT_EINVAL;
        }
        return split_path(p, out, err, errlen);
    }
    snprintf(err, errlen,
             "unsupported lock URL scheme '%.*s': use s3://bucket/key, file:///dir/key or a path",
             (int)(sl < 20 ? sl : 20), url);
    return S3LECT_EINVAL;
}

int st_open(const s3lect_config *cfg, st_store **out, char **key_out, char *err, size_t errlen)
{
    *out = NULL;
    *key_out = NULL;
    if (cfg->custom) {
        /* The key is the lock string's key part, or the whole string without a scheme. */
        st_location loc;
        char *key = NULL;
        if (strstr(cfg->lock, "://") && st_location_parse(cfg->lock, &loc, err, errlen) == 0) {
            key = loc.key;
            loc.key = NULL;
            st_location_clear(&loc);
        } else {
            key = u_strdup(cfg->lock);
        }
        int rc = key ? st_custom_open(cfg, out) : S3LECT_ENOMEM;
        if (rc) {
            free(key);
            snprintf(err, errlen, "out of memory");
            return rc;
        }
        *key_out = key;
        return 0;
    }
    st_location loc;
    int rc = st_location_parse(cfg->lock, &loc, err, errlen);
    if (rc)
        return rc;
    if (loc.kind == ST_LOC_S3)
        rc = st_s3_open(cfg, loc.bucket, out, err, errlen);
    else
        rc = st_file_open(loc.bucket, out, err, errlen);
    if (rc == 0) {
        *key_out = loc.key;
        loc.key = NULL;
    }
    st_location_clear(&loc);
    return rc;
}
