/* SPDX-License-Identifier: Apache-2.0 */
/* peer_addr.c - the leadership endpoint's addresses: HOST:PORT parsing,
 * the route to a store's host, and the listening sockets. */
#include "peer_server_int.h"

/* ---- listening -------------------------------------------------------------- */

/* Splits "host:port", "[v6]:port" or ":port" (all interfaces). */
static int split_hostport(const char *addr, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon;
    size_t hlen;
    const char *h = addr;
    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');
        if (!close || close[1] != ':')
            return -1;
        h = addr + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon || memchr(addr, ':', (size_t)(colon - addr)))
            return -1; /* no port, or an IPv6 address without brackets */
        hlen = (size_t)(colon - addr);
    }
    const char *p = colon + 1;
    size_t plen = strlen(p);
    if (hlen >= hcap || plen == 0 || plen >= pcap || plen > 5)
        return -1;
    long v = 0;
    for (size_t i = 0; i < plen; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    if (v > 65535)
        return -1;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    memcpy(port, p, plen + 1);
    return 0;
}

int peer_split_host(const char *addr, char *host, size_t cap)
{
    char port[8];
    return split_hostport(addr, host, cap, port, sizeof port);
}

void peer_join_hostport(const char *host, int port, char *out, size_t cap)
{
    snprintf(out, cap, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

int peer_route_host(const char *origin, char *host, size_t cap, char *err, size_t errlen)
{
    if (!origin || !*origin) {
        snprintf(host, cap, "127.0.0.1");
        return 0;
    }
    const char *p = strstr(origin, "://");
    int https = strncmp(origin, "https", 5) == 0;
    p = p ? p + 3 : origin;
    char h[256], port[8];
    size_t n = strcspn(p, "/?#");
    char hp[300];
    if (n >= sizeof hp)
        n = sizeof hp - 1;
    memcpy(hp, p, n);
    hp[n] = '\0';
    if (split_hostport(hp, h, sizeof h, port, sizeof port) != 0) {
        /* no port: the scheme's */
        size_t hl = strlen(hp);
        if (hp[0] == '[' && hl > 2 && hp[hl - 1] == ']') {
            memcpy(h, hp + 1, hl - 2);
            h[hl - 2] = '\0';
        } else {
            snprintf(h, sizeof h, "%s", hp);
        }
        snprintf(port, sizeof port, "%s", https ? "443" : "80");
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_flags = AI_NUMERICSERV;
    int gai = getaddrinfo(h, port, &hints, &res);
    int last = 0;
    for (struct addrinfo *ai = gai == 0 ? res : NULL; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last = errno;
            continue;
        }
        struct sockaddr_storage ss = {0}; /* read below even when !ok */
        socklen_t sl = sizeof ss;
        int ok = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
                 getsockname(fd, (struct sockaddr *)&ss, &sl) == 0;
        last = ok ? 0 : errno;
        close(fd);
        const void *a = ss.ss_family == AF_INET6
                            ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                            : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
        if (ok && inet_ntop(ss.ss_family, a, host, (socklen_t)cap)) {
            freeaddrinfo(res);
            return 0;
        }
    }
    if (res)
        freeaddrinfo(res);
    snprintf(err, errlen,
             "cannot tell which address followers reach this node at (no route to the store "
             "%.100s: %s); set server_addr (--addr) to this node's host:port",
             h, gai != 0 ? gai_strerror(gai) : strerror(last ? last : EHOSTUNREACH));
    return -1;
}

int ps_listen_on(const char *addr, int *fd_out, int *port_out, char *err, size_t errlen)
{
    char host[256], port[8];
    if (split_hostport(addr, host, sizeof host, port, sizeof port) != 0) {
        snprintf(err, errlen,
                 "peer listen address '%.200s' is not host:port (e.ps_g. 0.0.0.0:8443, "
                 "[::1]:8443 or :8443 for all interfaces)",
                 addr);
        return -1;
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "peer listen address '%.200s': %s", addr, gai_strerror(gai));
        return -1;
    }
    int last_errno = 0;
    /* ":PORT" (no host): every address, IPv6 and IPv4 where the system has
     * IPv6 (the advertised address, the route to the store, may be either). */
    int fd = u_listen(res, !host[0], SOCK_NONBLOCK, 1024, NULL, &last_errno);
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen,
                 "cannot listen on %.200s: %s (set peer_listen to a local address, e.ps_g. "
                 "0.0.0.0:8443)",
                 addr, strerror(last_errno));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        snprintf(err, errlen, "cannot listen on %.200s: getsockname: %s", addr, strerror(errno));
        close(fd);
        return -1;
    }
    *port_out = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    return 0;
}
