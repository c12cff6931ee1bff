/* SPDX-License-Identifier: Apache-2.0 */
/*
 * allreduce.c - ring_allreduce: a pipelined ring for large messages and recursive doubling
 * for small ones.
 *
 * The ring moves 2(n-1)/n of the data per rank, which is bandwidth-optimal, but takes
 * 2(n-1) latency steps. Recursive doubling moves the whole message log2(n) times in
 * log2(n) steps, which wins while latency dominates. Both give every rank bitwise the same
 * result: the ring reduces each chunk on one rank and copies it, and recursive doubling
 * combines the same pairs of partial results on both partners (the ops are commutative).
 */
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"

int ring__check_reduce(const void *sendbuf, const void *recvbuf, size_t count, ring_dtype_t dtype,
                       ring_op_t op, double prescale, double postscale, struct ring__ctx **out)
{
    int rc;
    struct ring__ctx *c = ring__ctx_usable(&rc);
    if (c == NULL)
        return rc;
    if (!ring__op_valid(dtype, op, prescale, postscale))
        return ring__err(RING_EINVAL,
                         "invalid dtype %d, op %d or scale factors %g/%g "
                         "(MIN and MAX take no scaling)",
                         (int)dtype, (int)op, prescale, postscale);
    if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
        return ring__err(RING_EINVAL, "NULL buffer with count %zu", count);
    if (count > SIZE_MAX / 8)
        return ring__err(RING_EINVAL, "count %zu overflows the buffer size", count);
    *out = c;
    return 0;
}

int ring__allreduce_ring(struct ring__ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                         ring_dtype_t dtype, ring_op_t op, double prescale, double postscale)
{
    size_t esize = ring_dtype_size(dtype);
    size_t *boff = malloc(2 * (size_t)c->size * sizeof(size_t));
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
        ring__scale(recvbuf, sendbuf, count, dtype, prescale);
        sendbuf = recvbuf;
    }
    {
        struct ring__pipe p = {
            .first_chunk = 0,
            .nitems = 2 * (c->size - 1),
            .nreduce = c->size - 1,
            .boff = boff,
            .blen = blen,
            .src0 = (const char *)sendbuf + boff[c->rank],
            .local = sendbuf,
            .recvbuf = recvbuf,
            .dtype = dtype,
            .op = op,
            .postscale = postscale,
        };
        rc = ring__pipe_run(c, &p);
    }
    free(boff);
    return rc;
}

int ring__allreduce_rd(struct ring__ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                       ring_dtype_t dtype, ring_op_t op, double prescale, double postscale)
{
    size_t bytes = count * ring_dtype_size(dtype);
    int p = ring__pow2_floor(c->size), extra = c->size - p, rank = c->rank;
    char *tmp = malloc(bytes > 0 ? bytes : 1);
    int rc = 0;

    if (tmp == NULL)
        return ring__err(RING_ENOMEM, "allreduce: cannot allocate %zu bytes", bytes);
    ring__scale(recvbuf, sendbuf, count, dtype, prescale);

    /* Fold: rank p+i hands its data to rank i and waits for the answer. */
    if (rank >= p) {
        rc = ring__tp_sendrecv(c->tp, rank - p, recvbuf, bytes, -1, NULL, 0);
        if (rc == 0)
            rc = ring__tp_sendrecv(c->tp, -1, NULL, 0, rank - p, recvbuf, bytes);
        free(tmp);
        return rc;
    }
    if (rank < extra) {
        rc = ring__tp_sendrecv(c->tp, -1, NULL, 0, rank + p, tmp, bytes);
        if (rc < 0)
            goto out;
        ring__reduce(recvbuf, recvbuf, tmp, count, dtype, op);
    }
    for (int round = 0; (1 << round) < p; round++) {
        int partner = ring__rd_partner(rank, round);
        rc = ring__tp_sendrecv(c->tp, partner, recvbuf, bytes, partner, tmp, bytes);
        if (rc < 0)
            goto out;
        ring__reduce(recvbuf, recvbuf, tmp, count, dtype, op);
    }
    ring__scale(recvbuf, recvbuf, count, dtype, postscale);
    if (rank < extra)
        rc = ring__tp_sendrecv(c->tp, rank + p, recvbuf, bytes, -1, NULL, 0);
out:
    free(tmp);
    return rc;
}

int ring_allreduce_scaled(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype,
                          ring_op_t op, double prescale, double postscale)
{
    struct ring__ctx *c;
    int rc = ring__check_reduce(sendbuf, recvbuf, count, dtype, op, prescale, postscale, &c);
    size_t bytes;
    int algo;

    if (rc < 0)
        return rc;
    if (sendbuf == RING_IN_PLACE)
        sendbuf = recvbuf;
    if (op == RING_AVERAGE) {
        postscale /= c->size;
        op = RING_SUM;
    }
    if (c->size == 1 || count == 0) {
        /* Two steps, not one factor: integers truncate after each, as on larger worlds. */
        ring__scale(recvbuf, sendbuf, count, dtype, prescale);
        ring__scale(recvbuf, recvbuf, count, dtype, postscale);
        return 0;
    }
    bytes = count * ring_dtype_size(dtype);
    algo = c->algo;
    if (algo == RING__ALGO_AUTO)
        algo = bytes <= c->small_bytes ? RING__ALGO_RD : RING__ALGO_RING;
    if (algo == RING__ALGO_RD)
        return ring__allreduce_rd(c, sendbuf, recvbuf, count, dtype, op, prescale, postscale);
    return ring__allreduce_ring(c, sendbuf, recvbuf, count, dtype, op, prescale, postscale);
}

int ring_allreduce(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype,
                   ring_op_t op)
{
    return ring_allreduce_scaled(sendbuf, recvbuf, count, dtype, op, 1.0, 1.0);
}
