/* SPDX-License-Identifier: Apache-2.0 */
/* cli.h - shared pieces of the s3lect command. */
#ifndef S3LECT_CLI_H
#define S3LECT_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "duration.h"
#include "s3lect.h"

/* Exit codes (documented in `s3lect --help` and docs/cli.md). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_ERROR = 1,
    CLI_EXIT_USAGE = 2,
    CLI_EXIT_NO_LEADER = 3,
    CLI_EXIT_EXEC = 127
};

/* `watch --interval` floor: below it the loop would hammer the store. */
#define CLI_MIN_INTERVAL_MS 100

/* Options common to the subcommands that touch a lock. */
typedef struct cli_opts {
    const char *lock, *id, *addr, *endpoint, *region, *ca_file;
    const char *peer_listen, *peer_cert, *peer_key, *peer_ca, *peer_client_cert;
    int peer;       /* --peer / S3LECT_PEER: -1 unset, 0 off, 1 on */
    int no_peer;    /* --no-peer */
    int path_style; /* -1 unset */
    int64_t lease, renew, deadline, frequent, infrequent, skew, kill_timeout, interval;
    int64_t startup_timeout; /* run: -1 = default (60 s), 0 = retry for ever */
    int64_t max_lease;       /* 0: default (4 x lease) */
    int64_t new_lock_wait;   /* -1: default (the lease) */
    int64_t max_hold;        /* run: -1 = default (never) */
    const char *priority;    /* run: --priority N (NULL: default 0) */
    int json;
    const char *log_format;     /* run: "text" (default) or "json" */
    int log_time;               /* run: RFC 3339 time before each text line */
    int print_config;           /* run: print the effective timings and sizes, exit */
    const char *metrics_listen; /* run: HOST:PORT of GET /metrics */
    int has_timing;
    unsigned long seen; /* options given so far (bit per option), to refuse repeats */
} cli_opts;

/* Every option unset (-1 where 0 is a value). */
void cli_opts_init(cli_opts *o);

/* Handles one option at argv[*i] (advancing *i past its value). Returns 1 if
 * consumed, 0 if not an option we know, -1 after printing a usage error. */
int cli_common_opt(const char *cmd, int argc, char **argv, int *i, cli_opts *o);
/* Reads S3LECT_<OPTION> (e.g. S3LECT_LEASE_TIMEOUT, S3LECT_PEER=1) for every
 * option of cmd not given on the command line. 0, or -1 after an error that
 * names the variable. */
int cli_env_opts(const char *cmd, cli_opts *o);
/* Builds a config from the options; prints the error and returns NULL on failure. */
s3lect_config *cli_config(const char *cmd, const cli_opts *o);
void cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "unknown option '--lease-timout'; did you mean --lease-timeout?": the
 * error for an option cmd does not know, with the closest of its options
 * (the common ones, and extra: cmd's own, NULL-terminated) when one is close. */
void cli_unknown_option(const char *cmd, const char *arg, const char *const *extra);

/* `run --metrics-listen`: GET /metrics over plain HTTP from its own thread. */
typedef struct cli_metrics cli_metrics;
int cli_metrics_start(const char *addr, s3lect_elector *el, cli_metrics **out, char *err,
                      size_t errlen);
int cli_metrics_port(const cli_metrics *m);
/* Serves el's metrics from now on (the caller frees the old one after). */
void cli_metrics_set_elector(cli_metrics *m, s3lect_elector *el);
void cli_metrics_stop(cli_metrics *m);
/* The supervised command's state, as GET /leader and /healthz report it
 * (200 on /leader only while RUNNING and leading). s3lect run sets STARTING
 * when it spawns the command, RUNNING once it is exec'd, STOPPING when it
 * asks it to stop or it exited, STOPPED once its tree is gone. NULL m: no-op. */
enum { CLI_CMD_STOPPED = 0, CLI_CMD_STARTING = 1, CLI_CMD_RUNNING = 2, CLI_CMD_STOPPING = 3 };
void cli_metrics_set_command(cli_metrics *m, int state);
/* The supervisor loop's turn (GET /healthz fails when it stalls); stopping:
 * s3lect run is on its way out (from then on /healthz and /leader fail). */
void cli_metrics_beat(cli_metrics *m, int stopping);

int cli_run(int argc, char **argv);
/* read_cmds.c: status, watch, reset-term (each prints its help for --help). */
int cli_status(int argc, char **argv);
int cli_watch(int argc, char **argv);
int cli_reset_term(int argc, char **argv);
/* completion.c: `s3lect completion bash|zsh|fish`. */
int cli_completion(int argc, char **argv);
/* help.c: `run --help` and `help run`, and `s3lect --help`; both name every
 * store of the scheme table. */
void cli_print_run_help(void);
void cli_print_main_help(void);
int cli_check_store(int argc, char **argv);
int cli_init_store(int argc, char **argv);
int cli_whoami(int argc, char **argv);
/* `s3lect stores` (stores.c): the scheme table for people and scripts. */
int cli_stores(int argc, char **argv);
/* `s3lect fence get|put|cas|rm|policy` (fence.c): fenced writes. */
int cli_fence(int argc, char **argv);
/* s3lect transfer (transfer.c). */
int cli_transfer(int argc, char **argv);
extern const char CLI_STORES_HELP[];
/* Prints what whoami prints about credentials (never a secret), each line
 * after indent. */
struct cred_cache_info;
void cli_print_credentials(const struct cred_cache_info *info, const char *indent, FILE *f);
/* The credentials a lock's store would use (whoami.c): see there. */
enum {
    CLI_CRED_OK = 0,
    CLI_CRED_NONE = 1,
    CLI_CRED_UNUSABLE = 2,
    CLI_CRED_ERROR = 3,
    CLI_CRED_BADLOCK = 4
};
int cli_credentials_info(const struct s3lect_config *cfg, const char *lock, int fetch,
                         struct cred_cache_info *in, int *no_token, char *err, size_t errlen);

#endif
