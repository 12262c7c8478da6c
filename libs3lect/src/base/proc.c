/* SPDX-License-Identifier: Apache-2.0 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* unistd.h declares it only under _GNU_SOURCE */
extern char **environ; /* NOLINT(readability-redundant-declaration) */

int u_thread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    sigset_t block, old;
    sigfillset(&block);
    /* Faults raised by the thread itself must still end the process. */
    sigdelset(&block, SIGSEGV);
    sigdelset(&block, SIGBUS);
    sigdelset(&block, SIGFPE);
    sigdelset(&block, SIGILL);
    sigdelset(&block, SIGTRAP);
    sigdelset(&block, SIGSYS);
    pthread_sigmask(SIG_SETMASK, &block, &old);
    int rc = pthread_create(t, attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* A handful at most (one per credential refresh in flight). */
#define OWN_MAX 64
static pthread_mutex_t own_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t own[OWN_MAX];
static int n_own;

void u_own_lock(void)
{
    pthread_mutex_lock(&own_mu);
}

void u_own_unlock(void)
{
    pthread_mutex_unlock(&own_mu);
}

void u_own_pgroup_add(pid_t pgid)
{
    if (n_own < OWN_MAX)
        own[n_own++] = pgid;
}

void u_own_pgroup_remove(pid_t pgid)
{
    pthread_mutex_lock(&own_mu);
    for (int i = 0; i < n_own; i++)
        if (own[i] == pgid) {
            own[i] = own[--n_own];
            break;
        }
    pthread_mutex_unlock(&own_mu);
}

int u_own_pgroup_has(pid_t pgid)
{
    for (int i = 0; i < n_own; i++)
        if (own[i] == pgid)
            return 1;
    return 0;
}

/* Waits for pid until deadline (mono ms); 1 with *status, 0 on timeout, -1
 * when someone else reaped it. */
static int wait_child(pid_t pid, int64_t deadline, int *status)
{
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid)
            return 1;
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

static int spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], int out_fd)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    /* Registered before any supervisor can see it: s3lect run never
     * counts, kills or reaps it as a leftover of its command. */
    u_own_lock();
    int sp = strchr(path, '/') ? posix_spawn(pid, path, &fa, &attr, argv, envp)
                               : posix_spawnp(pid, path, &fa, &attr, argv, envp);
    if (sp == 0)
        u_own_pgroup_add(*pid);
    u_own_unlock();
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return sp;
}

void u_helper_run(const char *path, char *const argv[], char *const envp[], int64_t timeout_ms,
                  size_t max, const _Atomic int *abort, u_helper_result *r)
{
    memset(r, 0, sizeof *r);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        r->state = U_HELPER_NOPIPE;
        r->code = errno;
        return;
    }
    pid_t pid = 0;
    int sp = spawn(&pid, path, argv, envp ? envp : environ, fds[1]);
    close(fds[1]);
    if (sp != 0) {
        close(fds[0]);
        r->state = U_HELPER_NOSTART;
        r->code = sp;
        return;
    }
    int64_t deadline = u_mono_ms() + timeout_ms;
    if (!(r->out = malloc(max + 2))) /* max + 1 bytes read at most (one too many), a NUL */
        r->state = U_HELPER_NOMEM;
    while (r->state == U_HELPER_EXITED) {
        if (abort && *abort) {
            r->state = U_HELPER_ABORTED;
            break;
        }
        int64_t left = deadline - u_mono_ms();
        if (left <= 0) {
            r->state = U_HELPER_TIMEOUT;
            break;
        }
        struct pollfd p = {fds[0], POLLIN, 0};
        if (poll(&p, 1, left > 100 ? 100 : (int)left) <= 0)
            continue;
        ssize_t n = read(fds[0], r->out + r->len, max + 1 - r->len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break; /* EOF */
        r->len += (size_t)n;
        if (r->len > max)
            r->state = U_HELPER_TOO_BIG;
    }
    close(fds[0]);
    int status = 0, waited = 0;
    if (r->state == U_HELPER_EXITED) {
        waited = wait_child(pid, deadline, &status);
        if (waited == 0)
            r->state = U_HELPER_TIMEOUT;
    }
    if (waited != 1 && waited != -1)
        kill_group(pid);
    u_own_pgroup_remove(pid);
    if (r->out)
        r->out[r->len] = '\0';
    if (waited == 1 && WIFSIGNALED(status)) {
        r->state = U_HELPER_SIGNALED;
        r->code = WTERMSIG(status);
    } else if (waited == 1) {
        r->code = WEXITSTATUS(status);
    }
}

void u_helper_result_clear(u_helper_result *r)
{
    if (r->out) {
        u_wipe(r->out, r->len + 1); /* len <= max + 1: the buffer's size */
        free(r->out);
    }
    memset(r, 0, sizeof *r);
}
