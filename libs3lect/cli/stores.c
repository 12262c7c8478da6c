/* SPDX-License-Identifier: Apache-2.0 */
/* stores.c - `s3lect stores [--json]`: the stores this s3lect knows, from the
 * scheme table (store/schemes.c), for people, tests and docs (issue 40). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "store.h"

#define CMD "stores"

const char CLI_STORES_HELP[] =
    "usage: s3lect stores [--json]\n"
    "\n"
    "Lists the stores this s3lect can keep a lock in: the lock URL of each,\n"
    "where its credentials come from, whether this build has it, what it\n"
    "needs at run time, and its section of docs/stores.md. --json prints the\n"
    "same as a JSON array (one object a store: scheme, aliases, store, usage,\n"
    "credentials, compiled, needs, home, docs) for scripts and tests.\n"
    "\n"
    "credentials: aws (the AWS credential chain, docs/s3.md), gcp (Google\n"
    "application-default credentials), azure (a Shared Key or SAS, else\n"
    "Microsoft Entra ID), url (in the lock URL or the store's own variables\n"
    "and files), none.\n"
    "\n"
    "exit codes: 0, 2 usage error.\n";

/* Rows without a noun only spell the store of the row before them another
 * way (https:// for az://, rediss:// for redis://): its aliases. */
static int is_alias_row(const st_scheme *sc)
{
    return sc->noun == NULL;
}

/* The other names of row i's store: its alias, then the alias rows after
 * it. Returns how many (at most 4). */
static size_t aliases_of(size_t i, const char *out[4])
{
    size_t n = 0;
    if (st_scheme_at(i)->alias)
        out[n++] = st_scheme_at(i)->alias;
    for (size_t k = i + 1; k < st_scheme_count() && is_alias_row(st_scheme_at(k)) && n < 4; k++)
        out[n++] = st_scheme_at(k)->name;
    return n;
}

static cJSON *store_json(size_t i)
{
    const st_scheme *sc = st_scheme_at(i);
    cJSON *o = cJSON_CreateObject(), *al = cJSON_CreateArray();
    if (!o || !al) {
        cJSON_Delete(o);
        cJSON_Delete(al);
        return NULL;
    }
    cJSON_AddStringToObject(o, "scheme", sc->name);
    const char *names[4];
    for (size_t k = 0, n = aliases_of(i, names); k < n; k++)
        cJSON_AddItemToArray(al, cJSON_CreateString(names[k]));
    cJSON_AddItemToObject(o, "aliases", al);
    cJSON_AddStringToObject(o, "store", sc->noun);
    cJSON_AddStringToObject(o, "usage", sc->usage ? sc->usage : "");
    cJSON_AddStringToObject(o, "credentials", st_cred_name(sc->cred));
    cJSON_AddBoolToObject(o, "compiled", st_scheme_compiled(sc));
    if (sc->needs)
        cJSON_AddStringToObject(o, "needs", sc->needs);
    else
        cJSON_AddNullToObject(o, "needs");
    if (sc->home)
        cJSON_AddStringToObject(o, "home", sc->home);
    else
        cJSON_AddNullToObject(o, "home");
    cJSON_AddStringToObject(o, "docs", sc->doc ? sc->doc : "docs/stores.md");
    return o;
}

static void store_text(size_t i)
{
    const st_scheme *sc = st_scheme_at(i);
    const char *names[4];
    size_t n = aliases_of(i, names);
    printf("%s://", sc->name);
    for (size_t k = 0; k < n; k++)
        printf(", %s://", names[k]);
    printf("  %s%s\n", sc->noun, st_scheme_compiled(sc) ? "" : "  [not in this build]");
    printf("    lock URL: %s\n", sc->usage ? sc->usage : "");
    printf("    credentials: %s\n", st_cred_text(sc->cred));
    if (sc->needs)
        printf("    needs: %s\n", sc->needs);
    if (sc->home)
        printf("    s3lect creates nothing: make %s with your usual tools\n", sc->home);
    printf("    docs: %s\n", sc->doc ? sc->doc : "docs/stores.md");
}

int cli_stores(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(CLI_STORES_HELP, stdout);
            return CLI_EXIT_OK;
        } else if (argv[i][0] == '-') {
            static const char *const mine[] = {"--json", "--help", NULL};
            cli_unknown_option(CMD, argv[i], mine);
            return CLI_EXIT_USAGE;
        } else {
            cli_usage_error(CMD, "takes no argument ('%.100s'): s3lect stores [--json]", argv[i]);
            return CLI_EXIT_USAGE;
        }
    }
    if (!json) {
        int first = 1;
        for (size_t i = 0; i < st_scheme_count(); i++) {
            if (is_alias_row(st_scheme_at(i)))
                continue;
            if (!first)
                putchar('\n');
            first = 0;
            store_text(i);
        }
        return CLI_EXIT_OK;
    }
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < st_scheme_count(); i++) {
        if (is_alias_row(st_scheme_at(i)))
            continue;
        cJSON *o = store_json(i);
        if (!o) {
            cJSON_Delete(arr);
            arr = NULL;
            break;
        }
        cJSON_AddItemToArray(arr, o);
    }
    char *s = arr ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    if (!s) {
        fprintf(stderr, "s3lect %s: out of memory\n", CMD);
        return CLI_EXIT_ERROR;
    }
    printf("%s\n", s);
    cJSON_free(s);
    return CLI_EXIT_OK;
}
