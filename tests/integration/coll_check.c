/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll_check - runs every collective with every dtype and op on awkward counts and checks
 * each rank's result against a serial reference computed in double precision.
 *
 * Run under ringrun at any np. Inputs are small integers (or halves, with scaling) so that
 * every partial sum is exact in every dtype, and results can be compared exactly whatever
 * order the ranks combine them in; only AVERAGE of float types needs a tolerance. Adasum
 * (check_adasum) is compared with a serial reference of its combination tree, within a
 * tolerance, and must give bitwise the same result on every rank.
 * Exits 0 when every check passed, 1 at the first wrong element (with a description).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "ring_internal.h"

static int rank, size, checks;

static void put(void *buf, size_t i, ring_dtype_t t, double v)
{
    switch (t) {
    case RING_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)(int64_t)v;
        break;
    case RING_INT8:
        ((int8_t *)buf)[i] = (int8_t)v;
        break;
    case RING_INT16:
        ((int16_t *)buf)[i] = (int16_t)v;
        break;
    case RING_UINT16:
        ((uint16_t *)buf)[i] = (uint16_t)(int64_t)v;
        break;
    case RING_BOOL:
        ((uint8_t *)buf)[i] = v != 0;
        break;
    case RING_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case RING_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case RING_FLOAT16:
        ((uint16_t *)buf)[i] = ring__float_to_half((float)v);
        break;
    case RING_BFLOAT16:
        ((uint16_t *)buf)[i] = ring__float_to_bf16((float)v);
        break;
    case RING_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    case RING_FLOAT64:
        ((double *)buf)[i] = v;
        break;
    default:
        break;
    }
}

static double get(const void *buf, size_t i, ring_dtype_t t)
{
    switch (t) {
    case RING_UINT8:
        return ((const uint8_t *)buf)[i];
    case RING_INT8:
        return ((const int8_t *)buf)[i];
    case RING_INT16:
        return ((const int16_t *)buf)[i];
    case RING_UINT16:
        return ((const uint16_t *)buf)[i];
    case RING_BOOL:
        return ((const uint8_t *)buf)[i];
    case RING_INT32:
        return ((const int32_t *)buf)[i];
    case RING_INT64:
        return (double)((const int64_t *)buf)[i];
    case RING_FLOAT16:
        return ring__half_to_float(((const uint16_t *)buf)[i]);
    case RING_BFLOAT16:
        return ring__bf16_to_float(((const uint16_t *)buf)[i]);
    case RING_FLOAT32:
        return ((const float *)buf)[i];
    case RING_FLOAT64:
        return ((const double *)buf)[i];
    default:
        return 0;
    }
}

static int is_float(ring_dtype_t t)
{
    return ring__dtype_is_float(t);
}

static int is_signed(ring_dtype_t t)
{
    return t != RING_UINT8 && t != RING_UINT16 && t != RING_BOOL;
}

/* Whether libring takes op (with scale factors, scaled) on t; the others are refused. */
static int supported(ring_dtype_t t, ring_op_t op, int scaled)
{
    if (op == RING_ADASUM) /* check_adasum's */
        return 0;
    return t != RING_BOOL || (op != RING_AVERAGE && !scaled);
}

/* Rank r's input element i for op: small enough that every combination is exact. */
static double input(int r, size_t i, ring_dtype_t t, ring_op_t op)
{
    unsigned h = (unsigned)(i * 2654435761u + (unsigned)r * 40503u);
    if (t == RING_BOOL) /* mostly true for AND to see both values, mostly false for OR */
        return op == RING_PRODUCT || op == RING_MIN ? h % 5 != 0 : h % 5 == 0;
    switch (op) {
    case RING_PRODUCT: /* mostly 1, sometimes 2 or -1: products stay tiny */
        if (h % 7 == 0)
            return 2;
        if (h % 5 == 0 && is_signed(t))
            return -1;
        return 1;
    case RING_MIN:
    case RING_MAX:
        return (double)(h % 50) - (is_signed(t) ? 25 : 0);
    default:
        return (double)(h % 4) - (is_signed(t) && h % 3 == 0 ? 2 : 0);
    }
}

/* What libring does to one value when scaling: doubles, truncated for integers. */
static double scaled(double v, ring_dtype_t t, double f)
{
    if (f == 1.0)
        return v;
    return is_float(t) ? v * f : trunc(v * f);
}

static double reference(size_t i, ring_dtype_t t, ring_op_t op, double pre, double post)
{
    double acc = 0;
    if (op == RING_AVERAGE)
        post /= size;
    for (int r = 0; r < size; r++) {
        double x = scaled(input(r, i, t, op), t, pre);
        if (r == 0)
            acc = x;
        else if (op == RING_PRODUCT)
            acc *= x;
        else if (op == RING_MIN)
            acc = fmin(acc, x);
        else if (op == RING_MAX)
            acc = fmax(acc, x);
        else
            acc += x;
    }
    acc = scaled(acc, t, post);
    if (t == RING_UINT8) /* wraps like the uint8 arithmetic does */
        acc = (double)(uint8_t)(int64_t)acc;
    if (t == RING_UINT16)
        acc = (double)(uint16_t)(int64_t)acc;
    if (t ==
        RING_BOOL) /* SUM and MAX are OR, PRODUCT and MIN AND: a nonzero sum or product is true */
        acc = acc != 0;
    return acc;
}

static void fail(const char *what, size_t i, double got, double want)
{
    fprintf(stderr, "rank %d/%d: %s: element %zu is %g, want %g\n", rank, size, what, i, got, want);
    exit(1);
}

static void check_rc(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "rank %d/%d: %s failed: %s (%s)\n", rank, size, what, ring_strerror(rc),
                ring_last_error());
        exit(1);
    }
}

static int close_enough(double got, double want, ring_dtype_t t, ring_op_t op)
{
    double tol;
    if (got == want)
        return 1;
    if (!is_float(t) || op != RING_AVERAGE)
        return 0;
    tol = t == RING_FLOAT64 ? 1e-12 : t == RING_FLOAT32 ? 1e-6 : t == RING_FLOAT16 ? 1e-3 : 1e-2;
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

static void check_allreduce(size_t count, ring_dtype_t t, ring_op_t op, int in_place, int algo,
                            double pre, double post)
{
    size_t es = ring_dtype_size(t);
    char *in = malloc(count * es + 1), *out = malloc(count * es + 1);
    char what[160];
    struct ring__ctx *c = ring__ctx();

    for (size_t i = 0; i < count; i++)
        put(in, i, t, input(rank, i, t, op));
    c->algo = algo;
    if (in_place) {
        memcpy(out, in, count * es);
        check_rc(ring_allreduce_scaled(RING_IN_PLACE, out, count, t, op, pre, post), "allreduce");
    } else {
        check_rc(ring_allreduce_scaled(in, out, count, t, op, pre, post), "allreduce");
    }
    snprintf(what, sizeof(what), "allreduce %s %s count %zu %s algo %d pre %g post %g",
             ring_dtype_name(t), ring_op_name(op), count, in_place ? "in-place" : "out-of-place",
             algo, pre, post);
    for (size_t i = 0; i < count; i++) {
        double want = reference(i, t, op, pre, post), got = get(out, i, t);
        if (!close_enough(got, want, t, op))
            fail(what, i, got, want);
    }
    checks++;
    free(in);
    free(out);
}

/*
 * Out of place, or in place (RING_IN_PLACE: recvbuf holds the whole input and gets this
 * rank's part at its start), with or without scaling.
 */
static void check_reducescatter(size_t count, ring_dtype_t t, ring_op_t op, int in_place,
                                double pre, double post)
{
    size_t es = ring_dtype_size(t), off, mine = ring_reducescatter_count(count, size, rank, &off);
    char *in = malloc(count * es + 1), *out = malloc((in_place ? count : mine) * es + 1);
    char what[160];

    for (size_t i = 0; i < count; i++)
        put(in, i, t, input(rank, i, t, op));
    if (in_place) {
        memcpy(out, in, count * es);
        check_rc(ring_reducescatter_scaled(RING_IN_PLACE, out, count, t, op, pre, post),
                 "reducescatter");
    } else {
        check_rc(ring_reducescatter_scaled(in, out, count, t, op, pre, post), "reducescatter");
    }
    snprintf(what, sizeof(what), "reducescatter %s %s count %zu %s pre %g post %g",
             ring_dtype_name(t), ring_op_name(op), count, in_place ? "in-place" : "out-of-place",
             pre, post);
    for (size_t i = 0; i < mine; i++) {
        double want = reference(off + i, t, op, pre, post), got = get(out, i, t);
        if (!close_enough(got, want, t, op))
            fail(what, i, got, want);
    }
    /* out of place, the input is left as it was */
    for (size_t i = 0; !in_place && i < count; i++) {
        if (get(in, i, t) != input(rank, i, t, op))
            fail("reducescatter changed its sendbuf", i, get(in, i, t), input(rank, i, t, op));
    }
    checks++;
    free(in);
    free(out);
}

/* Value of element i of rank r's block in the data-movement collectives. */
static double token(int r, size_t i)
{
    return (double)((r * 31 + (int)(i % 97)) % 100);
}

/* The same in t: booleans get its lowest bit. */
static double tok(ring_dtype_t t, int r, size_t i)
{
    return t == RING_BOOL ? (double)((int)token(r, i) & 1) : token(r, i);
}

static void check_allgather(size_t count, ring_dtype_t t, int variable, int in_place)
{
    size_t es = ring_dtype_size(t), total = 0, *counts = malloc((size_t)size * sizeof(size_t));
    size_t *offs = malloc((size_t)size * sizeof(size_t));
    char *in, *out, what[128];

    for (int r = 0; r < size; r++) {
        counts[r] = variable ? (count + (size_t)r * 3) % (count + 5) : count;
        offs[r] = total;
        total += counts[r];
    }
    in = malloc(counts[rank] * es + 1);
    out = malloc(total * es + 1);
    for (size_t i = 0; i < counts[rank]; i++)
        put(in, i, t, tok(t, rank, i));
    if (in_place)
        memcpy(out + offs[rank] * es, in, counts[rank] * es);
    if (variable)
        check_rc(ring_allgatherv(in_place ? RING_IN_PLACE : in, counts[rank], out, counts, t),
                 "allgatherv");
    else
        check_rc(ring_allgather(in_place ? RING_IN_PLACE : in, count, out, t), "allgather");
    snprintf(what, sizeof(what), "allgather%s %s count %zu", variable ? "v" : "",
             ring_dtype_name(t), count);
    for (int r = 0; r < size; r++) {
        for (size_t i = 0; i < counts[r]; i++) {
            double got = get(out, offs[r] + i, t);
            if (got != tok(t, r, i))
                fail(what, offs[r] + i, got, tok(t, r, i));
        }
    }
    checks++;
    free(in);
    free(out);
    free(counts);
    free(offs);
}

static void check_broadcast(size_t count, ring_dtype_t t, int root)
{
    size_t es = ring_dtype_size(t);
    char *buf = malloc(count * es + 1), what[128];

    for (size_t i = 0; i < count; i++)
        put(buf, i, t, rank == root ? tok(t, root, i) : 0);
    check_rc(ring_broadcast(buf, count, t, root), "broadcast");
    snprintf(what, sizeof(what), "broadcast %s count %zu root %d", ring_dtype_name(t), count, root);
    for (size_t i = 0; i < count; i++) {
        if (get(buf, i, t) != tok(t, root, i))
            fail(what, i, get(buf, i, t), tok(t, root, i));
    }
    checks++;
    free(buf);
}

static void check_alltoall(size_t count, ring_dtype_t t, int variable)
{
    size_t es = ring_dtype_size(t), *sc = malloc((size_t)size * sizeof(size_t));
    size_t *rc = malloc((size_t)size * sizeof(size_t)), stot = 0, rtot = 0;
    char *in, *out, what[128];

    /* rank a sends (count + a + 2b) % (count + 3) elements to rank b when variable */
    for (int r = 0; r < size; r++) {
        sc[r] = variable ? (count + (size_t)rank + 2 * (size_t)r) % (count + 3) : count;
        rc[r] = variable ? (count + (size_t)r + 2 * (size_t)rank) % (count + 3) : count;
        stot += sc[r];
        rtot += rc[r];
    }
    in = malloc(stot * es + 1);
    out = malloc(rtot * es + 1);
    for (size_t i = 0, at = 0; i < (size_t)size; i++) {
        for (size_t k = 0; k < sc[i]; k++)
            put(in, at++, t, tok(t, rank, k + i * 7));
    }
    if (variable)
        check_rc(ring_alltoallv(in, sc, out, rc, t), "alltoallv");
    else
        check_rc(ring_alltoall(in, out, count, t), "alltoall");
    snprintf(what, sizeof(what), "alltoall%s %s count %zu", variable ? "v" : "", ring_dtype_name(t),
             count);
    for (size_t i = 0, at = 0; i < (size_t)size; i++) {
        for (size_t k = 0; k < rc[i]; k++, at++) {
            double want = tok(t, (int)i, k + (size_t)rank * 7);
            if (get(out, at, t) != want)
                fail(what, at, get(out, at, t), want);
        }
    }
    checks++;
    free(in);
    free(out);
    free(sc);
    free(rc);
}

/* ---- Adasum ---- */

/* Rank r's element i of tensor seg: quarters in [-2, 2], exact in every float dtype, with a
 * rank-dependent tilt so that pairs of vectors are neither orthogonal nor parallel. */
static double ada_input(int r, size_t i, int seg)
{
    unsigned h = (unsigned)(i * 2654435761u + (unsigned)r * 40503u + (unsigned)seg * 977u);
    return ((double)(h % 17) - 8.0) / 4.0;
}

/* a = a (+) b over n elements, in double: the serial reference of one combination. */
static void ada_combine(double *a, const double *b, size_t n)
{
    double dot = 0, aa = 0, bb = 0, ca, cb;
    for (size_t i = 0; i < n; i++) {
        dot += a[i] * b[i];
        aa += a[i] * a[i];
        bb += b[i] * b[i];
    }
    ca = ring__adasum_coeff(dot, aa);
    cb = ring__adasum_coeff(dot, bb);
    for (size_t i = 0; i < n; i++)
        a[i] = ca * a[i] + cb * b[i];
}

/* Tensor seg's result, combined in libring's tree: the ranks past the largest power of two
 * p fold into rank - p, then pairs at distance 1, 2, 4... Returns a malloc'ed vector. */
static double *ada_reference(size_t n, int seg, ring_dtype_t t, double pre, double post)
{
    int p = ring__pow2_floor(size);
    double **v = malloc((size_t)size * sizeof(*v)), *out;
    for (int r = 0; r < size; r++) {
        v[r] = malloc((n + 1) * sizeof(double));
        for (size_t i = 0; i < n; i++) /* what the rank sends: its input, scaled, in t */
            v[r][i] = scaled(ada_input(r, i, seg), t, pre);
    }
    for (int r = p; r < size; r++)
        ada_combine(v[r - p], v[r], n);
    for (int d = 1; d < p; d *= 2) {
        for (int r = 0; r < p; r += 2 * d)
            ada_combine(v[r], v[r + d], n);
    }
    out = v[0];
    for (size_t i = 0; i < n; i++)
        out[i] *= post;
    for (int r = 1; r < size; r++)
        free(v[r]);
    free(v);
    return out;
}

/* got must be the reference within the dtype's precision, and every rank's bytes alike. */
static void ada_verify(const char *what, const void *got, size_t n, int seg, ring_dtype_t t,
                       double pre, double post)
{
    size_t es = ring_dtype_size(t);
    double *want = ada_reference(n, seg, t, pre, post), big = 1;
    double tol = t == RING_FLOAT64   ? 1e-12
                 : t == RING_FLOAT32 ? 1e-5
                 : t == RING_FLOAT16 ? 2e-2
                                     : 6e-2;
    char *all = malloc((size_t)size * n * es + 1);

    for (size_t i = 0; i < n; i++)
        big = fmax(big, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        if (fabs(get(got, i, t) - want[i]) > tol * big)
            fail(what, i, get(got, i, t), want[i]);
    }
    check_rc(ring_allgather(got, n * es, all, RING_UINT8), "allgather of adasum results");
    for (int r = 0; r < size; r++) {
        if (memcmp(all + (size_t)r * n * es, got, n * es) != 0)
            fail("adasum results differ between ranks", (size_t)r, 0, 0);
    }
    free(want);
    free(all);
    checks++;
}

/*
 * Adasum on one tensor (blocking, in place and not, scaled), on nseg tensors at once (a
 * packed group, and separate async calls the engine may fuse): each tensor is combined on
 * its own, however they travel.
 */
static void check_adasum(size_t count, ring_dtype_t t)
{
    enum { NSEG = 3 };
    size_t es = ring_dtype_size(t), counts[NSEG];
    char *in[NSEG], *out[NSEG], what[160];
    const void *ins[NSEG];
    void *outs[NSEG];
    ring_handle_t *h[NSEG];

    for (int s = 0; s < NSEG; s++) {
        counts[s] = count + (size_t)s * 5; /* segments of different lengths */
        in[s] = malloc(counts[s] * es + 1);
        out[s] = malloc(counts[s] * es + 1);
        for (size_t i = 0; i < counts[s]; i++)
            put(in[s], i, t, ada_input(rank, i, s));
        ins[s] = in[s];
        outs[s] = out[s];
    }
    snprintf(what, sizeof(what), "adasum %s count %zu", ring_dtype_name(t), count);
    check_rc(ring_allreduce(in[0], out[0], count, t, RING_ADASUM), what);
    ada_verify(what, out[0], count, 0, t, 1.0, 1.0);
    check_rc(ring_allreduce_scaled(RING_IN_PLACE, in[0], count, t, RING_ADASUM, 0.5, 4.0), what);
    ada_verify(what, in[0], count, 0, t, 0.5, 4.0);

    snprintf(what, sizeof(what), "grouped adasum %s count %zu", ring_dtype_name(t), count);
    for (size_t i = 0; i < count; i++)
        put(in[0], i, t, ada_input(rank, i, 0));
    check_rc(ring_grouped_allreduce_async("coll/ada.group", NSEG, ins, outs, counts, t, RING_ADASUM,
                                          RING_GLOBAL, &h[0]),
             what);
    check_rc(ring_wait(h[0]), what);
    for (int s = 0; s < NSEG; s++)
        ada_verify(what, out[s], counts[s], s, t, 1.0, 1.0);

    snprintf(what, sizeof(what), "async adasum %s count %zu", ring_dtype_name(t), count);
    for (int s = 0; s < NSEG; s++) {
        char name[32];
        snprintf(name, sizeof(name), "coll/ada.%d", s);
        check_rc(ring_allreduce_async(name, in[s], out[s], counts[s], t, RING_ADASUM, 1.0, 1.0,
                                      RING_GLOBAL, &h[s]),
                 what);
    }
    for (int s = 0; s < NSEG; s++) {
        check_rc(ring_wait(h[s]), what);
        ada_verify(what, out[s], counts[s], s, t, 1.0, 1.0);
    }
    for (int s = 0; s < NSEG; s++) {
        free(in[s]);
        free(out[s]);
    }
}

int main(void)
{
    size_t counts[] = {0, 1, 2, 3, 7, 13, 1000, 65537};
    size_t ncounts = sizeof(counts) / sizeof(counts[0]);
    int rc = ring_init();
    struct ring__ctx *c;

    if (rc != 0) {
        fprintf(stderr, "ring_init: %s (%s)\n", ring_strerror(rc), ring_last_error());
        return 1;
    }
    rank = ring_rank();
    size = ring_size();
    c = ring__ctx();

    for (int t = 0; t < RING_DTYPE_COUNT; t++) {
        for (int op = 0; op < RING_OP_COUNT; op++) {
            for (size_t k = 0; k < ncounts && supported(t, op, 0); k++) {
                size_t n = counts[k];
                check_allreduce(n, t, op, 0, RING__ALGO_RING, 1.0, 1.0);
                check_allreduce(n, t, op, 1, RING__ALGO_RING, 1.0, 1.0);
                check_allreduce(n, t, op, 0, RING__ALGO_RD, 1.0, 1.0);
                check_allreduce(n, t, op, 0, RING__ALGO_RHD, 1.0, 1.0);
                check_allreduce(n, t, op, 1, RING__ALGO_RHD, 1.0, 1.0);
                check_allreduce(n, t, op, 1, RING__ALGO_AUTO, 1.0, 1.0);
                check_reducescatter(n, t, op, 0, 1.0, 1.0);
                check_reducescatter(n, t, op, 1, 1.0, 1.0);
                if (op == RING_SUM && supported(t, op, 1)) {
                    check_reducescatter(n, t, op, 0, 0.5, 2.0);
                    check_reducescatter(n, t, op, 1, 0.5, 2.0);
                    check_allreduce(n, t, op, 0, RING__ALGO_RING, 0.5, 2.0);
                    check_allreduce(n, t, op, 0, RING__ALGO_RD, 0.5, 2.0);
                    check_allreduce(n, t, op, 0, RING__ALGO_RHD, 0.5, 2.0);
                    check_allreduce(n, t, op, 1, RING__ALGO_RHD, 0.5, 2.0);
                }
            }
        }
        for (size_t k = 0; k < ncounts; k++) {
            check_allgather(counts[k], t, 0, 0);
            check_allgather(counts[k], t, 0, 1);
            check_allgather(counts[k], t, 1, 0);
            check_alltoall(counts[k], t, 0);
            check_alltoall(counts[k], t, 1);
            for (int root = 0; root < size; root++) {
                check_broadcast(counts[k], t, root);
                /* again through the pipelined chain, which large messages take */
                c->small_bytes = 0;
                check_broadcast(counts[k], t, root);
                c->small_bytes = 65536;
            }
        }
    }
    for (int t = 0; t < RING_DTYPE_COUNT; t++) {
        for (size_t k = 0; k < ncounts && is_float(t); k++)
            check_adasum(counts[k], t);
    }
    /* count < size and the sizes around it */
    for (size_t n = 0; n <= (size_t)size + 1; n++) {
        check_allreduce(n, RING_INT32, RING_SUM, 0, RING__ALGO_RING, 1.0, 1.0);
        check_allreduce(n, RING_FLOAT32, RING_MAX, 0, RING__ALGO_RD, 1.0, 1.0);
        check_allreduce(n, RING_INT32, RING_SUM, 0, RING__ALGO_RHD, 1.0, 1.0);
        check_reducescatter(n, RING_INT64, RING_SUM, 0, 1.0, 1.0);
        check_reducescatter(n, RING_INT64, RING_SUM, 1, 1.0, 1.0);
        check_reducescatter(n, RING_FLOAT64, RING_AVERAGE, 1, 1.0, 1.0);
    }
    check_rc(ring_barrier(), "barrier");
    if (rank == 0)
        printf("coll_check: %d checks passed at np %d\n", checks, size);
    ring_finalize();
    return 0;
}
