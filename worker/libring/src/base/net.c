/* SPDX-License-Identifier: Apache-2.0 */
/* net.c - sockets with deadlines, and the rendezvous client. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "ring_internal.h"

int64_t ring__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ring__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

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

static int token_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > RING_RDV_TOKEN_MAX)
        return 0;
    for (; *s; s++) {
        if (*s <= ' ' || *s > '~')
            return 0;
    }
    return 1;
}

int ring__rdv_parse(char *line, struct ring__rdv_req *req, const char **why)
{
    char *sp = strchr(line, ' ');
    char *arg, *value = NULL;

    memset(req, 0, sizeof(*req));
    if (sp == NULL)
        return *why = "want SET <key> <value> or GET <key>", -1;
    *sp = '\0';
    arg = sp + 1;
    if (strcmp(line, "HELLO") == 0) {
        req->verb = RING__RDV_HELLO;
        if (ring__hex_decode(arg, req->nonce, sizeof(req->nonce)) < 0)
            return *why = "HELLO needs a nonce of 32 hex digits", -1;
        return 0;
    }
    if (strcmp(line, "AUTH") == 0) {
        req->verb = RING__RDV_AUTH;
        if (ring__hex_decode(arg, req->mac, sizeof(req->mac)) < 0)
            return *why = "AUTH needs a MAC of 64 hex digits", -1;
        return 0;
    }
    if (strcmp(line, "SET") == 0) {
        req->verb = RING__RDV_SET;
        if ((value = strchr(arg, ' ')) == NULL)
            return *why = "SET needs a key and a value", -1;
        *value++ = '\0';
    } else if (strcmp(line, "GET") == 0) {
        req->verb = RING__RDV_GET;
    } else {
        return *why = "unknown command", -1;
    }
    if (!token_ok(arg) || (value != NULL && !token_ok(value)))
        return *why = "keys and values are 1-255 printable characters without spaces", -1;
    req->key = arg;
    req->value = value;
    return 0;
}

void ring__rdv_transcript(struct ring__auth_transcript *t, int size,
                          const unsigned char client_nonce[RING__NONCE_BYTES],
                          const unsigned char server_nonce[RING__NONCE_BYTES])
{
    memset(t, 0, sizeof(*t));
    snprintf(t->wire, sizeof(t->wire), "rdv");
    t->dialer = UINT32_MAX; /* a rank proves the key, not which rank it is */
    t->acceptor = UINT32_MAX;
    t->size = (uint32_t)size;
    memcpy(t->dialer_nonce, client_nonce, RING__NONCE_BYTES);
    memcpy(t->acceptor_nonce, server_nonce, RING__NONCE_BYTES);
}

/* Splits "CHAL <nonce> <mac>" into its parts; 0 or -1. */
static int parse_challenge(char *line, unsigned char *nonce, unsigned char *mac)
{
    char *a, *b;
    if (strncmp(line, "CHAL ", 5) != 0 || (b = strchr(a = line + 5, ' ')) == NULL)
        return -1;
    *b++ = '\0';
    return ring__hex_decode(a, nonce, RING__NONCE_BYTES) < 0 ||
                   ring__hex_decode(b, mac, RING__MAC_BYTES) < 0
               ? -1
               : 0;
}

int ring__rdv_auth(int fd, const struct ring__key *key, int size, int64_t deadline)
{
    unsigned char cn[RING__NONCE_BYTES], sn[RING__NONCE_BYTES], mac[RING__MAC_BYTES];
    char line[RING_RDV_LINE_MAX], hex[2 * RING__MAC_BYTES + 1];
    struct ring__auth_transcript t;
    int rc;

    ring__auth_nonce(cn);
    ring__hex_encode(cn, sizeof(cn), hex);
    snprintf(line, sizeof(line), "HELLO %s\n", hex);
    if ((rc = ring__net_write_all(fd, line, strlen(line), deadline)) < 0 ||
        (rc = ring__net_read_line(fd, line, sizeof(line), deadline)) < 0)
        return rc;
    if (parse_challenge(line, sn, mac) < 0)
        return ring__err(RING_EBOOTSTRAP, "it answered HELLO with '%.80s'", line);
    ring__rdv_transcript(&t, size, cn, sn);
    if (!ring__auth_check(key, RING__ROLE_ACCEPTOR, &t, mac))
        return ring__err(RING_EBOOTSTRAP,
                         "it does not hold this job's secret (another job's rendezvous, or "
                         "an impostor?)");
    ring__auth_mac(key, RING__ROLE_DIALER, &t, mac);
    ring__hex_encode(mac, sizeof(mac), hex);
    snprintf(line, sizeof(line), "AUTH %s\n", hex);
    if ((rc = ring__net_write_all(fd, line, strlen(line), deadline)) < 0 ||
        (rc = ring__net_read_line(fd, line, sizeof(line), deadline)) < 0)
        return rc;
    if (strcmp(line, "OK") != 0)
        return ring__err(RING_EBOOTSTRAP, "it refused this rank's job secret (%.80s)", line);
    return 0;
}

int ring__rdv_set(int fd, const char *key, const char *value, int64_t deadline)
{
    char line[RING_RDV_LINE_MAX];
    int rc;

    if (!token_ok(key) || !token_ok(value))
        return ring__err(RING_EINVAL, "rendezvous key or value is empty, too long or has spaces");
    snprintf(line, sizeof(line), "SET %s %s\n", key, value);
    if ((rc = ring__net_write_all(fd, line, strlen(line), deadline)) < 0)
        return rc;
    if ((rc = ring__net_read_line(fd, line, sizeof(line), deadline)) < 0)
        return rc;
    if (strcmp(line, "OK") != 0)
        return ring__err(RING_EBOOTSTRAP, "rendezvous refused SET %s: %s", key, line);
    return 0;
}

int ring__rdv_get(int fd, const char *key, char *value, size_t cap, int64_t deadline)
{
    char line[RING_RDV_LINE_MAX];
    int rc;

    if (!token_ok(key))
        return ring__err(RING_EINVAL, "rendezvous key is empty, too long or has spaces");
    snprintf(line, sizeof(line), "GET %s\n", key);
    if ((rc = ring__net_write_all(fd, line, strlen(line), deadline)) < 0)
        return rc;
    if ((rc = ring__net_read_line(fd, line, sizeof(line), deadline)) < 0)
        return rc;
    if (strncmp(line, "VAL ", 4) != 0 || strlen(line + 4) >= cap)
        return ring__err(RING_EBOOTSTRAP, "rendezvous answered GET %s with '%s'", key, line);
    strcpy(value, line + 4);
    return 0;
}
