/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_call - the median time of one blocking 4 KiB float32 sum allreduce, in place, from
 * C: the loop bench_torch.py --impl call runs through ringmaster.torch, so that the ratio
 * of the two is the Python binding's overhead.
 *
 *   ringrun -np 2 bench_call [--iters N] [--warmup N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "ring.h"

int main(int argc, char **argv)
{
    int iters = 2000, warmup = 200, rc;
    float buf[1024];
    double *t;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "--version") == 0) {
            printf("bench_call (Ringmaster) %s, libring %s\n", RING_VERSION_STRING, ring_version());
            return 0;
        } else {
            fprintf(stderr, "usage: bench_call [--iters N] [--warmup N] [--version]\n");
            return 2;
        }
    }
    if (iters < 1 || warmup < 0) {
        fprintf(stderr, "bench_call: --iters must be at least 1 and --warmup at least 0\n");
        return 2;
    }
    t = malloc((size_t)iters * sizeof(double));
    if (t == NULL || (rc = ring_init()) != 0) {
        fprintf(stderr, "bench_call: cannot start: %s\n", t ? ring_last_error() : "out of memory");
        return 1;
    }
    for (int i = 0; i < 1024; i++)
        buf[i] = 1.0f;
    for (int i = 0; i < warmup + iters; i++) {
        double t0 = bench_now_us();
        if ((rc = ring_allreduce(RING_IN_PLACE, buf, 1024, RING_FLOAT32, RING_SUM)) != 0) {
            fprintf(stderr, "bench_call: allreduce: %s (%s)\n", ring_strerror(rc),
                    ring_last_error());
            return 1;
        }
        if (i >= warmup)
            t[i - warmup] = bench_now_us() - t0;
    }
    ring_barrier();
    qsort(t, (size_t)iters, sizeof(double), bench_cmp_double);
    if (ring_rank() == 0)
        printf("{\"bench\":\"torch-call\",\"impl\":\"c\",\"np\":%d,\"bytes\":4096,\"iters\":%d,"
               "\"median_us\":%.2f}\n",
               ring_size(), iters, t[iters / 2]);
    free(t);
    ring_finalize();
    return 0;
}
