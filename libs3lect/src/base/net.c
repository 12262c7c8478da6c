/* SPDX-License-Identifier: Apache-2.0 */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

int u_listen(const struct addrinfo *res, int any, int sock_flags, int backlog, int *port,
             int *err_no)
{
    int last = EADDRNOTAVAIL;
    for (int pass = any ? 0 : 1; pass < 2; pass++) {
        for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            if (any && (ai->ai_family == AF_INET6) != (pass == 0))
                continue;
            int fd =
                socket(ai->ai_family, ai->ai_socktype | sock_flags | SOCK_CLOEXEC, ai->ai_protocol);
            if (fd < 0) {
                last = errno;
                continue;
            }
            int one = 1, zero = 0;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (any && ai->ai_family == AF_INET6)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
            if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0) {
                if (port) {
                    struct sockaddr_storage ss;
                    socklen_t sl = sizeof ss;
                    *port = 0;
                    memset(&ss, 0, sizeof ss);
                    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
                        *port = ss.ss_family == AF_INET6
                                    ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                    : ntohs(((struct sockaddr_in *)&ss)->sin_port);
                }
                return fd;
            }
            last = errno;
            close(fd);
        }
    }
    if (err_no)
        *err_no = last;
    return -1;
}

int u_is_loopback_host(const char *host)
{
    unsigned char b[16];
    if (strcasecmp(host, "localhost") == 0)
        return 1;
    if (inet_pton(AF_INET, host, b) == 1)
        return b[0] == 127;
    if (inet_pton(AF_INET6, host, b) == 1) {
        static const unsigned char one[16] = {[15] = 1};
        return memcmp(b, one, 16) == 0;
    }
    return 0;
}
