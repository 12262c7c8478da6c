/* SPDX-License-Identifier: Apache-2.0 */
/* el_events.c - what the engine tells its driver: the events it queues,
 * its rate-limited ERROR reports, and the error state the status shows
 * (failures, write back-off, refused writes). Part of election.c's state
 * machine (election.h, the engine's own section). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election.h"
#include "s3lect.h"

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

void el_emit(el_engine *e, int type, int64_t term, int reason, const char *id, const char *addr)
{
    el_event ev = {.type = type, .term = term, .reason = reason, .cycle = e->cycle};
    ev.leader_id = u_strdup(id ? id : "");
    ev.leader_addr = u_strdup(addr ? addr : "");
    push_event(e, &ev);
}

void el_emit_error(el_engine *e, int code, const char *msg)
{
    el_event ev = {.type = S3LECT_EVENT_ERROR, .code = code, .cycle = e->cycle};
    ev.message = u_strdup(msg ? msg : s3lect_strerror(code));
    push_event(e, &ev);
}

void el_report_error(el_engine *e, int code, const char *msg)
{
    el_emit_error(e, code, msg);
}

/* An ERROR event, at most one per class every EL_REP_EVERY_MS (a new error
 * code in a class goes out at once); the next one says how many were held. */
void el_report(el_engine *e, int64_t now, int cls, int code, const char *msg)
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
    el_emit_error(e, code, msg);
    e->rep_sent[cls] = 1;
    e->rep_at[cls] = now;
    e->rep_code[cls] = code;
    e->rep_suppressed[cls] = 0;
}

void el_end_cycle(el_engine *e)
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

void el_set_error(el_engine *e, int code, const char *msg)
{
    e->last_error = code;
    free(e->last_error_msg);
    e->last_error_msg = u_strdup(msg ? msg : "");
}

void el_clear_error(el_engine *e)
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
void el_clear_read_error(el_engine *e)
{
    if (e->error_is_write) {
        e->retry = 0;
        return;
    }
    el_clear_error(e);
}

/* Records a failed store operation and returns the retry number. ERROR events
 * (rate-limited per class) go out for every failed write, every AUTH/FATAL
 * failure and transient read failures once the quick retries are used up, so
 * a single blip of a read does not page anyone. */
int el_note_failure(el_engine *e, int64_t now, const st_result *r, int write)
{
    int code = outcome_code(r->outcome);
    const char *msg = r->message ? r->message : s3lect_strerror(code);
    el_set_error(e, code, msg);
    e->error_is_write = write;
    e->store_fail_at = now;
    e->consecutive_fails++;
    e->retry++;
    if (write || r->outcome != ST_TRANSIENT || e->retry >= 3)
        el_report(e, now, write ? EL_REP_WRITE : EL_REP_READ, code, msg);
    return e->retry;
}

/* After a failed acquisition or reclaim write: the next write waits
 * frequent · 2^(n−1) (n consecutive failures), at most max(lease, frequent)
 * (nobody can take a lock over faster than a lease anyway), ±20 %. Reads in
 * between are allowed: they tell whether an ambiguous write landed. */
void el_write_failed(el_engine *e, int64_t now)
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
void el_write_succeeded(el_engine *e)
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
void el_note_refused(el_engine *e, int64_t now)
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
    el_set_error(e, S3LECT_EPRECONDITION, msg);
    e->error_is_write = 1;
    el_report(e, now, EL_REP_REFUSED, S3LECT_EPRECONDITION, msg);
}
