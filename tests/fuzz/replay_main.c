/* SPDX-License-Identifier: Apache-2.0 */
/* replay_main.c - runs a fuzz target over saved inputs without libFuzzer.
 *
 *   replay_<target> PATH...
 *
 * Every PATH that is a directory contributes its regular files (sorted by
 * name, not recursive), every other PATH is one input. Each input is copied
 * into a buffer of exactly its size (so reading past the end is an ASan
 * error in sanitizer builds) and passed to LLVMFuzzerTestOneInput once. A
 * failed property aborts. Exits 1 if no input was found: an empty corpus
 * would prove nothing. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    /* Exactly the file's size (at least 1 byte, as malloc(0) may return NULL). */
    size_t len = (size_t)st.st_size;
    uint8_t *buf = malloc(len ? len : 1);
    size_t got = buf ? fread(buf, 1, len, f) : 0;
    fclose(f);
    if (!buf || got != len) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(buf);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open directory %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **p = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *names);
            if (!p) {
                rc = -1;
                break;
            }
            names = p;
        }
        size_t l = strlen(dir) + strlen(de->d_name) + 2;
        if (!(names[n] = malloc(l))) {
            rc = -1;
            break;
        }
        snprintf(names[n++], l, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(names[i]) != 0)
                rc = -1;
            else
                (*count)++;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        if (S_ISDIR(st.st_mode) ? run_dir(argv[i], &count) != 0 : run_file(argv[i]) != 0)
            return 1;
        if (!S_ISDIR(st.st_mode))
            count++;
    }
    if (count == 0) {
        fprintf(stderr, "replay: no inputs found in the given paths\n");
        return 1;
    }
    printf("replayed %zu inputs\n", count);
    return 0;
}
