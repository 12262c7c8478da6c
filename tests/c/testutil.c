/* SPDX-License-Identifier: Apache-2.0 */
#include "testutil.h"

#include "s3lect.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int t_failures, t_checks;

void t_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    va_list ap;
    t_failures++;
    fprintf(stderr, "FAIL %s:%d: %s: ", file, line, expr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int t_done(const char *suite)
{
    printf("%s: %d checks, %d failures\n", suite, t_checks, t_failures);
    return t_failures ? 1 : 0;
}

char *t_tmpdir(const char *tag)
{
    char tmpl[256];
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpl, sizeof tmpl, "%s/s3lect-%s-XXXXXX", base, tag);
    char *d = mkdtemp(tmpl);
    if (!d) {
        perror("mkdtemp");
        exit(2);
    }
    return strdup(d);
}

void t_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int64_t t_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int t_count_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

#define T_MAX_TASKS 1024
static struct {
    long tid;
    long long delay_ns;
} t_marks[T_MAX_TASKS];
static int t_nmarks;

/* Calls fn(tid, run_delay_ns, arg) for each thread of this process. */
static void t_each_task(void (*fn)(long, long long, void *), void *arg)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", de->d_name);
        FILE *f = fopen(path, "r");
        unsigned long long run = 0, wait = 0;
        if (!f)
            continue;
        if (fscanf(f, "%llu %llu", &run, &wait) == 2)
            fn(atol(de->d_name), (long long)wait, arg);
        fclose(f);
    }
    closedir(d);
}

static void t_mark_one(long tid, long long ns, void *arg)
{
    (void)arg;
    if (t_nmarks < T_MAX_TASKS) {
        t_marks[t_nmarks].tid = tid;
        t_marks[t_nmarks].delay_ns = ns;
        t_nmarks++;
    }
}

void t_delay_mark(void)
{
    t_nmarks = 0;
    t_each_task(t_mark_one, NULL);
}

static void t_max_one(long tid, long long ns, void *arg)
{
    long long base = 0; /* a thread started since the mark: all of its delay */
    for (int i = 0; i < t_nmarks; i++)
        if (t_marks[i].tid == tid)
            base = t_marks[i].delay_ns;
    long long *max = arg;
    if (ns - base > *max)
        *max = ns - base;
}

int64_t t_delay_max_ms(void)
{
    long long max = 0;
    t_each_task(t_max_one, &max);
    return (int64_t)(max / 1000000);
}

int64_t t_thread_delay_us(void)
{
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    unsigned long long run = 0, wait = 0;
    if (!f)
        return 0;
    int n = fscanf(f, "%llu %llu", &run, &wait);
    fclose(f);
    return n == 2 ? (int64_t)(wait / 1000) : 0;
}

struct s3lect_config *t_fast_config(const char *lock, const char *id)
{
    s3lect_config *c = s3lect_config_new();
    s3lect_config_set_str(c, S3LECT_OPT_LOCK, lock);
    s3lect_config_set_str(c, S3LECT_OPT_SERVER_ID, id);
    s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, 1500);
    /* a new lock: no leader of it can be running (new_lock_wait) */
    s3lect_config_set_int(c, S3LECT_OPT_NEW_LOCK_WAIT, 0);
    s3lect_config_set_int(c, S3LECT_OPT_RENEW_INTERVAL, 300);
    s3lect_config_set_int(c, S3LECT_OPT_RENEW_DEADLINE, 900);
    s3lect_config_set_int(c, S3LECT_OPT_FREQUENT_INTERVAL, 200);
    s3lect_config_set_int(c, S3LECT_OPT_INFREQUENT_INTERVAL, 600);
    return c;
}

struct s3lect_elector *t_fast_elector(const char *lock, const char *id)
{
    s3lect_config *c = t_fast_config(lock, id);
    s3lect_elector *e = NULL;
    if (s3lect_new(c, &e) != 0) {
        char msg[512];
        s3lect_config_errmsg(c, msg, sizeof msg);
        fprintf(stderr, "s3lect_new: %s\n", msg);
        exit(2);
    }
    s3lect_config_free(c);
    return e;
}
