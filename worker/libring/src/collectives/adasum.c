/* SPDX-License-Identifier: Apache-2.0 */
/*
 * adasum.c - the Adasum allreduce (ring.h's RING_ADASUM), by vector halving and distance
 * doubling.
 *
 * Adasum combines two vectors a and b into a (1 - a.b / 2|a|^2) + b (1 - a.b / 2|b|^2).
 * The combination is not associative, so the order is part of the result: ranks combine
 * in a binary tree, rank r with r ^ 1 first, then those pairs with each other (r ^ 2), and
 * so on. Rather than move whole vectors up the tree, each step halves the part a rank
 * keeps, as in recursive halving (halving.c): with p = 4,
 *
 *   step 0, partner r^1: the pair {0,1} combines its two vectors, rank 0 keeping the lower
 *           half of A01 = 0 (+) 1, rank 1 the upper half; {2,3} likewise: A23.
 *   step 1, partner r^2: rank 0 combines its quarter of A01 with rank 2's quarter of A23,
 *           rank 2 the next quarter, ...: every rank holds a quarter of A01 (+) A23.
 *   then the doubling steps in reverse trade the quarters back, as an allgather.
 *
 * The coefficients need a.b, |a|^2 and |b|^2 over whole vectors, while at step k each rank
 * holds only its region of them: the 2^(k+1) ranks that share rank >> (k+1) hold the
 * regions that tile the vector, and they sum their partial products by recursive doubling
 * among themselves (a few doubles per tensor). Floating-point addition is commutative, so
 * both sides of each exchange compute bitwise the same sums, and the coefficients agree on
 * every rank. Each element is combined on exactly one rank and then copied, so every rank
 * ends with bitwise the same result.
 *
 * A fused batch holds several tensors, which Adasum combines each on its own (a layer's
 * gradient is one vector): the partial products are kept per segment.
 *
 * A size that is not a power of two folds first: rank p + i sends its vector to rank i,
 * which combines the two whole vectors, and gets the result back at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/collectives.h"
#include "transport/transport.h"

struct adasum {
    const struct ring__comm *c;
    ring_dtype_t dtype;
    size_t es;
    const size_t *off; /* nseg + 1 segment starts, in elements */
    int nseg;
    double *parts, *peer_parts; /* 3 doubles per segment: a.b, |a|^2, |b|^2 */
};

/*
 * Combines own[lo, hi) (this rank's copy of the elements lo..hi-1 of its side's vector)
 * with other (the other side's copy of the same elements), segment by segment. own_is_a
 * says which side this rank is on, so that every rank of the group orders the partial
 * products alike. group_bits: the group that holds the rest of these vectors is the ranks
 * that differ from this one in those low bits only (0: this rank holds them whole).
 */
static int combine(struct adasum *s, char *own, const char *other, size_t lo, size_t hi,
                   int own_is_a, int group_bits)
{
    const struct ring__comm *c = s->c;
    int rc;

    for (int i = 0; i < s->nseg; i++) {
        size_t x = s->off[i] > lo ? s->off[i] : lo, y = s->off[i + 1] < hi ? s->off[i + 1] : hi;
        double *v = s->parts + 3 * i, t[3];
        if (x >= y) {
            v[0] = v[1] = v[2] = 0;
            continue;
        }
        ring__adasum_partials(own + (x - lo) * s->es, other + (x - lo) * s->es, y - x, s->dtype, t);
        v[0] = t[0];
        v[1] = own_is_a ? t[1] : t[2];
        v[2] = own_is_a ? t[2] : t[1];
    }
    /* Sum over the group: its halves trade their sums, smallest distance first. */
    for (int j = 0; j < group_bits; j++) {
        int partner = ring__peer(c, c->rank ^ (1 << j));
        size_t bytes = (size_t)s->nseg * 3 * sizeof(double);
        if ((rc = ring__mesh_sendrecv(c->ctx->mesh, partner, s->parts, bytes, partner,
                                      s->peer_parts, bytes)) < 0)
            return rc;
        for (int k = 0; k < 3 * s->nseg; k++)
            s->parts[k] += s->peer_parts[k];
    }
    for (int i = 0; i < s->nseg; i++) {
        size_t x = s->off[i] > lo ? s->off[i] : lo, y = s->off[i + 1] < hi ? s->off[i + 1] : hi;
        const double *v = s->parts + 3 * i;
        double ca = ring__adasum_coeff(v[0], v[1]), cb = ring__adasum_coeff(v[0], v[2]);
        if (x < y)
            ring__adasum_combine(own + (x - lo) * s->es, other + (x - lo) * s->es, y - x, s->dtype,
                                 own_is_a ? ca : cb, own_is_a ? cb : ca);
    }
    return 0;
}

/* The p = 2^levels core ranks: halving with Adasum's combination, then doubling. */
static int vhdd(struct adasum *s, char *buf, char *tmp, size_t count, int levels)
{
    const struct ring__comm *c = s->c;
    struct ring__mesh *mesh = c->ctx->mesh;
    size_t es = s->es;
    int rank = c->rank, rc;

    for (int k = 0; k < levels; k++) {
        int partner = rank ^ (1 << k);
        size_t klo, khi, glo, ghi;
        ring__rhd_region(count, rank, k + 1, &klo, &khi);
        ring__rhd_region(count, partner, k + 1, &glo, &ghi);
        rc = ring__mesh_sendrecv(mesh, ring__peer(c, partner), buf + glo * es, (ghi - glo) * es,
                                 ring__peer(c, partner), tmp, (khi - klo) * es);
        if (rc < 0 ||
            (rc = combine(s, buf + klo * es, tmp, klo, khi, !(rank & (1 << k)), k + 1)) < 0)
            return rc;
    }
    for (int k = levels - 1; k >= 0; k--) {
        int partner = rank ^ (1 << k);
        size_t mlo, mhi, plo, phi;
        ring__rhd_region(count, rank, k + 1, &mlo, &mhi);
        ring__rhd_region(count, partner, k + 1, &plo, &phi);
        rc = ring__mesh_sendrecv(mesh, ring__peer(c, partner), buf + mlo * es, (mhi - mlo) * es,
                                 ring__peer(c, partner), buf + plo * es, (phi - plo) * es);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ring__allreduce_adasum(const struct ring__comm *c, void *buf, size_t count, ring_dtype_t dtype,
                           const size_t *segs, int nseg, double prescale, double postscale)
{
    struct adasum s = {.c = c, .dtype = dtype, .es = ring_dtype_size(dtype), .nseg = nseg};
    struct ring__mesh *mesh = c->ctx->mesh;
    int p = ring__pow2_floor(c->size), extra = c->size - p, rank = c->rank, levels = 0, rc = 0;
    size_t *off = NULL, one = count;
    char *tmp = NULL;

    if (segs == NULL) {
        segs = &one;
        s.nseg = nseg = 1;
    }
    ring__scale(buf, buf, count, dtype, prescale);
    if (c->size > 1) {
        while ((1 << levels) < p)
            levels++;
        off = malloc(((size_t)nseg + 1) * sizeof(*off));
        s.parts = malloc((size_t)nseg * 6 * sizeof(double));
        /* The fold receives a whole vector; a halving step at most half of one. */
        tmp = malloc((rank < extra ? count : count - count / 2) * s.es + 1);
        if (off == NULL || s.parts == NULL || tmp == NULL) {
            rc = ring__err(RING_ENOMEM, "adasum: out of memory for %zu elements", count);
            goto out;
        }
        s.peer_parts = s.parts + 3 * (size_t)nseg;
        off[0] = 0;
        for (int i = 0; i < nseg; i++)
            off[i + 1] = off[i] + segs[i];
        s.off = off;
        if (rank >= p) { /* fold: hand the vector to rank - p, get the result back */
            int peer = ring__peer(c, rank - p);
            if ((rc = ring__mesh_sendrecv(mesh, peer, buf, count * s.es, -1, NULL, 0)) == 0)
                rc = ring__mesh_sendrecv(mesh, -1, NULL, 0, peer, buf, count * s.es);
            goto out;
        }
        if (rank < extra && ((rc = ring__mesh_sendrecv(mesh, -1, NULL, 0, ring__peer(c, rank + p),
                                                       tmp, count * s.es)) < 0 ||
                             (rc = combine(&s, buf, tmp, 0, count, 1, 0)) < 0))
            goto out;
        if ((rc = vhdd(&s, buf, tmp, count, levels)) < 0)
            goto out;
        if (rank < extra)
            rc = ring__mesh_sendrecv(mesh, ring__peer(c, rank + p), buf, count * s.es, -1, NULL, 0);
    }
out:
    if (rc == 0)
        ring__scale(buf, buf, count, dtype, postscale);
    free(off);
    free(s.parts);
    free(tmp);
    return rc;
}
