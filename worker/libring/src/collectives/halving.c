/* SPDX-License-Identifier: Apache-2.0 */
/*
 * halving.c - allreduce by recursive halving, then recursive doubling (Rabenseifner's
 * algorithm), for mid-sized messages.
 *
 * It moves the same bytes as the ring, 2(p-1)/p of the message per rank, but in 2 log2(p)
 * steps instead of 2(p-1), and each step is a plain exchange with one partner whose send
 * side is ready at once. That matters where a rank's neighbour is not running when it is
 * needed (more ranks than CPUs): a ring step waits for the step before it on another rank,
 * so a chain of p-1 ranks must each get a CPU in turn; here only the two partners meet.
 *
 * With p = 4, the region each rank owns (rhd_region) after each halving step:
 *
 *             elements:  [ 0 .......... count )
 *   step 0 (partner r^1): ranks 0,2 keep [0, 1/2), ranks 1,3 keep [1/2, 1)
 *   step 1 (partner r^2): rank 0 [0, 1/4), rank 2 [1/4, 1/2), rank 1 [1/2, 3/4), rank 3 [3/4, 1)
 *   then the doubling steps in reverse order (partner r^2, then r^1) trade the owned
 *   regions back until every rank has all of them.
 *
 * At a halving step a rank sends the half it gives up and receives its partner's copy of
 * the half it keeps, segment by segment into the scratch segment, reducing each segment as
 * soon as it is complete while the next one arrives. Every element is reduced on exactly
 * one rank and then copied, so every rank ends with bitwise the same result. A size that
 * is not a power of two folds the extra ranks first, as recursive doubling does.
 */
#include <stdlib.h>

#include "collectives/collectives.h"
#include "transport/transport.h"

void ring__rhd_region(size_t count, int rank, int level, size_t *lo, size_t *hi)
{
    size_t l = 0, h = count;
    for (int k = 0; k < level; k++) {
        size_t mid = l + (h - l) / 2;
        if ((rank >> k) & 1)
            l = mid;
        else
            h = mid;
    }
    *lo = l;
    *hi = h;
}

/* One halving step's receive side: bytes land in the scratch segment and are reduced into
 * dst from src (dst[i] = src[i] op scratch[i]) once a segment is complete. */
struct halve {
    const char *src;
    char *dst;
    char *scratch;
    size_t seg, total, esize;
    ring_dtype_t dtype;
    ring_op_t op;
    double postscale; /* applied to the reduced bytes on the last step, else 1 */
    const char *tx;
    size_t tx_len;
};

static const void *halve_src(void *arg, size_t off, size_t *len)
{
    struct halve *h = arg;
    *len = h->tx_len - off;
    return h->tx + off;
}

static void *halve_dst(void *arg, size_t off, size_t *len)
{
    struct halve *h = arg;
    size_t start = off / h->seg * h->seg;
    size_t end = start + h->seg < h->total ? start + h->seg : h->total;
    *len = end - off;
    return h->scratch + (off - start);
}

static int halve_done(void *arg, size_t off, size_t len)
{
    struct halve *h = arg;
    size_t start = off / h->seg * h->seg;
    size_t end = start + h->seg < h->total ? start + h->seg : h->total;
    size_t n = (end - start) / h->esize;

    if (off + len < end)
        return 0; /* the segment is not complete yet */
    ring__reduce(h->dst + start, h->src + start, h->scratch, n, h->dtype, h->op);
    if (h->postscale != 1.0)
        ring__scale(h->dst + start, h->dst + start, n, h->dtype, h->postscale);
    return 0;
}

/*
 * Sends tx_len bytes at tx to peer while receiving rx_len bytes from it, and reduces them:
 * dst[i] = src[i] op received[i] (then times postscale).
 */
static int exchange_reduce(const struct ring__comm *c, int peer, const char *tx, size_t tx_len,
                           const char *src, char *dst, size_t rx_len, ring_dtype_t dtype,
                           ring_op_t op, double postscale)
{
    struct ring__ctx *ctx = c->ctx;
    struct halve h = {
        .src = src,
        .dst = dst,
        .seg = ctx->segment_bytes,
        .total = rx_len,
        .esize = ring_dtype_size(dtype),
        .dtype = dtype,
        .op = op,
        .postscale = postscale,
        .tx = tx,
        .tx_len = tx_len,
    };
    struct ring__stream s = {
        .tx_peer = peer,
        .rx_peer = peer,
        .tx_total = tx_len,
        .rx_total = rx_len,
        .tx_src = halve_src,
        .rx_dst = halve_dst,
        .rx_done = halve_done,
        .arg = &h,
    };

    /* Kept for the life of the context, as the ring's (pipeline.c). */
    if (ctx->scratch == NULL && (ctx->scratch = malloc(ctx->segment_bytes)) == NULL)
        return ring__err(RING_ENOMEM, "cannot allocate a %zu-byte segment", ctx->segment_bytes);
    h.scratch = ctx->scratch;
    return ring__mesh_stream(ctx->mesh, &s);
}

int ring__allreduce_rhd(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
                        size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                        double postscale)
{
    struct ring__mesh *mesh = c->ctx->mesh;
    size_t es = ring_dtype_size(dtype), bytes = count * es;
    int p = ring__pow2_floor(c->size), extra = c->size - p, rank = c->rank, levels = 0;
    const char *src = sendbuf;
    char *dst = recvbuf;
    int rc;

    while ((1 << levels) < p)
        levels++;
    if (prescale != 1.0 || (rank < extra && sendbuf != recvbuf)) {
        ring__scale(dst, sendbuf, count, dtype, prescale);
        src = dst;
    }
    /* Fold: rank p+i hands its data to rank i and waits for the answer. */
    if (rank >= p) {
        int peer = ring__peer(c, rank - p);
        rc = ring__mesh_sendrecv(mesh, peer, src, bytes, -1, NULL, 0);
        return rc < 0 ? rc : ring__mesh_sendrecv(mesh, -1, NULL, 0, peer, dst, bytes);
    }
    if (rank < extra && (rc = exchange_reduce(c, ring__peer(c, rank + p), NULL, 0, dst, dst, bytes,
                                              dtype, op, 1.0)) < 0)
        return rc;

    /* Halving: at level k the partner differs in bit k and owns the same region. */
    for (int k = 0; k < levels; k++) {
        int partner = rank ^ (1 << k);
        size_t klo, khi, glo, ghi;
        ring__rhd_region(count, rank, k + 1, &klo, &khi);
        ring__rhd_region(count, partner, k + 1, &glo, &ghi);
        rc = exchange_reduce(c, ring__peer(c, partner), src + glo * es, (ghi - glo) * es,
                             src + klo * es, dst + klo * es, (khi - klo) * es, dtype, op,
                             k == levels - 1 ? postscale : 1.0);
        if (rc < 0)
            return rc;
        src = dst;
    }
    /* Doubling, in reverse: trade owned regions straight into the result. */
    for (int k = levels - 1; k >= 0; k--) {
        int partner = rank ^ (1 << k);
        size_t mlo, mhi, plo, phi;
        ring__rhd_region(count, rank, k + 1, &mlo, &mhi);
        ring__rhd_region(count, partner, k + 1, &plo, &phi);
        rc = ring__mesh_sendrecv(mesh, ring__peer(c, partner), dst + mlo * es, (mhi - mlo) * es,
                                 ring__peer(c, partner), dst + plo * es, (phi - plo) * es);
        if (rc < 0)
            return rc;
    }
    if (rank < extra)
        return ring__mesh_sendrecv(mesh, ring__peer(c, rank + p), dst, bytes, -1, NULL, 0);
    return 0;
}
