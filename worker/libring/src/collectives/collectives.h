/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collectives.h - the collectives layer: the process-wide state and the communicators the
 * collectives run over, and the collectives' parts: pure schedule and offset functions
 * (schedule.c), the reduction kernels (reduce.c), the ring pipeline (pipeline.c) and the
 * data-plane algorithms (allreduce.c, collectives.c...). They move bytes through the mesh's
 * streams (transport/transport.h) and never see a wire.
 */
#ifndef RING_COLLECTIVES_H
#define RING_COLLECTIVES_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "base/tuning.h"

/* ---- the process-wide state ---------------------------------------------------------------
 *
 * One per process, owned by ring.c (ring_init fills it, ring_finalize clears it). It is
 * declared here, in the lowest layer that reads it: the collectives take their knobs, the
 * mesh and the scratch segment from it. The layers above keep their state behind the
 * opaque pointers (engine, ops), and the layers below never see it: the transports get a
 * struct ring__mesh_cfg, the bootstrap nothing.
 */

struct ring__engine;
struct ring__bootstrap;
struct ring__mesh;
struct ring__ops_ctx;

struct ring__ctx {
    struct ring__tuning tune; /* every knob, parsed once by ring_init (tuning.h) */
    int rank, size;
    int local_rank, local_size, cross_rank, cross_size;
    int algo;                     /* RING__ALGO_* */
    int hier;                     /* RING__HIER_*: RING_HIERARCHICAL */
    int hier_logged;              /* the first hierarchical allreduce was logged */
    size_t small_bytes;           /* auto: recursive doubling at or below this */
    size_t rhd_bytes;             /* auto: halving-doubling above small_bytes, up to this */
    size_t segment_bytes;         /* pipeline reduction granularity */
    char *scratch;                /* one segment, allocated on first use by the engine thread */
    struct ring__bootstrap *boot; /* how the ranks met (bootstrap/bootstrap.h) */
    struct ring__mesh *mesh;      /* every peer's pair; NULL when size == 1 (transport.h) */
    int oversubscribed;           /* more ranks on this host than CPUs */
    int crowded;                  /* fewer CPUs than ranks' threads (program and engine) */
    int spin_us;                  /* how long a wait spins before it sleeps (RING_SPIN_US) */
    int bind;                     /* RING__BIND_*: RING_BIND */
    int bound_cpu;                /* the CPU ring_init bound the calling thread to, or -1 */
    cpu_set_t bind_saved;         /* that thread's mask before, for ring_finalize */
    struct ring__engine *engine;

    int setup_timeout_ms;      /* RING_TIMEOUT_SECONDS */
    int op_timeout_ms;         /* RING_OP_TIMEOUT_SECONDS */
    struct ring__ops_ctx *ops; /* what moves the data of each request (ops/ops.h) */
};

enum { RING__ALGO_AUTO, RING__ALGO_RING, RING__ALGO_RD, RING__ALGO_RHD };
enum { RING__HIER_OFF, RING__HIER_AUTO, RING__HIER_ON };

/* ---- communicators ------------------------------------------------------------------------ */

/*
 * A view of some ranks over the world's transport: the world itself, or a process set.
 * Collectives take one and speak in its ranks; ring__peer() maps them to world ranks.
 */
struct ring__comm {
    struct ring__ctx *ctx;
    int rank, size;     /* this rank's place in the view, and the view's size */
    const int *members; /* world rank of each member; NULL for the world */
    int set;            /* the process set's id (0: the world); ops that keep a
                           communicator per set (mpi, nccl) key it on this */
};

static inline int ring__peer(const struct ring__comm *c, int i)
{
    return c->members != NULL ? c->members[i] : i;
}

/* The world as a communicator. */
static inline struct ring__comm ring__world(struct ring__ctx *ctx)
{
    struct ring__comm w = {.ctx = ctx, .rank = ctx->rank, .size = ctx->size, .members = NULL};
    return w;
}

/* Internal reduction ops on integer dtypes, for the engine's control vectors. */
#define RING__OP_BAND ((ring_op_t)(RING_OP_COUNT + 0))
#define RING__OP_BOR  ((ring_op_t)(RING_OP_COUNT + 1))

/* ---- dtypes and reductions (reduce.c) ------------------------------------------------ */

float ring__half_to_float(uint16_t h);
uint16_t ring__float_to_half(float f);
float ring__bf16_to_float(uint16_t b);
uint16_t ring__float_to_bf16(float f);

/* Returns 1 when op and the scale factors are valid for dtype, else 0. */
int ring__op_valid(ring_dtype_t dtype, ring_op_t op, double prescale, double postscale);
/* 1 for the floating-point dtypes (float16, bfloat16, float32, float64). */
int ring__dtype_is_float(ring_dtype_t dtype);

/*
 * dst[i] = a[i] op b[i] for n elements (dst may alias a or b). op is SUM, MIN, MAX or
 * PRODUCT; callers map AVERAGE to SUM plus a postscale.
 */
void ring__reduce(void *dst, const void *a, const void *b, size_t n, ring_dtype_t dtype,
                  ring_op_t op);
/* dst[i] = src[i] * factor (dst may alias src); a no-op copy when factor is 1. */
void ring__scale(void *dst, const void *src, size_t n, ring_dtype_t dtype, double factor);
/* ring__reduce, then ring__scale of dst by factor, in one pass over memory (bitwise the
 * same result as the two calls). */
void ring__reduce_scale(void *dst, const void *a, const void *b, size_t n, ring_dtype_t dtype,
                        ring_op_t op, double factor);
/*
 * Fills n elements with op's neutral element (0 for SUM and AVERAGE, 1 for PRODUCT, the
 * largest or smallest value for MIN or MAX): what a joined rank contributes.
 */
void ring__neutral(void *buf, size_t n, ring_dtype_t dtype, ring_op_t op);

/*
 * Adasum's kernels, for the float dtypes. ring__adasum_partials sets out to {a.b, a.a, b.b}
 * over n elements, summed in double. ring__adasum_combine sets a[i] = ca a[i] + cb b[i],
 * in double, rounded once to dtype. ring__adasum_coeff is a vector's coefficient,
 * 1 - dot / (2 normsq), or 1 for a vector of (almost) zero norm.
 */
void ring__adasum_partials(const void *a, const void *b, size_t n, ring_dtype_t dtype,
                           double out[3]);
void ring__adasum_combine(void *a, const void *b, size_t n, ring_dtype_t dtype, double ca,
                          double cb);
double ring__adasum_coeff(double dot, double normsq);

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
 * Recursive halving (halving.c), among p ranks, p a power of two: the elements [*lo, *hi)
 * of count that rank owns after level halving steps (level 0: all of them). At step k the
 * partner is rank ^ 2^k: it owns the same region at level k, and the other half at k+1.
 */
void ring__rhd_region(size_t count, int rank, int level, size_t *lo, size_t *hi);

/*
 * Binomial-tree broadcast relative to root. Sets *parent (-1 for the root) and fills
 * children[] (at most 32), returning how many, in the order they must be sent to.
 */
int ring__bcast_tree(int rank, int size, int root, int *parent, int children[32]);

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

struct ring__stream; /* transport.h */
/* One rank's pass in progress: the cursors behind its stream's callbacks. */
struct ring__pipe_state {
    const struct ring__pipe *p;
    int rank, size;
    size_t esize, seg;
    char *scratch;
    size_t tx_len0;       /* length of send item 0: sendable from the start */
    size_t tx_ready;      /* send-stream bytes that may go now */
    int tx_item, rx_item; /* cursors: the item holding the current offset */
    size_t tx_start, rx_start;
};
/*
 * Sets up rank's pass over p on a ring of size ranks, moving no byte: *s gets the totals and
 * the callbacks (which use *r, so it must outlive the stream) and peers -1, for the caller
 * to fill in. scratch holds seg bytes, a multiple of the element size (unused, and may be
 * NULL, when p->nreduce is 0). ring__pipe_run hands s to the transport; the unit tests
 * drive every rank's stream in one process, which checks the offsets on every
 * (count, size, segment) without sockets.
 */
void ring__pipe_init(struct ring__pipe_state *r, struct ring__stream *s, const struct ring__pipe *p,
                     int rank, int size, size_t seg, char *scratch);

/* ---- the hierarchical allreduce (hierarchical.c) ------------------------------------------
 *
 * Reduce-scatter inside each host, one ring allreduce across hosts per slice (local rank i
 * with the i-th rank of every other host, all slices at once), allgather inside each host.
 * Hosts are the mesh's (transport.h), so the host passes are the shared-memory ones.
 */

/* The passes, in order. */
enum { RING__HIER_LOCAL_RS, RING__HIER_CROSS, RING__HIER_LOCAL_AG };

/*
 * One rank's view of the hosts of a communicator. Hosts are numbered by their first member.
 * The buffer is cut into nslices slices (ring__chunk), nslices being the smallest number of
 * members on one host; local rank i < nslices owns slice i and reduces it across hosts
 * with the i-th member of every other host.
 */
struct ring__hier {
    int nhosts;                 /* hosts the communicator spans */
    int nslices, max_local;     /* the fewest and the most members on one host */
    int host;                   /* this rank's host, and its place in the cross ring */
    int local_rank, local_size; /* this rank's place on its host, and the host's members */
    int *local;                 /* communicator ranks of this host's members, in order */
    int *cross;                 /* communicator rank of member local_rank of every host
                                   (nhosts entries; meaningful when local_rank < nslices) */
};

/*
 * Plans the hierarchy of size ranks, where rank i is on host host_of[i] (0 <= host_of[i] <
 * nids), for this rank. A pure function. Returns 0, or RING_ENOMEM. Free with
 * ring__hier_free (which accepts a plan that failed).
 */
int ring__hier_plan(const int *host_of, int size, int nids, int rank, struct ring__hier *h);
void ring__hier_free(struct ring__hier *h);

/*
 * This rank's pass phase (RING__HIER_*) of an allreduce of count elements of esize bytes:
 * sets p's schedule (first_chunk, nitems, nreduce, boff and blen, which it points at the
 * caller's arrays of at least max(local_size, nhosts) entries; postscale 1 in the host
 * passes, the caller's in the cross pass, which finishes every element), and the ring it
 * runs on: *n members (communicator ranks) and this rank's place *me. Returns 1, or 0 when
 * this rank takes no part (a host of one; in the cross pass, no slice of its own, an empty
 * slice, or one host). A pure function.
 */
int ring__hier_phase(const struct ring__hier *h, int phase, size_t count, size_t esize,
                     struct ring__pipe *p, size_t *boff, size_t *blen, const int **members, int *n,
                     int *me);

/*
 * Whether the hierarchical allreduce serves an allreduce of bytes over c, by
 * RING_HIERARCHICAL (ctx->hier), the algorithm setting and c's hosts: it does when c spans
 * several hosts and some host has several members; with RING_HIERARCHICAL=auto and
 * RING_ALLREDUCE_ALGO=auto only above RING_SMALL_ALLREDUCE_BYTES; never with
 * RING_ALLREDUCE_ALGO=rd. Returns 1 with *h filled (free with ring__hier_free), 0, or
 * RING_ENOMEM.
 */
int ring__hier_for(const struct ring__comm *c, size_t bytes, struct ring__hier *h);

/* The allreduce of ring__allreduce_ringv through h's passes (ring__hier_for). Logs its
 * first use on this rank at info level. */
int ring__allreduce_hier(const struct ring__comm *c, const struct ring__hier *h,
                         const struct ring__bufv *bv, size_t count, ring_dtype_t dtype,
                         ring_op_t op, double prescale, double postscale);

/* Writes into buf what the world's allreduces will do, for the log at ring_init. Returns 0
 * or RING_ENOMEM. */
int ring__hier_describe(struct ring__ctx *ctx, char *buf, size_t len);

/* ---- data-plane collectives (allreduce.c, collectives.c) -----------------------------------
 *
 * These move data; they do not check arguments or negotiate. The engine calls them, from
 * its thread only, with arguments that were validated at submission and agreed across
 * ranks. sendbuf == recvbuf means in place. AVERAGE must already be SUM plus a postscale.
 * Each returns 0 or an error code; after a transport error the world is broken.
 */
int ring__allreduce(const struct ring__comm *c, const void *sendbuf, void *recvbuf, size_t count,
                    ring_dtype_t dtype, ring_op_t op, double prescale, double postscale);
/* The allreduce over a buffer vector: count elements in bv's pieces (send != recv is out of
 * place, per piece): hierarchical where ring__hier_for says so, else the flat ring. */
int ring__allreduce_bufv(const struct ring__comm *c, const struct ring__bufv *bv, size_t count,
                         ring_dtype_t dtype, ring_op_t op, double prescale, double postscale);
/* The flat ring allreduce over a buffer vector. */
int ring__allreduce_ringv(const struct ring__comm *c, const struct ring__bufv *bv, size_t count,
                          ring_dtype_t dtype, ring_op_t op, double prescale, double postscale);
/* The allreduce algorithms, exposed so tests can run each at every size. */
int ring__allreduce_ring(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
                         size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                         double postscale);
/* Recursive halving, then doubling (halving.c); sizes that are not powers of two fold. */
int ring__allreduce_rhd(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
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
 * Adasum allreduce (adasum.c) of count elements of a float dtype, in place in buf:
 * nseg segments of segs[i] elements (summing to count; NULL: one segment of count) are
 * each combined with their own dot products and norms. prescale and postscale multiply
 * the input and the result. Every rank ends with bitwise the same result.
 */
int ring__allreduce_adasum(const struct ring__comm *c, void *buf, size_t count, ring_dtype_t dtype,
                           const size_t *segs, int nseg, double prescale, double postscale);
/*
 * The most bytes one message of ring__gather_bytes or ring__bcast_bytes may hold. They
 * carry the engine's negotiation: the requests a rank has not had cached yet, and rank 0's
 * answer, a few hundred bytes per request (a name of up to 255 bytes, a dozen 8-byte fields,
 * and an allgatherv's or alltoallv's counts, one or two per rank). 64 MiB is over 100,000
 * uncached requests at once, or thousands of allgatherv counts of a 4096-rank job. A peer
 * that announces more is broken or hostile: the receiver refuses it (RING_EPROTO) rather
 * than allocate what it asks for, and breaks the mesh so that no rank waits for the rest.
 */
#define RING__CTRL_MAX_BYTES ((uint64_t)64 << 20)

/*
 * Gathers variable-length byte strings at member 0: every member sends len bytes of buf
 * (at most RING__CTRL_MAX_BYTES); member 0 gets a malloc'ed array of size buffers in *out
 * (and their lengths in *lens), which it frees. Returns 0 or an error code: RING_EPROTO on
 * member 0 when a member announces more than RING__CTRL_MAX_BYTES, RING_EINVAL on a member
 * that would send more; either breaks the mesh (ring__mesh_fail).
 */
int ring__gather_bytes(const struct ring__comm *c, const void *buf, size_t len, char ***out,
                       size_t **lens);
/*
 * Broadcasts a byte string from member 0 (its *buf and *len, at most RING__CTRL_MAX_BYTES)
 * to every member, which gets a malloc'ed copy in *buf (freed by the caller) and its length
 * in *len. A length over the cap is refused as in ring__gather_bytes.
 */
int ring__bcast_bytes(const struct ring__comm *c, char **buf, size_t *len);

/* ---- the engine's control allreduce (control.c) ---- */

/* The largest attachment: the allreduces recursive doubling serves (RING_SMALL_...). */
#define RING__ATTACH_MAX (64 * 1024)

/*
 * Small allreduces riding on the control round. data holds this rank's input (prescaled,
 * the tensors one after the other) and receives the result; count elements of dtype
 * (bytes in all, at most RING__ATTACH_MAX), reduced with op (SUM, MIN, MAX, PRODUCT;
 * postscales are the caller's). key (key_bytes, at most the control words' size) names
 * the tensors and their layout: ranks reduce their data only when their keys are equal
 * byte for byte. on = 0: no attachment. On return valid is 1 when every rank attached the
 * same key and bytes, and data holds the reduction of all of them; 0 when the attachment
 * did not go through, on every rank alike, and data is undefined.
 */
struct ring__attach {
    int on;
    const void *key;
    size_t key_bytes;
    void *data;
    size_t count, bytes;
    ring_dtype_t dtype;
    ring_op_t op;
    int valid;
};

/*
 * ANDs nwords control words across the communicator (recursive doubling, so all ranks get
 * bitwise the same words), carrying a (may be NULL). scratch (the caller's) holds at least
 * ring__ctl_scratch_bytes(nwords) bytes: allocating its 128 KiB per call would cost an
 * mmap, a munmap and page faults every cycle. Returns 0 or a transport error.
 */
size_t ring__ctl_scratch_bytes(size_t nwords);
int ring__ctl_allreduce(const struct ring__comm *c, uint64_t *words, size_t nwords,
                        struct ring__attach *a, void *scratch);

#endif /* RING_COLLECTIVES_H */
