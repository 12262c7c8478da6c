/* SPDX-License-Identifier: Apache-2.0 */
/* proc.h - the threads and processes the library starts for itself.
 *
 * Threads: every thread the library creates goes through u_thread_create(),
 * which creates it with every asynchronous signal blocked, whatever the mask
 * of the thread that asked for it. The host's signal handling (a signalfd or
 * sigwait in `s3lect run`, Python's and Go's handlers) then works whatever
 * the order in which threads were made: a SIGTERM is never delivered to a
 * library thread, where its default action would end the process.
 *
 * Processes: a child the library starts for itself (a credential_process)
 * runs in a process group of its own, registered here while it runs, so a
 * supervisor (s3lect run's leftover logic) can tell it from the processes of
 * the command it supervises and leave it alone (u_own_pgroup_has).
 */
#ifndef S3LECT_PROC_H
#define S3LECT_PROC_H

#include <pthread.h>
#include <sys/types.h>

/* pthread_create with every asynchronous signal blocked in the new thread
 * (synchronous ones -- SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS --
 * stay deliverable, so a fault still ends the process). Same return value. */
int u_thread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

/* The registry of the library's own process groups. Spawn a child with the
 * lock held and add its group before unlocking, so no supervisor walking
 * /proc meanwhile can see it unregistered. */
void u_own_lock(void);
void u_own_unlock(void);
void u_own_pgroup_add(pid_t pgid);    /* lock held */
void u_own_pgroup_remove(pid_t pgid); /* takes the lock */
/* 1 if pgid is one of the library's groups (lock held). */
int u_own_pgroup_has(pid_t pgid);

#endif
