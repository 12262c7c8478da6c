/* SPDX-License-Identifier: Apache-2.0 */
/* The shared runtime (docs/threading.md): many electors in one process on a
 * few threads and few file descriptors, spread first requests, callbacks in
 * order per elector and not held up by another elector's slow callback, the
 * deadlock guards of store functions, and the threads gone once the last
 * elector is freed. Behaviour with generous bounds; the numbers are
 * bench/run footprint's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "s3lect.h"
#include "testutil.h"

static char *dir;

static int threads_now(void)
{
    return t_count_entries("/proc/self/task");
}

static int fds_now(void)
{
    return t_count_entries("/proc/self/fd") - 1; /* the one opendir holds */
}

/* Waits up to ms for the thread count to drop to at most want. */
static int threads_settle(int want, int64_t ms)
{
    int64_t end = t_now_ms() + ms;
    int n = threads_now();
    while (n > want && t_now_ms() < end) {
        t_sleep_ms(20);
        n = threads_now();
    }
    return n;
}

static s3lect_config *file_cfg(const char *lock, const char *id)
{
    s3lect_config *c = s3lect_config_new();
    s3lect_config_set_str(c, S3LECT_OPT_LOCK, lock);
    s3lect_config_set_str(c, S3LECT_OPT_SERVER_ID, id);
    s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, 4000);
    /* a new lock: no leader of it can be running (new_lock_wait) */
    s3lect_config_set_int(c, S3LECT_OPT_NEW_LOCK_WAIT, 0);
    s3lect_config_set_int(c, S3LECT_OPT_RENEW_INTERVAL, 1000);
    s3lect_config_set_int(c, S3LECT_OPT_RENEW_DEADLINE, 3000);
    s3lect_config_set_int(c, S3LECT_OPT_FREQUENT_INTERVAL, 500);
    s3lect_config_set_int(c, S3LECT_OPT_INFREQUENT_INTERVAL, 2000);
    return c;
}

/* ---- many electors: threads, file descriptors, one leader per key ---- */

#define MANY_KEYS 100
#define MANY_PER_KEY 10
#define MANY (MANY_KEYS * MANY_PER_KEY)

typedef struct stopper {
    s3lect_elector **e;
    int from, to;
} stopper;

static void *stop_slice(void *arg)
{
    stopper *s = arg;
    for (int i = s->from; i < s->to; i++)
        s3lect_stop(s->e[i]);
    return NULL;
}

/* Leaders per key now; sets *settled when every key has one leader that
 * every other elector of the key names. Returns the largest number of
 * leaders seen on one key. */
static int survey(s3lect_elector **e, int *settled)
{
    int worst = 0, ok = 1;
    for (int k = 0; k < MANY_KEYS; k++) {
        int leaders = 0, lead = -1;
        for (int j = 0; j < MANY_PER_KEY; j++)
            if (s3lect_is_leader(e[k * MANY_PER_KEY + j])) {
                leaders++;
                lead = j;
            }
        if (leaders > worst)
            worst = leaders;
        if (leaders != 1) {
            ok = 0;
            continue;
        }
        char want[32], got[32];
        snprintf(want, sizeof want, "n%d-%d", k, lead);
        for (int j = 0; j < MANY_PER_KEY; j++) {
            s3lect_leader_id(e[k * MANY_PER_KEY + j], got, sizeof got);
            if (strcmp(got, want) != 0)
                ok = 0;
        }
    }
    *settled = ok;
    return worst;
}

static void t_many_electors(void)
{
    fprintf(stderr, "-- %d file electors on %d keys under a 256-descriptor limit\n", MANY,
            MANY_KEYS);
    struct rlimit old, lim;
    getrlimit(RLIMIT_NOFILE, &old);
    lim = old;
    if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= 256)
        lim.rlim_cur = 256;
    CHECK(setrlimit(RLIMIT_NOFILE, &lim) == 0, "lower the descriptor limit to 256");
    int base_threads = threads_now(), base_fds = fds_now();
    s3lect_elector **e = calloc(MANY, sizeof *e);
    int made = 0;
    for (int k = 0; k < MANY_KEYS; k++)
        for (int j = 0; j < MANY_PER_KEY; j++) {
            char lock[600], id[32];
            snprintf(lock, sizeof lock, "%s/many-%d.json", dir, k);
            snprintf(id, sizeof id, "n%d-%d", k, j);
            s3lect_config *c = file_cfg(lock, id);
            int rc = s3lect_new(c, &e[k * MANY_PER_KEY + j]);
            s3lect_config_free(c);
            if (rc == 0 && s3lect_start(e[k * MANY_PER_KEY + j]) == 0)
                made++;
        }
    CHECK(made == MANY, "all %d electors created and started (%d)", MANY, made);
    int settled = 0, worst = 0, peak_threads = 0, peak_fds = 0;
    int64_t t0 = t_now_ms(), end = t0 + 60000;
    while (t_now_ms() < end) {
        int w = survey(e, &settled);
        if (w > worst)
            worst = w;
        int th = threads_now(), fd = fds_now();
        peak_threads = th > peak_threads ? th : peak_threads;
        peak_fds = fd > peak_fds ? fd : peak_fds;
        if (settled)
            break;
        t_sleep_ms(200);
    }
    fprintf(stderr, "   settled in %lld ms; threads %d (base %d), fds %d (base %d)\n",
            (long long)(t_now_ms() - t0), peak_threads, base_threads, peak_fds, base_fds);
    CHECK(settled, "every key has one leader that all its electors name, within 60 s");
    CHECK(worst <= 1, "never two leaders on one key (%d seen)", worst);
    /* A few more seconds of renewals: still one leader per key. */
    for (int i = 0; i < 10; i++) {
        int w = survey(e, &settled);
        CHECK(w <= 1 && settled, "steady: one leader per key, named by all (%d, %d)", w, settled);
        int th = threads_now(), fd = fds_now();
        peak_threads = th > peak_threads ? th : peak_threads;
        peak_fds = fd > peak_fds ? fd : peak_fds;
        t_sleep_ms(300);
    }
    /* The loop, 4 workers, 2 callback threads (8 on a quiet machine); each
     * pool adds a thread when all of its own have been busy for RT_STUCK_MS
     * (200 ms), which a loaded machine's slow fsyncs cause: a clean CI run
     * with the other suites and the release build beside it reached 23.
     * The pools stop at 64 threads each (RT_MAX_WORKERS,
     * RT_MAX_CALLBACK_THREADS), so the bound is theirs: nowhere near a
     * thread per elector. A file operation holds at most two descriptors
     * (the lock file and the record), so descriptors grow with the threads,
     * never with the electors. */
    int added = peak_threads - base_threads;
    CHECK(added <= 1 + 64 + 64, "at most the pools' caps of threads for %d electors: %d (base %d)",
          MANY, added, base_threads);
    CHECK(peak_fds - base_fds <= 8 + 2 * added,
          "descriptors grow with the threads (%d added), not the %d electors: %d more", added, MANY,
          peak_fds - base_fds);
    int leaders = 0;
    for (int i = 0; i < MANY; i++)
        leaders += s3lect_is_leader(e[i]);
    int64_t s0 = t_now_ms();
    pthread_t th[4];
    stopper sl[4];
    for (int i = 0; i < 4; i++) {
        sl[i] = (stopper){e, i * MANY / 4, (i + 1) * MANY / 4};
        pthread_create(&th[i], NULL, stop_slice, &sl[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    int64_t stop_ms = t_now_ms() - s0;
    fprintf(stderr, "   stop of %d electors (%d leaders, one release write each): %lld ms\n", MANY,
            leaders, (long long)stop_ms);
    CHECK(stop_ms < 15000, "stopping %d electors from 4 threads takes %lld ms", MANY,
          (long long)stop_ms);
    for (int i = 0; i < MANY; i++)
        CHECK(!s3lect_is_leader(e[i]), "no leader after stop (%d)", i);
    for (int i = 0; i < MANY; i++)
        s3lect_free_elector(e[i]);
    free(e);
    int after = threads_settle(base_threads, 3000);
    CHECK(after <= base_threads, "the runtime's threads end with the last elector: %d (base %d)",
          after, base_threads);
    setrlimit(RLIMIT_NOFILE, &old);
}

/* ---- first requests of electors started together are spread ---- */

typedef struct firstcall {
    pthread_mutex_t mu;
    int64_t first; /* now_ms of the first store call, 0 before */
    int exists;
    char body[2048];
    size_t len;
    int ctr;
    int slow_put_ms; /* atomic: each write takes this long (t_stop_many) */
} firstcall;

static int fc_get(void *ud, const char *key, int64_t timeout, s3lect_store_result *res)
{
    (void)key;
    (void)timeout;
    firstcall *f = ud;
    pthread_mutex_lock(&f->mu);
    if (!f->first)
        f->first = t_now_ms();
    int rc = S3LECT_STORE_NOT_FOUND;
    if (f->exists) {
        char etag[16];
        snprintf(etag, sizeof etag, "v%d", f->ctr);
        s3lect_store_result_set_body(res, f->body, f->len);
        s3lect_store_result_set_etag(res, etag);
        rc = S3LECT_STORE_OK;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fc_put(void *ud, const char *key, const void *data, size_t len, const char *if_match,
                  int64_t timeout, s3lect_store_result *res)
{
    (void)key;
    (void)timeout;
    firstcall *f = ud;
    int slow = __atomic_load_n(&f->slow_put_ms, __ATOMIC_ACQUIRE);
    if (slow > 0)
        t_sleep_ms(slow);
    pthread_mutex_lock(&f->mu);
    if (!f->first)
        f->first = t_now_ms();
    char cur[16];
    snprintf(cur, sizeof cur, "v%d", f->ctr);
    int ok =
        (if_match ? f->exists && strcmp(if_match, cur) == 0 : !f->exists) && len < sizeof f->body;
    if (ok) {
        memcpy(f->body, data, len);
        f->len = len;
        f->exists = 1;
        snprintf(cur, sizeof cur, "v%d", ++f->ctr);
        s3lect_store_result_set_etag(res, cur);
    }
    pthread_mutex_unlock(&f->mu);
    return ok ? S3LECT_STORE_OK : S3LECT_STORE_PRECONDITION;
}

#define SPREAD_N 300

static s3lect_elector *custom_elector(firstcall *f, const char *id)
{
    s3lect_config *c = file_cfg("custom-lock", id);
    s3lect_config_set_custom_store(c, fc_get, fc_put, f, NULL);
    s3lect_elector *e = NULL;
    CHECK(s3lect_new(c, &e) == 0, "new custom elector");
    s3lect_config_free(c);
    return e;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void t_spread_first_requests(void)
{
    fprintf(stderr, "-- %d electors started together spread their first requests\n", SPREAD_N);
    firstcall *f = calloc(SPREAD_N + 1, sizeof *f);
    s3lect_elector **e = calloc(SPREAD_N + 1, sizeof *e);
    for (int i = 0; i <= SPREAD_N; i++)
        pthread_mutex_init(&f[i].mu, NULL);
    char id[32];
    for (int i = 0; i < SPREAD_N; i++) {
        snprintf(id, sizeof id, "s%d", i);
        e[i] = custom_elector(&f[i], id);
    }
    int64_t t0 = t_now_ms();
    t_delay_mark();
    for (int i = 0; i < SPREAD_N; i++)
        CHECK(e[i] && s3lect_start(e[i]) == 0, "start %d", i);
    int64_t end = t_now_ms() + 10000;
    int got = 0;
    while (t_now_ms() < end && got < SPREAD_N) {
        got = 0;
        for (int i = 0; i < SPREAD_N; i++) {
            pthread_mutex_lock(&f[i].mu);
            got += f[i].first != 0;
            pthread_mutex_unlock(&f[i].mu);
        }
        t_sleep_ms(20);
    }
    CHECK(got == SPREAD_N, "every elector made its first request within 10 s (%d)", got);
    int64_t at[SPREAD_N];
    for (int i = 0; i < SPREAD_N; i++)
        at[i] = f[i].first - t0;
    qsort(at, SPREAD_N, sizeof at[0], cmp64);
    /* The most first requests in any 20 ms. */
    int burst = 0;
    for (int i = 0, j = 0; i < SPREAD_N; i++) {
        while (at[i] - at[j] >= 20)
            j++;
        if (i - j + 1 > burst)
            burst = i - j + 1;
    }
    fprintf(stderr,
            "   first requests from %lld to %lld ms after the starts; at most %d in 20 ms\n",
            (long long)at[0], (long long)at[SPREAD_N - 1], burst);
    CHECK(at[SPREAD_N - 1] - at[0] >= 150, "spread over at least 150 ms: %lld",
          (long long)(at[SPREAD_N - 1] - at[0]));
    /* A thread of ours kept off the CPU for long by the machine's other load
     * (a loaded CI under TSan: 197 of 300 in 20 ms) sends what fell due
     * meanwhile at once: a burst the runtime did not make, so the check is
     * not judged then (and says so). Our own threads alone delay each other
     * by tens of ms on 2 cores. */
    int64_t delayed = t_delay_max_ms();
    if (delayed >= 200)
        fprintf(stderr, "   burst not judged: a thread of ours waited %lld ms for a CPU\n",
                (long long)delayed);
    else
        CHECK(burst <= SPREAD_N / 3, "no burst: at most a third in any 20 ms (%d)", burst);
    CHECK(at[SPREAD_N - 1] <= 1000 + 500, "none later than one renew_interval (+500 ms): %lld",
          (long long)at[SPREAD_N - 1]);
    /* A lone start, a second after the crowd, is not delayed. */
    t_sleep_ms(1100);
    e[SPREAD_N] = custom_elector(&f[SPREAD_N], "lone");
    int64_t t1 = t_now_ms();
    CHECK(e[SPREAD_N] && s3lect_start(e[SPREAD_N]) == 0, "lone start");
    end = t_now_ms() + 2000;
    int64_t first = 0;
    while (t_now_ms() < end && !first) {
        pthread_mutex_lock(&f[SPREAD_N].mu);
        first = f[SPREAD_N].first;
        pthread_mutex_unlock(&f[SPREAD_N].mu);
        t_sleep_ms(2);
    }
    CHECK(first && first - t1 <= 100, "a lone elector's first request comes at once: %lld ms",
          (long long)(first ? first - t1 : -1));
    for (int i = 0; i <= SPREAD_N; i++)
        s3lect_free_elector(e[i]);
    for (int i = 0; i <= SPREAD_N; i++)
        pthread_mutex_destroy(&f[i].mu);
    free(e);
    free(f);
}

/* ---- callbacks: in order per elector, not held up by another's ---- */

typedef struct cbrec {
    pthread_mutex_t mu;
    int inside, overlap, n;
    uint64_t last_cycle;
    int out_of_order;
    int64_t acquired_at; /* now_ms in the ACQUIRED callback */
    int block_ms;        /* the ACQUIRED callback sleeps this long */
} cbrec;

static void on_any(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    cbrec *r = ud;
    pthread_mutex_lock(&r->mu);
    if (r->inside++)
        r->overlap++;
    r->n++;
    if (s3lect_event_type(ev) == S3LECT_EVENT_CYCLE) {
        uint64_t c = s3lect_event_cycle(ev);
        if (c <= r->last_cycle)
            r->out_of_order++;
        r->last_cycle = c;
    }
    int block = 0;
    if (s3lect_event_type(ev) == S3LECT_EVENT_ACQUIRED) {
        r->acquired_at = t_now_ms();
        block = r->block_ms;
    }
    pthread_mutex_unlock(&r->mu);
    t_sleep_ms(block ? block : 2);
    pthread_mutex_lock(&r->mu);
    r->inside--;
    pthread_mutex_unlock(&r->mu);
}

static s3lect_elector *cb_elector(const char *lock, const char *id, cbrec *r, int threads)
{
    s3lect_config *c = file_cfg(lock, id);
    s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, 1500);
    s3lect_config_set_int(c, S3LECT_OPT_RENEW_INTERVAL, 200);
    s3lect_config_set_int(c, S3LECT_OPT_RENEW_DEADLINE, 1000);
    s3lect_config_set_int(c, S3LECT_OPT_FREQUENT_INTERVAL, 100);
    s3lect_config_set_int(c, S3LECT_OPT_INFREQUENT_INTERVAL, 300);
    s3lect_config_set_int(c, S3LECT_OPT_CALLBACK_THREADS, threads);
    s3lect_elector *e = NULL;
    CHECK(s3lect_new(c, &e) == 0, "new %s", id);
    s3lect_config_free(c);
    if (!e)
        return NULL;
    for (int t = S3LECT_EVENT_ACQUIRED; t <= S3LECT_EVENT_CYCLE; t++)
        s3lect_set_callback(e, (s3lect_event_kind)t, on_any, r, NULL);
    return e;
}

static void t_callbacks(void)
{
    fprintf(stderr, "-- callbacks: in order per elector; a slow one holds up no other elector\n");
    enum { N = 12 };
    cbrec r[N + 2];
    memset(r, 0, sizeof r);
    s3lect_elector *e[N + 2] = {0};
    char lock[600], id[32];
    /* N electors on one key with 4 callback threads: many events each. */
    for (int i = 0; i < N + 2; i++)
        pthread_mutex_init(&r[i].mu, NULL);
    snprintf(lock, sizeof lock, "%s/order.json", dir);
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof id, "o%d", i);
        e[i] = cb_elector(lock, id, &r[i], 1);
    }
    /* A leader whose ACQUIRED callback blocks for 3 s, then another elector
     * on its own lock: its callbacks must not wait for the first. */
    r[N].block_ms = 3000;
    snprintf(lock, sizeof lock, "%s/slow.json", dir);
    e[N] = cb_elector(lock, "slow", &r[N], 1);
    snprintf(lock, sizeof lock, "%s/quick.json", dir);
    e[N + 1] = cb_elector(lock, "quick", &r[N + 1], 1);
    CHECK(s3lect_start(e[N]) == 0 && s3lect_wait_for_leadership(e[N], 5000) == 0, "slow leads");
    int64_t end = t_now_ms() + 2000;
    while (t_now_ms() < end) {
        pthread_mutex_lock(&r[N].mu);
        int in = r[N].inside;
        pthread_mutex_unlock(&r[N].mu);
        if (in)
            break;
        t_sleep_ms(5);
    }
    CHECK(s3lect_start(e[N + 1]) == 0 && s3lect_wait_for_leadership(e[N + 1], 5000) == 0,
          "quick leads while slow's callback blocks");
    int64_t led = t_now_ms();
    end = led + 2500;
    int64_t got = 0;
    while (t_now_ms() < end && !got) {
        pthread_mutex_lock(&r[N + 1].mu);
        got = r[N + 1].acquired_at;
        pthread_mutex_unlock(&r[N + 1].mu);
        t_sleep_ms(5);
    }
    pthread_mutex_lock(&r[N].mu);
    int slow_inside = r[N].inside;
    pthread_mutex_unlock(&r[N].mu);
    CHECK(got && got - led < 1500,
          "quick's ACQUIRED callback ran %lld ms after it led, while slow's blocks (%d)",
          (long long)(got ? got - led : -1), slow_inside);
    CHECK(slow_inside, "slow's callback was still running then");
    for (int i = 0; i < N; i++)
        CHECK(s3lect_start(e[i]) == 0, "start o%d", i);
    t_sleep_ms(2500);
    /* Churn: the leader of the order lock stops, twice. */
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++)
            if (e[i] && s3lect_is_leader(e[i])) {
                s3lect_stop(e[i]);
                break;
            }
        t_sleep_ms(2500);
    }
    for (int i = 0; i < N + 2; i++)
        s3lect_stop(e[i]);
    int total = 0;
    for (int i = 0; i < N + 2; i++) {
        pthread_mutex_lock(&r[i].mu);
        CHECK(r[i].overlap == 0, "elector %d: never two of its callbacks at once (%d)", i,
              r[i].overlap);
        CHECK(r[i].out_of_order == 0, "elector %d: CYCLE events in order (%d out of order)", i,
              r[i].out_of_order);
        CHECK(r[i].inside == 0, "elector %d: stop returned after its callbacks ran", i);
        total += r[i].n;
        pthread_mutex_unlock(&r[i].mu);
    }
    CHECK(total > 3 * N, "callbacks ran (%d)", total);
    for (int i = 0; i < N + 2; i++) {
        s3lect_free_elector(e[i]);
        pthread_mutex_destroy(&r[i].mu);
    }
}

/* ---- a store call that blocks holds one worker, not all ---- */

typedef struct stuck {
    firstcall fc;
    int block_ms, entered; /* the first get sleeps block_ms */
} stuck;

static int stuck_get(void *ud, const char *key, int64_t timeout, s3lect_store_result *res)
{
    stuck *s = ud;
    if (!__atomic_exchange_n(&s->entered, 1, __ATOMIC_ACQ_REL) && s->block_ms)
        t_sleep_ms(s->block_ms);
    return fc_get(&s->fc, key, timeout, res);
}

static int stuck_put(void *ud, const char *key, const void *data, size_t len, const char *if_match,
                     int64_t timeout, s3lect_store_result *res)
{
    return fc_put(&((stuck *)ud)->fc, key, data, len, if_match, timeout, res);
}

static s3lect_elector *stuck_elector(stuck *s, const char *id)
{
    s3lect_config *c = file_cfg("stuck-lock", id);
    s3lect_config_set_int(c, S3LECT_OPT_WORKER_THREADS, 1);
    s3lect_config_set_custom_store(c, stuck_get, stuck_put, s, NULL);
    s3lect_elector *e = NULL;
    CHECK(s3lect_new(c, &e) == 0, "new %s", id);
    s3lect_config_free(c);
    return e;
}

static void t_stuck_store(void)
{
    fprintf(stderr, "-- a store call that blocks for 4 s holds one worker, not all\n");
    stuck x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    pthread_mutex_init(&x.fc.mu, NULL);
    pthread_mutex_init(&y.fc.mu, NULL);
    x.block_ms = 4000;
    s3lect_elector *ex = stuck_elector(&x, "stuck"), *ey = stuck_elector(&y, "free");
    CHECK(ex && s3lect_start(ex) == 0, "stuck starts");
    int64_t end = t_now_ms() + 2000;
    while (!__atomic_load_n(&x.entered, __ATOMIC_ACQUIRE) && t_now_ms() < end)
        t_sleep_ms(5);
    CHECK(x.entered, "the stuck store call began");
    int64_t t0 = t_now_ms();
    CHECK(ey && s3lect_start(ey) == 0, "free starts");
    int rc = s3lect_wait_for_leadership(ey, 3000);
    int64_t took = t_now_ms() - t0;
    CHECK(rc == 0 && took < 2000,
          "another elector leads in %lld ms while the only worker is stuck (worker_threads 1)",
          (long long)took);
    CHECK(!s3lect_is_leader(ex), "the stuck one is not leader");
    s3lect_free_elector(ey);
    s3lect_free_elector(ex); /* waits for the stuck call to end */
    pthread_mutex_destroy(&x.fc.mu);
    pthread_mutex_destroy(&y.fc.mu);
}

/* ---- store functions may not stop or wait on any elector ---- */

typedef struct guard {
    s3lect_elector *other;
    int stop_rc, wait_rc, tried;
    firstcall fc;
} guard;

static int g_get(void *ud, const char *key, int64_t timeout, s3lect_store_result *res)
{
    guard *g = ud;
    if (!__atomic_exchange_n(&g->tried, 1, __ATOMIC_ACQ_REL)) {
        g->stop_rc = s3lect_stop(g->other);
        g->wait_rc = s3lect_wait_for_leadership(g->other, 10);
    }
    return fc_get(&g->fc, key, timeout, res);
}

static int g_put(void *ud, const char *key, const void *data, size_t len, const char *if_match,
                 int64_t timeout, s3lect_store_result *res)
{
    guard *g = ud;
    return fc_put(&g->fc, key, data, len, if_match, timeout, res);
}

static void t_store_function_guards(void)
{
    fprintf(stderr, "-- a custom store function cannot stop or wait on another elector\n");
    char lock[600];
    snprintf(lock, sizeof lock, "%s/other.json", dir);
    s3lect_config *c = file_cfg(lock, "other");
    s3lect_elector *other = NULL;
    CHECK(s3lect_new(c, &other) == 0 && s3lect_start(other) == 0, "other starts");
    s3lect_config_free(c);
    guard g;
    memset(&g, 0, sizeof g);
    pthread_mutex_init(&g.fc.mu, NULL);
    g.other = other;
    c = file_cfg("guarded", "guarded");
    s3lect_config_set_custom_store(c, g_get, g_put, &g, NULL);
    s3lect_elector *e = NULL;
    CHECK(s3lect_new(c, &e) == 0 && s3lect_start(e) == 0, "guarded starts");
    s3lect_config_free(c);
    CHECK(s3lect_wait_for_leadership(e, 5000) == 0, "guarded leads");
    CHECK(g.tried, "the store function ran");
    CHECK(g.stop_rc == S3LECT_EBUSY, "s3lect_stop(other) from a store function: EBUSY (%d)",
          g.stop_rc);
    CHECK(g.wait_rc == S3LECT_EBUSY, "waiting on another elector from a store function: EBUSY (%d)",
          g.wait_rc);
    CHECK(s3lect_wait_for_leadership(other, 5000) == 0, "the other elector was not stopped");
    s3lect_free_elector(e);
    s3lect_free_elector(other);
    pthread_mutex_destroy(&g.fc.mu);
}

/* ---- s3lect_stop_many: the releases of many leaders go out together ---- */

#define STOPMANY_N 12
#define STOPMANY_PUT_MS 400

static void t_stop_many(void)
{
    fprintf(stderr, "-- s3lect_stop_many: %d leaders whose writes take %d ms each\n", STOPMANY_N,
            STOPMANY_PUT_MS);
    firstcall *f = calloc(STOPMANY_N, sizeof *f);
    s3lect_elector *e[STOPMANY_N + 2];
    char id[32];
    for (int i = 0; i < STOPMANY_N; i++) {
        pthread_mutex_init(&f[i].mu, NULL);
        snprintf(id, sizeof id, "m%d", i);
        e[i] = custom_elector(&f[i], id);
        CHECK(e[i] && s3lect_start(e[i]) == 0, "start %d", i);
    }
    int64_t end = t_now_ms() + 10000;
    int leading = 0;
    while (t_now_ms() < end && leading < STOPMANY_N) {
        leading = 0;
        for (int i = 0; i < STOPMANY_N; i++)
            leading += s3lect_is_leader(e[i]);
        t_sleep_ms(20);
    }
    CHECK(leading == STOPMANY_N, "every elector leads its own lock (%d)", leading);
    for (int i = 0; i < STOPMANY_N; i++)
        __atomic_store_n(&f[i].slow_put_ms, STOPMANY_PUT_MS, __ATOMIC_RELEASE);
    e[STOPMANY_N] = e[0]; /* twice: fine */
    e[STOPMANY_N + 1] = NULL;
    int64_t t0 = t_now_ms();
    int rc = s3lect_stop_many(e, STOPMANY_N + 2);
    int64_t took = t_now_ms() - t0;
    CHECK(rc == S3LECT_EINVAL, "a NULL entry: EINVAL (%d), after stopping the others", rc);
    /* One after the other: at least STOPMANY_N writes of STOPMANY_PUT_MS
     * (a renewal in flight may add one). */
    CHECK(took < STOPMANY_N * STOPMANY_PUT_MS / 3, "stopped together in %lld ms (one by one: %d)",
          (long long)took, STOPMANY_N * STOPMANY_PUT_MS);
    int released = 0;
    for (int i = 0; i < STOPMANY_N; i++) {
        CHECK(!s3lect_is_leader(e[i]), "elector %d no longer leads", i);
        pthread_mutex_lock(&f[i].mu);
        released += f[i].len > 0 && memmem(f[i].body, f[i].len, "\"leaderID\":\"\"", 13) != NULL;
        pthread_mutex_unlock(&f[i].mu);
    }
    CHECK(released == STOPMANY_N, "every lock's record released (%d of %d)", released, STOPMANY_N);
    CHECK(s3lect_stop_many(NULL, 0) == 0, "nothing to stop");
    CHECK(s3lect_stop_many(NULL, 3) == S3LECT_EINVAL, "NULL with n > 0: EINVAL");
    CHECK(s3lect_stop_many(e, STOPMANY_N) == 0, "stopped ones again: 0");
    for (int i = 0; i < STOPMANY_N; i++) {
        s3lect_free_elector(e[i]);
        pthread_mutex_destroy(&f[i].mu);
    }
    free(f);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    dir = t_tmpdir("runtime");
    t_store_function_guards();
    t_stuck_store();
    t_callbacks();
    t_spread_first_requests();
    t_many_electors();
    t_stop_many();
    return t_done("runtime");
}
