/* SPDX-License-Identifier: Apache-2.0 */
#include "proc.h"

#include <signal.h>

int u_thread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    sigset_t block, old;
    sigfillset(&block);
    /* Faults raised by the thread itself must still end the process. */
    sigdelset(&block, SIGSEGV);
    sigdelset(&block, SIGBUS);
    sigdelset(&block, SIGFPE);
    sigdelset(&block, SIGILL);
    sigdelset(&block, SIGTRAP);
    sigdelset(&block, SIGSYS);
    pthread_sigmask(SIG_SETMASK, &block, &old);
    int rc = pthread_create(t, attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* A handful at most (one per credential refresh in flight). */
#define OWN_MAX 64
static pthread_mutex_t own_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t own[OWN_MAX];
static int n_own;

void u_own_lock(void)
{
    pthread_mutex_lock(&own_mu);
}

void u_own_unlock(void)
{
    pthread_mutex_unlock(&own_mu);
}

void u_own_pgroup_add(pid_t pgid)
{
    if (n_own < OWN_MAX)
        own[n_own++] = pgid;
}

void u_own_pgroup_remove(pid_t pgid)
{
    pthread_mutex_lock(&own_mu);
    for (int i = 0; i < n_own; i++)
        if (own[i] == pgid) {
            own[i] = own[--n_own];
            break;
        }
    pthread_mutex_unlock(&own_mu);
}

int u_own_pgroup_has(pid_t pgid)
{
    for (int i = 0; i < n_own; i++)
        if (own[i] == pgid)
            return 1;
    return 0;
}
