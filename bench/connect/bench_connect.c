/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_connect - how long a job takes to connect, and a small allreduce after.
 *
 *   ringrun -np 8 bench_connect [--impl NAME] [--iters N]
 *
 * Each rank takes the time just before ring_init and again when its first barrier returns
 * (every pair connected and usable); all ranks run on one host, so the monotonic clocks
 * agree. set-up is the time from the last rank's ring_init to the last rank ready: the
 * launch's own skew (ranks are forked one after the other) is left out. Then a float32 sum
 * allreduce of 4 KiB, in batches of 100 calls after a barrier, each batch timed by its
 * slowest rank: the median batch, per call. Rank 0 prints one JSON row.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ring.h"

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "bench_connect: %s: %s (%s)\n", what, ring_strerror(rc), ring_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    const char *impl = "libring", *transport = getenv("RING_TRANSPORT");
    int iters = 30, rc, size, rank;
    int64_t t[2], *all;
    double *batch, x[1024];

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--impl") == 0 && i + 1 < argc)
            impl = argv[++i];
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else
            return fprintf(stderr, "usage: bench_connect [--impl NAME] [--iters N]\n"), 64;
    }
    t[0] = now_us();
    if ((rc = ring_init()) != 0)
        return fail("ring_init", rc);
    if ((rc = ring_barrier()) != 0)
        return fail("barrier", rc);
    t[1] = now_us();
    size = ring_size();
    rank = ring_rank();
    all = malloc(2 * (size_t)size * sizeof(*all));
    batch = malloc((size_t)(iters > 0 ? iters : 1) * sizeof(*batch));
    if (all == NULL || batch == NULL)
        return fprintf(stderr, "bench_connect: out of memory\n"), 1;
    if ((rc = ring_allgather(t, 2, all, RING_INT64)) != 0)
        return fail("allgather", rc);
    for (int i = 0; i < 1024; i++)
        x[i] = 1;
    for (int b = 0; b < iters; b++) {
        int64_t t0;
        double us;
        if ((rc = ring_barrier()) != 0)
            return fail("barrier", rc);
        t0 = now_us();
        for (int k = 0; k < 100; k++) {
            if ((rc = ring_allreduce(RING_IN_PLACE, x, 1024, RING_FLOAT32, RING_SUM)) != 0)
                return fail("allreduce", rc);
        }
        us = (double)(now_us() - t0) / 100;
        if ((rc = ring_allreduce(RING_IN_PLACE, &us, 1, RING_FLOAT64, RING_MAX)) != 0)
            return fail("allreduce", rc);
        batch[b] = us;
    }
    if (rank == 0) {
        int64_t last_start = 0, last_ready = 0;
        for (int r = 0; r < size; r++) {
            if (all[2 * r] > last_start)
                last_start = all[2 * r];
            if (all[2 * r + 1] > last_ready)
                last_ready = all[2 * r + 1];
        }
        qsort(batch, (size_t)iters, sizeof(*batch), cmp_double);
        printf("{\"bench\":\"connect\",\"impl\":\"%s\",\"transport\":\"%s\",\"np\":%d,"
               "\"setup_us\":%lld,\"allreduce_4k_us\":%.2f}\n",
               impl, transport != NULL && *transport ? transport : "auto", size,
               (long long)(last_ready - last_start), iters > 0 ? batch[iters / 2] : 0.0);
    }
    free(all);
    free(batch);
    ring_finalize();
    return 0;
}
