/* elector.h - the elector handle (internal): engine + store + threads. */
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

#define RT_NCALLBACKS 6 /* indexed by s3lect_event_type; [0] is the acquire hook */

struct s3lect_elector {
    s3lect_config *cfg; /* private copy */
    st_store *store;
    char *key;
    char incarnation[33];

    pthread_mutex_t mu;      /* guards everything below */
    pthread_cond_t wake_cv;  /* election thread: stop, veto, config change */
    pthread_cond_t state_cv; /* waiters: leadership, cycle, stopped */
    pthread_cond_t q_cv;     /* dispatcher / s3lect_dispatch: events queued */
    el_engine eng;
    int started, stop_req, stop_release, joining, stopped;
    int64_t *vetoes; /* terms vetoed by the hook, for the election thread */
    size_t nvetoes;
    int params_changed;
    int64_t last_cycle_wall;
    uint64_t seen_cycle;

    pthread_t el_thread, disp_thread;
    int have_disp, disp_exit;
    rt_qevent *q_head, *q_tail;
    int evfd;
    int dispatching; /* poll mode: a thread is inside s3lect_dispatch */
    pthread_t dispatch_tid;

    /* Peer mode. */
    peer_client *pc;         /* used by the election thread without mu while it runs */
    peer_client *pending_pc; /* s3lect_enable_peer_mode while running: swapped in by the
                              * election thread between two operations (under mu) */
    peer_server *ps;
    uint64_t peer_version; /* bumped when leading or our etag changes */
    int peer_leading;
    char *peer_etag;
    int abort_io;               /* set on stop (atomically): interrupts a follower's long poll */
    peer_fail_stats peer_fails; /* failed peer checks by class (status "peerFailures") */
    char peer_last_fail[600];   /* the message of the last failed check ("" if none) */
    int64_t peer_report_ms;     /* report period per class; 0: PEER_FAIL_REPORT_MS (tests) */

    rt_callback cb[RT_NCALLBACKS];
    char errmsg[512];
};

int rt_start(s3lect_elector *e);
int rt_stop(s3lect_elector *e, int release);
int rt_dispatch(s3lect_elector *e, int64_t timeout_ms);
/* 1 if the calling thread is running one of e's callbacks. */
int rt_in_callback(s3lect_elector *e);
/* 1 on the elector's own election thread (inside a custom store callback). */
int rt_in_election_thread(s3lect_elector *e);
/* Sets e->errmsg (printf-style) and returns code. Caller holds no lock. */
int rt_fail(s3lect_elector *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void rt_free_queue(s3lect_elector *e);
el_params rt_params(const s3lect_config *c);
/* The peer endpoint's view of this elector (peer_source callbacks). */
peer_source rt_peer_source(s3lect_elector *e);
/* Starts the peer server if peer mode is on and it is not running. Holds no lock. */
int rt_start_peer_server(s3lect_elector *e);

#endif
