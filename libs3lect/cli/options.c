/* SPDX-License-Identifier: Apache-2.0 */
/* options.c - the CLI's options: the table, parsing, S3LECT_* variables,
 * the configuration they make, and the errors that say what to fix. Every
 * command parses through here; main.c only dispatches. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"
#include "store.h"
#include "util.h"

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

unsigned cli_cmd_bit(const char *cmd)
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
    } else if (strcmp(name, "--priority") == 0) {
        char *end = NULL;
        errno = 0;
        long long p = strtoll(v, &end, 10);
        if (end == v || *end || errno || p < 0 || p > 1000000) {
            cli_usage_error(cmd, "--priority '%.50s' is not a whole number from 0 to 1000000", v);
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

/* The options of every command, bound to o's fields; returns their number. */
size_t cli_opt_defs(cli_opts *o, cli_opt_def *out)
{
    const cli_opt_def opts[] = {
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
        {"--priority", K_STR, C_RUN, &o->priority, NULL, NULL},
        {"--max-hold", K_DUR, C_RUN, NULL, &o->max_hold, NULL},
        {"--kill-timeout", K_DUR, C_RUN, NULL, &o->kill_timeout, NULL},
        {"--startup-timeout", K_DUR, C_RUN, NULL, &o->startup_timeout, NULL},
        {"--interval", K_DUR, C_WATCH, NULL, &o->interval, NULL},
        {"--json", K_FLAG, C_READ, NULL, NULL, &o->json},
        {"--log-format", K_STR, C_RUN, &o->log_format, NULL, NULL},
        {"--log-time", K_FLAG, C_RUN, NULL, NULL, &o->log_time},
        {"--print-config", K_FLAG, C_RUN, NULL, NULL, &o->print_config},
        {"--metrics-listen", K_STR, C_RUN, &o->metrics_listen, NULL, NULL},
    };
    _Static_assert(sizeof opts / sizeof opts[0] <= CLI_MAX_OPT_DEFS, "raise CLI_MAX_OPT_DEFS");
    _Static_assert(sizeof opts / sizeof opts[0] <= 8 * sizeof(unsigned long), "seen bits");
    memcpy(out, opts, sizeof opts);
    return sizeof opts / sizeof opts[0];
}

int cli_common_opt(const char *cmd, int argc, char **argv, int *i, cli_opts *o)
{
    const char *a = argv[*i];
    cli_opt_def opts[CLI_MAX_OPT_DEFS];
    size_t nopts = cli_opt_defs(o, opts);
    for (size_t k = 0; k < nopts; k++) {
        size_t n = strlen(opts[k].name);
        if (strncmp(a, opts[k].name, n) != 0 || (a[n] != '\0' && a[n] != '='))
            continue;
        if (!(opts[k].cmds & cli_cmd_bit(cmd))) {
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

/* Flag `flag`'s variable: S3LECT_<FLAG> in var ("--kill-timeout":
 * S3LECT_KILL_TIMEOUT); and, when that is the variable or the alias of a
 * library option (the library's environment column, s3lect_option_env:
 * "--id" is S3LECT_ID, server_id's alias), that option, with both its
 * names. Returns the option, or 0 when the flag is the CLI's own. */
static int flag_var(const char *flag, char *var, size_t varlen, const char **name,
                    const char **alias)
{
    size_t e = (size_t)snprintf(var, varlen, "S3LECT_");
    for (const char *p = flag + 2; *p && e + 1 < varlen; p++)
        var[e++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    var[e] = '\0';
    *name = *alias = NULL;
    for (int opt = 1; opt <= s3lect_option_count(); opt++) {
        const char *n = NULL, *a = NULL;
        if (s3lect_option_env(opt, &n, &a) == S3LECT_OK &&
            ((n && !strcmp(n, var)) || (a && !strcmp(a, var)))) {
            *name = n;
            *alias = a;
            return opt;
        }
    }
    return 0;
}

/* A flag's variable `env` with value v (not empty): sets the flag unless
 * the command line gave it (or --no-peer, for --peer). -1 after a usage
 * error in the library's words (s3lect_config_set_text's, naming option
 * lib_opt when it is one), else 0. */
static int env_flag(const char *cmd, const cli_opt_def *d, cli_opts *o, const char *env,
                    const char *v, int lib_opt)
{
    if (*d->flag > 0) /* the flag was given: it wins (-1: unset) */
        return 0;
    if (d->flag == &o->peer && o->no_peer > 0)
        return 0; /* --no-peer was given: it wins */
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
        !strcasecmp(v, "on")) {
        *d->flag = 1;
    } else if (strcmp(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "no") &&
               strcasecmp(v, "off")) {
        const char *what = d->name;
        if (lib_opt)
            s3lect_option_info(lib_opt, &what, NULL, NULL, NULL, NULL);
        g_env_source = env;
        cli_usage_error(
            cmd, "%s '%.100s' is not a boolean; use 1 or 0 (true/false, yes/no, on/off)", what, v);
        g_env_source = NULL;
        return -1;
    } else if (*d->flag < 0) {
        *d->flag = 0; /* a tri-state flag (--peer): off */
    }
    return 0;
}

int cli_env_opts(const char *cmd, cli_opts *o)
{
    cli_opt_def opts[CLI_MAX_OPT_DEFS];
    size_t nopts = cli_opt_defs(o, opts);
    for (size_t k = 0; k < nopts; k++) {
        if (!(opts[k].cmds & cli_cmd_bit(cmd)))
            continue;
        /* A flag of a library option reads the library's variables (its
         * environment column: S3LECT_SERVER_ID, then S3LECT_ID for --id), a
         * flag of the CLI's own S3LECT_<FLAG>. */
        char env[64];
        const char *lib_env, *lib_alias;
        int lib_opt = flag_var(opts[k].name, env, sizeof env, &lib_env, &lib_alias);
        if (lib_opt && lib_env)
            snprintf(env, sizeof env, "%s", lib_env);
        const char *v = getenv(env);
        if ((!v || !*v) && lib_alias && (v = getenv(lib_alias)) != NULL)
            snprintf(env, sizeof env, "%s", lib_alias);
        if (!v || !*v) /* an empty variable is unset, as in every front end */
            continue;
        if (opts[k].kind == K_FLAG) {
            if (env_flag(cmd, &opts[k], o, env, v, lib_opt) < 0)
                return -1;
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

/* The options that have no flag (peer_timeout, request_timeout, the
 * runtime's sizes, release_on_stop, ...) from their S3LECT_* variables, by
 * the library (s3lect_config_set_from_env): the process's environment less
 * the variables of the options that have a flag, which cli_env_opts read
 * (a flag given wins over its variable, which is then not even parsed).
 * Returns 0, 1 after a usage error, or a negative code. */
static int env_only_options(const char *cmd, s3lect_config *c)
{
    cli_opts scratch;
    cli_opt_def opts[CLI_MAX_OPT_DEFS];
    size_t nopts = cli_opt_defs(&scratch, opts), n = 0;
    while (environ && environ[n])
        n++;
    const char **env = calloc(n + 1, sizeof *env);
    if (!env)
        return S3LECT_ENOMEM;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        int flagged = 0;
        for (size_t k = 0; k < nopts && !flagged; k++) {
            char var[64];
            const char *name, *alias;
            if (!flag_var(opts[k].name, var, sizeof var, &name, &alias))
                continue;
            for (int j = 0; j < 2 && !flagged; j++) {
                const char *nm = j ? alias : name;
                size_t len = nm ? strlen(nm) : 0;
                flagged = nm && !strncmp(environ[i], nm, len) && environ[i][len] == '=';
            }
        }
        if (!flagged)
            env[kept++] = environ[i];
    }
    env[kept] = NULL;
    int rc = s3lect_config_set_from_env(c, env);
    free(env);
    if (rc == S3LECT_EINVAL) {
        char msg[512];
        s3lect_config_errmsg(c, msg, sizeof msg);
        cli_usage_error(cmd, "%s", msg); /* the message names the variable */
        return 1;
    }
    return rc;
}

/* Whether `cmd` runs in peer mode with options o: on by default in `s3lect
 * run` (docs/peer.md); --no-peer or S3LECT_PEER=0 turns it off; the other
 * commands never serve. -1 after a usage error (said). */
static int peer_mode_of(const char *cmd, const cli_opts *o)
{
    int peer = o->no_peer > 0 ? 0 : o->peer >= 0 ? o->peer : strcmp(cmd, "run") == 0;
    if (o->peer > 0 && o->no_peer > 0) {
        cli_usage_error(cmd, "--peer and --no-peer contradict each other; give one");
        return -1;
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
        return -1;
    }
    return peer;
}

/* Sets what the command line (and the variables read into o) gave: the
 * strings, the flags, and only the timings given (the library derives the
 * others from them, s3lect_config_is_set, and names a derived value that is
 * out of range). */
static int set_given(s3lect_config *c, const cli_opts *o, const char *id, int peer)
{
    const struct {
        const char *v;
        s3lect_option opt;
    } strs[] = {{o->lock, S3LECT_OPT_LOCK},
                {id, S3LECT_OPT_SERVER_ID},
                {o->addr, S3LECT_OPT_SERVER_ADDR},
                {o->endpoint, S3LECT_OPT_ENDPOINT},
                {o->region, S3LECT_OPT_REGION},
                {o->ca_file, S3LECT_OPT_CA_FILE},
                {o->peer_listen, S3LECT_OPT_PEER_LISTEN},
                {o->peer_cert, S3LECT_OPT_PEER_CERT},
                {o->peer_key, S3LECT_OPT_PEER_KEY},
                {o->peer_ca, S3LECT_OPT_PEER_CA},
                {o->peer_client_cert, S3LECT_OPT_PEER_CLIENT_CERT}};
    const struct {
        int64_t v;
        s3lect_option opt;
    } ints[] = {{o->lease, S3LECT_OPT_LEASE_TIMEOUT},
                {o->deadline, S3LECT_OPT_RENEW_DEADLINE},
                {o->renew, S3LECT_OPT_RENEW_INTERVAL},
                {o->frequent, S3LECT_OPT_FREQUENT_INTERVAL},
                {o->infrequent, S3LECT_OPT_INFREQUENT_INTERVAL},
                {o->skew, S3LECT_OPT_MAX_CLOCK_SKEW},
                {o->new_lock_wait, S3LECT_OPT_NEW_LOCK_WAIT},
                {o->max_hold, S3LECT_OPT_MAX_HOLD},
                {o->max_lease > 0 ? o->max_lease : -1, S3LECT_OPT_MAX_LEASE_TIMEOUT}};
    int rc = 0;
    for (size_t k = 0; !rc && k < sizeof strs / sizeof strs[0]; k++)
        rc = s3lect_config_set_str(c, strs[k].opt, strs[k].v);
    if (!rc && o->path_style == 1)
        rc = s3lect_config_set_bool(c, S3LECT_OPT_PATH_STYLE, 1);
    if (!rc && peer)
        rc = s3lect_config_set_bool(c, S3LECT_OPT_PEER_MODE, 1);
    for (size_t k = 0; !rc && k < sizeof ints / sizeof ints[0]; k++)
        if (ints[k].v >= 0)
            rc = s3lect_config_set_int(c, ints[k].opt, ints[k].v);
    if (!rc && o->priority) {
        char *end = NULL;
        long long v = strtoll(o->priority, &end, 10);
        rc = end == o->priority || *end ? S3LECT_EINVAL
                                        : s3lect_config_set_int(c, S3LECT_OPT_PRIORITY, v);
    }
    return rc;
}

s3lect_config *cli_config(const char *cmd, const cli_opts *given)
{
    const cli_opts *o = given;
    int peer = peer_mode_of(cmd, o);
    if (peer < 0)
        return NULL;
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
    int rc = set_given(c, o, o->id ? o->id : idbuf, peer);
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
    o->max_hold = -1;
    o->kill_timeout = -1;
    o->startup_timeout = -1;
    o->interval = 1000;
}

/* Edit distance (insertions, deletions, substitutions, swaps of two
 * neighbours) between a and b, counted up to 9. */
size_t cli_edit_distance(const char *a, const char *b)
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
    size_t d = cli_edit_distance(t, name);
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
        cli_opt_def opts[CLI_MAX_OPT_DEFS];
        size_t nopts = cli_opt_defs(&scratch, opts);
        unsigned bit = cli_cmd_bit(cmd);
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
