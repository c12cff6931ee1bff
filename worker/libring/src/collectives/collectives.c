/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collectives.c - the data plane of allgather(v), broadcast, reducescatter, alltoall(v),
 * barrier, and the byte-string gather and broadcast the engine negotiates with.
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

#include "collectives/collectives.h"
#include "transport/transport.h"

/* Byte offsets and lengths of size blocks of counts[i] (or uniform) elements, packed. */
static int layout(int size, const size_t *counts, size_t uniform, size_t esize, size_t **out)
{
    size_t *b = malloc(2 * (size_t)size * sizeof(size_t));
    size_t at = 0;

    if (b == NULL)
        return ring__err(RING_ENOMEM, "out of memory for %d block offsets", size);
    for (int i = 0; i < size; i++) {
        size_t n = counts ? counts[i] : uniform;
        b[i] = at;
        b[size + i] = n * esize;
        at += n * esize;
    }
    *out = b;
    return 0;
}

int ring__allgatherv(const struct ring__comm *c, const void *sendbuf, size_t sendcount,
                     void *recvbuf, const size_t *counts, ring_dtype_t dtype)
{
    size_t esize = ring_dtype_size(dtype), *b;
    int rc = layout(c->size, counts, sendcount, esize, &b);
    char *own;

    if (rc < 0)
        return rc;
    own = (char *)recvbuf + b[c->rank];
    if (sendbuf != NULL && sendbuf != own && b[c->size + c->rank] > 0)
        memmove(own, sendbuf, b[c->size + c->rank]);
    if (c->size > 1) {
        /* The own block is already in place, so both sides of the buffer are recvbuf. */
        char *recv[1] = {recvbuf};
        const char *send[1] = {recvbuf};
        size_t start[2] = {0, b[c->size - 1] + b[2 * c->size - 1]};
        struct ring__bufv bv = {1, recv, send, start};
        struct ring__pipe p = {
            .first_chunk = 0,
            .nitems = c->size - 1,
            .nreduce = 0,
            .boff = b,
            .blen = b + c->size,
            .bv = &bv,
            .dtype = dtype,
            .op = RING_SUM,
            .postscale = 1.0,
        };
        rc = ring__pipe_run(c, &p);
    }
    free(b);
    return rc;
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

/* Binomial tree: log2(n) steps, each a whole-message send. */
static int broadcast_tree(const struct ring__comm *c, void *buf, size_t bytes, int root)
{
    struct ring__mesh *mesh = c->ctx->mesh;
    int parent, children[32], rc;
    int n = ring__bcast_tree(c->rank, c->size, root, &parent, children);

    if (parent >= 0 &&
        (rc = ring__mesh_sendrecv(mesh, -1, NULL, 0, ring__peer(c, parent), buf, bytes)) < 0)
        return rc;
    for (int i = 0; i < n; i++) {
        rc = ring__mesh_sendrecv(mesh, ring__peer(c, children[i]), buf, bytes, -1, NULL, 0);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ring__broadcast(const struct ring__comm *c, void *buf, size_t count, ring_dtype_t dtype,
                    int root)
{
    struct ring__mesh *mesh = c->ctx->mesh;
    size_t bytes = count * ring_dtype_size(dtype);

    if (c->size == 1 || bytes == 0)
        return 0;
    if (bytes <= c->ctx->small_bytes) {
        return broadcast_tree(c, buf, bytes, root);
    } else {
        int v = ring__mod(c->rank - root, c->size);
        struct chain ch = {buf, v == 0 ? bytes : 0};
        struct ring__stream s = {
            .tx_peer = ring__peer(c, ring__mod(c->rank + 1, c->size)),
            .rx_peer = ring__peer(c, ring__mod(c->rank - 1, c->size)),
            .tx_total = v == c->size - 1 ? 0 : bytes,
            .rx_total = v == 0 ? 0 : bytes,
            .tx_src = chain_src,
            .rx_dst = chain_dst,
            .rx_done = chain_done,
            .arg = &ch,
        };
        return ring__mesh_stream(mesh, &s);
    }
}

/* ---- reducescatter ---- */

int ring__reducescatter(const struct ring__comm *c, const void *sendbuf, void *recvbuf,
                        size_t count, ring_dtype_t dtype, ring_op_t op, double prescale,
                        double postscale)
{
    size_t esize = ring_dtype_size(dtype), *b, mine;
    int rc, in_place = sendbuf == recvbuf;
    char *work;

    if (c->size == 1) {
        ring__scale(recvbuf, sendbuf, count, dtype, prescale);
        ring__scale(recvbuf, recvbuf, count, dtype, postscale);
        return 0;
    }
    if ((rc = layout(c->size, NULL, 0, esize, &b)) < 0)
        return rc;
    for (int i = 0; i < c->size; i++) {
        ring__chunk(count, c->size, i, &b[i], &b[c->size + i]);
        b[i] *= esize;
        b[c->size + i] *= esize;
    }
    mine = b[c->size + c->rank];
    /* The ring passes partial sums of every chunk through this rank, so it needs a
     * full-size work buffer: in place that is recvbuf itself, which holds the whole input;
     * otherwise a copy, so that sendbuf stays untouched. */
    if (in_place) {
        work = recvbuf;
        if (prescale != 1.0)
            ring__scale(work, work, count, dtype, prescale);
    } else {
        work = malloc(count * esize > 0 ? count * esize : 1);
        if (work == NULL) {
            free(b);
            return ring__err(RING_ENOMEM, "reducescatter: cannot allocate %zu bytes",
                             count * esize);
        }
        if (prescale != 1.0) {
            ring__scale(work, sendbuf, count, dtype, prescale);
            sendbuf = work;
        }
    }
    {
        char *recv[1] = {work};
        const char *send[1] = {in_place ? work : sendbuf};
        size_t start[2] = {0, count * esize};
        struct ring__bufv bv = {1, recv, send, start};
        struct ring__pipe p = {
            .first_chunk = -1,
            .nitems = c->size - 1,
            .nreduce = c->size - 1,
            .boff = b,
            .blen = b + c->size,
            .bv = &bv,
            .dtype = dtype,
            .op = op,
            .postscale = postscale,
        };
        rc = ring__pipe_run(c, &p);
    }
    /* This rank's block goes to the start of recvbuf, in place too (ring.h). */
    if (rc == 0 && mine > 0)
        memmove(recvbuf, work + b[c->rank], mine);
    if (!in_place)
        free(work);
    free(b);
    return rc;
}

/* ---- alltoall ---- */

int ring__alltoallv(const struct ring__comm *c, const void *sendbuf, const size_t *sendcounts,
                    void *recvbuf, const size_t *recvcounts, size_t count, ring_dtype_t dtype)
{
    size_t esize = ring_dtype_size(dtype), *sb, *rb;
    const char *send = sendbuf;
    char *recv = recvbuf;
    int rc, n = c->size, r = c->rank;

    if ((rc = layout(n, sendcounts, count, esize, &sb)) < 0)
        return rc;
    if ((rc = layout(n, recvcounts, count, esize, &rb)) < 0) {
        free(sb);
        return rc;
    }
    if (sb[n + r] > 0)
        memcpy(recv + rb[r], send + sb[r], sb[n + r]);
    for (int s = 1; s < n && rc == 0; s++) {
        int dst = ring__mod(r + s, n), src = ring__mod(r - s, n);
        rc = ring__mesh_sendrecv(c->ctx->mesh, ring__peer(c, dst), send + sb[dst], sb[n + dst],
                                 ring__peer(c, src), recv + rb[src], rb[n + src]);
    }
    free(sb);
    free(rb);
    return rc;
}

/* ---- barrier ---- */

int ring__barrier(const struct ring__comm *c)
{
    char out = 'b', in;
    int rc = 0;

    for (int d = 1; d < c->size && rc == 0; d <<= 1)
        rc = ring__mesh_sendrecv(c->ctx->mesh, ring__peer(c, ring__mod(c->rank + d, c->size)), &out,
                                 1, ring__peer(c, ring__mod(c->rank - d, c->size)), &in, 1);
    return rc;
}

/* ---- byte strings for negotiation ---- */

/* A length a peer announced for a control message: within the cap, else the mesh breaks. */
static int announced_ok(const struct ring__comm *c, uint64_t n, const char *what, int from)
{
    if (n <= RING__CTRL_MAX_BYTES)
        return 0;
    ring__err(RING_EPROTO,
              "rank %d: rank %d announced a %s of %llu bytes, over the limit of %llu (a broken "
              "or hostile peer)",
              ring__peer(c, c->rank), ring__peer(c, from), what, (unsigned long long)n,
              (unsigned long long)RING__CTRL_MAX_BYTES);
    return ring__mesh_fail(c->ctx->mesh, RING_EPROTO);
}

/* This rank's own control message: one over the cap would be refused by its peers. */
static int own_ok(const struct ring__comm *c, size_t len)
{
    if (len <= RING__CTRL_MAX_BYTES)
        return 0;
    ring__err(RING_EINVAL,
              "rank %d: %zu bytes of requests to negotiate at once, over the limit of %llu "
              "(submit fewer uncached tensors between waits)",
              ring__peer(c, c->rank), len, (unsigned long long)RING__CTRL_MAX_BYTES);
    return ring__mesh_fail(c->ctx->mesh, RING_EINVAL);
}

int ring__gather_bytes(const struct ring__comm *c, const void *buf, size_t len, char ***out,
                       size_t **lens)
{
    struct ring__mesh *mesh = c->ctx->mesh;
    uint64_t n64 = len;
    char **bufs;
    size_t *ls;
    int rc = 0;

    if ((rc = own_ok(c, len)) < 0)
        return rc;
    if (c->rank != 0) {
        rc = ring__mesh_sendrecv(mesh, ring__peer(c, 0), &n64, sizeof(n64), -1, NULL, 0);
        if (rc == 0 && len > 0)
            rc = ring__mesh_sendrecv(mesh, ring__peer(c, 0), buf, len, -1, NULL, 0);
        return rc;
    }
    bufs = calloc((size_t)c->size, sizeof(*bufs));
    ls = calloc((size_t)c->size, sizeof(*ls));
    if (bufs == NULL || ls == NULL) {
        free(bufs);
        free(ls);
        return ring__err(RING_ENOMEM, "gather: out of memory");
    }
    for (int i = 0; i < c->size && rc == 0; i++) {
        if (i == 0) {
            n64 = len;
        } else if ((rc = ring__mesh_sendrecv(mesh, -1, NULL, 0, ring__peer(c, i), &n64,
                                             sizeof(n64))) < 0) {
            break;
        }
        if ((rc = announced_ok(c, n64, "request list", i)) < 0)
            break;
        ls[i] = (size_t)n64;
        bufs[i] = malloc(ls[i] > 0 ? ls[i] : 1);
        if (bufs[i] == NULL) {
            rc = ring__err(RING_ENOMEM, "gather: out of memory");
            break;
        }
        if (i == 0 && len > 0)
            memcpy(bufs[0], buf, len);
        else if (i > 0 && ls[i] > 0)
            rc = ring__mesh_sendrecv(mesh, -1, NULL, 0, ring__peer(c, i), bufs[i], ls[i]);
    }
    if (rc < 0) {
        for (int i = 0; i < c->size; i++)
            free(bufs[i]);
        free(bufs);
        free(ls);
        return rc;
    }
    *out = bufs;
    *lens = ls;
    return 0;
}

int ring__bcast_bytes(const struct ring__comm *c, char **buf, size_t *len)
{
    uint64_t n64 = c->rank == 0 ? *len : 0;
    int rc = c->rank == 0 ? own_ok(c, *len) : 0;

    if (rc == 0 && c->size > 1)
        rc = broadcast_tree(c, &n64, sizeof(n64), 0);
    if (rc < 0)
        return rc;
    if (c->rank != 0) {
        if ((rc = announced_ok(c, n64, "response list", 0)) < 0)
            return rc;
        *len = (size_t)n64;
        *buf = malloc(*len > 0 ? *len : 1);
        if (*buf == NULL)
            return ring__err(RING_ENOMEM, "broadcast: out of memory");
    }
    /* Control traffic never depends on tunables a program may change between calls. */
    return c->size > 1 && *len > 0 ? broadcast_tree(c, *buf, *len, 0) : 0;
}
