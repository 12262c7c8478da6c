/* SPDX-License-Identifier: Apache-2.0 */
/* store_custom.c - a store backed by the application's get/put functions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "store.h"

struct s3lect_store_result {
    st_result r;
};

int s3lect_store_result_set_body(s3lect_store_result *res, const void *data, size_t len)
{
    if (!res || (!data && len))
        return S3LECT_EINVAL;
    return st_result_set_body(&res->r, data ? data : "", len);
}

int s3lect_store_result_set_etag(s3lect_store_result *res, const char *etag)
{
    if (!res || !etag || !etag[0])
        return S3LECT_EINVAL;
    return st_result_set_etag(&res->r, etag);
}

int s3lect_store_result_set_message(s3lect_store_result *res, const char *msg)
{
    if (!res)
        return S3LECT_EINVAL;
    return st_result_setf(&res->r, res->r.outcome, "%s", msg ? msg : "");
}

typedef struct custom_store {
    st_store base;
    cfg_custom *c;
} custom_store;

/* Checks what the application returned and turns nonsense into a clear error. */
static void finish(s3lect_store_result *res, int rc, int is_get, st_result *out)
{
    *out = res->r;
    if (rc < ST_OK || rc > ST_FATAL) {
        st_result_setf(out, ST_FATAL, "custom store %s returned %d, not an s3lect_store_outcome",
                       is_get ? "get" : "put", rc);
        return;
    }
    out->outcome = rc;
    if (rc == ST_OK && (!out->etag || !out->etag[0]))
        st_result_setf(out, ST_FATAL, "custom store %s returned OK without an etag",
                       is_get ? "get" : "put");
    else if (rc == ST_OK && is_get && !out->body)
        st_result_set_body(out, "", 0);
}

static void custom_get(st_store *s, const char *key, int64_t timeout_ms, st_result *out)
{
    custom_store *cs = (custom_store *)s;
    s3lect_store_result res;
    memset(&res, 0, sizeof res);
    int rc = cs->c->get(cs->c->userdata, key, timeout_ms, &res);
    finish(&res, rc, 1, out);
}

static void custom_put(st_store *s, const char *key, const void *data, size_t len,
                       const char *if_match, int64_t timeout_ms, st_result *out)
{
    custom_store *cs = (custom_store *)s;
    s3lect_store_result res;
    memset(&res, 0, sizeof res);
    int rc = cs->c->put(cs->c->userdata, key, data, len, if_match, timeout_ms, &res);
    finish(&res, rc, 0, out);
}

static void custom_destroy(st_store *s)
{
    custom_store *cs = (custom_store *)s;
    cfg_custom_release(cs->c);
    free(cs);
}

static const st_vtable custom_vt = {
    .name = "custom", .get = custom_get, .put = custom_put, .destroy = custom_destroy};

int st_custom_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                   char *err, size_t errlen)
{
    (void)loc;
    custom_store *cs = calloc(1, sizeof *cs);
    if (!cs) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    cs->base.vt = &custom_vt;
    cs->c = cfg->custom;
    __atomic_add_fetch(&cs->c->refs, 1, __ATOMIC_ACQ_REL);
    *out = &cs->base;
    return 0;
}

/* Not in the URL table: a config with custom store functions names it
 * (st_lock_location). */
const st_scheme st_custom_scheme = {.name = "custom", .open = st_custom_open};
