/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ops.h - the collective operations: what moves the data of an operation the engine agreed
 * on. One table of functions (struct ring__ops) per implementation, as Horovod's
 * horovod/common/ops/ and its HOROVOD_CPU_OPERATIONS have them. (They were called
 * "backends" before; that word now names only ringd's execution backends.)
 *
 * The engine negotiates every request over libring's own mesh (transport.h) and then hands
 * the agreed collective to the ops chosen per request by where its buffers live:
 *
 *   host memory    RING_CPU_OPERATIONS: ring (default) - libring's algorithms over its
 *                  transports (collectives.h); or mpi - the same operation through MPI on a
 *                  communicator of the same ranks (ops_mpi.c), so users can compare.
 *   GPU memory     nccl - NCCL on a CUDA stream, with a fusion buffer on the device
 *                  (ops_nccl.c). Built with RING_WITH_CUDA.
 *
 * The negotiation, the response cache, stall checks and the control plane always stay on
 * the mesh: only the data moves through the ops. (The ops' own traffic cannot wake a
 * rank sleeping in the mesh's idle wait, so the control plane could not move there.)
 *
 * The functions have the contract of the data-plane functions in collectives.h: the engine calls
 * them from its thread only, on every member of c in the same order, with arguments that
 * were validated at submission and agreed across ranks; sendbuf == recvbuf is in place;
 * AVERAGE is already SUM with a postscale. Each returns 0 or a RING_E* code with a
 * ring__err() text naming this rank; after an error the engine fails, as after a transport
 * error (the world is broken and the job must restart). Every wait is bounded by
 * RING_OP_TIMEOUT_SECONDS: ops that cannot tell whether bytes are moving (MPI, NCCL)
 * bounds the whole operation by it.
 *
 * Adding an implementation: write its functions (all but allreduce_bufv are required),
 * create its state in ring__ops_create when its environment asks for it, and return its
 * table from ring__ops_for.
 */
#ifndef RING_OPS_H
#define RING_OPS_H

#include <stdatomic.h>
#include <stddef.h>

#include "collectives/collectives.h"

struct ring__ops {
    const char *name; /* "ring", "mpi", "nccl": for logs and messages */
    /*
     * 1 when the buffers are device memory. The engine then never touches their bytes: it
     * hands every allreduce batch, fused or not, to allreduce_bufv (with NULL pieces for a
     * joined rank's neutral contribution), skips RING_COMPRESSION and its host fusion
     * buffer, and the ops fuse on the device.
     */
    int device_memory;
    int (*allreduce)(const struct ring__comm *c, const void *sendbuf, void *recvbuf, size_t count,
                     ring_dtype_t dtype, ring_op_t op, double prescale, double postscale);
    /*
     * A batch as one allreduce over a buffer vector (collectives.h). NULL when the ops
     * have none: the engine then fuses through its host fusion buffer and calls allreduce.
     * With device_memory, a piece whose recv and send are NULL is a joined rank's: it adds
     * op's neutral element and keeps nothing.
     */
    int (*allreduce_bufv)(const struct ring__comm *c, const struct ring__bufv *bv, size_t count,
                          ring_dtype_t dtype, ring_op_t op, double prescale, double postscale);
    /* counts == NULL: every rank sends sendcount. sendbuf == NULL: own block in place. */
    int (*allgatherv)(const struct ring__comm *c, const void *sendbuf, size_t sendcount,
                      void *recvbuf, const size_t *counts, ring_dtype_t dtype);
    /* buf == NULL (count > 0): this rank has joined; it takes part and keeps nothing. */
    int (*broadcast)(const struct ring__comm *c, void *buf, size_t count, ring_dtype_t dtype,
                     int root);
    int (*reducescatter)(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
                         size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                         double postscale);
    /* sendcounts/recvcounts == NULL: count elements to and from every rank. */
    int (*alltoallv)(const struct ring__comm *c, const void *sendbuf, const size_t *sendcounts,
                     void *recvbuf, const size_t *recvcounts, size_t count, ring_dtype_t dtype);
    int (*barrier)(const struct ring__comm *c);
};

/* The default: libring's own algorithms over its transports (ops.c). */
extern const struct ring__ops ring__ops_ring;

/* The ops of this process: the CPU ones chosen at ring_init, and their states. */
struct ring__mpi_coll;
struct ring__nccl;
struct ring__ops_ctx {
    const struct ring__ops *cpu; /* RING_CPU_OPERATIONS */
    atomic_int gpu_device;       /* the GPU of this rank's first GPU tensor, or -1 */
    struct ring__mpi_coll *mpi;  /* with RING_CPU_OPERATIONS=mpi */
    struct ring__nccl *nccl;     /* built with NCCL: created at ring_init, connected on the
                                    first GPU collective of each process set */
};

/*
 * Reads RING_CPU_OPERATIONS (ring or mpi) and prepares the ops for ctx, whose rank,
 * size, bootstrap and mesh are set. Called by ring_init before the engine starts. Returns 0
 * and *out (free with ring__ops_destroy), or RING_EENV (unknown value), RING_ENOTSUP
 * (mpi or nccl not built in, or MPI unusable from a background thread), RING_EBOOTSTRAP
 * (mpi: not launched by mpirun, or MPI's world is not libring's) or RING_ENOMEM.
 */
int ring__ops_create(struct ring__ctx *ctx, struct ring__ops_ctx **out);
/* Frees the ops' state after the engine stopped. Accepts NULL. broken: the job failed, so do
 * not wait for peers (MPI and NCCL are aborted rather than finalized). */
void ring__ops_destroy(struct ring__ops_ctx *b, int broken);

/* The ops for a request's buffers: device < 0 is host memory. Never NULL. */
const struct ring__ops *ring__ops_for(const struct ring__ctx *ctx, int device);

/*
 * Where a request's buffers live, at submission. a and b are its send and receive buffers
 * (either may be NULL or RING_IN_PLACE, which are skipped). Sets *device to -1 for host
 * memory or the CUDA device of GPU memory. Returns 0, or RING_EINVAL with a message naming
 * what and name when the buffers are on different devices, or on another GPU than this
 * rank's earlier GPU tensors (libring drives one GPU per rank).
 */
/* 0 when no buffer can be GPU memory (built without CUDA, or no device in this process): a
 * caller with many buffers may then skip ring__buffer_device. Thread safe. */
int ring__gpus_visible(void);
int ring__buffer_device(struct ring__ctx *ctx, const char *what, const char *name, const void *a,
                        const void *b, int *device);

/* ---- per implementation; each file says what its functions do ---- */

/* ops_mpi.c (built with MPI). */
extern const struct ring__ops ring__ops_mpi;
int ring__mpi_coll_create(struct ring__ctx *ctx, struct ring__mpi_coll **out);
void ring__mpi_coll_destroy(struct ring__mpi_coll *m, int broken);

/* ops_nccl.c and cuda.c (built with CUDA and NCCL). */
extern const struct ring__ops ring__ops_nccl;
int ring__nccl_create(struct ring__ctx *ctx, struct ring__nccl **out);
void ring__nccl_destroy(struct ring__nccl *n, int broken);
/*
 * The CUDA device holding ptr, or -1 for host memory (also when no CUDA driver or device is
 * present, or no CUDA context exists in the process: no device memory can exist then).
 * Thread safe.
 */
int ring__cuda_device_of(const void *ptr);
/* 1 when the CUDA runtime sees a device (asked once per process). Thread safe. */
int ring__cuda_have_devices(void);

#endif /* RING_OPS_H */
