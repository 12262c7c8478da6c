/* SPDX-License-Identifier: Apache-2.0 */
/* el_internal.h - what the engine's files (election.c, el_events.c) share;
 * not for the layers above, which use election.h. */
#ifndef S3LECT_EL_INTERNAL_H
#define S3LECT_EL_INTERNAL_H

#include <stdint.h>

#include "election.h"

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

#endif
