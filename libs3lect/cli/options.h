/* SPDX-License-Identifier: Apache-2.0 */
/* options.h - the CLI's option table, shared by the commands' parsers
 * (options.c) and the completion writers (completion.c). Private to cli/. */
#ifndef S3LECT_CLI_OPTIONS_H
#define S3LECT_CLI_OPTIONS_H

#include <stddef.h>

#include "cli.h"

/* Which subcommands take an option. */
enum {
    C_RUN = 1,
    C_STATUS = 2,
    C_WATCH = 4,
    C_CHECK = 8,
    C_RESET = 16,
    C_READ = C_STATUS | C_WATCH
};

/* The command's bit (C_*): run, status, watch, reset-term; any other
 * command is C_CHECK (check-store, init-store, whoami). */
unsigned cli_cmd_bit(const char *cmd);

enum { K_STR, K_DUR, K_FLAG };
typedef struct cli_opt_def {
    const char *name;
    int kind;
    unsigned cmds;
    const char **str;
    int64_t *dur;
    int *flag;
} cli_opt_def;
#define CLI_MAX_OPT_DEFS 40

/* The options of every command, bound to o's fields; returns their number. */
size_t cli_opt_defs(cli_opts *o, cli_opt_def *out);

/* Edit distance between a and b (insertions, deletions, substitutions,
 * swaps of two neighbours), counted up to 9: "did you mean". */
size_t cli_edit_distance(const char *a, const char *b);

/* The lock options' help, shared by run's help and the read commands'. */
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

#endif
