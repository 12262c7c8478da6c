/* SPDX-License-Identifier: Apache-2.0 */
/* net.h - a listening socket for the peer endpoint and the CLI's metrics. */
#ifndef S3LECT_NET_H
#define S3LECT_NET_H

struct addrinfo;

/* Binds and listens on the first address of res that works. With `any` (no
 * host was given: ":PORT") every address: IPv6 and IPv4 on one dual-stack
 * socket where the system has IPv6, else every IPv4 address. sock_flags are
 * added to the socket type (SOCK_NONBLOCK; SOCK_CLOEXEC always is). Returns
 * the descriptor and sets *port (may be NULL) to the port bound, or -1 with
 * *err_no set. */
/* Is host ("127.0.0.1", "::1", "localhost"; no brackets, no port) a
 * loopback address? 127.0.0.0/8, ::1 and "localhost" (any case). */
int u_is_loopback_host(const char *host);

int u_listen(const struct addrinfo *res, int any, int sock_flags, int backlog, int *port,
             int *err_no);

#endif
