/* SPDX-License-Identifier: Apache-2.0 */
/* conn_pool.h - a small pool of database connections per connection
 * setting, shared by every store object of the process that names the same
 * server, user and settings (the postgres and mysql stores).
 *
 *   conn_pool *p = conn_pool_get(key, data, free_data, close_conn);
 *   int make;
 *   void *c = conn_pool_take(p, deadline, &make);
 *   if (!c && make) c = connect_somehow(p->data)  // then, if that failed:
 *                                                  // conn_pool_unreserve(p)
 *   ... use c ...
 *   conn_pool_give(p, c, still_good);
 *   conn_pool_put(p);                              // with the store
 *
 * At most CONN_POOL_MAX connections of a pool are open (idle or in use);
 * take waits for one until its deadline. key tells pools apart and may hold
 * a password: it is wiped when the pool goes. */
#ifndef S3LECT_CONN_POOL_H
#define S3LECT_CONN_POOL_H

#include <stdint.h>

#define CONN_POOL_MAX 4

typedef struct conn_pool {
    struct conn_pool *next;
    char *key;
    int refs;
    void *idle[CONN_POOL_MAX];
    int nidle, open; /* open: connections in use or idle */
    void *data;      /* the store's: how to connect */
    void (*free_data)(void *data);
    void (*close_conn)(void *conn);
} conn_pool;

/* The pool for key, a new reference. data (with free_data) becomes the new
 * pool's, or is freed at once when a pool for key exists. NULL when out of
 * memory (data freed). */
conn_pool *conn_pool_get(const char *key, void *data, void (*free_data)(void *),
                         void (*close_conn)(void *));
/* Drops a reference; the last one closes the idle connections and frees. */
void conn_pool_put(conn_pool *p);
/* An idle connection; or NULL with *make = 1: a place is reserved for a new
 * connection the caller makes (conn_pool_give it, or conn_pool_unreserve
 * when making it failed); or NULL with *make = 0: none was free before
 * deadline (u_mono_ms). */
void *conn_pool_take(conn_pool *p, int64_t deadline, int *make);
void conn_pool_unreserve(conn_pool *p);
/* Back to the pool when good, else closed (close_conn) and its place freed. */
void conn_pool_give(conn_pool *p, void *conn, int good);

#endif
