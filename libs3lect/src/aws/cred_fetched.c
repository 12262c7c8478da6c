/* SPDX-License-Identifier: Apache-2.0 */
/* cred_fetched.c - aws_fetched_clear (cred_provider.h): wipes and frees what
 * a credential provider fetched. */
#include <stdlib.h>
#include <string.h>

#include "cred_provider.h"

static void wipe(void *p, size_t n)
{
    if (p && n)
        explicit_bzero(p, n);
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
    wipe(f, sizeof *f);
}
