/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ops_nccl.c - the collectives of GPU buffers through NCCL (ops/ops.h). Built with
 * RING_WITH_CUDA (CUDA and NCCL found).
 *
 * One GPU per rank: the device of the rank's first GPU tensor (ops.c). Everything runs
 * on the engine thread, on one CUDA stream of libring's own; an operation is complete, and
 * its handle may complete, once that stream has drained. The program's buffers must be
 * ready when it submits them (it synchronizes its own stream first), as with any
 * asynchronous library that does not take the program's stream.
 *
 * Communicators: one per process set, made on the set's first GPU collective. The set's
 * rank 0 creates the NCCL unique id, which reaches the other members by libring's own
 * broadcast over the mesh that the bootstrap wired (the same path every negotiation takes),
 * so NCCL needs no launcher support of its own.
 *
 * Fusion: a fused batch is copied into a fusion buffer on the device (stream-ordered
 * device-to-device copies), reduced there in one ncclAllReduce and copied back. A joined
 * rank's pieces are op's neutral element (a memset for SUM, else a copy from the host).
 *
 * Scale factors: the engine hands SUM (AVERAGE already turned into SUM) with a prescale and
 * a postscale. Both go into one NCCL pre-multiplied sum, since sum(pre * x) * post =
 * sum(pre * post * x): no CUDA kernel of libring's own is needed. Integer tensors take
 * integral factors only, and PRODUCT takes none (RING_ENOTSUP; api.c refuses them at
 * submission).
 *
 * Timeouts: every communicator is non-blocking (ncclConfig_t.blocking = 0), so that its
 * creation and every call return at once; libring then polls the communicator's state and
 * the stream until RING_TIMEOUT_SECONDS (creation) or RING_OP_TIMEOUT_SECONDS (each
 * operation). A timeout or an error marks the NCCL ops broken: ring_finalize then aborts
 * the communicators (ncclCommAbort) rather than waiting for peers.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <nccl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Process set ids are below the engine's MAX_PSETS (engine_impl.h). */
#define MAX_SETS 256

struct ring__nccl {
    int rank, yield, setup_timeout_ms, op_timeout_ms;
    int device;          /* the rank's GPU; -1 until the first GPU collective */
    cudaStream_t stream; /* libring's stream on device */
    char *fusion;        /* device memory, fusion_bytes long */
    size_t fusion_bytes;
    ncclComm_t comms[MAX_SETS]; /* by process set id; NULL until its first GPU collective */
    int broken;                 /* every later operation gets RING_EBROKEN */
};

static struct ring__nccl *state(const struct ring__comm *c)
{
    return c->ctx->ops->nccl;
}

static int cuda_error(struct ring__nccl *n, cudaError_t e, const char *what)
{
    n->broken = 1;
    return ring__err(RING_EPEER, "rank %d: %s failed: %s", n->rank, what, cudaGetErrorString(e));
}

static int nccl_error(struct ring__nccl *n, ncclComm_t comm, ncclResult_t r, const char *what)
{
    const char *last = comm != NULL ? ncclGetLastError(comm) : NULL;

    n->broken = 1;
    return ring__err(r == ncclInvalidArgument || r == ncclInvalidUsage ? RING_EINVAL : RING_EPEER,
                     "rank %d: %s failed: %s%s%s", n->rank, what, ncclGetErrorString(r),
                     last != NULL && *last != '\0' ? ": " : "", last != NULL ? last : "");
}

static int timed_out(struct ring__nccl *n, const char *what, const char *limit)
{
    n->broken = 1;
    return ring__err(RING_ETIMEDOUT,
                     "rank %d: %s did not complete within %s; a peer is stuck or dead", n->rank,
                     what, limit);
}

/*
 * A non-blocking communicator's call returned r: waits while the communicator reports
 * ncclInProgress, until deadline. Returns 0 or an error code (the NCCL ops are then broken).
 */
static int settle(struct ring__nccl *n, ncclComm_t comm, ncclResult_t r, int64_t deadline,
                  const char *what)
{
    for (unsigned polls = 0; r == ncclInProgress; polls++) {
        if (polls % 64 == 63 && ring__now_ms() > deadline)
            return timed_out(n, what, "its timeout");
        if (n->yield)
            sched_yield();
        if (ncclCommGetAsyncError(comm, &r) != ncclSuccess)
            break;
    }
    return r == ncclSuccess ? 0 : nccl_error(n, comm, r, what);
}

/* Waits until the stream has drained, watching the communicator for a peer's failure. */
static int drain(struct ring__nccl *n, ncclComm_t comm, int64_t deadline, const char *what)
{
    for (unsigned polls = 0;; polls++) {
        cudaError_t e = cudaStreamQuery(n->stream);
        ncclResult_t r = ncclSuccess;
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return cuda_error(n, e, what);
        if (polls % 64 == 63) {
            if (comm != NULL && ncclCommGetAsyncError(comm, &r) == ncclSuccess &&
                r != ncclSuccess && r != ncclInProgress)
                return nccl_error(n, comm, r, what);
            if (ring__now_ms() > deadline)
                return timed_out(n, what, "RING_OP_TIMEOUT_SECONDS");
        }
        if (n->yield)
            sched_yield();
    }
}

/* The rank's GPU current on this thread, and libring's stream on it. */
static int prepare(struct ring__nccl *n, const struct ring__comm *c)
{
    cudaError_t e;

    if (n->broken)
        return ring__err(RING_EBROKEN, "rank %d: an earlier NCCL collective failed", n->rank);
    if (n->device < 0) {
        n->device = atomic_load(&c->ctx->ops->gpu_device);
        if (n->device < 0)
            return ring__err(RING_EPROTO, "rank %d: a GPU collective without a GPU tensor",
                             n->rank);
        if ((e = cudaSetDevice(n->device)) != cudaSuccess)
            return cuda_error(n, e, "cudaSetDevice");
        if ((e = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking)) != cudaSuccess)
            return cuda_error(n, e, "cudaStreamCreateWithFlags");
        ring__log(RING_LOG_DEBUG, "nccl: GPU %d", n->device);
        return 0;
    }
    if ((e = cudaSetDevice(n->device)) != cudaSuccess)
        return cuda_error(n, e, "cudaSetDevice");
    return 0;
}

/* The communicator of c's ranks, made on first use; NULL with *rc set on error. */
static ncclComm_t comm_of(struct ring__nccl *n, const struct ring__comm *c, int *rc)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    ncclResult_t r;
    ncclComm_t comm = NULL;

    if ((*rc = prepare(n, c)) < 0)
        return NULL;
    if (c->set < 0 || c->set >= MAX_SETS) {
        *rc = ring__err(RING_EINVAL, "rank %d: no NCCL communicator for process set %d", n->rank,
                        c->set);
        return NULL;
    }
    if (n->comms[c->set] != NULL)
        return n->comms[c->set];
    memset(&id, 0, sizeof(id));
    if (c->rank == 0 && (r = ncclGetUniqueId(&id)) != ncclSuccess) {
        *rc = nccl_error(n, NULL, r, "ncclGetUniqueId");
        /* the others wait in the broadcast below: they time out, as after any failure */
        return NULL;
    }
    /* Every member runs this response now, in the same order: the mesh carries the id. */
    if ((*rc = ring__broadcast(c, &id, sizeof(id), RING_UINT8, 0)) < 0) {
        n->broken = 1;
        return NULL;
    }
    cfg.blocking = 0;
    r = ncclCommInitRankConfig(&comm, c->size, id, c->rank, &cfg);
    if (comm == NULL) {
        *rc =
            nccl_error(n, NULL, r != ncclSuccess ? r : ncclInternalError, "ncclCommInitRankConfig");
        return NULL;
    }
    n->comms[c->set] = comm; /* aborted or destroyed with n */
    if ((*rc = settle(n, comm, r, ring__now_ms() + n->setup_timeout_ms, "ncclCommInitRankConfig")) <
        0)
        return NULL;
    ring__log(RING_LOG_DEBUG, "nccl: communicator of process set %d: rank %d of %d on GPU %d",
              c->set, c->rank, c->size, n->device);
    return comm;
}

static ncclDataType_t nccl_type(ring_dtype_t t)
{
    static const ncclDataType_t types[RING_DTYPE_COUNT] = {
        [RING_UINT8] = ncclUint8,
        [RING_INT8] = ncclInt8,
        [RING_INT32] = ncclInt32,
        [RING_INT64] = ncclInt64,
        [RING_FLOAT16] = ncclFloat16,
        [RING_BFLOAT16] = ncclBfloat16,
        [RING_FLOAT32] = ncclFloat32,
        [RING_FLOAT64] = ncclFloat64,
        /* NCCL has no 16-bit integer or boolean type: these only ever move (located() in
         * api.c refuses their reductions on a GPU), as elements of the same width. */
        [RING_INT16] = ncclFloat16,
        [RING_UINT16] = ncclFloat16,
        [RING_BOOL] = ncclUint8,
    };
    return types[t];
}

/*
 * The NCCL op for op scaled by factor. *custom is set when the op was made here (destroy it
 * with ncclRedOpDestroy once the call that uses it has returned). Returns 0 or
 * RING_ENOTSUP.
 */
static int nccl_op(struct ring__nccl *n, ncclComm_t comm, ring_dtype_t t, ring_op_t op,
                   double factor, ncclRedOp_t *out, int *custom)
{
    union {
        uint8_t u8;
        int8_t i8;
        int32_t i32;
        int64_t i64;
        uint16_t h;
        float f;
        double d;
    } s;
    ncclResult_t r;

    *custom = 0;
    if (factor == 1.0) {
        *out = op == RING_PRODUCT ? ncclProd
               : op == RING_MIN   ? ncclMin
               : op == RING_MAX   ? ncclMax
                                  : ncclSum;
        return 0;
    }
    if (op != RING_SUM)
        return ring__err(RING_ENOTSUP,
                         "rank %d: GPU buffers take scale factors with SUM and "
                         "AVERAGE only",
                         n->rank);
    if (t <= RING_INT64 && factor != floor(factor))
        return ring__err(RING_ENOTSUP,
                         "rank %d: integer GPU buffers take integral scale "
                         "factors only, not %g",
                         n->rank, factor);
    switch (t) {
    case RING_UINT8:
        s.u8 = (uint8_t)factor;
        break;
    case RING_INT8:
        s.i8 = (int8_t)factor;
        break;
    case RING_INT32:
        s.i32 = (int32_t)factor;
        break;
    case RING_INT64:
        s.i64 = (int64_t)factor;
        break;
    case RING_FLOAT16:
        s.h = ring__float_to_half((float)factor);
        break;
    case RING_BFLOAT16:
        s.h = ring__float_to_bf16((float)factor);
        break;
    case RING_FLOAT32:
        s.f = (float)factor;
        break;
    default:
        s.d = factor;
        break;
    }
    r = ncclRedOpCreatePreMulSum(out, &s, nccl_type(t), ncclScalarHostImmediate, comm);
    if (r != ncclSuccess)
        return nccl_error(n, comm, r, "ncclRedOpCreatePreMulSum");
    *custom = 1;
    return 0;
}

static int grow_fusion(struct ring__nccl *n, size_t bytes)
{
    cudaError_t e;

    if (bytes <= n->fusion_bytes)
        return 0;
    if (n->fusion != NULL)
        cudaFree(n->fusion);
    n->fusion = NULL;
    n->fusion_bytes = 0;
    if ((e = cudaMalloc((void **)&n->fusion, bytes)) != cudaSuccess)
        return ring__err(RING_ENOMEM, "rank %d: no room for a %zu-byte fusion buffer on GPU %d: %s",
                         n->rank, bytes, n->device, cudaGetErrorString(e));
    n->fusion_bytes = bytes;
    return 0;
}

/* Fills [dst, dst + count) on the device with op's neutral element, on the stream. */
static int fill_neutral(struct ring__nccl *n, char *dst, size_t count, ring_dtype_t t, ring_op_t op)
{
    size_t bytes = count * ring_dtype_size(t);
    cudaError_t e;
    char *host;

    if (op == RING_SUM || op == RING_AVERAGE) {
        e = cudaMemsetAsync(dst, 0, bytes, n->stream);
        return e == cudaSuccess ? 0 : cuda_error(n, e, "cudaMemsetAsync");
    }
    if ((host = malloc(bytes + 1)) == NULL)
        return ring__err(RING_ENOMEM, "rank %d: out of memory", n->rank);
    ring__neutral(host, count, t, op);
    /* On libring's stream, so that the reduction after it sees the values; waited for, so
     * that host can be freed (a pageable copy may still be in flight when cudaMemcpy
     * returns, and a non-blocking stream does not wait for it). */
    e = cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, n->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(n->stream);
    free(host);
    return e == cudaSuccess ? 0 : cuda_error(n, e, "cudaMemcpyAsync");
}

static int copy(struct ring__nccl *n, void *dst, const void *src, size_t bytes)
{
    cudaError_t e;

    if (dst == src || bytes == 0)
        return 0;
    e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, n->stream);
    return e == cudaSuccess ? 0 : cuda_error(n, e, "cudaMemcpyAsync");
}

/* ---- the ops ---- */

static int nccl_allreduce_bufv(const struct ring__comm *c, const struct ring__bufv *bv,
                               size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                               double postscale)
{
    struct ring__nccl *n = state(c);
    size_t es = ring_dtype_size(dtype);
    int64_t until = ring__now_ms() + n->op_timeout_ms;
    const void *src;
    void *dst;
    ncclRedOp_t nop;
    int rc, custom, direct;
    ncclComm_t comm = comm_of(n, c, &rc);

    if (comm == NULL)
        return rc;
    if (count == 0)
        return 0;
    /* One piece of this rank's own reduces in its own memory; anything else is fused. */
    direct = bv->n == 1 && bv->recv[0] != NULL;
    if (direct) {
        src = bv->send[0];
        dst = bv->recv[0];
    } else {
        if ((rc = grow_fusion(n, count * es)) < 0)
            return rc;
        for (int i = 0; i < bv->n; i++) {
            size_t len = bv->start[i + 1] - bv->start[i];
            rc = bv->send[i] != NULL
                     ? copy(n, n->fusion + bv->start[i], bv->send[i], len)
                     : fill_neutral(n, n->fusion + bv->start[i], len / es, dtype, op);
            if (rc < 0)
                return rc;
        }
        src = dst = n->fusion;
    }
    if ((rc = nccl_op(n, comm, dtype, op, prescale * postscale, &nop, &custom)) < 0)
        return rc;
    rc = settle(n, comm, ncclAllReduce(src, dst, count, nccl_type(dtype), nop, comm, n->stream),
                until, "ncclAllReduce");
    if (custom)
        ncclRedOpDestroy(nop, comm);
    if (rc < 0)
        return rc;
    for (int i = 0; !direct && i < bv->n; i++) {
        if (bv->recv[i] != NULL && (rc = copy(n, bv->recv[i], n->fusion + bv->start[i],
                                              bv->start[i + 1] - bv->start[i])) < 0)
            return rc;
    }
    return drain(n, comm, until, "ncclAllReduce");
}

static int nccl_allreduce(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
                          size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                          double postscale)
{
    char *recv[1] = {recvbuf};
    const char *send[1] = {sendbuf};
    size_t start[2] = {0, count * ring_dtype_size(dtype)};
    struct ring__bufv bv = {1, recv, send, start};

    return nccl_allreduce_bufv(c, &bv, count, dtype, op, prescale, postscale);
}

/* Each rank's block is broadcast from it: NCCL has no allgatherv. */
static int nccl_allgatherv(const struct ring__comm *c, const void *sendbuf, size_t sendcount,
                           void *recvbuf, const size_t *counts, ring_dtype_t dtype)
{
    struct ring__nccl *n = state(c);
    size_t es = ring_dtype_size(dtype), off = 0;
    int64_t until = ring__now_ms() + n->op_timeout_ms;
    ncclDataType_t t = nccl_type(dtype);
    ncclResult_t r;
    int rc;
    ncclComm_t comm = comm_of(n, c, &rc);

    if (comm == NULL)
        return rc;
    for (int i = 0; i < c->rank; i++)
        off += counts ? counts[i] : sendcount;
    if (sendbuf == NULL) /* in place: this rank's block is already at its offset */
        sendbuf = (char *)recvbuf + off * es;
    if (counts == NULL) {
        r = ncclAllGather(sendbuf, recvbuf, sendcount, t, comm, n->stream);
        if ((rc = settle(n, comm, r, until, "ncclAllGather")) < 0)
            return rc;
        return drain(n, comm, until, "ncclAllGather");
    }
    if ((rc = settle(n, comm, ncclGroupStart(), until, "ncclGroupStart")) < 0)
        return rc;
    off = 0;
    for (int i = 0; i < c->size; i++) {
        char *block = (char *)recvbuf + off * es;
        r = ncclBroadcast(i == c->rank ? sendbuf : block, block, counts[i], t, i, comm, n->stream);
        if (r != ncclSuccess && r != ncclInProgress) {
            ncclGroupEnd();
            return nccl_error(n, comm, r, "ncclBroadcast");
        }
        off += counts[i];
    }
    if ((rc = settle(n, comm, ncclGroupEnd(), until, "ncclGroupEnd")) < 0)
        return rc;
    return drain(n, comm, until, "allgatherv");
}

static int nccl_broadcast(const struct ring__comm *c, void *buf, size_t count, ring_dtype_t dtype,
                          int root)
{
    struct ring__nccl *n = state(c);
    int64_t until = ring__now_ms() + n->op_timeout_ms;
    int rc;
    ncclComm_t comm = comm_of(n, c, &rc);

    if (comm == NULL)
        return rc;
    if (buf == NULL && count > 0) { /* joined: take part, keep nothing */
        if ((rc = grow_fusion(n, count * ring_dtype_size(dtype))) < 0)
            return rc;
        buf = n->fusion;
    }
    rc = settle(n, comm, ncclBroadcast(buf, buf, count, nccl_type(dtype), root, comm, n->stream),
                until, "ncclBroadcast");
    return rc < 0 ? rc : drain(n, comm, until, "ncclBroadcast");
}

/*
 * libring's parts are uneven (ring__chunk), NCCL's ncclReduceScatter takes even ones: each
 * part is reduced to its owner, all in one group (only the owner writes its recvbuf). The input is
 * staged in the fusion buffer when in place, since this rank's part lands at the start of the
 * buffer it is read from.
 */
static int nccl_reducescatter(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
                              size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                              double postscale)
{
    struct ring__nccl *n = state(c);
    size_t es = ring_dtype_size(dtype), off, len;
    int64_t until = ring__now_ms() + n->op_timeout_ms;
    const char *in = sendbuf;
    ncclRedOp_t nop;
    ncclResult_t r = ncclSuccess;
    int rc, custom;
    ncclComm_t comm = comm_of(n, c, &rc);

    if (comm == NULL)
        return rc;
    if (sendbuf == recvbuf && count > 0) {
        if ((rc = grow_fusion(n, count * es)) < 0 ||
            (rc = copy(n, n->fusion, recvbuf, count * es)) < 0)
            return rc;
        in = n->fusion;
    }
    if ((rc = nccl_op(n, comm, dtype, op, prescale * postscale, &nop, &custom)) < 0)
        return rc;
    if ((rc = settle(n, comm, ncclGroupStart(), until, "ncclGroupStart")) < 0)
        goto done;
    for (int i = 0; i < c->size && (r == ncclSuccess || r == ncclInProgress); i++) {
        ring__chunk(count, c->size, i, &off, &len);
        r = ncclReduce(in + off * es, recvbuf, len, nccl_type(dtype), nop, i, comm, n->stream);
    }
    if (r != ncclSuccess && r != ncclInProgress) {
        ncclGroupEnd();
        rc = nccl_error(n, comm, r, "ncclReduce");
        goto done;
    }
    rc = settle(n, comm, ncclGroupEnd(), until, "ncclGroupEnd");
done:
    if (custom)
        ncclRedOpDestroy(nop, comm);
    return rc < 0 ? rc : drain(n, comm, until, "reducescatter");
}

static int nccl_alltoallv(const struct ring__comm *c, const void *sendbuf, const size_t *sendcounts,
                          void *recvbuf, const size_t *recvcounts, size_t count, ring_dtype_t dtype)
{
    struct ring__nccl *n = state(c);
    size_t es = ring_dtype_size(dtype), soff = 0, roff = 0;
    int64_t until = ring__now_ms() + n->op_timeout_ms;
    ncclDataType_t t = nccl_type(dtype);
    ncclResult_t r = ncclSuccess;
    int rc;
    ncclComm_t comm = comm_of(n, c, &rc);

    if (comm == NULL)
        return rc;
    if ((rc = settle(n, comm, ncclGroupStart(), until, "ncclGroupStart")) < 0)
        return rc;
    for (int i = 0; i < c->size && (r == ncclSuccess || r == ncclInProgress); i++) {
        size_t sc = sendcounts ? sendcounts[i] : count, rcnt = recvcounts ? recvcounts[i] : count;
        if (sc > 0)
            r = ncclSend((const char *)sendbuf + soff * es, sc, t, i, comm, n->stream);
        if (rcnt > 0 && (r == ncclSuccess || r == ncclInProgress))
            r = ncclRecv((char *)recvbuf + roff * es, rcnt, t, i, comm, n->stream);
        soff += sc;
        roff += rcnt;
    }
    if (r != ncclSuccess && r != ncclInProgress) {
        ncclGroupEnd();
        return nccl_error(n, comm, r, "ncclSend/ncclRecv");
    }
    if ((rc = settle(n, comm, ncclGroupEnd(), until, "ncclGroupEnd")) < 0)
        return rc;
    return drain(n, comm, until, "alltoallv");
}

/* A GPU barrier is an allreduce of one element: it orders the stream's work too. */
static int nccl_barrier(const struct ring__comm *c)
{
    struct ring__nccl *n = state(c);
    int64_t until = ring__now_ms() + n->op_timeout_ms;
    int rc;
    ncclComm_t comm = comm_of(n, c, &rc);

    if (comm == NULL || (rc = grow_fusion(n, sizeof(int32_t))) < 0)
        return rc;
    rc =
        settle(n, comm, ncclAllReduce(n->fusion, n->fusion, 1, ncclInt32, ncclSum, comm, n->stream),
               until, "barrier");
    return rc < 0 ? rc : drain(n, comm, until, "barrier");
}

const struct ring__ops ring__ops_nccl = {
    .name = "nccl",
    .device_memory = 1,
    .allreduce = nccl_allreduce,
    .allreduce_bufv = nccl_allreduce_bufv,
    .allgatherv = nccl_allgatherv,
    .broadcast = nccl_broadcast,
    .reducescatter = nccl_reducescatter,
    .alltoallv = nccl_alltoallv,
    .barrier = nccl_barrier,
};

/* ---- set-up: nothing touches CUDA before the first GPU collective ---- */

int ring__nccl_create(struct ring__ctx *ctx, struct ring__nccl **out)
{
    struct ring__nccl *n = calloc(1, sizeof(*n));

    if (n == NULL)
        return ring__err(RING_ENOMEM, "out of memory for the NCCL backend");
    n->rank = ctx->rank;
    n->device = -1;
    n->yield = ctx->oversubscribed;
    n->setup_timeout_ms = ctx->setup_timeout_ms;
    n->op_timeout_ms = ctx->op_timeout_ms;
    *out = n;
    return 0;
}

void ring__nccl_destroy(struct ring__nccl *n, int broken)
{
    if (n == NULL)
        return;
    if (n->device >= 0) {
        int was = -1;
        /* ring_finalize runs on the program's thread: leave its current device as it was */
        cudaGetDevice(&was);
        cudaSetDevice(n->device);
        for (int i = 0; i < MAX_SETS; i++) {
            if (n->comms[i] == NULL)
                continue;
            /* Destroying waits for the peers' part of the teardown: not after a failure. */
            if (broken || n->broken)
                ncclCommAbort(n->comms[i]);
            else
                ncclCommDestroy(n->comms[i]);
        }
        if (n->fusion != NULL)
            cudaFree(n->fusion);
        if (n->stream != NULL)
            cudaStreamDestroy(n->stream);
        if (was >= 0)
            cudaSetDevice(was);
    }
    free(n);
}
