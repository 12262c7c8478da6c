/* SPDX-License-Identifier: Apache-2.0 */
/* herd.c - many S3 electors in one process through an outage, for
 * tests/s3/test_herd.py and bench/run herd.
 *
 *   herd LOCKPREFIX KEYS PER_KEY SECONDS LEASE RENEW DEADLINE FREQUENT INFREQUENT
 *
 * LOCKPREFIX is "s3://bucket/prefix"; lock k is LOCKPREFIX-k.json with
 * PER_KEY electors (the timings in ms). The store settings come from the
 * environment, as for the CLI. Every 100 ms it prints
 *
 *   S <CLOCK_MONOTONIC ms> <locks with a leader> <most leaders on one lock>
 *
 * (leaders as s3lect_is_leader says; the process holds every elector, so two
 * leaders of one lock are seen here), until SECONDS have passed or stdin is
 * closed; then it stops every elector and prints "D <stop ms>".
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "s3lect.h"

typedef struct {
    s3lect_elector **e;
    int from, to;
} slice;

static void *stop_slice(void *arg)
{
    slice *s = arg;
    for (int i = s->from; i < s->to; i++)
        if (s->e[i])
            s3lect_stop(s->e[i]);
    return NULL;
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
    if (argc != 10) {
        fprintf(stderr, "usage: herd LOCKPREFIX KEYS PER_KEY SECONDS LEASE RENEW DEADLINE "
                        "FREQUENT INFREQUENT\n");
        return 2;
    }
    const char *prefix = argv[1];
    int keys = atoi(argv[2]), per = atoi(argv[3]);
    long long seconds = atoll(argv[4]);
    int64_t t[5];
    for (int i = 0; i < 5; i++)
        t[i] = atoll(argv[5 + i]);
    int n = keys * per;
    s3lect_elector **e = calloc((size_t)n, sizeof *e);
    if (!e)
        return 2;
    for (int k = 0; k < keys; k++)
        for (int j = 0; j < per; j++) {
            char lock[700], id[32], err[512] = "";
            snprintf(lock, sizeof lock, "%s-%d.json", prefix, k);
            snprintf(id, sizeof id, "n%d-%d", k, j);
            s3lect_config *c = s3lect_config_new();
            s3lect_config_set_str(c, S3LECT_OPT_LOCK, lock);
            s3lect_config_set_str(c, S3LECT_OPT_SERVER_ID, id);
            /* a new lock: no leader of it can be running (new_lock_wait) */
            s3lect_config_set_int(c, S3LECT_OPT_NEW_LOCK_WAIT, 0);
            s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, t[0]);
            s3lect_config_set_int(c, S3LECT_OPT_RENEW_INTERVAL, t[1]);
            s3lect_config_set_int(c, S3LECT_OPT_RENEW_DEADLINE, t[2]);
            s3lect_config_set_int(c, S3LECT_OPT_FREQUENT_INTERVAL, t[3]);
            s3lect_config_set_int(c, S3LECT_OPT_INFREQUENT_INTERVAL, t[4]);
            s3lect_elector *x = NULL;
            if (s3lect_new(c, &x) != 0 || s3lect_start(x) != 0) {
                if (x)
                    s3lect_errmsg(x, err, sizeof err);
                else
                    s3lect_config_errmsg(c, err, sizeof err);
                fprintf(stderr, "herd: elector %s did not start: %s\n", id, err);
                return 1;
            }
            s3lect_config_free(c);
            e[k * per + j] = x;
        }
    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    long long end = mono_ms() + seconds * 1000;
    while (mono_ms() < end) {
        int led = 0, most = 0;
        for (int k = 0; k < keys; k++) {
            int leaders = 0;
            for (int j = 0; j < per; j++)
                leaders += s3lect_is_leader(e[k * per + j]);
            led += leaders > 0;
            most = leaders > most ? leaders : most;
        }
        printf("S %lld %d %d\n", mono_ms(), led, most);
        fflush(stdout);
        struct pollfd pfd = {0, POLLIN, 0};
        if (poll(&pfd, 1, 100) > 0) {
            char b[64];
            if (read(0, b, sizeof b) == 0)
                break; /* stdin closed: stop */
        }
    }
    long long s0 = mono_ms();
    pthread_t th[8];
    slice sl[8];
    for (int i = 0; i < 8; i++) {
        sl[i] = (slice){e, i * n / 8, (i + 1) * n / 8};
        pthread_create(&th[i], NULL, stop_slice, &sl[i]);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    printf("D %lld\n", mono_ms() - s0);
    for (int i = 0; i < n; i++)
        s3lect_free_elector(e[i]);
    free(e);
    return 0;
}
