/* SPDX-License-Identifier: Apache-2.0 */
/* store.h - the storage layer interface (DESIGN §2.3, §5).
 *
 * A store is bound to one backend (a bucket, a directory, a custom object);
 * each call names the key. Calls run on the election thread (or the CLI's
 * thread), one at a time per store object; a store object is not shared
 * between threads.
 */
#ifndef S3LECT_STORE_H
#define S3LECT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "s3lect.h"

/* The largest lock object a store reads (a record is far smaller). */
#define ST_MAX_OBJECT (64 * 1024)

/* Outcomes: the public s3lect_store_outcome values. */
enum {
    ST_OK = S3LECT_STORE_OK,
    ST_NOT_FOUND = S3LECT_STORE_NOT_FOUND,
    ST_PRECONDITION = S3LECT_STORE_PRECONDITION,
    ST_AUTH = S3LECT_STORE_AUTH,
    ST_TRANSIENT = S3LECT_STORE_TRANSIENT,
    ST_FATAL = S3LECT_STORE_FATAL
};

/* The answer of one store call. The store fills it; the caller frees it
 * with st_result_clear(). body is NUL-terminated for convenience (len excludes it). */
typedef struct st_result {
    int outcome;
    char *body;
    size_t body_len;
    char *etag;      /* GET: the object's etag; PUT: the new etag */
    char *message;   /* failure detail for humans; never contains secrets */
    int http_status; /* 0 when not HTTP */
    char *warning;   /* a problem to report although the call worked (e.g. a failed
                      * credential refresh while the current ones are still valid) */
    /* GET, where the store says (S3, PostgreSQL): the server's clock when it
     * answered (S3 Date; PostgreSQL now()) and when the record was last
     * written (S3 Last-Modified; PostgreSQL updated_at, stamped by the
     * server), wall ms on the store's clock, truncated to server_res_ms
     * (S3 1000, PostgreSQL 1); 0 when unknown. The engine backdates a
     * follower's first sight of a foreign record by their difference
     * (docs/algorithm.md, "The store's clock"). */
    int64_t server_now_ms, server_modified_ms, server_res_ms;
    /* A peer check (not a store call) that failed, ST_PEER_*: 0 when it is
     * no failure of the leader's endpoint (success, a 404 "not leading", a
     * check cut short by a stop). */
    int peer_failure;
    /* A peer check's "not the leader" answer told this follower to yield:
     * another follower was named to take the lock over first (docs/peer.md
     * "One successor"). */
    int peer_yield;
    /* A peer check's "not the leader" answer named this follower the
     * successor and carried the released record (body, etag): outcome
     * ST_OK, as if read from the store. */
    int peer_released;
} st_result;

enum {
    ST_PEER_OK = 0,
    ST_PEER_FAILED = 1,     /* a wrong answer: TLS, status, body, another leader */
    ST_PEER_UNREACHABLE = 2 /* refused, reset, unreachable, no answer in time */
};

void st_result_clear(st_result *r);
/* Helpers for store implementations: set fields (copying). Return 0 or S3LECT_ENOMEM. */
int st_result_set_body(st_result *r, const void *data, size_t len);
int st_result_set_etag(st_result *r, const char *etag);
int st_result_setf(st_result *r, int outcome, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

typedef struct st_store st_store;
/* One prepared asynchronous request (store-specific). */
typedef struct st_xfer st_xfer;

typedef struct st_vtable {
    const char *name; /* "s3", "file", "custom" */
    /* Reads key. OK: body + etag. NULL in a store with begin/finish: the
     * one transfer driver (st_transfer) runs its blocking calls. */
    void (*get)(st_store *s, const char *key, int64_t timeout_ms, st_result *out);
    /* Writes key if its etag equals if_match, or if it does not exist when
     * if_match == NULL. NULL in a store with begin/finish (as get). */
    void (*put)(st_store *s, const char *key, const void *data, size_t len, const char *if_match,
                int64_t timeout_ms, st_result *out);
    void (*destroy)(st_store *s);
    /* Optional asynchronous form (NULL when the store blocks: file, custom).
     * begin prepares a GET (put == 0) or a conditional PUT of key on the
     * libcurl easy handle `easy` (a CURL *, reset by begin), signed now, and
     * returns the request's state; NULL when no request can be made (out
     * says why). The caller runs the transfer (curl_multi) and passes its
     * CURLcode to finish, which fills out and frees x. */
    st_xfer *(*begin)(st_store *s, void *easy, const char *key, int put, const void *data,
                      size_t len, const char *if_match, int64_t timeout_ms, st_result *out);
    void (*finish)(st_store *s, st_xfer *x, int curl_code, st_result *out);
    /* The connection pool the requests use ("https://host:port"): requests
     * to one pool share its bounded set of keep-alive connections. Peer
     * mode also takes its default address from the route to it, so a
     * blocking store may name its server here too (PostgreSQL does). */
    const char *(*pool)(const st_store *s);
    /* Optional: creates what the lock needs (a table) for `s3lect
     * init-store`; never called by an elector. OK with out->message saying
     * what was done ("created table ...", "table ... exists"). */
    void (*init)(st_store *s, const char *key, int64_t timeout_ms, st_result *out);
    /* Optional: the name of an object next to key made with tag (check-store's
     * ".s3lect-check-<random>", the roster's ".s3lect-roster"); NULL: key
     * followed by tag. Use st_sibling_key. */
    char *(*scratch_key)(const char *key, const char *tag);
} st_vtable;

struct st_store {
    const st_vtable *vt;
    void *easy; /* the libcurl handle of blocking calls to a begin/finish store
                 * (st_easy), made on first use, freed by st_destroy */
};

/* A store with begin/finish leaves get and put NULL: the one transfer
 * driver (st_transfer) runs its requests for blocking callers. */
void st_get(st_store *s, const char *key, int64_t timeout_ms, st_result *out);
void st_put(st_store *s, const char *key, const void *data, size_t len, const char *if_match,
            int64_t timeout_ms, st_result *out);
/* The key of another object next to key in the same store, named with tag
 * (".s3lect-check-…", ".s3lect-roster"): the store's scratch_key, else key
 * followed by tag. Allocated; NULL when out of memory. */
char *st_sibling_key(const st_store *s, const char *key, const char *tag);
/* Frees the store and its blocking handle (NULL is fine). */
void st_destroy(st_store *s);
/* The blocking transfer driver: begin on the store's own handle, the
 * transfer (curl_easy_perform), finish. */
void st_transfer(st_store *s, const char *key, int put, const void *data, size_t len,
                 const char *if_match, int64_t timeout_ms, st_result *out);
/* The store's own handle for blocking calls (a CURL *), made on first use;
 * NULL with out set (TRANSIENT) when libcurl cannot make one. */
void *st_easy(st_store *s, st_result *out);

/* A lock store's row in the scheme table (store/schemes.c). */
typedef struct st_scheme st_scheme;

/* A parsed lock location. */
typedef struct st_location {
    const st_scheme *scheme; /* the store it names */
    /* s3, gs: bucket; file: directory; dynamodb: table; route53: hosted zone id;
     * postgres: the libpq connection URI without s3lect's parameters;
     * azure: storage account;
     * etcd: "http[s]://H1:P1[,H2:P2...]" (the endpoints);
     * redis: HOST:PORT ([V6]:PORT) */
    char *bucket;
    /* s3, gs: object key (name); file: file name inside the directory; dynamodb: the
     * partition key's value; route53: the record name (lower case, with the
     * final dot); postgres: the lock's row name; azure: the blob name;
     * custom: the key */
    char *key;
    /* dynamodb: partition key attribute name; postgres: table name; azure:
     * container; etcd: the user (NULL when none); redis: the user */
    char *opt1;
    /* dynamodb: sort key attribute name and value (NULL when none); azure:
     * opt2 the endpoint suffix of an https URL other than core.windows.net
     * ("core.usgovcloudapi.net"), else NULL;
     * etcd: the password (opt2) and "CERT\nKEY" files (opt3), NULL when none;
     * redis: the password (opt2, decoded) and the database number (opt3,
     * NULL: 0) */
    char *opt2, *opt3;
    /* ST_CRED_* when this lock's credentials are not its row's kind
     * (postgres ?auth=aws-iam: ST_CRED_AWS, the token is signed with the AWS
     * chain), else 0; read it with st_location_cred. */
    int cred;
} st_location;

enum {
    ST_SCHEME_PATHS = 2, /* a plain path (no scheme) names a lock of this store */
    /* Its reads may be stale (Route 53): a transfer's confirmation, written
     * into the holder's record, could be read back as the old record and
     * make the holder step down; transfers are refused there. */
    ST_SCHEME_STALE_READS = 4,
};

struct s3lect_config;
/* One store: a file (store_NAME.c) and one row in the table. */
struct st_scheme {
    const char *name;  /* the URL scheme, lower case: "s3" */
    const char *alias; /* another spelling of it ("postgresql"), or NULL */
    /* Parses url; rest is what follows "NAME://" (NULL: url is a plain
     * path). Fills out's fields (not out->scheme); on error writes a
     * one-line message that says what to fix (never a password). */
    int (*parse)(const char *url, const char *rest, st_location *out, char *err, size_t errlen);
    /* Opens the store the location names with cfg's settings. */
    int (*open)(const struct s3lect_config *cfg, const st_location *loc, st_store **out, char *err,
                size_t errlen);
    /* Appends the canonical form of loc (st_lock_canonical) to *out;
     * nonzero when out of memory. */
    int (*canonical)(const st_location *loc, char **out);
    /* The right spelling, for a URL with the scheme but not "://" ("s3://
     * bucket/key (two slashes)"), or NULL. */
    const char *form;
    int flags; /* ST_SCHEME_* */
    /* For people (help texts, error lists; NULL on rows that only spell
     * another row's store differently): what a lock is there, "an S3
     * object", and the lock URL's usage, "s3://BUCKET/KEY". */
    const char *noun;
    const char *usage;
    int cred;         /* ST_CRED_*: where its credentials come from (whoami) */
    const char *doc;  /* its section: "docs/stores.md#s3" */
    const char *home; /* what holds its locks and s3lect never creates ("a bucket"), or NULL */
    /* 0 when this build has no such store (its open says how to get it);
     * NULL: always built. st_scheme_compiled() asks. */
    int (*compiled)(void);
    const char *needs; /* what it needs at run time beyond the library ("libpq.so.5"), or NULL */
    /* check-store: what passing checks cannot show about this store, or NULL. */
    const char *caveat;
};

/* st_scheme.cred */
enum {
    ST_CRED_NONE = 0, /* none: a file */
    ST_CRED_AWS,      /* the AWS credential chain */
    ST_CRED_GCP,      /* Google credentials (ADC) */
    ST_CRED_AZURE,    /* a Shared Key or SAS, else Microsoft Entra ID */
    ST_CRED_URL,      /* in the lock URL or the store's own variables and files */
    ST_CRED_KUBE,     /* the pod's service account, else a kubeconfig (k8s://) */
};
/* A credential kind's name ("aws") and a line on it, for people. */
const char *st_cred_name(int cred);
const char *st_cred_text(int cred);
int st_scheme_compiled(const st_scheme *sc);
/* The row of the store a lock URL names, or NULL (it does not parse). */
const st_scheme *st_scheme_of(const char *lock);
int st_redis_compiled(void);

/* The scheme table's rows, in order (st_scheme_at(i) for i < st_scheme_count()). */
size_t st_scheme_count(void);
const st_scheme *st_scheme_at(size_t i);

/* Where a lock of this location takes its credentials from (ST_CRED_*):
 * its own (an ?auth= parameter) or its row's. */
static inline int st_location_cred(const st_location *loc)
{
    return loc->cred ? loc->cred : loc->scheme ? loc->scheme->cred : ST_CRED_NONE;
}

/* Does a lock of this location use AWS credentials (the credential chain)? */
static inline int st_location_is_aws(const st_location *loc)
{
    return st_location_cred(loc) == ST_CRED_AWS;
}

/* Parses "s3://bucket/key", "file:///dir/key", a plain path,
 * "dynamodb://TABLE/KEY[?partition_key=A&sort_key=B&sort_value=V]",
 * "postgres://[user@host:port]/DB?key=K[&table=T][&libpq parameters]" and
 * "route53://ZONE_ID/NAME". On error writes a one-line message that says
 * what to fix into err (never a password). */
int st_location_parse(const char *url, st_location *out, char *err, size_t errlen);
void st_location_clear(st_location *loc);

/* The lock URL as it may be shown (logs, metrics, status): a password in
 * the user-info part or a password= parameter is replaced by "***".
 * Allocated; NULL on out of memory. */
char *st_lock_display(const char *url);
/* The lock as one string for every spelling of it, for the metrics' lock
 * label (docs/metrics.md "The lock label"): s3://BUCKET/KEY, file:///ABS/PATH
 * (a plain or relative path made absolute against the working directory,
 * "." "..", "//" resolved lexically, symlinks not followed),
 * dynamodb://TABLE/KEY?partition_key=A[&sort_key=B&sort_value=V],
 * route53://ZONE/name. (lower case), postgres://CONNINFO?key=K&table=T with
 * the connection part as st_lock_display shows it (no password). Schemes in
 * lower case; query values percent-encoded where they carry & # % = ? or
 * bytes outside printable ASCII. A location that does not parse is shown as
 * st_lock_display shows it. Allocated; NULL on out of memory. */
char *st_lock_canonical(const char *url);

/* The lock a config names: parsed by its scheme, or, with a custom store,
 * the custom store's location (key: the lock's key part when it parses as
 * a URL, else the whole string). */
int st_lock_location(const struct s3lect_config *cfg, st_location *out, char *err, size_t errlen);
/* st_lock_canonical of a parsed location; url is the lock as written (for a
 * location whose scheme has no canonical form: the custom store). */
char *st_location_canonical(const st_location *loc, const char *url);
/* Opens the store a parsed location names: every store through its row's
 * open. err receives a one-line message on failure. */
int st_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out, char *err,
            size_t errlen);
/* For callers that hold only a config (the CLI): st_lock_location, then
 * st_open; *key_out receives the key (allocated). */
int st_open_config(const struct s3lect_config *cfg, st_store **out, char **key_out, char *err,
                   size_t errlen);

/* The stores (their rows in store/schemes.c). Every store opens through
 * the one signature of st_scheme.open. */
#define ST_STORE_FUNCS(name)                                                                       \
    int st_##name##_parse(const char *url, const char *rest, st_location *out, char *err,          \
                          size_t errlen);                                                          \
    int st_##name##_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,  \
                         char *err, size_t errlen);                                                \
    int st_##name##_canonical(const st_location *loc, char **out);
ST_STORE_FUNCS(s3)
ST_STORE_FUNCS(file)
ST_STORE_FUNCS(dynamodb)
ST_STORE_FUNCS(postgres)
/* mysql://USER@HOST[:PORT]/DB?key=K (mariadb:// too): a row of a MySQL or MariaDB table. */
ST_STORE_FUNCS(mysql)
ST_STORE_FUNCS(route53)
ST_STORE_FUNCS(gcs)
/* Whether requests to the configured GCS endpoint may go without a token
 * when no Google credentials are configured: STORAGE_EMULATOR_HOST, or an
 * http:// loopback endpoint (an emulator). 0, or an error (err says it). */
int st_gcs_emulator(const struct s3lect_config *cfg, int *emulator, char *err, size_t errlen);
ST_STORE_FUNCS(azure)
/* The Azure store's second spelling: https://ACCOUNT.blob.core.SUFFIX/CONTAINER/BLOB. */
int st_azure_https_parse(const char *url, const char *rest, st_location *out, char *err,
                         size_t errlen);
/* The outcome (ST_*) of an Azure Blob answer: HTTP status and its
 * x-ms-error-code ("" when none); the simulation's azure model uses it. */
int st_azure_outcome(long status, const char *error_code);
ST_STORE_FUNCS(etcd)
ST_STORE_FUNCS(redis)
/* k8s://NAMESPACE/NAME[?context=CTX&kubeconfig=PATH]: bucket the
 * namespace, key the Lease name, opt1 the context, opt2 the kubeconfig. */
ST_STORE_FUNCS(k8s)
/* The outcome of an API server's error answer: status, the Status body's
 * reason ("Conflict", "AlreadyExists") and details.kind ("leases",
 * "namespaces"), and the request's RBAC verb (get, create, update). A
 * stale resourceVersion (409 Conflict), a lost create (409 AlreadyExists)
 * and an update of a deleted Lease (404) are precondition failures. The
 * simulation's k8s model answers through it. */
int st_k8s_outcome(long status, const char *reason, const char *kind, const char *verb);
/* whoami for a k8s:// lock: where the server and credentials come from
 * (source), the user (principal), an exec plugin's expiry; fetch: read the
 * token file or run the exec plugin now. 0, or an error with err. */
int st_k8s_whoami(const st_location *loc, int fetch, char *source, size_t sn, char *principal,
                  size_t pn, int64_t *expires_ms, char *err, size_t errlen);
/* The Lease <-> record mapping (tests): the body a Lease (JSON) reads as,
 * its resourceVersion, and whether a foreign holder (client-go) wrote it;
 * 0, -1 (not a Lease) or -2 (out of memory). */
int st_k8s_lease_read(const char *lease_json, size_t len, char **body, char **rv, int *foreign,
                      char *err, size_t errlen);
/* The Lease (JSON, allocated) that writing body over prev_json (NULL: a
 * create) at wall time now_ms sends; NULL with err. */
char *st_k8s_lease_write(const char *prev_json, const char *ns, const char *name, const char *body,
                         size_t len, int64_t now_ms, char *err, size_t errlen);
/* mem://NAME[/KEY] (tests only: one process's memory, docs/testing-your-code.md). */
ST_STORE_FUNCS(mem)
/* 1 when loc names a mem:// lock. */
int st_mem_is(const st_location *loc);
/* A mem store answers with this clock (wall ms; a virtual clock's) instead
 * of the system's; a store of another kind is left alone. */
void st_mem_use_clock(st_store *s, int64_t (*wall_ms)(void *), void *arg);
/* The custom store (the user's functions, cfg->custom): no URL of its own. */
extern const st_scheme st_custom_scheme;
int st_custom_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                   char *err, size_t errlen);

/* Helpers for the stores' parsers and canonical forms (store.c). */
/* Is every byte of s in the set: letters, digits and extra? */
int st_only_chars(const char *s, const char *extra);
/* The first control character (C0, DEL, UTF-8 C1) in s, or NULL. */
const char *st_find_control(const char *s);
/* Is p a control character? */
int st_is_control(const unsigned char *p);
/* Length of one valid UTF-8 sequence at p (1..4), or 0. */
size_t st_utf8_len(const unsigned char *p);
/* Checks '/'-separated segments of path[0..n): none empty, none "." or "..";
 * what names the part in the message ("key", "path"). */
int st_check_segments(const char *url, const char *what, const char *path, size_t n, char *err,
                      size_t errlen);

/* "BUCKET/OBJECT" after "SCHEME://" (the S3 and GCS forms): checks the URL
 * has both and no query or fragment, then the bucket and the object name
 * with the store's own rules, and fills out->bucket and out->key. form is
 * the spelling to show ("s3://bucket/key"), an_object the object's name
 * with its article ("a key", "an object"). */
int st_parse_bucket_object(
    const char *url, const char *rest, const char *form, const char *an_object,
    int (*check_bucket)(const char *url, const char *b, size_t bl, char *err, size_t errlen),
    int (*check_object)(const char *url, const char *key, char *err, size_t errlen),
    st_location *out, char *err, size_t errlen);
/* The server part of a lock URL: HOST, HOST:PORT, [V6] or [V6]:PORT in h
 * (hlen bytes). *namelen: the host's length (brackets included); *port: the
 * port, def_port when none is written. 0, or S3LECT_EINVAL with err naming
 * what to fix (usage: the URL's form, for the message). */
int st_parse_server(const char *url, const char *usage, const char *h, size_t hlen, long def_port,
                    size_t *namelen, long *port, char *err, size_t errlen);
/* Checks a name or value: 1 to max bytes of UTF-8 without control characters. */
int st_check_text(const char *url, const char *what, const char *v, size_t max, char *err,
                  size_t errlen);
/* Decodes %XX escapes of in[0..n): NULL with *bad = 1 on a malformed escape
 * or an escaped NUL, NULL with *bad = 0 when out of memory. */
char *st_pct_decode(const char *in, size_t n, int *bad);
/* One parameter a scheme takes from the query. */
typedef struct st_qparam {
    const char *name;
    char **dst; /* receives the decoded value */
} st_qparam;
/* Splits query q ("a=b&c=d") into params (decoded). A parameter not in
 * params is appended, as written, to *rest ("&"-joined) when rest is not
 * NULL, and refused otherwise. Duplicates and empty values are refused. */
int st_parse_query(const char *url, const char *usage, const char *q, const st_qparam *params,
                   size_t np, char **rest, char *err, size_t errlen);
/* Appends prefix and v to *out, percent-encoding (encode) what would make a
 * query ambiguous. Nonzero when out of memory. */
int st_canon_add(char **out, const char *prefix, const char *v, int encode);
/* An HTTP date, IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT", the Date and
 * Last-Modified headers), as wall ms in *ms. 0, or -1 when s is not one. */
int st_http_date_ms(const char *s, int64_t *ms);

#endif
