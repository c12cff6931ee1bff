/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hierarchical.c - the allreduce in three passes when ranks span hosts: the cheap links
 * inside a host (shared memory) do the bulk of the reduction, and each rank carries only
 * its own slice over the expensive links between hosts (TCP).
 *
 * 2 hosts of 2 ranks (a0 a1 | b0 b1), buffer cut into slices s0 s1, each into halves:
 *
 *   1. reduce-scatter in each host      a0 owns s0 of host a, a1 owns s1; the same on b
 *   2. ring allreduce across hosts,     a0 <-> b0 on s0, and at the same time a1 <-> b1 on
 *      one ring per slice               s1: every local rank drives its own TCP ring
 *   3. allgather in each host           a0 and a1 swap their finished slices; b0, b1 too
 *
 * A host's ring carries 2(L-1)/L of the buffer over shared memory; each cross ring carries
 * 2(H-1)/H of one slice, 1/L of the buffer, so the L cross rings of a host together move no
 * more than one flat ring's crossing would, in L streams at once instead of one.
 *
 * Uneven hosts (a host with more ranks than another) are handled, not refused: the buffer
 * has as many slices as the smallest host has ranks (nslices). Local rank i < nslices owns
 * slice i; the chunks of local ranks beyond nslices are empty, so they pass data along in
 * the host's passes and sit out the cross pass. Every element is still reduced on exactly
 * one rank and copied everywhere else, so every rank gets bitwise the same result.
 *
 * The passes are the ring pipeline (pipeline.c) over chunk layouts computed here, so the
 * unit tests drive the same passes in one process (test_pipeline.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/collectives.h"
#include "transport/transport.h"

int ring__hier_plan(const int *host_of, int size, int nids, int rank, struct ring__hier *h)
{
    int *hidx, *count;

    memset(h, 0, sizeof(*h));
    h->local = malloc(((size_t)3 * (size_t)size + (size_t)nids) * sizeof(int));
    if (h->local == NULL)
        return ring__err(RING_ENOMEM, "out of memory for the hierarchy of %d ranks", size);
    h->cross = h->local + size;
    count = h->cross + size;
    hidx = count + size;
    for (int i = 0; i < nids; i++)
        hidx[i] = -1;
    for (int i = 0; i < size; i++) {
        int *g = &hidx[host_of[i]];
        if (*g < 0) {
            *g = h->nhosts++;
            count[*g] = 0;
        }
        count[*g]++;
    }
    h->nslices = size;
    for (int g = 0; g < h->nhosts; g++) {
        h->nslices = count[g] < h->nslices ? count[g] : h->nslices;
        h->max_local = count[g] > h->max_local ? count[g] : h->max_local;
    }
    h->host = hidx[host_of[rank]];
    h->local_size = 0;
    for (int i = 0; i < size; i++) {
        if (hidx[host_of[i]] != h->host)
            continue;
        if (i == rank)
            h->local_rank = h->local_size;
        h->local[h->local_size++] = i;
    }
    /* count[] now counts the members seen of each host, to find each host's local_rank-th. */
    for (int g = 0; g < h->nhosts; g++)
        count[g] = 0;
    for (int i = 0; i < size; i++) {
        int g = hidx[host_of[i]];
        if (count[g]++ == h->local_rank)
            h->cross[g] = i;
    }
    return 0;
}

void ring__hier_free(struct ring__hier *h)
{
    free(h->local);
    h->local = h->cross = NULL;
}

int ring__hier_phase(const struct ring__hier *h, int phase, size_t count, size_t esize,
                     struct ring__pipe *p, size_t *boff, size_t *blen, const int **members, int *n,
                     int *me)
{
    size_t off, len;

    if (phase == RING__HIER_CROSS) {
        size_t soff, slen;
        if (h->local_rank >= h->nslices || h->nhosts < 2)
            return 0;
        ring__chunk(count, h->nslices, h->local_rank, &soff, &slen);
        if (slen == 0) /* fewer elements than slices: the same on every host */
            return 0;
        for (int j = 0; j < h->nhosts; j++) {
            ring__chunk(slen, h->nhosts, j, &off, &len);
            boff[j] = (soff + off) * esize;
            blen[j] = len * esize;
        }
        p->first_chunk = 0;
        p->nitems = 2 * (h->nhosts - 1);
        p->nreduce = h->nhosts - 1;
        *members = h->cross;
        *n = h->nhosts;
        *me = h->host;
    } else {
        if (h->local_size < 2)
            return 0;
        for (int i = 0; i < h->local_size; i++) {
            if (i < h->nslices) {
                ring__chunk(count, h->nslices, i, &off, &len);
            } else {
                off = count;
                len = 0;
            }
            boff[i] = off * esize;
            blen[i] = len * esize;
        }
        /* Reduce-scatter with first chunk -1 leaves local rank i owning chunk i, which the
         * allgather (first chunk 0: rank i starts by sending chunk i) then hands around. */
        p->first_chunk = phase == RING__HIER_LOCAL_RS ? -1 : 0;
        p->nitems = h->local_size - 1;
        p->nreduce = phase == RING__HIER_LOCAL_RS ? h->local_size - 1 : 0;
        p->postscale = 1.0; /* once, in the cross pass, where each element is finished */
        *members = h->local;
        *n = h->local_size;
        *me = h->local_rank;
    }
    p->boff = boff;
    p->blen = blen;
    return 1;
}

/* The plan of c from the mesh's hosts (transport.h): the ones the transports were chosen by,
 * so that the host passes are the shared-memory ones. */
static int plan_comm(const struct ring__comm *c, struct ring__hier *h)
{
    struct ring__mesh *mesh = c->ctx->mesh;
    int *host_of = malloc((size_t)c->size * sizeof(int)), rc;

    if (host_of == NULL)
        return ring__err(RING_ENOMEM, "out of memory for the hosts of %d ranks", c->size);
    for (int i = 0; i < c->size; i++)
        host_of[i] = ring__mesh_host(mesh, ring__peer(c, i));
    rc = ring__hier_plan(host_of, c->size, ring__mesh_nhosts(mesh), c->rank, h);
    free(host_of);
    return rc;
}

int ring__hier_for(const struct ring__comm *c, size_t bytes, struct ring__hier *h)
{
    struct ring__ctx *ctx = c->ctx;
    int rc;

    if (ctx->hier == RING__HIER_OFF || ctx->mesh == NULL || c->size < 3 ||
        ctx->algo == RING__ALGO_RD)
        return 0;
    /* auto leaves small messages to the flat algorithm that auto picks for them (recursive
     * doubling): three passes of latency would cost more than they save there. */
    if (ctx->hier == RING__HIER_AUTO && ctx->algo == RING__ALGO_AUTO && bytes <= ctx->small_bytes)
        return 0;
    if ((rc = plan_comm(c, h)) < 0)
        return rc;
    /* One host, or one rank per host: the flat ring is the same passes, with no detour. */
    if (h->nhosts < 2 || h->max_local < 2) {
        ring__hier_free(h);
        return 0;
    }
    return 1;
}

/* Runs this rank's part of one phase; nothing when it has none. */
static int run_phase(const struct ring__comm *c, const struct ring__hier *h, int phase,
                     size_t count, struct ring__pipe *p, size_t *boff, size_t *blen, int *world)
{
    const int *members;
    int n, me;

    if (!ring__hier_phase(h, phase, count, ring_dtype_size(p->dtype), p, boff, blen, &members, &n,
                          &me))
        return 0;
    for (int i = 0; i < n; i++)
        world[i] = ring__peer(c, members[i]);
    {
        struct ring__comm sub = {
            .ctx = c->ctx, .rank = me, .size = n, .members = world, .set = c->set};
        return ring__pipe_run(&sub, p);
    }
}

int ring__allreduce_hier(const struct ring__comm *c, const struct ring__hier *h,
                         const struct ring__bufv *bv, size_t count, ring_dtype_t dtype,
                         ring_op_t op, double prescale, double postscale)
{
    size_t esize = ring_dtype_size(dtype);
    size_t n = (size_t)(h->local_size > h->nhosts ? h->local_size : h->nhosts);
    size_t *boff = malloc(2 * n * sizeof(size_t));
    int *world = malloc(n * sizeof(int));
    /* After the first pass every result lives on the recv side: later passes run in place. */
    struct ring__bufv own = {bv->n, bv->recv, (const char *const *)bv->recv, bv->start};
    const struct ring__bufv *first = bv;
    struct ring__pipe p = {.dtype = dtype, .op = op};
    int rc;

    if (boff == NULL || world == NULL) {
        free(boff);
        free(world);
        return ring__err(RING_ENOMEM, "allreduce: out of memory");
    }
    if (!c->ctx->hier_logged) {
        c->ctx->hier_logged = 1;
        ring__log(RING_LOG_INFO,
                  "hierarchical allreduce, first use (%zu bytes): %d hosts, %d-%d ranks each, "
                  "%d slices; this rank is local rank %d of %d on host %d",
                  count * esize, h->nhosts, h->nslices, h->max_local, h->nslices, h->local_rank,
                  h->local_size, h->host);
    }
    /* Scaled into the result buffers, or copied there when this rank has no host pass to
     * carry its contribution over: from then on it is all in place. */
    if (prescale != 1.0 || h->local_size < 2) {
        for (int i = 0; i < bv->n; i++)
            ring__scale(bv->recv[i], bv->send[i], (bv->start[i + 1] - bv->start[i]) / esize, dtype,
                        prescale);
        first = &own;
    }
    p.bv = first;
    rc = run_phase(c, h, RING__HIER_LOCAL_RS, count, &p, boff, boff + n, world);
    if (rc == 0) {
        p.bv = &own;
        p.postscale = postscale;
        rc = run_phase(c, h, RING__HIER_CROSS, count, &p, boff, boff + n, world);
    }
    if (rc == 0)
        rc = run_phase(c, h, RING__HIER_LOCAL_AG, count, &p, boff, boff + n, world);
    free(boff);
    free(world);
    return rc;
}

int ring__hier_describe(struct ring__ctx *ctx, char *buf, size_t len)
{
    static const char *const modes[] = {"0", "auto", "1"};
    struct ring__comm w = ring__world(ctx);
    struct ring__hier h;
    int rc;

    if (ctx->hier == RING__HIER_OFF) {
        snprintf(buf, len, "off (RING_HIERARCHICAL=0)");
        return 0;
    }
    if (ctx->mesh == NULL || ctx->size < 3) {
        snprintf(buf, len, "not used: fewer than 3 ranks");
        return 0;
    }
    if ((rc = plan_comm(&w, &h)) < 0)
        return rc;
    if (h.nhosts < 2)
        snprintf(buf, len, "not used: every rank is on one host");
    else if (h.max_local < 2)
        snprintf(buf, len, "not used: one rank on each of %d hosts", h.nhosts);
    else if (ctx->algo == RING__ALGO_RD)
        snprintf(buf, len, "not used: RING_ALLREDUCE_ALGO=rd");
    else
        snprintf(buf, len,
                 "on (RING_HIERARCHICAL=%s) for allreduces %s: %d hosts, %d-%d ranks each, "
                 "%d slices%s",
                 modes[ctx->hier],
                 ctx->hier == RING__HIER_ON || ctx->algo == RING__ALGO_RING
                     ? "of any size"
                     : "above RING_SMALL_ALLREDUCE_BYTES",
                 h.nhosts, h.nslices, h.max_local, h.nslices,
                 h.nslices < h.max_local ? " (uneven hosts: the ranks beyond the smallest "
                                           "host's count only pass data along)"
                                         : "");
    ring__hier_free(&h);
    return 0;
}
