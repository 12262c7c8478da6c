/* SPDX-License-Identifier: Apache-2.0 */
/* pool.c - the runtime's store endpoints: each one's keep-alive connections,
 * its health (probed, not stormed, while down) and its send rate after a
 * recovery (loop thread; docs/threading.md "Outages"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

static CURL *easy_get(rt_runtime *rt)
{
    return rt->neasy ? rt->easy[--rt->neasy] : curl_easy_init();
}

void rt_easy_put(rt_runtime *rt, CURL *h)
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

rt_pool *rt_pool_of(rt_runtime *rt, const char *name)
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
void rt_pool_note(rt_runtime *rt, rt_pool *p, s3lect_elector *e, CURLcode cc, int64_t now)
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
            int64_t freq = 0;
            s3lect_elector **w = malloc(rt->nheap * sizeof *w + 1);
            for (size_t i = 0; w && i < rt->nheap; i++)
                if (rt->heap[i]->pool == p) {
                    w[n++] = rt->heap[i];
                    if (rt->heap[i]->cfg->frequent_interval > freq)
                        freq = rt->heap[i]->cfg->frequent_interval;
                }
            /* A cap from the steady rate alone paces a herd whose steady
             * state reads nothing (peer mode: 0 GET/s) at the floor: 3,300
             * followers a process, each needing one read after its leader
             * stepped down, took 31 s at 100/s (issue 38 item 7). So the
             * cap also lets every elector waiting here read within
             * RT_RAMP_DRAIN_POLLS of their frequent intervals: still
             * spread, never a burst, and over within seconds. */
            if (freq > 0) {
                double drain = (double)n * 1000.0 / (double)(RT_RAMP_DRAIN_POLLS * freq);
                if (drain > RT_RAMP_MAX_RATE)
                    drain = RT_RAMP_MAX_RATE;
                if (drain > p->rate)
                    p->rate = drain;
            }
            for (size_t i = 0; i < n; i++) {
                w[i]->store_back = 1;
                rt_heap_schedule(rt, w[i], now);
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
int rt_may_probe(rt_runtime *rt, rt_pool *p, s3lect_elector *e, int64_t now)
{
    if (p->probe || p->inflight >= rt->max_conns)
        return 0;
    return now >= p->probe_at || (e->prio && now - p->probe_sent >= RT_LEADER_PROBE_GAP_MS);
}

/* While p is up: may e's request be sent now? A free connection, and after
 * a recovery a token (leaders need none). */
int rt_may_send(rt_runtime *rt, rt_pool *p, s3lect_elector *e, int64_t now)
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
int64_t rt_pool_wake(rt_runtime *rt, rt_pool *p)
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
void rt_not_sent(rt_runtime *rt, rt_pool *p, s3lect_elector *e, st_result *res, int64_t now)
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
                   e->op.kind == EL_OP_PUT ? "PUT" : "GET", rt_op_key(e), p->name, p->why, p->fails,
                   p->fails == 1 ? "" : "s", when);
    (void)rt;
}

void rt_pool_enqueue(rt_pool *p, s3lect_elector *e)
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
int rt_pool_send(rt_runtime *rt, s3lect_elector *e, st_result *res)
{
    memset(res, 0, sizeof *res);
    int64_t now = u_mono_ms();
    int64_t left = e->op_sent_at + e->op.timeout_ms - now;
    if (left <= 0 && !e->prio && now < e->pool->ramp_until && e->pool->inflight < rt->max_conns) {
        /* It waited for the rate cap after an outage, not for the store:
         * that wait is this process's own pacing and no failure of the
         * store (issue 38 item 7: counted as one, it sent thousands of
         * followers into a 20-30 s read back-off, and their reads came
         * back in late bursts for a minute). Its timeout starts now. */
        e->op_sent_at = now;
        left = e->op.timeout_ms;
    }
    if (left <= 0) {
        st_result_setf(res, ST_TRANSIENT,
                       "%s %s was not sent: it waited its whole timeout (%lld ms) for one of the "
                       "%d connections to %s (max_connections); raise max_connections or run "
                       "fewer electors per process",
                       e->op.kind == EL_OP_PUT ? "PUT" : "GET", rt_op_key(e),
                       (long long)e->op.timeout_ms, rt->max_conns, e->pool->name);
        return 0;
    }
    CURL *h = easy_get(rt);
    if (!h) {
        st_result_setf(res, ST_TRANSIENT, "libcurl could not create a handle (out of memory?)");
        return 0;
    }
    int put = e->op.kind == EL_OP_PUT;
    memset(&e->begin_res, 0, sizeof e->begin_res);
    st_xfer *x = e->store->vt->begin(e->store, h, rt_op_key(e), put, e->op.body, e->op.body_len,
                                     e->op.if_match, left, &e->begin_res);
    if (!x) {
        *res = e->begin_res;
        memset(&e->begin_res, 0, sizeof e->begin_res);
        rt_easy_put(rt, h);
        return 0;
    }
    curl_easy_setopt(h, CURLOPT_PRIVATE, e);
    if (curl_multi_add_handle(rt->multi, h) != CURLM_OK) {
        *res = e->begin_res;
        memset(&e->begin_res, 0, sizeof e->begin_res);
        e->store->vt->finish(e->store, x, CURLE_FAILED_INIT, res);
        rt_easy_put(rt, h);
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

/* Sends what waits for the pool, as far as its connections, its health and
 * its rate cap allow. While the endpoint is down what waits fails at once
 * (one request may go as the probe). */
void rt_pool_pump(rt_runtime *rt, rt_pool *p)
{
    while (p->qhead) {
        s3lect_elector *e = p->qhead;
        int64_t now = u_mono_ms();
        st_result res;
        if (p->down) {
            pool_pop(p);
            if (!rt_may_probe(rt, p, e, now)) {
                rt_not_sent(rt, p, e, &res, now);
                e->io = RT_IO_NONE;
                rt_run(rt, e, &res);
                continue;
            }
        } else if (rt_may_send(rt, p, e, now)) {
            pool_pop(p);
        } else {
            break;
        }
        if (!rt_pool_send(rt, e, &res)) {
            e->io = RT_IO_NONE;
            rt_run(rt, e, &res);
        }
    }
}
