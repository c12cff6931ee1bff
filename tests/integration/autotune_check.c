/* SPDX-License-Identifier: Apache-2.0 */
/*
 * autotune_check STEPS - a training loop for RING_AUTOTUNE, under ringrun: each step
 * allreduces 12 gradients of 512 B to 1 MiB (about 2 MiB in all, so that the fusion
 * thresholds the tuner tries batch them differently), submitted at once in an order that
 * differs between ranks, then one small blocking allreduce (the fast path). Every result is
 * checked, so a step run with parameters that differ between ranks could not go unnoticed.
 * The tuner's choices are checked by autotune.sh, from the ranks' logs and the timeline.
 *
 * Prints "autotune_check: ok" on rank 0 and exits 0 when every sum was right.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank_check.h"
#include "ring.h"

#define NT 12

static int rank, size;

int main(int argc, char **argv)
{
    long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
    float *g[NT], small[16];
    size_t n[NT];
    int rc;

    if (steps < 1) {
        fprintf(stderr, "usage: autotune_check STEPS\n");
        return 2;
    }
    if ((rc = ring_init()) != 0) {
        fprintf(stderr, "ring_init: %s (%s)\n", ring_strerror(rc), ring_last_error());
        return 1;
    }
    rank = ring_rank();
    size = ring_size();
    for (int t = 0; t < NT; t++) {
        n[t] = (size_t)128 << t; /* 128 to 262144 floats */
        g[t] = malloc(n[t] * sizeof(float));
        CHECK(g[t] != NULL, "out of memory");
    }
    for (long step = 0; step < steps; step++) {
        ring_handle_t *h[NT];
        float want = 0, want_small = 0;
        for (int r = 0; r < size; r++)
            want += (float)(r + 1 + step % 5);
        for (int k = 0; k < NT; k++) {
            int t = (k * 5 + rank * 7 + (int)step) % NT; /* any order */
            char name[32];
            for (size_t i = 0; i < n[t]; i++)
                g[t][i] = (float)(rank + 1 + step % 5);
            snprintf(name, sizeof(name), "grad/%d", t);
            OK(ring_allreduce_async(name, RING_IN_PLACE, g[t], n[t], RING_FLOAT32, RING_SUM, 1, 1,
                                    0, &h[t]),
               name);
        }
        for (int t = 0; t < NT; t++) {
            OK(ring_wait(h[t]), "wait");
            CHECK(g[t][0] == want && g[t][n[t] - 1] == want && g[t][n[t] / 2] == want,
                  "step %ld grad/%d: %g, %g, %g, want %g", step, t, g[t][0], g[t][n[t] / 2],
                  g[t][n[t] - 1], want);
        }
        for (int i = 0; i < 16; i++)
            small[i] = (float)(rank * 16 + i);
        for (int r = 0; r < size; r++)
            want_small += (float)(r * 16);
        OK(ring_allreduce(RING_IN_PLACE, small, 16, RING_FLOAT32, RING_SUM), "small");
        CHECK(small[0] == want_small && small[15] == want_small + 15 * (float)size,
              "step %ld small: %g, %g", step, small[0], small[15]);
    }
    for (int t = 0; t < NT; t++)
        free(g[t]);
    OK(ring_barrier(), "final barrier");
    if (rank == 0)
        printf("autotune_check: ok\n");
    fflush(stdout);
    ring_finalize();
    return 0;
}
