/* SPDX-License-Identifier: Apache-2.0 */
/* supervise.h - the process tree under `s3lect run` (Linux).
 *
 * `s3lect run` forks one supervising child (the "shim") per leadership term.
 * The shim is a child subreaper: CMD's descendants that are orphaned (a
 * double fork, a setsid() daemon whose parent exits) are re-parented to it, so
 * every process CMD ever started stays below it until it dies. The shim kills
 * its whole subtree (SIGTERM, then SIGKILL) when told to stop, when its
 * parent dies (PR_SET_PDEATHSIG and the command pipe's EOF), when CMD's main
 * process exits, and at the latest at the hard deadline it was last given,
 * and exits only once no process of the subtree is alive.
 *
 * s3lect run and the shim talk over two pipes in fixed-size messages
 * (sv_msg, atomic pipe writes). All times are u_mono_ms() (CLOCK_BOOTTIME),
 * which both processes share.
 */
#ifndef S3LECT_CLI_SUPERVISE_H
#define S3LECT_CLI_SUPERVISE_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct sv_msg {
    int32_t type;
    int32_t arg;
    int64_t a, b;
} sv_msg;

/* s3lect run -> shim */
enum {
    SV_DEADLINE = 1, /* a: new hard deadline (mono ms) */
    SV_STOP = 2,     /* a: SIGKILL time (mono ms); SIGTERM the tree now */
    SV_KILL = 3,     /* SIGKILL the tree now */
    SV_SIGNAL = 4    /* arg: signal to send to CMD's main process */
};
/* shim -> s3lect run */
enum {
    SV_STARTED = 11, /* arg: CMD's pid */
    SV_MAIN_EXITED =
        12,          /* arg: CMD's pid, a: its exit code (128+N: signal N), b: live descendants */
    SV_KILLING = 13, /* arg: SV_WHY_*, a: live processes signalled */
    SV_DONE = 14     /* arg: SV_WHY_*, a: CMD's exit code; the subtree is empty */
};
/* Why the shim stopped (SV_DONE) or started killing (SV_KILLING). */
enum {
    SV_WHY_EXITED = 1,   /* CMD's main process exited by itself */
    SV_WHY_STOPPED = 2,  /* SV_STOP (SIGKILL: the kill timeout passed) */
    SV_WHY_DEADLINE = 3, /* the hard deadline passed */
    SV_WHY_ORPHANED = 4, /* s3lect run died (or the shim got SIGTERM/SIGINT) */
    SV_WHY_ASKED = 5     /* SV_KILL */
};

typedef struct sv_spawn_args {
    char **cmd;
    const char *term, *leader_id;
    int64_t hard;         /* first hard deadline (mono ms) */
    int64_t kill_timeout; /* ms from SIGTERM to SIGKILL when the shim stops by itself */
    const char *lock;     /* S3LECT_LOCK: the canonical lock URL */
    const char *token;    /* S3LECT_FENCE_TOKEN, or NULL: none (unset in CMD) */
    const struct sigaction *orig_sigpipe; /* restored in CMD */
} sv_spawn_args;

/* Forks the shim, which starts CMD at once. Returns its pid (or -1 with
 * errno) and the write end of its command pipe and the read end of its report
 * pipe (both non-blocking, close-on-exec). Call from the main thread: the
 * shim's PR_SET_PDEATHSIG fires when the forking thread ends. */
pid_t sv_spawn(const sv_spawn_args *a, int *to_fd, int *from_fd);

/* Sends sig (0: none) to every live process below root — every process whose
 * chain of parents reaches root — except `spare` (its descendants are still
 * signalled). Returns how many live (not zombie) such processes it found, or
 * -1 if /proc cannot be read. */
int sv_tree_signal(pid_t root, pid_t spare, int sig);
/* The same in s3lect run itself: leaves out the library's own children (a
 * credential_process and its descendants, base/proc.h), which are s3lect's
 * and not the command's. Never call it in the shim. */
int sv_own_tree_signal(pid_t root, pid_t spare, int sig);
/* Reaps the zombie children of root except `spare` and the library's own
 * (their owner waits for them). Returns how many were reaped. */
int sv_reap_strays(pid_t root, pid_t spare);

/* Records the processes below root now, to leave them and their descendants
 * out of every later sv_tree_signal(). Returns how many. */
int sv_exclude_present(pid_t root);
/* A reaped pid may be reused: drop it from that list. */
void sv_forget(pid_t pid);

/* Blocks the signals both processes handle (TERM, INT, CHLD, HUP, USR1,
 * USR2) and returns a non-blocking signalfd for them, or -1. */
int sv_signalfd(void);
/* Records the descriptors open now (call first thing): the command inherits
 * those and no descriptor s3lect opens later. */
void sv_note_inherited_fds(void);
/* Writes one message; 0 or -1 (pipe full or closed). */
int sv_send(int fd, int type, int arg, int64_t a, int64_t b);
/* Reads one message: 1, 0 (none pending), -1 (EOF or error). */
int sv_recv(int fd, sv_msg *m);

#endif
