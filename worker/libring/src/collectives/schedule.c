/* SPDX-License-Identifier: Apache-2.0 */
/*
 * schedule.c - which chunk moves where, as pure functions of (rank, size, step).
 *
 * Ring allreduce of 3 ranks, chunks A B C (rank r starts by sending chunk r):
 *
 *                  reduce-scatter            allgather
 *   item:          0          1              2            3
 *   rank 0:  send  A  recv C  send C recv B  send B recv A  send A recv C
 *   rank 1:  send B  recv A   send A recv C  send C recv B  send B recv A
 *   rank 2:  send C  recv B   send B recv A  send A recv C  send C recv B
 *
 * After item 1 rank 0 holds the full sum of B, rank 1 of C and rank 2 of A (chunk r+1);
 * the allgather items then pass the finished chunks around. What a rank receives at item j
 * it sends at item j+1, so the send of item j+1 can start as soon as the first segment of
 * item j has been reduced: the whole operation is one pipelined stream per direction.
 */
#include "collectives/collectives.h"

void ring__chunk(size_t count, int size, int i, size_t *offset, size_t *len)
{
    size_t n = (size_t)size;
    size_t base = count / n;
    size_t extra = count % n;
    size_t k = (size_t)i;

    *len = base + (k < extra ? 1 : 0);
    *offset = k * base + (k < extra ? k : extra);
}

int ring__ring_send_chunk(int rank, int size, int item, int first_chunk)
{
    return ring__mod(rank - item + first_chunk, size);
}

int ring__ring_recv_chunk(int rank, int size, int item, int first_chunk)
{
    return ring__mod(rank - item - 1 + first_chunk, size);
}

int ring__pow2_floor(int n)
{
    int p = 1;
    while (p <= n / 2)
        p *= 2;
    return p;
}

int ring__rd_partner(int rank, int round)
{
    return rank ^ (1 << round);
}

int ring__bcast_tree(int rank, int size, int root, int *parent, int children[32])
{
    int v = ring__mod(rank - root, size);
    int low; /* lowest set bit of v; the subtree below v spans the bits under it */
    int n = 0;

    if (v == 0) {
        *parent = -1;
        low = 1;
        while (low < size)
            low <<= 1;
    } else {
        low = v & -v;
        *parent = (v - low + root) % size;
    }
    /* Largest subtree first, so the longest chain starts earliest. */
    for (int bit = low >> 1; bit > 0; bit >>= 1) {
        if (v + bit < size)
            children[n++] = (v + bit + root) % size;
    }
    return n;
}
