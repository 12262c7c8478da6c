/* SPDX-License-Identifier: Apache-2.0 */
/* election.c - who leads, decided as a pure state machine.
 *
 * Safety in one paragraph (the long form is docs/algorithm.md): a leader is
 * leader only while now < renewed_at + renew_deadline, where renewed_at is the
 * monotonic time *before* it sent its last successful write. A follower takes
 * over a record with etag E only after seeing E unchanged for L on its own
 * monotonic clock, counted from the *receipt* of its first read of E, which is
 * after E was written, hence after it was sent. If the follower's conditional
 * write on E succeeds, no later write by the old leader succeeded, so the old
 * leader stopped by send(E) + renew_deadline < send(E) + L <= takeover.
 * Where the store stamps its answers (S3, PostgreSQL), a follower's first
 * sight of a foreign record is backdated by the record's age on the store's
 * clock less the stamps' resolution: still after E was written, if the
 * store's clock runs at about the true rate; at most L - renew_deadline, so
 * a store clock that jumps cannot hand the lock over before the old
 * leader's renew deadline (same timings; store_credit, docs/algorithm.md).
 */
#include "election.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "s3lect.h"

#define FAR_FUTURE INT64_MAX

int el_init(el_engine *e, const el_params *p, const char *id, const char *addr,
            const char *incarnation, uint64_t seed)
{
    memset(e, 0, sizeof *e);
    e->p = *p;
    e->id = u_strdup(id);
    e->addr = u_strdup(addr ? addr : "");
    e->incarnation = u_strdup(incarnation);
    if (!e->id || !e->addr || !e->incarnation) {
        el_free(e);
        return S3LECT_ENOMEM;
    }
    u_rng_seed(&e->rng, seed);
    e->exists = -1;
    e->next_kind = EL_K_GET;
    e->next_at = INT64_MIN; /* first read at once */
    return 0;
}

int el_set_self(el_engine *e, const char *addr, const char *peer_key)
{
    char *a = u_strdup(addr ? addr : ""), *k = u_strdup(peer_key ? peer_key : "");
    if (!a || !k) {
        free(a);
        free(k);
        return S3LECT_ENOMEM;
    }
    free(e->addr);
    free(e->peer_key);
    e->addr = a;
    e->peer_key = k;
    return 0;
}

int el_set_roster(el_engine *e, const char *key)
{
    return u_setstr(&e->ro.key, key) == 0 ? 0 : S3LECT_ENOMEM;
}

int el_set_succ_key(el_engine *e, const char *key)
{
    if (!rec_succ_key_valid(key))
        return S3LECT_EINVAL;
    return u_setstr(&e->succ_key, key) == 0 ? 0 : S3LECT_ENOMEM;
}

static void attempt_clear(el_attempt *a)
{
    free(a->body);
    memset(a, 0, sizeof *a);
}

void el_free(el_engine *e)
{
    free(e->id);
    free(e->addr);
    free(e->peer_key);
    free(e->succ_key);
    free(e->proof);
    free(e->proof_inc);
    free(e->incarnation);
    free(e->etag);
    free(e->ann_id);
    free(e->peer_off_id);
    free(e->peer_off_addr);
    free(e->pdown_id);
    free(e->pdown_addr);
    free(e->pdown_inc);
    free(e->pdown_why);
    free(e->vanish_msg);
    free(e->ann_addr);
    free(e->last_error_msg);
    free(e->my_body);
    free(e->rel_body);
    free(e->rel_etag);
    free(e->led_etag);
    free(e->ro.key);
    free(e->ro.etag);
    free(e->ro.body);
    xf_free(&e->xf);
    rec_clear(&e->cur);
    attempt_clear(&e->att);
    for (size_t i = 0; i < e->nevents; i++)
        el_event_clear(&e->events[i]);
    free(e->events);
    memset(e, 0, sizeof *e);
}

void el_set_params(el_engine *e, const el_params *p)
{
    e->p = *p;
}

int el_is_leader(const el_engine *e, int64_t now)
{
    return e->role == EL_LEADER && now < e->renewed_at + e->p.renew_deadline;
}

int el_releasing(const el_engine *e)
{
    return e->pending == EL_K_RELEASE + 1;
}

int el_state(const el_engine *e, int64_t now)
{
    if (e->role == EL_STOPPED)
        return S3LECT_STATE_STOPPED;
    if (el_is_leader(e, now))
        return S3LECT_STATE_LEADER;
    if (e->backoff_until > now || (e->role == EL_FOLLOWER && e->slow_until > now))
        return S3LECT_STATE_BACKOFF;
    return e->stable ? S3LECT_STATE_FOLLOWER_STABLE : S3LECT_STATE_FOLLOWER_TRANSITION;
}

int64_t el_retry_delay(el_engine *e, int n)
{
    /* DESIGN §4: immediate, +100 ms, +1 s (±20 %); later failures wait 1 s
     * (leader) or frequent_interval (follower; set by the caller). */
    if (n <= 1)
        return 0;
    return u_jitter(&e->rng, n == 2 ? 100 : 1000, 0.2);
}

void el_schedule(el_engine *e, int kind, int64_t at)
{
    e->next_kind = kind;
    e->next_at = at;
}

/* The leader's next renewal: exactly renew_interval after the previous write
 * was sent, without jitter. Only the holder writes a renewal, so there is no
 * race to spread out; an exact period makes the cost one PUT per interval
 * (720 PUT/h at the defaults) and keeps the record's age seen by followers
 * within renew_interval plus one request's latency. */
static void schedule_renewal(el_engine *e, int64_t sent_at)
{
    e->renew_due = sent_at + e->p.renew_interval;
    el_schedule(e, EL_K_RENEW, e->renew_due);
}

void el_store_back(el_engine *e, int64_t now, int64_t at)
{
    if (e->role != EL_FOLLOWER || e->pending || e->retry == 0)
        return; /* a leader's schedule is its own; a follower whose reads work needs nothing */
    if (at < now)
        at = now;
    if (e->write_backoff_until > at) /* backed off because of the outage, not a rival */
        e->write_backoff_until = at;
    if (e->next_kind == EL_K_GET && e->next_at > at)
        e->next_at = at;
}

/* Earliest time the next acquisition write may go out. */
int64_t el_write_gate(const el_engine *e)
{
    int64_t g =
        e->backoff_until > e->write_backoff_until ? e->backoff_until : e->write_backoff_until;
    return g > e->slow_until ? g : e->slow_until;
}

void el_announce(el_engine *e, const char *id, const char *addr, int64_t term)
{
    if (e->ann_valid && u_streq(e->ann_id, id) && u_streq(e->ann_addr, addr) && e->ann_term == term)
        return;
    u_setstr(&e->ann_id, id ? id : "");
    u_setstr(&e->ann_addr, addr ? addr : "");
    e->ann_term = term;
    e->ann_valid = 1;
    el_emit(e, S3LECT_EVENT_LEADER_CHANGED, term, 0, id, addr);
}

void el_forget_etag(el_engine *e)
{
    free(e->etag);
    e->etag = NULL;
    e->exists = -1;
}

/* Leader → follower. The record we wrote stays; we never resume it, so
 * forget its etag: a later read starts a fresh observation (first_seen). */
static void step_down(el_engine *e, int reason, int64_t now)
{
    if (e->role != EL_LEADER)
        return;
    e->role = EL_FOLLOWER;
    e->stable = 0;
    xf_leader_end(e, now);
    el_emit(e, S3LECT_EVENT_LOST, e->term, reason, e->id, e->addr);
    u_setstr(&e->led_etag, e->etag); /* the record we may reclaim (own_record) */
    el_forget_etag(e);
    el_schedule(e, EL_K_GET, now);
}

static char *make_body(el_engine *e, int released, int64_t term, int64_t wall, size_t *len)
{
    rec r = {0};
    r.leader_id = released ? "" : e->id;
    r.leader_addr = released ? "" : e->addr;
    r.zero_time = released;
    r.last_updated_ms = wall;
    r.term = term;
    r.lease_ms = e->p.lease;
    r.hold_ms = released ? 0 : (e->p.hold > e->p.renew_deadline ? e->p.hold : e->p.renew_deadline);
    r.incarnation = released ? "" : e->incarnation;
    r.peer_key = released ? "" : e->peer_key;
    r.succ_key = released ? "" : e->succ_key;
    xf_fill(e, &r, released, wall);
    char *s = rec_encode(&r);
    *len = s ? strlen(s) : 0;
    return s;
}

/* Prepares a fresh attempt body. lastUpdated strictly increases per attempt,
 * so two attempts never have the same bytes: a read that returns exactly
 * this body proves that this write (sent no earlier than sent_at) landed. */
static int prepare_attempt(el_engine *e, el_time now, int released, int64_t term)
{
    attempt_clear(&e->att);
    int64_t wall = now.wall > e->last_body_wall ? now.wall : e->last_body_wall + 1;
    e->last_body_wall = wall;
    e->att.body = make_body(e, released, term, wall, &e->att.body_len);
    if (!e->att.body)
        return -1;
    e->att.active = 1;
    e->att.sent_at = now.mono;
    e->att.term = term;
    e->att.release = released;
    return 0;
}

static void become_leader(el_engine *e, const char *etag, int64_t sent_at, int64_t term,
                          const char *body, el_time now)
{
    int was_leader = e->role == EL_LEADER;
    u_setstr(&e->my_body, body);
    free(e->rel_body);
    free(e->rel_etag);
    e->rel_body = e->rel_etag = NULL;
    u_setstr(&e->etag, etag);
    e->exists = 1;
    e->rec_known = e->ever_known = 1;
    e->answer_at = now.mono;
    e->first_seen = now.mono;
    e->seen_wall = now.wall;
    e->renewed_at = sent_at;
    e->term = term;
    if (term > e->max_term)
        e->max_term = term;
    e->role = EL_LEADER;
    e->stable = 0;
    e->corrupt = 0;
    e->lost_races = 0;
    rec_clear(&e->cur);
    e->cur.leader_id = u_strdup(e->id);
    e->cur.leader_addr = u_strdup(e->addr);
    e->cur.incarnation = u_strdup(e->incarnation);
    e->cur.peer_key = u_strdup(e->peer_key ? e->peer_key : "");
    e->cur.term = term;
    e->cur.lease_ms = e->p.lease;
    e->cur.last_updated_ms = now.wall;
    if (!was_leader) {
        xf_leader_end(e, now.mono);
        e->xf.led_since = now.mono;
        e->xf.retry_at = 0;
        free(e->xf.err_n);
        free(e->xf.err);
        e->xf.err_n = e->xf.err = NULL;
        el_emit(e, S3LECT_EVENT_ACQUIRED, term, 0, e->id, e->addr);
        ro_leading(e, now.mono);
    }
    el_announce(e, e->id, e->addr, term);
    schedule_renewal(e, sent_at);
}

/* Does the record body equal our unresolved attempt? Then the write landed. */
static int attempt_landed(const el_engine *e, const st_result *r)
{
    return e->att.active && r->body && r->body_len == e->att.body_len &&
           memcmp(r->body, e->att.body, r->body_len) == 0;
}

/* Is this body a record this process wrote while leading its current term?
 * (A renewal that landed after its sender stopped waiting for it.) */
static int body_is_ours(const el_engine *e, const st_result *r)
{
    rec x;
    char err[8];
    if (!r->body || rec_parse(r->body, r->body_len, &x, err, sizeof err) != 0)
        return 0;
    int ours = !rec_released(&x) && u_streq(x.leader_id, e->id) &&
               u_streq(x.incarnation, e->incarnation) && x.term == e->term;
    rec_clear(&x);
    return ours;
}

/* ---- results ----------------------------------------------------------- */

/* A follower's wait after its n-th failed read in a row (past the quick
 * retries): frequent, doubling from the 5th failure, at most
 * max(infrequent, frequent), ±10 %. */
static int64_t read_backoff(el_engine *e, int n)
{
    int64_t cap = e->p.infrequent > e->p.frequent ? e->p.infrequent : e->p.frequent;
    int64_t d = e->p.frequent;
    for (int i = 4; i < n && d < cap; i++)
        d *= 2;
    return u_jitter(&e->rng, d < cap ? d : cap, 0.1);
}

/* A leader's wait before retry n of a failed renewal (or its read-back):
 * the usual delays (immediate, +100 ms, +1 s, then every second), but never
 * more than a third of what is left of its renew deadline, so that at least
 * two more attempts fit: a store that throttles or fails for a little less
 * than the deadline does not cost the leadership, and with it a restart of
 * what runs under it (issue 38 item 8). */
static int64_t leader_retry_delay(el_engine *e, int64_t now, int n)
{
    int64_t d = n <= 3 ? el_retry_delay(e, n) : 1000;
    int64_t left = e->renewed_at + e->p.renew_deadline - now;
    int64_t third = left / 3 > 50 ? left / 3 : 50;
    return d < third ? d : third;
}

static void on_get(el_engine *e, el_time now, const st_result *r)
{
    if (r->outcome == ST_OK || r->outcome == ST_NOT_FOUND) {
        el_clear_read_error(e);
        e->auth_create_tried = 0;
        if (r->outcome == ST_OK && attempt_landed(e, r) && !e->att.release) {
            el_attempt a = e->att;
            if (e->role == EL_FOLLOWER && a.term <= e->term) {
                /* A renewal of the leadership this node lost landed after
                 * it stepped down: the record is its own, but that
                 * leadership's command run was stopped, so it is taken back
                 * as a reclaim (own_record), with a new term. */
                u_setstr(&e->led_etag, r->etag);
                attempt_clear(&e->att);
            } else if (e->role == EL_FOLLOWER && now.mono < e->slow_until) {
                /* Holding off after repeated slow losses: not leading on
                 * it is always safe; the record is then anyone's. */
                attempt_clear(&e->att);
            } else if (now.mono < a.sent_at + e->p.renew_deadline) {
                /* Our unresolved write landed and its lease is still good. */
                e->att.active = 0;
                become_leader(e, r->etag, a.sent_at, a.term, a.body, now);
                free(a.body);
                memset(&e->att, 0, sizeof e->att);
                el_end_cycle(e);
                return;
            }
        }
        /* It did not land (or landed too long ago to lead on). A follower's
         * takeover write may still be on its way (a store that lands writes
         * seconds late): keep watching for it while its lease, counted from
         * its send, could still be led on, reading a little more often. Past
         * that, should it land, it is just another holder's record to us. */
        int refused = e->att.refused; /* zero unless an attempt got 412 */
        int watch = e->role == EL_FOLLOWER && (r->outcome == ST_OK || r->outcome == ST_NOT_FOUND) &&
                    e->att.active && e->att.unanswered && !e->att.release &&
                    now.mono < e->att.sent_at + e->p.renew_deadline;
        int64_t watch_until = e->att.sent_at + e->p.renew_deadline;
        if (!watch)
            attempt_clear(&e->att);
        if (e->role == EL_LEADER) {
            /* After a 412, an unchanged etag means a store that refuses our
             * writes: step down rather than loop on it. */
            if (r->outcome == ST_OK && u_streq(r->etag, e->etag) && !refused) {
                if (e->xf.polling) { /* a transfer's poll: nothing new yet */
                    xf_poll_again(e, now.mono);
                    return;
                }
                /* Our last write still stands; the renewal did not land. */
                el_schedule(e, EL_K_RENEW, now.mono);
                return;
            }
            if (r->outcome == ST_OK && !u_streq(r->etag, e->etag) && body_is_ours(e, r)) {
                /* An earlier renewal of ours landed after we gave up on it: the
                 * record is still ours and nobody wrote since (every write of
                 * ours is conditional). Renew on its etag; the lease still
                 * counts from renewed_at, the send time of a write we know
                 * succeeded, which is earlier: safe. */
                u_setstr(&e->etag, r->etag);
                u_setstr(&e->my_body, r->body);
                /* Also what s3lect transfer and the followers write in our
                 * record: a transfer request, a confirmation. */
                rec x;
                if (rec_parse(r->body, r->body_len, &x, NULL, 0) == 0) {
                    xf_adopt(e, &x, now.mono);
                    rec_clear(&x);
                }
                e->xf.polling = 0;
                el_schedule(e, EL_K_RENEW, now.mono);
                return;
            }
            step_down(e, S3LECT_LOST_LOST_RACE, now.mono);
        }
        el_observe(e, now, r);
        if (watch && e->att.active && e->next_kind == EL_K_GET) {
            int64_t step = e->p.renew_deadline / 4 > 250 ? e->p.renew_deadline / 4 : 250;
            int64_t at = now.mono + step < watch_until ? now.mono + step : watch_until - 1;
            if (at > now.mono && at < e->next_at)
                e->next_at = at;
        }
        el_end_cycle(e);
        return;
    }
    if (r->outcome == ST_AUTH && e->role == EL_FOLLOWER && e->exists != 1 &&
        !e->auth_create_tried) {
        /* With only s3:GetObject, S3 answers 403 (not 404) for a missing key.
         * Creating with If-None-Match: * can never overwrite anything, so try
         * it once: it succeeds on a new lock, 412s on an existing one (then
         * the read error is real), or fails with AUTH too. */
        e->auth_create_tried = 1;
        el_set_error(e, S3LECT_EAUTH, r->message);
        el_forget_etag(e);
        e->exists = 0;
        el_schedule(e, EL_K_ACQUIRE, now.mono);
        return;
    }
    int n = el_note_failure(e, now.mono, r, 0);
    int64_t delay =
        (r->outcome == ST_TRANSIENT && n <= 3) ? el_retry_delay(e, n) : read_backoff(e, n);
    if (e->role == EL_LEADER) {
        el_schedule(e, EL_K_VERIFY, now.mono + leader_retry_delay(e, now.mono, n));
        return;
    }
    e->stable = 0;
    el_schedule(e, EL_K_GET, now.mono + delay);
    if (n == 3 || r->outcome != ST_TRANSIENT)
        el_end_cycle(e);
}

/* The leader's answer counts as a read of the record at receipt time: the
 * etag it reports is that of its last write that succeeded, so it exists
 * (or existed) in the store, and we received it after it was written. Any
 * failure — refused, reset, timeout, 404, another leader — falls back to S3
 * and the transition state (DESIGN §6). */
/* 1 when r (a peer answer: the released record its leader wrote, handed to
 * this follower as the successor) is the release of the leader this
 * follower follows: released, of the term it read. Acting on it is only a
 * conditional write on that etag: a record that is not the store's
 * current one is refused. */
static int release_of_leader(const el_engine *e, const st_result *r)
{
    if (e->exists != 1 || e->corrupt || rec_released(&e->cur))
        return 0;
    rec x;
    memset(&x, 0, sizeof x);
    int ok = rec_parse(r->body, r->body_len, &x, NULL, 0) == 0 && rec_released(&x) &&
             x.term == e->cur.term;
    rec_clear(&x);
    return ok;
}

static void on_peer(el_engine *e, el_time now, const st_result *r)
{
    if (e->role != EL_FOLLOWER)
        return;
    if (r->outcome == ST_OK && r->peer_released && !release_of_leader(e, r)) {
        /* Not the release of our leader: as a plain "not leading". */
        e->stable = 0;
        el_schedule(e, EL_K_GET, now.mono);
        return;
    }
    if (r->outcome == ST_OK && r->etag && r->etag[0]) {
        ro_peer_ok(e, now); /* no store reads to take turns at */
        st_result obs = *r;
        obs.outcome = ST_OK;
        /* The leader's word carries no store stamps: its etag's lease is
         * counted from this receipt (never backdated). */
        obs.server_now_ms = obs.server_modified_ms = obs.server_res_ms = 0;
        el_observe(e, now, &obs);
        el_end_cycle(e);
        return;
    }
    if (r->outcome == ST_OK) {
        /* The leader answered but cannot long-poll (no etag: Go s3lect).
         * Follow it through the store at the stable period, as without
         * peer mode, until the record names another leader. */
        u_setstr(&e->peer_off_id, e->cur.leader_id ? e->cur.leader_id : "");
        u_setstr(&e->peer_off_addr, e->cur.leader_addr ? e->cur.leader_addr : "");
        el_schedule(e, EL_K_GET, el_stable_read_at(e, now, e->p.infrequent));
        el_end_cycle(e);
        return;
    }
    /* 404 "not leading" is news, not a failure; a check cut short by a
     * stop neither (peer_failure 0). */
    if (r->peer_failure != ST_PEER_OK)
        el_peer_down(e, now.mono, r);
    e->stable = 0;
    int64_t at = now.mono;
    if (r->peer_failure != ST_PEER_OK) {
        ro_want(e, now);  /* reading the store from now on: take turns */
        if (e->ro.member) /* at its turn, capped at the lease's end */
            at = el_stable_read_at(e, now, e->p.frequent);
    }
    if (xf_expecting(e, now.mono)) {
        /* A transfer's target: its release is in the store now (or soon):
         * read it at once, not at a roster turn or after yielding. */
        el_schedule(e, EL_K_GET, now.mono);
        return;
    }
    if (r->peer_failure == ST_PEER_OK && r->peer_yield) {
        /* Another follower was named to take over first (docs/peer.md "One
         * successor"): read a frequent interval later (jittered by a third,
         * so that the yielders of many released locks do not read together
         * while the successors write), and most likely find it leading
         * rather than race it to write the released record. */
        at += u_jitter(&e->rng, e->p.frequent, 1.0 / 3);
    }
    el_schedule(e, EL_K_GET, at);
}

static void on_acquire(el_engine *e, el_time now, const st_result *r)
{
    if (r->outcome == ST_OK) {
        el_clear_error(e);
        el_write_succeeded(e);
        e->lost_races = 0;
        el_attempt a = e->att;
        memset(&e->att, 0, sizeof e->att);
        if (now.mono < a.sent_at + e->p.renew_deadline) {
            become_leader(e, r->etag, a.sent_at, a.term, a.body, now);
        } else {
            /* The write took longer than our own lease: never lead on it. */
            el_forget_etag(e);
            el_schedule(e, EL_K_GET, now.mono);
        }
        free(a.body);
        el_end_cycle(e);
        return;
    }
    if (r->outcome == ST_PRECONDITION || r->outcome == ST_NOT_FOUND) {
        el_clear_error(e);
        if (r->outcome == ST_PRECONDITION)
            el_note_refused(e, now.mono);
        /* Keep the attempt: a 412 may answer a resent copy of this write
         * whose first copy landed (see on_renew); the read tells. */
        if (r->outcome == ST_NOT_FOUND)
            attempt_clear(&e->att);
        /* Another node won: re-read at once. A store that keeps refusing our
         * writes while reads show the lock free would make that a hot loop,
         * so after a few lost races in a row wait a poll period. */
        e->lost_races++;
        el_schedule(e, EL_K_GET,
                    now.mono + (e->lost_races < 3 ? 0 : u_jitter(&e->rng, e->p.frequent, 0.1)));
        el_end_cycle(e);
        return;
    }
    int n = el_note_failure(e, now.mono, r, 1);
    el_write_failed(e, now.mono);
    /* No HTTP answer at all (a timeout, a dropped connection): the write
     * may still be in flight and land late; a 5xx was not applied. */
    e->att.unanswered = r->outcome == ST_TRANSIENT && r->http_status == 0;
    if (r->outcome == ST_TRANSIENT) {
        /* It may have landed (a timeout, a 409): keep the attempt, the next
         * read tells. The next write waits for the back-off. */
        el_schedule(e, EL_K_GET, now.mono + (n <= 3 ? el_retry_delay(e, n) : e->p.frequent));
    } else {
        attempt_clear(&e->att);
        el_schedule(e, EL_K_GET, now.mono + u_jitter(&e->rng, e->p.frequent, 0.1));
    }
    e->stable = 0;
    el_end_cycle(e);
}

/* Renewals that take more than half of renew_deadline − renew_interval
 * leave no room for one retry: say once (every 10 min) which setting to raise
 * before the leader starts stepping down. */
static void check_latency(el_engine *e, int64_t now, int64_t took)
{
    int64_t margin = e->p.renew_deadline - e->p.renew_interval;
    if (took * 2 <= margin)
        return;
    char msg[400];
    snprintf(msg, sizeof msg,
             "a renewal took %lld ms, more than half of renew_deadline - renew_interval (%lld "
             "ms): a slower store makes this leader step down; raise renew_deadline and "
             "lease_timeout (or lower renew_interval)",
             (long long)took, (long long)margin);
    el_report(e, now, EL_REP_LATENCY, S3LECT_ETRANSIENT, msg);
}

static void on_renew(el_engine *e, el_time now, const st_result *r)
{
    if (e->role != EL_LEADER)
        return;
    if (r->outcome == ST_OK) {
        el_clear_error(e);
        el_write_succeeded(e);
        el_attempt a = e->att;
        memset(&e->att, 0, sizeof e->att);
        check_latency(e, now.mono, now.mono - a.sent_at);
        free(e->my_body);
        e->my_body = a.body;
        u_setstr(&e->etag, r->etag);
        e->renewed_at = a.sent_at;
        e->rec_known = 1;
        e->answer_at = now.mono;
        e->seen_wall = now.wall;
        e->cur.last_updated_ms = now.wall;
        schedule_renewal(e, a.sent_at);
        if (e->xf.active)
            e->xf.announced = 1;
        el_end_cycle(e);
        return;
    }
    if (r->outcome == ST_PRECONDITION) {
        /* Usually another node wrote. But a 412 can also answer a second copy
         * of this very write: libcurl resends a request when a reused
         * connection dies before the answer (a server or proxy closing it as
         * idle just as we send), and if the first copy landed, the copy finds
         * a new etag. Read before stepping down: the read tells the two
         * apart (our exact bytes = it landed). Leading during the read is as
         * safe as leading until renewed_at + renew_deadline ever is. */
        el_clear_error(e);
        el_note_refused(e, now.mono);
        e->att.refused = 1;
        el_schedule(e, EL_K_VERIFY, now.mono);
        return;
    }
    if (r->outcome == ST_NOT_FOUND) {
        attempt_clear(&e->att);
        step_down(e, S3LECT_LOST_LOST_RACE, now.mono);
        el_end_cycle(e);
        return;
    }
    int n = el_note_failure(e, now.mono, r, 1);
    int64_t delay = leader_retry_delay(e, now.mono, n);
    if (r->outcome == ST_TRANSIENT) {
        /* Unknown outcome (the attempt is kept): read before writing again. */
        el_schedule(e, EL_K_VERIFY, now.mono + delay);
    } else {
        el_schedule(e, EL_K_RENEW, now.mono + delay);
    }
}

static void finish_stop(el_engine *e)
{
    e->role = EL_STOPPED;
    if (e->stop_was_leader)
        el_emit(e, S3LECT_EVENT_LOST, e->term, S3LECT_LOST_STOPPED, e->id, e->addr);
}

static void on_release(el_engine *e, el_time now, const st_result *r)
{
    free(e->rel_body);
    free(e->rel_etag);
    e->rel_body = e->rel_etag = NULL;
    if (r->outcome == ST_OK && r->etag && r->etag[0] && e->att.body) {
        e->rel_body = e->att.body; /* the successor's first read (docs/peer.md) */
        e->att.body = NULL;
        if (!(e->rel_etag = u_strdup(r->etag))) {
            free(e->rel_body);
            e->rel_body = NULL;
        }
    }
    attempt_clear(&e->att);
    if (r->outcome != ST_OK)
        el_note_failure(e, now.mono, r, 1);
    el_forget_etag(e); /* the next read parses the released record afresh */
    if (e->role == EL_STOPPING) {
        finish_stop(e);
        return;
    }
    /* Released after a veto: back off, then read. */
    el_schedule(e, EL_K_GET, e->backoff_until);
    el_end_cycle(e);
}

void el_complete(el_engine *e, el_time now, const st_result *r)
{
    int kind = e->pending - 1;
    e->pending = 0;
    switch (kind) {
    case EL_K_GET:
    case EL_K_VERIFY:
        on_get(e, now, r);
        break;
    case EL_K_ACQUIRE:
        on_acquire(e, now, r);
        break;
    case EL_K_RENEW:
        on_renew(e, now, r);
        break;
    case EL_K_RELEASE:
        on_release(e, now, r);
        break;
    case EL_K_PEER:
        on_peer(e, now, r);
        break;
    case EL_K_ROSTER:
        ro_complete(e, now, r);
        break;
    case EL_K_ACK:
        xf_on_ack(e, now, r);
        break;
    default:
        break;
    }
}

/* ---- decisions --------------------------------------------------------- */

void el_stop(el_engine *e, int release)
{
    if (e->role == EL_STOPPED)
        return;
    e->stop_requested = 1;
    e->stop_release = release;
}

void el_veto(el_engine *e, int64_t term)
{
    if (e->role == EL_LEADER && e->term == term)
        e->veto_pending = 1;
}

/* A LOST(renew_timeout). From the second in a row (no write answered in time
 * in between, the last one within ten leases) the node holds off: no write
 * and no leading on a landed one for renew_deadline, doubling with each
 * further loss, at most lease_timeout. One loss costs nothing (a blip is
 * recovered at once); a store slower than renew_deadline makes the node
 * lead at most about once per lease instead of every second or two. */
static void slow_loss(el_engine *e, int64_t now)
{
    if (e->slow_losses > 0 && now - e->slow_until > 10 * e->p.lease)
        e->slow_losses = 0; /* long ago: start counting again */
    if (e->slow_losses < 30)
        e->slow_losses++;
    if (e->slow_losses < 2) {
        e->slow_until = now; /* marks the time of this loss */
        return;
    }
    int64_t cap = e->p.lease, d = e->p.renew_deadline;
    for (int i = 2; i < e->slow_losses && d < cap; i++)
        d *= 2;
    e->slow_until = now + (d < cap ? d : cap);
}

static int issue(el_engine *e, int kind, el_op *op, int64_t timeout)
{
    e->pending = kind + 1;
    op->timeout_ms = timeout < 1 ? 1 : timeout;
    if (kind == EL_K_GET || kind == EL_K_VERIFY) {
        op->kind = EL_OP_GET;
        return EL_OP_GET;
    }
    op->kind = EL_OP_PUT;
    op->body = e->att.body;
    op->body_len = e->att.body_len;
    return EL_OP_PUT;
}

static int issue_release(el_engine *e, el_time now, el_op *op)
{
    if (prepare_attempt(e, now, 1, e->term) != 0)
        return -1;
    op->if_match = e->etag;
    return issue(e, EL_K_RELEASE, op, e->p.release_timeout);
}

/* A transfer the application committed: not leader from this instant; the
 * released record names the follower that confirmed. 1 when the release
 * write was issued (op). */
static int transfer_release(el_engine *e, el_time now, el_op *op)
{
    e->role = EL_FOLLOWER;
    e->stable = 0;
    e->backoff_until = now.mono;
    el_emit(e, S3LECT_EVENT_LOST, e->term, S3LECT_LOST_TRANSFERRED, e->id, e->addr);
    /* It gave the lock away: it competes for it again only a lease later
     * (xf_reserved_until), unless it is handed back. */
    e->xf.gave_until = now.mono + e->p.lease;
    free(e->led_etag); /* never reclaimed: it was handed over */
    e->led_etag = NULL;
    int issued = e->etag && issue_release(e, now, op) > 0;
    xf_leader_end(e, now.mono);
    if (!issued) {
        el_forget_etag(e);
        el_schedule(e, EL_K_GET, now.mono);
    }
    return issued;
}

int el_next(el_engine *e, el_time now, el_op *op, int64_t *wake)
{
    memset(op, 0, sizeof *op);
    *wake = FAR_FUTURE;
    if (e->role == EL_STOPPED)
        return EL_OP_DONE;
    if (e->pending) /* driver bug: one op at a time */
        return EL_OP_NONE;
    if (e->role == EL_LEADER && !el_is_leader(e, now.mono)) {
        /* Renewals were sent but none succeeded in time (slow, failing or
         * unreachable store): renew_timeout. No renewal was even tried (the
         * process was paused, suspended or starved): lease_expired. */
        int tried = e->renew_tried;
        step_down(e, tried ? S3LECT_LOST_RENEW_TIMEOUT : S3LECT_LOST_LEASE_EXPIRED, now.mono);
        if (tried) {
            slow_loss(e, now.mono);
            char msg[400];
            snprintf(msg, sizeof msg,
                     "no renewal succeeded within renew_deadline (%lld ms): stepped down; "
                     "if the store is slow rather than down, raise renew_deadline and "
                     "lease_timeout (s3lect run: --renew-deadline, --lease-timeout); while "
                     "this repeats, the node waits longer (up to lease_timeout) before it "
                     "competes again",
                     (long long)e->p.renew_deadline);
            el_report(e, now.mono, EL_REP_LATENCY, S3LECT_ETRANSIENT, msg);
        }
        e->renew_tried = 0;
        el_end_cycle(e);
    }
    /* The host's supervisor has stopped confirming (s3lect_require_heartbeat):
     * stop renewing, without a release -- what it runs may still be running,
     * and is stopped by the host's own deadline before the lease ends. */
    int hb_stale = e->hb_timeout > 0 && now.mono - e->hb_at > e->hb_timeout;
    if (hb_stale && e->role == EL_LEADER && !e->stop_requested) {
        step_down(e, S3LECT_LOST_LEASE_EXPIRED, now.mono);
        char msg[300];
        snprintf(msg, sizeof msg,
                 "the host did not confirm it is alive within %lld ms "
                 "(s3lect_heartbeat): stopped renewing; the lease runs out without a release",
                 (long long)e->hb_timeout);
        el_report(e, now.mono, EL_REP_LATENCY, S3LECT_ETRANSIENT, msg);
        e->renew_tried = 0;
        el_end_cycle(e);
    }
    if (e->stop_requested) {
        e->stop_was_leader = e->role == EL_LEADER;
        e->role = EL_STOPPING; /* not leader from this instant */
        if (e->stop_was_leader && e->stop_release && e->etag && issue_release(e, now, op) > 0)
            return op->kind;
        finish_stop(e);
        return EL_OP_DONE;
    }
    if (e->veto_pending) {
        e->veto_pending = 0;
        if (e->role == EL_LEADER) {
            el_emit(e, S3LECT_EVENT_LOST, e->term, S3LECT_LOST_HOOK_FAILED, e->id, e->addr);
            e->role = EL_FOLLOWER;
            e->stable = 0;
            e->backoff_until = now.mono + u_jitter(&e->rng, e->p.frequent, 0.1);
            if (e->etag && issue_release(e, now, op) > 0)
                return op->kind;
            el_forget_etag(e);
            el_schedule(e, EL_K_GET, e->backoff_until);
        }
    }
    if (e->role == EL_LEADER && !e->pending && xf_leader_step(e, now) &&
        transfer_release(e, now, op))
        return op->kind;
    /* The roster's turn, between the lock's steps (before a follower's long
     * poll too, which would otherwise leave it no time between two). */
    if (now.mono < e->next_at || e->next_kind == EL_K_PEER) {
        int k = ro_next(e, now, op);
        if (k)
            return k;
    }
    if (now.mono < e->next_at) {
        *wake = e->next_at;
        if (e->ro.due > now.mono && e->ro.due < *wake)
            *wake = e->ro.due;
        if (e->role == EL_LEADER && e->renewed_at + e->p.renew_deadline < *wake)
            *wake = e->renewed_at + e->p.renew_deadline;
        if (e->role == EL_LEADER && e->hb_timeout > 0 && e->hb_at + e->hb_timeout + 1 < *wake)
            *wake = e->hb_at + e->hb_timeout + 1;
        return EL_OP_NONE;
    }
    switch (e->next_kind) {
    case EL_K_ACQUIRE: {
        if (hb_stale) { /* no leadership for a host that cannot act on it */
            el_schedule(e, EL_K_GET, now.mono + e->p.frequent);
            *wake = e->next_at;
            return EL_OP_NONE;
        }
        /* One more than any term we know, or the record's own (a reclaim:
         * a renewal of our own record); never one past REC_TERM_MAX. */
        int64_t term = el_acquire_term(e, now.wall);
        if (!term) {
            el_term_stuck(e, now.mono);
            *wake = e->next_at;
            return EL_OP_NONE;
        }
        if (prepare_attempt(e, now, 0, term) != 0) {
            el_schedule(e, EL_K_GET, now.mono + e->p.frequent);
            *wake = e->next_at;
            return EL_OP_NONE;
        }
        op->if_match = e->exists == 1 ? e->etag : NULL;
        /* Give up on the answer with a quarter of the lease left: if the
         * write landed late (its answer lost or slow), a read still finds it
         * in time to lead on it (on_get watches for it until the deadline). */
        int64_t d = e->p.renew_deadline - e->p.renew_deadline / 4;
        int64_t t = e->p.request_timeout < d ? e->p.request_timeout : d;
        return issue(e, EL_K_ACQUIRE, op, t);
    }
    case EL_K_RENEW: {
        if (e->role != EL_LEADER)
            break;
        if (prepare_attempt(e, now, 0, e->term) != 0) {
            el_schedule(e, EL_K_RENEW, now.mono + 100);
            *wake = e->next_at;
            return EL_OP_NONE;
        }
        op->if_match = e->etag;
        e->renew_tried = 1;
        int64_t left = e->renewed_at + e->p.renew_deadline - now.mono;
        return issue(e, EL_K_RENEW, op, left < e->p.request_timeout ? left : e->p.request_timeout);
    }
    case EL_K_PEER: {
        /* The check ends, answered or not, by the end of the lease of the
         * record we know (docs/peer.md "A frozen or cut-off leader"): a
         * leader whose host froze, lost power or was cut off sends no
         * reset, and a long poll left to run its whole wait would keep
         * this follower off the store past that lease. The wait ends
         * peer_timeout before it (the time a check has on top of its wait,
         * to connect and to answer; at most half the time left), so that
         * even an answer that never comes is given up at the lease's end. */
        int64_t left = el_expiry_at(e) - now.mono;
        if (e->role == EL_FOLLOWER && left > 0 && el_peer_usable(e, now.mono)) {
            /* peer_timeout on top of the wait, but at most half of what is
             * left: a peer_timeout as long as the lease would leave no wait,
             * and every check would come back at once. */
            int64_t t = e->p.release_timeout;
            if (t > left / 2)
                t = left / 2 > 0 ? left / 2 : left;
            int64_t wait = left - t < e->p.peer_wait ? left - t : e->p.peer_wait;
            /* The leader renews every renew_interval (ours: the timings
             * assumed alike) and the answer to this poll comes with each
             * renewal. One that is overdue by more than a second (a fifth of
             * the interval if longer) may have landed in the store unheard:
             * the leader froze or was cut off between its write and its
             * answer. Read the store then, once per renewal heard, rather than
             * at the lease's end: an unheard renewal met only there would be
             * counted from that first sight, a lease too late (bench/run
             * hostdeath: +10 s). A live leader's renewals come in time and
             * cost nothing more. */
            int64_t slack = e->p.renew_interval / 5 > 1000 ? e->p.renew_interval / 5 : 1000;
            int64_t due = e->seen_recv + e->p.renew_interval + slack;
            if (e->seen_recv > 0 && now.mono >= due) {
                if (e->overdue_for != e->seen_recv) {
                    e->overdue_for = e->seen_recv;
                    break; /* a store read, below */
                }
            } else if (e->seen_recv > 0 && due - now.mono < wait) {
                wait = due - now.mono;
            }
            e->pending = EL_K_PEER + 1;
            op->kind = EL_OP_PEER;
            op->if_match = e->etag;
            op->peer_addr = e->cur.leader_addr;
            op->peer_id = e->cur.leader_id;
            op->peer_key = e->cur.peer_key;
            op->peer_inc = e->cur.incarnation;
            op->peer_proof = e->proof && u_streq(e->proof_inc, e->cur.incarnation) ? e->proof : "";
            op->peer_wait = wait > 0 ? wait : 0;
            op->timeout_ms = t > 0 ? t : 1;
            return EL_OP_PEER;
        }
        break;
    }
    case EL_K_ACK:
        if (xf_issue_ack(e, now, op))
            return op->kind;
        *wake = e->next_at;
        return EL_OP_NONE;
    case EL_K_VERIFY:
        if (e->role == EL_LEADER) {
            int64_t left = e->renewed_at + e->p.renew_deadline - now.mono;
            return issue(e, EL_K_VERIFY, op,
                         left < e->p.request_timeout ? left : e->p.request_timeout);
        }
        break;
    default:
        break;
    }
    return issue(e, EL_K_GET, op, e->p.request_timeout);
}
