/* SPDX-License-Identifier: Apache-2.0 */
/* whoami.c - `s3lect whoami URL`: which source supplies the S3 credentials
 * for a lock, the principal where the source says it, and when they expire.
 * Never a secret, a session token or a signature (docs/s3.md). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws_creds.h"
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
    "expiry. Otherwise:\n"
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

void cli_print_credentials(const aws_chain_info *in, const char *indent, FILE *f)
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
            cli_usage_error(CMD, "unknown option '%s'", a);
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
    st_location loc;
    if (st_location_parse(o.lock, &loc, err, sizeof err) != 0) {
        cli_usage_error(CMD, "%s", err);
        s3lect_config_free(cfg);
        return CLI_EXIT_USAGE;
    }
    int is_aws = st_location_is_aws(&loc);
    int is_gcs = loc.scheme && strcmp(loc.scheme->name, "gs") == 0;
    st_location_clear(&loc);
    if (!is_aws && !is_gcs) {
        cli_usage_error(CMD, "this lock is not on an AWS store (s3://, dynamodb://, route53://) or "
                             "Google Cloud Storage (gs://); file locks use no credentials and "
                             "postgres:// ones libpq's");
        s3lect_config_free(cfg);
        return CLI_EXIT_USAGE;
    }
    aws_chain *ch;
    int rc = is_gcs ? gcp_chain_open(cfg, 0, &ch, err, sizeof err)
                    : aws_chain_open(cfg, 0, &ch, err, sizeof err);
    s3lect_config_free(cfg);
    if (rc) {
        fprintf(stderr, "s3lect %s: %s\n", CMD, err);
        return CLI_EXIT_ERROR;
    }
    aws_chain_info in;
    aws_chain_describe(ch, &in);
    if (is_gcs) {
        char *token = NULL;
        rc = aws_chain_bearer(ch, &token, NULL, err, sizeof err);
        for (volatile char *p = token; p && *p; p++)
            *p = '\0';
        free(token);
    } else {
        aws_creds cur;
        rc = aws_chain_get(ch, &cur, NULL, err, sizeof err);
        aws_creds_clear(&cur);
    }
    aws_chain_release(ch);
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
    } else {
        cli_print_credentials(&in, "", stdout);
        if (rc)
            fprintf(stderr, "s3lect %s: %s\n", CMD, err);
    }
    return rc ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
