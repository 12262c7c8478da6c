/* SPDX-License-Identifier: Apache-2.0 */
/* Deterministic simulation of many electors against a simulated linearizable
 * store, with latency, lost requests and replies, late-landing writes,
 * node<->store partitions, process pauses, clock rate error, wall-clock
 * skew and deletes of the lock object (by hand, a lifecycle rule, a store
 * that lost it; at most once per two leases and a poll). Checks, at every
 * event:
 *   - no two nodes report is_leader at the same true instant;
 *   - a node with a valid lease holds the highest term ever written;
 *   - terms in the store never decrease and grow on every change of holder;
 *   - every record written reads back (no term past 2^53 - 1);
 * and, after each fault phase heals, that a leader exists within a bound.
 * One seed in four starts next to a record whose term is at or near the
 * largest a record holds exactly (2^53 - 1, or past it as an older version
 * wrote): once the term cannot grow, nobody may take the lock over (no
 * liveness is expected) until an operator's reset (s3lect reset-term: a
 * released record with term 0, written once the record stood unchanged for
 * two leases), after which terms start again and a leader must follow.
 * Wall clocks are arbitrary (hours apart) and step by arbitrary amounts at
 * any time; machines suspend for up to two minutes (the lease clock,
 * CLOCK_BOOTTIME, counts the suspend). With default settings none of this may
 * cause a violation.
 *
 * It also checks that no node acquires before the kill deadline of an
 * earlier leader's command tree (s3lect run: renewed_at + L − (2·L/1000 +
 * 250 ms) on that leader's clock; docs/algorithm.md).
 *
 * The store has its own clock (docs/algorithm.md, "The store's clock"):
 * hours away from every node's, with a rate error up to 10⁻³; the S3 model
 * stamps each read with Date and the record's Last-Modified in whole seconds,
 * the PostgreSQL model with now() and updated_at in ms, and followers
 * backdate their first sight of a record by its age on that clock.
 *
 * Three modes prove that the assumptions are load-bearing: the checker must
 * find a violation (the test fails if it does not):
 *   --break-skew     the opt-in wall-clock rule (max_clock_skew 2 s) on, with
 *                    wall clocks apart and stepping by more than the bound;
 *   --break-suspend  the lease clock stops during a suspend (CLOCK_MONOTONIC
 *                    semantics instead of CLOCK_BOOTTIME);
 *   --break-new-lock  new_lock_wait 0: a node started right after a delete
 *                    (it never saw the lock) creates it at once, while the
 *                    old leader's command tree still runs (issue 38 item 3).
 *                    Otherwise every node waits the longest lease or hold
 *                    of the lock's nodes (its documented setting with mixed
 *                    timings); nodes restart (kill -9 and start) at random,
 *                    and often right after a delete.
 *   --break-fence    the leaders' fenced writes (engine/fence.h; every node's
 *                    command writes one data object while it believes it
 *                    leads) go out without the term check and without
 *                    If-Match, as a plain PUT: a zombie's late write then
 *                    lands after its successor's and the data object's term
 *                    goes down, which the checker must see. In every other
 *                    run the data object's versions must never go down in
 *                    term (docs/algorithm.md "Fenced writes").
 *   --break-store-clock  the records claim holdMs = renew_deadline while the
 *                    command tree lives to the default kill deadline (the cap
 *                    before issue 38): with the store's Date running ahead of
 *                    Last-Modified or jumping (as in every run), a takeover
 *                    comes before the old tree's kill deadline.
 *
 * --store picks the error classes of one backend (docs/stores.md):
 *   s3        (default) a conditional write on a missing object: not found;
 *   dynamodb  it is a precondition failure (ConditionalCheckFailed), and
 *             throttling (transient, not applied) comes in bursts;
 *   postgres  a precondition failure too (UPDATE of 0 rows); connections
 *             drop after the commit (applied, the answer lost) more often;
 *   route53   a precondition failure (the DELETE does not match), and reads
 *             are eventually consistent: a GET may answer with the state of
 *             up to --stale-ms earlier (default 10 s), not monotonically;
 *             writes are checked against the current state (the batch is
 *             atomic);
 *   gcs       a precondition failure (412 on ifGenerationMatch), etags are
 *             numeric generations, reads carry Date / Last-Modified (1 s),
 *             and the per-object write rate limit (429) comes in bursts;
 *   azure     answers as Azure Blob gives them, mapped by the store's own
 *             st_azure_outcome: a create that lost is 409 BlobAlreadyExists
 *             (a precondition failure), a stale If-Match 412, If-Match on a
 *             missing blob 404 BlobNotFound; reads carry Date /
 *             Last-Modified (1 s); 503 ServerBusy comes in bursts;
 *   etcd      a precondition failure (the txn's compare fails), etags are
 *             revisions (numbers that grow by more than one: other keys'
 *             writes count too), no stamps, and "no leader" unavailability
 *             (transient, not applied) comes in bursts (an etcd election);
 *   redis     a precondition failure (the script's "lost"), etags are random
 *             version tokens, reads carry TIME and the write's stamp (1 ms),
 *             connections drop after a script ran (applied, the answer lost)
 *             and LOADING/BUSY answers (transient, not applied) come in bursts;
 *   mysql     as postgres (an UPDATE of 0 rows; NOW(6) and updated_at in ms;
 *             connections killed after the commit), and lock wait timeouts
 *             and deadlocks (transient, not applied) come in bursts;
 *   k8s       a Kubernetes Lease: a lost create is 409 AlreadyExists, a stale
 *             resourceVersion 409 Conflict, a PUT on a deleted Lease 404 (all
 *             three a precondition failure), through the store's own mapping
 *             (st_k8s_outcome); etags are
 *             resourceVersions (etcd revisions: other objects' writes count
 *             too); no stamps; 429 (API priority and fairness) comes in
 *             bursts, and a write whose answer timed out (504: etcd slow
 *             behind the API server) may still have been applied.
 *
 *   test_sim [--seeds N] [--seconds S] [--seed X] [--shard K] [--nodes K]
 *            [--store s3|dynamodb|postgres|route53|gcs|azure|etcd|redis|mysql|k8s]
 *            [--stale-ms MS]
 *            [--break-skew | --break-suspend | --break-store-clock | --break-new-lock |
 *             --break-fence] [-v]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "election.h"
#include "fence.h"
#include "roster.h"
#include "store.h"
#include "s3lect.h"
#include "testutil.h"

#define MAXN 16
#define MAXHIST 512

enum {
    STORE_S3,
    STORE_DYNAMODB,
    STORE_POSTGRES,
    STORE_ROUTE53,
    STORE_GCS,
    STORE_AZURE,
    STORE_ETCD,
    STORE_REDIS,
    STORE_MYSQL,
    STORE_K8S
};
/* Lost creates the azure model answered 409 BlobAlreadyExists. */
static unsigned long long azure_409s;
/* The k8s model's answers: a lost create (409 AlreadyExists), a stale
 * resourceVersion (409 Conflict), a PUT on a deleted Lease (404). */
static unsigned long long k8s_exists, k8s_conflicts, k8s_gone;
/* Writes of the followers' roster (engine/roster.h), over all seeds. */
static unsigned long long roster_writes;
/* Transfers (docs/algorithm.md "Transfer"), over all seeds: asked (by the
 * operator model), committed by the node's application, handed over
 * (LOST(transferred)), and leaderships that began on a reserved release. */
static unsigned long long xf_asked, xf_commits, xf_done, xf_taken;
/* (xf_taken: acquisitions within 5 s of a handover.) */
/* Fenced writes of the data object, over all seeds: stored, refused before
 * sending (fenced; a deposed leader's: a newer leadership exists), refused
 * by the store's condition (412), skipped because the node no longer led;
 * and, with --break-fence, deposed leaders' writes that landed over a newer
 * term. */
static unsigned long long fd_writes, fd_fenced, fd_zombies, fd_conflicts, fd_notleader,
    fd_zombie_landed;

/* A past state of the store (route53: stale reads). */
typedef struct past_state {
    int64_t t; /* true µs at which it became the state */
    int exists;
    char *body;
    size_t body_len;
    char etag[32];
} past_state;

enum {
    EV_WAKE = 1,
    EV_APPLY,
    EV_REPLY,
    EV_CHECK,
    EV_LATE,
    EV_PEER_ARRIVE,
    EV_PEER_DEADLINE,
    EV_CLOCK_STEP,
    EV_RESET,      /* the operator resets an exhausted term (gen: the write it follows) */
    EV_STORE_JUMP, /* the store's clock, or its Date alone, jumps */
    EV_DELETE,     /* the lock object is deleted (by hand, a lifecycle rule, a lost store) */
    EV_RESTART,    /* a node's process is killed and started again: a fresh engine */
    EV_FD_START,   /* a node's command begins a fenced write (if it leads) */
    EV_FD_READ,    /* its read of the data object reaches the store */
    EV_FD_GOT,     /* the answer reaches the node: it decides and sends */
    EV_FD_PUT,     /* its conditional write reaches the store (late: body, if_match) */
    EV_TRANSFER,   /* the operator asks the leader to hand over (s3lect transfer) */
    EV_COMMIT      /* a node's application has stopped its work: commit the transfer */
};

/* A write that lands after its sender gave up on it. */
typedef struct late_write {
    char *body;
    size_t body_len;
    char *if_match;
} late_write;

typedef struct sim_ev {
    int64_t t; /* true time, µs */
    uint64_t seq;
    int type, node;
    uint64_t gen; /* WAKE: timer generation; APPLY/REPLY: op id */
    late_write *late;
} sim_ev;

typedef struct op_state {
    uint64_t id;
    int busy, kind;
    char *body;
    size_t body_len;
    char *if_match;
    int applied, drop_reply;
    int roster; /* a request for the roster object, not the lock */
    int64_t timeout_at;
    st_result res;
} op_state;

typedef struct node {
    el_engine eng;
    el_params p;
    double rate;      /* monotonic clock rate error */
    int64_t mono_off; /* µs */
    int64_t wall_off; /* µs */
    /* Suspends. With clock_stops (--break-suspend) the lease clock misses
     * the time spent suspended, as CLOCK_MONOTONIC does. */
    int clock_stops;
    int64_t susp_start, susp_end, susp_lost; /* true µs */
    int64_t paused_until, partitioned_until;
    double lat_mean; /* µs */
    uint64_t gen, op_seq;
    op_state op;
    char id[16];
    int64_t acquired_term;
    int64_t kill_at;    /* true µs: the kill deadline of its command tree while it led */
    int64_t kill_after; /* ms after a renewal's send at which s3lect run kills the tree */
    int tree_dead;      /* stopped for a transfer (committed): no tree until it leads again */
    /* Its command's fenced write of the data object (one at a time): the
     * term it writes in, what its read saw. fd_seq tells its events apart. */
    int fd_busy;
    uint64_t fd_seq;
    int64_t fd_term;
    int fd_read_done, fd_read_exists;
    char fd_read_etag[40];
    fn_header fd_read_hdr;
} node;

/* A follower's long-poll waiting at a (would-be) leader's endpoint. */
typedef struct peer_wait {
    int active;
    int follower, server;
    uint64_t op_id;
    char etag[32];
    int64_t deadline;
} peer_wait;

#define MAXWAIT (MAXN * 4)

typedef struct sim {
    int64_t xf_released_at; /* true µs of the last LOST(transferred) */
    u_rng g;
    int n, break_skew, break_suspend, break_store, break_new_lock, verbose;
    uint64_t restarts;
    node nodes[MAXN];
    sim_ev *heap;
    size_t nheap, capheap;
    uint64_t seq;
    int64_t t;
    /* The store. */
    int exists;
    char *body;
    size_t body_len;
    uint64_t etag_ctr;
    char etag[32];
    int64_t store_term;
    char store_holder[64];
    /* The store's clock: store_off + t · (1 + store_rate), µs; mod_us its
     * reading when the record was written. */
    int64_t store_off, mod_us;
    double store_rate;
    /* µs by which the Date of answers runs ahead (+) or behind (−) of the
     * clock that stamps Last-Modified (a front end and a storage node without
     * clock sync); it jumps now and then, as store_off does (issue 38). */
    int64_t date_off;
    uint64_t store_jumps, stamped_reads;
    /* The followers' roster: a second object of the same store, next to the
     * lock (peer-mode nodes take turns through it when their peer checks
     * fail). Plain compare-and-set; every write must be a roster. */
    int ro_exists;
    char *ro_body;
    size_t ro_len;
    char ro_etag[32];
    uint64_t ro_ctr;
    int64_t max_term_written;
    /* The data object the leaders' commands write, fenced (engine/fence.h):
     * its etag is a hash of its bytes, as an S3 ETag is their MD5. The
     * checker: along its versions the term never goes down, and one term
     * has one holder. */
    int break_fence;
    int fd_exists;
    char *fd_body;
    size_t fd_len;
    char fd_etag[40];
    int64_t fd_term;
    char fd_holder[16];
    /* Backend profile. */
    int store_kind;
    int64_t stale_us;
    past_state hist[MAXHIST];
    size_t nhist, hist_next;
    uint64_t stale_reads;
    /* Fault phases. */
    int chaos;
    int64_t phase_end, heal_at;
    double p_5xx, p_drop_req, p_drop_reply, p_late, p_spike;
    double p_resend; /* a PUT lands, and the answer is that of a resent copy */
    peer_wait waits[MAXWAIT];
    uint64_t peer_answers, peer_fallbacks;
    /* Results. */
    int violations;
    /* The highest term any node acquired since the last delete or reset:
     * every acquisition (a reclaim of one's own record included) must
     * carry a greater one (no two leaderships share a term). */
    int64_t max_acq_term;
    uint64_t steps, ops, faults, leader_changes, clock_steps, suspends;
    int64_t liveness_checks;
    /* Terms near the limit. */
    int near_limit;
    int64_t resets, exhausted_skips, acq_after_reset;
    int64_t deletes, last_delete; /* lock objects deleted; true µs of the last one */
    int64_t last_exhausted;       /* true µs of the last write at the limit, or reset */
} sim;

static double urand(sim *s)
{
    return (double)(u_rng_next(&s->g) >> 11) / (double)(1ULL << 53);
}

static int64_t ms_to_us(int64_t ms)
{
    return ms * 1000;
}

/* ---- heap ---- */

struct sim;
static int64_t max_lease(const struct sim *s);

static int ev_less(const sim_ev *a, const sim_ev *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void push_late(sim *s, int64_t t, int type, int node, uint64_t gen, late_write *lw)
{
    if (s->nheap == s->capheap) {
        s->capheap = s->capheap ? s->capheap * 2 : 64;
        s->heap = realloc(s->heap, s->capheap * sizeof *s->heap);
    }
    sim_ev ev = {t, s->seq++, type, node, gen, lw};
    size_t i = s->nheap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ev_less(&ev, &s->heap[p]))
            break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = ev;
}

static void push(sim *s, int64_t t, int type, int node, uint64_t gen)
{
    push_late(s, t, type, node, gen, NULL);
}

static sim_ev pop(sim *s)
{
    sim_ev top = s->heap[0], last = s->heap[--s->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->nheap)
            break;
        if (c + 1 < s->nheap && ev_less(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!ev_less(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->nheap)
        s->heap[i] = last;
    return top;
}

/* ---- clocks: true time in µs → node clocks in ms ---- */

/* µs of true time before t that the node's lease clock did not count. */
static int64_t clock_lost(const node *nd, int64_t t)
{
    if (!nd->clock_stops)
        return 0;
    int64_t cur = t <= nd->susp_start ? 0 : (t < nd->susp_end ? t : nd->susp_end) - nd->susp_start;
    return nd->susp_lost + cur;
}

static el_time node_now(const node *nd, int64_t t)
{
    el_time now;
    now.mono = (int64_t)floor((nd->mono_off + (double)(t - clock_lost(nd, t)) * (1.0 + nd->rate)) /
                              1000.0);
    now.wall = (nd->wall_off + t) / 1000;
    return now;
}

/* Earliest true time at which the node's monotonic clock reads `mono_ms`
 * (after the current suspend, if any). */
static int64_t true_at(const node *nd, int64_t mono_ms)
{
    double t = ((double)mono_ms * 1000.0 - nd->mono_off) / (1.0 + nd->rate);
    return (int64_t)ceil(t) + 1 + clock_lost(nd, nd->susp_end);
}

/* ---- checks ---- */

static void check_safety(sim *s, int who)
{
    int leaders = 0, first = -1;
    for (int i = 0; i < s->n; i++) {
        node *nd = &s->nodes[i];
        if (!el_is_leader(&nd->eng, node_now(nd, s->t).mono))
            continue;
        leaders++;
        if (first < 0)
            first = i;
        /* After a delete, terms may start lower (a node that did not see
         * the last term); the old leader keeps its own until it stops. */
        if (nd->eng.term != s->max_term_written &&
            !(s->deletes && s->t - s->last_delete < ms_to_us(4 * max_lease(s)))) {
            s->violations++;
            if (s->violations < 5)
                fprintf(stderr, "  t=%.3fs node %d leads with term %lld but term %lld exists\n",
                        s->t / 1e6, i, (long long)nd->eng.term, (long long)s->max_term_written);
        }
    }
    if (leaders > 1) {
        s->violations++;
        if (s->violations < 5)
            fprintf(stderr, "  t=%.3fs: %d leaders at once (first %d, event of node %d)\n",
                    s->t / 1e6, leaders, first, who);
    }
}

/* s3lect run kills a leader's command tree by renewed_at + renew_deadline +
 * kill_timeout ≤ renewed_at + L − (2·L/1000 + 250 ms) on its clock
 * (docs/algorithm.md, "The supervisor's kill deadline"), and its records
 * announce holdMs = that + the margin: note when the kill comes in true
 * time, while the node leads. */
static int64_t true_at(const node *nd, int64_t mono_ms);
static void note_kill_deadline(node *nd)
{
    if (nd->eng.role != EL_LEADER || nd->tree_dead)
        return;
    int64_t t = true_at(nd, nd->eng.renewed_at + nd->kill_after);
    if (t > nd->kill_at)
        nd->kill_at = t;
}

static void on_events(sim *s, node *nd, int idx)
{
    size_t n;
    el_event *evs = el_take_events(&nd->eng, &n);
    for (size_t i = 0; i < n; i++) {
        if (evs[i].type == S3LECT_EVENT_TRANSFER) {
            /* s3lect run stops its command tree (up to a few seconds), then
             * commits; now and then the application never commits (the
             * transfer is abandoned and the node keeps leading). */
            if (urand(s) < 0.9)
                push(s, s->t + (int64_t)(urand(s) * 3e6), EV_COMMIT, idx, 0);
        }
        if (evs[i].type == S3LECT_EVENT_LOST && s->verbose)
            printf("  t=%.3fs node %d lost term %lld: %s\n", s->t / 1e6, idx,
                   (long long)evs[i].term, s3lect_lost_reason_str(evs[i].reason));
        if (evs[i].type == S3LECT_EVENT_TRANSFER && s->verbose)
            printf("  t=%.3fs node %d hands over to %s\n", s->t / 1e6, idx, evs[i].leader_id);
        if (evs[i].type == S3LECT_EVENT_LOST && evs[i].reason == S3LECT_LOST_TRANSFERRED) {
            xf_done++;
            s->xf_released_at = s->t;
        }
        if (evs[i].type == S3LECT_EVENT_ACQUIRED) {
            nd->tree_dead = 0;
            if (s->t - s->xf_released_at < 5000000)
                xf_taken++;
            s->leader_changes++;
            for (int j = 0; j < s->n; j++) {
                if (j == idx || s->t >= s->nodes[j].kill_at)
                    continue;
                s->violations++;
                if (s->violations < 5)
                    fprintf(stderr,
                            "  t=%.3fs: node %d acquired %.3f s before the kill deadline of "
                            "node %d's command tree\n",
                            s->t / 1e6, idx, (s->nodes[j].kill_at - s->t) / 1e6, j);
            }
            /* An acquisition whose write was sent before the last delete
             * belongs to the terms the delete wiped out (the record that
             * counted them is gone; docs/algorithm.md "A lock that
             * vanishes"): it is compared with none after it. */
            int before_delete = s->deletes && true_at(nd, nd->eng.renewed_at) < s->last_delete;
            if (before_delete) {
                /* nothing: see above */
            } else if (evs[i].term <= s->max_acq_term) {
                s->violations++;
                if (s->violations < 5)
                    fprintf(stderr,
                            "  t=%.3fs: node %d acquired term %lld, not above term %lld "
                            "acquired before: two leaderships share a term\n",
                            s->t / 1e6, idx, (long long)evs[i].term, (long long)s->max_acq_term);
            }
            if (!before_delete && evs[i].term > s->max_acq_term)
                s->max_acq_term = evs[i].term;
            if (!before_delete && evs[i].term < nd->acquired_term) {
                s->violations++;
                fprintf(stderr, "  node %d acquired term %lld after term %lld\n", idx,
                        (long long)evs[i].term, (long long)nd->acquired_term);
            }
            if (!before_delete)
                nd->acquired_term = evs[i].term;
            if (s->resets)
                s->acq_after_reset++;
            if (s->verbose)
                printf("  t=%.3fs node %d acquired term %lld\n", s->t / 1e6, idx,
                       (long long)evs[i].term);
        }
        el_event_clear(&evs[i]);
    }
    free(evs);
}

/* ---- the store ---- */

static int64_t store_now_us(const sim *s)
{
    return s->store_off + (int64_t)((double)s->t * (1.0 + s->store_rate));
}

/* S3: Date and Last-Modified, truncated to whole seconds; PostgreSQL:
 * now() and updated_at in ms; the others give no stamps. */
static void store_stamp(sim *s, st_result *r)
{
    int64_t res =
        s->store_kind == STORE_S3 || s->store_kind == STORE_GCS || s->store_kind == STORE_AZURE
            ? 1000
        : s->store_kind == STORE_POSTGRES || s->store_kind == STORE_REDIS ||
                s->store_kind == STORE_MYSQL
            ? 1
            : 0;
    if (!res)
        return;
    int64_t now_ms = (store_now_us(s) + s->date_off) / 1000, mod_ms = s->mod_us / 1000;
    r->server_now_ms = now_ms - now_ms % res;
    r->server_modified_ms = mod_ms - mod_ms % res;
    r->server_res_ms = res;
    s->stamped_reads++;
}

static void roster_apply(sim *s, int kind, const char *body, size_t body_len, const char *if_match,
                         st_result *r)
{
    if (kind == EL_OP_GET) {
        r->outcome = s->ro_exists ? ST_OK : ST_NOT_FOUND;
        if (s->ro_exists) {
            st_result_set_body(r, s->ro_body, s->ro_len);
            st_result_set_etag(r, s->ro_etag);
        }
        return;
    }
    int ok = if_match ? (s->ro_exists && strcmp(if_match, s->ro_etag) == 0) : !s->ro_exists;
    if (!ok) {
        r->outcome = ST_PRECONDITION;
        return;
    }
    ro_list l;
    if (ro_parse(body, body_len, &l) != 0) {
        s->violations++;
        fprintf(stderr, "  t=%.3fs: a node wrote something else than a roster to the roster\n",
                s->t / 1e6);
    } else {
        ro_list_clear(&l);
    }
    free(s->ro_body);
    s->ro_body = malloc(body_len + 1);
    memcpy(s->ro_body, body, body_len);
    s->ro_len = body_len;
    s->ro_exists = 1;
    snprintf(s->ro_etag, sizeof s->ro_etag, "\"r%llu\"", (unsigned long long)++s->ro_ctr);
    roster_writes++;
    r->outcome = ST_OK;
    st_result_set_etag(r, s->ro_etag);
}

static void store_apply(sim *s, int kind, const char *body, size_t body_len, const char *if_match,
                        st_result *r)
{
    if (kind == EL_OP_GET) {
        if (s->store_kind == STORE_ROUTE53 && s->nhist && urand(s) < 0.5) {
            /* An eventually consistent read: the state as of some earlier
             * moment within stale_us (each read its own moment). */
            int64_t at = s->t - (int64_t)(urand(s) * (double)s->stale_us);
            const past_state *best = NULL;
            for (size_t k = 0; k < s->nhist; k++)
                if (s->hist[k].t <= at && (!best || s->hist[k].t > best->t))
                    best = &s->hist[k];
            if (best) {
                s->stale_reads++;
                if (!best->exists) {
                    r->outcome = ST_NOT_FOUND;
                    return;
                }
                r->outcome = ST_OK;
                st_result_set_body(r, best->body, best->body_len);
                st_result_set_etag(r, best->etag);
                return;
            }
        }
        if (!s->exists) {
            r->outcome = ST_NOT_FOUND;
            return;
        }
        r->outcome = ST_OK;
        st_result_set_body(r, s->body, s->body_len);
        st_result_set_etag(r, s->etag);
        store_stamp(s, r);
        return;
    }
    int ok = if_match ? (s->exists && strcmp(if_match, s->etag) == 0) : !s->exists;
    if (!ok) {
        if (s->store_kind == STORE_AZURE) {
            /* Azure's answers, through the store's own mapping. */
            if (!if_match)
                azure_409s++;
            r->outcome = !if_match   ? st_azure_outcome(409, "BlobAlreadyExists")
                         : s->exists ? st_azure_outcome(412, "ConditionNotMet")
                                     : st_azure_outcome(404, "BlobNotFound");
            return;
        }
        if (s->store_kind == STORE_K8S) {
            /* The API server's answers, through the store's own mapping. */
            if (!if_match) {
                k8s_exists++;
                r->outcome = st_k8s_outcome(409, "AlreadyExists", "leases", "create");
            } else if (s->exists) {
                k8s_conflicts++;
                r->outcome = st_k8s_outcome(409, "Conflict", "leases", "update");
            } else {
                k8s_gone++;
                r->outcome = st_k8s_outcome(404, "NotFound", "leases", "update");
            }
            return;
        }
        r->outcome =
            if_match && !s->exists && s->store_kind == STORE_S3 ? ST_NOT_FOUND : ST_PRECONDITION;
        return;
    }
    rec newr;
    char err[160];
    if (rec_parse(body, body_len, &newr, err, sizeof err) == 0) {
        if (newr.term < s->store_term) {
            s->violations++;
            fprintf(stderr, "  term went down in the store: %lld -> %lld\n",
                    (long long)s->store_term, (long long)newr.term);
        }
        if (!rec_released(&newr) && s->store_holder[0] &&
            strcmp(newr.leader_id, s->store_holder) != 0 && newr.term <= s->store_term) {
            s->violations++;
            fprintf(stderr, "  holder changed %s -> %s without a new term (%lld)\n",
                    s->store_holder, newr.leader_id, (long long)newr.term);
        }
        s->store_term = newr.term;
        if (newr.term > s->max_term_written)
            s->max_term_written = newr.term;
        if (!rec_released(&newr))
            snprintf(s->store_holder, sizeof s->store_holder, "%s", newr.leader_id);
        if (newr.term == REC_TERM_MAX) {
            /* Nobody can take over from this one: the operator resets the
             * term once the record stood unchanged for two leases (as
             * s3lect reset-term does), up to 10 minutes later. */
            s->last_exhausted = s->t;
            push(s, s->t + ms_to_us(2 * max_lease(s)) + (int64_t)(urand(s) * 600e6), EV_RESET, -1,
                 s->etag_ctr + 1);
        }
        rec_clear(&newr);
    } else {
        s->violations++;
        fprintf(stderr, "  t=%.3fs: a node wrote a record that does not read back: %s\n",
                s->t / 1e6, err);
    }
    free(s->body);
    s->body = malloc(body_len + 1);
    memcpy(s->body, body, body_len);
    s->body_len = body_len;
    s->exists = 1;
    s->mod_us = store_now_us(s);
    if (s->store_kind == STORE_GCS) /* a generation: microseconds, always growing */
        snprintf(s->etag, sizeof s->etag, "%llu",
                 1700000000000000ULL + (unsigned long long)++s->etag_ctr);
    else if (s->store_kind == STORE_ETCD ||
             s->store_kind == STORE_K8S) /* a revision: other keys' writes count too */
        snprintf(s->etag, sizeof s->etag, "%llu",
                 (unsigned long long)(++s->etag_ctr * 8 + (uint64_t)(urand(s) * 7)));
    else if (s->store_kind == STORE_REDIS) /* a random token (hex; the store's has 32 digits) */
        snprintf(s->etag, sizeof s->etag, "%08x%016llx", (unsigned)(urand(s) * 4294967295.0),
                 (unsigned long long)++s->etag_ctr);
    else
        snprintf(s->etag, sizeof s->etag, "\"e%llu\"", (unsigned long long)++s->etag_ctr);
    r->outcome = ST_OK;
    st_result_set_etag(r, s->etag);
    if (s->store_kind == STORE_ROUTE53) {
        past_state *h = &s->hist[s->hist_next];
        free(h->body);
        h->t = s->t;
        h->exists = 1;
        h->body = malloc(body_len + 1);
        memcpy(h->body, body, body_len);
        h->body_len = body_len;
        snprintf(h->etag, sizeof h->etag, "%s", s->etag);
        s->hist_next = (s->hist_next + 1) % MAXHIST;
        if (s->nhist < MAXHIST)
            s->nhist++;
    }
}

/* The operator's reset of an exhausted term: a released record with term 0
 * over the record it read, if nobody wrote since. */
static void store_set(sim *s, const char *body)
{
    free(s->body);
    s->body_len = strlen(body);
    s->body = malloc(s->body_len + 1);
    memcpy(s->body, body, s->body_len + 1);
    s->exists = 1;
    s->mod_us = store_now_us(s);
    snprintf(s->etag, sizeof s->etag, "\"e%llu\"", (unsigned long long)++s->etag_ctr);
    if (s->store_kind == STORE_ROUTE53) {
        past_state *h = &s->hist[s->hist_next];
        free(h->body);
        h->t = s->t;
        h->exists = 1;
        h->body = malloc(s->body_len + 1);
        memcpy(h->body, body, s->body_len + 1);
        h->body_len = s->body_len;
        snprintf(h->etag, sizeof h->etag, "%s", s->etag);
        s->hist_next = (s->hist_next + 1) % MAXHIST;
        if (s->nhist < MAXHIST)
            s->nhist++;
    }
}

/* Node i's process dies (kill -9, a rolling restart) and starts again: a
 * fresh engine that has never seen the lock, with a new incarnation. Its
 * request in flight is dropped (its answer goes nowhere), long polls it
 * served fail, and its command tree, if it led, lives to its kill deadline
 * (kill_at stays). Right after a delete this is the node that cannot tell
 * a vanished lock from a new one (issue 38 item 3). */
static void peer_try_answer(sim *s, int k, int force);
static void node_restart(sim *s, int i)
{
    node *nd = &s->nodes[i];
    if (s->t < nd->susp_end) { /* a suspended machine: after it wakes */
        push(s, nd->susp_end, EV_RESTART, i, 0);
        return;
    }
    if (nd->paused_until > s->t)
        nd->paused_until = s->t; /* kill -9 ends a SIGSTOP */
    el_free(&nd->eng);
    free(nd->op.body);
    free(nd->op.if_match);
    st_result_clear(&nd->op.res);
    /* Its command dies too: a fenced write it had not sent yet is gone (one
     * already sent still lands: EV_FD_PUT is the store's). */
    nd->fd_busy = 0;
    nd->fd_seq++;
    uint64_t id = nd->op.id;
    memset(&nd->op, 0, sizeof nd->op);
    nd->op.id = id;
    nd->gen++;
    s->restarts++;
    char inc[32];
    snprintf(inc, sizeof inc, "inc%d-r%llu", i, (unsigned long long)s->restarts);
    el_init(&nd->eng, &nd->p, nd->id, nd->id, inc, u_rng_next(&s->g));
    if (nd->p.peer) /* as the runtime does for peer mode */
        el_set_roster(&nd->eng, "lock.s3lect-roster");
    for (int k = 0; k < MAXWAIT; k++)
        if (s->waits[k].active && s->waits[k].server == i)
            peer_try_answer(s, k, 1);
    push(s, s->t + (int64_t)(urand(s) * 200e3), EV_WAKE, i, nd->gen);
    if (s->verbose)
        printf("  t=%.3fs node %d restarts\n", s->t / 1e6, i);
}

/* The operator asks whichever node leads to hand over: to another node, to
 * the best ("*"), or to a node that does not exist (refused). */
static void operator_transfer(sim *s)
{
    for (int i = 0; i < s->n; i++) {
        node *nd = &s->nodes[i];
        if (!el_is_leader(&nd->eng, node_now(nd, s->t).mono))
            continue;
        char to[16];
        double u = urand(s);
        if (u < 0.6)
            snprintf(to, sizeof to, "n%d",
                     (int)((i + 1 + u_rng_next(&s->g) % (uint64_t)(s->n - 1)) % (uint64_t)s->n));
        else if (u < 0.85)
            snprintf(to, sizeof to, "*");
        else
            snprintf(to, sizeof to, "nobody");
        if (el_transfer(&nd->eng, to, node_now(nd, s->t).mono) == 0) {
            xf_asked++;
            if (!nd->op.busy) {
                nd->gen++;
                push(s, s->t, EV_WAKE, i, nd->gen);
            }
        }
        return;
    }
}

/* Someone deletes the lock object (by hand, a lifecycle or TTL rule, a
 * store restarted without its data). s3lect never deletes one, so the
 * holder learns it at its next renewal; until then it leads, and no other
 * node may acquire before its command tree's kill deadline (checked in
 * on_events). Terms may start lower afterwards: the record that counted
 * them is gone. */
static void store_delete(sim *s)
{
    int64_t gap = 0;
    for (int i = 0; i < s->n; i++) {
        el_params *p = &s->nodes[i].p;
        int64_t g = 2 * p->lease + p->infrequent + p->frequent;
        gap = g > gap ? g : gap;
    }
    if (!s->exists || (s->deletes && s->t - s->last_delete < ms_to_us(gap)))
        return;
    s->exists = 0;
    s->store_term = 0;
    s->max_term_written = 0;
    s->store_holder[0] = '\0';
    for (int i = 0; i < s->n; i++)
        s->nodes[i].acquired_term = 0;
    s->max_acq_term = 0;
    s->deletes++;
    s->last_delete = s->t;
    /* A node (re)starts right after: it never saw the lock (issue 38). */
    if (urand(s) < 0.7)
        push(s, s->t + (int64_t)(urand(s) * 1e6), EV_RESTART,
             (int)(u_rng_next(&s->g) % (uint64_t)s->n), 0);
    if (s->store_kind == STORE_ROUTE53) {
        past_state *h = &s->hist[s->hist_next];
        free(h->body);
        h->body = NULL;
        h->t = s->t;
        h->exists = 0;
        h->body_len = 0;
        h->etag[0] = '\0';
        s->hist_next = (s->hist_next + 1) % MAXHIST;
        if (s->nhist < MAXHIST)
            s->nhist++;
    }
    if (s->verbose)
        printf("  t=%.3fs the lock object is deleted\n", s->t / 1e6);
}

static void operator_reset(sim *s, uint64_t gen)
{
    if (s->etag_ctr != gen)
        return; /* written since: a later write scheduled its own */
    store_set(s, "{\"leaderID\":\"\",\"leaderAddr\":\"\",\"lastUpdated\":\"0001-01-01T00:00:00Z\","
                 "\"term\":0,\"leaseMs\":0,\"incarnation\":\"\"}");
    s->store_term = 0;
    s->max_term_written = 0;
    s->store_holder[0] = '\0';
    for (int i = 0; i < s->n; i++)
        s->nodes[i].acquired_term = 0; /* terms start again, on purpose */
    s->max_acq_term = 0;
    s->resets++;
    s->last_exhausted = s->t;
    if (s->verbose)
        printf("  t=%.3fs operator reset the term\n", s->t / 1e6);
}

/* ---- nodes ---- */

static int64_t latency(sim *s, node *nd)
{
    double l = -log(1.0 - urand(s)) * nd->lat_mean + 1000;
    if (s->chaos && urand(s) < s->p_spike)
        l += urand(s) * 8e6; /* up to 8 s */
    return (int64_t)l;
}

static void step(sim *s, int i);

static void send_op(sim *s, int i, const el_op *op)
{
    node *nd = &s->nodes[i];
    op_state *o = &nd->op;
    memset(o, 0, sizeof *o);
    o->busy = 1;
    o->kind = op->kind;
    if (op->kind == EL_OP_PUT) {
        o->body = malloc(op->body_len + 1);
        memcpy(o->body, op->body, op->body_len);
        o->body_len = op->body_len;
    }
    o->if_match = op->if_match ? strdup(op->if_match) : NULL;
    o->roster = op->key != NULL;
    s->ops++;
    /* Timeouts are on the node's clock; approximate with true time. */
    o->timeout_at = s->t + ms_to_us(op->timeout_ms);
    o->id = ++nd->op_seq;
    if (op->kind == EL_OP_PEER) {
        /* Over the peer network (not the store's): may be lost, never late. */
        push(s, o->timeout_at + ms_to_us(op->peer_wait), EV_REPLY, i, o->id);
        o->timeout_at += ms_to_us(op->peer_wait);
        int j = op->peer_addr ? atoi(op->peer_addr + 1) : -1;
        if (j < 0 || j >= s->n || (s->chaos && urand(s) < s->p_drop_req)) {
            s->faults++;
            return; /* refused or lost: the client times out */
        }
        for (int k = 0; k < MAXWAIT; k++) {
            if (!s->waits[k].active) {
                peer_wait *w = &s->waits[k];
                w->active = 1;
                w->follower = i;
                w->server = j;
                w->op_id = o->id;
                snprintf(w->etag, sizeof w->etag, "%s", op->if_match ? op->if_match : "");
                w->deadline = 0; /* set on arrival */
                push(s, s->t + latency(s, nd), EV_PEER_ARRIVE, k, ms_to_us(op->peer_wait));
                return;
            }
        }
        return; /* no slot: behaves like a refused connection */
    }
    int partitioned = s->t < nd->partitioned_until;
    double u = urand(s);
    if (partitioned || (s->chaos && u < s->p_drop_req)) {
        s->faults++;
        if (op->kind == EL_OP_PUT && !o->roster && s->chaos &&
            urand(s) < s->p_late / (s->p_late + s->p_drop_req + 1e-9)) {
            /* The request sits in a queue and lands after the client gave up. */
            late_write *lw = malloc(sizeof *lw);
            lw->body = malloc(op->body_len + 1);
            memcpy(lw->body, op->body, op->body_len);
            lw->body_len = op->body_len;
            lw->if_match = op->if_match ? strdup(op->if_match) : NULL;
            push_late(s, o->timeout_at + latency(s, nd) + (int64_t)(urand(s) * 3e6), EV_LATE, i, 0,
                      lw);
        }
        o->drop_reply = 1;
        push(s, o->timeout_at, EV_REPLY, i, o->id);
        return;
    }
    if (s->chaos && u < s->p_drop_req + s->p_5xx) {
        s->faults++;
        o->res.outcome = ST_TRANSIENT;
        push(s, s->t + latency(s, nd), EV_REPLY, i, o->id);
        return;
    }
    int64_t there = s->t + latency(s, nd);
    int64_t back = there + latency(s, nd);
    if (s->chaos && urand(s) < s->p_drop_reply) {
        s->faults++;
        o->drop_reply = 1;
    }
    push(s, there < o->timeout_at ? there : o->timeout_at - 1, EV_APPLY, i, o->id);
    push(s, back < o->timeout_at && !o->drop_reply ? back : o->timeout_at, EV_REPLY, i, o->id);
    if (back >= o->timeout_at)
        o->drop_reply = 1;
}

/* Answers waiter k from its server's state now, if it should be answered:
 * force (deadline), or the server's etag differs from the waiter's, or the
 * server no longer leads. A paused server answers nothing. */
static void peer_try_answer(sim *s, int k, int force)
{
    peer_wait *w = &s->waits[k];
    node *srv = &s->nodes[w->server], *fol = &s->nodes[w->follower];
    if (!w->active || s->t < srv->paused_until)
        return;
    int leading = el_is_leader(&srv->eng, node_now(srv, s->t).mono) && srv->eng.my_body;
    int changed = !leading || strcmp(srv->eng.etag ? srv->eng.etag : "", w->etag) != 0;
    if (!force && !changed)
        return;
    w->active = 0;
    op_state *o = &fol->op;
    if (!o->busy || o->id != w->op_id)
        return; /* the follower gave up already */
    o->applied = 1;
    s->peer_answers++;
    if (leading) {
        o->res.outcome = ST_OK;
        st_result_set_body(&o->res, srv->eng.my_body, strlen(srv->eng.my_body));
        st_result_set_etag(&o->res, srv->eng.etag);
    } else {
        o->res.outcome = ST_TRANSIENT; /* 404: not leading */
        s->peer_fallbacks++;
    }
    int64_t back = s->t + latency(s, fol);
    if (back < o->timeout_at)
        push(s, back, EV_REPLY, w->follower, o->id);
    else
        o->drop_reply = 1;
}

/* After any step of node j, wake the long-polls it serves. */
static void peer_poke(sim *s, int j)
{
    for (int k = 0; k < MAXWAIT; k++)
        if (s->waits[k].active && s->waits[k].server == j && s->waits[k].deadline)
            peer_try_answer(s, k, 0);
}

static void finish_op(sim *s, int i)
{
    node *nd = &s->nodes[i];
    op_state *o = &nd->op;
    st_result res = {0};
    if (o->drop_reply || (!o->applied && o->res.outcome != ST_TRANSIENT)) {
        res.outcome = ST_TRANSIENT;
        res.message = strdup("timeout");
        /* A peer check that was refused, lost or not answered in time is a
         * failure of the leader's endpoint: the follower follows it through
         * the store (and takes turns with the others there). */
        if (o->kind == EL_OP_PEER)
            res.peer_failure = ST_PEER_UNREACHABLE;
        st_result_clear(&o->res);
    } else {
        res = o->res;
        memset(&o->res, 0, sizeof o->res);
    }
    free(o->body);
    free(o->if_match);
    o->body = o->if_match = NULL;
    o->busy = 0;
    el_complete(&nd->eng, node_now(nd, s->t), &res);
    st_result_clear(&res);
    s->steps++;
    on_events(s, nd, i);
    note_kill_deadline(nd);
    check_safety(s, i);
    peer_poke(s, i);
}

static void step(sim *s, int i)
{
    node *nd = &s->nodes[i];
    if (nd->op.busy)
        return;
    el_op op;
    int64_t wake;
    int kind = el_next(&nd->eng, node_now(nd, s->t), &op, &wake);
    s->steps++;
    on_events(s, nd, i);
    note_kill_deadline(nd);
    check_safety(s, i);
    peer_poke(s, i);
    if (kind == EL_OP_GET || kind == EL_OP_PUT || kind == EL_OP_PEER) {
        send_op(s, i, &op);
    } else if (kind == EL_OP_NONE) {
        nd->gen++;
        int64_t t = true_at(nd, wake);
        push(s, t > s->t ? t : s->t + 1, EV_WAKE, i, nd->gen);
    }
}

/* ---- fault phases ---- */

static int64_t max_lease(const sim *s)
{
    int64_t l = 0;
    for (int i = 0; i < s->n; i++)
        l = s->nodes[i].p.lease > l ? s->nodes[i].p.lease : l;
    return l;
}

static int64_t liveness_bound(sim *s)
{
    int64_t lmax = 0, fmax = 0, imax = 0;
    for (int i = 0; i < s->n; i++) {
        el_params *p = &s->nodes[i].p;
        lmax = p->lease > lmax ? p->lease : lmax;
        fmax = p->frequent > fmax ? p->frequent : fmax;
        imax = p->infrequent > imax ? p->infrequent : imax;
    }
    /* Without the wall-clock rule a stable follower first sees the dead
     * leader's last etag up to one infrequent interval late, then waits
     * max(infrequent, L) (the record may look fresh to a wall clock that is
     * off); failed reads and writes during the faults back off up to
     * max(infrequent, frequent) and max(L, frequent). All with jitter. */
    int64_t base = lmax > imax ? lmax : imax;
    int64_t wcap = lmax > fmax ? lmax : fmax;
    /* Stale reads (route53) show the dead leader's last write up to
     * stale_us late, and a takeover may first meet a stale etag (refused,
     * read again): twice the staleness more. */
    return ms_to_us(imax * 11 / 10 + base * 11 / 10 + wcap * 12 / 10 + imax * 11 / 10 + 2 * fmax +
                    3000) +
           2 * s->stale_us;
}

static void begin_phase(sim *s)
{
    s->chaos = !s->chaos;
    if (s->chaos) {
        int64_t len = (int64_t)(30e6 + urand(s) * 270e6);
        s->phase_end = s->t + len;
        s->p_5xx = urand(s) * 0.2;
        s->p_drop_req = urand(s) * 0.1;
        s->p_drop_reply = urand(s) * 0.1;
        s->p_late = urand(s) * 0.05;
        s->p_spike = urand(s) * 0.05;
        s->p_resend = urand(s) * 0.05;
        if ((s->store_kind == STORE_DYNAMODB || s->store_kind == STORE_GCS ||
             s->store_kind == STORE_AZURE || s->store_kind == STORE_ETCD ||
             s->store_kind == STORE_REDIS || s->store_kind == STORE_MYSQL ||
             s->store_kind == STORE_K8S) &&
            urand(s) < 0.5)
            s->p_5xx = 0.5 + urand(s) * 0.4; /* a burst (GCS, k8s: 429; etcd: no leader; Redis:
                                                LOADING; MySQL: lock wait timeout, deadlock) */
        if (s->store_kind == STORE_POSTGRES || s->store_kind == STORE_REDIS ||
            s->store_kind == STORE_MYSQL || s->store_kind == STORE_K8S)
            s->p_drop_reply += urand(s) * 0.2; /* connections drop after commits (k8s: a 504
                                                  whose write etcd still applied) */
        s->heal_at = s->phase_end;
        /* Partitions and pauses, all healed by the end of the phase. */
        for (int i = 0; i < s->n; i++) {
            node *nd = &s->nodes[i];
            if (urand(s) < 0.3) {
                int64_t start = s->t + (int64_t)(urand(s) * len);
                int64_t end = start + (int64_t)(urand(s) * 40e6);
                nd->partitioned_until = end < s->phase_end ? end : s->phase_end;
                s->faults++;
            }
            if (urand(s) < 0.2) {
                int64_t d = (int64_t)(urand(s) * 45e6);
                int64_t until = s->t + d;
                nd->paused_until = until < s->phase_end ? until : s->phase_end;
                s->faults++;
            } else if (urand(s) < 0.15 && s->t >= nd->susp_end) {
                /* The machine suspends: nothing runs; the lease clock
                 * (CLOCK_BOOTTIME) goes on counting, unless --break-suspend. */
                int64_t d = (int64_t)(urand(s) * 120e6);
                nd->susp_lost += nd->clock_stops ? nd->susp_end - nd->susp_start : 0;
                nd->susp_start = s->t;
                nd->susp_end = s->t + d;
                nd->paused_until = nd->susp_end;
                s->suspends++;
                s->faults++;
            }
            if (urand(s) < 0.3) /* a wall-clock step somewhere in the phase */
                push(s, s->t + (int64_t)(urand(s) * len), EV_CLOCK_STEP, i, 0);
        }
        for (int k = 0; k < 3; k++) /* the store's clock jumps */
            push(s, s->t + (int64_t)(urand(s) * len), EV_STORE_JUMP, -1, 0);
        /* The lock object is deleted (at most once per two leases and a
         * poll: two deletes closer than that can hide a leader from a node
         * that saw the lock missing in between; docs/stores.md). */
        if (!s->near_limit && urand(s) < 0.25)
            push(s, s->t + (int64_t)(urand(s) * len), EV_DELETE, -1, 0);
        if (urand(s) < 0.5) /* the operator moves leadership */
            push(s, s->t + (int64_t)(urand(s) * len), EV_TRANSFER, -1, 0);
        if (urand(s) < 0.3) /* a node is killed and started again */
            push(s, s->t + (int64_t)(urand(s) * len), EV_RESTART,
                 (int)(u_rng_next(&s->g) % (uint64_t)s->n), 0);
    } else {
        int64_t bound = liveness_bound(s);
        s->phase_end = s->t + bound + (int64_t)(urand(s) * 600e6);
        if (urand(s) < 0.5) /* the operator moves leadership (while calm too) */
            push(s, s->t + (int64_t)(urand(s) * (double)(s->phase_end - s->t)), EV_TRANSFER, -1, 0);
        push(s, s->heal_at + bound, EV_CHECK, -1, 0);
    }
}

static void check_liveness(sim *s)
{
    s->liveness_checks++;
    for (int i = 0; i < s->n; i++)
        if (el_is_leader(&s->nodes[i].eng, node_now(&s->nodes[i], s->t).mono))
            return;
    if (s->near_limit &&
        (s->store_term >= REC_TERM_MAX ||
         s->t - s->last_exhausted < liveness_bound(s) + ms_to_us(2 * max_lease(s)))) {
        s->exhausted_skips++; /* the term cannot grow (or was just reset): nobody may lead */
        return;
    }
    if (s->t - s->xf_released_at < ms_to_us(2 * max_lease(s))) {
        /* A transfer is being handed over (its release was written a
         * moment ago; the target may be backing off its writes after the
         * faults): look again once it had time, if still calm. */
        int64_t again = s->t + ms_to_us(2 * max_lease(s));
        if (!s->chaos && again < s->phase_end)
            push(s, again, EV_CHECK, -1, 0);
        return;
    }
    if (!s->break_skew && !s->break_suspend && !s->break_store) {
        s->violations++;
        fprintf(stderr, "  t=%.3fs: no leader %.1fs after the faults healed\n", s->t / 1e6,
                liveness_bound(s) / 1e6);
    }
}

/* ---- setup and main loop ---- */

static void fd_schedule(sim *s, int i);
static void setup(sim *s, uint64_t seed, int n, int break_skew, int break_suspend, int break_store,
                  int break_new_lock, int store_kind, int64_t stale_ms)
{
    memset(s, 0, sizeof *s);
    s->break_store = break_store;
    s->break_new_lock = break_new_lock;
    s->store_kind = store_kind;
    s->stale_us = store_kind == STORE_ROUTE53 ? ms_to_us(stale_ms) : 0;
    if (store_kind == STORE_ROUTE53) { /* the record does not exist at first */
        s->nhist = 1;
        s->hist_next = 1;
    }
    u_rng_seed(&s->g, seed * 0x9E3779B97F4A7C15ULL + 1);
    s->n = n;
    s->break_skew = break_skew;
    s->break_suspend = break_suspend;
    /* The store's clock: hours from anyone's, its rate off by up to 10⁻³. */
    s->store_off = 1700000000000000LL + (int64_t)(urand(s) * 4.0 * 3600e6);
    s->store_rate = (urand(s) * 2 - 1) * 1e-3;
    /* Date against Last-Modified: in step, or up to a minute ahead or behind. */
    s->date_off = urand(s) < 0.4 ? 0 : (int64_t)((urand(s) * 2 - 1) * 60e6);
    /* Mixed timing configs, all valid: renew_interval < renew_deadline < lease. */
    static const el_params configs[] = {
        {15000, 5000, 10000, 5000, 30000, 0, 3000, 10000, 0, 0, 0, 0, 0, 0, 0, 0},
        {15000, 5000, 10000, 5000, 15000, 0, 3000, 10000, 0, 0, 0, 0, 0, 0, 0, 0},
        {10000, 2000, 6000, 2000, 10000, 0, 3000, 5000, 0, 0, 0, 0, 0, 0, 0, 0},
        {20000, 4000, 12000, 3000, 20000, 0, 3000, 8000, 0, 0, 0, 0, 0, 0, 0, 0},
        {6000, 1000, 3000, 1000, 6000, 0, 3000, 2000, 0, 0, 0, 0, 0, 0, 0, 0},
    };
    /* The default: the wall-clock rule off. --break-skew turns it on. */
    int64_t skew = break_skew ? 2000 : 0;
    for (int i = 0; i < n; i++) {
        node *nd = &s->nodes[i];
        nd->p = configs[u_rng_next(&s->g) % (sizeof configs / sizeof configs[0])];
        nd->p.skew = skew;
        nd->clock_stops = break_suspend;
        /* Peer mode on some nodes: stable followers long-poll the leader. */
        nd->p.peer = urand(s) < 0.5;
        /* s3lect run's kill timeout: the largest safe one (the default) on
         * half the nodes, a shorter one on the others; holdMs announces the
         * kill deadline plus the margin. --break-store-clock: the records
         * claim renew_deadline (the cap before issue 38) while the tree
         * lives to the default deadline. */
        int64_t margin = 2 * nd->p.lease / 1000 + 250;
        int64_t kmax = nd->p.lease - nd->p.renew_deadline - margin;
        int64_t kill = urand(s) < 0.5 ? kmax : (int64_t)(urand(s) * (double)kmax);
        nd->kill_after = nd->p.renew_deadline + kill;
        nd->p.hold = nd->kill_after + margin;
        if (break_store) {
            nd->kill_after = nd->p.renew_deadline + kmax;
            nd->p.hold = nd->p.renew_deadline;
        }
        nd->p.peer_wait = nd->p.infrequent;
        nd->p.new_lock_wait = 0; /* set below, once every node's timings are known */
        nd->rate = (urand(s) * 2 - 1) * 1e-3;
        nd->mono_off = (int64_t)(urand(s) * 1e12);
        /* Wall clocks: hours apart (nothing may depend on them by default);
         * with --break-skew far beyond the opt-in rule's bound. */
        double spread = break_skew ? 4.0 * 20000 * 1000 : 4.0 * 3600e6;
        nd->wall_off = 1700000000000000LL + (int64_t)(urand(s) * spread);
        nd->lat_mean = 5000 + urand(s) * 60000;
        snprintf(nd->id, sizeof nd->id, "n%d", i);
    }
    /* Preference and maximum tenure on some seeds (the others: plain). */
    int prios = urand(s) < 0.3, holds = urand(s) < 0.2;
    for (int i = 0; i < n; i++) {
        node *nd = &s->nodes[i];
        nd->p.priority = prios ? (int64_t)(u_rng_next(&s->g) % 3) : 0;
        nd->p.max_hold = holds ? (int64_t)(30000 + urand(s) * 90000) : 0;
        nd->p.xfer_off = store_kind == STORE_ROUTE53; /* as s3lect_new sets it */
    }
    /* A node that never saw the lock waits new_lock_wait before creating it:
     * with mixed timings, the longest lease (or hold) of any node of the lock,
     * as docs/algorithm.md says to configure it. --break-new-lock: 0, a missing
     * lock created at once (before issue 38). */
    int64_t nlw = 0;
    for (int i = 0; i < n; i++) {
        el_params *p = &s->nodes[i].p;
        int64_t w = p->hold > p->lease ? p->hold : p->lease;
        nlw = w > nlw ? w : nlw;
    }
    for (int i = 0; i < n; i++) {
        node *nd = &s->nodes[i];
        nd->p.new_lock_wait = break_new_lock ? 0 : nlw;
        char inc[16];
        snprintf(inc, sizeof inc, "inc%d", i);
        el_init(&nd->eng, &nd->p, nd->id, nd->id, inc, u_rng_next(&s->g));
        if (nd->p.peer) /* as the runtime does for peer mode */
            el_set_roster(&nd->eng, "lock.s3lect-roster");
        push(s, (int64_t)(urand(s) * 2e6), EV_WAKE, i, 0);
        fd_schedule(s, i);
    }
    if (seed % 4 == 0) {
        /* Next to a record whose term is at or near the limit: 2^53 - 1 - k,
         * or 2^53 (k = -1) as an older version wrote it. */
        s->near_limit = 1;
        int64_t k = (int64_t)(u_rng_next(&s->g) % 41) - 1;
        char body[300];
        snprintf(body, sizeof body,
                 "{\"leaderID\":\"old\",\"lastUpdated\":\"2023-11-14T22:13:20Z\",\"term\":%s%lld,"
                 "\"leaseMs\":15000}",
                 k >= 0 ? "" : "1", /* 1 followed by 2^53 - 1's digits: far past it */
                 (long long)(k >= 0 ? REC_TERM_MAX - k : REC_TERM_MAX));
        store_set(s, body);
        s->store_term = k >= 0 ? REC_TERM_MAX - k : REC_TERM_MAX + 1;
        s->max_term_written = s->store_term;
        snprintf(s->store_holder, sizeof s->store_holder, "old");
        s->last_exhausted = 0;
        if (k <= 0)
            push(s, ms_to_us(2 * max_lease(s)) + (int64_t)(urand(s) * 600e6), EV_RESET, -1,
                 s->etag_ctr);
        if (store_kind == STORE_ROUTE53) { /* it existed from the start */
            s->hist[0] = s->hist[(s->hist_next + MAXHIST - 1) % MAXHIST];
            s->hist[(s->hist_next + MAXHIST - 1) % MAXHIST] = (past_state){0};
            s->hist[0].t = 0;
            s->nhist = 1;
            s->hist_next = 1;
        }
    }
    s->chaos = 1; /* begin_phase flips it: start calm */
    begin_phase(s);
    s->heal_at = 0;
}

static void teardown(sim *s)
{
    for (int i = 0; i < s->n; i++) {
        el_free(&s->nodes[i].eng);
        free(s->nodes[i].op.body);
        free(s->nodes[i].op.if_match);
        st_result_clear(&s->nodes[i].op.res);
    }
    for (size_t k = 0; k < s->nheap; k++)
        if (s->heap[k].late) {
            free(s->heap[k].late->body);
            free(s->heap[k].late->if_match);
            free(s->heap[k].late);
        }
    for (int i = 0; i < s->n; i++)
        fn_header_clear(&s->nodes[i].fd_read_hdr);
    free(s->heap);
    free(s->body);
    free(s->ro_body);
    free(s->fd_body);
    for (size_t k = 0; k < MAXHIST; k++)
        free(s->hist[k].body);
}

/* ---- fenced writes of a data object ---- */

static void fd_hash(const char *body, size_t len, char out[40])
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a: same bytes, same etag */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)body[i]) * 1099511628211ULL;
    snprintf(out, 40, "\"%016llx\"", (unsigned long long)h);
}

/* The next fenced write of node i's command: every 1 to 5 s. */
static void fd_schedule(sim *s, int i)
{
    push(s, s->t + (int64_t)(1e6 + urand(s) * 4e6), EV_FD_START, i, 0);
}

static void fd_start(sim *s, int i)
{
    node *nd = &s->nodes[i];
    fd_schedule(s, i);
    if (nd->fd_busy || !el_is_leader(&nd->eng, node_now(nd, s->t).mono) || nd->eng.term < 1)
        return;
    nd->fd_busy = 1;
    nd->fd_seq++;
    nd->fd_term = nd->eng.term;
    nd->fd_read_done = 0;
    fn_header_clear(&nd->fd_read_hdr);
    int64_t there = s->t + latency(s, nd);
    push(s, there, EV_FD_READ, i, nd->fd_seq);
    push(s, there + latency(s, nd), EV_FD_GOT, i, nd->fd_seq);
}

/* The read reaches the store: what is there now. */
static void fd_read(sim *s, int i, uint64_t seq)
{
    node *nd = &s->nodes[i];
    if (!nd->fd_busy || nd->fd_seq != seq)
        return;
    nd->fd_read_done = 1;
    nd->fd_read_exists = s->fd_exists;
    snprintf(nd->fd_read_etag, sizeof nd->fd_read_etag, "%s", s->fd_exists ? s->fd_etag : "");
    fn_header_clear(&nd->fd_read_hdr);
    if (s->fd_exists) {
        const char *b;
        size_t n;
        if (fn_parse(s->fd_body, s->fd_len, &nd->fd_read_hdr, &b, &n) != FN_FENCED)
            nd->fd_read_hdr.term = -1; /* never: only envelopes are written */
    }
}

/* The answer reaches the node (after any pause of it): the fence's rule,
 * the leadership check just before sending, and the conditional write. */
static void fd_got(sim *s, int i, uint64_t seq)
{
    node *nd = &s->nodes[i];
    if (!nd->fd_busy || nd->fd_seq != seq)
        return;
    nd->fd_busy = 0;
    if (!nd->fd_read_done)
        return; /* the read was lost: the next write tries again */
    if (!s->break_fence) {
        if (nd->fd_read_hdr.term < 0 || !fn_may_write(nd->fd_term, nd->id, &nd->fd_read_hdr)) {
            fd_fenced++;
            if (s->max_acq_term > nd->fd_term)
                fd_zombies++;
            return;
        }
        if (!el_is_leader(&nd->eng, node_now(nd, s->t).mono) || nd->eng.term != nd->fd_term) {
            fd_notleader++;
            return;
        }
    }
    fn_header mine = {.term = nd->fd_term, .holder = nd->id, .lock = "lock"};
    char data[64];
    int len = snprintf(data, sizeof data, "%s %lld", nd->id, (long long)nd->fd_term);
    size_t n = 0;
    char *env = fn_encode(&mine, data, (size_t)len, &n);
    if (!env)
        return;
    late_write *lw = calloc(1, sizeof *lw);
    lw->body = env;
    lw->body_len = n;
    /* The fence writes over the version it read; a plain PUT does not. */
    lw->if_match = !s->break_fence && nd->fd_read_exists ? strdup(nd->fd_read_etag) : NULL;
    int64_t at = s->t + latency(s, nd);
    if (s->t < nd->partitioned_until || (s->chaos && urand(s) < s->p_drop_req)) {
        s->faults++;
        if (!s->chaos || urand(s) >= s->p_late / (s->p_late + s->p_drop_req + 1e-9)) {
            free(lw->body);
            free(lw->if_match);
            free(lw);
            return; /* lost */
        }
        at += (int64_t)(urand(s) * 3e6); /* queued: it lands after the client gave up */
    }
    /* gen: 1 for a create-only write (the fence saw no object) */
    push_late(s, at, EV_FD_PUT, i, !s->break_fence && !nd->fd_read_exists, lw);
}

/* The write reaches the store: compare-and-set, then the checker. */
static void fd_put(sim *s, int i, int create_only, late_write *lw)
{
    int ok = s->break_fence ? 1
             : create_only  ? !s->fd_exists
                            : s->fd_exists && lw->if_match && !strcmp(lw->if_match, s->fd_etag);
    if (!ok) {
        fd_conflicts++;
        return;
    }
    fn_header h;
    const char *b;
    size_t n;
    if (fn_parse(lw->body, lw->body_len, &h, &b, &n) != FN_FENCED) {
        fn_header_clear(&h);
        return;
    }
    if (s->fd_exists &&
        (h.term < s->fd_term || (h.term == s->fd_term && strcmp(h.holder, s->fd_holder) != 0))) {
        s->violations++;
        if (s->max_acq_term > h.term)
            fd_zombie_landed++; /* a newer leadership exists: a deposed leader's write */
        if (s->violations < 5)
            fprintf(stderr,
                    "  t=%.3fs: node %d's fenced write of term %lld (%s) landed over term %lld "
                    "(%s): the data object's term went down\n",
                    s->t / 1e6, i, (long long)h.term, h.holder, (long long)s->fd_term,
                    s->fd_holder);
    }
    free(s->fd_body);
    s->fd_body = lw->body;
    s->fd_len = lw->body_len;
    lw->body = NULL;
    s->fd_exists = 1;
    fd_hash(s->fd_body, s->fd_len, s->fd_etag);
    s->fd_term = h.term;
    snprintf(s->fd_holder, sizeof s->fd_holder, "%s", h.holder);
    fn_header_clear(&h);
    fd_writes++;
}

static void run(sim *s, int64_t seconds)
{
    int64_t end = seconds * 1000000;
    while (s->nheap && s->t <= end) {
        sim_ev ev = pop(s);
        s->t = ev.t;
        if (s->t >= s->phase_end)
            begin_phase(s);
        if (ev.type == EV_CHECK) {
            check_liveness(s);
            continue;
        }
        if (ev.type == EV_RESET) {
            operator_reset(s, ev.gen);
            continue;
        }
        if (ev.type == EV_DELETE) {
            store_delete(s);
            continue;
        }
        if (ev.type == EV_RESTART) {
            node_restart(s, ev.node);
            continue;
        }
        if (ev.type == EV_TRANSFER) {
            operator_transfer(s);
            continue;
        }
        if (ev.type == EV_STORE_JUMP) {
            double u = urand(s);
            if (u < 0.4) /* the whole clock: 1 to 60 s ahead */
                s->store_off += (int64_t)(1e6 + urand(s) * 59e6);
            else if (u < 0.6) /* Date alone: an hour ahead */
                s->date_off += (int64_t)3600e6;
            else if (u < 0.8) /* Date alone: 1 to 30 s behind */
                s->date_off -= (int64_t)(1e6 + urand(s) * 29e6);
            else /* Date back in step with Last-Modified */
                s->date_off = 0;
            s->store_jumps++;
            continue;
        }
        if (ev.type == EV_PEER_ARRIVE || ev.type == EV_PEER_DEADLINE) {
            peer_wait *w = &s->waits[ev.node];
            if (!w->active)
                continue;
            if (ev.type == EV_PEER_ARRIVE) {
                w->deadline = s->t + (int64_t)ev.gen; /* gen carries the wait in µs */
                push(s, w->deadline, EV_PEER_DEADLINE, ev.node, 0);
                peer_try_answer(s, ev.node, 0);
            } else if (s->t < s->nodes[w->server].paused_until) {
                push(s, s->nodes[w->server].paused_until, EV_PEER_DEADLINE, ev.node, 0);
            } else {
                peer_try_answer(s, ev.node, 1);
            }
            continue;
        }
        node *nd = &s->nodes[ev.node];
        if (ev.type == EV_CLOCK_STEP) {
            /* An arbitrary step of the wall clock, either way: from 1 ms to
             * about a day (log-uniform). */
            double mag = exp(urand(s) * log(86400e6 / 1e3)) * 1e3;
            nd->wall_off += (int64_t)(urand(s) < 0.5 ? -mag : mag);
            s->clock_steps++;
            s->faults++;
            continue;
        }
        if (ev.type == EV_FD_READ) {
            fd_read(s, ev.node, ev.gen);
            continue;
        }
        if (ev.type == EV_FD_PUT) {
            fd_put(s, ev.node, (int)ev.gen, ev.late);
            free(ev.late->body);
            free(ev.late->if_match);
            free(ev.late);
            continue;
        }
        if (ev.type == EV_LATE) {
            st_result r = {0};
            store_apply(s, EL_OP_PUT, ev.late->body, ev.late->body_len, ev.late->if_match, &r);
            st_result_clear(&r);
            free(ev.late->body);
            free(ev.late->if_match);
            free(ev.late);
            continue;
        }
        if (s->t < nd->paused_until && ev.type != EV_APPLY) {
            push(s, nd->paused_until, ev.type, ev.node, ev.gen); /* the process is stopped */
            continue;
        }
        switch (ev.type) {
        case EV_FD_START:
            fd_start(s, ev.node);
            break;
        case EV_COMMIT:
            /* The command tree is dead now (s3lect run commits only then):
             * nobody may lead before this, and anyone may after. */
            if (el_transfer_commit(&nd->eng) == 0) {
                xf_commits++;
                nd->tree_dead = 1;
                if (nd->kill_at > s->t)
                    nd->kill_at = s->t;
                if (!nd->op.busy) {
                    nd->gen++;
                    push(s, s->t, EV_WAKE, ev.node, nd->gen);
                }
            }
            break;
        case EV_FD_GOT:
            fd_got(s, ev.node, ev.gen);
            break;
        case EV_WAKE:
            if (ev.gen == nd->gen && !nd->op.busy)
                step(s, ev.node);
            break;
        case EV_APPLY:
            if (nd->op.busy && nd->op.id == ev.gen && !nd->op.applied) {
                nd->op.applied = 1;
                (nd->op.roster ? roster_apply : store_apply)(
                    s, nd->op.kind, nd->op.body, nd->op.body_len, nd->op.if_match, &nd->op.res);
                if (nd->op.kind == EL_OP_PUT && !nd->op.roster && s->chaos &&
                    urand(s) < s->p_resend) {
                    /* The transport resent it (libcurl does when a reused
                     * connection dies before the answer): the node sees the
                     * copy's answer, a 412 if the first copy landed. */
                    s->faults++;
                    st_result_clear(&nd->op.res);
                    store_apply(s, nd->op.kind, nd->op.body, nd->op.body_len, nd->op.if_match,
                                &nd->op.res);
                }
            }
            break;
        case EV_REPLY:
            if (nd->op.busy && nd->op.id == ev.gen) {
                finish_op(s, ev.node);
                step(s, ev.node);
            }
            break;
        }
    }
}

int main(int argc, char **argv)
{
    int seeds = 10, nodes = 7, break_skew = 0, break_suspend = 0, break_store = 0, verbose = 0;
    int break_new_lock = 0, break_fence = 0;
    int store_kind = STORE_S3;
    int64_t stale_ms = 10000;
    static const char *const store_names[] = {"s3",    "dynamodb", "postgres", "route53", "gcs",
                                              "azure", "etcd",     "redis",    "mysql",   "k8s"};
    int64_t seconds = 1000000;
    uint64_t first_seed = 0;
    int one_seed = 0, shard = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            first_seed = strtoull(argv[++i], NULL, 0);
            one_seed = 1;
        } else if (!strcmp(argv[i], "--nodes") && i + 1 < argc)
            nodes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shard") && i + 1 < argc)
            shard = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--store") && i + 1 < argc) {
            const char *v = argv[++i];
            store_kind = -1;
            for (int k = 0; k < (int)(sizeof store_names / sizeof *store_names); k++)
                if (!strcmp(v, store_names[k]))
                    store_kind = k;
            if (store_kind < 0) {
                fprintf(stderr,
                        "--store: s3, dynamodb, postgres, route53, gcs, azure, etcd, redis, "
                        "mysql or k8s\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--stale-ms") && i + 1 < argc)
            stale_ms = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--break-skew"))
            break_skew = 1;
        else if (!strcmp(argv[i], "--break-suspend"))
            break_suspend = 1;
        else if (!strcmp(argv[i], "--break-store-clock"))
            break_store = 1;
        else if (!strcmp(argv[i], "--break-new-lock"))
            break_new_lock = 1;
        else if (!strcmp(argv[i], "--break-fence"))
            break_fence = 1;
        else if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else {
            fprintf(stderr,
                    "usage: test_sim [--seeds N] [--seconds S] [--seed X] [--nodes K] "
                    "[--store s3|dynamodb|postgres|route53|gcs|azure|etcd|redis|mysql|k8s] "
                    "[--stale-ms MS] "
                    "[--break-skew | --break-suspend | --break-store-clock | --break-new-lock | "
                    "--break-fence] [-v]\n");
            return 2;
        }
    }
    if (nodes < 2 || nodes > MAXN) {
        fprintf(stderr, "--nodes must be 2..%d\n", MAXN);
        return 2;
    }
    if (!one_seed) /* shards started in the same second get disjoint seeds */
        first_seed = (uint64_t)time(NULL) * 1000 + (uint64_t)shard * 100;
    if (one_seed)
        seeds = 1;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t steps = 0, faults = 0, changes = 0, peer_answers = 0, csteps = 0, suspends = 0;
    uint64_t stale = 0;
    int64_t deletes = 0;
    int64_t near = 0, resets = 0, skips = 0;
    int broken = break_skew || break_suspend || break_store || break_new_lock || break_fence;
    uint64_t restarts = 0;
    uint64_t stamped = 0, jumps = 0;
    int64_t checks = 0;
    int caught = 0;
    sim *s = malloc(sizeof *s);
    for (int k = 0; k < seeds; k++) {
        uint64_t seed = first_seed + (uint64_t)k;
        setup(s, seed, nodes, break_skew, break_suspend, break_store, break_new_lock, store_kind,
              stale_ms);
        s->break_fence = break_fence;
        s->verbose = verbose;
        run(s, seconds);
        steps += s->steps;
        faults += s->faults;
        changes += s->leader_changes;
        peer_answers += s->peer_answers;
        csteps += s->clock_steps;
        suspends += s->suspends;
        checks += s->liveness_checks;
        stale += s->stale_reads;
        deletes += s->deletes;
        restarts += s->restarts;
        stamped += s->stamped_reads;
        jumps += s->store_jumps;
        if (s->near_limit && !broken) {
            near++;
            resets += s->resets;
            skips += s->exhausted_skips;
            /* Terms near the limit ran out, the operator reset them, and
             * leaders followed (their terms checked as any others). */
            CHECK(s->resets > 0 && s->acq_after_reset > 0,
                  "seed %llu (term near 2^53): %lld resets, %lld acquisitions after one",
                  (unsigned long long)seed, (long long)s->resets, (long long)s->acq_after_reset);
        }
        if (s->violations) {
            if (broken) {
                caught++;
            } else {
                fprintf(stderr,
                        "seed %llu: %d violations (reproduce: test_sim --seed %llu "
                        "--seconds %lld --nodes %d --store %s)\n",
                        (unsigned long long)seed, s->violations, (unsigned long long)seed,
                        (long long)seconds, nodes, store_names[store_kind]);
            }
        }
        if (!broken)
            CHECK(s->violations == 0, "seed %llu", (unsigned long long)seed);
        CHECK(s->leader_changes > 0, "seed %llu elected nobody", (unsigned long long)seed);
        teardown(s);
    }
    free(s);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double wall = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    printf("simulation (store model %s%s): %llu stale reads\n", store_names[store_kind],
           store_kind == STORE_ROUTE53 ? ", reads up to --stale-ms old" : "",
           (unsigned long long)stale);
    printf("simulation: %lld seeds started next to a term near 2^53 - 1: %lld operator resets, "
           "%lld liveness checks skipped while the term could not grow\n",
           (long long)near, (long long)resets, (long long)skips);
    printf("simulation: %lld lock objects deleted under a leader or follower, %llu node "
           "restarts\n",
           (long long)deletes, (unsigned long long)restarts);
    if (seeds >= 4)
        CHECK(deletes > 0, "no seed deleted the lock object");
    if (store_kind == STORE_ROUTE53)
        CHECK(stale > 0, "the route53 model served no stale read");
    printf("simulation: %llu writes of the followers' roster\n", roster_writes);
    printf("simulation: transfers: %llu asked, %llu committed, %llu handed over, %llu "
           "leaderships begun within 5 s of a handover\n",
           xf_asked, xf_commits, xf_done, xf_taken);
    if ((double)seconds * seeds >= 1e6 && store_kind != STORE_ROUTE53)
        CHECK(xf_done > 0 && xf_taken > 0, "no transfer was handed over");
    if (store_kind == STORE_ROUTE53) /* stale reads: transfers are refused there */
        CHECK(xf_done == 0, "%llu transfers on a store with stale reads", xf_done);
    printf("simulation: fenced writes of the data object: %llu stored, %llu fenced before sending "
           "(%llu of them a deposed leader's: a newer leadership existed; the rest after the "
           "lock's terms started again lower), %llu refused by the store's condition, %llu "
           "skipped: not leading\n",
           fd_writes, fd_fenced, fd_zombies, fd_conflicts, fd_notleader);
    CHECK(fd_writes > 0, "no leader's fenced write was stored");
    /* Peer checks fail rarely enough that one short seed may see none (the
     * sanitizer builds run one seed of 2·10^5 s): judged on 10^6 s or more. */
    if ((double)seconds * seeds >= 1e6 && !break_skew && !break_suspend)
        CHECK(roster_writes > 0, "peer-mode followers whose checks failed never took turns");
    printf("simulation: %llu reads stamped by the store's clock, %llu store clock jumps\n",
           (unsigned long long)stamped, (unsigned long long)jumps);
    if (store_kind == STORE_AZURE) {
        printf("simulation: %llu lost creates answered 409 BlobAlreadyExists\n", azure_409s);
        /* Lost creates are rare here (racing first writes only): the
         * mapping the model relies on is checked directly too. */
        CHECK(st_azure_outcome(409, "BlobAlreadyExists") == ST_PRECONDITION &&
                  st_azure_outcome(412, "ConditionNotMet") == ST_PRECONDITION &&
                  st_azure_outcome(404, "BlobNotFound") == ST_NOT_FOUND &&
                  st_azure_outcome(503, "ServerBusy") == ST_TRANSIENT,
              "the azure store maps a lost create, a stale etag, a missing blob or "
              "throttling wrongly");
    }
    if (store_kind == STORE_K8S) {
        printf("simulation: k8s answers: %llu lost creates (409 AlreadyExists), %llu stale "
               "resourceVersions (409 Conflict), %llu writes of a deleted Lease (404)\n",
               k8s_exists, k8s_conflicts, k8s_gone);
        CHECK(st_k8s_outcome(409, "AlreadyExists", "leases", "create") == ST_PRECONDITION &&
                  st_k8s_outcome(409, "Conflict", "leases", "update") == ST_PRECONDITION &&
                  st_k8s_outcome(404, "NotFound", "leases", "update") == ST_PRECONDITION &&
                  st_k8s_outcome(404, "NotFound", "leases", "get") == ST_NOT_FOUND &&
                  st_k8s_outcome(429, "TooManyRequests", "leases", "update") == ST_TRANSIENT &&
                  st_k8s_outcome(504, "Timeout", "leases", "update") == ST_TRANSIENT,
              "the k8s store maps a lost create, a stale resourceVersion, a deleted Lease or "
              "throttling wrongly");
        if ((double)seconds * seeds >= 1e6)
            CHECK(k8s_conflicts > 0, "the k8s model answered no 409 Conflict");
    }
    if (store_kind == STORE_S3 || store_kind == STORE_POSTGRES || store_kind == STORE_GCS ||
        store_kind == STORE_AZURE || store_kind == STORE_REDIS || store_kind == STORE_MYSQL)
        CHECK(stamped > 0, "the %s model stamped no read", store_names[store_kind]);
    printf("simulation: seeds %llu..%llu, %d nodes, %lld simulated s/seed (%.3g total), %llu "
           "engine steps, %.0f steps/s, %llu faults, %llu acquisitions, %llu peer answers, "
           "%lld liveness checks, %llu wall-clock steps, %llu suspends, %.1f s\n",
           (unsigned long long)first_seed, (unsigned long long)(first_seed + seeds - 1), nodes,
           (long long)seconds, (double)seconds * seeds, (unsigned long long)steps, steps / wall,
           (unsigned long long)faults, (unsigned long long)changes,
           (unsigned long long)peer_answers, (long long)checks, (unsigned long long)csteps,
           (unsigned long long)suspends, wall);
    if (break_skew) {
        printf("break-skew: the checker caught a violation in %d of %d seeds\n", caught, seeds);
        CHECK(caught > 0, "wall clocks beyond max_clock_skew must produce a detectable violation");
    }
    if (break_suspend) {
        printf("break-suspend: the checker caught a violation in %d of %d seeds\n", caught, seeds);
        CHECK(caught > 0,
              "a lease clock that stops in suspend must produce a detectable violation");
    }
    if (break_new_lock) {
        printf("break-new-lock: the checker caught a violation in %d of %d seeds\n", caught, seeds);
        CHECK(caught > 0, "nodes that create a missing lock they never saw at once, started "
                          "right after a delete under a leader, must produce a detectable "
                          "violation");
    }
    if (break_fence) {
        printf("break-fence: the checker caught a violation in %d of %d seeds, %llu of them a "
               "deposed leader's write landing over a newer term\n",
               caught, seeds, fd_zombie_landed);
        CHECK(caught > 0 && fd_zombie_landed > 0,
              "fenced writes without the term check and If-Match (plain PUTs) must let a deposed "
              "leader's write land over its successor's");
    }
    if (break_store) {
        printf("break-store-clock: the checker caught a violation in %d of %d seeds\n", caught,
               seeds);
        CHECK(caught > 0, "records that claim a shorter hold than their command tree lives, under "
                          "a store clock that runs ahead, must produce a detectable violation");
    }
    return t_done(break_fence      ? "simulation (fence removed)"
                  : break_skew     ? "simulation (broken clocks)"
                  : break_suspend  ? "simulation (clock stops in suspend)"
                  : break_store    ? "simulation (store clock jumps)"
                  : break_new_lock ? "simulation (missing lock created at once)"
                                   : "simulation");
}
