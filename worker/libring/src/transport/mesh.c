/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mesh.c - every pair of the world (transport.h): set-up through the bootstrap, the choice
 * of a transport per peer, and the loops that move bytes over whatever pairs they get.
 *
 * Set-up: each transport prepares this rank's end and writes an address blob; the
 * bootstrap allgathers [host identity, flags, blobs...] once; then, with everybody's blobs,
 * each peer gets the first transport that both ends offer and that can reach it (shared
 * memory only on the same host), and one connect loop, the same for every transport,
 * connects the pairs (connect.c): each rank dials its lower peers and accepts its higher
 * ones, every connection starting with the handshake of handshake.h, in which both ends
 * prove the job's secret.
 *
 * Streams: the loop tries send and recv directly and sleeps only when neither can move:
 * first it keeps trying for spin_us (waking a sleeping process costs tens of microseconds,
 * most of a small message; RING_TCP_SPIN_US instead where a try is a system call, see
 * tuning.c), then it arms the pairs and sleeps in poll() on their wake-up
 * fds, bounded by the operation timeout. Before it sleeps it kicks the pair it sends to,
 * which wakes a peer's lazily idle engine (transport.h, RING__IDLE_LAZY).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/base.h"
#include "base/net.h"
#include "base/tuning.h"
#include "bootstrap/bootstrap.h"
#include "transport/transport.h"

/* In order of preference: the first one both ends offer and that can reach the peer. */
static const struct ring__transport *const transports[] = {
    &ring__transport_shm,
    &ring__transport_tcp,
};
#define NTRANSPORTS ((int)(sizeof(transports) / sizeof(transports[0])))

/* A transport that only reaches ranks of the same host. */
static int host_local(const struct ring__transport *t)
{
    return t->host_only;
}

#define HOST_ID_LEN 16

struct blob_header {
    unsigned char host[HOST_ID_LEN];
    uint32_t offered; /* bit t: transports[t] listened on this rank */
    uint32_t pad;
};

struct ring__mesh {
    int rank, size;
    int op_timeout_ms, spin_us;
    int tcp_spin_us;       /* the spin of a large stream with a pair whose tries are system calls */
    size_t tcp_spin_bytes; /* what a stream over such a pair moves at most to spin as usual */
    int yield; /* oversubscribed: the spin yields the CPU, which a peer may need to answer */
    int broken;
    int nhosts;
    int *host;                /* host index of each rank */
    struct ring__pair **pair; /* pair[peer]; NULL for this rank */
    struct pollfd *pfd;       /* the idle wait's poll set: wake fd + one per peer */
};

/* ---- host identity ---- */

static uint64_t fnv1a(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_file(uint64_t h, const char *path)
{
    char buf[128];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
    if (fd >= 0)
        close(fd);
    return n > 0 ? fnv1a(h, buf, (size_t)n) : fnv1a(h, path, strlen(path));
}

static uint64_t fnv_link(uint64_t h, const char *path)
{
    char buf[128];
    ssize_t n = readlink(path, buf, sizeof(buf));
    return n > 0 ? fnv1a(h, buf, (size_t)n) : fnv1a(h, path, strlen(path));
}

/*
 * Two ranks are on the same host when they can share memory and reach each other's
 * abstract Unix sockets: same kernel boot (boot_id), same IPC and network namespaces.
 * Namespaces count as hosts on purpose: the multi-host tests run "hosts" as network
 * namespaces of one machine, and they must talk TCP.
 */
static void host_identity(unsigned char out[HOST_ID_LEN])
{
    struct utsname u;
    uint64_t a = 0xcbf29ce484222325ull, b;

    if (uname(&u) == 0)
        a = fnv1a(a, u.nodename, strlen(u.nodename));
    a = fnv_file(a, "/proc/sys/kernel/random/boot_id");
    b = fnv_link(a ^ 0x9e3779b97f4a7c15ull, "/proc/self/ns/net");
    b = fnv_link(b, "/proc/self/ns/ipc");
    memcpy(out, &a, 8);
    memcpy(out + 8, &b, 8);
}

/* ---- set-up ---- */

/* RING_TRANSPORT: 0 auto, 1 tcp, 2 shm (auto, but a local peer without shm is an error). */
static int transport_mode(int *mode)
{
    const char *v = getenv("RING_TRANSPORT");
    *mode = 0;
    if (v == NULL || *v == '\0' || strcasecmp(v, "auto") == 0)
        return 0;
    if (strcasecmp(v, "tcp") == 0)
        *mode = 1;
    else if (strcasecmp(v, "shm") == 0)
        *mode = 2;
    else {
        ring__log(RING_LOG_ERROR, "RING_TRANSPORT='%s' must be auto, shm or tcp", v);
        return ring__err(RING_EENV, "RING_TRANSPORT='%s' must be auto, shm or tcp", v);
    }
    return 0;
}

/* The transport for peer, or -1: the first both offer that reaches across hosts if needed. */
static int choose(const struct blob_header *me, const struct blob_header *peer, int same_host)
{
    for (int t = 0; t < NTRANSPORTS; t++) {
        if (!(me->offered & peer->offered & (1u << t)))
            continue;
        if (host_local(transports[t]) && !same_host)
            continue;
        return t;
    }
    return -1;
}

/* Numbers the hosts of the blobs in all (one per rank, stride apart) into m->host and
 * m->nhosts: by their lowest rank, so that every rank numbers them alike. */
static void number_hosts(struct ring__mesh *m, const char *all, size_t stride)
{
    for (int r = 0; r < m->size; r++) {
        const struct blob_header *hr = (const struct blob_header *)(all + (size_t)r * stride);
        m->host[r] = -1;
        for (int q = 0; q < r && m->host[r] < 0; q++) {
            if (memcmp(hr->host, ((const struct blob_header *)(all + (size_t)q * stride))->host,
                       HOST_ID_LEN) == 0)
                m->host[r] = m->host[q];
        }
        if (m->host[r] < 0)
            m->host[r] = m->nhosts++;
    }
}

/*
 * The transport to each peer (via[p], an index in transports[]) from every rank's blob in
 * all: the first both ends offer that can reach it (choose). Returns 0, RING_EBOOTSTRAP
 * when a peer shares none, or RING_EENV when RING_TRANSPORT=shm (mode 2) cannot have shared
 * memory to a peer on this host.
 */
static int choose_transports(const struct ring__mesh *m, const char *all, size_t stride, int mode,
                             int *via)
{
    for (int p = 0; p < m->size; p++) {
        const struct blob_header *me = (const struct blob_header *)(all + (size_t)m->rank * stride);
        const struct blob_header *hp = (const struct blob_header *)(all + (size_t)p * stride);
        int same = m->host[p] == m->host[m->rank];
        if (p == m->rank)
            continue;
        via[p] = choose(me, hp, same);
        if (via[p] < 0)
            return ring__err(RING_EBOOTSTRAP, "rank %d: rank %d and this rank share no transport",
                             m->rank, p);
        if (mode == 2 && same && !host_local(transports[via[p]]))
            return ring__err(RING_EENV,
                             "rank %d: RING_TRANSPORT=shm, but shared memory is not available "
                             "between this rank and rank %d on the same host (see the log)",
                             m->rank, p);
    }
    return 0;
}

/* Logs (debug) how many hosts the mesh spans and how many peers each transport serves. */
static void log_mesh(const struct ring__mesh *m, const int *via)
{
    char line[256];
    size_t len = 0;
    for (int t = 0; t < NTRANSPORTS; t++) {
        int count = 0;
        for (int p = 0; p < m->size; p++)
            count += p != m->rank && via[p] == t;
        len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s to %d peers", t ? ", " : "",
                                transports[t]->name, count);
    }
    ring__log(RING_LOG_DEBUG, "mesh: %d hosts; %s", m->nhosts, line);
}

int ring__mesh_create(struct ring__bootstrap *b, const struct ring__mesh_cfg *cfg, int spin_us,
                      struct ring__mesh **out)
{
    int64_t deadline = ring__now_ms() + cfg->setup_timeout_ms;
    size_t off[NTRANSPORTS], stride = sizeof(struct blob_header);
    void *state[NTRANSPORTS] = {0};
    char *mine = NULL, *all = NULL;
    unsigned char *use = NULL;
    int *via = NULL, mode, rc, n = cfg->size;
    struct ring__mesh *m;

    if (cfg->key == NULL)
        return ring__err(RING_EBOOTSTRAP, "rank %d: no job secret to prove to the peers",
                         cfg->rank);
    if ((rc = transport_mode(&mode)) < 0)
        return rc;
    for (int t = 0; t < NTRANSPORTS; t++) {
        off[t] = stride;
        stride += (transports[t]->blob_len + 7) & ~(size_t)7;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return ring__err(RING_ENOMEM, "out of memory for the mesh");
    m->rank = cfg->rank;
    m->size = n;
    m->op_timeout_ms = cfg->op_timeout_ms;
    m->spin_us = spin_us;
    m->tcp_spin_us = (int)cfg->tune->v[RING__K_TCP_SPIN_US];
    m->tcp_spin_bytes = (size_t)cfg->tune->v[RING__K_TCP_SPIN_BYTES];
    m->yield = cfg->oversubscribed;
    m->host = calloc((size_t)n, sizeof(int));
    m->pair = calloc((size_t)n, sizeof(*m->pair));
    m->pfd = calloc((size_t)n + 1, sizeof(*m->pfd));
    mine = calloc(1, stride);
    all = calloc((size_t)n, stride);
    use = calloc((size_t)n, 1);
    via = calloc((size_t)n, sizeof(int));
    if (m->host == NULL || m->pair == NULL || m->pfd == NULL || mine == NULL || all == NULL ||
        use == NULL || via == NULL) {
        rc = ring__err(RING_ENOMEM, "out of memory for the mesh of %d ranks", n);
        goto error;
    }

    {
        struct blob_header *h = (struct blob_header *)mine;
        host_identity(h->host);
        for (int t = 0; t < NTRANSPORTS; t++) {
            if (mode == 1 && host_local(transports[t]))
                continue;
            if ((rc = transports[t]->listen(cfg, &state[t], mine + off[t])) < 0)
                goto error;
            if (state[t] != NULL)
                h->offered |= 1u << t;
        }
    }
    if ((rc = b->ops->allgather(b, mine, stride, all)) < 0)
        goto error;

    number_hosts(m, all, stride);
    if ((rc = choose_transports(m, all, stride, mode, via)) < 0)
        goto error;
    for (int t = 0; t < NTRANSPORTS; t++) {
        int any = 0;
        for (int p = 0; p < n; p++) {
            use[p] = p != m->rank && via[p] == t;
            any |= use[p];
        }
        if (any && (rc = ring__mesh_connect(transports[t], state[t], cfg, all + off[t], stride, use,
                                            m->pair, deadline)) < 0)
            goto error;
    }
    for (int t = 0; t < NTRANSPORTS; t++)
        transports[t]->close(state[t]);
    if (ring__log_enabled(RING_LOG_DEBUG))
        log_mesh(m, via);
    free(mine);
    free(all);
    free(use);
    free(via);
    *out = m;
    return 0;
error:
    for (int t = 0; t < NTRANSPORTS; t++)
        transports[t]->close(state[t]);
    free(mine);
    free(all);
    free(use);
    free(via);
    ring__mesh_destroy(m);
    return rc;
}

void ring__mesh_destroy(struct ring__mesh *m)
{
    int saved = errno;
    if (m == NULL)
        return;
    for (int i = 0; m->pair != NULL && i < m->size; i++) {
        if (m->pair[i] != NULL)
            m->pair[i]->ops->destroy(m->pair[i]);
    }
    free(m->pair);
    free(m->host);
    free(m->pfd);
    free(m);
    errno = saved;
}

int ring__mesh_broken(const struct ring__mesh *m)
{
    return m->broken;
}

int ring__mesh_host(const struct ring__mesh *m, int rank)
{
    return m->host[rank];
}

int ring__mesh_nhosts(const struct ring__mesh *m)
{
    return m->nhosts;
}

/* ---- streams ---- */

/* Shuts every pair so that peers blocked on this rank see an error now, not at timeout. */
static int fail(struct ring__mesh *m, int err)
{
    m->broken = 1;
    for (int i = 0; i < m->size; i++) {
        if (m->pair[i] != NULL)
            m->pair[i]->ops->shutdown(m->pair[i]);
    }
    return err;
}

int ring__mesh_fail(struct ring__mesh *m, int err)
{
    return fail(m, err);
}

/*
 * Sleeps until tx (wanting txw) or rx (wanting rxw) can move, or timeout_ms passes.
 * Returns 0 or an error (a failed poll).
 */
static int sleep_on(struct ring__mesh *m, struct ring__pair *tx, int txw, struct ring__pair *rx,
                    int rxw, int timeout_ms)
{
    struct pollfd pfd[2];
    struct ring__pair *who[2];
    int want[2], n = 0, ready = 0, rc = 0;

    if (tx != NULL && tx == rx) {
        txw |= rxw;
        rx = NULL;
    }
    if (tx != NULL && txw) {
        who[n] = tx;
        want[n++] = txw;
    }
    if (rx != NULL && rxw) {
        who[n] = rx;
        want[n++] = rxw;
    }
    for (int i = 0; i < n; i++) {
        pfd[i].revents = 0;
        if (who[i]->ops->arm(who[i], want[i], &pfd[i]))
            ready = 1;
    }
    if (!ready) {
        rc = poll(pfd, (nfds_t)n, timeout_ms);
        if (rc < 0 && errno != EINTR)
            rc = ring__err(RING_ESYS, "rank %d: poll: %s", m->rank, strerror(errno));
        else
            rc = 0;
    }
    for (int i = 0; i < n; i++)
        who[i]->ops->disarm(who[i], want[i], ready ? 0 : pfd[i].revents);
    return rc;
}

int ring__mesh_stream(struct ring__mesh *m, const struct ring__stream *s)
{
    struct ring__pair *tx = s->tx_total > 0 ? m->pair[s->tx_peer] : NULL;
    struct ring__pair *rx = s->rx_total > 0 ? m->pair[s->rx_peer] : NULL;
    size_t txo = 0, rxo = 0;
    int64_t idle_since = -1, spin_until = 0;
    int spin_us =
        ((tx != NULL && tx->ops->syscall_tries) || (rx != NULL && rx->ops->syscall_tries)) &&
                s->tx_total + s->rx_total > m->tcp_spin_bytes
            ? m->tcp_spin_us
            : m->spin_us;

    if (m->broken)
        return ring__err(RING_EBROKEN, "rank %d: the communicator is broken", m->rank);
    for (;;) {
        size_t txlen = 0;
        int moved = 0, flushed = 1;

        if (txo < s->tx_total) {
            const void *p = s->tx_src(s->arg, txo, &txlen);
            if (txlen > s->tx_total - txo)
                txlen = s->tx_total - txo;
            if (txlen > 0) {
                ssize_t k = tx->ops->send(tx, p, txlen);
                if (k < 0)
                    return fail(m, (int)k);
                txo += (size_t)k;
                moved |= k > 0;
            }
        }
        if (rxo < s->rx_total) {
            size_t rxlen;
            void *d = s->rx_dst(s->arg, rxo, &rxlen);
            ssize_t k;
            if (rxlen > s->rx_total - rxo)
                rxlen = s->rx_total - rxo;
            k = rx->ops->recv(rx, d, rxlen);
            if (k < 0)
                return fail(m, (int)k);
            if (k > 0) {
                int rc = s->rx_done(s->arg, rxo, (size_t)k);
                rxo += (size_t)k;
                moved = 1;
                if (rc < 0)
                    return fail(m, rc);
            }
        }
        if (txo == s->tx_total && tx != NULL && (flushed = tx->ops->flushed(tx)) < 0)
            return fail(m, flushed);
        if (rxo == s->rx_total && txo == s->tx_total && flushed)
            return 0;
        if (moved) {
            idle_since = -1;
            continue;
        }

        /* Nothing moved: spin a while, then sleep until a pair can move or time runs out. */
        {
            int64_t now_us = ring__now_us(), left;
            int txw = 0, rxw = 0, rc;
            if (idle_since < 0) {
                idle_since = now_us;
                spin_until = now_us + spin_us;
            }
            if (now_us < spin_until) {
                if (m->yield)
                    sched_yield();
                continue;
            }
            left = m->op_timeout_ms - (now_us - idle_since) / 1000;
            if (txo < s->tx_total ? txlen > 0 : !flushed)
                txw = RING__WANT_TX; /* room to send, or the flush */
            if (rxo < s->rx_total)
                rxw = RING__WANT_RX;
            if (!txw && !rxw && txo == s->tx_total && rxo == s->rx_total)
                continue; /* the peer took the last bytes just now */
            if (!txw && !rxw) {
                ring__err(RING_EPROTO,
                          "rank %d: stream stalled with nothing to wait for (send to rank %d "
                          "%zu/%zu bytes, recv from rank %d %zu/%zu bytes)",
                          m->rank, s->tx_peer, txo, s->tx_total, s->rx_peer, rxo, s->rx_total);
                return fail(m, RING_EPROTO);
            }
            /* A peer that sleeps lazily idle learns only now that our bytes wait. */
            if (tx != NULL && tx->ops->kick != NULL)
                tx->ops->kick(tx);
            if (left <= 0) {
                ring__err(RING_ETIMEDOUT,
                          "rank %d: no data moved for %d ms (send to rank %d %zu/%zu bytes, "
                          "recv from rank %d %zu/%zu bytes); a peer is stuck or gone",
                          m->rank, m->op_timeout_ms, s->tx_peer, txo, s->tx_total, s->rx_peer, rxo,
                          s->rx_total);
                return fail(m, RING_ETIMEDOUT);
            }
            if ((rc = sleep_on(m, tx, txw, rx, rxw, (int)left)) < 0)
                return fail(m, rc);
        }
    }
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

int ring__mesh_sendrecv(struct ring__mesh *m, int dst, const void *sbuf, size_t slen, int src,
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
    return ring__mesh_stream(m, &s);
}

int ring__mesh_idle_arm(struct ring__mesh *m, int how)
{
    int ready = 0;
    for (int p = 0; p < m->size; p++) {
        if (m->pair[p] != NULL) {
            m->pair[p]->ops->idle(m->pair[p], how);
            ready |= m->pair[p]->ops->rx_ready(m->pair[p], 0);
        }
    }
    return ready;
}

void ring__mesh_idle_disarm(struct ring__mesh *m)
{
    for (int p = 0; p < m->size; p++) {
        if (m->pair[p] != NULL)
            m->pair[p]->ops->idle(m->pair[p], RING__IDLE_OFF);
    }
}

int ring__mesh_idle_poll(struct ring__mesh *m, int wake_fd, int timeout_ms)
{
    struct pollfd *pfd = m->pfd;
    int n = 0;

    pfd[n++] = (struct pollfd){.fd = wake_fd, .events = POLLIN};
    for (int p = 0; p < m->size; p++) {
        if (m->pair[p] != NULL)
            pfd[n++] =
                (struct pollfd){.fd = m->pair[p]->ops->wait_fd(m->pair[p]), .events = POLLIN};
    }
    if (poll(pfd, (nfds_t)n, timeout_ms) > 0 && (pfd[0].revents & POLLIN)) {
        uint64_t v;
        if (read(wake_fd, &v, sizeof(v)) < 0)
            v = 0; /* EAGAIN: another read took it */
        return 1;
    }
    return 0;
}

int ring__mesh_rx_ready(struct ring__mesh *m)
{
    int ready = 0;
    for (int p = 0; p < m->size; p++) {
        if (m->pair[p] != NULL)
            ready |= m->pair[p]->ops->rx_ready(m->pair[p], 1);
    }
    return ready;
}
