/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ops_mpi.c - RING_CPU_OPERATIONS=mpi: the engine's host-memory collectives through MPI
 * (ops/ops.h), so that users can compare libring's own algorithms with their MPI's on the
 * same job, the same negotiation and the same fusion. Built with RING_WITH_MPI.
 *
 * Communicators: a duplicate of MPI_COMM_WORLD with its ranks in libring's order (they are
 * the same under mpirun; MPI_Comm_split puts them so otherwise), and one per process set,
 * made on its first collective by the set's members alone (MPI_Comm_create_group).
 *
 * Types: MPI has no float16 or bfloat16, so both travel as 16-bit types of their own (two
 * duplicates of MPI_UINT16_T, told apart by handle) and reduce through user-defined ops
 * that call libring's own kernels: the results are those of the ring, bit for bit. Scale
 * factors are applied by libring before and after, as in the ring.
 *
 * Waits: every operation is the non-blocking MPI call, polled with MPI_Test until
 * RING_OP_TIMEOUT_SECONDS, so that a stuck peer gives RING_ETIMEDOUT instead of a hang. MPI
 * cannot say whether bytes are moving, so the timeout bounds the whole operation (the
 * ring's bounds the time without progress). The cost: Open MPI runs non-blocking
 * collectives through libnbc rather than its tuned blocking ones (bench/allreduce measures
 * both). A request that timed out cannot be cancelled; the MPI ops are then broken and MPI
 * is not finalized (mpi_env.h).
 *
 * Counts above INT_MAX elements (MPI's int) are split into several calls for allreduce and
 * broadcast; the other collectives refuse them with RING_ENOTSUP.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/mpi_env.h"
#include "ops/ops.h"

/* Process set ids are below the engine's MAX_PSETS (engine_impl.h). */
#define MAX_SETS 256
/* Allreduce and broadcast move at most this many elements per MPI call. */
#define CHUNK_ELEMS (1 << 30)

struct ring__mpi_coll {
    MPI_Comm world;
    MPI_Comm sets[MAX_SETS]; /* by process set id; MPI_COMM_NULL until its first collective */
    int rank, timeout_ms, yield;
    int broken; /* an operation failed or timed out: every later one gets RING_EBROKEN */
};

/* The two 16-bit float types and the reductions on them. User-defined MPI ops get no
 * context, so these are process-wide; there is at most one MPI ops state at a time. */
static MPI_Datatype half_type = MPI_DATATYPE_NULL, bf16_type = MPI_DATATYPE_NULL;
static MPI_Op ops16[RING_OP_COUNT];

static void reduce16(void *in, void *inout, int *len, MPI_Datatype *dt, ring_op_t op)
{
    ring__reduce(inout, inout, in, (size_t)*len, *dt == half_type ? RING_FLOAT16 : RING_BFLOAT16,
                 op);
}
static void sum16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    reduce16(in, inout, len, dt, RING_SUM);
}
static void min16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    reduce16(in, inout, len, dt, RING_MIN);
}
static void max16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    reduce16(in, inout, len, dt, RING_MAX);
}
static void prod16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    reduce16(in, inout, len, dt, RING_PRODUCT);
}

static MPI_Datatype mpi_type(ring_dtype_t t)
{
    switch (t) {
    case RING_UINT8:
        return MPI_UINT8_T;
    case RING_INT8:
        return MPI_INT8_T;
    case RING_INT16:
        return MPI_INT16_T;
    case RING_UINT16:
        return MPI_UINT16_T;
    case RING_BOOL: /* bytes of 0 or 1, reduced by MAX and MIN (mpi_op) */
        return MPI_UINT8_T;
    case RING_INT32:
        return MPI_INT32_T;
    case RING_INT64:
        return MPI_INT64_T;
    case RING_FLOAT16:
        return half_type;
    case RING_BFLOAT16:
        return bf16_type;
    case RING_FLOAT32:
        return MPI_FLOAT;
    default:
        return MPI_DOUBLE;
    }
}

static MPI_Op mpi_op(ring_dtype_t t, ring_op_t op)
{
    if (t == RING_FLOAT16 || t == RING_BFLOAT16)
        return ops16[op];
    if (t == RING_BOOL) /* OR and AND of 0 and 1 (ring.h) */
        return op == RING_SUM || op == RING_MAX ? MPI_MAX : MPI_MIN;
    switch (op) {
    case RING_MIN:
        return MPI_MIN;
    case RING_MAX:
        return MPI_MAX;
    case RING_PRODUCT:
        return MPI_PROD;
    default:
        return MPI_SUM;
    }
}

/* ---- communicators ---- */

static struct ring__mpi_coll *state(const struct ring__comm *c)
{
    return c->ctx->ops->mpi;
}

/* The communicator of c's ranks, in c's order; NULL with *rc set on error. */
static MPI_Comm *comm_of(struct ring__mpi_coll *m, const struct ring__comm *c, int *rc)
{
    MPI_Group world_group, group;
    MPI_Comm *slot;
    int n = 0, err;

    *rc = 0;
    if (m->broken) {
        *rc = ring__err(RING_EBROKEN, "rank %d: an earlier MPI collective failed", m->rank);
        return NULL;
    }
    if (c->members == NULL)
        return &m->world;
    if (c->set <= 0 || c->set >= MAX_SETS) {
        *rc = ring__err(RING_EINVAL, "rank %d: no MPI communicator for process set %d", m->rank,
                        c->set);
        return NULL;
    }
    slot = &m->sets[c->set];
    if (*slot == MPI_COMM_NULL) {
        /* Every member runs this response now, in the same order; non-members never do. */
        MPI_Comm_group(m->world, &world_group);
        MPI_Group_incl(world_group, c->size, c->members, &group);
        err = MPI_Comm_create_group(m->world, group, c->set, slot);
        MPI_Group_free(&group);
        MPI_Group_free(&world_group);
        if (err != MPI_SUCCESS) {
            m->broken = 1;
            *rc = ring__mpi_error(err, m->rank, "MPI_Comm_create_group");
            return NULL;
        }
        MPI_Comm_set_errhandler(*slot, MPI_ERRORS_RETURN);
    }
    MPI_Comm_size(*slot, &n);
    if (n != c->size) {
        *rc =
            ring__err(RING_EPROTO, "rank %d: process set %d has %d ranks, its MPI communicator %d",
                      m->rank, c->set, c->size, n);
        return NULL;
    }
    return slot;
}

/* Checks the code of the call that started *req, then waits for the request. */
static int finish(struct ring__mpi_coll *m, int mpi_rc, MPI_Request *req, int64_t deadline,
                  const char *what)
{
    int rc = mpi_rc != MPI_SUCCESS ? ring__mpi_error(mpi_rc, m->rank, what)
                                   : ring__mpi_wait(req, deadline, m->yield, m->rank, what);
    if (rc < 0)
        m->broken = 1;
    return rc;
}

static int64_t deadline(const struct ring__mpi_coll *m)
{
    return ring__now_ms() + m->timeout_ms;
}

/* counts[i] as ints, with displacements packed in order; NULL (and *rc) when one does not
 * fit MPI's int. The caller frees the array (counts, then displs, in one block). */
static int *int_counts(struct ring__mpi_coll *m, const size_t *counts, int n, const char *what,
                       int *rc)
{
    int *v = malloc(2 * (size_t)n * sizeof(int));
    size_t at = 0;

    *rc = 0;
    if (v == NULL) {
        *rc = ring__err(RING_ENOMEM, "%s: out of memory", what);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (counts[i] > INT_MAX || at > INT_MAX) {
            free(v);
            *rc = ring__err(RING_ENOTSUP,
                            "rank %d: %s through MPI takes at most %d elements per rank and in "
                            "all (MPI counts are int); use RING_CPU_OPERATIONS=ring",
                            m->rank, what, INT_MAX);
            return NULL;
        }
        v[i] = (int)counts[i];
        v[n + i] = (int)at;
        at += counts[i];
    }
    return v;
}

/* ---- the ops ---- */

static int mpi_allreduce(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
                         size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                         double postscale)
{
    struct ring__mpi_coll *m = state(c);
    size_t es = ring_dtype_size(dtype);
    int64_t until = deadline(m);
    int rc;
    MPI_Comm *comm = comm_of(m, c, &rc);

    if (comm == NULL)
        return rc;
    if (prescale != 1.0) { /* into the result, then reduce in place there */
        ring__scale(recvbuf, sendbuf, count, dtype, prescale);
        sendbuf = recvbuf;
    }
    for (size_t off = 0, n; off == 0 || off < count; off += n) {
        MPI_Request req;
        n = count - off < CHUNK_ELEMS ? count - off : CHUNK_ELEMS;
        rc = MPI_Iallreduce(sendbuf == recvbuf ? MPI_IN_PLACE : (const char *)sendbuf + off * es,
                            (char *)recvbuf + off * es, (int)n, mpi_type(dtype), mpi_op(dtype, op),
                            *comm, &req);
        if ((rc = finish(m, rc, &req, until, "MPI_Iallreduce")) < 0)
            return rc;
        if (n == 0)
            break;
    }
    ring__scale(recvbuf, recvbuf, count, dtype, postscale);
    return 0;
}

static int mpi_allgatherv(const struct ring__comm *c, const void *sendbuf, size_t sendcount,
                          void *recvbuf, const size_t *counts, ring_dtype_t dtype)
{
    struct ring__mpi_coll *m = state(c);
    MPI_Datatype t = mpi_type(dtype);
    const void *sb = sendbuf != NULL ? sendbuf : MPI_IN_PLACE;
    MPI_Request req;
    int rc, *v;
    MPI_Comm *comm = comm_of(m, c, &rc);

    if (comm == NULL)
        return rc;
    if (counts == NULL) {
        if (sendcount > INT_MAX)
            return ring__err(RING_ENOTSUP,
                             "rank %d: allgather through MPI takes at most %d elements per rank "
                             "(MPI counts are int); use RING_CPU_OPERATIONS=ring",
                             m->rank, INT_MAX);
        rc = MPI_Iallgather(sb, (int)sendcount, t, recvbuf, (int)sendcount, t, *comm, &req);
        return finish(m, rc, &req, deadline(m), "MPI_Iallgather");
    }
    if ((v = int_counts(m, counts, c->size, "allgatherv", &rc)) == NULL)
        return rc;
    /* The agreed response carries the coordinator's sendcount: this rank's is its count. */
    rc = MPI_Iallgatherv(sb, v[c->rank], t, recvbuf, v, v + c->size, t, *comm, &req);
    rc = finish(m, rc, &req, deadline(m), "MPI_Iallgatherv");
    free(v);
    return rc;
}

static int mpi_broadcast(const struct ring__comm *c, void *buf, size_t count, ring_dtype_t dtype,
                         int root)
{
    struct ring__mpi_coll *m = state(c);
    size_t es = ring_dtype_size(dtype);
    int64_t until = deadline(m);
    char *tmp = NULL;
    int rc;
    MPI_Comm *comm = comm_of(m, c, &rc);

    if (comm == NULL)
        return rc;
    if (buf == NULL && count > 0) { /* joined: take part, keep nothing */
        if ((buf = tmp = malloc(count * es)) == NULL)
            return ring__err(RING_ENOMEM, "broadcast: out of memory");
    }
    for (size_t off = 0; rc == 0 && off < count; off += CHUNK_ELEMS) {
        size_t n = count - off < CHUNK_ELEMS ? count - off : CHUNK_ELEMS;
        MPI_Request req;
        rc = MPI_Ibcast((char *)buf + off * es, (int)n, mpi_type(dtype), root, *comm, &req);
        rc = finish(m, rc, &req, until, "MPI_Ibcast");
    }
    free(tmp);
    return rc;
}

static int mpi_reducescatter(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
                             size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                             double postscale)
{
    struct ring__mpi_coll *m = state(c);
    size_t es = ring_dtype_size(dtype), *parts, off, mine;
    char *tmp = NULL;
    MPI_Request req;
    int rc, *v;
    MPI_Comm *comm = comm_of(m, c, &rc);

    if (comm == NULL)
        return rc;
    if ((parts = malloc((size_t)c->size * sizeof(size_t))) == NULL)
        return ring__err(RING_ENOMEM, "reducescatter: out of memory");
    for (int i = 0; i < c->size; i++)
        ring__chunk(count, c->size, i, &off, &parts[i]);
    mine = parts[c->rank];
    v = int_counts(m, parts, c->size, "reducescatter", &rc);
    free(parts);
    if (v == NULL)
        return rc;
    if (prescale != 1.0 && sendbuf != recvbuf) {
        /* recvbuf only has room for this rank's part: scale a copy of the input */
        if ((tmp = malloc(count * es + 1)) == NULL) {
            free(v);
            return ring__err(RING_ENOMEM, "reducescatter: out of memory");
        }
        ring__scale(tmp, sendbuf, count, dtype, prescale);
        sendbuf = tmp;
    } else if (prescale != 1.0) {
        ring__scale(recvbuf, recvbuf, count, dtype, prescale);
    }
    /* MPI_IN_PLACE takes the whole vector from recvbuf and leaves this rank's part at its
     * start: libring's in-place convention exactly (ring.h). */
    rc = MPI_Ireduce_scatter(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf, v,
                             mpi_type(dtype), mpi_op(dtype, op), *comm, &req);
    rc = finish(m, rc, &req, deadline(m), "MPI_Ireduce_scatter");
    free(v);
    free(tmp);
    if (rc == 0)
        ring__scale(recvbuf, recvbuf, mine, dtype, postscale);
    return rc;
}

static int mpi_alltoallv(const struct ring__comm *c, const void *sendbuf, const size_t *sendcounts,
                         void *recvbuf, const size_t *recvcounts, size_t count, ring_dtype_t dtype)
{
    struct ring__mpi_coll *m = state(c);
    MPI_Datatype t = mpi_type(dtype);
    MPI_Request req;
    int rc, *sv, *rv;
    MPI_Comm *comm = comm_of(m, c, &rc);

    if (comm == NULL)
        return rc;
    if (sendcounts == NULL) {
        if (count > INT_MAX)
            return ring__err(RING_ENOTSUP,
                             "rank %d: alltoall through MPI takes at most %d elements per rank "
                             "(MPI counts are int); use RING_CPU_OPERATIONS=ring",
                             m->rank, INT_MAX);
        rc = MPI_Ialltoall(sendbuf, (int)count, t, recvbuf, (int)count, t, *comm, &req);
        return finish(m, rc, &req, deadline(m), "MPI_Ialltoall");
    }
    if ((sv = int_counts(m, sendcounts, c->size, "alltoallv", &rc)) == NULL)
        return rc;
    if ((rv = int_counts(m, recvcounts, c->size, "alltoallv", &rc)) == NULL) {
        free(sv);
        return rc;
    }
    rc = MPI_Ialltoallv(sendbuf, sv, sv + c->size, t, recvbuf, rv, rv + c->size, t, *comm, &req);
    rc = finish(m, rc, &req, deadline(m), "MPI_Ialltoallv");
    free(sv);
    free(rv);
    return rc;
}

static int mpi_barrier(const struct ring__comm *c)
{
    struct ring__mpi_coll *m = state(c);
    MPI_Request req;
    int rc;
    MPI_Comm *comm = comm_of(m, c, &rc);

    if (comm == NULL)
        return rc;
    rc = MPI_Ibarrier(*comm, &req);
    return finish(m, rc, &req, deadline(m), "MPI_Ibarrier");
}

const struct ring__ops ring__ops_mpi = {
    .name = "mpi",
    .device_memory = 0,
    .allreduce = mpi_allreduce,
    .allreduce_bufv = NULL, /* batches go through the engine's fusion buffer */
    .allgatherv = mpi_allgatherv,
    .broadcast = mpi_broadcast,
    .reducescatter = mpi_reducescatter,
    .alltoallv = mpi_alltoallv,
    .barrier = mpi_barrier,
};

/* ---- set-up ---- */

static int make_types(void)
{
    static MPI_User_function *const fns[RING_OP_COUNT] = {
        [RING_SUM] = sum16, [RING_AVERAGE] = sum16,  [RING_MIN] = min16,
        [RING_MAX] = max16, [RING_PRODUCT] = prod16,
    };
    if (MPI_Type_dup(MPI_UINT16_T, &half_type) != MPI_SUCCESS ||
        MPI_Type_dup(MPI_UINT16_T, &bf16_type) != MPI_SUCCESS)
        return ring__err(RING_ESYS, "cannot make MPI's 16-bit float types");
    for (int op = 0; op < RING_OP_COUNT; op++) {
        ops16[op] = MPI_OP_NULL;
        if (fns[op] == NULL) /* ADASUM: libring runs it itself (engine_exec.c) */
            continue;
        if (MPI_Op_create(fns[op], 1, &ops16[op]) != MPI_SUCCESS)
            return ring__err(RING_ESYS, "cannot make MPI's 16-bit float reductions");
    }
    return 0;
}

static void free_types(void)
{
    for (int op = 0; op < RING_OP_COUNT; op++) {
        if (ops16[op] != MPI_OP_NULL)
            MPI_Op_free(&ops16[op]);
    }
    if (half_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&half_type);
    if (bf16_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&bf16_type);
}

/*
 * MPI_COMM_WORLD in libring's rank order. Every rank first meets the others in a
 * non-blocking allreduce bounded by the setup timeout (so a rank that failed before it
 * gives RING_ETIMEDOUT, not a hang), which also tells whether the orders differ.
 */
static int make_world(struct ring__mpi_coll *m, struct ring__ctx *ctx)
{
    MPI_Comm dup, ordered = MPI_COMM_NULL;
    MPI_Request req;
    int wrank, wsize, differs, any = 0, rc;

    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (wsize != ctx->size)
        return ring__err(RING_EENV,
                         "rank %d: MPI_COMM_WORLD has %d ranks but the job %d; "
                         "RING_CPU_OPERATIONS=mpi needs every rank started by one mpirun",
                         ctx->rank, wsize, ctx->size);
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup)) != MPI_SUCCESS)
        return ring__mpi_error(rc, ctx->rank, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    m->world = dup; /* freed with m, unless broken */
    differs = wrank != ctx->rank;
    rc = MPI_Iallreduce(&differs, &any, 1, MPI_INT, MPI_MAX, dup, &req);
    rc = rc != MPI_SUCCESS ? ring__mpi_error(rc, ctx->rank, "MPI_Iallreduce")
                           : ring__mpi_wait(&req, ring__now_ms() + ctx->setup_timeout_ms, m->yield,
                                            ctx->rank, "the MPI backend's set-up");
    if (rc < 0) {
        m->broken = 1;
        return rc;
    }
    if (!any)
        return 0;
    rc = MPI_Comm_split(dup, 0, ctx->rank, &ordered);
    MPI_Comm_free(&dup);
    m->world = rc == MPI_SUCCESS ? ordered : MPI_COMM_NULL;
    if (rc != MPI_SUCCESS)
        return ring__mpi_error(rc, ctx->rank, "MPI_Comm_split");
    MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN);
    return 0;
}

int ring__mpi_coll_create(struct ring__ctx *ctx, struct ring__mpi_coll **out)
{
    struct ring__mpi_coll *m;
    int rc;

    if (!ring__mpi_launched())
        return ring__err(RING_EENV, "RING_CPU_OPERATIONS=mpi needs the job started by mpirun "
                                    "(mpirun -np N ./program), not by ringrun");
    if ((rc = ring__mpi_acquire(ctx->setup_timeout_ms)) < 0)
        return rc;
    if ((m = calloc(1, sizeof(*m))) == NULL) {
        ring__mpi_release(0);
        return ring__err(RING_ENOMEM, "out of memory for the MPI backend");
    }
    m->world = MPI_COMM_NULL;
    for (int i = 0; i < MAX_SETS; i++)
        m->sets[i] = MPI_COMM_NULL;
    for (int op = 0; op < RING_OP_COUNT; op++)
        ops16[op] = MPI_OP_NULL;
    m->rank = ctx->rank;
    m->timeout_ms = ctx->op_timeout_ms;
    m->yield = ctx->oversubscribed;
    if ((rc = make_world(m, ctx)) < 0 || (rc = make_types()) < 0) {
        ring__mpi_coll_destroy(m, 1);
        return rc;
    }
    *out = m;
    return 0;
}

void ring__mpi_coll_destroy(struct ring__mpi_coll *m, int broken)
{
    if (m == NULL)
        return;
    /* A communicator with a request left pending cannot be freed safely. */
    if (!m->broken) {
        for (int i = 0; i < MAX_SETS; i++) {
            if (m->sets[i] != MPI_COMM_NULL)
                MPI_Comm_free(&m->sets[i]);
        }
        if (m->world != MPI_COMM_NULL)
            MPI_Comm_free(&m->world);
    }
    free_types();
    ring__mpi_release(broken || m->broken);
    free(m);
}
