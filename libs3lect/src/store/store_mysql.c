/* SPDX-License-Identifier: Apache-2.0 */
/* store_mysql.c - the MySQL and MariaDB store (docs/stores.md): one row per
 * lock in a table made by `s3lect init-store`,
 *
 *   name VARBINARY(1536) PRIMARY KEY, record MEDIUMTEXT utf8mb4,
 *   version VARCHAR(64) ascii, updated_at DATETIME(6)       (InnoDB)
 *
 *   read    SELECT record, version, <server now ms>, <updated_at ms> WHERE name = K
 *   create  INSERT ...                      (1 row: created; duplicate key: lost)
 *   write   UPDATE ... WHERE name = K AND version = V       (1 row: written)
 *
 * updated_at is stamped by the server (UTC_TIMESTAMP(6): NOW(6) in UTC) on
 * every write, and a read returns it with the server's UTC_TIMESTAMP(6), both
 * in ms: the record's age by the store's clock (docs/algorithm.md, "The
 * store's clock"). The client asks for found rows (CLIENT_FOUND_ROWS), so an
 * UPDATE's count is the rows it matched; the version is a fresh random token
 * on every write anyway, so a matched row is always a changed row.
 *
 * libmariadb (libmariadb.so.3, MariaDB Connector/C) is loaded at run time,
 * declared here (no mysql.h), so the library and its self-contained builds
 * need it only where a mysql:// lock is used. Its non-blocking API
 * (MYSQL_OPT_NONBLOCK, the _start and _cont calls) lets every call wait on the
 * socket with the call's own deadline, as the PostgreSQL store does with
 * libpq: the connection is dropped when the deadline passes. The server
 * bounds each statement too (max_statement_time on MariaDB,
 * max_execution_time for SELECTs on MySQL, innodb_lock_wait_timeout), set
 * once per connection. Connections come from a small pool per server, user,
 * database and settings, shared by every store object of the process; a
 * failed connection is dropped and made again by the next call. Values go
 * into SQL through mysql_real_escape_string on the connection (utf8mb4);
 * the table name is [A-Za-z0-9_] quoted with backticks.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn_pool.h"
#include "crypto.h"
#include "duration.h"
#include "rds_token.h"
#include "store.h"
#include "util.h"

#define MY_DEFAULT_TIMEOUT_MS 10000
#define MY_DEFAULT_PORT 3306
#define MY_DEFAULT_TABLE "s3lect_locks"
#define MY_USAGE                                                                                   \
    "mysql://USER[:PASSWORD]@HOST[:PORT]/DB?key=NAME[&table=T][&tls=MODE][&ca=FILE]"               \
    "[&timeout=DURATION][&password_env=VAR][&auth=aws-iam[&region=R]]"

/* ---- libmariadb, loaded at run time ---- */

typedef struct st_mysql MYSQL;
typedef struct st_mysql_res MYSQL_RES;
typedef char **MYSQL_ROW;

/* enum mysql_option (mysql.h of MariaDB Connector/C 3.x). */
enum {
    MY_OPT_CONNECT_TIMEOUT = 0,
    MY_SET_CHARSET_NAME = 7,
    MY_OPT_LOCAL_INFILE = 8,
    MY_OPT_PROTOCOL = 9,
    MY_OPT_READ_TIMEOUT = 11,
    MY_OPT_WRITE_TIMEOUT = 12,
    MY_OPT_SSL_VERIFY_SERVER_CERT = 21,
    MY_OPT_SSL_CA = 27,
    MY_ENABLE_CLEARTEXT_PLUGIN = 36,
    MY_OPT_SSL_ENFORCE = 38,
    MY_OPT_NONBLOCK = 6000,
};
enum { MY_PROTOCOL_TCP = 1 };
enum { MY_WAIT_READ = 1, MY_WAIT_WRITE = 2, MY_WAIT_EXCEPT = 4, MY_WAIT_TIMEOUT = 8 };
#define MY_CLIENT_FOUND_ROWS 2UL
/* The coroutine stack of the non-blocking API (TLS handshakes run on it). */
#define MY_ASYNC_STACK (256 * 1024)

static struct libmariadb {
    int (*library_init)(int, char **, char **);
    MYSQL *(*init)(MYSQL *);
    int (*options)(MYSQL *, int, const void *);
    int (*connect_start)(MYSQL **, MYSQL *, const char *, const char *, const char *, const char *,
                         unsigned int, const char *, unsigned long);
    int (*connect_cont)(MYSQL **, MYSQL *, int);
    int (*query_start)(int *, MYSQL *, const char *, unsigned long);
    int (*query_cont)(int *, MYSQL *, int);
    int (*store_start)(MYSQL_RES **, MYSQL *);
    int (*store_cont)(MYSQL_RES **, MYSQL *, int);
    MYSQL_ROW (*fetch_row)(MYSQL_RES *);
    unsigned long *(*fetch_lengths)(MYSQL_RES *);
    unsigned int (*num_fields)(MYSQL_RES *);
    void (*free_result)(MYSQL_RES *);
    unsigned long long (*affected_rows)(MYSQL *);
    unsigned int (*err_no)(MYSQL *);
    const char *(*error)(MYSQL *);
    unsigned long (*escape)(MYSQL *, char *, const char *, unsigned long);
    int (*get_socket)(MYSQL *);
    unsigned int (*timeout_ms)(const MYSQL *);
    void (*close)(MYSQL *);
    const char *(*server_info)(MYSQL *);
    const char *(*ssl_cipher)(MYSQL *);
} my;
static pthread_once_t my_once = PTHREAD_ONCE_INIT;
static char my_load_error[400];

static void my_load(void)
{
    void *h = dlopen("libmariadb.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(my_load_error, sizeof my_load_error,
                 "mysql:// locks need libmariadb (libmariadb.so.3, MariaDB Connector/C), which is "
                 "not installed: install it (Debian/Ubuntu: apt install libmariadb3; RHEL: dnf "
                 "install mariadb-connector-c) (%s)",
                 dlerror());
        return;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"mysql_server_init", (void **)&my.library_init},
        {"mysql_init", (void **)&my.init},
        {"mysql_options", (void **)&my.options},
        {"mysql_real_connect_start", (void **)&my.connect_start},
        {"mysql_real_connect_cont", (void **)&my.connect_cont},
        {"mysql_real_query_start", (void **)&my.query_start},
        {"mysql_real_query_cont", (void **)&my.query_cont},
        {"mysql_store_result_start", (void **)&my.store_start},
        {"mysql_store_result_cont", (void **)&my.store_cont},
        {"mysql_fetch_row", (void **)&my.fetch_row},
        {"mysql_fetch_lengths", (void **)&my.fetch_lengths},
        {"mysql_num_fields", (void **)&my.num_fields},
        {"mysql_free_result", (void **)&my.free_result},
        {"mysql_affected_rows", (void **)&my.affected_rows},
        {"mysql_errno", (void **)&my.err_no},
        {"mysql_error", (void **)&my.error},
        {"mysql_real_escape_string", (void **)&my.escape},
        {"mysql_get_socket", (void **)&my.get_socket},
        {"mysql_get_timeout_value_ms", (void **)&my.timeout_ms},
        {"mysql_close", (void **)&my.close},
        {"mysql_get_server_info", (void **)&my.server_info},
        {"mysql_get_ssl_cipher", (void **)&my.ssl_cipher},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        void *f = dlsym(h, syms[i].name);
        if (!f) {
            snprintf(my_load_error, sizeof my_load_error,
                     "libmariadb.so.3 lacks %s: install MariaDB Connector/C 3.x (libmariadb3)",
                     syms[i].name);
            memset(&my, 0, sizeof my);
            return;
        }
        memcpy(syms[i].slot, &f, sizeof f);
    }
    /* The library's one-time set-up (mysql_init would do it on first use,
     * racing between threads). It also ignores SIGPIPE for the whole
     * process: the process's disposition is put back, and the calls below
     * block SIGPIPE in their own thread instead (sigpipe_guard). */
    struct sigaction old;
    sigaction(SIGPIPE, NULL, &old);
    if (my.library_init(0, NULL, NULL) != 0) {
        snprintf(my_load_error, sizeof my_load_error, "libmariadb.so.3 could not initialise");
        memset(&my, 0, sizeof my);
    }
    sigaction(SIGPIPE, &old, NULL);
}

/* OpenSSL writes with write(2): a TLS write to a connection the server
 * closed would raise SIGPIPE. During a call SIGPIPE is blocked in this
 * thread, and one it raised is taken back before the mask is restored (one
 * that was pending already is left alone). */
typedef struct sigpipe_guard {
    int was_pending;
    sigset_t old;
} sigpipe_guard;

static void guard_on(sigpipe_guard *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigemptyset(&pending);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void guard_off(sigpipe_guard *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigemptyset(&pending);
    if (!g->was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
        struct timespec zero = {0, 0};
        sigtimedwait(&set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* ---- the lock URL's settings ---- */

enum { TLS_DISABLE, TLS_PREFERRED, TLS_REQUIRED, TLS_VERIFY_CA, TLS_VERIFY_FULL };
static const char *const TLS_NAMES[] = {"disable", "preferred", "required", "verify-ca",
                                        "verify-full"};

/* What st_mysql_parse keeps in st_location.opt3: the connection's settings
 * as a query string (values percent-encoded), read back by open. */
typedef struct my_settings {
    char *user, *tls, *ca, *timeout, *password_env, *auth, *region;
} my_settings;

static void settings_clear(my_settings *m)
{
    free(m->user);
    free(m->tls);
    free(m->ca);
    free(m->timeout);
    free(m->password_env);
    free(m->auth);
    free(m->region);
    memset(m, 0, sizeof *m);
}

static int settings_parse(const char *q, my_settings *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    st_qparam ps[] = {{"user", &m->user},
                      {"tls", &m->tls},
                      {"ca", &m->ca},
                      {"timeout", &m->timeout},
                      {"password_env", &m->password_env},
                      {"auth", &m->auth},
                      {"region", &m->region}};
    return st_parse_query("mysql settings", MY_USAGE, q, ps, sizeof ps / sizeof *ps, NULL, err,
                          errlen);
}

static int tls_mode(const char *t)
{
    for (int i = 0; i < (int)(sizeof TLS_NAMES / sizeof *TLS_NAMES); i++)
        if (t && strcmp(t, TLS_NAMES[i]) == 0)
            return i;
    return -1;
}

/* ---- the connection pool (conn_pool.h) ---- */

/* A pool's data: how to connect. */
typedef struct my_conf {
    char *id; /* the pool's key (the server, user, database, settings, password) */
    char *host, *user, *password, *db, *ca, *region;
    unsigned int port;
    int tls, iam;
    int64_t stmt_timeout_ms; /* the server-side bound of each statement */
} my_conf;

static void conf_free(void *v)
{
    my_conf *p = v;
    if (!p)
        return;
    if (p->id)
        u_wipe_free(p->id);
    u_wipe_free(p->password);
    free(p->host);
    free(p->user);
    free(p->db);
    free(p->ca);
    free(p->region);
    free(p);
}

/* Closes a connection at once: the socket is shut first, so the goodbye
 * mysql_close sends fails at once instead of waiting on a server that does
 * not answer (or an operation cut short at its deadline). */
static void conn_drop(MYSQL *c)
{
    int fd = my.get_socket(c);
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
    sigpipe_guard g;
    guard_on(&g);
    my.close(c);
    guard_off(&g);
}

static void conn_drop_v(void *c)
{
    conn_drop(c);
}

#define CONF(s) ((my_conf *)(s)->pool->data)

typedef struct my_store {
    st_store base;
    conn_pool *pool;
    const struct s3lect_config *cfg; /* the elector's, for IAM tokens */
    char *table;                     /* quoted: `name` */
    char *table_in;                  /* as written, for messages */
    char *where;                     /* for messages: "database 'd' on h:p as u" */
    char *origin;                    /* "mysql://host:port" (peer mode's route) */
    int64_t default_timeout_ms;
    int64_t url_timeout_ms; /* timeout= of the URL, 0: none */
} my_store;

/* Waits until the connection's socket is ready for what libmariadb asked
 * (st: MY_WAIT_*), its own timeout, or the deadline. Returns the ready
 * status for the _cont call, or -1 when the deadline passed. */
static int wait_events(MYSQL *c, int st, int64_t deadline)
{
    int fd = my.get_socket(c);
    int64_t lib_deadline = -1;
    if (st & MY_WAIT_TIMEOUT)
        lib_deadline = u_mono_ms() + (int64_t)my.timeout_ms(c);
    for (;;) {
        int64_t now = u_mono_ms();
        if (now >= deadline)
            return -1;
        if (lib_deadline >= 0 && now >= lib_deadline)
            return MY_WAIT_TIMEOUT;
        int64_t left = deadline - now;
        if (lib_deadline >= 0 && lib_deadline - now < left)
            left = lib_deadline - now;
        struct pollfd pfd = {fd, 0, 0};
        if (st & MY_WAIT_READ)
            pfd.events |= POLLIN;
        if (st & MY_WAIT_WRITE)
            pfd.events |= POLLOUT;
        if (st & MY_WAIT_EXCEPT)
            pfd.events |= POLLPRI;
        int n = poll(&pfd, fd >= 0 ? 1 : 0, (int)(left > 1000 ? 1000 : left));
        if (n > 0) {
            int r = 0;
            if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
                r |= st & MY_WAIT_READ;
            if (pfd.revents & (POLLOUT | POLLHUP | POLLERR))
                r |= st & MY_WAIT_WRITE;
            if (pfd.revents & POLLPRI)
                r |= st & MY_WAIT_EXCEPT;
            /* Whatever it waited for: the call itself finds the error. */
            return r ? r : (st & (MY_WAIT_READ | MY_WAIT_WRITE | MY_WAIT_EXCEPT));
        }
        if (n < 0 && errno != EINTR)
            return st & (MY_WAIT_READ | MY_WAIT_WRITE | MY_WAIT_EXCEPT);
    }
}

/* Runs one statement (bounded): 0 with *res (a stored result for a
 * statement that returns rows, else NULL) or -1 with the error in errno_out
 * and msg: the server's or the client's number (0: the deadline passed). */
static int run_sql(MYSQL *c, const char *sql, size_t len, int64_t deadline, MYSQL_RES **res,
                   unsigned *errno_out, char *msg, size_t msglen)
{
    *res = NULL;
    *errno_out = 0;
    msg[0] = '\0';
    int ret = 0;
    sigpipe_guard g;
    guard_on(&g);
    int st = my.query_start(&ret, c, sql, (unsigned long)len);
    while (st) {
        int ready = wait_events(c, st, deadline);
        if (ready < 0)
            break;
        st = my.query_cont(&ret, c, ready);
    }
    if (st == 0 && ret == 0) {
        MYSQL_RES *r = NULL;
        st = my.store_start(&r, c);
        while (st) {
            int ready = wait_events(c, st, deadline);
            if (ready < 0)
                break;
            st = my.store_cont(&r, c, ready);
        }
        if (st == 0 && (r || my.err_no(c) == 0)) {
            guard_off(&g);
            *res = r;
            return 0;
        }
        if (r)
            my.free_result(r);
    }
    guard_off(&g);
    if (st != 0) {
        snprintf(msg, msglen, "timed out waiting for the server");
        return -1;
    }
    *errno_out = my.err_no(c);
    snprintf(msg, msglen, "%s", my.error(c));
    msg[strcspn(msg, "\n")] = '\0';
    if (*errno_out == 0)
        *errno_out = 2000; /* CR_UNKNOWN_ERROR */
    return -1;
}

/* Server errors (ER_*) and client errors (CR_*, 2000-2999) by what they mean. */
enum { E_OTHER, E_AUTH, E_NO_DB, E_NO_TABLE, E_COLUMNS, E_READ_ONLY, E_RETRY, E_GONE, E_TLS };

static int err_kind(unsigned e)
{
    switch (e) {
    case 1044: /* ER_DBACCESS_DENIED_ERROR */
    case 1045: /* ER_ACCESS_DENIED_ERROR */
    case 1130: /* ER_HOST_NOT_PRIVILEGED */
    case 1142: /* ER_TABLEACCESS_DENIED_ERROR */
    case 1143: /* ER_COLUMNACCESS_DENIED_ERROR */
    case 1227: /* ER_SPECIFIC_ACCESS_DENIED_ERROR */
    case 1251: /* ER_NOT_SUPPORTED_AUTH_MODE */
    case 1698: /* ER_ACCESS_DENIED_NO_PASSWORD_ERROR */
    case 1820: /* ER_MUST_CHANGE_PASSWORD */
    case 1862: /* ER_MUST_CHANGE_PASSWORD_LOGIN */
    case 2061: /* CR_AUTH_PLUGIN_ERR (e.g. caching_sha2_password without TLS) */
        return E_AUTH;
    case 1049: /* ER_BAD_DB_ERROR */
        return E_NO_DB;
    case 1146: /* ER_NO_SUCH_TABLE */
        return E_NO_TABLE;
    case 1054: /* ER_BAD_FIELD_ERROR */
        return E_COLUMNS;
    case 1290: /* ER_OPTION_PREVENTS_STATEMENT (--read-only, super_read_only) */
    case 1792: /* ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION */
    case 1836: /* ER_READ_ONLY_MODE */
        return E_READ_ONLY;
    case 1205: /* ER_LOCK_WAIT_TIMEOUT */
    case 1213: /* ER_LOCK_DEADLOCK */
    case 1317: /* ER_QUERY_INTERRUPTED */
    case 1969: /* ER_STATEMENT_TIMEOUT (MariaDB max_statement_time) */
    case 3024: /* ER_QUERY_TIMEOUT (MySQL max_execution_time) */
        return E_RETRY;
    case 1040: /* ER_CON_COUNT_ERROR */
    case 1053: /* ER_SERVER_SHUTDOWN */
    case 1129: /* ER_HOST_IS_BLOCKED */
    case 1203: /* ER_TOO_MANY_USER_CONNECTIONS */
    case 1927: /* ER_CONNECTION_KILLED (MariaDB) */
    case 4031: /* ER_CLIENT_INTERACTION_TIMEOUT (MySQL) */
        return E_GONE;
    case 2026: /* CR_SSL_CONNECTION_ERROR */
        return E_TLS;
    default:
        return e >= 1152 && e <= 1161  ? E_GONE /* ER_ABORTING_CONNECTION, ER_NET_* */
               : e >= 2000 && e < 3000 ? E_GONE
                                       : E_OTHER;
    }
}

/* The password for a new connection: the pool's, or an IAM token. 0, or an
 * outcome with why set. *pw is allocated (wipe it) or NULL. */
static int conn_password(my_store *s, char **pw, char *why, size_t whylen)
{
    const my_conf *p = CONF(s);
    *pw = NULL;
    if (!p->iam) {
        if (p->password && !(*pw = u_strdup(p->password))) {
            snprintf(why, whylen, "out of memory");
            return ST_TRANSIENT;
        }
        return 0;
    }
    char err[400] = "";
    int rc = rds_token_get(s->cfg, p->host, (int)p->port, p->user, p->region, pw, err, sizeof err);
    if (rc == 0)
        return 0;
    snprintf(why, whylen, "no IAM authentication token: %s", err[0] ? err : "unknown error");
    return rc == S3LECT_EAUTH ? ST_AUTH : rc == S3LECT_ETRANSIENT ? ST_TRANSIENT : ST_FATAL;
}

/* Makes a connection (bounded by deadline). NULL with out set. */
static MYSQL *conn_make(my_store *s, int64_t deadline, st_result *out)
{
    const my_conf *p = CONF(s);
    char why[400] = "";
    int outcome = ST_TRANSIENT;
    unsigned e = 0;
    char *pw = NULL;
    MYSQL *c = NULL;
    if ((outcome = conn_password(s, &pw, why, sizeof why)) != 0)
        goto fail;
    outcome = ST_TRANSIENT;
    if (!(c = my.init(NULL))) {
        snprintf(why, sizeof why, "out of memory");
        goto fail;
    }
    /* The library's own timeouts (whole seconds) back the deadline up. */
    int64_t left = deadline - u_mono_ms();
    unsigned int secs = (unsigned int)((left > 0 ? left : 1) + 999) / 1000;
    unsigned int stmt_secs = (unsigned int)(p->stmt_timeout_ms + 999) / 1000 + 1;
    unsigned int zero = 0, tcp = MY_PROTOCOL_TCP;
    size_t stack = MY_ASYNC_STACK;
    char on = 1, off = 0;
    int bad = my.options(c, MY_OPT_NONBLOCK, &stack) ||
              my.options(c, MY_OPT_CONNECT_TIMEOUT, &secs) ||
              my.options(c, MY_OPT_READ_TIMEOUT, &stmt_secs) ||
              my.options(c, MY_OPT_WRITE_TIMEOUT, &stmt_secs) ||
              my.options(c, MY_OPT_LOCAL_INFILE, &zero) || my.options(c, MY_OPT_PROTOCOL, &tcp) ||
              my.options(c, MY_SET_CHARSET_NAME, "utf8mb4") ||
              my.options(c, MY_OPT_SSL_ENFORCE, p->tls == TLS_DISABLE ? &off : &on) ||
              my.options(c, MY_OPT_SSL_VERIFY_SERVER_CERT, p->tls == TLS_VERIFY_FULL ? &on : &off);
    if (!bad && p->ca && p->tls != TLS_DISABLE)
        bad = my.options(c, MY_OPT_SSL_CA, p->ca);
    if (!bad && p->iam)
        bad = my.options(c, MY_ENABLE_CLEARTEXT_PLUGIN, &on);
    if (bad) {
        snprintf(why, sizeof why, "libmariadb refused an option (%s)", my.error(c));
        outcome = ST_FATAL;
        goto fail;
    }
    MYSQL *ret = NULL;
    sigpipe_guard g;
    guard_on(&g);
    int st =
        my.connect_start(&ret, c, p->host, p->user, pw, p->db, p->port, NULL, MY_CLIENT_FOUND_ROWS);
    while (st) {
        int ready = wait_events(c, st, deadline);
        if (ready < 0)
            break;
        st = my.connect_cont(&ret, c, ready);
    }
    guard_off(&g);
    u_wipe_free(pw);
    pw = NULL;
    if (st != 0) {
        snprintf(why, sizeof why, "timed out");
        goto fail;
    }
    if (!ret) {
        e = my.err_no(c);
        snprintf(why, sizeof why, "%s", my.error(c));
        why[strcspn(why, "\n")] = '\0';
        int k = err_kind(e);
        outcome = k == E_AUTH ? ST_AUTH : (k == E_NO_DB || k == E_TLS) ? ST_FATAL : ST_TRANSIENT;
        goto fail;
    }
    if (p->tls >= TLS_REQUIRED && !my.ssl_cipher(c)) {
        snprintf(why, sizeof why,
                 "the server did not start TLS, which tls=%s requires (have_ssl off on the "
                 "server?)",
                 TLS_NAMES[p->tls]);
        outcome = ST_FATAL;
        goto fail;
    }
    /* The session: strict (a value that does not fit is an error, never cut
     * short), and each statement bounded by the server too. */
    const char *info = my.server_info(c);
    int mariadb = info && strstr(info, "MariaDB") != NULL;
    long long lock_wait = (p->stmt_timeout_ms + 999) / 1000;
    char set[300];
    int n = mariadb ? snprintf(set, sizeof set,
                               "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', "
                               "innodb_lock_wait_timeout = %lld, max_statement_time = %lld.%03lld",
                               lock_wait, (long long)p->stmt_timeout_ms / 1000,
                               (long long)p->stmt_timeout_ms % 1000)
                    : snprintf(set, sizeof set,
                               "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', "
                               "innodb_lock_wait_timeout = %lld, max_execution_time = %lld",
                               lock_wait, (long long)p->stmt_timeout_ms);
    MYSQL_RES *r = NULL;
    char msg[300];
    if (run_sql(c, set, (size_t)n, deadline, &r, &e, msg, sizeof msg) == 0) {
        if (r)
            my.free_result(r);
        return c;
    }
    snprintf(why, sizeof why, "setting up the session: %s", msg);
    outcome = err_kind(e) == E_AUTH ? ST_AUTH : ST_TRANSIENT;
fail:
    u_wipe_free(pw);
    if (c)
        conn_drop(c);
    conn_pool_unreserve(s->pool);
    if (outcome == ST_AUTH && p->iam)
        st_result_setf(out, outcome,
                       "MySQL %s refused the IAM login (%s): the AWS credentials' policy must "
                       "allow rds-db:connect on this user, and the user must be IDENTIFIED WITH "
                       "AWSAuthenticationPlugin (docs/stores.md)",
                       s->where, why);
    else if (outcome == ST_AUTH)
        st_result_setf(out, outcome,
                       "MySQL %s refused the login (%s): fix the user or password (the lock URL, "
                       "password_env=, MYSQL_PWD or ~/.my.cnf) or the user's grants",
                       s->where, why);
    else if (outcome == ST_FATAL)
        st_result_setf(out, outcome, "cannot use MySQL %s (%s): fix the lock URL or the server",
                       s->where, why);
    else
        st_result_setf(out, outcome, "cannot connect to MySQL %s (%s); will retry", s->where, why);
    return NULL;
}

/* Takes a connection from the pool or makes one. NULL with out set. */
static MYSQL *conn_take(my_store *s, int64_t deadline, st_result *out)
{
    int make;
    MYSQL *idle = conn_pool_take(s->pool, deadline, &make);
    if (idle || make)
        return idle ? idle : conn_make(s, deadline, out);
    st_result_setf(out, ST_TRANSIENT,
                   "no free connection to MySQL %s within the request timeout (%d in use by this "
                   "process); will retry",
                   s->where, CONN_POOL_MAX);
    return NULL;
}

/* Returns a connection: to the pool when it is still good, else closed. */
static void conn_give(my_store *s, MYSQL *c, int good)
{
    conn_pool_give(s->pool, c, good);
}

static int64_t call_deadline(const my_store *s, int64_t timeout_ms)
{
    int64_t t = timeout_ms > 0 ? timeout_ms : s->default_timeout_ms;
    if (s->url_timeout_ms > 0 && s->url_timeout_ms < t)
        t = s->url_timeout_ms;
    return u_mono_ms() + t;
}

/* v[0..n) escaped for a '...' literal on connection c (its character set
 * and SQL mode), allocated. */
static char *esc(MYSQL *c, const char *v, size_t n)
{
    char *o = malloc(2 * n + 1);
    if (o)
        my.escape(c, o, v, (unsigned long)n);
    return o;
}

/* Runs sql on connection c (taken by the caller, given back here). 0 with
 * *res and *rows; otherwise out is filled and the number of the error, if
 * the server answered with one, is in *e. what names the statement. */
static int query(my_store *s, MYSQL *c, const char *what, const char *sql, int64_t deadline,
                 MYSQL_RES **res, unsigned long long *rows, unsigned *e, st_result *out)
{
    char msg[300];
    *res = NULL;
    if (run_sql(c, sql, strlen(sql), deadline, res, e, msg, sizeof msg) == 0) {
        if (rows)
            *rows = my.affected_rows(c);
        conn_give(s, c, 1);
        return 0;
    }
    int k = *e ? err_kind(*e) : E_GONE;
    /* A statement the server refused leaves the connection good; a lost,
     * cut-short or read-only one is dropped (a failover may move the name). */
    conn_give(s, c, *e && k != E_GONE && k != E_READ_ONLY && k != E_TLS);
    if (!*e || k == E_GONE)
        st_result_setf(out, ST_TRANSIENT,
                       "%s on MySQL %s failed (%s%s%u): the connection is dropped; whether a "
                       "write landed is unknown: will read back",
                       what, s->where, msg, *e ? "; error " : "", *e);
    else if (k == E_NO_TABLE)
        st_result_setf(out, ST_FATAL,
                       "table %s does not exist in MySQL %s (error %u: %s): create it with "
                       "'s3lect init-store' and the same lock URL",
                       s->table_in, s->where, *e, msg);
    else if (k == E_COLUMNS)
        st_result_setf(out, ST_FATAL,
                       "table %s in MySQL %s lacks s3lect's columns (error %u: %s): use a table "
                       "made by 's3lect init-store' (name, record, version, updated_at)",
                       s->table_in, s->where, *e, msg);
    else if (k == E_READ_ONLY)
        st_result_setf(out, ST_FATAL,
                       "MySQL %s is read-only (error %u: %s): it is a replica or read_only is "
                       "set; point the lock URL at the primary",
                       s->where, *e, msg);
    else if (k == E_AUTH)
        st_result_setf(out, ST_AUTH,
                       "MySQL %s refused %s on table %s (error %u: %s): GRANT SELECT, INSERT, "
                       "UPDATE ON %s to the lock's user (docs/stores.md)",
                       s->where, what, s->table_in, *e, msg, s->table_in);
    else if (k == E_RETRY)
        st_result_setf(out, ST_TRANSIENT, "%s on MySQL %s failed (error %u: %s); will retry", what,
                       s->where, *e, msg);
    else
        st_result_setf(out, ST_FATAL, "%s on MySQL %s failed (error %u: %s)", what, s->where, *e,
                       msg);
    return -1;
}

/* Whole ms since the epoch of a DATETIME(6) in UTC (an exact integer). */
#define MS_OF(x) "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " x ") DIV 1000"

static int parse_ms(const char *v, int64_t *out)
{
    if (!v)
        return -1;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return -1;
    *out = (int64_t)x;
    return 0;
}

static void my_get(st_store *st, const char *key, int64_t timeout_ms, st_result *out)
{
    my_store *s = (my_store *)st;
    memset(out, 0, sizeof *out);
    int64_t deadline = call_deadline(s, timeout_ms);
    MYSQL *c = conn_take(s, deadline, out);
    if (!c)
        return;
    char *k = esc(c, key, strlen(key));
    char *sql = k ? u_asprintf("SELECT record, version, " MS_OF("UTC_TIMESTAMP(6)") ", " MS_OF(
                                   "updated_at") " FROM %s WHERE name = '%s'",
                               s->table, k)
                  : NULL;
    free(k);
    if (!sql) {
        conn_give(s, c, 1);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return;
    }
    MYSQL_RES *r = NULL;
    unsigned e = 0;
    int rc = query(s, c, "SELECT", sql, deadline, &r, NULL, &e, out);
    free(sql);
    if (rc)
        return;
    MYSQL_ROW row = r && my.num_fields(r) == 4 ? my.fetch_row(r) : NULL;
    unsigned long *len = row ? my.fetch_lengths(r) : NULL;
    if (!r || my.num_fields(r) != 4) {
        st_result_setf(out, ST_FATAL, "SELECT on MySQL %s returned no rows and columns", s->where);
    } else if (!row || !len) {
        st_result_setf(out, ST_NOT_FOUND, "no row '%s' in table %s", key, s->table_in);
    } else if (!row[0] || !row[1] || !row[1][0]) {
        /* No version to write over: no write could ever replace the row. */
        st_result_setf(out, ST_FATAL,
                       "row '%s' in %s has no record or version: it was not written by s3lect; "
                       "delete the row (DELETE FROM %s WHERE name = '...') or use another key",
                       key, s->table_in, s->table_in);
    } else if (st_result_set_body(out, row[0], len[0]) != 0 ||
               st_result_set_etag(out, row[1]) != 0) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
    } else {
        out->outcome = ST_OK;
        /* The age by the server's clock (ms; none when a value is missing). */
        int64_t now_ms = 0, mod_ms = 0;
        if (parse_ms(row[2], &now_ms) == 0 && parse_ms(row[3], &mod_ms) == 0 && now_ms > 0 &&
            mod_ms > 0) {
            out->server_now_ms = now_ms;
            out->server_modified_ms = mod_ms;
            out->server_res_ms = 1;
        }
    }
    if (r)
        my.free_result(r);
}

static void my_put(st_store *st, const char *key, const void *data, size_t len,
                   const char *if_match, int64_t timeout_ms, st_result *out)
{
    my_store *s = (my_store *)st;
    memset(out, 0, sizeof *out);
    char version[33];
    if (cr_random_token(version) != 0) {
        st_result_setf(out, ST_TRANSIENT, "no randomness");
        return;
    }
    if (data && memchr(data, '\0', len)) {
        st_result_setf(out, ST_FATAL, "a record with a NUL byte cannot be stored in MySQL");
        return;
    }
    int64_t deadline = call_deadline(s, timeout_ms);
    MYSQL *c = conn_take(s, deadline, out);
    if (!c)
        return;
    char *k = esc(c, key, strlen(key));
    char *rec = esc(c, data ? data : "", len);
    char *m = if_match ? esc(c, if_match, strlen(if_match)) : NULL;
    char *sql = NULL;
    if (k && rec && (m || !if_match))
        sql = if_match ? u_asprintf("UPDATE %s SET record = '%s', version = '%s', updated_at = "
                                    "UTC_TIMESTAMP(6) WHERE name = '%s' AND version = '%s'",
                                    s->table, rec, version, k, m)
                       : u_asprintf("INSERT INTO %s (name, record, version, updated_at) VALUES "
                                    "('%s', '%s', '%s', UTC_TIMESTAMP(6))",
                                    s->table, k, rec, version);
    free(k);
    free(rec);
    free(m);
    if (!sql) {
        conn_give(s, c, 1);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return;
    }
    MYSQL_RES *r = NULL;
    unsigned long long rows = 0;
    unsigned e = 0;
    st_result fail;
    memset(&fail, 0, sizeof fail);
    int rc = query(s, c, if_match ? "UPDATE" : "INSERT", sql, deadline, &r, &rows, &e, &fail);
    free(sql);
    if (r)
        my.free_result(r);
    if (rc && e == 1062 /* ER_DUP_ENTRY */ && !if_match) {
        st_result_clear(&fail);
        st_result_setf(out, ST_PRECONDITION, "row '%s' in %s already exists: another writer won",
                       key, s->table_in);
    } else if (rc) {
        *out = fail;
    } else if (rows == 1) {
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
}

static void my_init(st_store *st, const char *key, int64_t timeout_ms, st_result *out)
{
    my_store *s = (my_store *)st;
    (void)key;
    memset(out, 0, sizeof *out);
    char *sql = u_asprintf(
        "CREATE TABLE IF NOT EXISTS %s (name VARBINARY(1536) NOT NULL PRIMARY KEY, record "
        "MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, version VARCHAR(64) "
        "CHARACTER SET ascii COLLATE ascii_bin NOT NULL, updated_at DATETIME(6) NOT NULL) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin ROW_FORMAT=DYNAMIC",
        s->table);
    if (!sql) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return;
    }
    int64_t deadline = call_deadline(s, timeout_ms);
    MYSQL *c = conn_take(s, deadline, out);
    if (!c) {
        free(sql);
        return;
    }
    MYSQL_RES *r = NULL;
    unsigned e = 0;
    int rc = query(s, c, "CREATE TABLE", sql, deadline, &r, NULL, &e, out);
    free(sql);
    if (r)
        my.free_result(r);
    if (rc) {
        if (e && err_kind(e) == E_AUTH) {
            st_result_clear(out);
            st_result_setf(out, ST_AUTH,
                           "MySQL %s refused CREATE TABLE %s (error %u): GRANT CREATE ON the "
                           "database to whoever runs init-store (docs/stores.md)",
                           s->where, s->table_in, e);
        }
        return;
    }
    /* Check the columns by reading a row that need not exist. */
    st_result g;
    my_get(st, "s3lect-init-store-check", timeout_ms, &g);
    if (g.outcome == ST_OK || g.outcome == ST_NOT_FOUND) {
        out->outcome = ST_OK;
        out->message = u_asprintf("table %s is ready in MySQL %s (created unless it was there)",
                                  s->table_in, s->where);
        st_result_clear(&g);
    } else {
        *out = g;
    }
}

static void my_destroy(st_store *st)
{
    my_store *s = (my_store *)st;
    if (!s)
        return;
    conn_pool_put(s->pool);
    free(s->table);
    free(s->table_in);
    free(s->where);
    free(s->origin);
    free(s);
}

/* Only for peer mode's default address: the store has no begin(). */
static const char *my_route(const st_store *st)
{
    return ((const my_store *)st)->origin;
}

static const st_vtable my_vtable = {.name = "mysql",
                                    .get = my_get,
                                    .put = my_put,
                                    .destroy = my_destroy,
                                    .pool = my_route,
                                    .init = my_init};

/* The [client] group's password in an option file as MySQL's clients read
 * it (quotes and the escapes \b \t \n \r \s \\ \' \" in values; '#' and ';'
 * comment lines; a world-writable file is ignored, as mysql does).
 * Allocated, or NULL. */
static char *option_file_password(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || (sb.st_mode & S_IWOTH))
        return NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char line[1024], *found = NULL;
    int in_client = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = line, *e = line + strlen(line);
        while (e > p && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#' || *p == ';')
            continue;
        if (*p == '[') {
            char *close = strchr(p, ']');
            size_t n = close ? (size_t)(close - p - 1) : 0;
            while (n > 0 && (p[n] == ' ' || p[n] == '\t'))
                n--;
            char *g = p + 1;
            while (n > 0 && (*g == ' ' || *g == '\t'))
                g++, n--;
            in_client = n == 6 && strncasecmp(g, "client", 6) == 0;
            continue;
        }
        if (!in_client)
            continue;
        size_t nl = strcspn(p, "= \t");
        if (nl != 8 || strncmp(p, "password", 8) != 0)
            continue;
        char *v = p + nl;
        while (*v == ' ' || *v == '\t')
            v++;
        if (*v != '=')
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        char quote = (*v == '\'' || *v == '"') ? *v++ : 0;
        char *o = v, *w = v;
        for (; *o; o++) {
            if (quote && *o == quote)
                break;
            if (!quote && *o == '#')
                break;
            if (*o == '\\' && o[1]) {
                o++;
                *w++ = *o == 'b'   ? '\b'
                       : *o == 't' ? '\t'
                       : *o == 'n' ? '\n'
                       : *o == 'r' ? '\r'
                       : *o == 's' ? ' '
                                   : *o;
                continue;
            }
            *w++ = *o;
        }
        while (!quote && w > v && (w[-1] == ' ' || w[-1] == '\t'))
            w--;
        *w = '\0';
        if (found)
            u_wipe_free(found);
        found = u_strdup(v); /* the last one counts, as in mysql */
    }
    u_wipe(line, sizeof line);
    fclose(f);
    return found;
}

/* The password: the URL's, else the variable password_env= names, else
 * MYSQL_PWD, else ~/.my.cnf's [client] password; NULL when none. 0, or
 * S3LECT_EINVAL (a named variable is unset) or S3LECT_ENOMEM. */
static int find_password(const st_location *loc, const my_settings *m, char **pw, char *err,
                         size_t errlen)
{
    *pw = NULL;
    const char *v = loc->opt2;
    if (!v && m->password_env) {
        v = getenv(m->password_env);
        if (!v || !*v) {
            snprintf(err, errlen,
                     "lock URL: password_env=%s names a variable that is not set (or empty): "
                     "export %s with the password",
                     m->password_env, m->password_env);
            return S3LECT_EINVAL;
        }
    }
    if (!v) {
        v = getenv("MYSQL_PWD");
        if (v && !*v)
            v = NULL;
    }
    if (v) {
        if (!(*pw = u_strdup(v))) {
            snprintf(err, errlen, "out of memory");
            return S3LECT_ENOMEM;
        }
        return 0;
    }
    char *home = u_home_dir();
    char *path = home ? u_asprintf("%s/.my.cnf", home) : NULL;
    free(home);
    if (path)
        *pw = option_file_password(path);
    free(path);
    return 0;
}

int st_mysql_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                  char *err, size_t errlen)
{
    *out = NULL;
    pthread_once(&my_once, my_load);
    if (!my.init) {
        snprintf(err, errlen, "%s", my_load_error);
        return S3LECT_EINVAL;
    }
    my_settings m;
    int rc = settings_parse(loc->opt3, &m, err, errlen);
    if (rc) {
        settings_clear(&m);
        return rc;
    }
    my_store *s = calloc(1, sizeof *s);
    my_conf *p = calloc(1, sizeof *p);
    if (!s || !p) {
        free(s);
        free(p);
        settings_clear(&m);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->base.vt = &my_vtable;
    s->cfg = cfg;
    if (m.timeout)
        cfg_parse_duration(m.timeout, &s->url_timeout_ms);
    s->default_timeout_ms = s->url_timeout_ms > 0      ? s->url_timeout_ms
                            : cfg->request_timeout > 0 ? cfg->request_timeout
                                                       : MY_DEFAULT_TIMEOUT_MS;
    /* bucket: HOST:PORT/DB (HOST may be [V6]). */
    const char *b = loc->bucket, *slash = strchr(b, '/');
    const char *colon = slash ? slash : b;
    while (colon > b && *colon != ':')
        colon--;
    int v6 = b[0] == '[';
    p->host = v6 ? u_asprintf("%.*s", (int)(colon - b - 2), b + 1)
                 : u_asprintf("%.*s", (int)(colon - b), b);
    p->port = (unsigned int)strtoul(colon + 1, NULL, 10);
    p->db = slash ? u_strdup(slash + 1) : NULL;
    p->user = m.user ? u_strdup(m.user) : NULL;
    p->ca = m.ca ? u_strdup(m.ca) : NULL;
    p->region = m.region ? u_strdup(m.region) : NULL;
    p->iam = m.auth != NULL;
    p->tls = tls_mode(m.tls);
    p->stmt_timeout_ms = s->default_timeout_ms;
    if (!p->iam && (rc = find_password(loc, &m, &p->password, err, errlen)) != 0)
        goto fail;
    if (p->ca && access(p->ca, R_OK) != 0) {
        snprintf(err, errlen,
                 "lock URL: ca=%.200s cannot be read (%s): give the CA certificate "
                 "file (PEM) that signed the server's certificate",
                 p->ca, strerror(errno));
        rc = S3LECT_EINVAL;
        goto fail;
    }
    int hp = (int)(slash ? slash - b : (long)strlen(b)); /* HOST:PORT */
    s->where = u_asprintf("database '%.100s' on %.*s as %.100s", p->db ? p->db : "", hp, b,
                          p->user ? p->user : "");
    s->origin = u_asprintf("mysql://%.*s", hp, b);
    s->table_in = u_strdup(loc->opt1);
    s->table = u_asprintf("`%s`", loc->opt1);
    p->id = u_asprintf("%s\n%s\n%s\n%s\n%s\n%s\n%lld\n%d\n%s", loc->bucket, p->user ? p->user : "",
                       TLS_NAMES[p->tls < 0 ? 0 : p->tls], p->ca ? p->ca : "",
                       p->iam ? "aws-iam" : "", p->region ? p->region : "",
                       (long long)p->stmt_timeout_ms, p->iam, p->password ? p->password : "");
    if (!p->host || !p->db || (m.user && !p->user) || (m.ca && !p->ca) ||
        (m.region && !p->region) || !s->where || !s->origin || !s->table_in || !s->table ||
        !p->id) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
        goto fail;
    }
    if (p->tls < 0 || p->port == 0) {
        snprintf(err, errlen, "lock URL: bad settings (parse it again)");
        rc = S3LECT_EINVAL;
        goto fail;
    }
    settings_clear(&m);
    /* p is the new pool's data, or freed when a pool for its id exists */
    if (!(s->pool = conn_pool_get(p->id, p, conf_free, conn_drop_v))) {
        my_destroy(&s->base);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    *out = &s->base;
    return 0;
fail:
    settings_clear(&m);
    conf_free(p);
    my_destroy(&s->base);
    return rc;
}

/* ---- the lock URL (always compiled: a mysql:// lock parses everywhere) ---- */

static int my_oom(char *err, size_t errlen)
{
    snprintf(err, errlen, "out of memory");
    return S3LECT_ENOMEM;
}

/* Appends "&name=value" (value percent-encoded where it would make the query
 * ambiguous) to *q. Nonzero when out of memory. */
static int q_add(char **q, const char *name, const char *v)
{
    if (!v)
        return 0;
    char prefix[40];
    snprintf(prefix, sizeof prefix, "%s%s=", **q ? "&" : "", name);
    return st_canon_add(q, prefix, v, 1);
}

int st_mysql_parse(const char *url, const char *rest, st_location *out, char *err, size_t errlen)
{
    char *shown = st_lock_display(url);
    if (!shown)
        return my_oom(err, errlen);
    int rc = S3LECT_EINVAL, bad = 0;
    my_settings m;
    memset(&m, 0, sizeof m);
    char *user = NULL, *db = NULL, *host = NULL;
    const char *ctl = st_find_control(url);
    if (ctl) {
        snprintf(err, errlen,
                 "lock URL: has a control character (byte 0x%02x at offset %zu): write %s",
                 (unsigned char)*ctl, (size_t)(ctl - url), MY_USAGE);
        goto done;
    }
    if (strchr(url, '#')) {
        snprintf(err, errlen, "lock URL '%.200s' has a fragment ('#'); write %s", shown, MY_USAGE);
        goto done;
    }
    const char *q = strchr(rest, '?');
    size_t alen = strcspn(rest, "/?");
    const char *auth = rest, *at = NULL;
    for (const char *p = auth; p < auth + alen; p++)
        if (*p == '@')
            at = p;
    if (!at || at == auth || *auth == ':') {
        snprintf(err, errlen, "lock URL '%.200s' names no user: write USER@ before the host (%s)",
                 shown, MY_USAGE);
        goto done;
    }
    const char *pcolon = memchr(auth, ':', (size_t)(at - auth));
    size_t ul = pcolon ? (size_t)(pcolon - auth) : (size_t)(at - auth);
    if (!(user = st_pct_decode(auth, ul, &bad)))
        goto decode;
    if (pcolon && !(out->opt2 = st_pct_decode(pcolon + 1, (size_t)(at - pcolon - 1), &bad)))
        goto decode;
    if (out->opt2 && !out->opt2[0]) {
        free(out->opt2);
        out->opt2 = NULL;
    }
    if ((rc = st_check_text(shown, "user", user, 128, err, errlen)) != 0)
        goto done;
    rc = S3LECT_EINVAL;
    /* HOST, HOST:PORT, [V6] or [V6]:PORT */
    const char *h = at + 1;
    size_t namelen;
    long pv;
    if (st_parse_server(shown, MY_USAGE, h, (size_t)(auth + alen - h), MY_DEFAULT_PORT, &namelen,
                        &pv, err, errlen) != 0)
        goto done;
    if (!(host = u_asprintf("%.*s", (int)namelen, h)))
        goto oom;
    for (char *c = host; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    /* /DB */
    const char *d = rest + alen;
    size_t dl = q ? (size_t)(q - d) : strlen(d);
    if (*d != '/' || dl <= 1) {
        snprintf(err, errlen, "lock URL '%.200s' names no database: write %s", shown, MY_USAGE);
        goto done;
    }
    if (!(db = st_pct_decode(d + 1, dl - 1, &bad)))
        goto decode;
    if ((rc = st_check_text(shown, "database", db, 64, err, errlen)) != 0)
        goto done;
    rc = S3LECT_EINVAL;
    if (strchr(db, '/')) {
        snprintf(err, errlen, "lock URL '%.200s': the database is one name (no '/'): write %s",
                 shown, MY_USAGE);
        goto done;
    }
    st_qparam ps[] = {{"key", &out->key},      {"table", &out->opt1},
                      {"tls", &m.tls},         {"ca", &m.ca},
                      {"timeout", &m.timeout}, {"password_env", &m.password_env},
                      {"auth", &m.auth},       {"region", &m.region}};
    if ((rc = st_parse_query(shown, MY_USAGE, q ? q + 1 : NULL, ps, sizeof ps / sizeof *ps, NULL,
                             err, errlen)) != 0)
        goto done;
    rc = S3LECT_EINVAL;
    if (!out->key) {
        snprintf(err, errlen,
                 "lock URL '%.200s' names no lock: add ?key=NAME (the lock's row; one table holds "
                 "many locks): %s",
                 shown, MY_USAGE);
        goto done;
    }
    if ((rc = st_check_text(shown, "key", out->key, 1024, err, errlen)) != 0)
        goto done;
    rc = S3LECT_EINVAL;
    if (!out->opt1 && !(out->opt1 = u_strdup(MY_DEFAULT_TABLE)))
        goto oom;
    if (strlen(out->opt1) > 64 || !st_only_chars(out->opt1, "_")) {
        snprintf(err, errlen,
                 "lock URL '%.200s': table '%.100s' must be letters, digits and '_' (at most 64)",
                 shown, out->opt1);
        goto done;
    }
    if (m.auth && strcmp(m.auth, "aws-iam") != 0) {
        snprintf(err, errlen,
                 "lock URL '%.200s': auth=%.40s is not known: auth=aws-iam (an RDS IAM token) or "
                 "no auth= (a password)",
                 shown, m.auth);
        goto done;
    }
    if (m.region && (!m.auth || strlen(m.region) > 40 || !st_only_chars(m.region, "-"))) {
        snprintf(err, errlen,
                 m.auth ? "lock URL '%.200s': region=%.40s is not an AWS region name"
                        : "lock URL '%.200s': region= goes with auth=aws-iam only",
                 shown, m.region);
        goto done;
    }
    if (m.auth && out->opt2) {
        snprintf(err, errlen,
                 "lock URL '%.200s' has a password and auth=aws-iam: remove the password (the IAM "
                 "token is the password)",
                 shown);
        goto done;
    }
    if (m.auth && m.password_env) {
        snprintf(err, errlen,
                 "lock URL '%.200s' has password_env= and auth=aws-iam: remove password_env",
                 shown);
        goto done;
    }
    int tls = m.tls ? tls_mode(m.tls) : m.auth ? TLS_REQUIRED : TLS_PREFERRED;
    if (tls < 0) {
        snprintf(err, errlen,
                 "lock URL '%.200s': tls=%.40s is not a mode: tls=disable, preferred (the "
                 "default), required, verify-ca or verify-full",
                 shown, m.tls);
        goto done;
    }
    if (m.auth && tls < TLS_REQUIRED) {
        snprintf(err, errlen,
                 "lock URL '%.200s': auth=aws-iam needs TLS (RDS sends IAM tokens only over "
                 "TLS): tls=required, verify-ca or verify-full",
                 shown);
        goto done;
    }
    if (m.ca && tls == TLS_DISABLE) {
        snprintf(err, errlen, "lock URL '%.200s': ca= with tls=disable: remove one", shown);
        goto done;
    }
    if (tls == TLS_VERIFY_CA && !m.ca) {
        snprintf(err, errlen,
                 "lock URL '%.200s': tls=verify-ca needs ca=FILE (the CA certificate that "
                 "signed the server's)",
                 shown);
        goto done;
    }
    if (m.password_env && (strlen(m.password_env) > 100 || !st_only_chars(m.password_env, "_") ||
                           (m.password_env[0] >= '0' && m.password_env[0] <= '9'))) {
        snprintf(err, errlen,
                 "lock URL '%.200s': password_env= must name an environment variable (letters, "
                 "digits, '_')",
                 shown);
        goto done;
    }
    int64_t tms = 0;
    if (m.timeout) {
        int dr = cfg_parse_duration(m.timeout, &tms);
        if (dr != 0 || tms <= 0) {
            snprintf(err, errlen,
                     "lock URL '%.200s': timeout=%.40s is not a duration above zero (%s): write "
                     "e.g. timeout=5s",
                     shown, m.timeout, dr ? cfg_duration_error(dr) : "it is zero");
            goto done;
        }
    }
    if (m.auth)
        out->cred = ST_CRED_AWS; /* the token is signed with the AWS chain (whoami) */
    /* The settings open reads back (opt3), and HOST:PORT/DB (bucket). */
    out->opt3 = u_strdup("");
    if (!out->opt3 || q_add(&out->opt3, "user", user) || q_add(&out->opt3, "tls", TLS_NAMES[tls]) ||
        q_add(&out->opt3, "ca", m.ca) || (tms && q_add(&out->opt3, "timeout", m.timeout)) ||
        q_add(&out->opt3, "password_env", m.password_env) || q_add(&out->opt3, "auth", m.auth) ||
        q_add(&out->opt3, "region", m.region))
        goto oom;
    if (!(out->bucket = u_asprintf("%s:%ld/%s", host, pv, db)))
        goto oom;
    rc = 0;
    goto done;
decode:
    if (bad)
        snprintf(err, errlen, "lock URL '%.200s' has a malformed %%-escape", shown);
    else
        my_oom(err, errlen);
    rc = bad ? S3LECT_EINVAL : S3LECT_ENOMEM;
    goto done;
oom:
    rc = my_oom(err, errlen);
done:
    settings_clear(&m);
    free(user);
    free(db);
    free(host);
    free(shown);
    return rc;
}

int st_mysql_canonical(const st_location *loc, char **out)
{
    /* mysql://USER@HOST:PORT/DB?key=K&table=T: no password, no settings. */
    my_settings m;
    char err[200];
    int rc = settings_parse(loc->opt3, &m, err, sizeof err);
    rc = rc || st_canon_add(out, "mysql://", m.user ? m.user : "", 1) ||
         st_canon_add(out, "@", loc->bucket, 0) || st_canon_add(out, "?key=", loc->key, 1) ||
         st_canon_add(out, "&table=", loc->opt1, 1) ||
         (m.auth && st_canon_add(out, "&auth=", m.auth, 1));
    settings_clear(&m);
    return rc;
}
