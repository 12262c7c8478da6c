/* SPDX-License-Identifier: Apache-2.0 */
/* store_postgres.c - the PostgreSQL store (docs/stores.md): one row per lock
 * in a table made by `s3lect init-store`,
 *
 *   name text PRIMARY KEY, record text NOT NULL, version text NOT NULL,
 *   updated_at timestamptz NOT NULL DEFAULT now()
 *
 *   read    SELECT record, version, now(), updated_at WHERE name = $1
 *   create  INSERT ... ON CONFLICT (name) DO NOTHING    (1 row: created)
 *   write   UPDATE ... WHERE name = $1 AND version = $4  (1 row: written)
 *
 * updated_at is stamped by the server (now()) on every write, and a read
 * returns it with the server's now(), both in ms: the record's age by the
 * store's clock (docs/algorithm.md, "The store's clock").
 *
 * The version is a fresh random token on every write (a row deleted and
 * made again never brings an old version back). libpq is loaded at run time
 * (libpq.so.5), so the library and its self-contained builds need it only
 * where a postgres:// lock is used. Connections come from a small pool per
 * connection string shared by every store object of the process; each call
 * is bounded on the client side (poll with the call's deadline; the
 * connection is dropped when it passes) and on the server side
 * (statement_timeout). A failed connection is dropped and made again by the
 * next call.
 *
 * With ?auth=aws-iam (Amazon RDS and Aurora: IAM database authentication)
 * the password of every new connection is an IAM token (aws/rds_token.h,
 * signed with the AWS credential chain, reused for up to 10 of its 15
 * minutes), and TLS is required: sslmode defaults to require, and the lock
 * URL cannot weaken it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "conn_pool.h"
#include "crypto.h"
#include "rds_token.h"
#include "store.h"
#include "util.h"

#define PG_DEFAULT_TIMEOUT_MS 10000

/* ---- libpq, loaded at run time ---- */

typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;
enum { CONNECTION_OK = 0 };
enum { POLL_FAILED = 0, POLL_READING = 1, POLL_WRITING = 2, POLL_OK = 3 };
enum { PGRES_COMMAND_OK = 1, PGRES_TUPLES_OK = 2 };
#define PG_DIAG_SQLSTATE 'C'
#define PG_DIAG_MESSAGE_PRIMARY 'M'

typedef struct conninfo_option {
    char *keyword, *envvar, *compiled, *val, *label, *dispchar;
    int dispsize;
} conninfo_option;

static struct libpq {
    PGconn *(*connectStart)(const char *);
    PGconn *(*connectStartParams)(const char *const *, const char *const *, int);
    int (*connectPoll)(PGconn *);
    int (*status)(const PGconn *);
    int (*socket)(const PGconn *);
    char *(*errorMessage)(const PGconn *);
    int (*setnonblocking)(PGconn *, int);
    int (*sendQueryParams)(PGconn *, const char *, int, const void *, const char *const *,
                           const int *, const int *, int);
    int (*flush)(PGconn *);
    int (*consumeInput)(PGconn *);
    int (*isBusy)(PGconn *);
    PGresult *(*getResult)(PGconn *);
    int (*resultStatus)(const PGresult *);
    char *(*resultErrorField)(const PGresult *, int);
    int (*ntuples)(const PGresult *);
    char *(*getvalue)(const PGresult *, int, int);
    int (*getlength)(const PGresult *, int, int);
    int (*getisnull)(const PGresult *, int, int);
    char *(*cmdTuples)(PGresult *);
    void (*clear)(PGresult *);
    void (*finish)(PGconn *);
    conninfo_option *(*conninfoParse)(const char *, char **);
    void (*conninfoFree)(conninfo_option *);
    void (*freemem)(void *);
    void *(*setNoticeProcessor)(PGconn *, void (*)(void *, const char *), void *);
} pq;
static pthread_once_t pq_once = PTHREAD_ONCE_INIT;
static char pq_error[300];

static void pq_load(void)
{
    void *h = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(pq_error, sizeof pq_error,
                 "postgres:// locks need libpq (libpq.so.5), which is not installed: install it "
                 "(Debian/Ubuntu: apt install libpq5; RHEL: dnf install libpq) (%s)",
                 dlerror());
        return;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"PQconnectStart", (void **)&pq.connectStart},
        {"PQconnectStartParams", (void **)&pq.connectStartParams},
        {"PQconnectPoll", (void **)&pq.connectPoll},
        {"PQstatus", (void **)&pq.status},
        {"PQsocket", (void **)&pq.socket},
        {"PQerrorMessage", (void **)&pq.errorMessage},
        {"PQsetnonblocking", (void **)&pq.setnonblocking},
        {"PQsendQueryParams", (void **)&pq.sendQueryParams},
        {"PQflush", (void **)&pq.flush},
        {"PQconsumeInput", (void **)&pq.consumeInput},
        {"PQisBusy", (void **)&pq.isBusy},
        {"PQgetResult", (void **)&pq.getResult},
        {"PQresultStatus", (void **)&pq.resultStatus},
        {"PQresultErrorField", (void **)&pq.resultErrorField},
        {"PQntuples", (void **)&pq.ntuples},
        {"PQgetvalue", (void **)&pq.getvalue},
        {"PQgetlength", (void **)&pq.getlength},
        {"PQgetisnull", (void **)&pq.getisnull},
        {"PQcmdTuples", (void **)&pq.cmdTuples},
        {"PQclear", (void **)&pq.clear},
        {"PQfinish", (void **)&pq.finish},
        {"PQconninfoParse", (void **)&pq.conninfoParse},
        {"PQconninfoFree", (void **)&pq.conninfoFree},
        {"PQfreemem", (void **)&pq.freemem},
        {"PQsetNoticeProcessor", (void **)&pq.setNoticeProcessor},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        void *f = dlsym(h, syms[i].name);
        if (!f) {
            snprintf(pq_error, sizeof pq_error, "libpq.so.5 lacks %s: install a newer libpq",
                     syms[i].name);
            memset(&pq, 0, sizeof pq);
            return;
        }
        memcpy(syms[i].slot, &f, sizeof f);
    }
}

/* ---- the connection pool (conn_pool.h) ---- */

/* Its data: the connection string; its key: that, and whether its
 * connections log in with IAM tokens (never shared with password ones). */
static void pg_close_conn(void *c)
{
    pq.finish(c);
}

static void pg_free_conninfo(void *d)
{
    u_wipe_free(d);
}

static conn_pool *pool_get(const char *conninfo, int iam)
{
    char *key = u_asprintf("%s\n%s", iam ? "iam" : "password", conninfo);
    char *data = u_strdup(conninfo);
    if (!key || !data) {
        u_wipe_free(key);
        u_wipe_free(data);
        return NULL;
    }
    conn_pool *p = conn_pool_get(key, data, pg_free_conninfo, pg_close_conn);
    u_wipe_free(key);
    return p;
}

#define POOL_CONNINFO(p) ((const char *)(p)->data)

typedef struct pg_store {
    st_store base;
    conn_pool *pool;
    char *table;    /* quoted: "name" or "schema"."name" */
    char *table_in; /* as written, for messages */
    char *where;    /* for messages: "database d on h:p" */
    char *origin;   /* "postgres://host:port" (peer mode's route), or NULL */
    char *sql_get, *sql_insert, *sql_update; /* the three statements, made once */
    int64_t default_timeout_ms;
    /* ?auth=aws-iam: what the token is made for, and the AWS settings of
     * the config it was opened with (profile, keys, region...). */
    struct {
        int on;
        char *host, *user, *region; /* region NULL: the endpoint's or the chain's */
        int port;
        struct s3lect_config cfg;
    } iam;
} pg_store;

/* Waits until the connection's socket is ready for events or the deadline. */
static int wait_socket(PGconn *c, short events, int64_t deadline)
{
    int fd = pq.socket(c);
    if (fd < 0)
        return -1;
    for (;;) {
        int64_t left = deadline - u_mono_ms();
        if (left <= 0)
            return 0;
        struct pollfd pfd = {fd, events, 0};
        int n = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* A whole number of ms as PostgreSQL prints a bigint. */
static int parse_ms(const char *v, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return -1;
    *out = (int64_t)x;
    return 0;
}

/* One line of a libpq message (they end with newlines and may have more). */
static void first_line(const char *in, char *out, size_t len)
{
    snprintf(out, len, "%s", in ? in : "");
    out[strcspn(out, "\n")] = '\0';
}

/* Classifies a failure to connect from libpq's message. */
static int connect_outcome(const char *msg)
{
    if (strstr(msg, "password authentication failed") || strstr(msg, "no pg_hba.conf entry") ||
        strstr(msg, "authentication failed") || strstr(msg, "password is required") ||
        strstr(msg, "permission denied"))
        return ST_AUTH;
    if (strstr(msg, "does not exist") || strstr(msg, "invalid connection option") ||
        strstr(msg, "invalid sslmode") || strstr(msg, "certificate"))
        return ST_FATAL;
    return ST_TRANSIENT;
}

static void run_sql(PGconn *c, const char *sql, int n, const char *const *vals, int64_t deadline,
                    PGresult **res, char *err, size_t errlen);

/* Server notices ("relation ... already exists, skipping") are not for the
 * user of an elector: libpq would print them on stderr. */
static void ignore_notice(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

/* sslmode when the lock URL sets none: PGSSLMODE when it asks for TLS,
 * else require (IAM authentication needs TLS). */
static const char *iam_sslmode(void)
{
    const char *e = getenv("PGSSLMODE");
    if (e &&
        (strcmp(e, "require") == 0 || strcmp(e, "verify-ca") == 0 || strcmp(e, "verify-full") == 0))
        return e;
    return "require";
}

/* Starts a connection that logs in with an IAM token (?auth=aws-iam), or
 * returns NULL with out set. The URL's own parameters are expanded after
 * sslmode (so an sslmode there wins: the parser let only TLS modes through)
 * and before the password (so the token wins over PGPASSWORD, ~/.pgpass). */
static PGconn *iam_connect(pg_store *s, st_result *out)
{
    char *token = NULL, err[600];
    int rc = rds_token_get(&s->iam.cfg, s->iam.host, s->iam.port, s->iam.user, s->iam.region,
                           &token, err, sizeof err);
    if (rc != 0) {
        st_result_setf(out,
                       rc == S3LECT_EAUTH        ? ST_AUTH
                       : rc == S3LECT_ETRANSIENT ? ST_TRANSIENT
                       : rc == S3LECT_ENOMEM     ? ST_TRANSIENT
                                                 : ST_FATAL,
                       "no IAM database authentication token for PostgreSQL %s: %s%s", s->where,
                       err, rc == S3LECT_ETRANSIENT ? "; will retry" : "");
        return NULL;
    }
    const char *const keys[] = {"sslmode", "dbname", "password", NULL};
    const char *const vals[] = {iam_sslmode(), POOL_CONNINFO(s->pool), token, NULL};
    PGconn *c = pq.connectStartParams(keys, vals, 1);
    u_wipe_free(token);
    if (!c)
        st_result_setf(out, ST_TRANSIENT, "out of memory");
    return c;
}

/* Takes a connection from the pool or makes one. NULL with out set. */
static PGconn *conn_take(pg_store *s, int64_t deadline, st_result *out)
{
    conn_pool *p = s->pool;
    int make;
    PGconn *idle = conn_pool_take(p, deadline, &make);
    if (idle)
        return idle;
    if (!make) {
        st_result_setf(out, ST_TRANSIENT,
                       "no free connection to %s within the request timeout (%d in use by "
                       "this process); will retry",
                       s->where, CONN_POOL_MAX);
        return NULL;
    }

    char why[300] = "timed out";
    int outcome = ST_TRANSIENT;
    PGconn *c = s->iam.on ? iam_connect(s, out) : pq.connectStart(POOL_CONNINFO(p));
    if (s->iam.on && !c) {
        conn_pool_unreserve(p);
        return NULL;
    }
    if (c)
        pq.setNoticeProcessor(c, ignore_notice, NULL);
    if (c && pq.status(c) != 1 /* CONNECTION_BAD */) {
        int st = POLL_WRITING;
        while (st != POLL_OK && st != POLL_FAILED) {
            int w = wait_socket(c, st == POLL_READING ? POLLIN : POLLOUT, deadline);
            if (w <= 0)
                break;
            st = pq.connectPoll(c);
        }
        if (st == POLL_OK && pq.status(c) == CONNECTION_OK) {
            char timeout_sql[80], err[300];
            PGresult *r = NULL;
            snprintf(timeout_sql, sizeof timeout_sql, "SET statement_timeout = %lld",
                     (long long)s->default_timeout_ms);
            pq.setnonblocking(c, 1);
            run_sql(c, timeout_sql, 0, NULL, deadline, &r, err, sizeof err);
            if (r && pq.resultStatus(r) == PGRES_COMMAND_OK) {
                pq.clear(r);
                return c;
            }
            if (r)
                pq.clear(r);
            snprintf(why, sizeof why, "%s", err[0] ? err : "setting statement_timeout failed");
        } else if (st == POLL_FAILED) {
            first_line(pq.errorMessage(c), why, sizeof why);
            outcome = connect_outcome(why);
        }
    } else if (c) {
        first_line(pq.errorMessage(c), why, sizeof why);
        outcome = connect_outcome(why);
    }
    if (c)
        pq.finish(c);
    conn_pool_unreserve(p);
    if (outcome == ST_AUTH && s->iam.on)
        st_result_setf(out, outcome,
                       "PostgreSQL refused the IAM token for %s (%s): check that the AWS "
                       "credentials' policy allows rds-db:connect on "
                       "arn:aws:rds-db:REGION:ACCOUNT:dbuser:DBI-RESOURCE-ID/%s, that the user "
                       "was granted rds_iam, and the region (docs/stores.md)",
                       s->where, why, s->iam.user);
    else if (outcome == ST_AUTH)
        st_result_setf(out, outcome,
                       "PostgreSQL refused the connection to %s (%s): fix the user or password "
                       "(PGPASSWORD, ~/.pgpass, pg_hba.conf)",
                       s->where, why);
    else if (outcome == ST_FATAL)
        st_result_setf(out, outcome, "cannot use PostgreSQL %s (%s): fix the lock URL", s->where,
                       why);
    else
        st_result_setf(out, outcome, "cannot connect to PostgreSQL %s (%s); will retry", s->where,
                       why);
    return NULL;
}

/* Returns a connection: to the pool when it is still good, else closed. */
static void conn_give(pg_store *s, PGconn *c, int good)
{
    conn_pool_give(s->pool, c, good && pq.status(c) == CONNECTION_OK);
}

/* Sends one statement and waits (bounded) for its result, draining the
 * rest. *res is NULL when the connection failed or the deadline passed
 * (err says which); the connection must then be dropped. */
static void run_sql(PGconn *c, const char *sql, int n, const char *const *vals, int64_t deadline,
                    PGresult **res, char *err, size_t errlen)
{
    *res = NULL;
    err[0] = '\0';
    if (!pq.sendQueryParams(c, sql, n, NULL, vals, NULL, NULL, 0)) {
        first_line(pq.errorMessage(c), err, errlen);
        return;
    }
    int f;
    while ((f = pq.flush(c)) == 1) {
        if (wait_socket(c, POLLOUT, deadline) <= 0) {
            snprintf(err, errlen, "timed out sending");
            return;
        }
    }
    if (f < 0) {
        first_line(pq.errorMessage(c), err, errlen);
        return;
    }
    PGresult *first = NULL;
    for (;;) {
        while (pq.isBusy(c)) {
            int w = wait_socket(c, POLLIN, deadline);
            if (w <= 0) {
                snprintf(err, errlen,
                         w == 0 ? "timed out waiting for the answer" : "the connection failed");
                if (first)
                    pq.clear(first);
                return;
            }
            if (!pq.consumeInput(c)) {
                first_line(pq.errorMessage(c), err, errlen);
                if (first)
                    pq.clear(first);
                return;
            }
        }
        PGresult *r = pq.getResult(c);
        if (!r)
            break;
        if (!first)
            first = r;
        else
            pq.clear(r);
    }
    if (!first)
        first_line(pq.errorMessage(c), err, errlen);
    *res = first;
}

static int sqlstate_outcome(const char *code)
{
    if (!code || strlen(code) != 5)
        return ST_TRANSIENT;
    if (strncmp(code, "08", 2) == 0 || strncmp(code, "53", 2) == 0 || strncmp(code, "40", 2) == 0 ||
        strncmp(code, "57", 2) == 0 || strcmp(code, "55P03") == 0 || strncmp(code, "58", 2) == 0 ||
        strcmp(code, "XX000") == 0)
        return ST_TRANSIENT;
    if (strncmp(code, "28", 2) == 0 || strcmp(code, "42501") == 0)
        return ST_AUTH;
    return ST_FATAL;
}

/* Runs one statement with a pooled connection; fills out on failure and
 * returns the result (caller clears) on success. */
static PGresult *query(pg_store *s, const char *what, const char *sql, int n,
                       const char *const *vals, int64_t timeout_ms, st_result *out)
{
    int64_t t = timeout_ms > 0 ? timeout_ms : s->default_timeout_ms;
    int64_t deadline = u_mono_ms() + t;
    PGconn *c = conn_take(s, deadline, out);
    if (!c)
        return NULL;
    PGresult *r;
    char err[300];
    run_sql(c, sql, n, vals, deadline, &r, err, sizeof err);
    if (!r) {
        conn_give(s, c, 0);
        st_result_setf(out, ST_TRANSIENT,
                       "%s on PostgreSQL %s failed (%s): the connection is dropped; whether a "
                       "write landed is unknown: will read back",
                       what, s->where, err);
        return NULL;
    }
    int rs = pq.resultStatus(r);
    if (rs == PGRES_COMMAND_OK || rs == PGRES_TUPLES_OK) {
        conn_give(s, c, 1);
        return r;
    }
    const char *code = pq.resultErrorField(r, PG_DIAG_SQLSTATE);
    char msg[300];
    first_line(pq.resultErrorField(r, PG_DIAG_MESSAGE_PRIMARY), msg, sizeof msg);
    int outcome = sqlstate_outcome(code);
    /* The connection is kept after a plain SQL error, dropped otherwise. */
    conn_give(s, c, outcome != ST_TRANSIENT || (code && strncmp(code, "40", 2) == 0));
    if (code && strcmp(code, "42P01") == 0)
        st_result_setf(out, ST_FATAL,
                       "table %s does not exist in PostgreSQL %s (SQLSTATE %s: %s): create it "
                       "with 's3lect init-store' and the same lock URL",
                       s->table_in, s->where, code, msg);
    else if (code && strcmp(code, "42703") == 0)
        st_result_setf(out, ST_FATAL,
                       "table %s in PostgreSQL %s lacks s3lect's columns (SQLSTATE %s: %s): use "
                       "a table made by 's3lect init-store' (name, record, version, updated_at)",
                       s->table_in, s->where, code, msg);
    else if (outcome == ST_AUTH)
        st_result_setf(out, outcome,
                       "PostgreSQL %s refused %s on table %s (SQLSTATE %s: %s): GRANT SELECT, "
                       "INSERT, UPDATE ON %s to the lock's user (docs/stores.md)",
                       s->where, what, s->table_in, code ? code : "?", msg, s->table_in);
    else
        st_result_setf(out, outcome, "%s on PostgreSQL %s failed (SQLSTATE %s: %s)%s", what,
                       s->where, code ? code : "?", msg,
                       outcome == ST_TRANSIENT ? "; will retry" : "");
    pq.clear(r);
    return NULL;
}

static void pg_get(st_store *st, const char *key, int64_t timeout_ms, st_result *out)
{
    pg_store *s = (pg_store *)st;
    memset(out, 0, sizeof *out);
    const char *vals[] = {key};
    PGresult *r = query(s, "SELECT", s->sql_get, 1, vals, timeout_ms, out);
    if (!r)
        return;
    if (pq.ntuples(r) == 0) {
        st_result_setf(out, ST_NOT_FOUND, "no row '%s' in table %s", key, s->table_in);
    } else if (pq.getisnull(r, 0, 0) || pq.getisnull(r, 0, 1) || !*pq.getvalue(r, 0, 1)) {
        /* No version to write over: no write could ever replace the row. */
        st_result_setf(out, ST_FATAL,
                       "row '%s' in %s has no record or version: it was not written by s3lect; "
                       "delete the row (DELETE FROM %s WHERE name = '...') or use another key",
                       key, s->table_in, s->table_in);
    } else if (st_result_set_body(out, pq.getvalue(r, 0, 0), (size_t)pq.getlength(r, 0, 0)) != 0 ||
               st_result_set_etag(out, pq.getvalue(r, 0, 1)) != 0) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
    } else {
        out->outcome = ST_OK;
        /* The age by the server's clock (ms; 0 when a value is missing). */
        int64_t now_ms = 0, mod_ms = 0;
        if (!pq.getisnull(r, 0, 2) && !pq.getisnull(r, 0, 3) &&
            parse_ms(pq.getvalue(r, 0, 2), &now_ms) == 0 &&
            parse_ms(pq.getvalue(r, 0, 3), &mod_ms) == 0 && now_ms > 0 && mod_ms > 0) {
            out->server_now_ms = now_ms;
            out->server_modified_ms = mod_ms;
            out->server_res_ms = 1;
        }
    }
    pq.clear(r);
}

static void pg_put(st_store *st, const char *key, const void *data, size_t len,
                   const char *if_match, int64_t timeout_ms, st_result *out)
{
    pg_store *s = (pg_store *)st;
    memset(out, 0, sizeof *out);
    char version[33];
    char *rec = malloc(len + 1);
    if (!rec || cr_random_token(version) != 0) {
        free(rec);
        st_result_setf(out, ST_TRANSIENT, "out of memory or no randomness");
        return;
    }
    memcpy(rec, data ? data : "", len);
    rec[len] = '\0';
    if (strlen(rec) != len) {
        free(rec);
        st_result_setf(out, ST_FATAL, "a record with a NUL byte cannot be stored in PostgreSQL");
        return;
    }
    const char *vals[] = {key, rec, version, if_match};
    PGresult *r = if_match ? query(s, "UPDATE", s->sql_update, 4, vals, timeout_ms, out)
                           : query(s, "INSERT", s->sql_insert, 3, vals, timeout_ms, out);
    free(rec);
    if (!r)
        return;
    const char *rows = pq.cmdTuples(r);
    if (rows && strcmp(rows, "1") == 0) {
        if (st_result_set_etag(out, version) != 0)
            st_result_setf(out, ST_TRANSIENT, "out of memory");
        else
            out->outcome = ST_OK;
    } else if (if_match) {
        st_result_setf(out, ST_PRECONDITION,
                       "row '%s' in %s changed since version %s (or is gone): another writer won",
                       key, s->table_in, if_match);
    } else {
        st_result_setf(out, ST_PRECONDITION, "row '%s' in %s already exists: another writer won",
                       key, s->table_in);
    }
    pq.clear(r);
}

static void pg_init(st_store *st, const char *key, int64_t timeout_ms, st_result *out)
{
    pg_store *s = (pg_store *)st;
    (void)key;
    memset(out, 0, sizeof *out);
    char *sql = u_asprintf("CREATE TABLE IF NOT EXISTS %s (name text PRIMARY KEY, record text NOT "
                           "NULL, version text NOT NULL, updated_at timestamptz NOT NULL "
                           "DEFAULT now())",
                           s->table);
    PGresult *r = sql ? query(s, "CREATE TABLE", sql, 0, NULL, timeout_ms, out) : NULL;
    free(sql);
    if (r) {
        pq.clear(r);
        /* Check the columns by reading a row that need not exist. */
        st_result g;
        pg_get(st, "s3lect-init-store-check", timeout_ms, &g);
        if (g.outcome == ST_OK || g.outcome == ST_NOT_FOUND) {
            out->outcome = ST_OK;
            out->message = u_asprintf("table %s is ready in PostgreSQL %s (created unless it "
                                      "was there)",
                                      s->table_in, s->where);
            st_result_clear(&g);
        } else {
            *out = g;
        }
    } else if (!out->message) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
    }
}

static void pg_destroy(st_store *st)
{
    pg_store *s = (pg_store *)st;
    if (!s)
        return;
    conn_pool_put(s->pool);
    free(s->table);
    free(s->table_in);
    free(s->where);
    free(s->origin);
    free(s->sql_get);
    free(s->sql_insert);
    free(s->sql_update);
    free(s->iam.host);
    free(s->iam.user);
    free(s->iam.region);
    free(s->iam.cfg.access_key_id);
    u_wipe_free(s->iam.cfg.secret_access_key);
    u_wipe_free(s->iam.cfg.session_token);
    free(s->iam.cfg.profile);
    free(s->iam.cfg.region);
    free(s->iam.cfg.ca_file);
    free(s);
}

/* Only for peer mode's default address: the store has no begin(), so the
 * runtime pools nothing by it. */
static const char *pg_route(const st_store *st)
{
    return ((const pg_store *)st)->origin;
}

static const st_vtable pg_vtable = {.name = "postgres",
                                    .get = pg_get,
                                    .put = pg_put,
                                    .destroy = pg_destroy,
                                    .pool = pg_route,
                                    .init = pg_init};

/* Checks the connection string with libpq and describes it: *where gets
 * "database D on H:P as U" from it and the PG* variables (never the
 * password); *origin gets "postgres://H:P" when the server is one TCP host
 * (peer mode advertises the address on the route to it), else NULL. With
 * iam (?auth=aws-iam) the host name, port and user the token is for go
 * into iam's fields: one TCP host and a user are then required.
 * Returns 0, S3LECT_EINVAL with err set, or S3LECT_ENOMEM. */
static int describe(const char *conninfo, char **where, char **origin, pg_store *iam, char *err,
                    size_t errlen)
{
    *where = *origin = NULL;
    char *perr = NULL;
    conninfo_option *opts = pq.conninfoParse(conninfo, &perr);
    if (!opts) {
        char line[300];
        first_line(perr, line, sizeof line);
        if (perr)
            pq.freemem(perr);
        snprintf(err, errlen, "lock URL: libpq cannot use the connection string (%s)", line);
        return S3LECT_EINVAL;
    }
    const char *db = NULL, *host = NULL, *port = NULL, *user = NULL, *hostaddr = NULL;
    for (conninfo_option *o = opts; o->keyword; o++) {
        const char *v = o->val ? o->val : o->envvar ? getenv(o->envvar) : NULL;
        if (!v || !*v)
            continue;
        if (strcmp(o->keyword, "dbname") == 0)
            db = v;
        else if (strcmp(o->keyword, "host") == 0)
            host = v;
        else if (strcmp(o->keyword, "hostaddr") == 0)
            hostaddr = v;
        else if (strcmp(o->keyword, "port") == 0)
            port = v;
        else if (strcmp(o->keyword, "user") == 0)
            user = v;
    }
    *where = u_asprintf("database '%.100s' on %.100s%s%.20s%s%.100s",
                        db     ? db
                        : user ? user
                               : "?",
                        host       ? host
                        : hostaddr ? hostaddr
                                   : "the local socket",
                        port ? ":" : "", port ? port : "", user ? " as " : "", user ? user : "");
    /* One TCP host (not a socket directory, not a list of hosts). */
    const char *h = hostaddr ? hostaddr : host;
    int tcp = h && h[0] != '/' && h[0] != '@' && !strchr(h, ',') && (!port || !strchr(port, ','));
    if (tcp)
        *origin = u_asprintf(strchr(h, ':') ? "postgres://[%s]:%s" : "postgres://%s:%s", h,
                             port ? port : "5432");
    int rc = 0;
    if (iam) {
        /* The token names the host as the client connects to it (host, not
         * hostaddr, when both are given). */
        const char *th = host ? host : hostaddr;
        char *end = NULL;
        long pn = port ? strtol(port, &end, 10) : 5432;
        if (!tcp || !th || strchr(th, ',') || (port && (*end || pn < 1 || pn > 65535))) {
            snprintf(err, errlen,
                     "lock URL: auth=aws-iam needs one database host name and port "
                     "(postgres://USER@HOST:PORT/DB), not a socket or a list of hosts");
            rc = S3LECT_EINVAL;
        } else if (!user) {
            snprintf(err, errlen,
                     "lock URL: auth=aws-iam needs the database user the token is for: write "
                     "postgres://USER@HOST:PORT/DB (or set PGUSER)");
            rc = S3LECT_EINVAL;
        } else if (!(iam->iam.host = u_strdup(th)) || !(iam->iam.user = u_strdup(user))) {
            rc = S3LECT_ENOMEM;
        }
        iam->iam.port = (int)pn;
    }
    pq.conninfoFree(opts);
    if (rc == 0 && (!*where || (tcp && !*origin)))
        rc = S3LECT_ENOMEM;
    if (rc == S3LECT_ENOMEM)
        snprintf(err, errlen, "out of memory");
    return rc;
}

/* The AWS settings of cfg that the IAM token's credential chain reads. */
static int iam_config(pg_store *s, const struct s3lect_config *cfg, const st_location *loc)
{
    struct s3lect_config *c = &s->iam.cfg;
    s->iam.on = 1;
    c->access_key_id = u_strdup(cfg->access_key_id);
    c->secret_access_key = u_strdup(cfg->secret_access_key);
    c->session_token = u_strdup(cfg->session_token);
    c->profile = u_strdup(cfg->profile);
    c->region = u_strdup(cfg->region);
    c->ca_file = u_strdup(cfg->ca_file);
    c->request_timeout = cfg->request_timeout;
    s->iam.region = u_strdup(loc->opt2);
    return (cfg->access_key_id && !c->access_key_id) ||
                   (cfg->secret_access_key && !c->secret_access_key) ||
                   (cfg->session_token && !c->session_token) || (cfg->profile && !c->profile) ||
                   (cfg->region && !c->region) || (cfg->ca_file && !c->ca_file) ||
                   (loc->opt2 && !s->iam.region)
               ? -1
               : 0;
}

int st_postgres_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                     char *err, size_t errlen)
{
    *out = NULL;
    pthread_once(&pq_once, pq_load);
    if (!pq.connectStart) {
        snprintf(err, errlen, "%s", pq_error);
        return S3LECT_EINVAL;
    }
    pg_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->base.vt = &pg_vtable;
    s->default_timeout_ms = cfg->request_timeout > 0 ? cfg->request_timeout : PG_DEFAULT_TIMEOUT_MS;
    int iam = loc->cred == ST_CRED_AWS;
    if (iam && iam_config(s, cfg, loc) != 0) {
        pg_destroy(&s->base);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    int rc = describe(loc->bucket, &s->where, &s->origin, iam ? s : NULL, err, errlen);
    if (rc) {
        pg_destroy(&s->base);
        return rc;
    }
    /* The table as written (st_location_parse's default: s3lect_locks), and
     * quoted for SQL: "name" or "schema"."name". */
    s->table_in = u_strdup(loc->opt1);
    const char *t = loc->opt1, *dot = strchr(t, '.');
    s->table =
        dot ? u_asprintf("\"%.*s\".\"%s\"", (int)(dot - t), t, dot + 1) : u_asprintf("\"%s\"", t);
    if (s->table) {
        s->sql_get = u_asprintf("SELECT record, version, floor(extract(epoch FROM now()) * "
                                "1000)::bigint, floor(extract(epoch FROM updated_at) * "
                                "1000)::bigint FROM %s WHERE name = $1",
                                s->table);
        s->sql_insert = u_asprintf("INSERT INTO %s (name, record, version, updated_at) VALUES "
                                   "($1, $2, $3, now()) ON CONFLICT (name) DO NOTHING",
                                   s->table);
        s->sql_update = u_asprintf("UPDATE %s SET record = $2, version = $3, updated_at = now() "
                                   "WHERE name = $1 AND version = $4",
                                   s->table);
    }
    s->pool = pool_get(loc->bucket, iam);
    if (!s->table_in || !s->table || !s->sql_get || !s->sql_insert || !s->sql_update || !s->pool) {
        pg_destroy(&s->base);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    *out = &s->base;
    return 0;
}

#define PG_USAGE                                                                                   \
    "postgres://[USER@HOST[:PORT]]/DB?key=NAME[&table=TABLE][&auth=aws-iam[&region=R]][&libpq "    \
    "parameters]"

/* A table name: identifier or schema.identifier, each [A-Za-z_][A-Za-z0-9_]*
 * of at most 63 bytes (it is quoted in SQL: case is kept). */
static int pg_table_ok(const char *t)
{
    const char *dot = strchr(t, '.');
    for (int part = 0; part < (dot ? 2 : 1); part++) {
        const char *p = part ? dot + 1 : t;
        size_t n = part || !dot ? strlen(p) : (size_t)(dot - t);
        if (n == 0 || n > 63 || (p[0] >= '0' && p[0] <= '9'))
            return 0;
        for (size_t i = 0; i < n; i++)
            if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
                  (p[i] >= '0' && p[i] <= '9') || p[i] == '_'))
                return 0;
    }
    return 1;
}

/* The value of libpq parameter name in query rest ("a=b&c=d"), or NULL. */
static const char *rest_param(const char *rest, const char *name, size_t *len)
{
    size_t n = strlen(name);
    for (const char *p = rest; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL)
        if (strncmp(p, name, n) == 0 && p[n] == '=') {
            *len = strcspn(p + n + 1, "&");
            return p + n + 1;
        }
    return NULL;
}

/* ?auth= and ?region=: auth=aws-iam marks the location's credentials as
 * the AWS chain's (loc->cred), which needs TLS and no password of its own. */
static int iam_parse(const char *url, const char *shown, const char *auth, st_location *out,
                     const char *rest, char *err, size_t errlen)
{
    if (!auth) {
        if (out->opt2) {
            snprintf(err, errlen, "lock URL '%.200s': region= goes with auth=aws-iam", shown);
            return S3LECT_EINVAL;
        }
        return 0;
    }
    if (strcmp(auth, "aws-iam") != 0) {
        snprintf(err, errlen,
                 "lock URL '%.200s': auth=%.40s is not known: the one value is aws-iam (IAM "
                 "database authentication on Amazon RDS and Aurora)",
                 shown, auth);
        return S3LECT_EINVAL;
    }
    out->cred = ST_CRED_AWS;
    if (out->opt2 && !cfg_region_valid(out->opt2)) {
        snprintf(err, errlen, "lock URL '%.200s': region '%.80s' is not a region name", shown,
                 out->opt2);
        return S3LECT_EINVAL;
    }
    size_t n = 0;
    const char *mode = rest_param(rest, "sslmode", &n);
    if (mode && ((n == 7 && strncmp(mode, "disable", 7) == 0) ||
                 (n == 5 && strncmp(mode, "allow", 5) == 0) ||
                 (n == 6 && strncmp(mode, "prefer", 6) == 0))) {
        snprintf(err, errlen,
                 "lock URL '%.200s': sslmode=%.*s with auth=aws-iam: RDS requires TLS for IAM "
                 "database authentication and the token must not travel in clear; leave sslmode "
                 "out (require) or use verify-full with sslrootcert",
                 shown, (int)n, mode);
        return S3LECT_EINVAL;
    }
    /* A password of the URL's own (user-info or password=) would be ignored. */
    const char *auth_part = strstr(url, "://");
    size_t host_len = auth_part ? strcspn(auth_part + 3, "/?") : 0;
    const char *at = auth_part ? memchr(auth_part + 3, '@', host_len) : NULL;
    if ((at && memchr(auth_part + 3, ':', (size_t)(at - auth_part - 3))) ||
        rest_param(rest, "password", &n)) {
        snprintf(err, errlen,
                 "lock URL '%.200s': auth=aws-iam takes no password (the IAM token is the "
                 "password): remove it",
                 shown);
        return S3LECT_EINVAL;
    }
    return 0;
}

int st_postgres_parse(const char *url, const char *after, st_location *out, char *err,
                      size_t errlen)
{
    (void)after; /* libpq parses the connection part: the whole URL */
    char *shown = st_lock_display(url);
    if (!shown) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    int rc = 0;
    char *rest = NULL, *auth = NULL;
    const char *q = strchr(url, '?');
    if (strchr(url, '#')) {
        snprintf(err, errlen, "lock URL '%.200s' has a fragment ('#'); write %s", shown, PG_USAGE);
        rc = S3LECT_EINVAL;
        goto done;
    }
    st_qparam ps[] = {
        {"key", &out->key}, {"table", &out->opt1}, {"auth", &auth}, {"region", &out->opt2}};
    if ((rc = st_parse_query(shown, PG_USAGE, q ? q + 1 : NULL, ps, 4, &rest, err, errlen)) != 0)
        goto done;
    if ((rc = iam_parse(url, shown, auth, out, rest, err, errlen)) != 0)
        goto done;
    if (!out->key) {
        snprintf(err, errlen,
                 "lock URL '%.200s' names no lock: add ?key=NAME (the lock's row; one table holds "
                 "many locks): %s",
                 shown, PG_USAGE);
        rc = S3LECT_EINVAL;
        goto done;
    }
    if ((rc = st_check_text(shown, "key", out->key, 1024, err, errlen)) != 0)
        goto done;
    if (!out->opt1 && !(out->opt1 = u_strdup("s3lect_locks"))) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
        goto done;
    }
    if (!pg_table_ok(out->opt1)) {
        snprintf(err, errlen,
                 "lock URL '%.200s': table '%.100s' must be NAME or SCHEMA.NAME, each a letter or "
                 "'_' then letters, digits or '_' (at most 63)",
                 shown, out->opt1);
        rc = S3LECT_EINVAL;
        goto done;
    }
    size_t base = q ? (size_t)(q - url) : strlen(url);
    out->bucket =
        rest ? u_asprintf("%.*s?%s", (int)base, url, rest) : u_asprintf("%.*s", (int)base, url);
    if (!out->bucket) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
        goto done;
    }
done:
    free(auth);
    free(rest);
    free(shown);
    return rc;
}

int st_postgres_canonical(const st_location *loc, char **out)
{
    /* The connection part (libpq's) as shown, scheme in lower case. */
    char *shown = st_lock_display(loc->bucket);
    const char *sep = shown ? strstr(shown, "://") : NULL;
    const char *q = shown ? strchr(shown, '?') : NULL;
    int rc = !sep || st_canon_add(out, "postgres", sep, 0) ||
             st_canon_add(out, q ? "&key=" : "?key=", loc->key, 1) ||
             st_canon_add(out, "&table=", loc->opt1, 1) ||
             (loc->cred == ST_CRED_AWS && st_canon_add(out, "&auth=", "aws-iam", 0)) ||
             (loc->opt2 && st_canon_add(out, "&region=", loc->opt2, 1));
    free(shown);
    return rc;
}
