/* SPDX-License-Identifier: Apache-2.0 */
/* help.c - `s3lect --help` and `help run`: the texts, with the parts made
 * from the scheme table (every store named, every lock URL form). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "options.h"
#include "store.h"

/* MAIN_HELP is printed in two parts around the generated ones (main_help):
 * the first paragraph names every store of the scheme table, and the lock
 * URL list is the table's usages, so neither can miss a store. */
static const char MAIN_HELP_HEAD[] = "usage: s3lect <command> [options]\n"
                                     "\n";
static const char MAIN_HELP[] =
    "commands:\n"
    "  run --lock URL [options] -- CMD [ARGS...]\n"
    "                      run CMD only while this process holds leadership\n"
    "  status URL [--json] print who holds the lock (exit 0: live leader, 3: none)\n"
    "  watch URL           print a line whenever the leader changes\n"
    "  check-store URL     check that the store enforces conditional writes\n"
    "  init-store URL      create the table a DynamoDB or PostgreSQL lock needs\n"
    "  reset-term URL      start the lock's terms again when they cannot grow (2^53 - 1)\n"
    "  whoami URL          which source supplies the credentials, and until when\n"
    "  stores [--json]     list the stores this s3lect knows, their URL forms and credentials\n"
    "  fence get|put|cas|rm URL [FILE]\n"
    "                      fenced writes: refused once a newer leadership term wrote the object\n"
    "  transfer URL [--to ID]\n"
    "                      hand leadership to a live follower (default: the best) and wait\n"
    "  completion SHELL    print the bash, zsh or fish completion script\n"
    "  help [command]      show help for a command\n"
    "\n";
static const char MAIN_HELP_TAIL[] =
    "durations: a number with a unit: 500ms, 2s, 1.5m, 1h, 1m30s (0 needs none)\n"
    "\n"
    "  -h, --help          show this help\n"
    "  -V, --version       print the version\n"
    "\n"
    "exit codes: 0 ok, 1 error, 2 usage error, 3 no live leader (status),\n"
    "            75 fenced (fence), 127 command could not be run (run); run exits\n"
    "            with CMD's status when CMD ends by itself.\n";

/* Printed between RUN_HELP and the lock options. */
static const char RUN_COMMON_HELP[] =
    "\nmore options:\n"
    "  --max-lease-timeout D   largest leaseMs trusted in a record (default 4 x lease timeout)\n"
    "  --log-format text|json  stderr lines as text (default) or one JSON object each (time,\n"
    "                          level, msg, and its key=value words as fields)\n"
    "  --log-time              put an RFC 3339 UTC time before each text line\n"
    "  --print-config          print the effective timings (ms) and runtime sizes, one\n"
    "                          NAME=VALUE a line, as the library derived them; exit 0\n"
    "  --metrics-listen HOST:PORT  serve Prometheus metrics at http://HOST:PORT/metrics\n"
    "                          (plain HTTP: bind it to loopback or a private interface;\n"
    "                          :PORT is every address)\n"
    "environment: every option can be set as S3LECT_<NAME> (--lease-timeout 20s:\n"
    "S3LECT_LEASE_TIMEOUT=20s; flags take 1 or 0: S3LECT_PEER=1; --id and --addr also as\n"
    "S3LECT_SERVER_ID and S3LECT_SERVER_ADDR); a command-line option wins over its variable.\n"
    "The library's options without a flag come from the environment alone: S3LECT_PEER_TIMEOUT,\n"
    "S3LECT_REQUEST_TIMEOUT, S3LECT_MAX_CONNECTIONS, S3LECT_WORKER_THREADS,\n"
    "S3LECT_CALLBACK_THREADS. An empty variable counts as unset.\n"
    "durations are a number with a unit (500ms, 2s, 1.5m, 1h, 1m30s; 0 needs none; at most\n"
    "24h). --lease-timeout L alone sets --renew-deadline to 2/3 L and --renew-interval to\n"
    "min(L/3, deadline/2); --frequent-interval alone raises --infrequent-interval to it, and\n"
    "--infrequent-interval alone lowers --frequent-interval to it. Given values are kept.\n"
    "\n" LOCK_HELP;

static const char RUN_HELP_HEAD[] = "usage: s3lect run --lock URL [options] -- CMD [ARGS...]\n"
                                    "\n";
static const char RUN_HELP[] =
    "Competes for leadership; while leader, runs CMD with S3LECT_TERM (the fencing\n"
    "token) and S3LECT_LEADER_ID in its environment. On loss of leadership CMD and\n"
    "every process it started (its group, setsid() children, double-forked daemons)\n"
    "get SIGTERM, then SIGKILL after --kill-timeout and at the latest at the lease's\n"
    "hard deadline, so all are dead before another node can lead; CMD is started\n"
    "again when leadership returns. SIGTERM/SIGINT to s3lect stops the tree the same\n"
    "way (a second one SIGKILLs it), releases the lock and exits 0; SIGHUP, SIGUSR1\n"
    "and SIGUSR2 are forwarded to CMD. If CMD exits by itself, s3lect stops what it\n"
    "left running, releases the lock and exits with CMD's status. Transitions are\n"
    "printed to stderr as lines starting with 's3lect:'.\n"
    "\n"
    "options (durations: 500ms, 2s, 1m):\n"
    "  --id ID                 this node's id (default: hostname-pid)\n"
    "  --addr HOST:PORT        advertised address recorded in the lock\n"
    "  --lease-timeout D       lease timeout L (default 15s)\n"
    "  --renew-interval D      leader renew period (default 5s)\n"
    "  --renew-deadline D      leader steps down after D without renewal (default 10s)\n"
    "  --frequent-interval D   follower poll period in transitions (default 5s)\n"
    "  --infrequent-interval D follower poll period when stable (default 30s)\n"
    "  --max-clock-skew D      wall-clock takeover rule's skew bound (default 0: off)\n"
    "  --new-lock-wait D       a node that never saw the lock waits D before creating a\n"
    "                          missing one: it may have been deleted under a leader still\n"
    "                          running (default: the lease timeout; 0: at once, only where\n"
    "                          no leader of this lock can be running)\n"
    "  --priority N            prefer this node (0..1000000, default 0): a follower of higher\n"
    "                          priority that has followed for a lease asks the leader for the\n"
    "                          lock, at most once a lease (docs/operations.md)\n"
    "  --max-hold D            hand leadership to a live follower after holding it for D\n"
    "                          (default: never; rotation)\n"
    "  --kill-timeout D        SIGTERM→SIGKILL grace for CMD's tree; default and largest\n"
    "                          allowed: lease-timeout - renew-deadline - margin, where\n"
    "                          margin = 2 x lease-timeout/1000 + 250ms (4.72s by default)\n"
    "  --startup-timeout D     exit 1 if the store was never reached and only permanent\n"
    "                          errors (no such bucket/table/zone, access denied, bad\n"
    "                          credentials) were seen for D (default 60s; 0: retry for ever)\n"
    "\n"
    "peer mode (on by default: followers long-poll the leader over HTTPS instead of reading\n"
    "the store; the leader serves a TLS port that reveals only what the lock record says):\n"
    "  --no-peer               turn peer mode off (S3LECT_PEER=0): followers read the store\n"
    "                          every infrequent interval, and no port is opened\n"
    "  --peer                  peer mode on (the default); zero-config: the node makes a\n"
    "                          key and self-signed certificate at start, writes the key's\n"
    "                          SHA-256 in the lock record, and followers pin it (docs/peer.md)\n"
    "                          --addr defaults to this host's address on the route to the\n"
    "                          store's endpoint (127.0.0.1 for file locks) and the port of\n"
    "                          --peer-listen, else an ephemeral one. A follower that cannot\n"
    "                          reach the leader's port reads the store every frequent\n"
    "                          interval instead, and says so once\n"
    "  --peer-listen HOST:PORT listen address of the leadership endpoint (default: --addr;\n"
    "                          :PORT is every address)\n"
    "  --peer-cert FILE        server certificate chain (PEM); with --peer-key and --peer-ca\n"
    "                          instead of zero-config\n"
    "  --peer-key FILE         server private key (PEM)\n"
    "  --peer-ca FILE          CA bundle that verifies the leader (and client certs under mTLS)\n"
    "  --peer-client-cert FILE client certificate + key (PEM); turns on mTLS\n"
    "\n"
    "Why the tree is dead before another node leads, and what escapes: docs/cli.md.\n";

/* Prints text word by word, wrapped at 78 columns, each line after the
 * first indented by indent spaces. */
static void print_wrapped(const char *text, int indent, int col)
{
    int first = 1;
    for (const char *p = text; *p;) {
        while (*p == ' ')
            p++;
        const char *w = p;
        while (*p && *p != ' ')
            p++;
        int len = (int)(p - w);
        if (!len)
            break;
        if (!first && col + 1 + len > 78) {
            printf("\n%*s", indent, "");
            col = indent;
        } else if (!first) {
            putchar(' ');
            col++;
        }
        printf("%.*s", len, w);
        col += len;
        first = 0;
    }
    putchar('\n');
}

/* "Leader election on an S3 object (...), a DynamoDB item, ... or a Redis
 * key, without a coordinator." from the scheme table. */
static void print_stores_sentence(void)
{
    char buf[2048];
    size_t n = (size_t)snprintf(buf, sizeof buf, "Leader election on");
    size_t nouns = 0, k = 0;
    for (size_t i = 0; i < st_scheme_count(); i++)
        nouns += st_scheme_at(i)->noun != NULL;
    for (size_t i = 0; i < st_scheme_count() && n < sizeof buf; i++) {
        const char *noun = st_scheme_at(i)->noun;
        if (!noun)
            continue;
        k++;
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s %s",
                              k == 1       ? ""
                              : k == nouns ? " or"
                                           : ",",
                              noun);
    }
    if (n < sizeof buf)
        snprintf(buf + n, sizeof buf - n, ", without a coordinator.");
    print_wrapped(buf, 0, 0);
}

static void print_lock_urls(void)
{
    fputs("lock URLs (docs/stores.md):\n", stdout);
    for (size_t i = 0; i < st_scheme_count(); i++)
        if (st_scheme_at(i)->usage) {
            printf("  ");
            print_wrapped(st_scheme_at(i)->usage, 4, 2);
        }
}

void cli_print_main_help(void)
{
    fputs(MAIN_HELP_HEAD, stdout);
    print_stores_sentence();
    fputs("\n", stdout);
    fputs(MAIN_HELP, stdout);
    print_lock_urls();
    fputs(MAIN_HELP_TAIL, stdout);
}

/* run's help: its usage, a first paragraph naming every store of the
 * scheme table, the rest. */
void cli_print_run_help(void)
{
    fputs(RUN_HELP_HEAD, stdout);
    print_stores_sentence();
    fputs("(lock URLs: s3lect --help, docs/stores.md)\n\n", stdout);
    printf("%s%s", RUN_HELP, RUN_COMMON_HELP);
}
