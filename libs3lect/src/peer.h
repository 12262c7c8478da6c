/* peer.h - peer mode (DESIGN §6): the leader's HTTPS leadership endpoint and
 * the follower's long-poll check of it.
 *
 * Layers: peer_http.c parses requests and builds responses (pure, fuzzable);
 * peer_server.c is the TLS server (OpenSSL API subset shared with BoringSSL);
 * peer_client.c is the follower's libcurl client. The runtime owns one
 * server (when peer mode is on) and one client per elector.
 */
#ifndef S3LECT_PEER_H
#define S3LECT_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct s3lect_config;

/* ---- what the endpoint serves ------------------------------------------ */

/* The elector's state as the endpoint needs it. body is the record JSON plus
 * "etag" and "term" fields (Go s3lect followers read leaderID, leaderAddr,
 * lastUpdated); it is meaningful only while leading. */
typedef struct peer_view {
    int leading;      /* holds a valid lease right now */
    char *etag;       /* etag of the leader's last successful write ("" if none) */
    char *body;       /* allocated JSON object */
    uint64_t version; /* increases whenever leading/etag change */
} peer_view;

void peer_view_clear(peer_view *v);

/* Fills *v with the current state (allocates). Implemented by the runtime.
 * Thread-safe; called from server threads. Returns 0 or S3LECT_ENOMEM. */
typedef int (*peer_view_fn)(void *ctx, peer_view *v);
/* Blocks until the view's version differs from `version`, the elector stops,
 * or mono ms `deadline` passes. Returns 1 if it changed, 0 on timeout, -1 when
 * stopped. Implemented by the runtime. */
typedef int (*peer_wait_fn)(void *ctx, uint64_t version, int64_t deadline);

typedef struct peer_source {
    peer_view_fn view;
    peer_wait_fn wait;
    void *ctx;
} peer_source;

/* ---- HTTP: parsing and answering (pure; fuzzed) ------------------------- */

#define PEER_MAX_HEADER 8192 /* request line + headers; larger → 431/400 */
#define PEER_MAX_WAIT_MS 60000

typedef struct peer_request {
    char method[16];
    char path[256];    /* without the query */
    char etag[160];    /* ?etag= (URL-decoded), "" if absent */
    int64_t wait_ms;   /* ?wait= capped at PEER_MAX_WAIT_MS, 0 if absent */
    int keep_alive;    /* HTTP/1.1 without "Connection: close" */
    size_t header_len; /* bytes consumed by request line + headers + CRLFCRLF */
    size_t content_length;
} peer_request;

/* Parses one HTTP/1.x request head from buf. Returns 1 when complete (req
 * filled), 0 when more bytes are needed, or a negative HTTP status to answer
 * (-400 malformed, -431 too large, -505 bad version). Never reads past len. */
int peer_parse_request(const char *buf, size_t len, peer_request *req);
/* Parses only "path?query" (for s3lect_peer_response). Same returns, no head. */
int peer_parse_target(const char *target, peer_request *req);

/* Computes the answer for a parsed request: 200 + body while leading (after
 * long-polling per wait/etag), 404 when not leading, 405 for methods other
 * than GET/HEAD, 404 for other paths. *body is allocated (JSON). */
int peer_answer(const peer_source *src, const char *health_path, const peer_request *req,
                int *status, char **body);

/* ---- server ------------------------------------------------------------- */

typedef struct peer_server peer_server;

/* Starts listening on cfg->peer_listen (or cfg->server_addr) with TLS from
 * cfg->peer_cert/peer_key (PEM bytes or a file path); verifies client
 * certificates against cfg->peer_ca when mtls is set. Threads: one acceptor,
 * one per connection, at most PEER_MAX_CONNS. err gets a one-line message. */
#define PEER_MAX_CONNS 64
int peer_server_start(const struct s3lect_config *cfg, const peer_source *src, int mtls,
                      peer_server **out, char *err, size_t errlen);
/* The bound port (useful when listening on port 0). */
int peer_server_port(const peer_server *s);
/* Stops accepting, wakes and closes every connection, joins threads. */
void peer_server_stop(peer_server *s);

/* ---- client ------------------------------------------------------------- */

typedef struct peer_client peer_client;

/* A client verifying servers against cfg->peer_ca (PEM bytes or path), with
 * cfg->peer_client_cert (cert + key PEM) for mTLS when set. One reused
 * connection (keep-alive). Not thread-safe: the election thread owns it. */
int peer_client_new(const struct s3lect_config *cfg, peer_client **out, char *err, size_t errlen);
void peer_client_free(peer_client *c);
/* Replaces the CA bundle (s3lect_enable_peer_mode at run time). */
int peer_client_set_ca(peer_client *c, const void *pem, size_t len);

/* GET https://{addr}{path}?wait=<wait_ms>&etag=<etag> and expect the leader
 * `expect_id`. On success out->outcome = ST_OK, out->body = the record JSON as
 * served, out->etag = its "etag" field. Anything else — refused, reset,
 * timeout, TLS failure, non-200, another leader id, unparsable body — is
 * ST_TRANSIENT with a message. Total time is bounded by wait_ms + timeout_ms.
 * *abort_flag (may be NULL) is polled; when it becomes non-zero the call
 * returns ST_TRANSIENT promptly (stop). */
void peer_client_check(peer_client *c, const char *addr, const char *path, const char *etag,
                       int64_t wait_ms, int64_t timeout_ms, const char *expect_id,
                       const volatile int *abort_flag, st_result *out);

#endif
