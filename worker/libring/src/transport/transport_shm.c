/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport_shm.c - pairs between ranks of the same host, over shared memory.
 *
 * Each pair has:
 *   - a segment of anonymous shared memory (memfd_create) with one ring per direction. It
 *     is never named in /dev/shm or anywhere else: the higher rank creates it and passes
 *     the fd to the lower one over the pair's socket (SCM_RIGHTS); both map it and close
 *     the fd, so the memory goes away with the last mapping, even when a process is killed.
 *   - a connected Unix socket (abstract namespace, so no file either). It is the doorbell
 *     that wakes a sleeping peer, and it tells a rank at once that its peer died: the
 *     kernel closes the socket of a killed process, and poll() reports it.
 *
 * A ring carries records, in order: COPY records hold their bytes (two copies: in and
 * out); CMA records hold only the address and length of the sender's bytes, which the
 * receiver copies straight out of the sender's memory with process_vm_readv (one copy, in
 * the kernel). Sends of at least RING_SHM_CMA_BYTES go by CMA when the receiver proved at
 * set-up that it may read the sender's memory; smaller ones, and every send without CMA,
 * are copied. The sender keeps CMA bytes unchanged until the receiver has taken them (the
 * pair is not flushed until then; see transport.h).
 *
 * Who may connect: the socket's name is public (/proc/net/unix lists every abstract name),
 * so the acceptor first checks the caller's uid (SO_PEERCRED: the kernel's word, not the
 * caller's) and refuses any other user, then runs the handshake of handshake.h, which
 * proves the caller holds the job's secret; only then does it take a segment from it. The
 * dialer checks the listener's uid and the acceptor's proof before it hands its segment
 * over. The segment's memfd is sealed at its size (F_SEAL_SHRINK | F_SEAL_GROW |
 * F_SEAL_SEAL), and the acceptor maps it only when those seals and its size check out, so
 * no peer can shrink it under the mapping (a SIGBUS on the next access). Everything a peer
 * writes into the segment is checked before use (shm_record.h), and each side keeps its own
 * index privately, writing it to the segment only for the peer to read.
 *
 * Waiting: a rank that finds nothing to do spins (mesh.c), then arms: it raises a flag in
 * the ring it waits on and sleeps in poll() on the socket. The other side, after it moved
 * the ring's head or tail, rings the doorbell (one byte) only when the flag is up, so
 * steady streaming costs no syscall at all. The flag and the index are written and read
 * in opposite orders on the two sides with sequentially consistent atomics, so a wake-up
 * is never lost: either the sleeper sees the new index, or the mover sees the flag. An
 * engine sleeping lazily idle (transport.h) is rung only when the sender is about to sleep
 * too (shm_kick).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/base.h"
#include "base/net.h"
#include "base/tuning.h"
#include "transport/shm_record.h"
#include "transport/transport.h"

/* "RSM2": the wire's magic (handshake.h); "RSM1" was the unauthenticated hello before it. */
#define SHM_MAGIC 0x52534d32u

#define REC_BYTES  RING__SHM_REC_BYTES
#define ALIGN16(n) (((n) + 15) & ~(uint64_t)15)
#define CMA_MAX    RING__SHM_CMA_MAX

enum { REC_COPY = RING__SHM_COPY, REC_CMA = RING__SHM_CMA, REC_PAD = RING__SHM_PAD };

/*
 * One direction's ring indices, on separate cache lines for the writer's and the reader's
 * fields so that each side writes only its own line.
 */
struct chan {
    _Atomic uint64_t head;         /* written by the sender: bytes of records published */
    _Atomic uint32_t writer_waits; /* the sender sleeps until tail moves */
    _Atomic uint32_t cma_ok;       /* set by the receiver: it can read the sender's memory */
    char pad0[48];
    _Atomic uint64_t tail;         /* written by the receiver: bytes of records consumed */
    _Atomic uint32_t reader_waits; /* the receiver sleeps until head moves */
    _Atomic uint32_t idle_waits;   /* the receiver's engine sleeps until a cycle starts, and
                                      how it wants to be woken (RING__IDLE_*) */
    char pad2[48];
};

/* The segment: two channels, a closed flag, then the two rings. */
struct seg_header {
    struct chan ch[2];       /* ch[0]: lower rank -> higher rank; ch[1]: the other way */
    _Atomic uint32_t closed; /* either side failed or shut down */
    char pad[60];
};
#define SEG_HEADER_BYTES 4096

/* A rank's published address: the abstract socket name it listens on. */
struct shm_blob {
    char name[48]; /* without the leading NUL of the abstract namespace */
};

struct shm_state {
    int lfd;
    size_t ring_bytes;
    size_t cma_bytes;
    int cma;
};

struct shm_pair {
    struct ring__pair base;
    int sock;
    pid_t peer_pid;
    char *seg;
    size_t seg_bytes, cap;
    struct seg_header *hdr;
    struct chan *tx, *rx;
    char *txring, *rxring;
    uint64_t tx_head;  /* this side's own indices: the segment's copies are for the peer */
    uint64_t rx_tail;  /* to read, never read back (the peer could have rewritten them) */
    uint64_t rx_taken; /* bytes of the record at rx_tail already received */
    size_t cma_bytes;  /* send by CMA from this size on; 0 never */
    int tx_blocked;    /* the last send found no room */
    int kick_owed;     /* sent while the peer slept lazily idle, without waking it */
    int gone;          /* the socket reported the peer closed it */
};

/* Probe word: the peer reads it with process_vm_readv to prove CMA works. */
static const uint64_t cma_probe = 0x52494e47434d4121ull;

/* ---- doorbell and liveness ---- */

static void ring_doorbell(struct shm_pair *p)
{
    char b = 1;
    if (send(p->sock, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN &&
        errno != EWOULDBLOCK && errno != EINTR)
        p->gone = 1; /* EPIPE, ECONNRESET: the peer is gone */
}

/* Reads the doorbell bytes; a closed socket marks the peer gone. */
static void drain(struct shm_pair *p)
{
    char buf[64];
    for (;;) {
        ssize_t k = recv(p->sock, buf, sizeof(buf), MSG_DONTWAIT);
        if (k > 0)
            continue;
        if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            p->gone = 1;
        return;
    }
}

static int peer_error(struct shm_pair *p)
{
    return ring__err(RING_EPEER, "rank %d: rank %d closed the connection (it died or failed)",
                     p->base.rank, p->base.peer);
}

/* ---- the pair ---- */

/* No room: a send needs at most ROOM_WANTED bytes free to make progress (see shm_send). */
#define ROOM_WANTED (2 * (REC_BYTES + 16))

static ssize_t full(struct shm_pair *p)
{
    p->tx_blocked = 1;
    return 0;
}

static ssize_t shm_send(struct ring__pair *rp, const void *buf, size_t len)
{
    struct shm_pair *p = (struct shm_pair *)rp;
    uint64_t head = p->tx_head;
    uint64_t tail = atomic_load_explicit(&p->tx->tail, memory_order_acquire);
    uint64_t room = p->cap - (head - tail), pos = head % p->cap, contig = p->cap - pos, n;
    int cma = p->cma_bytes > 0 && len >= p->cma_bytes &&
              atomic_load_explicit(&p->tx->cma_ok, memory_order_relaxed);
    struct ring__shm_rec r;

    if (p->gone || atomic_load_explicit(&p->hdr->closed, memory_order_relaxed))
        return peer_error(p);
    if (head - tail > p->cap)
        return ring__err(RING_EPROTO, "rank %d: rank %d says it consumed bytes never sent",
                         p->base.rank, p->base.peer);
    /* A record never wraps: too little left before the end is skipped with a pad. */
    if (contig < REC_BYTES + (cma ? 0 : 16)) {
        if (room < contig + REC_BYTES + 16)
            return full(p);
        r = (struct ring__shm_rec){REC_PAD, 0, 0};
        memcpy(p->txring + pos, &r, sizeof(r));
        head += contig;
        room -= contig;
        pos = 0;
        contig = p->cap;
    }
    if (cma) {
        if (room < REC_BYTES)
            return full(p);
        n = len < CMA_MAX ? len : CMA_MAX;
        r = (struct ring__shm_rec){REC_CMA, (uint32_t)n, (uint64_t)(uintptr_t)buf};
        memcpy(p->txring + pos, &r, sizeof(r));
        head += REC_BYTES;
    } else {
        uint64_t space = (room < contig ? room : contig);
        if (space < REC_BYTES + 16)
            return full(p);
        space = (space - REC_BYTES) & ~(uint64_t)15;
        n = len < space ? len : space;
        r = (struct ring__shm_rec){REC_COPY, (uint32_t)n, 0};
        memcpy(p->txring + pos, &r, sizeof(r));
        memcpy(p->txring + pos + REC_BYTES, buf, n);
        head += REC_BYTES + ALIGN16(n);
    }
    p->tx_blocked = 0;
    p->tx_head = head;
    atomic_store_explicit(&p->tx->head, head, memory_order_seq_cst);
    if (atomic_load_explicit(&p->tx->reader_waits, memory_order_seq_cst))
        ring_doorbell(p);
    else
        switch (atomic_load_explicit(&p->tx->idle_waits, memory_order_seq_cst)) {
        case RING__IDLE_NOW:
            ring_doorbell(p);
            break;
        case RING__IDLE_LAZY:
            p->kick_owed = 1; /* shm_kick, if the peer's program does not take them first */
            break;
        }
    return (ssize_t)n;
}

/*
 * Copies n bytes at the peer's addr. A peer that failed marks the segment closed before
 * it returns from its stream and may reuse its memory; so a read is good only if the
 * segment was still open after it (sequentially consistent: the peer's store of closed
 * precedes any change to the bytes).
 */
static int cma_read(struct shm_pair *p, void *dst, uint64_t addr, size_t n)
{
    struct iovec local = {dst, n}, remote = {(void *)(uintptr_t)addr, n};
    while (n > 0) {
        ssize_t k = process_vm_readv(p->peer_pid, &local, 1, &remote, 1, 0);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            if ((k < 0 && errno == ESRCH) || atomic_load(&p->hdr->closed))
                return peer_error(p);
            return ring__err(RING_EPEER, "rank %d: reading rank %d's memory: %s", p->base.rank,
                             p->base.peer, k < 0 ? strerror(errno) : "no progress");
        }
        local.iov_base = (char *)local.iov_base + k;
        local.iov_len -= (size_t)k;
        remote.iov_base = (char *)remote.iov_base + k;
        remote.iov_len -= (size_t)k;
        n -= (size_t)k;
    }
    return atomic_load(&p->hdr->closed) ? peer_error(p) : 0;
}

static ssize_t shm_recv(struct ring__pair *rp, void *buf, size_t len)
{
    struct shm_pair *p = (struct shm_pair *)rp;
    uint64_t tail = p->rx_tail;
    uint64_t head = atomic_load_explicit(&p->rx->head, memory_order_acquire);
    size_t got = 0;
    int moved = 0, rc;

    while (got < len && tail != head) {
        uint64_t pos = tail % p->cap, n, span;
        struct ring__shm_rec r;
        char why[128];
        if (ring__shm_rec_read(p->rxring, p->cap, tail, head, p->rx_taken, &r, &span, why,
                               sizeof(why)) < 0)
            return ring__err(RING_EPROTO, "rank %d: rank %d wrote a bad shared-memory record: %s",
                             p->base.rank, p->base.peer, why);
        if (r.kind == REC_PAD) {
            tail += span;
            p->rx_taken = 0;
            moved = 1;
            continue;
        }
        n = r.len - p->rx_taken;
        if (n > len - got)
            n = len - got;
        if (r.kind == REC_COPY) {
            memcpy((char *)buf + got, p->rxring + pos + REC_BYTES + p->rx_taken, n);
        } else if ((rc = cma_read(p, (char *)buf + got, r.addr + p->rx_taken, n)) < 0) {
            return rc;
        }
        got += n;
        p->rx_taken += n;
        if (p->rx_taken == r.len) {
            tail += span;
            p->rx_taken = 0;
            moved = 1;
        }
    }
    if (moved) {
        p->rx_tail = tail;
        atomic_store_explicit(&p->rx->tail, tail, memory_order_seq_cst);
        if (atomic_load_explicit(&p->rx->writer_waits, memory_order_seq_cst))
            ring_doorbell(p);
    }
    if (got == 0 && (p->gone || atomic_load_explicit(&p->hdr->closed, memory_order_relaxed)))
        return peer_error(p);
    return (ssize_t)got;
}

static int shm_flushed(struct ring__pair *rp)
{
    struct shm_pair *p = (struct shm_pair *)rp;
    if (atomic_load_explicit(&p->tx->tail, memory_order_acquire) == p->tx_head)
        return 1;
    if (p->gone || atomic_load_explicit(&p->hdr->closed, memory_order_relaxed))
        return peer_error(p);
    return 0;
}

/*
 * Whether the pair can move in the directions want without sleeping: bytes to receive;
 * for a sender, room after a send found none, or everything taken (the flush).
 */
static int can_move(struct shm_pair *p, int want)
{
    if (p->gone || atomic_load_explicit(&p->hdr->closed, memory_order_relaxed))
        return 1; /* the next send or recv reports it */
    if ((want & RING__WANT_RX) &&
        atomic_load_explicit(&p->rx->head, memory_order_seq_cst) != p->rx_tail)
        return 1;
    if (want & RING__WANT_TX) {
        uint64_t used = p->tx_head - atomic_load_explicit(&p->tx->tail, memory_order_seq_cst);
        if (used == 0 || (p->tx_blocked && p->cap - used >= ROOM_WANTED))
            return 1;
    }
    return 0;
}

static int shm_arm(struct ring__pair *rp, int want, struct pollfd *pfd)
{
    struct shm_pair *p = (struct shm_pair *)rp;
    if (want & RING__WANT_RX)
        atomic_store_explicit(&p->rx->reader_waits, 1, memory_order_seq_cst);
    if (want & RING__WANT_TX)
        atomic_store_explicit(&p->tx->writer_waits, 1, memory_order_seq_cst);
    pfd->fd = p->sock;
    pfd->events = POLLIN;
    return can_move(p, want);
}

static void shm_disarm(struct ring__pair *rp, int want, short revents)
{
    struct shm_pair *p = (struct shm_pair *)rp;
    if (want & RING__WANT_RX)
        atomic_store_explicit(&p->rx->reader_waits, 0, memory_order_relaxed);
    if (want & RING__WANT_TX)
        atomic_store_explicit(&p->tx->writer_waits, 0, memory_order_relaxed);
    if (revents & (POLLIN | POLLHUP | POLLERR))
        drain(p);
}

/*
 * The lazy wake-up (transport.h, RING__IDLE_LAZY): the peer's engine sleeps with nothing to
 * do, and its program's next blocking call would take these bytes itself. Waking it costs
 * a syscall here, and there a thread that competes for a CPU with the one that does the
 * work, for nothing when that call comes within our spin. Rung only if the bytes still
 * wait (the head-tail and flag orders are shm_send's, so no wake-up is lost: the peer's
 * engine arms its flag before it checks for bytes).
 */
static void shm_kick(struct ring__pair *rp)
{
    struct shm_pair *p = (struct shm_pair *)rp;
    if (!p->kick_owed)
        return;
    p->kick_owed = 0;
    if (atomic_load_explicit(&p->tx->tail, memory_order_seq_cst) != p->tx_head &&
        atomic_load_explicit(&p->tx->idle_waits, memory_order_seq_cst) != RING__IDLE_OFF)
        ring_doorbell(p);
}

static int shm_wait_fd(struct ring__pair *rp)
{
    return ((struct shm_pair *)rp)->sock;
}

static void shm_idle(struct ring__pair *rp, int how)
{
    struct shm_pair *p = (struct shm_pair *)rp;
    atomic_store_explicit(&p->rx->idle_waits, (uint32_t)how, memory_order_seq_cst);
}

static int shm_rx_ready(struct ring__pair *rp, int consume)
{
    struct shm_pair *p = (struct shm_pair *)rp;
    if (consume)
        drain(p);
    return can_move(p, RING__WANT_RX);
}

static void shm_shutdown(struct ring__pair *rp)
{
    struct shm_pair *p = (struct shm_pair *)rp;
    atomic_store_explicit(&p->hdr->closed, 1, memory_order_seq_cst);
    shutdown(p->sock, SHUT_RDWR);
}

static void shm_destroy(struct ring__pair *rp)
{
    struct shm_pair *p = (struct shm_pair *)rp;
    if (p->seg != NULL)
        munmap(p->seg, p->seg_bytes);
    if (p->sock >= 0)
        close(p->sock);
    free(p);
}

static const struct ring__pair_ops shm_pair_ops = {
    .name = "shm",
    .send = shm_send,
    .recv = shm_recv,
    .flushed = shm_flushed,
    .arm = shm_arm,
    .disarm = shm_disarm,
    .wait_fd = shm_wait_fd,
    .idle = shm_idle,
    .rx_ready = shm_rx_ready,
    .kick = shm_kick,
    .shutdown = shm_shutdown,
    .destroy = shm_destroy,
};

/* ---- set-up ---- */

/*
 * After the handshake (handshake.h), which says who is who: the dialer's hello, with the
 * segment's fd attached, and the acceptor's answer.
 */
struct hello {
    uint32_t magic, pad;
    uint64_t cap;        /* ring bytes per direction (from the creator of the segment) */
    uint64_t probe_addr; /* where cma_probe lives in the sender */
};

/* Sends h, with fd attached when fd >= 0. */
static int send_hello(const struct ring__pair *rp, int sock, const struct hello *h, int fd)
{
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {(void *)h, sizeof(*h)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t k;

    if (fd >= 0) {
        struct cmsghdr *c;
        memset(cbuf, 0, sizeof(cbuf));
        msg.msg_control = cbuf;
        msg.msg_controllen = sizeof(cbuf);
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    do
        k = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (k < 0 && errno == EINTR);
    if (k != (ssize_t)sizeof(*h))
        return ring__err(RING_EBOOTSTRAP, "rank %d: shm hello to rank %d: %s", rp->rank, rp->peer,
                         k < 0 ? strerror(errno) : "short write");
    return 0;
}

/* Receives rp's peer's hello (and the fd attached to it, if any, into *fd) by deadline. */
static int recv_hello(const struct ring__pair *rp, int sock, struct hello *h, int *fd,
                      int64_t deadline)
{
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {h, sizeof(*h)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
    struct pollfd pfd = {.fd = sock, .events = POLLIN};
    int64_t left = deadline - ring__now_ms();
    struct cmsghdr *c;
    ssize_t k;

    if (fd != NULL)
        *fd = -1;
    if (poll(&pfd, 1, left > 0 ? (int)left : 0) <= 0)
        return ring__err(RING_ETIMEDOUT, "rank %d: no shm hello from rank %d in time", rp->rank,
                         rp->peer);
    do
        k = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (k < 0 && errno == EINTR);
    for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int got;
            memcpy(&got, CMSG_DATA(c), sizeof(int));
            if (fd != NULL)
                *fd = got;
            else
                close(got);
        }
    }
    if (k != (ssize_t)sizeof(*h) || h->magic != SHM_MAGIC) {
        if (fd != NULL && *fd >= 0)
            close(*fd);
        return ring__err(RING_EPROTO, "rank %d: a bad shm hello from rank %d (%zd bytes)", rp->rank,
                         rp->peer, k);
    }
    return 0;
}

/* Whether the other end of sock runs as this process's user (the kernel's SO_PEERCRED). */
static int same_user(int sock, struct ucred *cred)
{
    socklen_t len = sizeof(*cred);
    *cred = (struct ucred){0, (uid_t)-1, (gid_t)-1};
    return getsockopt(sock, SOL_SOCKET, SO_PEERCRED, cred, &len) == 0 && cred->uid == geteuid();
}

/* The abstract socket address of name. */
static socklen_t abstract_addr(const char *name, struct sockaddr_un *sa)
{
    size_t n = strnlen(name, sizeof(sa->sun_path) - 1);
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path + 1, name, n); /* sun_path[0] = 0: the abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int shm_listen(const struct ring__mesh_cfg *cfg, void **state, void *blob)
{
    struct shm_blob *b = blob;
    struct shm_state *st;
    struct sockaddr_un sa;
    uint64_t nonce = 0;
    const long *v = cfg->tune->v;
    int fd;

    if ((st = calloc(1, sizeof(*st))) == NULL)
        return ring__err(RING_ENOMEM, "out of memory");
    /* Sizes and the CMA threshold: the tuning table says where they come from. */
    st->ring_bytes = (size_t)v[RING__K_SHM_RING_BYTES] & ~(size_t)15;
    st->cma_bytes = (size_t)v[RING__K_SHM_CMA_BYTES];
    st->cma = v[RING__K_SHM_CMA] && st->cma_bytes > 0;
    if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce))
        nonce = (uint64_t)ring__now_us() * 0x9e3779b97f4a7c15ull;
    snprintf(b->name, sizeof(b->name), "ringmaster.%d.%016llx", (int)getpid(),
             (unsigned long long)nonce);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, abstract_addr(b->name, &sa)) < 0 ||
        listen(fd, 1024) < 0) {
        /* No Unix sockets here (a sandbox?): the peers fall back to TCP. */
        ring__log(RING_LOG_INFO, "shm: unavailable (unix socket: %s); using TCP within the host",
                  strerror(errno));
        if (fd >= 0)
            close(fd);
        free(st);
        memset(b, 0, sizeof(*b));
        return 0;
    }
    st->lfd = fd;
    *state = st;
    return 0;
}

/* Maps the segment and fills the pair's view of it; lower: this rank is the lower one. */
static int map_segment(struct shm_pair *p, int fd, size_t cap, int lower)
{
    p->cap = cap;
    p->seg_bytes = SEG_HEADER_BYTES + 2 * cap;
    p->seg = mmap(NULL, p->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p->seg == MAP_FAILED) {
        p->seg = NULL;
        return ring__err(RING_ESYS, "rank %d: mapping the segment shared with rank %d: %s",
                         p->base.rank, p->base.peer, strerror(errno));
    }
    p->hdr = (struct seg_header *)p->seg;
    p->tx = &p->hdr->ch[lower ? 0 : 1];
    p->rx = &p->hdr->ch[lower ? 1 : 0];
    p->txring = p->seg + SEG_HEADER_BYTES + (lower ? 0 : cap);
    p->rxring = p->seg + SEG_HEADER_BYTES + (lower ? cap : 0);
    return 0;
}

/*
 * After the hellos: learns the peer's pid from the kernel (SO_PEERCRED, in this rank's pid
 * namespace) and, when CMA is wanted, proves it by reading the peer's probe word; success
 * lets the peer send by reference on the channel this rank reads.
 */
static void finish_pair(struct shm_pair *p, const struct shm_state *st, uint64_t probe_addr)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    uint64_t v = 0;

    if (getsockopt(p->sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
        p->peer_pid = cred.pid;
    p->cma_bytes = st->cma ? st->cma_bytes : 0;
    if (st->cma && p->peer_pid > 0) {
        struct iovec local = {&v, sizeof(v)}, remote = {(void *)(uintptr_t)probe_addr, sizeof(v)};
        if (process_vm_readv(p->peer_pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof(v) &&
            v == cma_probe)
            atomic_store(&p->rx->cma_ok, 1);
        else
            ring__log(RING_LOG_INFO,
                      "shm: cannot read rank %d's memory (%s); copying through "
                      "the ring only",
                      p->base.peer, strerror(errno));
    }
}

static struct shm_pair *new_pair(const struct ring__mesh_cfg *cfg, int peer, int sock)
{
    struct shm_pair *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        close(sock);
        ring__err(RING_ENOMEM, "out of memory for a pair");
        return NULL;
    }
    p->base = (struct ring__pair){&shm_pair_ops, cfg->rank, peer};
    p->sock = sock;
    return p;
}

static int shm_listen_fd(void *state)
{
    return ((struct shm_state *)state)->lfd;
}

/* Only this job's user may even start the handshake: anyone can find the socket's name. */
static int shm_admit(void *state, const struct ring__mesh_cfg *cfg, int sock)
{
    struct ucred cred;
    if (same_user(sock, &cred))
        return 1;
    ring__log(RING_LOG_WARNING,
              "shm: refused a connection from uid %d (pid %d): only this job's user (uid %d) "
              "may connect",
              (int)cred.uid, (int)cred.pid, (int)geteuid());
    return 0;
}

/* Connects to the lower rank peer's socket (its name is in blob), of this user only. */
static int shm_connect(void *state, const struct ring__mesh_cfg *cfg, const void *blob, int peer,
                       int64_t deadline, int *out)
{
    const struct shm_blob *b = blob;
    struct sockaddr_un sa;
    socklen_t salen = abstract_addr(b->name, &sa);
    struct ucred cred;
    int sock, rc;

    if ((sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return ring__err(RING_ESYS, "socket(AF_UNIX): %s", strerror(errno));
    while (connect(sock, (struct sockaddr *)&sa, salen) < 0) {
        if (errno == EINTR)
            continue;
        rc = ring__err(RING_EBOOTSTRAP, "rank %d: cannot reach rank %d over shm: %s", cfg->rank,
                       peer, strerror(errno));
        close(sock);
        return rc;
    }
    if (!same_user(sock, &cred)) {
        close(sock);
        return ring__err(RING_EBOOTSTRAP,
                         "rank %d: the shm socket published by rank %d belongs to uid %d, not to "
                         "this job's user (uid %d)",
                         cfg->rank, peer, (int)cred.uid, (int)geteuid());
    }
    *out = sock;
    return 0;
}

/*
 * In the higher rank of a pair, once the handshake proved sock is the lower one's: creates
 * the segment and hands it over; the answer comes to shm_dial_reply.
 */
static int shm_dialed(void *state, const struct ring__mesh_cfg *cfg, int sock, int peer,
                      struct ring__pair **out)
{
    const struct shm_state *st = state;
    struct hello h = {SHM_MAGIC, 0, st->ring_bytes, (uint64_t)(uintptr_t)&cma_probe};
    size_t bytes = SEG_HEADER_BYTES + 2 * st->ring_bytes;
    struct shm_pair *p;
    int mfd, rc;

    if ((p = new_pair(cfg, peer, sock)) == NULL)
        return RING_ENOMEM;
    *out = &p->base;
    /* Sealed at its size before anyone else sees it: the peer can then map it knowing that
     * nobody, this rank included, can shrink it under the mapping. */
    mfd = memfd_create("ringmaster-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0 || ftruncate(mfd, (off_t)bytes) < 0 ||
        fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        rc = ring__err(RING_ESYS, "rank %d: a %zu-byte segment for rank %d: %s", cfg->rank, bytes,
                       peer, strerror(errno));
    } else {
        rc = map_segment(p, mfd, st->ring_bytes, 0);
        if (rc == 0)
            rc = send_hello(&p->base, sock, &h, mfd);
    }
    if (mfd >= 0)
        close(mfd); /* the mappings keep the memory; nothing has a name to unlink */
    return rc < 0 ? rc : 0;
}

/* The lower rank's answer to shm_dialed: the pair is ready. */
static int shm_dial_reply(void *state, const struct ring__mesh_cfg *cfg, int sock,
                          struct ring__pair *rp, int64_t deadline)
{
    const struct shm_state *st = state;
    struct shm_pair *p = (struct shm_pair *)rp;
    struct hello h;
    int rc;

    if ((rc = recv_hello(rp, sock, &h, NULL, deadline)) < 0)
        return rc;
    if (h.cap != st->ring_bytes)
        return ring__err(RING_EPROTO, "rank %d: rank %d answered for a ring of %llu bytes, not %zu",
                         cfg->rank, rp->peer, (unsigned long long)h.cap, st->ring_bytes);
    finish_pair(p, st, h.probe_addr);
    return ring__net_set_nonblock(sock);
}

/*
 * Answers in the lower rank of a pair, which maps what the higher one created, once the
 * handshake proved sock is rank peer's.
 */
static int shm_answer(void *state, const struct ring__mesh_cfg *cfg, int sock, int peer,
                      struct ring__pair **pairs, int64_t deadline)
{
    const struct shm_state *st = state;
    struct hello h;
    struct shm_pair *p;
    char why[128] = "no segment came with its hello";
    uint64_t peer_probe;
    int mfd, rc;

    if ((p = new_pair(cfg, peer, sock)) == NULL)
        return RING_ENOMEM;
    pairs[peer] = &p->base;
    if ((rc = recv_hello(&p->base, sock, &h, &mfd, deadline)) < 0)
        return rc;
    if (h.cap < 4096 || h.cap > ((uint64_t)1 << 30) || h.cap % 16 != 0)
        snprintf(why, sizeof(why), "a ring of %llu bytes", (unsigned long long)h.cap);
    if (mfd < 0 || h.cap < 4096 || h.cap > ((uint64_t)1 << 30) || h.cap % 16 != 0 ||
        ring__shm_check_segment(mfd, SEG_HEADER_BYTES + 2 * h.cap, why, sizeof(why)) < 0) {
        if (mfd >= 0)
            close(mfd);
        return ring__err(RING_EPROTO,
                         "rank %d: rank %d offered a shared-memory segment it cannot use: %s",
                         cfg->rank, peer, why);
    }
    rc = map_segment(p, mfd, (size_t)h.cap, 1);
    close(mfd);
    if (rc < 0)
        return rc;
    peer_probe = h.probe_addr;
    h = (struct hello){SHM_MAGIC, 0, h.cap, (uint64_t)(uintptr_t)&cma_probe};
    if ((rc = send_hello(&p->base, sock, &h, -1)) < 0)
        return rc;
    finish_pair(p, st, peer_probe);
    return ring__net_set_nonblock(sock);
}

static void shm_close(void *state)
{
    struct shm_state *st = state;
    if (st == NULL)
        return;
    close(st->lfd);
    free(st);
}

const struct ring__transport ring__transport_shm = {
    .name = "shm",
    .host_only = 1,
    .magic = SHM_MAGIC,
    .blob_len = sizeof(struct shm_blob),
    .listen = shm_listen,
    .listen_fd = shm_listen_fd,
    .connect = shm_connect,
    .dialed = shm_dialed,
    .dial_reply = shm_dial_reply,
    .admit = shm_admit,
    .answer = shm_answer,
    .close = shm_close,
};
