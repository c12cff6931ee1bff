/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of RING_AUTOTUNE's search (worker/libring/src/engine/autotune.c), fed with
 * made-up scores: it ends within 20 samples whatever the warm-up, never changes its mind
 * afterwards, settles on the best sample it measured, and tries what it says it tries.
 */
#include <check.h>
#include <string.h>

#include "autotune.h"
#include "unit.h"

static const struct ring__tune_params start = {128u << 20, 1};

/* A made-up landscape: best at 16 MiB and 5 ms, worse the farther from them. */
static double landscape(struct ring__tune_params p)
{
    double f = (double)p.fusion_bytes / (double)(16u << 20), c = (double)p.cycle_ms / 5.0;
    if (f < 1)
        f = 1 / f;
    if (c < 1)
        c = 1 / c;
    return 1e9 / (f * c);
}

/* Runs a search to its end; returns the samples it took and the changes of parameters. */
static int run(int warmup, double (*score)(struct ring__tune_params), int *changes,
               struct ring__tune_params *final)
{
    struct ring__tune_search s;
    struct ring__tune_params p;
    int n = 0;

    *changes = 0;
    ring__tune_search_init(&s, warmup, start);
    p = ring__tune_search_current(&s);
    while (n < 100) {
        struct ring__tune_params q;
        int done = ring__tune_search_feed(&s, score(p));
        n++;
        q = ring__tune_search_current(&s);
        if (q.fusion_bytes != p.fusion_bytes || q.cycle_ms != p.cycle_ms)
            (*changes)++;
        p = q;
        if (done)
            break;
    }
    *final = p;
    ck_assert_int_eq(s.samples, n);
    return n;
}

START_TEST(ends_within_20_samples_at_any_warmup)
{
    for (int w = 0; w <= 5; w++) {
        struct ring__tune_params final;
        int changes, n = run(w, landscape, &changes, &final);
        ck_assert_int_le(n, 20);
        ck_assert_int_eq(n, w + RING__TUNE_NFUSION + RING__TUNE_NCYCLE);
        ck_assert_int_le(n, RING__TUNE_MAX_SAMPLES);
        ck_assert_int_eq(final.fusion_bytes, 16u << 20);
        ck_assert_int_eq(final.cycle_ms, 5);
        ck_assert_int_ge(changes, 2);
    }
}
END_TEST

START_TEST(stays_put_once_done)
{
    struct ring__tune_search s;
    ring__tune_search_init(&s, 1, start);
    while (!ring__tune_search_feed(&s, landscape(ring__tune_search_current(&s))))
        ;
    for (int i = 0; i < 50; i++) {
        struct ring__tune_params p = ring__tune_search_current(&s);
        ck_assert_int_eq(ring__tune_search_feed(&s, i * 1e12), 1); /* whatever it hears */
        ck_assert_int_eq(ring__tune_search_current(&s).fusion_bytes, p.fusion_bytes);
        ck_assert_int_eq(ring__tune_search_current(&s).cycle_ms, p.cycle_ms);
    }
    ck_assert_int_eq(s.phase, RING__TUNE_DONE);
}
END_TEST

/* The visits: warm-up at the start, every fusion candidate at the starting cycle time,
 * then every cycle time at the best fusion threshold so far. */
START_TEST(visits_the_grid_in_order)
{
    struct ring__tune_search s;
    int n = 0;
    ring__tune_search_init(&s, 2, start);
    for (int i = 0; i < 2; i++, n++) {
        ck_assert_int_eq(ring__tune_search_current(&s).fusion_bytes, start.fusion_bytes);
        ring__tune_search_feed(&s, 1e12); /* a warm-up score never wins */
    }
    for (int i = 0; i < RING__TUNE_NFUSION; i++, n++) {
        struct ring__tune_params p = ring__tune_search_current(&s);
        ck_assert_int_eq(p.fusion_bytes, ring__tune_fusion_grid[i]);
        ck_assert_int_eq(p.cycle_ms, start.cycle_ms);
        ring__tune_search_feed(&s, p.fusion_bytes == 4u << 20 ? 2e9 : 1e9); /* 4 MiB wins */
    }
    for (int i = 0; i < RING__TUNE_NCYCLE; i++, n++) {
        struct ring__tune_params p = ring__tune_search_current(&s);
        ck_assert_int_eq(p.fusion_bytes, 4u << 20);
        ck_assert_int_eq(p.cycle_ms, ring__tune_cycle_grid[i]);
        ck_assert_int_eq(ring__tune_search_feed(&s, 1.5e9), i == RING__TUNE_NCYCLE - 1);
    }
    /* none of the cycle times beat 4 MiB at 1 ms: that stays */
    ck_assert_int_eq(ring__tune_search_current(&s).fusion_bytes, 4u << 20);
    ck_assert_int_eq(ring__tune_search_current(&s).cycle_ms, 1);
    ck_assert_int_eq(n, 2 + RING__TUNE_NFUSION + RING__TUNE_NCYCLE);
}
END_TEST

static double flat(struct ring__tune_params p)
{
    (void)p;
    return 5e8;
}

/* Equal scores: the first candidate measured stays, so the outcome is the scores' alone. */
START_TEST(ties_keep_the_first)
{
    struct ring__tune_params final;
    int changes;
    run(0, flat, &changes, &final);
    ck_assert_int_eq(final.fusion_bytes, ring__tune_fusion_grid[0]);
    ck_assert_int_eq(final.cycle_ms, start.cycle_ms);
}
END_TEST

static double zero(struct ring__tune_params p)
{
    (void)p;
    return 0;
}

/* Scores of 0 (a sample that moved bytes in no time at all cannot be told apart) still
 * end on a candidate that was measured. */
START_TEST(zero_scores_end_on_a_measured_candidate)
{
    struct ring__tune_params final;
    int changes, n = run(3, zero, &changes, &final);
    ck_assert_int_le(n, 20);
    ck_assert_int_eq(final.fusion_bytes, ring__tune_fusion_grid[0]);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        ends_within_20_samples_at_any_warmup,
        stays_put_once_done,
        visits_the_grid_in_order,
        ties_keep_the_first,
        zero_scores_end_on_a_measured_candidate,
        NULL,
    };
    return unit_main("autotune", tests, 30);
}
