/* SPDX-License-Identifier: Apache-2.0 */
/* runtime.c - the process's shared runtime (docs/threading.md).
 *
 * One loop thread runs every elector's engine: a timer heap holds the next
 * wake-up of each idle elector, and one libcurl multi handle carries every S3
 * request and peer long poll, through a bounded pool of keep-alive
 * connections per store endpoint (requests beyond it wait in order and are
 * signed when they are sent). Stores that block (file locks, custom stores)
 * run on a small pool of worker threads. Callbacks run on callback threads:
 * an elector's events in order, one thread at a time per elector; more
 * threads are added while every one is held by a slow callback. A slow
 * callback therefore never delays a renewal, and never holds up another
 * elector's events for long.
 *
 * Locks: an elector's mu, then the runtime's mu (never the other way). The
 * loop thread owns the heap, the pools, the multi handle and each elector's
 * loop fields (elector.h) without a lock.
 */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "crypto.h"
#include "elector.h"
#include "proc.h"
#include "util.h"

enum { RT_IO_NONE = 0, RT_IO_QUEUED, RT_IO_CURL, RT_IO_JOB };

#define RT_MAX_CALLBACK_THREADS 64
#define RT_MAX_WORKERS 64
#define RT_STUCK_MS 200          /* callback threads all busy this long: add one */
#define RT_EXTRA_IDLE_MS 10000   /* an added callback thread exits after this idle time */
#define RT_MAX_POLL_MS 1000      /* the loop re-reads the boot clock at least this often */
#define RT_SPREAD_MS_PER_START 2 /* first steps of electors started together: spread */
#define RT_PEER_LINGER_MS 200    /* a stopped peer-mode leader answers 404 this long */
/* An endpoint that fails at the connection level is probed, not stormed
 * (docs/threading.md "Outages"). */
#define RT_PROBE_FIRST_MS 100      /* the first probe after the failure, about */
#define RT_PROBE_MAX_MS 2000       /* probes at least this often while it fails */
#define RT_LEADER_PROBE_GAP_MS 100 /* a leader's request may probe this soon after the last */
#define RT_RATE_WINDOW_MS 10000    /* the steady send rate is measured over windows this long */
#define RT_RATE_WINDOWS 3          /* averaged over this many (not the first: it has the start) */
#define RT_RAMP_FACTOR 1.5         /* after a recovery: reads capped at this x the steady rate */
#define RT_RAMP_MIN_RATE 20.0      /* sends/s allowed after a recovery, at least */
#define RT_RAMP_MIN_MS 5000        /* the cap after a recovery lasts at least this long */
#define RT_RAMP_MAX_MS 120000      /* and at most this long */

/* One store endpoint's connections: at most max_conns requests at a time.
 * Loop thread only. */
typedef struct rt_pool {
    struct rt_pool *next;
    char *name;
    int inflight;
    s3lect_elector *qhead, *qtail;
    s3lect_elector *qprio; /* the last leader in the queue: leaders wait first */

    /* Health. After a connection-level failure (refused, reset, timed out)
     * the endpoint is down: one request at a time (the probe) is sent, the
     * others fail at once without touching the network, until a probe is
     * answered. */
    int down;
    int fails;             /* failed probes in a row (1: the failure that began it) */
    int64_t probe_at;      /* boot ms from which the next probe may go */
    int64_t probe_sent;    /* boot ms the last probe went */
    s3lect_elector *probe; /* the probe in flight, or NULL */
    char why[128];         /* the last connection-level failure (libcurl's words) */
    uint64_t not_sent;     /* requests failed without a send while down */

    /* Send rate: the steady rate, and the cap for a while after a recovery,
     * so the electors that failed together do not all read at once. */
    int64_t win_at; /* start of the current rate window (0: none yet) */
    uint64_t win_n; /* sends in it */
    int win_dirty;  /* it saw an outage or a cap: not a steady window */
    double steady;  /* sends/s over the last RT_RATE_WINDOWS steady windows (0: none) */
    double wins[RT_RATE_WINDOWS];
    int nwins;
    int64_t ramp_until;  /* boot ms: until then non-leaders' sends are capped */
    double rate, tokens; /* the cap (sends/s) and its token bucket */
    int64_t tok_at;
    int64_t max_poll; /* the longest poll interval of its electors (ms) */
} rt_pool;

typedef struct rt_runtime {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* workers: a job was queued, or exit */
    pthread_cond_t disp_cv; /* callback threads: an elector is ready, or exit */
    pthread_cond_t exit_cv; /* a worker or callback thread exited */
    int refs;               /* started electors not yet freed */
    int exiting;
    int max_conns, want_workers, want_disp;

    pthread_t loop_tid;
    CURLM *multi;
    s3lect_elector *kick_head;

    s3lect_elector *job_head, *job_tail;
    int nworkers, idle_workers;
    int64_t work_progress; /* boot ms a worker last took or finished a job */

    s3lect_elector *ready_head, *ready_tail;
    int ndisp, idle_disp;
    int64_t disp_progress; /* boot ms a callback thread last started or ended a delivery */

    u_rng rng;  /* under mu */
    u_rng lrng; /* loop thread only */
    int64_t win_at;
    int win_starts;

    /* Loop thread only. */
    s3lect_elector **heap;
    size_t nheap, capheap;
    s3lect_elector **kbuf, **retired;
    size_t capkbuf, nretired, capretired;
    CURL **easy;
    size_t neasy, capeasy;
    rt_pool *pools;
} rt_runtime;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static rt_runtime *g_rt;
static _Thread_local s3lect_elector *tls_cb;  /* elector whose callback runs here */
static _Thread_local int tls_worker;          /* a worker thread (store functions) */
static _Thread_local rt_runtime *tls_runtime; /* set on every thread of a runtime */

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

/* ---- the timer heap (loop thread) ---- */

#define NOT_IN_HEAP ((size_t)-1)

static void heap_set(rt_runtime *rt, size_t i, s3lect_elector *e)
{
    rt->heap[i] = e;
    e->heap_idx = i;
}

static void heap_up(rt_runtime *rt, size_t i)
{
    s3lect_elector *e = rt->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (rt->heap[parent]->wake_at <= e->wake_at)
            break;
        heap_set(rt, i, rt->heap[parent]);
        i = parent;
    }
    heap_set(rt, i, e);
}

static void heap_down(rt_runtime *rt, size_t i)
{
    s3lect_elector *e = rt->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= rt->nheap)
            break;
        if (c + 1 < rt->nheap && rt->heap[c + 1]->wake_at < rt->heap[c]->wake_at)
            c++;
        if (rt->heap[c]->wake_at >= e->wake_at)
            break;
        heap_set(rt, i, rt->heap[c]);
        i = c;
    }
    heap_set(rt, i, e);
}

static void heap_remove(rt_runtime *rt, s3lect_elector *e)
{
    size_t i = e->heap_idx;
    if (i == NOT_IN_HEAP)
        return;
    e->heap_idx = NOT_IN_HEAP;
    s3lect_elector *last = rt->heap[--rt->nheap];
    if (i == rt->nheap)
        return;
    heap_set(rt, i, last);
    heap_up(rt, i);
    heap_down(rt, last->heap_idx);
}

/* Wakes e at boot ms `at`. Returns -1 when out of memory (e then runs again
 * on the loop's next turn: a late step, never a lost one). */
static int heap_schedule(rt_runtime *rt, s3lect_elector *e, int64_t at)
{
    e->wake_at = at;
    if (e->heap_idx != NOT_IN_HEAP) {
        heap_up(rt, e->heap_idx);
        heap_down(rt, e->heap_idx);
        return 0;
    }
    if (rt->nheap == rt->capheap) {
        size_t cap = rt->capheap ? 2 * rt->capheap : 256;
        s3lect_elector **h = realloc(rt->heap, cap * sizeof *h);
        if (!h)
            return -1;
        rt->heap = h;
        rt->capheap = cap;
    }
    heap_set(rt, rt->nheap++, e);
    heap_up(rt, e->heap_idx);
    return 0;
}

/* ---- events ---- */

static void signal_evfd(s3lect_elector *e)
{
    if (e->evfd < 0)
        return;
    uint64_t one = 1;
    ssize_t n = write(e->evfd, &one, sizeof one);
    (void)n; /* EAGAIN means it is already readable */
}

static void drain_evfd(s3lect_elector *e)
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
static void flush_events(rt_runtime *rt, s3lect_elector *e, el_time now)
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
        e->peer_version++; /* wakes long-polling followers (they wait on state_cv) */
    }
    if (e->eng.cycle != e->seen_cycle) {
        e->seen_cycle = e->eng.cycle;
        e->last_cycle_wall = now.wall;
    }
    if (queued) {
        if (e->cfg->poll_mode) {
            pthread_cond_broadcast(&e->q_cv);
            signal_evfd(e);
        } else {
            make_ready_locked(rt, e);
        }
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
    rt_runtime *rt = g_rt;
    if (!rt || !e->joined || e->done)
        return;
    requeue(rt, e);
    curl_multi_wakeup(rt->multi);
}

/* ---- the loop: operations ---- */

static CURL *easy_get(rt_runtime *rt)
{
    return rt->neasy ? rt->easy[--rt->neasy] : curl_easy_init();
}

static void easy_put(rt_runtime *rt, CURL *h)
{
    size_t keep = (size_t)rt->max_conns + 8;
    if (rt->neasy < keep && rt->neasy == rt->capeasy) {
        size_t cap = rt->capeasy ? 2 * rt->capeasy : 16;
        CURL **a = realloc(rt->easy, cap * sizeof *a);
        if (a) {
            rt->easy = a;
            rt->capeasy = cap;
        }
    }
    if (rt->neasy < keep && rt->neasy < rt->capeasy)
        rt->easy[rt->neasy++] = h;
    else
        curl_easy_cleanup(h);
}

static rt_pool *pool_of(rt_runtime *rt, const char *name)
{
    for (rt_pool *p = rt->pools; p; p = p->next)
        if (strcmp(p->name, name) == 0)
            return p;
    rt_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->name = u_strdup(name))) {
        free(p);
        return NULL;
    }
    p->next = rt->pools;
    rt->pools = p;
    return p;
}

/* ---- per-endpoint health and send rate (loop thread) ---- */

/* libcurl's failures that say the endpoint did not answer at all: nothing
 * listening, the connection reset or dropped, no answer in time. */
static int conn_failure(CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
        return 1;
    default:
        return 0;
    }
}

/* The wait before the n-th probe: RT_PROBE_FIRST_MS doubling up to
 * RT_PROBE_MAX_MS, a uniform draw from its upper half (so processes that
 * lost the endpoint together do not probe together). */
static int64_t probe_delay(rt_runtime *rt, int n)
{
    int64_t d = RT_PROBE_FIRST_MS;
    for (int i = 1; i < n && d < RT_PROBE_MAX_MS; i++)
        d *= 2;
    if (d > RT_PROBE_MAX_MS)
        d = RT_PROBE_MAX_MS;
    return d / 2 + (int64_t)(u_rng_next(&rt->lrng) % (uint64_t)(d / 2 + 1));
}

/* Counts a send, and closes the rate window when it is over: a window with
 * neither an outage nor a cap in it gives the steady rate. */
static void pool_count(rt_pool *p, int64_t now)
{
    if (p->win_at == 0) {
        p->win_at = now;
        p->win_n = 0;
        p->win_dirty = 1; /* the electors' first reads */
    } else if (now - p->win_at >= RT_RATE_WINDOW_MS) {
        if (!p->win_dirty) {
            p->wins[p->nwins++ % RT_RATE_WINDOWS] =
                (double)p->win_n * 1000.0 / (double)(now - p->win_at);
            int k = p->nwins < RT_RATE_WINDOWS ? p->nwins : RT_RATE_WINDOWS;
            double sum = 0;
            for (int i = 0; i < k; i++)
                sum += p->wins[i];
            p->steady = sum / k;
        }
        p->win_at = now;
        p->win_n = 0;
        p->win_dirty = p->down || now < p->ramp_until;
    }
    p->win_n++;
}

/* A request of p's ended with cc (e: its elector). A connection-level
 * failure takes the endpoint down (or, from a probe, puts the next probe
 * further off); an answer brings it back up and caps the send rate for a
 * while: the electors whose requests failed together would otherwise all
 * read again at once. */
static void pool_note(rt_runtime *rt, rt_pool *p, s3lect_elector *e, CURLcode cc, int64_t now)
{
    int probe = p->probe == e;
    if (probe)
        p->probe = NULL;
    if (cc == CURLE_OK) {
        if (p->down) {
            p->down = 0;
            p->fails = 0;
            int64_t ramp = 2 * p->max_poll;
            ramp = ramp < RT_RAMP_MIN_MS ? RT_RAMP_MIN_MS
                                         : (ramp > RT_RAMP_MAX_MS ? RT_RAMP_MAX_MS : ramp);
            p->ramp_until = now + ramp;
            p->rate = RT_RAMP_FACTOR * p->steady > RT_RAMP_MIN_RATE ? RT_RAMP_FACTOR * p->steady
                                                                    : RT_RAMP_MIN_RATE;
            p->tokens = 1;
            p->tok_at = now;
            p->win_dirty = 1;
            /* Followers that backed off during the outage read again within
             * their frequent interval, spread (el_store_back at their next
             * step), not up to infrequent_interval later; the cap above
             * keeps the rate down. */
            size_t n = 0;
            s3lect_elector **w = malloc(rt->nheap * sizeof *w + 1);
            for (size_t i = 0; w && i < rt->nheap; i++)
                if (rt->heap[i]->pool == p)
                    w[n++] = rt->heap[i];
            for (size_t i = 0; i < n; i++) {
                w[i]->store_back = 1;
                heap_schedule(rt, w[i], now);
            }
            free(w);
        }
        return;
    }
    if (!p->down) {
        if (!conn_failure(cc))
            return; /* TLS, protocol, ...: the endpoint answered something */
        p->down = 1;
        p->fails = 1;
        p->win_dirty = 1;
        p->probe_at = now + probe_delay(rt, 1);
    } else if (probe) {
        p->fails++;
        p->probe_at = now + probe_delay(rt, p->fails);
    } else {
        return; /* sent before it went down: says nothing new */
    }
    snprintf(p->why, sizeof p->why, "%s", curl_easy_strerror(cc));
}

/* While p is down: may e's request go as the probe? One at a time, from
 * probe_at on; a leader's request (its renewal) may go as soon as
 * RT_LEADER_PROBE_GAP_MS after the last probe, so that a leader is never
 * held past its deadline by the followers' back-off once the store is
 * back. */
static int may_probe(rt_runtime *rt, rt_pool *p, s3lect_elector *e, int64_t now)
{
    if (p->probe || p->inflight >= rt->max_conns)
        return 0;
    return now >= p->probe_at || (e->prio && now - p->probe_sent >= RT_LEADER_PROBE_GAP_MS);
}

/* While p is up: may e's request be sent now? A free connection, and after
 * a recovery a token (leaders need none). */
static int may_send(rt_runtime *rt, rt_pool *p, s3lect_elector *e, int64_t now)
{
    if (p->inflight >= rt->max_conns)
        return 0;
    int others = p->qhead && (p->qhead != e || p->qhead->pool_next);
    if (now >= p->ramp_until && p->ramp_until && others)
        p->ramp_until = now + 1000; /* the cap ends with its queue, not all at once */
    if (e->prio || now >= p->ramp_until)
        return 1;
    double burst = p->rate / 10 > 1 ? p->rate / 10 : 1;
    p->tokens += (double)(now - p->tok_at) * p->rate / 1000.0;
    if (p->tokens > burst)
        p->tokens = burst;
    p->tok_at = now;
    if (p->tokens < 1)
        return 0;
    p->tokens -= 1;
    return 1;
}

/* Boot ms at which p's queue can move again (INT64_MAX: when a request
 * ends). */
static int64_t pool_wake(rt_runtime *rt, rt_pool *p)
{
    if (!p->qhead || p->down || p->inflight >= rt->max_conns || p->tok_at == 0)
        return INT64_MAX;
    int64_t now = u_mono_ms();
    if (now >= p->ramp_until)
        return now;
    double missing = 1 - p->tokens - (double)(now - p->tok_at) * p->rate / 1000.0;
    return missing <= 0 ? now : now + (int64_t)(missing * 1000.0 / p->rate) + 1;
}

/* The answer of a request not sent because its endpoint is down. */
static void not_sent(rt_runtime *rt, rt_pool *p, s3lect_elector *e, st_result *res, int64_t now)
{
    memset(res, 0, sizeof *res);
    p->not_sent++;
    int64_t next = p->probe ? -1 : (p->probe_at > now ? p->probe_at - now : 0);
    char when[64];
    if (next < 0)
        snprintf(when, sizeof when, "a probe is in flight");
    else
        snprintf(when, sizeof when, "next probe in %lld ms", (long long)next);
    st_result_setf(res, ST_TRANSIENT,
                   "%s %s was not sent: %s is not answering (%s; %d failure%s in a row); one "
                   "request at a time probes it (%s) rather than every elector connecting",
                   e->op.kind == EL_OP_PUT ? "PUT" : "GET", e->key, p->name, p->why, p->fails,
                   p->fails == 1 ? "" : "s", when);
    (void)rt;
}

static void pool_enqueue(rt_pool *p, s3lect_elector *e)
{
    if (e->prio) { /* after the leaders already waiting, before everyone else */
        s3lect_elector **at = p->qprio ? &p->qprio->pool_next : &p->qhead;
        e->pool_next = *at;
        *at = e;
        if (!e->pool_next)
            p->qtail = e;
        p->qprio = e;
    } else {
        e->pool_next = NULL;
        if (p->qtail)
            p->qtail->pool_next = e;
        else
            p->qhead = e;
        p->qtail = e;
    }
    e->io = RT_IO_QUEUED;
}

static s3lect_elector *pool_pop(rt_pool *p)
{
    s3lect_elector *e = p->qhead;
    p->qhead = e->pool_next;
    if (!p->qhead)
        p->qtail = NULL;
    if (p->qprio == e)
        p->qprio = NULL;
    e->pool_next = NULL;
    return e;
}

/* Signs and sends e's S3 request on a connection of its pool. Returns 1 when
 * it is on its way, 0 when it ended at once (res filled). */
static int pool_send(rt_runtime *rt, s3lect_elector *e, st_result *res)
{
    memset(res, 0, sizeof *res);
    int64_t now = u_mono_ms();
    int64_t left = e->op_sent_at + e->op.timeout_ms - now;
    if (left <= 0) {
        st_result_setf(res, ST_TRANSIENT,
                       "%s %s was not sent: it waited its whole timeout (%lld ms) for one of the "
                       "%d connections to %s (max_connections); raise max_connections or run "
                       "fewer electors per process",
                       e->op.kind == EL_OP_PUT ? "PUT" : "GET", e->key, (long long)e->op.timeout_ms,
                       rt->max_conns, e->pool->name);
        return 0;
    }
    CURL *h = easy_get(rt);
    if (!h) {
        st_result_setf(res, ST_TRANSIENT, "libcurl could not create a handle (out of memory?)");
        return 0;
    }
    int put = e->op.kind == EL_OP_PUT;
    memset(&e->begin_res, 0, sizeof e->begin_res);
    st_xfer *x = e->store->vt->begin(e->store, h, e->key, put, e->op.body, e->op.body_len,
                                     e->op.if_match, left, &e->begin_res);
    if (!x) {
        *res = e->begin_res;
        memset(&e->begin_res, 0, sizeof e->begin_res);
        easy_put(rt, h);
        return 0;
    }
    curl_easy_setopt(h, CURLOPT_PRIVATE, e);
    if (curl_multi_add_handle(rt->multi, h) != CURLM_OK) {
        *res = e->begin_res;
        memset(&e->begin_res, 0, sizeof e->begin_res);
        e->store->vt->finish(e->store, x, CURLE_FAILED_INIT, res);
        easy_put(rt, h);
        return 0;
    }
    rt_pool *p = e->pool;
    p->inflight++;
    if (p->down) {
        p->probe = e;
        p->probe_sent = now;
    }
    pool_count(p, now);
    e->xfer = x;
    e->easy = h;
    e->io = RT_IO_CURL;
    return 1;
}

static void run(rt_runtime *rt, s3lect_elector *e, st_result *first);
static void *worker_main(void *arg);
static int spawn_detached(void *(*fn)(void *), void *arg);

/* Sends what waits for the pool, as far as its connections, its health and
 * its rate cap allow. While the endpoint is down what waits fails at once
 * (one request may go as the probe). */
static void pool_pump(rt_runtime *rt, rt_pool *p)
{
    while (p->qhead) {
        s3lect_elector *e = p->qhead;
        int64_t now = u_mono_ms();
        st_result res;
        if (p->down) {
            pool_pop(p);
            if (!may_probe(rt, p, e, now)) {
                not_sent(rt, p, e, &res, now);
                e->io = RT_IO_NONE;
                run(rt, e, &res);
                continue;
            }
        } else if (may_send(rt, p, e, now)) {
            pool_pop(p);
        } else {
            break;
        }
        if (!pool_send(rt, e, &res)) {
            e->io = RT_IO_NONE;
            run(rt, e, &res);
        }
    }
}

/* Starts e->op. Returns 1 when it runs asynchronously, 0 when it ended at
 * once (res filled). */
static int submit(rt_runtime *rt, s3lect_elector *e, st_result *res)
{
    memset(res, 0, sizeof *res);
    const el_op *op = &e->op;
    if (op->kind == EL_OP_PEER) {
        if (!e->pc) {
            st_result_setf(res, ST_TRANSIENT, "peer mode has no client");
            return 0;
        }
        const char *path =
            e->cfg->peer_health_path ? e->cfg->peer_health_path : "/health/leadership";
        peer_client_set_pin(e->pc, op->peer_key);
        CURL *h = peer_client_begin(e->pc, op->peer_addr, path, op->if_match, op->peer_wait,
                                    op->timeout_ms, op->peer_id, res);
        if (!h) {
            note_peer_failure(e, peer_client_last_failure(e->pc), res);
            return 0;
        }
        curl_easy_setopt(h, CURLOPT_PRIVATE, e);
        if (curl_multi_add_handle(rt->multi, h) != CURLM_OK) {
            peer_client_finish(e->pc, CURLE_FAILED_INIT, 0, res);
            return 0;
        }
        e->easy = h;
        e->io = RT_IO_CURL;
        return 1;
    }
    if (e->store->vt->begin) {
        if (!e->pool && !(e->pool = pool_of(rt, e->store->vt->pool(e->store)))) {
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
            if (may_probe(rt, p, e, now))
                return pool_send(rt, e, res);
            not_sent(rt, p, e, res, now);
            return 0;
        }
        /* In order, except that leaders go first (their renewals). */
        if ((!p->qhead || e->prio) && may_send(rt, p, e, now))
            return pool_send(rt, e, res);
        pool_enqueue(p, e);
        return 1;
    }
    /* A blocking store: a worker runs it. */
    pthread_mutex_lock(&rt->mu);
    int src = 0;
    if (rt->nworkers < rt->want_workers && (src = spawn_detached(worker_main, rt)) == 0)
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

/* Applies what other threads asked for. Holds mu; loop thread. */
static void apply_requests(s3lect_elector *e)
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
        if (res->outcome == ST_OK)
            m->peer_answers++;
        else if (e->pc && peer_client_last_failure(e->pc) == PEER_FAIL_NONE)
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
static void run(rt_runtime *rt, s3lect_elector *e, st_result *first)
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
        apply_requests(e);
        el_time now = now_time();
        el_op op;
        int64_t wake;
        e->eng.hb_timeout = e->hb_timeout;
        e->eng.hb_at = e->hb_at;
        int kind = el_next(&e->eng, now, &op, &wake);
        flush_events(rt, e, now);
        if (kind == EL_OP_DONE) {
            heap_remove(rt, e);
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
            if (heap_schedule(rt, e, wake) != 0)
                requeue(rt, e);
            return;
        }
        heap_remove(rt, e);
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
    s3lect_elector *e = NULL;
    curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&e);
    curl_multi_remove_handle(rt->multi, h);
    if (!e)
        return;
    st_result res = {0};
    e->easy = NULL;
    if (e->op.kind == EL_OP_PEER) {
        peer_client_finish(e->pc, cc, 0, &res);
        note_peer_failure(e, peer_client_last_failure(e->pc), &res);
        run(rt, e, &res);
        return;
    }
    res = e->begin_res;
    memset(&e->begin_res, 0, sizeof e->begin_res);
    e->store->vt->finish(e->store, e->xfer, cc, &res);
    e->xfer = NULL;
    easy_put(rt, h);
    rt_pool *p = e->pool;
    p->inflight--;
    pool_note(rt, p, e, cc, u_mono_ms());
    run(rt, e, &res);
    pool_pump(rt, p);
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
        run(rt, e, &res);
        return;
    }
    int stop = e->stop_req;
    int64_t start_at = e->start_at;
    pthread_mutex_unlock(&e->mu);
    if (e->io == RT_IO_NONE) {
        if (!e->begun && !stop && start_at > u_mono_ms()) {
            heap_schedule(rt, e, start_at); /* a spread first step */
            return;
        }
        run(rt, e, NULL);
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
                           e->op.kind == EL_OP_PUT ? "PUT" : "GET", e->key);
            run(rt, e, &res);
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
        run(rt, e, &res);
    }
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

static void *callback_main(void *arg);

static int spawn_detached(void *(*fn)(void *), void *arg)
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
        if (spawn_detached(worker_main, rt) == 0)
            rt->nworkers++;
        rt->work_progress = u_mono_ms();
    }
    int busy = rt->idle_disp == 0 && rt->ndisp > 0;
    if (rt->ready_head && (rt->idle_disp == 0 || rt->ndisp < rt->want_disp)) {
        int64_t now = u_mono_ms();
        if (rt->ndisp < rt->want_disp ||
            (now - rt->disp_progress >= RT_STUCK_MS && rt->ndisp < RT_MAX_CALLBACK_THREADS)) {
            if (spawn_detached(callback_main, rt) == 0)
                rt->ndisp++;
            rt->disp_progress = now;
        }
    }
    pthread_mutex_unlock(&rt->mu);
    return busy || workers_busy;
}

static void *loop_main(void *arg)
{
    rt_runtime *rt = arg;
    tls_runtime = rt;
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
            heap_remove(rt, e);
            run(rt, e, NULL);
        }
        retire(rt);

        /* Queues held back by the cap after a recovery move on its tokens. */
        int64_t pool_at = INT64_MAX;
        for (rt_pool *p = rt->pools; p; p = p->next) {
            if (pool_wake(rt, p) <= u_mono_ms())
                pool_pump(rt, p);
            int64_t w = pool_wake(rt, p);
            if (w < pool_at)
                pool_at = w;
        }
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
        if (watch_pools(rt) && timeout > RT_STUCK_MS / 2)
            timeout = RT_STUCK_MS / 2;
        curl_multi_poll(rt->multi, NULL, 0, (int)timeout, NULL);
    }
    return NULL;
}

/* ---- workers: blocking stores ---- */

static void *worker_main(void *arg)
{
    rt_runtime *rt = arg;
    tls_runtime = rt;
    tls_worker = 1;
    pthread_mutex_lock(&rt->mu);
    for (;;) {
        int timed_out = 0;
        while (!rt->job_head && !rt->exiting && !timed_out) {
            rt->idle_workers++;
            struct timespec ts = u_cond_deadline(u_mono_ms() + RT_EXTRA_IDLE_MS, 0);
            timed_out = pthread_cond_timedwait(&rt->work_cv, &rt->mu, &ts) == ETIMEDOUT;
            rt->idle_workers--;
        }
        if (!rt->job_head && (rt->exiting || rt->nworkers > rt->want_workers))
            break;
        if (!rt->job_head)
            continue;
        s3lect_elector *e = rt->job_head;
        rt->job_head = e->job_next;
        if (!rt->job_head)
            rt->job_tail = NULL;
        rt->work_progress = u_mono_ms();
        pthread_mutex_unlock(&rt->mu);
        /* e->op is the loop's, but the loop leaves it alone until the job is
         * done; the store object is used by one request at a time. */
        st_result res = {0};
        if (e->op.kind == EL_OP_GET)
            st_get(e->store, e->key, e->op.timeout_ms, &res);
        else
            st_put(e->store, e->key, e->op.body, e->op.body_len, e->op.if_match, e->op.timeout_ms,
                   &res);
        pthread_mutex_lock(&e->mu);
        e->job_res = res;
        e->job_done = 1;
        rt_kick_locked(e);
        pthread_mutex_unlock(&e->mu);
        pthread_mutex_lock(&rt->mu);
        rt->work_progress = u_mono_ms();
    }
    rt->nworkers--;
    pthread_cond_broadcast(&rt->exit_cv);
    pthread_mutex_unlock(&rt->mu);
    return NULL;
}

/* ---- callback threads ---- */

/* Runs one event's callback(s) on the calling thread (no lock held). */
static void deliver(s3lect_elector *e, el_event *ev)
{
    const s3lect_event *pub = (const s3lect_event *)ev;
    s3lect_elector *prev = tls_cb;
    tls_cb = e;
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
            tls_cb = prev;
            return;
        }
    }
    int t = ev->type;
    if (t > 0 && t < RT_NCALLBACKS && e->cb[t].fn)
        e->cb[t].fn(e, pub, e->cb[t].userdata);
    tls_cb = prev;
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

static void *callback_main(void *arg)
{
    rt_runtime *rt = arg;
    tls_runtime = rt;
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
            rt_qevent *q = pop_event(e);
            if (!q)
                break;
            pthread_mutex_unlock(&e->mu);
            deliver(e, &q->ev);
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
    pthread_cond_broadcast(&rt->exit_cv);
    pthread_mutex_unlock(&rt->mu);
    return NULL;
}

/* ---- the runtime's life ---- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_rc;

static void forget_in_child(void)
{
    /* The threads did not survive fork: a child that starts electors gets a
     * runtime of its own (the parent's memory is left as it is). */
    pthread_mutex_init(&g_mu, NULL);
    g_rt = NULL;
}

static void init_once(void)
{
    g_curl_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    pthread_atfork(NULL, NULL, forget_in_child);
}

static void runtime_free(rt_runtime *rt)
{
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
    while (rt->nworkers > 0 || rt->ndisp > 0)
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
    int rc = u_thread_create(&rt->loop_tid, NULL, loop_main, rt);
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
        rc = spawn_detached(callback_main, rt);
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
static int runtime_join(s3lect_elector *e, int64_t *delay, char *err, size_t errlen)
{
    pthread_once(&g_once, init_once);
    if (g_curl_rc != CURLE_OK) {
        snprintf(err, errlen, "libcurl failed to initialise: %s", curl_easy_strerror(g_curl_rc));
        return S3LECT_EIO;
    }
    pthread_mutex_lock(&g_mu);
    int created = 0;
    if (!g_rt) {
        if (!(g_rt = runtime_new(err, errlen))) {
            pthread_mutex_unlock(&g_mu);
            return S3LECT_EIO;
        }
        created = 1;
    }
    rt_runtime *rt = g_rt;
    int rc = runtime_fit(rt, e->cfg, err, errlen);
    if (rc != 0) {
        if (created) {
            g_rt = NULL;
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
    rt_runtime *rt = g_rt;
    if (rt && e->joined && --rt->refs == 0 && tls_runtime != rt) {
        /* The last elector left: stop the threads (not from one of them). */
        g_rt = NULL;
        runtime_shutdown(rt);
    }
    pthread_mutex_unlock(&g_mu);
}

/* ---- the elector's life ---- */

int rt_in_callback(s3lect_elector *e)
{
    return tls_cb == e;
}

int rt_in_store_call(void)
{
    return tls_worker;
}

int rt_event_fd(s3lect_elector *e)
{
    pthread_mutex_lock(&e->mu);
    if (e->evfd < 0) {
        e->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (e->evfd >= 0 && e->q_head)
            signal_evfd(e);
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
    int rc = runtime_join(e, &delay, err, sizeof err);
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

int rt_stop(s3lect_elector *e, int release)
{
    if (rt_in_callback(e))
        return rt_fail(e, S3LECT_EBUSY,
                       "s3lect_stop called from this elector's own callback: it would deadlock; "
                       "stop from another thread");
    if (rt_in_store_call())
        return rt_fail(e, S3LECT_EBUSY,
                       "s3lect_stop called from a custom store function (a worker thread of the "
                       "runtime): it would deadlock; stop from another thread");
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
    e->stop_release = release && e->cfg->release_on_stop;
    rt_kick_locked(e);
    while (!e->done)
        pthread_cond_wait(&e->state_cv, &e->mu);
    /* Pending events are delivered before stop returns (poll mode: they
     * stay queued for s3lect_dispatch). */
    while (!e->cfg->poll_mode && e->joined) {
        pthread_mutex_lock(&g_rt->mu);
        int busy = e->in_ready || e->delivering;
        pthread_mutex_unlock(&g_rt->mu);
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
     * 404 too, not a refused connection: the endpoint stays up a moment. */
    if (linger) {
        struct timespec ts = {(time_t)(grace / 1000), (long)(grace % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    peer_server_stop(ps);
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
            struct timespec ts = u_cond_deadline(deadline, 0);
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
        struct timespec ts = u_cond_deadline(deadline, 0);
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
    /* Zero-config: neither a certificate nor a key. A key made once per
     * elector; its fingerprint goes into every record this node writes. */
    int zero = !cfg->peer_cert.data && !cfg->peer_key.data;
    char pin[PEER_PIN_LEN + 1] = "";
    int rc = 0;
    pthread_mutex_lock(&e->mu);
    peer_identity *pid = e->pid;
    if (pid)
        memcpy(pin, e->peer_pin, sizeof pin);
    pthread_mutex_unlock(&e->mu);
    if (zero && !pid && (rc = peer_identity_new(&pid, pin, err, sizeof err)) == 0) {
        pthread_mutex_lock(&e->mu);
        e->pid = pid;
        memcpy(e->peer_pin, pin, sizeof pin);
        pthread_mutex_unlock(&e->mu);
    }
    /* Without server_addr the endpoint listens on the interface that routes
     * to the store (or peer_listen), on an ephemeral port unless peer_listen
     * names one, and advertises that address. */
    int advertise = !cfg->server_addr || !cfg->server_addr[0];
    char route[64] = "", listen_host[256] = "";
    if (!rc && advertise) {
        int has_listen = cfg->peer_listen && cfg->peer_listen[0];
        if (has_listen && peer_split_host(cfg->peer_listen, listen_host, sizeof listen_host) != 0)
            listen_host[0] = '\0'; /* peer_server_start says what is wrong with it */
        int wildcard = !listen_host[0] || strcmp(listen_host, "0.0.0.0") == 0 ||
                       strcmp(listen_host, "::") == 0;
        if (!has_listen || wildcard) {
            const char *origin =
                e->store && e->store->vt->pool ? e->store->vt->pool(e->store) : NULL;
            if (peer_route_host(origin, route, sizeof route, err, sizeof err) != 0)
                rc = S3LECT_EINVAL;
        }
        if (!rc && !has_listen) {
            char l[300];
            peer_join_hostport(route, 0, l, sizeof l);
            if (s3lect_config_set_str(cfg, S3LECT_OPT_PEER_LISTEN, l) != 0)
                rc = S3LECT_ENOMEM;
        }
    }
    if (!rc)
        rc = peer_server_start(cfg, zero ? pid : NULL, &src, mtls, &ps, err, sizeof err);
    s3lect_config_free(cfg);
    if (rc)
        return rt_fail(e, rc, "peer mode: %s", err[0] ? err : s3lect_strerror(rc));
    char adv[300] = "";
    if (advertise)
        peer_join_hostport(route[0] ? route : listen_host, peer_server_port(ps), adv, sizeof adv);
    pthread_mutex_lock(&e->mu);
    if (advertise && s3lect_config_set_str(e->cfg, S3LECT_OPT_SERVER_ADDR, adv) != 0) {
        pthread_mutex_unlock(&e->mu);
        peer_server_stop(ps);
        return rt_fail(e, S3LECT_ENOMEM, "peer mode: out of memory");
    }
    e->ps = ps;
    if (advertise || zero) { /* the engine takes server_addr and the pin before its next step */
        e->self_changed = 1;
        rt_kick_locked(e);
    }
    pthread_mutex_unlock(&e->mu);
    return 0;
}
