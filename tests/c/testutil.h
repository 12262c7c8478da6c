/* SPDX-License-Identifier: Apache-2.0 */
/* testutil.h - a tiny assertion harness for the C tests. */
#ifndef S3LECT_TESTUTIL_H
#define S3LECT_TESTUTIL_H

#include <stdint.h>

extern int t_failures, t_checks;
void t_fail(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prints a summary line and returns the process exit code. */
int t_done(const char *suite);
/* Makes a fresh temporary directory; returns a static-lifetime path. */
char *t_tmpdir(const char *tag);
void t_sleep_ms(int64_t ms);
/* CLOCK_MONOTONIC in ms. */
int64_t t_now_ms(void);
/* Entries of a directory, without dot files (/proc/self/task: threads); -1
 * if it cannot be read. */
int t_count_entries(const char *path);
/* Scheduler delay (issue 38 item 12): how long this process's threads have
 * waited on a run queue (runnable, not running: the machine's other load)
 * since t_delay_mark(), the most of any one thread, in ms, from
 * /proc/self/task/<tid>/schedstat; 0 where that cannot be read. A bound on
 * wall time that load, not the code, can break adds it, or a check that
 * load decides says it was not judged. */
void t_delay_mark(void);
int64_t t_delay_max_ms(void);
/* The calling thread's own run-queue wait so far, in µs (0 where it cannot
 * be read): a call's wall time less its growth is the time the call took
 * itself, blocked or running, without the machine's other load. */
int64_t t_thread_delay_us(void);
/* A config for lock and id with short timings (lease 1.5 s, renew 0.3 s,
 * deadline 0.9 s, polls 0.2 s / 0.6 s) for tests on the file store. */
struct s3lect_config *t_fast_config(const char *lock, const char *id);
/* An elector made from t_fast_config; exits 2 with the message if it cannot be. */
struct s3lect_elector *t_fast_elector(const char *lock, const char *id);

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        t_checks++;                                                                                \
        if (!(cond))                                                                               \
            t_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                                        \
    } while (0)

#endif
