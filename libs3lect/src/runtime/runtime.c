/* SPDX-License-Identifier: Apache-2.0 */
/* runtime.c - the shared runtime's life: created with the first started
 * elector, shut down when the last one is freed (docs/threading.md). */
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crypto.h"
#include "proc.h"
#include "http.h"
#include "runtime.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
rt_runtime *rt_shared;
_Thread_local s3lect_elector *rt_tls_cb;  /* elector whose callback runs here */
_Thread_local int rt_tls_worker;          /* a worker thread (store functions) */
_Thread_local rt_runtime *rt_tls_runtime; /* set on every thread of a runtime */

el_params rt_params(const s3lect_config *c)
{
    el_params p = {
        .lease = c->lease_timeout,
        .renew_interval = c->renew_interval,
        .renew_deadline = c->renew_deadline,
        .frequent = c->frequent_interval,
        .infrequent = c->infrequent_interval,
        .skew = c->max_clock_skew,
        .release_timeout = c->peer_timeout,
        .request_timeout = c->request_timeout,
        .peer = c->peer_mode,
        .max_lease = cfg_max_lease_of(c->max_lease_timeout, c->lease_timeout),
        .hold = c->leader_hold,
        .new_lock_wait = cfg_new_lock_wait_of(c->new_lock_wait, c->lease_timeout, c->leader_hold),
        .priority = c->priority,
        .max_hold = c->max_hold,
    };
    /* The long-poll wait: the follower's infrequent interval, but at least
     * two renew intervals, so that a live leader's next renewal (not the
     * wait running out with the etag unchanged, which puts the follower in
     * transition and back on S3) ends every poll. */
    int64_t wait = c->infrequent_interval;
    if (wait < 2 * c->renew_interval)
        wait = 2 * c->renew_interval;
    p.peer_wait = wait < PEER_MAX_WAIT_MS ? wait : PEER_MAX_WAIT_MS;
    return p;
}

int rt_fail(s3lect_elector *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&e->mu);
    vsnprintf(e->errmsg, sizeof e->errmsg, fmt, ap);
    e->errcode = code;
    pthread_mutex_unlock(&e->mu);
    va_end(ap);
    return code;
}

/* ---- the runtime's life ---- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void forget_in_child(void)
{
    /* The threads did not survive fork: a child that starts electors gets a
     * runtime of its own (the parent's memory is left as it is). */
    pthread_mutex_init(&g_mu, NULL);
    rt_shared = NULL;
}

static void init_once(void)
{
    pthread_atfork(NULL, NULL, forget_in_child);
}

static void runtime_free(rt_runtime *rt)
{
    rt_hub_free(rt);
    if (rt->multi)
        curl_multi_cleanup(rt->multi);
    for (size_t i = 0; i < rt->neasy; i++)
        curl_easy_cleanup(rt->easy[i]);
    while (rt->pools) {
        rt_pool *p = rt->pools;
        rt->pools = p->next;
        free(p->name);
        free(p);
    }
    free(rt->easy);
    free(rt->heap);
    free(rt->kbuf);
    free(rt->retired);
    pthread_mutex_destroy(&rt->mu);
    pthread_cond_destroy(&rt->work_cv);
    pthread_cond_destroy(&rt->disp_cv);
    pthread_cond_destroy(&rt->exit_cv);
    free(rt);
}

/* Stops the threads of a runtime no elector uses. Holds g_mu. */
static void runtime_shutdown(rt_runtime *rt)
{
    pthread_mutex_lock(&rt->mu);
    rt->exiting = 1;
    pthread_cond_broadcast(&rt->work_cv);
    pthread_cond_broadcast(&rt->disp_cv);
    pthread_mutex_unlock(&rt->mu);
    curl_multi_wakeup(rt->multi);
    pthread_join(rt->loop_tid, NULL);
    pthread_mutex_lock(&rt->mu);
    while (rt->nworkers > 0 || rt->ndisp > 0 || rt->nending > 0)
        pthread_cond_wait(&rt->exit_cv, &rt->mu);
    pthread_mutex_unlock(&rt->mu);
    runtime_free(rt);
}

static rt_runtime *runtime_new(char *err, size_t errlen)
{
    rt_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_condattr_t ca;
    int bad = pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    bad = bad || pthread_mutex_init(&rt->mu, NULL) || pthread_cond_init(&rt->work_cv, &ca) ||
          pthread_cond_init(&rt->disp_cv, &ca) || pthread_cond_init(&rt->exit_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (bad || !(rt->multi = curl_multi_init())) {
        snprintf(err, errlen, "cannot create the runtime (mutexes or libcurl multi handle)");
        free(rt);
        return NULL;
    }
    uint64_t seed = (uint64_t)u_mono_ms();
    uint8_t rnd[8];
    if (cr_random(rnd, sizeof rnd) == 0)
        memcpy(&seed, rnd, sizeof seed);
    u_rng_seed(&rt->rng, seed);
    u_rng_seed(&rt->lrng, seed ^ 0x9e3779b97f4a7c15ULL);
    rt->max_conns = 1;
    int rc = u_thread_create(&rt->loop_tid, NULL, rt_loop_main, rt);
    if (rc != 0) {
        snprintf(err, errlen, "cannot create the runtime's thread: %s", strerror(rc));
        runtime_free(rt);
        return NULL;
    }
    return rt;
}

/* Grows the runtime to what e's configuration asks for. Holds g_mu. */
static int runtime_fit(rt_runtime *rt, const s3lect_config *c, char *err, size_t errlen)
{
    pthread_mutex_lock(&rt->mu);
    if (c->max_connections > rt->max_conns) {
        rt->max_conns = (int)c->max_connections;
        curl_multi_setopt(rt->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)rt->max_conns);
        curl_multi_setopt(rt->multi, CURLMOPT_MAXCONNECTS, (long)(2 * rt->max_conns + 16));
    }
    if (c->callback_threads > rt->want_disp)
        rt->want_disp = (int)c->callback_threads;
    if (c->worker_threads > rt->want_workers)
        rt->want_workers = (int)c->worker_threads; /* started when a blocking store needs one */
    int rc = 0;
    while (rt->ndisp < rt->want_disp) {
        rc = rt_spawn_detached(rt_callback_main, rt);
        if (rc != 0)
            break;
        rt->ndisp++;
    }
    pthread_mutex_unlock(&rt->mu);
    if (rc != 0 && rt->ndisp == 0) {
        snprintf(err, errlen, "cannot create the runtime's callback thread: %s", strerror(rc));
        return S3LECT_EIO;
    }
    return 0;
}

/* Joins the runtime (creating it if needed) for a starting elector and
 * picks the delay of its first step. */
int rt_join(s3lect_elector *e, int64_t *delay, char *err, size_t errlen)
{
    pthread_once(&g_once, init_once);
    if (http_global_init(err, errlen) != 0)
        return S3LECT_EIO;
    pthread_mutex_lock(&g_mu);
    int created = 0;
    if (!rt_shared) {
        if (!(rt_shared = runtime_new(err, errlen))) {
            pthread_mutex_unlock(&g_mu);
            return S3LECT_EIO;
        }
        created = 1;
    }
    rt_runtime *rt = rt_shared;
    int rc = runtime_fit(rt, e->cfg, err, errlen);
    if (rc != 0) {
        if (created) {
            rt_shared = NULL;
            runtime_shutdown(rt);
        }
        pthread_mutex_unlock(&g_mu);
        return rc;
    }
    rt->refs++;
    /* Electors started together spread their first steps (and so their
     * renewals) over up to a renew interval: 2 ms per start in the last
     * second, so a lone start is not delayed. */
    pthread_mutex_lock(&rt->mu);
    int64_t now = u_mono_ms();
    if (now - rt->win_at >= 1000) {
        rt->win_at = now;
        rt->win_starts = 0;
    }
    rt->win_starts++;
    int64_t span = (int64_t)rt->win_starts * RT_SPREAD_MS_PER_START;
    if (span > e->cfg->renew_interval)
        span = e->cfg->renew_interval;
    *delay = span > 1 ? (int64_t)(u_rng_next(&rt->rng) % (uint64_t)span) : 0;
    pthread_mutex_unlock(&rt->mu);
    pthread_mutex_unlock(&g_mu);
    return 0;
}

void rt_release(s3lect_elector *e)
{
    pthread_mutex_lock(&g_mu);
    rt_runtime *rt = rt_shared;
    if (rt && e->joined && --rt->refs == 0 && rt_tls_runtime != rt) {
        /* The last elector left: stop the threads (not from one of them). */
        rt_shared = NULL;
        runtime_shutdown(rt);
    }
    pthread_mutex_unlock(&g_mu);
}
