/* SPDX-License-Identifier: Apache-2.0 */
/* transfer.c - `s3lect transfer`: asks the leader of a lock to hand it to a
 * named live follower (or the best one), from any host that can reach the
 * store, and waits for the outcome (docs/algorithm.md "Transfer").
 *
 * The request is a conditional write of the leader's own record with the
 * request added (xferTo, xferN); the leader takes it up at its next renewal
 * (its write is refused, it reads and finds its own record), the target
 * confirms, the leader's command is stopped, and the target leads. Nothing
 * here can make two leaders: the write only changes a record its holder
 * still owns, and every later step is the holder's and the target's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "crypto.h"
#include "duration.h"
#include "options.h"
#include "peer.h"
#include "record.h"
#include "store.h"
#include "util.h"

#define CMD "transfer"

/* Exit codes (the help and docs/cli.md). */
enum {
    TX_NO_LEADER = 3, /* nothing to hand over: no lock, released, or a stale leader */
    TX_REFUSED = 4,   /* the leader refused (the reason is printed) */
    TX_TIMEOUT = 5    /* no outcome in time */
};

static const char HELP[] =
    "usage: s3lect transfer [options] --lock URL [--to ID]\n"
    "\n"
    "Asks the leader of the lock to hand it over to the node --to ID (its\n"
    "--id), or without --to to the best live follower (the first to confirm,\n"
    "one of higher --priority first), and waits until that node leads. Works\n"
    "from any host that can reach the store. The leader stops its command\n"
    "(within its kill timeout) before the target starts; a target that is not\n"
    "a live follower of the lock is refused and the leader keeps leading.\n"
    "\n"
    "options:\n"
    "  --lock URL              the lock (or $S3LECT_LOCK)\n"
    "  --to ID                 the node to hand the lock to (default: the best)\n"
    "  --timeout D             how long to wait for the outcome (default 90s)\n"
    "  --endpoint URL, --region REGION, --ca-file FILE, --path-style, --profile\n"
    "\n"
    "exit codes: 0 handed over (the new leader and term are printed), 1 store\n"
    "or other error, 2 usage error, 3 no live leader to hand over from, 4\n"
    "refused by the leader (why is printed), 5 no outcome within --timeout (a\n"
    "leader of an s3lect without transfers, or an application that does not\n"
    "commit; nothing changed but the request in the record).\n";

typedef struct tx_args {
    cli_opts o;
    const char *to;
    const char *timeout;
} tx_args;

static int parse(int argc, char **argv, tx_args *a)
{
    memset(a, 0, sizeof *a);
    cli_opts_init(&a->o);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            fputs(HELP, stdout);
            return 1;
        }
        const char **own = !strcmp(s, "--to") || !strncmp(s, "--to=", 5)              ? &a->to
                           : !strcmp(s, "--timeout") || !strncmp(s, "--timeout=", 10) ? &a->timeout
                                                                                      : NULL;
        if (own) {
            const char *eq = strchr(s, '=');
            if (!eq && i + 1 >= argc) {
                cli_usage_error(CMD, "%s needs a value", s);
                return -1;
            }
            *own = eq ? eq + 1 : argv[++i];
            continue;
        }
        int r = s[0] == '-' && s[1] ? cli_common_opt(CMD, argc, argv, &i, &a->o) : 0;
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        if (s[0] == '-' && s[1]) {
            static const char *const extra[] = {"--to", "--timeout", NULL};
            cli_unknown_option(CMD, s, extra);
            return -1;
        }
        if (a->o.lock) {
            cli_usage_error(CMD, "too many arguments ('%.100s')", s);
            return -1;
        }
        a->o.lock = s;
    }
    if (cli_env_opts(CMD, &a->o) != 0)
        return -1;
    if (!a->o.lock) {
        cli_usage_error(CMD, "no lock: give --lock URL (or S3LECT_LOCK)");
        return -1;
    }
    if (a->to && (!a->to[0] || strlen(a->to) > 256 || strcmp(a->to, "*") == 0)) {
        cli_usage_error(CMD, "--to takes a node id (1 to 256 characters; leave it out for the "
                             "best live follower)");
        return -1;
    }
    for (const char *p = a->to; p && *p; p++)
        if ((unsigned char)*p < 0x20) {
            cli_usage_error(CMD, "--to may not hold control characters");
            return -1;
        }
    return 0;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Writes the request into the current record. 0 done (the record's holder
 * and term in *held), -2 when the target leads already, or an exit code
 * after saying why. */
static int ask(st_store *s, const char *key, const char *lock, const char *to, const char *n,
               rec *held)
{
    for (int tries = 0; tries < 5; tries++) {
        st_result res = {0};
        st_get(s, key, 10000, &res);
        if (res.outcome == ST_NOT_FOUND) {
            st_result_clear(&res);
            printf("%s: no lock record: nothing to hand over\n", lock);
            return TX_NO_LEADER;
        }
        if (res.outcome != ST_OK) {
            fprintf(stderr, "s3lect %s: %s\n", CMD, res.message ? res.message : "store error");
            st_result_clear(&res);
            return CLI_EXIT_ERROR;
        }
        char err[300];
        rec r;
        if (rec_parse(res.body, res.body_len, &r, err, sizeof err) != 0) {
            fprintf(stderr, "s3lect %s: %s: nothing to hand over\n", CMD, err);
            st_result_clear(&res);
            return TX_NO_LEADER;
        }
        /* -1: go on and ask; -2: the target leads already; else an exit code. */
        int code = -1;
        if (rec_released(&r)) {
            printf("%s: released (no leader): nothing to hand over\n", lock);
            code = TX_NO_LEADER;
        } else if (!r.incarnation[0]) {
            fprintf(stderr,
                    "s3lect %s: the leader '%s' runs Go s3lect or an s3lect without transfers "
                    "(its record has no incarnation): it cannot hand over; stop it instead\n",
                    CMD, r.leader_id);
            code = TX_REFUSED;
        } else if (to && strcmp(to, r.leader_id) == 0) {
            printf("%s: '%s' leads already (term %lld)\n", lock, to, (long long)r.term);
            code = -2;
        } else if (r.xfer_n[0] && !r.xfer_err[0]) {
            fprintf(stderr,
                    "s3lect %s: a transfer to '%s' is already under way; wait for it, then "
                    "ask again\n",
                    CMD, r.xfer_to);
            code = TX_REFUSED;
        }
        if (code != -1) {
            rec_clear(&r);
            st_result_clear(&res);
            return code;
        }
        /* The record as it is, with the request: its holder keeps counting
         * its lease from its own write, and adopts this one. */
        char *keep_to = r.xfer_to, *keep_n = r.xfer_n, *keep_err = r.xfer_err,
             *keep_why = r.xfer_why;
        char *keep_aid = r.xfer_ack_id, *keep_ainc = r.xfer_ack_inc, *keep_ap = r.xfer_ack_proc;
        r.xfer_to = (char *)(to ? to : "*");
        r.xfer_n = (char *)n;
        r.xfer_err = r.xfer_why = r.xfer_ack_id = r.xfer_ack_inc = r.xfer_ack_proc = (char *)"";
        r.xfer_ack_prio = 0;
        char *body = rec_encode(&r);
        r.xfer_to = keep_to;
        r.xfer_n = keep_n;
        r.xfer_err = keep_err;
        r.xfer_why = keep_why;
        r.xfer_ack_id = keep_aid;
        r.xfer_ack_inc = keep_ainc;
        r.xfer_ack_proc = keep_ap;
        st_result w = {0};
        if (body)
            st_put(s, key, body, strlen(body), res.etag, 10000, &w);
        free(body);
        st_result_clear(&res);
        if (body && w.outcome == ST_OK) {
            st_result_clear(&w);
            *held = r;
            return 0;
        }
        rec_clear(&r);
        if (w.outcome != ST_PRECONDITION && w.outcome != ST_NOT_FOUND) {
            fprintf(stderr, "s3lect %s: %s\n", CMD, w.message ? w.message : "out of memory");
            st_result_clear(&w);
            return CLI_EXIT_ERROR;
        }
        st_result_clear(&w); /* the leader renewed meanwhile: read again */
    }
    fprintf(stderr, "s3lect %s: the record kept changing; nothing asked\n", CMD);
    return CLI_EXIT_ERROR;
}

/* Tells a peer-mode leader that its record holds a request, so that it
 * reads it now rather than at its next renewal (up to renew_interval
 * later). Authenticated as a follower's check is: the leader's key pinned
 * from the record, the record's succKey as proof (only a reader of the
 * store has it). Best effort: a leader without an endpoint, or one that
 * cannot be reached, takes the request up at its renewal. */
static void poke(const s3lect_config *cfg, const rec *held)
{
    if (!held->leader_addr[0] || !held->succ_key[0])
        return;
    peer_client *pc = NULL;
    char err[300], path[256] = "";
    if (peer_client_new(cfg, &pc, err, sizeof err) != 0)
        return;
    s3lect_config_get_str(cfg, S3LECT_OPT_PEER_HEALTH_PATH, path, sizeof path);
    peer_client_set_pin(pc, held->peer_key);
    peer_client_set_incarnation(pc, held->incarnation);
    peer_client_set_proof(pc, held->succ_key);
    peer_client_set_xfer(pc, 1);
    st_result res = {0};
    peer_client_check(pc, held->leader_addr, path, "", 0, 3000, held->leader_id, NULL, &res);
    st_result_clear(&res);
    peer_client_free(pc);
}

/* Waits for the outcome of request n made to the holder in *held. */
static int await(st_store *s, const char *key, const char *lock, const char *to, const char *n,
                 const rec *held, int64_t timeout)
{
    int64_t t0 = u_mono_ms(), deadline = t0 + timeout;
    int said_confirmed = 0, said_released = 0;
    while (u_mono_ms() < deadline) {
        sleep_ms(200);
        st_result res = {0};
        st_get(s, key, 10000, &res);
        rec r;
        int ok = res.outcome == ST_OK && rec_parse(res.body, res.body_len, &r, NULL, 0) == 0;
        st_result_clear(&res);
        if (!ok)
            continue; /* a failed read: try again until the deadline */
        double took = (u_mono_ms() - t0) / 1000.0;
        int code = -1;
        if (!rec_released(&r) && r.term > held->term && strcmp(r.leader_id, held->leader_id)) {
            if (!to || strcmp(r.leader_id, to) == 0) {
                printf("%s: '%s' leads now (term %lld), %.2fs after the request\n", lock,
                       r.leader_id, (long long)r.term, took);
                code = CLI_EXIT_OK;
            } else {
                fprintf(stderr,
                        "s3lect %s: '%s' leads now (term %lld), not '%s' (it did not take the "
                        "lock in time)\n",
                        CMD, r.leader_id, (long long)r.term, to);
                code = TX_REFUSED;
            }
        } else if (!rec_released(&r) && r.term != held->term) {
            fprintf(stderr,
                    "s3lect %s: the leadership changed otherwise ('%s' leads, term %lld): "
                    "request void\n",
                    CMD, r.leader_id, (long long)r.term);
            code = TX_REFUSED;
        } else if (!strcmp(r.xfer_n, n) && r.xfer_err[0]) {
            fprintf(stderr, "s3lect %s: refused by '%s': %s\n", CMD, held->leader_id, r.xfer_err);
            code = TX_REFUSED;
        } else if (!rec_released(&r) && r.xfer_n[0] && strcmp(r.xfer_n, n)) {
            fprintf(stderr, "s3lect %s: another request replaced this one (to '%s')\n", CMD,
                    r.xfer_to);
            code = TX_REFUSED;
        } else if (!said_confirmed && !strcmp(r.xfer_n, n) && r.xfer_ack_id[0]) {
            printf("%s: '%s' confirmed; '%s' stops its command and hands over\n", lock,
                   r.xfer_ack_id, held->leader_id);
            said_confirmed = 1;
        } else if (!said_released && rec_released(&r) && r.to_id[0]) {
            printf("%s: released to '%s'\n", lock, r.to_id);
            said_released = 1;
        }
        rec_clear(&r);
        if (code >= 0)
            return code;
    }
    fprintf(stderr,
            "s3lect %s: no outcome within %.0fs: '%s' did not act on the request (an s3lect "
            "without transfers, or an application that does not commit it: "
            "s3lect_transfer_commit); it still leads\n",
            CMD, timeout / 1000.0, held->leader_id);
    return TX_TIMEOUT;
}

int cli_transfer(int argc, char **argv)
{
    tx_args a;
    int p = parse(argc, argv, &a);
    if (p)
        return p > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    int64_t timeout = 90000;
    if (a.timeout && (cfg_parse_duration(a.timeout, &timeout) != 0 || timeout <= 0)) {
        cli_usage_error(CMD, "--timeout takes a duration (90s, 2m), not '%.50s'", a.timeout);
        return CLI_EXIT_USAGE;
    }
    if (!a.o.id)
        a.o.id = "s3lect-transfer";
    s3lect_config *c = cli_config(CMD, &a.o);
    if (!c)
        return CLI_EXIT_USAGE;
    st_store *s = NULL;
    char *key = NULL, err[512];
    int rc = st_open_config(c, &s, &key, err, sizeof err);
    if (rc) {
        s3lect_config_free(c);
        if (rc == S3LECT_EINVAL) {
            cli_usage_error(CMD, "%s", err);
            return CLI_EXIT_USAGE;
        }
        fprintf(stderr, "s3lect %s: %s\n", CMD, err);
        return CLI_EXIT_ERROR;
    }
    char *shown = st_lock_display(a.o.lock);
    const char *lock = shown ? shown : "the lock";
    char n[33];
    rec held;
    memset(&held, 0, sizeof held);
    if (cr_random_token(n) != 0) {
        fprintf(stderr, "s3lect %s: no random bytes available\n", CMD);
        rc = CLI_EXIT_ERROR;
    } else {
        rc = ask(s, key, lock, a.to, n, &held);
        if (rc == 0) {
            printf("%s: asked '%s' (term %lld) to hand the lock to %s%s%s\n", lock, held.leader_id,
                   (long long)held.term, a.to ? "'" : "the best live follower", a.to ? a.to : "",
                   a.to ? "'" : "");
            fflush(stdout);
            poke(c, &held);
            rc = await(s, key, lock, a.to, n, &held, timeout);
        } else if (rc == -2) {
            rc = CLI_EXIT_OK; /* the target leads already */
        }
    }
    rec_clear(&held);
    free(shown);
    st_destroy(s);
    free(key);
    s3lect_config_free(c);
    return rc;
}
