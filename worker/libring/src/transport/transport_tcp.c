/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport_tcp.c - a full mesh of TCP connections and the duplex stream that every
 * collective runs on.
 *
 * Setup: each rank listens on an ephemeral port, publishes "ip:port" under addr.<rank> at the
 * rendezvous, connects to every lower rank and accepts every higher one. Connects complete
 * in the kernel's accept queue, so the order cannot deadlock. A hello (magic, rank, size)
 * tells the acceptor who called.
 *
 * Streams: sockets are non-blocking. The loop tries send and recv directly and sleeps in
 * poll() only when neither can move, so a busy stream costs one syscall per transfer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "ring_internal.h"

#define HELLO_MAGIC 0x52494e47u /* "RING" */

struct ring__tp {
    int rank, size;
    int op_timeout_ms;
    int spin_us;
    int broken;
    int fds[]; /* fds[peer]; -1 for this rank */
};

struct hello {
    uint32_t magic, rank, size;
};

static int listen_any(int sockbuf, int *fd_out, int *port_out)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return ring__err(RING_ESYS, "socket: %s", strerror(errno));
    /* Accepted sockets inherit the buffer sizes, which must be set before the handshake
     * for the window scale to cover them. */
    if (sockbuf > 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof(sockbuf));
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof(sockbuf));
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1024) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        int e = errno;
        close(fd);
        return ring__err(RING_ESYS, "listen: %s", strerror(e));
    }
    *fd_out = fd;
    *port_out = ntohs(sa.sin_port);
    return 0;
}

/* The address peers should use: the one this host used to reach the rendezvous. */
static int local_ip(int rdv_fd, char *ip, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    const void *addr;

    if (getsockname(rdv_fd, (struct sockaddr *)&ss, &len) < 0)
        return ring__err(RING_ESYS, "getsockname: %s", strerror(errno));
    if (ss.ss_family == AF_INET)
        addr = &((struct sockaddr_in *)&ss)->sin_addr;
    else
        return ring__err(RING_ENOTSUP, "the rendezvous must be reached over IPv4");
    if (inet_ntop(ss.ss_family, addr, ip, (socklen_t)cap) == NULL)
        return ring__err(RING_ESYS, "inet_ntop: %s", strerror(errno));
    return 0;
}

static int connect_lower(struct ring__tp *tp, int rdv, int peer, int sockbuf, int64_t deadline)
{
    char key[32], val[RING_RDV_TOKEN_MAX + 1], host[256], port[16];
    struct hello h = {HELLO_MAGIC, (uint32_t)tp->rank, (uint32_t)tp->size};
    int rc, fd;

    snprintf(key, sizeof(key), "addr.%d", peer);
    if ((rc = ring__rdv_get(rdv, key, val, sizeof(val), deadline)) < 0)
        return rc;
    if (ring__net_split_hostport(val, host, sizeof(host), port, sizeof(port)) < 0)
        return ring__err(RING_EBOOTSTRAP, "rank %d published a bad address '%s'", peer, val);
    if ((rc = ring__net_connect(host, port, sockbuf, deadline, &fd)) < 0)
        return rc;
    tp->fds[peer] = fd;
    return ring__net_write_all(fd, &h, sizeof(h), deadline);
}

static int accept_higher(struct ring__tp *tp, int lfd, int64_t deadline)
{
    struct pollfd pfd = {.fd = lfd, .events = POLLIN};
    struct hello h;
    int fd, rc;

    rc = poll(&pfd, 1, (int)(deadline - ring__now_ms() > 0 ? deadline - ring__now_ms() : 0));
    if (rc == 0)
        return ring__err(RING_ETIMEDOUT, "rank %d: timed out waiting for higher ranks to connect",
                         tp->rank);
    if (rc < 0)
        return errno == EINTR ? 0 : ring__err(RING_ESYS, "poll: %s", strerror(errno));
    fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return errno == EINTR || errno == EAGAIN
                   ? 0
                   : ring__err(RING_ESYS, "accept: %s", strerror(errno));
    if ((rc = ring__net_read_all(fd, &h, sizeof(h), deadline)) < 0) {
        close(fd);
        return rc;
    }
    if (h.magic != HELLO_MAGIC || h.size != (uint32_t)tp->size || h.rank <= (uint32_t)tp->rank ||
        h.rank >= (uint32_t)tp->size || tp->fds[h.rank] >= 0) {
        /* A stray or misconfigured client: drop it and keep waiting for the real peer. */
        ring__log(RING_LOG_WARNING, "ignoring a connection with a bad hello (rank %u, size %u)",
                  h.rank, h.size);
        close(fd);
        return 0;
    }
    tp->fds[h.rank] = fd;
    return 1;
}

int ring__tp_create(int rank, int size, const char *rendezvous, int setup_timeout_ms,
                    int op_timeout_ms, int sockbuf, struct ring__tp **out)
{
    int64_t deadline = ring__now_ms() + setup_timeout_ms;
    char host[256], port[16], ip[64], key[32], val[96];
    struct ring__tp *tp;
    int lfd = -1, rdv = -1, lport = 0, rc, accepted = 0;

    if (ring__net_split_hostport(rendezvous, host, sizeof(host), port, sizeof(port)) < 0)
        return ring__err(RING_EENV, "RING_RENDEZVOUS='%s' is not host:port", rendezvous);
    tp = calloc(1, sizeof(*tp) + (size_t)size * sizeof(int));
    if (tp == NULL)
        return RING_ENOMEM;
    tp->rank = rank;
    tp->size = size;
    tp->op_timeout_ms = op_timeout_ms;
    for (int i = 0; i < size; i++)
        tp->fds[i] = -1;

    if ((rc = listen_any(sockbuf, &lfd, &lport)) < 0)
        goto error;
    if ((rc = ring__net_connect(host, port, 0, deadline, &rdv)) < 0) {
        /* ring__net_connect's text names the address already. */
        rc = ring__err(rc == RING_ETIMEDOUT ? rc : RING_EBOOTSTRAP,
                       "cannot reach the rendezvous (RING_RENDEZVOUS): %s", ring_last_error());
        goto error;
    }
    if ((rc = local_ip(rdv, ip, sizeof(ip))) < 0)
        goto error;
    snprintf(key, sizeof(key), "addr.%d", rank);
    snprintf(val, sizeof(val), "%s:%d", ip, lport);
    if ((rc = ring__rdv_set(rdv, key, val, deadline)) < 0)
        goto error;
    ring__log(RING_LOG_DEBUG, "listening on %s", val);

    for (int peer = 0; peer < rank; peer++) {
        if ((rc = connect_lower(tp, rdv, peer, sockbuf, deadline)) < 0)
            goto error;
    }
    while (accepted < size - 1 - rank) {
        if ((rc = accept_higher(tp, lfd, deadline)) < 0)
            goto error;
        accepted += rc;
    }
    for (int i = 0; i < size; i++) {
        if (i != rank && ((rc = ring__net_set_nonblock(tp->fds[i])) < 0 ||
                          (rc = ring__net_nodelay(tp->fds[i])) < 0))
            goto error;
    }
    close(lfd);
    close(rdv);
    *out = tp;
    return 0;
error:
    if (lfd >= 0)
        close(lfd);
    if (rdv >= 0)
        close(rdv);
    ring__tp_destroy(tp);
    return rc;
}

void ring__tp_destroy(struct ring__tp *tp)
{
    int saved = errno;
    if (tp == NULL)
        return;
    for (int i = 0; i < tp->size; i++) {
        if (tp->fds[i] >= 0)
            close(tp->fds[i]);
    }
    free(tp);
    errno = saved;
}

void ring__tp_set_spin(struct ring__tp *tp, int spin_us)
{
    tp->spin_us = spin_us;
}

/*
 * poll() with a short busy-wait first. Waking a process that sleeps in poll costs tens of
 * microseconds, which is most of a small allreduce; polling without sleeping for a few
 * microseconds catches replies that are already on their way. Only worth it when every
 * rank has a core: oversubscribed, the spinning steals the CPU the peer needs to answer.
 */
static int wait_ready(struct ring__tp *tp, struct pollfd *pfd, int n, int timeout_ms)
{
    if (tp->spin_us > 0) {
        int64_t until = ring__now_us() + tp->spin_us;
        do {
            int rc = poll(pfd, (nfds_t)n, 0);
            if (rc != 0)
                return rc;
        } while (ring__now_us() < until);
    }
    return poll(pfd, (nfds_t)n, timeout_ms);
}

int ring__tp_fd(const struct ring__tp *tp, int peer)
{
    return tp->fds[peer];
}

int ring__tp_broken(const struct ring__tp *tp)
{
    return tp->broken;
}

/* Shuts every connection so that peers blocked on this rank see EOF now, not at timeout. */
static int fail(struct ring__tp *tp, int err)
{
    tp->broken = 1;
    for (int i = 0; i < tp->size; i++) {
        if (tp->fds[i] >= 0)
            shutdown(tp->fds[i], SHUT_RDWR);
    }
    return err;
}

int ring__tp_stream(struct ring__tp *tp, const struct ring__stream *s)
{
    size_t txo = 0, rxo = 0;
    int txfd = -1, rxfd = -1, tx_ok = 1, rx_ok = 1;
    int64_t idle_since = -1;

    if (tp->broken)
        return ring__err(RING_EBROKEN, "rank %d: the communicator is broken", tp->rank);
    if (s->tx_total > 0)
        txfd = tp->fds[s->tx_peer];
    if (s->rx_total > 0)
        rxfd = tp->fds[s->rx_peer];

    while (txo < s->tx_total || rxo < s->rx_total) {
        int moved = 0;
        size_t txlen = 0;
        const void *txp = NULL;

        if (txo < s->tx_total) {
            txp = s->tx_src(s->arg, txo, &txlen);
            if (txlen > s->tx_total - txo)
                txlen = s->tx_total - txo;
        }
        if (txlen > 0 && tx_ok) {
            ssize_t k = send(txfd, txp, txlen, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k > 0) {
                txo += (size_t)k;
                moved = 1;
            } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                tx_ok = 0;
            } else if (!(k < 0 && errno == EINTR)) {
                ring__err(RING_EPEER, "rank %d: send to rank %d: %s", tp->rank, s->tx_peer,
                          k < 0 ? strerror(errno) : "no progress");
                return fail(tp, RING_EPEER);
            }
        }
        if (rxo < s->rx_total && rx_ok) {
            size_t rxlen;
            void *rxp = s->rx_dst(s->arg, rxo, &rxlen);
            ssize_t k;
            if (rxlen > s->rx_total - rxo)
                rxlen = s->rx_total - rxo;
            k = recv(rxfd, rxp, rxlen, MSG_DONTWAIT);
            if (k > 0) {
                int rc = s->rx_done(s->arg, rxo, (size_t)k);
                rxo += (size_t)k;
                moved = 1;
                if (rc < 0)
                    return fail(tp, rc);
            } else if (k == 0) {
                ring__err(RING_EPEER, "rank %d: rank %d closed the connection (it died or failed)",
                          tp->rank, s->rx_peer);
                return fail(tp, RING_EPEER);
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                rx_ok = 0;
            } else if (errno != EINTR) {
                ring__err(RING_EPEER, "rank %d: recv from rank %d: %s", tp->rank, s->rx_peer,
                          strerror(errno));
                return fail(tp, RING_EPEER);
            }
        }
        if (moved) {
            idle_since = -1;
            continue;
        }

        /* Nothing moved: sleep until a socket is ready or the operation times out. */
        {
            struct pollfd pfd[2];
            int n = 0, rc, left;
            int64_t now = ring__now_ms();
            if (idle_since < 0)
                idle_since = now;
            left = tp->op_timeout_ms - (int)(now - idle_since);
            if (txlen > 0 && !tx_ok)
                pfd[n++] = (struct pollfd){.fd = txfd, .events = POLLOUT};
            if (rxo < s->rx_total && !rx_ok) {
                if (n == 1 && pfd[0].fd == rxfd)
                    pfd[0].events |= POLLIN;
                else
                    pfd[n++] = (struct pollfd){.fd = rxfd, .events = POLLIN};
            }
            if (n == 0) {
                ring__err(RING_EPROTO, "rank %d: stream stalled with nothing to wait for",
                          tp->rank);
                return fail(tp, RING_EPROTO);
            }
            if (left <= 0) {
                ring__err(RING_ETIMEDOUT,
                          "rank %d: no data moved for %d ms (send to rank %d %zu/%zu bytes, "
                          "recv from rank %d %zu/%zu bytes); a peer is stuck or gone",
                          tp->rank, tp->op_timeout_ms, s->tx_peer, txo, s->tx_total, s->rx_peer,
                          rxo, s->rx_total);
                return fail(tp, RING_ETIMEDOUT);
            }
            rc = wait_ready(tp, pfd, n, left);
            if (rc < 0 && errno != EINTR) {
                ring__err(RING_ESYS, "rank %d: poll: %s", tp->rank, strerror(errno));
                return fail(tp, RING_ESYS);
            }
            for (int i = 0; i < n && rc > 0; i++) {
                /* Errors and hangups wake both directions; the next send or recv reports. */
                if (pfd[i].fd == txfd && (pfd[i].revents & (POLLOUT | POLLERR | POLLHUP)))
                    tx_ok = 1;
                if (pfd[i].fd == rxfd && (pfd[i].revents & (POLLIN | POLLERR | POLLHUP)))
                    rx_ok = 1;
            }
        }
    }
    return 0;
}

struct plain {
    const char *sbuf;
    char *rbuf;
    size_t slen, rlen;
};

static const void *plain_src(void *arg, size_t off, size_t *len)
{
    struct plain *p = arg;
    *len = p->slen - off;
    return p->sbuf + off;
}

static void *plain_dst(void *arg, size_t off, size_t *len)
{
    struct plain *p = arg;
    *len = p->rlen - off;
    return p->rbuf + off;
}

static int plain_done(void *arg, size_t off, size_t len)
{
    return 0;
}

int ring__tp_sendrecv(struct ring__tp *tp, int dst, const void *sbuf, size_t slen, int src,
                      void *rbuf, size_t rlen)
{
    struct plain p = {sbuf, rbuf, dst < 0 ? 0 : slen, src < 0 ? 0 : rlen};
    struct ring__stream s = {
        .tx_peer = dst,
        .rx_peer = src,
        .tx_total = p.slen,
        .rx_total = p.rlen,
        .tx_src = plain_src,
        .rx_dst = plain_dst,
        .rx_done = plain_done,
        .arg = &p,
    };
    return ring__tp_stream(tp, &s);
}
