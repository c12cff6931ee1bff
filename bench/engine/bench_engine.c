/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_engine - one training step's gradient allreduce through the engine: the 161
 * parameter tensors of ResNet-50 (torchvision's layout: 53 convolutions, 53 batch norms
 * with weight and bias, the classifier), each scaled to a quarter of its elements so the
 * step moves about 25 MB of float32 on a 2-core machine.
 *
 *   ringrun -np 4 bench_engine [--mode step|single|tiny|tiny-grouped|bare] [--steps N]
 *                              [--warmup N] [--json] [--label L]
 *
 * step:   submit all 161 tensors in backward order (classifier first), then wait for all;
 *         fusion and cache as the environment sets them (RING_FUSION_THRESHOLD=0 turns
 *         fusion off). Also reports the negotiation time per step on rank 0.
 * single: one allreduce of the same total bytes: the bound a fused step approaches.
 * tiny:   the same 161 names with one element each: the step is then the engine's own
 *         cost (negotiation through the cache, one fused allreduce of 644 bytes).
 * tiny-grouped: the same 161 one-element tensors as one grouped allreduce "grad" (whose
 *         members are named grad/0 .. grad/160, as in tiny), one handle to wait for.
 * bare:   one blocking allreduce of those 644 bytes: what the tiny step is held against.
 *
 * --warmup N untimed steps first (2, which fill the cache); with RING_AUTOTUNE=1, enough
 * for the search to end (run.sh gives it 60), so that the timed steps run with its result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "ring.h"

#define NT 161

static size_t sizes[NT];
/* The tensors' names, made once: a framework's gradient names are fixed strings, and
 * formatting 161 of them every step was 9% of the tiny step at np 2 (perf). */
static char tnames[NT][32];

/* torchvision resnet50: conv weights and batch-norm weight/bias, in forward order. */
static int resnet50(void)
{
    static const int blocks[4] = {3, 4, 6, 3}, planes[4] = {64, 128, 256, 512};
    int n = 0, in = 64;
#define CONV(o, i, k) (sizes[n++] = (size_t)(o) * (size_t)(i) * (size_t)(k) * (size_t)(k))
#define BN(c)         (sizes[n++] = (size_t)(c), sizes[n++] = (size_t)(c))
    CONV(64, 3, 7);
    BN(64);
    for (int l = 0; l < 4; l++) {
        for (int b = 0; b < blocks[l]; b++) {
            int p = planes[l];
            CONV(p, in, 1);
            BN(p);
            CONV(p, p, 3);
            BN(p);
            CONV(4 * p, p, 1);
            BN(4 * p);
            if (b == 0) {
                CONV(4 * p, in, 1);
                BN(4 * p);
            }
            in = 4 * p;
        }
    }
    sizes[n++] = 1000 * 2048;
    sizes[n++] = 1000;
#undef CONV
#undef BN
    for (int i = 0; i < n; i++) /* a quarter, at least one element */
        sizes[i] = sizes[i] / 4 > 0 ? sizes[i] / 4 : 1;
    return n;
}

static void die(int rc, const char *what)
{
    fprintf(stderr, "bench_engine: %s: %s (%s)\n", what, ring_strerror(rc), ring_last_error());
    exit(1);
}

int main(int argc, char **argv)
{
    const char *mode = "step", *label = NULL;
    int steps = 20, warmup = 2, json = 0, rc, rank, size, bare, grouped, n = resnet50();
    size_t total = 0;
    float *bufs[NT], *big;
    const void *gsend[NT];
    double *t;
    struct ring_engine_stats s0, s1;
    uint64_t cycles = 0, neg_us = 0, names = 0, rode = 0; /* over the timed steps only */

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc)
            mode = argv[++i];
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "--label") == 0 && i + 1 < argc)
            label = argv[++i];
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--version") == 0) {
            printf("bench_engine %s\n", RING_VERSION_STRING);
            return 0;
        } else {
            fprintf(stderr, "usage: bench_engine [--mode step|single|tiny|tiny-grouped|bare] "
                            "[--steps N] "
                            "[--warmup N] [--json] "
                            "[--label L]\n");
            return 2;
        }
    }
    grouped = strcmp(mode, "tiny-grouped") == 0;
    if (n != NT || steps < 5 || warmup < 1 ||
        (strcmp(mode, "step") != 0 && strcmp(mode, "single") != 0 && strcmp(mode, "tiny") != 0 &&
         strcmp(mode, "bare") != 0 && !grouped)) {
        fprintf(stderr, "bench_engine: bad mode, fewer than 5 steps or no warm-up step\n");
        return 2;
    }
    if ((rc = ring_init()) != 0)
        die(rc, "ring_init");
    rank = ring_rank();
    size = ring_size();
    bare = strcmp(mode, "bare") == 0;
    if (strcmp(mode, "tiny") == 0 || bare || grouped) {
        for (int i = 0; i < NT; i++)
            sizes[i] = 1;
    }
    for (int i = 0; i < NT; i++) {
        snprintf(tnames[i], sizeof(tnames[i]), "grad/%d", i);
        gsend[i] = RING_IN_PLACE;
        total += sizes[i];
        if ((bufs[i] = malloc(sizes[i] * sizeof(float))) == NULL)
            die(RING_ENOMEM, "malloc");
        for (size_t k = 0; k < sizes[i]; k++)
            bufs[i][k] = 1.0f;
    }
    big = malloc(total * sizeof(float));
    t = malloc((size_t)steps * sizeof(double));
    if (big == NULL || t == NULL)
        die(RING_ENOMEM, "malloc");
    for (size_t k = 0; k < total; k++)
        big[k] = 1.0f;

    for (int s = -warmup; s < steps; s++) { /* warm-up steps fill the cache */
        double t0;
        if ((rc = ring_barrier()) != 0)
            die(rc, "barrier");
        if ((rc = ring_engine_stats(&s0)) != 0)
            die(rc, "stats");
        t0 = bench_now_us();
        if (strcmp(mode, "single") == 0 || bare) {
            if ((rc = ring_allreduce(RING_IN_PLACE, big, total, RING_FLOAT32, RING_SUM)) != 0)
                die(rc, "allreduce");
        } else if (grouped) {
            ring_handle_t *h;
            if ((rc = ring_grouped_allreduce_async("grad", NT, gsend, (void *const *)bufs, sizes,
                                                   RING_FLOAT32, RING_AVERAGE, RING_GLOBAL, &h)) !=
                    0 ||
                (rc = ring_wait(h)) != 0)
                die(rc, "grouped allreduce");
        } else {
            ring_handle_t *h[NT];
            for (int i = NT - 1; i >= 0; i--) { /* backward: the classifier's gradient first */
                const char *name = tnames[i];
                rc = ring_allreduce_async(name, RING_IN_PLACE, bufs[i], sizes[i], RING_FLOAT32,
                                          RING_AVERAGE, 1.0, 1.0, RING_GLOBAL, &h[i]);
                if (rc != 0)
                    die(rc, name);
            }
            for (int i = NT - 1; i >= 0; i--) {
                if ((rc = ring_wait(h[i])) != 0)
                    die(rc, "wait");
            }
        }
        if (s >= 0) {
            t[s] = bench_now_us() - t0;
            if ((rc = ring_engine_stats(&s1)) != 0)
                die(rc, "stats");
            cycles += s1.cycles - s0.cycles;
            neg_us += s1.negotiation_us - s0.negotiation_us;
            names += s1.coordinator_names - s0.coordinator_names;
            rode += s1.fast_path - s0.fast_path;
            /* Named, so that it does not evict a blocking step's entry from the response
             * cache (blocking calls share one name per kind). */
            ring_handle_t *h;
            if ((rc = ring_allreduce_async("bench/time", RING_IN_PLACE, &t[s], 1, RING_FLOAT64,
                                           RING_MAX, 1.0, 1.0, RING_GLOBAL, &h)) != 0 ||
                (rc = ring_wait(h)) != 0)
                die(rc, "max");
        }
    }
    if (rank == 0) {
        double med;
        /* Per step, between the barrier and the last wait: not the barrier's own cycle, nor
         * the timing allreduce's. */
        double neg = (double)neg_us / steps, cyc = (double)cycles / steps;
        double nam = (double)names / steps, ride = (double)rode / steps;
        const char *impl = label                         ? label
                           : strcmp(mode, "single") == 0 ? "single-allreduce"
                           : strcmp(mode, "tiny") == 0   ? "engine-tiny"
                           : grouped                     ? "engine-tiny-grouped"
                           : bare                        ? "bare-allreduce"
                                                         : "engine";
        med = bench_median(t, steps);
        if (json)
            printf("{\"bench\":\"engine\",\"impl\":\"%s\",\"np\":%d,\"tensors\":%d,\"bytes\":%zu,"
                   "\"steps\":%d,\"median_us\":%.1f,\"negotiation_us_per_step\":%.1f,"
                   "\"cycles_per_step\":%.2f,\"coordinator_names_per_step\":%.1f,"
                   "\"control_round_tensors_per_step\":%.1f}\n",
                   impl, size, strcmp(mode, "single") == 0 || bare ? 1 : NT, total * sizeof(float),
                   steps, med, neg, cyc, nam, ride);
        else
            printf("%-18s np %d: %3d tensors, %zu bytes, median step %.1f us, negotiation %.1f "
                   "us/step over %.2f cycles/step, %.1f names/step to the coordinator, %.1f "
                   "tensors/step done in the control round\n",
                   impl, size, strcmp(mode, "single") == 0 || bare ? 1 : NT, total * sizeof(float),
                   med, neg, cyc, nam, ride);
    }
    for (int i = 0; i < NT; i++)
        free(bufs[i]);
    free(big);
    free(t);
    ring_finalize();
    return 0;
}
