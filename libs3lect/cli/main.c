/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - the s3lect command: run, status, watch, check-store, reset-term. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "record.h"
#include "store.h"
#include "util.h"

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
    "  whoami URL          which source supplies the AWS or Google credentials, and until when\n"
    "  stores [--json]     list the stores this s3lect knows, their URL forms and credentials\n"
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
    "            127 command could not be run (run); run exits with CMD's status\n"
    "            when CMD ends by itself.\n";

#define LOCK_HELP                                                                                  \
    "lock options:\n"                                                                              \
    "  --lock URL              lock location (or give it as the first argument)\n"                 \
    "  --endpoint URL          S3 endpoint (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, "      \
    "AWS)\n"                                                                                       \
    "  --region REGION         S3 region: letters, digits, '-', '_' (default: AWS_REGION,\n"       \
    "                          AWS_DEFAULT_REGION, us-east-1)\n"                                   \
    "                          (az://: the account's blob endpoint, e.g. Azurite's\n"              \
    "                          http://127.0.0.1:10000/ACCOUNT)\n"                                  \
    "  --path-style            path-style S3 addressing (automatic for IPs and localhost)\n"       \
    "  --ca-file FILE          PEM CA bundle for HTTPS\n"                                          \
    "lock URLs: s3://bucket/key (bucket: 3-63 of a-z 0-9 . -, legacy ones also A-Z _; key:\n"      \
    "at most 1024 bytes of UTF-8, no empty, '.' or '..' segments), file:///dir/key or a\n"         \
    "plain path (no '?' or '#' in s3:// and file:// URLs), dynamodb://TABLE/KEY,\n"                \
    "postgres://HOST/DB?key=NAME, route53://ZONE_ID/NAME, gs://BUCKET/OBJECT (Google\n"            \
    "Cloud Storage: --endpoint, else STORAGE_EMULATOR_HOST, else Google's),\n"                     \
    "az://ACCOUNT/CONTAINER/BLOB or https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB,\n"       \
    "etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/KEY (etcd's v3 JSON API; endpoints\n"       \
    "tried in turn; password also from S3LECT_ETCD_USER/S3LECT_ETCD_PASSWORD), etcds:// for\n"     \
    "TLS (--ca-file; ?cert=FILE&cert_key=FILE for a client certificate),\n"                        \
    "redis://[[USER]:PASSWORD@]HOST[:PORT]/KEY[?db=N] (a single Redis primary; rediss://\n"        \
    "for TLS with --ca-file; the password may come from S3LECT_REDIS_PASSWORD instead)\n"          \
    "(docs/stores.md); the scheme may be upper case. Options are given once each;\n"               \
    "--opt=VALUE for a value that starts with '-'.\n"                                              \
    "credentials: the AWS SDKs' chain (environment, web identity, ~/.aws profiles with\n"          \
    "roles, SSO and credential_process, container and EC2 instance metadata; docs/s3.md),\n"       \
    "never flags; gs:// locks: GOOGLE_APPLICATION_CREDENTIALS, gcloud's application-default\n"     \
    "credentials, the metadata server (docs/stores.md); 's3lect whoami URL' shows which\n"         \
    "source is used. az:// locks: Shared Key or SAS from AZURE_STORAGE_CONNECTION_STRING,\n"       \
    "AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN.\n"

static const char COMMON_HELP[] = LOCK_HELP;

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

/* Copies msg into out (of size n) so that it prints as one plain line:
 * control characters (C0, DEL, C1), line and paragraph separators, bidi
 * controls and bytes that are not UTF-8 are written as \xNN or \uNNNN.
 * Returns 1 if it had to cut. */
static int one_line(const char *msg, char *out, size_t n)
{
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)msg;
    while (*p) {
        if (o + 8 >= n) {
            out[o] = '\0';
            return 1;
        }
        unsigned c = p[0], cp = 0;
        size_t len = c < 0x80             ? 1
                     : (c & 0xe0) == 0xc0 ? 2
                     : (c & 0xf0) == 0xe0 ? 3
                     : (c & 0xf8) == 0xf0 ? 4
                                          : 0;
        for (size_t i = 1; i < len; i++)
            if ((p[i] & 0xc0) != 0x80)
                len = 0;
        if (len)
            cp = len == 1 ? c : c & (0x7fu >> len);
        for (size_t i = 1; i < len; i++)
            cp = (cp << 6) | (p[i] & 0x3f);
        if (!len) {
            o += (size_t)snprintf(out + o, n - o, "\\x%02x", c);
            p++;
        } else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0x2028 && cp <= 0x202e) ||
                   (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f) {
            o += (size_t)snprintf(out + o, n - o, cp < 0x80 ? "\\x%02x" : "\\u%04x", cp);
            p += len;
        } else {
            memcpy(out + o, p, len);
            o += len;
            p += len;
        }
    }
    out[o] = '\0';
    return 0;
}

/* The environment variable an option is being read from (cli_env_opts). */
static const char *g_env_source;

void cli_usage_error(const char *cmd, const char *fmt, ...)
{
    /* One line, whatever the user typed; very long values are cut. */
    char msg[1024], out[1200];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int cut = one_line(msg, out, sizeof out) || n >= (int)sizeof msg;
    fprintf(stderr, "s3lect%s%s: %s%s%s%s%s (see 's3lect %s%s--help')\n", cmd ? " " : "",
            cmd ? cmd : "", out, cut ? "..." : "", g_env_source ? " (from the environment: " : "",
            g_env_source ? g_env_source : "", g_env_source ? ")" : "", cmd ? cmd : "",
            cmd ? " " : "");
}

/* Which subcommands take an option. */
enum {
    C_RUN = 1,
    C_STATUS = 2,
    C_WATCH = 4,
    C_CHECK = 8,
    C_RESET = 16,
    C_READ = C_STATUS | C_WATCH
};

static unsigned cmd_bit(const char *cmd)
{
    if (strcmp(cmd, "run") == 0)
        return C_RUN;
    if (strcmp(cmd, "status") == 0)
        return C_STATUS;
    if (strcmp(cmd, "watch") == 0)
        return C_WATCH;
    if (strcmp(cmd, "reset-term") == 0)
        return C_RESET;
    return C_CHECK;
}

static const char *cmd_names(unsigned mask)
{
    switch (mask) {
    case C_RUN:
        return "run";
    case C_WATCH:
        return "watch";
    case C_READ:
        return "status and watch";
    case C_RUN | C_READ:
        return "run, status and watch";
    case C_RUN | C_READ | C_RESET:
        return "run, status, watch and reset-term";
    default:
        return "run, status, watch, check-store and reset-term";
    }
}

/* Valid UTF-8 without control characters (C0, DEL, C1)? */
static int clean_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        size_t n = c < 0x80             ? 1
                   : (c & 0xe0) == 0xc0 ? 2
                   : (c & 0xf0) == 0xe0 ? 3
                   : (c & 0xf8) == 0xf0 ? 4
                                        : 0;
        if (!n || c < 0x20 || c == 0x7f || (c == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return 0;
        unsigned cp = n == 1 ? c : c & (0x7f >> n);
        for (size_t i = 1; i < n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        static const unsigned min[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        p += n;
    }
    return 1;
}

static int has_control(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 1;
    return 0;
}

/* HOST:PORT, with [v6] allowed; port 1..65535. any_host: ":PORT" (every
 * address) is allowed too, for the addresses s3lect listens on. */
static int host_port(const char *v, int any_host)
{
    const char *colon = strrchr(v, ':');
    if (!colon || (colon == v && !any_host) || strpbrk(v, " \t/?#@"))
        return 0;
    if (colon != v && (v[0] == '[' ? colon[-1] != ']' || colon - v < 3
                                   : memchr(v, ':', (size_t)(colon - v)) != NULL))
        return 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    return colon[1] >= '0' && colon[1] <= '9' && !*end && port >= 1 && port <= 65535;
}

/* Checks one string option's value; prints the error and returns -1 if bad. */
static int check_str(const char *cmd, const char *name, const char *v)
{
    if (!*v) {
        cli_usage_error(cmd, "%s is empty; give a value or leave the option out", name);
        return -1;
    }
    if (has_control(v)) {
        cli_usage_error(cmd, "%s has a control character; remove it", name);
        return -1;
    }
    if (strcmp(name, "--region") == 0) {
        /* The library's rule (aws_region_valid), said with the flag's name. */
        size_t n = strlen(v);
        if (n > 64 ||
            strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != n) {
            cli_usage_error(cmd,
                            "--region '%.100s' is not a region name; use letters, digits, '-' and "
                            "'_' (at most 64), e.g. us-east-1",
                            v);
            return -1;
        }
    } else if (strcmp(name, "--id") == 0) {
        if (!clean_utf8(v)) {
            cli_usage_error(cmd, "--id is not valid UTF-8; use a plain name, e.g. web-1");
            return -1;
        }
    } else if (strcmp(name, "--addr") == 0 || strcmp(name, "--peer-listen") == 0 ||
               strcmp(name, "--metrics-listen") == 0) {
        int listen = strcmp(name, "--addr") != 0;
        if (!host_port(v, listen) || !clean_utf8(v)) {
            cli_usage_error(cmd,
                            "%s '%.100s' is not HOST:PORT; e.g. 10.0.0.5:8443 or [::1]:8443%s "
                            "(port 1-65535)",
                            name, v, listen ? ", or :8443 for every address" : "");
            return -1;
        }
    } else if (strcmp(name, "--endpoint") == 0) {
        /* The library checks the rest when it opens an S3 store; this much
         * is checked even when the lock is a file. */
        if (strncasecmp(v, "http://", 7) != 0 && strncasecmp(v, "https://", 8) != 0) {
            cli_usage_error(cmd,
                            "--endpoint '%.100s' must start with http:// or https:// (e.g. "
                            "http://127.0.0.1:9000)",
                            v);
            return -1;
        }
        if (strpbrk(v, " \t")) {
            cli_usage_error(cmd,
                            "--endpoint '%.100s' has a space; give a URL such as "
                            "http://127.0.0.1:9000",
                            v);
            return -1;
        }
    } else if (strcmp(name, "--log-format") == 0) {
        if (strcmp(v, "text") != 0 && strcmp(v, "json") != 0) {
            cli_usage_error(cmd, "--log-format '%.100s' is not text or json", v);
            return -1;
        }
    } else if (strcmp(name, "--lock") != 0) { /* files: --ca-file, --peer-* */
        struct stat sb;
        if (stat(v, &sb) != 0 || access(v, R_OK) != 0) {
            cli_usage_error(cmd, "%s: cannot read '%.200s': %s", name, v, strerror(errno));
            return -1;
        }
        if (S_ISDIR(sb.st_mode)) {
            cli_usage_error(cmd, "%s: '%.200s' is a directory; give a PEM file", name, v);
            return -1;
        }
    }
    return 0;
}

/* The value of the option at argv[*i]: after '=' in "--name=value", else the
 * next argument (which must not look like an option). NULL after an error. */
static const char *opt_value(const char *cmd, const char *name, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (a[n] == '=')
        return a + n + 1;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "option %s needs a value", name);
        return NULL;
    }
    const char *v = argv[*i + 1];
    if (v[0] == '-' && v[1] != '\0' && strcmp(name, "--lock") != 0 &&
        !(v[1] >= '0' && v[1] <= '9')) {
        cli_usage_error(cmd,
                        "option %s needs a value, got the option '%.100s' (write %s=VALUE for a "
                        "value that starts with '-')",
                        name, v, name);
        return NULL;
    }
    if (v[0] == '-' && strcmp(name, "--lock") == 0 && v[1] == '-') {
        cli_usage_error(cmd,
                        "option --lock needs a value, got the option '%.100s' (write --lock=VALUE "
                        "for a value that starts with '-')",
                        v);
        return NULL;
    }
    ++*i;
    return v;
}

enum { K_STR, K_DUR, K_FLAG };
typedef struct opt_def {
    const char *name;
    int kind;
    unsigned cmds;
    const char **str;
    int64_t *dur;
    int *flag;
} opt_def;
#define MAX_OPT_DEFS 40

/* The options of every command, bound to o's fields; returns their number. */
static size_t opt_defs(cli_opts *o, opt_def *out)
{
    const opt_def opts[] = {
        {"--lock", K_STR, C_RUN | C_READ | C_CHECK | C_RESET, &o->lock, NULL, NULL},
        {"--endpoint", K_STR, C_RUN | C_READ | C_CHECK | C_RESET, &o->endpoint, NULL, NULL},
        {"--region", K_STR, C_RUN | C_READ | C_CHECK | C_RESET, &o->region, NULL, NULL},
        {"--ca-file", K_STR, C_RUN | C_READ | C_CHECK | C_RESET, &o->ca_file, NULL, NULL},
        {"--path-style", K_FLAG, C_RUN | C_READ | C_CHECK | C_RESET, NULL, NULL, &o->path_style},
        {"--id", K_STR, C_RUN, &o->id, NULL, NULL},
        {"--addr", K_STR, C_RUN, &o->addr, NULL, NULL},
        {"--peer", K_FLAG, C_RUN, NULL, NULL, &o->peer},
        {"--no-peer", K_FLAG, C_RUN, NULL, NULL, &o->no_peer},
        {"--peer-listen", K_STR, C_RUN, &o->peer_listen, NULL, NULL},
        {"--peer-cert", K_STR, C_RUN, &o->peer_cert, NULL, NULL},
        {"--peer-key", K_STR, C_RUN, &o->peer_key, NULL, NULL},
        {"--peer-ca", K_STR, C_RUN, &o->peer_ca, NULL, NULL},
        {"--peer-client-cert", K_STR, C_RUN, &o->peer_client_cert, NULL, NULL},
        {"--lease-timeout", K_DUR, C_RUN | C_READ | C_RESET, NULL, &o->lease, NULL},
        {"--max-lease-timeout", K_DUR, C_RUN | C_READ | C_RESET, NULL, &o->max_lease, NULL},
        {"--renew-interval", K_DUR, C_RUN, NULL, &o->renew, NULL},
        {"--renew-deadline", K_DUR, C_RUN, NULL, &o->deadline, NULL},
        {"--frequent-interval", K_DUR, C_RUN, NULL, &o->frequent, NULL},
        {"--infrequent-interval", K_DUR, C_RUN, NULL, &o->infrequent, NULL},
        {"--max-clock-skew", K_DUR, C_RUN, NULL, &o->skew, NULL},
        {"--new-lock-wait", K_DUR, C_RUN, NULL, &o->new_lock_wait, NULL},
        {"--kill-timeout", K_DUR, C_RUN, NULL, &o->kill_timeout, NULL},
        {"--startup-timeout", K_DUR, C_RUN, NULL, &o->startup_timeout, NULL},
        {"--interval", K_DUR, C_WATCH, NULL, &o->interval, NULL},
        {"--json", K_FLAG, C_READ, NULL, NULL, &o->json},
        {"--log-format", K_STR, C_RUN, &o->log_format, NULL, NULL},
        {"--log-time", K_FLAG, C_RUN, NULL, NULL, &o->log_time},
        {"--print-config", K_FLAG, C_RUN, NULL, NULL, &o->print_config},
        {"--metrics-listen", K_STR, C_RUN, &o->metrics_listen, NULL, NULL},
    };
    _Static_assert(sizeof opts / sizeof opts[0] <= MAX_OPT_DEFS, "raise MAX_OPT_DEFS");
    _Static_assert(sizeof opts / sizeof opts[0] <= 8 * sizeof(unsigned long), "seen bits");
    memcpy(out, opts, sizeof opts);
    return sizeof opts / sizeof opts[0];
}

int cli_common_opt(const char *cmd, int argc, char **argv, int *i, cli_opts *o)
{
    const char *a = argv[*i];
    opt_def opts[MAX_OPT_DEFS];
    size_t nopts = opt_defs(o, opts);
    for (size_t k = 0; k < nopts; k++) {
        size_t n = strlen(opts[k].name);
        if (strncmp(a, opts[k].name, n) != 0 || (a[n] != '\0' && a[n] != '='))
            continue;
        if (!(opts[k].cmds & cmd_bit(cmd))) {
            cli_usage_error(cmd, "option %s does not apply to %s (only to %s)", opts[k].name, cmd,
                            cmd_names(opts[k].cmds));
            return -1;
        }
        if (opts[k].kind == K_FLAG) {
            if (a[n] == '=') {
                cli_usage_error(cmd, "option %s takes no value", opts[k].name);
                return -1;
            }
            *opts[k].flag = 1;
            return 1;
        }
        int first_lock = k == 0 && o->lock && !(o->seen & 1UL);
        if ((o->seen & (1UL << k)) || first_lock) {
            if (k == 0)
                cli_usage_error(cmd, "more than one lock URL; give one, as --lock URL or as the "
                                     "first argument");
            else
                cli_usage_error(cmd, "option %s is given twice; give it once", opts[k].name);
            return -1;
        }
        const char *v = opt_value(cmd, opts[k].name, argc, argv, i);
        if (!v)
            return -1;
        o->seen |= 1UL << k;
        if (opts[k].kind == K_STR) {
            if (check_str(cmd, opts[k].name, v))
                return -1;
            *opts[k].str = v;
            return 1;
        }
        int rc = cfg_parse_duration(v, opts[k].dur);
        if (rc) { /* from S3LECT_*: the library's name, as s3lect_config_set_text says it */
            char lib[64];
            size_t n = 0;
            for (const char *p = opts[k].name + 2; *p && n + 1 < sizeof lib; p++)
                lib[n++] = *p == '-' ? '_' : *p;
            lib[n] = '\0';
            cli_usage_error(cmd, "%s '%.100s' %s", g_env_source ? lib : opts[k].name, v,
                            cfg_duration_error(rc));
            return -1;
        }
        if (opts[k].dur == &o->interval && o->interval < CLI_MIN_INTERVAL_MS) {
            cli_usage_error(cmd,
                            "--interval '%.100s' is too short; the minimum is %dms (each interval "
                            "is one read of the store)",
                            v, CLI_MIN_INTERVAL_MS);
            return -1;
        }
        if (opts[k].dur != &o->kill_timeout && opts[k].dur != &o->interval &&
            opts[k].dur != &o->startup_timeout)
            o->has_timing = 1;
        return 1;
    }
    return 0;
}

int cli_env_opts(const char *cmd, cli_opts *o)
{
    opt_def opts[MAX_OPT_DEFS];
    size_t nopts = opt_defs(o, opts);
    for (size_t k = 0; k < nopts; k++) {
        if (!(opts[k].cmds & cmd_bit(cmd)))
            continue;
        char env[64] = "S3LECT_";
        size_t e = strlen(env);
        for (const char *p = opts[k].name + 2; *p && e + 1 < sizeof env; p++)
            env[e++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        env[e] = '\0';
        const char *v = getenv(env);
        /* The library's option names, as the Python binding's from_env reads them. */
        const char *alias = !strcmp(opts[k].name, "--id")     ? "S3LECT_SERVER_ID"
                            : !strcmp(opts[k].name, "--addr") ? "S3LECT_SERVER_ADDR"
                            : !strcmp(opts[k].name, "--peer") ? "S3LECT_PEER_MODE"
                                                              : NULL;
        if ((!v || !*v) && alias && (v = getenv(alias)) != NULL)
            snprintf(env, sizeof env, "%s", alias);
        if (!v || !*v) /* an empty variable is unset, as in every front end */
            continue;
        if (opts[k].kind == K_FLAG) {
            if (*opts[k].flag > 0) /* the flag was given: it wins (-1: unset) */
                continue;
            if (opts[k].flag == &o->peer && o->no_peer > 0)
                continue; /* --no-peer was given: it wins */
            if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
                !strcasecmp(v, "on")) {
                *opts[k].flag = 1;
            } else if (*v && strcmp(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "no") &&
                       strcasecmp(v, "off")) {
                cli_usage_error(cmd, "%s='%.100s' is not a boolean; use 1 or 0 (true/false)", env,
                                v);
                return -1;
            } else if (*opts[k].flag < 0) {
                *opts[k].flag = 0; /* a tri-state flag (--peer): off */
            }
            continue;
        }
        if ((o->seen & (1UL << k)) || (k == 0 && o->lock))
            continue; /* given on the command line: it wins */
        size_t n = strlen(opts[k].name) + strlen(v) + 2;
        char *arg = malloc(n); /* kept: the options point into it */
        if (!arg) {
            fprintf(stderr, "s3lect %s: out of memory\n", cmd);
            return -1;
        }
        snprintf(arg, n, "%s=%s", opts[k].name, v);
        char *av[] = {arg};
        int i = 0;
        g_env_source = env;
        /* arg is kept (the options point into it); on an error the command exits */
        int rc = cli_common_opt(cmd, 1, av, &i, o); /* NOLINT(clang-analyzer-unix.Malloc) */
        g_env_source = NULL;
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* The largest leaseMs trusted in a record: --max-lease-timeout, else 4 L. */
static int64_t max_lease_of(const cli_opts *o)
{
    return o->max_lease > 0 ? o->max_lease : 4 * (o->lease > 0 ? o->lease : 15000);
}

/* The integer options that have no flag (peer_timeout, request_timeout, the
 * runtime's sizes) come from S3LECT_<NAME> alone, parsed by the library
 * (s3lect_config_set_text) like every other S3LECT_* value. Returns 0, 1
 * after a usage error, or a negative code. */
static int env_only_options(const char *cmd, s3lect_config *c)
{
    cli_opts scratch;
    opt_def opts[MAX_OPT_DEFS];
    size_t nopts = opt_defs(&scratch, opts);
    for (int opt = 1; opt <= s3lect_option_count(); opt++) {
        const char *name;
        int type, has_flag = 0;
        if (s3lect_option_info(opt, &name, &type, NULL, NULL, NULL) || type != S3LECT_OPTION_INT)
            continue;
        char flag[64] = "--", env[64] = "S3LECT_";
        for (size_t i = 0; name[i] && i + 8 < sizeof env; i++) {
            flag[i + 2] = name[i] == '_' ? '-' : name[i];
            flag[i + 3] = '\0';
            env[i + 7] = (char)toupper((unsigned char)name[i]);
            env[i + 8] = '\0';
        }
        for (size_t k = 0; k < nopts; k++)
            has_flag |= strcmp(opts[k].name, flag) == 0;
        const char *v = getenv(env);
        if (has_flag || !v || !*v)
            continue;
        int rc = s3lect_config_set_text(c, opt, v);
        if (rc == S3LECT_EINVAL) {
            char msg[512];
            s3lect_config_errmsg(c, msg, sizeof msg);
            g_env_source = env;
            cli_usage_error(cmd, "%s", msg);
            g_env_source = NULL;
            return 1;
        }
        if (rc)
            return rc;
    }
    return 0;
}

s3lect_config *cli_config(const char *cmd, const cli_opts *given)
{
    s3lect_config *c = s3lect_config_new();
    if (!c) {
        fprintf(stderr, "s3lect %s: out of memory\n", cmd);
        return NULL;
    }
    const cli_opts *o = given;
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
    /* Peer mode is on by default in `s3lect run` (docs/peer.md); --no-peer
     * or S3LECT_PEER=0 turns it off. The other commands never serve. */
    int peer = o->no_peer > 0 ? 0 : o->peer >= 0 ? o->peer : strcmp(cmd, "run") == 0;
    if (o->peer > 0 && o->no_peer > 0) {
        cli_usage_error(cmd, "--peer and --no-peer contradict each other; give one");
        s3lect_config_free(c);
        return NULL;
    }
    const char *peer_only = o->peer_listen        ? "--peer-listen"
                            : o->peer_cert        ? "--peer-cert"
                            : o->peer_key         ? "--peer-key"
                            : o->peer_ca          ? "--peer-ca"
                            : o->peer_client_cert ? "--peer-client-cert"
                                                  : NULL;
    if (!peer && peer_only && !strcmp(cmd, "run")) {
        cli_usage_error(cmd, "%s needs peer mode, which %s turns off; drop one of them", peer_only,
                        o->no_peer > 0 ? "--no-peer" : "S3LECT_PEER=0");
        s3lect_config_free(c);
        return NULL;
    }
    if (!rc && peer)
        rc = s3lect_config_set_bool(c, S3LECT_OPT_PEER_MODE, 1);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_PEER_LISTEN, o->peer_listen);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_PEER_CERT, o->peer_cert);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_PEER_KEY, o->peer_key);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_PEER_CA, o->peer_ca);
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_PEER_CLIENT_CERT, o->peer_client_cert);
    /* Only the timings given: the library derives the others from them
     * (s3lect_config_is_set) and names a derived value that is out of range. */
    struct {
        int64_t v;
        s3lect_option opt;
    } ints[] = {{o->lease, S3LECT_OPT_LEASE_TIMEOUT},
                {o->deadline, S3LECT_OPT_RENEW_DEADLINE},
                {o->renew, S3LECT_OPT_RENEW_INTERVAL},
                {o->frequent, S3LECT_OPT_FREQUENT_INTERVAL},
                {o->infrequent, S3LECT_OPT_INFREQUENT_INTERVAL},
                {o->skew, S3LECT_OPT_MAX_CLOCK_SKEW},
                {o->new_lock_wait, S3LECT_OPT_NEW_LOCK_WAIT},
                {o->max_lease > 0 ? o->max_lease : -1, S3LECT_OPT_MAX_LEASE_TIMEOUT}};
    for (size_t k = 0; !rc && k < sizeof ints / sizeof ints[0]; k++)
        if (ints[k].v >= 0)
            rc = s3lect_config_set_int(c, ints[k].opt, ints[k].v);
    if (!rc && (rc = env_only_options(cmd, c)) == 1) { /* it has said why */
        s3lect_config_free(c);
        return NULL;
    }
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

void cli_opts_init(cli_opts *o)
{
    memset(o, 0, sizeof *o);
    o->path_style = -1;
    o->peer = -1;
    o->lease = o->renew = o->deadline = o->frequent = o->infrequent = o->skew = -1;
    o->new_lock_wait = -1;
    o->kill_timeout = -1;
    o->startup_timeout = -1;
    o->interval = 1000;
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
    read_snapshot(s, key, o.lease > 0 ? o.lease : 15000, max_lease_of(&o), &sn);
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

static int cmd_reset_term(int argc, char **argv)
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
        int64_t lease = o.lease > 0 ? o.lease : 15000, maxl = max_lease_of(&o);
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
    int64_t warned_lease = -1; /* the clamped leaseMs last warned about */
    while (!watch_stop) {
        snapshot sn;
        read_snapshot(s, key, o.lease > 0 ? o.lease : 15000, max_lease_of(&o), &sn);
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

static const char *const COMMANDS[] = {"run",        "status",    "watch",      "check-store",
                                       "init-store", "whoami",    "reset-term", "stores",
                                       "help",       "completion"};

/* "run, status, ..., completion": every command, for the errors that list them. */
static const char *command_list(void)
{
    static char buf[256];
    if (!buf[0]) {
        size_t n = 0;
        for (size_t k = 0; k < sizeof COMMANDS / sizeof COMMANDS[0] && n < sizeof buf; k++)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", k ? ", " : "", COMMANDS[k]);
    }
    return buf;
}

/* Edit distance (insertions, deletions, substitutions, swaps of two
 * neighbours) between a and b, counted up to 9. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32)
        return 9;
    size_t d[33][33];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = d[i - 1][j - 1] +
                         (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            size_t v = sub < del ? sub : del;
            v = v < ins ? v : ins;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb] > 9 ? 9 : d[la][lb];
}

/* "unknown command 'stats'; did you mean status?" (or the list of commands). */
static int unknown_command(const char *cmd)
{
    const char *best = NULL;
    size_t best_d = 9, n = strlen(cmd);
    for (size_t k = 0; k < sizeof COMMANDS / sizeof COMMANDS[0]; k++) {
        size_t d = edit_distance(cmd, COMMANDS[k]);
        /* a typo (at most 2 edits, fewer than the word is long), or the start
         * of a longer name ("check" for check-store) */
        if (n >= 3 && strncasecmp(COMMANDS[k], cmd, n) == 0)
            d = 1;
        if (d <= 2 && d < n && d < best_d) {
            best = COMMANDS[k];
            best_d = d;
        }
    }
    if (best)
        cli_usage_error(NULL, "unknown command '%.100s'; did you mean %s?", cmd, best);
    else
        cli_usage_error(NULL, "unknown command '%.100s'; commands: %s", cmd, command_list());
    return CLI_EXIT_USAGE;
}

/* An option's closeness to what was typed: a typo (at most 2 edits, fewer
 * than the name is long) of the name before any '='. */
static void closest_option(const char *typed, size_t n, const char *name, const char **best,
                           size_t *best_d)
{
    char t[40];
    if (n >= sizeof t)
        return;
    memcpy(t, typed, n);
    t[n] = '\0';
    size_t d = edit_distance(t, name);
    if (d <= 2 && d < n - 2 && d < *best_d) {
        *best = name;
        *best_d = d;
    }
}

void cli_unknown_option(const char *cmd, const char *arg, const char *const *extra)
{
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    const char *best = NULL;
    size_t best_d = 9;
    if (arg[0] == '-' && arg[1] == '-') {
        cli_opts scratch;
        memset(&scratch, 0, sizeof scratch);
        opt_def opts[MAX_OPT_DEFS];
        size_t nopts = opt_defs(&scratch, opts);
        unsigned bit = cmd_bit(cmd);
        for (size_t k = 0; k < nopts; k++)
            if (opts[k].cmds & bit)
                closest_option(arg, n, opts[k].name, &best, &best_d);
        for (size_t k = 0; extra && extra[k]; k++)
            closest_option(arg, n, extra[k], &best, &best_d);
        closest_option(arg, n, "--help", &best, &best_d);
    }
    if (best)
        cli_usage_error(cmd, "unknown option '%.100s'; did you mean %s?", arg, best);
    else
        cli_usage_error(cmd, "unknown option '%.100s'", arg);
}

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

static void main_help(void)
{
    fputs(MAIN_HELP_HEAD, stdout);
    print_stores_sentence();
    fputs("\n", stdout);
    fputs(MAIN_HELP, stdout);
    print_lock_urls();
    fputs(MAIN_HELP_TAIL, stdout);
}

/* ---- `s3lect completion bash|zsh|fish` (issue 39 item 5) ----
 * Generated from the option table above (opt_defs) and each command's own
 * options, so that completion cannot drift from what the parser takes. */

#define S3_STORE_OPTS "--lock --endpoint --region --ca-file --path-style"
static const struct comp_cmd {
    const char *name;
    unsigned bits;     /* options of the table that apply (C_*), or 0 */
    const char *extra; /* its own options, space-separated */
} COMP_CMDS[] = {
    {"run", C_RUN, ""},
    {"status", C_STATUS, ""},
    {"watch", C_WATCH, ""},
    {"check-store", 0, S3_STORE_OPTS " --racers --rounds"},
    {"init-store", 0, S3_STORE_OPTS},
    {"whoami", 0, S3_STORE_OPTS " --json"},
    {"reset-term", C_RESET, ""},
    {"stores", 0, "--json"},
};
/* Options whose value is a file, and options with a fixed set of values. */
static const char *const COMP_FILES[] = {"--ca-file", "--peer-cert",        "--peer-key",
                                         "--peer-ca", "--peer-client-cert", NULL};
static const struct {
    const char *opt, *values;
} COMP_VALUES[] = {{"--log-format", "text json"}};

static int comp_is_file(const char *o)
{
    for (size_t i = 0; COMP_FILES[i]; i++)
        if (strcmp(COMP_FILES[i], o) == 0)
            return 1;
    return 0;
}

/* The options of one command into buf, space-separated: "--a --b ...". */
static void comp_options(const struct comp_cmd *c, char *buf, size_t n)
{
    cli_opts scratch;
    memset(&scratch, 0, sizeof scratch);
    opt_def opts[MAX_OPT_DEFS];
    size_t nopts = opt_defs(&scratch, opts), len = 0;
    buf[0] = '\0';
    for (size_t k = 0; c->bits && k < nopts; k++)
        if (opts[k].cmds & c->bits)
            len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s", len ? " " : "",
                                    opts[k].name);
    if (c->extra[0] && len < n)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? " " : "", c->extra);
    if (len < n)
        snprintf(buf + len, n - len, "%s--help", len ? " " : "");
}

/* Every option that takes a value (a K_STR or K_DUR of the table, or
 * --racers/--rounds), space-separated, with no file or fixed-set ones. */
static void comp_valued(char *buf, size_t n, int files)
{
    cli_opts scratch;
    memset(&scratch, 0, sizeof scratch);
    opt_def opts[MAX_OPT_DEFS];
    size_t nopts = opt_defs(&scratch, opts), len = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < nopts; k++) {
        if (opts[k].kind == K_FLAG || comp_is_file(opts[k].name) != files)
            continue;
        int fixed = 0;
        for (size_t v = 0; v < sizeof COMP_VALUES / sizeof COMP_VALUES[0]; v++)
            fixed |= strcmp(COMP_VALUES[v].opt, opts[k].name) == 0;
        if (!fixed && len < n)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? "|" : "", opts[k].name);
    }
    if (!files && len < n)
        snprintf(buf + len, n - len, "%s--racers|--rounds", len ? "|" : "");
}

/* The commands, space-separated. */
static void comp_names(char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof COMP_CMDS / sizeof COMP_CMDS[0] && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? " " : "", COMP_CMDS[i].name);
}

static void comp_bash(int zsh)
{
    char names[256], buf[2048];
    comp_names(names, sizeof names);
    printf("# SPDX-License-Identifier: Apache-2.0\n"
           "# %s completion for s3lect (`s3lect completion %s`), generated from the CLI's "
           "option table.\n",
           zsh ? "zsh" : "bash", zsh ? "zsh" : "bash");
    if (zsh)
        printf("autoload -U +X bashcompinit && bashcompinit\n");
    printf("_s3lect() {\n"
           "    local cur prev cmd i\n"
           "    cur=${COMP_WORDS[COMP_CWORD]}\n"
           "    prev=${COMP_WORDS[COMP_CWORD-1]}\n"
           "    COMPREPLY=()\n"
           "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
           "        COMPREPLY=($(compgen -W \"%s completion help --help --version\" -- "
           "\"$cur\"))\n"
           "        return\n"
           "    fi\n"
           "    cmd=${COMP_WORDS[1]}\n"
           "    for ((i = 2; i < COMP_CWORD; i++)); do\n"
           "        if [ \"${COMP_WORDS[i]}\" = \"--\" ]; then  # CMD and its arguments\n"
           "            if [ $((i + 1)) -eq \"$COMP_CWORD\" ]; then\n"
           "                COMPREPLY=($(compgen -c -- \"$cur\"))\n"
           "            else\n"
           "                COMPREPLY=($(compgen -f -- \"$cur\"))\n"
           "            fi\n"
           "            return\n"
           "        fi\n"
           "    done\n"
           "    case \"$cmd\" in\n"
           "    help) COMPREPLY=($(compgen -W \"%s completion\" -- \"$cur\")); return ;;\n"
           "    completion) COMPREPLY=($(compgen -W \"bash zsh fish\" -- \"$cur\")); return ;;\n"
           "    esac\n"
           "    case \"$prev\" in  # the value of the option before the cursor\n",
           names, names);
    for (size_t v = 0; v < sizeof COMP_VALUES / sizeof COMP_VALUES[0]; v++)
        printf("    %s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;\n",
               COMP_VALUES[v].opt, COMP_VALUES[v].values);
    comp_valued(buf, sizeof buf, 1);
    printf("    %s) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", buf);
    comp_valued(buf, sizeof buf, 0);
    printf("    %s) return ;;\n    esac\n", buf);
    printf("    case \"$cur\" in\n    -*)\n        case \"$cmd\" in\n");
    for (size_t i = 0; i < sizeof COMP_CMDS / sizeof COMP_CMDS[0]; i++) {
        comp_options(&COMP_CMDS[i], buf, sizeof buf);
        printf("        %s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")) ;;\n", COMP_CMDS[i].name,
               buf);
    }
    printf("        esac ;;\n"
           "    *) COMPREPLY=($(compgen -f -- \"$cur\")) ;;  # a lock path (file store)\n"
           "    esac\n"
           "}\n"
           "complete -F _s3lect s3lect\n");
}

static void comp_fish(void)
{
    char names[256], buf[2048];
    comp_names(names, sizeof names);
    printf("# SPDX-License-Identifier: Apache-2.0\n"
           "# fish completion for s3lect (`s3lect completion fish`), generated from the CLI's "
           "option table.\n"
           "complete -c s3lect -f\n"
           "complete -c s3lect -n __fish_use_subcommand -a '%s completion help'\n"
           "complete -c s3lect -n '__fish_seen_subcommand_from help' -a '%s completion'\n"
           "complete -c s3lect -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n",
           names, names);
    cli_opts scratch;
    memset(&scratch, 0, sizeof scratch);
    opt_def opts[MAX_OPT_DEFS];
    size_t nopts = opt_defs(&scratch, opts);
    for (size_t i = 0; i < sizeof COMP_CMDS / sizeof COMP_CMDS[0]; i++) {
        comp_options(&COMP_CMDS[i], buf, sizeof buf);
        for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
            const char *how = " -r"; /* takes a value */
            for (size_t k = 0; k < nopts; k++)
                if (strcmp(opts[k].name, tok) == 0 && opts[k].kind == K_FLAG)
                    how = "";
            if (strcmp(tok, "--help") == 0 || strcmp(tok, "--json") == 0)
                how = "";
            printf("complete -c s3lect -n '__fish_seen_subcommand_from %s' -l %s%s",
                   COMP_CMDS[i].name, tok + 2, how);
            if (comp_is_file(tok))
                printf(" -F");
            for (size_t v = 0; v < sizeof COMP_VALUES / sizeof COMP_VALUES[0]; v++)
                if (strcmp(COMP_VALUES[v].opt, tok) == 0)
                    printf(" -x -a '%s'", COMP_VALUES[v].values);
            printf("\n");
        }
    }
}

static int cmd_completion(int argc, char **argv)
{
    const char *sh = argc > 1 ? argv[1] : "";
    if (strcmp(sh, "-h") == 0 || strcmp(sh, "--help") == 0) {
        fputs("usage: s3lect completion bash|zsh|fish\n\n"
              "Prints the shell completion script for s3lect. Load it with, e.g.:\n"
              "  source <(s3lect completion bash)\n"
              "  s3lect completion zsh > \"${fpath[1]}/_s3lect\"\n"
              "  s3lect completion fish > ~/.config/fish/completions/s3lect.fish\n"
              "Release archives and `cmake --install` also install the three files.\n",
              stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(sh, "bash") == 0)
        comp_bash(0);
    else if (strcmp(sh, "zsh") == 0)
        comp_bash(1);
    else if (strcmp(sh, "fish") == 0)
        comp_fish();
    else {
        cli_usage_error("completion", "give a shell: s3lect completion bash|zsh|fish");
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        cli_usage_error(NULL, "missing command; commands: %s", command_list());
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        main_help();
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        /* First line: the version alone (scripts read it). Then the libraries
         * in use as they report themselves, and, in a release build
         * (scripts/dist), the bundled source packages it was built from. */
        const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
        printf("s3lect %s\n", s3lect_version());
        printf("libcurl %s (%s), cJSON %s\n", cv->version,
               cv->ssl_version ? cv->ssl_version : "no TLS", cJSON_Version());
#ifdef S3LECT_BUNDLED
        printf("bundled: %s\n", S3LECT_BUNDLED);
#endif
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        const char *sub = argc > 2 ? argv[2] : NULL;
        if (!sub)
            main_help();
        else if (strcmp(sub, "run") == 0)
            cli_print_run_help();
        else if (strcmp(sub, "status") == 0)
            printf("%s%s", STATUS_HELP, COMMON_HELP);
        else if (strcmp(sub, "watch") == 0)
            printf("%s%s", WATCH_HELP, COMMON_HELP);
        else if (strcmp(sub, "reset-term") == 0)
            printf("%s%s", RESET_HELP, COMMON_HELP);
        else if (strcmp(sub, "check-store") == 0) {
            char *av[] = {"check-store", "--help", NULL};
            return cli_check_store(2, av);
        } else if (strcmp(sub, "init-store") == 0) {
            char *av[] = {"init-store", "--help", NULL};
            return cli_init_store(2, av);
        } else if (strcmp(sub, "whoami") == 0) {
            char *av[] = {"whoami", "--help", NULL};
            return cli_whoami(2, av);
        } else if (strcmp(sub, "completion") == 0) {
            char *av[] = {"completion", "--help", NULL};
            return cmd_completion(2, av);
        } else if (strcmp(sub, "stores") == 0) {
            fputs(CLI_STORES_HELP, stdout);
        } else {
            return unknown_command(sub);
        }
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "run") == 0)
        return cli_run(argc - 1, argv + 1);
    if (strcmp(cmd, "status") == 0)
        return cmd_status(argc - 1, argv + 1);
    if (strcmp(cmd, "watch") == 0)
        return cmd_watch(argc - 1, argv + 1);
    if (strcmp(cmd, "reset-term") == 0)
        return cmd_reset_term(argc - 1, argv + 1);
    if (strcmp(cmd, "check-store") == 0)
        return cli_check_store(argc - 1, argv + 1);
    if (strcmp(cmd, "init-store") == 0)
        return cli_init_store(argc - 1, argv + 1);
    if (strcmp(cmd, "whoami") == 0)
        return cli_whoami(argc - 1, argv + 1);
    if (strcmp(cmd, "completion") == 0)
        return cmd_completion(argc - 1, argv + 1);
    if (strcmp(cmd, "stores") == 0)
        return cli_stores(argc - 1, argv + 1);
    return unknown_command(cmd);
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
