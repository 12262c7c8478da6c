/* SPDX-License-Identifier: Apache-2.0 */
/* whoami.c - `s3lect whoami URL`: which source supplies the S3 credentials
 * for a lock, the principal where the source says it, and when they expire.
 * Never a secret, a session token or a signature (docs/s3.md). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws_creds.h"
#include "az_auth.h"
#include "az_creds.h"
#include "cli.h"
#include "gcp_creds.h"
#include "store.h"
#include "util.h"

#define CMD "whoami"

static const char HELP[] =
    "usage: s3lect whoami URL [--json] [S3 options]\n"
    "\n"
    "For gs:// locks: which Google source supplies the access token (key file,\n"
    "gcloud application-default credentials, workload identity federation, the\n"
    "metadata server; docs/stores.md), the service account and the token's\n"
    "expiry. For az:// locks: the explicit Shared Key or SAS source, or the\n"
    "Entra ID source (client secret or certificate, workload identity, managed\n"
    "identity), the token's appid/oid and its expiry. Otherwise:\n"
    "Says which source supplies the S3 credentials for the lock at URL (the\n"
    "provider chain of docs/s3.md: configuration, environment, web identity,\n"
    "profile, container, instance metadata), the principal where the source\n"
    "names it (the assumed role's ARN from STS, the SSO role) and when the\n"
    "credentials expire. It fetches them as s3lect run would (this may call\n"
    "STS, SSO, a credential_process or instance metadata) and never prints a\n"
    "secret, a session token or a signature.\n"
    "\n"
    "options:\n"
    "  --json                  one JSON object\n"
    "  --endpoint URL, --region REGION, --ca-file FILE, --path-style\n"
    "\n"
    "exit codes: 0 credentials found, 1 none (the message says what to set),\n"
    "2 usage error.\n";

static void fmt_in(int64_t ms, char *out, size_t n)
{
    if (ms < 0)
        snprintf(out, n, "%.0fs ago", -ms / 1000.0);
    else if (ms < 120000)
        snprintf(out, n, "in %.0fs", ms / 1000.0);
    else if (ms < 2 * 3600000)
        snprintf(out, n, "in %lldm", (long long)(ms / 60000));
    else
        snprintf(out, n, "in %.1fh", ms / 3600000.0);
}

void cli_print_credentials(const cred_cache_info *in, const char *indent, FILE *f)
{
    char when[40], rel[40];
    fprintf(f, "%scredentials: %s\n", indent, in->source);
    fprintf(f, "%sprincipal:   %s\n", indent,
            in->principal[0] ? in->principal : "(not known: this source does not say)");
    if (in->expires_ms) {
        u_format_rfc3339(in->expires_ms, when, sizeof when);
        fmt_in(in->expires_ms - u_wall_ms(), rel, sizeof rel);
        fprintf(f, "%sexpires:     %s (%s; refreshed in the background before then)\n", indent,
                when, rel);
    } else {
        fprintf(f, "%sexpires:     never (long-lived keys)\n", indent);
    }
    if (in->last_error[0])
        fprintf(f, "%slast refresh failed: %s\n", indent, in->last_error);
}

static int parse(int argc, char **argv, cli_opts *o)
{
    cli_opts_init(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(HELP, stdout);
            return 1;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        int r = a[0] == '-' ? cli_common_opt(CMD, argc, argv, &i, o) : 0;
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        if (a[0] == '-') {
            static const char *const own[] = {"--json", NULL};
            cli_unknown_option(CMD, a, own);
            return -1;
        }
        if (o->lock) {
            cli_usage_error(CMD, "more than one lock URL ('%s' and '%s')", o->lock, a);
            return -1;
        }
        o->lock = a;
    }
    if (!o->lock) {
        cli_usage_error(CMD, "missing lock URL, e.g. s3lect whoami s3://bucket/leader.json");
        return -1;
    }
    return 0;
}

/* The credentials a lock's store would use: source, principal, expiry (in).
 * fetch: fetch them now (whoami: are they usable?), else only describe what
 * the cache holds (check-store: its store fetched them already). Returns
 * CLI_CRED_BADLOCK with err for a lock URL that does not parse, CLI_CRED_NONE
 * for a lock whose store takes no cloud credentials (file,
 * postgres://), CLI_CRED_ERROR with err when they cannot even be looked up,
 * CLI_CRED_UNUSABLE with err when fetching them failed, else CLI_CRED_OK;
 * *no_token: a gs:// emulator that takes requests without any. */
int cli_credentials_info(const s3lect_config *cfg, const char *lock, int fetch, cred_cache_info *in,
                         int *no_token, char *err, size_t errlen)
{
    memset(in, 0, sizeof *in);
    *no_token = 0;
    st_location loc;
    if (st_location_parse(lock, &loc, err, errlen) != 0)
        return CLI_CRED_BADLOCK;
    int cred = st_location_cred(&loc); /* the row's, or the lock's own (?auth=aws-iam) */
    int is_aws = cred == ST_CRED_AWS, is_gcs = cred == ST_CRED_GCP, is_az = cred == ST_CRED_AZURE;
    char account[64];
    snprintf(account, sizeof account, "%s", is_az && loc.bucket ? loc.bucket : "");
    if (cred == ST_CRED_KUBE) {
        /* k8s://: the pod's service account or a kubeconfig (never the token) */
        int rc = st_k8s_whoami(&loc, fetch, in->source, sizeof in->source, in->principal,
                               sizeof in->principal, &in->expires_ms, err, errlen);
        st_location_clear(&loc);
        if (rc == S3LECT_EINVAL || rc == S3LECT_ENOMEM)
            return CLI_CRED_ERROR;
        return rc ? CLI_CRED_UNUSABLE : CLI_CRED_OK;
    }
    st_location_clear(&loc);
    if (!is_aws && !is_gcs && !is_az)
        return CLI_CRED_NONE;
    if (is_az) {
        /* An explicit Shared Key or SAS is used before any Entra ID source. */
        az_creds ac;
        if (az_creds_resolve(account, &ac, err, errlen) != 0)
            return CLI_CRED_ERROR;
        int kind = ac.kind;
        if (kind != AZ_CRED_NONE) {
            snprintf(in->source, sizeof in->source, "%s (%s)", ac.source,
                     kind == AZ_CRED_SAS ? "SAS token" : "Shared Key");
            snprintf(in->principal, sizeof in->principal, "storage account %s", account);
            const char *se = ac.sas ? strstr(ac.sas, "se=") : NULL;
            if (se && (se == ac.sas || se[-1] == '&')) {
                char when[64];
                size_t n = strcspn(se + 3, "&");
                snprintf(when, sizeof when, "%.*s", (int)(n < 60 ? n : 60), se + 3);
                for (char *c = when, *d = when;; c++) { /* %3A -> ':' */
                    if (c[0] == '%' && c[1] == '3' && (c[2] == 'A' || c[2] == 'a')) {
                        *d++ = ':';
                        c += 2;
                    } else if (!(*d++ = *c)) {
                        break;
                    }
                }
                if (u_parse_rfc3339(when, &in->expires_ms) != 0)
                    in->expires_ms = 0;
            }
        }
        az_creds_clear(&ac);
        if (kind != AZ_CRED_NONE)
            return CLI_CRED_OK; /* explicit: nothing to fetch */
    }
    int flags = fetch ? 0 : CRED_CACHE_NOWAIT;
    int emulator = 0; /* gs:// only: an emulator takes requests without a token */
    cred_cache *ch = NULL;
    int rc = is_gcs ? st_gcs_emulator(cfg, &emulator, err, errlen) : 0;
    if (!rc)
        rc = is_az    ? az_chain_open(cfg, flags, &ch, err, errlen)
             : is_gcs ? gcp_chain_open(cfg, flags | (emulator ? GCP_CHAIN_OPTIONAL : 0), &ch, err,
                                       errlen)
                      : aws_chain_open(cfg, flags, &ch, err, errlen);
    if (rc)
        return CLI_CRED_ERROR;
    if (!ch) {
        *no_token = 1;
        snprintf(in->source, sizeof in->source,
                 "none needed: an emulator (STORAGE_EMULATOR_HOST, or an http:// loopback "
                 "endpoint) takes requests without a token");
        return CLI_CRED_OK;
    }
    cred_cache_describe(ch, in);
    if (fetch && (is_gcs || is_az)) {
        char *token = NULL;
        rc = cred_cache_bearer(ch, &token, NULL, err, errlen);
        for (volatile char *p = token; p && *p; p++)
            *p = '\0';
        free(token);
    } else if (fetch) {
        aws_creds cur;
        rc = aws_chain_get(ch, &cur, NULL, err, errlen);
        aws_creds_clear(&cur);
    }
    cred_cache_release(ch);
    return rc ? CLI_CRED_UNUSABLE : CLI_CRED_OK;
}

/* From the scheme table: "s3://, dynamodb://, route53:// (aws), gs:// (gcp),
 * ..." into chains, the stores with credentials of their own into own. */
static void schemes_by_cred(char *chains, size_t cn, char *own, size_t on)
{
    size_t cl = 0, ol = 0;
    chains[0] = own[0] = '\0';
    for (int kind = ST_CRED_AWS; kind <= ST_CRED_KUBE; kind++) {
        int first = 1;
        for (size_t i = 0; i < st_scheme_count(); i++) {
            const st_scheme *sc = st_scheme_at(i);
            if (!sc->noun || sc->cred != kind || !st_scheme_compiled(sc))
                continue;
            char *buf = kind == ST_CRED_URL ? own : chains;
            size_t *len = kind == ST_CRED_URL ? &ol : &cl, n = kind == ST_CRED_URL ? on : cn;
            int w = snprintf(buf + *len, n - *len, "%s%s://", *len ? ", " : "", sc->name);
            if (w > 0 && (size_t)w < n - *len)
                *len += (size_t)w;
            first = 0;
        }
        if (!first && kind != ST_CRED_URL) {
            int w = snprintf(chains + cl, cn - cl, " (%s)", st_cred_name(kind));
            if (w > 0 && (size_t)w < cn - cl)
                cl += (size_t)w;
        }
    }
}

int cli_whoami(int argc, char **argv)
{
    cli_opts o;
    int p = parse(argc, argv, &o);
    if (p)
        return p > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!o.id)
        o.id = "s3lect-cli";
    s3lect_config *cfg = cli_config(CMD, &o);
    if (!cfg)
        return CLI_EXIT_USAGE;
    char err[600];
    cred_cache_info in;
    int no_token = 0;
    int cr = cli_credentials_info(cfg, o.lock, 1, &in, &no_token, err, sizeof err);
    s3lect_config_free(cfg);
    if (cr == CLI_CRED_NONE) {
        char chains[400], own[200];
        schemes_by_cred(chains, sizeof chains, own, sizeof own);
        cli_usage_error(CMD,
                        "this lock's store has no credential chain to report: whoami reports "
                        "those of %s; %s take theirs from the lock URL and their own variables "
                        "and files (postgres:// and mysql:// with ?auth=aws-iam: the AWS chain), "
                        "and file:// and mem:// use none",
                        chains, own);
        return CLI_EXIT_USAGE;
    }
    if (cr == CLI_CRED_BADLOCK) {
        cli_usage_error(CMD, "%s", err);
        return CLI_EXIT_USAGE;
    }
    if (cr == CLI_CRED_ERROR) {
        fprintf(stderr, "s3lect %s: %s\n", CMD, err);
        return CLI_EXIT_ERROR;
    }
    int rc = cr == CLI_CRED_UNUSABLE;
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        if (!j)
            return CLI_EXIT_ERROR;
        cJSON_AddStringToObject(j, "source", in.source);
        if (in.principal[0])
            cJSON_AddStringToObject(j, "principal", in.principal);
        else
            cJSON_AddNullToObject(j, "principal");
        if (in.expires_ms) {
            char when[40];
            u_format_rfc3339(in.expires_ms, when, sizeof when);
            cJSON_AddStringToObject(j, "expires", when);
        } else {
            cJSON_AddNullToObject(j, "expires");
        }
        cJSON_AddBoolToObject(j, "usable", rc == 0);
        if (rc)
            cJSON_AddStringToObject(j, "error", err);
        char *txt = cJSON_PrintUnformatted(j);
        if (txt)
            printf("%s\n", txt);
        free(txt);
        cJSON_Delete(j);
    } else if (no_token) {
        printf("credentials: %s\n", in.source);
    } else {
        cli_print_credentials(&in, "", stdout);
        if (rc)
            fprintf(stderr, "s3lect %s: %s\n", CMD, err);
    }
    return rc ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
