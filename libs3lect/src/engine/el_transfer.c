/* SPDX-License-Identifier: Apache-2.0 */
/* el_transfer.c - handing the lock to a named live follower, preference and
 * maximum tenure (docs/algorithm.md "Transfer").
 *
 * The request travels in the lock record itself. The leader writes it in
 * its renewals (xferTo, xferN); a request from elsewhere (s3lect transfer,
 * a follower of higher priority) is a conditional write of the leader's own
 * record with the request added, which the leader adopts at its next
 * renewal (the 412 and the read that shows its own id, incarnation and
 * term: election.c). The target confirms it is live the same way
 * (xferAckId/Inc/Proc). Only then does the leader stop its work (the
 * TRANSFER event; s3lect run stops its command), and write a released
 * record reserved for the target (toId/toInc/toProc, toUntil), which its
 * peer endpoint hands to the target's long poll at once. Other followers
 * leave a reserved release alone for a short while; after it, it is an
 * ordinary release.
 *
 * None of it touches safety: every write stays conditional, a request or a
 * confirmation only changes a record its holder still owns (the holder
 * keeps counting its lease from its own last write), and the reservation
 * only orders who writes first after a release. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election.h"
#include "s3lect.h"
#include "util.h"

/* How often a target watching for its release (without a long poll), and a
 * leader watching for the confirmation, read the store. */
static int64_t xf_fast(const el_engine *e)
{
    int64_t p = e->p.frequent / 10;
    return p < 50 ? 50 : p > 500 ? 500 : p;
}

/* How long a reserved release is left to its target by the others. */
static int64_t xf_reserve(const el_engine *e)
{
    int64_t r = e->p.frequent / 2;
    return r < 4 * xf_fast(e) ? 4 * xf_fast(e) : r;
}

/* How long the target has to confirm: a stable follower without a long
 * poll reads at least once a lease; plus a renewal and a poll. */
static int64_t xf_ack_window(const el_engine *e)
{
    return e->p.lease + e->p.renew_interval + e->p.frequent;
}

/* How long the application has to stop its work and commit. */
static int64_t xf_commit_window(const el_engine *e)
{
    int64_t h = e->p.hold > e->p.lease ? e->p.hold : e->p.lease;
    return 2 * h;
}

void xf_free(el_xfer *x)
{
    free(x->to);
    free(x->n);
    free(x->ack_id);
    free(x->ack_inc);
    free(x->ack_proc);
    free(x->err_n);
    free(x->err);
    free(x->acked);
    free(x->body);
    free(x->proc);
    memset(x, 0, sizeof *x);
}

int el_set_process(el_engine *e, const char *token)
{
    return u_setstr(&e->xf.proc, token ? token : "") ? S3LECT_ENOMEM : 0;
}

static int hb_ok(const el_engine *e, int64_t now)
{
    return e->hb_timeout <= 0 || now - e->hb_at <= e->hb_timeout;
}

static void new_nonce(el_engine *e, char out[REC_XFER_N_LEN + 1])
{
    uint64_t a = u_rng_next(&e->rng), b = u_rng_next(&e->rng);
    snprintf(out, REC_XFER_N_LEN + 1, "%016llx%016llx", (unsigned long long)a,
             (unsigned long long)b);
}

/* Forgets the request being served (not the last refusal). */
static void clear_request(el_xfer *x)
{
    free(x->to);
    free(x->n);
    free(x->ack_id);
    free(x->ack_inc);
    free(x->ack_proc);
    x->to = x->n = x->ack_id = x->ack_inc = x->ack_proc = NULL;
    x->ack_prio = 0;
    x->active = x->announced = x->polling = x->ready = x->commit = 0;
    x->since = x->ready_at = x->poll_gap = 0;
}

/* Refuses request n: said in the next records (for s3lect transfer) and in
 * one ERROR event; the leader keeps leading. */
static void refuse(el_engine *e, const char *n, const char *why)
{
    u_setstr(&e->xf.err_n, n);
    u_setstr(&e->xf.err, why);
    char msg[700];
    snprintf(msg, sizeof msg, "transfer refused: %s; this node keeps leading", why);
    el_emit_error(e, S3LECT_EINVAL, msg);
    /* Publish it now rather than at the next renewal. */
    if (e->role == EL_LEADER && !e->pending)
        el_schedule(e, EL_K_RENEW, e->next_at);
}

static int take_request(el_engine *e, const char *to, const char *n, int64_t now)
{
    clear_request(&e->xf);
    e->xf.to = u_strdup(to);
    e->xf.n = u_strdup(n);
    e->xf.ack_id = u_strdup("");
    e->xf.ack_inc = u_strdup("");
    e->xf.ack_proc = u_strdup("");
    if (!e->xf.to || !e->xf.n || !e->xf.ack_id || !e->xf.ack_inc || !e->xf.ack_proc) {
        clear_request(&e->xf);
        return S3LECT_ENOMEM;
    }
    e->xf.active = 1;
    e->xf.since = now;
    /* Announce it at once: the followers long-polling this leader hear it
     * with the renewal; the leader then polls for the confirmation. */
    if (!e->pending)
        el_schedule(e, EL_K_RENEW, now);
    return 0;
}

static int id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 256)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)id[i] < 0x20)
            return 0;
    return 1;
}

int el_transfer(el_engine *e, const char *to, int64_t now)
{
    if (e->role != EL_LEADER || !el_is_leader(e, now) || e->stop_requested)
        return S3LECT_ENOTLEADER;
    if (e->p.xfer_off)
        return S3LECT_EUNSUPPORTED;
    const char *t = to && to[0] ? to : "*";
    if (!id_ok(t) || u_streq(t, e->id))
        return S3LECT_EINVAL;
    if (e->xf.active && e->xf.ready)
        return S3LECT_EBUSY; /* one is being handed over already */
    char n[REC_XFER_N_LEN + 1];
    new_nonce(e, n);
    return take_request(e, t, n, now);
}

int el_poke(el_engine *e, int64_t now)
{
    el_xfer *f = &e->xf;
    if (e->role != EL_LEADER || e->stop_requested || e->pending || f->active ||
        e->next_kind != EL_K_RENEW || e->next_at <= now ||
        (f->poked_at && now - f->poked_at < 1000))
        return 0;
    f->poked_at = now;
    /* A poll read (xf_poll_again): an unchanged record sends it back to
     * its renewal's schedule; a changed one of its own is adopted. */
    f->polling = 1;
    f->poll_gap = e->p.renew_interval;
    el_schedule(e, EL_K_VERIFY, now);
    return 1;
}

int el_transfer_commit(el_engine *e)
{
    if (e->role != EL_LEADER || !e->xf.active || !e->xf.ready)
        return S3LECT_EINVAL;
    e->xf.commit = 1;
    return 0;
}

void xf_fill(const el_engine *e, rec *r, int released, int64_t wall)
{
    const el_xfer *x = &e->xf;
    if (released) {
        if (x->active && x->commit) {
            r->to_id = x->ack_id;
            r->to_inc = x->ack_inc;
            r->to_proc = x->ack_proc;
            r->to_until = wall + xf_reserve(e);
        }
        return;
    }
    r->prio = e->p.priority;
    if (x->active) {
        r->xfer_to = x->to;
        r->xfer_n = x->n;
        r->xfer_ack_id = x->ack_id;
        r->xfer_ack_inc = x->ack_inc;
        r->xfer_ack_proc = x->ack_proc;
        r->xfer_ack_prio = x->ack_prio;
    } else if (x->err_n && x->err) {
        r->xfer_n = x->err_n;
        r->xfer_err = x->err;
    }
}

/* A confirmation in x of the request being served. */
static void take_ack(el_engine *e, const rec *x, int64_t now)
{
    el_xfer *f = &e->xf;
    if (f->ready || !x->xfer_ack_id[0] || !x->xfer_ack_inc[0] || u_streq(x->xfer_ack_id, e->id))
        return;
    if (!u_streq(f->to, "*") && !u_streq(f->to, x->xfer_ack_id))
        return;
    if (u_setstr(&f->ack_id, x->xfer_ack_id) || u_setstr(&f->ack_inc, x->xfer_ack_inc) ||
        u_setstr(&f->ack_proc, x->xfer_ack_proc))
        return;
    f->ack_prio = x->xfer_ack_prio;
    f->ready = 1;
    f->ready_at = now;
    f->polling = 0;
    el_emit(e, S3LECT_EVENT_TRANSFER, e->term, 0, f->ack_id, "");
}

void xf_adopt(el_engine *e, const rec *x, int64_t now)
{
    el_xfer *f = &e->xf;
    if (!x->xfer_n[0] || x->xfer_err[0])
        return; /* no request (or our own refusal, read back) */
    if (f->active && u_streq(f->n, x->xfer_n)) {
        take_ack(e, x, now);
        return;
    }
    if (f->err_n && u_streq(f->err_n, x->xfer_n))
        return; /* refused already */
    char why[400];
    /* A follower's own request by priority (not a request from elsewhere
     * that its target confirmed before this leader saw it). */
    int nomination = u_streq(x->xfer_why, "priority") && x->xfer_ack_id[0] &&
                     u_streq(x->xfer_to, x->xfer_ack_id);
    if (e->p.xfer_off) {
        snprintf(why, sizeof why,
                 "this store's reads may be stale (Route 53): transfers are not supported on it");
    } else if (f->active && f->ready) {
        snprintf(why, sizeof why, "a transfer to '%.100s' is in progress", f->ack_id);
    } else if (!id_ok(x->xfer_to) || u_streq(x->xfer_to, e->id)) {
        snprintf(why, sizeof why, "'%.100s' is this leader itself", x->xfer_to);
    } else if (nomination && x->xfer_ack_prio <= e->p.priority) {
        snprintf(why, sizeof why, "'%.100s' has priority %lld, not above this leader's %lld",
                 x->xfer_to, (long long)x->xfer_ack_prio, (long long)e->p.priority);
    } else if (nomination && now - f->led_since < e->p.lease) {
        snprintf(why, sizeof why,
                 "this leader took office less than a lease ago (at most one transfer by "
                 "priority per lease); '%.100s' may ask again",
                 x->xfer_to);
    } else {
        /* A confirmation may have come before this leader saw the request
         * (a follower read it first): take both. */
        if (take_request(e, x->xfer_to, x->xfer_n, now) == 0)
            take_ack(e, x, now);
        return;
    }
    refuse(e, x->xfer_n, why);
}

void xf_leader_end(el_engine *e, int64_t now)
{
    clear_request(&e->xf);
    e->xf.follow_since = now;
}

/* A leader whose tenure reached max_hold hands over to the best follower. */
static void max_hold_step(el_engine *e, int64_t now)
{
    el_xfer *f = &e->xf;
    if (e->p.max_hold <= 0 || e->p.xfer_off || f->active || now - f->led_since < e->p.max_hold ||
        now < f->retry_at)
        return;
    char n[REC_XFER_N_LEN + 1];
    new_nonce(e, n);
    /* Should no follower confirm, try again a lease later, not at once. */
    f->retry_at = now + xf_ack_window(e) + e->p.lease;
    take_request(e, "*", n, now);
}

/* Gives up the request being served, saying why. */
static void abandon(el_engine *e, const char *why)
{
    char *n = u_strdup(e->xf.n);
    clear_request(&e->xf);
    if (n)
        refuse(e, n, why);
    free(n);
}

int xf_leader_step(el_engine *e, el_time now)
{
    el_xfer *f = &e->xf;
    int64_t t = now.mono;
    max_hold_step(e, t);
    if (!f->active)
        return 0;
    if (f->commit)
        return 1;
    char why[400];
    if (!f->ready && t - f->since >= xf_ack_window(e)) {
        if (u_streq(f->to, "*"))
            snprintf(why, sizeof why,
                     "no live follower confirmed within %lld ms (a follower confirms when it "
                     "next reads the lock)",
                     (long long)xf_ack_window(e));
        else
            snprintf(why, sizeof why,
                     "'%.100s' did not confirm within %lld ms: not a live follower of this lock "
                     "(its --id, or it is stopped, cut off or paused)",
                     f->to, (long long)xf_ack_window(e));
        abandon(e, why);
        return 0;
    }
    if (f->ready && t - f->ready_at >= xf_commit_window(e)) {
        snprintf(why, sizeof why,
                 "the application did not stop its leader work within %lld ms "
                 "(s3lect_transfer_commit)",
                 (long long)xf_commit_window(e));
        abandon(e, why);
        return 0;
    }
    /* Announced, not yet confirmed: look for the confirmation often
     * rather than at the next renewal. */
    /* The first poll soon (a follower long-polling this leader confirms
     * within milliseconds), then doubling (xf_poll_again). */
    int64_t gap = f->poll_gap ? f->poll_gap : 50;
    if (f->announced && !f->ready && !f->polling && !e->pending && e->next_kind == EL_K_RENEW &&
        e->next_at > t + gap) {
        f->polling = 1;
        f->poll_gap = gap;
        el_schedule(e, EL_K_VERIFY, t + gap);
    }
    return 0;
}

/* The confirmation polls come quickly at first (a follower long-polling
 * this leader confirms within milliseconds), then ever more rarely: a
 * follower that reads the store confirms at its next read, which the
 * renewals catch anyway, and a target that does not exist costs a few
 * reads, not one every fast period for the whole window. */
void xf_poll_again(el_engine *e, int64_t now)
{
    el_xfer *f = &e->xf;
    f->poll_gap *= 2;
    if (e->renew_due <= now + f->poll_gap || !f->active || f->ready) {
        f->polling = 0;
        el_schedule(e, EL_K_RENEW, e->renew_due > now ? e->renew_due : now);
        return;
    }
    el_schedule(e, EL_K_VERIFY, now + f->poll_gap);
}

/* ---- follower side ------------------------------------------------------ */

static int follower_may_write(const el_engine *e, int64_t now)
{
    return !e->p.xfer_off && e->role == EL_FOLLOWER && !e->stop_requested && hb_ok(e, now) &&
           now >= e->slow_until && !e->corrupt && e->exists == 1 && !rec_released(&e->cur) &&
           e->cur.incarnation && e->cur.incarnation[0];
}

/* Builds the confirmation (or nomination: why "priority") body: the record
 * as read, with our id in the confirmation fields. */
static int build_ack(el_engine *e, const char *to, const char *n, const char *why)
{
    rec r = e->cur; /* borrowed pointers; only the xfer fields change */
    r.xfer_to = (char *)to;
    r.xfer_n = (char *)n;
    r.xfer_why = (char *)why;
    r.xfer_ack_id = e->id;
    r.xfer_ack_inc = e->incarnation;
    r.xfer_ack_proc = e->xf.proc ? e->xf.proc : (char *)"";
    r.xfer_ack_prio = e->p.priority;
    r.xfer_err = (char *)"";
    free(e->xf.body);
    e->xf.body = rec_encode(&r);
    e->xf.body_len = e->xf.body ? strlen(e->xf.body) : 0;
    return e->xf.body && u_setstr(&e->xf.acked, n) == 0 ? 0 : -1;
}

void xf_follower_observe(el_engine *e, el_time now)
{
    el_xfer *f = &e->xf;
    int64_t t = now.mono;
    if (!f->follow_since)
        f->follow_since = t;
    if (!follower_may_write(e, t))
        return;
    const rec *c = &e->cur;
    /* A request for us (or for anyone), not yet confirmed by us. */
    int for_us = c->xfer_n[0] && !c->xfer_err[0] &&
                 (u_streq(c->xfer_to, e->id) || u_streq(c->xfer_to, "*")) &&
                 !(f->acked && u_streq(f->acked, c->xfer_n));
    if (for_us && c->xfer_ack_id[0] &&
        !(u_streq(c->xfer_to, "*") && c->xfer_ack_prio < e->p.priority))
        for_us = 0; /* confirmed by another (one of higher priority, for "*") */
    if (for_us) {
        if (build_ack(e, c->xfer_to, c->xfer_n, c->xfer_why) == 0)
            el_schedule(e, EL_K_ACK, t);
        return;
    }
    /* Preference: ask a leader of lower priority for the lock, once this
     * node has followed for a lease without a break, and at most once a
     * lease: a node that restarts or flaps more often never asks. */
    int idle = !c->xfer_n[0] || c->xfer_err[0];
    if (e->p.priority > c->prio && idle && t - f->follow_since >= e->p.lease &&
        (!f->nominated_at || t - f->nominated_at >= e->p.lease)) {
        char n[REC_XFER_N_LEN + 1];
        new_nonce(e, n);
        if (build_ack(e, e->id, n, "priority") == 0) {
            f->nominated_at = t;
            el_schedule(e, EL_K_ACK, t);
        }
    }
}

int64_t xf_reserved_until(const el_engine *e, el_time now, int64_t *look)
{
    const rec *c = &e->cur;
    *look = 0;
    if (e->corrupt || !rec_released(c) || (c->to_inc && u_streq(c->to_inc, e->incarnation)))
        return 0;
    /* A node that handed the lock over competes for it again only a lease
     * later (should the target and every other node be gone). */
    int64_t gave = e->xf.gave_until > now.mono ? e->xf.gave_until : 0;
    if (!c->to_inc || !c->to_inc[0])
        return gave;
    /* The earlier of the releaser's wall-clock end (a skewed clock only
     * moves who writes first) and a reservation counted from our first
     * sight of it. */
    int64_t by_sight = e->seen_recv + xf_reserve(e);
    int64_t by_wall = c->to_until > 0 ? now.mono + (c->to_until - now.wall) : by_sight;
    int64_t until = by_sight < by_wall ? by_sight : by_wall;
    /* Look again when the reservation ends: the target leads by then. */
    *look = until > now.mono ? until : 0;
    if (gave > until)
        until = gave;
    return until > now.mono ? until : 0;
}

int xf_expecting(const el_engine *e, int64_t now)
{
    return e->role == EL_FOLLOWER && now < e->xf.expect_until && e->xf.acked;
}

void xf_follower_schedule(el_engine *e, el_time now)
{
    el_xfer *f = &e->xf;
    if (e->role != EL_FOLLOWER || now.mono >= f->expect_until || e->next_kind != EL_K_GET)
        return;
    /* Watching for a release reserved for us, without a long poll (no peer
     * mode, or its endpoint failed): read often, for a bounded time. */
    if (!f->acked || !e->cur.xfer_n || !u_streq(e->cur.xfer_n, f->acked)) {
        if (e->exists == 1 && !rec_released(&e->cur))
            f->expect_until = 0; /* the request is over */
        return;
    }
    /* Fast while the commit is likely (the leader learns of the
     * confirmation within a renewal and its application stops in
     * seconds), then a quarter of a frequent interval. */
    int64_t gap = now.mono - f->acked_at < e->p.renew_deadline ? xf_fast(e) : e->p.frequent / 4;
    int64_t at = now.mono + gap;
    if (at < e->next_at)
        e->next_at = at;
}

int xf_issue_ack(el_engine *e, el_time now, el_op *op)
{
    if (!e->xf.body || !e->etag || !follower_may_write(e, now.mono)) {
        el_schedule(e, EL_K_GET, now.mono);
        return 0;
    }
    e->pending = EL_K_ACK + 1;
    op->kind = EL_OP_PUT;
    op->body = e->xf.body;
    op->body_len = e->xf.body_len;
    op->if_match = e->etag;
    op->timeout_ms = e->p.request_timeout;
    return EL_OP_PUT;
}

void xf_on_ack(el_engine *e, el_time now, const st_result *r)
{
    el_xfer *f = &e->xf;
    free(f->body);
    f->body = NULL;
    if (r->outcome == ST_OK) {
        /* Our write is a change of the record: count its lease afresh
         * (later, never earlier, than the holder's own). */
        f->expect_until = now.mono + xf_ack_window(e) + xf_commit_window(e);
        f->acked_at = now.mono;
        el_forget_etag(e);
        el_schedule(e, EL_K_GET, now.mono);
        return;
    }
    free(f->acked);
    f->acked = NULL; /* another write came first: look again */
    if (r->outcome != ST_PRECONDITION && r->outcome != ST_NOT_FOUND)
        el_note_failure(e, now.mono, r, 1);
    el_schedule(e, EL_K_GET, now.mono + (r->outcome == ST_PRECONDITION ? 0 : e->p.frequent));
}
