/* SPDX-License-Identifier: Apache-2.0 */
/* runtime.h - the process's shared runtime (docs/threading.md), private to
 * the files of runtime/ (docs/architecture.md lists them).
 *
 * One loop thread runs every elector's engine: a timer heap holds the next
 * wake-up of each idle elector, and one libcurl multi handle carries every S3
 * request and peer long poll, through a bounded pool of keep-alive
 * connections per store endpoint (requests beyond it wait in order and are
 * signed when they are sent). Stores that block (file locks, custom stores)
 * run on a small pool of worker threads. Callbacks run on callback threads:
 * an elector's events in order, one thread at a time per elector; more
 * threads are added while every one is held by a slow callback. A slow
 * callback therefore never delays a renewal, and never holds up another
 * elector's events for long.
 *
 * Locks: an elector's mu, then the runtime's mu (never the other way). The
 * loop thread owns the heap, the pools, the multi handle and each elector's
 * loop fields (elector.h) without a lock.
 */
#ifndef S3LECT_RUNTIME_H
#define S3LECT_RUNTIME_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>

#include "elector.h"
#include "util.h"

enum { RT_IO_NONE = 0, RT_IO_QUEUED, RT_IO_CURL, RT_IO_JOB, RT_IO_HUB };

#define RT_MAX_CALLBACK_THREADS 64
#define RT_MAX_WORKERS 64
#define RT_STUCK_MS 200          /* callback threads all busy this long: add one */
#define RT_EXTRA_IDLE_MS 10000   /* an added callback thread exits after this idle time */
#define RT_MAX_POLL_MS 1000      /* the loop re-reads the boot clock at least this often */
#define RT_SPREAD_MS_PER_START 2 /* first steps of electors started together: spread */
#define RT_PEER_LINGER_MS 200    /* a stopped peer-mode leader answers 404 this long */
/* An endpoint that fails at the connection level is probed, not stormed
 * (docs/threading.md "Outages"). */
#define RT_PROBE_FIRST_MS 100      /* the first probe after the failure, about */
#define RT_PROBE_MAX_MS 2000       /* probes at least this often while it fails */
#define RT_LEADER_PROBE_GAP_MS 100 /* a leader's request may probe this soon after the last */
#define RT_RATE_WINDOW_MS 10000    /* the steady send rate is measured over windows this long */
#define RT_RATE_WINDOWS 3          /* averaged over this many (not the first: it has the start) */
#define RT_RAMP_FACTOR 1.5         /* after a recovery: reads capped at this x the steady rate */
#define RT_RAMP_MIN_RATE 20.0      /* sends/s allowed after a recovery, at least */
#define RT_RAMP_MIN_MS 5000        /* the cap after a recovery lasts at least this long */
#define RT_RAMP_MAX_MS 120000      /* and at most this long */
#define RT_RAMP_DRAIN_POLLS 2      /* but lets every waiting elector read within this many of */
                                   /* their frequent intervals (issue 38 item 7) */
#define RT_RAMP_MAX_RATE 2000.0    /* a cap of at most this many sends/s (then: the queue waits) */
/* Batched follower checks (peer_hub.c, docs/peer.md). */
#define PEER_BATCH_INFLIGHT 4     /* batches in flight per remote endpoint (and pin) */
#define PEER_NOBATCH_MS 600000    /* an endpoint that does not batch: single checks this long */
#define RT_HUB_SHORT_WAIT_MS 1000 /* the wait of a batch on a group's last free connection */

/* One store endpoint's connections: at most max_conns requests at a time.
 * Loop thread only. */
typedef struct rt_pool {
    struct rt_pool *next;
    char *name;
    int inflight;
    s3lect_elector *qhead, *qtail;
    s3lect_elector *qprio; /* the last leader in the queue: leaders wait first */

    /* Health. After a connection-level failure (refused, reset, timed out)
     * the endpoint is down: one request at a time (the probe) is sent, the
     * others fail at once without touching the network, until a probe is
     * answered. */
    int down;
    int fails;             /* failed probes in a row (1: the failure that began it) */
    int64_t probe_at;      /* boot ms from which the next probe may go */
    int64_t probe_sent;    /* boot ms the last probe went */
    s3lect_elector *probe; /* the probe in flight, or NULL */
    char why[128];         /* the last connection-level failure (libcurl's words) */
    uint64_t not_sent;     /* requests failed without a send while down */

    /* Send rate: the steady rate, and the cap for a while after a recovery,
     * so the electors that failed together do not all read at once. */
    int64_t win_at; /* start of the current rate window (0: none yet) */
    uint64_t win_n; /* sends in it */
    int win_dirty;  /* it saw an outage or a cap: not a steady window */
    double steady;  /* sends/s over the last RT_RATE_WINDOWS steady windows (0: none) */
    double wins[RT_RATE_WINDOWS];
    int nwins;
    int64_t ramp_until;  /* boot ms: until then non-leaders' sends are capped */
    double rate, tokens; /* the cap (sends/s) and its token bucket */
    int64_t tok_at;
    int64_t max_poll; /* the longest poll interval of its electors (ms) */
} rt_pool;

typedef struct rt_hub_batch rt_hub_batch;
typedef struct rt_hub_group rt_hub_group;
typedef struct rt_hub_nobatch rt_hub_nobatch;

typedef struct rt_runtime {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* workers: a job was queued, or exit */
    pthread_cond_t disp_cv; /* callback threads: an elector is ready, or exit */
    pthread_cond_t exit_cv; /* a worker or callback thread exited */
    int nending;            /* workers and callback threads freeing their TLS state */
    int refs;               /* started electors not yet freed */
    int exiting;
    int max_conns, want_workers, want_disp;

    pthread_t loop_tid;
    CURLM *multi;
    s3lect_elector *kick_head;

    s3lect_elector *job_head, *job_tail;
    int nworkers, idle_workers;
    int64_t work_progress; /* boot ms a worker last took or finished a job */

    s3lect_elector *ready_head, *ready_tail;
    int ndisp, idle_disp;
    int64_t disp_progress; /* boot ms a callback thread last started or ended a delivery */

    u_rng rng;  /* under mu */
    u_rng lrng; /* loop thread only */
    int64_t win_at;
    int win_starts;

    /* Loop thread only. */
    s3lect_elector **heap;
    size_t nheap, capheap;
    s3lect_elector **kbuf, **retired;
    size_t capkbuf, nretired, capretired;
    CURL **easy;
    size_t neasy, capeasy;
    rt_pool *pools;
    rt_hub_group *hub;       /* batched follower checks, by remote endpoint */
    rt_hub_nobatch *nobatch; /* endpoints that answered a batch 404/405 */
} rt_runtime;

/* Shared by the runtime's sections. */

/* The process's runtime (NULL while no elector is started); under g_mu. */
extern rt_runtime *rt_shared;
extern _Thread_local s3lect_elector *rt_tls_cb;
extern _Thread_local int rt_tls_worker;
extern _Thread_local rt_runtime *rt_tls_runtime;

/* The timer heap (loop thread). */
void rt_heap_remove(rt_runtime *rt, s3lect_elector *e);
int rt_heap_schedule(rt_runtime *rt, s3lect_elector *e, int64_t at);

/* Events and callback threads. */
void rt_signal_evfd(s3lect_elector *e);
void rt_drain_evfd(s3lect_elector *e);
void rt_flush_events(rt_runtime *rt, s3lect_elector *e, el_time now);
void rt_note_peer_failure(s3lect_elector *e, int cls, st_result *res);
void rt_deliver(s3lect_elector *e, el_event *ev);
rt_qevent *rt_pop_event(s3lect_elector *e);
/* Delivers every queued event of e in this thread; called and returns with
 * e->mu held (released around each callback). Returns how many. */
int rt_deliver_queued(s3lect_elector *e);
void *rt_callback_main(void *arg);

/* Store endpoints: connections, health and send rate (loop thread). */
void rt_easy_put(rt_runtime *rt, CURL *h);
rt_pool *rt_pool_of(rt_runtime *rt, const char *name);
void rt_pool_note(rt_runtime *rt, rt_pool *p, s3lect_elector *e, CURLcode cc, int64_t now);
int rt_may_probe(rt_runtime *rt, rt_pool *p, s3lect_elector *e, int64_t now);
int rt_may_send(rt_runtime *rt, rt_pool *p, s3lect_elector *e, int64_t now);
int64_t rt_pool_wake(rt_runtime *rt, rt_pool *p);
void rt_not_sent(rt_runtime *rt, rt_pool *p, s3lect_elector *e, st_result *res, int64_t now);
void rt_pool_enqueue(rt_pool *p, s3lect_elector *e);
int rt_pool_send(rt_runtime *rt, s3lect_elector *e, st_result *res);
void rt_pool_pump(rt_runtime *rt, rt_pool *p);

/* Batched follower checks (peer_hub.c; loop thread). submit takes e's
 * EL_OP_PEER op (returns 1; e->io = RT_IO_HUB) or declines it (0: CA mode, a
 * record it cannot name, an endpoint that does not batch). done handles a
 * finished transfer if it is a batch (returns 1). abort ends e's check (a
 * stop). pump sends queued checks and fails entries past their deadline; it
 * returns the boot ms it wants to run again (INT64_MAX: no need). */
int rt_hub_submit(rt_runtime *rt, s3lect_elector *e);
int rt_hub_done(rt_runtime *rt, CURL *h, CURLcode cc);
void rt_hub_abort(rt_runtime *rt, s3lect_elector *e);
int64_t rt_hub_pump(rt_runtime *rt);
void rt_hub_free(rt_runtime *rt);
/* Starts e's peer op as a single check on its own client (loop.c). Returns
 * 1 when it runs, 0 when it ended at once (res filled). */
int rt_peer_single(rt_runtime *rt, s3lect_elector *e, st_result *res);

/* The loop. */
void rt_run(rt_runtime *rt, s3lect_elector *e, st_result *first);
/* Applies what other threads asked of e (stop, vetoes, parameters). Holds e->mu. */
void rt_apply_requests(s3lect_elector *e);
int rt_spawn_detached(void *(*fn)(void *), void *arg);
void *rt_loop_main(void *arg);

/* Workers: blocking stores. */
void *rt_worker_main(void *arg);

/* The runtime's life: joins (creating it if needed) for a starting elector. */
int rt_join(s3lect_elector *e, int64_t *delay, char *err, size_t errlen);

#define NOT_IN_HEAP ((size_t)-1)

#endif
