/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring.h - the public interface of libring, Ringmaster's collective runtime.
 *
 * A training program calls ring_init() once, then any of the collectives, then
 * ring_finalize(). Every rank of a job must call the same collectives in the same order
 * with the same count, dtype, op and root.
 *
 * Errors: every function that can fail returns 0 on success or a negative RING_E* code;
 * ring_strerror() and ring_err_name() describe it. After a transport error (a peer died or
 * timed out) the job's communicator is broken: later collectives return RING_EBROKEN at
 * once, and the program should exit. libring never calls exit() or abort(), and prints
 * only through its logger (RING_LOG_LEVEL=error|warning|info|debug|trace, default warning).
 *
 * The engine: every collective is a named request. A background thread per process meets
 * the other ranks every cycle (RING_CYCLE_TIME_MS, default 1), agrees with them on which
 * named tensors every rank has submitted, fuses small allreduces into one, and runs them in
 * one order on all ranks. Ranks may submit tensors in any order. When ranks disagree on a
 * tensor (dtype, count, op...), every rank gets RING_EMISMATCH with a message naming the
 * tensor, the ranks and both values. The blocking calls submit under a name per kind
 * ("allreduce.noname") and wait: every rank must make the same sequence of blocking calls of
 * each kind, and two threads of one process may not run the same kind at once (the second
 * gets RING_EINVAL, a duplicate name in flight). Repeating a call with the same arguments
 * hits the response cache.
 *
 * Threads: the calls are thread safe; ring_init and ring_finalize must not race with them.
 *
 * Environment read by ring_init() (set by ringrun or ringd; see docs/design.md):
 *   RING_RANK, RING_SIZE, RING_LOCAL_RANK, RING_LOCAL_SIZE, RING_CROSS_RANK,
 *   RING_CROSS_SIZE, RING_RENDEZVOUS (host:port). With none of them, the program runs as
 *   a single process of a world of size 1.
 *   RING_TIMEOUT_SECONDS      setup timeout (rendezvous, connections), default 30.
 *   RING_OP_TIMEOUT_SECONDS   longest a collective waits without any byte moving, default
 *                             30; a dead or stuck peer turns into RING_ETIMEDOUT/EPEER.
 *   RING_ALLREDUCE_ALGO       auto (default), ring or rd (recursive doubling).
 *   RING_SMALL_ALLREDUCE_BYTES  auto switches from recursive doubling to the ring above
 *                             this size, default 65536.
 *   RING_HIERARCHICAL         auto (default), 1 or 0: the hierarchical allreduce (reduce-
 *                             scatter in each host, a ring per slice across hosts,
 *                             allgather in each host) when ranks span several hosts and
 *                             some host has several; auto only above
 *                             RING_SMALL_ALLREDUCE_BYTES, 1 at any size, 0 never.
 *   RING_TRANSPORT            auto (default: shared memory within a host, TCP between
 *                             hosts), shm (auto, but failing when a local peer cannot use
 *                             shared memory) or tcp (TCP for every peer).
 *   RING_SHM_RING_BYTES, RING_SHM_CMA_BYTES, RING_SHM_CMA  the shared-memory rings' size,
 *                             the size from which sends are read from the sender's memory
 *                             (process_vm_readv), and 0 to never do that (README).
 *   RING_TCP_ADDR             the IPv4 address published for TCP peers.
 *   RING_SOCKET_BUFFER_BYTES  SO_SNDBUF/SO_RCVBUF for peer sockets, 0 = kernel autotuning
 *                             (default 4194304).
 *   RING_HANDLE_SIGTERM       1 (default) installs a SIGTERM handler that requests a stop.
 *   RING_CYCLE_TIME_MS        negotiation cycle while tensors wait for other ranks, default 1.
 *   RING_FUSION_THRESHOLD     fusion buffer bytes, default 134217728; 0 disables fusion.
 *   RING_CACHE_CAPACITY       response cache entries, default 1024; 0 disables the cache.
 *   RING_FAST_PATH            1 (default): a cached blocking allreduce of at most 64 KiB, or
 *                             a blocking barrier, with nothing else in flight rides in the
 *                             control round; 0 disables.
 *   RING_FAST_GRACE_US        how long an idle rank holds back its answer to a peer's cycle
 *                             for its own blocking call to meet it there, default 200.
 *   RING_TIMELINE             path of a Chrome trace JSON written by rank 0.
 *   RING_STALL_CHECK_SECONDS  warn about tensors some ranks lack for this long, default 60;
 *                             0 disables the check.
 *   RING_STALL_SHUTDOWN_SECONDS  fail every rank with RING_ESTALL after this long, default 0
 *                             (never).
 *   RING_COMPRESSION          none (default), fp16 or bf16: float32 sum/average allreduce
 *                             sends 16-bit values and adds them in float32.
 */
#ifndef RING_H
#define RING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RING_BUILDING_SHARED)
#define RING_API __attribute__((visibility("default")))
#else
#define RING_API
#endif

#define RING_VERSION_MAJOR 0
#define RING_VERSION_MINOR 1
#define RING_VERSION_PATCH 0

/* Returns "MAJOR.MINOR.PATCH" of the library that is linked. Static string. */
RING_API const char *ring_version(void);

/*
 * Error codes. XX(NAME, message). The codes are -1, -2, ... in table order, so they never
 * collide with 0 (success) and stay stable as long as entries are only appended.
 */
#define RING_ERRNO_MAP(XX)                                                                         \
    XX(EINVAL, "invalid argument")                                                                 \
    XX(ENOMEM, "out of memory")                                                                    \
    XX(ENOTINIT, "libring is not initialized; call ring_init() first")                             \
    XX(EALREADY, "libring is already initialized")                                                 \
    XX(EENV, "the RING_* environment is malformed")                                                \
    XX(EBOOTSTRAP, "could not reach the rendezvous or exchange addresses with it")                 \
    XX(ETIMEDOUT, "timed out waiting for a peer")                                                  \
    XX(EPEER, "the connection to a peer was lost (did a rank die?)")                               \
    XX(EBROKEN, "an earlier transport error broke the communicator; the job must restart")         \
    XX(EPROTO, "a peer sent something unexpected")                                                 \
    XX(ESYS, "a system call failed")                                                               \
    XX(ENOTSUP, "not supported by this build or for this dtype and op")                            \
    XX(EMISMATCH, "ranks submitted the same tensor name with different parameters")                \
    XX(ESTALL, "ranks stalled: some submitted a tensor that others never did")                     \
    XX(EJOINED, "not allowed while some ranks have joined")                                        \
    XX(ESHUTDOWN, "the engine shut down before the operation ran")

enum {
    RING_OK = 0,
#define RING__ERR_ENUM(name, msg) RING__ERRIDX_##name,
    RING__ERRIDX_BASE = 0,
    RING_ERRNO_MAP(RING__ERR_ENUM)
#undef RING__ERR_ENUM
};

#define RING__ERR(name) (-(int)RING__ERRIDX_##name)
#define RING_EINVAL     RING__ERR(EINVAL)
#define RING_ENOMEM     RING__ERR(ENOMEM)
#define RING_ENOTINIT   RING__ERR(ENOTINIT)
#define RING_EALREADY   RING__ERR(EALREADY)
#define RING_EENV       RING__ERR(EENV)
#define RING_EBOOTSTRAP RING__ERR(EBOOTSTRAP)
#define RING_ETIMEDOUT  RING__ERR(ETIMEDOUT)
#define RING_EPEER      RING__ERR(EPEER)
#define RING_EBROKEN    RING__ERR(EBROKEN)
#define RING_EPROTO     RING__ERR(EPROTO)
#define RING_ESYS       RING__ERR(ESYS)
#define RING_ENOTSUP    RING__ERR(ENOTSUP)
#define RING_EMISMATCH  RING__ERR(EMISMATCH)
#define RING_ESTALL     RING__ERR(ESTALL)
#define RING_EJOINED    RING__ERR(EJOINED)
#define RING_ESHUTDOWN  RING__ERR(ESHUTDOWN)

/* Returns a static message for err ("unknown error" for codes not in the table). */
RING_API const char *ring_strerror(int err);
/* Returns the static name of err, such as "RING_ETIMEDOUT". */
RING_API const char *ring_err_name(int err);
/*
 * Returns a static, per-process description of the last error, with details such as the
 * peer's rank ("rank 2: recv from rank 1: connection reset"). Empty when none.
 */
RING_API const char *ring_last_error(void);

/*
 * Element types. Values are stable: new ones are appended. BOOL is one byte holding 0 or 1
 * (C's _Bool, torch.bool, numpy.bool_).
 */
typedef enum {
    RING_UINT8,
    RING_INT8,
    RING_INT32,
    RING_INT64,
    RING_FLOAT16,
    RING_BFLOAT16,
    RING_FLOAT32,
    RING_FLOAT64,
    RING_INT16,
    RING_UINT16,
    RING_BOOL,
    RING_DTYPE_COUNT
} ring_dtype_t;

/*
 * Reductions. AVERAGE is SUM followed by a postscale of 1/size. float16 and bfloat16 are
 * combined in float32 and rounded once per step. Integer scaling (prescale, postscale,
 * AVERAGE) computes in double and truncates toward zero.
 *
 * BOOL: SUM and MAX are a logical OR, PRODUCT and MIN a logical AND, so that results stay 0
 * or 1; AVERAGE and scale factors other than 1 are invalid (RING_EINVAL).
 *
 * ADASUM (Maleki et al., "Scaling Distributed Training with Adaptive Summation"), for
 * float16, bfloat16, float32 and float64 allreduces in host memory: two ranks' vectors a
 * and b combine into a (1 - a.b / 2|a|^2) + b (1 - a.b / 2|b|^2): their sum when they are
 * orthogonal, a itself when they are equal, and a zero vector counts for nothing. Ranks
 * combine pairwise by vector halving and distance doubling, and each tensor of a fused
 * batch or group is combined on its own (its own dot product and norms). On a set whose
 * size is not a power of two, each rank past the largest power of two p first combines
 * with rank - p, the p ranks then run as above, and the extra ranks receive the result
 * (Horovod refuses such sizes). prescale and postscale apply before and after. Other
 * collectives, other dtypes and GPU buffers give RING_EINVAL, RING_EINVAL and
 * RING_ENOTSUP. A joined rank contributes a zero vector.
 */
typedef enum {
    RING_SUM,
    RING_AVERAGE,
    RING_MIN,
    RING_MAX,
    RING_PRODUCT,
    RING_ADASUM,
    RING_OP_COUNT
} ring_op_t;

/* Returns the size in bytes of one element, or 0 for an invalid dtype. */
RING_API size_t ring_dtype_size(ring_dtype_t dtype);
/* Returns a static name ("float32") or "invalid". */
RING_API const char *ring_dtype_name(ring_dtype_t dtype);
RING_API const char *ring_op_name(ring_op_t op);

/*
 * Starts libring: reads the environment, meets the other ranks through the rendezvous and
 * connects to them. Returns 0, RING_EALREADY, RING_EENV, RING_EBOOTSTRAP, RING_ETIMEDOUT or
 * RING_ENOMEM. On error nothing stays allocated and ring_init() may be called again.
 */
RING_API int ring_init(void);
/* Closes every connection and frees everything. Returns 0 or RING_ENOTINIT. */
RING_API int ring_finalize(void);
/* Returns 1 between a successful ring_init() and ring_finalize(), else 0. */
RING_API int ring_initialized(void);

/* The worker contract. Each returns -1 when libring is not initialized. */
RING_API int ring_rank(void);
RING_API int ring_size(void);
RING_API int ring_local_rank(void);
RING_API int ring_local_size(void);
RING_API int ring_cross_rank(void);
RING_API int ring_cross_size(void);

/*
 * Buffers are host memory, or, in a libring built with CUDA and NCCL, GPU memory (device or
 * managed), both buffers of a call on the same GPU, one GPU per rank: such calls run
 * through NCCL on libring's own stream. A GPU buffer must be ready when submitted (the
 * program synchronizes its stream first) and is done when the call or ring_wait returns.
 * Mixing host and GPU buffers in one call, or a second GPU, gives RING_EINVAL; on GPUs,
 * scale factors and RING_AVERAGE take SUM of floating-point tensors (or integral factors
 * on integers), else RING_ENOTSUP.
 */

/*
 * Pass as sendbuf to reduce or gather in place, in recvbuf: allreduce, reducescatter,
 * allgather(v) (see each for where the data lies). sendbuf == recvbuf means the same.
 * broadcast is always in place; alltoall(v) never is (RING_EINVAL).
 */
#define RING_IN_PLACE ((const void *)1)

/*
 * Allreduce: every rank's recvbuf receives op over all ranks' count elements.
 * prescale multiplies each input before the reduction and postscale the result (use 1.0 for
 * none); they are invalid (RING_EINVAL) with MIN and MAX unless 1.0. count may be 0.
 * Algorithm: recursive doubling up to RING_SMALL_ALLREDUCE_BYTES, else a pipelined ring.
 */
RING_API int ring_allreduce(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype,
                            ring_op_t op);
RING_API int ring_allreduce_scaled(const void *sendbuf, void *recvbuf, size_t count,
                                   ring_dtype_t dtype, ring_op_t op, double prescale,
                                   double postscale);

/*
 * Allgather: recvbuf receives size blocks of sendcount elements, rank order.
 * Counts: every count, times the set size for allgather and alltoall, must fit in a buffer
 * (count x dtype size <= PTRDIFF_MAX bytes, also summed over the v-variants' counts and a
 * group's tensors); larger ones give RING_EINVAL with the numbers in ring_last_error().
 * Allgatherv: rank i contributes recvcounts[i] elements (sendcount must equal
 * recvcounts[rank]); blocks are packed in rank order without gaps.
 * With RING_IN_PLACE, the rank's own block is already in recvbuf.
 */
RING_API int ring_allgather(const void *sendbuf, size_t sendcount, void *recvbuf,
                            ring_dtype_t dtype);
RING_API int ring_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                             const size_t *recvcounts, ring_dtype_t dtype);

/* Broadcast: count elements of root's buf to every rank's buf. */
RING_API int ring_broadcast(void *buf, size_t count, ring_dtype_t dtype, int root);

/*
 * Reducescatter: reduces count elements across ranks and leaves rank r's part in recvbuf.
 * The parts are split as evenly as possible, the first count % size ranks getting one more
 * element (ring_reducescatter_count() tells how many, and where the part starts in the
 * full vector). prescale/postscale as in allreduce.
 * Out of place, sendbuf holds count elements and recvbuf room for this rank's part.
 * In place (RING_IN_PLACE, or sendbuf == recvbuf), recvbuf holds all count elements on
 * entry; on return this rank's part is at the start of recvbuf (elements
 * 0 .. ring_reducescatter_count(count, size, rank, NULL) - 1), as with MPI_IN_PLACE, and
 * the rest of recvbuf holds partial results of no use.
 */
RING_API int ring_reducescatter(const void *sendbuf, void *recvbuf, size_t count,
                                ring_dtype_t dtype, ring_op_t op);
RING_API int ring_reducescatter_scaled(const void *sendbuf, void *recvbuf, size_t count,
                                       ring_dtype_t dtype, ring_op_t op, double prescale,
                                       double postscale);
/* Returns how many of count elements rank gets, and their first index in *offset if set. */
RING_API size_t ring_reducescatter_count(size_t count, int size, int rank, size_t *offset);

/*
 * Alltoall: sendbuf holds size blocks of count elements; block j goes to rank j, and
 * recvbuf's block i comes from rank i. Alltoallv: sendcounts[j] elements go to rank j and
 * recvcounts[i] come from rank i, blocks packed in rank order. sendbuf and recvbuf must not
 * overlap.
 */
RING_API int ring_alltoall(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype);
RING_API int ring_alltoallv(const void *sendbuf, const size_t *sendcounts, void *recvbuf,
                            const size_t *recvcounts, ring_dtype_t dtype);

/* Returns once every rank has entered the barrier. */
RING_API int ring_barrier(void);

/*
 * Shape checks, as Horovod makes them: ranks that reduce the same number of elements in
 * different shapes ([4, 6] and [6, 4]) get RING_EMISMATCH instead of a result.
 * ring_shape_next declares the shape of the next request this thread submits (any
 * collective, blocking or not): the next call into libring on this thread takes the
 * declaration, whether it submits anything or not. Only equality across ranks matters: a grouped
 * allreduce may declare its members' shapes one after the other. Ranks must all declare a shape for
 * a tensor or none, as a request with one differs from one without. Returns 0, or RING_EINVAL for
 * more than 64 dimensions or a negative one.
 */
RING_API int ring_shape_next(int ndim, const int64_t *dims);

/* ---- the asynchronous API ---------------------------------------------------------------
 *
 * Each *_async call submits a named request and returns at once with a handle in *handle.
 * The buffers must stay untouched until the handle completes. name: 1..255 printable
 * characters, unique among this rank's requests in flight (RING_EINVAL otherwise). A
 * process set (ring_process_set_create) restricts the collective to its members, with
 * ranks (root) relative to the set; RING_GLOBAL is every rank.
 * Returns 0, or an error code with no handle when the request is rejected locally
 * (invalid arguments, not a member of the set, engine broken or shut down).
 */
typedef struct ring_handle ring_handle_t;
typedef int ring_process_set_t;
#define RING_GLOBAL 0

RING_API int ring_allreduce_async(const char *name, const void *sendbuf, void *recvbuf,
                                  size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                                  double postscale, ring_process_set_t ps, ring_handle_t **handle);
/*
 * Grouped allreduce: n tensors negotiated and reduced as a unit (none runs before all are
 * ready on every rank), with one handle. Names are name/0 .. name/n-1. In host memory the
 * group is one request named name/0 (its cache entry covers every member's count) and
 * small members are reduced as one buffer: a repeated group costs about one allreduce of
 * its total size. A rank that changes a member's count fails the group on every rank.
 */
RING_API int ring_grouped_allreduce_async(const char *name, int n, const void *const *sendbufs,
                                          void *const *recvbufs, const size_t *counts,
                                          ring_dtype_t dtype, ring_op_t op, ring_process_set_t ps,
                                          ring_handle_t **handle);
RING_API int ring_allgather_async(const char *name, const void *sendbuf, size_t sendcount,
                                  void *recvbuf, ring_dtype_t dtype, ring_process_set_t ps,
                                  ring_handle_t **handle);
RING_API int ring_allgatherv_async(const char *name, const void *sendbuf, size_t sendcount,
                                   void *recvbuf, const size_t *recvcounts, ring_dtype_t dtype,
                                   ring_process_set_t ps, ring_handle_t **handle);
RING_API int ring_broadcast_async(const char *name, void *buf, size_t count, ring_dtype_t dtype,
                                  int root, ring_process_set_t ps, ring_handle_t **handle);
RING_API int ring_reducescatter_async(const char *name, const void *sendbuf, void *recvbuf,
                                      size_t count, ring_dtype_t dtype, ring_op_t op,
                                      double prescale, double postscale, ring_process_set_t ps,
                                      ring_handle_t **handle);
RING_API int ring_alltoall_async(const char *name, const void *sendbuf, void *recvbuf, size_t count,
                                 ring_dtype_t dtype, ring_process_set_t ps, ring_handle_t **handle);
RING_API int ring_alltoallv_async(const char *name, const void *sendbuf, const size_t *sendcounts,
                                  void *recvbuf, const size_t *recvcounts, ring_dtype_t dtype,
                                  ring_process_set_t ps, ring_handle_t **handle);

/*
 * Waits for the operation, frees the handle and returns its status: 0, or the error every
 * rank got (ring_last_error() has the message, e.g. "allreduce 'grad/w1': rank 0 sent
 * float32, rank 3 sent float64").
 */
RING_API int ring_wait(ring_handle_t *handle);
/* Returns 1 when the operation has completed (then call ring_wait), 0 while it runs. */
RING_API int ring_test(ring_handle_t *handle);

/*
 * Join, for uneven data: a rank with no more batches calls ring_join(), which returns once
 * every rank has joined, with the rank that joined last (or an error code). Until then the
 * joined rank takes part in the others' collectives with neutral elements (0 for sum, 1 for
 * product, the largest/smallest value for min/max), and AVERAGE divides by the number of
 * ranks that have not joined. Allowed while ranks have joined: allreduce, broadcast (from a
 * root that has not joined; with RING_JOIN_BROADCAST=0, none, as in Horovod) and barrier;
 * allgather(v), alltoall(v) and reducescatter get RING_EJOINED on every rank.
 */
RING_API int ring_join(void);

/*
 * Process sets. Every rank of the world calls ring_process_set_create with the same ranks, in
 * the same order of calls; ranks are world ranks, listed once each. Returns 0 and the set's
 * id in *ps, or RING_EINVAL (bad list) or RING_EMISMATCH (the ranks passed different lists).
 * Rank order: a set's ranks follow the world ranks in ascending order, whatever the order of
 * the list: set rank i is the i-th smallest world rank in it. So {5, 2, 7} and {2, 5, 7}
 * make the same set, in which world rank 2 is rank 0, 5 is rank 1 and 7 is rank 2. Roots,
 * allgather blocks and reducescatter parts on a set are in this order.
 */
RING_API int ring_process_set_create(const int *ranks, int n, ring_process_set_t *ps);
/*
 * Removes a process set: every rank of the world calls it with the same id, in the same
 * order of calls as the creations and removals (a collective, like creation). Ids are not
 * reused (a job creates at most 255 sets in all), so a removed set's id stays invalid:
 * submissions on it get RING_EINVAL, and
 * ring_process_set_rank/size return -1. Returns 0, RING_EINVAL (RING_GLOBAL, no such set,
 * or operations of this rank on the set still in flight: wait for them first) or
 * RING_EMISMATCH (the ranks removed different sets).
 */
RING_API int ring_process_set_remove(ring_process_set_t ps);
/* This rank's rank in the set, or -1 when it is not a member (or no such set). */
RING_API int ring_process_set_rank(ring_process_set_t ps);
/* The set's size, or -1 when there is no such set. */
RING_API int ring_process_set_size(ring_process_set_t ps);

/*
 * Timeline: rank 0 writes a Chrome trace (chrome://tracing, Perfetto) with each tensor's
 * NEGOTIATE, QUEUE, MEMCPY_IN_FUSION_BUFFER, collective and MEMCPY_OUT phases. Also started
 * by RING_TIMELINE=path. The file is valid JSON after every cycle. Other ranks ignore these.
 * On rank 0 both wait for the engine to take the change (within one control round, which
 * every peer's engine answers on its own): when ring_timeline_stop returns, the file holds
 * everything traced before the call and is closed.
 */
RING_API int ring_timeline_start(const char *path);
RING_API int ring_timeline_stop(void);

/* Counters of the engine, for tests and monitoring. */
struct ring_engine_stats {
    uint64_t cycles;            /* negotiation cycles run */
    uint64_t full_negotiations; /* cycles in which requests went to the coordinator */
    uint64_t coordinator_names; /* tensor names the coordinator received (rank 0 only) */
    uint64_t cache_hits;        /* tensors agreed on by the cache's bit-vector AND */
    uint64_t tensors;           /* tensors executed */
    uint64_t collectives;       /* collectives run (a fused batch counts once) */
    uint64_t negotiation_us;    /* time spent agreeing, summed over cycles */
    uint64_t fast_path;         /* tensors done in the control round: blocking allreduces and
                                   barriers, and small cached tensors that rode along */
};
RING_API int ring_engine_stats(struct ring_engine_stats *out);

/*
 * Stop requests, for the scheduler's stop-and-resume. SIGTERM (unless RING_HANDLE_SIGTERM=0)
 * or ring_request_stop() on any rank is agreed on during negotiation: ring_stop_requested()
 * turns true on every rank after the same operation completes, so ranks that check it at a
 * step boundary all stop after the same step. After a stop, ring_finalize leaves libring's
 * handler in place of SIGTERM's default action, so that a late copy of the stop's signal
 * does not kill a rank on its way out; a handler of the program's comes back as always.
 */
RING_API void ring_request_stop(void);
RING_API int ring_stop_requested(void);

#ifdef __cplusplus
}
#endif
#endif /* RING_H */
