/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - the s3lect command: its help and version, and which command runs.
 * The commands live in their files (run.c, read_cmds.c, check_store.c,
 * whoami.c, stores.c, fence.c, transfer.c, completion.c), the help texts in help.c and the
 * options the commands share in options.c. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "options.h"

static const char *const COMMANDS[] = {"run",        "status",   "watch",      "check-store",
                                       "init-store", "whoami",   "reset-term", "stores",
                                       "fence",      "transfer", "help",       "completion"};

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

/* "unknown command 'stats'; did you mean status?" (or the list of commands). */
static int unknown_command(const char *cmd)
{
    const char *best = NULL;
    size_t best_d = 9, n = strlen(cmd);
    for (size_t k = 0; k < sizeof COMMANDS / sizeof COMMANDS[0]; k++) {
        size_t d = cli_edit_distance(cmd, COMMANDS[k]);
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        cli_usage_error(NULL, "missing command; commands: %s", command_list());
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        cli_print_main_help();
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
            cli_print_main_help();
        else if (strcmp(sub, "run") == 0)
            cli_print_run_help();
        else if (strcmp(sub, "status") == 0 || strcmp(sub, "watch") == 0 ||
                 strcmp(sub, "reset-term") == 0) {
            char *av[] = {(char *)sub, "--help", NULL};
            return strcmp(sub, "status") == 0  ? cli_status(2, av)
                   : strcmp(sub, "watch") == 0 ? cli_watch(2, av)
                                               : cli_reset_term(2, av);
        } else if (strcmp(sub, "check-store") == 0) {
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
            return cli_completion(2, av);
        } else if (strcmp(sub, "stores") == 0) {
            fputs(CLI_STORES_HELP, stdout);
        } else if (strcmp(sub, "fence") == 0) {
            char *av[] = {"fence", "--help", NULL};
            return cli_fence(2, av);
        } else if (strcmp(sub, "transfer") == 0) {
            char *av[] = {"transfer", "--help", NULL};
            return cli_transfer(2, av);
        } else {
            return unknown_command(sub);
        }
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "run") == 0)
        return cli_run(argc - 1, argv + 1);
    if (strcmp(cmd, "status") == 0)
        return cli_status(argc - 1, argv + 1);
    if (strcmp(cmd, "watch") == 0)
        return cli_watch(argc - 1, argv + 1);
    if (strcmp(cmd, "reset-term") == 0)
        return cli_reset_term(argc - 1, argv + 1);
    if (strcmp(cmd, "check-store") == 0)
        return cli_check_store(argc - 1, argv + 1);
    if (strcmp(cmd, "init-store") == 0)
        return cli_init_store(argc - 1, argv + 1);
    if (strcmp(cmd, "whoami") == 0)
        return cli_whoami(argc - 1, argv + 1);
    if (strcmp(cmd, "completion") == 0)
        return cli_completion(argc - 1, argv + 1);
    if (strcmp(cmd, "stores") == 0)
        return cli_stores(argc - 1, argv + 1);
    if (strcmp(cmd, "fence") == 0)
        return cli_fence(argc - 1, argv + 1);
    if (strcmp(cmd, "transfer") == 0)
        return cli_transfer(argc - 1, argv + 1);
    return unknown_command(cmd);
}
