/* runtime.c - one election thread per elector feeds the engine real time and
 * real store results; a dispatcher thread (or s3lect_dispatch in poll mode)
 * delivers events to callbacks, so a slow callback never delays a renewal. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "elector.h"
#include "util.h"

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
        .max_lease = c->max_lease_timeout > 0 ? c->max_lease_timeout : 4 * c->lease_timeout,
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
    pthread_mutex_unlock(&e->mu);
    va_end(ap);
    return code;
}

static el_time now_time(void)
{
    el_time t = {u_mono_ms(), u_wall_ms()};
    return t;
}

/* Absolute CLOCK_MONOTONIC timespec (the condition variables' clock) for a
 * deadline on the boot clock (u_mono_ms). */
static struct timespec abs_ts(int64_t mono_ms)
{
    return u_cond_deadline(mono_ms, 0);
}

static void signal_evfd(s3lect_elector *e)
{
    uint64_t one = 1;
    ssize_t n = write(e->evfd, &one, sizeof one);
    (void)n; /* EAGAIN means it is already readable */
}

static void drain_evfd(s3lect_elector *e)
{
    uint64_t v;
    ssize_t n = read(e->evfd, &v, sizeof v);
    (void)n;
}

static int wanted(s3lect_elector *e, int type)
{
    if (type == S3LECT_EVENT_ACQUIRED && e->cb[0].hook)
        return 1;
    return type > 0 && type < RT_NCALLBACKS && e->cb[type].fn;
}

/* Moves the engine's events to the dispatch queue. Holds mu. */
static void flush_events(s3lect_elector *e, el_time now)
{
    size_t n;
    el_event *evs = el_take_events(&e->eng, &n);
    int queued = 0;
    for (size_t i = 0; i < n; i++) {
        rt_qevent *q = wanted(e, evs[i].type) ? malloc(sizeof *q) : NULL;
        if (!q) {
            el_event_clear(&evs[i]);
            continue;
        }
        q->next = NULL;
        q->ev = evs[i];
        if (e->q_tail)
            e->q_tail->next = q;
        else
            e->q_head = q;
        e->q_tail = q;
        queued = 1;
    }
    free(evs);
    int leading = el_is_leader(&e->eng, now.mono);
    /* Long-polling followers hear of the end of leadership only once the
     * released record is written: answered earlier, they would read the old
     * record, find it held and poll again a frequent interval later. */
    if (!el_releasing(&e->eng) &&
        (leading != e->peer_leading || !u_streq(e->peer_etag, leading ? e->eng.etag : ""))) {
        e->peer_leading = leading;
        u_setstr(&e->peer_etag, leading ? e->eng.etag : "");
        e->peer_version++; /* wakes long-polling followers (they wait on state_cv) */
    }
    if (e->eng.cycle != e->seen_cycle) {
        e->seen_cycle = e->eng.cycle;
        e->last_cycle_wall = now.wall;
    }
    if (queued) {
        pthread_cond_broadcast(&e->q_cv);
        signal_evfd(e);
    }
    pthread_cond_broadcast(&e->state_cv);
}

/* A failed peer check (docs/peer.md "When the peer check fails"): counted
 * by class for the status, and reported through an ERROR event the first
 * time its class occurs, then at most once per PEER_FAIL_REPORT_MS with the
 * number left unreported in between. The follower has already fallen back
 * to S3 (the engine's on_peer). Takes mu. */
static void note_peer_failure(s3lect_elector *e, int cls, const st_result *res)
{
    if (cls == PEER_FAIL_NONE)
        return;
    const char *why = res->message ? res->message : "the peer check failed";
    pthread_mutex_lock(&e->mu);
    snprintf(e->peer_last_fail, sizeof e->peer_last_fail, "%s", why);
    uint64_t suppressed = 0;
    int64_t window = e->peer_report_ms > 0 ? e->peer_report_ms : PEER_FAIL_REPORT_MS;
    if (peer_fail_note(&e->peer_fails, cls, u_mono_ms(), window, &suppressed)) {
        char msg[1000], more[160] = "";
        if (suppressed)
            snprintf(more, sizeof more, " [%llu more like this since the last report, not logged]",
                     (unsigned long long)suppressed);
        snprintf(msg, sizeof msg,
                 "peer mode (%s): %s; following the leader through the store meanwhile%s",
                 peer_fail_name(cls), why, more);
        el_report_error(&e->eng, peer_fail_code(cls), msg);
    }
    pthread_mutex_unlock(&e->mu);
}

static void perform(s3lect_elector *e, const el_op *op, const char *if_match, st_result *res)
{
    if (op->kind == EL_OP_PEER) {
        if (!e->pc) {
            st_result_setf(res, ST_TRANSIENT, "peer mode has no client");
            return;
        }
        const char *path =
            e->cfg->peer_health_path ? e->cfg->peer_health_path : "/health/leadership";
        peer_client_check(e->pc, op->peer_addr, path, if_match, op->peer_wait, op->timeout_ms,
                          op->peer_id, &e->abort_io, res);
        note_peer_failure(e, peer_client_last_failure(e->pc), res);
        return;
    }
    if (op->kind == EL_OP_GET)
        st_get(e->store, e->key, op->timeout_ms, res);
    else
        st_put(e->store, e->key, op->body, op->body_len, if_match, op->timeout_ms, res);
}

static void *election_main(void *arg)
{
    s3lect_elector *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        el_time now = now_time();
        for (size_t i = 0; i < e->nvetoes; i++)
            el_veto(&e->eng, e->vetoes[i]);
        e->nvetoes = 0;
        if (e->params_changed) {
            el_params p = rt_params(e->cfg);
            el_set_params(&e->eng, &p);
            e->params_changed = 0;
        }
        if (e->pending_pc) { /* s3lect_enable_peer_mode: no request is in flight now */
            peer_client_free(e->pc);
            e->pc = e->pending_pc;
            e->pending_pc = NULL;
        }
        if (e->stop_req)
            el_stop(&e->eng, e->stop_release);
        el_op op;
        int64_t wake;
        int kind = el_next(&e->eng, now, &op, &wake);
        flush_events(e, now);
        if (kind == EL_OP_DONE)
            break;
        if (kind == EL_OP_NONE) {
            if (!e->stop_req && !e->nvetoes && !e->params_changed) {
                /* A leader wakes at least every second: after a suspend the
                 * condition variable's clock (which stops while suspended)
                 * would otherwise hold the LOST event back. */
                struct timespec ts = u_cond_deadline(wake, e->eng.role == EL_LEADER ? 1000 : 0);
                pthread_cond_timedwait(&e->wake_cv, &e->mu, &ts);
            }
            continue;
        }
        /* The op points into engine memory; copy what the I/O needs. */
        char *if_match = u_strdup(op.if_match), *addr = u_strdup(op.peer_addr),
             *pid = u_strdup(op.peer_id);
        op.peer_addr = addr;
        op.peer_id = pid;
        pthread_mutex_unlock(&e->mu);
        st_result res = {0};
        perform(e, &op, if_match, &res);
        free(if_match);
        free(addr);
        free(pid);
        pthread_mutex_lock(&e->mu);
        if (res.warning) /* the store limits how often it warns */
            el_report_error(&e->eng, S3LECT_EAUTH, res.warning);
        el_complete(&e->eng, now_time(), &res);
        st_result_clear(&res);
        flush_events(e, now_time());
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* Runs one event's callback(s) on the calling thread (no lock held). */
static void deliver(s3lect_elector *e, el_event *ev)
{
    const s3lect_event *pub = (const s3lect_event *)ev;
    if (ev->type == S3LECT_EVENT_ACQUIRED && e->cb[0].hook) {
        int rc = e->cb[0].hook(e, pub, e->cb[0].userdata);
        if (rc != 0) {
            pthread_mutex_lock(&e->mu);
            int64_t *v = realloc(e->vetoes, (e->nvetoes + 1) * sizeof *v);
            if (v) {
                e->vetoes = v;
                e->vetoes[e->nvetoes++] = ev->term;
            }
            pthread_cond_signal(&e->wake_cv);
            pthread_mutex_unlock(&e->mu);
            return;
        }
    }
    int t = ev->type;
    if (t > 0 && t < RT_NCALLBACKS && e->cb[t].fn)
        e->cb[t].fn(e, pub, e->cb[t].userdata);
}

static rt_qevent *pop_event(s3lect_elector *e)
{
    rt_qevent *q = e->q_head;
    if (q) {
        e->q_head = q->next;
        if (!e->q_head)
            e->q_tail = NULL;
    }
    return q;
}

static void *dispatch_main(void *arg)
{
    s3lect_elector *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        rt_qevent *q = pop_event(e);
        if (!q) {
            drain_evfd(e);
            if (e->disp_exit)
                break;
            pthread_cond_wait(&e->q_cv, &e->mu);
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        deliver(e, &q->ev);
        el_event_clear(&q->ev);
        free(q);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

int rt_in_callback(s3lect_elector *e)
{
    pthread_t self = pthread_self();
    pthread_mutex_lock(&e->mu);
    int in = (e->have_disp && pthread_equal(self, e->disp_thread)) ||
             (e->dispatching && pthread_equal(self, e->dispatch_tid));
    pthread_mutex_unlock(&e->mu);
    return in;
}

/* Undoes a started dispatcher when start fails half-way. Holds mu (dropped
 * while joining). */
static void join_dispatcher_locked(s3lect_elector *e)
{
    if (!e->have_disp)
        return;
    e->disp_exit = 1;
    pthread_cond_broadcast(&e->q_cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->disp_thread, NULL);
    pthread_mutex_lock(&e->mu);
    e->have_disp = 0;
    e->disp_exit = 0;
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
    int rc = 0;
    if (!e->cfg->poll_mode) {
        rc = pthread_create(&e->disp_thread, NULL, dispatch_main, e);
        e->have_disp = rc == 0;
    }
    /* Without a certificate and key (peer mode turned on by
     * s3lect_enable_peer_mode) the node long-polls as a follower but cannot
     * serve; when it leads, its followers fall back to S3. */
    if (rc == 0 && e->cfg->peer_mode && e->cfg->peer_cert.data && e->cfg->peer_key.data) {
        pthread_mutex_unlock(&e->mu);
        int prc = rt_start_peer_server(e);
        pthread_mutex_lock(&e->mu);
        if (prc) {
            join_dispatcher_locked(e);
            e->started = 0;
            pthread_mutex_unlock(&e->mu);
            return prc;
        }
    }
    if (rc == 0)
        rc = pthread_create(&e->el_thread, NULL, election_main, e);
    if (rc != 0) {
        e->started = 0;
        join_dispatcher_locked(e);
        pthread_mutex_unlock(&e->mu);
        return rt_fail(e, S3LECT_EIO, "cannot create thread: %s", strerror(rc));
    }
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int rt_in_election_thread(s3lect_elector *e)
{
    pthread_mutex_lock(&e->mu);
    int in = e->started && !e->stopped && pthread_equal(pthread_self(), e->el_thread);
    pthread_mutex_unlock(&e->mu);
    return in;
}

int rt_stop(s3lect_elector *e, int release)
{
    if (rt_in_callback(e))
        return rt_fail(e, S3LECT_EBUSY,
                       "s3lect_stop called from this elector's own callback: it would deadlock; "
                       "stop from another thread");
    if (rt_in_election_thread(e))
        return rt_fail(e, S3LECT_EBUSY,
                       "s3lect_stop called from this elector's custom store callback (the "
                       "election thread): it would deadlock; stop from another thread");
    pthread_mutex_lock(&e->mu);
    if (!e->started || e->stopped) {
        e->stopped = 1;
        pthread_cond_broadcast(&e->state_cv);
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    if (e->joining) { /* another thread is stopping it: wait for that */
        while (!e->stopped)
            pthread_cond_wait(&e->state_cv, &e->mu);
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    e->joining = 1;
    e->stop_req = 1;
    __atomic_store_n(&e->abort_io, 1, __ATOMIC_RELEASE); /* read atomically by the peer client */
    e->stop_release = release && e->cfg->release_on_stop;
    pthread_cond_signal(&e->wake_cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->el_thread, NULL);
    pthread_mutex_lock(&e->mu);
    if (e->have_disp) {
        e->disp_exit = 1; /* the dispatcher drains the queue before it exits */
        pthread_cond_broadcast(&e->q_cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->disp_thread, NULL);
        pthread_mutex_lock(&e->mu);
    }
    e->stopped = 1;
    peer_server *ps = e->ps;
    e->ps = NULL;
    pthread_cond_broadcast(&e->state_cv);
    pthread_cond_broadcast(&e->q_cv);
    pthread_mutex_unlock(&e->mu);
    peer_server_stop(ps); /* after the release: long-pollers got their 404 */
    return 0;
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
            struct timespec ts = abs_ts(deadline);
            if (pthread_cond_timedwait(&e->q_cv, &e->mu, &ts) == ETIMEDOUT)
                break;
        }
    }
    int count = 0;
    rt_qevent *q;
    while ((q = pop_event(e)) != NULL) {
        pthread_mutex_unlock(&e->mu);
        deliver(e, &q->ev);
        el_event_clear(&q->ev);
        free(q);
        count++;
        pthread_mutex_lock(&e->mu);
    }
    drain_evfd(e); /* the queue is empty and we hold mu: nothing can be pending */
    e->dispatching = 0;
    pthread_mutex_unlock(&e->mu);
    return count;
}

void rt_free_queue(s3lect_elector *e)
{
    rt_qevent *q;
    while ((q = pop_event(e)) != NULL) {
        el_event_clear(&q->ev);
        free(q);
    }
}

/* ---- peer endpoint view ---- */

static int view_locked(s3lect_elector *e, peer_view *v)
{
    memset(v, 0, sizeof *v);
    v->version = e->peer_version;
    v->leading = el_is_leader(&e->eng, u_mono_ms()) && e->eng.my_body;
    v->etag = u_strdup(v->leading && e->eng.etag ? e->eng.etag : "");
    if (!v->etag)
        return S3LECT_ENOMEM;
    if (!v->leading)
        return 0;
    cJSON *o = cJSON_Parse(e->eng.my_body);
    if (!o)
        return S3LECT_ENOMEM;
    cJSON_DeleteItemFromObjectCaseSensitive(o, "etag");
    cJSON_AddStringToObject(o, "etag", v->etag);
    if (!cJSON_GetObjectItemCaseSensitive(o, "term"))
        cJSON_AddNumberToObject(o, "term", (double)e->eng.term);
    v->body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return v->body ? 0 : S3LECT_ENOMEM;
}

static int peer_view_cb(void *ctx, peer_view *v)
{
    s3lect_elector *e = ctx;
    pthread_mutex_lock(&e->mu);
    int rc = view_locked(e, v);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

static int peer_wait_cb(void *ctx, uint64_t version, int64_t deadline)
{
    s3lect_elector *e = ctx;
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    for (;;) {
        if (e->peer_version != version) {
            rc = 1;
            break;
        }
        /* Not on stop_req: until the engine has stopped leading (which bumps
         * the version) a long poll would be answered 200 at once, again and
         * again. */
        if (e->stopped) {
            rc = -1;
            break;
        }
        if (u_mono_ms() >= deadline)
            break;
        struct timespec ts = abs_ts(deadline);
        pthread_cond_timedwait(&e->state_cv, &e->mu, &ts);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

peer_source rt_peer_source(s3lect_elector *e)
{
    peer_source src = {peer_view_cb, peer_wait_cb, e};
    return src;
}

int rt_start_peer_server(s3lect_elector *e)
{
    pthread_mutex_lock(&e->mu);
    int running = e->ps != NULL;
    pthread_mutex_unlock(&e->mu);
    if (running)
        return 0;
    peer_source src = rt_peer_source(e);
    peer_server *ps = NULL;
    char err[400] = "";
    /* A copy: s3lect_enable_peer_mode may replace the CA bytes meanwhile. */
    pthread_mutex_lock(&e->mu);
    s3lect_config *cfg = s3lect_config_dup(e->cfg);
    pthread_mutex_unlock(&e->mu);
    if (!cfg)
        return rt_fail(e, S3LECT_ENOMEM, "peer mode: out of memory");
    /* mTLS when this node has a client certificate: the cluster uses client certs. */
    int mtls = cfg->peer_client_cert.data != NULL;
    int rc = peer_server_start(cfg, &src, mtls, &ps, err, sizeof err);
    s3lect_config_free(cfg);
    if (rc)
        return rt_fail(e, rc, "peer mode: %s", err[0] ? err : s3lect_strerror(rc));
    pthread_mutex_lock(&e->mu);
    e->ps = ps;
    pthread_mutex_unlock(&e->mu);
    return 0;
}
