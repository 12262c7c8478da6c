/* SPDX-License-Identifier: Apache-2.0 */
/* workers.c - the runtime's worker threads: they run the stores that block
 * (file locks, custom stores) (docs/threading.md). */
#include <errno.h>

#include "crypto.h"
#include "runtime.h"

/* ---- workers: blocking stores ---- */

void *rt_worker_main(void *arg)
{
    rt_runtime *rt = arg;
    rt_tls_runtime = rt;
    rt_tls_worker = 1;
    pthread_mutex_lock(&rt->mu);
    for (;;) {
        int timed_out = 0;
        while (!rt->job_head && !rt->exiting && !timed_out) {
            rt->idle_workers++;
            struct timespec ts = u_cond_deadline(u_mono_ms() + RT_EXTRA_IDLE_MS, 0);
            timed_out = pthread_cond_timedwait(&rt->work_cv, &rt->mu, &ts) == ETIMEDOUT;
            rt->idle_workers--;
        }
        if (!rt->job_head && (rt->exiting || rt->nworkers > rt->want_workers))
            break;
        if (!rt->job_head)
            continue;
        s3lect_elector *e = rt->job_head;
        rt->job_head = e->job_next;
        if (!rt->job_head)
            rt->job_tail = NULL;
        rt->work_progress = u_mono_ms();
        pthread_mutex_unlock(&rt->mu);
        /* e->op is the loop's, but the loop leaves it alone until the job is
         * done; the store object is used by one request at a time. */
        st_result res = {0};
        const char *key = rt_op_key(e);
        if (e->op.kind == EL_OP_GET)
            st_get(e->store, key, e->op.timeout_ms, &res);
        else
            st_put(e->store, key, e->op.body, e->op.body_len, e->op.if_match, e->op.timeout_ms,
                   &res);
        pthread_mutex_lock(&e->mu);
        e->job_res = res;
        e->job_done = 1;
        rt_kick_locked(e);
        pthread_mutex_unlock(&e->mu);
        pthread_mutex_lock(&rt->mu);
        rt->work_progress = u_mono_ms();
    }
    rt->nworkers--;
    rt->nending++;
    pthread_mutex_unlock(&rt->mu);
    cr_thread_end(); /* store calls made random tokens: OpenSSL's thread state */
    pthread_mutex_lock(&rt->mu);
    rt->nending--;
    pthread_cond_broadcast(&rt->exit_cv);
    pthread_mutex_unlock(&rt->mu);
    return NULL;
}
