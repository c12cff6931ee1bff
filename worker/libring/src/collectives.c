/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collectives.c - allgather(v), broadcast, reducescatter, alltoall(v) and barrier.
 *
 * allgather(v) and reducescatter are one half of the ring allreduce each (pipeline.c).
 * broadcast uses a binomial tree for small messages (log2(n) steps) and a pipelined chain
 * around the ring for large ones (every link carries the data once, at full bandwidth).
 * alltoall(v) is pairwise exchange: at step s rank r sends to r+s while receiving from r-s,
 * so every link is busy in both directions and no step waits on another. The barrier is
 * the dissemination algorithm: ceil(log2(n)) rounds of one-byte tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"

/* Byte offsets and lengths of size blocks of counts[i] elements packed in rank order. */
static int layout(int size, const size_t *counts, size_t uniform, size_t esize, size_t **out)
{
    size_t *b = malloc(2 * (size_t)size * sizeof(size_t));
    size_t at = 0;

    if (b == NULL)
        return ring__err(RING_ENOMEM, "out of memory for %d block offsets", size);
    for (int i = 0; i < size; i++) {
        size_t n = counts ? counts[i] : uniform;
        if (n > SIZE_MAX / esize / (size_t)size) {
            free(b);
            return ring__err(RING_EINVAL, "count %zu for rank %d is too large", n, i);
        }
        b[i] = at;
        b[size + i] = n * esize;
        at += n * esize;
    }
    *out = b;
    return 0;
}

static int check_dtype(ring_dtype_t dtype)
{
    if ((unsigned)dtype >= RING_DTYPE_COUNT)
        return ring__err(RING_EINVAL, "invalid dtype %d", (int)dtype);
    return 0;
}

static int allgather_impl(struct ring__ctx *c, const void *sendbuf, size_t sendcount, void *recvbuf,
                          const size_t *counts, ring_dtype_t dtype)
{
    size_t esize = ring_dtype_size(dtype), *b;
    int rc = layout(c->size, counts, sendcount, esize, &b);
    char *own;

    if (rc < 0)
        return rc;
    own = (char *)recvbuf + b[c->rank];
    if (b[c->size + c->rank] != sendcount * esize) {
        free(b);
        return ring__err(RING_EINVAL, "allgatherv: sendcount %zu differs from recvcounts[%d]",
                         sendcount, c->rank);
    }
    if (sendbuf != RING_IN_PLACE && sendbuf != own && sendcount > 0)
        memmove(own, sendbuf, sendcount * esize);
    if (c->size > 1) {
        struct ring__pipe p = {
            .first_chunk = 0,
            .nitems = c->size - 1,
            .nreduce = 0,
            .boff = b,
            .blen = b + c->size,
            .src0 = own,
            .local = NULL,
            .recvbuf = recvbuf,
            .dtype = dtype,
            .op = RING_SUM,
            .postscale = 1.0,
        };
        rc = ring__pipe_run(c, &p);
    }
    free(b);
    return rc;
}

int ring_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t *recvcounts,
                    ring_dtype_t dtype)
{
    int rc;
    struct ring__ctx *c = ring__ctx_usable(&rc);

    if (c == NULL)
        return rc;
    if ((rc = check_dtype(dtype)) < 0)
        return rc;
    if (recvcounts == NULL || recvbuf == NULL || (sendbuf == NULL && sendcount > 0))
        return ring__err(RING_EINVAL, "allgatherv: NULL buffer or recvcounts");
    return allgather_impl(c, sendbuf, sendcount, recvbuf, recvcounts, dtype);
}

int ring_allgather(const void *sendbuf, size_t sendcount, void *recvbuf, ring_dtype_t dtype)
{
    int rc;
    struct ring__ctx *c = ring__ctx_usable(&rc);

    if (c == NULL)
        return rc;
    if ((rc = check_dtype(dtype)) < 0)
        return rc;
    if (sendcount > 0 && (sendbuf == NULL || recvbuf == NULL))
        return ring__err(RING_EINVAL, "allgather: NULL buffer with count %zu", sendcount);
    return allgather_impl(c, sendbuf, sendcount, recvbuf, NULL, dtype);
}

/* ---- broadcast ---- */

struct chain {
    char *buf;
    size_t ready; /* bytes of buf that are final and may be forwarded */
};

static const void *chain_src(void *arg, size_t off, size_t *len)
{
    struct chain *ch = arg;
    *len = ch->ready > off ? ch->ready - off : 0;
    return ch->buf + off;
}

static void *chain_dst(void *arg, size_t off, size_t *len)
{
    struct chain *ch = arg;
    *len = SIZE_MAX; /* the transport caps it at what is left */
    return ch->buf + off;
}

static int chain_done(void *arg, size_t off, size_t len)
{
    struct chain *ch = arg;
    ch->ready = off + len;
    return 0;
}

int ring_broadcast(void *buf, size_t count, ring_dtype_t dtype, int root)
{
    int rc;
    struct ring__ctx *c = ring__ctx_usable(&rc);
    size_t bytes;

    if (c == NULL)
        return rc;
    if ((rc = check_dtype(dtype)) < 0)
        return rc;
    if (root < 0 || root >= c->size)
        return ring__err(RING_EINVAL, "broadcast: root %d is not a rank of a world of %d", root,
                         c->size);
    if (count > 0 && buf == NULL)
        return ring__err(RING_EINVAL, "broadcast: NULL buffer with count %zu", count);
    bytes = count * ring_dtype_size(dtype);
    if (c->size == 1 || bytes == 0)
        return 0;
    if (bytes <= c->small_bytes) {
        int parent, children[32];
        int n = ring__bcast_tree(c->rank, c->size, root, &parent, children);
        if (parent >= 0 && (rc = ring__tp_sendrecv(c->tp, -1, NULL, 0, parent, buf, bytes)) < 0)
            return rc;
        for (int i = 0; i < n; i++) {
            if ((rc = ring__tp_sendrecv(c->tp, children[i], buf, bytes, -1, NULL, 0)) < 0)
                return rc;
        }
        return 0;
    } else {
        int v = ring__mod(c->rank - root, c->size);
        struct chain ch = {buf, v == 0 ? bytes : 0};
        struct ring__stream s = {
            .tx_peer = ring__mod(c->rank + 1, c->size),
            .rx_peer = ring__mod(c->rank - 1, c->size),
            .tx_total = v == c->size - 1 ? 0 : bytes,
            .rx_total = v == 0 ? 0 : bytes,
            .tx_src = chain_src,
            .rx_dst = chain_dst,
            .rx_done = chain_done,
            .arg = &ch,
        };
        return ring__tp_stream(c->tp, &s);
    }
}

/* ---- reducescatter ---- */

size_t ring_reducescatter_count(size_t count, int size, int rank, size_t *offset)
{
    size_t off, len;
    if (size < 1 || rank < 0 || rank >= size)
        return 0;
    ring__chunk(count, size, rank, &off, &len);
    if (offset != NULL)
        *offset = off;
    return len;
}

int ring_reducescatter_scaled(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype,
                              ring_op_t op, double prescale, double postscale)
{
    struct ring__ctx *c;
    size_t esize, *b, mine;
    char *work;
    int rc;

    if (sendbuf == RING_IN_PLACE)
        return ring__err(RING_EINVAL, "reducescatter does not take RING_IN_PLACE");
    if ((rc = ring__check_reduce(sendbuf, recvbuf, count, dtype, op, prescale, postscale, &c)) < 0)
        return rc;
    if (op == RING_AVERAGE) {
        postscale /= c->size;
        op = RING_SUM;
    }
    esize = ring_dtype_size(dtype);
    if ((rc = layout(c->size, NULL, 0, esize, &b)) < 0)
        return rc;
    for (int i = 0; i < c->size; i++) {
        ring__chunk(count, c->size, i, &b[i], &b[c->size + i]);
        b[i] *= esize;
        b[c->size + i] *= esize;
    }
    mine = b[c->size + c->rank];
    if (c->size == 1) {
        ring__scale(recvbuf, sendbuf, count, dtype, prescale);
        ring__scale(recvbuf, recvbuf, count, dtype, postscale);
        free(b);
        return 0;
    }
    /* The ring passes partial sums of every chunk through this rank, so it needs a
     * full-size work buffer; only this rank's chunk is copied out at the end. */
    work = malloc(count * esize > 0 ? count * esize : 1);
    if (work == NULL) {
        free(b);
        return ring__err(RING_ENOMEM, "reducescatter: cannot allocate %zu bytes", count * esize);
    }
    if (prescale != 1.0) {
        ring__scale(work, sendbuf, count, dtype, prescale);
        sendbuf = work;
    }
    {
        int first = ring__ring_send_chunk(c->rank, c->size, 0, -1);
        struct ring__pipe p = {
            .first_chunk = -1,
            .nitems = c->size - 1,
            .nreduce = c->size - 1,
            .boff = b,
            .blen = b + c->size,
            .src0 = (const char *)sendbuf + b[first],
            .local = sendbuf,
            .recvbuf = work,
            .dtype = dtype,
            .op = op,
            .postscale = postscale,
        };
        rc = ring__pipe_run(c, &p);
    }
    if (rc == 0 && mine > 0)
        memcpy(recvbuf, work + b[c->rank], mine);
    free(work);
    free(b);
    return rc;
}

int ring_reducescatter(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype,
                       ring_op_t op)
{
    return ring_reducescatter_scaled(sendbuf, recvbuf, count, dtype, op, 1.0, 1.0);
}

/* ---- alltoall ---- */

static int alltoall_impl(struct ring__ctx *c, const char *sendbuf, const size_t *sendcounts,
                         char *recvbuf, const size_t *recvcounts, size_t uniform,
                         ring_dtype_t dtype)
{
    size_t esize = ring_dtype_size(dtype), *sb, *rb;
    int rc, n = c->size, r = c->rank;

    if ((rc = layout(n, sendcounts, uniform, esize, &sb)) < 0)
        return rc;
    if ((rc = layout(n, recvcounts, uniform, esize, &rb)) < 0) {
        free(sb);
        return rc;
    }
    if (sb[n + r] != rb[n + r]) {
        rc = ring__err(RING_EINVAL, "alltoallv: sendcounts[%d] != recvcounts[%d] on rank %d", r, r,
                       r);
        goto out;
    }
    if (sb[n + r] > 0)
        memcpy(recvbuf + rb[r], sendbuf + sb[r], sb[n + r]);
    for (int s = 1; s < n && rc == 0; s++) {
        int dst = ring__mod(r + s, n), src = ring__mod(r - s, n);
        rc = ring__tp_sendrecv(c->tp, dst, sendbuf + sb[dst], sb[n + dst], src, recvbuf + rb[src],
                               rb[n + src]);
    }
out:
    free(sb);
    free(rb);
    return rc;
}

static int check_alltoall(const void *sendbuf, void *recvbuf, int any_data, ring_dtype_t dtype)
{
    int rc = check_dtype(dtype);
    if (rc < 0)
        return rc;
    if (sendbuf == RING_IN_PLACE)
        return ring__err(RING_EINVAL, "alltoall does not take RING_IN_PLACE");
    if (any_data && (sendbuf == NULL || recvbuf == NULL))
        return ring__err(RING_EINVAL, "alltoall: NULL buffer");
    return 0;
}

int ring_alltoall(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype)
{
    int rc;
    struct ring__ctx *c = ring__ctx_usable(&rc);

    if (c == NULL)
        return rc;
    if ((rc = check_alltoall(sendbuf, recvbuf, count > 0, dtype)) < 0)
        return rc;
    return alltoall_impl(c, sendbuf, NULL, recvbuf, NULL, count, dtype);
}

int ring_alltoallv(const void *sendbuf, const size_t *sendcounts, void *recvbuf,
                   const size_t *recvcounts, ring_dtype_t dtype)
{
    int rc;
    struct ring__ctx *c = ring__ctx_usable(&rc);

    if (c == NULL)
        return rc;
    if (sendcounts == NULL || recvcounts == NULL)
        return ring__err(RING_EINVAL, "alltoallv: NULL sendcounts or recvcounts");
    if ((rc = check_alltoall(sendbuf, recvbuf, 1, dtype)) < 0)
        return rc;
    return alltoall_impl(c, sendbuf, sendcounts, recvbuf, recvcounts, 0, dtype);
}

/* ---- barrier ---- */

int ring_barrier(void)
{
    int rc;
    struct ring__ctx *c = ring__ctx_usable(&rc);
    char out = 'b', in;

    if (c == NULL)
        return rc;
    for (int d = 1; d < c->size && rc == 0; d <<= 1)
        rc = ring__tp_sendrecv(c->tp, ring__mod(c->rank + d, c->size), &out, 1,
                               ring__mod(c->rank - d, c->size), &in, 1);
    return rc;
}
