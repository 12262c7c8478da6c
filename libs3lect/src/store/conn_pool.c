/* SPDX-License-Identifier: Apache-2.0 */
/* conn_pool.c - database connections shared per setting (conn_pool.h). */
#include "conn_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

static pthread_mutex_t pools_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pools_cv; /* on CLOCK_MONOTONIC (u_cond_deadline's clock) */
static pthread_once_t pools_cv_once = PTHREAD_ONCE_INIT;
static conn_pool *pools;

static void pools_cv_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&pools_cv, &a);
    pthread_condattr_destroy(&a);
}

conn_pool *conn_pool_get(const char *key, void *data, void (*free_data)(void *),
                         void (*close_conn)(void *))
{
    pthread_once(&pools_cv_once, pools_cv_init);
    pthread_mutex_lock(&pools_mu);
    conn_pool *p = pools;
    while (p && strcmp(p->key, key) != 0)
        p = p->next;
    if (p) {
        p->refs++;
        pthread_mutex_unlock(&pools_mu);
        if (free_data)
            free_data(data);
        return p;
    }
    if ((p = calloc(1, sizeof *p)) != NULL && (p->key = u_strdup(key)) != NULL) {
        p->data = data;
        p->free_data = free_data;
        p->close_conn = close_conn;
        p->refs = 1;
        p->next = pools;
        pools = p;
        pthread_mutex_unlock(&pools_mu);
        return p;
    }
    pthread_mutex_unlock(&pools_mu);
    free(p);
    if (free_data)
        free_data(data);
    return NULL;
}

void conn_pool_put(conn_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&pools_mu);
    if (--p->refs > 0) {
        pthread_mutex_unlock(&pools_mu);
        return;
    }
    for (conn_pool **pp = &pools; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    pthread_mutex_unlock(&pools_mu);
    for (int i = 0; i < p->nidle; i++)
        p->close_conn(p->idle[i]);
    if (p->free_data)
        p->free_data(p->data);
    u_wipe_free(p->key);
    free(p);
}

void *conn_pool_take(conn_pool *p, int64_t deadline, int *make)
{
    *make = 0;
    pthread_mutex_lock(&pools_mu);
    while (p->nidle == 0 && p->open >= CONN_POOL_MAX) {
        struct timespec ts = u_cond_deadline(deadline, 1000);
        pthread_cond_timedwait(&pools_cv, &pools_mu, &ts);
        if (u_mono_ms() >= deadline && p->nidle == 0 && p->open >= CONN_POOL_MAX) {
            pthread_mutex_unlock(&pools_mu);
            return NULL;
        }
    }
    void *c = NULL;
    if (p->nidle > 0) {
        c = p->idle[--p->nidle];
    } else {
        p->open++;
        *make = 1;
    }
    pthread_mutex_unlock(&pools_mu);
    return c;
}

void conn_pool_unreserve(conn_pool *p)
{
    pthread_mutex_lock(&pools_mu);
    p->open--;
    pthread_cond_broadcast(&pools_cv);
    pthread_mutex_unlock(&pools_mu);
}

void conn_pool_give(conn_pool *p, void *conn, int good)
{
    pthread_mutex_lock(&pools_mu);
    if (good)
        p->idle[p->nidle++] = conn;
    else
        p->open--;
    pthread_cond_broadcast(&pools_cv);
    pthread_mutex_unlock(&pools_mu);
    if (!good)
        p->close_conn(conn);
}
