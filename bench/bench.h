/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench.h - what libring's benchmark programs (bench/allreduce, bench/engine, bench/torch)
 * time and summarize with: the monotonic clock in microseconds, and the median of a run's
 * samples. Header-only, so that each program stays one file plus this.
 */
#ifndef RING_BENCH_H
#define RING_BENCH_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* qsort's comparison of doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts the n (> 0) samples t in place and returns their median (of the two middle ones
 * when n is even, their mean). */
static inline double bench_median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(double), bench_cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

#endif /* RING_BENCH_H */
