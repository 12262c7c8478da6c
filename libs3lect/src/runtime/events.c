/* SPDX-License-Identifier: Apache-2.0 */
/* events.c - the engine's events on their way to the callbacks: the
 * callback queue, the event fd and the callback threads (docs/threading.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "crypto.h"
#include "runtime.h"

/* ---- events ---- */

void rt_signal_evfd(s3lect_elector *e)
{
    if (e->evfd < 0)
        return;
    uint64_t one = 1;
    ssize_t n = write(e->evfd, &one, sizeof one);
    (void)n; /* EAGAIN means it is already readable */
}

void rt_drain_evfd(s3lect_elector *e)
{
    if (e->evfd < 0)
        return;
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

/* Hands e to a callback thread unless one has it or it is queued. Holds e->mu. */
static void make_ready_locked(rt_runtime *rt, s3lect_elector *e)
{
    pthread_mutex_lock(&rt->mu);
    if (!e->in_ready && !e->delivering) {
        e->in_ready = 1;
        e->ready_next = NULL;
        if (rt->ready_tail)
            rt->ready_tail->ready_next = e;
        else
            rt->ready_head = e;
        rt->ready_tail = e;
        pthread_cond_signal(&rt->disp_cv);
    }
    pthread_mutex_unlock(&rt->mu);
}

/* Moves the engine's events to the callback queue. Holds mu. */
void rt_flush_events(rt_runtime *rt, s3lect_elector *e, el_time now)
{
    size_t n;
    el_event *evs = el_take_events(&e->eng, &n);
    int queued = 0;
    for (size_t i = 0; i < n; i++) {
        if (evs[i].type == S3LECT_EVENT_ACQUIRED)
            e->metrics.acquired++;
        else if (evs[i].type == S3LECT_EVENT_LOST && evs[i].reason >= 0 && evs[i].reason < 8)
            e->metrics.lost[evs[i].reason]++;
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
        e->peer_version++;         /* wakes long-polling followers (they wait on state_cv) */
        peer_server_notify(e->ps); /* and the server's pending long polls and batches */
    }
    if (e->eng.cycle != e->seen_cycle) {
        e->seen_cycle = e->eng.cycle;
        e->last_cycle_wall = now.wall;
    }
    if (queued) {
        if (e->cfg->poll_mode) {
            pthread_cond_broadcast(&e->q_cv);
            rt_signal_evfd(e);
        } else if (rt) { /* NULL: a virtual clock's advance delivers them itself */
            make_ready_locked(rt, e);
        }
    }
    pthread_cond_broadcast(&e->state_cv);
}

/* A failed peer check (docs/peer.md "When the peer check fails"): counted
 * by class for the status, and reported through an ERROR event the first
 * time its class occurs, then at most once per PEER_FAIL_REPORT_MS with the
 * number left unreported in between. The follower has already fallen back
 * to S3 (the engine's on_peer, which res->peer_failure, set here, tells
 * what kind of failure it was). Takes mu. */
void rt_note_peer_failure(s3lect_elector *e, int cls, st_result *res)
{
    res->peer_failure = peer_failure_kind(cls);
    if (cls == PEER_FAIL_NONE)
        return;
    const char *why = res->message ? res->message : "the peer check failed";
    pthread_mutex_lock(&e->mu);
    snprintf(e->peer_last_fail, sizeof e->peer_last_fail, "%s", why);
    uint64_t suppressed = 0;
    int64_t window = e->peer_report_ms > 0 ? e->peer_report_ms : PEER_FAIL_REPORT_MS;
    /* An endpoint that cannot be reached is what every follower sees when a
     * leader crashes: counted here, reported by the engine only once the
     * leader is seen renewing (it is alive, so the network is in the way). */
    int quiet = cls == PEER_FAIL_CONNECT || cls == PEER_FAIL_TIMEOUT;
    if (peer_fail_note(&e->peer_fails, cls, u_mono_ms(), window, &suppressed) && !quiet) {
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

/* ---- callback threads ---- */

/* Runs one event's callback(s) on the calling thread (no lock held). */
void rt_deliver(s3lect_elector *e, el_event *ev)
{
    const s3lect_event *pub = (const s3lect_event *)ev;
    s3lect_elector *prev = rt_tls_cb;
    rt_tls_cb = e;
    if (ev->type == S3LECT_EVENT_ACQUIRED && e->cb[0].hook) {
        int rc = e->cb[0].hook(e, pub, e->cb[0].userdata);
        if (rc != 0) {
            pthread_mutex_lock(&e->mu);
            int64_t *v = realloc(e->vetoes, (e->nvetoes + 1) * sizeof *v);
            if (v) {
                e->vetoes = v;
                e->vetoes[e->nvetoes++] = ev->term;
            }
            rt_kick_locked(e);
            pthread_mutex_unlock(&e->mu);
            rt_tls_cb = prev;
            return;
        }
    }
    int t = ev->type;
    if (t > 0 && t < RT_NCALLBACKS && e->cb[t].fn)
        e->cb[t].fn(e, pub, e->cb[t].userdata);
    rt_tls_cb = prev;
}

rt_qevent *rt_pop_event(s3lect_elector *e)
{
    rt_qevent *q = e->q_head;
    if (q) {
        e->q_head = q->next;
        if (!e->q_head)
            e->q_tail = NULL;
    }
    return q;
}

int rt_deliver_queued(s3lect_elector *e)
{
    int count = 0;
    rt_qevent *q;
    while ((q = rt_pop_event(e)) != NULL) {
        pthread_mutex_unlock(&e->mu);
        rt_deliver(e, &q->ev);
        el_event_clear(&q->ev);
        free(q);
        count++;
        pthread_mutex_lock(&e->mu);
    }
    return count;
}

void *rt_callback_main(void *arg)
{
    rt_runtime *rt = arg;
    rt_tls_runtime = rt;
    pthread_mutex_lock(&rt->mu);
    for (;;) {
        int timed_out = 0;
        while (!rt->ready_head && !rt->exiting && !timed_out) {
            rt->idle_disp++;
            struct timespec ts = u_cond_deadline(u_mono_ms() + RT_EXTRA_IDLE_MS, 0);
            timed_out = pthread_cond_timedwait(&rt->disp_cv, &rt->mu, &ts) == ETIMEDOUT;
            rt->idle_disp--;
        }
        if (!rt->ready_head && (rt->exiting || rt->ndisp > rt->want_disp))
            break;
        if (!rt->ready_head)
            continue;
        s3lect_elector *e = rt->ready_head;
        rt->ready_head = e->ready_next;
        if (!rt->ready_head)
            rt->ready_tail = NULL;
        e->in_ready = 0;
        e->delivering = 1;
        rt->disp_progress = u_mono_ms();
        pthread_mutex_unlock(&rt->mu);
        /* This elector's events, in order; no other thread delivers them
         * meanwhile (delivering). */
        pthread_mutex_lock(&e->mu);
        for (;;) {
            rt_qevent *q = rt_pop_event(e);
            if (!q)
                break;
            pthread_mutex_unlock(&e->mu);
            rt_deliver(e, &q->ev);
            el_event_clear(&q->ev);
            free(q);
            pthread_mutex_lock(&rt->mu);
            rt->disp_progress = u_mono_ms();
            pthread_mutex_unlock(&rt->mu);
            pthread_mutex_lock(&e->mu);
        }
        pthread_mutex_lock(&rt->mu);
        e->delivering = 0;
        pthread_cond_broadcast(&e->q_cv); /* stop waits for the queue to drain */
        pthread_mutex_unlock(&e->mu);
    }
    rt->ndisp--;
    rt->nending++;
    pthread_mutex_unlock(&rt->mu);
    cr_thread_end(); /* callbacks may have used OpenSSL through the library */
    pthread_mutex_lock(&rt->mu);
    rt->nending--;
    pthread_cond_broadcast(&rt->exit_cv);
    pthread_mutex_unlock(&rt->mu);
    return NULL;
}
