/* SPDX-License-Identifier: Apache-2.0 */
/* peer.h - peer mode (DESIGN §6): the leader's HTTPS leadership endpoint and
 * the follower's long-poll check of it.
 *
 * Layers: peer_http.c parses requests and builds responses (pure, fuzzable);
 * peer_server.c is the TLS server (OpenSSL API subset shared with BoringSSL):
 * one listener per listen address and TLS setup, one server thread per
 * process; peer_client.c is the follower's libcurl client. The runtime
 * registers each peer-mode elector on the server and owns one client per
 * elector.
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
    /* Not leading: the released record this elector wrote last (JSON object
     * with "etag"), handed to the successor (docs/peer.md "One
     * successor"); NULL otherwise. */
    char *released;
    /* The released record is a transfer's: only the follower of this
     * process token is its successor ("" none; docs/algorithm.md
     * "Transfer"). */
    char to_proc[33];
} peer_view;

void peer_view_clear(peer_view *v);

/* Fills *v with the current state (allocates). Implemented by the runtime.
 * Thread-safe; called from server threads. Returns 0 or S3LECT_ENOMEM. */
typedef int (*peer_view_fn)(void *ctx, peer_view *v);
/* Blocks until the view's version differs from `version`, the elector stops,
 * or mono ms `deadline` passes. Returns 1 if it changed, 0 on timeout, -1 when
 * stopped. Implemented by the runtime. */
typedef int (*peer_wait_fn)(void *ctx, uint64_t version, int64_t deadline);

/* The cheap part of the view, for the server's re-checks of pending long
 * polls: its version, whether it leads (as view would say), its term and
 * the hash of its etag (peer_etag_hash; that of "" when not leading). */
typedef struct peer_state {
    uint64_t version;
    int leading;
    int64_t term;
    uint64_t etag_hash;
} peer_state;

/* FNV-1a of an etag: a batch entry's etag against the leader's, without
 * allocating (a renewal changes it; docs/peer.md "Batched follower checks"). */
static inline uint64_t peer_etag_hash(const char *etag)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = etag ? etag : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}
typedef void (*peer_state_fn)(void *ctx, peer_state *st);

typedef struct peer_source {
    peer_view_fn view;
    peer_wait_fn wait; /* for peer_answer (s3lect_peer_response); the server does not block */
    void *ctx;
    /* Optional. Without it the server re-checks pending long polls with
     * view() every PEER_RECHECK_MS; with it, on peer_server_notify() (and
     * every second as a safety net). */
    peer_state_fn state;
    /* Optional. A check with ?xfer=1 and the succKey as proof: a transfer
     * request was written into the record (the leader reads it at once,
     * at most once a second). */
    void (*poke)(void *ctx);
    /* The successor key the elector's records carry (32 hex digits; "" =
     * none): only a follower that presents it (it read the record from the
     * store) is named successor (docs/peer.md "One successor"). */
    char succ_key[33];
} peer_source;

/* ---- HTTP: parsing and answering (pure; fuzzed) ------------------------- */

#define PEER_MAX_HEADER 8192 /* request line + headers; larger → 431/400 */
#define PEER_MAX_WAIT_MS 60000
#define PEER_INC_MAX 64                   /* hex digits of an incarnation at most */
#define PEER_MAX_BODY 65536               /* body of a GET/HEAD read and dropped; larger → 400 */
#define PEER_MAX_BATCH_BODY (1024 * 1024) /* body of a batch POST; larger → 413 */
#define PEER_MAX_BATCH_LOCKS 4096         /* entries of a batch; more → 400 */
#define PEER_BATCH_GATHER_MS 20           /* a batch gathers further renewals this long */
#define PEER_PROCESS_LEN 32               /* hex digits of a process token */

/* This process's token (32 hex digits, random, made once): what its checks
 * send as ?process=, so that the endpoint can tell its own process's
 * followers from the others' (the successor of a release, docs/peer.md
 * "One successor"). Never a secret: it only orders who takes over first. */
const char *peer_process_token(void);

typedef struct peer_request {
    char method[16];
    char path[256];                     /* without the query */
    char etag[160];                     /* ?etag= (URL-decoded), "" if absent */
    char incarnation[PEER_INC_MAX + 1]; /* ?incarnation= (hex), "" if absent */
    int64_t wait_ms;                    /* ?wait= capped at PEER_MAX_WAIT_MS, 0 if absent */
    char process[PEER_PROCESS_LEN + 1]; /* ?process= (hex): the asking process, "" if absent */
    char proof[33];                     /* ?proof= (32 hex): the record's succKey, "" if absent */
    int xfer;                           /* ?xfer=1: a transfer request is in the record */
    int keep_alive;                     /* HTTP/1.1 without "Connection: close" */
    size_t header_len;                  /* bytes consumed by request line + headers + CRLFCRLF */
    size_t content_length;
} peer_request;

/* Parses one HTTP/1.x request head from buf. Returns 1 when complete (req
 * filled), 0 when more bytes are needed, or a negative HTTP status to answer
 * (-400 malformed, -431 too large, -505 bad version). Never reads past len. */
int peer_parse_request(const char *buf, size_t len, peer_request *req);
/* Parses only "path?query" (for s3lect_peer_response). Same returns, no head. */
int peer_parse_target(const char *target, peer_request *req);

/* The parts of peer_answer a server driven by an event loop uses:
 * peer_answer_early answers what needs no view (404 for another path, 405
 * for another method; POST is allowed when allow_post) and returns 1, else 0;
 * peer_should_hold says whether a GET long poll holds on view v (leading,
 * wait > 0 and the follower has v's etag); peer_answer_view makes the answer
 * from v (200 + v->body, taken, while leading; 404 otherwise). */
int peer_answer_early(const char *health_path, const peer_request *req, int allow_post, int *status,
                      char **body);
int peer_should_hold(const peer_request *req, const peer_view *v);
int peer_answer_view(peer_view *v, int *status, char **body);

/* Batch (docs/peer.md "Batched long polls"):
 * POST {path} {"wait":MS,"locks":[{"incarnation":"..","term":N,"etag":".."},..]} */
typedef struct peer_batch_entry {
    char incarnation[PEER_INC_MAX + 1];
    int64_t term;
    char etag[160];
    char proof[33]; /* "proof": the record's succKey ("" if absent or malformed) */
} peer_batch_entry;
typedef struct peer_batch {
    int64_t wait_ms; /* capped at PEER_MAX_WAIT_MS */
    size_t n;
    peer_batch_entry *e;
} peer_batch;
/* Parses a batch body of len bytes (not NUL-terminated). Returns 0, -400
 * (malformed, a field missing or of the wrong type, a bad incarnation or
 * etag, no entries or more than PEER_MAX_BATCH_LOCKS), -413 (over
 * PEER_MAX_BATCH_BODY) or -500 (out of memory). Free with peer_batch_free. */
int peer_parse_batch(const char *body, size_t len, peer_batch *out);
void peer_batch_free(peer_batch *b);
/* One entry of a batch answer: record (a JSON object, the GET body) with
 * status 200, NULL otherwise. */
typedef struct peer_batch_item {
    const char *incarnation;
    int status;
    const char *record;
    int yield;            /* 404: "yield":true, another follower was told to take over first */
    const char *released; /* 404, the successor: "released":{the released record} */
} peer_batch_item;
/* {"locks":[{"incarnation":..,"status":..,"record":{..}},..]} (allocated), NULL without memory. */
char *peer_batch_answer(const peer_batch_item *items, size_t n);

/* Computes the answer for a parsed request: 200 + body while leading (after
 * long-polling per wait/etag), 404 when not leading, 405 for methods other
 * than GET/HEAD, 404 for other paths. *body is allocated (JSON). */
int peer_answer(const peer_source *src, const char *health_path, const peer_request *req,
                int *status, char **body);

/* ---- server ------------------------------------------------------------- */

/* An elector's registration on the process's shared peer endpoint. */
typedef struct peer_server peer_server;

/* Zero-config peer mode: an ephemeral key (P-256) and a self-signed
 * certificate made in memory when a node has peer mode on and no
 * peer_cert/peer_key. Followers authenticate it by the fingerprint the
 * leader writes in the lock record (docs/peer.md "Zero-config TLS"). */
typedef struct peer_identity peer_identity;
#define PEER_PIN_LEN 44 /* base64 of a SHA-256 (REC_PEER_KEY_LEN) */
/* Makes an identity; pin gets the base64 SHA-256 of the key's DER
 * SubjectPublicKeyInfo (what libcurl's PINNEDPUBLICKEY "sha256//" checks).
 * The private key never leaves the process: it is not serialised. */
int peer_identity_new(peer_identity **out, char pin[PEER_PIN_LEN + 1], char *err, size_t errlen);
/* The process-wide identity of zero-config electors: made by the first
 * call, shared by later ones (one more reference each); freed when the last
 * reference goes (peer_identity_free). */
int peer_identity_shared(peer_identity **out, char pin[PEER_PIN_LEN + 1], char *err, size_t errlen);
/* Drops one reference (the identity is freed with the last). */
void peer_identity_free(peer_identity *id);
const char *peer_identity_pin(const peer_identity *id);

/* Registers an elector (its incarnation and source) on the process's
 * listener for its listen address (cfg->peer_listen, else cfg->server_addr)
 * and TLS setup: cfg->peer_cert/peer_key (PEM bytes or a file path), or id
 * (zero-config; then mtls must be 0), verifying client certificates against
 * cfg->peer_ca when mtls is set, and cfg->peer_health_path. Electors whose
 * address, TLS setup and health path are byte-identical share one listener
 * (one port); an explicit port (not 0) in use with another setup is an
 * error. One server thread serves every listener of the process (started
 * with the first, joined when the last closes); at most PEER_MAX_CONNS
 * connections per process. err gets a one-line message. */
#define PEER_MAX_CONNS 512
int peer_server_register(const struct s3lect_config *cfg, const peer_identity *id,
                         const char *incarnation, const peer_source *src, int mtls,
                         peer_server **out, char *err, size_t errlen);
/* peer_server_register without an incarnation (answers requests without
 * one while it is the only elector of its listener). */
int peer_server_start(const struct s3lect_config *cfg, const peer_identity *id,
                      const peer_source *src, int mtls, peer_server **out, char *err,
                      size_t errlen);
/* The source's view changed (leading, etag or term): pending long polls
 * and batches naming it are re-checked. Takes no lock (safe under any). */
void peer_server_notify(peer_server *s);
/* The address of this host's interface that routes to the store at
 * `origin` ("https://host:port", NULL for stores without one: then
 * 127.0.0.1), numeric, for the default advertised address of the endpoint.
 * Resolves the host (may block on DNS) and connect()s a UDP socket: no
 * packet is sent. Returns 0, or -1 with a message that says to set
 * server_addr. */
int peer_route_host(const char *origin, char *host, size_t cap, char *err, size_t errlen);
/* "host:port", "[v6]:port" from a numeric host and a port into out. */
void peer_join_hostport(const char *host, int port, char *out, size_t cap);
/* The host part of "host:port" / "[v6]:port" / ":port" ("" for the last). */
int peer_split_host(const char *addr, char *host, size_t cap);
/* The bound port (useful when listening on port 0). */
int peer_server_port(const peer_server *s);
/* Unregisters now: no callback of its source runs after it returns; the
 * last registration of a listener closes it (its connections too), the
 * last listener of the process ends the server thread (joined). */
void peer_server_stop(peer_server *s);
/* Unregisters after grace_ms, during which the elector's requests get 404
 * "not the leader" (its source must say so). Without waiting: the
 * registration stays without its source (free it at once) and the server
 * thread drops it later; only the last live elector of a listener waits
 * the grace here, so that the port is closed when this returns. */
void peer_server_stop_after(peer_server *s, int64_t grace_ms);

/* ---- client ------------------------------------------------------------- */

typedef struct peer_client peer_client;

/* A client verifying servers against cfg->peer_ca (PEM bytes or path), with
 * cfg->peer_client_cert (cert + key PEM) for mTLS when set. One reused
 * connection (keep-alive). Not thread-safe: the runtime's loop thread owns it. */
int peer_client_new(const struct s3lect_config *cfg, peer_client **out, char *err, size_t errlen);
void peer_client_free(peer_client *c);
/* Replaces the CA bundle (s3lect_enable_peer_mode at run time). */
int peer_client_set_ca(peer_client *c, const void *pem, size_t len);
/* The fingerprint the next checks pin (the leader record's peerKeySha256;
 * NULL or "" = none). With a pin the leader is authenticated by its public
 * key alone: no CA chain, no name check. Without one, by peer_ca (or the
 * system bundle) and its name, as before. A changed pin never reuses a
 * connection made under the old one. */
void peer_client_set_pin(peer_client *c, const char *pin);
/* The incarnation the next checks name (the leader record's incarnation:
 * "&incarnation=" picks that elector on a listener shared by several; NULL,
 * "" or anything but PEER_INC_MAX hex digits at most = not sent). */
void peer_client_set_incarnation(peer_client *c, const char *inc);
/* The proof the next checks present (the record's succKey, read from the
 * store: it makes this follower eligible to be named successor; NULL or
 * anything but 32 lower-case hex digits = none). */
void peer_client_set_proof(peer_client *c, const char *proof);
/* The next checks carry "&xfer=1": a transfer request was just written into
 * the leader's record (s3lect transfer), so that a leader whose endpoint
 * sees it with the record's succKey as proof reads its record at once
 * (docs/algorithm.md "Transfer"). */
void peer_client_set_xfer(peer_client *c, int on);

/* GET https://{addr}{path}?wait=<wait_ms>&etag=<etag> and expect the leader
 * `expect_id`. On success out->outcome = ST_OK, out->body = the record JSON as
 * served, out->etag = its "etag" field. In CA mode (no pin) the server's
 * certificate must name expect_id (its CN or a DNS/URI subjectAltName; NULL:
 * no check): otherwise the body is not read and the check fails as tlsId; an answer from the
 * expected leader without an etag (a Go s3lect endpoint: no long poll) is ST_OK without an etag,
 * and no failure. Anything else — refused, reset, timeout, TLS failure, non-200, another leader id,
 * unparsable body — is ST_TRANSIENT with a message. Total time is bounded by wait_ms + timeout_ms.
 * *abort_flag (may be NULL) is polled; when it becomes non-zero the call
 * returns ST_TRANSIENT promptly (stop). */
void peer_client_check(peer_client *c, const char *addr, const char *path, const char *etag,
                       int64_t wait_ms, int64_t timeout_ms, const char *expect_id,
                       const volatile int *abort_flag, st_result *out);

/* The same check run by the caller's event loop: begin prepares it on the
 * client's own easy handle and returns that handle (a CURL *) to be added to
 * a multi handle, or NULL when the check ended at once (out filled); once the
 * transfer is done, finish classifies it (curl_code: its CURLcode; aborted:
 * a stop removed it before it finished). One check at a time per client. */
void *peer_client_begin(peer_client *c, const char *addr, const char *path, const char *etag,
                        int64_t wait_ms, int64_t timeout_ms, const char *expect_id, st_result *out);
void peer_client_finish(peer_client *c, int curl_code, int aborted, st_result *out);

/* ---- batched checks (docs/peer.md "Batched follower checks") ----------- */

/* A follower process's zero-config checks of leaders in one remote process
 * share a few connections: POST {path} with the locks it watches, answered
 * when any of them changes (protocol: docs/peer.md). The runtime's hub
 * (runtime/peer_hub.c) groups them; this layer builds the body, runs the
 * transfer and reads the answer. */
/* peer_batch_read's reason for an answer that lists no entry. */
#define PEER_BATCH_NONE_ANSWERED "no entry answered"
#define PEER_BATCH_SEND_LOCKS 1024 /* entries a follower sends in one batch (server: 4096) */
#define PEER_BATCH_SEND_BODY (PEER_MAX_BATCH_BODY - 4096) /* request body (server: 1 MiB) */
#define PEER_BATCH_MAX_ANSWER (64 * 1024 * 1024)

/* One lock of a batch: the leader's incarnation (from the record), what the
 * follower last knew of it (term 0 / etag "" if nothing), and the leader id
 * its answer must name (NULL: any). Strings are borrowed. */
typedef struct peer_batch_lock {
    const char *incarnation;
    int64_t term;
    const char *etag;
    const char *expect_id;
    const char *proof; /* the record's succKey from a store read (NULL or "": none) */
} peer_batch_lock;

/* What the answer says of one entry. status 0: not in the answer. 200: body
 * is the record object as served (allocated, NUL-terminated, with "etag" and
 * "term"), etag its "etag". 404: that elector does not lead. */
typedef struct peer_batch_result {
    int status;
    char *body;
    size_t body_len;
    char *etag;
    int yield; /* 404 with "yield":true */
    /* 404 with "released" (the successor): body and etag are the released
     * record, as the store holds it (the leader's word; acted on only by a
     * conditional write). */
    int released;
} peer_batch_result;

/* The released record a "not the leader" answer carries for the successor
 * (docs/peer.md "One successor"): an object whose leaderID is "" with a
 * non-empty string "etag". Returns 1 with *body (the object, printed) and
 * *etag allocated; 0 when it is not one (then ignored: the follower reads
 * the store). Pure. */
struct cJSON;
int peer_released_record(const struct cJSON *rel, char **body, char **etag);

/* The request body {"wait":..,"locks":[..]} (allocated; *len its length), or
 * NULL when out of memory. Pure. */
char *peer_batch_request(const peer_batch_lock *ents, size_t n, int64_t wait_ms, size_t *len);
/* An upper bound of the bytes ent adds to a request body. */
size_t peer_batch_lock_size(const peer_batch_lock *ent);
/* Reads a batch answer for the n entries asked (ans: n slots, filled). Returns
 * 0, or -1 when the answer is malformed (not JSON, an entry without
 * incarnation/status, an incarnation not asked for or answered twice, a
 * status other than 200/404, a record without leaderID/incarnation/etag, a
 * record of another incarnation or naming another leader id than expected,
 * no entry at all): then every slot is empty and why says what (no bytes of
 * the answer). Pure; fuzzed (tests/fuzz/fuzz_peer_answer.c). */
int peer_batch_read(const char *body, size_t len, const peer_batch_lock *ents, size_t n,
                    peer_batch_result *ans, char *why, size_t whylen);
void peer_batch_results_clear(peer_batch_result *ans, size_t n);

/* The batch transfer, on a client of its own (its pin set with
 * peer_client_set_pin, never CA mode): begin takes the body (allocated by
 * peer_batch_request; freed by the client) and returns the easy handle to add
 * to a multi, or NULL when it ended at once (out filled, the class in
 * peer_client_last_failure). finish classifies the transfer: returns
 * PEER_BATCH_ANSWERED with ans filled (n slots), PEER_BATCH_UNSUPPORTED when
 * the endpoint does not batch (HTTP 404 or 405: use single checks), or
 * PEER_BATCH_FAILED with out filled and the class (PEER_FAIL_*, as a single
 * check would have it) in peer_client_last_failure. Loop thread. */
enum { PEER_BATCH_ANSWERED = 0, PEER_BATCH_UNSUPPORTED = 1, PEER_BATCH_FAILED = 2 };
void *peer_client_begin_batch(peer_client *c, const char *addr, const char *path, char *body,
                              size_t body_len, size_t n, int64_t wait_ms, int64_t timeout_ms,
                              st_result *out);
int peer_client_finish_batch(peer_client *c, int curl_code, const peer_batch_lock *ents, size_t n,
                             peer_batch_result *ans, st_result *out);

/* ---- failures of the check (docs/peer.md "When the peer check fails") --- */

/* The class of a failed check. Each is counted in the status (the name is its
 * key under "peerFailures") and reported once per PEER_FAIL_REPORT_MS. */
enum {
    PEER_FAIL_NONE = 0,    /* success, an aborted check (stop), or a 404 "not the leader" */
    PEER_FAIL_CONNECT,     /* "connect": refused, unreachable, unresolvable, reset/closed */
    PEER_FAIL_TIMEOUT,     /* "timeout": no handshake, no answer, or a stalled (slowloris) one */
    PEER_FAIL_TLS_NAME,    /* "tlsName": the leader's certificate does not name its address */
    PEER_FAIL_TLS_CA,      /* "tlsCa": the certificate does not verify against peer_ca */
    PEER_FAIL_TLS_CLIENT,  /* "tlsClientCert": mTLS client certificate refused or unusable */
    PEER_FAIL_TLS,         /* "tls": any other TLS handshake failure (not TLS, old version) */
    PEER_FAIL_HTTP_STATUS, /* "httpStatus": not 200 (and not a 404 "not the leader") */
    PEER_FAIL_TOO_LARGE,   /* "tooLarge": the answer exceeds PEER_MAX_RESPONSE */
    PEER_FAIL_MALFORMED,   /* "malformed": not JSON, fields missing, another leader id */
    PEER_FAIL_OTHER,       /* "other": out of memory, internal libcurl failure */
    PEER_FAIL_TLS_PIN,     /* "tlsPin": the leader's key is not the one its record names */
    PEER_FAIL_TLS_ID,      /* "tlsId": CA mode: the certificate does not name the record's
                              leader id (another node's certificate: its answer never counts) */
    PEER_FAIL_NCLASSES
};

#define PEER_MAX_RESPONSE (256 * 1024) /* bytes of answer a follower reads at most */
#define PEER_FAIL_REPORT_MS 60000      /* one report per class per this period */

/* The class of the last peer_client_check (PEER_FAIL_NONE after a success).
 * out->message of that check says what is wrong and what to check. */
int peer_client_last_failure(const peer_client *c);
/* The status key of a class ("tlsName"), "" for PEER_FAIL_NONE. */
const char *peer_fail_name(int cls);
/* The s3lect error code an ERROR event of this class carries. */
int peer_fail_code(int cls);
/* What a failure of class cls tells the engine: ST_PEER_* of
 * st_result.peer_failure (unreachable for connect and timeout). */
int peer_failure_kind(int cls);

/* Counting and rate limiting of failures (pure: the caller locks). */
typedef struct peer_fail_stats {
    uint64_t count[PEER_FAIL_NCLASSES];      /* every failure, for the status */
    uint64_t suppressed[PEER_FAIL_NCLASSES]; /* not reported since the last report */
    int64_t reported_at[PEER_FAIL_NCLASSES]; /* mono ms of the last report */
    int reported[PEER_FAIL_NCLASSES];        /* reported at least once */
} peer_fail_stats;

/* Counts one failure of class cls at mono ms now. Returns 1 when it is to be
 * reported (the first of its class, or window ms after the last report) and
 * then sets *suppressed to the failures of that class not reported since
 * the last report; 0 when it is only counted. */
int peer_fail_note(peer_fail_stats *s, int cls, int64_t now, int64_t window, uint64_t *suppressed);

/* Whose certificate an answer came over (peer_certname.c; CA mode). */
struct x509_st;
/* 1 when the certificate names server id `id`: a subject common name, or a
 * DNS or URI subjectAltName, equal to it byte for byte. Fills seen (cap
 * bytes) with the names it presents, for the message. */
int peer_cert_names_id(struct x509_st *x, const char *id, char *seen, size_t cap);
/* The leaf certificate of the connection of libcurl transfer `curl` (a
 * CURL *), from its certificate information; NULL when there is none. The
 * caller frees it (X509_free). */
struct x509_st *peer_leaf_of_transfer(void *curl);

#endif
