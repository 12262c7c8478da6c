/* SPDX-License-Identifier: Apache-2.0 */
/* election.h - the election as a pure state machine (sans I/O, DESIGN §4).
 *
 * The engine never reads a clock, sleeps, locks or does I/O. The driver (the
 * runtime, the simulation, the unit tests) loops:
 *
 *     el_next(e, now, &op, &wake)   -> EL_OP_GET / EL_OP_PUT: perform op, then
 *     el_complete(e, now, &result)     report its outcome with the time of receipt;
 *                                   -> EL_OP_NONE: call again at `wake` (or sooner
 *                                      after el_stop / el_veto / el_set_params);
 *                                   -> EL_OP_DONE: stopped.
 *
 * and drains e->events after every call. "now" for el_next must be read before
 * the request is sent, and for el_complete after the answer arrived: both
 * errors are on the safe side (see docs/algorithm.md).
 */
#ifndef S3LECT_ELECTION_H
#define S3LECT_ELECTION_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "store.h"
#include "util.h"

typedef struct el_params {
    int64_t lease;          /* L */
    int64_t renew_interval; /* leader rewrite period */
    int64_t renew_deadline; /* leader steps down after this long without a renewal */
    int64_t frequent;       /* follower poll period in transition */
    int64_t infrequent;     /* follower poll period when stable */
    int64_t skew;           /* max_clock_skew; 0 disables the wall-clock rule */
    int64_t release_timeout;
    int64_t request_timeout;
    int peer;          /* peer mode: stable followers long-poll the leader */
    int64_t peer_wait; /* long-poll wait */
    int64_t max_lease; /* a record's leaseMs is read as at most this (0: 4 × lease) */
    /* How long after the send of its last successful write this node's
     * leadership may still act (s3lect run: its command tree's kill
     * deadline plus margin); at least renew_deadline (0: renew_deadline).
     * Written in its records as holdMs; bounds the store-clock credit a
     * follower may give them (docs/algorithm.md "The store's clock"). */
    int64_t hold;
    /* A node that has never seen the lock and reads it missing waits this long
     * before creating it (0: creates it at once; the config's default is
     * max(lease, hold)): the lock may have been deleted under a leader it cannot
     * see, which runs until its next renewal is refused. */
    int64_t new_lock_wait;
    /* Preference (docs/algorithm.md "Transfer"): a follower whose priority
     * is higher than its leader's asks it for the lock; 0 everywhere keeps
     * the plain election. */
    int64_t priority;
    /* A leader that has held the lock this long hands it to a live
     * follower (0: never). */
    int64_t max_hold;
    /* The store's reads may be stale (Route 53): no transfers (requests
     * refused, no confirmation or nomination written). */
    int xfer_off;
} el_params;

/* A leader whose peer endpoint failed is followed through the store, and
 * its endpoint tried again after this long, doubling up to the max. */
#define EL_PEER_RETRY_MS (5 * 60 * 1000)
#define EL_PEER_RETRY_MAX_MS (60 * 60 * 1000)

typedef struct el_time {
    int64_t mono; /* monotonic ms */
    int64_t wall; /* wall-clock ms since the epoch */
} el_time;

enum { EL_OP_NONE = 0, EL_OP_GET = 1, EL_OP_PUT = 2, EL_OP_DONE = 3, EL_OP_PEER = 4 };

typedef struct el_op {
    int kind;
    const char *body; /* PUT body, owned by the engine until el_complete */
    size_t body_len;
    const char *if_match;   /* PUT: NULL = If-None-Match: * ; PEER: the etag we know */
    const char *peer_addr;  /* PEER: the leader's address */
    const char *peer_id;    /* PEER: the leader id we expect */
    const char *peer_key;   /* PEER: the record's peerKeySha256 to pin ("" = none) */
    const char *peer_inc;   /* PEER: the record's incarnation, names the elector ("" = none) */
    const char *peer_proof; /* PEER: the record's succKey from a store read ("" = none) */
    int64_t peer_wait;      /* PEER: long-poll wait */
    int64_t timeout_ms;
    /* GET, PUT: the object, NULL for the lock itself; else another object
     * of the same store (the followers' roster, engine/roster.h). */
    const char *key;
} el_op;

typedef struct el_event {
    int type; /* S3LECT_EVENT_* */
    int64_t term;
    int reason;
    int code;
    uint64_t cycle;
    char *leader_id;
    char *leader_addr;
    char *message;
} el_event;

void el_event_clear(el_event *ev);

enum el_role { EL_FOLLOWER = 0, EL_LEADER = 1, EL_STOPPING = 2, EL_STOPPED = 3 };
enum el_next_kind {
    EL_K_GET = 0,
    EL_K_ACQUIRE,
    EL_K_RENEW,
    EL_K_VERIFY,
    EL_K_RELEASE,
    EL_K_PEER,
    EL_K_ROSTER, /* a request for the roster (engine/roster.c) */
    EL_K_ACK     /* a follower's write of a transfer confirmation (el_transfer.c) */
};

/* A transfer (el_transfer.c; docs/algorithm.md "Transfer"). */
typedef struct el_xfer {
    /* Leader side: the request being served. */
    int active;
    char *to;                          /* the target id, "*" for the best live follower */
    char *n;                           /* its nonce */
    char *ack_id, *ack_inc, *ack_proc; /* the follower that confirmed ("" none) */
    int64_t ack_prio;
    int64_t since;    /* mono ms the request came */
    int announced;    /* a renewal carrying it landed */
    int polling;      /* the leader's read in flight looks for the confirmation */
    int64_t poll_gap; /* the wait before its next such read (doubles) */
    int ready;        /* confirmed: the TRANSFER event went out */
    int64_t ready_at; /* mono ms of that */
    int commit;       /* the application stopped its work: release to the target */
    /* The last request refused and why: written in our records until the next. */
    char *err_n, *err;
    int64_t led_since;  /* mono ms this leadership began */
    int64_t retry_at;   /* max_hold: no new attempt before this */
    int64_t gave_until; /* mono ms: this node handed the lock over; not its to take before */
    int64_t poked_at;   /* mono ms of the last el_poke that scheduled a read */
    /* Follower side. */
    char *acked;          /* the nonce we confirmed (or asked with: a nomination) */
    int64_t expect_until; /* mono ms until which we watch for the release */
    int64_t acked_at;     /* mono ms our confirmation landed */
    int64_t nominated_at; /* mono ms of our last nomination (0: none) */
    int64_t follow_since; /* mono ms since which we follow without a break */
    char *body;           /* the ACK write in flight */
    size_t body_len;
    char *proc; /* this process's token (peer.md "One successor"), "" none */
} el_xfer;

/* The followers' roster (engine/roster.h): who reads the store when. */
typedef struct el_roster {
    char *key;            /* its key in the store; NULL: no roster (off) */
    int off;              /* given up on: not a roster, refused, unusable */
    int member;           /* our last write put our entry there */
    int leaving;          /* this visit takes our entry out */
    int put;              /* the request in flight is the PUT */
    int tries;            /* PUTs refused (412) in this visit */
    int fails;            /* failed visits in a row */
    int64_t due;          /* mono ms of the next visit; 0: none planned */
    int64_t phase, every; /* a member reads when wall ms ≡ phase (mod every) */
    int64_t written_wall; /* wall ms of our last write of our entry */
    char *etag;           /* the roster's etag from this visit's GET (NULL: none) */
    char *body;           /* the PUT in flight */
} el_roster;

/* Our last write. If it failed ambiguously (timeout) and a later read returns
 * exactly this body, it landed, and it was sent no earlier than sent_at. */
typedef struct el_attempt {
    int active;
    char *body;
    size_t body_len;
    int64_t sent_at; /* mono ms at the first send of this body */
    int64_t term;
    int release;    /* the body is a released record */
    int refused;    /* a copy of it was answered 412 (resent copy, or lost race) */
    int unanswered; /* its failure had no HTTP answer: it may still land late */
} el_attempt;

typedef struct el_engine {
    el_params p;
    char *id, *addr, *incarnation;
    char *peer_key; /* our endpoint's key fingerprint, written in our records ("" = none) */
    /* A secret of this elector written in its records and never shown by
     * its peer endpoint: a follower proves it read the lock from the store
     * by presenting it, and only such a follower is named successor
     * (docs/peer.md "One successor"; issue 38). "" = none. */
    char *succ_key;
    /* The successor key of the record we follow, from a store read, and
     * the incarnation it belongs to (peer answers never carry it). */
    char *proof, *proof_inc;
    u_rng rng;

    int role;
    int stable; /* follower: last observation was a fresh change */
    int next_kind;
    int64_t next_at;
    int pending;           /* an op is in flight: its kind (EL_K_*) + 1, or 0 */
    int retry;             /* consecutive failures of the current step */
    int lost_races;        /* consecutive acquisitions that lost (PRECONDITION) */
    int auth_create_tried; /* tried If-None-Match after a 403 on read */
    int64_t backoff_until;
    int stop_requested, stop_release, stop_was_leader;
    int64_t last_body_wall;
    int veto_pending;

    /* What we know of the record. */
    int exists;         /* 1 object seen, 0 not found, -1 unknown */
    char *etag;         /* last seen (follower) or last written (leader) */
    int64_t first_seen; /* mono ms from which etag's lease is counted: the receipt of its
                         * first sight, backdated by its age on the store's clock for a
                         * foreign record (store_credit) */
    int64_t seen_recv;  /* mono ms of the receipt of the first sight of etag */
    int64_t seen_wall;  /* wall ms of the last read or write */
    rec cur;
    int corrupt;
    int64_t max_term;
    /* The record vanished (a delete by hand, a lifecycle rule, a store that
     * lost it) while another node held it: treated as held until this mono
     * ms (0: no hold). s3lect itself never deletes a lock. */
    int64_t vanish_until;
    int rec_known;       /* the last answer about the record (read or our write) found one */
    int ever_known;      /* some answer ever found one (or we wrote one) */
    int64_t answer_at;   /* mono ms of that last answer */
    char *vanish_msg;    /* what the status says meanwhile */
    int new_lock_waited; /* a never-seen lock: the new_lock_wait was begun */
    int64_t overdue_for; /* the seen_recv whose overdue renewal sent us to the store */

    /* Leader. */
    int64_t renewed_at; /* mono send time of the last successful write */
    int64_t term;       /* our term while leader */
    char *my_body;      /* the body of our last successful write (peer view) */
    /* The released record this node wrote last (its body and the store's
     * etag for it): what its peer endpoint hands the successor (docs/peer.md
     * "One successor"). NULL until a release is written; cleared when it
     * writes again. */
    char *rel_body, *rel_etag;
    el_attempt att;

    /* Peer mode: a leader whose endpoint answers without an etag (Go
     * s3lect's cannot long-poll) is followed through the store instead. */
    char *peer_off_id, *peer_off_addr;
    /* A leader whose endpoint failed a check (refused, timed out, TLS, an
     * unreadable answer; not a 404 "not leading") is followed through the
     * store at the frequent interval until mono ms pdown_until, after which
     * the peer is tried again (the wait doubles from EL_PEER_RETRY_MS to
     * EL_PEER_RETRY_MAX_MS while it keeps failing). Keyed by the leader's id,
     * address and incarnation; another leader starts afresh. */
    char *pdown_id, *pdown_addr, *pdown_inc;
    int64_t pdown_until, pdown_wait;
    int64_t pdown_first;   /* the first wait; 0: EL_PEER_RETRY_MS (tests shorten it) */
    int pdown_unreachable; /* the failure was connect/timeout: say so once it proves alive */
    int pdown_renewals;    /* changes of its record seen since (2: it is alive) */
    int pdown_said;        /* the fallback was reported for this leader */
    int64_t pdown_term;    /* the term of the leadership whose endpoint failed */
    int64_t pdown_since;   /* mono ms of the failure that started the fallback */
    /* mono ms of this node's last failed store request (0: none): a peer
     * check that failed while the store was failing too was the outage's,
     * not the endpoint's (issue 38: a read storm after an outage). */
    int64_t store_fail_at;
    char *pdown_why;

    /* Announced leader (for LEADER_CHANGED). */
    char *ann_id, *ann_addr;
    int64_t ann_term;
    int ann_valid;

    uint64_t cycle;
    int last_error;
    char *last_error_msg;
    int64_t consecutive_fails;
    int misconfig_reported;
    int error_is_write; /* last_error came from a write: a good read does not clear it */

    /* Back-off after failed writes (acquire/reclaim): attempts are spaced by
     * frequent · 2^(write_fails−1), capped, with jitter. */
    int write_fails;
    int64_t write_backoff_until;
    int renew_tried; /* a renewal was sent since the last successful write */
    char *led_etag;  /* etag of our last successful write when we stepped down */

    /* Hold-off after repeated LOST(renew_timeout): a store slower than
     * renew_deadline would otherwise make the node lead and step down (and
     * s3lect run restart its command) every second or two. slow_losses
     * counts such losses with no write answered in time in between; from
     * the second one the node neither writes nor leads on a landed write
     * until slow_until (renew_deadline, doubling, at most lease_timeout). */
    int slow_losses;
    int64_t slow_until;

    /* Writes answered 412 in a row while no live holder was seen in between
     * (another writer, or a store that does not honour conditional writes):
     * refused_n of them since mono time refused_since (0: none). */
    int64_t refused_n;
    int64_t refused_since;

    /* Rate-limited ERROR events, per class (EL_REP_*). */
    int64_t rep_at[5];
    int rep_code[5];
    int rep_sent[5];
    int64_t rep_suppressed[5];

    /* Host heartbeat (s3lect_require_heartbeat): with hb_timeout > 0 a node
     * whose host last confirmed at hb_at (mono ms) more than hb_timeout ago
     * neither renews nor acquires. Set by the driver before each el_next. */
    int64_t hb_timeout, hb_at;

    el_roster ro;
    el_xfer xf;
    int64_t renew_due; /* mono ms of the leader's next renewal */

    el_event *events;
    size_t nevents, capevents;
} el_engine;

int el_init(el_engine *e, const el_params *p, const char *id, const char *addr,
            const char *incarnation, uint64_t seed);
void el_free(el_engine *e);
/* Sets the address and peer key fingerprint our records carry (before the
 * first el_next: the runtime learns them when the peer endpoint is bound). */
int el_set_self(el_engine *e, const char *addr, const char *peer_key);
/* Names the followers' roster (engine/roster.h) next to the lock, by its
 * key in the same store (before the first el_next). Without it followers
 * read at independent random phases. */
int el_set_roster(el_engine *e, const char *key);
/* Sets the successor key our records carry (32 hex digits; before the
 * first el_next). */
int el_set_succ_key(el_engine *e, const char *key);
void el_set_params(el_engine *e, const el_params *p);

int el_next(el_engine *e, el_time now, el_op *op, int64_t *wake);
void el_complete(el_engine *e, el_time now, const st_result *res);
/* Requests a stop; with release, a leader writes a released record first. */
void el_stop(el_engine *e, int release);
/* The acquire hook vetoed leadership of `term`. */
void el_veto(el_engine *e, int64_t term);

/* Transfer (el_transfer.c). el_transfer asks this leader to hand the lock
 * to `to` (NULL or "": the best live follower); S3LECT_ENOTLEADER when it
 * does not lead, S3LECT_EINVAL for its own id or a malformed id. Once a
 * live follower confirms, a TRANSFER event goes out; the application stops
 * its leader work and calls el_transfer_commit, and the leader then writes
 * a released record reserved for that follower. */
int el_transfer(el_engine *e, const char *to, int64_t now);
int el_transfer_commit(el_engine *e);
/* The process token our confirmations carry (before the first el_next). */
int el_set_process(el_engine *e, const char *token);
/* A hint that a transfer request was written into this leader's record
 * (its peer endpoint, authenticated by the succKey): the leader reads the
 * record at once instead of at its next renewal, at most once a second.
 * 1 when a read was scheduled. */
int el_poke(el_engine *e, int64_t now);

/* 1 while this node holds a valid lease at mono time `now`. */
int el_is_leader(const el_engine *e, int64_t now);
/* 1 while the released record (after stop or a veto) is being written. */
int el_releasing(const el_engine *e);
/* Moves the queued events out: the caller owns the array and clears each. */
el_event *el_take_events(el_engine *e, size_t *n);
/* Public state (S3LECT_STATE_*). */
int el_state(const el_engine *e, int64_t now);

/* Queues an ERROR event for a failure the driver saw itself (peer mode). The
 * caller rate-limits. */
void el_report_error(el_engine *e, int code, const char *msg);

/* Since when (mono ms) every write of this node was answered 412 with no live
 * holder seen in between; 0 when the last write was not refused. */
int64_t el_refused_since(const el_engine *e);

/* The store answers again after an outage: a follower waiting out a read
 * back-off (or a write back-off) after failed requests reads no later than
 * mono `at` and may write from then on. Only brings steps forward: safe. */
void el_store_back(el_engine *e, int64_t now, int64_t at);

/* Delay before retry number `n` (1-based) of a failed store operation. */
int64_t el_retry_delay(el_engine *e, int n);

/* ---- the engine's own files (election.c, el_follow.c, el_events.c,
 * el_roster.c) share what follows; the layers above use what is before. */

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

/* Queues an event (LEADER_CHANGED, ACQUIRED, LOST) naming id and addr. */
void el_emit(el_engine *e, int type, int64_t term, int reason, const char *id, const char *addr);
/* Queues an ERROR event (not rate-limited). */
void el_emit_error(el_engine *e, int code, const char *msg);
/* An ERROR event, at most one per class (EL_REP_*) every EL_REP_EVERY_MS
 * (a new error code in a class goes out at once); the next one says how
 * many were held. */
void el_report(el_engine *e, int64_t now, int cls, int code, const char *msg);
/* One election cycle completed: a CYCLE event. */
void el_end_cycle(el_engine *e);
/* The error the status shows. */
void el_set_error(el_engine *e, int code, const char *msg);
void el_clear_error(el_engine *e);
/* A successful read clears the error state unless it came from a write. */
void el_clear_read_error(el_engine *e);
/* Records a failed store operation, reports it (rate-limited) and returns
 * the retry number. */
int el_note_failure(el_engine *e, int64_t now, const st_result *r, int write);
/* After a failed acquisition or reclaim write: the next write's back-off. */
void el_write_failed(el_engine *e, int64_t now);
/* A write answered in time. */
void el_write_succeeded(el_engine *e);
/* A write answered 412: said when every write is refused for EL_REFUSED_MS. */
void el_note_refused(el_engine *e, int64_t now);

/* Shared by election.c and el_follow.c (their definitions say more). */
/* The term of our next acquisition write; 0 when none can be written. */
int64_t el_acquire_term(const el_engine *e, int64_t wall);
/* A LEADER_CHANGED event when the leader, its address or term changed. */
void el_announce(el_engine *e, const char *id, const char *addr, int64_t term);
/* Mono ms at which the lease of the record we saw ends. */
int64_t el_expiry_at(const el_engine *e);
/* Forgets the etag we knew: the next read starts a fresh observation. */
void el_forget_etag(el_engine *e);
/* What one answer about the record (a read, a peer answer) means. */
void el_observe(el_engine *e, el_time now, const st_result *r);
/* The peer endpoint of the leader we follow failed a check. */
void el_peer_down(el_engine *e, int64_t now, const st_result *r);
/* The leader we follow is followed through the store because its peer
 * endpoint failed (until pdown_until). */
int el_peer_down_now(const el_engine *e, int64_t now);
/* A stable follower may long-poll its leader instead of reading the store. */
int el_peer_usable(const el_engine *e, int64_t now);
/* The next step (EL_K_*) and when. */
void el_schedule(el_engine *e, int kind, int64_t at);
/* A stable follower's next read: after period (a roster member: at its
 * turn), never past the lease's end. */
int64_t el_stable_read_at(el_engine *e, el_time now, int64_t period);
/* The lock is free but its term cannot grow: say so, look again later. */
void el_term_stuck(el_engine *e, int64_t now);
/* The earliest time the next acquisition write may go out. */
int64_t el_write_gate(const el_engine *e);

/* Transfer, the engine's side (el_transfer.c). */
/* The transfer fields of a body we write (leader: the request; released:
 * the reservation). Pointers into e, valid until e changes. */
void xf_fill(const el_engine *e, rec *r, int released, int64_t wall);
/* A record of ours that someone else rewrote (a request, a confirmation)
 * was adopted: take up what it asks. */
void xf_adopt(el_engine *e, const rec *x, int64_t now);
/* The leader's transfer steps (timeouts, max_hold, the confirmation
 * poll): may reschedule; returns 1 when the application committed and
 * the release to the target is due. */
int xf_leader_step(el_engine *e, el_time now);
/* The leader's poll read came back with its own record unchanged: the
 * next step (a poll or the renewal). */
void xf_poll_again(el_engine *e, int64_t now);
/* This node stops leading: forget the request. */
void xf_leader_end(el_engine *e, int64_t now);
/* A follower read a changed record: confirm a transfer asked of it,
 * or ask for the lock by priority (schedules EL_K_ACK). */
void xf_follower_observe(el_engine *e, el_time now);
/* A released record reserved for another follower: mono ms until which it
 * is not ours to take (0: free); *look: when to read again to find the
 * target leading (0: no sooner than that). */
int64_t xf_reserved_until(const el_engine *e, el_time now, int64_t *look);
/* After a follower's step was scheduled: a target watching for its release
 * reads often (or long-polls). */
void xf_follower_schedule(el_engine *e, el_time now);
/* A follower that confirmed a transfer and waits for its release. */
int xf_expecting(const el_engine *e, int64_t now);
int xf_issue_ack(el_engine *e, el_time now, el_op *op);
void xf_on_ack(el_engine *e, el_time now, const st_result *r);
void xf_free(el_xfer *x);

/* The followers' roster, the engine's side (el_roster.c; the object:
 * roster.h). */
/* Issues a roster request (GET or PUT of e->ro.key) when one is due and
 * the next store step is far enough away; returns op->kind or 0. */
int ro_next(el_engine *e, el_time now, el_op *op);
void ro_complete(el_engine *e, el_time now, const st_result *r);
/* A follower's check of its leader's endpoint failed, or it reads the store
 * at the frequent interval while stable because of it: join the roster if
 * not a member. */
void ro_want(el_engine *e, el_time now);
/* Its leader's endpoint answered: it reads the store no more, so it
 * leaves the roster (within an interval). */
void ro_peer_ok(el_engine *e, el_time now);
/* This node leads now: leave the roster (its phase is free). */
void ro_leading(el_engine *e, int64_t now);
/* When a member reads next after a read at `now`: the next time its phase
 * comes round at least half an interval from now; `fallback` when it is no
 * member. */
int64_t ro_read_at(el_engine *e, el_time now, int64_t fallback);

#endif
