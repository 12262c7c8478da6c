/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3lect.h - leader election for processes that share nothing but an S3 bucket.
 *
 * This is the only public header of libs3lect. It includes nothing but
 * <stddef.h> and <stdint.h>, exposes only opaque handles, and never uses
 * variadic functions, so that every binding (cgo, SWIG, the Lua C API) can
 * call every function.
 *
 * Conventions
 * -----------
 * - Every fallible function returns an int: S3LECT_OK (0) or a negative
 *   S3LECT_E* code. s3lect_strerror() names a code; s3lect_errmsg() and
 *   s3lect_config_errmsg() give the detailed message of the last failure on
 *   that handle (s3lect_errcode() the elector's code that goes with it).
 *   There is no thread-local error state.
 * - Strings passed in are copied; the caller keeps ownership.
 * - Strings handed out are either (a) borrowed from a handle whose lifetime
 *   is stated, (b) copied into a caller buffer with snprintf semantics (the
 *   return value is the full length, excluding the NUL, as size_t: a buffer
 *   of that length + 1 holds it all; buf may be NULL when buflen is 0), or
 *   (c) allocated and released with s3lect_free(). The one exception to (b)
 *   is s3lect_config_get_str(), which returns int because it can also fail
 *   with a negative code (kept as it is: the ABI only grows).
 * - Durations are milliseconds (int64_t). Wall-clock times are milliseconds
 *   since the Unix epoch.
 * - Enum values are explicit and only ever appended.
 *
 * Threads
 * -------
 * Every elector of a process is run by one shared runtime: a loop thread
 * drives all their elections (S3 requests and peer long polls on one libcurl
 * multi handle, through at most max_connections keep-alive connections per
 * endpoint), a few worker threads run blocking stores (file locks, custom
 * store functions), and a few callback threads run callbacks (the
 * "dispatcher": one elector's callbacks in order, one at a time; more threads
 * are added while all are held by slow callbacks). Callbacks never run on the
 * loop, so a slow callback cannot delay a renewal. docs/threading.md has the
 * long form.
 *
 * The contract of each function
 * -----------------------------
 * Each function's comment ends with a "Contract:" line:
 *   threads  - who may call it ("any thread", or the restriction);
 *   callback - whether it may be called from inside this elector's own
 *              callbacks (event callbacks and the acquire hook, on the
 *              dispatcher thread or in s3lect_dispatch()) and from its custom
 *              store functions (on a worker thread). Where it may not, it
 *              returns S3LECT_EBUSY at once: no function ever deadlocks on
 *              its caller;
 *   blocks   - "never" (at most a short internal lock) or what it waits for
 *              and for how long;
 *   owns     - who owns what goes in and what comes out.
 */
#ifndef S3LECT_H
#define S3LECT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(S3LECT_STATIC)
#define S3LECT_API
#elif defined(_WIN32)
#if defined(S3LECT_BUILDING)
#define S3LECT_API __declspec(dllexport)
#else
#define S3LECT_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#define S3LECT_API __attribute__((visibility("default")))
#else
#define S3LECT_API
#endif

/* S3LECT_DEPRECATED(msg), written before S3LECT_API: the function stays in the
 * ABI (it only grows) but has a better replacement, which msg names; a call
 * to it warns at compile time. Define S3LECT_NO_DEPRECATION_WARNINGS before
 * including this header to silence the warnings (docs/abi.md "Deprecating"). */
#if defined(S3LECT_NO_DEPRECATION_WARNINGS) || defined(S3LECT_BUILDING) || defined(SWIG)
#define S3LECT_DEPRECATED(msg)
#elif defined(__clang__) ||                                                                        \
    (defined(__GNUC__) && (__GNUC__ > 4 || (__GNUC__ == 4 && __GNUC_MINOR__ >= 5)))
#define S3LECT_DEPRECATED(msg) __attribute__((deprecated(msg)))
#elif defined(_MSC_VER)
#define S3LECT_DEPRECATED(msg) __declspec(deprecated(msg))
#else
#define S3LECT_DEPRECATED(msg)
#endif

#define S3LECT_VERSION_MAJOR 0
#define S3LECT_VERSION_MINOR 1
#define S3LECT_VERSION_PATCH 0
#define S3LECT_VERSION_STRING "0.1.0"
/** MAJOR * 10000 + MINOR * 100 + PATCH, as returned by s3lect_version_number(). */
#define S3LECT_VERSION_NUMBER                                                                      \
    (S3LECT_VERSION_MAJOR * 10000 + S3LECT_VERSION_MINOR * 100 + S3LECT_VERSION_PATCH)

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/** Return codes. 0 is success; every error is negative. */
typedef enum s3lect_error {
    S3LECT_OK = 0,
    S3LECT_EINVAL = -1,         /**< invalid argument or configuration */
    S3LECT_ENOMEM = -2,         /**< out of memory */
    S3LECT_ESTATE = -3,         /**< call not valid in this state (e.g. start twice) */
    S3LECT_EBUSY = -4,          /**< would deadlock: called from this elector's callback */
    S3LECT_ETIMEDOUT = -5,      /**< a wait ran out of time */
    S3LECT_ESTOPPED = -6,       /**< the elector is stopped (or was stopped while waiting) */
    S3LECT_EAUTH = -7,          /**< the store refused our credentials or permissions */
    S3LECT_ETRANSIENT = -8,     /**< temporary store failure (5xx, timeout, network) */
    S3LECT_EFATAL = -9,         /**< store misconfiguration (no such bucket, bad endpoint) */
    S3LECT_ECORRUPT = -10,      /**< the lock record is not a valid s3lect record */
    S3LECT_EPRECONDITION = -11, /**< a conditional write lost the race */
    S3LECT_ENOTFOUND = -12,     /**< the lock object does not exist */
    S3LECT_EIO = -13,           /**< local I/O or system call failure */
    S3LECT_EUNSUPPORTED = -14,  /**< feature not compiled in or not available */
    S3LECT_ECALLBACK = -15,     /**< a user callback failed (acquire hook veto) */
    S3LECT_EFENCED = -16,       /**< fenced: a newer term (or another holder of ours) owns it */
    S3LECT_ENOTLEADER = -17,    /**< this elector does not lead: refused before sending */
    S3LECT_ERETRIES = -18       /**< the object kept changing: a write's retries ran out */
} s3lect_error;

/**
 * Static, never-NULL description of an error code. Thread-safe.
 * Contract: any thread, callbacks too; never blocks; the string is static.
 */
S3LECT_API const char *s3lect_strerror(int code);

/**
 * Library version string, e.g. "0.1.0". Static storage. Thread-safe.
 * Contract: any thread, callbacks too; never blocks; the string is static.
 */
S3LECT_API const char *s3lect_version(void);
/**
 * Library version as MAJOR*10000 + MINOR*100 + PATCH. Thread-safe.
 * Contract: any thread, callbacks too; never blocks.
 */
S3LECT_API int s3lect_version_number(void);

/**
 * Releases memory handed out by this library (status JSON, peer bodies). NULL is fine.
 * Contract: any thread, callbacks too; never blocks; frees only what a function
 *   of this library allocated and said so.
 */
S3LECT_API void s3lect_free(void *ptr);

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */

typedef struct s3lect_config s3lect_config;

/**
 * Configuration options. The comment gives the setter type, unit, default
 * and bounds. Durations are milliseconds. Appended only.
 */
typedef enum s3lect_option {
    /** str, required: lock location: "s3://bucket/key", "file:///dir/key" or a plain path. */
    S3LECT_OPT_LOCK = 1,
    /** str, required, 1..255 bytes: this node's server id (recorded as leaderID). */
    S3LECT_OPT_SERVER_ID = 2,
    /** str: this node's advertised peer address "host:port" (leaderAddr). Default "";
     *  in peer mode: this host's address on the route to the store, with the port of
     *  PEER_LISTEN or an ephemeral one (docs/peer.md "Zero-config TLS"). */
    S3LECT_OPT_SERVER_ADDR = 3,
    /** int ms [15000], 100..86400000: lease timeout L. */
    S3LECT_OPT_LEASE_TIMEOUT = 4,
    /** int ms [5000]: leader renew interval; renew_interval < renew_deadline. */
    S3LECT_OPT_RENEW_INTERVAL = 5,
    /** int ms [10000]: leader steps down if not renewed for this long; < lease_timeout. */
    S3LECT_OPT_RENEW_DEADLINE = 6,
    /** int ms [5000], >= 10: follower poll period during transitions. */
    S3LECT_OPT_FREQUENT_INTERVAL = 7,
    /** int ms [30000], >= frequent_interval: follower poll period when stable. The
     *  one cost/latency setting of S3 mode: a stable follower makes 3600000 /
     *  infrequent_interval GETs an hour and notices a graceful release up to this
     *  late (README "Choosing the poll interval"; peer mode needs neither). */
    S3LECT_OPT_INFREQUENT_INTERVAL = 8,
    /** int ms [0], >= 0: opt-in wall-clock takeover rule. 0 (the default) turns it
     *  off. A value > 0 assumes every node's wall clock stays within this bound
     *  of every other's, steps included: a larger step can give two leaders. */
    S3LECT_OPT_MAX_CLOCK_SKEW = 9,
    /** bool [0]: peer mode (see docs/peer.md). Without PEER_CERT, PEER_KEY and
     *  PEER_CLIENT_CERT it is zero-config: the endpoint uses a key made at start,
     *  whose SHA-256 the leader writes in the record ("peerKeySha256") and
     *  followers pin; SERVER_ADDR is then optional. */
    S3LECT_OPT_PEER_MODE = 10,
    /** str ["/health/leadership"]: path of the peer leadership endpoint. */
    S3LECT_OPT_PEER_HEALTH_PATH = 11,
    /** int ms [3000], >= 10: peer check timeout; also bounds the release on stop. */
    S3LECT_OPT_PEER_TIMEOUT = 12,
    /** str: S3 endpoint URL, e.g. "http://127.0.0.1:9000". Default: environment, then AWS. */
    S3LECT_OPT_ENDPOINT = 13,
    /** str: S3 region. Default: AWS_REGION, AWS_DEFAULT_REGION, profile, "us-east-1". */
    S3LECT_OPT_REGION = 14,
    /** bool: force path-style addressing (automatic for IP and localhost endpoints). */
    S3LECT_OPT_PATH_STYLE = 15,
    /** str: PEM CA bundle file for HTTPS to S3. Default: the system bundle. */
    S3LECT_OPT_CA_FILE = 16,
    /** str: AWS access key id (explicit credentials; else environment, else files). */
    S3LECT_OPT_ACCESS_KEY_ID = 17,
    /** str: AWS secret access key. Never logged. */
    S3LECT_OPT_SECRET_ACCESS_KEY = 18,
    /** str: AWS session token. Never logged. */
    S3LECT_OPT_SESSION_TOKEN = 19,
    /** str: AWS shared-config profile. Default: AWS_PROFILE, else "default". */
    S3LECT_OPT_PROFILE = 20,
    /** str: peer server listen address "host:port". Default: SERVER_ADDR. */
    S3LECT_OPT_PEER_LISTEN = 21,
    /** bytes or str (PEM or file path): peer server certificate chain (with PEER_KEY
     *  and PEER_CA, instead of zero-config). */
    S3LECT_OPT_PEER_CERT = 22,
    /** bytes or str (PEM or file path): peer server private key. */
    S3LECT_OPT_PEER_KEY = 23,
    /** bytes or str (PEM or file path): CA that followers use to verify the leader,
     *  and that the leader uses to verify client certificates under mTLS. */
    S3LECT_OPT_PEER_CA = 24,
    /** bytes or str (PEM or file path): client certificate and key (concatenated PEM).
     *  Setting it turns on mTLS: the node presents it as a follower and, as a
     *  leader, requires a client certificate signed by PEER_CA. */
    S3LECT_OPT_PEER_CLIENT_CERT = 25,
    /** int ms [10000], 100..600000: timeout of one store request. */
    S3LECT_OPT_REQUEST_TIMEOUT = 26,
    /** bool [0]: poll mode: no dispatcher thread; callbacks run in s3lect_dispatch(). */
    S3LECT_OPT_POLL_MODE = 27,
    /** bool [1]: write a released record on stop when leader. */
    S3LECT_OPT_RELEASE_ON_STOP = 28,
    /** int ms [0 = 4 × lease_timeout], 0..86400000: a record's leaseMs is read as at
     *  most this (a hostile or broken record cannot block the lock for longer). Every
     *  node's lease_timeout must be at most every other node's bound. */
    S3LECT_OPT_MAX_LEASE_TIMEOUT = 29,
    /** int (a count) [64], 1..1024: the most keep-alive connections the process's
     *  shared runtime opens to one store endpoint (requests beyond wait in order and
     *  are signed when they are sent). Process-wide: the largest value of any
     *  started elector applies (docs/threading.md). */
    S3LECT_OPT_MAX_CONNECTIONS = 30,
    /** int (a count) [4], 1..64: worker threads of the shared runtime that run
     *  blocking stores (file locks, custom stores). Process-wide, largest value. */
    S3LECT_OPT_WORKER_THREADS = 31,
    /** int (a count) [2], 1..64: callback threads of the shared runtime; more are
     *  added for as long as every one is held by a slow callback. Process-wide,
     *  largest value. */
    S3LECT_OPT_CALLBACK_THREADS = 32,
    /** int ms [0 = renew_deadline], 0..86400000: how long after the send of its last
     *  successful renewal this node's leadership may still act (what the application
     *  runs under it is stopped by then); raised to renew_deadline when below it. It is
     *  written in the node's records as holdMs, and a follower backdates a record's
     *  age on the store's clock (S3, PostgreSQL) by at most leaseMs - holdMs, so no
     *  skew or jump of the store's clock lets another node lead before it. `s3lect
     *  run` sets it to its command tree's kill deadline plus margin. */
    S3LECT_OPT_LEADER_HOLD = 33,
    /** int ms [-1 = lease_timeout, at least leader_hold], -1..86400000: how long a
     *  node that has never seen the lock waits, after reading it missing, before it
     *  creates it: a lock deleted (by hand, a lifecycle or TTL rule, a store that lost
     *  its data) while a leader this node cannot see still runs must not get a second
     *  leader. A brand-new lock pays it once, on its first start. 0 creates a missing
     *  lock at once: only where no leader of it can be running (a lock name never used
     *  before, a test). With mixed timings, set it to the longest lease_timeout of any
     *  node of the lock. */
    S3LECT_OPT_NEW_LOCK_WAIT = 34,
    /** int [0], 0..1000000: this node's priority. A follower whose priority is
     *  higher than its leader's, and that has followed for a lease without a break,
     *  asks the leader for the lock (at most once a lease), and the leader hands it
     *  over as with s3lect_transfer() (at most one such transfer per lease of its
     *  tenure). Equal priorities (the default) keep the plain election. */
    S3LECT_OPT_PRIORITY = 35,
    /** int ms [0 = never], 0..86400000: a leader that has held the lock this long
     *  hands it to a live follower, as with s3lect_transfer(e, NULL) (rotation;
     *  exercising failover in production). Without a live follower it keeps leading
     *  and tries again a lease later. */
    S3LECT_OPT_MAX_HOLD = 36
} s3lect_option;

/**
 * Creates a configuration with the defaults. Returns NULL on out-of-memory.
 * Contract: any thread, callbacks too; never blocks; the caller owns the config
 *   (s3lect_config_free).
 */
S3LECT_API s3lect_config *s3lect_config_new(void);
/**
 * Frees a configuration. Electors created from it keep their own copy. NULL is fine.
 * Contract: the thread that uses cfg, callbacks too; never blocks (a custom
 *   store's userdata_free may run here, on this thread).
 */
S3LECT_API void s3lect_config_free(s3lect_config *cfg);
/**
 * Copies a configuration (custom store userdata is shared, freed once). NULL on OOM.
 * Contract: one thread at a time per config, callbacks too; never blocks; the
 *   caller owns the copy.
 */
S3LECT_API s3lect_config *s3lect_config_dup(const s3lect_config *cfg);

/**
 * Typed setters. Return S3LECT_EINVAL if the option does not take that type
 * or the value is out of bounds for that option alone; cross-option rules
 * (renew_interval < renew_deadline < lease_timeout ...) are checked by
 * s3lect_config_validate() and s3lect_new(). A NULL string resets to the
 * default. A config handle may be used by one thread at a time.
 * Contract: one thread at a time per config handle, callbacks too; never
 *   blocks; values are copied.
 */
S3LECT_API int s3lect_config_set_str(s3lect_config *cfg, s3lect_option opt, const char *value);
S3LECT_API int s3lect_config_set_int(s3lect_config *cfg, s3lect_option opt, int64_t value);
S3LECT_API int s3lect_config_set_bool(s3lect_config *cfg, s3lect_option opt, int value);
S3LECT_API int s3lect_config_set_bytes(s3lect_config *cfg, s3lect_option opt, const void *data,
                                       size_t len);

/**
 * Reads an int/bool option into *out. EINVAL for other types.
 * Contract: one thread at a time per config, callbacks too; never blocks.
 */
S3LECT_API int s3lect_config_get_int(const s3lect_config *cfg, s3lect_option opt, int64_t *out);
/**
 * Reads an int/bool option as an elector made from cfg runs with it: as
 * s3lect_config_get_int, but the options whose "unset" value stands for a
 * rule read the rule's value: max_lease_timeout 0 reads 4 × lease_timeout,
 * new_lock_wait -1 reads max(lease_timeout, leader_hold). The rules live in
 * the library alone; front ends that show effective values call this.
 * Contract: one thread at a time per config, callbacks too; never blocks.
 */
S3LECT_API int s3lect_config_get_effective_int(const s3lect_config *cfg, s3lect_option opt,
                                               int64_t *out);
/**
 * Copies a str option into buf (snprintf semantics); returns its full length,
 * or a negative code for non-string options. Secrets are returned as "" .
 * Contract: one thread at a time per config, callbacks too; never blocks; copies
 *   into the caller's buffer.
 */
S3LECT_API int s3lect_config_get_str(const s3lect_config *cfg, s3lect_option opt, char *buf,
                                     size_t buflen);

/**
 * Checks all cross-option rules. On failure the message is in s3lect_config_errmsg().
 * Contract: one thread at a time per config, callbacks too; never blocks (no
 *   I/O: the store is first contacted when an elector starts).
 */
S3LECT_API int s3lect_config_validate(s3lect_config *cfg);
/**
 * Copies the last error message of this config (snprintf semantics).
 * Contract: one thread at a time per config, callbacks too; never blocks.
 */
S3LECT_API size_t s3lect_config_errmsg(const s3lect_config *cfg, char *buf, size_t buflen);

/* ------------------------------------------------------------------------ */
/* Custom stores                                                            */
/* ------------------------------------------------------------------------ */

/** Outcomes a store operation reports (DESIGN §2.3). */
typedef enum s3lect_store_outcome {
    S3LECT_STORE_OK = 0,
    S3LECT_STORE_NOT_FOUND = 1,
    S3LECT_STORE_PRECONDITION = 2, /**< conditional write lost the race */
    S3LECT_STORE_AUTH = 3,
    S3LECT_STORE_TRANSIENT = 4, /**< retry later */
    S3LECT_STORE_FATAL = 5      /**< misconfiguration */
} s3lect_store_outcome;

/** Where a custom store puts its answer. Valid only during the store call. */
typedef struct s3lect_store_result s3lect_store_result;

/**
 * Sets the object body (GET). Copied.
 * Contract: only inside the custom store call that received res (a worker
 *   thread); never blocks; the data is copied.
 */
S3LECT_API int s3lect_store_result_set_body(s3lect_store_result *res, const void *data, size_t len);
/**
 * Sets the object's etag (GET) or the new etag (PUT). Copied. Any opaque non-empty string.
 * Contract: as s3lect_store_result_set_body.
 */
S3LECT_API int s3lect_store_result_set_etag(s3lect_store_result *res, const char *etag);
/**
 * Sets a human message explaining a failure outcome. Copied.
 * Contract: as s3lect_store_result_set_body.
 */
S3LECT_API int s3lect_store_result_set_message(s3lect_store_result *res, const char *msg);

/**
 * get: read `key`; return an s3lect_store_outcome. On OK set body and etag.
 * put: write `key` only if its current etag equals `if_match`, or, when
 * `if_match` is NULL, only if the key does not exist. Return OK and set the
 * new etag, or PRECONDITION when the condition fails (NOT_FOUND is also
 * accepted for If-Match on a missing key).
 * Both run on a worker thread of the runtime, must return within
 * `timeout_ms` (best effort), and must not call back into this elector.
 * Contract: called on a worker thread, one call at a time per elector;
 *   from inside, s3lect_stop(), s3lect_free_elector(), the waits and
 *   s3lect_peer_response() return S3LECT_EBUSY, on this elector and on any
 *   other (they could wait for the worker that is running the call); getters
 *   may be called. The time a call takes delays this elector's renewals (and
 *   holds one of the worker_threads): stay within timeout_ms.
 */
typedef int (*s3lect_store_get_fn)(void *userdata, const char *key, int64_t timeout_ms,
                                   s3lect_store_result *res);
typedef int (*s3lect_store_put_fn)(void *userdata, const char *key, const void *data, size_t len,
                                   const char *if_match, int64_t timeout_ms,
                                   s3lect_store_result *res);
/** Releases userdata; called exactly once. May be NULL. */
typedef void (*s3lect_free_fn)(void *userdata);

/**
 * Makes the config use a custom store instead of the one named by
 * S3LECT_OPT_LOCK; the lock string's key part (or the whole string, if it has
 * no scheme) becomes the key passed to get/put. userdata_free runs exactly
 * once, when the config and every elector made from it are freed (or on
 * replacement, or immediately if this call fails).
 * Contract: one thread at a time per config, callbacks too; never blocks;
 *   userdata stays the caller's until userdata_free runs (see above).
 */
S3LECT_API int s3lect_config_set_custom_store(s3lect_config *cfg, s3lect_store_get_fn get,
                                              s3lect_store_put_fn put, void *userdata,
                                              s3lect_free_fn userdata_free);

/* ------------------------------------------------------------------------ */
/* Events and callbacks                                                     */
/* ------------------------------------------------------------------------ */

typedef struct s3lect_event s3lect_event;

typedef enum s3lect_event_kind {
    S3LECT_EVENT_ACQUIRED = 1,       /**< this node became leader: term */
    S3LECT_EVENT_LOST = 2,           /**< this node stopped being leader: term, reason */
    S3LECT_EVENT_LEADER_CHANGED = 3, /**< observed leader changed: leader_id, leader_addr, term */
    S3LECT_EVENT_ERROR = 4,          /**< store or record problem: code, message */
    S3LECT_EVENT_CYCLE = 5,          /**< one election cycle completed: cycle */
    /** this leader is asked to hand over and the target confirmed it is live:
     *  leader_id names the target, term the leadership. Stop the leader work,
     *  then call s3lect_transfer_commit() (see s3lect_transfer()). */
    S3LECT_EVENT_TRANSFER = 6
} s3lect_event_kind;

/** Why leadership was lost. */
typedef enum s3lect_lost_reason {
    S3LECT_LOST_NONE = 0,
    S3LECT_LOST_RELEASED = 1,      /**< released (acquire-hook veto or explicit release) */
    S3LECT_LOST_LEASE_EXPIRED = 2, /**< renew_deadline passed with no renewal even tried
                                        (process paused, suspended or starved) */
    S3LECT_LOST_LOST_RACE = 3,     /**< another node wrote the record (412 confirmed, 404) */
    S3LECT_LOST_HOOK_FAILED = 4,   /**< the acquire hook vetoed */
    S3LECT_LOST_STOPPED = 5,       /**< s3lect_stop() */
    S3LECT_LOST_RENEW_TIMEOUT = 6, /**< renewals were sent but none succeeded before
                                        renew_deadline (store slow, failing or unreachable) */
    S3LECT_LOST_TRANSFERRED = 7    /**< handed to another node (s3lect_transfer_commit) */
} s3lect_lost_reason;

/**
 * Static name of a reason ("released", "lease_expired", ...).
 * Contract: any thread, callbacks too; never blocks; the string is static.
 */
S3LECT_API const char *s3lect_lost_reason_str(int reason);
/**
 * Static name of an event type ("acquired", "lost", ...).
 * Contract: any thread, callbacks too; never blocks; the string is static.
 */
S3LECT_API const char *s3lect_event_type_str(int type);

/* Event accessors. An event is valid only during the callback it is passed to;
 * strings are borrowed from it. Fields that do not apply are 0 / "".
 * Contract: only inside the callback that received ev; never block. */
S3LECT_API int s3lect_event_type(const s3lect_event *ev);
S3LECT_API int64_t s3lect_event_term(const s3lect_event *ev);
S3LECT_API int s3lect_event_reason(const s3lect_event *ev);
S3LECT_API const char *s3lect_event_leader_id(const s3lect_event *ev);
S3LECT_API const char *s3lect_event_leader_addr(const s3lect_event *ev);
S3LECT_API int s3lect_event_code(const s3lect_event *ev);
S3LECT_API const char *s3lect_event_message(const s3lect_event *ev);
S3LECT_API uint64_t s3lect_event_cycle(const s3lect_event *ev);

typedef struct s3lect_elector s3lect_elector;

/**
 * Event callback. Runs on the dispatcher thread (or in s3lect_dispatch()).
 * Contract: runs on the dispatcher thread (or in s3lect_dispatch()), one
 *   callback at a time per elector, in event order; ev and its strings are
 *   valid only during the call. Inside, s3lect_stop() and
 *   s3lect_free_elector() on this elector return S3LECT_EBUSY; everything
 *   else may be called. A slow callback delays later callbacks of this
 *   elector, never its renewals.
 */
typedef void (*s3lect_event_fn)(s3lect_elector *e, const s3lect_event *ev, void *userdata);
/**
 * Acquire hook: runs after this node acquired leadership (ev is the ACQUIRED
 * event) on the dispatcher thread, while the lease keeps being renewed.
 * Return 0 to keep leadership; any other value vetoes: the node releases the
 * lock (LOST with reason HOOK_FAILED) and backs off for one frequent_interval.
 * Runs before the ACQUIRED event callback; after a veto that callback is not run.
 * Contract: as s3lect_event_fn.
 */
typedef int (*s3lect_acquire_fn)(s3lect_elector *e, const s3lect_event *ev, void *userdata);

/* ------------------------------------------------------------------------ */
/* Electors                                                                 */
/* ------------------------------------------------------------------------ */

/**
 * Creates an elector from a validated copy of cfg. On S3LECT_EINVAL the
 * reason is in s3lect_config_errmsg(cfg). The elector is not started.
 * Contract: any thread, callbacks too (it creates another elector); does not
 *   contact the store, but reads the files the configuration names (AWS
 *   config and credentials files, PEM files given as paths); cfg stays the
 *   caller's; *out is the caller's until s3lect_free_elector().
 */
S3LECT_API int s3lect_new(s3lect_config *cfg, s3lect_elector **out);

/**
 * Registers the callback for one event type, replacing (and freeing the
 * userdata of) any previous one. Only before s3lect_start(): ESTATE after.
 * userdata_free runs exactly once: on replacement, on s3lect_free_elector(), or
 * immediately when this call fails.
 * Contract: any thread, before s3lect_start() only (S3LECT_ESTATE after);
 *   never blocks; userdata as above.
 */
S3LECT_API int s3lect_set_callback(s3lect_elector *e, s3lect_event_kind type, s3lect_event_fn fn,
                                   void *userdata, s3lect_free_fn userdata_free);
/**
 * Registers the acquire hook (same ownership rules as s3lect_set_callback).
 * Contract: as s3lect_set_callback.
 */
S3LECT_API int s3lect_set_acquire_hook(s3lect_elector *e, s3lect_acquire_fn fn, void *userdata,
                                       s3lect_free_fn userdata_free);

/**
 * Makes leadership depend on the host confirming that it is alive: once
 * called with timeout_ms > 0, the elector renews and acquires only while the
 * last s3lect_heartbeat() (or this call) is at most timeout_ms old. A leader
 * whose host stops confirming steps down (LOST, reason LEASE_EXPIRED, and an
 * ERROR event) *without* writing a released record: whatever the host runs
 * may still be running, so the lease is left to run out. `s3lect run` calls
 * it with the renew deadline and confirms from its supervision loop, so a
 * stuck supervisor costs at most one lease. 0 turns it off (the default).
 * EINVAL for a negative timeout.
 * Contract: any thread, any time; never blocks on the store.
 */
S3LECT_API int s3lect_require_heartbeat(s3lect_elector *e, int64_t timeout_ms);
/**
 * Confirms that the host is alive (see s3lect_require_heartbeat).
 * Contract: any thread, any time, also from callbacks; never blocks on the store.
 */
S3LECT_API int s3lect_heartbeat(s3lect_elector *e);

/**
 * Starts the election: hands the elector to the process's shared runtime
 * (created with the first started elector). ESTATE if started. Electors
 * started together spread their first store requests over up to one
 * renew_interval (2 ms per start in the last second).
 * Contract: any thread (from this elector's own callbacks it is already
 *   started: S3LECT_ESTATE); may create the runtime's threads and, with peer mode and a
 *   certificate, binds the endpoint's socket; does not wait for the store (in
 *   zero-config peer mode without server_addr it makes a key and resolves the
 *   store's host once, to pick the address to advertise: that may wait for DNS).
 */
S3LECT_API int s3lect_start(s3lect_elector *e);
/**
 * Stops the elector: if leader, it stops being leader at once, writes a
 * released record (bounded by peer_timeout) and emits LOST(STOPPED); then
 * leaves the runtime's loop. Pending events are delivered before it returns (in poll
 * mode they stay queued for s3lect_dispatch()). Idempotent; returns
 * S3LECT_EBUSY when called from one of this elector's callbacks.
 * Not restartable.
 * Contract: any thread except this elector's own callbacks and any custom store
 *   function (S3LECT_EBUSY there). Blocks until the store request in flight
 *   ends (at most request_timeout; a follower's long poll of the leader is cut
 *   at once), then the released record is written (at most peer_timeout),
 *   then the callback threads have run every queued callback (as long as
 *   they take); a peer-mode leader then keeps its endpoint answering 404 for
 *   up to 200 ms (min with peer_timeout), for followers whose poll was on its way.
 *   With the defaults and quick callbacks: at most about 13 s, usually
 *   milliseconds. Several threads may call it at once; all return when it
 *   is stopped.
 */
S3LECT_API int s3lect_stop(s3lect_elector *e);

/**
 * Asks this leader to hand the lock to the follower whose node id is
 * target_id (NULL or "": the best live follower: the first to confirm, one of
 * higher priority before one of lower). Returns at once: S3LECT_OK when the
 * request is under way, S3LECT_ENOTLEADER when this elector does not lead,
 * S3LECT_EINVAL for its own id or a malformed one, S3LECT_EBUSY while a
 * transfer is being committed. The request is written in the lock record;
 * the target confirms it is live by writing there too, and then this elector
 * emits S3LECT_EVENT_TRANSFER: stop the leader work and call
 * s3lect_transfer_commit(). The leader stops leading at that call (LOST
 * with S3LECT_LOST_TRANSFERRED) and writes a released record reserved for
 * the target, which leads at once (in peer mode it is told by this node's
 * endpoint; without, it reads the store often while it waits). A target that
 * does not confirm within lease_timeout + renew_interval + frequent_interval
 * is refused (an ERROR event says why) and this node keeps leading; a
 * commit that does not come within twice max(lease_timeout, leader_hold)
 * abandons the transfer the same way. Requests from elsewhere (`s3lect
 * transfer`, a follower of higher priority, max_hold) arrive the same way.
 * Contract: any thread.
 */
S3LECT_API int s3lect_transfer(s3lect_elector *e, const char *target_id);

/**
 * After S3LECT_EVENT_TRANSFER, once this node's leader work has stopped:
 * hands the lock over (see s3lect_transfer()). S3LECT_EINVAL when no
 * confirmed transfer is pending (refused, abandoned, or the leadership was
 * lost meanwhile). Contract: any thread, callbacks included.
 */
S3LECT_API int s3lect_transfer_commit(s3lect_elector *e);
/**
 * Like s3lect_stop() but does not write the released record: followers take
 * over only after the lease expires (simulates a crash; for tests).
 * Contract: as s3lect_stop, without the release write.
 */
S3LECT_API int s3lect_stop_no_release(s3lect_elector *e);
/**
 * Stops every elector of electors[0..n) together, as s3lect_stop does each:
 * all of them are asked to stop at once, so their store requests in flight
 * end and their release writes go out together (up to max_connections at a
 * time through the shared pool), instead of one after the other. For a
 * process that runs many electors (shards): stopping N leaders then takes
 * about as long as the slowest release, not N of them. Returns 0, or the
 * first error (S3LECT_EINVAL for a NULL entry, S3LECT_EBUSY for one stopped
 * from its own callback or a custom store function) after stopping every
 * other one. The same elector twice is fine.
 * Contract: as s3lect_stop, for each.
 */
S3LECT_API int s3lect_stop_many(s3lect_elector *const *electors, size_t n);
/**
 * Stops if needed and frees. EBUSY (and nothing freed) from a callback. NULL is fine.
 * Contract: as s3lect_stop; afterwards e is gone (callbacks' userdata_free
 *   have run on the calling thread).
 */
S3LECT_API int s3lect_free_elector(s3lect_elector *e);

/**
 * 1 if this node holds a valid lease now (computed at call time), else 0. Any thread.
 * Contract: any thread, callbacks and store functions too; never blocks.
 */
S3LECT_API int s3lect_is_leader(const s3lect_elector *e);
/**
 * Highest term this node has observed or written (the fencing token while leader).
 * Contract: any thread, callbacks and store functions too; never blocks.
 */
S3LECT_API int64_t s3lect_term(const s3lect_elector *e);
/**
 * Copies the current leader's id ("" if none known). snprintf semantics. Any thread.
 * Contract: any thread, callbacks and store functions too; never blocks;
 *   copies into the caller's buffer.
 */
S3LECT_API size_t s3lect_leader_id(const s3lect_elector *e, char *buf, size_t buflen);
/**
 * Number of completed election cycles (see S3LECT_EVENT_CYCLE). Any thread.
 * Contract: any thread, callbacks and store functions too; never blocks.
 */
S3LECT_API uint64_t s3lect_cycle(const s3lect_elector *e);

/**
 * Blocks until this node is leader. timeout_ms < 0 waits forever. Returns
 * S3LECT_OK, S3LECT_ETIMEDOUT or S3LECT_ESTOPPED.
 * Contract: any thread; from any custom store function S3LECT_EBUSY; from
 *   its callbacks allowed but it holds up this elector's later callbacks
 *   while it waits. Blocks up to timeout_ms, or until stopped.
 */
S3LECT_API int s3lect_wait_for_leadership(s3lect_elector *e, int64_t timeout_ms);
/**
 * Blocks until the cycle counter exceeds `since` (use s3lect_cycle() before
 * triggering), then stores the new counter in *cycle_out (may be NULL).
 * Returns OK, ETIMEDOUT or ESTOPPED.
 * Contract: as s3lect_wait_for_leadership.
 */
S3LECT_API int s3lect_wait_for_next_election(s3lect_elector *e, uint64_t since, int64_t timeout_ms,
                                             uint64_t *cycle_out);

/**
 * Applies the timing options of cfg (lease_timeout, renew_interval,
 * renew_deadline, frequent/infrequent_interval, max_clock_skew, peer_timeout,
 * request_timeout) to a running or stopped elector, after validating them
 * together. Other options in cfg are ignored (max_lease_timeout is fixed at
 * creation; a lease_timeout above an explicit one is refused). Any thread.
 * Contract: any thread, callbacks and store functions too; never blocks (the
 *   runtime's loop applies the values at the elector's next step); cfg stays the
 *   caller's.
 */
S3LECT_API int s3lect_update_config(s3lect_elector *e, s3lect_config *cfg);
/**
 * Returns a copy of the elector's current configuration (free with s3lect_config_free).
 * Contract: any thread, callbacks and store functions too; never blocks; the
 *   caller owns the copy.
 */
S3LECT_API s3lect_config *s3lect_get_config(const s3lect_elector *e);

/**
 * Copies the last detailed error message of this elector. snprintf semantics. Any thread.
 * Contract: any thread, callbacks and store functions too; never blocks. The
 *   message is per elector, not per thread: read it right after the failure.
 */
S3LECT_API size_t s3lect_errmsg(const s3lect_elector *e, char *buf, size_t buflen);
/**
 * The code (S3LECT_E*) of the failure whose message s3lect_errmsg() gives:
 * the last failure this elector reported, or S3LECT_OK if none yet (a later
 * success does not clear it). S3LECT_EINVAL for a NULL elector.
 * Contract: any thread, callbacks and store functions too; never blocks. Per
 *   elector, not per thread, like s3lect_errmsg.
 */
S3LECT_API int s3lect_errcode(const s3lect_elector *e);

/* ---- poll mode ---- */

/**
 * A file descriptor that is readable while events are pending (poll mode;
 * in thread mode it is still valid but the dispatcher drains it). Owned by the
 * elector; do not close. Returns a negative code on error.
 * Contract: any thread; never blocks; the descriptor is the elector's.
 */
S3LECT_API int s3lect_event_fd(s3lect_elector *e);
/**
 * Runs pending callbacks on the calling thread, waiting up to timeout_ms
 * (0: do not wait; < 0: wait forever) for the first one. Returns the number
 * run (>= 0) or a negative code (EINVAL when not in poll mode). One thread at
 * a time.
 * Contract: one thread at a time: a second thread, or a call from inside a
 *   callback it is running, gets S3LECT_EBUSY at once. Blocks up to
 *   timeout_ms for the first event, then for as long as the callbacks run.
 */
S3LECT_API int s3lect_dispatch(s3lect_elector *e, int64_t timeout_ms);

/* ---- status ---- */

typedef struct s3lect_status s3lect_status;

/** Elector states as reported in status. */
typedef enum s3lect_state {
    S3LECT_STATE_NEW = 0,
    S3LECT_STATE_FOLLOWER_TRANSITION = 1,
    S3LECT_STATE_FOLLOWER_STABLE = 2,
    S3LECT_STATE_LEADER = 3,
    S3LECT_STATE_STOPPED = 4,
    S3LECT_STATE_BACKOFF = 5
} s3lect_state;

/**
 * Static name of a state ("follower", "leader", ...).
 * Contract: any thread, callbacks too; never blocks; the string is static.
 */
S3LECT_API const char *s3lect_state_str(int state);

/**
 * Takes a consistent snapshot of the elector's status. Free with s3lect_status_free().
 * Contract: any thread, callbacks and store functions too; never blocks; the
 *   caller owns *out (s3lect_status_free) and may read it from any thread.
 */
S3LECT_API int s3lect_get_status(const s3lect_elector *e, s3lect_status **out);
S3LECT_API void s3lect_status_free(s3lect_status *st);
/* Snapshot accessors; strings are borrowed from the snapshot.
 * Contract: any thread holding the snapshot; never block. */
S3LECT_API int s3lect_status_is_leader(const s3lect_status *st);
S3LECT_API int s3lect_status_state(const s3lect_status *st);
S3LECT_API int64_t s3lect_status_term(const s3lect_status *st);
S3LECT_API const char *s3lect_status_server_id(const s3lect_status *st);
S3LECT_API const char *s3lect_status_leader_id(const s3lect_status *st);
S3LECT_API const char *s3lect_status_leader_addr(const s3lect_status *st);
S3LECT_API const char *s3lect_status_etag(const s3lect_status *st);
/** Wall-clock ms of the record's lastUpdated (0: none/released). */
S3LECT_API int64_t s3lect_status_last_updated_ms(const s3lect_status *st);
/** Wall-clock ms when this node last read or wrote the record (0: never). */
S3LECT_API int64_t s3lect_status_last_seen_ms(const s3lect_status *st);
/** Milliseconds of lease left for this node while leader, else 0. */
S3LECT_API int64_t s3lect_status_lease_remaining_ms(const s3lect_status *st);
/** 1 if the current record is corrupt. */
S3LECT_API int s3lect_status_record_corrupt(const s3lect_status *st);
/** Last error code (0 if the last operation succeeded) and its message. */
S3LECT_API int s3lect_status_last_error(const s3lect_status *st);
S3LECT_API const char *s3lect_status_last_error_message(const s3lect_status *st);
S3LECT_API uint64_t s3lect_status_cycle(const s3lect_status *st);
/** Count of consecutive failed store operations. */
S3LECT_API int64_t s3lect_status_consecutive_failures(const s3lect_status *st);

/**
 * The status as a JSON object (UTF-8, NUL-terminated), allocated; release
 * with s3lect_free(). Fields: isLeader, leaderID, leaderAddr, lastUpdated,
 * term, etag, state, serverID, consecutiveFails, lastError, cycle,
 * leaseRemainingMs, recordCorrupt. Any thread.
 * Contract: any thread, callbacks and store functions too; never blocks;
 *   the caller owns *out (s3lect_free).
 */
S3LECT_API int s3lect_status_json(const s3lect_elector *e, char **out);

/**
 * Writes the Prometheus text exposition (format 0.0.4) of n electors into
 * *out (NUL-terminated, allocated; release with s3lect_free()), each
 * elector's samples labelled lock="..." and id="...": s3lect_leader,
 * s3lect_term, s3lect_leadership_transitions_total{reason},
 * s3lect_store_requests_total{op,outcome},
 * s3lect_store_request_duration_seconds{op} (histogram),
 * s3lect_seconds_since_last_renewal (leaders only),
 * s3lect_peer_checks_total{result}, s3lect_peer_fallbacks_total{class} and
 * the process's s3lect_credential_fetches_total{result}. Serve it as
 * "text/plain; version=0.0.4" (docs/metrics.md). n may be 0 (process
 * families only); EINVAL for a NULL elector.
 * Contract: any thread, callbacks and store functions too; never blocks on
 *   the store (each elector's lock is held briefly); the caller owns *out.
 */
S3LECT_API int s3lect_metrics_text(s3lect_elector *const *electors, size_t n, char **out);

/* ---- peer mode (docs/peer.md) ---- */

/**
 * Answers one request to the leadership endpoint as the built-in server would,
 * so an application can serve it from its own HTTP server. method: "GET" or
 * "HEAD"; target: path and query, e.g. "/health/leadership?wait=5000&etag=..."
 * (a long-poll blocks up to the wait). *status gets 200 (leading: body is the
 * record JSON with "etag" and "term"), 404, 405 or 400; *body is allocated
 * JSON, release with s3lect_free().
 * Contract: any thread; from any custom store function S3LECT_EBUSY; from
 *   its callbacks allowed but a long poll holds up this elector's later
 *   callbacks. Blocks up to the wait in target (at most 60 s) or until the
 *   leadership changes; the caller owns *body (s3lect_free).
 */
S3LECT_API int s3lect_peer_response(s3lect_elector *e, const char *method, const char *target,
                                    int *status, char **body);
/**
 * Turns peer mode on for a created (started or not) elector, with the CA
 * bundle (PEM) that followers use to verify the leader. Starts the leadership
 * endpoint if the elector is running and has a certificate and key. Any thread.
 * Contract: any thread, callbacks and store functions too; never waits for
 *   a peer request in flight (the runtime's loop switches to the new
 *   CA between two requests); may bind the endpoint's socket; ca_pem is copied.
 */
S3LECT_API int s3lect_enable_peer_mode(s3lect_elector *e, const void *ca_pem, size_t len);
/**
 * The port the leadership endpoint listens on (0 when not serving). Any thread.
 * Contract: any thread, callbacks and store functions too; never blocks.
 */
S3LECT_API int s3lect_peer_port(const s3lect_elector *e);

/* ---- Option query: the option table, for bindings and tools ---- */

/** Option types for s3lect_option_info. */
typedef enum s3lect_option_type {
    /** s3lect_config_set_str / s3lect_config_get_str. */
    S3LECT_OPTION_STR = 1,
    /** s3lect_config_set_int / s3lect_config_get_int: durations in ms; the runtime
     *  sizes (MAX_CONNECTIONS, WORKER_THREADS, CALLBACK_THREADS) are counts. */
    S3LECT_OPTION_INT = 2,
    /** s3lect_config_set_bool (or set_int: nonzero is 1) / s3lect_config_get_int. */
    S3LECT_OPTION_BOOL = 3,
    /** s3lect_config_set_bytes (or set_str) / s3lect_config_get_str. */
    S3LECT_OPTION_BYTES = 4
} s3lect_option_type;
/**
 * Describes option `opt`: its name (static string, e.g. "lease_timeout"), type
 * (s3lect_option_type), the bounds s3lect_config_set_int enforces and the default
 * of a new configuration (ints in ms, bools 0/1; 0 for strings and bytes).
 * Bools report min 0 and max 1 (their setters store any nonzero value as 1); a
 * bool whose default is "automatic" reports -1 (path_style), as
 * s3lect_config_get_int does on a new configuration.
 * Any output pointer may be NULL. Returns S3LECT_OK, or S3LECT_EINVAL for a value
 * that is not an option (outputs untouched). Options are numbered 1 ..
 * s3lect_option_count(); iterate to discover them. Any thread, any time (also
 * inside callbacks), never blocks.
 */
S3LECT_API int s3lect_option_info(int opt, const char **name, int *type, int64_t *min, int64_t *max,
                                  int64_t *default_value);
/** Facts about an option (bits of s3lect_option_flags), so that front ends
 *  need no lists of their own. */
typedef enum s3lect_option_flag {
    /** An int option in milliseconds: a duration (seconds, a timedelta or a
     *  time.Duration in the bindings; "500ms", "2s" in the CLI and S3LECT_*). */
    S3LECT_OPTION_UNIT_MS = 1,
    /** An int option that is a plain number (a count, the priority). */
    S3LECT_OPTION_UNIT_COUNT = 2,
    /** A secret (a credential or a private key): never logged or shown. */
    S3LECT_OPTION_SECRET = 4,
    /** s3lect_update_config applies it to a running elector. */
    S3LECT_OPTION_RUNTIME = 8,
    /** Process-wide: a size of the shared runtime; the largest value any
     *  started elector asked for applies (docs/threading.md). */
    S3LECT_OPTION_PROCESS_WIDE = 16
} s3lect_option_flag;
/**
 * The facts of option `opt` as s3lect_option_flag bits (>= 0), or
 * S3LECT_EINVAL for a value that is not an option. Every S3LECT_OPTION_INT
 * option has exactly one of UNIT_MS and UNIT_COUNT.
 * Contract: any thread, any time (also inside callbacks); never blocks.
 */
S3LECT_API int s3lect_option_flags(int opt);
/**
 * 1 if option `opt` was set on cfg (by a setter, s3lect_config_set_text, or
 * copied with the config), 0 if it has its default or a value derived from
 * other options, S3LECT_EINVAL for no config or no option. Setting a string
 * or bytes option to NULL unsets it.
 *
 * Timings that were not set are derived from those that were, in the
 * library alone (every front end gets the same): lease_timeout set without
 * renew_deadline gives renew_deadline = 2/3 lease_timeout; renew_interval,
 * when not set but lease_timeout or renew_deadline is, is
 * min(lease_timeout / 3, renew_deadline / 2); frequent_interval set without
 * infrequent_interval raises infrequent_interval to it (at least its
 * default), infrequent_interval set without frequent_interval lowers
 * frequent_interval to it (at most its default). s3lect_config_get_int
 * reads the derived values; s3lect_config_validate names a derived value
 * that is out of range and what it was derived from.
 * Contract: one thread at a time per config, callbacks too; never blocks.
 */
S3LECT_API int s3lect_config_is_set(const s3lect_config *cfg, s3lect_option opt);
/**
 * Sets option `opt` from text, the one syntax of S3LECT_* variables and of
 * the CLI: a duration is one or more NUMBER UNIT pairs ("500ms", "2s",
 * "1.5m", "1h30m"; units ms, s, m, h; whole milliseconds, at most 24h); a
 * bare number other than 0 is refused as ambiguous. A count is decimal
 * digits ("8"). A bool is 1, true, yes or on, or 0, false, no or off (any
 * case). Strings and bytes are taken as they are. Returns S3LECT_OK, or
 * S3LECT_EINVAL with a message in s3lect_config_errmsg() that names the
 * option and the text (never a secret's text).
 * Contract: one thread at a time per config, callbacks too; never blocks;
 *   the text is copied.
 */
S3LECT_API int s3lect_config_set_text(s3lect_config *cfg, s3lect_option opt, const char *text);
/**
 * Sets cfg's options from S3LECT_* environment variables, the one map of
 * variable names for every front end (the CLI and the bindings call it):
 * option `opt` is read from the variable s3lect_option_env names
 * (S3LECT_<NAME>: S3LECT_LOCK, S3LECT_LEASE_TIMEOUT, S3LECT_PEER_LISTEN, ...),
 * else from its short alias (S3LECT_ID, S3LECT_ADDR, S3LECT_PEER), each value
 * in s3lect_config_set_text's syntax. An empty variable is unset. Credentials
 * have no S3LECT_* variable: the store's own (AWS_*, GOOGLE_*, AZURE_*, PG*)
 * are read from the process's environment where the store opens, whatever
 * envp is. envp: "NAME=value" strings ending with NULL (the last of a name
 * wins), or NULL for the process's environment. Options set before the call
 * are overwritten by the variables that are there: set what should win
 * (command-line flags, a program's own arguments) after it. Returns
 * S3LECT_OK, or S3LECT_EINVAL at the first value that does not parse, with a
 * message in s3lect_config_errmsg() that ends "(from the environment: NAME)"
 * (never a secret's text); the options before it stay set.
 * Contract: one thread at a time per config, callbacks too; never blocks;
 *   the values are copied; the process's environment must not change during
 *   the call (getenv).
 */
S3LECT_API int s3lect_config_set_from_env(s3lect_config *cfg, const char *const *envp);
/**
 * The environment variables of option `opt`: *name its S3LECT_* variable
 * and *alias a shorter one also read (S3LECT_ID for server_id), each NULL
 * when there is none (credentials, poll_mode). Static strings. Returns
 * S3LECT_OK, or S3LECT_EINVAL when opt is not an option.
 * Contract: any thread, any time (also inside callbacks); never blocks.
 */
S3LECT_API int s3lect_option_env(int opt, const char **name, const char **alias);
/** The highest option value this library knows (options are 1..count, no gaps).
 *  Any thread, any time, never blocks. */
S3LECT_API int s3lect_option_count(void);
/** The option called `name` (as s3lect_option_info names it), or 0 (also for
 *  NULL). Any thread, any time, never blocks. */
S3LECT_API int s3lect_option_by_name(const char *name);

/* ------------------------------------------------------------------------ */
/* Fenced writes (docs/fencing.md)                                          */
/* ------------------------------------------------------------------------ */

/**
 * A leader's writes of its own objects that a store refuses once a newer
 * term has written them: a deposed leader's write that was already on its
 * way (a GC pause, SIGSTOP, a slow network) fails with S3LECT_EFENCED
 * instead of overwriting its successor's. Objects are named by URLs of the
 * lock's schemes (s3://BUCKET/KEY, gs://, az://, file://, ...) and
 * stored in an envelope: a header line with the writer's term, then its
 * bytes; s3lect_fenced_get strips it. Every write goes over the version it
 * read (If-Match, or create-only) and only when the stored term is older
 * than the writer's or the same term of the same holder, so along an
 * object's versions the term never decreases (docs/algorithm.md "Fenced
 * writes"). Steady state: one PUT a write. Objects up to the store's read
 * limit (1 MiB; 64 KiB in a file store).
 */
typedef struct s3lect_fence s3lect_fence;

/**
 * A fence for the writes of elector e: its term while it leads, its server
 * id as the holder, its configuration's credentials and endpoint (so: its
 * store; a fence for another store is made with s3lect_fence_new_token and
 * that store's configuration). Each write is refused with
 * S3LECT_ENOTLEADER, before anything is sent, while e does not lead.
 * Returns S3LECT_OK with *out (free with s3lect_fence_free, before e), or
 * S3LECT_EINVAL / S3LECT_ENOMEM.
 * Contract: any thread; never blocks.
 */
S3LECT_API int s3lect_fence_new(s3lect_elector *e, s3lect_fence **out);
/**
 * A fence for a process that holds only a fence token (s3lect_fence_token,
 * S3LECT_FENCE_TOKEN under `s3lect run`): the token's term and holder, the
 * credentials and endpoint of cfg (NULL: the defaults and the store's own
 * variables). No leadership check is possible: the fence alone refuses a
 * stale term. S3LECT_EINVAL for a string that is no token.
 * Contract: any thread; never blocks; cfg is copied.
 */
S3LECT_API int s3lect_fence_new_token(const s3lect_config *cfg, const char *token,
                                      s3lect_fence **out);
/** Frees a fence (NULL is fine). Contract: no call on f may be running. */
S3LECT_API void s3lect_fence_free(s3lect_fence *f);
/**
 * The fence token of e's current leadership, "s3lect-fence.1.TERM.HOLDER.LOCK"
 * (HOLDER and LOCK in base64url), copied into buf with snprintf semantics;
 * returns its length, 0 (buf "") while e does not lead.
 * Contract: any thread, callbacks too; never blocks.
 */
S3LECT_API size_t s3lect_fence_token(s3lect_elector *e, char *buf, size_t buflen);
/**
 * Reads a fenced object: *body (its writer's bytes, NUL-terminated, free
 * with s3lect_free) and *len; *version (the store's version, for
 * s3lect_fenced_cas; free with s3lect_free) and *term (the writer's term; 0:
 * an object no fenced writer wrote, read as it is) when not NULL.
 * S3LECT_ENOTFOUND when there is none, or a fenced delete left its
 * tombstone (then *version and *term are the tombstone's: a create can go
 * over it). S3LECT_ECORRUPT for bytes that begin like an envelope but are
 * none; store errors as an elector's (EAUTH, ETRANSIENT, EFATAL).
 * Contract: one call at a time per fence (others wait); blocks up to the
 * request timeout.
 */
S3LECT_API int s3lect_fenced_get(s3lect_fence *f, const char *url, char **body, size_t *len,
                                 char **version, int64_t *term);
/**
 * Writes data at url, fenced: S3LECT_OK once stored; S3LECT_EFENCED when a
 * newer term (or another holder of this term) wrote it last, nothing
 * written; S3LECT_ENOTLEADER (elector fences); S3LECT_ERETRIES when other
 * writers kept changing it between the read and the write; store errors.
 * Contract: one call at a time per fence (others wait); blocks up to a few
 * request timeouts.
 */
S3LECT_API int s3lect_fenced_put(s3lect_fence *f, const char *url, const void *data, size_t len);
/**
 * As s3lect_fenced_put, but only over `version` (from s3lect_fenced_get; NULL:
 * only where there is no object at all): read-modify-write.
 * S3LECT_EPRECONDITION when the object is at another version (read it
 * again), S3LECT_EFENCED when a newer term wrote it.
 * Contract: as s3lect_fenced_put.
 */
S3LECT_API int s3lect_fenced_cas(s3lect_fence *f, const char *url, const void *data, size_t len,
                                 const char *version);
/**
 * Deletes a fenced object: writes its tombstone (fenced as a put), so that
 * a deposed leader cannot create it again under its older term.
 * Contract: as s3lect_fenced_put.
 */
S3LECT_API int s3lect_fenced_delete(s3lect_fence *f, const char *url);
/**
 * The message of f's last failed call (never a secret), snprintf semantics.
 * Contract: any thread; never blocks.
 */
S3LECT_API size_t s3lect_fence_errmsg(const s3lect_fence *f, char *buf, size_t buflen);

/* ---- Test helpers (docs/testing-your-code.md) ----
 *
 * A mem://NAME[/KEY] lock is an object in this process's memory, shared by
 * every elector of the process that names the same NAME (tests only: no
 * other process sees it). With the system's clock it is simply a fast
 * store. With a virtual clock (s3lect_config_set_clock) the electors on
 * it run in virtual time: nothing happens between two calls of
 * s3lect_clock_advance, which runs their elections (store requests,
 * callbacks) in the calling thread, deterministically. */

/** A virtual clock: virtual monotonic time, in ms, starting at 0. */
typedef struct s3lect_clock s3lect_clock;
/**
 * A new virtual clock at virtual time 0, whose wall clock reads
 * wall_start_ms (ms since the epoch) then. NULL when out of memory.
 * Contract: any thread.
 */
S3LECT_API s3lect_clock *s3lect_clock_new(int64_t wall_start_ms);
/**
 * Lets go of the caller's reference (NULL is fine). Each elector made on
 * the clock holds its own until s3lect_free_elector, so the order does
 * not matter; a configuration holds none: keep the clock until s3lect_new
 * has been called with every configuration that names it.
 * Contract: not from a callback of an elector on it.
 */
S3LECT_API void s3lect_clock_free(s3lect_clock *c);
/**
 * Advances virtual time by ms (>= 0): every started elector on c runs each
 * step due until then, in order of virtual time, in the calling thread
 * (store requests, and callbacks: not in poll mode, where they wait for
 * s3lect_dispatch); then the clock reads now + ms. S3LECT_EBUSY from a
 * callback run by an advance of the same clock; S3LECT_EINVAL for ms < 0.
 * Contract: any thread; advances of one clock run one at a time.
 */
S3LECT_API int s3lect_clock_advance(s3lect_clock *c, int64_t ms);
/**
 * The clock's virtual time in ms (0 for NULL). Inside a callback run by an
 * advance: the time of the step that raised the event.
 * Contract: any thread, callbacks too; never blocks.
 */
S3LECT_API int64_t s3lect_clock_now(const s3lect_clock *c);
/**
 * Every store request of the electors on c is answered ms (>= 0) of
 * virtual time after it is sent (default 0: at once); performed on the
 * store when sent.
 * Contract: any thread.
 */
S3LECT_API int s3lect_clock_set_latency(s3lect_clock *c, int64_t ms);
/**
 * Electors made from cfg run on the virtual clock c (NULL: the system's).
 * Only with a mem:// lock and without peer mode: s3lect_config_validate
 * and s3lect_new refuse others (S3LECT_EINVAL, saying so). s3lect_start
 * schedules the first step at the current virtual time (it runs in the
 * next advance, s3lect_clock_advance(c, 0) included); s3lect_stop runs the
 * release at once, in the calling thread; s3lect_is_leader answers for
 * the virtual time. The random choices of an elector on a virtual clock
 * (jitter) are seeded from its server_id and wall_start_ms: the same test
 * runs the same way every time.
 * Contract: as the other s3lect_config_set_* functions.
 */
S3LECT_API int s3lect_config_set_clock(s3lect_config *cfg, s3lect_clock *c);
/**
 * Drops every object of mem://NAME (and its pending failures): a fresh
 * store for the next test. Electors still using it see the lock missing.
 * S3LECT_EINVAL for a name that is not one.
 * Contract: any thread; never blocks for long.
 */
S3LECT_API int s3lect_mem_reset(const char *name);
/**
 * The next n requests (GET or PUT, of any elector) to mem://NAME fail as a
 * store outage does (transient; nothing written), n = 0 none: a leader
 * that cannot renew loses its lease, then leads again. S3LECT_EINVAL for a
 * bad name or n < 0.
 * Contract: any thread; never blocks for long.
 */
S3LECT_API int s3lect_mem_fail(const char *name, int64_t n);

#ifdef __cplusplus
}
#endif

#endif /* S3LECT_H */
