/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_check - drives libring's engine through one scenario per run, under ringrun:
 *
 *   order            100 tensors of mixed sizes and dtypes, submitted in a different random
 *                    order on every rank, all correct
 *   mismatch KIND    the last rank disagrees (dtype, op, count, root, scale, type, group,
 *                    duplicate): every rank must get the error, naming the tensor, within
 *                    2 s. (Names are per process set, so a rank using another set for a
 *                    name submits a different tensor: the stall inspector reports it.)
 *   stall            rank 1 submits a tensor 3 s late (run with RING_STALL_CHECK_SECONDS=1)
 *   stall-shutdown   rank 1 never submits (RING_STALL_SHUTDOWN_SECONDS=2): all get ESTALL
 *   join             rank r runs 2r+1 steps, then joins; sums include only working ranks
 *   psets            two disjoint sets and an overlapping one used at once
 *   timeline         named tensors, with RING_TIMELINE set by the caller
 *   cache            30 steps of the same 20 tensors: after warm-up rank 0's coordinator
 *                    must receive no names
 *   grouped          grouped allreduce, submitted in different orders around other tensors
 *   grouped-big      cached grouped allreduces larger than the control round's attachment
 *                    beside a small one and a single tensor of another name, average and
 *                    sum, on a process set too; one step where the last rank changes a
 *                    member's count (every rank fails that group, naming the member; the
 *                    rest of the step is right); then rank r joins after 4 + r steps and
 *                    the others go on (neutral contributions, averages over working ranks)
 *   blocking         repeated blocking calls run on the cache (no names to the coordinator);
 *                    changed arguments are negotiated again; a blocking count mismatch
 *                    fails on every rank; two threads make blocking calls of different
 *                    kinds at once, interleaved differently on each rank
 *   fast             blocking small allreduces take the fast path (the data rides in the
 *                    control round; run with a long RING_FAST_GRACE_US so that every rank
 *                    meets there): most complete that way, with the right sums, averages,
 *                    scales, minima and maxima; a count mismatch on it fails on every rank
 *                    with the usual message, and the engine goes on afterwards
 *   barrier          blocking barriers take the fast path too, mixed with named tensors on
 *                    the engine's path and fast allreduces: no rank leaves one before every
 *                    rank entered it (one rank enters late in turn); a tensor named like
 *                    the blocking barrier but of another type fails on every rank with
 *                    the usual mismatch message, and barriers go on afterwards
 *
 * Prints "engine_check MODE: ok" on rank 0 and exits 0 when the scenario held.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine_check.h"
#include "rank_check.h"
#include "ring.h"

int rank, size;

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* ---- order ---- */

static void mode_order(void)
{
    enum { N = 100 };
    static const ring_dtype_t dts[] = {RING_INT32,   RING_INT64,   RING_FLOAT32,
                                       RING_FLOAT64, RING_FLOAT16, RING_UINT8};
    void *buf[N];
    size_t count[N];
    ring_dtype_t dt[N];
    ring_handle_t *h[N];
    int perm[N];
    unsigned seed = 7;

    for (int i = 0; i < N; i++) {
        /* Same shapes everywhere: seeded identically on every rank. */
        count[i] = 1 + rnd(&seed) % (i % 10 == 0 ? 300000 : 2000);
        dt[i] = dts[rnd(&seed) % 6];
        buf[i] = malloc(count[i] * ring_dtype_size(dt[i]));
        for (size_t k = 0; k < count[i]; k++) {
            double v = (double)((k + (size_t)i) % 3); /* small: exact in every dtype */
            switch (dt[i]) {
            case RING_INT32:
                ((int32_t *)buf[i])[k] = (int32_t)v;
                break;
            case RING_INT64:
                ((int64_t *)buf[i])[k] = (int64_t)v;
                break;
            case RING_FLOAT32:
                ((float *)buf[i])[k] = (float)v;
                break;
            case RING_FLOAT64:
                ((double *)buf[i])[k] = v;
                break;
            case RING_UINT8:
                ((uint8_t *)buf[i])[k] = (uint8_t)v;
                break;
            default:
                ((uint16_t *)buf[i])[k] = (uint16_t)(v == 0 ? 0 : v == 1 ? 0x3c00 : 0x4000);
            }
        }
        perm[i] = i;
    }
    /* A different order on every rank. */
    seed = 1000u + (unsigned)rank * 7919u;
    for (int i = N - 1; i > 0; i--) {
        int j = (int)(rnd(&seed) % (unsigned)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int k = 0; k < N; k++) {
        int i = perm[k];
        char name[32];
        snprintf(name, sizeof(name), "t%d", i);
        OK(ring_allreduce_async(name, RING_IN_PLACE, buf[i], count[i], dt[i], RING_SUM, 1.0, 1.0,
                                RING_GLOBAL, &h[i]),
           name);
        if (k % 17 == 0)
            usleep(1000); /* spread submissions over several cycles */
    }
    for (int i = 0; i < N; i++) {
        OK(ring_wait(h[i]), "wait");
        for (size_t k = 0; k < count[i]; k++) {
            double v = (double)((k + (size_t)i) % 3) * size, got;
            switch (dt[i]) {
            case RING_INT32:
                got = ((int32_t *)buf[i])[k];
                break;
            case RING_INT64:
                got = (double)((int64_t *)buf[i])[k];
                break;
            case RING_FLOAT32:
                got = ((float *)buf[i])[k];
                break;
            case RING_FLOAT64:
                got = ((double *)buf[i])[k];
                break;
            case RING_UINT8:
                got = ((uint8_t *)buf[i])[k];
                break;
            default: {
                uint16_t x = ((uint16_t *)buf[i])[k];
                got = x == 0 ? 0 : ldexp(1.0 + (x & 0x3ff) / 1024.0, ((x >> 10) & 0x1f) - 15);
            }
            }
            CHECK(got == v, "tensor t%d (%s) element %zu: %g, want %g", i, ring_dtype_name(dt[i]),
                  k, got, v);
        }
        free(buf[i]);
    }
}

/* ---- mismatch ---- */

static void mode_mismatch(const char *kind)
{
    int odd = rank == size - 1;
    float f[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g[8];
    double d[8] = {0};
    ring_handle_t *h = NULL;
    double t0;
    int rc;
    const char *name = "grad/w1";

    t0 = now_s();
    if (strcmp(kind, "dtype") == 0)
        rc = odd ? ring_allreduce_async(name, d, d, 8, RING_FLOAT64, RING_SUM, 1, 1, 0, &h)
                 : ring_allreduce_async(name, f, g, 8, RING_FLOAT32, RING_SUM, 1, 1, 0, &h);
    else if (strcmp(kind, "op") == 0)
        rc = ring_allreduce_async(name, f, g, 8, RING_FLOAT32, odd ? RING_MAX : RING_SUM, 1, 1, 0,
                                  &h);
    else if (strcmp(kind, "count") == 0)
        rc = ring_allreduce_async(name, f, g, odd ? 7 : 8, RING_FLOAT32, RING_SUM, 1, 1, 0, &h);
    else if (strcmp(kind, "scale") == 0)
        rc = ring_allreduce_async(name, f, g, 8, RING_FLOAT32, RING_SUM, odd ? 0.5 : 1, 1, 0, &h);
    else if (strcmp(kind, "root") == 0)
        rc = ring_broadcast_async(name, f, 8, RING_FLOAT32, odd ? 1 : 0, 0, &h);
    else if (strcmp(kind, "type") == 0)
        rc = odd ? ring_broadcast_async(name, f, 8, RING_FLOAT32, 0, 0, &h)
                 : ring_allreduce_async(name, f, g, 8, RING_FLOAT32, RING_SUM, 1, 1, 0, &h);
    else if (strcmp(kind, "group") == 0) {
        const void *sb[2] = {f, f + 4};
        void *rb[2] = {g, g + 4};
        size_t c[2] = {4, 4};
        if (odd)
            rc = ring_allreduce_async("grad/0", f, g, 4, RING_FLOAT32, RING_SUM, 1, 1, 0, &h);
        else
            rc = ring_grouped_allreduce_async("grad", 2, sb, rb, c, RING_FLOAT32, RING_SUM, 0, &h);
        name = "grad/0";
    } else if (strcmp(kind, "duplicate") == 0) {
        ring_handle_t *h2;
        /* A duplicate is this rank's own mistake: refused at once, locally. */
        OK(ring_allreduce_async(name, f, g, 8, RING_FLOAT32, RING_SUM, 1, 1, 0, &h), "first");
        if (odd) {
            rc = ring_allreduce_async(name, f, g, 8, RING_FLOAT32, RING_SUM, 1, 1, 0, &h2);
            CHECK(rc == RING_EINVAL && strstr(ring_last_error(), "already in flight"),
                  "duplicate gave %s (%s)", ring_err_name(rc), ring_last_error());
            printf("rank %d: %s\n", rank, ring_last_error());
        }
        OK(ring_wait(h), "the first one still completes");
        return;
    } else {
        fprintf(stderr, "unknown mismatch kind %s\n", kind);
        exit(2);
    }
    OK(rc, "submit");
    rc = ring_wait(h);
    CHECK(rc == RING_EMISMATCH, "%s: got %s, want RING_EMISMATCH", kind, ring_err_name(rc));
    CHECK(strstr(ring_last_error(), name) != NULL, "message lacks the name: %s", ring_last_error());
    CHECK(now_s() - t0 < 2.0, "the error took %.2f s", now_s() - t0);
    printf("rank %d: %s after %.0f ms: %s\n", rank, ring_err_name(rc), (now_s() - t0) * 1e3,
           ring_last_error());
    /* The engine goes on: a correct collective still works. */
    OK(ring_allreduce(RING_IN_PLACE, f, 8, RING_FLOAT32, RING_SUM), "after the mismatch");
}

/* ---- stalls ---- */

static void mode_stall(int shutdown)
{
    float x[4] = {1, 1, 1, 1};
    ring_handle_t *h;
    int rc;

    if (rank == 1) {
        if (shutdown) {
            /* Never submits "lonely"; waits in a barrier that the others never reach. */
            rc = ring_barrier();
            CHECK(rc == RING_ESTALL, "rank 1 got %s, want RING_ESTALL", ring_err_name(rc));
            printf("rank %d: %s: %s\n", rank, ring_err_name(rc), ring_last_error());
            return;
        }
        sleep(3);
    }
    OK(ring_allreduce_async("lonely", RING_IN_PLACE, x, 4, RING_FLOAT32, RING_SUM, 1, 1, 0, &h),
       "submit");
    rc = ring_wait(h);
    if (shutdown) {
        CHECK(rc == RING_ESTALL, "got %s, want RING_ESTALL", ring_err_name(rc));
        CHECK(strstr(ring_last_error(), "lonely") != NULL, "message: %s", ring_last_error());
        printf("rank %d: %s: %s\n", rank, ring_err_name(rc), ring_last_error());
        rc = ring_barrier();
        CHECK(rc == RING_ESTALL, "after a stall shutdown, got %s", ring_err_name(rc));
        return;
    }
    OK(rc, "late tensor");
    CHECK(x[0] == (float)size, "sum %g", x[0]);
}

/* ---- join ---- */

static void mode_join(void)
{
    int steps = 2 * rank + 1, last;
    for (int s = 0; s < steps; s++) {
        /* ranks still working at step s: those with 2r+1 > s */
        int working = 0;
        float x = 1.0f, avg = (float)rank;
        int32_t mx = rank, prod = 2;
        for (int r = 0; r < size; r++)
            working += 2 * r + 1 > s;
        OK(ring_allreduce(RING_IN_PLACE, &x, 1, RING_FLOAT32, RING_SUM), "sum");
        CHECK(x == (float)working, "step %d: sum %g, want %d working ranks", s, x, working);
        OK(ring_allreduce(RING_IN_PLACE, &mx, 1, RING_INT32, RING_MIN), "min");
        CHECK(mx == size - working, "step %d: min %d, want %d", s, mx, size - working);
        OK(ring_allreduce(RING_IN_PLACE, &prod, 1, RING_INT32, RING_PRODUCT), "product");
        CHECK(prod == 1 << working, "step %d: product %d", s, prod);
        OK(ring_allreduce(RING_IN_PLACE, &avg, 1, RING_FLOAT32, RING_AVERAGE), "average");
        {
            float want = 0;
            for (int r = size - working; r < size; r++)
                want += (float)r;
            want /= (float)working;
            CHECK(fabsf(avg - want) < 1e-5f, "step %d: average %g, want %g", s, avg, want);
        }
    }
    last = ring_join();
    CHECK(last == size - 1, "ring_join returned %d, want %d", last, size - 1);
    /* After everyone joined, the world works normally again. */
    {
        float x = 1;
        OK(ring_allreduce(RING_IN_PLACE, &x, 1, RING_FLOAT32, RING_SUM), "after join");
        CHECK(x == (float)size, "after join: %g", x);
    }
}

/*
 * Join after the cache knows a collective that cannot run with a joined rank: each rank in
 * turn joins while the others call an allgather (and a broadcast from the joined rank)
 * that earlier rounds cached. Every working rank gets RING_EJOINED, and the joined rank,
 * which holds no tensor, must not let the cache run them (it crashed reading the missing
 * tensor, found by Horovod's test_horovod_join_allgather). A broadcast from a working root
 * runs, or with RING_JOIN_BROADCAST=0 fails with RING_EJOINED too.
 */
static void mode_join_cached(void)
{
    const char *jb = getenv("RING_JOIN_BROADCAST");
    int refused = jb != NULL && strcmp(jb, "0") == 0;
    for (int first = 0; first < size; first++) {
        int working = first == 0 ? 1 : 0;
        int32_t mine[2] = {rank, rank}, all[64], b = rank;
        int last;
        /* everybody: cache the allgather and the broadcasts from every root */
        OK(ring_allgather(mine, 2, all, RING_INT32), "allgather, all working");
        for (int root = 0; root < size; root++)
            OK(ring_broadcast(&b, 1, RING_INT32, root), "broadcast, all working");
        if (rank == first) {
            last = ring_join();
        } else {
            int rc = ring_allgather(mine, 2, all, RING_INT32);
            CHECK(rc == RING_EJOINED, "allgather while rank %d joined: %s, want RING_EJOINED",
                  first, ring_err_name(rc));
            rc = ring_broadcast(&b, 1, RING_INT32, first);
            CHECK(rc == RING_EJOINED, "broadcast from joined rank %d: %s, want RING_EJOINED", first,
                  ring_err_name(rc));
            b = rank;
            rc = ring_broadcast(&b, 1, RING_INT32, working);
            CHECK(rc == (refused ? RING_EJOINED : 0), "broadcast from working rank %d: %s", working,
                  ring_err_name(rc));
            CHECK(refused || b == working, "broadcast from working rank %d gave %d", working,
                  (int)b);
            last = ring_join();
        }
        CHECK(last >= 0 && last != first, "join returned %d with rank %d first", last, first);
    }
}

/* ---- process sets ---- */

static void mode_psets(void)
{
    int lo[2] = {0, 1}, hi[2] = {2, 3}, odd[2] = {1, 3};
    ring_process_set_t a, b, c;
    ring_handle_t *h[6];
    int n = 0;
    float x[3] = {(float)rank, (float)rank, (float)rank}, y = (float)(rank * 10);

    CHECK(size == 4, "psets needs np 4");
    OK(ring_process_set_create(lo, 2, &a), "set {0,1}");
    OK(ring_process_set_create(hi, 2, &b), "set {2,3}");
    OK(ring_process_set_create(odd, 2, &c), "set {1,3}");
    CHECK(ring_process_set_size(a) == 2 && ring_process_set_rank(b) == (rank >= 2 ? rank - 2 : -1),
          "set ranks");
    /* Both halves at once, on the same names, interleaved with a global op. */
    if (rank < 2)
        OK(ring_allreduce_async("half", RING_IN_PLACE, &x[0], 1, RING_FLOAT32, RING_SUM, 1, 1, a,
                                &h[n++]),
           "half a");
    else
        OK(ring_allreduce_async("half", RING_IN_PLACE, &x[0], 1, RING_FLOAT32, RING_SUM, 1, 1, b,
                                &h[n++]),
           "half b");
    OK(ring_allreduce_async("whole", RING_IN_PLACE, &x[1], 1, RING_FLOAT32, RING_SUM, 1, 1,
                            RING_GLOBAL, &h[n++]),
       "whole");
    if (rank % 2 == 1) {
        OK(ring_allreduce_async("odd", RING_IN_PLACE, &x[2], 1, RING_FLOAT32, RING_MAX, 1, 1, c,
                                &h[n++]),
           "odd");
        /* root 1 of {1,3} is world rank 3 */
        OK(ring_broadcast_async("oddcast", &y, 1, RING_FLOAT32, 1, c, &h[n++]), "oddcast");
    } else {
        ring_handle_t *bad;
        int rc =
            ring_allreduce_async("odd", &x[2], &x[2], 1, RING_FLOAT32, RING_MAX, 1, 1, c, &bad);
        CHECK(rc == RING_EINVAL, "a non-member's submission gave %s", ring_err_name(rc));
    }
    for (int i = 0; i < n; i++)
        OK(ring_wait(h[i]), "wait");
    CHECK(x[0] == (rank < 2 ? 1.0f : 5.0f), "half: %g", x[0]);
    CHECK(x[1] == 6.0f, "whole: %g", x[1]);
    if (rank % 2 == 1) {
        CHECK(x[2] == 3.0f, "odd max: %g", x[2]);
        CHECK(y == 30.0f, "oddcast: %g", y);
    }
    /* A mismatch of lists is refused on every rank. */
    {
        int mine[2] = {0, rank == 0 ? 1 : 2};
        ring_process_set_t d;
        int rc = ring_process_set_create(mine, 2, &d);
        CHECK(rc == RING_EMISMATCH, "different lists gave %s", ring_err_name(rc));
    }
}

/* ---- timeline ---- */

static void mode_timeline(void)
{
    float a[1000], b[10];
    ring_handle_t *h[2];
    for (int i = 0; i < 1000; i++)
        a[i] = 1;
    for (int i = 0; i < 10; i++)
        b[i] = 1;
    for (int step = 0; step < 3; step++) {
        OK(ring_allreduce_async("layer1/weights", RING_IN_PLACE, a, 1000, RING_FLOAT32, RING_SUM, 1,
                                1, 0, &h[0]),
           "a");
        OK(ring_allreduce_async("layer1/bias", RING_IN_PLACE, b, 10, RING_FLOAT32, RING_SUM, 1, 1,
                                0, &h[1]),
           "b");
        OK(ring_wait(h[0]), "wait a");
        OK(ring_wait(h[1]), "wait b");
    }
    /* Two tensors submitted one after the other fuse only when one cycle sees both on every
     * rank, which a slow machine (TSan) may never give; a group always goes as one. */
    const void *sb[2] = {RING_IN_PLACE, RING_IN_PLACE};
    void *rb[2] = {a, b};
    size_t n[2] = {1000, 10};
    OK(ring_grouped_allreduce_async("layer2", 2, sb, rb, n, RING_FLOAT32, RING_SUM, 0, &h[0]),
       "group");
    OK(ring_wait(h[0]), "wait group");
    OK(ring_broadcast_async("params", a, 1000, RING_FLOAT32, 0, 0, &h[0]), "bcast");
    OK(ring_wait(h[0]), "wait bcast");
    OK(ring_barrier(), "barrier");
}

/*
 * ring_timeline_start/stop from the program: when stop returns, rank 0's file is complete
 * (it names the tensor traced just before, and parses: it ends with the closing bracket),
 * with no collective behind the stop to make the engine take it. Twice, to a new file.
 */
static void file_complete(const char *path, const char *tensor)
{
    char text[1 << 16];
    size_t n;
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
        text[--n] = '\0';
    CHECK(strstr(text, tensor) != NULL, "%s does not name %s when ring_timeline_stop returned",
          path, tensor);
    CHECK(n > 0 && text[n - 1] == ']', "%s is not closed when ring_timeline_stop returned", path);
}

static void mode_timeline_api(const char *path)
{
    char path2[512];
    float a[16] = {0};
    ring_handle_t *h;
    snprintf(path2, sizeof(path2), "%s.2", path);
    OK(ring_timeline_start(path), "timeline start");
    OK(ring_allreduce_async("traced/first", RING_IN_PLACE, a, 16, RING_FLOAT32, RING_SUM, 1, 1, 0,
                            &h),
       "first");
    OK(ring_wait(h), "wait first");
    OK(ring_timeline_stop(), "timeline stop");
    if (rank == 0)
        file_complete(path, "traced/first");
    OK(ring_timeline_start(path2), "timeline start again");
    OK(ring_allreduce(RING_IN_PLACE, a, 16, RING_FLOAT32, RING_SUM), "second");
    OK(ring_timeline_stop(), "timeline stop again");
    if (rank == 0)
        file_complete(path2, "allreduce");
}

/* ---- cache ---- */

static void mode_cache(void)
{
    enum { T = 20, STEPS = 30, WARMUP = 3 };
    float buf[T][64];
    struct ring_engine_stats s0 = {0}, s1;
    for (int step = 0; step < STEPS; step++) {
        ring_handle_t *h[T];
        if (step == WARMUP)
            OK(ring_engine_stats(&s0), "stats");
        for (int k = 0; k < T; k++) {
            int t = (k * 7 + rank * 3 + step) % T; /* any order */
            char name[32];
            for (int i = 0; i < 64; i++)
                buf[t][i] = 1;
            snprintf(name, sizeof(name), "layer%d/grad", t);
            OK(ring_allreduce_async(name, RING_IN_PLACE, buf[t], 64, RING_FLOAT32, RING_SUM, 1, 1,
                                    0, &h[t]),
               name);
        }
        for (int t = 0; t < T; t++) {
            OK(ring_wait(h[t]), "wait");
            CHECK(buf[t][0] == (float)size, "sum %g", buf[t][0]);
        }
    }
    OK(ring_engine_stats(&s1), "stats");
    /* One more cached tensor before the final barrier: without it a faster rank could start
     * that (uncached) barrier before rank 0 read its stats, and its name would count in s1. */
    {
        ring_handle_t *h;
        OK(ring_allreduce_async("layer0/grad", RING_IN_PLACE, buf[0], 64, RING_FLOAT32, RING_SUM, 1,
                                1, 0, &h),
           "fence");
        OK(ring_wait(h), "wait fence");
    }
    if (rank == 0) {
        printf("after warm-up: %llu names to the coordinator, %llu cache hits, %llu cycles, "
               "%llu collectives for %llu tensors\n",
               (unsigned long long)(s1.coordinator_names - s0.coordinator_names),
               (unsigned long long)(s1.cache_hits - s0.cache_hits),
               (unsigned long long)(s1.cycles - s0.cycles),
               (unsigned long long)(s1.collectives - s0.collectives),
               (unsigned long long)(s1.tensors - s0.tensors));
        CHECK(s1.coordinator_names == s0.coordinator_names,
              "the coordinator received %llu names after warm-up",
              (unsigned long long)(s1.coordinator_names - s0.coordinator_names));
        CHECK(s1.cache_hits - s0.cache_hits == (uint64_t)T * (STEPS - WARMUP), "cache hits %llu",
              (unsigned long long)(s1.cache_hits - s0.cache_hits));
        CHECK(s0.coordinator_names > 0, "warm-up sent no names at all");
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int rc;

    if (argc < 2) {
        fprintf(stderr, "usage: engine_check MODE [ARG]\n");
        return 2;
    }
    if ((rc = ring_init()) != 0) {
        fprintf(stderr, "ring_init: %s (%s)\n", ring_strerror(rc), ring_last_error());
        return 1;
    }
    rank = ring_rank();
    size = ring_size();
    if (strcmp(mode, "order") == 0)
        mode_order();
    else if (strcmp(mode, "mismatch") == 0 && argc > 2)
        mode_mismatch(argv[2]);
    else if (strcmp(mode, "stall") == 0)
        mode_stall(0);
    else if (strcmp(mode, "stall-shutdown") == 0)
        mode_stall(1);
    else if (strcmp(mode, "join") == 0)
        mode_join();
    else if (strcmp(mode, "join-cached") == 0)
        mode_join_cached();
    else if (strcmp(mode, "psets") == 0)
        mode_psets();
    else if (strcmp(mode, "timeline") == 0)
        mode_timeline();
    else if (strcmp(mode, "timeline-api") == 0 && argc > 2)
        mode_timeline_api(argv[2]);
    else if (strcmp(mode, "cache") == 0)
        mode_cache();
    else if (strcmp(mode, "grouped") == 0)
        mode_grouped();
    else if (strcmp(mode, "grouped-big") == 0)
        mode_grouped_big();
    else if (strcmp(mode, "blocking") == 0)
        mode_blocking();
    else if (strcmp(mode, "fast") == 0)
        mode_fast();
    else if (strcmp(mode, "barrier") == 0)
        mode_barrier();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    if (strcmp(mode, "stall-shutdown") != 0)
        OK(ring_barrier(), "final barrier");
    if (rank == 0)
        printf("engine_check %s: ok\n", mode);
    fflush(stdout);
    ring_finalize();
    return 0;
}
