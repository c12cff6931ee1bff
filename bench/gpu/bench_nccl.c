/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_nccl - float32 sum allreduce of GPU buffers: libring (ring_allreduce on device
 * pointers, through the engine and the NCCL backend) against ncclAllReduce called directly
 * on a communicator of the same ranks, in the same run, on the same buffers.
 *
 * Both are out of place and blocking: libring returns once its stream has drained, and the
 * direct call is followed by cudaStreamSynchronize. Each size runs a few warm-up
 * iterations, then at least --iters timed ones; reported: the median (the slowest rank's),
 * algbw = bytes / time and busbw = algbw * 2(n-1)/n (the nccl-tests convention: 0 at np 1,
 * where NCCL only copies), and the ratio libring / NCCL of the medians' bandwidth.
 *
 *   ringrun -np N bench_nccl [--json] [--min-bytes B] [--max-bytes B] [--iters N]
 *   (one GPU per rank: the local rank modulo the visible GPUs)
 *
 * Exits 77 when there is no CUDA device.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ring.h"

static int rank, size;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_nccl: rank %d: %s: %s\n", rank, what, why);
    exit(1);
}

/* The median of n times in us, as the slowest rank saw it. */
static double median_max(double *t, int n)
{
    double m;
    qsort(t, (size_t)n, sizeof(double), cmp);
    m = t[n / 2];
    if (ring_allreduce(RING_IN_PLACE, &m, 1, RING_FLOAT64, RING_MAX) != 0)
        die("ring_allreduce of the times", ring_last_error());
    return m;
}

static void report(int json, const char *impl, size_t bytes, int iters, double us, double ratio)
{
    double algbw = (double)bytes / us / 1e3, busbw = algbw * 2.0 * (size - 1) / size;

    if (rank != 0)
        return;
    if (json) {
        printf("{\"bench\":\"gpu_allreduce\",\"impl\":\"%s\",\"np\":%d,\"bytes\":%zu,"
               "\"iters\":%d,\"median_us\":%.1f,\"algbw_gbs\":%.3f,\"busbw_gbs\":%.3f",
               impl, size, bytes, iters, us, algbw, busbw);
        if (ratio > 0)
            printf(",\"ratio_vs_nccl\":%.3f", ratio);
        printf("}\n");
    } else {
        printf("%-13s %4d %12zu %6d %12.1f %10.2f %10.2f", impl, size, bytes, iters, us, algbw,
               busbw);
        if (ratio > 0)
            printf(" %8.3f", ratio);
        printf("\n");
    }
}

int main(int argc, char **argv)
{
    size_t min_bytes = 4096, max_bytes = (size_t)256 << 20;
    int json = 0, min_iters = 20, ndev = 0, rc;
    ncclUniqueId id;
    ncclComm_t comm;
    cudaStream_t stream;
    cudaError_t e;
    void *send, *recv;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--min-bytes") == 0 && i + 1 < argc)
            min_bytes = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc)
            max_bytes = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            min_iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--version") == 0) {
            printf("bench_nccl %s\n", ring_version());
            return 0;
        } else {
            fprintf(stderr, "usage: bench_nccl [--json] [--min-bytes B] [--max-bytes B] "
                            "[--iters N] [--version]\n");
            return 2;
        }
    }
    if (min_iters < 1 || min_bytes < 4 || max_bytes < min_bytes) {
        fprintf(stderr, "bench_nccl: need --iters >= 1 and 4 <= --min-bytes <= --max-bytes\n");
        return 2;
    }
    if ((e = cudaGetDeviceCount(&ndev)) != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device here (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    if ((rc = ring_init()) != 0)
        die("ring_init", ring_last_error());
    rank = ring_rank();
    size = ring_size();
    if ((e = cudaSetDevice(ring_local_rank() % ndev)) != cudaSuccess)
        die("cudaSetDevice", cudaGetErrorString(e));

    /* NCCL's own communicator for the direct calls, its id carried by libring. */
    if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
        die("ncclGetUniqueId", "failed");
    if (ring_broadcast(&id, sizeof(id), RING_UINT8, 0) != 0)
        die("ring_broadcast of the NCCL id", ring_last_error());
    if (ncclCommInitRank(&comm, size, id, rank) != ncclSuccess)
        die("ncclCommInitRank", "failed");
    if ((e = cudaStreamCreate(&stream)) != cudaSuccess)
        die("cudaStreamCreate", cudaGetErrorString(e));
    if ((e = cudaMalloc(&send, max_bytes)) != cudaSuccess ||
        (e = cudaMalloc(&recv, max_bytes)) != cudaSuccess)
        die("cudaMalloc", cudaGetErrorString(e));
    cudaMemset(send, 0, max_bytes);
    cudaDeviceSynchronize();

    if (rank == 0 && !json)
        printf("%-13s %4s %12s %6s %12s %10s %10s %8s\n", "impl", "np", "bytes", "iters",
               "median_us", "algbw_GB/s", "busbw_GB/s", "vs_nccl");
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
        size_t count = bytes / sizeof(float);
        /* enough iterations for a stable median, fewer for the largest sizes */
        int iters = bytes >= ((size_t)64 << 20) ? min_iters : min_iters * 3;
        double *t = malloc((size_t)iters * sizeof(double)), nccl_us, ring_us;

        for (int i = -3; i < iters; i++) {
            double t0;
            ring_barrier();
            t0 = now_us();
            if (ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream) !=
                    ncclSuccess ||
                cudaStreamSynchronize(stream) != cudaSuccess)
                die("ncclAllReduce", "failed");
            if (i >= 0)
                t[i] = now_us() - t0;
        }
        nccl_us = median_max(t, iters);
        for (int i = -3; i < iters; i++) {
            double t0;
            ring_barrier();
            t0 = now_us();
            if ((rc = ring_allreduce(send, recv, count, RING_FLOAT32, RING_SUM)) != 0)
                die("ring_allreduce", ring_last_error());
            if (i >= 0)
                t[i] = now_us() - t0;
        }
        ring_us = median_max(t, iters);
        report(json, "nccl", bytes, iters, nccl_us, 0);
        report(json, "libring-nccl", bytes, iters, ring_us, nccl_us / ring_us);
        free(t);
    }
    cudaFree(send);
    cudaFree(recv);
    ncclCommDestroy(comm);
    ring_finalize();
    return 0;
}
