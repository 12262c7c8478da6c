/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz.h - shared by the fuzz targets: property checks that abort loudly.
 *
 * A failed property is a crash for libFuzzer (it saves the input) and a
 * failed ctest for the corpus replay. */
#ifndef S3LECT_FUZZ_H
#define S3LECT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__, #cond);            \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* 1 when s is non-empty printable ASCII without spaces: what may go into an
 * HTTP header (credentials, tokens). The parsers check this themselves; this
 * is the fuzzers' own copy, so that a wrong check in a parser is caught. */
static inline int fuzz_header_safe(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++)
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7E)
            return 0;
    return 1;
}

/* An error message is NUL-terminated within its cap bytes and one line. */
#define FUZZ_CHECK_MSG(err, cap)                                                                   \
    do {                                                                                           \
        FUZZ_CHECK(memchr((err), '\0', (cap)) != NULL, "message not terminated");                  \
        FUZZ_CHECK(strchr((err), '\n') == NULL, "message has a newline: %s", (err));               \
    } while (0)

#endif
