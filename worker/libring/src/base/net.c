/* SPDX-License-Identifier: Apache-2.0 */
/* net.c - sockets with deadlines. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "base/net.h"

static int remaining_ms(int64_t deadline)
{
    int64_t left = deadline - ring__now_ms();
    if (left < 0)
        return 0;
    return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

int ring__net_split_hostport(const char *s, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *colon, *h = s;
    size_t hl;

    if (s == NULL)
        return RING_EINVAL;
    if (*s == '[') { /* [v6]:port */
        const char *close = strchr(s, ']');
        if (close == NULL || close[1] != ':')
            return RING_EINVAL;
        h = s + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return RING_EINVAL;
        hl = (size_t)(colon - s);
    }
    if (hl == 0 || hl >= hostlen || colon[1] == '\0' || strlen(colon + 1) >= portlen)
        return RING_EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    strcpy(port, colon + 1);
    for (const char *p = port; *p; p++) {
        if (*p < '0' || *p > '9')
            return RING_EINVAL;
    }
    return 0;
}

int ring__net_set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return ring__err(RING_ESYS, "fcntl(O_NONBLOCK): %s", strerror(errno));
    return 0;
}

int ring__net_nodelay(int fd)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
        return ring__err(RING_ESYS, "setsockopt(TCP_NODELAY): %s", strerror(errno));
    return 0;
}

static int set_blocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
        return ring__err(RING_ESYS, "fcntl: %s", strerror(errno));
    return 0;
}

/* One non-blocking connect attempt to one address, bounded by the deadline. */
static int connect_one(const struct addrinfo *ai, int sockbuf, int64_t deadline, int *out)
{
    int fd, err = 0;
    socklen_t errlen = sizeof(err);
    struct pollfd pfd;

    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -errno;
    if (sockbuf > 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof(sockbuf));
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof(sockbuf));
    }
    if (ring__net_set_nonblock(fd) < 0)
        goto error;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        if (errno != EINPROGRESS)
            goto error;
        pfd.fd = fd;
        pfd.events = POLLOUT;
        for (;;) {
            int r = poll(&pfd, 1, remaining_ms(deadline));
            if (r > 0)
                break;
            if (r == 0) {
                errno = ETIMEDOUT;
                goto error;
            }
            if (errno != EINTR)
                goto error;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errlen) < 0)
            goto error;
        if (err != 0) {
            errno = err;
            goto error;
        }
    }
    if (set_blocking(fd) < 0 || ring__net_nodelay(fd) < 0)
        goto error;
    *out = fd;
    return 0;
error:
    err = errno;
    close(fd);
    return -err;
}

int ring__net_connect(const char *host, const char *port, int sockbuf, int64_t deadline, int *fd)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC};
    struct addrinfo *res = NULL, *ai;
    int rc, last = ECONNREFUSED;

    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0)
        return ring__err(RING_EBOOTSTRAP, "cannot resolve %s:%s: %s", host, port, gai_strerror(rc));
    for (;;) {
        for (ai = res; ai != NULL; ai = ai->ai_next) {
            rc = connect_one(ai, sockbuf, deadline, fd);
            if (rc == 0) {
                freeaddrinfo(res);
                return 0;
            }
            last = -rc;
        }
        if ((last != ECONNREFUSED && last != ECONNRESET) || ring__now_ms() >= deadline)
            break;
        /* Refused: the listener may not be up yet. Back off briefly and try again. */
        usleep(20 * 1000);
    }
    freeaddrinfo(res);
    if (last == ETIMEDOUT)
        return ring__err(RING_ETIMEDOUT, "connect to %s:%s timed out", host, port);
    return ring__err(RING_EBOOTSTRAP, "connect to %s:%s: %s", host, port, strerror(last));
}

static int wait_fd(int fd, short events, int64_t deadline)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    for (;;) {
        int r = poll(&pfd, 1, remaining_ms(deadline));
        if (r > 0)
            return 0;
        if (r == 0)
            return ring__err(RING_ETIMEDOUT, "timed out on socket %d", fd);
        if (errno != EINTR)
            return ring__err(RING_ESYS, "poll: %s", strerror(errno));
    }
}

int ring__net_write_all(int fd, const void *buf, size_t len, int64_t deadline)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t k = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            len -= (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_fd(fd, POLLOUT, deadline);
            if (rc < 0)
                return rc;
            continue;
        }
        return ring__err(RING_EPEER, "send: %s", k < 0 ? strerror(errno) : "no progress");
    }
    return 0;
}

int ring__net_read_all(int fd, void *buf, size_t len, int64_t deadline)
{
    char *p = buf;
    while (len > 0) {
        ssize_t k = recv(fd, p, len, MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            len -= (size_t)k;
            continue;
        }
        if (k == 0)
            return ring__err(RING_EPEER, "connection closed by peer");
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = wait_fd(fd, POLLIN, deadline);
            if (rc < 0)
                return rc;
            continue;
        }
        return ring__err(RING_EPEER, "recv: %s", strerror(errno));
    }
    return 0;
}

int ring__net_read_line(int fd, char *buf, size_t cap, int64_t deadline)
{
    /* Byte at a time: rendezvous replies are a few per rank, and reading exactly up to the
     * newline leaves nothing buffered that a later reader could miss. */
    size_t n = 0;
    for (;;) {
        char c;
        int rc = ring__net_read_all(fd, &c, 1, deadline);
        if (rc < 0)
            return rc;
        if (c == '\n')
            break;
        if (n + 1 >= cap)
            return ring__err(RING_EPROTO, "line longer than %zu bytes", cap);
        buf[n++] = c;
    }
    buf[n] = '\0';
    return 0;
}
