/* SPDX-License-Identifier: Apache-2.0 */
/* s3lect.c - the public API: argument checks, handle life cycle, getters. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "crypto.h"
#include "elector.h"
#include "peer.h"
#include "store.h"
#include "util.h"

/* ---- static strings ---- */

const char *s3lect_version(void)
{
    return S3LECT_VERSION_STRING;
}

int s3lect_version_number(void)
{
    return S3LECT_VERSION_NUMBER;
}

void s3lect_free(void *ptr)
{
    free(ptr);
}

const char *s3lect_lost_reason_str(int reason)
{
    switch (reason) {
    case S3LECT_LOST_RELEASED:
        return "released";
    case S3LECT_LOST_LEASE_EXPIRED:
        return "lease_expired";
    case S3LECT_LOST_LOST_RACE:
        return "lost_race";
    case S3LECT_LOST_HOOK_FAILED:
        return "hook_failed";
    case S3LECT_LOST_STOPPED:
        return "stopped";
    case S3LECT_LOST_RENEW_TIMEOUT:
        return "renew_timeout";
    case S3LECT_LOST_TRANSFERRED:
        return "transferred";
    default:
        return "none";
    }
}

const char *s3lect_event_type_str(int type)
{
    switch (type) {
    case S3LECT_EVENT_ACQUIRED:
        return "acquired";
    case S3LECT_EVENT_LOST:
        return "lost";
    case S3LECT_EVENT_LEADER_CHANGED:
        return "leader_changed";
    case S3LECT_EVENT_ERROR:
        return "error";
    case S3LECT_EVENT_CYCLE:
        return "cycle";
    case S3LECT_EVENT_TRANSFER:
        return "transfer";
    default:
        return "unknown";
    }
}

const char *s3lect_state_str(int state)
{
    switch (state) {
    case S3LECT_STATE_NEW:
        return "new";
    case S3LECT_STATE_FOLLOWER_TRANSITION:
        return "follower_transition";
    case S3LECT_STATE_FOLLOWER_STABLE:
        return "follower_stable";
    case S3LECT_STATE_LEADER:
        return "leader";
    case S3LECT_STATE_STOPPED:
        return "stopped";
    case S3LECT_STATE_BACKOFF:
        return "backoff";
    default:
        return "unknown";
    }
}

/* ---- events: s3lect_event is the engine's el_event ---- */

#define EV(ev) ((const el_event *)(ev))
int s3lect_event_type(const s3lect_event *ev)
{
    return ev ? EV(ev)->type : 0;
}
int64_t s3lect_event_term(const s3lect_event *ev)
{
    return ev ? EV(ev)->term : 0;
}
int s3lect_event_reason(const s3lect_event *ev)
{
    return ev ? EV(ev)->reason : 0;
}
int s3lect_event_code(const s3lect_event *ev)
{
    return ev ? EV(ev)->code : 0;
}
uint64_t s3lect_event_cycle(const s3lect_event *ev)
{
    return ev ? EV(ev)->cycle : 0;
}
const char *s3lect_event_leader_id(const s3lect_event *ev)
{
    return ev && EV(ev)->leader_id ? EV(ev)->leader_id : "";
}
const char *s3lect_event_leader_addr(const s3lect_event *ev)
{
    return ev && EV(ev)->leader_addr ? EV(ev)->leader_addr : "";
}
const char *s3lect_event_message(const s3lect_event *ev)
{
    return ev && EV(ev)->message ? EV(ev)->message : "";
}

/* ---- life cycle ---- */

static int validate(s3lect_config *c, st_location *loc);
static int validate_rest(s3lect_config *c);

static void free_handle(s3lect_elector *e)
{
    rt_release(e); /* the runtime's last elector stops its threads */
    rt_vclock_detach(e);
    for (int i = 0; i < RT_NCALLBACKS; i++)
        if (e->cb[i].userdata_free)
            e->cb[i].userdata_free(e->cb[i].userdata);
    rt_free_queue(e);
    el_free(&e->eng);
    peer_client_free(e->pc);
    peer_client_free(e->pending_pc);
    peer_identity_free(e->pid);
    free(e->peer_etag);
    st_destroy(e->store);
    free(e->key);
    free(e->lock_shown);
    free(e->lock_label);
    free(e->vetoes);
    if (e->evfd >= 0)
        close(e->evfd);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->state_cv);
    pthread_cond_destroy(&e->q_cv);
    s3lect_config_free(e->cfg);
    free(e);
}

static int init_sync(s3lect_elector *e)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC))
        return -1;
    int rc = pthread_mutex_init(&e->mu, NULL) || pthread_cond_init(&e->state_cv, &ca) ||
             pthread_cond_init(&e->q_cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc ? -1 : 0;
}

int s3lect_new(s3lect_config *cfg, s3lect_elector **out)
{
    if (!out)
        return S3LECT_EINVAL;
    *out = NULL;
    if (!cfg)
        return S3LECT_EINVAL;
    st_location loc; /* the lock, parsed once: validation hands it to the store */
    int rc = validate(cfg, &loc);
    if (rc)
        return rc;
    s3lect_elector *e = calloc(1, sizeof *e);
    if (!e) {
        st_location_clear(&loc);
        return S3LECT_ENOMEM;
    }
    e->evfd = -1;
    if (init_sync(e) != 0) {
        free(e);
        st_location_clear(&loc);
        return cfg_fail(cfg, S3LECT_EIO, "cannot initialise mutexes");
    }
    if (!(e->cfg = s3lect_config_dup(cfg)) || !(e->lock_shown = st_lock_display(e->cfg->lock)) ||
        !(e->lock_label = st_location_canonical(&loc, e->cfg->lock))) {
        free_handle(e);
        st_location_clear(&loc);
        return S3LECT_ENOMEM;
    }
    if (e->cfg->poll_mode && (e->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        free_handle(e);
        st_location_clear(&loc);
        return cfg_fail(cfg, S3LECT_EIO, "eventfd: %s", strerror(errno));
    }
    char err[512] = "";
    /* Peer-mode followers that read the store take turns through a roster
     * next to the lock (engine/roster.h); never next to a custom store's
     * key, whose functions may not tell keys apart. */
    int roster = e->cfg->peer_mode && loc.scheme != &st_custom_scheme;
    int stale_reads = loc.scheme && (loc.scheme->flags & ST_SCHEME_STALE_READS);
    rc = st_open(e->cfg, &loc, &e->store, err, sizeof err);
    if (rc == 0) {
        e->key = loc.key;
        loc.key = NULL;
    }
    st_location_clear(&loc);
    if (rc) {
        free_handle(e);
        return cfg_fail(cfg, rc, "%s", err[0] ? err : s3lect_strerror(rc));
    }
    if (e->cfg->peer_mode && (rc = peer_client_new(e->cfg, &e->pc, err, sizeof err)) != 0) {
        free_handle(e);
        return cfg_fail(cfg, rc, "peer mode: %s", err);
    }
    uint8_t rnd[24];
    if (cr_random(rnd, sizeof rnd) != 0) {
        free_handle(e);
        return cfg_fail(cfg, S3LECT_EIO, "no random bytes available");
    }
    cr_hex(rnd, 16, e->incarnation);
    uint64_t seed;
    memcpy(&seed, rnd + 16, sizeof seed);
    if (e->cfg->vclock && (rc = rt_vclock_attach(e, &seed)) != 0) { /* a fixed seed */
        free_handle(e);
        return rc;
    }
    el_params p = rt_params(e->cfg);
    p.xfer_off = stale_reads;
    rc = el_init(&e->eng, &p, e->cfg->server_id, e->cfg->server_addr, e->incarnation, seed);
    if (rc == 0) { /* the successor key: 16 more random bytes, never shown by the endpoint */
        uint8_t sk[16];
        char hex[33];
        rc = cr_random(sk, sizeof sk) != 0 ? S3LECT_EIO : 0;
        if (rc == 0) {
            cr_hex(sk, sizeof sk, hex);
            memcpy(e->succ_key, hex, sizeof hex);
            rc = el_set_succ_key(&e->eng, hex);
        }
        if (rc == 0) /* what a transfer's confirmation names (one successor) */
            rc = el_set_process(&e->eng, peer_process_token());
        if (rc == 0 && roster) {
            char *rk = st_sibling_key(e->store, e->key, ".s3lect-roster");
            rc = rk ? el_set_roster(&e->eng, rk) : S3LECT_ENOMEM;
            free(rk);
        }
        if (rc)
            el_free(&e->eng);
    }
    if (rc) {
        free_handle(e);
        return rc;
    }
    *out = e;
    return 0;
}

static int set_cb(s3lect_elector *e, int slot, s3lect_event_fn fn, s3lect_acquire_fn hook, void *ud,
                  s3lect_free_fn ud_free)
{
    pthread_mutex_lock(&e->mu);
    if (e->started) {
        pthread_mutex_unlock(&e->mu);
        if (ud_free)
            ud_free(ud);
        return rt_fail(e, S3LECT_ESTATE, "callbacks must be set before s3lect_start");
    }
    rt_callback old = e->cb[slot];
    e->cb[slot] = (rt_callback){fn, hook, ud, ud_free};
    pthread_mutex_unlock(&e->mu);
    if (old.userdata_free)
        old.userdata_free(old.userdata);
    return 0;
}

int s3lect_set_callback(s3lect_elector *e, s3lect_event_kind type, s3lect_event_fn fn,
                        void *userdata, s3lect_free_fn userdata_free)
{
    if (!e || type < S3LECT_EVENT_ACQUIRED || type > S3LECT_EVENT_TRANSFER) {
        if (userdata_free)
            userdata_free(userdata);
        return e ? rt_fail(e, S3LECT_EINVAL, "unknown event type %d", (int)type) : S3LECT_EINVAL;
    }
    return set_cb(e, (int)type, fn, NULL, userdata, userdata_free);
}

int s3lect_set_acquire_hook(s3lect_elector *e, s3lect_acquire_fn fn, void *userdata,
                            s3lect_free_fn userdata_free)
{
    if (!e) {
        if (userdata_free)
            userdata_free(userdata);
        return S3LECT_EINVAL;
    }
    return set_cb(e, 0, NULL, fn, userdata, userdata_free);
}

int s3lect_require_heartbeat(s3lect_elector *e, int64_t timeout_ms)
{
    if (!e || timeout_ms < 0)
        return S3LECT_EINVAL;
    pthread_mutex_lock(&e->mu);
    e->hb_timeout = timeout_ms;
    e->hb_at = rt_now(e);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int s3lect_heartbeat(s3lect_elector *e)
{
    if (!e)
        return S3LECT_EINVAL;
    pthread_mutex_lock(&e->mu);
    e->hb_at = rt_now(e);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int s3lect_start(s3lect_elector *e)
{
    return e ? rt_start(e) : S3LECT_EINVAL;
}

int s3lect_stop(s3lect_elector *e)
{
    return e ? rt_stop(e, 1) : S3LECT_EINVAL;
}

int s3lect_stop_no_release(s3lect_elector *e)
{
    return e ? rt_stop(e, 0) : S3LECT_EINVAL;
}

int s3lect_stop_many(s3lect_elector *const *electors, size_t n)
{
    if (!electors && n)
        return S3LECT_EINVAL;
    return rt_stop_many(electors, n, 1);
}

int s3lect_free_elector(s3lect_elector *e)
{
    if (!e)
        return 0;
    int rc = rt_stop(e, 1);
    if (rc)
        return rc;
    free_handle(e);
    return 0;
}

/* ---- getters ---- */

#define LOCKED(e, expr)                                                                            \
    ({                                                                                             \
        pthread_mutex_lock(&((s3lect_elector *)(e))->mu);                                          \
        __typeof__(expr) v_ = (expr);                                                              \
        pthread_mutex_unlock(&((s3lect_elector *)(e))->mu);                                        \
        v_;                                                                                        \
    })

int s3lect_is_leader(const s3lect_elector *e)
{
    if (!e)
        return 0;
    int64_t now = rt_now(e);
    return LOCKED(e, el_is_leader(&e->eng, now));
}

int64_t s3lect_term(const s3lect_elector *e)
{
    return e ? LOCKED(e, e->eng.max_term) : 0;
}

uint64_t s3lect_cycle(const s3lect_elector *e)
{
    return e ? LOCKED(e, e->eng.cycle) : 0;
}

/* The leader as this node knows it: itself while leading, else the record's. */
static const char *leader_id_locked(const s3lect_elector *e, int64_t now)
{
    if (el_is_leader(&e->eng, now))
        return e->eng.id;
    if (e->eng.role == EL_LEADER || e->eng.corrupt || e->eng.exists != 1 ||
        rec_released(&e->eng.cur))
        return "";
    return e->eng.cur.leader_id ? e->eng.cur.leader_id : "";
}

size_t s3lect_leader_id(const s3lect_elector *e, char *buf, size_t buflen)
{
    if (!e)
        return u_copyout("", buf, buflen);
    s3lect_elector *m = (s3lect_elector *)e;
    pthread_mutex_lock(&m->mu);
    size_t n = u_copyout(leader_id_locked(e, rt_now(e)), buf, buflen);
    pthread_mutex_unlock(&m->mu);
    return n;
}

size_t s3lect_errmsg(const s3lect_elector *e, char *buf, size_t buflen)
{
    if (!e)
        return u_copyout("NULL elector", buf, buflen);
    s3lect_elector *m = (s3lect_elector *)e;
    pthread_mutex_lock(&m->mu);
    size_t n = u_copyout(m->errmsg, buf, buflen);
    pthread_mutex_unlock(&m->mu);
    return n;
}

int s3lect_errcode(const s3lect_elector *e)
{
    if (!e)
        return S3LECT_EINVAL;
    s3lect_elector *m = (s3lect_elector *)e;
    pthread_mutex_lock(&m->mu);
    int code = m->errcode;
    pthread_mutex_unlock(&m->mu);
    return code;
}

/* ---- waiting ---- */

static int wait_until(s3lect_elector *e, int64_t timeout_ms, int (*done)(s3lect_elector *, void *),
                      void *arg)
{
    if (rt_in_store_call()) /* a worker of the runtime: it may be the one to wake it */
        return rt_fail(e, S3LECT_EBUSY,
                       "waiting from a custom store function would deadlock: it runs on a worker "
                       "thread of the runtime, which may be the one that would wake it");
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : u_mono_ms() + timeout_ms;
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    for (;;) {
        if (done(e, arg))
            break;
        if (e->stopped || e->stop_req || e->eng.role == EL_STOPPED) {
            rc = S3LECT_ESTOPPED;
            break;
        }
        if (timeout_ms >= 0 && u_mono_ms() >= deadline) {
            rc = S3LECT_ETIMEDOUT;
            break;
        }
        if (timeout_ms < 0) {
            pthread_cond_wait(&e->state_cv, &e->mu);
        } else {
            struct timespec ts = u_cond_deadline(deadline, 0);
            pthread_cond_timedwait(&e->state_cv, &e->mu, &ts);
        }
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

static int is_leader_done(s3lect_elector *e, void *arg)
{
    (void)arg;
    return el_is_leader(&e->eng, rt_now(e));
}

static int cycle_done(s3lect_elector *e, void *arg)
{
    return e->eng.cycle > *(uint64_t *)arg;
}

int s3lect_wait_for_leadership(s3lect_elector *e, int64_t timeout_ms)
{
    return e ? wait_until(e, timeout_ms, is_leader_done, NULL) : S3LECT_EINVAL;
}

int s3lect_wait_for_next_election(s3lect_elector *e, uint64_t since, int64_t timeout_ms,
                                  uint64_t *cycle_out)
{
    if (!e)
        return S3LECT_EINVAL;
    int rc = wait_until(e, timeout_ms, cycle_done, &since);
    if (cycle_out)
        *cycle_out = s3lect_cycle(e);
    return rc;
}

/* ---- configuration at run time ---- */

int s3lect_update_config(s3lect_elector *e, s3lect_config *cfg)
{
    if (!e || !cfg)
        return S3LECT_EINVAL;
    int rc = cfg_validate_timing(cfg);
    if (rc)
        return rt_fail(e, rc, "%s", cfg->errmsg);
    pthread_mutex_lock(&e->mu);
    int64_t bound = e->cfg->max_lease_timeout;
    if (bound > 0 && cfg->lease_timeout > bound) {
        pthread_mutex_unlock(&e->mu);
        return rt_fail(e, S3LECT_EINVAL,
                       "lease_timeout (%lld ms) must not exceed this elector's "
                       "max_lease_timeout (%lld ms), which is fixed at creation",
                       (long long)cfg->lease_timeout, (long long)bound);
    }
    e->cfg->lease_timeout = cfg->lease_timeout;
    e->cfg->renew_interval = cfg->renew_interval;
    e->cfg->renew_deadline = cfg->renew_deadline;
    e->cfg->frequent_interval = cfg->frequent_interval;
    e->cfg->infrequent_interval = cfg->infrequent_interval;
    e->cfg->max_clock_skew = cfg->max_clock_skew;
    e->cfg->peer_timeout = cfg->peer_timeout;
    e->cfg->request_timeout = cfg->request_timeout;
    for (int opt = 1; opt <= s3lect_option_count(); opt++) /* which of them were set */
        if (s3lect_option_flags(opt) & S3LECT_OPTION_RUNTIME)
            e->cfg->set = (e->cfg->set & ~((uint64_t)1 << opt)) | (cfg->set & ((uint64_t)1 << opt));
    if (e->started && !e->stopped) {
        e->params_changed = 1;
        rt_kick_locked(e);
    } else {
        el_params p = rt_params(e->cfg);
        el_set_params(&e->eng, &p);
    }
    pthread_mutex_unlock(&e->mu);
    return 0;
}

s3lect_config *s3lect_get_config(const s3lect_elector *e)
{
    return e ? LOCKED(e, s3lect_config_dup(e->cfg)) : NULL;
}

/* ---- poll mode ---- */

int s3lect_event_fd(s3lect_elector *e)
{
    return e ? rt_event_fd(e) : S3LECT_EINVAL;
}

int s3lect_dispatch(s3lect_elector *e, int64_t timeout_ms)
{
    return e ? rt_dispatch(e, timeout_ms) : S3LECT_EINVAL;
}

/* ---- status ---- */

struct s3lect_status {
    int is_leader, state, corrupt, last_error;
    int64_t term, last_updated, last_seen, lease_remaining, fails, last_cycle_wall;
    uint64_t cycle;
    char *server_id, *leader_id, *leader_addr, *etag, *error_msg, *lock;
    uint64_t peer_fails[PEER_FAIL_NCLASSES]; /* failed peer checks by class */
    char *peer_last_fail;
};

void s3lect_status_free(s3lect_status *st)
{
    if (!st)
        return;
    free(st->server_id);
    free(st->leader_id);
    free(st->leader_addr);
    free(st->etag);
    free(st->error_msg);
    free(st->lock);
    free(st->peer_last_fail);
    free(st);
}

static s3lect_status *snapshot(const s3lect_elector *e)
{
    s3lect_status *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    s3lect_elector *m = (s3lect_elector *)e;
    pthread_mutex_lock(&m->mu);
    const el_engine *g = &e->eng;
    int64_t now = rt_now(e);
    st->is_leader = el_is_leader(g, now);
    st->state = e->started ? el_state(g, now) : S3LECT_STATE_NEW;
    if (e->stopped)
        st->state = S3LECT_STATE_STOPPED;
    st->term = g->max_term;
    st->corrupt = g->corrupt;
    st->last_error = g->last_error;
    st->fails = g->consecutive_fails;
    st->cycle = g->cycle;
    st->last_seen = g->seen_wall;
    st->last_cycle_wall = e->last_cycle_wall;
    int have = g->exists == 1 && !g->corrupt && !rec_released(&g->cur);
    st->last_updated = have ? g->cur.last_updated_ms : 0;
    st->lease_remaining = st->is_leader ? g->renewed_at + g->p.renew_deadline - now : 0;
    const char *lid = leader_id_locked(e, now);
    st->server_id = u_strdup(g->id);
    st->leader_id = u_strdup(lid);
    st->leader_addr = u_strdup(lid[0] ? (st->is_leader ? g->addr : g->cur.leader_addr) : "");
    st->etag = u_strdup(g->etag ? g->etag : "");
    st->error_msg = u_strdup(g->last_error_msg ? g->last_error_msg : "");
    st->lock = u_strdup(e->lock_shown);
    memcpy(st->peer_fails, e->peer_fails.count, sizeof st->peer_fails);
    st->peer_last_fail = u_strdup(e->peer_last_fail);
    pthread_mutex_unlock(&m->mu);
    if (!st->server_id || !st->leader_id || !st->leader_addr || !st->etag || !st->error_msg ||
        !st->lock || !st->peer_last_fail) {
        s3lect_status_free(st);
        return NULL;
    }
    return st;
}

int s3lect_get_status(const s3lect_elector *e, s3lect_status **out)
{
    if (!e || !out)
        return S3LECT_EINVAL;
    *out = snapshot(e);
    return *out ? 0 : S3LECT_ENOMEM;
}

int s3lect_status_is_leader(const s3lect_status *st)
{
    return st ? st->is_leader : 0;
}
int s3lect_status_state(const s3lect_status *st)
{
    return st ? st->state : 0;
}
int64_t s3lect_status_term(const s3lect_status *st)
{
    return st ? st->term : 0;
}
const char *s3lect_status_server_id(const s3lect_status *st)
{
    return st ? st->server_id : "";
}
const char *s3lect_status_leader_id(const s3lect_status *st)
{
    return st ? st->leader_id : "";
}
const char *s3lect_status_leader_addr(const s3lect_status *st)
{
    return st ? st->leader_addr : "";
}
const char *s3lect_status_etag(const s3lect_status *st)
{
    return st ? st->etag : "";
}
int64_t s3lect_status_last_updated_ms(const s3lect_status *st)
{
    return st ? st->last_updated : 0;
}
int64_t s3lect_status_last_seen_ms(const s3lect_status *st)
{
    return st ? st->last_seen : 0;
}
int64_t s3lect_status_lease_remaining_ms(const s3lect_status *st)
{
    return st ? st->lease_remaining : 0;
}
int s3lect_status_record_corrupt(const s3lect_status *st)
{
    return st ? st->corrupt : 0;
}
int s3lect_status_last_error(const s3lect_status *st)
{
    return st ? st->last_error : 0;
}
const char *s3lect_status_last_error_message(const s3lect_status *st)
{
    return st ? st->error_msg : "";
}
uint64_t s3lect_status_cycle(const s3lect_status *st)
{
    return st ? st->cycle : 0;
}
int64_t s3lect_status_consecutive_failures(const s3lect_status *st)
{
    return st ? st->fails : 0;
}

static void add_time(cJSON *o, const char *name, int64_t wall_ms)
{
    char buf[40] = "0001-01-01T00:00:00Z";
    if (wall_ms)
        u_format_rfc3339(wall_ms, buf, sizeof buf);
    cJSON_AddStringToObject(o, name, buf);
}

int s3lect_status_json(const s3lect_elector *e, char **out)
{
    if (!e || !out)
        return S3LECT_EINVAL;
    *out = NULL;
    s3lect_status *st = snapshot(e);
    cJSON *o = st ? cJSON_CreateObject() : NULL;
    if (!o) {
        s3lect_status_free(st);
        return S3LECT_ENOMEM;
    }
    /* Go s3lect's LeadershipStatus fields first, then ours. */
    cJSON_AddStringToObject(o, "serverID", st->server_id);
    cJSON_AddStringToObject(o, "lockfilePath", st->lock);
    cJSON_AddBoolToObject(o, "isLeader", st->is_leader);
    cJSON_AddStringToObject(o, "leaderID", st->leader_id);
    cJSON_AddStringToObject(o, "leaderAddr", st->leader_addr);
    add_time(o, "leaderLastSeen", st->last_seen);
    add_time(o, "lastElectionTime", st->last_cycle_wall);
    cJSON_AddNumberToObject(o, "consecutiveFails", (double)st->fails);
    cJSON_AddNumberToObject(o, "term", (double)st->term);
    add_time(o, "lastUpdated", st->last_updated);
    cJSON_AddStringToObject(o, "etag", st->etag);
    cJSON_AddStringToObject(o, "state", s3lect_state_str(st->state));
    cJSON_AddNumberToObject(o, "leaseRemainingMs", (double)st->lease_remaining);
    cJSON_AddBoolToObject(o, "recordCorrupt", st->corrupt);
    cJSON_AddNumberToObject(o, "lastError", st->last_error);
    cJSON_AddStringToObject(o, "lastErrorMessage", st->error_msg);
    cJSON_AddNumberToObject(o, "cycle", (double)st->cycle);
    /* Failed peer checks by class (docs/peer.md), all zero outside peer mode. */
    cJSON *pf = cJSON_AddObjectToObject(o, "peerFailures");
    for (int i = PEER_FAIL_NONE + 1; pf && i < PEER_FAIL_NCLASSES; i++)
        cJSON_AddNumberToObject(pf, peer_fail_name(i), (double)st->peer_fails[i]);
    cJSON_AddStringToObject(o, "peerLastFailure", st->peer_last_fail);
    s3lect_status_free(st);
    *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return *out ? 0 : S3LECT_ENOMEM;
}

/* ---- peer mode ---- */

int s3lect_peer_response(s3lect_elector *e, const char *method, const char *target, int *status,
                         char **body)
{
    if (!e || !method || !target || !status || !body)
        return S3LECT_EINVAL;
    *body = NULL;
    if (rt_in_store_call()) /* a long poll there would hold a worker of the runtime */
        return rt_fail(e, S3LECT_EBUSY,
                       "s3lect_peer_response called from a custom store function would hold up "
                       "the runtime's worker thread it runs on");
    peer_request req;
    int rc = peer_parse_target(target, &req);
    if (rc < 0) {
        *status = -rc;
        *body = u_strdup("{\"error\":\"bad request\"}");
        return *body ? 0 : S3LECT_ENOMEM;
    }
    snprintf(req.method, sizeof req.method, "%s", method);
    peer_source src = rt_peer_source(e);
    const char *path = cfg_peer_health_path(e->cfg);
    return peer_answer(&src, path, &req, status, body);
}

int s3lect_enable_peer_mode(s3lect_elector *e, const void *ca_pem, size_t len)
{
    if (!e || !ca_pem || !len)
        return e ? rt_fail(e, S3LECT_EINVAL, "enable_peer_mode needs a CA bundle (PEM)")
                 : S3LECT_EINVAL;
    if (e->cfg->vclock)
        return rt_fail(e, S3LECT_EINVAL, "peer mode does not run on a virtual clock (no sockets)");
    pthread_mutex_lock(&e->mu);
    if (!e->cfg->server_addr || !e->cfg->server_addr[0]) {
        pthread_mutex_unlock(&e->mu);
        return rt_fail(e, S3LECT_EINVAL,
                       "peer mode needs server_addr: the host:port followers use to reach this "
                       "node");
    }
    int rc = s3lect_config_set_bytes(e->cfg, S3LECT_OPT_PEER_CA, ca_pem, len);
    char err[400] = "";
    /* A new client with the new CA. The running election thread uses its
     * client without the lock (a long poll can take a minute), so it is never
     * changed under it: the thread swaps the new one in between two
     * operations. */
    peer_client *pc = NULL;
    if (!rc)
        rc = peer_client_new(e->cfg, &pc, err, sizeof err);
    if (!rc && e->started && !e->stopped) {
        peer_client_free(e->pending_pc);
        e->pending_pc = pc;
    } else if (!rc) {
        peer_client_free(e->pc);
        e->pc = pc;
    }
    if (!rc) {
        e->cfg->peer_mode = 1;
        el_params p = rt_params(e->cfg);
        if (e->started && !e->stopped) {
            e->params_changed = 1;
            rt_kick_locked(e);
        } else {
            el_set_params(&e->eng, &p);
        }
    }
    int serve = !rc && e->started && !e->stopped && e->cfg->peer_cert.data && e->cfg->peer_key.data;
    pthread_mutex_unlock(&e->mu);
    if (rc)
        return rt_fail(e, rc, "peer mode: %s", err[0] ? err : s3lect_strerror(rc));
    return serve ? rt_start_peer_server(e) : 0;
}

int s3lect_peer_port(const s3lect_elector *e)
{
    if (!e)
        return 0;
    s3lect_elector *m = (s3lect_elector *)e;
    pthread_mutex_lock(&m->mu);
    int port = m->ps ? peer_server_port(m->ps) : 0;
    pthread_mutex_unlock(&m->mu);
    return port;
}

/* ---- configuration validation (here: it parses the lock with the store layer) ---- */

/* s3lect_config_validate that hands the parsed lock on in *loc (cleared on
 * failure): the lock is parsed once between the config and the store. */
static int validate(s3lect_config *c, st_location *loc)
{
    memset(loc, 0, sizeof *loc);
    if (!c)
        return S3LECT_EINVAL;
    if (!c->lock || !c->lock[0])
        return cfg_fail(c, S3LECT_EINVAL,
                        "no lock location: set lock to s3://bucket/key or file:///dir/key");
    char err[512];
    int rc = st_lock_location(c, loc, err, sizeof err);
    if (rc)
        return cfg_fail(c, rc == S3LECT_ENOMEM ? rc : S3LECT_EINVAL, "%s", err);
    rc = validate_rest(c);
    if (rc == 0 && c->vclock && !st_mem_is(loc)) {
        char *shown = st_lock_display(c->lock);
        rc = cfg_fail(c, S3LECT_EINVAL,
                      "a virtual clock (s3lect_config_set_clock) runs only electors of a mem:// "
                      "lock, not '%.200s': real stores keep real time",
                      shown ? shown : "");
        free(shown);
    } else if (rc == 0 && c->vclock && c->peer_mode) {
        rc = cfg_fail(c, S3LECT_EINVAL,
                      "peer mode does not run on a virtual clock (no sockets): turn it off");
    }
    if (rc)
        st_location_clear(loc);
    return rc;
}

int s3lect_config_validate(s3lect_config *c)
{
    st_location loc;
    int rc = validate(c, &loc);
    st_location_clear(&loc);
    return rc;
}

static int validate_rest(s3lect_config *c)
{
    if (!c->server_id || !c->server_id[0])
        return cfg_fail(c, S3LECT_EINVAL,
                        "server_id is empty: give each process a unique id, e.g. hostname-pid");
    size_t n = strlen(c->server_id);
    if (n > 255)
        return cfg_fail(c, S3LECT_EINVAL, "server_id is %zu bytes long; the limit is 255", n);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)c->server_id[i] < 0x20 || c->server_id[i] == 0x7f)
            return cfg_fail(c, S3LECT_EINVAL, "server_id contains a control character");
    if (c->peer_mode) {
        /* Zero-config (docs/peer.md): neither peer_cert nor peer_key, and
         * server_addr may be left to its default. With a certificate of its
         * own a cluster verifies leaders by its CA, as before. */
        int cert = c->peer_cert.data != NULL, key = c->peer_key.data != NULL;
        if (cert != key)
            return cfg_fail(c, S3LECT_EINVAL,
                            "peer mode needs both peer_cert and peer_key (PEM) to serve the "
                            "leadership endpoint with a certificate of its own, or neither "
                            "(zero-config: a key made at start, pinned through the lock record)");
        if (cert && !c->peer_ca.data)
            return cfg_fail(c, S3LECT_EINVAL,
                            "peer mode needs peer_ca: the CA bundle (PEM) that verifies the "
                            "leader's certificate (or leave out peer_cert and peer_key for "
                            "zero-config peer mode)");
        if (!cert && c->peer_client_cert.data)
            return cfg_fail(c, S3LECT_EINVAL,
                            "peer_client_cert (mTLS) needs peer_cert, peer_key and peer_ca: "
                            "zero-config peer mode does not verify clients");
    }
    return cfg_validate_timing(c);
}
