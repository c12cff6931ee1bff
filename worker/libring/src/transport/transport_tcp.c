/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport_tcp.c - pairs over TCP: one connection per peer, non-blocking, TCP_NODELAY.
 *
 * Set-up: each rank listens on an ephemeral port and publishes "IPv4, port" in its blob.
 * After the bootstrap's allgather, mesh.c's connect loop has it dial every lower peer it
 * serves and accept every higher one; the handshake (handshake.h) tells the acceptor who
 * called and proves, both ways, that each end holds the job's secret. After it the
 * connection carries the collectives' bytes and nothing else: no framing, no per-message
 * cost of the authentication.
 *
 * The address published is RING_TCP_ADDR, else the bootstrap's (the one this host used to
 * reach the rendezvous), else the first IPv4 address of an interface that is up and not
 * loopback, else loopback. The listening socket is bound to that address alone, so a job
 * whose ranks meet over loopback is not reachable from the network at all; where the
 * address is not this host's own (RING_TCP_ADDR naming a NAT's address), to every address.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "base/net.h"
#include "base/tuning.h"
#include "transport/transport.h"

/* "RIN2": the wire's magic (handshake.h); "RING" was the unauthenticated hello before it. */
#define TCP_MAGIC 0x52494e32u

/* What a rank publishes: where to connect. */
struct tcp_blob {
    uint32_t ip; /* network byte order */
    uint16_t port;
    uint16_t pad;
};

struct tcp_state {
    int lfd, sockbuf;
};

struct tcp_pair {
    struct ring__pair base;
    int fd;
};

/* ---- the pair ---- */

static ssize_t tcp_send(struct ring__pair *p, const void *buf, size_t len)
{
    struct tcp_pair *t = (struct tcp_pair *)p;
    ssize_t k = send(t->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k >= 0)
        return k;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    return ring__err(RING_EPEER, "rank %d: send to rank %d: %s", p->rank, p->peer, strerror(errno));
}

static ssize_t tcp_recv(struct ring__pair *p, void *buf, size_t len)
{
    struct tcp_pair *t = (struct tcp_pair *)p;
    ssize_t k = recv(t->fd, buf, len, MSG_DONTWAIT);
    if (k > 0)
        return k;
    if (k == 0)
        return ring__err(RING_EPEER, "rank %d: rank %d closed the connection (it died or failed)",
                         p->rank, p->peer);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    return ring__err(RING_EPEER, "rank %d: recv from rank %d: %s", p->rank, p->peer,
                     strerror(errno));
}

static int tcp_flushed(struct ring__pair *p)
{
    return 1; /* send() copies into the socket buffer */
}

static int tcp_arm(struct ring__pair *p, int want, struct pollfd *pfd)
{
    struct tcp_pair *t = (struct tcp_pair *)p;
    pfd->fd = t->fd;
    pfd->events =
        (short)((want & RING__WANT_TX ? POLLOUT : 0) | (want & RING__WANT_RX ? POLLIN : 0));
    return 0;
}

static void tcp_disarm(struct ring__pair *p, int want, short revents) {}

static int tcp_wait_fd(struct ring__pair *p)
{
    return ((struct tcp_pair *)p)->fd;
}

static void tcp_idle(struct ring__pair *p, int how)
{
    /* Arriving bytes make the socket readable: nothing to ask of the peer. */
}

static int tcp_rx_ready(struct ring__pair *p, int drain)
{
    struct pollfd pfd = {.fd = ((struct tcp_pair *)p)->fd, .events = POLLIN};
    return poll(&pfd, 1, 0) > 0;
}

static void tcp_shutdown(struct ring__pair *p)
{
    shutdown(((struct tcp_pair *)p)->fd, SHUT_RDWR);
}

static void tcp_destroy(struct ring__pair *p)
{
    struct tcp_pair *t = (struct tcp_pair *)p;
    if (t->fd >= 0)
        close(t->fd);
    free(t);
}

static const struct ring__pair_ops tcp_pair_ops = {
    .name = "tcp",
    .syscall_tries = 1,
    .send = tcp_send,
    .recv = tcp_recv,
    .flushed = tcp_flushed,
    .arm = tcp_arm,
    .disarm = tcp_disarm,
    .wait_fd = tcp_wait_fd,
    .idle = tcp_idle,
    .rx_ready = tcp_rx_ready,
    .shutdown = tcp_shutdown,
    .destroy = tcp_destroy,
};

static int new_pair(const struct ring__mesh_cfg *cfg, int peer, int fd, struct ring__pair **out)
{
    struct tcp_pair *t = malloc(sizeof(*t));
    int rc;
    if (t == NULL) {
        close(fd);
        return ring__err(RING_ENOMEM, "out of memory for a connection");
    }
    t->base = (struct ring__pair){&tcp_pair_ops, cfg->rank, peer};
    t->fd = fd;
    *out = &t->base;
    if ((rc = ring__net_set_nonblock(fd)) < 0 || (rc = ring__net_nodelay(fd)) < 0)
        return rc;
    return 0;
}

/* ---- set-up ---- */

/* The IPv4 address peers should use (see the top of the file). */
static int advertised_ip(const struct ring__mesh_cfg *cfg, struct in_addr *ip)
{
    const char *env = getenv("RING_TCP_ADDR");
    struct ifaddrs *ifs, *i;

    if (env != NULL && *env != '\0') {
        if (inet_pton(AF_INET, env, ip) != 1)
            return ring__err(RING_EENV, "RING_TCP_ADDR='%s' is not an IPv4 address", env);
        return 0;
    }
    if (cfg->host_addr != NULL && *cfg->host_addr != '\0' &&
        inet_pton(AF_INET, cfg->host_addr, ip) == 1)
        return 0;
    ip->s_addr = htonl(INADDR_LOOPBACK);
    if (getifaddrs(&ifs) < 0)
        return 0;
    for (i = ifs; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr != NULL && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
            !(i->ifa_flags & IFF_LOOPBACK)) {
            *ip = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            break;
        }
    }
    freeifaddrs(ifs);
    return 0;
}

/* Binds fd to ip:0, or to every address where ip is not this host's. */
static int bind_listener(int fd, struct in_addr ip, struct sockaddr_in *sa)
{
    *sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr = ip};
    if (bind(fd, (struct sockaddr *)sa, sizeof(*sa)) == 0)
        return 0;
    if (errno != EADDRNOTAVAIL)
        return -1;
    ring__log(RING_LOG_DEBUG, "tcp: the published address is not this host's; listening on all");
    sa->sin_addr.s_addr = htonl(INADDR_ANY);
    return bind(fd, (struct sockaddr *)sa, sizeof(*sa));
}

static int tcp_listen(const struct ring__mesh_cfg *cfg, void **state, void *blob)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    struct tcp_blob *b = blob;
    struct tcp_state *st;
    struct in_addr ip;
    long sockbuf = cfg->tune->v[RING__K_SOCKET_BUFFER_BYTES];
    int fd, rc;

    if ((rc = advertised_ip(cfg, &ip)) < 0)
        return rc;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ring__err(RING_ESYS, "socket: %s", strerror(errno));
    /* Accepted sockets inherit the buffer sizes, which must be set before the handshake
     * for the window scale to cover them. */
    if (sockbuf > 0) {
        int v = (int)sockbuf;
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
    }
    if (bind_listener(fd, ip, &sa) < 0 || listen(fd, 1024) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        int e = errno;
        close(fd);
        return ring__err(RING_ESYS, "listen: %s", strerror(e));
    }
    if ((st = malloc(sizeof(*st))) == NULL) {
        close(fd);
        return ring__err(RING_ENOMEM, "out of memory");
    }
    st->lfd = fd;
    st->sockbuf = (int)sockbuf;
    b->ip = ip.s_addr;
    b->port = sa.sin_port;
    *state = st;
    {
        char txt[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &ip, txt, sizeof(txt));
        ring__log(RING_LOG_DEBUG, "tcp: listening on %s:%d", txt, ntohs(sa.sin_port));
    }
    return 0;
}

static int tcp_listen_fd(void *state)
{
    return ((struct tcp_state *)state)->lfd;
}

static int tcp_connect(void *state, const struct ring__mesh_cfg *cfg, const void *blob, int peer,
                       int64_t deadline, int *fd)
{
    const struct tcp_state *st = state;
    const struct tcp_blob *b = blob;
    char host[INET_ADDRSTRLEN], port[8];
    struct in_addr ip = {.s_addr = b->ip};
    int rc;

    inet_ntop(AF_INET, &ip, host, sizeof(host));
    snprintf(port, sizeof(port), "%d", ntohs(b->port));
    if ((rc = ring__net_connect(host, port, st->sockbuf, deadline, fd)) < 0)
        return ring__err(rc, "rank %d: cannot connect to rank %d: %s", cfg->rank, peer,
                         ring_last_error());
    return 0;
}

static int tcp_dialed(void *state, const struct ring__mesh_cfg *cfg, int fd, int peer,
                      struct ring__pair **pair)
{
    int rc = new_pair(cfg, peer, fd, pair);
    return rc < 0 ? rc : 1;
}

static int tcp_answer(void *state, const struct ring__mesh_cfg *cfg, int fd, int peer,
                      struct ring__pair **pairs, int64_t deadline)
{
    return new_pair(cfg, peer, fd, &pairs[peer]);
}

static void tcp_close(void *state)
{
    struct tcp_state *st = state;
    if (st == NULL)
        return;
    close(st->lfd);
    free(st);
}

const struct ring__transport ring__transport_tcp = {
    .name = "tcp",
    .magic = TCP_MAGIC,
    .blob_len = sizeof(struct tcp_blob),
    .listen = tcp_listen,
    .listen_fd = tcp_listen_fd,
    .connect = tcp_connect,
    .dialed = tcp_dialed,
    .answer = tcp_answer,
    .close = tcp_close,
};
