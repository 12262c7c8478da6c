/* SPDX-License-Identifier: Apache-2.0 */
/* el_follow.c - the follower's side of the election (docs/algorithm.md
 * "Followers"): whose record it is, the next term, when a holder is
 * presumed dead (the store's clock credit included), when to read next,
 * following a leader whose peer endpoint failed, a vanished or brand-new
 * lock, and observe(): what one answer about the record means. Part of
 * election.c's state machine (election.h, the engine's own section). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "election.h"
#include "s3lect.h"

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

int64_t el_acquire_term(const el_engine *e, int64_t wall)
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
void el_term_stuck(el_engine *e, int64_t now)
{
    char msg[400];
    term_stuck_msg(e, msg, sizeof msg);
    el_set_error(e, S3LECT_ECORRUPT, msg);
    el_report(e, now, EL_REP_RECORD, S3LECT_ECORRUPT, msg);
    e->stable = 0;
    el_schedule(e, EL_K_GET, now + u_jitter(&e->rng, e->p.infrequent, 0.1));
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

int64_t el_expiry_at(const el_engine *e)
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
int64_t el_stable_read_at(el_engine *e, el_time now, int64_t period)
{
    int64_t at = now.mono + u_jitter(&e->rng, period, 0.1);
    if (period == e->p.frequent) /* a roster member reads at its turn */
        at = ro_read_at(e, now, at);
    int64_t end = el_expiry_at(e);
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

int el_peer_down_now(const el_engine *e, int64_t now)
{
    return e->p.peer && peer_down_leader(e) && now < e->pdown_until;
}

/* Peer mode: a stable follower asks the leader (over HTTPS) instead of S3. */
int el_peer_usable(const el_engine *e, int64_t now)
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
void el_peer_down(el_engine *e, int64_t now, const st_result *r)
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
    el_emit_error(e, S3LECT_ETRANSIENT, msg);
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
    el_emit_error(e, S3LECT_ENOTFOUND, msg);
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
    el_emit_error(e, S3LECT_ENOTFOUND, msg);
}

void el_observe(el_engine *e, el_time now, const st_result *r)
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
            el_announce(e, "", "", e->max_term);
        el_forget_etag(e);
        e->exists = 0;
        rec_clear(&e->cur);
        e->corrupt = 0;
        e->stable = 0;
        if (e->max_term >= REC_TERM_MAX) {
            /* Deleted after its term ran out: a reset by hand. Say so. */
            el_emit_error(e, S3LECT_ECORRUPT,
                          "the lock object was deleted after its term reached 2^53 - 1: terms "
                          "start again (the next from the creating node's clock in ms)");
            e->max_term = 0;
        }
        if (now.mono < e->vanish_until) {
            el_set_error(e, S3LECT_ENOTFOUND, e->vanish_msg); /* kept in the status */
            /* Read again at the usual pace meanwhile: a record that comes
             * back (a node that did not see it go writes one) is followed. */
            int64_t at = now.mono + u_jitter(&e->rng, e->p.frequent, 0.1);
            el_schedule(e, EL_K_GET, at < e->vanish_until ? at : e->vanish_until);
        } else if (now.mono < el_write_gate(e))
            el_schedule(e, EL_K_GET, el_write_gate(e));
        else
            el_schedule(e, EL_K_ACQUIRE, now.mono);
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
            el_set_error(e, S3LECT_ECORRUPT, err);
            el_report(e, now.mono, EL_REP_RECORD, S3LECT_ECORRUPT, err);
        } else {
            int64_t maxl = cfg_max_lease_of(e->p.max_lease, e->p.lease);
            if (e->cur.lease_ms > maxl) {
                char msg[300];
                snprintf(msg, sizeof msg,
                         "the record's leaseMs %lld ms is above max_lease_timeout %lld ms: read "
                         "as %lld ms (raise max_lease_timeout if a node really uses a lease "
                         "this long)",
                         (long long)e->cur.lease_ms, (long long)maxl, (long long)maxl);
                el_report(e, now.mono, EL_REP_RECORD, S3LECT_ECORRUPT, msg);
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
                el_emit_error(e, S3LECT_ECORRUPT, msg);
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
                el_announce(e, "", "", e->cur.term);
            else
                el_announce(e, e->cur.leader_id, e->cur.leader_addr, e->cur.term);
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
                el_emit_error(e, S3LECT_EINVAL, msg);
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
        el_set_error(e, S3LECT_ECORRUPT, msg);
    }
    int free_now = !e->corrupt && rec_released(&e->cur);
    int64_t look = 0;
    int64_t reserved = free_now ? xf_reserved_until(e, now, &look) : 0;
    if (reserved) {
        /* Handed to another follower (a transfer): it is theirs for a
         * moment. Read again then, or a frequent interval from now if that
         * is sooner (a node that gave the lock away leaves it alone for a
         * lease, but follows whoever took it). */
        e->stable = 0;
        int64_t next = now.mono + u_jitter(&e->rng, e->p.frequent, 0.1);
        if (look && look < next)
            next = look;
        el_schedule(e, EL_K_GET, reserved < next ? reserved : next);
        return;
    }
    if (free_now || own_record(e) || holder_presumed_dead(e, now)) {
        if (!el_acquire_term(e, now.wall)) {
            el_term_stuck(e, now.mono);
            return;
        }
        e->stable = 0;
        if (now.mono < el_write_gate(e))
            el_schedule(e, EL_K_GET, el_write_gate(e));
        else
            el_schedule(e, EL_K_ACQUIRE, now.mono);
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
    if (changed)
        xf_follower_observe(e, now);
    if (e->next_kind == EL_K_ACK && e->next_at <= now.mono)
        return; /* the confirmation goes first */
    if (changed && fresh) {
        e->stable = 1;
        int down = e->p.peer && peer_down_leader(e);
        if (down)
            peer_down_alive(e);
        if (el_peer_usable(e, now.mono))
            el_schedule(e, EL_K_PEER, now.mono); /* long-poll the leader instead of S3 */
        else if (down) {     /* its endpoint failed: the store, as often as in transition */
            ro_want(e, now); /* taking turns with the other followers that read it */
            el_schedule(e, EL_K_GET, el_stable_read_at(e, now, e->p.frequent));
        } else
            el_schedule(e, EL_K_GET, el_stable_read_at(e, now, e->p.infrequent));
    } else {
        e->stable = 0;
        int64_t at = ro_read_at(e, now, now.mono + u_jitter(&e->rng, e->p.frequent, 0.1));
        if (el_expiry_at(e) < at)
            at = el_expiry_at(e);
        el_schedule(e, EL_K_GET, at);
    }
    xf_follower_schedule(e, now);
}
