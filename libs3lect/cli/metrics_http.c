/* SPDX-License-Identifier: Apache-2.0 */
/* metrics_http.c - `s3lect run --metrics-listen HOST:PORT` (or :PORT): a plain HTTP
 * endpoint serving, from its own thread (so a slow or hostile client never
 * delays the supervisor's deadlines):
 *   GET /metrics  the Prometheus text (s3lect_metrics_text);
 *   GET /leader   200 while this node leads and its command runs, else 503
 *                 (a readiness probe that sends a Service's traffic to the
 *                 leader only);
 *   GET /healthz  200 while the supervisor loop runs and the elector is not
 *                 stopped or failing on an error that will not heal, else 503
 *                 (a liveness probe).
 * HEAD of each as well. /leader and /healthz answer from memory (the
 * elector's status snapshot, the state the supervisor reports): never a
 * store request. One connection at a time, each bounded by METRICS_IO_MS;
 * every descriptor is close-on-exec (the supervised command never inherits
 * the port). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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
/* /healthz: the supervisor loop wakes at least every 250 ms; this long
 * without a turn is a stuck supervisor. */
#define METRICS_STALL_MS 5000

struct cli_metrics {
    int lfd, wake[2], port;
    pthread_mutex_t mu; /* guards el: s3lect run may replace its elector at start */
    s3lect_elector *el;
    pthread_t th;
    int started;
    /* from the supervisor (cli_metrics_set_command, cli_metrics_beat) */
    _Atomic int command;     /* CLI_CMD_* */
    _Atomic int stopping;    /* s3lect run is on its way out */
    _Atomic int64_t beat_ms; /* u_mono_ms() of the supervisor loop's last turn */
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

static const char *command_str(int c)
{
    switch (c) {
    case CLI_CMD_STARTING:
        return "starting";
    case CLI_CMD_RUNNING:
        return "running";
    case CLI_CMD_STOPPING:
        return "stopping";
    default:
        return "stopped";
    }
}

/* Answers a JSON object (freed here); 503 when it cannot be printed. */
static void answer_json(int fd, int ok, cJSON *o, int head_only, int64_t deadline)
{
    char *body = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!body) {
        answer(fd, 503, "Service Unavailable", "text/plain; charset=utf-8", "out of memory\n",
               head_only, deadline);
        return;
    }
    /* one line, like every answer a probe or curl prints */
    size_t n = strlen(body);
    char *line = malloc(n + 2);
    if (line) {
        memcpy(line, body, n);
        memcpy(line + n, "\n", 2);
    }
    answer(fd, ok ? 200 : 503, ok ? "OK" : "Service Unavailable", "application/json",
           line ? line : body, head_only, deadline);
    free(line);
    cJSON_free(body);
}

/* GET /leader: 200 only while the elector holds a valid lease now (computed
 * at call time: a node that was frozen past its lease answers 503 at once,
 * before its loop noticed) and the command runs. */
static void serve_leader(cli_metrics *m, int fd, int hd, int64_t deadline)
{
    int cmd = atomic_load(&m->command);
    s3lect_status *st = NULL;
    pthread_mutex_lock(&m->mu);
    int lead = s3lect_is_leader(m->el);
    int src = s3lect_get_status(m->el, &st);
    pthread_mutex_unlock(&m->mu);
    cJSON *o = cJSON_CreateObject();
    int ok = lead && cmd == CLI_CMD_RUNNING && !atomic_load(&m->stopping);
    if (o && src == 0 && st) {
        cJSON_AddBoolToObject(o, "leader", ok);
        cJSON_AddStringToObject(o, "id", s3lect_status_server_id(st));
        cJSON_AddStringToObject(o, "leaderId", s3lect_status_leader_id(st));
        cJSON_AddNumberToObject(o, "term", (double)s3lect_status_term(st));
        cJSON_AddStringToObject(o, "state", s3lect_state_str(s3lect_status_state(st)));
        cJSON_AddStringToObject(o, "command", command_str(cmd));
    } else if (o) {
        ok = 0;
        cJSON_AddBoolToObject(o, "leader", 0);
        cJSON_AddStringToObject(o, "command", command_str(cmd));
    }
    s3lect_status_free(st);
    answer_json(fd, ok, o, hd, deadline);
}

/* GET /healthz: 503 with the reason when the supervisor loop has not turned
 * for METRICS_STALL_MS, s3lect run is stopping, the elector is stopped, or
 * its latest store operation failed on an error that will not heal by
 * itself (credentials or permissions refused, a misconfigured store). The
 * library's messages carry no secret (they are logged as they are). */
static void serve_healthz(cli_metrics *m, int fd, int hd, int64_t deadline)
{
    int64_t age = u_mono_ms() - atomic_load(&m->beat_ms);
    s3lect_status *st = NULL;
    pthread_mutex_lock(&m->mu);
    int src = s3lect_get_status(m->el, &st);
    pthread_mutex_unlock(&m->mu);
    char reason[700];
    int ok = 0;
    int state = st ? s3lect_status_state(st) : S3LECT_STATE_STOPPED;
    int err = st ? s3lect_status_last_error(st) : 0;
    if (src != 0 || !st)
        snprintf(reason, sizeof reason, "the elector's status cannot be read");
    else if (atomic_load(&m->stopping))
        snprintf(reason, sizeof reason, "s3lect run is stopping");
    else if (age > METRICS_STALL_MS)
        snprintf(reason, sizeof reason, "the supervisor loop has not run for %lld ms",
                 (long long)age);
    else if (state == S3LECT_STATE_STOPPED)
        snprintf(reason, sizeof reason, "the elector is stopped");
    else if (err == S3LECT_EAUTH || err == S3LECT_EFATAL)
        snprintf(reason, sizeof reason, "the store fails with an error that will not heal: %.600s",
                 s3lect_status_last_error_message(st));
    else {
        ok = 1;
        snprintf(reason, sizeof reason, "ok");
    }
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddBoolToObject(o, "healthy", ok);
        cJSON_AddStringToObject(o, "reason", reason);
        cJSON_AddStringToObject(o, "state", s3lect_state_str(state));
        cJSON_AddStringToObject(o, "command", command_str(atomic_load(&m->command)));
        cJSON_AddNumberToObject(o, "supervisorAgeMs", (double)(age < 0 ? 0 : age));
        cJSON_AddStringToObject(o, "lastError", err ? s3lect_strerror(err) : "");
    }
    s3lect_status_free(st);
    answer_json(fd, ok, o, hd, deadline);
}

static void serve_metrics(cli_metrics *m, int fd, int hd, int64_t deadline)
{
    const char *text = "text/plain; charset=utf-8";
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

static int path_is(const char *path, size_t plen, const char *want)
{
    return plen == strlen(want) && strncmp(path, want, plen) == 0;
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
        answer(fd, 405, "Method Not Allowed", text, "use GET /metrics, /leader or /healthz\n", 0,
               deadline);
        return;
    }
    const char *path = head + (get ? 4 : 5);
    size_t plen = strcspn(path, " ?\r\n");
    if (path_is(path, plen, "/metrics"))
        serve_metrics(m, fd, hd, deadline);
    else if (path_is(path, plen, "/leader"))
        serve_leader(m, fd, hd, deadline);
    else if (path_is(path, plen, "/healthz"))
        serve_healthz(m, fd, hd, deadline);
    else
        answer(fd, 404, "Not Found", text,
               "not found: this endpoint serves /metrics, /leader and /healthz\n", hd, deadline);
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
    atomic_init(&m->command, CLI_CMD_STOPPED);
    atomic_init(&m->stopping, 0);
    atomic_init(&m->beat_ms, u_mono_ms());
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

void cli_metrics_set_command(cli_metrics *m, int state)
{
    if (!m)
        return;
    /* A new term's command starts from "starting"; within one the state only
     * moves on (a report of the start that comes after the stop was asked
     * for leaves it stopping). */
    int cur = atomic_load(&m->command);
    if (state == CLI_CMD_RUNNING && cur != CLI_CMD_STARTING)
        return;
    if (state == CLI_CMD_STOPPING && cur == CLI_CMD_STOPPED)
        return;
    atomic_store(&m->command, state);
}

void cli_metrics_beat(cli_metrics *m, int stopping)
{
    if (!m)
        return;
    atomic_store(&m->beat_ms, u_mono_ms());
    if (stopping)
        atomic_store(&m->stopping, 1);
}
