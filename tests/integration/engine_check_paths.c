/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_check's scenarios of the engine's other paths: blocking calls on the cache, the
 * fast path, barriers, and grouped allreduces (engine_check.c lists every mode).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_check.h"
#include "rank_check.h"
#include "ring.h"

/* ---- blocking ---- */

static void *broadcasts(void *arg)
{
    int *failed = arg;
    for (int i = 0; i < 40; i++) {
        int v = rank == 0 ? i : -1;
        if (ring_broadcast(&v, 1, RING_INT32, 0) != 0 || v != i) {
            *failed = 1;
            break;
        }
        if (rank % 2)
            usleep(50); /* a different interleaving with the other thread on odd ranks */
    }
    return NULL;
}

void mode_blocking(void)
{
    enum { WARMUP = 2, REPEAT = 20 };
    struct ring_engine_stats s0 = {0}, s1;
    float buf[32];
    pthread_t th;
    int failed = 0, rc;

    for (int step = 0; step < WARMUP + REPEAT; step++) {
        if (step == WARMUP)
            OK(ring_engine_stats(&s0), "stats");
        for (int i = 0; i < 16; i++)
            buf[i] = (float)rank;
        OK(ring_allreduce(RING_IN_PLACE, buf, 16, RING_FLOAT32, RING_SUM), "allreduce");
        CHECK(buf[0] == (float)(size * (size - 1) / 2), "sum %g", buf[0]);
    }
    OK(ring_engine_stats(&s1), "stats");
    /* One more cached call before the uncached one below: without it a faster rank could
     * start that one before rank 0 read its stats, and its name would be counted in s1. */
    OK(ring_allreduce(RING_IN_PLACE, buf, 16, RING_FLOAT32, RING_SUM), "allreduce");
    if (rank == 0) {
        printf("blocking: %llu names to the coordinator after warm-up, %llu cache hits\n",
               (unsigned long long)(s1.coordinator_names - s0.coordinator_names),
               (unsigned long long)(s1.cache_hits - s0.cache_hits));
        CHECK(s1.coordinator_names == s0.coordinator_names, "repeated calls were negotiated");
    }
    CHECK(s1.cache_hits - s0.cache_hits >= REPEAT, "cache hits %llu",
          (unsigned long long)(s1.cache_hits - s0.cache_hits));

    /* other arguments: negotiated again, and right */
    for (int i = 0; i < 32; i++)
        buf[i] = 1;
    OK(ring_allreduce(RING_IN_PLACE, buf, 32, RING_FLOAT32, RING_MAX), "allreduce 32 max");
    CHECK(buf[31] == 1, "max %g", buf[31]);

    /* a mismatch in a blocking call still names both values on every rank */
    rc = ring_allreduce(RING_IN_PLACE, buf, rank == size - 1 ? 8 : 16, RING_FLOAT32, RING_SUM);
    CHECK(rc == RING_EMISMATCH && strstr(ring_last_error(), "allreduce.noname"),
          "mismatch gave %s: %s", ring_err_name(rc), ring_last_error());

    /* two kinds at once from two threads */
    CHECK(pthread_create(&th, NULL, broadcasts, &failed) == 0, "pthread_create");
    for (int i = 0; i < 40; i++) {
        buf[0] = 1;
        OK(ring_allreduce(RING_IN_PLACE, buf, 1, RING_FLOAT32, RING_SUM), "allreduce (thread)");
        CHECK(buf[0] == (float)size, "sum %g", buf[0]);
        if (rank % 2 == 0)
            usleep(50);
    }
    pthread_join(th, NULL);
    CHECK(!failed, "a broadcast in the other thread failed: %s", ring_last_error());
}

/* ---- fast ---- */

void mode_fast(void)
{
    enum { WARMUP = 2, REPEAT = 40 };
    struct ring_engine_stats s0 = {0}, s1;
    float f[16];
    int32_t v[4];
    double d[2];
    int rc;

    for (int step = 0; step < WARMUP + REPEAT; step++) {
        if (step == WARMUP)
            OK(ring_engine_stats(&s0), "stats");
        for (int i = 0; i < 16; i++)
            f[i] = (float)(rank + i);
        OK(ring_allreduce(RING_IN_PLACE, f, 16, RING_FLOAT32, RING_SUM), "allreduce");
        for (int i = 0; i < 16; i++)
            CHECK(f[i] == (float)(size * (size - 1) / 2 + size * i), "sum[%d] %g", i, f[i]);
    }
    OK(ring_engine_stats(&s1), "stats");
    printf("rank %d: fast path: %llu of %d repeated blocking allreduces\n", rank,
           (unsigned long long)(s1.fast_path - s0.fast_path), REPEAT);
    CHECK(s1.fast_path - s0.fast_path >= REPEAT / 2, "only %llu of %d took the fast path",
          (unsigned long long)(s1.fast_path - s0.fast_path), REPEAT);
    CHECK(s1.coordinator_names == s0.coordinator_names, "repeated calls were negotiated");

    /* Other ops and dtypes, and the scales, on the fast path too. Blocking calls share one
     * name, so each kind is negotiated once, then repeats from the cache. */
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 4; i++)
            v[i] = rank * 10 + i;
        OK(ring_allreduce(RING_IN_PLACE, v, 4, RING_INT32, RING_MAX), "max");
        CHECK(v[0] == (size - 1) * 10 && v[3] == (size - 1) * 10 + 3, "max %d %d", v[0], v[3]);
    }
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 4; i++)
            v[i] = rank * 10 + i;
        OK(ring_allreduce(RING_IN_PLACE, v, 4, RING_INT32, RING_MIN), "min");
        CHECK(v[0] == 0 && v[3] == 3, "min %d %d", v[0], v[3]);
    }
    for (int step = 0; step < 3; step++) {
        d[0] = rank;
        d[1] = 1;
        OK(ring_allreduce(RING_IN_PLACE, d, 2, RING_FLOAT64, RING_AVERAGE), "average");
        CHECK(fabs(d[0] - (size - 1) / 2.0) < 1e-12 && fabs(d[1] - 1) < 1e-12, "average %g %g",
              d[0], d[1]);
    }
    for (int step = 0; step < 3; step++) {
        d[0] = 1;
        d[1] = rank;
        OK(ring_allreduce_scaled(RING_IN_PLACE, d, 2, RING_FLOAT64, RING_SUM, 2.0, 0.5), "scaled");
        CHECK(fabs(d[0] - size) < 1e-12 && fabs(d[1] - size * (size - 1) / 2.0) < 1e-12,
              "scaled %g %g", d[0], d[1]);
    }
    OK(ring_engine_stats(&s0), "stats");
    CHECK(s0.fast_path - s1.fast_path >= 4, "only %llu of 8 repeats of other kinds were fast",
          (unsigned long long)(s0.fast_path - s1.fast_path));

    /* A count mismatch while the others take the fast path: the usual error, everywhere. */
    rc = ring_allreduce(RING_IN_PLACE, f, rank == size - 1 ? 8 : 16, RING_FLOAT32, RING_SUM);
    CHECK(rc == RING_EMISMATCH && strstr(ring_last_error(), "allreduce.noname"),
          "mismatch gave %s: %s", ring_err_name(rc), ring_last_error());
    printf("rank %d: mismatch: RING_EMISMATCH: %s\n", rank, ring_last_error());
    /* and the engine goes on */
    for (int step = 0; step < 5; step++) {
        f[0] = 1;
        OK(ring_allreduce(RING_IN_PLACE, f, 16, RING_FLOAT32, RING_SUM), "after the mismatch");
        CHECK(f[0] == (float)size, "sum after the mismatch %g", f[0]);
    }
}

/* ---- barrier ---- */

void mode_barrier(void)
{
    enum { WARMUP = 2, REPEAT = 40 };
    struct ring_engine_stats s0 = {0}, s1;
    ring_handle_t *h;
    float f[4];
    int rc;

    for (int step = 0; step < WARMUP + REPEAT; step++) {
        double enter, leave, last;
        if (step == WARMUP)
            OK(ring_engine_stats(&s0), "stats");
        if (rank == step % size)
            usleep(2000); /* this rank enters late: nobody may leave before it came */
        enter = now_s();
        OK(ring_barrier(), "barrier");
        leave = now_s();
        /* The latest entry, through a named tensor on the engine's path (CLOCK_MONOTONIC
         * is the host's: every rank of this test runs on one). */
        last = enter;
        OK(ring_allreduce_async("barrier/enter", RING_IN_PLACE, &last, 1, RING_FLOAT64, RING_MAX, 1,
                                1, RING_GLOBAL, &h),
           "submit the entry times");
        OK(ring_wait(h), "the entry times");
        CHECK(leave >= last, "step %d: left the barrier at %.6f, before a rank entered at %.6f",
              step, leave, last);
        /* and a blocking allreduce right after it, on the fast path as well */
        for (int i = 0; i < 4; i++)
            f[i] = (float)(rank + i);
        OK(ring_allreduce(RING_IN_PLACE, f, 4, RING_FLOAT32, RING_SUM), "allreduce");
        CHECK(f[3] == (float)(size * (size - 1) / 2 + 3 * size), "sum %g", f[3]);
    }
    OK(ring_engine_stats(&s1), "stats");
    CHECK(s1.coordinator_names == s0.coordinator_names, "repeated calls were negotiated");
    /* Barriers alone, back to back: most must be fast. */
    for (int step = 0; step < REPEAT; step++)
        OK(ring_barrier(), "barrier");
    OK(ring_engine_stats(&s0), "stats");
    printf("rank %d: fast path: %llu of %d back-to-back barriers\n", rank,
           (unsigned long long)(s0.fast_path - s1.fast_path), REPEAT);
    CHECK(s0.fast_path - s1.fast_path >= REPEAT / 2, "only %llu of %d barriers were fast",
          (unsigned long long)(s0.fast_path - s1.fast_path), REPEAT);

    /* The last rank submits an allreduce under the blocking barrier's name while the others
     * are on the fast path: the usual type mismatch, on every rank. */
    if (rank == size - 1) {
        f[0] = 1;
        OK(ring_allreduce_async("barrier.noname", RING_IN_PLACE, f, 1, RING_FLOAT32, RING_SUM, 1, 1,
                                RING_GLOBAL, &h),
           "submit");
        rc = ring_wait(h);
    } else {
        rc = ring_barrier();
    }
    CHECK(rc == RING_EMISMATCH && strstr(ring_last_error(), "barrier.noname") &&
              strstr(ring_last_error(), "barrier") && strstr(ring_last_error(), "allreduce"),
          "mismatch gave %s: %s", ring_err_name(rc), ring_last_error());
    printf("rank %d: mismatch: RING_EMISMATCH: %s\n", rank, ring_last_error());
    /* and barriers go on */
    for (int step = 0; step < 5; step++)
        OK(ring_barrier(), "barrier after the mismatch");
}

/* ---- grouped ---- */

void mode_grouped(void)
{
    float a[100], b[3], c[7];
    const void *sb[3] = {RING_IN_PLACE, RING_IN_PLACE, RING_IN_PLACE};
    void *rb[3] = {a, b, c};
    size_t n[3] = {100, 3, 7};
    ring_handle_t *g, *other;
    float o = 1;

    for (int step = 0; step < 4; step++) {
        for (int i = 0; i < 100; i++)
            a[i] = 1;
        for (int i = 0; i < 3; i++)
            b[i] = 2;
        for (int i = 0; i < 7; i++)
            c[i] = 3;
        o = 1;
        /* rank 0 submits the other tensor first, the rest after the group */
        if (rank == 0)
            OK(ring_allreduce_async("other", RING_IN_PLACE, &o, 1, RING_FLOAT32, RING_SUM, 1, 1, 0,
                                    &other),
               "other");
        OK(ring_grouped_allreduce_async("grads", 3, sb, rb, n, RING_FLOAT32, RING_SUM, 0, &g),
           "group");
        if (rank != 0)
            OK(ring_allreduce_async("other", RING_IN_PLACE, &o, 1, RING_FLOAT32, RING_SUM, 1, 1, 0,
                                    &other),
               "other");
        OK(ring_wait(g), "group");
        OK(ring_wait(other), "other");
        CHECK(a[99] == (float)size && b[2] == 2.0f * (float)size && c[0] == 3.0f * (float)size,
              "grouped sums %g %g %g", a[99], b[2], c[0]);
        CHECK(o == (float)size, "other %g", o);
    }
}

/* ---- grouped, beyond the control round ---- */

enum { GB_N = 8, GB_MAX = 12000, GS_N = 4 };
static float gbig[GB_N][GB_MAX + 1], gsmall[GS_N][2];

/* This rank's input for element e of member k at step s. */
static float ginput(int r, int k, int e, int s)
{
    return (float)(r + k + e % 7 + s);
}

void mode_grouped_big(void)
{
    /* 32021 float32 in all (125 KiB): above RING__ATTACH_MAX and the small-allreduce bytes,
     * so the group runs member by member on its own memory. */
    size_t nb[GB_N] = {12000, 1, 3000, 12000, 2, 7, 5000, 1}, ns[GS_N] = {2, 1, 2, 1};
    const void *sbb[GB_N], *sbs[GS_N];
    void *rbb[GB_N], *rbs[GS_N];
    int steps = 4 + rank, last, pair[2] = {0, size - 1};
    ring_process_set_t ps;

    for (int k = 0; k < GB_N; k++) {
        sbb[k] = RING_IN_PLACE;
        rbb[k] = gbig[k];
    }
    for (int k = 0; k < GS_N; k++) {
        sbs[k] = RING_IN_PLACE;
        rbs[k] = gsmall[k];
    }
    /* A group on a process set of two: its own names, its own cache bits. */
    OK(ring_process_set_create(pair, 2, &ps), "set");
    for (int s = 0; s < 3 && (rank == 0 || rank == size - 1); s++) {
        ring_handle_t *h;
        for (int k = 0; k < GS_N; k++)
            for (size_t e = 0; e < ns[k]; e++)
                gsmall[k][e] = ginput(rank, k, (int)e, s);
        OK(ring_grouped_allreduce_async("small", GS_N, sbs, rbs, ns, RING_FLOAT32, RING_SUM, ps,
                                        &h),
           "set group");
        OK(ring_wait(h), "set group");
        for (int k = 0; k < GS_N; k++)
            for (size_t e = 0; e < ns[k]; e++) {
                float want = ginput(0, k, (int)e, s) + ginput(size - 1, k, (int)e, s);
                CHECK(gsmall[k][e] == want, "set step %d: small/%d[%zu] is %g, not %g", s, k, e,
                      gsmall[k][e], want);
            }
    }
    for (int s = 0; s < steps; s++) {
        ring_handle_t *hb, *hs, *ho;
        int working = 0, bad = s == 2, rc;
        float o = 1, sum;
        for (int r = 0; r < size; r++)
            working += 4 + r > s;
        for (int k = 0; k < GB_N; k++)
            for (size_t e = 0; e < nb[k]; e++)
                gbig[k][e] = ginput(rank, k, (int)e, s);
        for (int k = 0; k < GS_N; k++)
            for (size_t e = 0; e < ns[k]; e++)
                gsmall[k][e] = ginput(rank, k, (int)e, s);
        /* The last rank changes member 2's count in a step whose group is cached. */
        nb[2] = bad && rank == size - 1 ? 3001 : 3000;
        /* A different order on odd ranks; a single tensor of another name in between. */
        if (rank % 2)
            OK(ring_grouped_allreduce_async("big", GB_N, sbb, rbb, nb, RING_FLOAT32, RING_AVERAGE,
                                            RING_GLOBAL, &hb),
               "big");
        OK(ring_grouped_allreduce_async("small", GS_N, sbs, rbs, ns, RING_FLOAT32, RING_SUM,
                                        RING_GLOBAL, &hs),
           "small");
        OK(ring_allreduce_async("other", RING_IN_PLACE, &o, 1, RING_FLOAT32, RING_SUM, 1, 1,
                                RING_GLOBAL, &ho),
           "other");
        if (rank % 2 == 0)
            OK(ring_grouped_allreduce_async("big", GB_N, sbb, rbb, nb, RING_FLOAT32, RING_AVERAGE,
                                            RING_GLOBAL, &hb),
               "big");
        rc = ring_wait(hb);
        if (bad) {
            CHECK(rc == RING_EMISMATCH && strstr(ring_last_error(), "'big/2'") &&
                      strstr(ring_last_error(), "3000") && strstr(ring_last_error(), "3001"),
                  "the changed group gave %s: %s", ring_err_name(rc), ring_last_error());
            printf("rank %d: group mismatch: RING_EMISMATCH: %s\n", rank, ring_last_error());
        } else {
            OK(rc, "wait big");
        }
        OK(ring_wait(hs), "wait small");
        OK(ring_wait(ho), "wait other");
        CHECK(o == (float)working, "step %d: other %g, want %d", s, o, working);
        for (int k = 0; k < GS_N; k++)
            for (size_t e = 0; e < ns[k]; e++) {
                sum = 0;
                for (int r = size - working; r < size; r++)
                    sum += ginput(r, k, (int)e, s);
                CHECK(gsmall[k][e] == sum, "step %d: small/%d[%zu] is %g, not %g", s, k, e,
                      gsmall[k][e], sum);
            }
        for (int k = 0; k < GB_N && !bad; k++)
            for (size_t e = 0; e < nb[k]; e++) {
                sum = 0;
                for (int r = size - working; r < size; r++)
                    sum += ginput(r, k, (int)e, s);
                CHECK(fabsf(gbig[k][e] - sum / (float)working) <= 1e-5f * sum,
                      "step %d: big/%d[%zu] is %g, not %g", s, k, e, gbig[k][e],
                      sum / (float)working);
            }
    }
    last = ring_join();
    CHECK(last == size - 1, "ring_join returned %d, want %d", last, size - 1);
}
