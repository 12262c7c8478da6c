/* main.c - the s3lect command: run, status, watch, check-store. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "record.h"
#include "store.h"
#include "util.h"

static const char MAIN_HELP[] =
    "usage: s3lect <command> [options]\n"
    "\n"
    "Leader election on an S3 object (or a local file), without a coordinator.\n"
    "\n"
    "commands:\n"
    "  run --lock URL [options] -- CMD [ARGS...]\n"
    "                      run CMD only while this process holds leadership\n"
    "  status URL [--json] print who holds the lock (exit 0: live leader, 3: none)\n"
    "  watch URL           print a line whenever the leader changes\n"
    "  check-store URL     check that the store enforces conditional writes\n"
    "  help [command]      show help for a command\n"
    "\n"
    "lock URLs: s3://bucket/key, file:///dir/key, or a plain path (file store)\n"
    "\n"
    "  -h, --help          show this help\n"
    "  -V, --version       print the version\n"
    "\n"
    "exit codes: 0 ok, 1 error, 2 usage error, 3 no live leader (status),\n"
    "            127 command could not be run (run); run exits with CMD's status\n"
    "            when CMD ends by itself.\n";

static const char COMMON_HELP[] =
    "lock options:\n"
    "  --lock URL              lock location (or give it as the first argument)\n"
    "  --endpoint URL          S3 endpoint (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS)\n"
    "  --region REGION         S3 region (default: AWS_REGION, AWS_DEFAULT_REGION, us-east-1)\n"
    "  --path-style            path-style S3 addressing (automatic for IPs and localhost)\n"
    "  --ca-file FILE          PEM CA bundle for HTTPS\n"
    "credentials come only from the environment or ~/.aws files, never from flags.\n";

static const char RUN_HELP[] =
    "usage: s3lect run --lock URL [options] -- CMD [ARGS...]\n"
    "\n"
    "Competes for leadership; while leader, runs CMD with S3LECT_TERM (the fencing\n"
    "token) and S3LECT_LEADER_ID in its environment. On loss of leadership CMD gets\n"
    "SIGTERM, then SIGKILL after --kill-timeout; it is started again when leadership\n"
    "returns. SIGTERM/SIGINT to s3lect stops CMD, releases the lock and exits 0. If\n"
    "CMD exits by itself, s3lect releases the lock and exits with CMD's status.\n"
    "Transitions are printed to stderr as lines starting with 's3lect:'.\n"
    "\n"
    "options (durations: 500ms, 2s, 1m):\n"
    "  --id ID                 this node's id (default: hostname-pid)\n"
    "  --addr HOST:PORT        advertised address recorded in the lock\n"
    "  --lease-timeout D       lease timeout L (default 15s)\n"
    "  --renew-interval D      leader renew period (default 5s)\n"
    "  --renew-deadline D      leader steps down after D without renewal (default 10s)\n"
    "  --frequent-interval D   follower poll period in transitions (default 5s)\n"
    "  --infrequent-interval D follower poll period when stable (default 30s)\n"
    "  --max-clock-skew D      wall-clock skew bound, 0 disables (default 2s)\n"
    "  --kill-timeout D        SIGTERM→SIGKILL grace for CMD (default 10s)\n"
    "\n"
    "peer mode (followers long-poll the leader over HTTPS instead of reading S3):\n"
    "  --peer                  turn peer mode on (needs --addr, --peer-cert, --peer-key, "
    "--peer-ca)\n"
    "  --peer-listen HOST:PORT listen address of the leadership endpoint (default: --addr)\n"
    "  --peer-cert FILE        server certificate chain (PEM)\n"
    "  --peer-key FILE         server private key (PEM)\n"
    "  --peer-ca FILE          CA bundle that verifies the leader (and client certs under mTLS)\n"
    "  --peer-client-cert FILE client certificate + key (PEM); turns on mTLS\n"
    "\n"
    "CMD may outlive leadership by up to --kill-timeout; for no overlap at all keep\n"
    "kill-timeout below lease-timeout - renew-deadline (see docs/cli.md).\n";

static const char STATUS_HELP[] =
    "usage: s3lect status URL [--json] [--lease-timeout D]\n"
    "\n"
    "Reads the lock record once and prints who leads, the term and the record's age.\n"
    "A leader is live while the record is younger than its lease (the record's\n"
    "leaseMs, else --lease-timeout). Exit 0: live leader; 3: free, expired or\n"
    "missing; 1: error.\n";

static const char WATCH_HELP[] =
    "usage: s3lect watch URL [--interval D] [--json]\n"
    "\n"
    "Reads the lock record every --interval (default 1s) and prints a line whenever\n"
    "the leader, the term or liveness changes. Never writes. Stops on SIGINT/SIGTERM.\n";

void cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "s3lect%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 's3lect %s%s--help')\n", cmd ? cmd : "", cmd ? " " : "");
}

static int need_value(const char *cmd, int argc, char **argv, int i)
{
    if (i + 1 >= argc) {
        cli_usage_error(cmd, "option %s needs a value", argv[i]);
        return -1;
    }
    return 0;
}

static int dur_opt(const char *cmd, int argc, char **argv, int *i, int64_t *out)
{
    if (need_value(cmd, argc, argv, *i))
        return -1;
    if (cli_parse_duration(argv[*i + 1], out) != 0) {
        cli_usage_error(cmd, "%s: '%s' is not a duration; use e.g. 500ms, 2s or 1m", argv[*i],
                        argv[*i + 1]);
        return -1;
    }
    (*i)++;
    return 1;
}

int cli_common_opt(const char *cmd, int argc, char **argv, int *i, cli_opts *o)
{
    const char *a = argv[*i];
    struct {
        const char *name;
        const char **slot;
    } strs[] = {{"--lock", &o->lock},
                {"--id", &o->id},
                {"--addr", &o->addr},
                {"--endpoint", &o->endpoint},
                {"--region", &o->region},
                {"--ca-file", &o->ca_file},
                {"--peer-listen", &o->peer_listen},
                {"--peer-cert", &o->peer_cert},
                {"--peer-key", &o->peer_key},
                {"--peer-ca", &o->peer_ca},
                {"--peer-client-cert", &o->peer_client_cert}};
    for (size_t k = 0; k < sizeof strs / sizeof strs[0]; k++) {
        size_t n = strlen(strs[k].name);
        if (strncmp(a, strs[k].name, n) == 0 && a[n] == '=') {
            *strs[k].slot = a + n + 1;
            return 1;
        }
        if (strcmp(a, strs[k].name) == 0) {
            if (need_value(cmd, argc, argv, *i))
                return -1;
            *strs[k].slot = argv[++*i];
            return 1;
        }
    }
    struct {
        const char *name;
        int64_t *slot;
        int timing;
    } durs[] = {{"--lease-timeout", &o->lease, 1},
                {"--renew-interval", &o->renew, 1},
                {"--renew-deadline", &o->deadline, 1},
                {"--frequent-interval", &o->frequent, 1},
                {"--infrequent-interval", &o->infrequent, 1},
                {"--max-clock-skew", &o->skew, 1},
                {"--kill-timeout", &o->kill_timeout, 0},
                {"--interval", &o->interval, 0}};
    for (size_t k = 0; k < sizeof durs / sizeof durs[0]; k++) {
        size_t n = strlen(durs[k].name);
        if (strncmp(a, durs[k].name, n) == 0 && a[n] == '=') {
            if (cli_parse_duration(a + n + 1, durs[k].slot) != 0) {
                cli_usage_error(cmd, "%s: '%s' is not a duration; use e.g. 500ms, 2s or 1m",
                                durs[k].name, a + n + 1);
                return -1;
            }
            o->has_timing |= durs[k].timing;
            return 1;
        }
        if (strcmp(a, durs[k].name) == 0) {
            o->has_timing |= durs[k].timing;
            return dur_opt(cmd, argc, argv, i, durs[k].slot);
        }
    }
    if (strcmp(a, "--peer") == 0) {
        o->peer = 1;
        return 1;
    }
    if (strcmp(a, "--path-style") == 0) {
        o->path_style = 1;
        return 1;
    }
    if (strcmp(a, "--json") == 0) {
        o->json = 1;
        return 1;
    }
    return 0;
}

s3lect_config *cli_config(const char *cmd, const cli_opts *o)
{
    s3lect_config *c = s3lect_config_new();
    if (!c) {
        fprintf(stderr, "s3lect %s: out of memory\n", cmd);
        return NULL;
    }
    char idbuf[300];
    if (!o->id) {
        char host[256] = "host";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        snprintf(idbuf, sizeof idbuf, "%s-%ld", host, (long)getpid());
    }
    int rc = 0;
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_LOCK, o->lock);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_SERVER_ID, o->id ? o->id : idbuf);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_SERVER_ADDR, o->addr);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_ENDPOINT, o->endpoint);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_REGION, o->region);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_CA_FILE, o->ca_file);
    if (!rc && o->path_style == 1)
        rc = s3lect_config_set_bool(c, S3LECT_OPT_PATH_STYLE, 1);
    if (!rc && o->peer)
        rc = s3lect_config_set_bool(c, S3LECT_OPT_PEER_MODE, 1);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_PEER_LISTEN, o->peer_listen);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_PEER_CERT, o->peer_cert);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_PEER_KEY, o->peer_key);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_PEER_CA, o->peer_ca);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_PEER_CLIENT_CERT, o->peer_client_cert);
    struct {
        int64_t v;
        s3lect_option opt;
    } ints[] = {{o->lease, S3LECT_OPT_LEASE_TIMEOUT},
                {o->renew, S3LECT_OPT_RENEW_INTERVAL},
                {o->deadline, S3LECT_OPT_RENEW_DEADLINE},
                {o->frequent, S3LECT_OPT_FREQUENT_INTERVAL},
                {o->infrequent, S3LECT_OPT_INFREQUENT_INTERVAL},
                {o->skew, S3LECT_OPT_MAX_CLOCK_SKEW}};
    for (size_t k = 0; !rc && k < sizeof ints / sizeof ints[0]; k++)
        if (ints[k].v >= 0)
            rc = s3lect_config_set_int(c, ints[k].opt, ints[k].v);
    if (!rc)
        rc = s3lect_config_validate(c);
    if (rc) {
        char msg[512];
        s3lect_config_errmsg(c, msg, sizeof msg);
        cli_usage_error(cmd, "%s", msg[0] ? msg : s3lect_strerror(rc));
        s3lect_config_free(c);
        return NULL;
    }
    return c;
}

static void opts_init(cli_opts *o)
{
    memset(o, 0, sizeof *o);
    o->path_style = -1;
    o->lease = o->renew = o->deadline = o->frequent = o->infrequent = o->skew = -1;
    o->kill_timeout = 10000;
    o->interval = 1000;
}

/* Parses status/watch arguments: URL positional or --lock, flags anywhere. */
static int parse_read_cmd(const char *cmd, int argc, char **argv, cli_opts *o, const char *help)
{
    opts_init(o);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(help, stdout);
            fputs(COMMON_HELP, stdout);
            exit(CLI_EXIT_OK);
        }
        int r = cli_common_opt(cmd, argc, argv, &i, o);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        if (argv[i][0] == '-') {
            cli_usage_error(cmd, "unknown option '%s'", argv[i]);
            return -1;
        }
        if (o->lock) {
            cli_usage_error(cmd, "more than one lock URL ('%s' and '%s')", o->lock, argv[i]);
            return -1;
        }
        o->lock = argv[i];
    }
    if (!o->lock) {
        cli_usage_error(cmd, "missing lock URL, e.g. s3lect %s s3://bucket/leader.json", cmd);
        return -1;
    }
    return 0;
}

/* One read of the record, summarised. */
typedef struct snapshot {
    int outcome;
    rec r;
    int corrupt;
    char *etag;
    char err[512];
    int64_t age_ms, lease_ms;
    int live;
} snapshot;

static void read_snapshot(st_store *s, const char *key, int64_t lease_default, snapshot *sn)
{
    memset(sn, 0, sizeof *sn);
    st_result res = {0};
    st_get(s, key, 10000, &res);
    sn->outcome = res.outcome;
    if (res.outcome == ST_OK) {
        sn->etag = res.etag;
        res.etag = NULL;
        sn->corrupt = rec_parse(res.body, res.body_len, &sn->r, sn->err, sizeof sn->err) != 0;
        if (!sn->corrupt) {
            sn->lease_ms = sn->r.lease_ms > 0 ? sn->r.lease_ms : lease_default;
            sn->age_ms = u_wall_ms() - sn->r.last_updated_ms;
            sn->live = !rec_released(&sn->r) && sn->age_ms < sn->lease_ms;
        }
    } else if (res.outcome != ST_NOT_FOUND) {
        snprintf(sn->err, sizeof sn->err, "%s", res.message ? res.message : "store error");
    }
    st_result_clear(&res);
}

static void snapshot_clear(snapshot *sn)
{
    rec_clear(&sn->r);
    free(sn->etag);
}

/* The record as stored, plus what status knows beyond it. */
static void print_json(const snapshot *sn, const char *time, FILE *f)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return;
    if (time)
        cJSON_AddStringToObject(o, "time", time);
    cJSON_AddBoolToObject(o, "exists", sn->outcome == ST_OK);
    if (sn->outcome == ST_OK) {
        cJSON_AddBoolToObject(o, "corrupt", sn->corrupt);
        cJSON_AddStringToObject(o, "etag", sn->etag ? sn->etag : "");
    }
    if (sn->outcome == ST_OK && !sn->corrupt) {
        char lu[40] = "0001-01-01T00:00:00Z";
        if (!sn->r.zero_time)
            u_format_rfc3339(sn->r.last_updated_ms, lu, sizeof lu);
        cJSON_AddStringToObject(o, "leaderID", sn->r.leader_id);
        cJSON_AddStringToObject(o, "leaderAddr", sn->r.leader_addr);
        cJSON_AddStringToObject(o, "lastUpdated", lu);
        cJSON_AddNumberToObject(o, "term", (double)sn->r.term);
        cJSON_AddNumberToObject(o, "leaseMs", (double)sn->r.lease_ms);
        cJSON_AddStringToObject(o, "incarnation", sn->r.incarnation);
        cJSON_AddBoolToObject(o, "released", rec_released(&sn->r));
        cJSON_AddNumberToObject(o, "ageMs", sn->r.zero_time ? 0 : (double)sn->age_ms);
    } else if (sn->corrupt) {
        cJSON_AddStringToObject(o, "error", sn->err);
    }
    cJSON_AddBoolToObject(o, "live", sn->live);
    char *txt = cJSON_PrintUnformatted(o);
    if (txt)
        fprintf(f, "%s\n", txt);
    free(txt);
    cJSON_Delete(o);
}

static void fmt_age(int64_t ms, char *out, size_t n)
{
    if (ms < 0)
        snprintf(out, n, "%.1fs in the future", -ms / 1000.0);
    else if (ms < 120000)
        snprintf(out, n, "%.1fs ago", ms / 1000.0);
    else
        snprintf(out, n, "%lldm ago", (long long)(ms / 60000));
}

static void print_human(const char *lock, const snapshot *sn, FILE *f)
{
    if (sn->outcome == ST_NOT_FOUND) {
        fprintf(f, "%s: no lock record yet (no leader has ever been elected)\n", lock);
        return;
    }
    if (sn->corrupt) {
        fprintf(f, "%s: %s (etag %s); it is taken over once it expires\n", lock, sn->err, sn->etag);
        return;
    }
    if (rec_released(&sn->r)) {
        fprintf(f, "%s: free (released; last term %lld)\n", lock, (long long)sn->r.term);
        return;
    }
    char age[64];
    fmt_age(sn->age_ms, age, sizeof age);
    fprintf(f, "%s: %s leader %s%s%s%s term=%lld updated %s (lease %.1fs)\n", lock,
            sn->live ? "live" : "expired", sn->r.leader_id, sn->r.leader_addr[0] ? " (" : "",
            sn->r.leader_addr, sn->r.leader_addr[0] ? ")" : "", (long long)sn->r.term, age,
            sn->lease_ms / 1000.0);
}

static int open_store(const char *cmd, const cli_opts *o, st_store **s, char **key)
{
    cli_opts oo = *o;
    if (!oo.id)
        oo.id = "s3lect-cli";
    s3lect_config *c = cli_config(cmd, &oo);
    if (!c)
        return CLI_EXIT_USAGE;
    char err[512];
    int rc = st_open(c, s, key, err, sizeof err);
    s3lect_config_free(c);
    if (rc) {
        fprintf(stderr, "s3lect %s: %s\n", cmd, err);
        return CLI_EXIT_ERROR;
    }
    return 0;
}

static int cmd_status(int argc, char **argv)
{
    cli_opts o;
    if (parse_read_cmd("status", argc, argv, &o, STATUS_HELP))
        return CLI_EXIT_USAGE;
    st_store *s;
    char *key;
    int rc = open_store("status", &o, &s, &key);
    if (rc)
        return rc;
    snapshot sn;
    read_snapshot(s, key, o.lease > 0 ? o.lease : 15000, &sn);
    if (sn.outcome != ST_OK && sn.outcome != ST_NOT_FOUND) {
        fprintf(stderr, "s3lect status: %s\n", sn.err);
        rc = CLI_EXIT_ERROR;
    } else {
        if (o.json)
            print_json(&sn, NULL, stdout);
        else
            print_human(o.lock, &sn, stdout);
        rc = sn.live ? CLI_EXIT_OK : CLI_EXIT_NO_LEADER;
    }
    snapshot_clear(&sn);
    st_destroy(s);
    free(key);
    return rc;
}

static volatile sig_atomic_t watch_stop;
static void on_watch_signal(int sig)
{
    (void)sig;
    watch_stop = 1;
}

static int cmd_watch(int argc, char **argv)
{
    cli_opts o;
    if (parse_read_cmd("watch", argc, argv, &o, WATCH_HELP))
        return CLI_EXIT_USAGE;
    st_store *s;
    char *key;
    int rc = open_store("watch", &o, &s, &key);
    if (rc)
        return rc;
    struct sigaction sa = {0};
    sa.sa_handler = on_watch_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    char last[600] = "";
    while (!watch_stop) {
        snapshot sn;
        read_snapshot(s, key, o.lease > 0 ? o.lease : 15000, &sn);
        char line[600];
        if (sn.outcome != ST_OK && sn.outcome != ST_NOT_FOUND)
            snprintf(line, sizeof line, "s3lect: error %.500s", sn.err);
        else if (sn.outcome == ST_NOT_FOUND)
            snprintf(line, sizeof line, "s3lect: no record");
        else if (sn.corrupt)
            snprintf(line, sizeof line, "s3lect: corrupt record etag=%.200s", sn.etag);
        else if (rec_released(&sn.r))
            snprintf(line, sizeof line, "s3lect: free term=%lld", (long long)sn.r.term);
        else
            snprintf(line, sizeof line, "s3lect: leader=%.255s term=%lld %s", sn.r.leader_id,
                     (long long)sn.r.term, sn.live ? "live" : "expired");
        if (strcmp(line, last) != 0) {
            char ts[40];
            u_format_rfc3339(u_wall_ms(), ts, sizeof ts);
            if (o.json) {
                print_json(&sn, ts, stdout);
            } else {
                printf("%s %s\n", ts, line);
            }
            fflush(stdout);
            snprintf(last, sizeof last, "%s", line);
        }
        snapshot_clear(&sn);
        struct timespec ts = {(time_t)(o.interval / 1000), (long)(o.interval % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    st_destroy(s);
    free(key);
    return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(MAIN_HELP, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        fputs(MAIN_HELP, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("s3lect %s\n", s3lect_version());
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        const char *sub = argc > 2 ? argv[2] : NULL;
        if (!sub)
            fputs(MAIN_HELP, stdout);
        else if (strcmp(sub, "run") == 0)
            printf("%s%s", RUN_HELP, COMMON_HELP);
        else if (strcmp(sub, "status") == 0)
            printf("%s%s", STATUS_HELP, COMMON_HELP);
        else if (strcmp(sub, "watch") == 0)
            printf("%s%s", WATCH_HELP, COMMON_HELP);
        else if (strcmp(sub, "check-store") == 0) {
            char *av[] = {"check-store", "--help", NULL};
            return cli_check_store(2, av);
        } else {
            cli_usage_error(NULL, "unknown command '%s'", sub);
            return CLI_EXIT_USAGE;
        }
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "run") == 0)
        return cli_run(argc - 1, argv + 1);
    if (strcmp(cmd, "status") == 0)
        return cmd_status(argc - 1, argv + 1);
    if (strcmp(cmd, "watch") == 0)
        return cmd_watch(argc - 1, argv + 1);
    if (strcmp(cmd, "check-store") == 0)
        return cli_check_store(argc - 1, argv + 1);
    cli_usage_error(NULL, "unknown command '%s'; commands: run, status, watch, check-store", cmd);
    return CLI_EXIT_USAGE;
}

const char *cli_run_help(void)
{
    return RUN_HELP;
}
const char *cli_common_help(void)
{
    return COMMON_HELP;
}
