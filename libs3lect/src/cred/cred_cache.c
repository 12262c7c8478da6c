/* SPDX-License-Identifier: Apache-2.0 */
/* cred_cache.c - the credential cache and the background refresher behind
 * every provider chain (AWS's cred_chain.c, gcp_creds.c, az_creds.c).
 *
 * Cache: one entry per resolved source (same profile, same web identity
 * role, the container endpoint, instance metadata), shared by every S3 store
 * of the process and reference-counted; static keys get a private entry
 * that is never refreshed. An entry's credentials are read under its own
 * mutex only (aws_chain_get): a renewal never waits for STS, IMDS or a
 * credential process.
 *
 * Refresher: one thread per process while any shared entry exists. It
 * refreshes an entry ahead of Expiration - a third of the lifetime before
 * it, at most 5 minutes before, but at least twice the last fetch's duration
 * plus 1 s, with up to 20% of that margin as jitter -
 * and at once when a server refused the current credentials
 * (cred_cache_stale). A failed refresh keeps the still-valid credentials,
 * records why (cred_cache_describe, and the message of cred_cache_keys once
 * they expire) and is retried with backoff (1 s doubling to 30 s, sooner
 * near expiry). Fetches on the refresher give up early when the last entry
 * goes (the thread is joined then).
 *
 * Lock order: reg_mu, then an entry's fetch_mu, then its mu.
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cred_cache.h"
#include "crypto.h"
#include "proc.h"
#include "s3lect.h"
#include "util.h"

#define EXPIRY_MARGIN_MS 1000 /* never sign with credentials this close to expiring */
#define MAX_REFRESH_MARGIN_MS (5 * 60 * 1000)
#define RETRY_MIN_MS 1000
#define RETRY_MAX_MS 30000
#define IDLE_WAIT_MS 5000

typedef struct refresher {
    pthread_t th;
    int stop;          /* reg_mu */
    _Atomic int abort; /* read by fetches without a lock */
} refresher;

/* Credential fetches of every chain of the process (metrics). */
static uint64_t g_fetches_ok, g_fetches_failed;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cv;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static struct cred_cache *reg_head;
static refresher *reg_refresher;
static _Atomic int test_permille;
static const _Atomic int never_abort = 0;

static void reg_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&reg_cv, &a);
    pthread_condattr_destroy(&a);
}

void cred_cache_test_refresh_permille(int permille)
{
    atomic_store(&test_permille, permille);
}

/* ---- entries ---- */

struct cred_cache *cred_entry_new(const cred_ops *ops)
{
    struct cred_cache *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->ops = ops;
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->fetch_mu, NULL);
    uint64_t seed;
    if (cr_random(&seed, sizeof seed) != 0)
        seed = (uint64_t)u_mono_ms() ^ (uint64_t)(uintptr_t)e;
    u_rng_seed(&e->rng, seed);
    return e;
}

void cred_entry_free(struct cred_cache *e)
{
    if (!e)
        return;
    cred_fetched_clear(&e->cur);
    free(e->key);
    if (e->ops && e->state)
        e->ops->free_state(e->state);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->fetch_mu);
    free(e);
}

static int64_t refresh_due(struct cred_cache *e, int64_t now, int64_t expires)
{
    if (!expires)
        return 0;
    int64_t life = expires - now;
    int pm = atomic_load(&test_permille);
    if (pm > 0)
        return now + life * pm / 1000;
    int64_t margin = life / 3;
    if (margin > MAX_REFRESH_MARGIN_MS)
        margin = MAX_REFRESH_MARGIN_MS;
    /* A slow source (a credential process that takes seconds) must start
     * early enough to finish before the credentials expire. */
    if (margin < 2 * e->fetch_ms + 1000)
        margin = 2 * e->fetch_ms + 1000;
    if (margin > life)
        margin = life;
    int64_t jitter = margin > 5 ? (int64_t)(u_rng_next(&e->rng) % (uint64_t)(margin / 5)) : 0;
    return expires - margin - jitter;
}

/* Records the outcome of a fetch. Takes e->mu. */
static void apply(struct cred_cache *e, int rc, cred_fetched *f, const char *err)
{
    int64_t now = u_wall_ms();
    char msg[512];
    if (rc == 0 && f->expires_ms && f->expires_ms <= now + EXPIRY_MARGIN_MS) {
        char exp[40], nowt[40];
        u_format_rfc3339(f->expires_ms, exp, sizeof exp);
        u_format_rfc3339(now, nowt, sizeof nowt);
        snprintf(msg, sizeof msg,
                 "%s handed out credentials that expire at %s, which by this machine's clock "
                 "(%s) has already passed: the source or this machine's clock is wrong (check "
                 "NTP)",
                 e->desc, exp, nowt);
        cred_fetched_clear(f);
        rc = S3LECT_EAUTH;
        err = msg;
    }
    pthread_mutex_lock(&e->mu);
    e->urgent = 0;
    e->last_rc = rc;
    if (rc == 0) {
        cred_fetched_clear(&e->cur);
        e->cur = *f;
        memset(f, 0, sizeof *f);
        e->have = 1;
        e->gen++;
        e->fetched_wall = now;
        e->due_wall = refresh_due(e, now, e->cur.expires_ms);
        e->fail_streak = 0;
        e->last_err[0] = '\0';
        e->refreshes++;
        __atomic_add_fetch(&g_fetches_ok, 1, __ATOMIC_RELAXED);
    } else {
        e->failures++;
        __atomic_add_fetch(&g_fetches_failed, 1, __ATOMIC_RELAXED);
        snprintf(e->last_err, sizeof e->last_err, "%s", err && *err ? err : "failed");
        int64_t delay = RETRY_MIN_MS << (e->fail_streak < 5 ? e->fail_streak : 5);
        if (delay > RETRY_MAX_MS)
            delay = RETRY_MAX_MS;
        if (e->have && e->cur.expires_ms) {
            int64_t left = (e->cur.expires_ms - now) / 4;
            if (left < delay)
                delay = left < RETRY_MIN_MS ? RETRY_MIN_MS : left;
        }
        e->fail_streak++;
        e->due_wall = !e->ops ? 0 : now + u_jitter(&e->rng, delay, 0.1);
    }
    pthread_mutex_unlock(&e->mu);
}

/* Fetches and records; with only_if_missing, skips when another thread got
 * credentials first. Returns the fetch's result. */
static int refresh(struct cred_cache *e, int first, int only_if_missing, const _Atomic int *abort)
{
    pthread_mutex_lock(&e->fetch_mu);
    if (only_if_missing) {
        pthread_mutex_lock(&e->mu);
        int have = e->have, last = e->last_rc, tried = e->refreshes + e->failures > 0;
        pthread_mutex_unlock(&e->mu);
        if (have || tried) {
            pthread_mutex_unlock(&e->fetch_mu);
            return have ? 0 : last;
        }
    }
    cred_fetched f = {0};
    char err[512] = "";
    int64_t t0 = u_mono_ms();
    int rc = e->ops->fetch(e->state, first, abort, &f, err, sizeof err);
    pthread_mutex_lock(&e->mu);
    e->fetch_ms = u_mono_ms() - t0;
    pthread_mutex_unlock(&e->mu);
    apply(e, rc, &f, err);
    cred_fetched_clear(&f);
    pthread_mutex_lock(&e->mu);
    rc = e->last_rc;
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_unlock(&e->fetch_mu);
    /* The refresher may be asleep with nothing due: tell it the new date. */
    pthread_mutex_lock(&reg_mu);
    pthread_cond_broadcast(&reg_cv);
    pthread_mutex_unlock(&reg_mu);
    return rc;
}

/* ---- the refresher thread ---- */

static void drop_ref_locked(struct cred_cache *e)
{
    if (--e->refs == 0)
        cred_entry_free(e);
}

static void *refresher_main(void *arg)
{
    refresher *r = arg;
    pthread_mutex_lock(&reg_mu);
    while (!r->stop) {
        int64_t now = u_wall_ms(), next = INT64_MAX;
        struct cred_cache *pick = NULL;
        for (struct cred_cache *e = reg_head; e; e = e->next) {
            pthread_mutex_lock(&e->mu);
            int64_t due = e->urgent ? now : e->due_wall;
            pthread_mutex_unlock(&e->mu);
            if (due && due <= now) {
                pick = e;
                break;
            }
            if (due && due < next)
                next = due;
        }
        if (pick) {
            pick->refs++;
            pthread_mutex_unlock(&reg_mu);
            refresh(pick, 0, 0, &r->abort);
            pthread_mutex_lock(&reg_mu);
            drop_ref_locked(pick);
            continue;
        }
        int64_t wait = next == INT64_MAX ? IDLE_WAIT_MS : next - now;
        if (wait > IDLE_WAIT_MS)
            wait = IDLE_WAIT_MS;
        if (wait < 1)
            wait = 1;
        struct timespec ts = u_cond_deadline(u_mono_ms() + wait, 0);
        pthread_cond_timedwait(&reg_cv, &reg_mu, &ts);
    }
    pthread_mutex_unlock(&reg_mu);
    return NULL;
}

/* Starts the refresher if none runs. Called with reg_mu held. */
static int ensure_refresher_locked(void)
{
    if (reg_refresher)
        return 0;
    refresher *r = calloc(1, sizeof *r);
    if (!r)
        return S3LECT_ENOMEM;
    atomic_init(&r->abort, 0);
    if (u_thread_create(&r->th, NULL, refresher_main, r) != 0) {
        free(r);
        return S3LECT_ENOMEM;
    }
    reg_refresher = r;
    return 0;
}

/* ---- the interface ---- */

/* Takes a reference to the cache entry for e, a new entry a provider list
 * resolved (consumed): static keys stay private; others join the registry,
 * or the equal entry already there is used, whose first credentials are
 * fetched on the calling thread unless CRED_CACHE_NOWAIT. Returns what
 * aws_chain_open returns. */
int cred_cache_open(struct cred_cache *e, int flags, cred_cache **out, char *err, size_t errlen)
{
    *out = NULL;
    pthread_once(&reg_once, reg_init);
    int rc;
    if (!e->ops) {
        e->users = e->refs = 1;
        *out = e;
        return 0;
    }
    e->shared = 1;
    pthread_mutex_lock(&reg_mu);
    struct cred_cache *found = NULL;
    for (struct cred_cache *x = reg_head; x; x = x->next)
        if (strcmp(x->key, e->key) == 0) {
            found = x;
            break;
        }
    if (found) {
        found->users++;
        found->refs++;
        pthread_mutex_unlock(&reg_mu);
        cred_entry_free(e);
        e = found;
    } else {
        rc = ensure_refresher_locked();
        if (rc) {
            pthread_mutex_unlock(&reg_mu);
            cred_entry_free(e);
            snprintf(err, errlen, "cannot start the credential refresher thread");
            return rc;
        }
        e->users = e->refs = 1;
        e->next = reg_head;
        reg_head = e;
        if (flags & CRED_CACHE_NOWAIT) {
            pthread_mutex_lock(&e->mu);
            e->urgent = 1;
            pthread_mutex_unlock(&e->mu);
            pthread_cond_broadcast(&reg_cv);
        }
        pthread_mutex_unlock(&reg_mu);
    }
    if (flags & CRED_CACHE_NOWAIT) {
        *out = e;
        return 0;
    }
    rc = refresh(e, 1, 1, &never_abort);
    pthread_mutex_lock(&e->mu);
    int have = e->have;
    char last[512];
    snprintf(last, sizeof last, "%s", e->last_err);
    pthread_mutex_unlock(&e->mu);
    if (!have && (rc != S3LECT_ETRANSIENT || e->ops->open_failed)) {
        if (e->ops->open_failed)
            e->ops->open_failed(e->desc, last, err, errlen);
        else
            snprintf(err, errlen, "%s", last);
        cred_cache_release(e);
        return rc == S3LECT_ENOMEM ? rc : S3LECT_EAUTH;
    }
    *out = e;
    return 0;
}

void cred_cache_release(cred_cache *e)
{
    if (!e)
        return;
    if (!e->shared) {
        cred_entry_free(e);
        return;
    }
    refresher *stop = NULL;
    pthread_mutex_lock(&reg_mu);
    if (--e->users == 0) {
        for (struct cred_cache **p = &reg_head; *p; p = &(*p)->next)
            if (*p == e) {
                *p = e->next;
                break;
            }
        if (!reg_head && reg_refresher) {
            stop = reg_refresher;
            reg_refresher = NULL;
            stop->stop = 1;
            atomic_store(&stop->abort, 1);
            pthread_cond_broadcast(&reg_cv);
        }
    }
    drop_ref_locked(e);
    pthread_mutex_unlock(&reg_mu);
    if (stop) {
        pthread_join(stop->th, NULL);
        free(stop);
    }
}

int cred_cache_is_static(const cred_cache *e)
{
    return !e->ops;
}

/* 0 when the entry holds current credentials of the kind asked for (bearer:
 * an access token, else AWS keys), else why not. Holds e->mu. */
static int cur_usable_locked(const struct cred_cache *e, int bearer, char *err, size_t errlen)
{
    const char *what = bearer ? "access token" : "credentials";
    if (!e->have) {
        snprintf(err, errlen, "no %s from %s yet: %s", what, e->desc,
                 e->last_err[0] ? e->last_err : "the first fetch is under way");
        return S3LECT_ETRANSIENT;
    }
    if (e->cur.expires_ms && u_wall_ms() + EXPIRY_MARGIN_MS >= e->cur.expires_ms) {
        char when[40];
        u_format_rfc3339(e->cur.expires_ms, when, sizeof when);
        snprintf(err, errlen, "the %s from %s expired at %s and could not be refreshed: %s", what,
                 e->desc, when, e->last_err[0] ? e->last_err : "the refresh is under way");
        return S3LECT_ETRANSIENT;
    }
    if (bearer ? !e->cur.bearer : !e->cur.access_key_id) {
        snprintf(err, errlen, "%s hands out %s", e->desc,
                 bearer ? "AWS keys, not a bearer token" : "a bearer token, not AWS keys");
        return S3LECT_EAUTH;
    }
    return 0;
}

int cred_cache_keys(cred_cache *e, cred_fetched *out, uint64_t *gen, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&e->mu);
    int rc = cur_usable_locked(e, 0, err, errlen);
    if (rc == 0) {
        out->access_key_id = strdup(e->cur.access_key_id);
        out->secret_access_key = strdup(e->cur.secret_access_key);
        out->session_token = e->cur.session_token ? strdup(e->cur.session_token) : NULL;
        if (gen)
            *gen = e->gen;
        if (!out->access_key_id || !out->secret_access_key ||
            (e->cur.session_token && !out->session_token)) {
            snprintf(err, errlen, "out of memory");
            rc = S3LECT_ENOMEM;
        }
    }
    pthread_mutex_unlock(&e->mu);
    if (rc)
        cred_fetched_clear(out);
    return rc;
}

int cred_cache_bearer(cred_cache *e, char **token, uint64_t *gen, char *err, size_t errlen)
{
    *token = NULL;
    pthread_mutex_lock(&e->mu);
    int rc = cur_usable_locked(e, 1, err, errlen);
    if (rc == 0) {
        *token = strdup(e->cur.bearer);
        if (gen)
            *gen = e->gen;
        if (!*token) {
            snprintf(err, errlen, "out of memory");
            rc = S3LECT_ENOMEM;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

char *cred_cache_refresh_warning(cred_cache *e, uint64_t *seen, int64_t *warned_at,
                                 int64_t every_ms)
{
    if (cred_cache_is_static(e) || cred_cache_failures(e) <= *seen)
        return NULL;
    int64_t now = u_mono_ms();
    if (*warned_at && now - *warned_at < every_ms)
        return NULL;
    cred_cache_info info;
    cred_cache_describe(e, &info);
    if (info.failures <= *seen || !info.last_error[0])
        return NULL;
    *seen = info.failures;
    *warned_at = now;
    char until[40] = "";
    if (info.expires_ms > 0)
        u_format_rfc3339(info.expires_ms, until, sizeof until);
    return u_asprintf("refreshing the credentials from %s failed (%s); the current ones are "
                      "still used%s%s",
                      info.source, info.last_error, until[0] ? " until " : "", until);
}

void cred_cache_stale(cred_cache *e, uint64_t gen)
{
    if (!e || !e->ops)
        return;
    pthread_mutex_lock(&reg_mu);
    pthread_mutex_lock(&e->mu);
    if (gen == e->gen && e->stale_gen != gen) {
        e->stale_gen = gen;
        e->urgent = 1;
    }
    pthread_mutex_unlock(&e->mu);
    pthread_cond_broadcast(&reg_cv);
    pthread_mutex_unlock(&reg_mu);
}

void cred_cache_describe(cred_cache *e, cred_cache_info *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&e->mu);
    snprintf(out->source, sizeof out->source, "%s", e->desc);
    snprintf(out->principal, sizeof out->principal, "%s", e->have ? e->cur.principal : "");
    out->expires_ms = e->have ? e->cur.expires_ms : 0;
    out->fetched_ms = e->fetched_wall;
    out->next_refresh_ms = e->due_wall;
    out->refreshes = e->refreshes;
    out->failures = e->failures;
    snprintf(out->last_error, sizeof out->last_error, "%s", e->last_err);
    pthread_mutex_unlock(&e->mu);
}

void cred_fetch_totals(uint64_t *ok, uint64_t *failed)
{
    *ok = __atomic_load_n(&g_fetches_ok, __ATOMIC_RELAXED);
    *failed = __atomic_load_n(&g_fetches_failed, __ATOMIC_RELAXED);
}

uint64_t cred_cache_failures(cred_cache *e)
{
    pthread_mutex_lock(&e->mu);
    uint64_t n = e->failures;
    pthread_mutex_unlock(&e->mu);
    return n;
}
