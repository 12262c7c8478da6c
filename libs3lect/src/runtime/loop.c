/* SPDX-License-Identifier: Apache-2.0 */
/* loop.c - the runtime's loop thread: it drives every elector's engine,
 * starts each operation on the multi handle, the pool or a worker, and
 * applies what other threads hand it (docs/threading.md). */
#include <stdlib.h>
#include <string.h>

#include "proc.h"
#include "runtime.h"

static el_time now_time(void)
{
    el_time t = {u_mono_ms(), u_wall_ms()};
    return t;
}

/* ---- kicks: other threads hand an elector to the loop ---- */

/* Puts e on the kick list (once) for the loop's next turn. Also how the loop
 * runs an elector again when a timer cannot be set (out of memory): it is
 * late, never lost. */
static void requeue(rt_runtime *rt, s3lect_elector *e)
{
    pthread_mutex_lock(&rt->mu);
    if (!e->kicked) {
        e->kicked = 1;
        e->kick_next = rt->kick_head;
        rt->kick_head = e;
    }
    pthread_mutex_unlock(&rt->mu);
}

void rt_kick_locked(s3lect_elector *e)
{
    if (e->cfg->vclock) { /* no loop: its next advance runs it (vclock.c) */
        rt_vclock_kick_locked(e);
        return;
    }
    rt_runtime *rt = rt_shared;
    if (!rt || !e->joined || e->done)
        return;
    requeue(rt, e);
    curl_multi_wakeup(rt->multi);
}

/* ---- the loop: operations ---- */

int rt_peer_single(rt_runtime *rt, s3lect_elector *e, st_result *res)
{
    memset(res, 0, sizeof *res);
    const el_op *op = &e->op;
    e->peer_cls = PEER_FAIL_NONE;
    if (!e->pc) {
        st_result_setf(res, ST_TRANSIENT, "peer mode has no client");
        return 0;
    }
    const char *path = cfg_peer_health_path(e->cfg);
    peer_client_set_pin(e->pc, op->peer_key);
    peer_client_set_incarnation(e->pc, op->peer_inc);
    peer_client_set_proof(e->pc, op->peer_proof);
    CURL *h = peer_client_begin(e->pc, op->peer_addr, path, op->if_match, op->peer_wait,
                                op->timeout_ms, op->peer_id, res);
    if (!h) {
        e->peer_cls = peer_client_last_failure(e->pc);
        rt_note_peer_failure(e, e->peer_cls, res);
        return 0;
    }
    curl_easy_setopt(h, CURLOPT_PRIVATE, e);
    if (curl_multi_add_handle(rt->multi, h) != CURLM_OK) {
        peer_client_finish(e->pc, CURLE_FAILED_INIT, 0, res);
        e->peer_cls = peer_client_last_failure(e->pc);
        rt_note_peer_failure(e, e->peer_cls, res);
        return 0;
    }
    e->easy = h;
    e->io = RT_IO_CURL;
    return 1;
}

/* Starts e->op. Returns 1 when it runs asynchronously, 0 when it ended at
 * once (res filled). */
static int submit(rt_runtime *rt, s3lect_elector *e, st_result *res)
{
    memset(res, 0, sizeof *res);
    const el_op *op = &e->op;
    if (op->kind == EL_OP_PEER) /* zero-config: batched with the others to that leader */
        return rt_hub_submit(rt, e) || rt_peer_single(rt, e, res);
    if (e->store->vt->begin) {
        if (!e->pool && !(e->pool = rt_pool_of(rt, e->store->vt->pool(e->store)))) {
            st_result_setf(res, ST_TRANSIENT, "out of memory");
            return 0;
        }
        rt_pool *p = e->pool;
        int64_t poll = e->cfg->infrequent_interval > e->cfg->frequent_interval
                           ? e->cfg->infrequent_interval
                           : e->cfg->frequent_interval;
        if (poll > p->max_poll)
            p->max_poll = poll;
        int64_t now = u_mono_ms();
        if (p->down) {
            if (rt_may_probe(rt, p, e, now))
                return rt_pool_send(rt, e, res);
            rt_not_sent(rt, p, e, res, now);
            return 0;
        }
        /* In order, except that leaders go first (their renewals). */
        if ((!p->qhead || e->prio) && rt_may_send(rt, p, e, now))
            return rt_pool_send(rt, e, res);
        rt_pool_enqueue(p, e);
        return 1;
    }
    /* A blocking store: a worker runs it. */
    pthread_mutex_lock(&rt->mu);
    int src = 0;
    if (rt->nworkers < rt->want_workers && (src = rt_spawn_detached(rt_worker_main, rt)) == 0)
        rt->nworkers++;
    if (rt->nworkers == 0) {
        pthread_mutex_unlock(&rt->mu);
        st_result_setf(res, ST_TRANSIENT, "cannot create a worker thread for the %s store: %s",
                       e->store->vt->name, strerror(src));
        return 0;
    }
    e->job_next = NULL;
    if (rt->job_tail)
        rt->job_tail->job_next = e;
    else
        rt->job_head = e;
    rt->job_tail = e;
    e->io = RT_IO_JOB;
    pthread_cond_signal(&rt->work_cv);
    pthread_mutex_unlock(&rt->mu);
    return 1;
}

/* Applies what other threads asked for. Holds mu; loop thread (or the
 * thread advancing a virtual clock: vclock.c). */
void rt_apply_requests(s3lect_elector *e)
{
    for (size_t i = 0; i < e->nvetoes; i++)
        el_veto(&e->eng, e->vetoes[i]);
    e->nvetoes = 0;
    if (e->params_changed) {
        el_params p = rt_params(e->cfg);
        el_set_params(&e->eng, &p);
        e->params_changed = 0;
    }
    if (e->self_changed) { /* the peer endpoint was bound: our address and key */
        if (el_set_self(&e->eng, e->cfg->server_addr, e->peer_pin) == 0)
            e->self_changed = 0;
    }
    if (e->pending_pc) { /* s3lect_enable_peer_mode: no request is in flight now */
        peer_client_free(e->pc);
        e->pc = e->pending_pc;
        e->pending_pc = NULL;
    }
    if (e->stop_req)
        el_stop(&e->eng, e->stop_release);
}

/* Counts the operation that ended (metrics). Holds mu; loop thread. */
static void count_op(s3lect_elector *e, const st_result *res)
{
    rt_metrics *m = &e->metrics;
    int64_t now = u_mono_ms();
    if (e->op.kind == EL_OP_PEER) {
        if (res->outcome == ST_OK && !res->peer_released)
            m->peer_answers++;
        else if (e->peer_cls == PEER_FAIL_NONE)
            m->peer_not_leader++;
        return;
    }
    if (e->op.kind != EL_OP_GET && e->op.kind != EL_OP_PUT)
        return;
    int op = e->op.kind == EL_OP_PUT;
    if (res->outcome >= 0 && res->outcome < 6)
        m->req[op][res->outcome]++;
    static const double bounds[RT_LAT_NBUCKETS] = RT_LAT_BOUNDS;
    double secs = (double)(now - e->op_sent_at) / 1000.0;
    if (secs < 0)
        secs = 0;
    for (int b = 0; b < RT_LAT_NBUCKETS; b++)
        if (secs <= bounds[b]) {
            m->lat_bucket[op][b]++;
            break;
        }
    m->lat_count[op]++;
    m->lat_sum[op] += secs;
    if (op && res->outcome == ST_OK)
        m->written_at = now;
}

/* Drives e's engine: completes the operation that ended (first, if any),
 * then asks for the next step until one waits (timer or I/O) or the engine
 * is done. Loop thread. */
void rt_run(rt_runtime *rt, s3lect_elector *e, st_result *first)
{
    st_result res;
    int have = 0;
    if (first) {
        res = *first;
        have = 1;
    }
    for (;;) {
        pthread_mutex_lock(&e->mu);
        if (have) {
            count_op(e, &res);
            if (res.warning) /* the store limits how often it warns */
                el_report_error(&e->eng, S3LECT_EAUTH, res.warning);
            el_complete(&e->eng, now_time(), &res);
            st_result_clear(&res);
            /* its events are flushed with el_next's below; every way round
             * the loop sets have again */
        }
        e->io = RT_IO_NONE;
        e->begun = 1;
        if (e->store_back) {
            e->store_back = 0;
            int64_t spread = e->eng.p.frequent > 0 ? e->eng.p.frequent : 1;
            int64_t t = u_mono_ms();
            el_store_back(&e->eng, t, t + (int64_t)(u_rng_next(&rt->lrng) % (uint64_t)spread));
        }
        rt_apply_requests(e);
        el_time now = now_time();
        el_op op;
        int64_t wake;
        e->eng.hb_timeout = e->hb_timeout;
        e->eng.hb_at = e->hb_at;
        int kind = el_next(&e->eng, now, &op, &wake);
        rt_flush_events(rt, e, now);
        if (kind == EL_OP_DONE) {
            rt_heap_remove(rt, e);
            e->finished = 1;
            pthread_mutex_unlock(&e->mu);
            if (rt->nretired == rt->capretired) {
                size_t cap = rt->capretired ? 2 * rt->capretired : 64;
                s3lect_elector **a = realloc(rt->retired, cap * sizeof *a);
                if (!a) { /* retried on the next turn */
                    e->finished = 0;
                    requeue(rt, e);
                    return;
                }
                rt->retired = a;
                rt->capretired = cap;
            }
            rt->retired[rt->nretired++] = e;
            return;
        }
        if (kind == EL_OP_NONE) {
            pthread_mutex_unlock(&e->mu);
            if (rt_heap_schedule(rt, e, wake) != 0)
                requeue(rt, e);
            return;
        }
        rt_heap_remove(rt, e);
        e->op = op;
        e->op_sent_at = now.mono;
        /* A leader's requests (renewals, their read-backs) and every write
         * (a renewal, takeover, reclaim or release: one per election, and
         * what makes a lock led again) go before the other reads in the
         * endpoint's queue and past the cap after a recovery. */
        e->prio = el_is_leader(&e->eng, now.mono) || op.kind == EL_OP_PUT;
        pthread_mutex_unlock(&e->mu);
        if (submit(rt, e, &res))
            return;
        have = 1;
    }
}

/* A transfer on the multi handle ended. */
static void transfer_done(rt_runtime *rt, CURL *h, CURLcode cc)
{
    if (rt_hub_done(rt, h, cc))
        return;
    s3lect_elector *e = NULL;
    curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&e);
    curl_multi_remove_handle(rt->multi, h);
    if (!e)
        return;
    st_result res = {0};
    e->easy = NULL;
    if (e->op.kind == EL_OP_PEER) {
        peer_client_finish(e->pc, cc, 0, &res);
        e->peer_cls = peer_client_last_failure(e->pc);
        rt_note_peer_failure(e, e->peer_cls, &res);
        rt_run(rt, e, &res);
        return;
    }
    res = e->begin_res;
    memset(&e->begin_res, 0, sizeof e->begin_res);
    e->store->vt->finish(e->store, e->xfer, cc, &res);
    e->xfer = NULL;
    rt_easy_put(rt, h);
    rt_pool *p = e->pool;
    p->inflight--;
    rt_pool_note(rt, p, e, cc, u_mono_ms());
    rt_run(rt, e, &res);
    rt_pool_pump(rt, p);
}

/* e was kicked: a worker finished its job, or another thread asked for
 * something (stop, veto, new parameters, a new peer client, its start). */
static void on_kick(rt_runtime *rt, s3lect_elector *e)
{
    if (e->finished)
        return;
    pthread_mutex_lock(&e->mu);
    if (e->job_done) {
        st_result res = e->job_res;
        memset(&e->job_res, 0, sizeof e->job_res);
        e->job_done = 0;
        pthread_mutex_unlock(&e->mu);
        rt_run(rt, e, &res);
        return;
    }
    int stop = e->stop_req;
    int64_t start_at = e->start_at;
    pthread_mutex_unlock(&e->mu);
    if (e->io == RT_IO_NONE) {
        if (!e->begun && !stop && start_at > u_mono_ms()) {
            rt_heap_schedule(rt, e, start_at); /* a spread first step */
            return;
        }
        rt_run(rt, e, NULL);
        return;
    }
    if (stop && e->io == RT_IO_QUEUED) {
        /* A stop does not wait for the queue (after a recovery it can be
         * long): the request was not sent, and the release goes first. */
        rt_pool *p = e->pool;
        s3lect_elector **pp = &p->qhead, *prev = NULL;
        while (*pp && *pp != e) {
            prev = *pp;
            pp = &(*pp)->pool_next;
        }
        if (*pp) {
            *pp = e->pool_next;
            if (p->qtail == e)
                p->qtail = prev;
            if (p->qprio == e)
                p->qprio = prev;
            e->pool_next = NULL;
            st_result res = {0};
            st_result_setf(&res, ST_TRANSIENT, "%s %s was not sent: the elector is stopping",
                           e->op.kind == EL_OP_PUT ? "PUT" : "GET", rt_op_key(e));
            rt_run(rt, e, &res);
        }
        return;
    }
    if (stop && e->io == RT_IO_CURL && e->op.kind == EL_OP_PEER) {
        /* A stop ends a follower's long poll at once (not a failure). */
        CURL *h = e->easy;
        curl_multi_remove_handle(rt->multi, h);
        e->easy = NULL;
        st_result res = {0};
        peer_client_finish(e->pc, CURLE_ABORTED_BY_CALLBACK, 1, &res);
        e->peer_cls = PEER_FAIL_NONE;
        rt_run(rt, e, &res);
    } else if (stop && e->io == RT_IO_HUB) /* its entry leaves the batch; the others wait on */
        rt_hub_abort(rt, e);
    /* Anything else waits for the operation in flight: el_stop and friends
     * apply between two operations. */
}

/* Electors whose engine is done leave the loop here, at the end of a turn,
 * so that nothing later in the turn touches one that stop has freed. */
static void retire(rt_runtime *rt)
{
    for (size_t i = 0; i < rt->nretired; i++) {
        s3lect_elector *e = rt->retired[i];
        pthread_mutex_lock(&e->mu);
        pthread_mutex_lock(&rt->mu);
        if (e->kicked) {
            s3lect_elector **pp = &rt->kick_head;
            while (*pp && *pp != e)
                pp = &(*pp)->kick_next;
            if (*pp)
                *pp = e->kick_next;
            e->kicked = 0;
        }
        pthread_mutex_unlock(&rt->mu);
        e->done = 1;
        pthread_cond_broadcast(&e->state_cv);
        pthread_mutex_unlock(&e->mu);
    }
    rt->nretired = 0;
}

int rt_spawn_detached(void *(*fn)(void *), void *arg)
{
    pthread_attr_t a;
    pthread_t t;
    if (pthread_attr_init(&a) != 0)
        return -1;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = u_thread_create(&t, &a, fn, arg);
    pthread_attr_destroy(&a);
    return rc;
}

/* Adds a callback thread when ready electors wait and every callback thread
 * has been busy without progress for RT_STUCK_MS, and a worker likewise.
 * Returns 1 while either is all busy (the loop then looks again soon). */
static int watch_pools(rt_runtime *rt)
{
    pthread_mutex_lock(&rt->mu);
    /* The same for workers: a store call that blocks (a hung NFS mount, a
     * custom store ignoring its timeout) holds one worker, not every other
     * elector of a blocking store. */
    int workers_busy = rt->job_head && rt->idle_workers == 0 && rt->nworkers > 0;
    if (workers_busy && u_mono_ms() - rt->work_progress >= RT_STUCK_MS &&
        rt->nworkers < RT_MAX_WORKERS) {
        if (rt_spawn_detached(rt_worker_main, rt) == 0)
            rt->nworkers++;
        rt->work_progress = u_mono_ms();
    }
    int busy = rt->idle_disp == 0 && rt->ndisp > 0;
    if (rt->ready_head && (rt->idle_disp == 0 || rt->ndisp < rt->want_disp)) {
        int64_t now = u_mono_ms();
        if (rt->ndisp < rt->want_disp ||
            (now - rt->disp_progress >= RT_STUCK_MS && rt->ndisp < RT_MAX_CALLBACK_THREADS)) {
            if (rt_spawn_detached(rt_callback_main, rt) == 0)
                rt->ndisp++;
            rt->disp_progress = now;
        }
    }
    pthread_mutex_unlock(&rt->mu);
    return busy || workers_busy;
}

void *rt_loop_main(void *arg)
{
    rt_runtime *rt = arg;
    rt_tls_runtime = rt;
    for (;;) {
        pthread_mutex_lock(&rt->mu);
        if (rt->exiting) {
            pthread_mutex_unlock(&rt->mu);
            break;
        }
        size_t nk = 0;
        for (s3lect_elector *p = rt->kick_head; p; p = p->kick_next) {
            if (nk == rt->capkbuf) {
                size_t cap = rt->capkbuf ? 2 * rt->capkbuf : 64;
                s3lect_elector **a = realloc(rt->kbuf, cap * sizeof *a);
                if (!a)
                    break; /* the rest stay kicked for the next turn */
                rt->kbuf = a;
                rt->capkbuf = cap;
            }
            rt->kbuf[nk++] = p;
        }
        /* Take the first nk off the list. */
        s3lect_elector *rest = nk ? rt->kbuf[nk - 1]->kick_next : rt->kick_head;
        for (size_t i = 0; i < nk; i++)
            rt->kbuf[i]->kicked = 0;
        rt->kick_head = rest;
        pthread_mutex_unlock(&rt->mu);

        for (size_t i = 0; i < nk; i++)
            on_kick(rt, rt->kbuf[i]);

        int running = 0;
        curl_multi_perform(rt->multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(rt->multi, &left)) != NULL)
            if (m->msg == CURLMSG_DONE)
                transfer_done(rt, m->easy_handle, m->data.result);

        /* The electors due now; one that is due again at once waits for the
         * next turn, so no elector can hold the loop. */
        int64_t now = u_mono_ms();
        size_t budget = rt->nheap;
        while (budget-- > 0 && rt->nheap && rt->heap[0]->wake_at <= now) {
            s3lect_elector *e = rt->heap[0];
            rt_heap_remove(rt, e);
            rt_run(rt, e, NULL);
        }
        retire(rt);

        /* Queues held back by the cap after a recovery move on its tokens. */
        int64_t pool_at = INT64_MAX;
        for (rt_pool *p = rt->pools; p; p = p->next) {
            if (rt_pool_wake(rt, p) <= u_mono_ms())
                rt_pool_pump(rt, p);
            int64_t w = rt_pool_wake(rt, p);
            if (w < pool_at)
                pool_at = w;
        }
        /* Batched follower checks go out once per turn, together. */
        int64_t hub_at = rt_hub_pump(rt);
        retire(rt);

        long timeout = RT_MAX_POLL_MS;
        long ct = -1;
        curl_multi_timeout(rt->multi, &ct);
        if (ct >= 0 && ct < timeout)
            timeout = ct;
        if (rt->nheap) {
            int64_t d = rt->heap[0]->wake_at - u_mono_ms();
            if (d < timeout)
                timeout = d < 0 ? 0 : (long)d;
        }
        if (pool_at != INT64_MAX) {
            int64_t d = pool_at - u_mono_ms();
            if (d < timeout)
                timeout = d < 0 ? 0 : (long)d;
        }
        if (hub_at != INT64_MAX) {
            int64_t d = hub_at - u_mono_ms();
            if (d < timeout)
                timeout = d < 0 ? 0 : (long)d;
        }
        if (watch_pools(rt) && timeout > RT_STUCK_MS / 2)
            timeout = RT_STUCK_MS / 2;
        curl_multi_poll(rt->multi, NULL, 0, (int)timeout, NULL);
    }
    return NULL;
}
