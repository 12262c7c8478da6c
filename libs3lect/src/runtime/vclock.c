/* SPDX-License-Identifier: Apache-2.0 */
/* vclock.c - virtual clocks (s3lect_clock_*, docs/testing-your-code.md):
 * electors on one are not run by the loop thread but by
 * s3lect_clock_advance, in the caller's thread. It steps virtual time to
 * the earliest wake-up among them, runs that elector's engine there (its
 * store requests on the mem:// store inline, answered at once or after the
 * clock's latency), delivers its events to its callbacks, and repeats
 * until every wake-up is past the target. Same configuration, same seed,
 * same calls: the same run.
 *
 * Locks: the clock's mu (recursive: a callback run by an advance may stop
 * another elector of the clock), then an elector's mu, never the other
 * way; the clock's time is atomic, read without a lock.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

/* The engine's monotonic ms at the clock's 0: far from 0, which some of the
 * engine's fields use for "none". */
#define VC_BASE_MS 1000000000LL
/* Virtual time goes at most this far (about 290 years): no overflow. */
#define VC_MAX_MS ((int64_t)1 << 53)
/* Operations one step may run at one instant before it yields (an engine
 * asking for another request at once, again and again). */
#define VC_MAX_OPS 64

typedef struct vc_member {
    s3lect_elector *e;
    int active; /* started, not stopped yet: advances run it */
} vc_member;

struct s3lect_clock {
    pthread_mutex_t mu;
    _Atomic int64_t now; /* the engine's monotonic ms: VC_BASE_MS + virtual time */
    _Atomic int64_t latency;
    _Atomic int refs; /* the caller's, and one per elector made on it */
    int64_t wall_start;
    int advancing; /* under mu: an advance runs (its callbacks may not advance) */
    vc_member *m;  /* under mu: electors made on it, in order (ties go first) */
    size_t nm, capm;
};

static void clock_unref(s3lect_clock *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c->m);
    free(c);
}

s3lect_clock *s3lect_clock_new(int64_t wall_start_ms)
{
    s3lect_clock *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) != 0) {
        free(c);
        return NULL;
    }
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    int rc = pthread_mutex_init(&c->mu, &a);
    pthread_mutexattr_destroy(&a);
    if (rc != 0) {
        free(c);
        return NULL;
    }
    atomic_init(&c->now, VC_BASE_MS);
    atomic_init(&c->latency, 0);
    atomic_init(&c->refs, 1);
    c->wall_start = wall_start_ms;
    return c;
}

void s3lect_clock_free(s3lect_clock *c)
{
    if (c)
        clock_unref(c);
}

int64_t s3lect_clock_now(const s3lect_clock *c)
{
    return c ? atomic_load(&((s3lect_clock *)c)->now) - VC_BASE_MS : 0;
}

int s3lect_clock_set_latency(s3lect_clock *c, int64_t ms)
{
    if (!c || ms < 0 || ms > VC_MAX_MS)
        return S3LECT_EINVAL;
    atomic_store(&c->latency, ms);
    return S3LECT_OK;
}

int s3lect_config_set_clock(s3lect_config *cfg, s3lect_clock *c)
{
    if (!cfg)
        return S3LECT_EINVAL;
    cfg->vclock = c;
    return S3LECT_OK;
}

static int64_t clock_wall(void *arg)
{
    s3lect_clock *c = arg;
    return c->wall_start + (atomic_load(&c->now) - VC_BASE_MS);
}

int64_t rt_now(const s3lect_elector *e)
{
    s3lect_clock *c = e->cfg ? e->cfg->vclock : NULL;
    return c ? atomic_load(&c->now) : u_mono_ms();
}

/* ---- electors joining and leaving ---- */

int rt_vclock_attach(s3lect_elector *e, uint64_t *seed)
{
    s3lect_clock *c = e->cfg->vclock;
    pthread_mutex_lock(&c->mu);
    if (c->nm == c->capm) {
        size_t cap = c->capm ? 2 * c->capm : 8;
        vc_member *m = realloc(c->m, cap * sizeof *m);
        if (!m) {
            pthread_mutex_unlock(&c->mu);
            return S3LECT_ENOMEM;
        }
        c->m = m;
        c->capm = cap;
    }
    c->m[c->nm++] = (vc_member){e, 0};
    atomic_fetch_add(&c->refs, 1);
    pthread_mutex_unlock(&c->mu);
    st_mem_use_clock(e->store, clock_wall, c);
    /* FNV-1a of the server id, mixed with the clock's start: fixed per test. */
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = e->cfg->server_id; p && *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    *seed = h ^ (uint64_t)c->wall_start;
    return S3LECT_OK;
}

static vc_member *member_of(s3lect_clock *c, const s3lect_elector *e)
{
    for (size_t i = 0; i < c->nm; i++)
        if (c->m[i].e == e)
            return &c->m[i];
    return NULL;
}

void rt_vclock_detach(s3lect_elector *e)
{
    s3lect_clock *c = e->cfg ? e->cfg->vclock : NULL;
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    vc_member *m = member_of(c, e);
    if (m)
        memmove(m, m + 1, (size_t)(c->m + c->nm - (m + 1)) * sizeof *m);
    c->nm -= m != NULL;
    pthread_mutex_unlock(&c->mu);
    if (m) /* a handle that failed in s3lect_new before joining holds none */
        clock_unref(c);
}

/* ---- running an elector at a virtual instant ---- */

/* Runs e's callbacks for its queued events in this thread (poll mode:
 * they wait for s3lect_dispatch). Holds the clock's mu, not e's. */
static void deliver(s3lect_elector *e)
{
    if (e->cfg->poll_mode)
        return;
    pthread_mutex_lock(&e->mu);
    rt_deliver_queued(e);
    pthread_cond_broadcast(&e->q_cv);
    pthread_mutex_unlock(&e->mu);
}

/* One store request of e's engine, on its store, now. Holds e->mu. */
static void perform(s3lect_elector *e, const el_op *op, st_result *res)
{
    memset(res, 0, sizeof *res);
    const char *key = op->key ? op->key : e->key;
    if (op->kind == EL_OP_GET)
        st_get(e->store, key, op->timeout_ms, res);
    else if (op->kind == EL_OP_PUT)
        st_put(e->store, key, op->body, op->body_len, op->if_match, op->timeout_ms, res);
    else /* validation refuses peer mode on a virtual clock */
        st_result_setf(res, ST_TRANSIENT, "no peer check on a virtual clock");
}

/* Runs e's engine at the clock's time t: completes the request whose
 * answer is due, applies what was asked of it, then asks for steps until
 * one waits (e->wake_at) or the engine is done (e->finished); then runs
 * the callbacks of the events raised. Holds the clock's mu. */
static void step(s3lect_clock *c, s3lect_elector *e, int64_t t)
{
    el_time now = {t, c->wall_start + (t - VC_BASE_MS)};
    int64_t latency = atomic_load(&c->latency);
    pthread_mutex_lock(&e->mu);
    if (e->io == RT_IO_JOB) { /* the answer of a request sent with latency */
        st_result res = e->job_res;
        memset(&e->job_res, 0, sizeof e->job_res);
        e->io = RT_IO_NONE;
        el_complete(&e->eng, now, &res);
        st_result_clear(&res);
    }
    e->begun = 1;
    rt_apply_requests(e);
    e->eng.hb_timeout = e->hb_timeout;
    e->eng.hb_at = e->hb_at;
    int64_t next = t + 1;
    for (int n = 0; n < VC_MAX_OPS; n++) {
        el_op op;
        int64_t wake;
        int kind = el_next(&e->eng, now, &op, &wake);
        rt_flush_events(NULL, e, now);
        if (kind == EL_OP_DONE) {
            e->finished = 1;
            next = INT64_MAX;
            break;
        }
        if (kind == EL_OP_NONE) {
            next = wake > t ? wake : t + 1;
            break;
        }
        st_result res;
        perform(e, &op, &res);
        if (latency > 0) {
            e->job_res = res;
            e->io = RT_IO_JOB;
            next = t + latency;
            break;
        }
        el_complete(&e->eng, now, &res);
        st_result_clear(&res);
    }
    e->wake_at = next;
    pthread_mutex_unlock(&e->mu);
    deliver(e);
}

void rt_vclock_kick_locked(s3lect_elector *e)
{
    int64_t now = atomic_load(&e->cfg->vclock->now);
    if (e->started && !e->finished && e->io != RT_IO_JOB && e->wake_at > now)
        e->wake_at = now;
}

int rt_vclock_start(s3lect_elector *e)
{
    s3lect_clock *c = e->cfg->vclock;
    pthread_mutex_lock(&c->mu);
    vc_member *m = member_of(c, e);
    if (m) {
        m->active = 1;
        pthread_mutex_lock(&e->mu);
        e->io = RT_IO_NONE;
        e->wake_at = atomic_load(&c->now);
        pthread_mutex_unlock(&e->mu);
    }
    pthread_mutex_unlock(&c->mu);
    if (!m) {
        pthread_mutex_lock(&e->mu);
        e->started = 0;
        pthread_mutex_unlock(&e->mu);
        return rt_fail(e, S3LECT_ESTATE, "elector is not on its virtual clock");
    }
    return S3LECT_OK;
}

int rt_vclock_stop(s3lect_elector *e, int release)
{
    s3lect_clock *c = e->cfg->vclock;
    pthread_mutex_lock(&c->mu);
    pthread_mutex_lock(&e->mu);
    if (!e->started || e->stopped) {
        e->stopped = 1;
        pthread_cond_broadcast(&e->state_cv);
        pthread_mutex_unlock(&e->mu);
        pthread_mutex_unlock(&c->mu);
        return S3LECT_OK;
    }
    if (e->stop_req) { /* a stop of e further up this thread's stack */
        pthread_mutex_unlock(&e->mu);
        pthread_mutex_unlock(&c->mu);
        return rt_fail(e, S3LECT_EBUSY, "s3lect_stop: this elector is being stopped already");
    }
    e->stop_req = 1;
    e->stop_release = release && e->cfg->release_on_stop;
    pthread_mutex_unlock(&e->mu);
    /* The release now, at the clock's time (an answer due later with the
     * clock's latency is taken now: the request was performed when sent).
     * The engine is done after at most a release: the bound is slack. */
    for (int n = 0; n < 8 && !e->finished; n++)
        step(c, e, atomic_load(&c->now));
    vc_member *m = member_of(c, e);
    if (m)
        m->active = 0;
    pthread_mutex_lock(&e->mu);
    if (e->io == RT_IO_JOB) {
        st_result_clear(&e->job_res);
        e->io = RT_IO_NONE;
    }
    e->finished = 1;
    e->done = 1;
    e->stopped = 1;
    pthread_cond_broadcast(&e->state_cv);
    pthread_cond_broadcast(&e->q_cv);
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_unlock(&c->mu);
    return S3LECT_OK;
}

/* ---- advancing ---- */

int s3lect_clock_advance(s3lect_clock *c, int64_t ms)
{
    if (!c || ms < 0 || ms > VC_MAX_MS)
        return S3LECT_EINVAL;
    pthread_mutex_lock(&c->mu);
    if (c->advancing) { /* from a callback this advance runs */
        pthread_mutex_unlock(&c->mu);
        return S3LECT_EBUSY;
    }
    c->advancing = 1;
    int64_t target = atomic_load(&c->now) + ms;
    for (;;) {
        /* The earliest wake-up; the first member wins a tie. Members may
         * come and go while callbacks run: looked for afresh every time. */
        s3lect_elector *best = NULL;
        int64_t at = INT64_MAX;
        for (size_t i = 0; i < c->nm; i++) {
            if (!c->m[i].active)
                continue;
            s3lect_elector *e = c->m[i].e;
            pthread_mutex_lock(&e->mu);
            int64_t w = e->finished ? INT64_MAX : e->wake_at;
            pthread_mutex_unlock(&e->mu);
            if (w < at) {
                at = w;
                best = e;
            }
        }
        if (!best || at > target)
            break;
        if (at > atomic_load(&c->now))
            atomic_store(&c->now, at);
        step(c, best, atomic_load(&c->now));
    }
    atomic_store(&c->now, target);
    c->advancing = 0;
    pthread_mutex_unlock(&c->mu);
    return S3LECT_OK;
}
