/* SPDX-License-Identifier: Apache-2.0 */
/* peer_server_int.h - what the leadership endpoint's files share (private to
 * peer/): peer_tls.c (TLS contexts, the zero-config identity), peer_addr.c
 * (addresses, listening sockets), peer_conn.c (a connection: TLS I/O, the
 * request, the answers, its state machine), peer_server.c (the registry,
 * the server thread, registration). */
#ifndef S3LECT_PEER_SERVER_INT_H
#define S3LECT_PEER_SERVER_INT_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "config.h"
#include "crypto.h"
#include "peer.h"
#include "s3lect.h"
#include "net.h"
#include "proc.h"
#include "util.h"

/* Certificate, key and CA files are read up to this size. */
#define PEER_MAX_PEM (1024 * 1024)

/* ---- the process-wide registry ------------------------------------------------ */

/* Handshake plus the complete first request head; for later requests on a
 * kept-alive connection, the head (and a batch's body) from its first byte. */
#define PEER_HEAD_TIMEOUT_MS 10000
/* A kept-alive connection may sit idle this long between requests. */
#define PEER_IDLE_TIMEOUT_MS 30000
/* Writing one response. */
#define PEER_WRITE_TIMEOUT_MS 10000
/* Pending long polls are re-checked this often when a source cannot tell
 * its changes (no state callback), else every PEER_SAFETY_RECHECK_MS. */
#define PEER_RECHECK_MS 100
#define PEER_SAFETY_RECHECK_MS 1000
/* After an error answer the rest of the client's request is read and
 * dropped for at most this long and this much, so that closing the socket
 * does not reset the connection before the client has read the answer. */
#define PEER_LINGER_MS 2000
#define PEER_LINGER_BYTES (256 * 1024)
#define PEER_HASH 1024

struct listener;

/* One elector's registration on a listener (peer.h: peer_server). */
struct peer_server {
    struct listener *l;
    struct peer_server *next, *prev, *hnext;
    struct peer_server *tnext, *tprev; /* the listener's stopped ones, oldest first */
    char inc[PEER_INC_MAX + 1];        /* "" when registered without one */
    peer_source src;
    int port;
    int tomb; /* stopped: answers "not the leader" until tomb_until */
    int64_t tomb_until;
    char *tomb_released; /* stopped: the released record its elector wrote, if any */
    uint64_t gen;        /* atomic: bumped by peer_server_notify */
    /* The successor (server thread only): a "not the leader" answer at view
     * version nom_ver has named one follower to take over first. */
    int nom_set;
    uint64_t nom_ver;
};

typedef struct listener {
    struct listener *next;
    char *addr;
    uint8_t key[CR_SHA256_LEN]; /* the TLS setup and health path */
    int explicit_port;
    char *health_path;
    SSL_CTX *ctx;
    int lfd, port;
    peer_server *regs;
    peer_server *thead, *ttail; /* stopped registrations, in the order they stopped */
    peer_server *hash[PEER_HASH];
    int nlive, nregs;
    int closing; /* no registration left: the server thread closes it */
} listener;

enum { C_HANDSHAKE, C_HEAD, C_BODY, C_GET, C_BATCH, C_WRITE, C_LINGER, C_CLOSED };

typedef struct conn {
    struct conn *next;
    listener *l;
    int fd;
    SSL *ssl;
    int state;
    short want;       /* poll events the TLS layer waits for */
    int64_t deadline; /* of the current state */
    int64_t accepted_ms, idle_since, head_started;
    int first; /* no request answered yet */
    int local; /* the request came from this process (its ?process= token) */
    peer_request req;
    size_t len; /* bytes in buf */
    char buf[PEER_MAX_HEADER];
    char *body; /* a batch's body (POST), NULL when the body is dropped */
    size_t body_len, body_need;
    char *out; /* the answer being written */
    size_t out_len, out_off;
    int keep, linger_after;
    size_t lingered;
    /* C_GET: the registration and the version the answer waits to change. */
    peer_server *reg;
    uint64_t ver, gen;
    int64_t wait_deadline;
    /* C_BATCH */
    peer_batch batch;
    uint64_t *gens;     /* per entry: the registration's gen at the last check */
    peer_server **regs; /* per entry: its registration (NULL: none), as of regs_epoch */
    uint64_t regs_epoch;
    int64_t gather_at;
    int64_t checked_at; /* full re-check */
} conn;

typedef struct ps_global {
    pthread_mutex_t life; /* serialises register/unregister (thread start/join) */
    pthread_mutex_t mu;   /* everything below; the server thread holds it except in poll() */
    pthread_cond_t cv;
    listener *ls;
    conn *conns;
    int nconns;
    int wakefd;          /* eventfd, kept for the process lifetime once made */
    int running, joiner; /* a thread runs; peer_server_stop will join it */
    pthread_t thread;
    uint64_t iter;
    int slow_sources; /* registrations without a state callback */
    int64_t accept_paused_until;
    uint64_t reg_epoch; /* bumped whenever a registration is forgotten */
} ps_global;
/* The process-wide registry and server state (peer_server.c). */
extern ps_global ps_g;

SSL_CTX *ps_make_ctx(const struct s3lect_config *cfg, const peer_identity *id, int mtls, char *err,
                     size_t errlen);
int ps_listen_on(const char *addr, int *fd_out, int *port_out, char *err, size_t errlen);
void ps_wake_server(void);
uint32_t ps_inc_hash(const char *s);
peer_server *ps_lookup(listener *l, const char *inc);
void ps_reg_state(peer_server *r, peer_state *st);
int ps_reg_view(peer_server *r, peer_view *v);
void ps_conn_close(conn *c);
void ps_batch_clear(conn *c);
void ps_check_get(conn *c, int64_t now, int full);
void ps_check_batch(conn *c, int64_t now, int full);
void ps_run(conn *c, int64_t now);
int ps_gone(short revents);
void ps_identity_forget_in_child(void);

#endif
