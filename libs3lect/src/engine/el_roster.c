/* SPDX-License-Identifier: Apache-2.0 */
/* el_roster.c - the engine's side of the followers' roster (roster.h: the
 * object; docs/algorithm.md "Followers that take turns"): when a follower
 * joins, visits and leaves it, and when a member reads the lock. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election.h"
#include "roster.h"
#include "s3lect.h"
#include "util.h"

/* A follower joins within a fifth of a frequent interval of its first failed
 * peer check: it should have its turn before the next release (a node
 * restarted seconds before it), and the checks of many followers fail at
 * their leaders' renewals, which are spread over the renewal interval. */
#define RO_JOIN_WITHIN_DIV 5

/* ---- the engine's side --------------------------------------------------- */

/* The members' read period: the frequent interval stretched so that a
 * member's reads and its roster visits (a GET and a PUT every
 * RO_REFRESH_READS intervals) cost what the reads alone cost without it. */
static int64_t ro_every(const el_engine *e)
{
    return e->p.frequent * RO_REFRESH_READS / (RO_REFRESH_READS - 2);
}

static int64_t ro_refresh(const el_engine *e)
{
    return e->p.frequent * RO_REFRESH_READS;
}

static int ro_usable(const el_engine *e)
{
    return e->ro.key && !e->ro.off && e->p.frequent >= 10;
}

/* Gives the roster up for this elector, saying why once (an ERROR event
 * with code: a permission, a foreign object or a store the operator may fix). */
static void ro_give_up(el_engine *e, int code, const char *why)
{
    e->ro.off = 1;
    e->ro.due = 0;
    e->ro.member = 0;
    char msg[512];
    snprintf(msg, sizeof msg,
             "followers' roster %s %s: this follower reads the store at random moments "
             "instead of taking turns (a release may be seen later; safety is unchanged; "
             "docs/peer.md \"Followers that take turns\")",
             e->ro.key, why);
    el_report_error(e, code, msg);
}

static void ro_visit_failed(el_engine *e, int64_t now)
{
    if (e->ro.fails < 30)
        e->ro.fails++;
    e->ro.tries = 0;
    free(e->ro.etag);
    e->ro.etag = NULL;
    int64_t d = e->p.frequent, cap = ro_refresh(e);
    for (int i = 1; i < e->ro.fails && d < cap; i++)
        d *= 2;
    e->ro.due = now + u_jitter(&e->rng, d < cap ? d : cap, 0.1);
}

void ro_want(el_engine *e, el_time now)
{
    if (!ro_usable(e) || e->ro.member || e->ro.due || e->role != EL_FOLLOWER)
        return;
    uint64_t spread = (uint64_t)(e->p.frequent / RO_JOIN_WITHIN_DIV + 1);
    e->ro.due = now.mono + 1 + (int64_t)(u_rng_next(&e->rng) % spread);
}

void ro_peer_ok(el_engine *e, el_time now)
{
    if (!ro_usable(e) || !e->ro.member || e->ro.leaving || e->ro.put)
        return;
    e->ro.leaving = 1;
    e->ro.due = now.mono + 1 + (int64_t)(u_rng_next(&e->rng) % (uint64_t)e->p.frequent);
}

void ro_leading(el_engine *e, int64_t now)
{
    if (!ro_usable(e))
        return;
    free(e->ro.body); /* a visit half-way is abandoned: its PUT was not sent */
    e->ro.body = NULL;
    e->ro.put = 0;
    e->ro.tries = 0;
    e->ro.leaving = e->ro.member;
    e->ro.due = e->ro.member ? now : 0;
}

/* Mono ms of the first time our phase comes round at least `gap` ms after now. */
static int64_t ro_turn_after(const el_engine *e, el_time now, int64_t gap)
{
    int64_t every = e->ro.every;
    int64_t w0 = now.wall + gap;
    int64_t k = (w0 - e->ro.phase + every - 1) / every;
    return now.mono + (e->ro.phase + k * every - now.wall);
}

int64_t ro_read_at(el_engine *e, el_time now, int64_t fallback)
{
    if (!ro_usable(e) || !e->ro.member || e->ro.leaving || e->role != EL_FOLLOWER ||
        now.wall - e->ro.written_wall > 3 * ro_refresh(e) || e->ro.every <= 0)
        return fallback;
    /* At a turn a read comes every interval; a read off its turn (the
     * first after a leader change, a retried peer) is followed by the next
     * turn at least a quarter of an interval later, not by one up to one
     * and a half intervals later, which would leave the others' gap open. */
    return ro_turn_after(e, now, e->ro.every / 4);
}

int ro_next(el_engine *e, el_time now, el_op *op)
{
    if (!ro_usable(e) || !e->ro.due || now.mono < e->ro.due)
        return 0;
    if (e->role == EL_LEADER ? !e->ro.leaving : e->role != EL_FOLLOWER) {
        e->ro.due = 0; /* a leader joins no roster; a stopping node visits none */
        return 0;
    }
    /* A member that no longer reads the store at the frequent interval (its
     * leader's endpoint answers again, or it leads no lock it follows that
     * way) leaves at its next visit instead of refreshing: a roster costs
     * nothing where the peers can reach each other. */
    if (!e->ro.leaving && e->ro.member && !e->ro.put && !el_peer_down_now(e, now.mono))
        e->ro.leaving = 1;
    /* Never in the way of the lock's own requests: a short timeout, and
     * only with room for it before the next one. */
    int64_t t = e->p.request_timeout;
    if (t > e->p.frequent / 4)
        t = e->p.frequent / 4;
    if (t > e->p.renew_interval / 4)
        t = e->p.renew_interval / 4;
    if (t < 1)
        t = 1;
    /* (A long poll of the leader may wait: its answer carries the latest
     * record whenever it is sent.) */
    int poll_next = e->role == EL_FOLLOWER && e->next_kind == EL_K_PEER;
    if (!poll_next && e->next_at - now.mono < 2 * t) {
        e->ro.due = e->next_at + 1;
        return 0;
    }
    e->pending = EL_K_ROSTER + 1;
    op->kind = e->ro.put ? EL_OP_PUT : EL_OP_GET;
    op->key = e->ro.key;
    op->body = e->ro.body;
    op->body_len = e->ro.body ? strlen(e->ro.body) : 0;
    op->if_match = e->ro.put ? e->ro.etag : NULL;
    op->timeout_ms = t;
    return op->kind;
}

/* Whether member m stays in the roster we write: not ours, not another
 * incarnation of our node id, not the current leader, not expired. */
static int ro_keep(const el_engine *e, el_time now, const ro_member *m)
{
    if (u_streq(m->inc, e->incarnation) || (e->id && e->id[0] && u_streq(m->id, e->id)))
        return 0;
    if (e->cur.incarnation && e->cur.incarnation[0] && u_streq(m->inc, e->cur.incarnation))
        return 0;
    int64_t life = 3 * m->every * RO_REFRESH_READS;
    return now.wall - m->at <= life && m->at - now.wall <= life;
}

/* Our phase: kept where it has room (a refresh), else the middle of the
 * widest gap between the others (a join), else anywhere (the first). */
static int64_t ro_pick(el_engine *e, const ro_list *others, int64_t every)
{
    double f[RO_MAX_MEMBERS + 1];
    for (size_t i = 0; i < others->n; i++)
        f[i] = (double)others->m[i].phase / (double)others->m[i].every;
    if (e->ro.member && e->ro.every > 0) {
        double mine = (double)e->ro.phase / (double)e->ro.every, room = 1.0;
        for (size_t i = 0; i < others->n; i++) {
            double d = mine > f[i] ? mine - f[i] : f[i] - mine;
            d = d < 1 - d ? d : 1 - d;
            room = d < room ? d : room;
        }
        if (room >= 1.0 / (4.0 * (double)(others->n + 1)))
            return (int64_t)(mine * (double)every) % every;
    }
    double frac =
        others->n ? ro_widest_gap_mid(f, others->n) : (double)(u_rng_next(&e->rng) % 1000000) / 1e6;
    return (int64_t)(frac * (double)every) % every;
}

/* The GET answered: the roster to write back, with or without our entry. */
static void ro_got(el_engine *e, el_time now, const st_result *r)
{
    ro_list read = {0}, keep = {0};
    if (r->outcome == ST_OK) {
        if (!r->etag || !r->etag[0]) {
            ro_give_up(e, S3LECT_EFATAL,
                       "was read without an etag (no conditional write possible)");
            return;
        }
        if (ro_parse(r->body ? r->body : "", r->body_len, &read) != 0) {
            ro_give_up(e, S3LECT_EINVAL, "holds something else (s3lect never overwrites it)");
            return;
        }
        u_setstr(&e->ro.etag, r->etag);
    } else if (r->outcome == ST_NOT_FOUND) {
        free(e->ro.etag);
        e->ro.etag = NULL;
    } else if (r->outcome == ST_AUTH || r->outcome == ST_FATAL) {
        ro_give_up(e, r->outcome == ST_AUTH ? S3LECT_EAUTH : S3LECT_EFATAL,
                   r->outcome == ST_AUTH ? "cannot be read (access denied)"
                                         : "cannot be read (the store refuses it)");
        return;
    } else {
        ro_visit_failed(e, now.mono);
        return;
    }
    int ours = 0;
    for (size_t i = 0; i < read.n; i++) {
        if (u_streq(read.m[i].inc, e->incarnation))
            ours = 1;
        if (ro_keep(e, now, &read.m[i])) {
            keep.m[keep.n] = read.m[i];
            read.m[i].inc = read.m[i].id = NULL;
            keep.n++;
        }
    }
    int dropped = read.n > keep.n + (size_t)ours;
    ro_list_clear(&read);
    if (e->ro.leaving && !ours && !dropped) { /* nothing to take out */
        e->ro.leaving = e->ro.member = 0;
        e->ro.due = 0;
        ro_list_clear(&keep);
        return;
    }
    if (!e->ro.leaving) {
        if (keep.n >= RO_MAX_MEMBERS) { /* full: read at random moments */
            e->ro.member = 0;
            e->ro.due = now.mono + u_jitter(&e->rng, ro_refresh(e), 0.1);
            ro_list_clear(&keep);
            return;
        }
        int64_t every = ro_every(e);
        int64_t phase = ro_pick(e, &keep, every);
        ro_member *m = &keep.m[keep.n];
        m->inc = u_strdup(e->incarnation);
        m->id = u_strdup(e->id ? e->id : "");
        m->phase = phase;
        m->every = every;
        m->at = now.wall;
        keep.n++;
        e->ro.phase = phase;
        e->ro.every = every;
    }
    free(e->ro.body);
    e->ro.body = ro_encode(&keep);
    ro_list_clear(&keep);
    if (!e->ro.body) {
        ro_visit_failed(e, now.mono);
        return;
    }
    e->ro.put = 1;
    e->ro.due = now.mono;
}

static void ro_put_done(el_engine *e, el_time now, const st_result *r)
{
    e->ro.put = 0;
    free(e->ro.body);
    e->ro.body = NULL;
    if (r->outcome == ST_OK) {
        free(e->ro.etag);
        e->ro.etag = NULL;
        e->ro.fails = e->ro.tries = 0;
        if (e->ro.leaving) {
            e->ro.leaving = e->ro.member = 0;
            e->ro.due = 0;
            return;
        }
        e->ro.member = 1;
        e->ro.written_wall = now.wall;
        e->ro.due = now.mono + u_jitter(&e->rng, ro_refresh(e), 0.1);
        /* The read scheduled before it joined (at a random moment) comes
         * at its turn instead when that is sooner: a node that joined a
         * few seconds before a release must already read at its turn. */
        int64_t turn = ro_turn_after(e, now, 1);
        if (e->role == EL_FOLLOWER && e->next_kind == EL_K_GET && turn < e->next_at)
            e->next_at = turn;
        return;
    }
    if (r->outcome == ST_PRECONDITION || r->outcome == ST_NOT_FOUND) {
        /* Another member wrote it meanwhile: read it again, a little later. */
        if (++e->ro.tries < 3) {
            uint64_t spread = (uint64_t)e->p.frequent; /* the writers spread out */
            e->ro.due = now.mono + 1 + (int64_t)(u_rng_next(&e->rng) % spread);
            return;
        }
        ro_visit_failed(e, now.mono);
        return;
    }
    if (r->outcome == ST_AUTH || r->outcome == ST_FATAL) {
        ro_give_up(e, r->outcome == ST_AUTH ? S3LECT_EAUTH : S3LECT_EFATAL,
                   r->outcome == ST_AUTH ? "cannot be written (access denied)"
                                         : "cannot be written (the store refuses it)");
        return;
    }
    ro_visit_failed(e, now.mono);
}

void ro_complete(el_engine *e, el_time now, const st_result *r)
{
    if (e->ro.put)
        ro_put_done(e, now, r);
    else
        ro_got(e, now, r);
}
