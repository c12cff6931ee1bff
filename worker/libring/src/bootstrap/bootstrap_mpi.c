/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bootstrap_mpi.c - the bootstrap through MPI, for a program started by mpirun (or one that
 * initialized MPI itself). Built with RING_WITH_MPI.
 *
 * The job's shape is MPI's: rank and size in MPI_COMM_WORLD, the ranks of a host are the
 * group MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) gives, and hosts are numbered by their
 * lowest rank, as the mesh numbers them. An allgather is an MPI_Iallgather of bytes on a
 * duplicate of MPI_COMM_WORLD (libring's traffic never mixes with the program's), polled
 * until the setup timeout, so that a rank that never arrives gives RING_ETIMEDOUT.
 *
 * The job's secret (auth.h): rank 0 makes it and broadcasts it over the same communicator.
 * It then travels the way Open MPI moves any data (its shared memory within a host, its TCP
 * transport between hosts), which Open MPI neither authenticates nor encrypts: under MPI the
 * pairs of libring are as safe as the job's MPI, and no safer (README, Security).
 *
 * Third in docs/design.md's order. Open MPI's mpirun also sets PMIX_RANK, so a libring built
 * with PMIx meets its peers through PMIx there; RING_BOOTSTRAP=mpi picks this one
 * (bootstrap.c). RING_CPU_OPERATIONS=mpi is separate (ops_mpi.c): it works with any
 * bootstrap under mpirun.
 */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/base.h"
#include "base/mpi_env.h"
#include "bootstrap/bootstrap.h"

struct mpiboot {
    struct ring__bootstrap b; /* first: the bootstrap is a struct mpiboot */
    MPI_Comm comm;
    int broken; /* a call timed out: a request is left pending on comm */
    int yield;  /* more ranks than CPUs on this host: yield while polling */
};

static int wait_for(struct mpiboot *m, MPI_Request *req, const char *what)
{
    int rc = ring__mpi_wait(req, ring__now_ms() + m->b.timeout_ms, m->yield, m->b.rank, what);
    if (rc == RING_ETIMEDOUT) {
        m->broken = 1;
        return ring__err(RING_ETIMEDOUT,
                         "rank %d: the other ranks did not reach the MPI bootstrap's %s within "
                         "%d s (RING_TIMEOUT_SECONDS); did they all call ring_init?",
                         m->b.rank, what, m->b.timeout_ms / 1000);
    }
    if (rc < 0)
        m->broken = 1;
    return rc;
}

static int mpi_allgather(struct ring__bootstrap *b, const void *mine, size_t len, void *all)
{
    struct mpiboot *m = (struct mpiboot *)b;
    MPI_Request req;
    int rc;

    if (m->broken)
        return ring__err(RING_EBROKEN, "rank %d: an earlier MPI bootstrap call failed", b->rank);
    if (len > INT_MAX)
        return ring__err(RING_EINVAL, "rank %d: an allgather of %zu bytes is too large for MPI",
                         b->rank, len);
    rc = MPI_Iallgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, m->comm, &req);
    if (rc != MPI_SUCCESS)
        return ring__mpi_error(rc, b->rank, "MPI_Iallgather");
    return wait_for(m, &req, "allgather");
}

static int mpi_barrier(struct ring__bootstrap *b)
{
    struct mpiboot *m = (struct mpiboot *)b;
    MPI_Request req;
    int rc;

    if (m->broken)
        return ring__err(RING_EBROKEN, "rank %d: an earlier MPI bootstrap call failed", b->rank);
    if ((rc = MPI_Ibarrier(m->comm, &req)) != MPI_SUCCESS)
        return ring__mpi_error(rc, b->rank, "MPI_Ibarrier");
    return wait_for(m, &req, "barrier");
}

static void mpi_finalize(struct ring__bootstrap *b)
{
    struct mpiboot *m = (struct mpiboot *)b;
    int broken = m->broken || b->job_failed;

    /* A communicator with a request pending cannot be freed safely: leave it to exit. */
    if (m->comm != MPI_COMM_NULL && !m->broken)
        MPI_Comm_free(&m->comm);
    ring__key_wipe(&m->b.key);
    ring__mpi_release(broken);
    free(m);
}

static const struct ring__bootstrap_ops mpi_ops = {
    .name = "mpi",
    .allgather = mpi_allgather,
    .barrier = mpi_barrier,
    .finalize = mpi_finalize,
};

/*
 * Local rank and size from the host's shared-memory group, and the host's index: the hosts
 * are numbered by their lowest world rank (what every rank learns from one allgather of
 * each rank's host leader).
 */
static int read_shape(struct mpiboot *m)
{
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Group node_group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
    int zero = 0, leader = -1, *leaders = NULL, rc;

    MPI_Comm_rank(m->comm, &m->b.rank);
    MPI_Comm_size(m->comm, &m->b.size);
    rc = MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, m->b.rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS)
        return ring__mpi_error(rc, m->b.rank, "MPI_Comm_split_type");
    MPI_Comm_rank(node, &m->b.local_rank);
    MPI_Comm_size(node, &m->b.local_size);
    /* The node's rank 0 is its lowest world rank (the split's key is the world rank). */
    MPI_Comm_group(node, &node_group);
    MPI_Comm_group(m->comm, &world_group);
    MPI_Group_translate_ranks(node_group, 1, &zero, world_group, &leader);
    MPI_Group_free(&node_group);
    MPI_Group_free(&world_group);
    MPI_Comm_free(&node);
    if ((leaders = malloc((size_t)m->b.size * sizeof(int))) == NULL)
        return ring__err(RING_ENOMEM, "out of memory for the bootstrap");
    if ((rc = mpi_allgather(&m->b, &leader, sizeof(leader), leaders)) == 0) {
        /* A leader is the first rank of its host: count the leaders, and those before ours. */
        m->b.cross_size = 0;
        m->b.cross_rank = 0;
        for (int r = 0; r < m->b.size; r++) {
            if (leaders[r] == r) {
                m->b.cross_size++;
                m->b.cross_rank += r < leader;
            }
        }
    }
    free(leaders);
    return rc;
}

/* Rank 0 makes the job's secret; every rank gets it by a broadcast. */
static int share_key(struct mpiboot *m)
{
    MPI_Request req;
    int rc;

    if (m->b.rank == 0 && (rc = ring__key_generate(&m->b.key)) < 0)
        return rc;
    rc = MPI_Ibcast(m->b.key.bytes, (int)sizeof(m->b.key.bytes), MPI_BYTE, 0, m->comm, &req);
    if (rc != MPI_SUCCESS)
        return ring__mpi_error(rc, m->b.rank, "MPI_Ibcast");
    if ((rc = wait_for(m, &req, "broadcast of the job secret")) < 0)
        return rc;
    m->b.has_key = 1;
    return 0;
}

static int mpi_open(int timeout_ms, struct ring__bootstrap **out)
{
    struct mpiboot *m;
    long cpus;
    int rc;

    if (!ring__mpi_launched())
        return 0; /* not started by mpirun */
    if ((rc = ring__mpi_acquire(timeout_ms)) < 0)
        return rc;
    if ((m = calloc(1, sizeof(*m))) == NULL) {
        ring__mpi_release(0);
        return ring__err(RING_ENOMEM, "out of memory for the bootstrap");
    }
    m->b.ops = &mpi_ops;
    m->b.timeout_ms = timeout_ms;
    m->comm = MPI_COMM_NULL;
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &m->comm)) != MPI_SUCCESS) {
        rc = ring__mpi_error(rc, 0, "MPI_Comm_dup");
        goto error;
    }
    /* Errors come back as codes: libring never lets MPI abort the program. */
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    if ((rc = read_shape(m)) < 0 || (m->b.size > 1 && (rc = share_key(m)) < 0))
        goto error;
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
    m->yield = cpus > 0 && m->b.local_size > cpus;
    *out = &m->b;
    return 0;
error:
    mpi_finalize(&m->b);
    return rc;
}

const struct ring__bootstrap_impl ring__bootstrap_mpi = {"mpi", mpi_open};
