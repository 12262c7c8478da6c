/* SPDX-License-Identifier: Apache-2.0 */
/* cred_process.c - runs a profile's credential_process.
 *
 * Through /bin/sh -c, as the Go, Java and Rust SDKs do on Unix (botocore
 * splits the line itself instead): quoting, variables and pipes in the
 * command behave as in a terminal. stdin is /dev/null, stderr is inherited
 * (the process's own diagnostics reach the user), stdout is read into memory
 * (never logged, wiped after parsing). The process gets its own process
 * group; on timeout the whole group is killed with SIGKILL.
 *
 * The group is registered as the library's own (base/proc.h) while it runs,
 * so s3lect run's supervisor neither kills nor reaps it. A host program that
 * reaps every child with waitpid(-1) may still collect the exit status
 * first; then the output alone decides.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cred_parse.h"
#include "cred_sources.h"
#include "proc.h"
#include "s3lect.h"
#include "util.h"

#define MAX_OUTPUT (64 * 1024)

/* unistd.h declares it only under _GNU_SOURCE */
extern char **environ; /* NOLINT(readability-redundant-declaration) */

int64_t aws_process_timeout_ms(void)
{
    const char *v = aws_env("S3LECT_CREDENTIAL_PROCESS_TIMEOUT");
    if (v) {
        char *end;
        double s = strtod(v, &end);
        if (end != v && *end == '\0' && s > 0 && s <= 3600)
            return (int64_t)(s * 1000);
    }
    return AWS_PROCESS_TIMEOUT_MS;
}

/* Waits for pid until deadline (mono ms); 1 with *status, 0 on timeout, -1
 * when someone else reaped it. */
static int wait_child(pid_t pid, int64_t deadline, int *status)
{
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid)
            return 1;
        if (w < 0 && errno == ECHILD)
            return -1;
        if (w < 0 && errno != EINTR)
            return -1;
        if (u_mono_ms() >= deadline)
            return 0;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void kill_group(pid_t pid)
{
    if (kill(-pid, SIGKILL) != 0)
        kill(pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
}

int aws_process_fetch(const char *command, const char *what, int64_t timeout_ms,
                      const _Atomic int *abort, cred_fetched *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "%s: cannot create a pipe: %s", what, strerror(errno));
        return S3LECT_ETRANSIENT;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    char *argv[] = {"sh", "-c", (char *)command, NULL};
    pid_t pid;
    /* Registered before any supervisor can see it (base/proc.h): s3lect run
     * never counts, kills or reaps it as a leftover of its command. */
    u_own_lock();
    int sp = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, environ);
    if (sp == 0)
        u_own_pgroup_add(pid);
    u_own_unlock();
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(fds[1]);
    if (sp != 0) {
        close(fds[0]);
        snprintf(err, errlen, "%s cannot be started (/bin/sh): %s", what, strerror(sp));
        return S3LECT_EAUTH;
    }
    int64_t deadline = u_mono_ms() + timeout_ms;
    char *buf = malloc(MAX_OUTPUT + 1);
    size_t len = 0;
    int rc = 0, timed_out = 0, too_big = 0, aborted = 0;
    if (!buf)
        rc = S3LECT_ENOMEM;
    while (rc == 0) {
        if (abort && *abort) {
            aborted = 1;
            break;
        }
        int64_t left = deadline - u_mono_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd p = {fds[0], POLLIN, 0};
        int pr = poll(&p, 1, left > 100 ? 100 : (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t n = read(fds[0], buf + len, MAX_OUTPUT + 1 - len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break; /* EOF */
        len += (size_t)n;
        if (len > MAX_OUTPUT) {
            too_big = 1;
            break;
        }
    }
    close(fds[0]);
    int status = 0, waited = 0;
    if (rc == 0 && !timed_out && !too_big && !aborted) {
        waited = wait_child(pid, deadline, &status);
        if (waited == 0)
            timed_out = 1;
    }
    if (waited != 1 && waited != -1)
        kill_group(pid);
    u_own_pgroup_remove(pid);
    if (rc == S3LECT_ENOMEM) {
        snprintf(err, errlen, "out of memory");
    } else if (aborted) {
        snprintf(err, errlen, "%s was cancelled (s3lect is stopping)", what);
        rc = S3LECT_ETRANSIENT;
    } else if (timed_out) {
        snprintf(err, errlen,
                 "%s did not finish within %lld ms and was killed (set "
                 "S3LECT_CREDENTIAL_PROCESS_TIMEOUT to allow longer, in seconds)",
                 what, (long long)timeout_ms);
        rc = S3LECT_ETRANSIENT;
    } else if (too_big) {
        snprintf(err, errlen, "%s printed more than %d bytes; it must print one JSON object", what,
                 MAX_OUTPUT);
        rc = S3LECT_EAUTH;
    } else if (waited == 1 && WIFSIGNALED(status)) {
        snprintf(err, errlen, "%s was killed by signal %d", what, WTERMSIG(status));
        rc = S3LECT_EAUTH;
    } else if (waited == 1 && WEXITSTATUS(status) != 0) {
        snprintf(err, errlen, "%s exited with status %d (its own messages are on stderr)", what,
                 WEXITSTATUS(status));
        rc = S3LECT_EAUTH;
    } else {
        char why[300];
        rc = aws_parse_process_output(buf, len, out, why, sizeof why);
        if (rc)
            snprintf(err, errlen, "%s: %s", what, why);
    }
    if (buf) {
        u_wipe(buf, MAX_OUTPUT + 1);
        free(buf);
    }
    return rc;
}
