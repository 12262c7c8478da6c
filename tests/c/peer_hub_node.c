/* SPDX-License-Identifier: Apache-2.0 */
/* peer_hub_node.c - one process of many zero-config peer-mode electors, for
 * tests/peer/test_peer_hub.py (batched follower checks, docs/peer.md).
 *
 *   peer_hub_node DIR KEYS ID [PER_KEY [INFREQUENT_MS]]
 *
 * Starts PER_KEY (default 1) electors on each of KEYS locks
 * file://DIR/k<k>.json, with server id ID (ID-<j> with PER_KEY > 1), in peer
 * mode (zero-config: no certificates), advertising 127.0.0.1 on an ephemeral
 * port, with short timings (lease 3 s, renewals every 500 ms, peer_timeout
 * 2 s; infrequent_interval, and so the long-poll wait, 1 s unless
 * INFREQUENT_MS says otherwise).
 * Every 250 ms it prints one JSON line: how many it leads, the store reads
 * and writes (and the writes refused: lost races), the peer checks
 * (answered, not the leader, failed) of all of them, and the established TCP
 * connections this process opened (remote side not one
 * of its own listening ports) -- the follower side of peer mode. SIGTERM or
 * SIGINT stops every elector (releasing what it leads) and exits 0; SIGUSR1
 * stops the first elector alone (the samples then leave it out).
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "s3lect.h"
#include "testutil.h"

static volatile sig_atomic_t g_stop, g_stop_one;

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        g_stop_one = 1;
    else
        g_stop = 1;
}

/* The socket inodes among this process's descriptors. */
static int socket_inodes(unsigned long *ino, int cap)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL && n < cap) {
        char p[300], l[64];
        snprintf(p, sizeof p, "/proc/self/fd/%s", de->d_name);
        ssize_t k = readlink(p, l, sizeof l - 1);
        if (k <= 0)
            continue;
        l[k] = '\0';
        if (sscanf(l, "socket:[%lu]", &ino[n]) == 1)
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* Established connections of this process that it opened: its own sockets
 * whose local port is not one it listens on. */
static int outgoing_conns(void)
{
    static unsigned long ino[8192];
    int ni = socket_inodes(ino, 8192);
    int listen[4096], nl = 0, count = 0;
    const char *tables[] = {"/proc/self/net/tcp", "/proc/self/net/tcp6"};
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < 2; t++) {
            FILE *f = fopen(tables[t], "r");
            char line[512];
            while (f && fgets(line, sizeof line, f)) {
                char local[128], remote[128];
                unsigned st;
                unsigned long in;
                if (sscanf(line, "%*d: %127s %127s %x %*s %*s %*s %*s %*s %lu", local, remote, &st,
                           &in) != 4)
                    continue;
                int mine = 0;
                for (int i = 0; i < ni && !mine; i++)
                    mine = ino[i] == in;
                const char *lc = strrchr(local, ':');
                int lport = lc ? (int)strtol(lc + 1, NULL, 16) : -1;
                if (!mine)
                    continue;
                if (pass == 0 && st == 0x0A && nl < 4096) /* LISTEN */
                    listen[nl++] = lport;
                if (pass == 1 && st == 1) { /* ESTABLISHED */
                    int in_listen = 0;
                    for (int i = 0; i < nl && !in_listen; i++)
                        in_listen = listen[i] == lport;
                    count += !in_listen;
                }
            }
            if (f)
                fclose(f);
        }
    return count;
}

/* Sums the values of the metric lines that start with `prefix` and contain
 * `tag`. */
static unsigned long long sum_metric(const char *text, const char *prefix, const char *tag)
{
    unsigned long long sum = 0;
    size_t pl = strlen(prefix);
    for (const char *l = text; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        if (len > pl && strncmp(l, prefix, pl) == 0) {
            char line[1024];
            snprintf(line, sizeof line, "%.*s", (int)(len < 1023 ? len : 1023), l);
            const char *sp = strrchr(line, ' ');
            if (strstr(line, tag) && sp)
                sum += strtoull(sp + 1, NULL, 10);
        }
        l = end ? end + 1 : NULL;
    }
    return sum;
}

static void *stop_one(void *arg)
{
    s3lect_stop(arg);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: peer_hub_node DIR KEYS ID [PER_KEY [INFREQUENT_MS]]\n");
        return 2;
    }
    const char *dir = argv[1], *id = argv[3];
    int per = argc >= 5 ? atoi(argv[4]) : 1;
    int64_t infrequent = argc >= 6 ? atoll(argv[5]) : 1000;
    int keys = atoi(argv[2]) * (per > 0 ? per : 1); /* electors */
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGUSR1, on_signal);
    s3lect_elector **e = calloc((size_t)keys, sizeof *e);
    for (int k = 0; k < keys; k++) {
        char lock[700], eid[300];
        snprintf(eid, sizeof eid, per > 1 ? "%s-%d" : "%s", id, k % (per > 0 ? per : 1));
        snprintf(lock, sizeof lock, "file://%s/k%d.json", dir, k / (per > 0 ? per : 1));
        s3lect_config *c = s3lect_config_new();
        s3lect_config_set_str(c, S3LECT_OPT_LOCK, lock);
        s3lect_config_set_str(c, S3LECT_OPT_SERVER_ID, eid);
        /* a new lock: no leader of it can be running (new_lock_wait) */
        s3lect_config_set_int(c, S3LECT_OPT_NEW_LOCK_WAIT, 0);
        s3lect_config_set_int(c, S3LECT_OPT_PEER_MODE, 1);
        s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, 3000);
        s3lect_config_set_int(c, S3LECT_OPT_RENEW_INTERVAL, 500);
        s3lect_config_set_int(c, S3LECT_OPT_RENEW_DEADLINE, 2000);
        s3lect_config_set_int(c, S3LECT_OPT_FREQUENT_INTERVAL, 250);
        s3lect_config_set_int(c, S3LECT_OPT_INFREQUENT_INTERVAL, infrequent);
        s3lect_config_set_int(c, S3LECT_OPT_PEER_TIMEOUT, 2000);
        char err[512] = "";
        if (s3lect_new(c, &e[k]) != 0 || s3lect_start(e[k]) != 0) {
            s3lect_config_errmsg(c, err, sizeof err);
            if (!err[0] && e[k])
                s3lect_errmsg(e[k], err, sizeof err);
            fprintf(stderr, "peer_hub_node: elector %d: %s\n", k, err);
            return 1;
        }
        s3lect_config_free(c);
    }
    int64_t t0 = t_now_ms();
    int first = 0; /* electors before it are stopped */
    while (!g_stop) {
        if (g_stop_one && first == 0) {
            s3lect_stop(e[0]);
            first = 1;
        }
        int leading = 0;
        for (int k = first; k < keys; k++)
            leading += s3lect_is_leader(e[k]);
        char *m = NULL;
        unsigned long long gets = 0, answer = 0, notl = 0, failed = 0, puts = 0, refused = 0;
        char classes[400] = "";
        if (s3lect_metrics_text(e + first, (size_t)(keys - first), &m) == 0 && m) {
            gets = sum_metric(m, "s3lect_store_requests_total{", "op=\"get\"");
            puts = sum_metric(m, "s3lect_store_requests_total{", "op=\"put\"");
            refused = sum_metric(m, "s3lect_store_requests_total{",
                                 "op=\"put\",outcome=\"precondition\"");
            answer = sum_metric(m, "s3lect_peer_checks_total{", "result=\"answer\"");
            notl = sum_metric(m, "s3lect_peer_checks_total{", "result=\"not_leader\"");
            failed = sum_metric(m, "s3lect_peer_checks_total{", "result=\"failed\"");
            static const char *const names[] = {
                "connect",    "timeout",  "tlsName",   "tlsCa", "tlsClientCert", "tls",
                "httpStatus", "tooLarge", "malformed", "other", "tlsPin",        "tlsId"};
            for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
                char tag[64];
                snprintf(tag, sizeof tag, "class=\"%s\"", names[i]);
                unsigned long long v = sum_metric(m, "s3lect_peer_fallbacks_total{", tag);
                size_t o = strlen(classes);
                if (v)
                    snprintf(classes + o, sizeof classes - o, "%s\"%s\":%llu", o ? "," : "",
                             names[i], v);
            }
        }
        s3lect_free(m);
        printf("{\"t\":%lld,\"leading\":%d,\"gets\":%llu,\"puts\":%llu,\"refused\":%llu,"
               "\"answers\":%llu,\"notLeader\":%llu,\"failed\":%llu,\"classes\":{%s},"
               "\"conns\":%d}\n",
               (long long)(t_now_ms() - t0), leading, gets, puts, refused, answer, notl, failed,
               classes, outgoing_conns());
        fflush(stdout);
        t_sleep_ms(250);
    }
    /* Stopped together (a stop waits for its release and a short linger). */
    pthread_t *th = calloc((size_t)keys, sizeof *th);
    for (int k = 0; k < keys; k++)
        if (pthread_create(&th[k], NULL, stop_one, e[k]) != 0)
            stop_one(e[k]);
    for (int k = 0; k < keys; k++)
        if (th[k])
            pthread_join(th[k], NULL);
    free(th);
    for (int k = 0; k < keys; k++)
        s3lect_free_elector(e[k]);
    free(e);
    printf("{\"stopped\":true}\n");
    return 0;
}
