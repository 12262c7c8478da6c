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
    /* GET, where the store says (S3): the server's clock when it answered
     * (Date) and when the object was last written (Last-Modified), wall ms
     * on the store's clock, whole seconds; 0 when unknown. */
    int64_t server_now_ms, server_modified_ms;
} st_result;

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
    /* Reads key. OK: body + etag. */
    void (*get)(st_store *s, const char *key, int64_t timeout_ms, st_result *out);
    /* Writes key if its etag equals if_match, or if it does not exist when if_match == NULL. */
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
    /* Optional: the name of check-store's scratch lock next to key, made
     * with tag (".s3lect-check-<random>"); NULL: key followed by tag. */
    char *(*scratch_key)(const char *key, const char *tag);
} st_vtable;

struct st_store {
    const st_vtable *vt;
};

static inline void st_get(st_store *s, const char *key, int64_t timeout_ms, st_result *out)
{
    s->vt->get(s, key, timeout_ms, out);
}
static inline void st_put(st_store *s, const char *key, const void *data, size_t len,
                          const char *if_match, int64_t timeout_ms, st_result *out)
{
    s->vt->put(s, key, data, len, if_match, timeout_ms, out);
}
static inline void st_destroy(st_store *s)
{
    if (s)
        s->vt->destroy(s);
}

/* A parsed lock location. */
typedef struct st_location {
    int kind; /* ST_LOC_* */
    /* s3: bucket; file: directory; dynamodb: table; route53: hosted zone id;
     * postgres: the libpq connection URI without s3lect's parameters */
    char *bucket;
    /* s3: object key; file: file name inside the directory; dynamodb: the
     * partition key's value; route53: the record name (lower case, with the
     * final dot); postgres: the lock's row name */
    char *key;
    /* dynamodb: partition key attribute name; postgres: table name */
    char *opt1;
    /* dynamodb: sort key attribute name and value (NULL when none) */
    char *opt2, *opt3;
} st_location;
enum { ST_LOC_S3 = 1, ST_LOC_FILE, ST_LOC_DYNAMODB, ST_LOC_POSTGRES, ST_LOC_ROUTE53 };

/* Does a lock of this kind use AWS credentials (the credential chain)? */
static inline int st_loc_is_aws(int kind)
{
    return kind == ST_LOC_S3 || kind == ST_LOC_DYNAMODB || kind == ST_LOC_ROUTE53;
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

struct s3lect_config;
/* Opens the store a config names (custom store if set, else by location).
 * err receives a one-line message on failure. */
int st_open(const struct s3lect_config *cfg, st_store **out, char **key_out, char *err,
            size_t errlen);

/* Backends. */
int st_dynamodb_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                     char *err, size_t errlen);
int st_postgres_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                     char *err, size_t errlen);
int st_route53_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                    char *err, size_t errlen);
int st_file_open(const char *dir, st_store **out, char *err, size_t errlen);
int st_s3_open(const struct s3lect_config *cfg, const char *bucket, st_store **out, char *err,
               size_t errlen);
/* A store calling the user's functions (cfg_custom, reference taken). */
struct cfg_custom;
int st_custom_open(struct cfg_custom *callbacks, st_store **out);

#endif
