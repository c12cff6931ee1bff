/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the pure schedule functions, on every (count, size) up to size 16. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "unit.h"
#include "ring_internal.h"

#define MAX_SIZE 16

START_TEST(chunks_partition_every_count)
{
    for (int size = 1; size <= MAX_SIZE; size++) {
        for (size_t count = 0; count <= 200; count++) {
            size_t next = 0, minlen = SIZE_MAX, maxlen = 0;
            for (int i = 0; i < size; i++) {
                size_t off, len;
                ring__chunk(count, size, i, &off, &len);
                ck_assert_uint_eq(off, next); /* contiguous, in order, no overlap */
                next = off + len;
                minlen = len < minlen ? len : minlen;
                maxlen = len > maxlen ? len : maxlen;
            }
            ck_assert_uint_eq(next, count);        /* covers everything */
            ck_assert_uint_le(maxlen - minlen, 1); /* balanced */
        }
    }
}
END_TEST

START_TEST(chunks_large_counts)
{
    size_t off, len;
    ring__chunk((size_t)1 << 40, 7, 6, &off, &len);
    ck_assert_uint_eq(off + len, (size_t)1 << 40);
    ring__chunk(5, 16, 15, &off, &len); /* count < size: trailing chunks are empty */
    ck_assert_uint_eq(len, 0);
    ck_assert_uint_eq(off, 5);
}
END_TEST

/*
 * Simulates the ring allreduce on contribution bitmasks: chunk c on rank r holds the set of
 * ranks whose data it includes. Checks neighbours agree on every item, that what is received
 * at item j is sent at item j+1, and that every rank ends with every contribution in every
 * chunk.
 */
static void simulate(int size, int first_chunk, int nitems, int nreduce, int check_all)
{
    uint32_t have[MAX_SIZE][MAX_SIZE];

    for (int r = 0; r < size; r++)
        for (int c = 0; c < size; c++)
            have[r][c] = 1u << r;
    for (int j = 0; j < nitems; j++) {
        uint32_t sent[MAX_SIZE];
        for (int r = 0; r < size; r++) {
            int c = ring__ring_send_chunk(r, size, j, first_chunk);
            sent[r] = have[r][c];
            if (j + 1 < nitems)
                ck_assert_int_eq(ring__ring_send_chunk(r, size, j + 1, first_chunk),
                                 ring__ring_recv_chunk(r, size, j, first_chunk));
        }
        for (int r = 0; r < size; r++) {
            int left = ring__mod(r - 1, size);
            int c = ring__ring_recv_chunk(r, size, j, first_chunk);
            ck_assert_int_eq(c, ring__ring_send_chunk(left, size, j, first_chunk));
            if (j < nreduce) {
                ck_assert_uint_eq(have[r][c] & sent[left], 0); /* nothing counted twice */
                have[r][c] |= sent[left];
            } else {
                have[r][c] = sent[left];
            }
        }
    }
    for (int r = 0; r < size; r++) {
        uint32_t all = size == 32 ? 0xffffffffu : (1u << size) - 1;
        if (check_all) {
            for (int c = 0; c < size; c++)
                ck_assert_uint_eq(have[r][c], all);
        } else { /* reducescatter: rank r owns chunk r */
            ck_assert_uint_eq(have[r][r], all);
        }
    }
}

START_TEST(ring_allreduce_schedule)
{
    for (int size = 2; size <= MAX_SIZE; size++)
        simulate(size, 0, 2 * (size - 1), size - 1, 1);
}
END_TEST

START_TEST(ring_reducescatter_schedule)
{
    for (int size = 2; size <= MAX_SIZE; size++)
        simulate(size, -1, size - 1, size - 1, 0);
}
END_TEST

START_TEST(ring_allgather_schedule)
{
    /* With no reduction, every rank must end with every rank's own block. */
    for (int size = 2; size <= MAX_SIZE; size++) {
        for (int r = 0; r < size; r++) {
            uint32_t seen = 1u << r;
            for (int j = 0; j < size - 1; j++)
                seen |= 1u << ring__ring_recv_chunk(r, size, j, 0);
            ck_assert_uint_eq(seen, (1u << size) - 1);
            ck_assert_int_eq(ring__ring_send_chunk(r, size, 0, 0), r);
        }
    }
}
END_TEST

START_TEST(recursive_doubling_pairs)
{
    for (int size = 1; size <= MAX_SIZE; size++) {
        int p = ring__pow2_floor(size);
        ck_assert_int_le(p, size);
        ck_assert_int_gt(2 * p, size);
        ck_assert_int_eq(p & (p - 1), 0);
        /* Partners are mutual and stay inside the power-of-two core. */
        for (int round = 0; (1 << round) < p; round++) {
            for (int r = 0; r < p; r++) {
                int q = ring__rd_partner(r, round);
                ck_assert_int_lt(q, p);
                ck_assert_int_eq(ring__rd_partner(q, round), r);
            }
        }
    }
}
END_TEST

/*
 * Recursive halving: at each level the owned regions of the p ranks partition the count;
 * the partners of step k (rank ^ 2^k) share their level-k region and split it between
 * them at level k+1, as evenly as the count allows.
 */
START_TEST(halving_regions_partition_every_count)
{
    for (int p = 1; p <= MAX_SIZE; p *= 2) {
        for (size_t count = 0; count <= 200; count++) {
            for (int level = 0; (1 << level) <= p; level++) {
                size_t covered = 0;
                for (int r = 0; r < p; r++) {
                    size_t lo, hi;
                    ring__rhd_region(count, r, level, &lo, &hi);
                    ck_assert_uint_le(lo, hi);
                    ck_assert_uint_le(hi, count);
                    /* ranks that agree on the low level bits share the region */
                    if (r >= (1 << level)) {
                        size_t lo2, hi2;
                        ring__rhd_region(count, r & ((1 << level) - 1), level, &lo2, &hi2);
                        ck_assert_uint_eq(lo, lo2);
                        ck_assert_uint_eq(hi, hi2);
                    } else {
                        covered += hi - lo;
                    }
                    if ((1 << level) < p) {
                        int q = r ^ (1 << level);
                        size_t plo, phi, mlo, mhi, qlo, qhi;
                        ring__rhd_region(count, q, level, &plo, &phi);
                        ck_assert_uint_eq(plo, lo);
                        ck_assert_uint_eq(phi, hi);
                        ring__rhd_region(count, r, level + 1, &mlo, &mhi);
                        ring__rhd_region(count, q, level + 1, &qlo, &qhi);
                        /* the rank whose bit is 0 takes the lower half, the partner the
                           upper one: adjacent, and together the whole region */
                        if ((r >> level) & 1) {
                            ck_assert_uint_eq(qlo, lo);
                            ck_assert_uint_eq(qhi, mlo);
                            ck_assert_uint_eq(mhi, hi);
                        } else {
                            ck_assert_uint_eq(mlo, lo);
                            ck_assert_uint_eq(mhi, qlo);
                            ck_assert_uint_eq(qhi, hi);
                        }
                        ck_assert_uint_le((hi - lo) / 2, mhi - mlo);
                        ck_assert_uint_le(mhi - mlo, (hi - lo + 1) / 2);
                    }
                }
                ck_assert_uint_eq(covered, count);
            }
        }
    }
}
END_TEST

START_TEST(broadcast_tree_reaches_everyone_once)
{
    for (int size = 1; size <= MAX_SIZE; size++) {
        for (int root = 0; root < size; root++) {
            int parent_of[MAX_SIZE], reached[MAX_SIZE] = {0};
            for (int r = 0; r < size; r++) {
                int children[32], parent;
                int n = ring__bcast_tree(r, size, root, &parent, children);
                parent_of[r] = parent;
                ck_assert_int_eq(parent < 0, r == root);
                for (int i = 0; i < n; i++) {
                    ck_assert_int_ne(children[i], root);
                    reached[children[i]]++;
                }
            }
            for (int r = 0; r < size; r++) {
                ck_assert_int_eq(reached[r], r == root ? 0 : 1);
                if (r != root) { /* the parent lists r among its children */
                    int children[32], parent, found = 0;
                    int n = ring__bcast_tree(parent_of[r], size, root, &parent, children);
                    for (int i = 0; i < n; i++)
                        found |= children[i] == r;
                    ck_assert(found);
                }
            }
        }
    }
}
END_TEST

START_TEST(modulo_is_euclidean)
{
    ck_assert_int_eq(ring__mod(-1, 5), 4);
    ck_assert_int_eq(ring__mod(-10, 5), 0);
    ck_assert_int_eq(ring__mod(7, 5), 2);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        chunks_partition_every_count,
        chunks_large_counts,
        ring_allreduce_schedule,
        ring_reducescatter_schedule,
        ring_allgather_schedule,
        recursive_doubling_pairs,
        broadcast_tree_reaches_everyone_once,
        modulo_is_euclidean,
        halving_regions_partition_every_count,
        NULL,
    };
    return unit_main("schedule", tests, 30);
}
