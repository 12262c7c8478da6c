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
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
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

/* A helper the library runs for itself (a credential_process, a kubeconfig's
 * exec plugin): path (looked up in PATH when it has no '/') with argv and
 * envp (NULL: this process's environment), stdin /dev/null, stdout read into
 * out (at most max bytes), stderr the process's own; in a process group of
 * its own registered as the library's (above) while it runs, with every
 * signal unblocked and at its default. Ends when it has exited, after
 * timeout_ms, when it printed more than max bytes, or when *abort (may be
 * NULL) becomes non-zero; in all but the first its whole group is killed. */
enum {
    U_HELPER_EXITED = 0, /* code: its exit status */
    U_HELPER_SIGNALED,   /* code: the signal that killed it */
    U_HELPER_TIMEOUT,
    U_HELPER_TOO_BIG,
    U_HELPER_ABORTED,
    U_HELPER_NOSTART, /* code: posix_spawn's error */
    U_HELPER_NOPIPE,  /* code: pipe2's error (out of descriptors: try again later) */
    U_HELPER_NOMEM
};
typedef struct u_helper_result {
    int state; /* U_HELPER_* */
    int code;
    char *out; /* its stdout, NUL-terminated (wipe and free: u_helper_result_clear) */
    size_t len;
} u_helper_result;
void u_helper_run(const char *path, char *const argv[], char *const envp[], int64_t timeout_ms,
                  size_t max, const _Atomic int *abort, u_helper_result *r);
void u_helper_result_clear(u_helper_result *r);

#endif
