/* SPDX-License-Identifier: Apache-2.0 */
/* peer_hub.c - followers of one process share their checks of the leaders
 * in another (docs/peer.md "Batched follower checks"). Loop thread only.
 *
 * A zero-config follower's check (an EL_OP_PEER op with a pinned key) joins
 * the group of its leader's (address, pin, path): one remote process. A group
 * sends batched long polls ("answer when any of these locks changes") through
 * at most PEER_BATCH_INFLIGHT easy handles of its own on the runtime's multi,
 * so the checks of thousands of followers travel over a few kept-alive
 * connections. Queued checks go out together at the end of the loop's turn
 * when a handle is free, or when a batch returns. The last handle's batches
 * wait at most RT_HUB_SHORT_WAIT_MS, so that a check that arrives while the
 * others are all held (a follower that just found a new leader, a start) is
 * asked within about that, not a whole long-poll wait later.
 *
 * Each entry of a returned batch completes its elector's op as a single check
 * with that answer would (a 200 with the record: an observation at the time
 * of receipt; a 404: not the leader); entries the answer does not list are
 * sent again at once. A failed batch fails every entry with the class a
 * single check would have had, so each follower reports it and reads the
 * store, as without the hub. An entry whose own deadline (its wait plus
 * peer_timeout) passes fails alone as a timeout; a stop removes its entry
 * alone. An endpoint that does not batch (HTTP 404/405 to the POST) is
 * remembered for PEER_NOBATCH_MS and its followers use single checks.
 */
#include <stdlib.h>
#include <string.h>

#include "proc.h"
#include "runtime.h"

#define HUB_IDLE_MS 60000 /* a group with nothing to do is freed after this long */

struct rt_hub_batch {
    peer_client *pc;       /* its easy handle (made on first use) */
    CURL *easy;            /* on the multi while in flight, else NULL */
    s3lect_elector **who;  /* per entry: its electors, through hub_next (NULL: none left) */
    peer_batch_lock *ents; /* one per lock; strings owned (incarnation, expect_id) */
    size_t n, live;        /* entries, and those with an elector left */
    int64_t check_at;      /* boot ms: the earliest deadline of its electors */
};

struct rt_hub_group {
    struct rt_hub_group *next;
    char *addr, *pin, *path;
    rt_hub_batch slot[PEER_BATCH_INFLIGHT];
    s3lect_elector *qhead, *qtail; /* checks waiting for the next batch */
    int64_t q_check;               /* boot ms: the earliest deadline in the queue (0: none) */
    int64_t idle_since;            /* boot ms it last had nothing to do (0: busy) */
};

struct rt_hub_nobatch {
    struct rt_hub_nobatch *next;
    char *addr;
    int64_t until;
};

/* 1 when inc is 32 hexadecimal digits (the incarnation a batch names). */
static int valid_inc(const char *inc)
{
    if (!inc || strlen(inc) != 32)
        return 0;
    for (const char *p = inc; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
            return 0;
    return 1;
}

static int no_batching(rt_runtime *rt, const char *addr, int64_t now)
{
    for (rt_hub_nobatch **pp = &rt->nobatch; *pp;) {
        rt_hub_nobatch *nb = *pp;
        if (nb->until <= now) {
            *pp = nb->next;
            free(nb->addr);
            free(nb);
            continue;
        }
        if (strcmp(nb->addr, addr) == 0)
            return 1;
        pp = &nb->next;
    }
    return 0;
}

static void note_no_batching(rt_runtime *rt, const char *addr, int64_t now)
{
    if (no_batching(rt, addr, now))
        return;
    rt_hub_nobatch *nb = calloc(1, sizeof *nb);
    if (!nb || !(nb->addr = u_strdup(addr))) {
        free(nb); /* out of memory: the next batch asks again */
        return;
    }
    nb->until = now + PEER_NOBATCH_MS;
    nb->next = rt->nobatch;
    rt->nobatch = nb;
}

static rt_hub_group *group_of(rt_runtime *rt, const char *addr, const char *pin, const char *path)
{
    for (rt_hub_group *g = rt->hub; g; g = g->next)
        if (strcmp(g->addr, addr) == 0 && strcmp(g->pin, pin) == 0 && strcmp(g->path, path) == 0)
            return g;
    rt_hub_group *g = calloc(1, sizeof *g);
    if (!g || !(g->addr = u_strdup(addr)) || !(g->pin = u_strdup(pin)) ||
        !(g->path = u_strdup(path))) {
        if (g) {
            free(g->addr);
            free(g->pin);
        }
        free(g);
        return NULL;
    }
    g->next = rt->hub;
    rt->hub = g;
    return g;
}

static void batch_clear(rt_hub_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free((char *)b->ents[i].incarnation);
        free((char *)b->ents[i].expect_id);
    }
    free(b->ents);
    free(b->who);
    b->ents = NULL;
    b->who = NULL;
    b->n = b->live = 0;
    b->check_at = 0;
}

/* The boot ms by which e's check fails as a timeout: its wait and
 * peer_timeout from when its op began (queued or sent). */
static int64_t deadline_of(const s3lect_elector *e)
{
    return e->hub_due + (e->op.timeout_ms > 0 ? e->op.timeout_ms : 3000);
}

/* Appends e to g's queue. */
static void enqueue(rt_hub_group *g, s3lect_elector *e)
{
    e->hub_next = NULL;
    if (g->qtail)
        g->qtail->hub_next = e;
    else
        g->qhead = e;
    g->qtail = e;
    if (!g->q_check || deadline_of(e) < g->q_check)
        g->q_check = deadline_of(e);
}

static const char *path_of(const s3lect_elector *e)
{
    return cfg_peer_health_path(e->cfg);
}

int rt_hub_submit(rt_runtime *rt, s3lect_elector *e)
{
    const el_op *op = &e->op;
    const char *inc = op->peer_inc; /* the leader's, from the record read */
    if (!op->peer_key || strlen(op->peer_key) != PEER_PIN_LEN || !valid_inc(inc) ||
        !op->peer_addr || !op->peer_addr[0])
        return 0; /* CA mode, or a record a batch cannot name: a single check */
    int64_t now = u_mono_ms();
    if (no_batching(rt, op->peer_addr, now))
        return 0;
    rt_hub_group *g = group_of(rt, op->peer_addr, op->peer_key, path_of(e));
    if (!g)
        return 0;
    memcpy(e->hub_inc, inc, sizeof e->hub_inc);
    e->hub_term = e->eng.cur.term;
    e->hub_due = now + (op->peer_wait > 0 ? op->peer_wait : 0); /* the op's own deadline */
    e->hub = g;
    e->hub_batch = NULL;
    enqueue(g, e);
    g->idle_since = 0;
    e->io = RT_IO_HUB;
    return 1;
}

/* Removes e from its group's queue. */
static void unqueue(rt_hub_group *g, s3lect_elector *e)
{
    s3lect_elector *prev = NULL;
    for (s3lect_elector *p = g->qhead; p; prev = p, p = p->hub_next) {
        if (p != e)
            continue;
        if (prev)
            prev->hub_next = e->hub_next;
        else
            g->qhead = e->hub_next;
        if (g->qtail == e)
            g->qtail = prev;
        e->hub_next = NULL;
        return;
    }
}

/* Takes the transfer of b off the multi (its connection closes). */
static void batch_cancel(rt_runtime *rt, rt_hub_batch *b)
{
    if (b->easy) {
        curl_multi_remove_handle(rt->multi, b->easy);
        b->easy = NULL;
    }
    batch_clear(b);
}

/* Completes e's op with res (which it takes). */
static void complete(rt_runtime *rt, s3lect_elector *e, int cls, st_result *res)
{
    e->hub = NULL;
    e->hub_batch = NULL;
    e->hub_next = NULL;
    e->io = RT_IO_NONE;
    e->peer_cls = cls;
    rt_note_peer_failure(e, cls, res);
    rt_run(rt, e, res);
}

/* Removes e from the batch it is in. An entry whose electors are all gone
 * keeps its place (an answer naming it is still one that was asked for, and
 * is ignored); a batch nobody waits for any more is cancelled. */
static void remove_entry(rt_runtime *rt, rt_hub_batch *b, s3lect_elector *e)
{
    for (size_t i = 0; i < b->n; i++) {
        s3lect_elector **pp = &b->who[i];
        while (*pp && *pp != e)
            pp = &(*pp)->hub_next;
        if (!*pp)
            continue;
        *pp = e->hub_next;
        e->hub_next = NULL;
        if (!b->who[i])
            b->live--;
        break;
    }
    if (b->live == 0)
        batch_cancel(rt, b);
}

void rt_hub_abort(rt_runtime *rt, s3lect_elector *e)
{
    rt_hub_group *g = e->hub;
    if (!g)
        return;
    if (e->hub_batch)
        remove_entry(rt, e->hub_batch, e);
    else
        unqueue(g, e);
    st_result res = {0};
    st_result_setf(&res, ST_TRANSIENT, "peer check of https://%s%s: stopped", g->addr, g->path);
    complete(rt, e, PEER_FAIL_NONE, &res);
}

/* An open-addressing table of a batch's incarnations while it is built:
 * followers of one lock in this process share its entry. */
static size_t inc_hash(const char *inc)
{
    size_t h = 1469598103934665603ULL;
    for (; *inc; inc++)
        h = (h ^ (unsigned char)*inc) * 1099511628211ULL;
    return h;
}

/* The entry of b that p can join (same incarnation, term, etag and leader),
 * *slot: where a new one goes in tab (cap a power of two). Returns the entry
 * index, -1 for a new one, -2 when it must wait for another batch (its lock
 * is in this one with other knowledge: an incarnation goes in once). */
static long find_entry(const rt_hub_batch *b, const size_t *tab, size_t cap,
                       const s3lect_elector *p, size_t *slot)
{
    size_t i = inc_hash(p->hub_inc) & (cap - 1);
    for (; tab[i]; i = (i + 1) & (cap - 1)) {
        size_t k = tab[i] - 1;
        const s3lect_elector *h = b->who[k];
        if (strcmp(b->ents[k].incarnation, p->hub_inc) != 0)
            continue;
        int same = h->hub_term == p->hub_term &&
                   strcmp(h->op.if_match ? h->op.if_match : "",
                          p->op.if_match ? p->op.if_match : "") == 0 &&
                   strcmp(b->ents[k].expect_id, p->op.peer_id ? p->op.peer_id : "") == 0;
        return same ? (long)k : -2;
    }
    *slot = i;
    return -1;
}

/* Moves as many queued checks of g as fit into b (an entry per lock).
 * Returns the number of entries, 0 when out of memory (nothing moved). */
static size_t batch_fill(rt_hub_group *g, rt_hub_batch *b, int64_t now, int64_t max_wait,
                         int64_t *wait, int64_t *timeout)
{
    size_t cap = 16;
    while (cap < 2 * PEER_BATCH_SEND_LOCKS)
        cap *= 2;
    size_t *tab = calloc(cap, sizeof *tab);
    b->who = calloc(PEER_BATCH_SEND_LOCKS, sizeof *b->who);
    b->ents = calloc(PEER_BATCH_SEND_LOCKS, sizeof *b->ents);
    if (!tab || !b->who || !b->ents) {
        free(tab);
        batch_clear(b);
        return 0;
    }
    size_t size = 64;
    int64_t check = INT64_MAX;
    *wait = max_wait;
    *timeout = 0;
    s3lect_elector *later = NULL, *later_last = NULL; /* must wait for another batch */
    while (g->qhead && b->n < PEER_BATCH_SEND_LOCKS) {
        s3lect_elector *p = g->qhead;
        size_t slot = 0;
        long k = find_entry(b, tab, cap, p, &slot);
        if (k == -1) {
            peer_batch_lock pe = {p->hub_inc, p->hub_term, p->op.if_match, NULL, p->op.peer_proof};
            if (b->n > 0 && size + peer_batch_lock_size(&pe) > PEER_BATCH_SEND_BODY)
                break;
            char *inc = u_strdup(p->hub_inc), *id = u_strdup(p->op.peer_id ? p->op.peer_id : "");
            if (!inc || !id) {
                free(inc);
                free(id);
                break; /* out of memory: the rest wait */
            }
            size += peer_batch_lock_size(&pe);
            k = (long)b->n++;
            b->ents[k] = (peer_batch_lock){inc, p->hub_term, NULL, id, NULL};
            tab[slot] = (size_t)k + 1;
            b->live++;
        }
        g->qhead = p->hub_next;
        p->hub_next = NULL;
        if (k == -2) {
            if (later_last)
                later_last->hub_next = p;
            else
                later = p;
            later_last = p;
            continue;
        }
        p->hub_next = b->who[k]; /* the entry's electors */
        b->who[k] = p;
        p->hub_batch = b;
        /* The batch waits no longer than its most pressed entry. */
        int64_t left = p->hub_due - now, t = p->op.timeout_ms > 0 ? p->op.timeout_ms : 3000;
        if (left < *wait)
            *wait = left < 0 ? 0 : left;
        if (t > *timeout)
            *timeout = t;
        if (deadline_of(p) < check)
            check = deadline_of(p);
    }
    /* Those that wait go first next time. */
    if (later) {
        later_last->hub_next = g->qhead;
        if (!g->qhead)
            g->qtail = later_last;
        g->qhead = later;
    } else if (!g->qhead) {
        g->qtail = NULL;
    }
    free(tab);
    b->check_at = check;
    return b->n;
}

/* Sends the queued checks of g in one batch on the free slot b, waiting at
 * most max_wait. */
static void batch_send(rt_runtime *rt, rt_hub_group *g, rt_hub_batch *b, int64_t now,
                       int64_t max_wait)
{
    int64_t wait = 0, timeout = 0;
    size_t n = batch_fill(g, b, now, max_wait, &wait, &timeout);
    if (n == 0)
        return;                      /* out of memory: they wait for the next turn */
    for (size_t i = 0; i < n; i++) { /* borrowed from the engine while the body is built */
        b->ents[i].etag = b->who[i]->op.if_match ? b->who[i]->op.if_match : "";
        b->ents[i].proof = b->who[i]->op.peer_proof;
    }
    size_t len = 0;
    char *body = peer_batch_request(b->ents, n, wait, &len);
    for (size_t i = 0; i < n; i++)
        b->ents[i].etag = b->ents[i].proof = NULL;
    st_result res = {0};
    CURL *h = NULL;
    if (body && (b->pc || peer_client_new(NULL, &b->pc, NULL, 0) == 0)) {
        peer_client_set_pin(b->pc, g->pin);
        h = peer_client_begin_batch(b->pc, g->addr, g->path, body, len, n, wait, timeout, &res);
        body = NULL; /* the client's now */
    }
    free(body);
    st_result_clear(&res);
    if (h) {
        curl_easy_setopt(h, CURLOPT_PRIVATE, NULL);
        if (curl_multi_add_handle(rt->multi, h) == CURLM_OK) {
            b->easy = h;
            return;
        }
    }
    /* Nothing was sent (out of memory, an address the record cannot name):
     * these checks go as single ones, which report it. */
    s3lect_elector **who = b->who;
    b->who = NULL;
    batch_clear(b);
    for (size_t i = 0; i < n; i++)
        while (who[i]) {
            s3lect_elector *e = who[i];
            who[i] = e->hub_next;
            e->hub_next = NULL;
            e->hub = NULL;
            e->hub_batch = NULL;
            e->io = RT_IO_NONE;
            st_result r = {0};
            if (!rt_peer_single(rt, e, &r))
                rt_run(rt, e, &r);
        }
    free(who);
}

/* Completes e's op with what the batch said of its lock (a copy). */
static void answer_one(rt_runtime *rt, rt_hub_group *g, s3lect_elector *e, int rv, int cls,
                       const st_result *fres, const peer_batch_result *a, int yield)
{
    st_result res = {0};
    e->hub_batch = NULL;
    if (rv == PEER_BATCH_UNSUPPORTED) {
        e->hub = NULL;
        e->io = RT_IO_NONE;
        if (!rt_peer_single(rt, e, &res))
            rt_run(rt, e, &res);
    } else if (rv == PEER_BATCH_FAILED) {
        st_result_setf(&res, ST_TRANSIENT, "%s",
                       fres->message ? fres->message : "the batched peer check failed");
        res.http_status = fres->http_status;
        complete(rt, e, cls, &res);
    } else if (a->status == 200 && e->hub_due > u_mono_ms() &&
               strcmp(a->etag, e->op.if_match ? e->op.if_match : "") == 0) {
        /* What it knew, before its own wait ran out (the batch came back
         * early for other locks): as a single long poll, it waits on. */
        enqueue(g, e);
    } else if (a->status == 200) {
        if (st_result_set_body(&res, a->body, a->body_len) == 0 &&
            st_result_set_etag(&res, a->etag) == 0) {
            res.outcome = ST_OK;
            res.http_status = 200;
            complete(rt, e, PEER_FAIL_NONE, &res);
        } else {
            st_result_setf(&res, ST_TRANSIENT, "peer check of leader %s: out of memory", g->addr);
            complete(rt, e, PEER_FAIL_OTHER, &res);
        }
    } else if (a->status == 404 && a->released && !yield &&
               st_result_set_body(&res, a->body, a->body_len) == 0 &&
               st_result_set_etag(&res, a->etag) == 0) {
        /* The successor, handed the released record (docs/peer.md "One
         * successor"): as if it had read it from the store. */
        res.outcome = ST_OK;
        res.http_status = 404;
        res.peer_released = 1;
        complete(rt, e, PEER_FAIL_NONE, &res);
    } else if (a->status == 404) {
        st_result_clear(&res);
        st_result_setf(&res, ST_TRANSIENT,
                       "peer check of https://%s%s: the node there is not leading (HTTP 404)",
                       g->addr, g->path);
        res.http_status = 404;
        res.peer_yield = yield;
        complete(rt, e, PEER_FAIL_NONE, &res);
    } else {
        /* Not changed: asked again in the next batch, its deadline
         * unchanged. */
        enqueue(g, e);
    }
}

int rt_hub_done(rt_runtime *rt, CURL *h, CURLcode cc)
{
    rt_hub_group *g;
    rt_hub_batch *b = NULL;
    for (g = rt->hub; g && !b; g = b ? g : g->next)
        for (int i = 0; i < PEER_BATCH_INFLIGHT && !b; i++)
            if (g->slot[i].easy == h)
                b = &g->slot[i];
    if (!b)
        return 0; /* not a batch: an elector's own transfer */
    curl_multi_remove_handle(rt->multi, h);
    b->easy = NULL;
    size_t n = b->n;
    peer_batch_result *ans = calloc(n ? n : 1, sizeof *ans);
    st_result fres = {0};
    int rv = PEER_BATCH_FAILED, cls = PEER_FAIL_OTHER;
    if (ans) {
        rv = peer_client_finish_batch(b->pc, cc, b->ents, n, ans, &fres);
        cls = peer_client_last_failure(b->pc);
    } else {
        st_result fin = {0};
        peer_client_finish_batch(b->pc, CURLE_ABORTED_BY_CALLBACK, NULL, 0, NULL, &fin);
        st_result_clear(&fin);
        st_result_setf(&fres, ST_TRANSIENT, "peer check of leader %s: out of memory", g->addr);
    }
    /* Take the entries out of the slot first: completing an op runs its
     * engine, whose next check may join this group again. */
    s3lect_elector **who = b->who;
    b->who = NULL;
    batch_clear(b);
    if (rv == PEER_BATCH_UNSUPPORTED)
        note_no_batching(rt, g->addr, u_mono_ms());
    static const peer_batch_result none = {0};
    for (size_t i = 0; i < n; i++) {
        /* One successor (docs/peer.md): when the endpoint named this
         * process's check of a released lock, one of its followers of that
         * lock takes over at once and the others yield. */
        const peer_batch_result *a = ans ? &ans[i] : &none;
        int named = rv == PEER_BATCH_ANSWERED && a->status == 404 && !a->yield;
        while (who[i]) {
            s3lect_elector *e = who[i];
            who[i] = e->hub_next;
            e->hub_next = NULL;
            answer_one(rt, g, e, rv, cls, &fres, a, !named);
            named = 0;
        }
    }
    peer_batch_results_clear(ans, ans ? n : 0);
    free(ans);
    free(who);
    st_result_clear(&fres);
    return 1;
}

/* Fails e's check as a timeout (its deadline passed). */
static void time_out(rt_runtime *rt, rt_hub_group *g, s3lect_elector *e)
{
    st_result res = {0};
    st_result_setf(&res, ST_TRANSIENT,
                   "leader %s did not answer the batched check of this lock within %lld ms "
                   "(long-poll wait + peer_timeout): check that its --addr is an s3lect peer "
                   "endpoint that answers, or raise peer_timeout",
                   g->addr, (long long)(deadline_of(e) - e->hub_due + e->op.peer_wait));
    complete(rt, e, PEER_FAIL_TIMEOUT, &res);
}

/* Fails the queued checks of g whose deadline passed: every batch in
 * flight to that leader has been held that long. */
static void expire_queue(rt_runtime *rt, rt_hub_group *g, int64_t now)
{
    int64_t next = 0;
    s3lect_elector *late = NULL;
    for (s3lect_elector **pp = &g->qhead; *pp;) {
        s3lect_elector *e = *pp;
        if (deadline_of(e) > now) {
            if (!next || deadline_of(e) < next)
                next = deadline_of(e);
            g->qtail = e;
            pp = &e->hub_next;
            continue;
        }
        *pp = e->hub_next;
        e->hub_next = late;
        late = e;
    }
    if (!g->qhead)
        g->qtail = NULL;
    g->q_check = next;
    while (late) {
        s3lect_elector *e = late;
        late = e->hub_next;
        e->hub_next = NULL;
        time_out(rt, g, e);
    }
}

/* Fails the checks in b whose deadline passed (a timeout for each alone). */
static void expire(rt_runtime *rt, rt_hub_group *g, rt_hub_batch *b, int64_t now)
{
    int64_t next = INT64_MAX;
    for (size_t i = 0; b->easy && i < b->n; i++) {
        for (s3lect_elector *e = b->who[i], *nx; e && b->easy; e = nx) {
            nx = e->hub_next;
            if (deadline_of(e) > now) {
                if (deadline_of(e) < next)
                    next = deadline_of(e);
                continue;
            }
            remove_entry(rt, b, e); /* may cancel b (then b->n is 0) */
            time_out(rt, g, e);
        }
    }
    b->check_at = next == INT64_MAX ? 0 : next;
}

/* Sends g's queued checks as single ones (its endpoint does not batch). */
static void unbatch_queue(rt_runtime *rt, rt_hub_group *g)
{
    while (g->qhead) {
        s3lect_elector *e = g->qhead;
        g->qhead = e->hub_next;
        if (!g->qhead)
            g->qtail = NULL;
        e->hub_next = NULL;
        e->hub = NULL;
        e->io = RT_IO_NONE;
        st_result res = {0};
        if (!rt_peer_single(rt, e, &res))
            rt_run(rt, e, &res);
    }
}

int64_t rt_hub_pump(rt_runtime *rt)
{
    int64_t now = u_mono_ms(), at = INT64_MAX;
    /* No more batches to a host than libcurl lets connect to it at once:
     * one queued inside libcurl would run out its entries' deadlines. */
    pthread_mutex_lock(&rt->mu);
    int cap = rt->max_conns < PEER_BATCH_INFLIGHT ? rt->max_conns : PEER_BATCH_INFLIGHT;
    pthread_mutex_unlock(&rt->mu);
    if (cap < 1)
        cap = 1;
    for (rt_hub_group **pp = &rt->hub; *pp;) {
        rt_hub_group *g = *pp;
        int busy = 0;
        for (int i = 0; i < PEER_BATCH_INFLIGHT; i++) {
            rt_hub_batch *b = &g->slot[i];
            if (b->easy && b->check_at && b->check_at <= now)
                expire(rt, g, b, now);
        }
        if (g->qhead && no_batching(rt, g->addr, now))
            unbatch_queue(rt, g);
        if (g->qhead && g->q_check && g->q_check <= now)
            expire_queue(rt, g, now);
        /* The last slot's batches wait at most RT_HUB_SHORT_WAIT_MS: checks
         * that arrive while the others are held (long polls) go out again
         * within that, until a long one returns and takes them. */
        for (int i = 0; i < cap && g->qhead; i++)
            if (!g->slot[i].easy)
                batch_send(rt, g, &g->slot[i], now,
                           cap > 1 && i == cap - 1 ? RT_HUB_SHORT_WAIT_MS : PEER_MAX_WAIT_MS);
        for (int i = 0; i < PEER_BATCH_INFLIGHT; i++) {
            rt_hub_batch *b = &g->slot[i];
            if (b->easy) {
                busy = 1;
                if (b->check_at && b->check_at < at)
                    at = b->check_at;
            }
        }
        if (g->qhead && g->q_check && g->q_check < at)
            at = g->q_check;
        busy = busy || g->qhead;
        if (busy) {
            g->idle_since = 0;
        } else if (!g->idle_since) {
            g->idle_since = now;
        } else if (now - g->idle_since >= HUB_IDLE_MS) {
            *pp = g->next;
            for (int i = 0; i < PEER_BATCH_INFLIGHT; i++)
                peer_client_free(g->slot[i].pc);
            free(g->addr);
            free(g->pin);
            free(g->path);
            free(g);
            continue;
        }
        pp = &g->next;
    }
    return at;
}

void rt_hub_free(rt_runtime *rt)
{
    while (rt->hub) {
        rt_hub_group *g = rt->hub;
        rt->hub = g->next;
        for (int i = 0; i < PEER_BATCH_INFLIGHT; i++) {
            batch_cancel(rt, &g->slot[i]);
            peer_client_free(g->slot[i].pc);
        }
        free(g->addr);
        free(g->pin);
        free(g->path);
        free(g);
    }
    while (rt->nobatch) {
        rt_hub_nobatch *nb = rt->nobatch;
        rt->nobatch = nb->next;
        free(nb->addr);
        free(nb);
    }
}
