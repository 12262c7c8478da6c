/* SPDX-License-Identifier: Apache-2.0 */
/* fence.c - `s3lect fence get|put|cas|rm|policy`: fenced writes for commands
 * and scripts (docs/fencing.md), with the fence token `s3lect run` gives its
 * command (S3LECT_FENCE_TOKEN). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "options.h"
#include "store.h"

#define CMD "fence"
/* The most a command hands to a fenced write (a store's read limit is 1 MiB). */
#define FENCE_MAX_INPUT (1024 * 1024)

/* Exit codes (documented in the help and docs/cli.md). */
enum {
    FX_NOT_FOUND = 3,    /* get: no object, or a fenced delete's tombstone */
    FX_PRECONDITION = 4, /* cas: the object is not at the version given */
    FX_RETRIES = 5,      /* other writers kept changing it */
    FX_FENCED = 75       /* a newer term (or another holder of ours) owns it */
};

static const char HELP[] =
    "usage: s3lect fence get [options] URL [FILE|-]\n"
    "       s3lect fence put [options] URL [FILE|-]\n"
    "       s3lect fence cas [options] [--version V] URL [FILE|-]\n"
    "       s3lect fence rm [options] URL\n"
    "       s3lect fence policy s3://BUCKET/PREFIX\n"
    "\n"
    "Fenced writes (docs/fencing.md): writes of the leader's own objects that\n"
    "the store refuses once a newer leadership term has written them, so that\n"
    "a deposed leader (frozen, paused, partitioned) cannot overwrite its\n"
    "successor's data. The term and holder come from the fence token that\n"
    "`s3lect run` gives its command as S3LECT_FENCE_TOKEN (or --token). URL is\n"
    "an object of a lock URL's form: s3://BUCKET/KEY, gs://, az://, file://.\n"
    "\n"
    "  get     the object's bytes to FILE (with FILE: its version and term on\n"
    "          stdout, 'VERSION TERM'), or to stdout\n"
    "  put     writes FILE (or stdin)\n"
    "  cas     writes only over --version V (from get; none: only where there\n"
    "          is no object): read-modify-write\n"
    "  rm      deletes it (a tombstone: a deposed leader cannot create it again)\n"
    "  policy  prints an S3 bucket policy that refuses every PutObject under\n"
    "          the prefix without If-Match or If-None-Match, and every\n"
    "          DeleteObject, so that no writer bypasses the fence (it also\n"
    "          refuses CopyObject and multipart uploads there)\n"
    "\n"
    "options:\n"
    "  --token T               the fence token (default: $S3LECT_FENCE_TOKEN)\n"
    "  --version V             cas: the version to write over\n"
    "  --endpoint URL, --region REGION, --ca-file FILE, --path-style\n"
    "\n"
    "exit codes: 0 done, 1 store or other error, 2 usage error, 3 get: no\n"
    "object (or deleted), 4 cas: not at that version, 5 the object kept changing\n"
    "(retries exhausted), 75 fenced: a newer term owns the object.\n";

/* Reads all of f (at most FENCE_MAX_INPUT bytes). NULL with errno. */
static char *read_all(FILE *f, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
        if (n == cap) {
            if (cap > FENCE_MAX_INPUT) {
                free(buf);
                errno = EFBIG;
                return NULL;
            }
            char *b = realloc(buf, cap * 2);
            if (!b)
                free(buf);
            buf = b;
            cap *= 2;
        }
    }
    if (buf && (ferror(f) || n > FENCE_MAX_INPUT)) {
        int e = ferror(f) ? EIO : EFBIG;
        free(buf);
        errno = e;
        return NULL;
    }
    *len = n;
    return buf;
}

/* `s3lect fence policy s3://BUCKET/PREFIX` */
static int print_policy(const char *url)
{
    const char *rest = strncmp(url, "s3://", 5) == 0 ? url + 5 : NULL;
    const char *slash = rest ? strchr(rest, '/') : NULL;
    size_t bl = slash ? (size_t)(slash - rest) : rest ? strlen(rest) : 0;
    if (!rest || bl == 0 || bl > 63 ||
        strspn(rest, "abcdefghijklmnopqrstuvwxyz0123456789.-") < bl) {
        cli_usage_error(CMD,
                        "policy takes s3://BUCKET/PREFIX (an S3 bucket name: 3 to 63 of "
                        "a-z, 0-9, '.', '-'), not '%.200s'",
                        url);
        return CLI_EXIT_USAGE;
    }
    const char *prefix = slash ? slash + 1 : "";
    for (const char *p = prefix; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\' || *p == '*' || *p == '?') {
            cli_usage_error(CMD, "the prefix may not hold control characters, quotes, '\\', '*' "
                                 "or '?'");
            return CLI_EXIT_USAGE;
        }
    printf("{\n"
           "  \"Version\": \"2012-10-17\",\n"
           "  \"Statement\": [\n"
           "    {\n"
           "      \"Sid\": \"S3lectFencedWritesOnly\",\n"
           "      \"Effect\": \"Deny\",\n"
           "      \"Principal\": \"*\",\n"
           "      \"Action\": \"s3:PutObject\",\n"
           "      \"Resource\": \"arn:aws:s3:::%.*s/%s*\",\n"
           "      \"Condition\": {\n"
           "        \"Null\": {\"s3:if-match\": \"true\", \"s3:if-none-match\": \"true\"}\n"
           "      }\n"
           "    },\n"
           "    {\n"
           "      \"Sid\": \"S3lectNoPlainDeletes\",\n"
           "      \"Effect\": \"Deny\",\n"
           "      \"Principal\": \"*\",\n"
           "      \"Action\": [\"s3:DeleteObject\", \"s3:DeleteObjectVersion\"],\n"
           "      \"Resource\": \"arn:aws:s3:::%.*s/%s*\"\n"
           "    }\n"
           "  ]\n"
           "}\n",
           (int)bl, rest, prefix, (int)bl, rest, prefix);
    return CLI_EXIT_OK;
}

typedef struct fence_args {
    cli_opts o;
    const char *sub, *url, *file, *token, *version;
} fence_args;

/* One argument at argv[*i]: --token/--version (own), a shared option, or a
 * positional (SUB, URL, FILE). 1: help printed; -1: usage error (said). */
static int parse_arg(int argc, char **argv, int *i, fence_args *a)
{
    const char *s = argv[*i];
    if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
        fputs(HELP, stdout);
        return 1;
    }
    const char **own = !strcmp(s, "--token") || !strncmp(s, "--token=", 8)        ? &a->token
                       : !strcmp(s, "--version") || !strncmp(s, "--version=", 10) ? &a->version
                                                                                  : NULL;
    if (own) {
        const char *eq = strchr(s, '=');
        if (!eq && *i + 1 >= argc) {
            cli_usage_error(CMD, "%s needs a value", s);
            return -1;
        }
        *own = eq ? eq + 1 : argv[++*i];
        return 0;
    }
    int r = s[0] == '-' && s[1] ? cli_common_opt(CMD, argc, argv, i, &a->o) : 0;
    if (r != 0)
        return r < 0 ? -1 : 0;
    if (s[0] == '-' && s[1]) {
        static const char *const extra[] = {"--token", "--version", NULL};
        cli_unknown_option(CMD, s, extra);
        return -1;
    }
    const char **pos = !a->sub ? &a->sub : !a->url ? &a->url : !a->file ? &a->file : NULL;
    if (!pos) {
        cli_usage_error(CMD, "too many arguments ('%.100s')", s);
        return -1;
    }
    *pos = s;
    return 0;
}

/* The arguments together make sense. -1: usage error (said). */
static int check_args(fence_args *a)
{
    if (!a->url && a->o.lock)
        a->url = a->o.lock; /* --lock URL */
    static const char *const subs[] = {"get", "put", "cas", "rm", "policy"};
    int known = 0;
    for (size_t k = 0; a->sub && k < sizeof subs / sizeof subs[0]; k++)
        known |= strcmp(a->sub, subs[k]) == 0;
    if (!known) {
        cli_usage_error(CMD,
                        a->sub ? "unknown subcommand '%.50s'; use get, put, cas, rm or policy"
                               : "missing subcommand%.0s: get, put, cas, rm or policy",
                        a->sub ? a->sub : "");
        return -1;
    }
    if (!a->url) {
        cli_usage_error(CMD, "missing URL, e.g. s3lect fence %s s3://bucket/state.json", a->sub);
        return -1;
    }
    if ((!strcmp(a->sub, "rm") || !strcmp(a->sub, "policy")) && a->file) {
        cli_usage_error(CMD, "%s takes no FILE", a->sub);
        return -1;
    }
    if (a->version && strcmp(a->sub, "cas") != 0) {
        cli_usage_error(CMD, "--version is for cas");
        return -1;
    }
    return 0;
}

/* Parses `s3lect fence SUB ...`. 1: help printed; -1: usage error (said). */
static int parse(int argc, char **argv, fence_args *a)
{
    memset(a, 0, sizeof *a);
    cli_opts_init(&a->o);
    for (int i = 1; i < argc; i++) {
        int r = parse_arg(argc, argv, &i, a);
        if (r)
            return r;
    }
    return check_args(a);
}

static int exit_code(int rc)
{
    switch (rc) {
    case S3LECT_OK:
        return CLI_EXIT_OK;
    case S3LECT_ENOTFOUND:
        return FX_NOT_FOUND;
    case S3LECT_EPRECONDITION:
        return FX_PRECONDITION;
    case S3LECT_ERETRIES:
        return FX_RETRIES;
    case S3LECT_EFENCED:
        return FX_FENCED;
    case S3LECT_EINVAL:
        return CLI_EXIT_USAGE;
    default:
        return CLI_EXIT_ERROR;
    }
}

/* get: the body to FILE (then "VERSION TERM" on stdout) or stdout. */
static int fence_get(s3lect_fence *f, const fence_args *a)
{
    char *body = NULL, *version = NULL;
    size_t len = 0;
    int64_t term = 0;
    int rc = s3lect_fenced_get(f, a->url, &body, &len, &version, &term);
    if (rc == S3LECT_OK) {
        int to_stdout = !a->file || !strcmp(a->file, "-");
        FILE *out = to_stdout ? stdout : fopen(a->file, "wb");
        if (!out || fwrite(body, 1, len, out) != len || (!to_stdout && fclose(out) != 0)) {
            fprintf(stderr, "s3lect %s: cannot write %s: %s\n", CMD, to_stdout ? "stdout" : a->file,
                    strerror(errno));
            rc = S3LECT_EIO;
        } else if (!to_stdout) {
            printf("%s %lld\n", version, (long long)term);
        }
    }
    s3lect_free(body);
    s3lect_free(version);
    return rc;
}

static int fence_write(s3lect_fence *f, const fence_args *a)
{
    if (!strcmp(a->sub, "rm"))
        return s3lect_fenced_delete(f, a->url);
    int from_stdin = !a->file || !strcmp(a->file, "-");
    FILE *in = from_stdin ? stdin : fopen(a->file, "rb");
    size_t len = 0;
    char *data = in ? read_all(in, &len) : NULL;
    int e = errno;
    if (in && !from_stdin)
        fclose(in);
    if (!data) {
        fprintf(stderr, "s3lect %s: cannot read %s: %s\n", CMD, from_stdin ? "stdin" : a->file,
                e == EFBIG ? "larger than 1 MiB" : strerror(e));
        return S3LECT_EIO;
    }
    int rc = !strcmp(a->sub, "put") ? s3lect_fenced_put(f, a->url, data, len)
                                    : s3lect_fenced_cas(f, a->url, data, len, a->version);
    free(data);
    return rc;
}

int cli_fence(int argc, char **argv)
{
    fence_args a;
    int p = parse(argc, argv, &a);
    if (p)
        return p > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!strcmp(a.sub, "policy"))
        return print_policy(a.url);
    const char *token = a.token ? a.token : getenv("S3LECT_FENCE_TOKEN");
    if (!token || !*token) {
        cli_usage_error(CMD, "no fence token: run this under `s3lect run` (it gives its command "
                             "S3LECT_FENCE_TOKEN) or give --token");
        return CLI_EXIT_USAGE;
    }
    a.o.lock = a.url; /* the configuration's store: the object's */
    if (!a.o.id)
        a.o.id = "s3lect-fence";
    s3lect_config *cfg = cli_config(CMD, &a.o);
    if (!cfg)
        return CLI_EXIT_USAGE;
    s3lect_fence *f = NULL;
    int rc = s3lect_fence_new_token(cfg, token, &f);
    s3lect_config_free(cfg);
    if (rc == S3LECT_EINVAL) {
        cli_usage_error(CMD, "%s is not a fence token (s3lect-fence.1.TERM.HOLDER.LOCK)",
                        a.token ? "--token" : "S3LECT_FENCE_TOKEN");
        return CLI_EXIT_USAGE;
    }
    if (rc == S3LECT_OK)
        rc = !strcmp(a.sub, "get") ? fence_get(f, &a) : fence_write(f, &a);
    if (rc != S3LECT_OK && rc != S3LECT_EIO) {
        char msg[600] = "";
        if (f)
            s3lect_fence_errmsg(f, msg, sizeof msg);
        fprintf(stderr, "s3lect %s %s: %s\n", CMD, a.sub, msg[0] ? msg : s3lect_strerror(rc));
    }
    s3lect_fence_free(f);
    return exit_code(rc);
}
