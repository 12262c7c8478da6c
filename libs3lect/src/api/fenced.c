/* SPDX-License-Identifier: Apache-2.0 */
/* fenced.c - fenced writes (s3lect.h "Fenced writes", docs/fencing.md): a
 * leader's writes of its own objects that a store refuses once a newer
 * term has written them. The protocol is engine/fence.h's; this file runs
 * it against the stores, blocking, on the caller's thread. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "elector.h"
#include "fence.h"
#include "store.h"
#include "util.h"

/* A write retries its check this many times when the object changes
 * between its read and its write (412), then gives S3LECT_ERETRIES. */
#define FENCE_TRIES 8
/* What a handle remembers of the objects it read or wrote: their version
 * and stored term, so that a steady writer sends one PUT a write. */
#define FENCE_SEEN 32
/* Stores a handle keeps open (one per bucket, directory or container). */
#define FENCE_STORES 8
/* The most an object store reads back (S3, GCS, Azure: 1 MiB); the others
 * read ST_MAX_OBJECT. A fenced object is its envelope: its bytes and a
 * header of up to FN_MAX_HEADER. */
#define FENCE_HTTP_OBJECT (1024 * 1024)

typedef struct fence_seen {
    char *url, *etag, *holder;
    int64_t term;
} fence_seen;

typedef struct fence_store {
    char *base; /* the location but its key */
    st_store *st;
    size_t max; /* the largest object the store reads back */
} fence_store;

struct s3lect_fence {
    pthread_mutex_t mu;          /* one operation at a time */
    s3lect_elector *e;           /* NULL: a token's */
    s3lect_config *cfg;          /* credentials, endpoint, timeouts */
    int64_t term;                /* a token's */
    char *holder, *lock;         /* a token's; an elector's from its config */
    fence_seen seen[FENCE_SEEN]; /* by url; next replaces the oldest */
    size_t next;
    fence_store stores[FENCE_STORES];
    char errmsg[512];
};

static int fence_fail(s3lect_fence *f, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fence_fail(s3lect_fence *f, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->errmsg, sizeof f->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

static s3lect_fence *fence_alloc(s3lect_config *cfg)
{
    s3lect_fence *f = calloc(1, sizeof *f);
    if (!f || !cfg) {
        free(f);
        s3lect_config_free(cfg);
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    f->cfg = cfg;
    return f;
}

int s3lect_fence_new(s3lect_elector *e, s3lect_fence **out)
{
    if (!e || !out)
        return S3LECT_EINVAL;
    *out = NULL;
    s3lect_fence *f = fence_alloc(s3lect_get_config(e));
    if (!f)
        return S3LECT_ENOMEM;
    f->e = e;
    f->holder = u_strdup(f->cfg->server_id ? f->cfg->server_id : "");
    f->lock = st_lock_canonical(f->cfg->lock ? f->cfg->lock : "");
    if (!f->holder || !f->lock) {
        s3lect_fence_free(f);
        return S3LECT_ENOMEM;
    }
    *out = f;
    return S3LECT_OK;
}

int s3lect_fence_new_token(const s3lect_config *cfg, const char *token, s3lect_fence **out)
{
    if (!token || !out)
        return S3LECT_EINVAL;
    *out = NULL;
    int64_t term;
    char *holder, *lock;
    if (fn_token_parse(token, &term, &holder, &lock) != 0)
        return S3LECT_EINVAL;
    s3lect_fence *f = fence_alloc(cfg ? s3lect_config_dup(cfg) : s3lect_config_new());
    if (!f) {
        free(holder);
        free(lock);
        return S3LECT_ENOMEM;
    }
    f->term = term;
    f->holder = holder;
    f->lock = lock;
    *out = f;
    return S3LECT_OK;
}

void s3lect_fence_free(s3lect_fence *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < FENCE_SEEN; i++) {
        free(f->seen[i].url);
        free(f->seen[i].etag);
        free(f->seen[i].holder);
    }
    for (size_t i = 0; i < FENCE_STORES; i++) {
        free(f->stores[i].base);
        st_destroy(f->stores[i].st);
    }
    free(f->holder);
    free(f->lock);
    s3lect_config_free(f->cfg);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

size_t s3lect_fence_errmsg(const s3lect_fence *f, char *buf, size_t buflen)
{
    return u_copyout(f ? f->errmsg : "NULL fence", buf, buflen);
}

/* The elector's term while it leads, read with its leadership in one look;
 * 0 when it does not lead. */
static int64_t leading_term(s3lect_elector *e)
{
    pthread_mutex_lock(&e->mu);
    int64_t t = el_is_leader(&e->eng, rt_now(e)) ? e->eng.term : 0;
    pthread_mutex_unlock(&e->mu);
    return t;
}

size_t s3lect_fence_token(s3lect_elector *e, char *buf, size_t buflen)
{
    if (buf && buflen)
        buf[0] = '\0';
    int64_t term = e ? leading_term(e) : 0;
    s3lect_config *cfg = term ? s3lect_get_config(e) : NULL;
    char *lock = cfg && cfg->lock ? st_lock_canonical(cfg->lock) : NULL;
    char *tok = lock ? fn_token_encode(term, cfg->server_id, lock) : NULL;
    size_t n = tok ? u_copyout(tok, buf, buflen) : 0;
    free(tok);
    free(lock);
    s3lect_config_free(cfg);
    return n;
}

/* The writer's term: the token's, or the elector's while it leads (else
 * S3LECT_ENOTLEADER: refused before anything is sent). */
static int writer_term(s3lect_fence *f, int64_t *term)
{
    *term = f->e ? leading_term(f->e) : f->term;
    if (*term < 1)
        return fence_fail(f, S3LECT_ENOTLEADER,
                          "this elector does not lead (its lease has passed or it never led): "
                          "nothing was written");
    return S3LECT_OK;
}

/* The store of url (opened on first use, kept) and, allocated in *key, the
 * key in it. NULL with *rc and the message set when it cannot be opened. */
static st_store *open_store(s3lect_fence *f, const char *url, char **key, size_t *max, int *rc)
{
    st_location loc;
    char err[512];
    *key = NULL;
    if (st_location_parse(url, &loc, err, sizeof err) != 0) {
        *rc = fence_fail(f, S3LECT_EINVAL, "%s", err);
        return NULL;
    }
    char *base =
        u_asprintf("%s\n%s\n%s\n%s\n%s", loc.scheme->name, loc.bucket ? loc.bucket : "",
                   loc.opt1 ? loc.opt1 : "", loc.opt2 ? loc.opt2 : "", loc.opt3 ? loc.opt3 : "");
    *key = u_strdup(loc.key ? loc.key : "");
    st_store *st = NULL;
    if (!base || !*key) {
        *rc = fence_fail(f, S3LECT_ENOMEM, "out of memory");
        free(base);
        free(*key);
        *key = NULL;
        st_location_clear(&loc);
        return NULL;
    }
    *rc = S3LECT_OK;
    const char *sn = loc.scheme->name;
    *max = !strcmp(sn, "s3") || !strcmp(sn, "gs") || loc.scheme->cred == ST_CRED_AZURE
               ? FENCE_HTTP_OBJECT
               : ST_MAX_OBJECT;
    for (size_t i = 0; !*rc && !st && i < FENCE_STORES; i++)
        if (f->stores[i].base && strcmp(f->stores[i].base, base) == 0)
            st = f->stores[i].st;
    if (!*rc && !st) {
        size_t slot = 0; /* a free slot, else the last one's store is closed */
        while (slot + 1 < FENCE_STORES && f->stores[slot].base)
            slot++;
        free(f->stores[slot].base);
        st_destroy(f->stores[slot].st);
        f->stores[slot].base = NULL;
        f->stores[slot].st = NULL;
        if (st_open(f->cfg, &loc, &st, err, sizeof err) != 0) {
            *rc = fence_fail(f, S3LECT_EFATAL, "%s", err);
            st = NULL;
        } else {
            f->stores[slot].base = base;
            f->stores[slot].st = st;
            base = NULL;
        }
    }
    free(base);
    st_location_clear(&loc);
    if (*rc) {
        free(*key);
        *key = NULL;
    }
    return st;
}

static fence_seen *seen_of(s3lect_fence *f, const char *url)
{
    for (size_t i = 0; i < FENCE_SEEN; i++)
        if (f->seen[i].url && strcmp(f->seen[i].url, url) == 0)
            return &f->seen[i];
    return NULL;
}

static void forget(s3lect_fence *f, const char *url)
{
    fence_seen *s = seen_of(f, url);
    if (!s)
        return;
    free(s->url);
    free(s->etag);
    free(s->holder);
    memset(s, 0, sizeof *s);
}

static void remember(s3lect_fence *f, const char *url, const char *etag, int64_t term,
                     const char *holder)
{
    fence_seen *s = seen_of(f, url);
    if (!s) {
        s = &f->seen[f->next];
        f->next = (f->next + 1) % FENCE_SEEN;
    }
    free(s->url);
    free(s->etag);
    free(s->holder);
    memset(s, 0, sizeof *s);
    if (!etag) /* no version to write over: nothing worth keeping */
        return;
    s->url = u_strdup(url);
    s->etag = u_strdup(etag);
    s->holder = u_strdup(holder ? holder : "");
    s->term = term;
    if (!s->url || !s->etag || !s->holder)
        forget(f, url);
}

/* A store answer that is no success, as an error code and message. */
static int store_error(s3lect_fence *f, const char *what, const char *url, const st_result *r)
{
    char *shown = st_lock_display(url);
    int code = r->outcome == ST_AUTH        ? S3LECT_EAUTH
               : r->outcome == ST_TRANSIENT ? S3LECT_ETRANSIENT
               : r->outcome == ST_NOT_FOUND ? S3LECT_ENOTFOUND
                                            : S3LECT_EFATAL;
    fence_fail(f, code, "%s %s: %s", what, shown ? shown : "the object",
               r->message ? r->message : s3lect_strerror(code));
    free(shown);
    return code;
}

/* What the object at key holds now: its version (NULL: absent), its header
 * (term 0: absent or plain) and, when body is not NULL, the writer's bytes.
 * S3LECT_ECORRUPT for bytes that start like an envelope but are none. */
static int read_object(s3lect_fence *f, st_store *st, const char *key, size_t max, const char *url,
                       char **etag, fn_header *h, char **body, size_t *len)
{
    st_result r = {0};
    *etag = NULL;
    memset(h, 0, sizeof *h);
    st_get(st, key, f->cfg->request_timeout, &r);
    int rc = S3LECT_OK;
    if (r.outcome == ST_OK && r.body_len > max) {
        char *shown = st_lock_display(url);
        rc = fence_fail(f, S3LECT_ECORRUPT,
                        "%s is larger than this store reads back (%zu bytes): not a fenced "
                        "object s3lect wrote, and never overwritten",
                        shown ? shown : "the object", max);
        free(shown);
    } else if (r.outcome == ST_OK) {
        const char *b;
        size_t n;
        int kind = fn_parse(r.body ? r.body : "", r.body_len, h, &b, &n);
        if (kind == FN_BAD) {
            char *shown = st_lock_display(url);
            rc = fence_fail(f, S3LECT_ECORRUPT,
                            "%s begins like a fenced object (" FN_MAGIC "...) but is not one: "
                            "s3lect neither reads nor overwrites it",
                            shown ? shown : "the object");
            free(shown);
        } else if (!r.etag) {
            rc = fence_fail(f, S3LECT_EFATAL, "the store gave no version for %s", key);
        } else {
            *etag = u_strdup(r.etag);
            if (body) {
                *body = malloc(n + 1);
                if (*body) {
                    memcpy(*body, b, n);
                    (*body)[n] = '\0';
                    *len = n;
                }
            }
            if (!*etag || (body && !*body))
                rc = fence_fail(f, S3LECT_ENOMEM, "out of memory");
        }
    } else if (r.outcome != ST_NOT_FOUND) {
        rc = store_error(f, "reading", url, &r);
    }
    st_result_clear(&r);
    if (rc) {
        free(*etag);
        *etag = NULL;
        fn_header_clear(h);
    }
    return rc;
}

int s3lect_fenced_get(s3lect_fence *f, const char *url, char **body, size_t *len, char **version,
                      int64_t *term)
{
    if (!f || !url || !body || !len)
        return S3LECT_EINVAL;
    *body = NULL;
    *len = 0;
    if (version)
        *version = NULL;
    if (term)
        *term = 0;
    pthread_mutex_lock(&f->mu);
    char *key = NULL;
    size_t max = 0;
    int rc;
    st_store *st = open_store(f, url, &key, &max, &rc);
    char *etag = NULL;
    fn_header h;
    memset(&h, 0, sizeof h);
    if (st)
        rc = read_object(f, st, key, max, url, &etag, &h, body, len);
    if (!rc && etag)
        remember(f, url, etag, h.term, h.holder);
    if (!rc && (!etag || h.deleted)) {
        free(*body);
        *body = NULL;
        *len = 0;
        rc =
            fence_fail(f, S3LECT_ENOTFOUND, "%s", etag ? "deleted (a fenced delete)" : "no object");
    }
    if (version && etag && (!rc || rc == S3LECT_ENOTFOUND)) {
        *version = etag; /* a tombstone's too: a create over it writes over that version */
        etag = NULL;
    }
    if (term && (!rc || rc == S3LECT_ENOTFOUND))
        *term = h.term;
    free(etag);
    free(key);
    fn_header_clear(&h);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* Says why a writer of `term` may not write over h. */
static int fenced(s3lect_fence *f, const char *url, int64_t term, const fn_header *h)
{
    char *shown = st_lock_display(url);
    if (h->term > term)
        fence_fail(f, S3LECT_EFENCED, "%s was written in term %lld (by %s), newer than ours, %lld",
                   shown ? shown : "the object", (long long)h->term, h->holder ? h->holder : "?",
                   (long long)term);
    else
        fence_fail(f, S3LECT_EFENCED,
                   "%s was written in our term, %lld, by another holder (%s): the first writer "
                   "of a term keeps it",
                   shown ? shown : "the object", (long long)term, h->holder ? h->holder : "?");
    free(shown);
    return S3LECT_EFENCED;
}

/* What is at key before a write: what this handle saw last of the object
 * (its own write, or the read a cas goes over: want) when may_cache, else a
 * read. *etag NULL: absent; h.term 0: absent or plain. */
static int current(s3lect_fence *f, st_store *st, const char *key, size_t max, const char *url,
                   int may_cache, const char *want, int cas, char **etag, fn_header *h)
{
    fence_seen *s = seen_of(f, url);
    memset(h, 0, sizeof *h);
    *etag = NULL;
    if (!may_cache || !s || (cas && (!want || strcmp(want, s->etag) != 0)))
        return read_object(f, st, key, max, url, etag, h, NULL, NULL);
    *etag = u_strdup(s->etag);
    h->term = s->term;
    h->holder = u_strdup(s->holder);
    if (*etag && h->holder)
        return S3LECT_OK;
    fn_header_clear(h);
    free(*etag);
    *etag = NULL;
    return fence_fail(f, S3LECT_ENOMEM, "out of memory");
}

/* Whether url names the lock this fence's term comes from, or an object
 * s3lect keeps next to it (the followers' roster KEY.s3lect-roster,
 * check-store's scratch objects): a fenced write there would replace the
 * lock record with an envelope, and no node could read the lock again. */
static int is_lock_object(const s3lect_fence *f, const char *url)
{
    if (!f->lock || !f->lock[0])
        return 0;
    char *c = st_lock_canonical(url);
    size_t n = strlen(f->lock);
    int same =
        c && strncmp(c, f->lock, n) == 0 && (c[n] == '\0' || strncmp(c + n, ".s3lect-", 8) == 0);
    free(c);
    return same;
}

/* One fenced write of data (a tombstone when deleted) at url. cas: only
 * over version `want` (NULL: only where there is no object). */
static int fenced_write(s3lect_fence *f, const char *url, const void *data, size_t len, int cas,
                        const char *want, int deleted)
{
    int64_t term;
    int rc = writer_term(f, &term);
    if (!rc && is_lock_object(f, url))
        return fence_fail(f, S3LECT_EINVAL,
                          "%s is the lock itself (or an object s3lect keeps next to it): a fenced "
                          "write there would destroy the lock record; write your data elsewhere",
                          f->lock);
    char *key = NULL;
    size_t max = 0;
    st_store *st = rc ? NULL : open_store(f, url, &key, &max, &rc);
    if (!st)
        return rc;
    if (len > max - FN_MAX_HEADER) {
        free(key);
        return fence_fail(f, S3LECT_EINVAL,
                          "%zu bytes is more than a fenced object holds on this store (%zu)", len,
                          max - FN_MAX_HEADER);
    }
    fn_header mine = {.term = term, .holder = f->holder, .lock = f->lock, .deleted = deleted};
    size_t n = 0;
    char *env = fn_encode(&mine, data, len, &n);
    if (!env) {
        free(key);
        return fence_fail(f, S3LECT_ENOMEM, "out of memory (or a server id or lock too long)");
    }
    rc = S3LECT_ERETRIES;
    for (int attempt = 0; attempt < FENCE_TRIES; attempt++) {
        /* What is there: what this handle saw last of the object (its own
         * write, or the read a cas goes over), else a read. */
        char *etag = NULL;
        fn_header h;
        if ((rc = current(f, st, key, max, url, attempt == 0, cas ? want : NULL, cas, &etag, &h)) !=
            0)
            break;
        if (!fn_may_write(term, f->holder, &h)) {
            rc = fenced(f, url, term, &h);
        } else if (cas && (want ? !etag || strcmp(want, etag) != 0 : etag != NULL)) {
            rc = fence_fail(f, S3LECT_EPRECONDITION,
                            "the object is not at the version given (it changed since it was "
                            "read): nothing was written");
        } else if (f->e && leading_term(f->e) != mine.term) { /* just before sending */
            rc = fence_fail(f, S3LECT_ENOTLEADER,
                            "this elector stopped leading (term %lld) before the write was sent: "
                            "nothing was written",
                            (long long)mine.term);
        } else {
            st_result r = {0};
            st_put(st, key, env, n, etag, f->cfg->request_timeout, &r);
            if (r.outcome == ST_OK) {
                remember(f, url, r.etag, term, f->holder);
                rc = S3LECT_OK;
            } else if (r.outcome == ST_PRECONDITION ||
                       (r.outcome == ST_NOT_FOUND && etag)) { /* changed since: look again */
                forget(f, url);
                rc = S3LECT_ERETRIES;
            } else {
                forget(f, url);
                rc = store_error(f, "writing", url, &r);
            }
            st_result_clear(&r);
        }
        fn_header_clear(&h);
        free(etag);
        if (rc != S3LECT_ERETRIES)
            break;
    }
    if (rc == S3LECT_ERETRIES)
        fence_fail(f, S3LECT_ERETRIES,
                   "the object kept changing between our read and our write (%d tries): nothing "
                   "was written",
                   FENCE_TRIES);
    free(env);
    free(key);
    return rc;
}

int s3lect_fenced_put(s3lect_fence *f, const char *url, const void *data, size_t len)
{
    if (!f || !url || (!data && len))
        return S3LECT_EINVAL;
    pthread_mutex_lock(&f->mu);
    int rc = fenced_write(f, url, data, len, 0, NULL, 0);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int s3lect_fenced_cas(s3lect_fence *f, const char *url, const void *data, size_t len,
                      const char *version)
{
    if (!f || !url || (!data && len))
        return S3LECT_EINVAL;
    pthread_mutex_lock(&f->mu);
    int rc = fenced_write(f, url, data, len, 1, version, 0);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int s3lect_fenced_delete(s3lect_fence *f, const char *url)
{
    if (!f || !url)
        return S3LECT_EINVAL;
    pthread_mutex_lock(&f->mu);
    int rc = fenced_write(f, url, "", 0, 0, NULL, 1);
    pthread_mutex_unlock(&f->mu);
    return rc;
}
