/* SPDX-License-Identifier: Apache-2.0 */
/* completion.c - `s3lect completion bash|zsh|fish`. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "options.h"

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
    {"check-store", 0, S3_STORE_OPTS " --racers --rounds --data"},
    {"init-store", 0, S3_STORE_OPTS},
    {"whoami", 0, S3_STORE_OPTS " --json"},
    {"reset-term", C_RESET, ""},
    {"stores", 0, "--json"},
    {"fence", 0,
     "get put cas rm policy --endpoint --region --ca-file --path-style --token --version"},
    {"transfer", 0, S3_STORE_OPTS " --to --timeout"},
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
    cli_opt_def opts[CLI_MAX_OPT_DEFS];
    size_t nopts = cli_opt_defs(&scratch, opts), len = 0;
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
    cli_opt_def opts[CLI_MAX_OPT_DEFS];
    size_t nopts = cli_opt_defs(&scratch, opts), len = 0;
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
    cli_opt_def opts[CLI_MAX_OPT_DEFS];
    size_t nopts = cli_opt_defs(&scratch, opts);
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

int cli_completion(int argc, char **argv)
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
