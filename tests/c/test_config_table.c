/* SPDX-License-Identifier: Apache-2.0 */
/* test_config_table.c - tests/data/config_table.txt through the C API: each
 * case's values set with s3lect_config_set_text (the one S3LECT_* syntax),
 * then s3lect_config_validate; the effective values or the error text must
 * be the table's. The CLI, Python, Go and Lua run the same table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3lect.h"
#include "testutil.h"

static char *trim(char *s)
{
    while (*s == ' ')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Runs one case; msg gets the error text ("" when valid). */
static void run_case(const char *id, char *given, char *result)
{
    s3lect_config *c = s3lect_config_new();
    char msg[512] = "";
    int rc = s3lect_config_set_str(c, S3LECT_OPT_LOCK, "file:///tmp/config-table.json");
    rc = rc ? rc : s3lect_config_set_str(c, S3LECT_OPT_SERVER_ID, "table");
    for (char *save = NULL, *it = strtok_r(given, ";", &save); !rc && it;
         it = strtok_r(NULL, ";", &save)) {
        it = trim(it);
        char *eq = strchr(it, '=');
        if (!*it || !eq)
            continue;
        *eq = '\0';
        int opt = s3lect_option_by_name(it);
        CHECK(opt > 0, "%s: no option %s", id, it);
        rc = s3lect_config_set_text(c, opt, eq + 1);
    }
    rc = rc ? rc : s3lect_config_validate(c);
    if (rc)
        s3lect_config_errmsg(c, msg, sizeof msg);
    if (strncmp(result, "error ", 6) == 0) {
        CHECK(rc == S3LECT_EINVAL && strstr(msg, result + 6),
              "%s: want an error with '%s', got %d '%s'", id, result + 6, rc, msg);
    } else {
        CHECK(rc == 0, "%s: want valid, got '%s'", id, msg);
        char *save = NULL;
        for (char *it = strtok_r(result + 5, " ", &save); it; it = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(it, '=');
            *eq = '\0';
            int64_t v = -1;
            s3lect_config_get_int(c, s3lect_option_by_name(it), &v);
            CHECK(v == strtoll(eq + 1, NULL, 10), "%s: %s is %lld, want %s", id, it, (long long)v,
                  eq + 1);
        }
    }
    s3lect_config_free(c);
}

int main(int argc, char **argv)
{
    FILE *f = fopen(argc > 1 ? argv[1] : "tests/data/config_table.txt", "r");
    CHECK(f != NULL, "cannot open the table");
    char line[1024];
    int cases = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *a = strstr(line, " | "), *b = a ? strstr(a + 3, " | ") : NULL;
        CHECK(b != NULL, "bad line: %s", line);
        if (!b)
            continue;
        *a = *b = '\0';
        run_case(trim(line), a + 3, trim(b + 3));
        cases++;
    }
    if (f)
        fclose(f);
    CHECK(cases >= 30, "the table has %d cases, want at least 30", cases);
    return t_done("config_table");
}
