/* SPDX-License-Identifier: Apache-2.0 */
/* logw.c - the log writer thread of `s3lect run` (see logw.h). */
#include "logw.h"

#include <errno.h>
#include <stdio.h>
#include <poll.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "util.h"

#define LOGW_CAP (64 * 1024) /* queued bytes: a few hundred lines */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv; /* on CLOCK_MONOTONIC, made by logw_start */
static char ring[LOGW_CAP];
static size_t head, len; /* ring[head .. head+len) is queued */
static int fd_out = 2, started;
static logw_notice_fn notice_fn;
static _Atomic uint64_t dropped_total;
static uint64_t dropped_unreported;
static _Atomic int64_t progress_at; /* mono ms of the writer's last completed write */
static int busy;                    /* the writer holds bytes it took out */

/* Writes all of buf; returns -1 if the stream is gone (the lines are lost). */
static int write_all(const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd_out, buf, n);
        if (w > 0) {
            buf += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* Someone made the stream non-blocking: wait for room here. */
            struct pollfd p = {fd_out, POLLOUT, 0};
            poll(&p, 1, 1000);
            continue;
        }
        return -1;
    }
    return 0;
}

static void *writer_main(void *arg)
{
    (void)arg;
    char chunk[8192];
    pthread_mutex_lock(&mu);
    for (;;) {
        while (len == 0)
            pthread_cond_wait(&cv, &mu);
        size_t n = len < sizeof chunk ? len : sizeof chunk;
        for (size_t i = 0; i < n; i++)
            chunk[i] = ring[(head + i) % LOGW_CAP];
        head = (head + n) % LOGW_CAP;
        len -= n;
        busy = 1;
        pthread_mutex_unlock(&mu);
        write_all(chunk, n);
        progress_at = u_mono_ms();
        pthread_mutex_lock(&mu);
        busy = 0;
        if (len == 0 && dropped_unreported > 0 && notice_fn) {
            uint64_t d = dropped_unreported;
            dropped_unreported = 0;
            pthread_mutex_unlock(&mu);
            size_t m = notice_fn(chunk, sizeof chunk, d);
            write_all(chunk, m < sizeof chunk ? m : sizeof chunk);
            progress_at = u_mono_ms();
            pthread_mutex_lock(&mu);
        }
        pthread_cond_broadcast(&cv);
    }
    return NULL;
}

void logw_start(int fd, logw_notice_fn notice)
{
    pthread_mutex_lock(&mu);
    fd_out = fd;
    notice_fn = notice;
    if (!started) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&cv, &ca);
        pthread_condattr_destroy(&ca);
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&a, 64 * 1024);
        if (u_thread_create(&t, &a, writer_main, NULL) == 0)
            started = 1;
        pthread_attr_destroy(&a);
    }
    pthread_mutex_unlock(&mu);
}

void logw_line(const char *s, size_t n)
{
    pthread_mutex_lock(&mu);
    if (!started) {
        pthread_mutex_unlock(&mu);
        write_all(s, n);
        return;
    }
    if (n > LOGW_CAP - len) {
        dropped_total++;
        dropped_unreported++;
    } else {
        for (size_t i = 0; i < n; i++)
            ring[(head + len + i) % LOGW_CAP] = s[i];
        len += n;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
}

uint64_t logw_dropped(void)
{
    return dropped_total;
}

void logw_flush(int64_t stall_ms)
{
    pthread_mutex_lock(&mu);
    if (!started) {
        pthread_mutex_unlock(&mu);
        return;
    }
    progress_at = u_mono_ms();
    while (len > 0 || busy) {
        if (u_mono_ms() - progress_at > stall_ms)
            break;
        struct timespec ts = u_cond_deadline(u_mono_ms() + 20, 20);
        pthread_cond_timedwait(&cv, &mu, &ts);
    }
    /* Nobody reads stderr: what is still queued is lost. Count it, and say
     * so if a few bytes still fit (issue 38: lines were lost uncounted). */
    uint64_t lost = 0;
    for (size_t i = 0; i < len; i++)
        lost += ring[(head + i) % LOGW_CAP] == '\n';
    if (len > 0 && lost == 0)
        lost = 1; /* a partial line */
    dropped_total += lost;
    uint64_t unsaid = dropped_unreported + lost;
    int fd = fd_out;
    pthread_mutex_unlock(&mu);
    if (unsaid > 0 && fd >= 0) {
        char note[160];
        int n = snprintf(note, sizeof note,
                         "s3lect: %llu log line(s) not written at exit: stderr was not read "
                         "for %lld ms\n",
                         (unsigned long long)unsaid, (long long)stall_ms);
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0) {
            ssize_t w = write(fd, note, (size_t)n); /* best effort: a full pipe refuses it */
            (void)w;
            fcntl(fd, F_SETFL, fl);
        }
    }
}
