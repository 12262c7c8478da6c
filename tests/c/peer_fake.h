/* SPDX-License-Identifier: Apache-2.0 */
/* peer_fake.h - a scripted peer_source for the peer tests: the test sets
 * leading/etag under the mutex and bumps the version; wait() blocks on a
 * condition variable (monotonic clock) like the runtime's does. */
#ifndef S3LECT_PEER_FAKE_H
#define S3LECT_PEER_FAKE_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "peer.h"
#include "util.h"

typedef struct fake_source {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int leading;
    char etag[64];
    char leader_id[64];
    long long term;
    uint64_t version;
    int stopped;    /* wait() returns -1 */
    int deaf;       /* wait() ignores stop (an elector that never wakes its waiters) */
    int waits;      /* calls of wait() */
    int view_calls; /* calls of view() */
} fake_source;

static inline void fake_init(fake_source *f, int leading, const char *etag)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&f->cv, &a);
    pthread_condattr_destroy(&a);
    f->leading = leading;
    snprintf(f->etag, sizeof f->etag, "%s", etag);
    snprintf(f->leader_id, sizeof f->leader_id, "node-1");
    f->term = 7;
    f->version = 1;
}

static inline void fake_destroy(fake_source *f)
{
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
}

/* Changes the state and wakes waiters (what the runtime does on a renewal,
 * a step-down or a release). */
static inline void fake_set(fake_source *f, int leading, const char *etag)
{
    pthread_mutex_lock(&f->mu);
    f->leading = leading;
    if (etag)
        snprintf(f->etag, sizeof f->etag, "%s", etag);
    f->version++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static inline void fake_stop(fake_source *f)
{
    pthread_mutex_lock(&f->mu);
    f->stopped = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static inline int fake_count(fake_source *f, int *field)
{
    pthread_mutex_lock(&f->mu);
    int v = *field;
    pthread_mutex_unlock(&f->mu);
    return v;
}

/* Copies s into out as the inside of a JSON string (quotes and backslashes escaped). */
static inline void fake_json_escape(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 3 < cap; s++) {
        if (*s == '"' || *s == '\\')
            out[o++] = '\\';
        out[o++] = *s;
    }
    out[o] = '\0';
}

static inline int fake_view(void *ctx, peer_view *v)
{
    fake_source *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->view_calls++;
    v->leading = f->leading;
    v->version = f->version;
    v->etag = strdup(f->etag);
    char etag_json[160];
    fake_json_escape(f->etag, etag_json, sizeof etag_json);
    v->body = u_asprintf("{\"leaderID\":\"%s\",\"leaderAddr\":\"127.0.0.1:1\","
                         "\"lastUpdated\":\"2025-01-01T00:00:00.000Z\",\"term\":%lld,"
                         "\"etag\":\"%s\"}",
                         f->leader_id, f->term, etag_json);
    pthread_mutex_unlock(&f->mu);
    return v->etag && v->body ? 0 : -2;
}

static inline int fake_wait(void *ctx, uint64_t version, int64_t deadline)
{
    fake_source *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->waits++;
    int rc;
    for (;;) {
        if (f->version != version) {
            rc = 1;
            break;
        }
        if (f->stopped && !f->deaf) {
            rc = -1;
            break;
        }
        int64_t now = u_mono_ms();
        if (now >= deadline) {
            rc = 0;
            break;
        }
        struct timespec ts = {(time_t)(deadline / 1000), (long)(deadline % 1000) * 1000000L};
        pthread_cond_timedwait(&f->cv, &f->mu, &ts);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static inline peer_source fake_source_of(fake_source *f)
{
    peer_source s = {fake_view, fake_wait, f, NULL, NULL, ""};
    return s;
}

/* The cheap state (peer_source.state): with it the server re-checks pending
 * polls on peer_server_notify (and once a second), as with the runtime. */
static inline void fake_state(void *ctx, peer_state *st)
{
    fake_source *f = ctx;
    pthread_mutex_lock(&f->mu);
    st->version = f->version;
    st->leading = f->leading;
    st->term = f->term;
    st->etag_hash = peer_etag_hash(f->leading ? f->etag : "");
    pthread_mutex_unlock(&f->mu);
}

static inline peer_source fake_source_notified(fake_source *f)
{
    peer_source s = {fake_view, fake_wait, f, fake_state, NULL, ""};
    return s;
}

/* A new term (and etag) while leading. */
static inline void fake_set_term(fake_source *f, long long term, const char *etag)
{
    pthread_mutex_lock(&f->mu);
    f->term = term;
    snprintf(f->etag, sizeof f->etag, "%s", etag);
    f->version++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

#endif
