/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ops.c - the collective operations' table (ops/ops.h): libring's own ring as the
 * default, the choice per request, and where a request's buffers live.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ops/ops.h"

/* ---- ring: libring's algorithms over its transports ---- */

/* A joined rank passes the data along and keeps nothing (ops/ops.h). */
static int ops_ring_broadcast(const struct ring__comm *c, void *buf, size_t count,
                              ring_dtype_t dtype, int root)
{
    char *tmp;
    int rc;

    if (buf != NULL || count == 0)
        return ring__broadcast(c, buf, count, dtype, root);
    if ((tmp = malloc(count * ring_dtype_size(dtype))) == NULL)
        return ring__err(RING_ENOMEM, "broadcast: out of memory");
    rc = ring__broadcast(c, tmp, count, dtype, root);
    free(tmp);
    return rc;
}

const struct ring__ops ring__ops_ring = {
    .name = "ring",
    .device_memory = 0,
    .allreduce = ring__allreduce,
    .allreduce_bufv = ring__allreduce_bufv,
    .allgatherv = ring__allgatherv,
    .broadcast = ops_ring_broadcast,
    .reducescatter = ring__reducescatter,
    .alltoallv = ring__alltoallv,
    .barrier = ring__barrier,
};

/* ---- the choice ---- */

static int choose_cpu(struct ring__ctx *ctx, struct ring__ops_ctx *b)
{
    const char *v = getenv("RING_CPU_OPERATIONS");

    b->cpu = &ring__ops_ring;
    if (v == NULL || *v == '\0' || strcasecmp(v, "ring") == 0)
        return 0;
    if (strcasecmp(v, "mpi") != 0) {
        ring__log(RING_LOG_ERROR, "RING_CPU_OPERATIONS='%s' must be ring or mpi", v);
        return ring__err(RING_EENV, "RING_CPU_OPERATIONS='%s' must be ring or mpi", v);
    }
#ifdef RING_HAVE_MPI
    {
        int rc = ring__mpi_coll_create(ctx, &b->mpi);
        if (rc < 0) {
            ring__log(RING_LOG_ERROR, "RING_CPU_OPERATIONS=mpi: %s", ring_last_error());
            return rc;
        }
        b->cpu = &ring__ops_mpi;
        return 0;
    }
#else
    ring__log(RING_LOG_ERROR, "RING_CPU_OPERATIONS=mpi, but this libring was built without MPI "
                              "(configure with -DRING_WITH_MPI=ON)");
    return ring__err(RING_ENOTSUP,
                     "RING_CPU_OPERATIONS=mpi, but this libring was built without MPI "
                     "(configure with -DRING_WITH_MPI=ON)");
#endif
}

int ring__ops_create(struct ring__ctx *ctx, struct ring__ops_ctx **out)
{
    struct ring__ops_ctx *b = calloc(1, sizeof(*b));
    int rc;

    if (b == NULL)
        return ring__err(RING_ENOMEM, "out of memory for the collective backends");
    atomic_init(&b->gpu_device, -1);
    if ((rc = choose_cpu(ctx, b)) < 0)
        goto error;
#ifdef RING_HAVE_NCCL
    if ((rc = ring__nccl_create(ctx, &b->nccl)) < 0)
        goto error;
    /* Ask CUDA for its devices now, once: the first collective should not pay for loading
     * the driver (or failing to), and nothing should happen between ring_init's return and
     * the first submission that the other ranks do not also wait for. */
    (void)ring__cuda_device_of(NULL);
#endif
    ring__log(RING_LOG_DEBUG, "collective backends: %s for host memory, %s for GPU memory",
              b->cpu->name, b->nccl != NULL ? "nccl" : "none (built without CUDA)");
    *out = b;
    return 0;
error:
    ring__ops_destroy(b, 1);
    return rc;
}

void ring__ops_destroy(struct ring__ops_ctx *b, int broken)
{
    if (b == NULL)
        return;
#ifdef RING_HAVE_NCCL
    ring__nccl_destroy(b->nccl, broken);
#endif
#ifdef RING_HAVE_MPI
    ring__mpi_coll_destroy(b->mpi, broken);
#endif
    free(b);
}

const struct ring__ops *ring__ops_for(const struct ring__ctx *ctx, int device)
{
    if (ctx->ops == NULL)
        return &ring__ops_ring;
#ifdef RING_HAVE_NCCL
    if (device >= 0)
        return &ring__ops_nccl;
#endif
    return ctx->ops->cpu;
}

/* ---- where buffers live ---- */

static int device_of(const void *p)
{
#ifdef RING_HAVE_NCCL
    if (p != NULL && p != RING_IN_PLACE)
        return ring__cuda_device_of(p);
#endif
    return -1;
}

int ring__gpus_visible(void)
{
#ifdef RING_HAVE_NCCL
    return ring__cuda_have_devices();
#else
    return 0;
#endif
}

int ring__buffer_device(struct ring__ctx *ctx, const char *what, const char *name, const void *a,
                        const void *b, int *device)
{
    int da = device_of(a), db = b == a ? da : device_of(b), first = -1; /* in place: once */

    *device = -1;
    if (a == NULL || a == RING_IN_PLACE)
        da = db;
    if (b == NULL || b == RING_IN_PLACE)
        db = da;
    if (da != db) {
        char sa[32] = "host memory", sb[32] = "host memory";
        if (da >= 0)
            snprintf(sa, sizeof(sa), "GPU %d", da);
        if (db >= 0)
            snprintf(sb, sizeof(sb), "GPU %d", db);
        return ring__err(RING_EINVAL,
                         "%s '%s': the send buffer is in %s but the receive buffer in %s; both "
                         "must be in the same place",
                         what, name, sa, sb);
    }
    if (da < 0)
        return 0;
    /* libring drives one GPU per rank (NCCL's rule: one rank per GPU, and one GPU per
     * communicator rank): the first GPU tensor picks it. */
    if (ctx->ops != NULL && !atomic_compare_exchange_strong(&ctx->ops->gpu_device, &first, da) &&
        first != da)
        return ring__err(RING_EINVAL,
                         "%s '%s': the buffer is on GPU %d, but this rank's earlier GPU tensors "
                         "were on GPU %d; libring uses one GPU per rank (set "
                         "CUDA_VISIBLE_DEVICES, or move the tensor)",
                         what, name, da, first);
    *device = da;
    return 0;
}
