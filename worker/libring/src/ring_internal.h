/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring_internal.h - declarations shared between libring's files. Names are ring__*; none of
 * this is exported from the shared library.
 */
#ifndef RING_INTERNAL_H
#define RING_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ring.h"

/* ---- logging (log.c) ---------------------------------------------------------------- */

enum ring__log_level {
    RING_LOG_ERROR,
    RING_LOG_WARNING,
    RING_LOG_INFO,
    RING_LOG_DEBUG,
    RING_LOG_TRACE,
};

/* Reads RING_LOG_LEVEL; unknown values keep the default (warning) and say so. */
void ring__log_init(int rank);
int ring__log_enabled(enum ring__log_level level);
/* Writes one line to stderr: "[ring 3] warning: text". Never fails visibly. */
void ring__log(enum ring__log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Records a detailed message for ring_last_error(), logs it at debug level and returns err,
 * so that callers can write `return ring__err(RING_EPEER, "recv from rank %d", peer)`.
 */
int ring__err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- environment (env.c) ------------------------------------------------------------- */

/*
 * Parses the integer environment variable name into *out, within [min, max]. Returns 0
 * (unset leaves *out = dflt) or RING_EENV with a message naming the variable.
 */
int ring__env_int(const char *name, long dflt, long min, long max, long *out);

/* ---- dtypes and reductions (reduce.c) ------------------------------------------------ */

float ring__half_to_float(uint16_t h);
uint16_t ring__float_to_half(float f);
float ring__bf16_to_float(uint16_t b);
uint16_t ring__float_to_bf16(float f);

/* Returns 1 when op and the scale factors are valid for dtype, else 0. */
int ring__op_valid(ring_dtype_t dtype, ring_op_t op, double prescale, double postscale);

/*
 * dst[i] = a[i] op b[i] for n elements (dst may alias a or b). op is SUM, MIN, MAX or
 * PRODUCT; callers map AVERAGE to SUM plus a postscale.
 */
void ring__reduce(void *dst, const void *a, const void *b, size_t n, ring_dtype_t dtype,
                  ring_op_t op);
/* dst[i] = src[i] * factor (dst may alias src); a no-op copy when factor is 1. */
void ring__scale(void *dst, const void *src, size_t n, ring_dtype_t dtype, double factor);

/* ---- schedules (schedule.c): pure functions, tested on every (count, size) ----------- */

/*
 * Splits count elements into size contiguous chunks, the first count % size one element
 * longer. Sets chunk i's first element and length.
 */
void ring__chunk(size_t count, int size, int i, size_t *offset, size_t *len);

/* Euclidean modulo for ring arithmetic: result in [0, n). */
static inline int ring__mod(int a, int n)
{
    int m = a % n;
    return m < 0 ? m + n : m;
}

/*
 * The ring allreduce as one stream: item j (0 <= j < 2(size-1)) is a chunk that rank sends
 * to its right neighbour and one it receives from its left neighbour. The chunk sent at
 * item j+1 is the one received at item j, which is what lets the pipeline run across steps.
 * Items below size-1 are reduce-scatter (received data is reduced), the rest allgather
 * (received data is copied). first_chunk shifts which chunk each rank ends up owning:
 * allreduce uses 0 (rank r owns chunk r+1 after reduce-scatter), reducescatter uses -1
 * (rank r owns chunk r).
 */
int ring__ring_send_chunk(int rank, int size, int item, int first_chunk);
int ring__ring_recv_chunk(int rank, int size, int item, int first_chunk);

/*
 * Recursive doubling on a non-power-of-two size: the largest power of two p <= size takes
 * part; rank p+i (i < size-p) first folds into rank i and gets the result back at the end.
 */
int ring__pow2_floor(int n);
/* Returns this rank's partner at round k (distance 2^k) among the p core ranks. */
int ring__rd_partner(int rank, int round);

/*
 * Binomial-tree broadcast relative to root. Sets *parent (-1 for the root) and fills
 * children[] (at most 32), returning how many, in the order they must be sent to.
 */
int ring__bcast_tree(int rank, int size, int root, int *parent, int children[32]);

/* ---- transport (transport_tcp.c) ------------------------------------------------------- */

struct ring__tp;

/*
 * A duplex stream: send tx_total bytes to peer tx_peer while receiving rx_total bytes from
 * peer rx_peer (either total may be 0). Bytes come from and go to memory the callbacks name:
 *   tx_src(arg, off, &len) returns where the send stream's byte off lives and sets len to how
 *     many contiguous bytes from there may be sent now (0 = wait for receive progress);
 *   rx_dst(arg, off, &len) returns where receive byte off goes and how many bytes fit;
 *   rx_done(arg, off, len) is called after len bytes landed at receive offset off; it may
 *     reduce data and make more of the send stream ready. It returns 0 or an error code.
 * Every wait is bounded by the operation timeout: no bytes moved for that long gives
 * RING_ETIMEDOUT. A closed or reset socket gives RING_EPEER.
 */
struct ring__stream {
    int tx_peer, rx_peer;
    size_t tx_total, rx_total;
    const void *(*tx_src)(void *arg, size_t off, size_t *len);
    void *(*rx_dst)(void *arg, size_t off, size_t *len);
    int (*rx_done)(void *arg, size_t off, size_t len);
    void *arg;
};

/*
 * Connects to every other rank through the rendezvous at host:port. Returns the transport
 * in *out (caller frees with ring__tp_destroy) or an error code.
 */
int ring__tp_create(int rank, int size, const char *rendezvous, int setup_timeout_ms,
                    int op_timeout_ms, int sockbuf, struct ring__tp **out);
/* Closes every socket. Accepts NULL. */
void ring__tp_destroy(struct ring__tp *tp);
/*
 * Runs one stream to completion. On any error the transport shuts every connection, so
 * that peers waiting on this rank fail fast instead of waiting for their own timeouts,
 * and all later calls return RING_EBROKEN.
 */
int ring__tp_stream(struct ring__tp *tp, const struct ring__stream *s);
/* Sets how long a stream busy-polls before it sleeps in poll(); 0 never spins. */
void ring__tp_set_spin(struct ring__tp *tp, int spin_us);
/* The socket connected to peer (for the engine's idle poll). */
int ring__tp_fd(const struct ring__tp *tp, int peer);
/* Returns 1 after a transport error broke the mesh, else 0. */
int ring__tp_broken(const struct ring__tp *tp);
/* Plain exchange built on ring__tp_stream: either side may be empty (len 0 or peer -1). */
int ring__tp_sendrecv(struct ring__tp *tp, int dst, const void *sbuf, size_t slen, int src,
                      void *rbuf, size_t rlen);

/* ---- the process-wide state (ring.c) -------------------------------------------------- */

struct ring__engine;

struct ring__ctx {
    int rank, size;
    int local_rank, local_size, cross_rank, cross_size;
    int algo;             /* RING__ALGO_* */
    size_t small_bytes;   /* auto: recursive doubling at or below this */
    size_t segment_bytes; /* pipeline reduction granularity */
    char *scratch;        /* one segment, allocated on first use by the engine thread */
    struct ring__tp *tp;  /* NULL when size == 1 */
    int oversubscribed;   /* more ranks on this host than CPUs */
    struct ring__engine *engine;
};

enum { RING__ALGO_AUTO, RING__ALGO_RING, RING__ALGO_RD };

/* Returns the context, or NULL when libring is not initialized. */
struct ring__ctx *ring__ctx(void);
/* Returns the context, or NULL with *rc = RING_ENOTINIT when libring is not initialized. */
struct ring__ctx *ring__ctx_usable(int *rc);
/* This rank's own stop request (SIGTERM or ring_request_stop), before agreement. */
int ring__stop_local(void);

/* ---- communicators ------------------------------------------------------------------------ */

/*
 * A view of some ranks over the world's transport: the world itself, or a process set.
 * Collectives take one and speak in its ranks; ring__peer() maps them to world ranks.
 */
struct ring__comm {
    struct ring__ctx *ctx;
    int rank, size;     /* this rank's place in the view, and the view's size */
    const int *members; /* world rank of each member; NULL for the world */
};

static inline int ring__peer(const struct ring__comm *c, int i)
{
    return c->members != NULL ? c->members[i] : i;
}

/* The world as a communicator. */
struct ring__comm ring__world(struct ring__ctx *ctx);

/* Internal reduction ops on integer dtypes, for the engine's control vectors. */
#define RING__OP_BAND ((ring_op_t)(RING_OP_COUNT + 0))
#define RING__OP_BOR  ((ring_op_t)(RING_OP_COUNT + 1))

/* ---- the ring pipeline (pipeline.c) ------------------------------------------------------ */

/*
 * A logical buffer made of pieces: piece i holds bytes [start[i], start[i+1]) and lives at
 * recv[i] (the result) and send[i] (this rank's contribution; equal to recv[i] in place).
 * Fused tensors run as one ring over their own memory this way, with no copy into a
 * fusion buffer. A plain buffer is one piece.
 */
struct ring__bufv {
    int n;
    char *const *recv;
    const char *const *send;
    const size_t *start; /* n + 1 entries, start[0] = 0 */
};

/*
 * One pass around the ring as a single pipelined stream (see schedule.c). Items 0..nitems-1
 * move the chunks named by ring__ring_send_chunk/recv_chunk(first_chunk); the first nreduce
 * received items are reduced (recv[c] = send[c] op received), the rest copied into recv.
 * Chunk c is blen[c] bytes at logical byte offset boff[c]. The first send item comes from
 * the send side; later ones from the recv side. postscale is applied to the chunks of the
 * last reduce item, the ones this rank finishes. Returns 0 or an error code.
 */
struct ring__pipe {
    int first_chunk, nitems, nreduce;
    const size_t *boff, *blen;
    const struct ring__bufv *bv;
    ring_dtype_t dtype;
    ring_op_t op;
    double postscale;
};
int ring__pipe_run(const struct ring__comm *c, const struct ring__pipe *p);

/* ---- data-plane collectives (allreduce.c, collectives.c) -----------------------------------
 *
 * These move data; they do not check arguments or negotiate. The engine calls them, from
 * its thread only, with arguments that were validated at submission and agreed across
 * ranks. sendbuf == recvbuf means in place. AVERAGE must already be SUM plus a postscale.
 * Each returns 0 or an error code; after a transport error the world is broken.
 */
int ring__allreduce(const struct ring__comm *c, const void *sendbuf, void *recvbuf, size_t count,
                    ring_dtype_t dtype, ring_op_t op, double prescale, double postscale);
/* The ring allreduce over a buffer vector: count elements in bv's pieces (send != recv is
 * out of place, per piece). */
int ring__allreduce_ringv(const struct ring__comm *c, const struct ring__bufv *bv, size_t count,
                          ring_dtype_t dtype, ring_op_t op, double prescale, double postscale);
/* The two allreduce algorithms, exposed so tests can run each at every size. */
int ring__allreduce_ring(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
                         size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                         double postscale);
int ring__allreduce_rd(const struct ring__comm *c, const void *sendbuf, void *recvbuf, size_t count,
                       ring_dtype_t dtype, ring_op_t op, double prescale, double postscale);
/* counts == NULL: every rank contributes sendcount. sendbuf == NULL: own block in place. */
int ring__allgatherv(const struct ring__comm *c, const void *sendbuf, size_t sendcount,
                     void *recvbuf, const size_t *counts, ring_dtype_t dtype);
int ring__broadcast(const struct ring__comm *c, void *buf, size_t count, ring_dtype_t dtype,
                    int root);
int ring__reducescatter(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
                        size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                        double postscale);
/* sendcounts/recvcounts == NULL: count elements to and from every rank. */
int ring__alltoallv(const struct ring__comm *c, const void *sendbuf, const size_t *sendcounts,
                    void *recvbuf, const size_t *recvcounts, size_t count, ring_dtype_t dtype);
int ring__barrier(const struct ring__comm *c);
/*
 * Gathers variable-length byte strings at member 0: every member sends len bytes of buf;
 * member 0 gets a malloc'ed array of size buffers in *out (and their lengths in *lens),
 * which it frees. Returns 0 or an error code.
 */
int ring__gather_bytes(const struct ring__comm *c, const void *buf, size_t len, char ***out,
                       size_t **lens);
/*
 * Broadcasts a byte string from member 0 (its *buf and *len) to every member, which gets a
 * malloc'ed copy in *buf (freed by the caller) and its length in *len.
 */
int ring__bcast_bytes(const struct ring__comm *c, char **buf, size_t *len);

#endif /* RING_INTERNAL_H */
