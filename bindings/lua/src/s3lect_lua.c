/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3lect_lua.c - the Lua module "s3lect" (Lua 5.4 and the 5.1 API of LuaJIT).
 *
 * Electors run in poll mode (DESIGN §7): the library's shared runtime runs
 * the election on its own threads (docs/threading.md) and never touches the
 * Lua state. Events queue inside the library, el:fd() becomes readable, and
 * el:dispatch() runs the Lua callbacks on the thread that calls it. A Lua
 * state is therefore only ever used by the host's own thread.
 *
 * Callbacks are kept as registry references and run with lua_pcall and a
 * traceback handler, inside a protected C call, so that no Lua error (not
 * even out-of-memory) can longjmp through the library's frames.
 */
#define _POSIX_C_SOURCE 200809L /* poll, clock_gettime */
#define _GNU_SOURCE             /* dladdr, RTLD_NODELETE */

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3lect.h"

#include "compat.h"

#define ELECTOR_MT "s3lect.elector"
#define FENCE_MT "s3lect.fence"
#define CLOCK_MT "s3lect.clock"
#define MODULE_NAME "s3lect"

/* Lua callbacks an elector may hold. */
enum cb_kind { CB_ACQUIRE, CB_LOSE, CB_LEADER_CHANGE, CB_ERROR, CB_CYCLE, CB_TRANSFER, CB_COUNT };

static const char *const cb_names[CB_COUNT] = {"on_acquire", "on_lose",  "on_leader_change",
                                               "on_error",   "on_cycle", "on_transfer"};

/* Deferred actions requested from inside one of the elector's own callbacks. */
enum pending { PENDING_NONE, PENDING_STOP, PENDING_STOP_NO_RELEASE };

typedef struct lelector {
    s3lect_elector *e;  /* NULL once closed */
    s3lect_config *cfg; /* only while s3lect.new() builds it */
    lua_State *L;       /* the thread inside el:dispatch(); NULL otherwise */
    int ref[CB_COUNT];  /* registry references, LUA_NOREF when unset */
    int started;        /* el:start() succeeded */
    int in_dispatch;    /* inside s3lect_dispatch() on this elector */
    int pending;        /* enum pending */
    int pending_close;  /* el:close() requested from a callback */
    int stopped;        /* a stop succeeded */
    int yielded;        /* 1 + the cb_kind of a callback that tried to yield; 0: none */
    int events;         /* events = true: every event is queued for el:next_event() */
    int queue_ref;      /* registry reference of the queue table (events = true) */
    lua_Integer q_head; /* queue[q_head + 1 .. q_tail] are the queued events */
    lua_Integer q_tail;
    struct lfence *fences; /* the open fences of this elector (el:fence()) */
} lelector;

/* A fence (docs/fencing.md): el:fence() or s3lect.fence_from_token(). An
 * elector's fence is freed before the elector: el:close() closes its fences,
 * and a registry reference keeps the elector from being collected first. */
typedef struct lfence {
    s3lect_fence *f;     /* NULL once closed */
    s3lect_config *cfg;  /* only while s3lect.fence_from_token() builds it */
    lelector *le;        /* an elector's fence, while open; NULL otherwise */
    struct lfence *next; /* in le->fences */
    int el_ref;          /* registry reference of the elector; LUA_NOREF */
} lfence;

/* A virtual clock (s3lect.clock(), docs/testing-your-code.md): electors made
 * with clock = c run in its virtual time; c:advance() runs their elections,
 * then their callbacks (their events wait in poll mode for dispatch). */
typedef struct lclock {
    s3lect_clock *c; /* NULL once closed */
    int els_ref;     /* registry reference of a weak table: its electors, 1..n_els */
    lua_Integer n_els;
} lclock;

/* The most events el:next_event() keeps queued; older ones are dropped. */
#define EVENT_QUEUE_MAX 1024

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* Pushes nil and "context: message" for an expected failure; returns 2. */
static int push_fail(lua_State *L, lelector *le, const char *context, int code)
{
    char msg[512] = "";
    if (le != NULL && le->e != NULL)
        s3lect_errmsg(le->e, msg, sizeof msg);
    lua_pushnil(L);
    if (msg[0] != '\0')
        lua_pushfstring(L, "%s: %s", context, msg);
    else
        lua_pushfstring(L, "%s: %s", context, s3lect_strerror(code));
    return 2;
}

static lelector *check_elector(lua_State *L, int idx)
{
    lelector *le = luaL_checkudata(L, idx, ELECTOR_MT);
    return le;
}

/* Like check_elector, but raises if the elector was closed. */
static lelector *check_open(lua_State *L, int idx)
{
    lelector *le = check_elector(L, idx);
    if (le->e == NULL)
        luaL_error(L, "s3lect: elector is closed");
    return le;
}

static void unref_all(lua_State *L, lelector *le)
{
    for (int i = 0; i < CB_COUNT; i++) {
        luaL_unref(L, LUA_REGISTRYINDEX, le->ref[i]);
        le->ref[i] = LUA_NOREF;
    }
    luaL_unref(L, LUA_REGISTRYINDEX, le->queue_ref);
    le->queue_ref = LUA_NOREF;
    le->q_head = le->q_tail = 0;
}

/* ------------------------------------------------------------------------ */
/* Running callbacks                                                        */
/* ------------------------------------------------------------------------ */

/* Message handler: adds a traceback; tolerates non-string error objects. */
static int msgh(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            msg = lua_tostring(L, -1);
        else
            msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    s3l_traceback(L, msg);
    return 1;
}

/* Last resort for errors nobody else can take. */
static void report_stderr(const char *what, const char *msg)
{
    fprintf(stderr, "s3lect: %s: %s\n", what, msg != NULL ? msg : "(no message)");
    fflush(stderr);
}

/* Reports the error message on top of the stack (and pops it): to on_error
 * if set, else to stderr. Runs in protected mode. */
static void report_callback_error(lua_State *L, lelector *le, enum cb_kind kind)
{
    const char *msg = lua_tostring(L, -1);
    char what[64];
    snprintf(what, sizeof what, "error in %s callback", cb_names[kind]);
    if (kind == CB_ERROR || le->ref[CB_ERROR] == LUA_NOREF) {
        report_stderr(what, msg);
        lua_pop(L, 1);
        return;
    }
    int top = lua_gettop(L);
    lua_pushcfunction(L, msgh);
    lua_rawgeti(L, LUA_REGISTRYINDEX, le->ref[CB_ERROR]);
    lua_pushfstring(L, "%s: %s", what, msg != NULL ? msg : "(no message)");
    lua_pushinteger(L, S3LECT_ECALLBACK);
    if (lua_pcall(L, 2, 0, top + 1) != LUA_OK) {
        report_stderr(what, msg);
        report_stderr("error in on_error callback", lua_tostring(L, -1));
    }
    lua_settop(L, top - 1);
}

/* One callback invocation, passed through s3l_cpcall as light userdata. */
typedef struct cb_call {
    lelector *le;
    enum cb_kind kind;
    const s3lect_event *ev;
    int veto; /* on_acquire: returned false or raised */
} cb_call;

/* Pushes the callback's arguments; returns their count. */
static int push_args(lua_State *L, const cb_call *c)
{
    const s3lect_event *ev = c->ev;
    const char *s;
    switch (c->kind) {
    case CB_ACQUIRE:
        s3l_pushint64(L, s3lect_event_term(ev));
        return 1;
    case CB_LOSE: {
        s3l_pushint64(L, s3lect_event_term(ev));
        /* The library's name; a code it has no name for is "unknown". */
        int reason = s3lect_event_reason(ev);
        s = s3lect_lost_reason_str(reason);
        lua_pushstring(L, reason != S3LECT_LOST_NONE && strcmp(s, "none") == 0 ? "unknown" : s);
        return 2;
    }
    case CB_LEADER_CHANGE: /* (leader_id, leader_addr, term): as in Python, Go and C */
        s = s3lect_event_leader_id(ev);
        if (s != NULL && s[0] != '\0')
            lua_pushstring(L, s);
        else
            lua_pushnil(L);
        s = s3lect_event_leader_addr(ev);
        if (s != NULL && s[0] != '\0')
            lua_pushstring(L, s);
        else
            lua_pushnil(L);
        s3l_pushint64(L, s3lect_event_term(ev));
        return 3;
    case CB_ERROR:
        s = s3lect_event_message(ev);
        lua_pushstring(L, s != NULL && s[0] != '\0' ? s : s3lect_strerror(s3lect_event_code(ev)));
        lua_pushinteger(L, s3lect_event_code(ev));
        return 2;
    case CB_CYCLE:
        s3l_pushint64(L, (int64_t)s3lect_event_cycle(ev));
        return 1;
    case CB_TRANSFER: /* (target_id, term) */
        s = s3lect_event_leader_id(ev);
        lua_pushstring(L, s != NULL ? s : "");
        s3l_pushint64(L, s3lect_event_term(ev));
        return 2;
    default:
        return 0;
    }
}

/* Protected body: calls the Lua callback with a traceback handler. */
static int run_callback(lua_State *L)
{
    cb_call *c = lua_touserdata(L, 1);
    lelector *le = c->le;
    lua_settop(L, 0);
    lua_pushcfunction(L, msgh);
    lua_rawgeti(L, LUA_REGISTRYINDEX, le->ref[c->kind]);
    int nargs = push_args(L, c);
    if (lua_pcall(L, nargs, 1, 1) != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        if (m != NULL && (strstr(m, "attempt to yield across") != NULL ||
                          strstr(m, "attempt to yield from outside a coroutine") != NULL)) {
            /* The callback called coroutine.yield: a callback runs inside
             * el:dispatch(), under C frames of this module and of libs3lect,
             * and cannot be suspended. That is a mistake of the host's, not
             * a veto (only false or an error is): the event stands, and the
             * el:dispatch() that ran it raises a Lua error that says so. */
            if (le->yielded == 0)
                le->yielded = 1 + (int)c->kind;
            c->veto = 0;
            return 0;
        }
        c->veto = 1;
        report_callback_error(L, le, c->kind);
        return 0;
    }
    /* Only an explicit false vetoes: a callback that returns nothing keeps
     * leadership. */
    c->veto = lua_isboolean(L, -1) && !lua_toboolean(L, -1);
    return 0;
}

/* Runs one callback from a library trampoline. Returns nonzero on veto. */
static int invoke(lelector *le, enum cb_kind kind, const s3lect_event *ev)
{
    if (le->ref[kind] == LUA_NOREF)
        return 0;
    lua_State *L = le->L;
    if (L == NULL) {
        /* Cannot happen in poll mode (callbacks run only in dispatch); if it
         * ever does, refusing leadership is the safe answer. */
        report_stderr(cb_names[kind], "callback outside el:dispatch(); not run");
        return 1;
    }
    cb_call c = {.le = le, .kind = kind, .ev = ev, .veto = 0};
    int top = lua_gettop(L);
    int status = s3l_cpcall(L, run_callback, &c);
    if (status != LUA_OK) {
        /* Only out-of-memory or a failing error handler gets here. */
        report_stderr(cb_names[kind],
                      lua_isstring(L, -1) ? lua_tostring(L, -1) : "could not run the callback");
        c.veto = 1;
    }
    lua_settop(L, top);
    return c.veto;
}

/* Pushes an event as a table: {type = "acquired" | "lost" | "leader_changed"
 * | "error" | "cycle" | "transfer", term, reason, leader_id, leader_addr,
 * message, code, cycle} (the fields the type has; a transfer's leader_id is
 * its target). */
static void push_event_table(lua_State *L, const s3lect_event *ev)
{
    int type = s3lect_event_type(ev);
    const char *s;
    lua_createtable(L, 0, 4);
    lua_pushstring(L, s3lect_event_type_str(type));
    lua_setfield(L, -2, "type");
    s3l_pushint64(L, s3lect_event_term(ev));
    lua_setfield(L, -2, "term");
    switch (type) {
    case S3LECT_EVENT_LOST: {
        int reason = s3lect_event_reason(ev);
        s = s3lect_lost_reason_str(reason);
        lua_pushstring(L, reason != S3LECT_LOST_NONE && strcmp(s, "none") == 0 ? "unknown" : s);
        lua_setfield(L, -2, "reason");
        break;
    }
    case S3LECT_EVENT_LEADER_CHANGED:
    case S3LECT_EVENT_TRANSFER:
        s = s3lect_event_leader_id(ev);
        if (s != NULL && s[0] != '\0') {
            lua_pushstring(L, s);
            lua_setfield(L, -2, "leader_id");
        }
        s = s3lect_event_leader_addr(ev);
        if (s != NULL && s[0] != '\0') {
            lua_pushstring(L, s);
            lua_setfield(L, -2, "leader_addr");
        }
        break;
    case S3LECT_EVENT_ERROR:
        s = s3lect_event_message(ev);
        lua_pushstring(L, s != NULL && s[0] != '\0' ? s : s3lect_strerror(s3lect_event_code(ev)));
        lua_setfield(L, -2, "message");
        lua_pushinteger(L, s3lect_event_code(ev));
        lua_setfield(L, -2, "code");
        break;
    case S3LECT_EVENT_CYCLE:
        s3l_pushint64(L, (int64_t)s3lect_event_cycle(ev));
        lua_setfield(L, -2, "cycle");
        break;
    default:
        break;
    }
}

typedef struct q_push {
    lelector *le;
    const s3lect_event *ev;
} q_push;

/* Protected body: appends the event to the elector's queue. */
static int enqueue_event(lua_State *L)
{
    q_push *p = lua_touserdata(L, 1);
    lelector *le = p->le;
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, le->queue_ref);
    if (!lua_istable(L, 1))
        return 0;
    push_event_table(L, p->ev);
    lua_rawseti(L, 1, (int)(le->q_tail + 1));
    le->q_tail++;
    if (le->q_tail - le->q_head > EVENT_QUEUE_MAX) {
        le->q_head++;
        lua_pushnil(L);
        lua_rawseti(L, 1, (int)le->q_head);
    }
    return 0;
}

static void queue_event(lelector *le, const s3lect_event *ev)
{
    lua_State *L = le->L;
    if (!le->events || L == NULL)
        return;
    q_push p = {.le = le, .ev = ev};
    int top = lua_gettop(L);
    if (s3l_cpcall(L, enqueue_event, &p) != LUA_OK)
        report_stderr("el:next_event() queue",
                      lua_isstring(L, -1) ? lua_tostring(L, -1) : "could not queue an event");
    lua_settop(L, top);
}

static void on_event(s3lect_elector *e, const s3lect_event *ev, void *userdata)
{
    (void)e;
    lelector *le = userdata;
    queue_event(le, ev);
    switch (s3lect_event_type(ev)) {
    case S3LECT_EVENT_LOST:
        invoke(le, CB_LOSE, ev);
        break;
    case S3LECT_EVENT_LEADER_CHANGED:
        invoke(le, CB_LEADER_CHANGE, ev);
        break;
    case S3LECT_EVENT_ERROR:
        invoke(le, CB_ERROR, ev);
        break;
    case S3LECT_EVENT_CYCLE:
        invoke(le, CB_CYCLE, ev);
        break;
    case S3LECT_EVENT_TRANSFER:
        /* Without on_transfer nothing stops the host's leader work before
         * the target starts: never hand over by itself (the transfer is
         * abandoned, an error event says so, and this node keeps leading).
         * With it, the host calls el:transfer_commit(). */
        if (le->ref[CB_TRANSFER] != LUA_NOREF)
            invoke(le, CB_TRANSFER, ev);
        break;
    default:
        break;
    }
}

static int on_acquire_hook(s3lect_elector *e, const s3lect_event *ev, void *userdata)
{
    (void)e;
    return invoke(userdata, CB_ACQUIRE, ev);
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

/* K_SECONDS: an int option in ms, seconds in Lua; K_COUNT: an int option
 * that is a plain count (libs3lect says which: s3lect_option_flags). */
enum opt_kind { K_STR, K_BYTES, K_SECONDS, K_COUNT, K_BOOL, K_CALLBACK };

typedef struct optdef {
    const char *name;
    int opt;    /* s3lect_option, or the cb_kind for K_CALLBACK */
    int kind;   /* enum opt_kind */
    int timing; /* accepted by el:update_config() */
} optdef;

/* The options are libs3lect's own (s3lect_option_info), read once when the
 * module is first loaded: every library option is an option of s3lect.new
 * under its library name, duration options (ms) as seconds and count options
 * as integers, except these: */
static const char *const hidden_options[] = {
    "poll_mode", /* always on: callbacks run in el:dispatch(), on the host's thread */
};
/* Which integer options are durations (ms in C, seconds in Lua) and which
 * are counts, and which el:update_config() may change, are libs3lect's facts
 * (s3lect_option_flags): no list of them is kept here. An integer option of
 * neither unit is not exposed, and the tests (test_options.lua) fail on it. */
/* Names the binding adds: short aliases and the callbacks. */
static const optdef extra_optdefs[] = {
    {"id", S3LECT_OPT_SERVER_ID, K_STR, 0},
    {"addr", S3LECT_OPT_SERVER_ADDR, K_STR, 0},
    {"on_acquire", CB_ACQUIRE, K_CALLBACK, 0},
    {"on_lose", CB_LOSE, K_CALLBACK, 0},
    {"on_leader_change", CB_LEADER_CHANGE, K_CALLBACK, 0},
    {"on_error", CB_ERROR, K_CALLBACK, 0},
    {"on_cycle", CB_CYCLE, K_CALLBACK, 0},
    {"on_transfer", CB_TRANSFER, K_CALLBACK, 0},
};

#define N_EXTRA_OPTDEFS (sizeof extra_optdefs / sizeof extra_optdefs[0])
#define MAX_OPTDEFS 128

static optdef optdefs[MAX_OPTDEFS];
static size_t n_optdefs;
static pthread_once_t optdefs_once = PTHREAD_ONCE_INIT;

static int in_list(const char *const *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0)
            return 1;
    return 0;
}

/* The kind of option opt of type t (s3lect_option_type), or -1 for a type,
 * or an integer unit, this binding does not know (s3lect.options() still
 * lists it, and the tests fail on it). */
static int kind_of_option(int opt, int t)
{
    int flags = s3lect_option_flags(opt);
    switch (t) {
    case S3LECT_OPTION_STR:
        return K_STR;
    case S3LECT_OPTION_BYTES:
        return K_BYTES;
    case S3LECT_OPTION_INT:
        if (flags > 0 && (flags & S3LECT_OPTION_UNIT_MS))
            return K_SECONDS;
        if (flags > 0 && (flags & S3LECT_OPTION_UNIT_COUNT))
            return K_COUNT;
        return -1;
    case S3LECT_OPTION_BOOL:
        return K_BOOL;
    default:
        return -1;
    }
}

/* Runs once per process (the table is shared by every Lua state). */
static void build_optdefs(void)
{
    size_t n = 0;
    int count = s3lect_option_count();
    for (int opt = 1; opt <= count && n < MAX_OPTDEFS - N_EXTRA_OPTDEFS; opt++) {
        const char *name = NULL;
        int type = 0;
        if (s3lect_option_info(opt, &name, &type, NULL, NULL, NULL) != S3LECT_OK ||
            in_list(hidden_options, sizeof hidden_options / sizeof hidden_options[0], name))
            continue;
        int kind = kind_of_option(opt, type);
        if (kind < 0)
            continue;
        optdefs[n].name = name;
        optdefs[n].opt = opt;
        optdefs[n].kind = kind;
        optdefs[n].timing = (s3lect_option_flags(opt) & S3LECT_OPTION_RUNTIME) != 0;
        n++;
    }
    for (size_t i = 0; i < N_EXTRA_OPTDEFS; i++)
        optdefs[n++] = extra_optdefs[i];
    n_optdefs = n;
}

static const optdef *find_opt(const char *name)
{
    for (size_t i = 0; i < n_optdefs; i++)
        if (strcmp(optdefs[i].name, name) == 0)
            return &optdefs[i];
    return NULL;
}

/* Raises "unknown option" with the list of valid names. */
static int unknown_option(lua_State *L, const char *fn, const char *name, int timing_only)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    int first = 1;
    for (size_t i = 0; i < n_optdefs; i++) {
        if (timing_only && !optdefs[i].timing)
            continue;
        if (!first)
            luaL_addstring(&b, ", ");
        luaL_addstring(&b, optdefs[i].name);
        first = 0;
    }
    luaL_pushresult(&b);
    return luaL_error(L, "%s: unknown option '%s' (valid: %s)", fn, name, lua_tostring(L, -1));
}

/* Converts seconds (a Lua number) to milliseconds, raising on misuse. */
static int64_t seconds_to_ms(lua_State *L, const char *fn, const char *name, int idx)
{
    if (lua_type(L, idx) != LUA_TNUMBER)
        luaL_error(L,
                   "%s: option '%s' must be a number of seconds or a duration string such as "
                   "\"15s\", not a %s",
                   fn, name, luaL_typename(L, idx));
    double s = (double)lua_tonumber(L, idx);
    if (!isfinite(s) || fabs(s) > 9.0e12)
        luaL_error(L, "%s: option '%s' must be a finite number of seconds", fn, name);
    return (int64_t)llround(s * 1000.0);
}

/* Reads a count option's value: a whole number (an integer in Lua 5.4; an
 * integral number in LuaJIT), raising on misuse. The library checks the
 * range (e.g. "worker_threads must be between 1 and 64, got 0"). */
static int64_t count_value(lua_State *L, const char *fn, const optdef *d, int idx)
{
    int64_t lo = 0, hi = 0;
    s3lect_option_info(d->opt, NULL, NULL, &lo, &hi, NULL);
    if (lua_type(L, idx) != LUA_TNUMBER)
        luaL_error(L, "%s: option '%s' must be a whole number from %d to %d (a count), not a %s",
                   fn, d->name, (int)lo, (int)hi, luaL_typename(L, idx));
    double v = (double)lua_tonumber(L, idx);
    if (!isfinite(v) || v != floor(v) || fabs(v) > 9.0e15)
        luaL_error(L, "%s: option '%s' must be a whole number from %d to %d (a count), not %f", fn,
                   d->name, (int)lo, (int)hi, (lua_Number)v);
    return (int64_t)v;
}

/* Applies the option whose value is at idx to cfg. Returns 0 or a negative
 * code from the library (expected failure: the caller reports it). Raises on
 * wrong types. */
static int apply_option(lua_State *L, const char *fn, s3lect_config *cfg, const optdef *d, int idx)
{
    switch (d->kind) {
    case K_STR:
    case K_BYTES: {
        if (lua_type(L, idx) != LUA_TSTRING)
            return luaL_error(L, "%s: option '%s' must be a string, not a %s", fn, d->name,
                              luaL_typename(L, idx));
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        if (d->kind == K_BYTES) /* PEM: the whole Lua string, NULs included */
            return s3lect_config_set_bytes(cfg, (s3lect_option)d->opt, s, len);
        if (strlen(s) != len) /* embedded NUL: libs3lect refuses bytes for a string option */
            return s3lect_config_set_bytes(cfg, (s3lect_option)d->opt, s, len);
        return s3lect_config_set_str(cfg, (s3lect_option)d->opt, s);
    }
    case K_SECONDS:
        if (lua_type(L, idx) == LUA_TSTRING) /* "15s": libs3lect's S3LECT_* syntax */
            return s3lect_config_set_text(cfg, (s3lect_option)d->opt, lua_tostring(L, idx));
        return s3lect_config_set_int(cfg, (s3lect_option)d->opt,
                                     seconds_to_ms(L, fn, d->name, idx));
    case K_COUNT:
        if (lua_type(L, idx) == LUA_TSTRING)
            return s3lect_config_set_text(cfg, (s3lect_option)d->opt, lua_tostring(L, idx));
        return s3lect_config_set_int(cfg, (s3lect_option)d->opt, count_value(L, fn, d, idx));
    case K_BOOL:
        if (lua_type(L, idx) != LUA_TBOOLEAN)
            return luaL_error(L, "%s: option '%s' must be a boolean, not a %s", fn, d->name,
                              luaL_typename(L, idx));
        return s3lect_config_set_bool(cfg, (s3lect_option)d->opt, lua_toboolean(L, idx));
    default:
        return 0;
    }
}

/* Message for a failed setter or validation: the config's detail if any. */
static int push_config_fail(lua_State *L, const char *fn, const char *name, s3lect_config *cfg,
                            int code)
{
    char msg[512] = "";
    s3lect_config_errmsg(cfg, msg, sizeof msg);
    lua_pushnil(L);
    if (name != NULL)
        lua_pushfstring(L, "%s: option '%s': %s", fn, name,
                        msg[0] != '\0' ? msg : s3lect_strerror(code));
    else
        lua_pushfstring(L, "%s: %s", fn, msg[0] != '\0' ? msg : s3lect_strerror(code));
    return 2;
}

/* ------------------------------------------------------------------------ */
/* s3lect.new                                                               */
/* ------------------------------------------------------------------------ */

/* The option env of s3lect.new{...} (at index 1): true applies the
 * process's S3LECT_* variables, a table {NAME = "value", ...} those it names
 * (s3lect_config_set_from_env, libs3lect's one map: S3LECT_LOCK,
 * S3LECT_LEASE_TIMEOUT, ...), before the other options, which win. Leaves
 * the stack at `top`. Returns 0 or a library code (the config says why). */
static int apply_env(lua_State *L, const char *fn, s3lect_config *cfg, int top)
{
    lua_getfield(L, 1, "env");
    int t = lua_type(L, -1), rc = S3LECT_OK;
    if (t == LUA_TBOOLEAN) {
        if (lua_toboolean(L, -1))
            rc = s3lect_config_set_from_env(cfg, NULL);
    } else if (t == LUA_TTABLE) {
        int env = lua_gettop(L);
        size_t n = 0;
        for (lua_pushnil(L); lua_next(L, env) != 0; lua_pop(L, 1))
            n++;
        const char **envp = lua_newuserdata(L, (n + 1) * sizeof *envp);
        size_t i = 0;
        for (lua_pushnil(L); lua_next(L, env) != 0; lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                return luaL_error(L, "%s: option 'env' must map variable names to strings", fn);
            luaL_checkstack(L, 3, "s3lect.new: env");
            /* below the key, so that it outlives this iteration */
            lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
            lua_insert(L, -3);
            envp[i++] = lua_tostring(L, -3);
        }
        envp[i] = NULL;
        rc = s3lect_config_set_from_env(cfg, envp);
    } else if (t != LUA_TNIL) {
        return luaL_error(L, "%s: option 'env' must be true or a table of variables, not a %s", fn,
                          luaL_typename(L, -1));
    }
    lua_settop(L, top);
    return rc;
}

/* s3lect.new{...} -> elector | nil, message */
static int l_new(lua_State *L)
{
    static const char fn[] = "s3lect.new";
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);

    /* The userdata owns everything from here on, so a raised error leaks
     * nothing: __gc frees the config and the references. */
    lelector *le = lua_newuserdata(L, sizeof *le);
    memset(le, 0, sizeof *le);
    for (int i = 0; i < CB_COUNT; i++)
        le->ref[i] = LUA_NOREF;
    le->queue_ref = LUA_NOREF;
    luaL_getmetatable(L, ELECTOR_MT);
    lua_setmetatable(L, 2);

    le->cfg = s3lect_config_new();
    if (le->cfg == NULL)
        return luaL_error(L, "%s: out of memory", fn);
    s3lect_config_set_bool(le->cfg, S3LECT_OPT_POLL_MODE, 1);
    int rc = apply_env(L, fn, le->cfg, 2);
    if (rc != S3LECT_OK)
        return push_config_fail(L, fn, "env", le->cfg, rc);

    int seen_id = 0, seen_addr = 0;
    lclock *clock = NULL;
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) {
        /* key at -2, value at -1 */
        if (lua_type(L, -2) != LUA_TSTRING)
            return luaL_error(L, "%s: option names must be strings, got a %s key", fn,
                              luaL_typename(L, -2));
        const char *name = lua_tostring(L, -2);
        if (strcmp(name, "env") == 0) { /* applied first (apply_env) */
            lua_pop(L, 1);
            continue;
        }
        if (strcmp(name, "clock") == 0) { /* a virtual clock (tests) */
            lclock *lc = s3l_testudata(L, -1, CLOCK_MT);
            if (lc == NULL || lc->c == NULL)
                return luaL_error(L, "%s: option 'clock' must be an open s3lect.clock(), not a %s",
                                  fn, luaL_typename(L, -1));
            s3lect_config_set_clock(le->cfg, lc->c);
            clock = lc;
            lua_pop(L, 1);
            continue;
        }
        if (strcmp(name, "events") == 0) {
            /* The binding's own option: queue events for el:next_event(). */
            if (lua_type(L, -1) != LUA_TBOOLEAN)
                return luaL_error(L, "%s: option 'events' must be a boolean, not a %s", fn,
                                  luaL_typename(L, -1));
            le->events = lua_toboolean(L, -1);
            lua_pop(L, 1);
            continue;
        }
        const optdef *d = find_opt(name);
        if (d == NULL)
            return unknown_option(L, fn, name, 0);
        if (d->opt == S3LECT_OPT_SERVER_ID && d->kind == K_STR && seen_id++)
            return luaL_error(L, "%s: give 'id' or 'server_id', not both", fn);
        if (d->opt == S3LECT_OPT_SERVER_ADDR && d->kind == K_STR && seen_addr++)
            return luaL_error(L, "%s: give 'addr' or 'server_addr', not both", fn);
        if (d->kind == K_CALLBACK) {
            if (lua_type(L, -1) != LUA_TFUNCTION)
                return luaL_error(L, "%s: option '%s' must be a function, not a %s", fn, name,
                                  luaL_typename(L, -1));
            lua_pushvalue(L, -1);
            le->ref[d->opt] = luaL_ref(L, LUA_REGISTRYINDEX);
        } else {
            int rc = apply_option(L, fn, le->cfg, d, lua_gettop(L));
            if (rc != S3LECT_OK)
                return push_config_fail(L, fn, name, le->cfg, rc);
        }
        lua_pop(L, 1);
    }

    s3lect_elector *e = NULL;
    rc = s3lect_new(le->cfg, &e);
    if (rc != S3LECT_OK)
        return push_config_fail(L, fn, NULL, le->cfg, rc);
    le->e = e;
    s3lect_config_free(le->cfg);
    le->cfg = NULL;

    if (le->ref[CB_ACQUIRE] != LUA_NOREF)
        rc = s3lect_set_acquire_hook(e, on_acquire_hook, le, NULL);
    static const struct {
        int kind;   /* enum cb_kind; -1: none (events = true only) */
        int type;   /* s3lect_event_kind */
        int always; /* registered without a callback too (on_event acts on it) */
    } evmap[] = {{-1, S3LECT_EVENT_ACQUIRED, 0},
                 {CB_LOSE, S3LECT_EVENT_LOST, 0},
                 {CB_LEADER_CHANGE, S3LECT_EVENT_LEADER_CHANGED, 0},
                 {CB_ERROR, S3LECT_EVENT_ERROR, 0},
                 {CB_CYCLE, S3LECT_EVENT_CYCLE, 0},
                 {CB_TRANSFER, S3LECT_EVENT_TRANSFER, 0}};
    if (rc == S3LECT_OK && le->events) {
        lua_newtable(L);
        le->queue_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    for (size_t i = 0; rc == S3LECT_OK && i < sizeof evmap / sizeof evmap[0]; i++)
        if (le->events || evmap[i].always ||
            (evmap[i].kind >= 0 && le->ref[evmap[i].kind] != LUA_NOREF))
            rc = s3lect_set_callback(e, (s3lect_event_kind)evmap[i].type, on_event, le, NULL);
    if (rc != S3LECT_OK)
        return push_fail(L, le, fn, rc);
    if (clock != NULL) { /* its advances dispatch this elector's events */
        lua_rawgeti(L, LUA_REGISTRYINDEX, clock->els_ref);
        lua_pushvalue(L, 2);
        lua_rawseti(L, -2, (int)++clock->n_els);
        lua_pop(L, 1);
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Elector methods                                                          */
/* ------------------------------------------------------------------------ */

/* el:start() -> true | nil, message */
static int l_start(lua_State *L)
{
    lelector *le = check_open(L, 1);
    int rc = s3lect_start(le->e);
    if (rc == S3LECT_ESTATE)
        return luaL_error(L, "el:start(): elector already started (electors are not "
                             "restartable; make a new one)");
    if (rc != S3LECT_OK)
        return push_fail(L, le, "el:start()", rc);
    le->started = 1;
    lua_pushboolean(L, 1);
    return 1;
}

/* Runs s3lect_dispatch on behalf of thread L, with callbacks bound to L. */
static int dispatch_on(lua_State *L, lelector *le, int64_t timeout_ms)
{
    le->L = L;
    le->in_dispatch = 1;
    int n = s3lect_dispatch(le->e, timeout_ms);
    le->in_dispatch = 0;
    le->L = NULL;
    return n;
}

/* The error for a callback that tried to yield (le->yielded = 1 + kind). */
static const char *yield_message(lua_State *L, int yielded)
{
    return lua_pushfstring(
        L,
        "s3lect: the %s callback yielded (coroutine.yield), but callbacks cannot yield: they "
        "run inside el:dispatch(), across C calls. The event was delivered and is not a veto "
        "(%s). To wait for events from a coroutine, create the elector with events = true and "
        "call el:next_event([timeout_s]) instead",
        cb_names[yielded - 1],
        yielded - 1 == CB_ACQUIRE ? "leadership is kept" : "nothing was undone");
}

/* Outside dispatch (stop, close): report a yield on stderr. */
static void report_yield(lua_State *L, lelector *le)
{
    if (le->yielded == 0)
        return;
    int y = le->yielded;
    le->yielded = 0;
    report_stderr("callback error", yield_message(L, y));
    lua_pop(L, 1);
}

/* Delivers what the library still has queued (after a stop). Bounded:
 * a stopped elector produces no new events. */
static void drain(lua_State *L, lelector *le)
{
    for (int i = 0; i < 64 && dispatch_on(L, le, 0) > 0; i++)
        ;
}

static int do_stop(lua_State *L, lelector *le, int release)
{
    int rc = release ? s3lect_stop(le->e) : s3lect_stop_no_release(le->e);
    if (rc == S3LECT_OK) {
        le->stopped = 1;
        drain(L, le);
    }
    return rc;
}

static void fence_close(lua_State *L, lfence *lf);

static void do_close(lua_State *L, lelector *le, int run_callbacks)
{
    if (le->e != NULL) {
        if (run_callbacks && le->started) {
            do_stop(L, le, 1);
            report_yield(L, le);
        }
        while (le->fences != NULL) /* a fence goes before its elector */
            fence_close(L, le->fences);
        s3lect_free_elector(le->e);
        le->e = NULL;
    }
    if (le->cfg != NULL) {
        s3lect_config_free(le->cfg);
        le->cfg = NULL;
    }
    unref_all(L, le);
}

/* Performs a stop or close requested from inside a callback. */
static void run_pending(lua_State *L, lelector *le)
{
    int pending = le->pending;
    le->pending = PENDING_NONE;
    if (pending != PENDING_NONE && le->e != NULL) {
        int rc = do_stop(L, le, pending == PENDING_STOP);
        if (rc != S3LECT_OK) {
            char msg[512] = "";
            s3lect_errmsg(le->e, msg, sizeof msg);
            report_stderr("deferred el:stop() failed", msg[0] ? msg : s3lect_strerror(rc));
        }
    }
    if (le->pending_close) {
        le->pending_close = 0;
        do_close(L, le, 1);
    }
}

/* el:stop([{release = false}]) -> true | nil, message */
static int l_stop(lua_State *L)
{
    lelector *le = check_open(L, 1);
    int release = 1;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, 2) != 0) {
            if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "release") != 0)
                return luaL_error(L, "el:stop(): unknown option '%s' (valid: release)",
                                  lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?");
            if (lua_type(L, -1) != LUA_TBOOLEAN)
                return luaL_error(L, "el:stop(): option 'release' must be a boolean");
            release = lua_toboolean(L, -1);
            lua_pop(L, 1);
        }
    }
    if (le->in_dispatch) {
        /* Stopping waits for the elector's pending events (libs3lect refuses
         * it from the elector's own callback); from inside a callback it is
         * deferred until the running el:dispatch() returns. */
        if (le->pending == PENDING_NONE)
            le->pending = release ? PENDING_STOP : PENDING_STOP_NO_RELEASE;
        lua_pushboolean(L, 1);
        return 1;
    }
    int rc = do_stop(L, le, release);
    report_yield(L, le);
    if (rc != S3LECT_OK)
        return push_fail(L, le, "el:stop()", rc);
    lua_pushboolean(L, 1);
    return 1;
}

/* el:close(): stop (releasing leadership), run the last callbacks, free.
 * Idempotent. Also __close (Lua 5.4). */
static int l_close(lua_State *L)
{
    lelector *le = check_elector(L, 1);
    if (le->in_dispatch) {
        le->pending_close = 1;
        return 0;
    }
    do_close(L, le, 1);
    return 0;
}

/* __gc: stop and free without running Lua callbacks. */
static int l_gc(lua_State *L)
{
    lelector *le = check_elector(L, 1);
    do_close(L, le, 0);
    return 0;
}

/* The optional timeout at stack index idx (default 0); NaN is an argument error. */
static lua_Number opt_timeout(lua_State *L, int idx, const char *name)
{
    lua_Number t = luaL_optnumber(L, idx, 0);
    if (t != t)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s is NaN", name));
    return t;
}

/* Refuses a call made from inside one of le's callbacks (it would recurse). */
static void not_in_callback(lua_State *L, lelector *le, const char *fn)
{
    if (le->in_dispatch)
        luaL_error(L,
                   "%s: called from inside one of this elector's callbacks; return from the "
                   "callback instead",
                   fn);
}

/* One round of callbacks (dispatch_on, then what they deferred); raises the
 * yield error if a callback yielded. Returns dispatch_on's result. */
static int dispatch_round(lua_State *L, lelector *le, int64_t timeout_ms)
{
    int n = dispatch_on(L, le, timeout_ms);
    int yielded = le->yielded;
    le->yielded = 0;
    run_pending(L, le);
    if (yielded != 0) {
        yield_message(L, yielded);
        lua_error(L);
    }
    return n;
}

/* el:dispatch([timeout_ms]) -> count | nil, message */
static int l_dispatch(lua_State *L)
{
    lelector *le = check_open(L, 1);
    lua_Number t = opt_timeout(L, 2, "timeout_ms");
    int64_t timeout_ms = t < 0 ? -1 : (t > 9.0e15 ? (int64_t)9e15 : (int64_t)ceil(t));
    not_in_callback(L, le, "el:dispatch()");
    int n = dispatch_round(L, le, timeout_ms);
    if (n < 0)
        return push_fail(L, le, "el:dispatch()", n);
    lua_pushinteger(L, n);
    return 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Pops the oldest queued event onto the stack; returns 0 if there is none. */
static int pop_event(lua_State *L, lelector *le)
{
    if (le->queue_ref == LUA_NOREF || le->q_head >= le->q_tail)
        return 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, le->queue_ref);
    le->q_head++;
    lua_rawgeti(L, -1, (int)le->q_head);
    lua_pushnil(L);
    lua_rawseti(L, -3, (int)le->q_head);
    lua_remove(L, -2);
    return 1;
}

/* el:next_event([timeout_s]) -> event table | nil
 * Runs the elector's pending callbacks, as el:dispatch() does, and returns
 * the oldest queued event; waits up to timeout_s for one (default 0: do not
 * wait; < 0: until an event comes or the elector is stopped). Needs
 * events = true. */
static int l_next_event(lua_State *L)
{
    lelector *le = check_open(L, 1);
    lua_Number t = opt_timeout(L, 2, "timeout_s");
    if (!le->events)
        return luaL_error(L, "el:next_event(): this elector does not queue events; create it "
                             "with s3lect.new{..., events = true}");
    not_in_callback(L, le, "el:next_event()");
    lua_settop(L, 1);
    if (pop_event(L, le))
        return 1;
    double deadline = t < 0 ? 0 : now_s() + (t > 9.0e12 ? 9.0e12 : t);
    for (;;) {
        int64_t ms;
        if (t < 0) {
            ms = 250; /* in slices, to notice a stop */
        } else {
            double left = deadline - now_s();
            ms = left <= 0 ? 0 : (int64_t)ceil(left * 1000.0);
        }
        int n = dispatch_round(L, le, ms);
        if (pop_event(L, le))
            return 1;
        if (n < 0)
            return push_fail(L, le, "el:next_event()", n);
        if (le->e == NULL || le->stopped || !le->started || (t >= 0 && now_s() >= deadline))
            break;
    }
    lua_pushnil(L);
    return 1;
}

/* Pushes nil, "context: message", code; returns 3. */
static int push_fail_code(lua_State *L, lelector *le, const char *context, int code,
                          const char *why)
{
    if (why != NULL) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", context, why);
    } else {
        push_fail(L, le, context, code);
    }
    lua_pushinteger(L, code);
    return 3;
}

/* el:transfer([to]) -> true | nil, message, code. Asks this leader to hand
 * the lock to the follower whose id is `to` (nil or "": the best live
 * follower). Returns at once; when the target confirms, on_transfer(target,
 * term) runs in el:dispatch(): stop the leader work, then el:transfer_commit().
 * code: S3LECT_ENOTLEADER (not leading), S3LECT_EINVAL (its own or a
 * malformed id), S3LECT_EBUSY (a transfer is being committed),
 * S3LECT_EUNSUPPORTED (Route 53). */
static int l_transfer(lua_State *L)
{
    lelector *le = check_open(L, 1);
    const char *to = luaL_optstring(L, 2, NULL);
    int rc = s3lect_transfer(le->e, to);
    if (rc == S3LECT_OK) {
        lua_pushboolean(L, 1);
        return 1;
    }
    if (rc == S3LECT_ENOTLEADER)
        return push_fail_code(L, le, "el:transfer()", rc,
                              "this node does not lead; only the leader can hand the lock over");
    if (rc == S3LECT_EBUSY)
        return push_fail_code(L, le, "el:transfer()", rc, "a transfer is being committed already");
    return push_fail_code(L, le, "el:transfer()", rc, NULL);
}

/* el:transfer_commit() -> true | nil, message, code: after on_transfer, once
 * the leader work has stopped, hands the lock over (on_lose "transferred"
 * follows). S3LECT_EINVAL when no confirmed transfer is pending. */
static int l_transfer_commit(lua_State *L)
{
    lelector *le = check_open(L, 1);
    int rc = s3lect_transfer_commit(le->e);
    if (rc == S3LECT_OK) {
        lua_pushboolean(L, 1);
        return 1;
    }
    return push_fail_code(L, le, "el:transfer_commit()", rc,
                          "no confirmed transfer is pending (refused or abandoned, or leadership "
                          "was lost meanwhile)");
}

/* el:fd() -> integer | nil, message */
static int l_fd(lua_State *L)
{
    lelector *le = check_open(L, 1);
    int fd = s3lect_event_fd(le->e);
    if (fd < 0)
        return push_fail(L, le, "el:fd()", fd);
    lua_pushinteger(L, fd);
    return 1;
}

static int l_is_leader(lua_State *L)
{
    lelector *le = check_open(L, 1);
    lua_pushboolean(L, s3lect_is_leader(le->e));
    return 1;
}

static int l_term(lua_State *L)
{
    lelector *le = check_open(L, 1);
    s3l_pushint64(L, s3lect_term(le->e));
    return 1;
}

static int l_cycle(lua_State *L)
{
    lelector *le = check_open(L, 1);
    s3l_pushint64(L, (int64_t)s3lect_cycle(le->e));
    return 1;
}

/* el:leader_id() -> string | nil (no leader known) */
static int l_leader_id(lua_State *L)
{
    lelector *le = check_open(L, 1);
    char small[256];
    size_t n = s3lect_leader_id(le->e, small, sizeof small);
    if (n == 0) {
        lua_pushnil(L);
        return 1;
    }
    if (n < sizeof small) {
        lua_pushlstring(L, small, n);
        return 1;
    }
    char *big = malloc(n + 1);
    if (big == NULL)
        return luaL_error(L, "el:leader_id(): out of memory");
    n = s3lect_leader_id(le->e, big, n + 1);
    lua_pushlstring(L, big, n);
    free(big);
    return 1;
}

static void set_str(lua_State *L, const char *key, const char *v)
{
    if (v != NULL && v[0] != '\0') {
        lua_pushstring(L, v);
        lua_setfield(L, -2, key);
    }
}

static void set_int(lua_State *L, const char *key, int64_t v)
{
    s3l_pushint64(L, v);
    lua_setfield(L, -2, key);
}

/* Milliseconds to seconds (a float); 0 stays absent for epoch times. */
static void set_seconds(lua_State *L, const char *key, int64_t ms, int omit_zero)
{
    if (omit_zero && ms == 0)
        return;
    lua_pushnumber(L, (lua_Number)ms / 1000.0);
    lua_setfield(L, -2, key);
}

/* Builds the status table from the snapshot in protected mode (so that a
 * memory error cannot leak the snapshot) and leaves it in the registry. */
typedef struct status_ctx {
    const s3lect_status *st;
    int ref;
} status_ctx;

static int build_status(lua_State *L)
{
    status_ctx *c = lua_touserdata(L, 1);
    const s3lect_status *st = c->st;
    lua_createtable(L, 0, 16);
    lua_pushboolean(L, s3lect_status_is_leader(st));
    lua_setfield(L, -2, "is_leader");
    lua_pushstring(L, s3lect_state_str(s3lect_status_state(st)));
    lua_setfield(L, -2, "state");
    set_int(L, "term", s3lect_status_term(st));
    set_str(L, "server_id", s3lect_status_server_id(st));
    set_str(L, "leader_id", s3lect_status_leader_id(st));
    set_str(L, "leader_addr", s3lect_status_leader_addr(st));
    set_str(L, "etag", s3lect_status_etag(st));
    set_seconds(L, "last_updated", s3lect_status_last_updated_ms(st), 1);
    set_seconds(L, "last_seen", s3lect_status_last_seen_ms(st), 1);
    set_seconds(L, "lease_remaining", s3lect_status_lease_remaining_ms(st), 0);
    lua_pushboolean(L, s3lect_status_record_corrupt(st));
    lua_setfield(L, -2, "record_corrupt");
    set_int(L, "last_error", s3lect_status_last_error(st));
    set_str(L, "last_error_message", s3lect_status_last_error_message(st));
    set_int(L, "cycle", (int64_t)s3lect_status_cycle(st));
    set_int(L, "consecutive_failures", s3lect_status_consecutive_failures(st));
    c->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

/* el:status() -> table | nil, message */
static int l_status(lua_State *L)
{
    lelector *le = check_open(L, 1);
    s3lect_status *st = NULL;
    int rc = s3lect_get_status(le->e, &st);
    if (rc != S3LECT_OK)
        return push_fail(L, le, "el:status()", rc);
    status_ctx c = {.st = st, .ref = LUA_NOREF};
    int status = s3l_cpcall(L, build_status, &c);
    s3lect_status_free(st);
    if (status != LUA_OK)
        return lua_error(L); /* re-raise (out of memory) now that st is freed */
    lua_rawgeti(L, LUA_REGISTRYINDEX, c.ref);
    luaL_unref(L, LUA_REGISTRYINDEX, c.ref);
    return 1;
}

/* el:status_json() -> string | nil, message */
static int l_status_json(lua_State *L)
{
    lelector *le = check_open(L, 1);
    char *json = NULL;
    int rc = s3lect_status_json(le->e, &json);
    if (rc != S3LECT_OK)
        return push_fail(L, le, "el:status_json()", rc);
    lua_pushstring(L, json);
    s3lect_free(json);
    return 1;
}

/* ---- peer mode ---- */

/* Pushes a library-allocated string in protected mode, then frees it, so
 * that a memory error cannot leak it. Leaves the string on the stack. */
typedef struct owned_str {
    const char *s;
    int ref;
} owned_str;

static int push_owned_body(lua_State *L)
{
    owned_str *c = lua_touserdata(L, 1);
    lua_pushstring(L, c->s != NULL ? c->s : "");
    c->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

static void push_and_free(lua_State *L, char *s)
{
    owned_str c = {.s = s, .ref = LUA_NOREF};
    int status = s3l_cpcall(L, push_owned_body, &c);
    s3lect_free(s);
    if (status != LUA_OK)
        lua_error(L); /* re-raise (out of memory) now that s is freed */
    lua_rawgeti(L, LUA_REGISTRYINDEX, c.ref);
    luaL_unref(L, LUA_REGISTRYINDEX, c.ref);
}

/* Copies a string option of the elector's configuration into buf; "" if
 * unset or too long. Returns 0 or a negative code. */
static int elector_option(lelector *le, s3lect_option opt, char *buf, size_t len)
{
    buf[0] = '\0';
    s3lect_config *cfg = s3lect_get_config(le->e);
    if (cfg == NULL)
        return S3LECT_ENOMEM;
    int n = s3lect_config_get_str(cfg, opt, buf, len);
    s3lect_config_free(cfg);
    if (n >= 0 && (size_t)n >= len)
        buf[0] = '\0';
    return n < 0 ? n : 0;
}

/* el:peer_response([target[, method]]) -> status, body | nil, message
 * Answers one request to the leadership endpoint as the built-in server
 * would. target defaults to the configured peer_health_path, method to GET. */
static int l_peer_response(lua_State *L)
{
    static const char fn[] = "el:peer_response()";
    lelector *le = check_open(L, 1);
    const char *target = luaL_optstring(L, 2, NULL);
    const char *method = luaL_optstring(L, 3, "GET");
    if (le->in_dispatch)
        return luaL_error(L,
                          "%s: called from inside one of this elector's callbacks (a long "
                          "poll would stall them); call it from your request handler",
                          fn);
    char path[512];
    if (target == NULL) {
        int rc = elector_option(le, S3LECT_OPT_PEER_HEALTH_PATH, path, sizeof path);
        if (rc != S3LECT_OK || path[0] == '\0')
            return push_fail(L, le, fn, rc != S3LECT_OK ? rc : S3LECT_EINVAL);
        target = path;
    }
    int status = 0;
    char *body = NULL;
    int rc = s3lect_peer_response(le->e, method, target, &status, &body);
    if (rc != S3LECT_OK) {
        s3lect_free(body);
        return push_fail(L, le, fn, rc);
    }
    lua_pushinteger(L, status);
    push_and_free(L, body);
    return 2;
}

/* el:peer_port() -> integer (0 when the endpoint is not serving) */
static int l_peer_port(lua_State *L)
{
    lelector *le = check_open(L, 1);
    lua_pushinteger(L, s3lect_peer_port(le->e));
    return 1;
}

static int looks_pem(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    return strncmp(s, "-----BEGIN", 10) == 0;
}

/* el:enable_peer_mode(ca) -> true | nil, message
 * ca: PEM text or the path of a PEM file. */
static int l_enable_peer_mode(lua_State *L)
{
    static const char fn[] = "el:enable_peer_mode()";
    lelector *le = check_open(L, 1);
    size_t len;
    const char *ca = luaL_checklstring(L, 2, &len);
    if (len == 0 || (!looks_pem(ca) && strlen(ca) != len))
        return luaL_argerror(L, 2, "expected PEM text or the path of a PEM file");
    if (!looks_pem(ca)) {
        FILE *f = fopen(ca, "rb");
        if (f == NULL) {
            int err = errno;
            lua_pushnil(L);
            lua_pushfstring(L, "%s: cannot open CA file '%s': %s", fn, ca, strerror(err));
            return 2;
        }
        fclose(f);
    }
    if (!le->started) {
        /* el:start() takes the options as they are: check them now as
         * peer_mode = true with this peer_ca would be checked by s3lect.new
         * (peer_cert and peer_key, or neither: zero-config). */
        s3lect_config *cfg = s3lect_get_config(le->e);
        if (cfg == NULL)
            return push_fail(L, le, fn, S3LECT_ENOMEM);
        int rc = s3lect_config_set_bool(cfg, S3LECT_OPT_PEER_MODE, 1);
        if (rc == S3LECT_OK)
            rc = s3lect_config_set_bytes(cfg, S3LECT_OPT_PEER_CA, ca, len);
        if (rc == S3LECT_OK)
            rc = s3lect_config_validate(cfg);
        if (rc != S3LECT_OK) {
            int n = push_config_fail(L, fn, NULL, cfg, rc);
            s3lect_config_free(cfg);
            return n;
        }
        s3lect_config_free(cfg);
    }
    int rc = s3lect_enable_peer_mode(le->e, ca, len);
    if (rc != S3LECT_OK)
        return push_fail(L, le, fn, rc);
    lua_pushboolean(L, 1);
    return 1;
}

/* el:update_config{lease_timeout = ..., ...} -> true | nil, message */
static int l_update_config(lua_State *L)
{
    static const char fn[] = "el:update_config()";
    lelector *le = check_open(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    /* Check names and types before taking the config, so raising leaks
     * nothing. */
    lua_pushnil(L);
    while (lua_next(L, 2) != 0) {
        const optdef *d = lua_type(L, -2) == LUA_TSTRING ? find_opt(lua_tostring(L, -2)) : NULL;
        if (d != NULL && (d->kind == K_SECONDS || d->kind == K_COUNT) && !d->timing)
            return luaL_error(
                L, "%s: option '%s' cannot change on an existing elector; make a new one", fn,
                d->name);
        if (d == NULL || !d->timing)
            return unknown_option(L, fn, lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?",
                                  1);
        if (lua_type(L, -1) != LUA_TSTRING) /* a string is libs3lect's to parse */
            seconds_to_ms(L, fn, d->name, lua_gettop(L));
        lua_pop(L, 1);
    }
    s3lect_config *cfg = s3lect_get_config(le->e);
    if (cfg == NULL)
        return luaL_error(L, "%s: out of memory", fn);
    int rc = S3LECT_OK;
    const char *bad = NULL;
    lua_pushnil(L);
    while (rc == S3LECT_OK && lua_next(L, 2) != 0) {
        const optdef *d = find_opt(lua_tostring(L, -2));
        rc = apply_option(L, fn, cfg, d, lua_gettop(L));
        if (rc != S3LECT_OK)
            bad = d->name;
        lua_pop(L, 1);
    }
    if (rc == S3LECT_OK) {
        rc = s3lect_update_config(le->e, cfg);
        if (rc != S3LECT_OK) {
            s3lect_config_free(cfg);
            return push_fail(L, le, fn, rc);
        }
    }
    if (rc != S3LECT_OK) {
        int n = push_config_fail(L, fn, bad, cfg, rc);
        s3lect_config_free(cfg);
        return n;
    }
    s3lect_config_free(cfg);
    lua_pushboolean(L, 1);
    return 1;
}

/* el:get_config() -> table of the duration (seconds), count, boolean and string
 * options (not the secrets) */
static int l_get_config(lua_State *L)
{
    lelector *le = check_open(L, 1);
    int64_t v[MAX_OPTDEFS];
    int have[MAX_OPTDEFS];
    s3lect_config *cfg = s3lect_get_config(le->e);
    if (cfg == NULL)
        return luaL_error(L, "el:get_config(): out of memory");
    char *str[MAX_OPTDEFS] = {NULL};
    for (size_t i = 0; i < n_optdefs; i++) {
        int kind = optdefs[i].kind, opt = optdefs[i].opt;
        have[i] = (kind == K_SECONDS || kind == K_COUNT || kind == K_BOOL) &&
                  s3lect_config_get_int(cfg, (s3lect_option)opt, &v[i]) == S3LECT_OK;
        /* the strings too, but the secrets */
        int n = kind == K_STR && !(s3lect_option_flags(opt) & S3LECT_OPTION_SECRET)
                    ? s3lect_config_get_str(cfg, (s3lect_option)opt, NULL, 0)
                    : -1;
        if (n >= 0 && (str[i] = malloc((size_t)n + 1)) != NULL)
            s3lect_config_get_str(cfg, (s3lect_option)opt, str[i], (size_t)n + 1);
    }
    s3lect_config_free(cfg); /* before anything that may raise */
    lua_createtable(L, 0, (int)n_optdefs);
    for (size_t i = 0; i < n_optdefs; i++) {
        if (str[i]) {
            lua_pushstring(L, str[i]);
            free(str[i]);
            lua_setfield(L, -2, optdefs[i].name);
            continue;
        }
        if (!have[i])
            continue;
        if (optdefs[i].kind == K_SECONDS)
            lua_pushnumber(L, (lua_Number)v[i] / 1000.0);
        else if (optdefs[i].kind == K_COUNT)
            lua_pushinteger(L, (lua_Integer)v[i]);
        else if (v[i] < 0) /* path_style unset: automatic */
            continue;
        else
            lua_pushboolean(L, v[i] != 0);
        lua_setfield(L, -2, optdefs[i].name);
    }
    return 1;
}

static int l_tostring(lua_State *L)
{
    lelector *le = check_elector(L, 1);
    if (le->e == NULL) {
        lua_pushfstring(L, "s3lect.elector (closed): %p", (void *)le);
        return 1;
    }
    s3lect_status *st = NULL;
    if (s3lect_get_status(le->e, &st) != S3LECT_OK) {
        lua_pushfstring(L, "s3lect.elector: %p", (void *)le);
        return 1;
    }
    char id[256];
    snprintf(id, sizeof id, "%s", s3lect_status_server_id(st));
    const char *state = s3lect_state_str(s3lect_status_state(st));
    s3lect_status_free(st);
    lua_pushfstring(L, "s3lect.elector(id=%s, %s): %p", id, state, (void *)le);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Module functions                                                         */
/* ------------------------------------------------------------------------ */

static int l_version(lua_State *L)
{
    lua_pushstring(L, s3lect_version());
    lua_pushinteger(L, s3lect_version_number());
    return 2;
}

/* s3lect.metrics_text(el, ...): the Prometheus exposition of the electors
 * (docs/metrics.md), or nil, message. */
static int l_metrics_text(lua_State *L)
{
    int n = lua_gettop(L);
    s3lect_elector **arr = n > 0 ? lua_newuserdata(L, (size_t)n * sizeof *arr) : NULL;
    for (int i = 0; i < n; i++)
        arr[i] = check_open(L, i + 1)->e;
    char *text = NULL;
    int rc = s3lect_metrics_text(arr, (size_t)n, &text);
    if (rc != S3LECT_OK)
        return push_fail(L, NULL, "s3lect.metrics_text()", rc);
    lua_pushstring(L, text);
    s3lect_free(text);
    return 1;
}

static int l_strerror(lua_State *L)
{
    lua_pushstring(L, s3lect_strerror((int)luaL_checkinteger(L, 1)));
    return 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* s3lect.monotonic() -> seconds (a float) on a monotonic clock, for hosts
 * and tests that have none (os.time has 1 s resolution, os.clock is CPU). */
static int l_monotonic(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec / 1e9);
    return 1;
}

#define POLL_MAX 1024

/* s3lect.poll_fd(fd | {fd, ...}, [timeout_ms]) -> boolean | {ready fds} | nil, message
 * A small poll(2) for hosts without one (plain lua5.4, tests). */
static int l_poll_fd(lua_State *L)
{
    int single = lua_type(L, 1) == LUA_TNUMBER;
    if (!single && !lua_istable(L, 1))
        return luaL_argerror(L, 1, "expected a file descriptor or an array of them");
    lua_Number t = luaL_optnumber(L, 2, 0);
    int timeout = t < 0 ? -1 : (t > 2.0e9 ? 2000000000 : (int)ceil(t));

    struct pollfd fds[POLL_MAX];
    size_t n = single ? 1 : s3l_rawlen(L, 1);
    if (n > POLL_MAX)
        return luaL_argerror(L, 1, "too many file descriptors (max 1024)");
    for (size_t i = 0; i < n; i++) {
        if (!single)
            lua_rawgeti(L, 1, (int)i + 1);
        int idx = single ? 1 : -1;
        if (lua_type(L, idx) != LUA_TNUMBER)
            return luaL_argerror(L, 1, "file descriptors must be integers");
        fds[i].fd = (int)lua_tointeger(L, idx);
        fds[i].events = POLLIN;
        fds[i].revents = 0;
        if (!single)
            lua_pop(L, 1);
    }

    int64_t deadline = timeout < 0 ? -1 : now_ms() + timeout;
    int rc;
    for (;;) {
        rc = poll(fds, (nfds_t)n, timeout);
        if (rc >= 0 || errno != EINTR)
            break;
        if (deadline >= 0) {
            int64_t left = deadline - now_ms();
            timeout = left > 0 ? (int)left : 0;
        }
    }
    if (rc < 0) {
        int err = errno;
        lua_pushnil(L);
        lua_pushfstring(L, "s3lect.poll_fd: %s", strerror(err));
        return 2;
    }
    if (single) {
        lua_pushboolean(L, (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0);
        return 1;
    }
    lua_createtable(L, rc, 0);
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (fds[i].revents & (POLLIN | POLLERR | POLLHUP)) {
            lua_pushinteger(L, fds[i].fd);
            lua_rawseti(L, -2, ++k);
        }
    }
    return 1;
}

/* s3lect.options() -> array of {name=, type=, min=, max=, default=, unit=}:
 * every option as libs3lect describes it (s3lect_option_info), ints as the
 * library reports them; type is "string", "int", "bool", "bytes" or the
 * number of a type this binding does not know; unit, for "int" options only,
 * is "ms" (a duration, seconds in s3lect.new) or "count" (an integer in
 * s3lect.new), and nil for an integer option this binding does not know. */
static int l_options(lua_State *L)
{
    static const char *const type_names[] = {NULL, "string", "int", "bool", "bytes"};
    int count = s3lect_option_count();
    lua_createtable(L, count, 0);
    for (int opt = 1; opt <= count; opt++) {
        const char *name = NULL;
        int type = 0;
        int64_t lo = 0, hi = 0, def = 0;
        if (s3lect_option_info(opt, &name, &type, &lo, &hi, &def) != S3LECT_OK)
            continue;
        lua_createtable(L, 0, 7);
        lua_pushinteger(L, opt);
        lua_setfield(L, -2, "opt");
        lua_pushstring(L, name);
        lua_setfield(L, -2, "name");
        if (type >= 1 && type <= 4)
            lua_pushstring(L, type_names[type]);
        else
            lua_pushinteger(L, type);
        lua_setfield(L, -2, "type");
        lua_pushinteger(L, (lua_Integer)lo);
        lua_setfield(L, -2, "min");
        lua_pushinteger(L, (lua_Integer)hi);
        lua_setfield(L, -2, "max");
        lua_pushinteger(L, (lua_Integer)def);
        lua_setfield(L, -2, "default");
        if (type == S3LECT_OPTION_INT) {
            int kind = kind_of_option(opt, type);
            if (kind == K_SECONDS || kind == K_COUNT) {
                lua_pushstring(L, kind == K_SECONDS ? "ms" : "count");
                lua_setfield(L, -2, "unit");
            }
        }
        int flags = s3lect_option_flags(opt); /* libs3lect's facts, as booleans */
        lua_pushboolean(L, (flags & S3LECT_OPTION_SECRET) != 0);
        lua_setfield(L, -2, "secret");
        lua_pushboolean(L, (flags & S3LECT_OPTION_RUNTIME) != 0);
        lua_setfield(L, -2, "runtime");
        lua_pushboolean(L, (flags & S3LECT_OPTION_PROCESS_WIDE) != 0);
        lua_setfield(L, -2, "process_wide");
        lua_rawseti(L, -2, opt);
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Fenced writes                                                            */
/* ------------------------------------------------------------------------ */

/* Frees lf's fence and drops its link to the elector; idempotent. */
static void fence_close(lua_State *L, lfence *lf)
{
    if (lf->le != NULL) {
        lfence **p = &lf->le->fences;
        while (*p != NULL && *p != lf)
            p = &(*p)->next;
        if (*p == lf)
            *p = lf->next;
        lf->le = NULL;
        lf->next = NULL;
    }
    s3lect_fence_free(lf->f);
    lf->f = NULL;
    s3lect_config_free(lf->cfg);
    lf->cfg = NULL;
    luaL_unref(L, LUA_REGISTRYINDEX, lf->el_ref);
    lf->el_ref = LUA_NOREF;
}

/* A new fence userdata on the stack, closed, with its metatable. */
static lfence *new_fence_ud(lua_State *L)
{
    lfence *lf = lua_newuserdata(L, sizeof *lf);
    memset(lf, 0, sizeof *lf);
    lf->el_ref = LUA_NOREF;
    luaL_getmetatable(L, FENCE_MT);
    lua_setmetatable(L, -2);
    return lf;
}

/* Pushes nil, "context: message" and the code; returns 3. */
static int push_fence_fail(lua_State *L, lfence *lf, const char *context, int code)
{
    char msg[512] = "";
    if (lf != NULL && lf->f != NULL)
        s3lect_fence_errmsg(lf->f, msg, sizeof msg);
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", context, msg[0] != '\0' ? msg : s3lect_strerror(code));
    lua_pushinteger(L, code);
    return 3;
}

/* el:fence() -> fence | nil, message, code. Its writes return ENOTLEADER,
 * before anything is sent, while el does not lead. */
static int l_fence(lua_State *L)
{
    lelector *le = check_open(L, 1);
    lfence *lf = new_fence_ud(L);
    int rc = s3lect_fence_new(le->e, &lf->f);
    if (rc != S3LECT_OK)
        return push_fence_fail(L, NULL, "el:fence()", rc);
    lua_pushvalue(L, 1);
    lf->el_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lf->le = le;
    lf->next = le->fences;
    le->fences = lf;
    return 1;
}

/* el:fence_token() -> the token of its leadership, or nil while it does not lead. */
static int l_fence_token(lua_State *L)
{
    lelector *le = check_open(L, 1);
    char buf[512];
    size_t n = s3lect_fence_token(le->e, buf, sizeof buf);
    if (n == 0) {
        lua_pushnil(L);
        return 1;
    }
    if (n < sizeof buf) {
        lua_pushlstring(L, buf, n);
        return 1;
    }
    char *big = lua_newuserdata(L, n + 1); /* collected: nothing leaks on a raise */
    n = s3lect_fence_token(le->e, big, n + 1);
    if (n == 0)
        lua_pushnil(L);
    else
        lua_pushstring(L, big);
    return 1;
}

/* s3lect.fence_from_token(token[, opts]) -> fence | nil, message, code.
 * opts: the store's options as s3lect.new takes them (endpoint, region,
 * access_key_id, profile, request_timeout, ...). */
static int l_fence_from_token(lua_State *L)
{
    static const char fn[] = "s3lect.fence_from_token";
    const char *token = luaL_checkstring(L, 1);
    if (!lua_isnoneornil(L, 2))
        luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    lfence *lf = new_fence_ud(L); /* at 3; __gc frees its config on a raise */
    lf->cfg = s3lect_config_new();
    if (lf->cfg == NULL)
        return luaL_error(L, "%s: out of memory", fn);
    if (lua_istable(L, 2)) {
        for (lua_pushnil(L); lua_next(L, 2) != 0; lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                return luaL_error(L, "%s: option names must be strings, got a %s key", fn,
                                  luaL_typename(L, -2));
            const char *name = lua_tostring(L, -2);
            const optdef *d = find_opt(name);
            if (d == NULL || d->kind == K_CALLBACK)
                return unknown_option(L, fn, name, 0);
            int rc = apply_option(L, fn, lf->cfg, d, lua_gettop(L));
            if (rc != S3LECT_OK) {
                char msg[512] = "";
                s3lect_config_errmsg(lf->cfg, msg, sizeof msg);
                lua_pushnil(L);
                lua_pushfstring(L, "%s: option '%s': %s", fn, name,
                                msg[0] != '\0' ? msg : s3lect_strerror(rc));
                lua_pushinteger(L, rc);
                return 3;
            }
        }
    }
    int rc = s3lect_fence_new_token(lf->cfg, token, &lf->f);
    s3lect_config_free(lf->cfg);
    lf->cfg = NULL;
    if (rc == S3LECT_EINVAL) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: not a fence token (expected s3lect-fence.1.TERM.HOLDER.LOCK)", fn);
        lua_pushinteger(L, rc);
        return 3;
    }
    if (rc != S3LECT_OK)
        return push_fence_fail(L, NULL, fn, rc);
    lua_settop(L, 3);
    return 1;
}

static lfence *check_fence_open(lua_State *L, int idx)
{
    lfence *lf = luaL_checkudata(L, idx, FENCE_MT);
    if (lf->f == NULL)
        luaL_error(L, "s3lect: fence is closed (by f:close(), or by its elector's close)");
    return lf;
}

/* What s3lect_fenced_get gave, library-allocated until pushed. */
typedef struct fenced_read {
    char *body, *version;
    size_t len;
    int ref_body, ref_version;
} fenced_read;

static int push_fenced_read(lua_State *L)
{
    fenced_read *r = lua_touserdata(L, 1);
    if (r->body != NULL)
        lua_pushlstring(L, r->body, r->len);
    else
        lua_pushnil(L);
    r->ref_body = luaL_ref(L, LUA_REGISTRYINDEX);
    if (r->version != NULL)
        lua_pushstring(L, r->version);
    else
        lua_pushnil(L);
    r->ref_version = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

/* Pushes body and version (nil when NULL) and frees them; raises only
 * after they were freed (out of memory). */
static void push_read_and_free(lua_State *L, fenced_read *r)
{
    r->ref_body = r->ref_version = LUA_NOREF;
    int status = s3l_cpcall(L, push_fenced_read, r);
    s3lect_free(r->body);
    s3lect_free(r->version);
    r->body = r->version = NULL;
    if (status != LUA_OK) {
        luaL_unref(L, LUA_REGISTRYINDEX, r->ref_body);
        lua_error(L);
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->ref_body);
    luaL_unref(L, LUA_REGISTRYINDEX, r->ref_body);
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->ref_version);
    luaL_unref(L, LUA_REGISTRYINDEX, r->ref_version);
}

/* f:get(url) -> body, version, term | nil, message, code[, version, term]:
 * on ENOTFOUND after a fenced delete, the tombstone's version and term (a
 * create can go over it: f:cas(url, data, version)). */
static int l_fence_get(lua_State *L)
{
    lfence *lf = check_fence_open(L, 1);
    const char *url = luaL_checkstring(L, 2);
    fenced_read r = {.body = NULL};
    int64_t term = 0;
    int rc = s3lect_fenced_get(lf->f, url, &r.body, &r.len, &r.version, &term);
    char msg[512] = "";
    if (rc != S3LECT_OK)
        s3lect_fence_errmsg(lf->f, msg, sizeof msg);
    push_read_and_free(L, &r); /* body, version */
    if (rc == S3LECT_OK) {
        lua_pushinteger(L, (lua_Integer)term);
        return 3;
    }
    lua_pushnil(L);
    lua_pushfstring(L, "f:get(): %s", msg[0] != '\0' ? msg : s3lect_strerror(rc));
    lua_pushinteger(L, rc);
    if (rc != S3LECT_ENOTFOUND)
        return 3;
    lua_pushvalue(L, -4); /* the tombstone's version (nil: no object at all) */
    lua_pushinteger(L, (lua_Integer)term);
    return 5;
}

/* The result of a fenced write: true | nil, message, code. */
static int fence_result(lua_State *L, lfence *lf, const char *what, int rc)
{
    if (rc != S3LECT_OK)
        return push_fence_fail(L, lf, what, rc);
    lua_pushboolean(L, 1);
    return 1;
}

/* f:put(url, data) -> true | nil, message, code */
static int l_fence_put(lua_State *L)
{
    lfence *lf = check_fence_open(L, 1);
    const char *url = luaL_checkstring(L, 2);
    size_t len;
    const char *data = luaL_checklstring(L, 3, &len);
    return fence_result(L, lf, "f:put()", s3lect_fenced_put(lf->f, url, data, len));
}

/* f:cas(url, data, version_or_nil) -> true | nil, message, code; nil:
 * only where there is no object at all. */
static int l_fence_cas(lua_State *L)
{
    lfence *lf = check_fence_open(L, 1);
    const char *url = luaL_checkstring(L, 2);
    size_t len;
    const char *data = luaL_checklstring(L, 3, &len);
    const char *version = luaL_optstring(L, 4, NULL);
    return fence_result(L, lf, "f:cas()", s3lect_fenced_cas(lf->f, url, data, len, version));
}

/* f:delete(url) -> true | nil, message, code */
static int l_fence_delete(lua_State *L)
{
    lfence *lf = check_fence_open(L, 1);
    const char *url = luaL_checkstring(L, 2);
    return fence_result(L, lf, "f:delete()", s3lect_fenced_delete(lf->f, url));
}

/* f:close(), __close and __gc; idempotent. */
static int l_fence_close(lua_State *L)
{
    fence_close(L, luaL_checkudata(L, 1, FENCE_MT));
    return 0;
}

static int l_fence_tostring(lua_State *L)
{
    lfence *lf = luaL_checkudata(L, 1, FENCE_MT);
    lua_pushfstring(L, "s3lect.fence%s: %p", lf->f == NULL ? " (closed)" : "", (void *)lf);
    return 1;
}

static const luaL_Reg fence_methods[] = {
    {"get", l_fence_get},       {"put", l_fence_put},     {"cas", l_fence_cas},
    {"delete", l_fence_delete}, {"close", l_fence_close}, {NULL, NULL},
};

static const luaL_Reg fence_meta[] = {
    {"__gc", l_fence_close},
    {"__close", l_fence_close},
    {"__tostring", l_fence_tostring},
    {NULL, NULL},
};

static const luaL_Reg elector_methods[] = {
    {"start", l_start},
    {"stop", l_stop},
    {"close", l_close},
    {"dispatch", l_dispatch},
    {"next_event", l_next_event},
    {"fd", l_fd},
    {"is_leader", l_is_leader},
    {"term", l_term},
    {"cycle", l_cycle},
    {"leader_id", l_leader_id},
    {"status", l_status},
    {"status_json", l_status_json},
    {"update_config", l_update_config},
    {"get_config", l_get_config},
    {"peer_response", l_peer_response},
    {"peer_port", l_peer_port},
    {"enable_peer_mode", l_enable_peer_mode},
    {"fence", l_fence},
    {"fence_token", l_fence_token},
    {"transfer", l_transfer},
    {"transfer_commit", l_transfer_commit},
    {NULL, NULL},
};

static const luaL_Reg elector_meta[] = {
    {"__gc", l_gc},
    {"__close", l_close},
    {"__tostring", l_tostring},
    {NULL, NULL},
};

/* ------------------------------------------------------------------------ */
/* Test helpers: virtual clocks and the mem:// store                        */
/* ------------------------------------------------------------------------ */

/* s3lect.clock([wall_start_s]) -> clock: virtual time 0, whose electors'
 * wall clock reads wall_start_s (seconds since the epoch, default 0) then. */
static int l_clock(lua_State *L)
{
    lua_Number wall = luaL_optnumber(L, 1, 0);
    if (!isfinite((double)wall) || fabs((double)wall) > 9.0e12)
        return luaL_error(L, "s3lect.clock(): wall_start must be a finite number of seconds");
    lclock *lc = lua_newuserdata(L, sizeof *lc);
    memset(lc, 0, sizeof *lc);
    lc->els_ref = LUA_NOREF;
    luaL_getmetatable(L, CLOCK_MT);
    lua_setmetatable(L, -2);
    lua_newtable(L); /* its electors, weakly: they may be collected */
    lua_newtable(L);
    lua_pushliteral(L, "v");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lc->els_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lc->c = s3lect_clock_new((int64_t)llround((double)wall * 1000.0));
    if (lc->c == NULL)
        return luaL_error(L, "s3lect.clock(): out of memory");
    return 1;
}

static lclock *check_clock(lua_State *L)
{
    lclock *lc = luaL_checkudata(L, 1, CLOCK_MT);
    if (lc->c == NULL)
        luaL_error(L, "s3lect: clock is closed");
    return lc;
}

/* c:advance(seconds) -> true | nil, message: runs the electors made on c
 * through that much virtual time, then the callbacks of the events they
 * raised, elector by elector in the order they were made. */
static int l_clock_advance(lua_State *L)
{
    lclock *lc = check_clock(L);
    int64_t ms = seconds_to_ms(L, "c:advance()", "seconds", 2);
    if (ms < 0)
        return luaL_error(L, "c:advance(): seconds must not be negative");
    lua_settop(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, lc->els_ref); /* 2 */
    for (lua_Integer i = 1; i <= lc->n_els; i++) {
        lua_rawgeti(L, 2, (int)i);
        lelector *le = s3l_testudata(L, -1, ELECTOR_MT);
        if (le != NULL && le->in_dispatch)
            return luaL_error(L, "c:advance(): called from a callback that an advance of this "
                                 "clock runs; return from the callback instead");
        lua_pop(L, 1);
    }
    int rc = s3lect_clock_advance(lc->c, ms);
    if (rc != S3LECT_OK) {
        lua_pushnil(L);
        lua_pushfstring(L, "c:advance(): %s", s3lect_strerror(rc));
        return 2;
    }
    for (lua_Integer i = 1; i <= lc->n_els; i++) {
        lua_rawgeti(L, 2, (int)i);
        lelector *le = s3l_testudata(L, -1, ELECTOR_MT);
        if (le != NULL && le->e != NULL && le->started && !le->stopped)
            dispatch_round(L, le, 0); /* a yield error is raised from here, as in dispatch */
        lua_pop(L, 1);
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* c:now() -> seconds of virtual time since the clock's start. */
static int l_clock_now(lua_State *L)
{
    lclock *lc = check_clock(L);
    lua_pushnumber(L, (lua_Number)s3lect_clock_now(lc->c) / 1000.0);
    return 1;
}

/* c:set_latency(seconds) -> true: every store request is answered this
 * long after it is sent (default 0). */
static int l_clock_set_latency(lua_State *L)
{
    lclock *lc = check_clock(L);
    int64_t ms = seconds_to_ms(L, "c:set_latency()", "seconds", 2);
    if (s3lect_clock_set_latency(lc->c, ms) != S3LECT_OK)
        return luaL_error(L, "c:set_latency(): seconds must not be negative");
    lua_pushboolean(L, 1);
    return 1;
}

/* c:close(): lets go of the clock (its electors keep what they need). */
static int l_clock_close(lua_State *L)
{
    lclock *lc = luaL_checkudata(L, 1, CLOCK_MT);
    if (lc->c != NULL) {
        s3lect_clock_free(lc->c);
        lc->c = NULL;
    }
    luaL_unref(L, LUA_REGISTRYINDEX, lc->els_ref);
    lc->els_ref = LUA_NOREF;
    return 0;
}

static int l_clock_tostring(lua_State *L)
{
    lclock *lc = luaL_checkudata(L, 1, CLOCK_MT);
    if (lc->c == NULL)
        lua_pushliteral(L, "s3lect.clock (closed)");
    else
        lua_pushfstring(L, "s3lect.clock (%f s)", (lua_Number)s3lect_clock_now(lc->c) / 1000.0);
    return 1;
}

/* The NAME of "mem://NAME[/KEY]" at idx (or NAME itself), on the stack top. */
static const char *mem_name(lua_State *L, int idx)
{
    const char *s = luaL_checkstring(L, idx);
    if (strncmp(s, "mem://", 6) == 0 || strncmp(s, "MEM://", 6) == 0)
        s += 6;
    lua_pushlstring(L, s, strcspn(s, "/"));
    return lua_tostring(L, -1);
}

/* s3lect.mem_reset(lock) -> true | nil, message: drops every object of
 * mem://NAME (a fresh store for the next test). */
static int l_mem_reset(lua_State *L)
{
    int rc = s3lect_mem_reset(mem_name(L, 1));
    if (rc != S3LECT_OK) {
        lua_pushnil(L);
        lua_pushfstring(L, "s3lect.mem_reset(): not a mem:// lock or name: %s", lua_tostring(L, 1));
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* s3lect.mem_fail(lock, n) -> true | nil, message: the next n requests to
 * mem://NAME fail as a store outage does (0: none). */
static int l_mem_fail(lua_State *L)
{
    lua_Number n = luaL_checknumber(L, 2);
    if (!(n >= 0) || n != floor(n) || n > 9.0e15)
        return luaL_error(L, "s3lect.mem_fail(): n must be a whole number >= 0");
    int rc = s3lect_mem_fail(mem_name(L, 1), (int64_t)n);
    if (rc != S3LECT_OK) {
        lua_pushnil(L);
        lua_pushfstring(L, "s3lect.mem_fail(): not a mem:// lock or name: %s", lua_tostring(L, 1));
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

static const luaL_Reg clock_methods[] = {
    {"advance", l_clock_advance}, {"now", l_clock_now}, {"set_latency", l_clock_set_latency},
    {"close", l_clock_close},     {NULL, NULL},
};

static const luaL_Reg clock_meta[] = {
    {"__gc", l_clock_close},
    {"__close", l_clock_close},
    {"__tostring", l_clock_tostring},
    {NULL, NULL},
};

static const luaL_Reg module_funcs[] = {
    {"clock", l_clock},
    {"mem_reset", l_mem_reset},
    {"mem_fail", l_mem_fail},
    {"new", l_new},
    {"version", l_version},
    {"strerror", l_strerror},
    {"poll_fd", l_poll_fd},
    {"monotonic", l_monotonic},
    {"options", l_options},
    {"metrics_text", l_metrics_text},
    {"fence_from_token", l_fence_from_token},
    {NULL, NULL},
};

static const struct {
    const char *name;
    int code;
} error_codes[] = {
    {"OK", S3LECT_OK},
    {"EINVAL", S3LECT_EINVAL},
    {"ENOMEM", S3LECT_ENOMEM},
    {"ESTATE", S3LECT_ESTATE},
    {"EBUSY", S3LECT_EBUSY},
    {"ETIMEDOUT", S3LECT_ETIMEDOUT},
    {"ESTOPPED", S3LECT_ESTOPPED},
    {"EAUTH", S3LECT_EAUTH},
    {"ETRANSIENT", S3LECT_ETRANSIENT},
    {"EFATAL", S3LECT_EFATAL},
    {"ECORRUPT", S3LECT_ECORRUPT},
    {"EPRECONDITION", S3LECT_EPRECONDITION},
    {"ENOTFOUND", S3LECT_ENOTFOUND},
    {"EIO", S3LECT_EIO},
    {"EUNSUPPORTED", S3LECT_EUNSUPPORTED},
    {"ECALLBACK", S3LECT_ECALLBACK},
    {"EFENCED", S3LECT_EFENCED},
    {"ENOTLEADER", S3LECT_ENOTLEADER},
    {"ERETRIES", S3LECT_ERETRIES},
};

/* Keeps this module mapped until the process exits. The library's shared
 * runtime threads (linked into the module) outlive every elector, and the
 * interpreter unloads C modules when its state closes (lua_close at exit
 * dlcloses them): a runtime thread still running then executed unmapped
 * code (a SIGSEGV at exit, seen under LuaJIT). Best effort: without dladdr
 * the module stays as it was. */
static void pin_module(void)
{
    Dl_info info;
    if (dladdr((void *)pin_module, &info) != 0 && info.dli_fname != NULL)
        (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

static pthread_once_t pin_once = PTHREAD_ONCE_INIT;

__attribute__((visibility("default"))) int luaopen_s3lect(lua_State *L)
{
    pthread_once(&pin_once, pin_module);
    if (pthread_once(&optdefs_once, build_optdefs) != 0)
        return luaL_error(L, "s3lect: cannot build the option table");
    luaL_newmetatable(L, ELECTOR_MT);
    s3l_setfuncs(L, elector_meta);
    lua_newtable(L);
    s3l_setfuncs(L, elector_methods);
    lua_setfield(L, -2, "__index");
    lua_pushliteral(L, "s3lect.elector");
    lua_setfield(L, -2, "__name");
    lua_pop(L, 1);
    luaL_newmetatable(L, FENCE_MT);
    s3l_setfuncs(L, fence_meta);
    lua_newtable(L);
    s3l_setfuncs(L, fence_methods);
    lua_setfield(L, -2, "__index");
    lua_pushliteral(L, "s3lect.fence");
    lua_setfield(L, -2, "__name");
    lua_pop(L, 1);
    luaL_newmetatable(L, CLOCK_MT);
    s3l_setfuncs(L, clock_meta);
    lua_newtable(L);
    s3l_setfuncs(L, clock_methods);
    lua_setfield(L, -2, "__index");
    lua_pushliteral(L, "s3lect.clock");
    lua_setfield(L, -2, "__name");
    lua_pop(L, 1);

    lua_newtable(L);
    s3l_setfuncs(L, module_funcs);
    lua_pushstring(L, s3lect_version());
    lua_setfield(L, -2, "_VERSION");
    for (size_t i = 0; i < sizeof error_codes / sizeof error_codes[0]; i++) {
        lua_pushinteger(L, error_codes[i].code);
        lua_setfield(L, -2, error_codes[i].name);
    }
    return 1;
}
