/* SPDX-License-Identifier: Apache-2.0 */
/* footprint.c - runs K electors in one process and measures what they cost.
 *
 * The K electors share K / N lock keys, N electors a key (--per-key N), so on
 * every key one elector leads and renews while the other N - 1 follow it
 * (with N = 10: 10 % renewing leaders, 90 % stable followers). Elector i
 * uses key PREFIX/kG.json with G = i / N and the id e<pid>-<i>. Only the
 * public API (s3lect.h) is used, so the same source links against any
 * libs3lect.a of this repository, old or new runtime. bench/run drives it
 * over stdin/stdout:
 *
 *   stdout "ready ..." / "notready ..."  every elector is in its role, or the
 *                                        readiness timeout passed first
 *   stdout "failed ..."                  an elector could not be created or
 *                                        started (the process then exits 1)
 *   stdin  "measure MS"   measure for MS milliseconds, print one JSON line
 *   stdin  "stop" or EOF  stop every elector from up to --stop-threads threads
 *                         (each calls s3lect_stop on a slice; with --stop-many 1
 *                         one s3lect_stop_many call, where the library has
 *                         it), then free them;
 *                         print "stopped ...", exit 0
 *
 * Peer mode over several processes (bench/lib/footprint.py "peer"): with
 * --peer every elector runs in zero-config peer mode, and --first F --step S
 * make this process one of S: its electors are the global indices
 * i = F, F + S, F + 2S, ... below --total T (--count is then ignored), on
 * key i / N, so the N electors of a key are spread over the processes. The
 * process cannot see the other processes' roles, so "ready" then means every
 * elector here leads or follows some other elector, and bench/run checks the
 * keys across processes with:
 *
 *   stdin  "roles"         one JSON line {"roles":{"lead":{KEY:ID,...},
 *                          "follow":{KEY:{LEADER_ID:N,...}},"bad":{KEY:N}}}:
 *                          who leads each key here, whom the followers here
 *                          name, how many are in no follower state
 *   stdin  "errors US"     one JSON line {"errors":[[KEY,T_US,CODE,N,MSG],...]}:
 *                          electors here whose last ERROR event came at or
 *                          after US, with its code and message
 *   stdin  "acquired US"   one JSON line {"acquired":[[KEY,T_US],...]}: the
 *                          keys whose elector here last became leader at or
 *                          after CLOCK_MONOTONIC time US (µs; the ACQUIRED
 *                          callback's time), with that time
 *   SIGTERM                stop every elector as "stop" does, first printing
 *                          one JSON line {"stopping":{KEY:[T0_US,T1_US]}}
 *                          after the stop: for each key led here when the
 *                          signal came, when its s3lect_stop began and
 *                          returned; then "stopped ...", exit 0
 *
 * The JSON line has VmRSS/VmHWM/Threads from /proc/self/status, the RSS and
 * threads before any elector existed, the CPU time used during the window
 * (getrusage, user + system) and the roles at the end: leaders, keys with
 * exactly one leader, followers that follow their key's leader. bench/run
 * flags a window with electors out of role; it does not hide it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <s3lect.h>

/* New in 0.10's ABI; weak, so that this links against an older libs3lect.a
 * (bench/run --baseline), which then stops from threads. */
int s3lect_stop_many(s3lect_elector *const *electors, size_t n);
#pragma weak s3lect_stop_many

#define MAX_STOP_THREADS 64

typedef struct opts {
    const char *prefix;
    const char *endpoint;
    long count, per_key, stop_threads;
    long first, step, total; /* step > 1: one of `step` processes (see above) */
    int peer;
    int followers_first; /* --stop-order followers-first: non-leaders, then leaders */
    int stop_many;       /* --stop-many: one s3lect_stop_many call (when the library has it) */
    int64_t lease, renew, deadline, frequent, infrequent;
    int64_t ready_timeout;
} opts;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Reads "Key:   value kB" fields of /proc/self/status; -1 if absent. */
static long proc_status(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    size_t klen = strlen(key);
    long v = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            v = strtol(line + klen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static void usage(void)
{
    fputs("usage: footprint --lock-prefix PREFIX --count K [--per-key N]\n"
          "         [--endpoint URL] [--lease MS] [--renew MS] [--deadline MS]\n"
          "         [--frequent MS] [--infrequent MS] [--ready-timeout MS]\n"
          "         [--stop-threads T] [--stop-order mixed|followers-first] [--stop-many 1]\n"
          "         [--peer 1] [--first F --step S --total T]\n"
          "PREFIX is a lock URL without the key: file:///tmp/dir or s3://bucket/dir;\n"
          "elector i uses PREFIX/kG.json with G = i / N (N defaults to 1: every\n"
          "elector leads its own key). S3 credentials come from the environment.\n",
          stderr);
    exit(2);
}

static long parse_long(const char *v)
{
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || !end || *end || end == v || x < 0)
        usage();
    return (long)x;
}

static void parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->lease = o->renew = o->deadline = o->frequent = o->infrequent = -1;
    o->ready_timeout = 120000;
    o->per_key = 1;
    o->stop_threads = 16;
    o->step = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        const char *k = argv[i], *v = argv[++i];
        if (strcmp(k, "--lock-prefix") == 0)
            o->prefix = v;
        else if (strcmp(k, "--endpoint") == 0)
            o->endpoint = v;
        else if (strcmp(k, "--count") == 0)
            o->count = parse_long(v);
        else if (strcmp(k, "--per-key") == 0)
            o->per_key = parse_long(v);
        else if (strcmp(k, "--stop-threads") == 0)
            o->stop_threads = parse_long(v);
        else if (strcmp(k, "--lease") == 0)
            o->lease = parse_long(v);
        else if (strcmp(k, "--renew") == 0)
            o->renew = parse_long(v);
        else if (strcmp(k, "--deadline") == 0)
            o->deadline = parse_long(v);
        else if (strcmp(k, "--frequent") == 0)
            o->frequent = parse_long(v);
        else if (strcmp(k, "--infrequent") == 0)
            o->infrequent = parse_long(v);
        else if (strcmp(k, "--stop-order") == 0) {
            if (strcmp(v, "followers-first") == 0)
                o->followers_first = 1;
            else if (strcmp(v, "mixed") != 0)
                usage();
        } else if (strcmp(k, "--stop-many") == 0) {
            o->stop_many = parse_long(v) != 0;
        } else if (strcmp(k, "--peer") == 0)
            o->peer = parse_long(v) != 0;
        else if (strcmp(k, "--first") == 0)
            o->first = parse_long(v);
        else if (strcmp(k, "--step") == 0)
            o->step = parse_long(v);
        else if (strcmp(k, "--total") == 0)
            o->total = parse_long(v);
        else if (strcmp(k, "--ready-timeout") == 0)
            o->ready_timeout = parse_long(v);
        else
            usage();
    }
    if (o->step > 1) {
        if (o->total <= 0 || o->first >= o->step || o->first >= o->total)
            usage();
        o->count = (o->total - o->first + o->step - 1) / o->step;
    }
    if (!o->prefix || o->count <= 0 || o->per_key <= 0 || o->stop_threads <= 0 ||
        o->stop_threads > MAX_STOP_THREADS || o->step <= 0)
        usage();
}

/* The global index of this process's elector k. */
static long gidx(const opts *o, long k)
{
    return o->first + k * o->step;
}

/* Reports on stdout (so bench/run records it as this configuration's
 * failure) and exits at once: the electors already started die with the
 * process, which is all a failed measurement needs. */
static void fail(long at, const char *what, int rc, const char *msg)
{
    printf("failed at=%ld what=%s error=%s: %s\n", at, what, s3lect_strerror(rc), msg);
    fflush(stdout);
    fprintf(stderr, "footprint: elector %ld: %s: %s: %s\n", at, what, s3lect_strerror(rc), msg);
    _exit(1);
}

static void set_timing(s3lect_config *cfg, long i, s3lect_option opt, int64_t v)
{
    int rc = v >= 0 ? s3lect_config_set_int(cfg, opt, v) : S3LECT_OK;
    if (rc) {
        char msg[512] = "";
        s3lect_config_errmsg(cfg, msg, sizeof msg);
        fail(i, "timing option", rc, msg);
    }
}

static void elector_id(char *buf, size_t len, long i)
{
    snprintf(buf, len, "e%ld-%ld", (long)getpid(), i);
}

static _Atomic int64_t *g_acquired_us; /* per local elector: last ACQUIRED, µs */

static void on_acquired(s3lect_elector *e, const s3lect_event *ev, void *userdata)
{
    (void)e;
    (void)ev;
    atomic_store((_Atomic int64_t *)userdata, mono_us());
}

/* Per local elector: the last ERROR event (time µs, code, message). */
typedef struct last_error {
    pthread_mutex_t mu;
    int64_t t_us;
    int code;
    long n;
    char msg[160];
} last_error;
static last_error *g_errors;

static void on_error(s3lect_elector *e, const s3lect_event *ev, void *userdata)
{
    (void)e;
    last_error *le = userdata;
    pthread_mutex_lock(&le->mu);
    le->t_us = mono_us();
    le->code = s3lect_event_code(ev);
    le->n++;
    snprintf(le->msg, sizeof le->msg, "%s", s3lect_event_message(ev));
    pthread_mutex_unlock(&le->mu);
}

static s3lect_elector *make_elector(const opts *o, long k)
{
    long i = gidx(o, k);
    s3lect_config *cfg = s3lect_config_new();
    if (!cfg)
        fail(i, "s3lect_config_new", S3LECT_ENOMEM, "");
    char lock[1024], id[64], msg[512] = "";
    snprintf(lock, sizeof lock, "%s/k%05ld.json", o->prefix, i / o->per_key);
    elector_id(id, sizeof id, i);
    int rc = s3lect_config_set_str(cfg, S3LECT_OPT_LOCK, lock);
    if (!rc)
        rc = s3lect_config_set_str(cfg, S3LECT_OPT_SERVER_ID, id);
    if (!rc && o->endpoint)
        rc = s3lect_config_set_str(cfg, S3LECT_OPT_ENDPOINT, o->endpoint);
    if (!rc && o->peer)
        rc = s3lect_config_set_bool(cfg, S3LECT_OPT_PEER_MODE, 1);
    if (rc) {
        s3lect_config_errmsg(cfg, msg, sizeof msg);
        fail(i, "config", rc, msg);
    }
    set_timing(cfg, i, S3LECT_OPT_LEASE_TIMEOUT, o->lease);
    set_timing(cfg, i, S3LECT_OPT_RENEW_INTERVAL, o->renew);
    set_timing(cfg, i, S3LECT_OPT_RENEW_DEADLINE, o->deadline);
    set_timing(cfg, i, S3LECT_OPT_FREQUENT_INTERVAL, o->frequent);
    set_timing(cfg, i, S3LECT_OPT_INFREQUENT_INTERVAL, o->infrequent);
    /* The keys are new (a fresh prefix per run): no leader of them can be
     * running, so they are created at once rather than after the lease a
     * node that never saw a lock waits (new_lock_wait, option 34; looked up
     * by name, as an older libs3lect.a has no such option). */
    const char *name = NULL;
    if (s3lect_option_info(34, &name, NULL, NULL, NULL, NULL) == 0 && name &&
        strcmp(name, "new_lock_wait") == 0)
        set_timing(cfg, i, (s3lect_option)34, 0);
    s3lect_elector *e = NULL;
    rc = s3lect_new(cfg, &e);
    if (rc) {
        s3lect_config_errmsg(cfg, msg, sizeof msg);
        fail(i, "s3lect_new", rc, msg);
    }
    s3lect_config_free(cfg);
    if (o->step > 1 || o->peer) {
        rc = s3lect_set_callback(e, S3LECT_EVENT_ACQUIRED, on_acquired, &g_acquired_us[k], NULL);
        if (!rc)
            rc = s3lect_set_callback(e, S3LECT_EVENT_ERROR, on_error, &g_errors[k], NULL);
        if (rc)
            fail(i, "s3lect_set_callback", rc, "");
    }
    rc = s3lect_start(e);
    if (rc) {
        s3lect_errmsg(e, msg, sizeof msg);
        fail(i, "s3lect_start", rc, msg);
    }
    return e;
}

typedef struct roles {
    long leaders;   /* electors that hold a valid lease now */
    long keys_led;  /* keys with exactly one leader */
    long followers; /* non-leaders following their key's only leader */
    long in_role;   /* keys_led + followers; K when everything is in place */
    long failing;   /* electors whose last store request failed */
} roles;

/* A follower is in its role when it does not lead, is in a follower state
 * (stable, or transition: a poll that lands just before a renewal sees the
 * same record again, which the algorithm treats as a transition) and names
 * `leader` (its key's leader, another elector of this process) as leader. */
static int follows(s3lect_elector *e, const char *leader, long *failing)
{
    s3lect_status *st = NULL;
    if (s3lect_get_status(e, &st) != S3LECT_OK)
        return 0;
    int state = s3lect_status_state(st);
    int ok = leader && !s3lect_status_is_leader(st) &&
             (state == S3LECT_STATE_FOLLOWER_STABLE || state == S3LECT_STATE_FOLLOWER_TRANSITION) &&
             strcmp(s3lect_status_leader_id(st), leader) == 0 &&
             strcmp(s3lect_status_server_id(st), leader) != 0;
    *failing += s3lect_status_consecutive_failures(st) > 0;
    s3lect_status_free(st);
    return ok;
}

/* One of several processes: leaders here, and followers in a follower state
 * naming a leader other than themselves (bench/run checks whom, with "roles");
 * keys_led is the number of local leaders too. */
static roles local_roles(s3lect_elector **es, const opts *o)
{
    roles r = {0, 0, 0, 0, 0};
    for (long k = 0; k < o->count; k++) {
        s3lect_status *st = NULL;
        if (s3lect_get_status(es[k], &st) != S3LECT_OK)
            continue;
        int state = s3lect_status_state(st);
        if (s3lect_status_is_leader(st))
            r.leaders++;
        else if ((state == S3LECT_STATE_FOLLOWER_STABLE ||
                  state == S3LECT_STATE_FOLLOWER_TRANSITION) &&
                 s3lect_status_leader_id(st)[0] &&
                 strcmp(s3lect_status_leader_id(st), s3lect_status_server_id(st)) != 0)
            r.followers++;
        r.failing += s3lect_status_consecutive_failures(st) > 0;
        s3lect_status_free(st);
    }
    r.keys_led = r.leaders;
    r.in_role = r.leaders + r.followers;
    return r;
}

/* Prints the "roles" JSON line (see the top of the file). Electors of one key
 * are listed in key order here, so each key's entries are printed together. */
static void print_roles(s3lect_elector **es, const opts *o)
{
    fputs("{\"roles\":{\"lead\":{", stdout);
    int first = 1;
    for (long k = 0; k < o->count; k++) {
        if (s3lect_is_leader(es[k])) {
            char id[64];
            elector_id(id, sizeof id, gidx(o, k));
            printf("%s\"%ld\":\"%s\"", first ? "" : ",", gidx(o, k) / o->per_key, id);
            first = 0;
        }
    }
    fputs("},\"follow\":{", stdout);
    first = 1;
    long bad_keys[4096], bad_n[4096], nbad = 0;
    for (long k = 0; k < o->count;) {
        long key = gidx(o, k) / o->per_key, end = k;
        while (end < o->count && gidx(o, end) / o->per_key == key)
            end++;
        /* Distinct leader ids named by this key's followers here (few). */
        char names[16][64];
        long counts[16], nn = 0, bad = 0;
        for (long j = k; j < end; j++) {
            s3lect_status *st = NULL;
            if (s3lect_get_status(es[j], &st) != S3LECT_OK) {
                bad++;
                continue;
            }
            int state = s3lect_status_state(st);
            const char *lid = s3lect_status_leader_id(st);
            if (s3lect_status_is_leader(st)) {
                /* listed under "lead" */
            } else if ((state == S3LECT_STATE_FOLLOWER_STABLE ||
                        state == S3LECT_STATE_FOLLOWER_TRANSITION) &&
                       lid[0] && strlen(lid) < 64) {
                long x = 0;
                while (x < nn && strcmp(names[x], lid) != 0)
                    x++;
                if (x == nn && nn < 16) {
                    snprintf(names[nn], sizeof names[nn], "%s", lid);
                    counts[nn++] = 0;
                }
                if (x < nn)
                    counts[x]++;
                else
                    bad++;
            } else {
                bad++;
            }
            s3lect_status_free(st);
        }
        if (nn) {
            printf("%s\"%ld\":{", first ? "" : ",", key);
            for (long x = 0; x < nn; x++)
                printf("%s\"%s\":%ld", x ? "," : "", names[x], counts[x]);
            fputs("}", stdout);
            first = 0;
        }
        if (bad && nbad < 4096) {
            bad_keys[nbad] = key;
            bad_n[nbad++] = bad;
        }
        k = end;
    }
    fputs("},\"bad\":{", stdout);
    for (long x = 0; x < nbad; x++)
        printf("%s\"%ld\":%ld", x ? "," : "", bad_keys[x], bad_n[x]);
    fputs("}}}\n", stdout);
    fflush(stdout);
}

/* Prints {"acquired":[[KEY,T_US],...]}: electors here whose last ACQUIRED
 * callback ran at or after `since` (µs, CLOCK_MONOTONIC). */
static void print_acquired(const opts *o, long long since)
{
    fputs("{\"acquired\":[", stdout);
    int first = 1;
    for (long k = 0; k < o->count; k++) {
        int64_t t = atomic_load(&g_acquired_us[k]);
        if (t && t >= since) {
            printf("%s[%ld,%lld]", first ? "" : ",", gidx(o, k) / o->per_key, (long long)t);
            first = 0;
        }
    }
    fputs("]}\n", stdout);
    fflush(stdout);
}

/* Prints {"errors":[[KEY,T_US,CODE,N,"MESSAGE"],...]}: electors here whose
 * last ERROR event came at or after `since` (N: their ERROR events so far). */
static void print_errors(const opts *o, long long since)
{
    fputs("{\"errors\":[", stdout);
    int first = 1;
    for (long k = 0; k < o->count; k++) {
        last_error *le = &g_errors[k];
        pthread_mutex_lock(&le->mu);
        if (le->n && le->t_us >= since) {
            printf("%s[%ld,%lld,%d,%ld,\"", first ? "" : ",", gidx(o, k) / o->per_key,
                   (long long)le->t_us, le->code, le->n);
            for (const char *c = le->msg; *c; c++) /* JSON-safe: drop quotes, controls */
                if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20)
                    putchar(*c);
            fputs("\"]", stdout);
            first = 0;
        }
        pthread_mutex_unlock(&le->mu);
    }
    fputs("]}\n", stdout);
    fflush(stdout);
}

static roles count_roles(s3lect_elector **es, const opts *o)
{
    if (o->step > 1)
        return local_roles(es, o);
    roles r = {0, 0, 0, 0, 0};
    for (long g = 0; g < o->count; g += o->per_key) {
        long end = g + o->per_key < o->count ? g + o->per_key : o->count, nl = 0, who = -1;
        for (long i = g; i < end; i++) {
            if (s3lect_is_leader(es[i])) {
                nl++;
                who = i;
            }
        }
        r.leaders += nl;
        char id[64];
        if (nl == 1) {
            r.keys_led++;
            elector_id(id, sizeof id, who);
        }
        /* The leader itself is not counted (it leads), but its failures are. */
        for (long i = g; i < end; i++)
            r.followers += follows(es[i], nl == 1 ? id : NULL, &r.failing);
    }
    r.in_role = r.keys_led + r.followers;
    return r;
}

typedef struct stopper {
    pthread_t th;
    s3lect_elector **es;
    long from, n, step;
    long errors;
    const char *was; /* NULL: every elector; else only those with was[i] == want */
    char want;
} stopper;

/* When each elector's s3lect_stop began and returned (µs, CLOCK_MONOTONIC). */
static int64_t *g_stop_t0, *g_stop_t1;

static void *stop_slice(void *arg)
{
    stopper *s = arg;
    for (long i = s->from; i < s->n; i += s->step) {
        if (s->was && s->was[i] != s->want)
            continue;
        g_stop_t0[i] = mono_us();
        s->errors += s3lect_stop(s->es[i]) != S3LECT_OK;
        g_stop_t1[i] = mono_us();
    }
    return NULL;
}

/* Stops every elector from up to `threads` threads (elector i on thread
 * i % threads, so the leaders spread over all of them); returns the number of
 * threads used, or -1 if none could be created (then it stopped them here). */
static long stop_all(s3lect_elector **es, long n, long threads, long *errors, const char *was,
                     char want)
{
    stopper st[MAX_STOP_THREADS];
    long t = threads < n ? threads : n, started = 0;
    for (long k = 0; k < t; k++) {
        st[k] = (stopper){
            .es = es, .from = k, .n = n, .step = t, .errors = 0, .was = was, .want = want};
        if (pthread_create(&st[k].th, NULL, stop_slice, &st[k]) != 0)
            break;
        started++;
    }
    /* Any slice whose thread could not be created is stopped here. */
    for (long k = started; k < t; k++)
        stop_slice(&st[k]);
    *errors = 0;
    for (long k = 0; k < t; k++) {
        if (k < started)
            pthread_join(st[k].th, NULL);
        *errors += st[k].errors;
    }
    return started ? started : -1;
}

/* Stops the electors (those with was[i] == want, or all) with one
 * s3lect_stop_many call; their stop times are the call's. */
static void stop_many(s3lect_elector **es, long n, long *errors, const char *was, char want)
{
    s3lect_elector **sel = malloc((size_t)(n ? n : 1) * sizeof *sel);
    long k = 0;
    for (long i = 0; sel && i < n; i++)
        if (!was || was[i] == want)
            sel[k++] = es[i];
    int64_t t0 = mono_us();
    *errors = sel ? s3lect_stop_many(sel, (size_t)k) != S3LECT_OK : 1;
    int64_t t1 = mono_us();
    for (long i = 0; i < n; i++)
        if (!was || was[i] == want) {
            g_stop_t0[i] = t0;
            g_stop_t1[i] = t1;
        }
    free(sel);
}

static pthread_mutex_t g_out = PTHREAD_MUTEX_INITIALIZER; /* one stdout line at a time */

/* Stops every elector, prints "stopped ..." (with --step > 1 or --peer first
 * the "stopping" line), frees them; returns the number of stop errors. */
static long stop_and_report(s3lect_elector **es, const opts *o)
{
    long n = o->count;
    char *was = calloc((size_t)n, 1);
    long leaders = 0;
    for (long i = 0; i < n; i++) {
        was[i] = (char)(s3lect_is_leader(es[i]) != 0);
        leaders += was[i];
    }
    long errors = 0;
    int64_t s0 = mono_ms();
    long used;
    int64_t followers_ms = -1; /* followers-first: when the followers were stopped */
    int many = o->stop_many && s3lect_stop_many;
    if (many) {
        long e1 = 0;
        if (o->followers_first) {
            stop_many(es, n, &e1, was, 0);
            followers_ms = mono_ms() - s0;
            stop_many(es, n, &errors, was, 1);
        } else {
            stop_many(es, n, &errors, NULL, 0);
        }
        errors += e1;
        used = 1;
    } else if (o->followers_first) {
        /* The electors that did not lead first, so none of them takes over a
         * key that a leader of this process releases; then the leaders. */
        long e1 = 0;
        stop_all(es, n, o->stop_threads, &e1, was, 0);
        followers_ms = mono_ms() - s0;
        used = stop_all(es, n, o->stop_threads, &errors, was, 1);
        errors += e1;
    } else {
        used = stop_all(es, n, o->stop_threads, &errors, NULL, 0);
    }
    int64_t stop_ms = mono_ms() - s0;
    pthread_mutex_lock(&g_out);
    if (o->step > 1 || o->peer) {
        fputs("{\"stopping\":{", stdout);
        int first = 1;
        for (long i = 0; i < n; i++) {
            if (was[i]) {
                printf("%s\"%ld\":[%lld,%lld]", first ? "" : ",", gidx(o, i) / o->per_key,
                       (long long)g_stop_t0[i], (long long)g_stop_t1[i]);
                first = 0;
            }
        }
        fputs("}}\n", stdout);
    }
    s0 = mono_ms();
    for (long i = 0; i < n; i++)
        s3lect_free_elector(es[i]);
    int64_t free_ms = mono_ms() - s0;
    printf("stopped count=%ld leaders=%ld stop_ms=%lld free_ms=%lld threads=%ld errors=%ld "
           "mode=%s followers_ms=%lld\n",
           n, leaders, (long long)stop_ms, (long long)free_ms, used, errors,
           many ? "stop_many" : "threads", (long long)followers_ms);
    fflush(stdout);
    pthread_mutex_unlock(&g_out);
    free(was);
    return errors;
}

/* The next line of stdin into buf (without its newline): 0; -1 at EOF or an
 * error; -2 when SIGTERM came first (sfd, a signalfd, is readable). No
 * thread of its own, so the process has only the library's threads and
 * this one. */
static int next_line(char *buf, size_t cap, int sfd)
{
    static char in[4096];
    static size_t have;
    for (;;) {
        char *nl = memchr(in, '\n', have);
        if (nl) {
            size_t n = (size_t)(nl - in);
            size_t k = n < cap - 1 ? n : cap - 1;
            memcpy(buf, in, k);
            buf[k] = '\0';
            memmove(in, nl + 1, have - n - 1);
            have -= n + 1;
            return 0;
        }
        if (have == sizeof in)
            have = 0; /* a line too long to be a command: drop it */
        struct pollfd pf[2] = {{0, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (pf[1].revents & POLLIN)
            return -2;
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = read(0, in + have, sizeof in - have);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return -1;
            have += (size_t)r;
        }
    }
}

int main(int argc, char **argv)
{
    opts o;
    parse(argc, argv, &o);
    setvbuf(stdout, NULL, _IOLBF, 0);
    long keys = (o.count + o.per_key - 1) / o.per_key;
    if (o.step > 1)
        keys = (gidx(&o, o.count - 1) / o.per_key) - (gidx(&o, 0) / o.per_key) + 1;

    /* SIGTERM is read from a signalfd by the command loop; blocked before
     * any other thread exists (the library blocks it in its own threads
     * anyway). */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0)
        fail(0, "signalfd", S3LECT_EINVAL, strerror(errno));

    long rss0 = proc_status("VmRSS"), threads0 = proc_status("Threads");
    s3lect_elector **es = calloc((size_t)o.count, sizeof *es);
    g_acquired_us = calloc((size_t)o.count, sizeof *g_acquired_us);
    g_stop_t0 = calloc((size_t)o.count, sizeof *g_stop_t0);
    g_stop_t1 = calloc((size_t)o.count, sizeof *g_stop_t1);
    g_errors = calloc((size_t)o.count, sizeof *g_errors);
    if (!es || !g_acquired_us || !g_stop_t0 || !g_stop_t1 || !g_errors)
        fail(0, "calloc", S3LECT_ENOMEM, "");
    for (long k = 0; k < o.count; k++)
        pthread_mutex_init(&g_errors[k].mu, NULL);
    int64_t t0 = mono_ms();
    for (long i = 0; i < o.count; i++)
        es[i] = make_elector(&o, i);
    int64_t created_ms = mono_ms() - t0;
    fprintf(stderr, "footprint: %ld electors on %ld keys created and started in %lld ms\n", o.count,
            keys, (long long)created_ms);

    /* Counting roles reads every elector's status: poll less often when there
     * are many, so the readiness loop does not compete with the electors. */
    int64_t poll = o.count / 10 < 100 ? 100 : (o.count / 10 > 1000 ? 1000 : o.count / 10);
    int64_t deadline = t0 + o.ready_timeout, next_note = mono_ms() + 10000;
    roles r;
    while ((r = count_roles(es, &o)).in_role < o.count && mono_ms() < deadline) {
        if (mono_ms() >= next_note) {
            fprintf(stderr, "footprint: %lld ms: in role %ld/%ld (leaders %ld, keys led %ld/%ld)\n",
                    (long long)(mono_ms() - t0), r.in_role, o.count, r.leaders, r.keys_led, keys);
            next_note += 10000;
        }
        sleep_ms(poll);
    }
    pthread_mutex_lock(&g_out);
    printf("%s count=%ld keys=%ld per_key=%ld in_role=%ld leaders=%ld keys_led=%ld "
           "followers=%ld create_ms=%lld start_ms=%lld\n",
           r.in_role == o.count ? "ready" : "notready", o.count, keys, o.per_key, r.in_role,
           r.leaders, r.keys_led, r.followers, (long long)created_ms, (long long)(mono_ms() - t0));
    pthread_mutex_unlock(&g_out);

    char line[128];
    int got;
    while ((got = next_line(line, sizeof line, sfd)) == 0) {
        long long ms;
        if (sscanf(line, "measure %lld", &ms) == 1 && ms > 0) {
            double c0 = cpu_seconds();
            int64_t m0 = mono_ms();
            sleep_ms(ms);
            double cpu = cpu_seconds() - c0;
            int64_t wall = mono_ms() - m0;
            long rss = proc_status("VmRSS"), hwm = proc_status("VmHWM");
            long threads = proc_status("Threads");
            r = count_roles(es, &o);
            pthread_mutex_lock(&g_out);
            printf("{\"count\":%ld,\"keys\":%ld,\"per_key\":%ld,\"wall_ms\":%lld,\"cpu_s\":%.4f,"
                   "\"rss_kb\":%ld,\"hwm_kb\":%ld,\"rss0_kb\":%ld,\"threads\":%ld,"
                   "\"threads0\":%ld,\"leaders\":%ld,\"keys_led\":%ld,\"followers\":%ld,"
                   "\"in_role\":%ld,\"failing\":%ld}\n",
                   o.count, keys, o.per_key, (long long)wall, cpu, rss, hwm, rss0, threads,
                   threads0, r.leaders, r.keys_led, r.followers, r.in_role, r.failing);
            pthread_mutex_unlock(&g_out);
        } else if (strncmp(line, "roles", 5) == 0) {
            pthread_mutex_lock(&g_out);
            print_roles(es, &o);
            pthread_mutex_unlock(&g_out);
        } else if (sscanf(line, "errors %lld", &ms) == 1) {
            pthread_mutex_lock(&g_out);
            print_errors(&o, ms);
            pthread_mutex_unlock(&g_out);
        } else if (sscanf(line, "status %lld", &ms) == 1) {
            /* {"status":[...]}: s3lect_status_json of every elector here on key MS */
            pthread_mutex_lock(&g_out);
            fputs("{\"status\":[", stdout);
            int first = 1;
            for (long k = 0; k < o.count; k++) {
                char *js = NULL;
                if (gidx(&o, k) / o.per_key != ms)
                    continue;
                if (s3lect_status_json(es[k], &js) == S3LECT_OK && js) {
                    printf("%s%s", first ? "" : ",", js);
                    first = 0;
                }
                s3lect_free(js);
            }
            fputs("]}\n", stdout);
            fflush(stdout);
            pthread_mutex_unlock(&g_out);
        } else if (sscanf(line, "acquired %lld", &ms) == 1) {
            pthread_mutex_lock(&g_out);
            print_acquired(&o, ms);
            pthread_mutex_unlock(&g_out);
        } else if (strncmp(line, "stop", 4) == 0) {
            break;
        }
    }
    /* "stop", EOF or SIGTERM (got == -2): the same stop. */
    (void)got;
    stop_and_report(es, &o);
    _exit(0);
}
