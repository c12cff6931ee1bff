/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_allreduce - times float32 sum allreduce from 4 KiB to 256 MiB.
 *
 * Built three times from this file: against libring (run it under ringrun), with BENCH_MPI
 * against MPI_Allreduce (run it under mpirun), and with BENCH_GLOO against gloo::allreduce
 * (gloo_peer.cc), so that every side is timed by the very same loop. Each iteration starts after a
 * barrier; its time is the slowest rank's. Reported: the median over the iterations, algbw = bytes
 * / time and busbw = algbw * 2(n-1)/n, the nccl-tests convention that makes allreduce numbers
 * comparable to link bandwidth.
 *
 * With --batch N an iteration times N calls back to back after its barrier and counts their
 * mean, as the OSU micro-benchmarks do: the ranks' skew leaving the barrier then weighs 1/N.
 * By default (1) every call is timed alone, skew included.
 *
 *   ringrun -np 4 bench_allreduce [--json] [--min-bytes B] [--max-bytes B] [--iters N]
 *                                 [--budget-ms MS] [--batch N] [--impl NAME]
 *
 * Each size runs about 1 GiB of traffic, at least --iters (5) and at most 1000 iterations,
 * and stops early once the timed iterations passed --budget-ms (1000), so that a slow peer
 * at small sizes does not take minutes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

#if defined(BENCH_MPI)
#include <mpi.h>
#define IMPL_DEFAULT "openmpi"
#elif defined(BENCH_GLOO)
#include "gloo_peer.h"
#define IMPL_DEFAULT "gloo-tcp"
#else
#include "ring.h"
#define IMPL_DEFAULT "libring"
#endif

static int rank, size;

static int bench_init(int *argc, char ***argv)
{
#if defined(BENCH_MPI)
    if (MPI_Init(argc, argv) != MPI_SUCCESS)
        return -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#elif defined(BENCH_GLOO)
    (void)argc;
    (void)argv;
    if (gloo_peer_init(&rank, &size) < 0)
        return -1;
#else
    int rc = ring_init();
    if (rc != 0) {
        fprintf(stderr, "ring_init: %s (%s)\n", ring_strerror(rc), ring_last_error());
        return -1;
    }
    rank = ring_rank();
    size = ring_size();
#endif
    return 0;
}

static void bench_finish(void)
{
#if defined(BENCH_MPI)
    MPI_Finalize();
#elif defined(BENCH_GLOO)
    gloo_peer_finish();
#else
    ring_finalize();
#endif
}

static int allreduce(float *in, float *out, size_t count)
{
#if defined(BENCH_MPI)
    return MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0
               : -1;
#elif defined(BENCH_GLOO)
    return gloo_peer_allreduce(in, out, count);
#else
    return ring_allreduce(in, out, count, RING_FLOAT32, RING_SUM);
#endif
}

static int max_double(double *v)
{
#if defined(BENCH_MPI)
    return MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0
               : -1;
#elif defined(BENCH_GLOO)
    return gloo_peer_max(v);
#else
    /* A named tensor, not a blocking call: blocking calls share one name per kind, so a
     * blocking timing reduction would evict the timed call's entry from the response cache
     * and every timed call would be negotiated afresh (README: RING_FAST_PATH). */
    ring_handle_t *h;
    int rc = ring_allreduce_async("bench/time", RING_IN_PLACE, v, 1, RING_FLOAT64, RING_MAX, 1.0,
                                  1.0, RING_GLOBAL, &h);
    return rc != 0 ? rc : ring_wait(h);
#endif
}

static int barrier(void)
{
#if defined(BENCH_MPI)
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
#elif defined(BENCH_GLOO)
    return gloo_peer_barrier();
#else
    return ring_barrier();
#endif
}

int main(int argc, char **argv)
{
    size_t min_bytes = 4096, max_bytes = (size_t)256 << 20;
    int json = 0, min_iters = 5, batch = 1, rc = 0;
    double budget_us = 1e6;
    const char *impl = IMPL_DEFAULT;
    float *in, *out;
    double *times;

    /* Before the set-up, which needs a launcher (and for Gloo, a store). */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            printf("bench_allreduce %s (%s)\n", RING_VERSION_STRING, IMPL_DEFAULT);
            return 0;
        }
    }
    if (bench_init(&argc, &argv) < 0)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--min-bytes") == 0 && i + 1 < argc)
            min_bytes = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc)
            max_bytes = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            min_iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--budget-ms") == 0 && i + 1 < argc)
            budget_us = atof(argv[++i]) * 1e3;
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (strcmp(argv[i], "--impl") == 0 && i + 1 < argc)
            impl = argv[++i];
        else {
            if (rank == 0)
                fprintf(stderr, "usage: bench_allreduce [--json] [--min-bytes B] [--max-bytes B] "
                                "[--iters N] [--budget-ms MS] [--batch N] [--impl NAME]\n");
            bench_finish();
            return 2;
        }
    }
    if (min_iters < 5)
        min_iters = 5; /* a median needs a few samples */
    if (batch < 1 || batch > 1000) {
        if (rank == 0)
            fprintf(stderr, "bench_allreduce: --batch takes 1 to 1000 calls\n");
        bench_finish();
        return 2;
    }
    in = malloc(max_bytes);
    out = malloc(max_bytes);
    times = malloc(sizeof(double) * 1000);
    if (in == NULL || out == NULL || times == NULL) {
        fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes\n", rank, max_bytes);
        return 1;
    }
    for (size_t i = 0; i < max_bytes / sizeof(float); i++)
        in[i] = 1.0f;
    if (rank == 0 && !json)
        printf("%-12s %4s %12s %6s %12s %10s %10s\n", "impl", "np", "bytes", "iters", "median_us",
               "algbw_GB/s", "busbw_GB/s");

    for (size_t bytes = min_bytes; bytes <= max_bytes && rc == 0; bytes *= 4) {
        size_t count = bytes / sizeof(float);
        /* About 1 GiB of traffic per size, within [min_iters, 1000] iterations. */
        int iters = (int)((size_t)1 << 30) / (int)(bytes > 1 ? bytes : 1);
        double median, algbw, busbw, spent = 0;
        if (iters < min_iters)
            iters = min_iters;
        if (iters > 1000)
            iters = 1000;
        for (int w = 0; w < 2 && rc == 0; w++) /* warm-up: connections, page faults */
            rc = allreduce(in, out, count);
        for (int it = 0; it < iters && rc == 0; it++) {
            double t0;
            rc = barrier();
            t0 = bench_now_us();
            for (int b = 0; b < batch && rc == 0; b++)
                rc = allreduce(in, out, count);
            times[it] = (bench_now_us() - t0) / batch;
            rc = rc ? rc : max_double(&times[it]);
            /* Every rank holds the same (maximum) times, so all stop at the same iteration. */
            spent += times[it] * batch;
            if (rc == 0 && it + 1 >= min_iters && spent > budget_us) {
                iters = it + 1;
                break;
            }
        }
        if (rc != 0)
            break;
        if (out[0] != (float)size || out[count - 1] != (float)size) {
            fprintf(stderr, "rank %d: wrong result %g at %zu bytes, want %d\n", rank, out[0], bytes,
                    size);
            rc = 1;
            break;
        }
        median = bench_median(times, iters);
        algbw = (double)bytes / median / 1e3; /* bytes/us = MB/s; /1e3 = GB/s */
        busbw = algbw * 2.0 * (size - 1) / size;
        if (rank != 0)
            continue;
        if (json)
            printf("{\"bench\":\"allreduce\",\"impl\":\"%s\",\"np\":%d,\"bytes\":%zu,"
                   "\"iters\":%d,\"batch\":%d,\"median_us\":%.1f,\"algbw_gbs\":%.4f,"
                   "\"busbw_gbs\":%.4f}\n",
                   impl, size, bytes, iters, batch, median, algbw, busbw);
        else
            printf("%-12s %4d %12zu %6d %12.1f %10.3f %10.3f\n", impl, size, bytes, iters, median,
                   algbw, busbw);
        fflush(stdout);
    }
    if (rc != 0)
        fprintf(stderr, "rank %d: allreduce failed\n", rank);
    free(in);
    free(out);
    free(times);
    bench_finish();
    return rc == 0 ? 0 : 1;
}
