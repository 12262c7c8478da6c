/* SPDX-License-Identifier: Apache-2.0 */
/* transfer.c - s3lect_transfer and s3lect_transfer_commit: handing the lock
 * to a named live follower (engine/el_transfer.c; docs/algorithm.md
 * "Transfer"). */
#include <pthread.h>

#include "runtime.h"
#include "s3lect.h"

int s3lect_transfer(s3lect_elector *e, const char *target_id)
{
    if (!e)
        return S3LECT_EINVAL;
    pthread_mutex_lock(&e->mu);
    int rc =
        e->started && !e->stopped ? el_transfer(&e->eng, target_id, rt_now(e)) : S3LECT_ENOTLEADER;
    if (rc == 0)
        rt_kick_locked(e);
    pthread_mutex_unlock(&e->mu);
    if (rc == S3LECT_EUNSUPPORTED)
        return rt_fail(e, rc,
                       "s3lect_transfer: this store's reads may be stale (Route 53): transfers "
                       "are not supported on it");
    if (rc == S3LECT_EINVAL)
        return rt_fail(e, rc, "s3lect_transfer: '%s' is not a node id this leader can hand over to",
                       target_id ? target_id : "");
    return rc;
}

int s3lect_transfer_commit(s3lect_elector *e)
{
    if (!e)
        return S3LECT_EINVAL;
    pthread_mutex_lock(&e->mu);
    int rc = el_transfer_commit(&e->eng);
    if (rc == 0)
        rt_kick_locked(e);
    pthread_mutex_unlock(&e->mu);
    return rc;
}
