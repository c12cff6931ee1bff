/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pipeline.c - runs one pass of the ring (schedule.c) as a single duplex stream.
 *
 * Received reduce-scatter bytes land in a scratch segment; when a segment is complete it
 * is reduced into recvbuf and becomes sendable at once, because what a rank receives at
 * item j is what it sends at item j+1. So sending, receiving and reducing overlap: while
 * this rank reduces segment k, the kernel keeps receiving segment k+1 into the socket
 * buffer and the right neighbour is still draining what was sent before. Allgather bytes
 * are received straight into recvbuf, with no copy.
 */
#include <stdlib.h>

#include "collectives/collectives.h"
#include "transport/transport.h"

static size_t item_len(const struct ring__pipe_state *r, int item, int send)
{
    int c = send ? ring__ring_send_chunk(r->rank, r->size, item, r->p->first_chunk)
                 : ring__ring_recv_chunk(r->rank, r->size, item, r->p->first_chunk);
    return r->p->blen[c];
}

static int recv_chunk(const struct ring__pipe_state *r)
{
    return ring__ring_recv_chunk(r->rank, r->size, r->rx_item, r->p->first_chunk);
}

/* The piece holding logical byte at: a binary search over the piece starts. */
static int piece_of(const struct ring__bufv *bv, size_t at)
{
    int lo = 0, hi = bv->n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (bv->start[mid] <= at)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Where logical byte at lives on the send or recv side, and how many bytes follow it in
 * the same piece (capped at max). */
static char *locate(const struct ring__bufv *bv, size_t at, int send, size_t max, size_t *len)
{
    int i = piece_of(bv, at);
    size_t left = bv->start[i + 1] - at;
    *len = left < max ? left : max;
    return (send ? (char *)bv->send[i] : bv->recv[i]) + (at - bv->start[i]);
}

static const void *tx_src(void *arg, size_t off, size_t *len)
{
    struct ring__pipe_state *r = arg;
    size_t end, at;
    int c;

    while (off >= r->tx_start + item_len(r, r->tx_item, 1)) {
        r->tx_start += item_len(r, r->tx_item, 1);
        r->tx_item++;
    }
    if (off >= r->tx_ready) {
        *len = 0;
        return NULL;
    }
    end = r->tx_start + item_len(r, r->tx_item, 1);
    c = ring__ring_send_chunk(r->rank, r->size, r->tx_item, r->p->first_chunk);
    at = r->p->boff[c] + (off - r->tx_start);
    return locate(r->p->bv, at, r->tx_item == 0, (end < r->tx_ready ? end : r->tx_ready) - off,
                  len);
}

/* Moves the receive cursor to the item holding off (skipping empty chunks). */
static void rx_seek(struct ring__pipe_state *r, size_t off)
{
    while (off >= r->rx_start + item_len(r, r->rx_item, 0)) {
        r->rx_start += item_len(r, r->rx_item, 0);
        r->rx_item++;
    }
}

static size_t seg_start(const struct ring__pipe_state *r, size_t off)
{
    return r->rx_start + (off - r->rx_start) / r->seg * r->seg;
}

static size_t seg_end(const struct ring__pipe_state *r, size_t start)
{
    size_t item_end = r->rx_start + item_len(r, r->rx_item, 0);
    return start + r->seg < item_end ? start + r->seg : item_end;
}

static void *rx_dst(void *arg, size_t off, size_t *len)
{
    struct ring__pipe_state *r = arg;

    rx_seek(r, off);
    if (r->rx_item < r->p->nreduce) {
        size_t s = seg_start(r, off);
        *len = seg_end(r, s) - off;
        return r->scratch + (off - s);
    }
    return locate(r->p->bv, r->p->boff[recv_chunk(r)] + (off - r->rx_start), 0,
                  r->rx_start + item_len(r, r->rx_item, 0) - off, len);
}

/* recv[at..] = send[at..] op scratch, for n bytes that may span pieces. */
static void reduce_span(struct ring__pipe_state *r, size_t at, size_t n, int finish)
{
    const struct ring__pipe *p = r->p;
    const char *in = r->scratch;
    while (n > 0) {
        size_t len;
        char *dst = locate(p->bv, at, 0, n, &len);
        const char *mine = locate(p->bv, at, 1, n, &len);
        ring__reduce_scale(dst, mine, in, len / r->esize, p->dtype, p->op,
                           finish ? p->postscale : 1.0);
        at += len;
        in += len;
        n -= len;
    }
}

static int rx_done(void *arg, size_t off, size_t len)
{
    struct ring__pipe_state *r = arg;
    const struct ring__pipe *p = r->p;

    if (r->rx_item < p->nreduce) {
        size_t s = seg_start(r, off), e = seg_end(r, s);
        if (off + len < e)
            return 0; /* segment not complete yet */
        reduce_span(r, p->boff[recv_chunk(r)] + (s - r->rx_start), e - s,
                    r->rx_item == p->nreduce - 1);
        r->tx_ready = r->tx_len0 + e;
    } else {
        r->tx_ready = r->tx_len0 + off + len;
    }
    return 0;
}

void ring__pipe_init(struct ring__pipe_state *r, struct ring__stream *s, const struct ring__pipe *p,
                     int rank, int size, size_t seg, char *scratch)
{
    *r = (struct ring__pipe_state){
        .p = p,
        .rank = rank,
        .size = size,
        .esize = ring_dtype_size(p->dtype),
        .seg = seg,
        .scratch = scratch,
    };
    *s = (struct ring__stream){
        .tx_peer = -1,
        .rx_peer = -1,
        .tx_src = tx_src,
        .rx_dst = rx_dst,
        .rx_done = rx_done,
        .arg = r,
    };
    for (int j = 0; j < p->nitems; j++) {
        s->tx_total += item_len(r, j, 1);
        s->rx_total += item_len(r, j, 0);
    }
    r->tx_len0 = item_len(r, 0, 1);
    r->tx_ready = r->tx_len0;
}

int ring__pipe_run(const struct ring__comm *c, const struct ring__pipe *p)
{
    struct ring__ctx *ctx = c->ctx;
    struct ring__pipe_state r;
    struct ring__stream s;

    if (p->nreduce > 0) {
        /* Kept for the life of the context: a segment is above malloc's mmap threshold, so
         * allocating it per call would map, fault in and unmap it on every allreduce. */
        if (ctx->scratch == NULL && (ctx->scratch = malloc(ctx->segment_bytes)) == NULL)
            return ring__err(RING_ENOMEM, "cannot allocate a %zu-byte segment", ctx->segment_bytes);
    }
    ring__pipe_init(&r, &s, p, c->rank, c->size, ctx->segment_bytes,
                    p->nreduce > 0 ? ctx->scratch : NULL);
    s.tx_peer = ring__peer(c, ring__mod(c->rank + 1, c->size));
    s.rx_peer = ring__peer(c, ring__mod(c->rank - 1, c->size));
    return ring__mesh_stream(ctx->mesh, &s);
}
