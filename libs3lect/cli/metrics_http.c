/* SPDX-License-Identifier: Apache-2.0 */
/* metrics_http.c - `s3lect run --metrics-listen HOST:PORT` (or :PORT): a plain HTTP
 * endpoint serving GET /metrics (s3lect_metrics_text) from its own thread,
 * so a slow or hostile client never delays the supervisor's deadlines. One
 * connection at a time, each bounded by METRICS_IO_MS; every descriptor is
 * close-on-exec (the supervised command never inherits the port). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "logw.h"
#include "net.h"
#include "proc.h"
#include "util.h"

#define METRICS_IO_MS 2000    /* reading a request + writing its answer */
#define METRICS_MAX_HEAD 8192 /* request line and headers */

struct cli_metrics {
    int lfd, wake[2], port;
    pthread_mutex_t mu; /* guards el: s3lect run may replace its elector at start */
    s3lect_elector *el;
    pthread_t th;
    int started;
};

/* Waits for fd to be ready for `events` until the mono deadline. 1 ready, 0 not. */
static int wait_io(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - u_mono_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, (int)left);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return 0;
    }
}

static void send_all(int fd, const char *p, size_t n, int64_t deadline)
{
    while (n > 0 && wait_io(fd, POLLOUT, deadline)) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void answer(int fd, int status, const char *reason, const char *type, const char *body,
                   int head_only, int64_t deadline)
{
    char hdr[300];
    size_t blen = strlen(body);
    int n = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
                     status, reason, type, blen);
    send_all(fd, hdr, (size_t)n, deadline);
    if (!head_only)
        send_all(fd, body, blen, deadline);
}

static void serve(cli_metrics *m, int fd)
{
    int64_t deadline = u_mono_ms() + METRICS_IO_MS;
    char head[METRICS_MAX_HEAD + 1];
    size_t len = 0;
    while (len < METRICS_MAX_HEAD && !memmem(head, len, "\r\n\r\n", 4) &&
           !memmem(head, len, "\n\n", 2)) {
        if (!wait_io(fd, POLLIN, deadline))
            return; /* too slow: dropped */
        ssize_t r = recv(fd, head + len, METRICS_MAX_HEAD - len, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r <= 0)
            return;
        len += (size_t)r;
    }
    head[len] = '\0';
    const char *text = "text/plain; charset=utf-8";
    int get = strncmp(head, "GET ", 4) == 0, hd = strncmp(head, "HEAD ", 5) == 0;
    if (!get && !hd) {
        answer(fd, 405, "Method Not Allowed", text, "use GET /metrics\n", 0, deadline);
        return;
    }
    const char *path = head + (get ? 4 : 5);
    size_t plen = strcspn(path, " ?\r\n");
    if (plen != 8 || strncmp(path, "/metrics", 8) != 0) {
        answer(fd, 404, "Not Found", text, "not found: the metrics are at /metrics\n", hd,
               deadline);
        return;
    }
    char *body = NULL;
    pthread_mutex_lock(&m->mu);
    s3lect_elector *one[1] = {m->el};
    int mrc = s3lect_metrics_text(one, 1, &body);
    pthread_mutex_unlock(&m->mu);
    if (mrc != 0 || !body) {
        answer(fd, 503, "Service Unavailable", text, "out of memory\n", hd, deadline);
        return;
    }
    /* s3lect run's own: lines its log writer had to drop (logw.h). */
    char *all = u_asprintf("%s# HELP s3lect_log_lines_dropped_total Log lines s3lect run dropped "
                           "because its stderr was not being read.\n"
                           "# TYPE s3lect_log_lines_dropped_total counter\n"
                           "s3lect_log_lines_dropped_total %llu\n",
                           body, (unsigned long long)logw_dropped());
    s3lect_free(body);
    if (!all) {
        answer(fd, 503, "Service Unavailable", text, "out of memory\n", hd, deadline);
        return;
    }
    answer(fd, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", all, hd, deadline);
    free(all);
}

static void *main_loop(void *arg)
{
    cli_metrics *m = arg;
    for (;;) {
        struct pollfd p[2] = {{m->lfd, POLLIN, 0}, {m->wake[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return NULL;
        if (p[1].revents)
            return NULL;
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            continue;
        serve(m, fd);
        shutdown(fd, SHUT_WR);
        close(fd);
    }
}

int cli_metrics_start(const char *addr, s3lect_elector *el, cli_metrics **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    char host[256];
    const char *colon = strrchr(addr, ':');
    size_t hl = colon ? (size_t)(colon - addr) : 0;
    if (!colon || hl >= sizeof host) {
        snprintf(err, errlen, "--metrics-listen '%.100s' is not HOST:PORT", addr);
        return -1;
    }
    memcpy(host, addr, hl);
    host[hl] = '\0';
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
    if (gai) {
        snprintf(err, errlen, "--metrics-listen '%.100s': %s", addr, gai_strerror(gai));
        return -1;
    }
    cli_metrics *m = calloc(1, sizeof *m);
    int last = 0;
    /* ":PORT" (no host): every address (u_listen). */
    int fd = m ? u_listen(res, !host[0], 0, 16, &m->port, &last) : -1;
    freeaddrinfo(res);
    if (!m || fd < 0) {
        snprintf(err, errlen, "--metrics-listen %.100s: cannot listen: %s", addr,
                 m ? strerror(last) : "out of memory");
        free(m);
        return -1;
    }
    m->lfd = fd;
    m->el = el;
    pthread_mutex_init(&m->mu, NULL);
    if (pipe2(m->wake, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "--metrics-listen: pipe: %s", strerror(errno));
        close(fd);
        free(m);
        return -1;
    }
    /* The thread takes no signals: the supervisor reads them from its signalfd. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int perr = u_thread_create(&m->th, NULL, main_loop, m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (perr) {
        snprintf(err, errlen, "--metrics-listen: cannot start a thread: %s", strerror(perr));
        close(fd);
        close(m->wake[0]);
        close(m->wake[1]);
        free(m);
        return -1;
    }
    m->started = 1;
    *out = m;
    return 0;
}

int cli_metrics_port(const cli_metrics *m)
{
    return m ? m->port : 0;
}

void cli_metrics_stop(cli_metrics *m)
{
    if (!m)
        return;
    if (m->started) {
        ssize_t w = write(m->wake[1], "x", 1);
        (void)w;
        pthread_join(m->th, NULL);
    }
    close(m->lfd);
    close(m->wake[0]);
    close(m->wake[1]);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void cli_metrics_set_elector(cli_metrics *m, s3lect_elector *el)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->el = el;
    pthread_mutex_unlock(&m->mu);
}
