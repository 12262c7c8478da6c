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
#include "roster.h"
#include "s3lect.h"

#define FAR_FUTURE INT64_MAX

void el_event_clear(el_event *ev)
{
    free(ev->leader_id);
    free(ev->leader_addr);
    free(ev->message);
    memset(ev, 0, sizeof *ev);
}

static void push_event(el_engine *e, const el_event *ev)
{
    if (e->nevents == e->capevents) {
        size_t cap = e->capevents ? e->capevents * 2 : 8;
        el_event *n = realloc(e->events, cap * sizeof *n);
        if (!n) {
            el_event tmp = *ev;
            el_event_clear(&tmp); /* out of memory: drop the event, never the state */
            return;
        }
        e->events = n;
        e->capevents = cap;
    }
    e->events[e->nevents++] = *ev;
}

static void emit(el_engine *e, int type, int64_t term, int reason, const char *id, const char *addr)
{
    el_event ev = {.type = type, .term = term, .reason = reason, .cycle = e->cycle};
    ev.leader_id = u_strdup(id ? id : "");
    ev.leader_addr = u_strdup(addr ? addr : "");
    push_event(e, &ev);
}

static void emit_error(el_engine *e, int code, const char *msg)
{
    el_event ev = {.type = S3LECT_EVENT_ERROR, .code = code, .cycle = e->cycle};
    ev.message = u_strdup(msg ? msg : s3lect_strerror(code));
    push_event(e, &ev);
}

void el_report_error(el_engine *e, int code, const char *msg)
{
    emit_error(e, code, msg);
}

/* Classes of rate-limited reports. */
enum {
    EL_REP_READ = 0,
    EL_REP_WRITE = 1,
    EL_REP_RECORD = 2,
    EL_REP_LATENCY = 3,
    EL_REP_REFUSED = 4
};
#define EL_REP_EVERY_MS 30000
#define EL_REP_LATENCY_EVERY_MS 600000
#define EL_REP_REFUSED_EVERY_MS 300000
/* Every write refused (412) for this long, no live holder seen: say so. */
#define EL_REFUSED_MS 30000

/* An ERROR event, at most one per class every EL_REP_EVERY_MS (a new error
 * code in a class goes out at once); the next one says how many were held. */
static void report(el_engine *e, int64_t now, int cls, int code, const char *msg)
{
    int64_t every = cls == EL_REP_LATENCY   ? EL_REP_LATENCY_EVERY_MS
                    : cls == EL_REP_REFUSED ? EL_REP_REFUSED_EVERY_MS
                                            : EL_REP_EVERY_MS;
    if (e->rep_sent[cls] && e->rep_code[cls] == code && now - e->rep_at[cls] < every) {
        e->rep_suppressed[cls]++;
        return;
    }
    char buf[600];
    if (e->rep_suppressed[cls] > 0) {
        snprintf(buf, sizeof buf, "%s (%lld similar before this one not reported)",
                 msg ? msg : s3lect_strerror(code), (long long)e->rep_suppressed[cls]);
        msg = buf;
    }
    emit_error(e, code, msg);
    e->rep_sent[cls] = 1;
    e->rep_at[cls] = now;
    e->rep_code[cls] = code;
    e->rep_suppressed[cls] = 0;
}

static void end_cycle(el_engine *e)
{
    e->cycle++;
    el_event ev = {.type = S3LECT_EVENT_CYCLE, .cycle = e->cycle};
    push_event(e, &ev);
}

el_event *el_take_events(el_engine *e, size_t *n)
{
    el_event *ev = e->events;
    *n = e->nevents;
    e->events = NULL;
    e->nevents = e->capevents = 0;
    return ev;
}

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

static void schedule(el_engine *e, int kind, int64_t at)
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
    schedule(e, EL_K_RENEW, sent_at + e->p.renew_interval);
}

static void set_error(el_engine *e, int code, const char *msg)
{
    e->last_error = code;
    free(e->last_error_msg);
    e->last_error_msg = u_strdup(msg ? msg : "");
}

static void clear_error(el_engine *e)
{
    e->error_is_write = 0;
    e->last_error = 0;
    e->consecutive_fails = 0;
    e->retry = 0;
    free(e->last_error_msg);
    e->last_error_msg = NULL;
}

static int outcome_code(int outcome)
{
    switch (outcome) {
    case ST_OK:
        return 0;
    case ST_NOT_FOUND:
        return S3LECT_ENOTFOUND;
    case ST_PRECONDITION:
        return S3LECT_EPRECONDITION;
    case ST_AUTH:
        return S3LECT_EAUTH;
    case ST_FATAL:
        return S3LECT_EFATAL;
    default:
        return S3LECT_ETRANSIENT;
    }
}

/* A successful read clears the error state, unless the error came from a
 * write: a store that serves reads but fails every write must keep showing
 * the write's error in the status. */
static void clear_read_error(el_engine *e)
{
    if (e->error_is_write) {
        e->retry = 0;
        return;
    }
    clear_error(e);
}

/* Records a failed store operation and returns the retry number. ERROR events
 * (rate-limited per class) go out for every failed write, every AUTH/FATAL
 * failure and transient read failures once the quick retries are used up, so
 * a single blip of a read does not page anyone. */
static int note_failure(el_engine *e, int64_t now, const st_result *r, int write)
{
    int code = outcome_code(r->outcome);
    const char *msg = r->message ? r->message : s3lect_strerror(code);
    set_error(e, code, msg);
    e->error_is_write = write;
    e->store_fail_at = now;
    e->consecutive_fails++;
    e->retry++;
    if (write || r->outcome != ST_TRANSIENT || e->retry >= 3)
        report(e, now, write ? EL_REP_WRITE : EL_REP_READ, code, msg);
    return e->retry;
}

/* After a failed acquisition or reclaim write: the next write waits
 * frequent · 2^(n−1) (n consecutive failures), at most max(lease, frequent)
 * (nobody can take a lock over faster than a lease anyway), ±20 %. Reads in
 * between are allowed: they tell whether an ambiguous write landed. */
static void write_failed(el_engine *e, int64_t now)
{
    if (e->write_fails < 30)
        e->write_fails++;
    int64_t cap = e->p.lease > e->p.frequent ? e->p.lease : e->p.frequent;
    int64_t d = e->p.frequent;
    for (int i = 1; i < e->write_fails && d < cap; i++)
        d *= 2;
    if (d > cap)
        d = cap;
    e->write_backoff_until = now + u_jitter(&e->rng, d, 0.2);
}

/* A write answered in time: the store keeps up and accepts our writes. */
static void write_succeeded(el_engine *e)
{
    e->write_fails = 0;
    e->write_backoff_until = 0;
    e->renew_tried = 0;
    e->slow_losses = 0;
    e->refused_n = 0;
    e->refused_since = 0;
}

int64_t el_refused_since(const el_engine *e)
{
    return e->refused_n > 0 ? e->refused_since : 0;
}

/* A write answered 412. One is a lost race; when every write is refused for
 * EL_REFUSED_MS and no live holder was seen in between, something else is
 * wrong: say so (rate-limited), and keep it in the status. */
static void note_refused(el_engine *e, int64_t now)
{
    if (e->refused_n++ == 0)
        e->refused_since = now;
    if (e->refused_n < 2 || now - e->refused_since < EL_REFUSED_MS)
        return;
    char msg[500];
    snprintf(msg, sizeof msg,
             "every write of this node for %lld s (%lld writes) was refused with 412 "
             "Precondition Failed though no live leader was seen: another process writes the "
             "lock object, or the store does not honour conditional writes; run 's3lect "
             "check-store <lock URL>'",
             (long long)((now - e->refused_since) / 1000), (long long)e->refused_n);
    set_error(e, S3LECT_EPRECONDITION, msg);
    e->error_is_write = 1;
    report(e, now, EL_REP_REFUSED, S3LECT_EPRECONDITION, msg);
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
static int64_t write_gate(const el_engine *e)
{
    int64_t g =
        e->backoff_until > e->write_backoff_until ? e->backoff_until : e->write_backoff_until;
    return g > e->slow_until ? g : e->slow_until;
}

static void announce(el_engine *e, const char *id, const char *addr, int64_t term)
{
    if (e->ann_valid && u_streq(e->ann_id, id) && u_streq(e->ann_addr, addr) && e->ann_term == term)
        return;
    u_setstr(&e->ann_id, id ? id : "");
    u_setstr(&e->ann_addr, addr ? addr : "");
    e->ann_term = term;
    e->ann_valid = 1;
    emit(e, S3LECT_EVENT_LEADER_CHANGED, term, 0, id, addr);
}

static void forget_etag(el_engine *e)
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
    emit(e, S3LECT_EVENT_LOST, e->term, reason, e->id, e->addr);
    u_setstr(&e->led_etag, e->etag); /* the record we may reclaim (own_record) */
    forget_etag(e);
    schedule(e, EL_K_GET, now);
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
        emit(e, S3LECT_EVENT_ACQUIRED, term, 0, e->id, e->addr);
        ro_leading(e, now.mono);
    }
    announce(e, e->id, e->addr, term);
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

/* ---- follower ---------------------------------------------------------- */

/* The current record is one this process wrote (same id and incarnation),
 * not released, and carries the highest term we know. Writing over it with
 * If-Match is a renewal: the conditional write proves nobody wrote since, and
 * the record itself was a renewal or a takeover made under the rules, so
 * leading from the new write's send time is as safe as any renewal. This
 * "reclaim" keeps a node that stepped down (renewals timed out, a write
 * landed after its sender gave up, a pause) from waiting L on its own
 * record; it still writes a new term (acquire_term): the command run of the
 * old one was stopped. */
static int own_record(const el_engine *e)
{
    /* Only the very record we last held as leader (its etag unchanged: a
     * pause, or writes that failed without landing), never a later write of
     * ours that landed after we gave up on it: reclaiming those, which land
     * late again, would keep the record changing and starve every other node
     * of the L it needs to see it unchanged (the chaos suite's late-write
     * scenario). Such a record is treated like anyone's: wait L, new term. */
    int may = e->led_etag && e->etag && u_streq(e->etag, e->led_etag);
    return may && !e->corrupt && e->exists == 1 && !rec_released(&e->cur) &&
           u_streq(e->cur.leader_id, e->id) && u_streq(e->cur.incarnation, e->incarnation) &&
           e->cur.term >= e->max_term && e->cur.term > 0;
}

/* The term our next acquisition write carries: one more than the highest
 * we know, a reclaim of our own record included: a node that stepped down
 * has stopped (or is stopping) the command run of that term, and the one
 * it starts now is another leadership, with a fencing token of its own
 * (issue 38; docs/algorithm.md "Terms"). 0 when that cannot be written and
 * read back exactly (past REC_TERM_MAX, or a record whose term is already
 * past it): then no node takes the lock over, rather than repeat a term or
 * start again at 1. */
/* The first term of a lock this node creates (it found none): at least the
 * wall clock in ms. A lock deleted and created again must not repeat a term
 * that an earlier leadership of it carried (terms are fencing tokens), and
 * nothing of the old record is left to count from; its terms began at the
 * clock of its own creation and grew by one per leadership, so they stay
 * below this one as long as fewer than one leadership per ms went by on
 * average and the clocks of the two creators agree within the time between
 * (docs/algorithm.md "Terms"). A clock out of range gives no floor. */
static int64_t creation_floor(int64_t wall)
{
    return wall > 0 && wall < REC_TERM_MAX / 2 ? wall : 0;
}

static int64_t acquire_term(const el_engine *e, int64_t wall)
{
    if (e->exists == 1 && e->corrupt && e->cur.term_too_large)
        return 0;
    int64_t base = e->exists == 1 && !e->corrupt ? e->cur.term : 0;
    int64_t t = base > e->max_term ? base : e->max_term;
    if (t >= REC_TERM_MAX)
        return 0;
    int64_t floor = e->exists == 1 ? 0 : creation_floor(wall);
    return t + 1 > floor ? t + 1 : floor;
}

static void term_stuck_msg(const el_engine *e, char *msg, size_t n)
{
    if (e->exists == 1 && e->corrupt && e->cur.term_too_large)
        snprintf(msg, n,
                 "corrupt lock record: its term is 2^53 or more, past what a record holds "
                 "exactly: no node takes this lock over; start terms again on purpose with "
                 "'s3lect reset-term <lock URL>' (docs/cli.md)");
    else
        snprintf(
            msg, n,
            "the lock's term %lld is the largest a record holds exactly (2^53 - 1): no "
            "node takes this lock over with a higher one; stop its leader if one runs, "
            "then start terms again on purpose with 's3lect reset-term <lock URL>' (docs/cli.md)",
            (long long)(e->max_term > e->cur.term ? e->max_term : e->cur.term));
}

/* The lock is free or its holder dead, but its term cannot grow: report it
 * (rate-limited; kept in the status) and look again at the stable period. */
static void term_stuck(el_engine *e, int64_t now)
{
    char msg[400];
    term_stuck_msg(e, msg, sizeof msg);
    set_error(e, S3LECT_ECORRUPT, msg);
    report(e, now, EL_REP_RECORD, S3LECT_ECORRUPT, msg);
    e->stable = 0;
    schedule(e, EL_K_GET, now + u_jitter(&e->rng, e->p.infrequent, 0.1));
}

/* The takeover rule. Rule 1 (monotonic): the etag has not changed for L
 * since we first saw it. Rule 2 (wall clock, bounded skew): lastUpdated is
 * older than L + max_clock_skew. L is the larger of ours and the holder's
 * advertised leaseMs, so a holder with a longer renew deadline is respected. */
static int holder_presumed_dead(const el_engine *e, el_time now)
{
    int64_t L = e->p.lease;
    if (!e->corrupt && e->cur.lease_ms > L)
        L = e->cur.lease_ms;
    if (now.mono - e->first_seen >= L)
        return 1;
    /* Rule 2, opt-in (max_clock_skew > 0): trusts every node's wall clock to
     * within the skew bound, steps included. Off by default. */
    if (e->p.skew > 0 && !e->corrupt && now.wall - e->cur.last_updated_ms >= L + e->p.skew)
        return 1;
    return 0;
}

/* How long before its receipt a store read's record was certainly written,
 * by the store's own clock (S3: Date − Last-Modified; PostgreSQL: now() −
 * updated_at): the stamps are truncated to res, so the true age exceeds
 * their difference − res. Only for a foreign holder's record (not ours,
 * not released, not corrupt); 0 when the store gave no stamps (a peer
 * answer, DynamoDB, Route 53, the file store, a custom store).
 *
 * Capped at leaseMs' − holdMs (credit_cap; L' the lease the follower waits
 * for this record, holdMs how long after the write's send its writer's
 * leadership may still act: its command tree's kill deadline plus margin
 * under s3lect run, renew_deadline for a library node): whatever the store's
 * clock says — a Date that runs ahead of Last-Modified (front ends and
 * storage nodes without clock sync), a jump of any size — a follower counts
 * the lease from at most that much before the receipt of its first sight,
 * so it takes over no earlier than receipt + holdMs > send + holdMs: after
 * the old leader and everything it ran have stopped (issue 38;
 * docs/algorithm.md "The store's clock"). A record without holdMs (Go
 * s3lect, older versions) gets no credit. Never more than our own margin
 * L − renew_deadline either. */
static int64_t credit_cap(const el_engine *e)
{
    int64_t own = e->p.lease > e->p.renew_deadline ? e->p.lease - e->p.renew_deadline : 0;
    if (e->corrupt || e->cur.hold_ms <= 0)
        return 0;
    int64_t L = e->p.lease;
    if (e->cur.lease_ms > L)
        L = e->cur.lease_ms;
    int64_t cap = L > e->cur.hold_ms ? L - e->cur.hold_ms : 0;
    return cap < own ? cap : own;
}

static int64_t store_credit(const el_engine *e, const st_result *r)
{
    if (r->server_now_ms <= 0 || r->server_modified_ms <= 0 || r->server_res_ms <= 0 ||
        e->corrupt || rec_released(&e->cur) || u_streq(e->cur.leader_id, e->id))
        return 0;
    int64_t age = r->server_now_ms - r->server_modified_ms - r->server_res_ms;
    int64_t cap = credit_cap(e);
    if (age <= 0)
        return 0;
    return age < cap ? age : cap;
}

/* How old (by our wall clock) a changed record may look and still count as
 * fresh, which only chooses the poll period (stable or transition), never a
 * takeover: a wall-clock step here costs GETs, not safety. */
#define FRESH_TOLERANCE_MS 2000
static int looks_fresh(const el_engine *e, el_time now)
{
    int64_t tol = e->p.skew > 0 ? e->p.skew : FRESH_TOLERANCE_MS;
    return !e->corrupt && now.wall - e->cur.last_updated_ms <= e->p.renew_interval + tol;
}

static int64_t expiry_at(const el_engine *e)
{
    int64_t L = e->p.lease;
    if (!e->corrupt && e->cur.lease_ms > L)
        L = e->cur.lease_ms;
    return e->first_seen + L;
}

/* When a follower that saw a live holder reads the store next: after
 * `period` (±10 %), but never past the end of that record's lease, so that
 * a holder that froze, lost power or was cut off right after the read is
 * replaced at its lease, not a whole infrequent interval later (issue 38;
 * docs/algorithm.md "Polling"). A live holder's renewals keep moving the
 * lease's end, so this costs one read per lease at most. */
static int64_t stable_read_at(el_engine *e, el_time now, int64_t period)
{
    int64_t at = now.mono + u_jitter(&e->rng, period, 0.1);
    if (period == e->p.frequent) /* a roster member reads at its turn */
        at = ro_read_at(e, now, at);
    int64_t end = expiry_at(e);
    if (end >= at)
        return at;
    return end > now.mono ? end : now.mono;
}

/* The current record's leader is the one whose endpoint failed (pdown_*). */
static int peer_down_leader(const el_engine *e)
{
    return e->pdown_id && u_streq(e->pdown_id, e->cur.leader_id) &&
           u_streq(e->pdown_addr, e->cur.leader_addr) &&
           u_streq(e->pdown_inc, e->cur.incarnation) && e->pdown_term == e->cur.term;
}

/* Peer mode: a stable follower asks the leader (over HTTPS) instead of S3. */
static int peer_usable(const el_engine *e, int64_t now)
{
    int foreign = e->peer_off_id && u_streq(e->peer_off_id, e->cur.leader_id) &&
                  u_streq(e->peer_off_addr, e->cur.leader_addr);
    int down = peer_down_leader(e) && now < e->pdown_until;
    return e->p.peer && !e->corrupt && e->exists == 1 && !rec_released(&e->cur) &&
           e->cur.leader_addr && e->cur.leader_addr[0] && !u_streq(e->cur.leader_id, e->id) &&
           !foreign && !down;
}

/* A failed peer check of the current leader (on_peer): follow it through the
 * store at the frequent interval for a while. The same leader failing again
 * doubles the wait; another leader starts afresh. */
static void peer_down(el_engine *e, int64_t now, const st_result *r)
{
    if (!peer_down_leader(e)) {
        u_setstr(&e->pdown_id, e->cur.leader_id ? e->cur.leader_id : "");
        u_setstr(&e->pdown_addr, e->cur.leader_addr ? e->cur.leader_addr : "");
        u_setstr(&e->pdown_inc, e->cur.incarnation ? e->cur.incarnation : "");
        e->pdown_term = e->cur.term;
        e->pdown_wait = e->pdown_first > 0 ? e->pdown_first : EL_PEER_RETRY_MS;
        e->pdown_said = 0;
    } else {
        int64_t max = e->pdown_first > 0 ? 12 * e->pdown_first : EL_PEER_RETRY_MAX_MS;
        e->pdown_wait = e->pdown_wait * 2 > max ? max : e->pdown_wait * 2;
    }
    e->pdown_until = now + e->pdown_wait;
    e->pdown_since = now;
    e->pdown_unreachable = r->peer_failure == ST_PEER_UNREACHABLE;
    e->pdown_renewals = 0;
    u_setstr(&e->pdown_why, r->message ? r->message : "the peer check failed");
}

/* The leader whose endpoint could not be reached wrote its record again
 * (twice since the failure, so it was not a crash): say once, for this
 * leader, that followers read the store and what to do about it. */
static void peer_down_alive(el_engine *e)
{
    if (!e->pdown_unreachable || e->pdown_said || ++e->pdown_renewals < 2)
        return;
    e->pdown_said = 1;
    char port[16] = "";
    const char *addr = e->pdown_addr ? e->pdown_addr : "";
    const char *colon = strrchr(addr, ':');
    if (colon && colon[1])
        snprintf(port, sizeof port, "%s", colon + 1);
    char msg[1000];
    if (e->pdown_why && strstr(e->pdown_why, "closed during the TLS handshake"))
        /* Reached, then dropped before TLS by a live leader: what its peer
         * endpoint does with a connection beyond its table (issue 38). */
        snprintf(msg, sizeof msg,
                 "peer mode: leader '%.100s' holds the lock and renews it, but its peer endpoint "
                 "%.100s accepts this node's connections and closes them before the TLS "
                 "handshake (%.400s): its connection table is most likely full (512 "
                 "connections per process: many follower processes, or clients that hold "
                 "connections open). Following the lock through the store every "
                 "frequent_interval (%lld ms) instead, and trying the endpoint again now and "
                 "then; fewer follower processes per leader, or --no-peer on some, make room",
                 e->pdown_id ? e->pdown_id : "", addr, e->pdown_why, (long long)e->p.frequent);
    else
        snprintf(
            msg, sizeof msg,
            "peer mode: leader '%.100s' holds the lock and renews it, but its peer endpoint "
            "%.100s cannot be reached from this node (%.500s); following the lock through the "
            "store every frequent_interval (%lld ms) instead, and trying the endpoint again now "
            "and then. Let this node reach %.100s over TCP (open port %s on the leader's host "
            "and any firewall between), or turn peer mode off (s3lect run --no-peer; peer_mode "
            "0)",
            e->pdown_id ? e->pdown_id : "", addr, e->pdown_why ? e->pdown_why : "",
            (long long)e->p.frequent, addr, port[0] ? port : "of its address");
    emit_error(e, S3LECT_ETRANSIENT, msg);
}

/* The record we knew is gone (a read said "not found" after one that found
 * it). s3lect never deletes a lock: a release writes a released record. So
 * someone else removed it: a delete by hand, a lifecycle or TTL rule, a
 * store restarted without its data, a failover to a replica that missed
 * writes. Whatever we saw last (a live holder, a released record, our own),
 * another node may have written since, leads, and runs its command until its
 * next renewal is refused; that write was sent before the delete, so before
 * this answer, and its lease counts from its send: its holder has stopped by
 * now + its lease, at most max_lease_timeout (above which no record's leaseMs
 * is honoured anyway).
 * Until then the lock counts as held. The same holds for a node that saw
 * the lock missing, then had no answer for a while (blind ms: a partition,
 * a pause), so that another node may have made it, led, and lost it to a
 * second delete unseen. A node that has never seen a record (a fresh
 * cluster, a node started after the delete) cannot know: it waits
 * new_lock_wait once (new_lock below); one whose reads showed the lock
 * missing all along since then takes it. */
static void vanished(el_engine *e, int64_t now, int64_t blind)
{
    /* The unseen writer's lease may be longer than ours: wait the longest a
     * record's leaseMs is honoured (max_lease_timeout, 4 L by default). */
    int64_t L = cfg_max_lease_of(e->p.max_lease, e->p.lease);
    e->vanish_until = now + L;
    char last[200];
    if (blind > 0)
        snprintf(last, sizeof last,
                 "missing, %lld ms ago, with no answer since: a node may have made it "
                 "meanwhile",
                 (long long)blind);
    else if (e->corrupt)
        snprintf(last, sizeof last, "an unreadable record");
    else if (rec_released(&e->cur))
        snprintf(last, sizeof last, "released, term %lld", (long long)e->cur.term);
    else
        snprintf(last, sizeof last, "held by '%.100s', term %lld",
                 e->cur.leader_id ? e->cur.leader_id : "", (long long)e->cur.term);
    char msg[700];
    snprintf(msg, sizeof msg,
             "the lock object vanished from the store (last seen: %s): deleted by hand or by "
             "a lifecycle/TTL rule, or lost by the store (restarted without its data, flushed, "
             "failed over). Treating the lock as held for max_lease_timeout (%lld ms) so that any "
             "leader stops first, then taking it. Never delete a lock that is in use; "
             "docs/stores.md says what each store needs to keep it",
             last, (long long)L);
    u_setstr(&e->vanish_msg, msg);
    emit_error(e, S3LECT_ENOTFOUND, msg);
}

/* The lock is missing and this node has never seen it: a brand-new lock, or
 * one deleted (by hand, a lifecycle or TTL rule, a flushed or restarted
 * store) under a leader this node cannot see, which leads until its next
 * renewal is refused and whose work runs until its hold ends. No read tells
 * the two apart, so wait new_lock_wait (one lease by default: the longest a
 * leader with our timings may still act after its last write, which was
 * sent before the delete, so before this answer) and read at the usual pace
 * meanwhile: a record that appears is followed. A brand-new lock pays this
 * once, on its first start. */
static void new_lock(el_engine *e, int64_t now)
{
    e->new_lock_waited = 1;
    if (e->p.new_lock_wait <= 0)
        return;
    e->vanish_until = now + e->p.new_lock_wait;
    char msg[600];
    snprintf(msg, sizeof msg,
             "no lock in the store yet: creating it in %lld ms (new_lock_wait), unless a node "
             "does first. A lock deleted while its leader runs looks the same as a new one, and "
             "that leader stops by then; a brand-new lock waits this once. Set new_lock_wait to "
             "0 (s3lect --new-lock-wait 0) only where no leader of this lock can be running",
             (long long)e->p.new_lock_wait);
    u_setstr(&e->vanish_msg, msg);
    emit_error(e, S3LECT_ENOTFOUND, msg);
}

static void observe(el_engine *e, el_time now, const st_result *r)
{
    e->seen_wall = now.wall;
    if (r->outcome == ST_NOT_FOUND) {
        /* Missing after a record, or after so long without an answer (a
         * partition, a pause, failed reads) that a node may have made one
         * and had it deleted meanwhile. */
        int64_t blind = e->ever_known ? now.mono - e->answer_at : 0;
        if (e->rec_known || blind > e->p.frequent * 3 / 2)
            vanished(e, now.mono, e->rec_known ? 0 : blind);
        else if (!e->ever_known && !e->new_lock_waited)
            new_lock(e, now.mono);
        e->rec_known = 0;
        e->answer_at = now.mono;
        if (e->exists != 0 && e->ann_valid && e->ann_id && e->ann_id[0])
            announce(e, "", "", e->max_term);
        forget_etag(e);
        e->exists = 0;
        rec_clear(&e->cur);
        e->corrupt = 0;
        e->stable = 0;
        if (e->max_term >= REC_TERM_MAX) {
            /* Deleted after its term ran out: a reset by hand. Say so. */
            emit_error(e, S3LECT_ECORRUPT,
                       "the lock object was deleted after its term reached 2^53 - 1: terms "
                       "start again (the next from the creating node's clock in ms)");
            e->max_term = 0;
        }
        if (now.mono < e->vanish_until) {
            set_error(e, S3LECT_ENOTFOUND, e->vanish_msg); /* kept in the status */
            /* Read again at the usual pace meanwhile: a record that comes
             * back (a node that did not see it go writes one) is followed. */
            int64_t at = now.mono + u_jitter(&e->rng, e->p.frequent, 0.1);
            schedule(e, EL_K_GET, at < e->vanish_until ? at : e->vanish_until);
        } else if (now.mono < write_gate(e))
            schedule(e, EL_K_GET, write_gate(e));
        else
            schedule(e, EL_K_ACQUIRE, now.mono);
        return;
    }
    e->vanish_until = 0;
    e->rec_known = e->ever_known = 1;
    e->answer_at = now.mono;
    int changed = !e->etag || strcmp(e->etag, r->etag ? r->etag : "") != 0;
    if (changed) {
        u_setstr(&e->etag, r->etag ? r->etag : "");
        e->exists = 1;
        e->first_seen = e->seen_recv = now.mono;
        rec_clear(&e->cur);
        char err[700];
        e->corrupt = rec_parse(r->body, r->body_len, &e->cur, err, sizeof err) != 0;
        if (e->corrupt) {
            if (e->cur.term_too_large) {
                term_stuck_msg(e, err, sizeof err);
            } else {
                /* Say what happens next and what to do (issue 38). */
                size_t n = strlen(err);
                snprintf(err + n, sizeof err - n,
                         ": not an s3lect record; it is taken over once it has stood "
                         "unchanged for lease_timeout (%lld ms). If something else keeps "
                         "writing this key, give the lock another key or stop that writer",
                         (long long)e->p.lease);
            }
            set_error(e, S3LECT_ECORRUPT, err);
            report(e, now.mono, EL_REP_RECORD, S3LECT_ECORRUPT, err);
        } else {
            int64_t maxl = cfg_max_lease_of(e->p.max_lease, e->p.lease);
            if (e->cur.lease_ms > maxl) {
                char msg[300];
                snprintf(msg, sizeof msg,
                         "the record's leaseMs %lld ms is above max_lease_timeout %lld ms: read "
                         "as %lld ms (raise max_lease_timeout if a node really uses a lease "
                         "this long)",
                         (long long)e->cur.lease_ms, (long long)maxl, (long long)maxl);
                report(e, now.mono, EL_REP_RECORD, S3LECT_ECORRUPT, msg);
                e->cur.lease_ms = maxl;
            }
            if (e->cur.term < e->max_term && e->max_term >= REC_TERM_MAX) {
                /* Our highest term could not grow: only a reset (s3lect
                 * reset-term, or a writer that knows no terms) lowers the
                 * record's. Follow it, and say so: terms start again. */
                char msg[300];
                snprintf(msg, sizeof msg,
                         "the lock's term went back from %lld to %lld (s3lect reset-term): "
                         "terms start again from there",
                         (long long)e->max_term, (long long)e->cur.term);
                emit_error(e, S3LECT_ECORRUPT, msg);
                e->max_term = e->cur.term;
            }
            if (e->cur.term > e->max_term)
                e->max_term = e->cur.term;
            /* The successor key comes with store reads only (the endpoint
             * strips it): kept for that incarnation across peer answers. */
            if (e->cur.succ_key && e->cur.succ_key[0]) {
                u_setstr(&e->proof, e->cur.succ_key);
                u_setstr(&e->proof_inc, e->cur.incarnation ? e->cur.incarnation : "");
            }
            if (rec_released(&e->cur))
                announce(e, "", "", e->cur.term);
            else
                announce(e, e->cur.leader_id, e->cur.leader_addr, e->cur.term);
            if (u_streq(e->cur.leader_id, e->id) && !u_streq(e->cur.incarnation, e->incarnation) &&
                !rec_released(&e->cur) && !e->misconfig_reported) {
                char msg[700];
                snprintf(msg, sizeof msg,
                         "the lock names this server id '%.100s' with another incarnation "
                         "(%.40s): either an earlier run of this node (it was restarted while it "
                         "led, or the store restored an old record after a lossy failover: "
                         "harmless, the record is taken over when its lease ends), or another "
                         "process using the same id (give every process its own id)",
                         e->id, e->cur.incarnation);
                emit_error(e, S3LECT_EINVAL, msg);
                e->misconfig_reported = 1;
            }
        }
    }
    /* The store's clock: the record was written at least `credit` before
     * this answer arrived. A re-read of the same etag may tighten it (each
     * answer's bound holds by itself), never past the cap from the first
     * sight's receipt. */
    int64_t credit = store_credit(e, r);
    if (credit > 0 && now.mono - credit < e->first_seen) {
        int64_t floor_at = e->seen_recv - credit_cap(e);
        e->first_seen = now.mono - credit > floor_at ? now.mono - credit : floor_at;
    }
    if (e->corrupt && e->cur.term_too_large) {
        char msg[400]; /* kept in the status for as long as the record is there */
        term_stuck_msg(e, msg, sizeof msg);
        set_error(e, S3LECT_ECORRUPT, msg);
    }
    int free_now = !e->corrupt && rec_released(&e->cur);
    if (free_now || own_record(e) || holder_presumed_dead(e, now)) {
        if (!acquire_term(e, now.wall)) {
            term_stuck(e, now.mono);
            return;
        }
        e->stable = 0;
        if (now.mono < write_gate(e))
            schedule(e, EL_K_GET, write_gate(e));
        else
            schedule(e, EL_K_ACQUIRE, now.mono);
        return;
    }
    int fresh = looks_fresh(e, now);
    e->lost_races = 0; /* someone holds it: the races are over */
    e->refused_n = 0;  /* and our refused writes are explained */
    if (changed && fresh && e->p.peer && peer_down_leader(e) && e->store_fail_at > 0 &&
        e->store_fail_at >= e->pdown_since - e->p.frequent) {
        /* The endpoint failed while the store failed too (an outage: the
         * leader could not renew, this node could not read): the leader
         * renews again, so its endpoint is tried again now, not minutes
         * later (issue 38: 10,000 followers read the store at 490 GET/s
         * for 5 minutes after a 20 s outage). A leader that stepped down
         * meanwhile comes back with a new term: a fresh start anyway. */
        free(e->pdown_id);
        e->pdown_id = NULL;
    }
    if (changed && fresh) {
        e->stable = 1;
        int down = e->p.peer && peer_down_leader(e);
        if (down)
            peer_down_alive(e);
        if (peer_usable(e, now.mono))
            schedule(e, EL_K_PEER, now.mono); /* long-poll the leader instead of S3 */
        else if (down) {     /* its endpoint failed: the store, as often as in transition */
            ro_want(e, now); /* taking turns with the other followers that read it */
            schedule(e, EL_K_GET, stable_read_at(e, now, e->p.frequent));
        } else
            schedule(e, EL_K_GET, stable_read_at(e, now, e->p.infrequent));
    } else {
        e->stable = 0;
        int64_t at = ro_read_at(e, now, now.mono + u_jitter(&e->rng, e->p.frequent, 0.1));
        if (expiry_at(e) < at)
            at = expiry_at(e);
        schedule(e, EL_K_GET, at);
    }
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
        clear_read_error(e);
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
                end_cycle(e);
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
                /* Our last write still stands; the renewal did not land. */
                schedule(e, EL_K_RENEW, now.mono);
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
                schedule(e, EL_K_RENEW, now.mono);
                return;
            }
            step_down(e, S3LECT_LOST_LOST_RACE, now.mono);
        }
        observe(e, now, r);
        if (watch && e->att.active && e->next_kind == EL_K_GET) {
            int64_t step = e->p.renew_deadline / 4 > 250 ? e->p.renew_deadline / 4 : 250;
            int64_t at = now.mono + step < watch_until ? now.mono + step : watch_until - 1;
            if (at > now.mono && at < e->next_at)
                e->next_at = at;
        }
        end_cycle(e);
        return;
    }
    if (r->outcome == ST_AUTH && e->role == EL_FOLLOWER && e->exists != 1 &&
        !e->auth_create_tried) {
        /* With only s3:GetObject, S3 answers 403 (not 404) for a missing key.
         * Creating with If-None-Match: * can never overwrite anything, so try
         * it once: it succeeds on a new lock, 412s on an existing one (then
         * the read error is real), or fails with AUTH too. */
        e->auth_create_tried = 1;
        set_error(e, S3LECT_EAUTH, r->message);
        forget_etag(e);
        e->exists = 0;
        schedule(e, EL_K_ACQUIRE, now.mono);
        return;
    }
    int n = note_failure(e, now.mono, r, 0);
    int64_t delay =
        (r->outcome == ST_TRANSIENT && n <= 3) ? el_retry_delay(e, n) : read_backoff(e, n);
    if (e->role == EL_LEADER) {
        schedule(e, EL_K_VERIFY, now.mono + leader_retry_delay(e, now.mono, n));
        return;
    }
    e->stable = 0;
    schedule(e, EL_K_GET, now.mono + delay);
    if (n == 3 || r->outcome != ST_TRANSIENT)
        end_cycle(e);
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
        schedule(e, EL_K_GET, now.mono);
        return;
    }
    if (r->outcome == ST_OK && r->etag && r->etag[0]) {
        st_result obs = *r;
        obs.outcome = ST_OK;
        /* The leader's word carries no store stamps: its etag's lease is
         * counted from this receipt (never backdated). */
        obs.server_now_ms = obs.server_modified_ms = obs.server_res_ms = 0;
        observe(e, now, &obs);
        end_cycle(e);
        return;
    }
    if (r->outcome == ST_OK) {
        /* The leader answered but cannot long-poll (no etag: Go s3lect).
         * Follow it through the store at the stable period, as without
         * peer mode, until the record names another leader. */
        u_setstr(&e->peer_off_id, e->cur.leader_id ? e->cur.leader_id : "");
        u_setstr(&e->peer_off_addr, e->cur.leader_addr ? e->cur.leader_addr : "");
        schedule(e, EL_K_GET, stable_read_at(e, now, e->p.infrequent));
        end_cycle(e);
        return;
    }
    /* 404 "not leading" is news, not a failure; a check cut short by a
     * stop neither (peer_failure 0). */
    if (r->peer_failure != ST_PEER_OK)
        peer_down(e, now.mono, r);
    e->stable = 0;
    int64_t at = now.mono;
    if (r->peer_failure != ST_PEER_OK && e->ro.member)
        at = stable_read_at(e, now, e->p.frequent); /* at its turn, capped at the lease's end */
    if (r->peer_failure == ST_PEER_OK && r->peer_yield) {
        /* Another follower was named to take over first (docs/peer.md "One
         * successor"): read a frequent interval later (jittered by a third,
         * so that the yielders of many released locks do not read together
         * while the successors write), and most likely find it leading
         * rather than race it to write the released record. */
        at += u_jitter(&e->rng, e->p.frequent, 1.0 / 3);
    }
    schedule(e, EL_K_GET, at);
}

static void on_acquire(el_engine *e, el_time now, const st_result *r)
{
    if (r->outcome == ST_OK) {
        clear_error(e);
        write_succeeded(e);
        e->lost_races = 0;
        el_attempt a = e->att;
        memset(&e->att, 0, sizeof e->att);
        if (now.mono < a.sent_at + e->p.renew_deadline) {
            become_leader(e, r->etag, a.sent_at, a.term, a.body, now);
        } else {
            /* The write took longer than our own lease: never lead on it. */
            forget_etag(e);
            schedule(e, EL_K_GET, now.mono);
        }
        free(a.body);
        end_cycle(e);
        return;
    }
    if (r->outcome == ST_PRECONDITION || r->outcome == ST_NOT_FOUND) {
        clear_error(e);
        if (r->outcome == ST_PRECONDITION)
            note_refused(e, now.mono);
        /* Keep the attempt: a 412 may answer a resent copy of this write
         * whose first copy landed (see on_renew); the read tells. */
        if (r->outcome == ST_NOT_FOUND)
            attempt_clear(&e->att);
        /* Another node won: re-read at once. A store that keeps refusing our
         * writes while reads show the lock free would make that a hot loop,
         * so after a few lost races in a row wait a poll period. */
        e->lost_races++;
        schedule(e, EL_K_GET,
                 now.mono + (e->lost_races < 3 ? 0 : u_jitter(&e->rng, e->p.frequent, 0.1)));
        end_cycle(e);
        return;
    }
    int n = note_failure(e, now.mono, r, 1);
    write_failed(e, now.mono);
    /* No HTTP answer at all (a timeout, a dropped connection): the write
     * may still be in flight and land late; a 5xx was not applied. */
    e->att.unanswered = r->outcome == ST_TRANSIENT && r->http_status == 0;
    if (r->outcome == ST_TRANSIENT) {
        /* It may have landed (a timeout, a 409): keep the attempt, the next
         * read tells. The next write waits for the back-off. */
        schedule(e, EL_K_GET, now.mono + (n <= 3 ? el_retry_delay(e, n) : e->p.frequent));
    } else {
        attempt_clear(&e->att);
        schedule(e, EL_K_GET, now.mono + u_jitter(&e->rng, e->p.frequent, 0.1));
    }
    e->stable = 0;
    end_cycle(e);
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
    report(e, now, EL_REP_LATENCY, S3LECT_ETRANSIENT, msg);
}

static void on_renew(el_engine *e, el_time now, const st_result *r)
{
    if (e->role != EL_LEADER)
        return;
    if (r->outcome == ST_OK) {
        clear_error(e);
        write_succeeded(e);
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
        end_cycle(e);
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
        clear_error(e);
        note_refused(e, now.mono);
        e->att.refused = 1;
        schedule(e, EL_K_VERIFY, now.mono);
        return;
    }
    if (r->outcome == ST_NOT_FOUND) {
        attempt_clear(&e->att);
        step_down(e, S3LECT_LOST_LOST_RACE, now.mono);
        end_cycle(e);
        return;
    }
    int n = note_failure(e, now.mono, r, 1);
    int64_t delay = leader_retry_delay(e, now.mono, n);
    if (r->outcome == ST_TRANSIENT) {
        /* Unknown outcome (the attempt is kept): read before writing again. */
        schedule(e, EL_K_VERIFY, now.mono + delay);
    } else {
        schedule(e, EL_K_RENEW, now.mono + delay);
    }
}

static void finish_stop(el_engine *e)
{
    e->role = EL_STOPPED;
    if (e->stop_was_leader)
        emit(e, S3LECT_EVENT_LOST, e->term, S3LECT_LOST_STOPPED, e->id, e->addr);
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
        note_failure(e, now.mono, r, 1);
    forget_etag(e); /* the next read parses the released record afresh */
    if (e->role == EL_STOPPING) {
        finish_stop(e);
        return;
    }
    /* Released after a veto: back off, then read. */
    schedule(e, EL_K_GET, e->backoff_until);
    end_cycle(e);
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
            report(e, now.mono, EL_REP_LATENCY, S3LECT_ETRANSIENT, msg);
        }
        e->renew_tried = 0;
        end_cycle(e);
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
        report(e, now.mono, EL_REP_LATENCY, S3LECT_ETRANSIENT, msg);
        e->renew_tried = 0;
        end_cycle(e);
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
            emit(e, S3LECT_EVENT_LOST, e->term, S3LECT_LOST_HOOK_FAILED, e->id, e->addr);
            e->role = EL_FOLLOWER;
            e->stable = 0;
            e->backoff_until = now.mono + u_jitter(&e->rng, e->p.frequent, 0.1);
            if (e->etag && issue_release(e, now, op) > 0)
                return op->kind;
            forget_etag(e);
            schedule(e, EL_K_GET, e->backoff_until);
        }
    }
    if (now.mono < e->next_at) {
        int k = ro_next(e, now, op); /* the roster's turn, between the lock's steps */
        if (k)
            return k;
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
            schedule(e, EL_K_GET, now.mono + e->p.frequent);
            *wake = e->next_at;
            return EL_OP_NONE;
        }
        /* One more than any term we know, or the record's own (a reclaim:
         * a renewal of our own record); never one past REC_TERM_MAX. */
        int64_t term = acquire_term(e, now.wall);
        if (!term) {
            term_stuck(e, now.mono);
            *wake = e->next_at;
            return EL_OP_NONE;
        }
        if (prepare_attempt(e, now, 0, term) != 0) {
            schedule(e, EL_K_GET, now.mono + e->p.frequent);
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
            schedule(e, EL_K_RENEW, now.mono + 100);
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
        int64_t left = expiry_at(e) - now.mono;
        if (e->role == EL_FOLLOWER && left > 0 && peer_usable(e, now.mono)) {
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
