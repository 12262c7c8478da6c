/* run.c - `s3lect run`: run a command only while holding leadership.
 *
 * Single-threaded: the elector runs in poll mode, and one poll() loop waits on
 * its event fd, a signalfd (SIGTERM, SIGINT, SIGCHLD) and the kill timer.
 */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

const char *cli_run_help(void);
const char *cli_common_help(void);

typedef struct runner {
    s3lect_elector *el;
    char **cmd;
    const char *id;
    int64_t kill_timeout;
    pid_t child;     /* 0: none */
    int64_t kill_at; /* mono ms to SIGKILL the child; 0: none */
    int want_child;  /* leader and CMD should run */
    int64_t term;    /* term of the current leadership */
    int leading;
    int stopping;     /* SIGTERM/SIGINT received */
    int child_done;   /* CMD exited on its own while we led */
    int child_status; /* its exit status for our exit code */
} runner;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("s3lect: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
}

static void start_child(runner *r)
{
    char term[32];
    snprintf(term, sizeof term, "%lld", (long long)r->term);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        say("cannot fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setpgid(0, 0); /* its own group: SIGTERM reaches the whole pipeline */
        /* If s3lect itself dies (kill -9), CMD must not run on without a lease. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
            _exit(CLI_EXIT_EXEC);
        setenv("S3LECT_TERM", term, 1);
        setenv("S3LECT_LEADER_ID", r->id, 1);
        execvp(r->cmd[0], r->cmd);
        fprintf(stderr, "s3lect: cannot run '%s': %s\n", r->cmd[0], strerror(errno));
        _exit(CLI_EXIT_EXEC);
    }
    setpgid(pid, pid);
    r->child = pid;
    r->kill_at = 0;
    say("started command pid=%ld term=%lld", (long)pid, (long long)r->term);
}

static void stop_child(runner *r, const char *why)
{
    if (!r->child || r->kill_at)
        return;
    say("stopping command pid=%ld (%s): SIGTERM", (long)r->child, why);
    kill(-r->child, SIGTERM);
    kill(r->child, SIGTERM);
    r->kill_at = u_mono_ms() + r->kill_timeout;
}

static void on_acquired(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    runner *r = ud;
    r->term = s3lect_event_term(ev);
    r->leading = 1;
    r->want_child = !r->stopping;
    say("acquired leadership term=%lld id=%s", (long long)r->term, r->id);
}

static void on_lost(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    runner *r = ud;
    r->leading = 0;
    r->want_child = 0;
    say("lost leadership term=%lld reason=%s", (long long)s3lect_event_term(ev),
        s3lect_lost_reason_str(s3lect_event_reason(ev)));
    stop_child(r, "leadership lost");
}

static void on_changed(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    (void)ud;
    const char *id = s3lect_event_leader_id(ev);
    if (id[0])
        say("leader is %s term=%lld", id, (long long)s3lect_event_term(ev));
    else
        say("no leader (lock free) term=%lld", (long long)s3lect_event_term(ev));
}

static void on_error(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    (void)ud;
    say("error: %s", s3lect_event_message(ev));
}

static void reap(runner *r)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid != r->child)
            continue;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        say("command exited pid=%ld status=%d", (long)pid, code);
        int expected = r->kill_at != 0;
        r->child = 0;
        r->kill_at = 0;
        if (!expected && r->leading && !r->stopping) {
            r->child_done = 1; /* it ended by itself: hand leadership over and leave */
            r->child_status = code;
        }
    }
}

static int parse_run(int argc, char **argv, cli_opts *o, char ***cmd)
{
    memset(o, 0, sizeof *o);
    o->path_style = -1;
    o->lease = o->renew = o->deadline = o->frequent = o->infrequent = o->skew = -1;
    o->kill_timeout = 10000;
    *cmd = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            if (i + 1 < argc)
                *cmd = &argv[i + 1];
            break;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("%s%s", cli_run_help(), cli_common_help());
            exit(CLI_EXIT_OK);
        }
        int rc = cli_common_opt("run", argc, argv, &i, o);
        if (rc < 0)
            return -1;
        if (rc > 0)
            continue;
        if (argv[i][0] == '-') {
            cli_usage_error("run", "unknown option '%s'", argv[i]);
            return -1;
        }
        if (!o->lock) {
            o->lock = argv[i];
            continue;
        }
        cli_usage_error("run", "unexpected argument '%s': put the command after '--'", argv[i]);
        return -1;
    }
    if (!o->lock) {
        cli_usage_error("run", "missing --lock URL, e.g. --lock s3://bucket/leader.json");
        return -1;
    }
    if (!*cmd) {
        cli_usage_error("run", "missing command: s3lect run --lock URL -- CMD [ARGS...]");
        return -1;
    }
    return 0;
}

int cli_run(int argc, char **argv)
{
    cli_opts o;
    runner r;
    memset(&r, 0, sizeof r);
    if (parse_run(argc, argv, &o, &r.cmd))
        return CLI_EXIT_USAGE;
    s3lect_config *cfg = cli_config("run", &o);
    if (!cfg)
        return CLI_EXIT_USAGE;
    s3lect_config_set_bool(cfg, S3LECT_OPT_POLL_MODE, 1);
    char id[300];
    s3lect_config_get_str(cfg, S3LECT_OPT_SERVER_ID, id, sizeof id);
    r.id = id;
    r.kill_timeout = o.kill_timeout;
    int rc = s3lect_new(cfg, &r.el);
    if (rc) {
        char msg[512];
        s3lect_config_errmsg(cfg, msg, sizeof msg);
        fprintf(stderr, "s3lect run: %s\n", msg);
        s3lect_config_free(cfg);
        return rc == S3LECT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
    }
    s3lect_config_free(cfg);
    s3lect_set_callback(r.el, S3LECT_EVENT_ACQUIRED, on_acquired, &r, NULL);
    s3lect_set_callback(r.el, S3LECT_EVENT_LOST, on_lost, &r, NULL);
    s3lect_set_callback(r.el, S3LECT_EVENT_LEADER_CHANGED, on_changed, &r, NULL);
    s3lect_set_callback(r.el, S3LECT_EVENT_ERROR, on_error, &r, NULL);

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0 || s3lect_start(r.el) != 0) {
        fprintf(stderr, "s3lect run: cannot start: %s\n", strerror(errno));
        s3lect_free_elector(r.el);
        return CLI_EXIT_ERROR;
    }
    say("following %s as %s", o.lock, id);
    int released = 0;
    for (;;) {
        /* Leadership is computed at call time: never trust a stale "yes". */
        if (r.leading && !s3lect_is_leader(r.el) && !r.stopping) {
            r.leading = 0;
            r.want_child = 0;
            stop_child(&r, "lease no longer valid");
        }
        if (r.want_child && !r.child && !r.child_done)
            start_child(&r);
        r.want_child = 0;
        if ((r.stopping || r.child_done) && !r.child) {
            if (!released) {
                say("releasing leadership");
                s3lect_stop(r.el); /* writes the released record if leader */
                s3lect_dispatch(r.el, 0);
                released = 1;
            }
            break;
        }
        int64_t now = u_mono_ms(), timeout = 250;
        if (r.kill_at) {
            if (now >= r.kill_at) {
                say("command pid=%ld did not stop in time: SIGKILL", (long)r.child);
                kill(-r.child, SIGKILL);
                kill(r.child, SIGKILL);
                r.kill_at = now + 1000 * 3600; /* only once */
            } else if (r.kill_at - now < timeout) {
                timeout = r.kill_at - now;
            }
        }
        struct pollfd pfd[2] = {{s3lect_event_fd(r.el), POLLIN, 0}, {sfd, POLLIN, 0}};
        int n = poll(pfd, 2, (int)timeout);
        if (n < 0 && errno != EINTR)
            break;
        if (pfd[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == sizeof si) {
                if (si.ssi_signo == SIGCHLD) {
                    reap(&r);
                } else if (!r.stopping) {
                    r.stopping = 1;
                    say("received signal %u: stopping", si.ssi_signo);
                    stop_child(&r, "s3lect is stopping");
                }
            }
            reap(&r);
        }
        s3lect_dispatch(r.el, 0);
    }
    close(sfd);
    s3lect_free_elector(r.el);
    if (r.child_done)
        return r.child_status;
    return CLI_EXIT_OK;
}
