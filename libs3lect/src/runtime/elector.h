/* SPDX-License-Identifier: Apache-2.0 */
/* elector.h - the elector handle (internal): engine + store, run by the
 * process's shared runtime (docs/threading.md). */
#ifndef S3LECT_ELECTOR_H
#define S3LECT_ELECTOR_H

#include <pthread.h>

#include "config.h"
#include "election.h"
#include "peer.h"
#include "store.h"

typedef struct rt_callback {
    s3lect_event_fn fn;
    s3lect_acquire_fn hook;
    void *userdata;
    s3lect_free_fn userdata_free;
} rt_callback;

typedef struct rt_qevent {
    struct rt_qevent *next;
    el_event ev;
} rt_qevent;

#define RT_NCALLBACKS 7 /* indexed by s3lect_event_type; [0] is the acquire hook */

struct rt_pool;

/* Counters for s3lect_metrics_text (docs/metrics.md). Store outcomes are
 * S3LECT_STORE_* (0..5); latency buckets are RT_LAT_BOUNDS seconds. */
#define RT_LAT_NBUCKETS 12
#define RT_LAT_BOUNDS                                                                              \
    {                                                                                              \
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30                                \
    }
typedef struct rt_metrics {
    uint64_t req[2][6];                      /* [0 get, 1 put][outcome] */
    uint64_t lat_bucket[2][RT_LAT_NBUCKETS]; /* not cumulative; +Inf = count */
    uint64_t lat_count[2];
    double lat_sum[2];
    uint64_t peer_answers;    /* a peer check answered by the leader */
    uint64_t peer_not_leader; /* answered 404: the node no longer leads */
    uint64_t acquired;
    uint64_t lost[8];   /* by S3LECT_LOST_* */
    int64_t written_at; /* boot ms of our last successful write (0: none) */
} rt_metrics;

struct s3lect_elector {
    s3lect_config *cfg; /* private copy */
    st_store *store;
    char *key;
    char *lock_shown; /* cfg->lock as it may be shown: st_lock_display */
    char *lock_label; /* the canonical lock (metrics label): st_lock_canonical */
    char incarnation[33];
    char succ_key[33]; /* the successor key of its records (hex), for the endpoint */

    pthread_mutex_t mu;      /* guards everything below unless said otherwise */
    pthread_cond_t state_cv; /* waiters: leadership, cycle, done, stopped */
    pthread_cond_t q_cv;     /* s3lect_dispatch and stop: events queued or delivered */
    el_engine eng;
    int64_t hb_timeout, hb_at; /* s3lect_require_heartbeat / s3lect_heartbeat (mono ms) */
    int started, stop_req, stop_release, joining, stopped;
    int joined;      /* started and counted by the runtime (rt_release undoes it) */
    int done;        /* the loop is finished with this elector (engine stopped, no I/O) */
    int64_t *vetoes; /* terms vetoed by the hook, for the loop */
    size_t nvetoes;
    int params_changed;
    int64_t last_cycle_wall;
    uint64_t seen_cycle;

    /* Events for the callbacks: delivered by a callback thread of the runtime
     * (in order, one thread at a time per elector), or by s3lect_dispatch in
     * poll mode. */
    rt_qevent *q_head, *q_tail;
    int evfd;        /* created on demand (s3lect_event_fd, poll mode); -1 if none */
    int dispatching; /* poll mode: a thread is inside s3lect_dispatch */
    pthread_t dispatch_tid;

    /* Guarded by the runtime's lock (rt.mu), taken inside mu when both are. */
    int in_ready;   /* queued for a callback thread */
    int delivering; /* a callback thread is delivering this elector's events */
    int kicked;     /* on the loop's kick list */
    struct s3lect_elector *ready_next, *kick_next, *job_next;
    st_result job_res; /* a worker's answer, handed to the loop */
    int job_done;

    int64_t start_at; /* boot-clock ms of the first step (starts are spread) */

    /* Owned by the loop thread (no lock). */
    int begun, finished;
    size_t heap_idx;    /* position in the timer heap, or (size_t)-1 */
    int store_back;     /* its pool answered again after an outage: el_store_back (loop) */
    int64_t wake_at;    /* boot-clock ms of the next step when idle */
    int io;             /* RT_IO_* : what the current operation waits on */
    el_op op;           /* the operation in flight (points into engine memory) */
    int64_t op_sent_at; /* boot-clock ms el_next was asked (the op's time base) */
    void *easy;         /* the libcurl handle of an S3 or peer transfer */
    st_xfer *xfer;
    struct rt_pool *pool;             /* S3: the connection pool it waits for */
    struct s3lect_elector *pool_next; /* S3: waiting in the pool's queue */
    int prio;                         /* the op is a leader's: it goes first */
    st_result begin_res;              /* S3: a warning from begin, kept for completion */

    /* Peer mode. */
    peer_client *pc;         /* used by the loop without mu while an op runs */
    peer_client *pending_pc; /* s3lect_enable_peer_mode while running: swapped in by the
                              * loop between two operations (under mu) */
    peer_server *ps;
    int peer_cls; /* PEER_FAIL_* of the last peer op (loop) */
    /* A batched check (peer_hub.c; loop thread): its group, the batch it is
     * in (NULL: queued), the group's queue or the batch entry's electors, the
     * leader's incarnation and term it names, and the boot ms its wait ends
     * (from the op's start; peer_timeout later it fails as a timeout). */
    struct rt_hub_group *hub;
    struct rt_hub_batch *hub_batch;
    struct s3lect_elector *hub_next;
    char hub_inc[33];
    int64_t hub_term, hub_due;
    peer_identity *pid;              /* zero-config: the endpoint's ephemeral key and certificate */
    char peer_pin[PEER_PIN_LEN + 1]; /* its fingerprint, written in our records */
    int self_changed; /* endpoint bound: the loop gives server_addr and peer_pin to the engine */
    uint64_t peer_version; /* bumped when leading or our etag changes */
    int peer_leading;
    char *peer_etag;
    peer_fail_stats peer_fails; /* failed peer checks by class (status "peerFailures") */
    char peer_last_fail[600];   /* the message of the last failed check ("" if none) */
    int64_t peer_report_ms;     /* report period per class; 0: PEER_FAIL_REPORT_MS (tests) */

    rt_callback cb[RT_NCALLBACKS];
    char errmsg[512];
    int errcode;        /* the code that goes with errmsg (s3lect_errcode) */
    rt_metrics metrics; /* under mu (api/metrics.c writes the exposition) */
};

/* The key of the store request e->op: the lock's, or another object of the
 * store the engine names (the followers' roster). */
static inline const char *rt_op_key(const struct s3lect_elector *e)
{
    return e->op.key ? e->op.key : e->key;
}

/* Virtual clocks (vclock.c, s3lect_config_set_clock): electors whose
 * cfg->vclock is set are run by s3lect_clock_advance, not by the loop. */
/* s3lect_new: e joins its clock (a reference) and gets its seed. */
int rt_vclock_attach(s3lect_elector *e, uint64_t *seed);
/* free: e leaves its clock (NULL clock, or never attached: nothing). */
void rt_vclock_detach(s3lect_elector *e);
/* The monotonic ms e's engine lives in: its clock's, else u_mono_ms(). */
int64_t rt_now(const s3lect_elector *e);
/* start and stop of an elector on a virtual clock (lifecycle.c hands them over). */
int rt_vclock_start(s3lect_elector *e);
int rt_vclock_stop(s3lect_elector *e, int release);
/* rt_kick_locked of an elector on a virtual clock: due at once. Holds e->mu. */
void rt_vclock_kick_locked(s3lect_elector *e);

int rt_start(s3lect_elector *e);
int rt_stop(s3lect_elector *e, int release);
/* Stops es[0..n) together (s3lect_stop_many): the first error, after
 * stopping every other one. */
int rt_stop_many(s3lect_elector *const *es, size_t n, int release);
int rt_dispatch(s3lect_elector *e, int64_t timeout_ms);
/* Called by free: the elector leaves the runtime (the last one shuts it down). */
void rt_release(s3lect_elector *e);
/* 1 if the calling thread is running one of e's callbacks. */
int rt_in_callback(s3lect_elector *e);
/* 1 on a worker thread of the runtime (inside a custom store function). */
int rt_in_store_call(void);
/* Tells the loop that e has something to do (stop, veto, new parameters or
 * peer client). Holds e->mu. */
void rt_kick_locked(s3lect_elector *e);
/* The event fd (created on first use). Holds no lock. */
int rt_event_fd(s3lect_elector *e);
/* Sets e->errmsg (printf-style) and e->errcode, and returns code. Caller holds no lock. */
int rt_fail(s3lect_elector *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void rt_free_queue(s3lect_elector *e);
el_params rt_params(const s3lect_config *c);
/* The peer endpoint's view of this elector (peer_source callbacks). */
peer_source rt_peer_source(s3lect_elector *e);
/* Starts the peer server if peer mode is on and it is not running. Holds no lock. */
int rt_start_peer_server(s3lect_elector *e);

#endif
