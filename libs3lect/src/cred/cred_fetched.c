/* SPDX-License-Identifier: Apache-2.0 */
/* cred_fetched.c - cred_fetched_clear (cred_cache.h): wipes and frees what
 * a credential provider fetched. */
#include "cred_cache.h"
#include "util.h"

void cred_fetched_clear(cred_fetched *f)
{
    if (!f)
        return;
    u_wipe_free(f->access_key_id);
    u_wipe_free(f->secret_access_key);
    u_wipe_free(f->session_token);
    u_wipe_free(f->bearer);
    u_wipe(f, sizeof *f);
}
