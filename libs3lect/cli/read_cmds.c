/* SPDX-License-Identifier: Apache-2.0 */
/* read_cmds.c - `s3lect status`, `watch` and `reset-term`: they read (and
 * reset-term writes) a lock's record directly, not through an elector. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"
#include "record.h"
#include "store.h"
#include "util.h"

static const char COMMON_HELP[] = LOCK_HELP;

static const char STATUS_HELP[] =
    "usage: s3lect status URL [--json] [--lease-timeout D] [--max-lease-timeout D]\n"
    "\n"
    "Reads the lock record once and prints who leads, the term and the record's age.\n"
    "A leader is live while the record is younger than its lease (the record's\n"
    "leaseMs, else --lease-timeout, default 15s). A leaseMs above --max-lease-timeout\n"
    "(default 4 x --lease-timeout) is read as that bound, with a warning on stderr;\n"
    "--json then shows the bound as leaseMs and the record's value as rawLeaseMs.\n"
    "Durations: a number with a unit (500ms, 2s, 1m). Exit 0: live leader; 3: free,\n"
    "expired or missing; 1: error; 2: usage error.\n"
    "\n";

static const char RESET_HELP[] =
    "usage: s3lect reset-term URL [--lease-timeout D] [--max-lease-timeout D]\n"
    "\n"
    "Starts the lock's terms again, on purpose, when they cannot grow: the record's\n"
    "term is 2^53 - 1 (the largest a record holds exactly) or more, so no node takes\n"
    "the lock over ('s3lect status' says so). Writes a released record with term 0\n"
    "over the record it read, conditionally (nothing may have written since); the\n"
    "next leader takes term 1. A record that names a holder is reset only after it\n"
    "stood unchanged for its lease (the record's leaseMs, at most --max-lease-timeout,\n"
    "else --lease-timeout, default 15s), as a node taking it over would wait; if it\n"
    "changes meanwhile a live leader holds it: stop that leader (it releases the\n"
    "lock) and run reset-term again. A term that can still grow is never reset.\n"
    "Whatever fences with the term (S3LECT_TERM) must accept the restart.\n"
    "Exit 0: reset, or no record; 1: refused or error; 2: usage error.\n"
    "\n";

static const char WATCH_HELP[] =
    "usage: s3lect watch URL [--interval D] [--json] [--lease-timeout D] "
    "[--max-lease-timeout D]\n"
    "\n"
    "Reads the lock record every --interval (default 1s, at least 100ms) and prints a\n"
    "line whenever the leader, the term or liveness changes. Never writes. Stops on\n"
    "SIGINT/SIGTERM. --lease-timeout and --max-lease-timeout work as for status.\n"
    "Durations: a number with a unit (100ms, 2s, 1m).\n"
    "\n";

/* --lease-timeout, else the library's default (the option table's, not a
 * copy of it). */
static int64_t lease_of(const cli_opts *o)
{
    int64_t d = 0;
    if (o->lease > 0)
        return o->lease;
    s3lect_option_info(S3LECT_OPT_LEASE_TIMEOUT, NULL, NULL, NULL, NULL, &d);
    return d; /* S3LECT_OPT_LEASE_TIMEOUT is always an option */
}

/* The largest leaseMs trusted in a record: --max-lease-timeout, else the
 * library's rule (s3lect_config_get_effective_int: 4 leases). Out of memory:
 * one lease (a read command then trusts less, never more). */
static int64_t max_lease_of(const cli_opts *o)
{
    s3lect_config *c = s3lect_config_new();
    int64_t v = 0;
    if (c && s3lect_config_set_int(c, S3LECT_OPT_LEASE_TIMEOUT, lease_of(o)) == S3LECT_OK &&
        (o->max_lease <= 0 ||
         s3lect_config_set_int(c, S3LECT_OPT_MAX_LEASE_TIMEOUT, o->max_lease) == S3LECT_OK))
        s3lect_config_get_effective_int(c, S3LECT_OPT_MAX_LEASE_TIMEOUT, &v);
    s3lect_config_free(c);
    return v > 0 ? v : lease_of(o);
}

static void opts_init(cli_opts *o)
{
    cli_opts_init(o);
    o->kill_timeout = 10000;
}

/* Parses status/watch arguments: URL positional or --lock, flags anywhere;
 * after "--" every argument is positional. */
static int parse_read_cmd(const char *cmd, int argc, char **argv, cli_opts *o, const char *help)
{
    opts_init(o);
    int positional_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!positional_only) {
            if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
                fputs(help, stdout);
                fputs(COMMON_HELP, stdout);
                exit(CLI_EXIT_OK);
            }
            if (strcmp(argv[i], "--") == 0) {
                positional_only = 1;
                continue;
            }
            int r = cli_common_opt(cmd, argc, argv, &i, o);
            if (r < 0)
                return -1;
            if (r > 0)
                continue;
            if (argv[i][0] == '-' && argv[i][1] != '\0') {
                cli_unknown_option(cmd, argv[i], NULL);
                return -1;
            }
        }
        if (o->lock) {
            cli_usage_error(cmd, "more than one lock URL ('%.200s' and '%.200s'); give one",
                            o->lock, argv[i]);
            return -1;
        }
        o->lock = argv[i];
    }
    if (cli_env_opts(cmd, o) != 0)
        return -1;
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
    int64_t rec_lease_ms; /* the record's leaseMs, clamped to max_lease (0: none) */
    int clamped;          /* the record's leaseMs was above max_lease */
    int live;
    int store_clock;      /* age_ms is by the store's clock (else this machine's) */
    int64_t local_age_ms; /* this machine's clock minus the record's lastUpdated */
} snapshot;

static void read_snapshot(st_store *s, const char *key, int64_t lease_default, int64_t max_lease,
                          snapshot *sn)
{
    memset(sn, 0, sizeof *sn);
    st_result res = {0};
    st_get(s, key, 10000, &res);
    if (res.warning) /* e.g. a malformed AWS config file; the store limits how often */
        fprintf(stderr, "s3lect: warning: %s\n", res.warning);
    sn->outcome = res.outcome;
    if (res.outcome == ST_OK) {
        sn->etag = res.etag;
        res.etag = NULL;
        sn->corrupt = rec_parse(res.body, res.body_len, &sn->r, sn->err, sizeof sn->err) != 0;
        if (!sn->corrupt) {
            /* A hostile or broken record must not make a dead leader look live for ever. */
            sn->clamped = sn->r.lease_ms > max_lease;
            sn->rec_lease_ms = sn->clamped ? max_lease : sn->r.lease_ms;
            sn->lease_ms = sn->rec_lease_ms > 0 ? sn->rec_lease_ms : lease_default;
            /* The age by the store's own clock where it tells it (S3: Date
             * against Last-Modified, whole seconds), so that neither this
             * machine's clock nor the leader's decides; else by ours. */
            sn->store_clock = res.server_now_ms > 0 && res.server_modified_ms > 0;
            sn->local_age_ms = u_wall_ms() - sn->r.last_updated_ms;
            sn->age_ms =
                sn->store_clock ? res.server_now_ms - res.server_modified_ms : sn->local_age_ms;
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
        /* The term cannot grow: no node takes the lock over (s3lect reset-term). */
        cJSON_AddBoolToObject(o, "termExhausted",
                              sn->corrupt ? sn->r.term_too_large : sn->r.term >= REC_TERM_MAX);
        cJSON_AddStringToObject(o, "etag", sn->etag ? sn->etag : "");
    }
    if (sn->outcome == ST_OK && !sn->corrupt) {
        char lu[40] = "0001-01-01T00:00:00Z";
        if (!sn->r.zero_time)
            u_format_rfc3339(sn->r.last_updated_ms, lu, sizeof lu);
        cJSON_AddStringToObject(o, "leaderID", sn->r.leader_id);
        cJSON_AddStringToObject(o, "leaderAddr", sn->r.leader_addr);
        cJSON_AddStringToObject(o, "lastUpdated", lu);
        char term[32]; /* exact: a double prints 2^53 - 1 as 9.00719925474099e+15 */
        snprintf(term, sizeof term, "%lld", (long long)sn->r.term);
        cJSON_AddRawToObject(o, "term", term);
        cJSON_AddNumberToObject(o, "leaseMs", (double)sn->rec_lease_ms);
        char raw[32]; /* exact, not a double's "1e+15" */
        snprintf(raw, sizeof raw, "%lld", (long long)sn->r.lease_ms);
        cJSON_AddRawToObject(o, "rawLeaseMs", raw);
        cJSON_AddBoolToObject(o, "leaseClamped", sn->clamped);
        cJSON_AddStringToObject(o, "incarnation", sn->r.incarnation);
        cJSON_AddBoolToObject(o, "released", rec_released(&sn->r));
        cJSON_AddNumberToObject(o, "ageMs", sn->r.zero_time ? 0 : (double)sn->age_ms);
        cJSON_AddStringToObject(o, "ageClock", sn->store_clock ? "store" : "local");
        cJSON_AddNumberToObject(o, "localAgeMs", sn->r.zero_time ? 0 : (double)sn->local_age_ms);
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
    if (sn->corrupt && sn->r.term_too_large) {
        fprintf(f,
                "%s: %s (etag %s); no node takes it over: a new term would not be exact. "
                "Stop any node that still renews it, then run 's3lect reset-term %s' to start "
                "terms again at 1\n",
                lock, sn->err, sn->etag, lock);
        return;
    }
    if (sn->corrupt) {
        fprintf(f, "%s: %s (etag %s); it is taken over once it expires\n", lock, sn->err, sn->etag);
        return;
    }
    char stuck[700] = ""; /* the term cannot grow: say so and name the repair */
    if (sn->r.term >= REC_TERM_MAX)
        snprintf(stuck, sizeof stuck,
                 "; the term is 2^53 - 1, the largest a record holds exactly: no other node "
                 "takes this lock over. Stop its leader if one runs, then run 's3lect "
                 "reset-term %s' to start terms again at 1",
                 lock);
    if (rec_released(&sn->r)) {
        fprintf(f, "%s: free (released; last term %lld)%s\n", lock, (long long)sn->r.term, stuck);
        return;
    }
    char age[64];
    fmt_age(sn->age_ms, age, sizeof age);
    fprintf(f, "%s: %s leader %s%s%s%s term=%lld updated %s (lease %.1fs; %s)%s\n", lock,
            sn->live ? "live" : "expired", sn->r.leader_id, sn->r.leader_addr[0] ? " (" : "",
            sn->r.leader_addr, sn->r.leader_addr[0] ? ")" : "", (long long)sn->r.term, age,
            sn->lease_ms / 1000.0,
            sn->store_clock ? "age by the store's clock"
                            : "age by this machine's clock against the leader's",
            stuck);
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
    int rc = st_open_config(c, s, key, err, sizeof err);
    s3lect_config_free(c);
    if (rc) {
        /* A bad location or setting (EINVAL) is the user's to fix: a usage error. */
        if (rc == S3LECT_EINVAL)
            cli_usage_error(cmd, "%s", err);
        else
            fprintf(stderr, "s3lect %s: %s\n", cmd, err);
        return rc == S3LECT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
    }
    return 0;
}

static void fmt_dur(int64_t ms, char *out, size_t n)
{
    if (ms % 1000 == 0)
        snprintf(out, n, "%llds", (long long)(ms / 1000));
    else
        snprintf(out, n, "%lldms", (long long)ms);
}

/* One line on stderr when a record's leaseMs was read as the bound. */
static void warn_clamped(const char *cmd, const snapshot *sn, int64_t max_lease)
{
    char b[32];
    fmt_dur(max_lease, b, sizeof b);
    fprintf(stderr,
            "s3lect %s: warning: the record's leaseMs (%lld) is above the largest lease trusted "
            "(--max-lease-timeout %s); it was clamped to %s (raise --max-lease-timeout if the "
            "cluster's lease really is that long)\n",
            cmd, (long long)sn->r.lease_ms, b, b);
}

int cli_status(int argc, char **argv)
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
    read_snapshot(s, key, lease_of(&o), max_lease_of(&o), &sn);
    if (sn.clamped)
        warn_clamped("status", &sn, max_lease_of(&o));
    if (sn.outcome != ST_OK && sn.outcome != ST_NOT_FOUND) {
        fprintf(stderr, "s3lect status: %s\n", sn.err);
        rc = CLI_EXIT_ERROR;
    } else {
        if (o.json)
            print_json(&sn, NULL, stdout);
        else {
            char *shown = st_lock_display(o.lock);
            print_human(shown ? shown : "", &sn, stdout);
            free(shown);
        }
        rc = sn.live ? CLI_EXIT_OK : CLI_EXIT_NO_LEADER;
    }
    snapshot_clear(&sn);
    st_destroy(s);
    free(key);
    return rc;
}

int cli_reset_term(int argc, char **argv)
{
    cli_opts o;
    if (parse_read_cmd("reset-term", argc, argv, &o, RESET_HELP))
        return CLI_EXIT_USAGE;
    st_store *s;
    char *key;
    int rc = open_store("reset-term", &o, &s, &key);
    if (rc)
        return rc;
    char *shown = st_lock_display(o.lock);
    const char *lock = shown ? shown : "the lock";
    rc = CLI_EXIT_ERROR;
    st_result res = {0}, again = {0};
    rec r = {0};
    char err[512], *body = NULL;
    st_get(s, key, 10000, &res);
    int64_t first_seen = u_mono_ms(); /* after the read's answer, as a follower counts */
    int64_t wait_ms = 0;              /* how long the record must stand unchanged */
    if (res.outcome == ST_NOT_FOUND) {
        printf("%s: no lock record: nothing to reset\n", lock);
        rc = CLI_EXIT_OK;
        goto out;
    }
    if (res.outcome != ST_OK) {
        fprintf(stderr, "s3lect reset-term: %s\n", res.message ? res.message : "store error");
        goto out;
    }
    int corrupt = rec_parse(res.body, res.body_len, &r, err, sizeof err) != 0;
    int stuck = corrupt ? r.term_too_large : r.term >= REC_TERM_MAX;
    if (!stuck) {
        if (corrupt)
            fprintf(stderr,
                    "s3lect reset-term: %s: its term is not what is wrong, nothing reset (a "
                    "corrupt record is taken over once it stands unchanged for a lease)\n",
                    err);
        else
            fprintf(stderr,
                    "s3lect reset-term: the term %lld can still grow: nothing reset (terms "
                    "start again only when they reach 2^53 - 1)\n",
                    (long long)r.term);
        goto out;
    }
    if (corrupt || !rec_released(&r)) {
        /* Someone may still renew it: wait as a node taking it over would,
         * watching for a change (a live leader renews well within a lease). */
        /* The holder's lease as status reads it: the record's leaseMs (at
         * most --max-lease-timeout), else --lease-timeout (default 15 s). */
        int64_t lease = lease_of(&o), maxl = max_lease_of(&o);
        if (!corrupt && r.lease_ms > 0)
            lease = r.lease_ms < maxl ? r.lease_ms : maxl;
        fprintf(stderr,
                "s3lect reset-term: the record names a holder (%.200s, term %s): waiting %.1fs "
                "for it to stand unchanged for its lease\n",
                corrupt ? "unreadable" : r.leader_id, corrupt ? "2^53 or more" : "2^53 - 1",
                lease / 1000.0);
        int64_t until = first_seen + lease;
        wait_ms = lease;
        for (int guard = 0; guard < 100000 && u_mono_ms() < until; guard++) {
            int64_t left = until - u_mono_ms(), step = left < 500 ? left : 500;
            struct timespec ts = {0, (long)(step > 0 ? step : 0) * 1000000L};
            nanosleep(&ts, NULL);
            st_result_clear(&again);
            st_get(s, key, 10000, &again);
            if (again.outcome != ST_OK || !u_streq(again.etag, res.etag)) {
                fprintf(stderr,
                        "s3lect reset-term: the record changed meanwhile: a live leader holds "
                        "the lock; stop it (it releases the lock), then run 's3lect "
                        "reset-term %s' again; nothing written\n",
                        lock);
                goto out;
            }
        }
    }
    if (u_mono_ms() < first_seen + wait_ms) { /* the loop's guard ran out first */
        fprintf(stderr, "s3lect reset-term: could not wait out the lease; nothing written\n");
        goto out;
    }
    rec z = {.leader_id = "", .leader_addr = "", .zero_time = 1, .incarnation = "", .peer_key = ""};
    body = rec_encode(&z);
    if (!body) {
        fprintf(stderr, "s3lect reset-term: out of memory\n");
        goto out;
    }
    st_result_clear(&again);
    st_put(s, key, body, strlen(body), res.etag, 10000, &again);
    if (again.outcome == ST_OK) {
        printf("%s: term reset to 0 (released); the next leader takes term 1: whatever fences "
               "with the term must accept the restart\n",
               lock);
        rc = CLI_EXIT_OK;
    } else if (again.outcome == ST_PRECONDITION || again.outcome == ST_NOT_FOUND) {
        fprintf(stderr,
                "s3lect reset-term: the record changed meanwhile; nothing written; run "
                "'s3lect reset-term %s' again\n",
                lock);
    } else {
        fprintf(stderr,
                "s3lect reset-term: %s (the reset may or may not have landed: see "
                "'s3lect status')\n",
                again.message ? again.message : "store error");
    }
out:
    free(body);
    rec_clear(&r);
    st_result_clear(&res);
    st_result_clear(&again);
    free(shown);
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

int cli_watch(int argc, char **argv)
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
    int64_t warned_lease = -1; /* the clamped leaseMs last warned about */
    while (!watch_stop) {
        snapshot sn;
        read_snapshot(s, key, lease_of(&o), max_lease_of(&o), &sn);
        if (sn.clamped && sn.r.lease_ms != warned_lease) {
            warn_clamped("watch", &sn, max_lease_of(&o));
            warned_lease = sn.r.lease_ms;
        }
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
