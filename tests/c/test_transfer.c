/* SPDX-License-Identifier: Apache-2.0 */
/* Transfer, preference and maximum tenure in the engine (el_transfer.c;
 * docs/algorithm.md "Transfer"): several engines on one in-memory store in
 * simulated time, without peer mode (the peer path is tested with real
 * processes in tests/cli/test_cli_transfer.py). After every step: never two
 * engines that lead at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election.h"
#include "s3lect.h"
#include "testutil.h"

#define N 3
#define WALL0 1700000000000LL

typedef struct store {
    int exists;
    char body[8192];
    size_t len;
    char etag[32];
    int ctr, puts, gets;
} store;

typedef struct node {
    el_engine e;
    int alive;      /* 0: frozen (never stepped again) */
    int64_t wake;   /* mono ms of its next step */
    int transfer_n; /* TRANSFER events seen */
    int acquired, lost_transferred;
    char target[64]; /* the last TRANSFER event's target */
    int auto_commit; /* commit at the TRANSFER event (the application stopped) */
} node;

typedef struct world {
    store s;
    node n[N];
    int64_t now;
    int two_leaders;
    int64_t transfers; /* LOST(transferred) in total */
} world;

static void store_do(store *s, const el_op *op, st_result *r)
{
    memset(r, 0, sizeof *r);
    if (op->kind == EL_OP_GET) {
        s->gets++;
        if (!s->exists) {
            r->outcome = ST_NOT_FOUND;
            return;
        }
        st_result_set_body(r, s->body, s->len);
        st_result_set_etag(r, s->etag);
        r->outcome = ST_OK;
        return;
    }
    s->puts++;
    int ok = op->if_match ? s->exists && !strcmp(op->if_match, s->etag) : !s->exists;
    if (!ok) {
        r->outcome = ST_PRECONDITION;
        return;
    }
    memcpy(s->body, op->body, op->body_len);
    s->len = op->body_len;
    s->exists = 1;
    snprintf(s->etag, sizeof s->etag, "\"%d\"", ++s->ctr);
    st_result_set_etag(r, s->etag);
    r->outcome = ST_OK;
}

static el_params params(void)
{
    el_params p = {0};
    p.lease = 15000;
    p.renew_interval = 5000;
    p.renew_deadline = 10000;
    p.frequent = 5000;
    p.infrequent = 30000;
    p.release_timeout = 3000;
    p.request_timeout = 10000;
    return p;
}

static void world_init(world *w, const int64_t *prio)
{
    memset(w, 0, sizeof *w);
    w->now = 1000;
    static const char *const ids[N] = {"a", "b", "c"};
    static const char *const incs[N] = {"1a", "1b", "1c"};
    for (int i = 0; i < N; i++) {
        el_params p = params();
        p.priority = prio ? prio[i] : 0;
        el_init(&w->n[i].e, &p, ids[i], "", incs[i], 7 + (uint64_t)i);
        el_set_process(&w->n[i].e, i == 0 ? "0a0a" : i == 1 ? "0b0b" : "0c0c");
        w->n[i].alive = 1;
        w->n[i].auto_commit = 1;
    }
}

static void world_free(world *w)
{
    for (int i = 0; i < N; i++)
        el_free(&w->n[i].e);
}

static void drain(world *w, node *n)
{
    size_t k = 0;
    el_event *ev = el_take_events(&n->e, &k);
    for (size_t i = 0; i < k; i++) {
        if (ev[i].type == S3LECT_EVENT_TRANSFER) {
            n->transfer_n++;
            snprintf(n->target, sizeof n->target, "%s", ev[i].leader_id ? ev[i].leader_id : "");
            if (n->auto_commit)
                CHECK(el_transfer_commit(&n->e) == 0, "commit after the TRANSFER event");
        }
        if (ev[i].type == S3LECT_EVENT_ACQUIRED)
            n->acquired++;
        if (ev[i].type == S3LECT_EVENT_LOST && ev[i].reason == S3LECT_LOST_TRANSFERRED) {
            n->lost_transferred++;
            w->transfers++;
        }
        el_event_clear(&ev[i]);
    }
    free(ev);
}

/* One step of node i at w->now: every op it issues now is answered at once
 * (after `lat` ms). */
static void step(world *w, int i)
{
    node *n = &w->n[i];
    for (int guard = 0; guard < 50; guard++) {
        el_op op;
        int64_t wake = 0;
        int k = el_next(&n->e, (el_time){w->now, WALL0 + w->now}, &op, &wake);
        drain(w, n);
        if (k == EL_OP_NONE || k == EL_OP_DONE) {
            n->wake = k == EL_OP_DONE ? INT64_MAX : wake;
            return;
        }
        st_result r;
        store_do(&w->s, &op, &r);
        el_complete(&n->e, (el_time){w->now + 2, WALL0 + w->now + 2}, &r);
        st_result_clear(&r);
        drain(w, n);
    }
    n->wake = w->now + 1;
}

static int leader_of(world *w)
{
    int who = -1, count = 0;
    for (int i = 0; i < N; i++)
        if (w->n[i].alive && el_is_leader(&w->n[i].e, w->now)) {
            who = i;
            count++;
        }
    if (count > 1)
        w->two_leaders++;
    return who;
}

/* Runs every live node until `until`, stepping time to the earliest wake. */
static void run(world *w, int64_t until)
{
    while (w->now < until) {
        int64_t next = until;
        for (int i = 0; i < N; i++)
            if (w->n[i].alive && w->n[i].wake < next)
                next = w->n[i].wake;
        if (next > w->now)
            w->now = next;
        for (int i = 0; i < N; i++)
            if (w->n[i].alive && w->n[i].wake <= w->now)
                step(w, i);
        leader_of(w);
    }
}

/* Runs until node `who` (-1: any) leads (or until): the time it took, or -1. */
static int64_t run_until_leads(world *w, int who, int64_t until)
{
    int64_t t0 = w->now;
    while (w->now < until) {
        run(w, w->now + 10);
        int l = leader_of(w);
        if (l == who || (who < 0 && l >= 0))
            return w->now - t0;
    }
    return -1;
}

/* a alone first: it creates the lock; then the others (those in `join`)
 * follow for `settle` ms. */
static void start_with(world *w, const int *join, int64_t settle)
{
    w->n[1].alive = w->n[2].alive = 0;
    run(w, w->now + 20000);
    CHECK(leader_of(w) == 0, "a leads");
    for (int i = 1; i < N; i++)
        if (join[i]) {
            w->n[i].alive = 1;
            w->n[i].wake = w->now;
        }
    run(w, w->now + settle);
}

static void start_with_leader_a(world *w)
{
    static const int all[N] = {1, 1, 1};
    start_with(w, all, 40000); /* b and c read it and settle (stable) */
    CHECK(leader_of(w) == 0, "a still leads");
}

static void t_transfer_to_named(void)
{
    world w;
    world_init(&w, NULL);
    start_with_leader_a(&w);
    int64_t term = w.n[0].e.term;
    CHECK(el_transfer(&w.n[0].e, "a", w.now) == S3LECT_EINVAL, "a transfer to itself is refused");
    CHECK(el_transfer(&w.n[1].e, "c", w.now) == S3LECT_ENOTLEADER, "a follower cannot transfer");
    CHECK(el_transfer(&w.n[0].e, "b", w.now) == 0, "a transfer to b is under way");
    w.n[0].wake = w.now;
    int64_t t0 = w.now;
    int64_t took = run_until_leads(&w, 1, w.now + 60000);
    CHECK(took >= 0, "b leads after the transfer");
    /* b is a stable follower without a long poll: it sees the request at its
     * next read (at most a lease), confirms, and a sees that within a fast
     * poll; then the release is read within b's fast poll. */
    CHECK(took <= 15000 + 2000, "b leads %lld ms after the request (bound: a lease + 2 s)",
          (long long)took);
    CHECK(w.n[0].transfer_n == 1 && strcmp(w.n[0].target, "b") == 0,
          "a's TRANSFER event named b (%d, %s)", w.n[0].transfer_n, w.n[0].target);
    CHECK(w.n[0].lost_transferred == 1, "a lost leadership as transferred");
    CHECK(w.n[1].e.term > term, "b leads with a greater term (%lld > %lld)",
          (long long)w.n[1].e.term, (long long)term);
    CHECK(w.two_leaders == 0, "never two leaders (%d steps)", w.two_leaders);
    /* It stays with b: c does not take the lock, a does not take it back. */
    run(&w, w.now + 120000);
    CHECK(leader_of(&w) == 1, "b still leads two minutes later");
    CHECK(w.n[2].acquired == 0, "c never led");
    CHECK(w.now - t0 > 0 && w.two_leaders == 0, "never two leaders afterwards");
    world_free(&w);
}

/* Handed back within a lease: the node that gave the lock away takes the
 * release reserved for it at once (its own "not before a lease" rule is for
 * releases that are not its). */
static void t_transfer_back(void)
{
    world w;
    world_init(&w, NULL);
    start_with_leader_a(&w);
    CHECK(el_transfer(&w.n[0].e, "b", w.now) == 0, "a transfer to b is under way");
    w.n[0].wake = w.now;
    CHECK(run_until_leads(&w, 1, w.now + 60000) >= 0, "b leads");
    run(&w, w.now + 2000);
    CHECK(el_transfer(&w.n[1].e, "a", w.now) == 0, "a transfer back to a is under way");
    w.n[1].wake = w.now;
    int64_t took = run_until_leads(&w, 0, w.now + 60000);
    CHECK(took >= 0 && took <= 15000 + 2000, "a leads again %lld ms after the request",
          (long long)took);
    CHECK(w.n[2].acquired == 0 && w.two_leaders == 0, "c never led; never two leaders");
    world_free(&w);
}

static void t_unknown_target_refused(void)
{
    world w;
    world_init(&w, NULL);
    start_with_leader_a(&w);
    int64_t term = w.n[0].e.term;
    CHECK(el_transfer(&w.n[0].e, "nobody", w.now) == 0, "a transfer to 'nobody' is under way");
    w.n[0].wake = w.now;
    run(&w, w.now + 40000);
    CHECK(leader_of(&w) == 0 && w.n[0].e.term == term, "a keeps leading with its term");
    CHECK(w.n[0].transfer_n == 0 && w.transfers == 0, "no handover happened");
    rec r;
    CHECK(rec_parse(w.s.body, w.s.len, &r, NULL, 0) == 0, "the record parses");
    CHECK(r.xfer_err && strstr(r.xfer_err, "did not confirm"),
          "the record says why the transfer was refused: %s", r.xfer_err ? r.xfer_err : "");
    rec_clear(&r);
    world_free(&w);
}

static void t_target_dies_after_confirming(void)
{
    world w;
    world_init(&w, NULL);
    start_with_leader_a(&w);
    w.n[0].auto_commit = 0;
    CHECK(el_transfer(&w.n[0].e, "b", w.now) == 0, "a transfer to b is under way");
    w.n[0].wake = w.now;
    for (int i = 0; i < 6000 && w.n[0].transfer_n == 0; i++)
        run(&w, w.now + 10);
    CHECK(w.n[0].transfer_n == 1, "b confirmed");
    w.n[1].alive = 0; /* b freezes (or dies) right after confirming */
    CHECK(el_transfer_commit(&w.n[0].e) == 0, "a commits");
    w.n[0].wake = w.now;
    int64_t took = run_until_leads(&w, -1, w.now + 60000);
    CHECK(took >= 0 && leader_of(&w) != 1, "another node takes the released lock over");
    /* After the reservation (half a frequent interval) the release is an
     * ordinary one: a dead target costs what a release costs without a long
     * poll (here a, which reads at once, takes it back). */
    CHECK(took <= 15000 + 2500 + 1000, "a node leads %lld ms after the commit", (long long)took);
    CHECK(w.two_leaders == 0, "never two leaders");
    world_free(&w);
}

static void t_priority(void)
{
    int64_t prio[N] = {0, 0, 10};
    world w;
    world_init(&w, prio);
    static const int all[N] = {1, 1, 1};
    start_with(&w, all, 1000);
    /* c asks once it has followed for a lease, and a hands over at once
     * (it has led longer than a lease). */
    int64_t took = run_until_leads(&w, 2, w.now + 60000);
    CHECK(took >= 0, "the preferred node c leads (after %lld ms)", (long long)took);
    CHECK(w.transfers == 1, "one transfer (%lld)", (long long)w.transfers);
    /* And it stays there: no node of lower priority asks. */
    run(&w, w.now + 300000);
    CHECK(leader_of(&w) == 2 && w.transfers == 1, "c still leads; still one transfer (%lld)",
          (long long)w.transfers);
    CHECK(w.two_leaders == 0, "never two leaders");
    world_free(&w);
}

static void t_priority_flapping(void)
{
    /* c, preferred, restarts every 10 s (less than a lease): it never
     * follows for a lease, so it never asks; leadership does not move. */
    int64_t prio[N] = {0, 0, 10};
    world w;
    world_init(&w, prio);
    static const int ab[N] = {1, 1, 0};
    start_with(&w, ab, 40000);
    w.n[2].alive = 1;
    for (int round = 0; round < 20; round++) {
        el_free(&w.n[2].e);
        el_params p = params();
        p.priority = 10;
        char inc[16];
        snprintf(inc, sizeof inc, "2c%d", round);
        el_init(&w.n[2].e, &p, "c", "", inc, 100 + (uint64_t)round);
        w.n[2].wake = w.now;
        run(&w, w.now + 10000);
    }
    CHECK(w.transfers == 0, "a node that restarts every 10 s never gets the lock moved (%lld)",
          (long long)w.transfers);
    /* Once it stays up, it gets the lock within two leases or so. */
    int64_t took = run_until_leads(&w, 2, w.now + 60000);
    CHECK(took >= 0 && took <= 15000 + 15000 + 2000, "c leads %lld ms after it stays up",
          (long long)took);
    CHECK(w.transfers == 1, "then exactly one transfer");
    CHECK(w.two_leaders == 0, "never two leaders");
    world_free(&w);
}

static void t_max_hold(void)
{
    world w;
    world_init(&w, NULL);
    for (int i = 0; i < N; i++)
        w.n[i].e.p.max_hold = 60000;
    start_with_leader_a(&w);
    run(&w, w.now + 10 * 60000);
    /* Every leader hands over after a minute (plus the time a follower
     * needs to confirm): about 8-10 transfers in 10 minutes. */
    CHECK(w.transfers >= 6 && w.transfers <= 11, "%lld transfers in 10 minutes of 1-minute tenure",
          (long long)w.transfers);
    CHECK(w.two_leaders == 0, "never two leaders");
    world_free(&w);
}

int main(void)
{
    t_transfer_to_named();
    t_transfer_back();
    t_unknown_target_refused();
    t_target_dies_after_confirming();
    t_priority();
    t_priority_flapping();
    t_max_hold();
    return t_done("transfer");
}
