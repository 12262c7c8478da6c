/* SPDX-License-Identifier: Apache-2.0 */
/* runtime_scale.c - many S3 electors in one process, for tests/s3/test_s3_runtime.py.
 *
 *   runtime_scale LOCKPREFIX KEYS PER_KEY MAX_CONNECTIONS NOFILE SECONDS
 *
 * LOCKPREFIX is "s3://bucket/prefix"; lock k is LOCKPREFIX-k.json, with
 * PER_KEY electors each (ids "n<k>-<j>"). The store settings come from the
 * environment (AWS_ENDPOINT_URL_S3, keys, region), as for the CLI. The
 * process lowers its descriptor limit to NOFILE, starts every elector, and
 * samples every 200 ms, for at most SECONDS, until each lock has one leader
 * that all its electors name; then samples 3 s more, stops every elector
 * (8 threads) and prints one JSON line: settled, the most leaders seen on one
 * lock, and the peaks of threads, descriptors and TCP connections to the
 * endpoint's port. Exit 0 even when it did not settle: the test judges.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "s3lect.h"
#include "testutil.h"

/* Established TCP connections of this process whose remote port is `port`:
 * socket inodes among our descriptors, matched with /proc/self/net/tcp{,6}. */
static int tcp_conns(int port)
{
    unsigned long inodes[4096];
    int ni = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && ni < 4096) {
        char p[300], l[64];
        snprintf(p, sizeof p, "/proc/self/fd/%s", de->d_name);
        ssize_t n = readlink(p, l, sizeof l - 1);
        if (n > 0) {
            l[n] = '\0';
            unsigned long ino;
            if (sscanf(l, "socket:[%lu]", &ino) == 1)
                inodes[ni++] = ino;
        }
    }
    closedir(d);
    int count = 0;
    const char *tables[] = {"/proc/self/net/tcp", "/proc/self/net/tcp6"};
    for (int t = 0; t < 2; t++) {
        FILE *f = fopen(tables[t], "r");
        if (!f)
            continue;
        char line[512];
        if (!fgets(line, sizeof line, f)) {
            fclose(f);
            continue;
        }
        while (fgets(line, sizeof line, f)) {
            char local[128], remote[128];
            unsigned st;
            unsigned long ino;
            if (sscanf(line, "%*d: %127s %127s %x %*s %*s %*s %*s %*s %lu", local, remote, &st,
                       &ino) != 4)
                continue;
            const char *colon = strrchr(remote, ':');
            if (!colon || st != 1 /* ESTABLISHED */ || (int)strtol(colon + 1, NULL, 16) != port)
                continue;
            for (int i = 0; i < ni; i++)
                if (inodes[i] == ino) {
                    count++;
                    break;
                }
        }
        fclose(f);
    }
    return count;
}

typedef struct slice {
    s3lect_elector **e;
    int from, to;
} slice;

static void *stop_slice(void *arg)
{
    slice *s = arg;
    for (int i = s->from; i < s->to; i++)
        s3lect_stop(s->e[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: runtime_scale LOCKPREFIX KEYS PER_KEY MAX_CONNECTIONS NOFILE "
                        "SECONDS\n");
        return 2;
    }
    const char *prefix = argv[1];
    int keys = atoi(argv[2]), per = atoi(argv[3]), maxc = atoi(argv[4]), nofile = atoi(argv[5]);
    int64_t seconds = atoi(argv[6]);
    const char *ep = getenv("AWS_ENDPOINT_URL_S3");
    const char *pp = ep ? strrchr(ep, ':') : NULL;
    int port = pp ? atoi(pp + 1) : 0;
    int n = keys * per;
    struct rlimit lim;
    getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = (rlim_t)nofile;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
        perror("setrlimit");
        return 2;
    }
    int base_threads = t_count_entries("/proc/self/task"),
        base_fds = t_count_entries("/proc/self/fd") - 1;
    s3lect_elector **e = calloc((size_t)n, sizeof *e);
    int started = 0;
    char err[512] = "";
    for (int k = 0; k < keys; k++)
        for (int j = 0; j < per; j++) {
            char lock[700], id[32];
            snprintf(lock, sizeof lock, "%s-%d.json", prefix, k);
            snprintf(id, sizeof id, "n%d-%d", k, j);
            s3lect_config *c = s3lect_config_new();
            s3lect_config_set_str(c, S3LECT_OPT_LOCK, lock);
            s3lect_config_set_str(c, S3LECT_OPT_SERVER_ID, id);
            /* a new lock: no leader of it can be running (new_lock_wait) */
            s3lect_config_set_int(c, S3LECT_OPT_NEW_LOCK_WAIT, 0);
            s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, 6000);
            s3lect_config_set_int(c, S3LECT_OPT_RENEW_INTERVAL, 2000);
            s3lect_config_set_int(c, S3LECT_OPT_RENEW_DEADLINE, 4500);
            s3lect_config_set_int(c, S3LECT_OPT_FREQUENT_INTERVAL, 1000);
            s3lect_config_set_int(c, S3LECT_OPT_INFREQUENT_INTERVAL, 4000);
            s3lect_config_set_int(c, S3LECT_OPT_MAX_CONNECTIONS, maxc);
            s3lect_elector *x = NULL;
            if (s3lect_new(c, &x) == 0 && s3lect_start(x) == 0)
                started++;
            else if (!err[0])
                s3lect_config_errmsg(c, err, sizeof err);
            s3lect_config_free(c);
            e[k * per + j] = x;
        }
    int settled = 0, worst = 0, peak_threads = 0, peak_fds = 0, peak_conns = 0;
    int64_t t0 = t_now_ms(), settled_at = -1, end = t0 + seconds * 1000, extra_until = -1;
    while (t_now_ms() < end && started == n) {
        int ok = 1;
        for (int k = 0; k < keys; k++) {
            int leaders = 0, lead = -1;
            for (int j = 0; j < per; j++)
                if (s3lect_is_leader(e[k * per + j])) {
                    leaders++;
                    lead = j;
                }
            worst = leaders > worst ? leaders : worst;
            if (leaders != 1) {
                ok = 0;
                continue;
            }
            char want[32], got[32];
            snprintf(want, sizeof want, "n%d-%d", k, lead);
            for (int j = 0; j < per; j++) {
                s3lect_leader_id(e[k * per + j], got, sizeof got);
                ok = ok && strcmp(got, want) == 0;
            }
        }
        int th = t_count_entries("/proc/self/task"), fd = t_count_entries("/proc/self/fd") - 1,
            cn = tcp_conns(port);
        peak_threads = th > peak_threads ? th : peak_threads;
        peak_fds = fd > peak_fds ? fd : peak_fds;
        peak_conns = cn > peak_conns ? cn : peak_conns;
        if (ok && settled_at < 0) {
            settled_at = t_now_ms() - t0;
            extra_until = t_now_ms() + 3000;
        }
        settled = ok && settled_at >= 0;
        if (extra_until > 0 && t_now_ms() >= extra_until)
            break;
        t_sleep_ms(200);
    }
    int leaders = 0;
    for (int i = 0; i < n; i++)
        leaders += e[i] && s3lect_is_leader(e[i]);
    int64_t s0 = t_now_ms();
    pthread_t th[8];
    slice sl[8];
    for (int i = 0; i < 8; i++) {
        sl[i] = (slice){e, i * n / 8, (i + 1) * n / 8};
        pthread_create(&th[i], NULL, stop_slice, &sl[i]);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    int64_t stop_ms = t_now_ms() - s0;
    for (int i = 0; i < n; i++)
        s3lect_free_elector(e[i]);
    free(e);
    for (char *p = err; *p; p++)
        if (*p == '"' || *p == '\\')
            *p = '\'';
    printf("{\"electors\":%d,\"started\":%d,\"settled\":%s,\"settledMs\":%lld,\"mostLeaders\":%d,"
           "\"threads\":%d,\"baseThreads\":%d,\"fds\":%d,\"baseFds\":%d,\"connections\":%d,"
           "\"leadersAtStop\":%d,\"stopMs\":%lld,\"error\":\"%s\"}\n",
           n, started, settled ? "true" : "false", (long long)settled_at, worst, peak_threads,
           base_threads, peak_fds, base_fds, peak_conns, leaders, (long long)stop_ms, err);
    return 0;
}
