/* SPDX-License-Identifier: Apache-2.0 */
/* logw.h - s3lect run's log writer.
 *
 * `s3lect run`'s loop supervises the command and feeds the election; it must
 * never wait for its own stderr. Lines go to a bounded in-memory queue that a
 * thread of its own writes out (blocking there is harmless). When the queue is
 * full (nobody reads the pipe) a line is dropped and counted; once the stream
 * takes lines again and the queue is empty, one line says how many were lost.
 * The count is also the metric s3lect_log_lines_dropped_total.
 */
#ifndef S3LECT_CLI_LOGW_H
#define S3LECT_CLI_LOGW_H

#include <stddef.h>
#include <stdint.h>

/* Formats the "N lines dropped" notice as a complete line (with '\n') into
 * out; returns its length. Called on the writer thread. */
typedef size_t (*logw_notice_fn)(char *out, size_t outlen, uint64_t dropped);

/* Starts the writer thread for fd. Until it runs (or if it cannot be
 * started), logw_line writes directly. */
void logw_start(int fd, logw_notice_fn notice);
/* Queues one complete line (ending in '\n'); never blocks on fd. */
void logw_line(const char *s, size_t n);
/* Lines dropped so far. */
uint64_t logw_dropped(void);
/* Waits until the queue is empty, or until the writer has made no progress
 * for stall_ms (the stream is not being read). */
void logw_flush(int64_t stall_ms);

#endif
