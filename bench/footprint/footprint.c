/* footprint.c - runs K electors in one process and measures what they cost.
 *
 * Two of these run side by side on the same K lock keys: one with
 * --role leader (its electors take every lock and renew it) and, once those
 * lead, one with --role follower (its electors find a live leader and stay
 * idle followers). bench/run drives both over stdin/stdout:
 *
 *   stdout "ready ..."         all K electors are in their role
 *   stdin  "measure MS"        measure for MS milliseconds, print one JSON line
 *   stdin  "stop" or EOF       stop every elector, print "stopped ...", exit 0
 *
 * The JSON line has the RSS (VmRSS, VmHWM from /proc/self/status), the
 * thread count, the RSS before any elector existed, the CPU time used during
 * the window (getrusage, user + system) and how many electors were still in
 * their role at the end (a measurement with electors out of role is flagged
 * by bench/run, not hidden).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <s3lect.h>

typedef struct opts {
    const char *role;
    const char *prefix;
    const char *endpoint;
    long count;
    int64_t lease, renew, deadline, frequent, infrequent;
    int64_t ready_timeout;
} opts;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

static void die(const char *what, int rc, s3lect_config *cfg)
{
    char msg[512] = "";
    if (cfg)
        s3lect_config_errmsg(cfg, msg, sizeof msg);
    fprintf(stderr, "footprint: %s: %s %s\n", what, s3lect_strerror(rc), msg);
    exit(1);
}

static void usage(void)
{
    fputs("usage: footprint --role leader|follower --lock-prefix PREFIX --count K\n"
          "         [--endpoint URL] [--lease MS] [--renew MS] [--deadline MS]\n"
          "         [--frequent MS] [--infrequent MS] [--ready-timeout MS]\n"
          "PREFIX is a lock URL without the key: file:///tmp/dir or s3://bucket/dir;\n"
          "elector i uses PREFIX/kI.json. S3 credentials come from the environment.\n",
          stderr);
    exit(2);
}

static void parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->lease = o->renew = o->deadline = o->frequent = o->infrequent = -1;
    o->ready_timeout = 120000;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        const char *k = argv[i], *v = argv[++i];
        if (strcmp(k, "--role") == 0)
            o->role = v;
        else if (strcmp(k, "--lock-prefix") == 0)
            o->prefix = v;
        else if (strcmp(k, "--endpoint") == 0)
            o->endpoint = v;
        else if (strcmp(k, "--count") == 0)
            o->count = strtol(v, NULL, 10);
        else if (strcmp(k, "--lease") == 0)
            o->lease = strtoll(v, NULL, 10);
        else if (strcmp(k, "--renew") == 0)
            o->renew = strtoll(v, NULL, 10);
        else if (strcmp(k, "--deadline") == 0)
            o->deadline = strtoll(v, NULL, 10);
        else if (strcmp(k, "--frequent") == 0)
            o->frequent = strtoll(v, NULL, 10);
        else if (strcmp(k, "--infrequent") == 0)
            o->infrequent = strtoll(v, NULL, 10);
        else if (strcmp(k, "--ready-timeout") == 0)
            o->ready_timeout = strtoll(v, NULL, 10);
        else
            usage();
    }
    if (!o->role || !o->prefix || o->count <= 0 ||
        (strcmp(o->role, "leader") != 0 && strcmp(o->role, "follower") != 0))
        usage();
}

static void set_timing(s3lect_config *cfg, s3lect_option opt, int64_t v)
{
    int rc = v >= 0 ? s3lect_config_set_int(cfg, opt, v) : S3LECT_OK;
    if (rc)
        die("timing option", rc, cfg);
}

static s3lect_elector *make_elector(const opts *o, long i)
{
    s3lect_config *cfg = s3lect_config_new();
    if (!cfg)
        die("s3lect_config_new", S3LECT_ENOMEM, NULL);
    char lock[1024], id[64];
    snprintf(lock, sizeof lock, "%s/k%05ld.json", o->prefix, i);
    snprintf(id, sizeof id, "%s-%ld-%ld", o->role, (long)getpid(), i);
    int rc = s3lect_config_set_str(cfg, S3LECT_OPT_LOCK, lock);
    if (!rc)
        rc = s3lect_config_set_str(cfg, S3LECT_OPT_SERVER_ID, id);
    if (!rc && o->endpoint)
        rc = s3lect_config_set_str(cfg, S3LECT_OPT_ENDPOINT, o->endpoint);
    if (rc)
        die("config", rc, cfg);
    set_timing(cfg, S3LECT_OPT_LEASE_TIMEOUT, o->lease);
    set_timing(cfg, S3LECT_OPT_RENEW_INTERVAL, o->renew);
    set_timing(cfg, S3LECT_OPT_RENEW_DEADLINE, o->deadline);
    set_timing(cfg, S3LECT_OPT_FREQUENT_INTERVAL, o->frequent);
    set_timing(cfg, S3LECT_OPT_INFREQUENT_INTERVAL, o->infrequent);
    s3lect_elector *e = NULL;
    rc = s3lect_new(cfg, &e);
    if (rc)
        die("s3lect_new", rc, cfg);
    s3lect_config_free(cfg);
    rc = s3lect_start(e);
    if (rc)
        die("s3lect_start", rc, NULL);
    return e;
}

/* 1 if elector e is where its role wants it: leading, or following a known leader
 * (in the stable or the transition state: a poll that lands just before a
 * renewal sees the same record again, which is a transition by design). */
static int in_role(s3lect_elector *e, int leader)
{
    if (leader)
        return s3lect_is_leader(e);
    s3lect_status *st = NULL;
    if (s3lect_get_status(e, &st) != S3LECT_OK)
        return 0;
    int state = s3lect_status_state(st);
    int ok = !s3lect_status_is_leader(st) &&
             (state == S3LECT_STATE_FOLLOWER_STABLE || state == S3LECT_STATE_FOLLOWER_TRANSITION) &&
             s3lect_status_leader_id(st)[0] != '\0';
    s3lect_status_free(st);
    return ok;
}

static long count_in_role(s3lect_elector **es, long n, int leader)
{
    long c = 0;
    for (long i = 0; i < n; i++)
        c += in_role(es[i], leader);
    return c;
}

static long count_failing(s3lect_elector **es, long n)
{
    long c = 0;
    for (long i = 0; i < n; i++) {
        s3lect_status *st = NULL;
        if (s3lect_get_status(es[i], &st) == S3LECT_OK) {
            c += s3lect_status_consecutive_failures(st) > 0;
            s3lect_status_free(st);
        }
    }
    return c;
}

int main(int argc, char **argv)
{
    opts o;
    parse(argc, argv, &o);
    int leader = strcmp(o.role, "leader") == 0;
    setvbuf(stdout, NULL, _IOLBF, 0);

    long rss0 = proc_status("VmRSS"), threads0 = proc_status("Threads");
    s3lect_elector **es = calloc((size_t)o.count, sizeof *es);
    if (!es)
        die("calloc", S3LECT_ENOMEM, NULL);
    int64_t t0 = mono_ms();
    for (long i = 0; i < o.count; i++)
        es[i] = make_elector(&o, i);

    int64_t deadline = t0 + o.ready_timeout;
    long ready = 0;
    while ((ready = count_in_role(es, o.count, leader)) < o.count && mono_ms() < deadline)
        sleep_ms(100);
    printf("%s role=%s count=%ld in_role=%ld start_ms=%lld\n",
           ready == o.count ? "ready" : "notready", o.role, o.count, ready,
           (long long)(mono_ms() - t0));

    char line[128];
    while (fgets(line, sizeof line, stdin)) {
        long long ms;
        if (sscanf(line, "measure %lld", &ms) == 1 && ms > 0) {
            double c0 = cpu_seconds();
            int64_t m0 = mono_ms();
            sleep_ms(ms);
            double cpu = cpu_seconds() - c0;
            int64_t wall = mono_ms() - m0;
            printf("{\"role\":\"%s\",\"count\":%ld,\"wall_ms\":%lld,\"cpu_s\":%.4f,"
                   "\"rss_kb\":%ld,\"hwm_kb\":%ld,\"rss0_kb\":%ld,\"threads\":%ld,"
                   "\"threads0\":%ld,\"in_role\":%ld,\"failing\":%ld}\n",
                   o.role, o.count, (long long)wall, cpu, proc_status("VmRSS"),
                   proc_status("VmHWM"), rss0, proc_status("Threads"), threads0,
                   count_in_role(es, o.count, leader), count_failing(es, o.count));
        } else if (strncmp(line, "stop", 4) == 0) {
            break;
        }
    }
    int64_t s0 = mono_ms();
    for (long i = 0; i < o.count; i++)
        s3lect_free_elector(es[i]);
    free(es);
    printf("stopped count=%ld stop_ms=%lld\n", o.count, (long long)(mono_ms() - s0));
    return 0;
}
