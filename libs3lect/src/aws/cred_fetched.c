/* SPDX-License-Identifier: Apache-2.0 */
/* cred_fetched.c - aws_fetched_clear (cred_sources.h): wipes and frees what
 * a credential provider fetched. */
#include <stdlib.h>
#include <string.h>

#include "cred_sources.h"

/* memset through a volatile pointer: the compiler cannot prove what it calls,
 * so it cannot drop the store as dead. explicit_bzero would do, but needs
 * glibc 2.25 and the release builds target glibc 2.17 (docs/build.md). */
static void *(*const volatile wipe_memset)(void *, int, size_t) = memset;

static void wipe(void *p, size_t n)
{
    if (p && n)
        wipe_memset(p, 0, n);
}

static void wipe_free(char *s)
{
    if (s) {
        wipe(s, strlen(s));
        free(s);
    }
}

void aws_fetched_clear(aws_fetched *f)
{
    if (!f)
        return;
    wipe_free(f->access_key_id);
    wipe_free(f->secret_access_key);
    wipe_free(f->session_token);
    wipe_free(f->bearer);
    wipe(f, sizeof *f);
}
