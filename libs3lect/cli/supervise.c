/* SPDX-License-Identifier: Apache-2.0 */
/* supervise.c - the shim under `s3lect run` and the /proc walk (see supervise.h).
 *
 * The shim is forked (not exec'd) from s3lect run, which has threads: it only
 * uses system calls and glibc functions that are safe after fork in glibc
 * (malloc, opendir), never the library, stdio streams or exit().
 */
#include "supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"
#include "util.h"

#define SV_STOP_POLL_MS 50 /* re-walk the tree this often while it stops */
#define SV_KILL_POLL_MS 20 /* ... and this often once SIGKILL went out */

int sv_signalfd(void)
{
    sigset_t mask;
    sigemptyset(&mask);
    int sigs[] = {SIGTERM, SIGINT, SIGCHLD, SIGHUP, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&mask, sigs[i]);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

int sv_send(int fd, int type, int arg, int64_t a, int64_t b)
{
    sv_msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.arg = arg;
    m.a = a;
    m.b = b;
    if (fd < 0)
        return -1;
    ssize_t n;
    do
        n = write(fd, &m, sizeof m);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof m ? 0 : -1;
}

int sv_recv(int fd, sv_msg *m)
{
    ssize_t n;
    do
        n = read(fd, m, sizeof *m);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof *m)
        return 1;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    return -1; /* EOF; writes are atomic, so a short read cannot happen */
}

/* ---- the /proc walk ---- */

typedef struct pent {
    pid_t pid, ppid, pgid;
    char state;
} pent;

static int read_stat_pg(pid_t pid, pid_t *ppid, char *state, pid_t *pgid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* "pid (comm) S ppid ...": comm may hold spaces and ')', so take the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2] || p[3] != ' ')
        return -1;
    *state = p[2];
    char *end;
    *ppid = (pid_t)strtol(p + 4, &end, 10);
    if (pgid)
        *pgid = (pid_t)strtol(end, NULL, 10);
    return 0;
}

static int read_stat(pid_t pid, pid_t *ppid, char *state)
{
    return read_stat_pg(pid, ppid, state, NULL);
}

static int pent_cmp(const void *a, const void *b)
{
    pid_t x = ((const pent *)a)->pid, y = ((const pent *)b)->pid;
    return (x > y) - (x < y);
}

static const pent *pent_find(const pent *v, size_t n, pid_t pid)
{
    pent key = {pid, 0, 0, 0};
    return bsearch(&key, v, n, sizeof *v, pent_cmp);
}

/* Processes that were already below s3lect run when it started (a shell's
 * background job before `exec s3lect run`): not ours, and neither is what
 * they start. */
static pid_t *excluded;
static size_t n_excluded;

static int is_excluded(pid_t pid)
{
    for (size_t i = 0; i < n_excluded; i++)
        if (excluded[i] == pid)
            return 1;
    return 0;
}

static int is_below(const pent *v, size_t n, const pent *p, pid_t root)
{
    if (is_excluded(p->pid))
        return 0;
    pid_t x = p->ppid;
    for (int depth = 0; x > 0 && depth < 4096; depth++) {
        if (x == root)
            return 1;
        if (is_excluded(x))
            return 0;
        const pent *q = pent_find(v, n, x);
        if (!q)
            return 0;
        x = q->ppid;
    }
    return 0;
}

/* Signals pid if it still has the parent the walk saw: through a pidfd, so
 * that a pid reused after the walk cannot be hit. */
static void signal_checked(const pent *p, int sig)
{
#ifdef SYS_pidfd_open
    int pfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
    if (pfd >= 0) {
        pid_t ppid;
        char state;
        if (read_stat(p->pid, &ppid, &state) == 0 && ppid == p->ppid)
            syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0);
        close(pfd);
        return;
    }
    if (errno != ENOSYS)
        return; /* gone */
#endif
    kill(p->pid, sig);
}

/* What a walk does with the processes it finds below root. */
enum { W_COUNT = 0, W_RECORD = 1, W_REAP = 2 };

/* The library's own children (a credential_process and what it starts) are
 * left out when `own` is set: they are s3lect's, not the command's. The
 * shim, a forked copy whose library threads are gone, never takes that lock. */
static int walk_ex(pid_t root, pid_t spare, int sig, int mode, int own, pid_t skip_pgid)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    pent *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int oom = 0;
    while ((de = readdir(d)) != NULL) {
        const char *s = de->d_name;
        if (*s < '1' || *s > '9')
            continue;
        char *end;
        long pid = strtol(s, &end, 10);
        if (*end)
            continue;
        pent e;
        e.pid = (pid_t)pid;
        if (read_stat_pg(e.pid, &e.ppid, &e.state, &e.pgid) != 0)
            continue; /* exited meanwhile */
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            pent *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                oom = 1;
                break;
            }
            v = nv;
            cap = nc;
        }
        v[n++] = e;
    }
    closedir(d);
    if (oom) {
        free(v);
        return -1;
    }
    if (n)
        qsort(v, n, sizeof *v, pent_cmp);
    int live = 0;
    if (own)
        u_own_lock(); /* after the listing: see base/proc.h */
    for (size_t i = 0; i < n; i++) {
        const pent *p = &v[i];
        if (own && u_own_pgroup_has(p->pgid))
            continue;
        if (mode == W_REAP) {
            /* A zombie child of root that is not the library's: reap it. */
            if (p->ppid == root && p->state == 'Z' && p->pid != spare &&
                waitpid(p->pid, NULL, WNOHANG) == p->pid) {
                live++;
                sv_forget(p->pid);
            }
            continue;
        }
        if (p->pid == root || p->state == 'Z' || p->state == 'X' || !is_below(v, n, p, root))
            continue;
        if (p->pid == spare)
            continue;
        live++;
        if (sig && !(skip_pgid > 0 && p->pgid == skip_pgid))
            signal_checked(p, sig);
        if (mode == W_RECORD) {
            pid_t *ne = realloc(excluded, (n_excluded + 1) * sizeof *ne);
            if (ne) {
                excluded = ne;
                excluded[n_excluded++] = p->pid;
            }
        }
    }
    if (own)
        u_own_unlock();
    free(v);
    return live;
}

static int walk(pid_t root, pid_t spare, int sig, int record)
{
    return walk_ex(root, spare, sig, record ? W_RECORD : W_COUNT, 0, 0);
}

int sv_tree_signal(pid_t root, pid_t spare, int sig)
{
    return walk(root, spare, sig, 0);
}

int sv_own_tree_signal(pid_t root, pid_t spare, int sig)
{
    return walk_ex(root, spare, sig, W_COUNT, 1, 0);
}

int sv_exclude_present(pid_t root)
{
    return walk_ex(root, 0, 0, W_RECORD, 1, 0);
}

int sv_reap_strays(pid_t root, pid_t spare)
{
    return walk_ex(root, spare, 0, W_REAP, 1, 0);
}

void sv_forget(pid_t pid)
{
    for (size_t i = 0; i < n_excluded; i++)
        if (excluded[i] == pid)
            excluded[i] = excluded[--n_excluded];
}

/* ---- the shim ---- */

typedef struct shim {
    int in, out; /* pipes from / to s3lect run */
    pid_t self, cmd;
    int cmd_done, code;
    int stopping, killing, why;
    int64_t hard, kill_timeout, kill_at;
} shim;

/* Closes what exec would close: the close-on-exec descriptors inherited from
 * s3lect run (store sockets, a file-store lock being held by its election
 * thread at the fork), except the shim's own pipes. Others (say, an inherited
 * listening socket) pass on to CMD as they did before the shim existed. */
static void close_cloexec_fds(int keep1, int keep2)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    int dfd = dirfd(d), fds[1024], n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < (int)(sizeof fds / sizeof fds[0])) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        int fd = atoi(de->d_name);
        if (fd <= 2 || fd == dfd || fd == keep1 || fd == keep2)
            continue;
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0 && (fl & FD_CLOEXEC))
            fds[n++] = fd;
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

static int live_count(shim *s, int sig)
{
    int live = sv_tree_signal(s->self, 0, sig);
    if (live < 0) {
        /* No /proc: all we can reach is CMD's process group. */
        if (s->cmd && sig)
            kill(-s->cmd, sig);
        if (s->cmd && sig)
            kill(s->cmd, sig);
        live = s->cmd_done ? 0 : 1;
    }
    return live;
}

static void begin_stop(shim *s, int why, int64_t kill_at)
{
    if (s->stopping)
        return;
    s->stopping = 1;
    s->why = why;
    s->kill_at = kill_at < s->hard ? kill_at : s->hard;
    /* One SIGTERM per process and stop (issue 39 item 1: a second one reads
     * as "give up the graceful stop" to many programs). CMD's group first,
     * at once (a pipeline, CMD itself); then every other process below the
     * shim (a setsid child, one that changed its group), skipping the
     * members of CMD's group, which have theirs. Without /proc only the
     * group can be reached. */
    int grouped = !s->cmd_done && kill(-s->cmd, SIGTERM) == 0;
    int live = walk_ex(s->self, 0, SIGTERM, W_COUNT, 0, grouped ? s->cmd : 0);
    if (live < 0 && !grouped && !s->cmd_done)
        kill(s->cmd, SIGTERM);
}

static void start_killing(shim *s, int why)
{
    if (s->killing)
        return;
    s->killing = 1;
    if (!s->stopping) {
        s->stopping = 1;
        s->why = why;
    }
    int live = live_count(s, SIGKILL);
    sv_send(s->out, SV_KILLING, why, live, 0);
}

static void reap(shim *s)
{
    int st;
    pid_t w;
    while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
        if (w != s->cmd || s->cmd_done)
            continue;
        s->cmd_done = 1;
        s->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
}

static void read_commands(shim *s, int64_t now)
{
    sv_msg m;
    int r;
    while ((r = sv_recv(s->in, &m)) == 1) {
        switch (m.type) {
        case SV_DEADLINE:
            if (!s->stopping)
                s->hard = m.a;
            break;
        case SV_STOP:
            begin_stop(s, SV_WHY_STOPPED, m.a);
            break;
        case SV_KILL:
            begin_stop(s, SV_WHY_ASKED, now);
            start_killing(s, SV_WHY_ASKED);
            break;
        case SV_SIGNAL:
            if (!s->cmd_done && !s->stopping)
                kill(s->cmd, m.arg);
            break;
        }
    }
    if (r < 0) { /* s3lect run is gone: nobody renews the lease any more */
        close(s->in);
        s->in = -1;
        begin_stop(s, SV_WHY_ORPHANED, now + s->kill_timeout);
    }
}

/* Descriptors that were open when s3lect started: the command may be meant
 * to inherit them (a shell's 3>file, socket activation). Any other
 * descriptor is s3lect's own (libcurl's sockets, the metrics port, the
 * runtime's) and must not reach the command. -1: not known (all kept). */
#define SV_MAX_INHERITED 512
static int g_inherited[SV_MAX_INHERITED];
static int g_ninherited = -1;

void sv_note_inherited_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    int n = 0, skip = dirfd(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        int fd = atoi(de->d_name);
        if (fd == skip)
            continue;
        if (n == SV_MAX_INHERITED) {
            closedir(d);
            return; /* too many to track: keep them all */
        }
        g_inherited[n++] = fd;
    }
    closedir(d);
    g_ninherited = n;
}

/* In the shim (one thread, before it starts the command): every descriptor
 * s3lect opened itself becomes close-on-exec. */
static void cloexec_own_fds(void)
{
    if (g_ninherited < 0)
        return;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    int skip = dirfd(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        int fd = atoi(de->d_name), keep = fd == skip || fd <= 2;
        for (int i = 0; i < g_ninherited && !keep; i++)
            keep = g_inherited[i] == fd;
        if (!keep)
            fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
    }
    closedir(d);
}

static void shim_main(const sv_spawn_args *a, pid_t parent, int in, int out)
{
    cloexec_own_fds();
    shim s;
    memset(&s, 0, sizeof s);
    s.in = in;
    s.out = out;
    s.hard = a->hard;
    s.kill_timeout = a->kill_timeout;
    s.self = getpid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(1); /* s3lect run died before we could notice: nothing started */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    setpgid(0, 0); /* out of s3lect's group: a kill of that group leaves us to clean up */
    close_cloexec_fds(in, out);
    fcntl(in, F_SETFL, fcntl(in, F_GETFL) | O_NONBLOCK);

    int sfd = sv_signalfd();

    setenv("S3LECT_TERM", a->term, 1);
    setenv("S3LECT_LEADER_ID", a->leader_id, 1);
    setenv("S3LECT_LOCK", a->lock, 1);
    if (a->token) /* never an outer s3lect run's token */
        setenv("S3LECT_FENCE_TOKEN", a->token, 1);
    else
        unsetenv("S3LECT_FENCE_TOKEN");
    /* Closed by the exec (close-on-exec) or by the child's exit: SV_STARTED
     * goes out once CMD runs its own program (GET /leader answers 200 from
     * then on), not while the child still runs s3lect's code. */
    int execd[2];
    if (pipe2(execd, O_CLOEXEC) != 0)
        execd[0] = execd[1] = -1;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        char msg[200];
        int len = snprintf(msg, sizeof msg, "s3lect: cannot fork: %s\n", strerror(e));
        if (write(2, msg, (size_t)len) < 0) { /* nothing to do about a closed log */
        }
        sv_send(out, SV_DONE, SV_WHY_EXITED, 1, 0);
        _exit(1);
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        if (a->orig_sigpipe)
            sigaction(SIGPIPE, a->orig_sigpipe, NULL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setpgid(0, 0); /* its own group: SIGTERM reaches the whole pipeline */
        /* If the shim dies, CMD must not run on; its descendants are then
         * re-parented to s3lect run, a subreaper too, which kills them. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != s.self)
            _exit(127);
        execvp(a->cmd[0], a->cmd);
        char msg[600];
        int len = snprintf(msg, sizeof msg, "s3lect: cannot run '%.400s': %s\n", a->cmd[0],
                           strerror(errno));
        if (write(2, msg, (size_t)len) < 0) {
        }
        _exit(127);
    }
    setpgid(pid, pid);
    s.cmd = pid;
    if (execd[1] >= 0) {
        close(execd[1]);
        char c;
        struct pollfd ep = {execd[0], POLLIN, 0};
        int64_t left = s.hard - u_mono_ms();
        /* bounded: the hard deadline holds even if the exec hangs */
        if (left > 0 && poll(&ep, 1, (int)left) > 0 && read(execd[0], &c, 1) < 0) {
        }
        close(execd[0]);
    }
    sv_send(out, SV_STARTED, (int)pid, 0, 0);

    int sent_main_exit = 0;
    for (;;) {
        reap(&s);
        int64_t now = u_mono_ms();
        if (s.cmd_done && !s.stopping)
            begin_stop(&s, SV_WHY_EXITED, now + s.kill_timeout);
        if (!s.killing && now >= s.hard)
            start_killing(&s, SV_WHY_DEADLINE);
        if (!s.killing && s.stopping && now >= s.kill_at)
            start_killing(&s, s.why == SV_WHY_STOPPED ? SV_WHY_STOPPED : s.why);
        int live = -1;
        if (s.stopping)
            live = live_count(&s, s.killing ? SIGKILL : 0);
        if (s.cmd_done && !sent_main_exit) {
            sv_send(out, SV_MAIN_EXITED, (int)s.cmd, s.code, live < 0 ? 0 : live);
            sent_main_exit = 1;
        }
        if (s.stopping && s.cmd_done && live == 0) {
            sv_send(out, SV_DONE, s.why, s.code, 0);
            _exit(0);
        }
        int64_t timeout = 1000;
        if (s.killing) {
            timeout = SV_KILL_POLL_MS;
        } else {
            if (s.stopping && timeout > SV_STOP_POLL_MS)
                timeout = SV_STOP_POLL_MS;
            if (s.stopping && s.kill_at - now < timeout)
                timeout = s.kill_at - now;
            if (s.hard - now < timeout)
                timeout = s.hard - now; /* wake exactly at the hard deadline */
        }
        if (timeout < 0)
            timeout = 0;
        struct pollfd pfd[2] = {{s.in, POLLIN, 0}, {sfd, POLLIN, 0}};
        (void)poll(pfd, 2, (int)timeout); /* on an error revents stay 0: the loop goes round */
        now = u_mono_ms();
        if (s.in >= 0 && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
            read_commands(&s, now);
        if (sfd >= 0 && (pfd[1].revents & POLLIN)) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
                    begin_stop(&s, SV_WHY_ORPHANED, now + s.kill_timeout);
        }
    }
}

pid_t sv_spawn(const sv_spawn_args *a, int *to_fd, int *from_fd)
{
    int down[2], up[2];
    if (pipe2(down, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(up, O_CLOEXEC) != 0) {
        close(down[0]);
        close(down[1]);
        return -1;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(down[0]);
        close(down[1]);
        close(up[0]);
        close(up[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        shim_main(a, parent, down[0], up[1]);
        _exit(1);
    }
    close(down[0]);
    close(up[1]);
    fcntl(down[1], F_SETFL, fcntl(down[1], F_GETFL) | O_NONBLOCK);
    fcntl(up[0], F_SETFL, fcntl(up[0], F_GETFL) | O_NONBLOCK);
    *to_fd = down[1];
    *from_fd = up[0];
    return pid;
}
