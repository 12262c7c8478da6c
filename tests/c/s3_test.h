/* SPDX-License-Identifier: Apache-2.0 */
/* s3_test.h - assertion helpers of the S3 layer's C tests, on testutil.h. */
#ifndef S3LECT_S3_TEST_H
#define S3LECT_S3_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define CHECK_STR(got, want, what)                                                                 \
    do {                                                                                           \
        const char *g_ = (got), *w_ = (want);                                                      \
        CHECK(g_ &&w_ &&strcmp(g_, w_) == 0, "%s:\n  got:  [%s]\n  want: [%s]", (what),            \
              g_ ? g_ : "(null)", w_ ? w_ : "(null)");                                             \
    } while (0)

#define CHECK_INT(got, want, what)                                                                 \
    do {                                                                                           \
        long long g_ = (long long)(got), w_ = (long long)(want);                                   \
        CHECK(g_ == w_, "%s: got %lld, want %lld", (what), g_, w_);                                \
    } while (0)

/* Prints the summary (testutil's t_done) and fails a suite that checked nothing. */
static inline int t_finish(const char *name)
{
    if (t_checks == 0) {
        fprintf(stderr, "%s: no checks ran\n", name);
        return 1;
    }
    return t_done(name);
}

/* Reads a whole file, NUL-terminated; NULL if it cannot be read. *len gets its size. */
static inline char *t_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0;
    if (!f)
        return NULL;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *p = realloc(buf, cap);
            if (!p) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

#endif
