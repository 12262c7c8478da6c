/* SPDX-License-Identifier: Apache-2.0 */
/* lifecycle.c - an elector's life in the runtime: start, stop, dispatch (poll
 * mode) and the event fd (docs/threading.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "runtime.h"

/* ---- the elector's life ---- */

int rt_in_callback(s3lect_elector *e)
{
    return rt_tls_cb == e;
}

int rt_in_store_call(void)
{
    return rt_tls_worker;
}

int rt_event_fd(s3lect_elector *e)
{
    pthread_mutex_lock(&e->mu);
    if (e->evfd < 0) {
        e->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (e->evfd >= 0 && e->q_head)
            rt_signal_evfd(e);
    }
    int fd = e->evfd;
    pthread_mutex_unlock(&e->mu);
    if (fd < 0)
        return rt_fail(e, S3LECT_EIO, "eventfd: %s", strerror(errno));
    return fd;
}

int rt_start(s3lect_elector *e)
{
    pthread_mutex_lock(&e->mu);
    if (e->started || e->stopped) {
        pthread_mutex_unlock(&e->mu);
        return rt_fail(e, S3LECT_ESTATE,
                       e->stopped ? "elector was stopped; create a new one"
                                  : "elector already started");
    }
    e->started = 1;
    e->heap_idx = NOT_IN_HEAP;
    if (e->cfg->vclock) { /* run by its clock's advances, not the runtime */
        pthread_mutex_unlock(&e->mu);
        return rt_vclock_start(e);
    }
    /* With a certificate and key the endpoint serves them; with neither
     * (zero-config) it makes its own. Peer mode turned on by
     * s3lect_enable_peer_mode without a certificate: the node long-polls as
     * a follower but cannot serve if it has a client certificate (mTLS
     * needs a certificate of its own); when it leads, its followers fall
     * back to S3. */
    int cert = e->cfg->peer_cert.data && e->cfg->peer_key.data;
    int peer = e->cfg->peer_mode && (cert || (!e->cfg->peer_cert.data && !e->cfg->peer_key.data &&
                                              !e->cfg->peer_client_cert.data));
    pthread_mutex_unlock(&e->mu);
    if (peer) {
        int prc = rt_start_peer_server(e);
        if (prc) {
            pthread_mutex_lock(&e->mu);
            e->started = 0;
            pthread_mutex_unlock(&e->mu);
            return prc;
        }
    }
    char err[300] = "";
    int64_t delay = 0;
    int rc = rt_join(e, &delay, err, sizeof err);
    if (rc) {
        pthread_mutex_lock(&e->mu);
        peer_server *ps = e->ps;
        e->ps = NULL;
        e->started = 0;
        e->done = e->stop_req; /* a stop that came in meanwhile returns */
        pthread_cond_broadcast(&e->state_cv);
        pthread_mutex_unlock(&e->mu);
        peer_server_stop(ps);
        return rt_fail(e, rc, "%s", err);
    }
    pthread_mutex_lock(&e->mu);
    e->joined = 1;
    e->start_at = u_mono_ms() + delay;
    rt_kick_locked(e);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

/* The first half of a stop: asks the loop to stop e. *own: this call owns
 * the stop and stop_finish must complete it; otherwise stop_finish waits for
 * whoever does (another thread, or nothing: never started, already stopped). */
static int stop_begin(s3lect_elector *e, int release, int *own)
{
    *own = 0;
    if (rt_in_callback(e))
        return rt_fail(e, S3LECT_EBUSY,
                       "s3lect_stop called from this elector's own callback: it would deadlock; "
                       "stop from another thread");
    if (rt_in_store_call())
        return rt_fail(e, S3LECT_EBUSY,
                       "s3lect_stop called from a custom store function (a worker thread of the "
                       "runtime): it would deadlock; stop from another thread");
    if (e->cfg->vclock) /* stopped here and now; stop_finish finds it stopped */
        return rt_vclock_stop(e, release);
    pthread_mutex_lock(&e->mu);
    if (!e->started || e->stopped) {
        e->stopped = 1;
        pthread_cond_broadcast(&e->state_cv);
    } else if (!e->joining) {
        e->joining = 1;
        e->stop_req = 1;
        e->stop_release = release && e->cfg->release_on_stop;
        rt_kick_locked(e);
        *own = 1;
    }
    pthread_mutex_unlock(&e->mu);
    return 0;
}

static void stop_finish(s3lect_elector *e, int own)
{
    pthread_mutex_lock(&e->mu);
    if (!own) { /* another thread is stopping it: wait for that */
        while (!e->stopped)
            pthread_cond_wait(&e->state_cv, &e->mu);
        pthread_mutex_unlock(&e->mu);
        return;
    }
    while (!e->done)
        pthread_cond_wait(&e->state_cv, &e->mu);
    /* Pending events are delivered before stop returns (poll mode: they
     * stay queued for s3lect_dispatch). */
    while (!e->cfg->poll_mode && e->joined) {
        pthread_mutex_lock(&rt_shared->mu);
        int busy = e->in_ready || e->delivering;
        pthread_mutex_unlock(&rt_shared->mu);
        if (!busy && !e->q_head)
            break;
        pthread_cond_wait(&e->q_cv, &e->mu);
    }
    e->stopped = 1;
    peer_server *ps = e->ps;
    e->ps = NULL;
    int linger = ps && e->eng.stop_was_leader;
    int64_t grace =
        e->cfg->peer_timeout < RT_PEER_LINGER_MS ? e->cfg->peer_timeout : RT_PEER_LINGER_MS;
    pthread_cond_broadcast(&e->state_cv);
    pthread_cond_broadcast(&e->q_cv);
    pthread_mutex_unlock(&e->mu);
    /* After the release: long-pollers got their 404. A follower whose next
     * poll was on its way (it saw our last renewal an instant before) gets a
     * 404 too, not a refused connection: the registration stays a moment,
     * answering "not the leader" without this elector (stop does not wait
     * for it: stopping many electors takes no longer than one). */
    peer_server_stop_after(ps, linger ? grace : 0);
}

int rt_stop(s3lect_elector *e, int release)
{
    int own = 0;
    int rc = stop_begin(e, release, &own);
    if (rc)
        return rc;
    stop_finish(e, own);
    return 0;
}

int rt_stop_many(s3lect_elector *const *es, size_t n, int release)
{
    /* All asked first, then all waited for: their requests in flight end
     * and their release writes go out together, through the shared pool. */
    int *own = calloc(n ? n : 1, sizeof *own);
    int rc = 0;
    if (!own) { /* out of memory: one after the other, still every one */
        for (size_t i = 0; i < n; i++) {
            int r = es[i] ? rt_stop(es[i], release) : S3LECT_EINVAL;
            if (r && !rc)
                rc = r;
        }
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        own[i] = -1;
        int r = es[i] ? stop_begin(es[i], release, &own[i]) : S3LECT_EINVAL;
        if (r) {
            own[i] = -1; /* not stopped by this call (its error says why) */
            if (!rc)
                rc = r;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (own[i] >= 0)
            stop_finish(es[i], own[i]);
    free(own);
    return rc;
}

int rt_dispatch(s3lect_elector *e, int64_t timeout_ms)
{
    pthread_mutex_lock(&e->mu);
    if (!e->cfg->poll_mode) {
        pthread_mutex_unlock(&e->mu);
        return rt_fail(
            e, S3LECT_EINVAL,
            "s3lect_dispatch needs poll mode: set S3LECT_OPT_POLL_MODE before s3lect_new");
    }
    if (e->dispatching) {
        int self = pthread_equal(e->dispatch_tid, pthread_self());
        pthread_mutex_unlock(&e->mu);
        return rt_fail(e, S3LECT_EBUSY,
                       self ? "s3lect_dispatch called from a callback it is running"
                            : "s3lect_dispatch is already running on another thread");
    }
    /* Claimed before the wait (which drops the lock): a second thread that
     * comes in meanwhile gets EBUSY, not the same events. */
    e->dispatching = 1;
    e->dispatch_tid = pthread_self();
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : u_mono_ms() + timeout_ms;
    while (!e->q_head && !e->stopped && timeout_ms != 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&e->q_cv, &e->mu);
        } else {
            struct timespec ts = u_cond_deadline(deadline, 0);
            if (pthread_cond_timedwait(&e->q_cv, &e->mu, &ts) == ETIMEDOUT)
                break;
        }
    }
    int count = rt_deliver_queued(e);
    rt_drain_evfd(e); /* the queue is empty and we hold mu: nothing can be pending */
    e->dispatching = 0;
    pthread_mutex_unlock(&e->mu);
    return count;
}

void rt_free_queue(s3lect_elector *e)
{
    rt_qevent *q;
    while ((q = rt_pop_event(e)) != NULL) {
        el_event_clear(&q->ev);
        free(q);
    }
}
