/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport.h - how bytes move between this rank and its peers.
 *
 * Three layers, after Gloo's gloo/transport (a Pair per peer, with tcp/pair.cc behind it):
 *
 *   struct ring__pair       one peer: non-blocking send and recv of bytes, a wake-up fd to
 *                           sleep on, shutdown. One implementation per wire (tcp, shm...).
 *   struct ring__transport  a kind of wire: publishes this rank's address blob at start-up
 *                           and connects the pairs of the peers it is chosen for.
 *   struct ring__mesh       every pair of the world, and the loops that the collectives and
 *                           the engine use: a duplex stream with a deadline, a sendrecv, and
 *                           an idle wait for the engine. They never see the wire.
 *
 * Which transport serves which peer is decided once, in ring__mesh_create, identically on
 * both ends: shared memory when the two ranks are on the same host (the host identity
 * travels in the bootstrap's allgather) and both offer it, TCP otherwise, unless
 * RING_TRANSPORT says otherwise (tcp: TCP for every peer).
 */
#ifndef RING_TRANSPORT_H
#define RING_TRANSPORT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ring__bootstrap;
struct ring__key;

/* Directions a stream waits on, for ring__pair_ops.arm. */
enum { RING__WANT_TX = 1, RING__WANT_RX = 2 };

/*
 * How the engine sleeps between cycles (ring__pair_ops.idle, ring__mesh_idle_arm):
 *   RING__IDLE_NOW   a peer that starts a cycle wakes it at once: it has work waiting for
 *                    that cycle, and answers it at once;
 *   RING__IDLE_LAZY  it has nothing to do and would hold the peer's cycle back anyway
 *                    (RING_FAST_GRACE_US, engine.c), for its program's next blocking call
 *                    to meet the peer there. The peer's stream first spins for the answer,
 *                    which that call may give without this thread ever waking, and wakes it
 *                    only before it sleeps itself (ring__pair_ops.kick).
 */
enum { RING__IDLE_OFF = 0, RING__IDLE_NOW = 1, RING__IDLE_LAZY = 2 };

struct ring__pair;

/*
 * A pair's operations. None blocks. Errors are negative RING_E* codes with a ring__err()
 * text that names this rank and the peer ("rank 1: rank 2 closed the connection ...");
 * after one the mesh shuts every pair down and is broken for good.
 */
struct ring__pair_ops {
    const char *name; /* "tcp", "shm" */
    /*
     * 1 when each try of send or recv is a system call on a socket (tcp): a stream then
     * busy-polls for RING_TCP_SPIN_US, not RING_SPIN_US, before it sleeps (mesh.c).
     */
    int syscall_tries;
    /*
     * Offers len > 0 bytes to the peer. Returns how many the transport took (0 when it has
     * no room now). A transport may take bytes by reference and let the peer copy them
     * later (shm's single-copy mode): the caller keeps them valid and unchanged until
     * flushed() says so, which ring__mesh_stream waits for before it returns.
     */
    ssize_t (*send)(struct ring__pair *p, const void *buf, size_t len);
    /* Takes up to len > 0 bytes from the peer into buf. Returns how many (0: none yet). */
    ssize_t (*recv)(struct ring__pair *p, void *buf, size_t len);
    /*
     * 1 when the peer has taken every byte sent so far, 0 while some are referenced, or an
     * error code when the peer is gone before taking them.
     */
    int (*flushed)(struct ring__pair *p);
    /*
     * Prepares to sleep until the pair can move in the directions want (RING__WANT_*): TX
     * means room to send or, with everything sent, the flush; RX means bytes to receive or
     * an error. Returns 1 when it can move already (do not sleep, call disarm), or 0 with
     * *pfd set to the fd and events to poll. A peer that dies makes that fd ready.
     */
    int (*arm)(struct ring__pair *p, int want, struct pollfd *pfd);
    /* Undoes arm after the poll (or a 1 from arm); revents is what poll reported. */
    void (*disarm)(struct ring__pair *p, int want, short revents);
    /*
     * For the engine's idle wait (ring__mesh_idle_*): the fd to poll for POLLIN; idle(p,
     * how) asks the peer to make that fd ready when it sends (RING__IDLE_NOW), or before
     * its stream sleeps while what it sent is not taken (RING__IDLE_LAZY); idle(p,
     * RING__IDLE_OFF) stops it; rx_ready says whether bytes (or an error) wait to be
     * received, and with drain also consumes the wake-ups, which only the thread that runs
     * cycles may do.
     */
    int (*wait_fd)(struct ring__pair *p);
    void (*idle)(struct ring__pair *p, int how);
    int (*rx_ready)(struct ring__pair *p, int drain);
    /*
     * Called by a stream before it sleeps, on the pair it sends to: wakes the peer if it
     * sleeps lazily idle (RING__IDLE_LAZY) with bytes sent to it not yet taken. NULL where
     * sending always wakes the peer (tcp: the bytes make its socket readable).
     */
    void (*kick)(struct ring__pair *p);
    /* Makes the peer's waits on this pair end with an error soon, not at its timeout. */
    void (*shutdown)(struct ring__pair *p);
    /* Closes and frees the pair. */
    void (*destroy)(struct ring__pair *p);
};

struct ring__pair {
    const struct ring__pair_ops *ops;
    int rank, peer; /* world ranks of this end and the other */
};

/* What the mesh tells a transport at start-up. */
struct ring__mesh_cfg {
    int rank, size;
    int setup_timeout_ms;            /* RING_TIMEOUT_SECONDS */
    int op_timeout_ms;               /* RING_OP_TIMEOUT_SECONDS */
    int oversubscribed;              /* more ranks on this host than CPUs */
    const char *host_addr;           /* the bootstrap's address for this host, or "" */
    const struct ring__tuning *tune; /* the knobs (tuning.h); borrowed from the context */
    const struct ring__key *key;     /* the job's secret (auth.h); borrowed from the bootstrap */
};

/*
 * A kind of wire. ring__mesh_create calls, on every rank:
 *   listen(cfg, &state, blob): prepares this rank's end (a listening socket, a segment)
 *     and writes its address into blob (blob_len bytes). Returns 0; 0 with state NULL to
 *     decline on this rank (the peers then use another transport); or an error.
 *   after the allgather, for the peers this transport serves (both ends agree on which),
 *   mesh.c's connect loop, the same for every wire: this rank dials each lower peer and
 *   accepts each higher one. Every connection starts with the handshake of handshake.h
 *   (magic is this wire's), which proves both ends hold the job's secret before the
 *   transport sends a byte of its own. One poll loop runs every dial and every accepted
 *   connection at once, each a state machine, so no rank ever waits on another's progress
 *   through its other peers, and a stranger that connects and stalls holds up nobody. It
 *   calls
 *     connect(state, cfg, blob, peer, deadline, &fd): opens a connection to the lower rank
 *       peer, whose blob it gets, and checks what the wire can before the handshake (shm:
 *       the listener's uid). It may block, but only for the kernel: a connection completes
 *       into the peer's listening backlog without the peer's help. Returns 0 or an error.
 *       The mesh connects again when the peer drops the connection before its challenge
 *       (its accept loop sheds the oldest callers when flooded).
 *     dialed(state, cfg, fd, peer, &pair): fd proved it is rank peer's; sends what the wire
 *       needs after the handshake (shm: the segment) and makes *pair, which owns fd from
 *       then on (also on an error: the mesh destroys it). Returns 1 when the pair is ready,
 *       0 when it waits for the peer's reply (dial_reply), or an error.
 *     dial_reply(state, cfg, fd, pair, deadline): fd is readable: takes the peer's reply
 *       and finishes pair. Returns 0 or an error. NULL where dialed never returns 0.
 *     admit(state, cfg, sock): may refuse a connection accepted on listen_fd before its
 *       handshake starts (shm: a caller of another uid); 1 admits, 0 refuses (and logs
 *       why; the mesh closes sock). NULL admits everyone to the handshake.
 *     answer(state, cfg, sock, peer, pairs, deadline): takes sock, a connection whose
 *       handshake proved it is rank peer's (a higher rank this transport serves, not yet
 *       connected), does what the wire needs after the handshake and makes pairs[peer].
 *       It may wait for bytes the dialer sent right after its proof, nothing else.
 *       Returns 0 or an error.
 *   close(state): frees what listen made (pairs live on). Accepts NULL.
 */
struct ring__transport {
    const char *name;
    int host_only;  /* reaches only ranks of the same host (shm) */
    uint32_t magic; /* first in this wire's hello and challenge (handshake.h) */
    size_t blob_len;
    int (*listen)(const struct ring__mesh_cfg *cfg, void **state, void *blob);
    int (*listen_fd)(void *state);
    int (*connect)(void *state, const struct ring__mesh_cfg *cfg, const void *blob, int peer,
                   int64_t deadline, int *fd);
    int (*dialed)(void *state, const struct ring__mesh_cfg *cfg, int fd, int peer,
                  struct ring__pair **pair);
    int (*dial_reply)(void *state, const struct ring__mesh_cfg *cfg, int fd,
                      struct ring__pair *pair, int64_t deadline);
    int (*admit)(void *state, const struct ring__mesh_cfg *cfg, int sock);
    int (*answer)(void *state, const struct ring__mesh_cfg *cfg, int sock, int peer,
                  struct ring__pair **pairs, int64_t deadline);
    void (*close)(void *state);
};

/*
 * For the handshake: 1 when a hello from rank of a world of size names a pair this rank
 * still waits for (the same world, a higher rank that this transport serves, not yet
 * connected), else 0.
 */
int ring__mesh_wanted(const struct ring__mesh_cfg *cfg, const unsigned char *use,
                      struct ring__pair *const *pairs, uint32_t rank, uint32_t size);

/*
 * Connects the pairs transport t serves (use[peer]) through its listening state, given every
 * rank's blob for t (blobs + rank * stride) (connect.c). Fills pairs[peer] (a pair made
 * before an error stays there, for the caller to destroy). Returns 0 or an error, by
 * deadline.
 */
int ring__mesh_connect(const struct ring__transport *t, void *state,
                       const struct ring__mesh_cfg *cfg, const char *blobs, size_t stride,
                       const unsigned char *use, struct ring__pair **pairs, int64_t deadline);

extern const struct ring__transport ring__transport_shm;
extern const struct ring__transport ring__transport_tcp;

/* ---- the mesh (mesh.c) ---- */

struct ring__mesh;

/*
 * Connects this rank to every other through the bootstrap b (one allgather of address
 * blobs). spin_us: how long a stream busy-polls before it sleeps. Returns 0 and *out
 * (free with ring__mesh_destroy), or an error code.
 */
int ring__mesh_create(struct ring__bootstrap *b, const struct ring__mesh_cfg *cfg, int spin_us,
                      struct ring__mesh **out);
/* Closes every pair. Accepts NULL. */
void ring__mesh_destroy(struct ring__mesh *m);
/* 1 after a transport error broke the mesh, else 0. */
int ring__mesh_broken(const struct ring__mesh *m);
/*
 * Breaks the mesh on purpose, as a transport error does: every pair is shut, so that peers
 * waiting on this rank fail now rather than at their timeouts, and later calls give
 * RING_EBROKEN. For a protocol violation found above the transport (a peer announced a
 * length it may not send). Returns err.
 */
int ring__mesh_fail(struct ring__mesh *m, int err);
/* The host index of rank (hosts numbered by their lowest rank, from 0), and the count. */
int ring__mesh_host(const struct ring__mesh *m, int rank);
int ring__mesh_nhosts(const struct ring__mesh *m);

/*
 * A duplex stream: send tx_total bytes to peer tx_peer while receiving rx_total bytes from
 * peer rx_peer (either total may be 0). Bytes come from and go to memory the callbacks name:
 *   tx_src(arg, off, &len) returns where the send stream's byte off lives and sets len to how
 *     many contiguous bytes from there may be sent now (0 = wait for receive progress);
 *   rx_dst(arg, off, &len) returns where receive byte off goes and how many bytes fit;
 *   rx_done(arg, off, len) is called after len bytes landed at receive offset off; it may
 *     reduce data and make more of the send stream ready. It returns 0 or an error code.
 * Bytes handed out by tx_src must stay unchanged until the stream returns (a transport may
 * copy them late, see ring__pair_ops.send); bytes written through rx_dst must not overlap
 * send bytes the peer may still be reading. The ring schedules guarantee it causally: a
 * chunk comes back to a rank only after it went around the whole ring.
 * Every wait is bounded by the operation timeout: no byte moved for that long gives
 * RING_ETIMEDOUT. A dead peer gives RING_EPEER. On any error the mesh shuts every pair, so
 * that peers waiting on this rank fail fast instead of at their own timeouts, and every
 * later call returns RING_EBROKEN.
 */
struct ring__stream {
    int tx_peer, rx_peer;
    size_t tx_total, rx_total;
    const void *(*tx_src)(void *arg, size_t off, size_t *len);
    void *(*rx_dst)(void *arg, size_t off, size_t *len);
    int (*rx_done)(void *arg, size_t off, size_t len);
    void *arg;
};

/* Runs one stream to completion. Returns 0 or an error code. */
int ring__mesh_stream(struct ring__mesh *m, const struct ring__stream *s);
/* A plain exchange built on ring__mesh_stream: either side may be empty (len 0 or peer -1). */
int ring__mesh_sendrecv(struct ring__mesh *m, int dst, const void *sbuf, size_t slen, int src,
                        void *rbuf, size_t rlen);
/*
 * The engine's idle wait. Cycles may run on another thread while the engine thread sleeps
 * (the fast path), so the wait has three parts, and only the thread that runs cycles
 * consumes wake-ups:
 *   ring__mesh_idle_arm(m, how): asks every peer to wake this process when it sends
 *     (RING__IDLE_NOW), or when it sent and waited a while (RING__IDLE_LAZY); returns
 *     1 when something waits to be received already (then do not sleep);
 *   ring__mesh_idle_poll(m, wake_fd, timeout_ms): sleeps until a peer sends, wake_fd is
 *     readable (its count is consumed) or timeout_ms passes (-1: no limit), touching no
 *     pair; returns 1 when wake_fd was readable;
 *   ring__mesh_idle_disarm(m): stops the wake-ups.
 * ring__mesh_rx_ready(m), for the thread that runs cycles: consumes the wake-ups and
 * returns 1 when a peer has sent something (it started a cycle), else 0.
 */
int ring__mesh_idle_arm(struct ring__mesh *m, int how);
int ring__mesh_idle_poll(struct ring__mesh *m, int wake_fd, int timeout_ms);
void ring__mesh_idle_disarm(struct ring__mesh *m);
int ring__mesh_rx_ready(struct ring__mesh *m);

#endif /* RING_TRANSPORT_H */
