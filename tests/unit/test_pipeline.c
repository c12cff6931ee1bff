/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the ring pipeline's offsets (pipeline.c).
 *
 * Every rank's stream of one pass is built with ring__pipe_init and driven in this process:
 * rank r's sends go into a small FIFO (its socket) that rank r+1 reads from. Each move takes
 * a random number of bytes, as a socket would, so segments and chunks are split at every
 * possible place. Then every rank's result is compared with a serial computation of what
 * the collective must give, and guard bytes around every buffer must be untouched. This
 * checks the offsets on every (count, size) and segment size without a socket.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"
#include "transport/transport.h"
#include "unit.h"

#define MAX_SIZE 8
#define GUARD    16 /* bytes before and after every buffer, which must stay 0xA5 */

/* Check's ck_assert reports every call to the parent process, which costs a system call;
 * the loops below check millions of bytes, so they only call Check on a failure. */
#define expect(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

static uint32_t seed = 1;

static uint32_t rnd(void) /* xorshift32: reproducible runs */
{
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    return seed;
}

/* A buffer with guard bytes on both sides. */
static char *guarded(size_t n)
{
    char *p = malloc(n + 2 * GUARD);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xA5, n + 2 * GUARD);
    return p + GUARD;
}

static void guard_check(char *p, size_t n)
{
    for (size_t i = 0; i < GUARD; i++) {
        expect((unsigned char)p[-1 - (long)i] == 0xA5, "wrote before a buffer");
        expect((unsigned char)p[n + i] == 0xA5, "wrote past a buffer");
    }
    free(p - GUARD);
}

/* One byte FIFO per rank: what rank r sent and rank r+1 has not read yet. */
struct link {
    char buf[128];
    size_t len, cap;
};

static size_t min3(size_t a, size_t b, size_t c)
{
    size_t m = a < b ? a : b;
    return m < c ? m : c;
}

/*
 * Drives the streams of size ranks to completion, moving 1..maxmove bytes at a time, and
 * fails on a stall (no rank can move although some still have bytes to send or receive).
 */
static void drive(int size, struct ring__stream *s, size_t maxmove)
{
    struct link link[MAX_SIZE];
    size_t tx[MAX_SIZE] = {0}, rx[MAX_SIZE] = {0};

    for (int r = 0; r < size; r++) {
        link[r].len = 0;
        link[r].cap = 1 + rnd() % sizeof(link[r].buf);
        expect(s[r].tx_total == s[ring__mod(r + 1, size)].rx_total,
               "rank %d sends %zu bytes, its right neighbour expects %zu", r, s[r].tx_total,
               s[ring__mod(r + 1, size)].rx_total);
    }
    for (;;) {
        int moved = 0, pending = 0, first = (int)(rnd() % (unsigned)size);
        for (int k = 0; k < size; k++) {
            int r = (first + k) % size;
            struct link *out = &link[r], *in = &link[ring__mod(r - 1, size)];
            size_t len = 0, n;

            if (tx[r] < s[r].tx_total) {
                const char *src = s[r].tx_src(s[r].arg, tx[r], &len);
                pending = 1;
                expect(tx[r] + len <= s[r].tx_total, "rank %d: tx_src offers bytes past the end",
                       r);
                n = min3(len, out->cap - out->len, 1 + rnd() % maxmove);
                if (n > 0) {
                    memcpy(out->buf + out->len, src, n);
                    out->len += n;
                    tx[r] += n;
                    moved = 1;
                }
            }
            if (rx[r] < s[r].rx_total) {
                pending = 1;
                if (in->len == 0)
                    continue;
                char *dst = s[r].rx_dst(s[r].arg, rx[r], &len);
                expect(len > 0, "rank %d: rx_dst has no room at %zu", r, rx[r]);
                expect(rx[r] + len <= s[r].rx_total, "rank %d: rx_dst room past the end", r);
                n = min3(len, in->len, 1 + rnd() % maxmove);
                memcpy(dst, in->buf, n);
                memmove(in->buf, in->buf + n, in->len - n);
                in->len -= n;
                expect(s[r].rx_done(s[r].arg, rx[r], n) == 0, "rank %d: rx_done failed", r);
                rx[r] += n;
                moved = 1;
            }
        }
        if (!pending)
            break;
        expect(moved, "the ring stalled: no rank could send or receive");
    }
    for (int r = 0; r < size; r++)
        expect(link[r].len == 0, "rank %d sent bytes nobody read", r);
}

/* What rank r contributes at element i: small integers, so that sums of doubles are exact. */
static double value(int r, size_t i)
{
    return (double)((r + 1) * 1000 + (int)(i % 997));
}

static void put(void *buf, size_t i, ring_dtype_t dtype, double v)
{
    if (dtype == RING_INT32)
        ((int32_t *)buf)[i] = (int32_t)v;
    else
        ((double *)buf)[i] = v;
}

static double get(const void *buf, size_t i, ring_dtype_t dtype)
{
    return dtype == RING_INT32 ? (double)((const int32_t *)buf)[i] : ((const double *)buf)[i];
}

/* The chunks of a pass: boff/blen in bytes, from element lengths len[0..size-1]. */
static void layout(int size, const size_t *len, size_t esize, size_t *boff, size_t *blen)
{
    size_t at = 0;
    for (int i = 0; i < size; i++) {
        boff[i] = at;
        blen[i] = len[i] * esize;
        at += blen[i];
    }
}

/* What every rank of one pass needs: its view of its buffers, its pipe, its state and its
 * stream, over one layout of the chunks (boff and blen, in bytes). */
struct ranks {
    size_t boff[MAX_SIZE], blen[MAX_SIZE];
    struct ring__bufv bv[MAX_SIZE];
    struct ring__pipe p[MAX_SIZE];
    struct ring__pipe_state st[MAX_SIZE];
    struct ring__stream s[MAX_SIZE];
};

/* Builds rank r's stream over w->bv[r] with pipe's settings (the layout and the view are
 * filled in here), as the collective would. */
static void ranks_start(struct ranks *w, int r, int size, struct ring__pipe pipe, size_t seg,
                        char *scratch)
{
    pipe.boff = w->boff;
    pipe.blen = w->blen;
    pipe.bv = &w->bv[r];
    w->p[r] = pipe;
    ring__pipe_init(&w->st[r], &w->s[r], &w->p[r], r, size, seg, scratch);
}

struct ar_case {
    int size;
    size_t count, seg;
    int npieces; /* the logical buffer is cut into this many pieces (some may be empty) */
    int in_place;
    ring_dtype_t dtype;
    double postscale;
    size_t maxmove;
};

/*
 * An allreduce as allreduce.c sets it up (first chunk 0, reduce-scatter then allgather),
 * over buffers cut into pieces as a fused batch is. Every rank must end with the sum of all
 * contributions times postscale; out of place, the send side must be unchanged.
 */
static void allreduce_case(const struct ar_case *k)
{
    size_t esize = ring_dtype_size(k->dtype), bytes = k->count * esize;
    size_t len[MAX_SIZE], start[5], cut[3];
    char *recv[MAX_SIZE][4], *send[MAX_SIZE][4];
    const char *csend[MAX_SIZE][4];
    struct ranks w;
    char *scratch[MAX_SIZE];

    for (int i = 0; i < k->size; i++) {
        size_t off;
        ring__chunk(k->count, k->size, i, &off, &len[i]);
    }
    layout(k->size, len, esize, w.boff, w.blen);
    /* piece boundaries at random elements, sorted */
    for (int i = 0; i < k->npieces - 1; i++)
        cut[i] = k->count ? rnd() % (k->count + 1) : 0;
    for (int i = 0; i < k->npieces - 1; i++)
        for (int j = i + 1; j < k->npieces - 1; j++)
            if (cut[j] < cut[i]) {
                size_t t = cut[i];
                cut[i] = cut[j];
                cut[j] = t;
            }
    start[0] = 0;
    for (int i = 1; i < k->npieces; i++)
        start[i] = cut[i - 1] * esize;
    start[k->npieces] = bytes;

    for (int r = 0; r < k->size; r++) {
        for (int i = 0; i < k->npieces; i++) {
            size_t n = start[i + 1] - start[i];
            recv[r][i] = guarded(n);
            send[r][i] = k->in_place ? recv[r][i] : guarded(n);
            for (size_t e = 0; e < n / esize; e++)
                put(send[r][i], e, k->dtype, value(r, start[i] / esize + e));
            csend[r][i] = send[r][i];
        }
        w.bv[r] = (struct ring__bufv){k->npieces, recv[r], csend[r], start};
        scratch[r] = guarded(k->seg);
        ranks_start(&w, r, k->size,
                    (struct ring__pipe){.first_chunk = 0,
                                        .nitems = 2 * (k->size - 1),
                                        .nreduce = k->size - 1,
                                        .dtype = k->dtype,
                                        .op = RING_SUM,
                                        .postscale = k->postscale},
                    k->seg, scratch[r]);
    }
    drive(k->size, w.s, k->maxmove);

    for (int r = 0; r < k->size; r++) {
        for (int i = 0; i < k->npieces; i++) {
            size_t n = start[i + 1] - start[i];
            for (size_t e = 0; e < n / esize; e++) {
                size_t at = start[i] / esize + e;
                double want = 0;
                for (int q = 0; q < k->size; q++)
                    want += value(q, at);
                want *= k->postscale;
                expect(get(recv[r][i], e, k->dtype) == want,
                       "size %d count %zu seg %zu pieces %d: rank %d element %zu is %g, "
                       "want %g",
                       k->size, k->count, k->seg, k->npieces, r, at, get(recv[r][i], e, k->dtype),
                       want);
                if (!k->in_place)
                    expect(get(send[r][i], e, k->dtype) == value(r, at),
                           "rank %d: the send side changed at %zu", r, at);
            }
            if (!k->in_place)
                guard_check(send[r][i], n);
            guard_check(recv[r][i], n);
        }
        guard_check(scratch[r], k->seg);
    }
}

static const size_t segs[] = {1, 3, 16, 4096}; /* in elements; the last holds any chunk */

START_TEST(allreduce_every_count_and_size)
{
    for (int size = 2; size <= MAX_SIZE; size++)
        for (size_t count = 0; count <= 40; count++)
            for (size_t g = 0; g < sizeof(segs) / sizeof(segs[0]); g++) {
                struct ar_case k = {size, count, segs[g] * 4, 1, 1, RING_INT32, 1.0, 7};
                allreduce_case(&k);
            }
}
END_TEST

START_TEST(allreduce_out_of_place_leaves_the_send_side)
{
    for (int size = 2; size <= MAX_SIZE; size++)
        for (size_t count = 0; count <= 40; count += 3) {
            struct ar_case k = {size, count, 3 * 4, 1, 0, RING_INT32, 1.0, 5};
            allreduce_case(&k);
        }
}
END_TEST

/* A fused batch: the logical buffer is several tensors' memory, some of them empty. */
START_TEST(allreduce_over_pieces)
{
    for (int size = 2; size <= MAX_SIZE; size++)
        for (size_t count = 0; count <= 40; count++)
            for (int pieces = 2; pieces <= 4; pieces++) {
                struct ar_case k = {
                    size,       count, (1 + rnd() % 5) * 4, pieces, (int)(count & 1),
                    RING_INT32, 1.0,   1 + rnd() % 9};
                allreduce_case(&k);
            }
}
END_TEST

/* postscale applies once to every element: to the chunks of the last reduce item only. */
START_TEST(allreduce_postscale_once)
{
    for (int size = 2; size <= MAX_SIZE; size++)
        for (size_t count = 0; count <= 30; count++) {
            struct ar_case k = {size, count,        2 * 8, 1 + (int)(count % 3),
                                1,    RING_FLOAT64, 0.25,  11};
            allreduce_case(&k);
        }
}
END_TEST

/* Many segments per chunk, moved a few bytes at a time and in large gulps. */
START_TEST(allreduce_large_counts)
{
    for (int i = 0; i < 40; i++) {
        struct ar_case k = {2 + (int)(rnd() % (MAX_SIZE - 1)),
                            1000 + rnd() % 6000,
                            (1 + rnd() % 64) * 4,
                            1 + (int)(rnd() % 4),
                            (int)(rnd() % 2),
                            RING_INT32,
                            1.0,
                            i % 2 ? 3 : 128};
        allreduce_case(&k);
    }
}
END_TEST

/*
 * A reducescatter as collectives.c sets it up (first chunk -1, reduce items only): rank r's
 * chunk r holds the sum of every rank's chunk r. Chunks may be uneven, and empty.
 */
static void reducescatter_case(int size, const size_t *len, size_t seg, size_t maxmove)
{
    size_t count = 0, start[2];
    char *work[MAX_SIZE], *mine[MAX_SIZE], *scratch[MAX_SIZE];
    const char *csend[MAX_SIZE][1];
    char *crecv[MAX_SIZE][1];
    struct ranks w;

    for (int i = 0; i < size; i++)
        count += len[i];
    layout(size, len, 4, w.boff, w.blen);
    start[0] = 0;
    start[1] = count * 4;
    for (int r = 0; r < size; r++) {
        mine[r] = guarded(count * 4);
        work[r] = guarded(count * 4);
        for (size_t e = 0; e < count; e++)
            put(mine[r], e, RING_INT32, value(r, e));
        memset(work[r], 0x5A, count * 4); /* whatever the work buffer held */
        crecv[r][0] = work[r];
        csend[r][0] = mine[r];
        w.bv[r] = (struct ring__bufv){1, crecv[r], csend[r], start};
        scratch[r] = guarded(seg);
        ranks_start(&w, r, size,
                    (struct ring__pipe){.first_chunk = -1,
                                        .nitems = size - 1,
                                        .nreduce = size - 1,
                                        .dtype = RING_INT32,
                                        .op = RING_SUM,
                                        .postscale = 1.0},
                    seg, scratch[r]);
    }
    drive(size, w.s, maxmove);
    for (int r = 0; r < size; r++) {
        for (size_t e = w.boff[r] / 4; e < (w.boff[r] + w.blen[r]) / 4; e++) {
            double want = 0;
            for (int q = 0; q < size; q++)
                want += value(q, e);
            expect(get(work[r], e, RING_INT32) == want,
                   "size %d: rank %d element %zu of its chunk is %g, want %g", size, r, e,
                   get(work[r], e, RING_INT32), want);
        }
        for (size_t e = 0; e < count; e++)
            expect(get(mine[r], e, RING_INT32) == value(r, e), "rank %d: the send side changed", r);
        guard_check(mine[r], count * 4);
        guard_check(work[r], count * 4);
        guard_check(scratch[r], seg);
    }
}

START_TEST(reducescatter_rank_owns_its_chunk)
{
    for (int size = 2; size <= MAX_SIZE; size++)
        for (size_t count = 0; count <= 40; count++)
            for (size_t g = 0; g < 3; g++) {
                size_t len[MAX_SIZE], off;
                for (int i = 0; i < size; i++)
                    ring__chunk(count, size, i, &off, &len[i]);
                reducescatter_case(size, len, segs[g] * 4, 1 + rnd() % 9);
            }
}
END_TEST

START_TEST(reducescatter_uneven_chunks)
{
    for (int i = 0; i < 300; i++) {
        int size = 2 + (int)(rnd() % (MAX_SIZE - 1));
        size_t len[MAX_SIZE];
        for (int c = 0; c < size; c++)
            len[c] = rnd() % 4 == 0 ? 0 : rnd() % 50;
        reducescatter_case(size, len, (1 + rnd() % 7) * 4, 1 + rnd() % 13);
    }
}
END_TEST

/*
 * An allgatherv as collectives.c sets it up (no reduce items; each rank's own block is
 * already in place): every rank ends with every block. Blocks may be uneven, and empty.
 */
static void allgatherv_case(int size, const size_t *len, size_t maxmove)
{
    size_t count = 0, start[2];
    char *buf[MAX_SIZE], *crecv[MAX_SIZE][1];
    const char *csend[MAX_SIZE][1];
    struct ranks w;

    for (int i = 0; i < size; i++)
        count += len[i];
    layout(size, len, 8, w.boff, w.blen);
    start[0] = 0;
    start[1] = count * 8;
    for (int r = 0; r < size; r++) {
        buf[r] = guarded(count * 8);
        memset(buf[r], 0x5A, count * 8);
        for (size_t e = w.boff[r] / 8; e < (w.boff[r] + w.blen[r]) / 8; e++)
            put(buf[r], e, RING_FLOAT64, value(r, e));
        crecv[r][0] = buf[r];
        csend[r][0] = buf[r];
        w.bv[r] = (struct ring__bufv){1, crecv[r], csend[r], start};
        ranks_start(&w, r, size,
                    (struct ring__pipe){.first_chunk = 0,
                                        .nitems = size - 1,
                                        .nreduce = 0,
                                        .dtype = RING_FLOAT64,
                                        .op = RING_SUM,
                                        .postscale = 1.0},
                    64, NULL);
    }
    drive(size, w.s, maxmove);
    for (int r = 0; r < size; r++) {
        for (int owner = 0; owner < size; owner++)
            for (size_t e = w.boff[owner] / 8; e < (w.boff[owner] + w.blen[owner]) / 8; e++)
                expect(get(buf[r], e, RING_FLOAT64) == value(owner, e),
                       "size %d: rank %d has element %zu (of rank %d's block) as %g", size, r, e,
                       owner, get(buf[r], e, RING_FLOAT64));
        guard_check(buf[r], count * 8);
    }
}

START_TEST(allgatherv_every_block)
{
    for (int i = 0; i < 400; i++) {
        int size = 2 + (int)(rnd() % (MAX_SIZE - 1));
        size_t len[MAX_SIZE];
        for (int c = 0; c < size; c++)
            len[c] = rnd() % 4 == 0 ? 0 : rnd() % 40;
        allgatherv_case(size, len, 1 + rnd() % 17);
    }
}
END_TEST

/*
 * The hierarchical allreduce (hierarchical.c), every rank in this process: each pass of
 * each ring built by ring__hier_phase, as ring__allreduce_hier runs it, and driven here.
 * Ranks sit on the hosts host_of[]. Every rank must end with the sum times postscale; the
 * rings that ring__hier_phase names on different ranks must agree with each other.
 */
static void hier_case(int size, const int *host_of, size_t count, int in_place, double postscale,
                      size_t seg, size_t maxmove)
{
    struct ring__hier h[MAX_SIZE];
    char *recv[MAX_SIZE], *send[MAX_SIZE], *scratch[MAX_SIZE];
    const char *csend[MAX_SIZE][1], *cown[MAX_SIZE][1];
    struct ring__bufv first[MAX_SIZE], own[MAX_SIZE];
    size_t boff[MAX_SIZE][MAX_SIZE], blen[MAX_SIZE][MAX_SIZE], start[2] = {0, count * 8};
    struct ring__pipe p[MAX_SIZE];
    struct ring__pipe_state st[MAX_SIZE];
    struct ring__stream s[MAX_SIZE];
    const int *members[MAX_SIZE];
    int n[MAX_SIZE], me[MAX_SIZE], part[MAX_SIZE];

    for (int r = 0; r < size; r++) {
        ck_assert_int_eq(ring__hier_plan(host_of, size, size, r, &h[r]), 0);
        recv[r] = guarded(count * 8);
        send[r] = in_place ? recv[r] : guarded(count * 8);
        memset(recv[r], 0x5A, count * 8);
        for (size_t e = 0; e < count; e++)
            put(send[r], e, RING_FLOAT64, value(r, e));
        csend[r][0] = send[r];
        cown[r][0] = recv[r];
        first[r] = (struct ring__bufv){1, &recv[r], csend[r], start};
        own[r] = (struct ring__bufv){1, &recv[r], cown[r], start};
        scratch[r] = guarded(seg);
        /* A rank alone on its host has no host pass to carry its contribution: as in
         * ring__allreduce_hier, it starts from its own copy. */
        if (h[r].local_size < 2) {
            memcpy(recv[r], send[r], count * 8);
            first[r] = own[r];
        }
    }
    for (int ph = RING__HIER_LOCAL_RS; ph <= RING__HIER_LOCAL_AG; ph++) {
        int covered = 0, parts = 0;
        for (int r = 0; r < size; r++) {
            p[r] = (struct ring__pipe){.dtype = RING_FLOAT64,
                                       .op = RING_SUM,
                                       .bv = ph == RING__HIER_LOCAL_RS ? &first[r] : &own[r],
                                       .postscale = postscale};
            part[r] = ring__hier_phase(&h[r], ph, count, 8, &p[r], boff[r], blen[r], &members[r],
                                       &n[r], &me[r]);
            parts += part[r];
        }
        /* Each ring once, from its member 0, with every member's own pipe. */
        for (int r = 0; r < size; r++) {
            if (!part[r] || me[r] != 0)
                continue;
            for (int k = 0; k < n[r]; k++) {
                int m = members[r][k];
                expect(part[m] && n[m] == n[r] && me[m] == k && members[m][0] == r,
                       "phase %d: rank %d puts rank %d at %d of its ring of %d; rank %d disagrees",
                       ph, r, m, k, n[r], m);
                ring__pipe_init(&st[k], &s[k], &p[m], k, n[r], seg, scratch[m]);
            }
            drive(n[r], s, maxmove);
            covered += n[r];
        }
        expect(covered == parts, "phase %d: %d ranks take part, %d ran in a ring", ph, parts,
               covered);
    }
    for (int r = 0; r < size; r++) {
        for (size_t e = 0; e < count; e++) {
            double want = 0;
            for (int q = 0; q < size; q++)
                want += value(q, e);
            want *= postscale;
            expect(get(recv[r], e, RING_FLOAT64) == want,
                   "hosts of %d ranks, count %zu: rank %d element %zu is %g, want %g", size, count,
                   r, e, get(recv[r], e, RING_FLOAT64), want);
            if (!in_place)
                expect(get(send[r], e, RING_FLOAT64) == value(r, e),
                       "rank %d: the send side changed at %zu", r, e);
        }
        if (!in_place)
            guard_check(send[r], count * 8);
        guard_check(recv[r], count * 8);
        guard_check(scratch[r], seg);
        ring__hier_free(&h[r]);
    }
}

/* Even and uneven hosts, interleaved ranks, counts below and around the number of slices. */
START_TEST(hierarchical_every_layout_and_count)
{
    static const struct {
        int size, host[MAX_SIZE];
    } layouts[] = {
        {4, {0, 0, 1, 1}},
        {4, {0, 1, 0, 1}},
        {3, {0, 0, 1}},
        {3, {0, 1, 1}},
        {5, {0, 0, 1, 1, 1}},
        {5, {1, 1, 1, 0, 0}},
        {6, {0, 1, 2, 0, 1, 2}},
        {8, {0, 0, 0, 0, 1, 1, 1, 1}},
        {7, {0, 0, 1, 1, 1, 2, 2}},
        {6, {0, 0, 0, 1, 2, 2}},
        {8, {3, 3, 1, 1, 0, 0, 2, 2}},
    };
    for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++)
        for (size_t count = 0; count <= 30; count++) {
            hier_case(layouts[l].size, layouts[l].host, count, (int)(count & 1),
                      count % 3 ? 1.0 : 0.25, (1 + rnd() % 4) * 8, 1 + rnd() % 11);
        }
}
END_TEST

/* The plan itself: who is local to whom, and which slice each rank carries across. */
START_TEST(hierarchical_plan)
{
    int host[5] = {1, 0, 1, 0, 1}; /* host 1 first: it is numbered 0 */
    struct ring__hier h;

    ck_assert_int_eq(ring__hier_plan(host, 5, 2, 4, &h), 0);
    ck_assert_int_eq(h.nhosts, 2);
    ck_assert_int_eq(h.nslices, 2);
    ck_assert_int_eq(h.max_local, 3);
    ck_assert_int_eq(h.host, 0);
    ck_assert_int_eq(h.local_rank, 2);
    ck_assert_int_eq(h.local_size, 3);
    ck_assert_int_eq(h.local[0], 0);
    ck_assert_int_eq(h.local[1], 2);
    ck_assert_int_eq(h.local[2], 4);
    ring__hier_free(&h);
    ck_assert_int_eq(ring__hier_plan(host, 5, 2, 3, &h), 0);
    ck_assert_int_eq(h.host, 1);
    ck_assert_int_eq(h.local_rank, 1);
    ck_assert_int_eq(h.cross[0], 2); /* the second rank of each host carries slice 1 */
    ck_assert_int_eq(h.cross[1], 3);
    ring__hier_free(&h);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {allreduce_every_count_and_size,
                            allreduce_out_of_place_leaves_the_send_side,
                            allreduce_over_pieces,
                            allreduce_postscale_once,
                            allreduce_large_counts,
                            reducescatter_rank_owns_its_chunk,
                            reducescatter_uneven_chunks,
                            allgatherv_every_block,
                            hierarchical_plan,
                            hierarchical_every_layout_and_count,
                            NULL};
    return unit_main("pipeline", tests, 60);
}
