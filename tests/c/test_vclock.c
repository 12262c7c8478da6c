/* SPDX-License-Identifier: Apache-2.0 */
/* test_vclock.c - the test helpers (docs/testing-your-code.md): the mem://
 * store, and electors on a virtual clock run by s3lect_clock_advance in
 * this thread: acquire, hand over, take over after a crash, lose and regain
 * through injected store failures, one leader at every instant of a
 * virtual hour of random stops and starts, the same run twice; mem:// on
 * the system's clock with real threads; a virtual clock on another store
 * refused. The virtual parts run in well under a second of real time. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3lect.h"
#include "store.h"
#include "testutil.h"

#define LEASE 300
#define RENEW 100
#define DEADLINE 200
#define FREQ 50
#define INFREQ 150

/* The real time the virtual tests may take: under a second, but sanitizers
 * slow everything down many times. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define REAL_BUDGET_MS 15000
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define REAL_BUDGET_MS 15000
#endif
#endif
#ifndef REAL_BUDGET_MS
#define REAL_BUDGET_MS 1000
#endif

/* ---- the mem store itself ---- */

static st_store *open_mem(const char *lock, char **key)
{
    s3lect_config *c = s3lect_config_new();
    s3lect_config_set_str(c, S3LECT_OPT_LOCK, lock);
    st_store *s = NULL;
    char err[256] = "";
    int rc = st_open_config(c, &s, key, err, sizeof err);
    CHECK(rc == 0, "open %s: %s", lock, err);
    s3lect_config_free(c);
    return s;
}

static void test_mem_store(void)
{
    char *key = NULL;
    st_store *s = open_mem("mem://store-test", &key);
    if (!s)
        return;
    CHECK(strcmp(key, "lock") == 0, "default key: %s", key);
    st_result r = {0};
    st_get(s, key, 1000, &r);
    CHECK(r.outcome == ST_NOT_FOUND, "missing: %d", r.outcome);
    st_result_clear(&r);
    st_put(s, key, "a", 1, NULL, 1000, &r);
    CHECK(r.outcome == ST_OK && r.etag, "create: %d", r.outcome);
    char *e1 = strdup(r.etag ? r.etag : "");
    st_result_clear(&r);
    st_put(s, key, "a", 1, NULL, 1000, &r);
    CHECK(r.outcome == ST_PRECONDITION, "create over an object: %d", r.outcome);
    st_result_clear(&r);
    st_put(s, key, "a", 1, "\"nope\"", 1000, &r);
    CHECK(r.outcome == ST_PRECONDITION, "wrong If-Match: %d", r.outcome);
    st_result_clear(&r);
    st_put(s, key, "a", 1, e1, 1000, &r); /* the same bytes: a new etag */
    CHECK(r.outcome == ST_OK && r.etag && strcmp(r.etag, e1) != 0, "same bytes, new etag");
    char *e2 = strdup(r.etag ? r.etag : "");
    st_result_clear(&r);
    st_get(s, key, 1000, &r);
    CHECK(r.outcome == ST_OK && r.body_len == 1 && r.body[0] == 'a' && strcmp(r.etag, e2) == 0,
          "read back");
    CHECK(r.server_now_ms > 0 && r.server_modified_ms > 0 && r.server_res_ms == 1,
          "the store's clock");
    st_result_clear(&r);
    st_put(s, "other", "b", 1, "\"mem-1\"", 1000, &r);
    CHECK(r.outcome == ST_NOT_FOUND, "If-Match on a missing key: %d", r.outcome);
    st_result_clear(&r);

    /* A second store object of the same name shares the objects. */
    char *key2 = NULL;
    st_store *s2 = open_mem("mem://store-test/lock", &key2);
    if (s2) {
        st_get(s2, key2, 1000, &r);
        CHECK(r.outcome == ST_OK && strcmp(r.etag, e2) == 0, "shared by name");
        st_result_clear(&r);
    }

    /* Injected failures: the next n requests, nothing written. */
    CHECK(s3lect_mem_fail("store-test", 2) == S3LECT_OK, "mem_fail");
    st_put(s, key, "c", 1, e2, 1000, &r);
    CHECK(r.outcome == ST_TRANSIENT && r.message && strstr(r.message, "injected"), "failed put: %d",
          r.outcome);
    st_result_clear(&r);
    st_get(s, key, 1000, &r);
    CHECK(r.outcome == ST_TRANSIENT, "failed get: %d", r.outcome);
    st_result_clear(&r);
    st_get(s, key, 1000, &r);
    CHECK(r.outcome == ST_OK && strcmp(r.etag, e2) == 0, "after the failures: unchanged");
    st_result_clear(&r);

    /* A reset drops the objects; an etag of before never matches again. */
    CHECK(s3lect_mem_reset("store-test") == S3LECT_OK, "reset");
    st_get(s, key, 1000, &r);
    CHECK(r.outcome == ST_NOT_FOUND, "after reset: %d", r.outcome);
    st_result_clear(&r);
    st_put(s, key, "d", 1, NULL, 1000, &r);
    CHECK(r.outcome == ST_OK && strcmp(r.etag, e1) != 0 && strcmp(r.etag, e2) != 0,
          "etags are never reused");
    st_result_clear(&r);
    CHECK(s3lect_mem_reset("no such/name") == S3LECT_EINVAL, "reset: bad name");
    CHECK(s3lect_mem_fail("x", -1) == S3LECT_EINVAL, "mem_fail: n < 0");

    st_location loc;
    char err[256];
    CHECK(st_location_parse("mem://", &loc, err, sizeof err) == S3LECT_EINVAL &&
              strstr(err, "mem://NAME"),
          "no name: %s", err);
    CHECK(st_location_parse("mem://a b/k", &loc, err, sizeof err) == S3LECT_EINVAL, "bad name");
    CHECK(st_location_parse("mem:/x", &loc, err, sizeof err) == S3LECT_EINVAL &&
              strstr(err, "two slashes"),
          "mem:/x: %s", err);
    char *canon = st_lock_canonical("MEM://n/a/b");
    CHECK(canon && strcmp(canon, "mem://n/a/b") == 0, "canonical: %s", canon ? canon : "");
    free(canon);
    st_destroy(s);
    st_destroy(s2);
    free(key);
    free(key2);
    free(e1);
    free(e2);
}

/* ---- electors on a virtual clock ---- */

#define MAXLOG 4096
typedef struct logent {
    int64_t at;
    int who, type;
    int64_t term;
} logent;

typedef struct world {
    s3lect_clock *clock;
    const char *name;
    logent log[MAXLOG];
    size_t nlog;
    int leading[8];  /* by the callbacks: ACQUIRED .. LOST */
    int max_leading; /* the most that led at once, by the callbacks */
    pthread_t advancer;
    int off_thread;   /* a callback ran on another thread than the advance's */
    int busy_advance; /* s3lect_clock_advance from a callback: its answer */
} world;

typedef struct slot {
    world *w;
    int who;
} slot;

static void on_event(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    slot *s = ud;
    world *w = s->w;
    if (!pthread_equal(pthread_self(), w->advancer))
        w->off_thread = 1;
    int type = s3lect_event_type(ev);
    if (type == S3LECT_EVENT_ACQUIRED)
        w->leading[s->who] = 1;
    else if (type == S3LECT_EVENT_LOST)
        w->leading[s->who] = 0;
    int n = 0;
    for (int i = 0; i < 8; i++)
        n += w->leading[i];
    if (n > w->max_leading)
        w->max_leading = n;
    if (w->nlog < MAXLOG)
        w->log[w->nlog++] =
            (logent){s3lect_clock_now(w->clock), s->who, type, s3lect_event_term(ev)};
    if (type == S3LECT_EVENT_ACQUIRED && !w->busy_advance)
        w->busy_advance = s3lect_clock_advance(w->clock, 1);
}

static s3lect_config *vconfig(world *w, const char *id)
{
    char lock[128];
    snprintf(lock, sizeof lock, "mem://%s", w->name);
    s3lect_config *c = s3lect_config_new();
    s3lect_config_set_str(c, S3LECT_OPT_LOCK, lock);
    s3lect_config_set_str(c, S3LECT_OPT_SERVER_ID, id);
    s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, LEASE);
    s3lect_config_set_int(c, S3LECT_OPT_RENEW_INTERVAL, RENEW);
    s3lect_config_set_int(c, S3LECT_OPT_RENEW_DEADLINE, DEADLINE);
    s3lect_config_set_int(c, S3LECT_OPT_FREQUENT_INTERVAL, FREQ);
    s3lect_config_set_int(c, S3LECT_OPT_INFREQUENT_INTERVAL, INFREQ);
    s3lect_config_set_int(c, S3LECT_OPT_NEW_LOCK_WAIT, 0);
    s3lect_config_set_clock(c, w->clock);
    return c;
}

static slot g_slots[8];

static s3lect_elector *velector(world *w, int who)
{
    char id[32];
    snprintf(id, sizeof id, "node-%d", who);
    s3lect_config *c = vconfig(w, id);
    s3lect_elector *e = NULL;
    int rc = s3lect_new(c, &e);
    char msg[512] = "";
    s3lect_config_errmsg(c, msg, sizeof msg);
    CHECK(rc == 0, "s3lect_new: %d %s", rc, msg);
    s3lect_config_free(c);
    if (!e)
        exit(2);
    g_slots[who] = (slot){w, who};
    s3lect_set_callback(e, S3LECT_EVENT_ACQUIRED, on_event, &g_slots[who], NULL);
    s3lect_set_callback(e, S3LECT_EVENT_LOST, on_event, &g_slots[who], NULL);
    CHECK(s3lect_start(e) == 0, "start");
    return e;
}

static void world_init(world *w, const char *name)
{
    memset(w, 0, sizeof *w);
    w->name = name;
    w->clock = s3lect_clock_new(1700000000000);
    w->advancer = pthread_self();
    s3lect_mem_reset(name);
}

static int64_t acquired_at(const world *w, int who, size_t from)
{
    for (size_t i = from; i < w->nlog; i++)
        if (w->log[i].who == who && w->log[i].type == S3LECT_EVENT_ACQUIRED)
            return w->log[i].at;
    return -1;
}

static int count_leaders(s3lect_elector **es, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += es[i] && s3lect_is_leader(es[i]);
    return k;
}

static void test_acquire_handover_crash(void)
{
    world w;
    world_init(&w, "vc-basic");
    s3lect_elector *a = velector(&w, 0);
    CHECK(!s3lect_is_leader(a), "nothing runs before an advance");
    CHECK(w.nlog == 0, "no event before an advance");
    CHECK(s3lect_clock_advance(w.clock, 0) == 0, "advance 0");
    CHECK(s3lect_is_leader(a), "leads at virtual time 0 (new_lock_wait 0)");
    CHECK(acquired_at(&w, 0, 0) == 0, "ACQUIRED at 0: %lld", (long long)acquired_at(&w, 0, 0));
    CHECK(!w.off_thread, "callbacks ran in the advancing thread");
    CHECK(w.busy_advance == S3LECT_EBUSY, "advance from a callback: EBUSY (%d)", w.busy_advance);
    CHECK(s3lect_clock_now(w.clock) == 0, "a refused advance moved no time");

    s3lect_elector *b = velector(&w, 1);
    s3lect_elector *es[2] = {a, b};
    for (int i = 0; i < 100; i++) { /* ten virtual seconds: a keeps it */
        s3lect_clock_advance(w.clock, 100);
        CHECK(s3lect_is_leader(a) && !s3lect_is_leader(b), "a leads at %lld",
              (long long)s3lect_clock_now(w.clock));
    }
    char tok[512];
    CHECK(s3lect_fence_token(a, tok, sizeof tok) > 0 && s3lect_fence_token(b, tok, sizeof tok) == 0,
          "fence tokens on virtual time: the leader's only");
    char id[64];
    s3lect_leader_id(b, id, sizeof id);
    CHECK(strcmp(id, "node-0") == 0, "b sees a: %s", id);

    /* Hand over: the release is written by s3lect_stop, at once. */
    size_t mark = w.nlog;
    int64_t t0 = s3lect_clock_now(w.clock);
    CHECK(s3lect_stop(a) == 0, "stop a");
    CHECK(!s3lect_is_leader(a) && w.leading[0] == 0, "a's LOST ran inside stop");
    CHECK(s3lect_clock_now(w.clock) == t0, "stop moved no time");
    for (int i = 0; i < 40 && !s3lect_is_leader(b); i++)
        s3lect_clock_advance(w.clock, 10);
    int64_t took = acquired_at(&w, 1, mark) - t0;
    CHECK(s3lect_is_leader(b) && took >= 0 && took <= INFREQ + FREQ,
          "b took over the released lock in %lld ms", (long long)took);
    s3lect_free_elector(a);

    /* A crash: c follows, b stops without a release; c waits the lease out. */
    s3lect_elector *c = velector(&w, 2);
    s3lect_clock_advance(w.clock, 1000);
    mark = w.nlog;
    t0 = s3lect_clock_now(w.clock);
    CHECK(s3lect_stop_no_release(b) == 0, "b crashes");
    es[0] = b;
    es[1] = c;
    int64_t first = -1;
    for (int i = 0; i < 200; i++) {
        s3lect_clock_advance(w.clock, 5);
        CHECK(count_leaders(es, 2) <= 1, "one leader at %lld",
              (long long)s3lect_clock_now(w.clock));
        if (first < 0 && s3lect_is_leader(c))
            first = s3lect_clock_now(w.clock) - t0;
    }
    int64_t at = acquired_at(&w, 2, mark) - t0;
    CHECK(at >= LEASE - RENEW && at <= 2 * LEASE + INFREQ,
          "c takes over after the lease: %lld ms after the crash", (long long)at);
    CHECK(first >= 0 && first - at < 5, "c leads from its ACQUIRED on");
    s3lect_free_elector(b);
    s3lect_free_elector(c);
    s3lect_clock_free(w.clock);
}

static void test_lose_and_regain(void)
{
    world w;
    world_init(&w, "vc-outage");
    s3lect_elector *a = velector(&w, 0);
    s3lect_clock_advance(w.clock, 1000);
    CHECK(s3lect_is_leader(a), "a leads");
    /* The store fails every request for a while: a cannot renew. */
    size_t mark = w.nlog;
    int64_t t0 = s3lect_clock_now(w.clock);
    s3lect_mem_fail("vc-outage", 1000000);
    s3lect_clock_advance(w.clock, DEADLINE);
    CHECK(!s3lect_is_leader(a), "not leader once renew_deadline passed without a renewal");
    int64_t lost = -1;
    for (size_t i = mark; i < w.nlog; i++)
        if (w.log[i].type == S3LECT_EVENT_LOST)
            lost = w.log[i].at - t0;
    CHECK(lost >= 0 && lost <= DEADLINE, "LOST within renew_deadline: %lld", (long long)lost);
    s3lect_clock_advance(w.clock, 5 * LEASE);
    CHECK(!s3lect_is_leader(a), "no leading while the store fails");
    /* The store answers again: a leads again. */
    s3lect_mem_fail("vc-outage", 0);
    mark = w.nlog;
    t0 = s3lect_clock_now(w.clock);
    for (int i = 0; i < 100 && !s3lect_is_leader(a); i++)
        s3lect_clock_advance(w.clock, 50);
    CHECK(s3lect_is_leader(a), "a leads again after the outage");
    int64_t back = acquired_at(&w, 0, mark) - t0;
    CHECK(back >= 0 && back <= 5000, "regained %lld ms after the store came back", (long long)back);
    s3lect_free_elector(a);
    s3lect_clock_free(w.clock);
}

/* Virtual seconds (an hour): three slots of electors; at random moments one stops (with
 * or without its release) and a new one takes its slot. Returns the log's
 * length; *led is the virtual ms with a leader. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t virtual_run(world *w, const char *name, int64_t secs, int64_t *led)
{
    world_init(w, name);
    s3lect_elector *es[3];
    for (int i = 0; i < 3; i++)
        es[i] = velector(w, i);
    uint64_t seed = 42;
    *led = 0;
    int violations = 0;
    while (s3lect_clock_now(w->clock) < secs * 1000) {
        int64_t step = 1 + (int64_t)(rnd(&seed) % 200);
        s3lect_clock_advance(w->clock, step);
        int n = count_leaders(es, 3);
        violations += n > 1;
        *led += n ? step : 0;
        if (rnd(&seed) % 100 < 3) {
            int k = (int)(rnd(&seed) % 3);
            int rc = rnd(&seed) % 2 ? s3lect_stop(es[k]) : s3lect_stop_no_release(es[k]);
            CHECK(rc == 0, "stop");
            s3lect_free_elector(es[k]);
            es[k] = velector(w, k);
        }
    }
    CHECK(violations == 0, "%d instants with two leaders (is_leader)", violations);
    CHECK(w->max_leading <= 1, "two leaders by the callbacks");
    for (int i = 0; i < 3; i++)
        s3lect_free_elector(es[i]);
    s3lect_clock_free(w->clock);
    return w->nlog;
}

static world g_w1, g_w2;

static void test_virtual_hour_and_determinism(void)
{
    int64_t led1 = 0, led2 = 0;
    size_t n1 = virtual_run(&g_w1, "vc-hour", 3600, &led1);
    CHECK(led1 > 3600 * 1000 * 8 / 10, "a leader most of the hour: %lld ms", (long long)led1);
    CHECK(n1 > 100, "many elections: %zu events", n1);
    /* The same ten minutes twice: the same events at the same instants. */
    n1 = virtual_run(&g_w1, "vc-again", 600, &led1);
    size_t n2 = virtual_run(&g_w2, "vc-again", 600, &led2);
    int same = n1 == n2 && led1 == led2;
    for (size_t i = 0; same && i < n1 && i < MAXLOG; i++)
        same = memcmp(&g_w1.log[i], &g_w2.log[i], sizeof g_w1.log[i]) == 0;
    CHECK(same, "the same run twice (%zu vs %zu events)", n1, n2);
}

static void test_latency(void)
{
    world w;
    world_init(&w, "vc-latency");
    CHECK(s3lect_clock_set_latency(w.clock, 20) == 0, "latency");
    CHECK(s3lect_clock_set_latency(w.clock, -1) == S3LECT_EINVAL, "negative latency");
    s3lect_elector *a = velector(&w, 0);
    s3lect_clock_advance(w.clock, 0);
    CHECK(!s3lect_is_leader(a), "the read is still on its way");
    s3lect_clock_advance(w.clock, 100);
    CHECK(s3lect_is_leader(a), "leads once read and write were answered");
    CHECK(acquired_at(&w, 0, 0) == 40, "acquired at 40 (two requests of 20): %lld",
          (long long)acquired_at(&w, 0, 0));
    s3lect_free_elector(a);
    s3lect_clock_free(w.clock);
}

static void test_refused(void)
{
    s3lect_clock *clk = s3lect_clock_new(0);
    s3lect_config *c = t_fast_config("file:///tmp/nope-vclock.json", "x");
    s3lect_config_set_clock(c, clk);
    s3lect_elector *e = NULL;
    char msg[512] = "";
    CHECK(s3lect_config_validate(c) == S3LECT_EINVAL, "validate refuses a file lock");
    CHECK(s3lect_new(c, &e) == S3LECT_EINVAL && !e, "new refuses a file lock");
    s3lect_config_errmsg(c, msg, sizeof msg);
    CHECK(strstr(msg, "virtual clock") && strstr(msg, "mem://"), "says why: %s", msg);
    s3lect_config_set_str(c, S3LECT_OPT_LOCK, "mem://refused");
    CHECK(s3lect_config_validate(c) == 0, "a mem lock is fine");
    s3lect_config_set_bool(c, S3LECT_OPT_PEER_MODE, 1);
    CHECK(s3lect_new(c, &e) == S3LECT_EINVAL && !e, "no peer mode on a virtual clock");
    s3lect_config_errmsg(c, msg, sizeof msg);
    CHECK(strstr(msg, "peer mode"), "says why: %s", msg);
    s3lect_config_set_bool(c, S3LECT_OPT_PEER_MODE, 0);
    /* The clock freed before its elector: the elector holds its own reference. */
    CHECK(s3lect_new(c, &e) == 0 && e, "new");
    s3lect_config_free(c);
    s3lect_clock_free(clk);
    CHECK(s3lect_start(e) == 0 && s3lect_stop(e) == 0, "start and stop");
    CHECK(s3lect_free_elector(e) == 0, "free after the clock");
    CHECK(s3lect_clock_advance(NULL, 1) == S3LECT_EINVAL, "NULL clock");
    CHECK(s3lect_clock_now(NULL) == 0, "NULL clock: 0");
}

/* docs/testing-your-code.md's example, as written there. */
static int job_running; /* your job: on while leading */
static void on_acquired(s3lect_elector *e, const s3lect_event *ev, void *u)
{
    (void)e, (void)ev, (void)u;
    job_running = 1;
}
static void on_lost(s3lect_elector *e, const s3lect_event *ev, void *u)
{
    (void)e, (void)ev, (void)u;
    job_running = 0;
}

static void test_doc_example(void)
{
    s3lect_clock *clk = s3lect_clock_new(0);
    s3lect_config *cfg = s3lect_config_new();
    s3lect_config_set_str(cfg, S3LECT_OPT_LOCK, "mem://my-test");
    s3lect_config_set_str(cfg, S3LECT_OPT_SERVER_ID, "node-a");
    s3lect_config_set_int(cfg, S3LECT_OPT_LEASE_TIMEOUT, 300);
    s3lect_config_set_int(cfg, S3LECT_OPT_NEW_LOCK_WAIT, 0);
    s3lect_config_set_clock(cfg, clk);
    s3lect_elector *e = NULL;
    CHECK(s3lect_new(cfg, &e) == 0, "new");
    if (!e)
        exit(2);
    s3lect_set_callback(e, S3LECT_EVENT_ACQUIRED, on_acquired, NULL, NULL);
    s3lect_set_callback(e, S3LECT_EVENT_LOST, on_lost, NULL, NULL);
    s3lect_start(e);

    s3lect_clock_advance(clk, 0);
    CHECK(job_running, "acquired at once");
    s3lect_mem_fail("my-test", 1000000);
    s3lect_clock_advance(clk, 300);
    CHECK(!job_running, "lost: no renewal");
    s3lect_mem_fail("my-test", 0);
    s3lect_clock_advance(clk, 5000);
    CHECK(job_running, "leads again");
    s3lect_free_elector(e);
    CHECK(!job_running, "released: LOST");
    s3lect_config_free(cfg);
    s3lect_clock_free(clk);
    s3lect_mem_reset("my-test");
}

/* ---- mem:// on the system's clock: real threads ---- */

static void test_real_clock(void)
{
    s3lect_mem_reset("real");
    s3lect_elector *es[2];
    for (int i = 0; i < 2; i++) {
        s3lect_config *c = t_fast_config("mem://real", i ? "r1" : "r0");
        s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, 300);
        s3lect_config_set_int(c, S3LECT_OPT_RENEW_INTERVAL, 60);
        s3lect_config_set_int(c, S3LECT_OPT_RENEW_DEADLINE, 200);
        s3lect_config_set_int(c, S3LECT_OPT_FREQUENT_INTERVAL, 50);
        s3lect_config_set_int(c, S3LECT_OPT_INFREQUENT_INTERVAL, 100);
        es[i] = NULL;
        CHECK(s3lect_new(c, &es[i]) == 0, "new on mem:// with the real clock");
        s3lect_config_free(c);
        if (!es[i])
            exit(2);
    }
    CHECK(s3lect_start(es[0]) == 0, "start r0");
    CHECK(s3lect_wait_for_leadership(es[0], 5000) == 0, "r0 leads");
    CHECK(s3lect_start(es[1]) == 0, "start r1");
    t_sleep_ms(400);
    CHECK(count_leaders(es, 2) == 1 && s3lect_is_leader(es[0]), "r0 still, r1 follows");
    CHECK(s3lect_stop(es[0]) == 0, "stop r0");
    CHECK(s3lect_wait_for_leadership(es[1], 5000) == 0, "r1 takes over");
    CHECK(!s3lect_is_leader(es[0]), "r0 does not lead");
    s3lect_free_elector(es[0]);
    s3lect_free_elector(es[1]);
}

int main(void)
{
    t_delay_mark();
    int64_t t0 = t_now_ms();
    test_mem_store();
    test_acquire_handover_crash();
    test_lose_and_regain();
    test_virtual_hour_and_determinism();
    test_latency();
    test_refused();
    test_doc_example();
    int64_t took = t_now_ms() - t0, delay = t_delay_max_ms();
    printf("virtual tests: %lld ms of real time (%lld ms waiting for a CPU)\n", (long long)took,
           (long long)delay);
    CHECK(took - delay < REAL_BUDGET_MS, "a virtual hour and more in %lld ms (budget %d)",
          (long long)took, REAL_BUDGET_MS);
    test_real_clock();
    return t_done("vclock");
}
