/* SPDX-License-Identifier: Apache-2.0 */
/* run.c - `s3lect run`: run a command only while holding leadership.
 *
 * Single-threaded: the elector runs in poll mode, and one poll() loop waits on
 * its event fd, a signalfd and the shim's report pipe. CMD runs under a
 * supervising child, the shim (supervise.c), which owns CMD's whole process
 * tree; s3lect run is a child subreaper as well, so whatever the shim leaves
 * behind if it is killed comes back to us.
 *
 * The safety rule (docs/cli.md, "Why the tree is dead before another node
 * leads"): every process of the tree is dead by the hard deadline
 *     last successful renewal's send time + renew_deadline + kill_timeout
 *     (at most lease_timeout - margin),
 * which the node's records announce (holdMs = that + margin), so that no
 * other node takes over before it: not by the lease, and not by a store
 * clock that runs ahead (issue 38).
 * We sample it from the elector before starting CMD and on every loop turn
 * while leading, and hand it to the shim, which SIGKILLs the tree when it
 * passes unless it was extended; we enforce it ourselves too.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "logw.h"
#include "store.h"
#include "supervise.h"
#include "util.h"

/* Margin between the hard deadline and the lease's end, for clock-rate error
 * (up to 1e-3 on each of the two nodes: 2 L / 1000) and for waking up,
 * walking /proc, delivering SIGKILL and the kernel tearing the processes down
 * on a loaded machine (250 ms). */
static int64_t kill_margin(int64_t lease)
{
    return (2 * lease + 999) / 1000 + 250;
}

typedef struct runner {
    s3lect_elector *el;
    char **cmd;
    const char *id;
    char *lock; /* canonical, no password: S3LECT_LOCK of the command */
    int64_t kill_timeout, lease, deadline, margin;
    struct sigaction orig_sigpipe;
    pid_t self;
    /* the supervised tree */
    pid_t shim; /* 0: none */
    int to_shim, from_shim;
    pid_t cmd_pid;     /* as the shim reported it */
    int stop_sent;     /* SV_STOP (or SV_KILL) went to the shim */
    int64_t sent_hard; /* hard deadline the shim knows */
    int shim_done;     /* SV_DONE received */
    int done_why, done_code;
    int64_t hard; /* mono ms by which the tree must be dead; 0: never led */
    int orphans;  /* we kill our own descendants (the shim is gone) */
    int sigchld;  /* SIGCHLD since the last reap */
    int64_t orphan_kill_at;
    int64_t shim_kill_at; /* SIGKILL the shim itself (it did not end at the deadline) */
    cli_metrics *metrics; /* --metrics-listen: told the command's state, or NULL */
    /* leadership */
    int64_t term;
    int leading;
    int stopping;     /* SIGTERM/SIGINT received */
    int child_done;   /* CMD exited on its own while we led */
    int transferring; /* a transfer was confirmed: CMD is stopped, then it is committed;
                       * 2: committed, CMD stays stopped until the LOST that follows */
    char transfer_to[260];
    int child_status; /* its exit status for our exit code */
    /* --startup-timeout: until the store is first reached */
    int reached;         /* the store answered once (a read or a write) */
    int saw_transient;   /* the latest error may heal (network, 5xx, throttling) */
    int saw_permanent;   /* the latest error will not (EAUTH, EFATAL) */
    char permanent[512]; /* the last permanent error's message */
    int refused_only;    /* every error so far: a connection refused (nothing listens) */
    int other_error;     /* some error was not */
    int said_refused;    /* "nothing listens at ..." was said */
} runner;

/* --log-format json / --log-time (set once, before the first line). */
static int g_log_json, g_log_time;

static void now_rfc3339(char *out, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, n, "%s.%03ldZ", base, ts.tv_nsec / 1000000L);
}

/* One JSON object per line: time, level, msg, and each key=value word of the
 * message as a field (numbers as numbers), for log shippers. */
static char *json_line(const char *msg)
{
    char t[40];
    now_rfc3339(t, sizeof t);
    const char *level = "info", *text = msg;
    if (strncmp(msg, "error: ", 7) == 0) {
        level = "error";
        text = msg + 7;
    } else if (strncmp(msg, "warning: ", 9) == 0) {
        level = "warn";
        text = msg + 9;
    }
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "time", t);
    cJSON_AddStringToObject(o, "level", level);
    cJSON_AddStringToObject(o, "msg", text);
    for (const char *p = text; *p;) {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        const char *eq = memchr(p, '=', w);
        size_t k = eq ? (size_t)(eq - p) : 0;
        int key_ok = k > 0 && k < 32 && strspn(p, "abcdefghijklmnopqrstuvwxyz_") == k;
        if (key_ok && w > k + 1) {
            char key[32], val[256];
            snprintf(key, sizeof key, "%.*s", (int)k, p);
            snprintf(val, sizeof val, "%.*s", (int)(w - k - 1), eq + 1);
            size_t vl = strlen(val);
            if (!cJSON_GetObjectItemCaseSensitive(o, key) && strcmp(key, "msg") &&
                strcmp(key, "time") && strcmp(key, "level")) {
                if (vl > 0 && vl < 16 && strspn(val, "0123456789") == vl)
                    cJSON_AddRawToObject(o, key, val);
                else
                    cJSON_AddStringToObject(o, key, val);
            }
        }
        p += w;
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* Formats one log line (text or JSON, with its '\n') into out; its length. */
static size_t format_line(const char *msg, char *out, size_t outlen)
{
    char *js = g_log_json ? json_line(msg) : NULL;
    int n;
    if (js) {
        n = snprintf(out, outlen, "%s\n", js);
        cJSON_free(js);
    } else if (g_log_time) {
        char t[40];
        now_rfc3339(t, sizeof t);
        n = snprintf(out, outlen, "%s s3lect: %s\n", t, msg);
    } else {
        n = snprintf(out, outlen, "s3lect: %s\n", msg);
    }
    if (n < 0)
        return 0;
    if ((size_t)n >= outlen) { /* cut, but still one line */
        out[outlen - 2] = '\n';
        return outlen - 1;
    }
    return (size_t)n;
}

static size_t dropped_notice(char *out, size_t outlen, uint64_t dropped)
{
    char msg[200];
    snprintf(msg, sizeof msg,
             "warning: %llu log lines were dropped: stderr was not being read "
             "(s3lect_log_lines_dropped_total counts them)",
             (unsigned long long)dropped);
    return format_line(msg, out, outlen);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    /* Never blocks: the line is queued for the log writer thread (logw.h),
     * and dropped (and counted) if stderr is a pipe nobody reads. */
    char msg[1024], line[3072];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = format_line(msg, line, sizeof line);
    if (len)
        logw_line(line, len);
}

/* Samples the hard deadline if we lead now. Returns 1 if leading. */
static int sample(runner *r, int64_t now)
{
    s3lect_status *st = NULL;
    if (s3lect_get_status(r->el, &st) != 0 || !st)
        return 0;
    int lead = s3lect_status_is_leader(st);
    int64_t left = s3lect_status_lease_remaining_ms(st);
    if (lead || s3lect_status_last_seen_ms(st) > 0)
        r->reached = 1; /* the store answered once: --startup-timeout no longer applies */
    s3lect_status_free(st);
    if (!lead || left <= 0)
        return 0;
    /* now was read before the snapshot: an older now gives an earlier
     * deadline. now + left = the last renewal's send + renew_deadline, when
     * leadership ends; the kill timeout after that (at most lease -
     * renew_deadline - margin, check_timing) is what the records' holdMs
     * announces, less the margin. */
    int64_t hard = now + left + r->kill_timeout;
    if (hard > r->hard)
        r->hard = hard;
    return 1;
}

static void start_cmd(runner *r)
{
    char term[32], token[4096], want[64];
    snprintf(term, sizeof term, "%lld", (long long)r->term);
    /* The fence token of this leadership (docs/fencing.md): none when the
     * elector has led on (a newer term) or stopped leading since. */
    size_t n = s3lect_fence_token(r->el, token, sizeof token);
    snprintf(want, sizeof want, "s3lect-fence.1.%s.", term);
    if (n == 0 || n >= sizeof token || strncmp(token, want, strlen(want)) != 0)
        token[0] = '\0';
    sv_spawn_args a = {
        r->cmd,          term, r->id, r->hard, r->kill_timeout, r->lock, token[0] ? token : NULL,
        &r->orig_sigpipe};
    pid_t pid = sv_spawn(&a, &r->to_shim, &r->from_shim);
    if (pid < 0) {
        say("cannot fork: %s", strerror(errno));
        return;
    }
    r->shim = pid;
    cli_metrics_set_command(r->metrics, CLI_CMD_STARTING);
    r->cmd_pid = 0;
    r->stop_sent = 0;
    r->shim_done = 0;
    r->sent_hard = r->hard;
    r->shim_kill_at = 0;
}

static void stop_cmd(runner *r, const char *why)
{
    if (!r->shim || r->stop_sent)
        return;
    int64_t kill_at = u_mono_ms() + r->kill_timeout;
    if (r->hard < kill_at)
        kill_at = r->hard;
    say("stopping command pid=%ld (%s): SIGTERM", (long)r->cmd_pid, why);
    sv_send(r->to_shim, SV_STOP, 0, kill_at, 0);
    cli_metrics_set_command(r->metrics, CLI_CMD_STOPPING);
    r->stop_sent = 1;
}

static void on_acquired(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    runner *r = ud;
    r->term = s3lect_event_term(ev);
    r->leading = 1;
    say("acquired leadership term=%lld id=%s", (long long)r->term, r->id);
}

static void on_lost(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    runner *r = ud;
    r->leading = 0;
    r->transferring = 0;
    say("lost leadership term=%lld reason=%s", (long long)s3lect_event_term(ev),
        s3lect_lost_reason_str(s3lect_event_reason(ev)));
    stop_cmd(r, "leadership lost");
}

/* The target of a transfer confirmed it is live (s3lect transfer, a
 * follower of higher --priority, --max-hold): the command tree is stopped
 * first (within --kill-timeout), and only then is the transfer committed
 * (commit_transfer), so that the target never starts beside it. */
static void on_transfer(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    runner *r = ud;
    if (!r->leading || r->stopping || r->child_done)
        return;
    snprintf(r->transfer_to, sizeof r->transfer_to, "%s", s3lect_event_leader_id(ev));
    r->transferring = 1;
    say("handing leadership to %s term=%lld", r->transfer_to, (long long)s3lect_event_term(ev));
    char why[320];
    snprintf(why, sizeof why, "handing leadership to %s", r->transfer_to);
    stop_cmd(r, why);
}

/* Once the tree is gone: the transfer goes ahead (or it was abandoned
 * meanwhile, and the command starts again while this node leads). */
static void commit_transfer(runner *r)
{
    if (r->transferring != 1 || r->shim || r->orphans)
        return;
    if (s3lect_transfer_commit(r->el) == 0) {
        /* The elector stops leading at its next step, a moment later:
         * until its LOST (on_lost clears it) the command must not start
         * again, though a sample may still say "leader". */
        r->transferring = 2;
        say("command stopped: leadership goes to %s", r->transfer_to);
        return;
    }
    r->transferring = 0;
    say("warning: the transfer to %s is no longer pending (refused, abandoned, or the "
        "lease was lost meanwhile); this node goes on as before",
        r->transfer_to);
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
    runner *r = ud;
    int code = s3lect_event_code(ev);
    /* The latest class of error counts (issue 38): a store that refused
     * connections for its first seconds (a pod started before its network)
     * and then answers with a permanent error is as hopeless as one that
     * did so from the start. A transient error after a permanent one starts
     * the wait again; a permanent one after transient ones ends it. */
    /* "Connection refused" (curl: "Couldn't connect to server", libpq,
     * hiredis and the etcd client say "refused"): nothing listens there. */
    const char *msg = s3lect_event_message(ev);
    if (code == S3LECT_ETRANSIENT && (strstr(msg, "refused") || strstr(msg, "Couldn't connect")))
        r->refused_only = !r->other_error;
    else if (code != S3LECT_ENOTFOUND && code != S3LECT_EPRECONDITION)
        r->other_error = 1, r->refused_only = 0;
    if (code == S3LECT_EAUTH || code == S3LECT_EFATAL || code == S3LECT_EINVAL) {
        r->saw_permanent = 1;
        r->saw_transient = 0;
        snprintf(r->permanent, sizeof r->permanent, "%s", s3lect_event_message(ev));
    } else {
        r->saw_transient = 1;
        r->saw_permanent = 0;
    }
    /* A missing lock (new, or deleted under a leader) is a situation the
     * message explains, and the node waits it out: a warning. */
    say("%s%s", code == S3LECT_ENOTFOUND ? "warning: " : "error: ", s3lect_event_message(ev));
}

/* 1 when the node must give up: it never reached its store (sample() notes
 * when it does), its latest errors will not heal by themselves (every one
 * since the last that might), and --startup-timeout passed since it
 * started. */
static int startup_failed(const runner *r, int64_t now, int64_t started, int64_t timeout)
{
    return timeout > 0 && !r->reached && r->saw_permanent && !r->saw_transient &&
           now - started >= timeout;
}

static void read_reports(runner *r)
{
    sv_msg m;
    while (r->from_shim >= 0 && sv_recv(r->from_shim, &m) == 1) {
        switch (m.type) {
        case SV_STARTED:
            r->cmd_pid = m.arg;
            cli_metrics_set_command(r->metrics, CLI_CMD_RUNNING);
            say("started command pid=%ld term=%lld", (long)m.arg, (long long)r->term);
            break;
        case SV_MAIN_EXITED:
            cli_metrics_set_command(r->metrics, CLI_CMD_STOPPING);
            if (m.b > 0 && !r->stop_sent)
                say("command pid=%ld ended with status %lld; stopping the %lld processes it left",
                    (long)m.arg, (long long)m.a, (long long)m.b);
            break;
        case SV_KILLING:
            say("command pid=%ld did not stop %s: SIGKILL to %lld processes", (long)r->cmd_pid,
                m.arg == SV_WHY_DEADLINE ? "before the lease deadline" : "in time", (long long)m.a);
            break;
        case SV_DONE:
            r->shim_done = 1;
            r->done_why = m.arg;
            r->done_code = (int)m.a;
            break;
        }
    }
}

static void start_orphan_kill(runner *r, int64_t now)
{
    if (r->orphans)
        return;
    r->orphans = 1;
    r->orphan_kill_at = now + r->kill_timeout;
    if (r->hard < r->orphan_kill_at)
        r->orphan_kill_at = r->hard;
    int n = sv_own_tree_signal(r->self, 0, SIGTERM);
    say("stopping %d processes left behind by the command: SIGTERM", n);
}

static void shim_ended(runner *r, int status)
{
    read_reports(r);
    int64_t now = u_mono_ms();
    if (r->shim_done) {
        say("command exited pid=%ld status=%d", (long)r->cmd_pid, r->done_code);
        if (r->done_why == SV_WHY_EXITED && !r->stop_sent && r->leading && !r->stopping) {
            r->child_done = 1; /* it ended by itself: hand leadership over and leave */
            r->child_status = r->done_code;
            say("the command ended by itself while leading: s3lect run releases the lock and "
                "exits with its status (%d), as a supervisor that cannot run its command "
                "has nothing to lead for; restart it from systemd or Kubernetes to compete "
                "again",
                r->done_code);
        }
    } else {
        /* Killed by someone: CMD died with it (PR_SET_PDEATHSIG); anything else
         * it had started is now our child. */
        if (WIFSIGNALED(status))
            say("supervising process pid=%ld died of signal %d", (long)r->shim, WTERMSIG(status));
        else
            say("supervising process pid=%ld exited with status %d", (long)r->shim,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        if (!r->stop_sent && r->leading && !r->stopping) {
            r->child_done = 1;
            r->child_status = CLI_EXIT_ERROR;
        }
    }
    close(r->to_shim);
    close(r->from_shim);
    r->to_shim = r->from_shim = -1;
    r->shim = 0;
    cli_metrics_set_command(r->metrics, CLI_CMD_STOPPED);
    r->cmd_pid = 0;
    r->stop_sent = 0;
    /* Nothing should be left; if something is (the shim was killed), kill it. */
    if (sv_own_tree_signal(r->self, 0, 0) > 0)
        start_orphan_kill(r, now);
}

/* Reaps the shim and the command's orphans re-parented to us, never the
 * library's own children (a credential_process: its owner waits for it). */
static void reap(runner *r)
{
    int status;
    if (r->shim && waitpid(r->shim, &status, WNOHANG) == r->shim) {
        sv_forget(r->shim);
        shim_ended(r, status);
    }
    if (r->sigchld) { /* only then can there be a zombie to collect */
        r->sigchld = 0;
        sv_reap_strays(r->self, r->shim);
    }
}

static int parse_run(int argc, char **argv, cli_opts *o, char ***cmd)
{
    cli_opts_init(o); /* kill_timeout -1: the largest safe value */
    *cmd = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            if (i + 1 < argc)
                *cmd = &argv[i + 1];
            break;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            cli_print_run_help();
            exit(CLI_EXIT_OK);
        }
        int rc = cli_common_opt("run", argc, argv, &i, o);
        if (rc < 0)
            return -1;
        if (rc > 0)
            continue;
        if (argv[i][0] == '-') {
            cli_unknown_option("run", argv[i], NULL);
            return -1;
        }
        if (!o->lock) {
            o->lock = argv[i];
            continue;
        }
        cli_usage_error("run", "unexpected argument '%s': put the command after '--'", argv[i]);
        return -1;
    }
    if (cli_env_opts("run", o) != 0)
        return -1;
    g_log_json = o->log_format && strcmp(o->log_format, "json") == 0;
    g_log_time = o->log_time;
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

static void fmt_ms(int64_t ms, char *out, size_t n)
{
    if (ms % 1000 == 0)
        snprintf(out, n, "%llds", (long long)(ms / 1000));
    else
        snprintf(out, n, "%lldms", (long long)ms);
}

/* The elector of cfg, with run's callbacks, in r->el. */
static int make_elector(runner *r, s3lect_config *cfg)
{
    char lock[4096];
    int n = s3lect_config_get_str(cfg, S3LECT_OPT_LOCK, lock, sizeof lock);
    free(r->lock);
    r->lock = n >= 0 && (size_t)n < sizeof lock ? st_lock_canonical(lock) : NULL;
    if (!r->lock)
        return S3LECT_ENOMEM;
    int rc = s3lect_new(cfg, &r->el);
    if (rc)
        return rc;
    s3lect_set_callback(r->el, S3LECT_EVENT_ACQUIRED, on_acquired, r, NULL);
    s3lect_set_callback(r->el, S3LECT_EVENT_LOST, on_lost, r, NULL);
    s3lect_set_callback(r->el, S3LECT_EVENT_LEADER_CHANGED, on_changed, r, NULL);
    s3lect_set_callback(r->el, S3LECT_EVENT_ERROR, on_error, r, NULL);
    s3lect_set_callback(r->el, S3LECT_EVENT_TRANSFER, on_transfer, r, NULL);
    /* Defence in depth: the library renews and acquires only while this
     * loop confirms it is alive, so a stuck supervisor costs one lease. */
    s3lect_require_heartbeat(r->el, r->deadline);
    return 0;
}

/* Starts r->el. When peer mode is on by default (not asked for) and its
 * endpoint cannot start (no route to the store's host yet, no address to
 * listen on), the node runs without it and says so: it still leads and
 * follows through the store; only its followers lose the long poll. */
static int start_elector(runner *r, s3lect_config *cfg, int peer_default, cli_metrics *metrics)
{
    if (s3lect_start(r->el) == 0)
        return 0;
    char msg[600];
    s3lect_errmsg(r->el, msg, sizeof msg);
    if (!peer_default || strncmp(msg, "peer mode", 9) != 0) {
        say("error: cannot start: %s", msg[0] ? msg : "unknown error");
        return -1;
    }
    say("warning: %s; running without peer mode (this node's followers read the store every "
        "frequent interval while it leads). Give --addr or --peer-listen to fix it, or --no-peer "
        "to turn peer mode off",
        msg);
    s3lect_elector *old = r->el;
    if (s3lect_config_set_bool(cfg, S3LECT_OPT_PEER_MODE, 0) != 0 || make_elector(r, cfg) != 0) {
        r->el = old;
        say("error: cannot start: out of memory");
        return -1;
    }
    cli_metrics_set_elector(metrics, r->el);
    s3lect_free_elector(old);
    if (s3lect_start(r->el) == 0)
        return 0;
    s3lect_errmsg(r->el, msg, sizeof msg);
    say("error: cannot start: %s", msg[0] ? msg : "unknown error");
    return -1;
}

/* The timings run derives from cfg and --kill-timeout (-1: not given), one
 * computation for the run itself and for --print-config: safe is the
 * largest kill timeout the lease allows (negative: none), kill the one run
 * uses, hold the leader_hold it sets (at least deadline + kill + margin, at
 * most a lease, never lowered). -1 when cfg's lease settings cannot be read. */
typedef struct {
    int64_t lease, deadline, margin, safe, kill, hold;
} run_timing;

static int timing_of(const s3lect_config *cfg, int64_t kill_timeout, run_timing *t)
{
    memset(t, 0, sizeof *t);
    if (s3lect_config_get_int(cfg, S3LECT_OPT_LEASE_TIMEOUT, &t->lease) != 0 ||
        s3lect_config_get_int(cfg, S3LECT_OPT_RENEW_DEADLINE, &t->deadline) != 0 ||
        s3lect_config_get_int(cfg, S3LECT_OPT_LEADER_HOLD, &t->hold) != 0)
        return -1;
    t->margin = kill_margin(t->lease);
    t->safe = t->lease - t->deadline - t->margin;
    t->kill = kill_timeout >= 0 ? kill_timeout : t->safe;
    int64_t want = t->deadline + t->kill + t->margin;
    if (want > t->lease)
        want = t->lease;
    if (t->safe >= 0 && t->hold < want)
        t->hold = want;
    return 0;
}

static int check_timing(runner *r, const run_timing *t, int64_t kill_timeout)
{
    r->lease = t->lease;
    r->deadline = t->deadline;
    r->margin = t->margin;
    char l[32], d[32], m[32], k[32], s[32];
    fmt_ms(t->lease, l, sizeof l);
    fmt_ms(t->deadline, d, sizeof d);
    fmt_ms(t->margin, m, sizeof m);
    fmt_ms(t->safe, s, sizeof s);
    if (t->safe < 0) {
        cli_usage_error("run",
                        "lease-timeout %s - renew-deadline %s leaves no time to stop the command: "
                        "it must exceed the supervisor's margin %s (2 x lease/1000 + 250ms)",
                        l, d, m);
        return -1;
    }
    if (kill_timeout > t->safe) {
        fmt_ms(kill_timeout, k, sizeof k);
        cli_usage_error("run",
                        "--kill-timeout %s is unsafe: the largest safe value is %s (lease-timeout "
                        "%s - renew-deadline %s - margin %s)",
                        k, s, l, d, m);
        return -1;
    }
    r->kill_timeout = t->kill;
    return 0;
}

/* --print-config's other lines: the booleans (0/1; path_style "auto" when
 * unset) and the strings ("" when unset) this node would run with, but
 * secrets, PEM material and the lock URL (which may hold a password), and
 * an endpoint's user and password replaced by "***". One NAME=VALUE a line. */
static void print_settings(const s3lect_config *cfg)
{
    for (int opt = 1; opt <= s3lect_option_count(); opt++) {
        const char *name;
        int type;
        int64_t v;
        if (s3lect_option_info(opt, &name, &type, NULL, NULL, NULL) != S3LECT_OK ||
            (s3lect_option_flags(opt) & S3LECT_OPTION_SECRET) || opt == S3LECT_OPT_LOCK)
            continue;
        if (type == S3LECT_OPTION_BOOL && s3lect_config_get_int(cfg, opt, &v) == S3LECT_OK) {
            if (v < 0)
                printf("%s=auto\n", name);
            else
                printf("%s=%lld\n", name, (long long)v);
            continue;
        }
        char buf[1024];
        int n = type == S3LECT_OPTION_STR ? s3lect_config_get_str(cfg, opt, buf, sizeof buf) : -1;
        if (n < 0 || (size_t)n >= sizeof buf)
            continue;
        char *scheme = strstr(buf, "://"), *at = scheme ? strchr(scheme + 3, '@') : NULL;
        char *slash = scheme ? strchr(scheme + 3, '/') : NULL;
        if (at && (!slash || at < slash))
            printf("%s=%.*s***%s\n", name, (int)(scheme + 3 - buf), buf, at);
        else
            printf("%s=%s\n", name, buf);
    }
}

/* --print-config: the values this node would run with (issue 39 item 7),
 * before run's own checks: the library's integer options with their derived
 * defaults resolved as the library and run resolve them, then run's kill
 * timeout (none when the timings leave no time to stop the command, which
 * run refuses). */
static void print_config(s3lect_config *cfg, const run_timing *t)
{
    /* the hold run sets (below); the library's rules derive the rest
     * (s3lect_config_get_effective_int: 4 leases, max(lease, hold)) */
    s3lect_config_set_int(cfg, S3LECT_OPT_LEADER_HOLD, t->hold);
    for (int opt = 1; opt <= s3lect_option_count(); opt++) {
        const char *name;
        int type;
        int64_t v;
        if (s3lect_option_info(opt, &name, &type, NULL, NULL, NULL) != S3LECT_OK ||
            type != S3LECT_OPTION_INT || s3lect_config_get_effective_int(cfg, opt, &v) != S3LECT_OK)
            continue;
        printf("%s=%lld\n", name, (long long)v);
    }
    if (t->safe >= 0)
        printf("kill_timeout=%lld\n", (long long)t->kill);
    else
        printf("kill_timeout=none\n");
    print_settings(cfg);
}

/* 0 when execvp could run c: a path to an executable file, or a name found
 * in PATH (execvp's default when PATH is unset); else the errno it would
 * meet. Checked before the node competes for the lock (issue 39 item 6): a
 * typo must not take a term, and under Restart=on-failure every retry would
 * take another. */
static int command_runnable(const char *c)
{
    struct stat st;
    if (!*c)
        return ENOENT;
    if (strchr(c, '/')) {
        if (stat(c, &st) != 0)
            return errno;
        if (S_ISDIR(st.st_mode))
            return EISDIR;
        return access(c, X_OK) == 0 ? 0 : errno;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin";
    int seen_denied = 0;
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char full[4096];
        int len = snprintf(full, sizeof full, "%.*s%s%s", (int)n, p, n ? "/" : "", c);
        if (len > 0 && (size_t)len < sizeof full && stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(full, X_OK) == 0)
                return 0;
            seen_denied = 1;
        }
        if (!end)
            break;
        p = end;
    }
    return seen_denied ? EACCES : ENOENT;
}

/* cli_run's first step: the options, the timings, the command looked up
 * and the elector made, before anything runs. -1 to go on (*cfgp, r->el
 * and id set), else the exit code (everything freed). */
static int prepare_run(int argc, char **argv, cli_opts *o, runner *r, s3lect_config **cfgp,
                       char *id, size_t idlen)
{
    if (parse_run(argc, argv, o, &r->cmd))
        return CLI_EXIT_USAGE;
    s3lect_config *cfg = cli_config("run", o);
    if (!cfg)
        return CLI_EXIT_USAGE;
    run_timing t;
    if (timing_of(cfg, o->kill_timeout, &t) != 0) {
        fprintf(stderr, "s3lect run: cannot read the lease settings\n");
        s3lect_config_free(cfg);
        return CLI_EXIT_USAGE;
    }
    if (o->print_config) {
        print_config(cfg, &t);
        s3lect_config_free(cfg);
        return CLI_EXIT_OK;
    }
    if (check_timing(r, &t, o->kill_timeout) != 0) {
        s3lect_config_free(cfg);
        return CLI_EXIT_USAGE;
    }
    int cerr = command_runnable(r->cmd[0]);
    if (cerr) {
        fprintf(stderr,
                "s3lect run: cannot run '%.400s': %s; nothing was started and the lock was "
                "not touched\n",
                r->cmd[0],
                cerr == ENOENT && !strchr(r->cmd[0], '/') ? "no such command on PATH"
                                                          : strerror(cerr));
        s3lect_config_free(cfg);
        return 127; /* what a shell returns for a command it cannot find */
    }
    s3lect_config_set_bool(cfg, S3LECT_OPT_POLL_MODE, 1);
    /* The records say how long after a renewal's send this node's command
     * tree may still run (the hard deadline, plus the margin for clock
     * rates and the kill itself): a follower never backdates them by the
     * store's clock past that (docs/algorithm.md "The store's clock"). */
    s3lect_config_set_int(cfg, S3LECT_OPT_LEADER_HOLD, t.hold);
    s3lect_config_get_str(cfg, S3LECT_OPT_SERVER_ID, id, idlen);
    r->id = id;
    r->self = getpid();
    int rc = make_elector(r, cfg);
    if (rc) {
        char msg[512];
        s3lect_config_errmsg(cfg, msg, sizeof msg);
        fprintf(stderr, "s3lect run: %s\n", msg);
        s3lect_config_free(cfg);
        return rc == S3LECT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
    }
    *cfgp = cfg;
    return -1;
}

/* The supervisor's process set-up, once the log writer takes every line. */
static void setup_supervisor(runner *r)
{
    /* Orphaned descendants of CMD come to us if the shim is killed. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        say("warning: cannot become a child subreaper: %s", strerror(errno));
    int before = sv_exclude_present(r->self);
    if (before > 0)
        say("%d processes started before s3lect (e.g. by the shell that ran it) are left alone",
            before);
    /* A closed stderr pipe must not kill the supervisor (CMD gets the
     * disposition we were started with back). */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &r->orig_sigpipe);
}

/* "metrics at URL": an address a user can paste: ":9464" and
 * "0.0.0.0:9464" listen on every address, of which this host's loopback is
 * one. */
static void say_metrics(cli_metrics *metrics, const char *ml)
{
    char host[300];
    const char *colon = strrchr(ml, ':');
    size_t hl = colon ? (size_t)(colon - ml) : 0;
    snprintf(host, sizeof host, "%.*s", (int)hl, ml);
    int any = !host[0] || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "[::]") == 0 ||
              strcmp(host, "*") == 0;
    int port = cli_metrics_port(metrics);
    say("metrics at http://%s:%d/metrics port=%d%s", any ? "localhost" : host, port, port,
        any ? " (listening on every address)" : "");
}

/* Before the store was ever reached: give up on errors that will not heal
 * (*gave_up), or say once that nothing listens at its address. */
static void startup_checks(runner *r, const cli_opts *o, const char *shown, int64_t now,
                           int64_t started, int64_t startup, int *gave_up)
{
    if (!*gave_up && !r->shim && startup_failed(r, now, started, startup)) {
        char d[32];
        fmt_ms(startup, d, sizeof d);
        say("error: the store was never reached in %s (--startup-timeout) and the errors "
            "will not heal by themselves: %s; exiting",
            d, r->permanent);
        *gave_up = 1;
        r->stopping = 1;
    }
    if (!r->said_refused && !r->reached && r->refused_only && startup > 0 &&
        now - started >= startup) {
        r->said_refused = 1;
        say("warning: nothing listens at the store's address (%s): every connection was "
            "refused for %lld ms (--startup-timeout); a wrong port or host? Still waiting, "
            "as for a store that is not up yet",
            o->endpoint ? o->endpoint
            : shown     ? shown
                        : o->lock,
            (long long)startup);
    }
}

/* One pass of the safety rules over the command's tree, in this order: a
 * lost lease stops it; the shim learns each new hard deadline; at the hard
 * deadline the tree is killed whatever the shim does; orphans are killed at
 * theirs; and CMD starts only with a fresh sample that says we lead, once
 * the previous term's tree is gone. */
static void supervise_tree(runner *r, int64_t now, int lead)
{
    /* Past the lease's deadline without a LOST: a renewal whose answer comes
     * late. The tree is stopped; should the renewal land after all, the
     * elector leads on in the same term (nobody else could write meanwhile:
     * the renewal was conditional), and CMD starts again below once the tree
     * is gone. r->leading stays: it follows ACQUIRED and LOST only (so a
     * transfer during the dip is still stopped and committed, on_transfer). */
    if (r->leading && !lead)
        stop_cmd(r, "lease no longer valid");
    if (r->shim && !r->stop_sent && lead && r->hard > r->sent_hard &&
        sv_send(r->to_shim, SV_DEADLINE, 0, r->hard, 0) == 0)
        r->sent_hard = r->hard;
    /* The hard deadline holds even if the shim cannot act (stopped, hung). */
    if (r->shim && r->hard && now >= r->hard) {
        sv_own_tree_signal(r->self, r->shim, SIGKILL);
        if (!r->shim_kill_at)
            r->shim_kill_at = r->hard + 1000;
        else if (now >= r->shim_kill_at)
            kill(r->shim, SIGKILL);
    }
    if (r->orphans) {
        int n = sv_own_tree_signal(r->self, 0, now >= r->orphan_kill_at ? SIGKILL : 0);
        if (n <= 0)
            r->orphans = 0;
    }
    if (lead && r->leading && !r->stopping && !r->child_done && !r->transferring && !r->shim &&
        !r->orphans && r->hard > now) {
        if (sv_own_tree_signal(r->self, 0, 0) > 0)
            start_orphan_kill(r, now);
        else
            start_cmd(r);
    }
}

/* How long the loop may sleep: 250 ms, 20 ms while orphans are killed, and
 * never past the hard deadline or the orphans' kill time. */
static int64_t loop_timeout(const runner *r, int64_t now)
{
    int64_t timeout = 250;
    if (r->orphans)
        timeout = 20;
    if ((r->shim || r->orphans) && r->hard > now && r->hard - now < timeout)
        timeout = r->hard - now; /* wake exactly at the hard deadline */
    if (r->orphans && r->orphan_kill_at > now && r->orphan_kill_at - now < timeout)
        timeout = r->orphan_kill_at - now;
    return timeout;
}

/* The signals read from sfd: SIGCHLD noted, SIGHUP/USR1/USR2 forwarded to
 * CMD, the first SIGTERM/SIGINT stops, a second one kills CMD. */
static void on_signals(runner *r, int sfd)
{
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == sizeof si) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) {
            r->sigchld = 1;
            continue;
        } else if (sig == SIGHUP || sig == SIGUSR1 || sig == SIGUSR2) {
            if (r->shim && !r->stop_sent && r->cmd_pid) {
                say("forwarding signal %d to command pid=%ld", sig, (long)r->cmd_pid);
                sv_send(r->to_shim, SV_SIGNAL, sig, 0, 0);
            } else {
                say("received signal %d: no command running, ignored", sig);
            }
        } else if (!r->stopping) {
            r->stopping = 1;
            say("received signal %d: stopping", sig);
            stop_cmd(r, "s3lect is stopping");
        } else if (r->shim) {
            say("received signal %d again: SIGKILL to the command", sig);
            sv_send(r->to_shim, SV_KILL, 0, 0, 0);
            r->stop_sent = 1;
        }
    }
}

int cli_run(int argc, char **argv)
{
    sv_note_inherited_fds(); /* before s3lect opens any */
    cli_opts o;
    runner r;
    memset(&r, 0, sizeof r);
    r.to_shim = r.from_shim = -1;
    s3lect_config *cfg = NULL;
    char id[300];
    int rc = prepare_run(argc, argv, &o, &r, &cfg, id, sizeof id);
    if (rc >= 0) {
        free(r.lock);
        return rc;
    }
    /* Peer mode on by default, not asked for: an endpoint that cannot
     * start does not keep the node from running (start_elector). */
    int peer_default = o.peer < 0 && o.no_peer <= 0;

    /* Before the election starts: a port that cannot be bound changes nothing. */
    cli_metrics *metrics = NULL;
    if (o.metrics_listen) {
        char merr[400];
        if (cli_metrics_start(o.metrics_listen, r.el, &metrics, merr, sizeof merr) != 0) {
            fprintf(stderr, "s3lect run: %s\n", merr);
            s3lect_free_elector(r.el);
            free(r.lock);
            s3lect_config_free(cfg);
            return CLI_EXIT_ERROR;
        }
    }
    r.metrics = metrics;
    /* From here on every line goes through the log writer thread. */
    logw_start(STDERR_FILENO, dropped_notice);
    setup_supervisor(&r);

    int sfd = sv_signalfd();
    if (sfd < 0) {
        fprintf(stderr, "s3lect run: cannot start: signalfd: %s\n", strerror(errno));
        s3lect_free_elector(r.el);
        free(r.lock);
        s3lect_config_free(cfg);
        return CLI_EXIT_ERROR;
    }
    rc = start_elector(&r, cfg, peer_default, metrics);
    s3lect_config_free(cfg);
    if (rc) { /* start_elector said why, through the log writer: flush it */
        close(sfd);
        cli_metrics_stop(metrics);
        s3lect_free_elector(r.el);
        free(r.lock);
        logw_flush(300);
        return CLI_EXIT_ERROR;
    }
    char *shown = st_lock_display(o.lock);
    say("following %s as %s", shown ? shown : "the lock", id);
    if (metrics)
        say_metrics(metrics, o.metrics_listen);
    int64_t started = u_mono_ms(), startup = o.startup_timeout < 0 ? 60000 : o.startup_timeout;
    int gave_up = 0;
    for (;;) {
        int64_t now = u_mono_ms();
        /* Alive: the command runs, or is being started or stopped, below. */
        s3lect_heartbeat(r.el);
        cli_metrics_beat(metrics, r.stopping || r.child_done);
        /* Leadership is computed at call time: never trust a stale "yes". */
        int lead = sample(&r, now);
        startup_checks(&r, &o, shown, now, started, startup, &gave_up);
        supervise_tree(&r, now, lead);
        commit_transfer(&r);
        if ((r.stopping || r.child_done) && !r.shim && !r.orphans) {
            if (s3lect_is_leader(r.el))
                say("releasing leadership");
            s3lect_stop(r.el); /* writes the released record if leader */
            s3lect_dispatch(r.el, 0);
            break;
        }
        struct pollfd pfd[3] = {
            {s3lect_event_fd(r.el), POLLIN, 0}, {sfd, POLLIN, 0}, {r.from_shim, POLLIN, 0}};
        int n = poll(pfd, 3, (int)loop_timeout(&r, now));
        if (n < 0 && errno != EINTR)
            break;
        if (pfd[2].revents & POLLIN)
            read_reports(&r);
        if (pfd[1].revents & POLLIN)
            on_signals(&r, sfd);
        reap(&r);
        s3lect_dispatch(r.el, 0);
    }
    close(sfd);
    free(shown);
    cli_metrics_stop(metrics);
    s3lect_free_elector(r.el);
    free(r.lock);
    /* The last lines out, unless nobody reads them. */
    logw_flush(300);
    if (r.child_done)
        return r.child_status;
    return gave_up ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
