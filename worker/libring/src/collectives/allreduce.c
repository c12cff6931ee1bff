/* SPDX-License-Identifier: Apache-2.0 */
/*
 * allreduce.c - the data plane of allreduce: a pipelined ring for large messages,
 * recursive doubling for small ones and, on worlds of 4, 8, 16... ranks, recursive
 * halving-doubling (halving.c) in between (tuning.c says where each threshold comes from).
 *
 * The ring moves 2(n-1)/n of the data per rank, which is bandwidth-optimal, but takes
 * 2(n-1) latency steps. Recursive doubling moves the whole message log2(n) times in
 * log2(n) steps, which wins while latency dominates. Both give every rank bitwise the same
 * result: the ring reduces each chunk on one rank and copies it, and recursive doubling
 * combines the same pairs of partial results on both partners (the ops are commutative).
 * When ranks span hosts, both entry points below hand large messages to the hierarchical
 * allreduce instead (hierarchical.c).
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/collectives.h"
#include "transport/transport.h"

int ring__allreduce_ringv(const struct ring__comm *c, const struct ring__bufv *bv, size_t count,
                          ring_dtype_t dtype, ring_op_t op, double prescale, double postscale)
{
    size_t esize = ring_dtype_size(dtype);
    size_t *boff = malloc(2 * (size_t)c->size * sizeof(size_t));
    const char **send = NULL;
    struct ring__bufv scaled = *bv;
    size_t *blen;
    int rc;

    if (boff == NULL)
        return ring__err(RING_ENOMEM, "allreduce: out of memory");
    blen = boff + c->size;
    for (int i = 0; i < c->size; i++) {
        ring__chunk(count, c->size, i, &boff[i], &blen[i]);
        boff[i] *= esize;
        blen[i] *= esize;
    }
    if (prescale != 1.0) {
        /* Scale into the result buffers, then reduce in place there. */
        send = malloc((size_t)bv->n * sizeof(*send));
        if (send == NULL) {
            free(boff);
            return ring__err(RING_ENOMEM, "allreduce: out of memory");
        }
        for (int i = 0; i < bv->n; i++) {
            size_t n = (bv->start[i + 1] - bv->start[i]) / esize;
            ring__scale(bv->recv[i], bv->send[i], n, dtype, prescale);
            send[i] = bv->recv[i];
        }
        scaled.send = send;
    }
    {
        struct ring__pipe p = {
            .first_chunk = 0,
            .nitems = 2 * (c->size - 1),
            .nreduce = c->size - 1,
            .boff = boff,
            .blen = blen,
            .bv = &scaled,
            .dtype = dtype,
            .op = op,
            .postscale = postscale,
        };
        rc = ring__pipe_run(c, &p);
    }
    free(send);
    free(boff);
    return rc;
}

int ring__allreduce_ring(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
                         size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                         double postscale)
{
    char *recv[1] = {recvbuf};
    const char *send[1] = {sendbuf};
    size_t start[2] = {0, count * ring_dtype_size(dtype)};
    struct ring__bufv bv = {1, recv, send, start};
    return ring__allreduce_ringv(c, &bv, count, dtype, op, prescale, postscale);
}

int ring__allreduce_rd(const struct ring__comm *c, const void *sendbuf, void *recvbuf, size_t count,
                       ring_dtype_t dtype, ring_op_t op, double prescale, double postscale)
{
    struct ring__mesh *mesh = c->ctx->mesh;
    size_t bytes = count * ring_dtype_size(dtype);
    int p = ring__pow2_floor(c->size), extra = c->size - p, rank = c->rank;
    char *tmp = malloc(bytes > 0 ? bytes : 1);
    int rc = 0;

    if (tmp == NULL)
        return ring__err(RING_ENOMEM, "allreduce: cannot allocate %zu bytes", bytes);
    ring__scale(recvbuf, sendbuf, count, dtype, prescale);

    /* Fold: rank p+i hands its data to rank i and waits for the answer. */
    if (rank >= p) {
        int peer = ring__peer(c, rank - p);
        rc = ring__mesh_sendrecv(mesh, peer, recvbuf, bytes, -1, NULL, 0);
        if (rc == 0)
            rc = ring__mesh_sendrecv(mesh, -1, NULL, 0, peer, recvbuf, bytes);
        free(tmp);
        return rc;
    }
    if (rank < extra) {
        rc = ring__mesh_sendrecv(mesh, -1, NULL, 0, ring__peer(c, rank + p), tmp, bytes);
        if (rc < 0)
            goto out;
        ring__reduce(recvbuf, recvbuf, tmp, count, dtype, op);
    }
    for (int round = 0; (1 << round) < p; round++) {
        int partner = ring__peer(c, ring__rd_partner(rank, round));
        rc = ring__mesh_sendrecv(mesh, partner, recvbuf, bytes, partner, tmp, bytes);
        if (rc < 0)
            goto out;
        ring__reduce(recvbuf, recvbuf, tmp, count, dtype, op);
    }
    ring__scale(recvbuf, recvbuf, count, dtype, postscale);
    if (rank < extra)
        rc = ring__mesh_sendrecv(mesh, ring__peer(c, rank + p), recvbuf, bytes, -1, NULL, 0);
out:
    free(tmp);
    return rc;
}

int ring__allreduce_bufv(const struct ring__comm *c, const struct ring__bufv *bv, size_t count,
                         ring_dtype_t dtype, ring_op_t op, double prescale, double postscale)
{
    struct ring__hier h;
    int rc = ring__hier_for(c, count * ring_dtype_size(dtype), &h);

    if (rc < 0)
        return rc;
    if (rc == 0)
        return ring__allreduce_ringv(c, bv, count, dtype, op, prescale, postscale);
    rc = ring__allreduce_hier(c, &h, bv, count, dtype, op, prescale, postscale);
    ring__hier_free(&h);
    return rc;
}

int ring__allreduce(const struct ring__comm *c, const void *sendbuf, void *recvbuf, size_t count,
                    ring_dtype_t dtype, ring_op_t op, double prescale, double postscale)
{
    size_t bytes = count * ring_dtype_size(dtype);
    int algo = c->ctx->algo;
    struct ring__hier h;
    int rc;

    if (c->size == 1 || count == 0) {
        /* Two steps, not one factor: integers truncate after each, as on larger worlds. */
        ring__scale(recvbuf, sendbuf, count, dtype, prescale);
        ring__scale(recvbuf, recvbuf, count, dtype, postscale);
        return 0;
    }
    if ((rc = ring__hier_for(c, bytes, &h)) < 0)
        return rc;
    if (rc == 1) {
        char *recv[1] = {recvbuf};
        const char *send[1] = {sendbuf};
        size_t start[2] = {0, bytes};
        struct ring__bufv bv = {1, recv, send, start};
        rc = ring__allreduce_hier(c, &h, &bv, count, dtype, op, prescale, postscale);
        ring__hier_free(&h);
        return rc;
    }
    if (algo == RING__ALGO_AUTO) {
        if (bytes <= c->ctx->small_bytes)
            algo = RING__ALGO_RD;
        else if (bytes <= c->ctx->rhd_bytes && c->size > 2 && (c->size & (c->size - 1)) == 0)
            algo = RING__ALGO_RHD;
        else
            algo = RING__ALGO_RING;
    }
    if (algo == RING__ALGO_RD)
        return ring__allreduce_rd(c, sendbuf, recvbuf, count, dtype, op, prescale, postscale);
    if (algo == RING__ALGO_RHD)
        return ring__allreduce_rhd(c, sendbuf, recvbuf, count, dtype, op, prescale, postscale);
    return ring__allreduce_ring(c, sendbuf, recvbuf, count, dtype, op, prescale, postscale);
}
