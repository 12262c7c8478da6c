/* SPDX-License-Identifier: Apache-2.0 */
/* store_mem.c - mem://NAME[/KEY]: objects in this process's memory, for
 * tests (docs/testing-your-code.md). Every elector of the process that
 * names the same NAME shares its objects; they live until the process
 * exits or s3lect_mem_reset(NAME) drops them. Conditional writes as the
 * file store's: If-Match on a missing key answers NOT_FOUND, a mismatch
 * PRECONDITION, and every write gets an etag never given before in this
 * process (a reset does not reuse one). A GET carries the store's clock
 * (the wall clock, or a virtual clock's: st_mem_use_clock).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "store.h"
#include "util.h"

#define MEM_NAME_MAX 200
#define MEM_KEY_MAX 1024
#define MEM_DEFAULT_KEY "lock"

typedef struct mem_obj {
    struct mem_obj *next;
    char *key;
    char *body;
    size_t len;
    uint64_t gen;     /* its etag: "mem-<gen>" */
    int64_t modified; /* wall ms of the write on the store's clock */
} mem_obj;

typedef struct mem_space {
    struct mem_space *next;
    char *name;
    mem_obj *objs;
    int64_t fail; /* the next this many requests fail (s3lect_mem_fail) */
} mem_space;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static mem_space *g_spaces; /* under g_mu, never freed: names are few */
static uint64_t g_gen;      /* under g_mu: etags are unique in the process */

typedef struct mem_store {
    st_store base;
    char *name;
    int64_t (*wall)(void *); /* the store's clock; NULL: u_wall_ms */
    void *wall_arg;
} mem_store;

/* The space named name, made when absent (NULL when out of memory). Holds g_mu. */
static mem_space *space_of(const char *name, int make)
{
    for (mem_space *s = g_spaces; s; s = s->next)
        if (strcmp(s->name, name) == 0)
            return s;
    if (!make)
        return NULL;
    mem_space *s = calloc(1, sizeof *s);
    if (!s || !(s->name = u_strdup(name))) {
        free(s);
        return NULL;
    }
    s->next = g_spaces;
    g_spaces = s;
    return s;
}

static mem_obj *obj_of(mem_space *s, const char *key)
{
    for (mem_obj *o = s->objs; o; o = o->next)
        if (strcmp(o->key, key) == 0)
            return o;
    return NULL;
}

static void etag_of(uint64_t gen, char out[40])
{
    snprintf(out, 40, "\"mem-%llu\"", (unsigned long long)gen);
}

static int64_t store_wall(const mem_store *ms)
{
    return ms->wall ? ms->wall(ms->wall_arg) : u_wall_ms();
}

/* Takes one injected failure if any is due. Holds g_mu. */
static int injected(const mem_store *ms, mem_space *s, const char *what, st_result *out)
{
    if (s->fail <= 0)
        return 0;
    s->fail--;
    st_result_setf(out, ST_TRANSIENT, "%s mem://%s: injected failure (s3lect_mem_fail)", what,
                   ms->name);
    return 1;
}

static void mem_get(st_store *st, const char *key, int64_t timeout_ms, st_result *out)
{
    (void)timeout_ms;
    mem_store *ms = (mem_store *)st;
    int64_t now = store_wall(ms);
    pthread_mutex_lock(&g_mu);
    mem_space *s = space_of(ms->name, 1);
    mem_obj *o = s ? obj_of(s, key) : NULL;
    if (!s) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
    } else if (!injected(ms, s, "GET", out)) {
        char etag[40] = "";
        if (o)
            etag_of(o->gen, etag);
        if (!o) {
            out->outcome = ST_NOT_FOUND;
        } else if (st_result_set_body(out, o->body, o->len) || st_result_set_etag(out, etag)) {
            st_result_setf(out, ST_TRANSIENT, "out of memory");
        } else {
            out->outcome = ST_OK;
            out->server_now_ms = now;
            out->server_modified_ms = o->modified;
            out->server_res_ms = 1;
        }
    }
    pthread_mutex_unlock(&g_mu);
}

static void mem_put(st_store *st, const char *key, const void *data, size_t len,
                    const char *if_match, int64_t timeout_ms, st_result *out)
{
    (void)timeout_ms;
    mem_store *ms = (mem_store *)st;
    int64_t now = store_wall(ms);
    if (len > ST_MAX_OBJECT) {
        st_result_setf(out, ST_FATAL, "PUT mem://%s/%s: %zu bytes, more than the %d a lock holds",
                       ms->name, key, len, ST_MAX_OBJECT);
        return;
    }
    pthread_mutex_lock(&g_mu);
    mem_space *s = space_of(ms->name, 1);
    if (!s) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        goto done;
    }
    if (injected(ms, s, "PUT", out))
        goto done;
    mem_obj *o = obj_of(s, key);
    char etag[40];
    if (o)
        etag_of(o->gen, etag);
    if (if_match ? (!o || strcmp(etag, if_match) != 0) : o != NULL) {
        /* If-Match on a missing key answers NOT_FOUND, like S3's 404. */
        out->outcome = if_match && !o ? ST_NOT_FOUND : ST_PRECONDITION;
        goto done;
    }
    char *body = malloc(len + 1);
    mem_obj *fresh = o ? NULL : calloc(1, sizeof *fresh);
    if (!body || (!o && (!fresh || !(fresh->key = u_strdup(key))))) {
        free(body);
        if (fresh)
            free(fresh->key);
        free(fresh);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        goto done;
    }
    if (len)
        memcpy(body, data, len);
    body[len] = '\0';
    if (!o) {
        o = fresh;
        o->next = s->objs;
        s->objs = o;
    }
    free(o->body);
    o->body = body;
    o->len = len;
    o->gen = ++g_gen;
    o->modified = now;
    etag_of(o->gen, etag);
    if (st_result_set_etag(out, etag))
        st_result_setf(out, ST_TRANSIENT, "out of memory"); /* written: read back */
    else
        out->outcome = ST_OK;
done:
    pthread_mutex_unlock(&g_mu);
}

static void mem_destroy(st_store *st)
{
    mem_store *ms = (mem_store *)st;
    free(ms->name);
    free(ms);
}

static const st_vtable mem_vt = {
    .name = "mem", .get = mem_get, .put = mem_put, .destroy = mem_destroy};

void st_mem_use_clock(st_store *s, int64_t (*wall_ms)(void *), void *arg)
{
    if (!s || s->vt != &mem_vt)
        return;
    mem_store *ms = (mem_store *)s;
    ms->wall = wall_ms;
    ms->wall_arg = arg;
}

int st_mem_is(const st_location *loc)
{
    return loc && loc->scheme && loc->scheme->open == st_mem_open;
}

int st_mem_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out, char *err,
                size_t errlen)
{
    (void)cfg;
    mem_store *ms = calloc(1, sizeof *ms);
    if (!ms || !(ms->name = u_strdup(loc->bucket))) {
        free(ms);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    ms->base.vt = &mem_vt;
    *out = &ms->base;
    return 0;
}

static int name_ok(const char *name, size_t n)
{
    if (n == 0 || n > MEM_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

int st_mem_parse(const char *url, const char *rest, st_location *out, char *err, size_t errlen)
{
    size_t nl = strcspn(rest, "/");
    if (!name_ok(rest, nl)) {
        snprintf(err, errlen,
                 "lock URL '%.200s': write mem://NAME or mem://NAME/KEY, NAME 1 to %d of "
                 "A-Z a-z 0-9 . _ -",
                 url, MEM_NAME_MAX);
        return S3LECT_EINVAL;
    }
    const char *key = rest[nl] == '/' ? rest + nl + 1 : MEM_DEFAULT_KEY;
    int rc = st_check_text(url, "key", key, MEM_KEY_MAX, err, errlen);
    if (rc)
        return rc;
    out->bucket = malloc(nl + 1);
    out->key = u_strdup(key);
    if (!out->bucket || !out->key) {
        st_location_clear(out);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    memcpy(out->bucket, rest, nl);
    out->bucket[nl] = '\0';
    return 0;
}

int st_mem_canonical(const st_location *loc, char **out)
{
    return st_canon_add(out, "mem://", loc->bucket, 0) || st_canon_add(out, "/", loc->key, 0);
}

/* ---- the public test helpers ---- */

int s3lect_mem_reset(const char *name)
{
    if (!name || !name_ok(name, strlen(name)))
        return S3LECT_EINVAL;
    pthread_mutex_lock(&g_mu);
    mem_space *s = space_of(name, 0);
    if (s) {
        while (s->objs) {
            mem_obj *o = s->objs;
            s->objs = o->next;
            free(o->key);
            free(o->body);
            free(o);
        }
        s->fail = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return S3LECT_OK;
}

int s3lect_mem_fail(const char *name, int64_t n)
{
    if (!name || !name_ok(name, strlen(name)) || n < 0)
        return S3LECT_EINVAL;
    pthread_mutex_lock(&g_mu);
    mem_space *s = space_of(name, 1);
    if (s)
        s->fail = n;
    pthread_mutex_unlock(&g_mu);
    return s ? S3LECT_OK : S3LECT_ENOMEM;
}
