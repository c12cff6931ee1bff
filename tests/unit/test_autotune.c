/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of RING_AUTOTUNE's search (worker/libring/src/engine/autotune.c), fed with
 * made-up scores: it ends within 20 samples whatever the warm-up, never changes its mind
 * afterwards, settles on the best sample it measured when that holds up measured again
 * (and on the starting parameters when it does not), and tries what it says it tries.
 */
#include <check.h>
#include <string.h>

#include "engine/autotune.h"
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
        ck_assert_int_eq(n, w + RING__TUNE_NFUSION + RING__TUNE_NCYCLE + 2 * RING__TUNE_NCONFIRM);
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
        ck_assert_int_eq(ring__tune_search_feed(&s, 1.5e9), 0);
    }
    /* none of the cycle times beat 4 MiB at 1 ms: that is the winner, measured again in
     * turn with the start, and it holds up */
    for (int i = 0; i < 2 * RING__TUNE_NCONFIRM; i++, n++) {
        struct ring__tune_params p = ring__tune_search_current(&s);
        ck_assert_int_eq(p.fusion_bytes, i % 2 == 0 ? 4u << 20 : start.fusion_bytes);
        ck_assert_int_eq(p.cycle_ms, 1);
        ck_assert_int_eq(ring__tune_search_feed(&s, i % 2 == 0 ? 2e9 : 1e9),
                         i == 2 * RING__TUNE_NCONFIRM - 1);
    }
    ck_assert_int_eq(ring__tune_search_current(&s).fusion_bytes, 4u << 20);
    ck_assert_int_eq(ring__tune_search_current(&s).cycle_ms, 1);
    ck_assert(!s.kept_initial);
    ck_assert_int_eq(n, 2 + RING__TUNE_NFUSION + RING__TUNE_NCYCLE + 2 * RING__TUNE_NCONFIRM);
}
END_TEST

/* Noise: every candidate is as fast as the start, but one sample of 1 MiB came out 30%
 * faster. Measured again it is not: the start stays. */
static int lucky_fed;
static double lucky(struct ring__tune_params p)
{
    return p.fusion_bytes == 1u << 20 && lucky_fed++ == 0 ? 1.3e9 : 1e9;
}

START_TEST(a_lucky_sample_does_not_win)
{
    struct ring__tune_params final;
    int changes;
    lucky_fed = 0;
    run(1, lucky, &changes, &final);
    ck_assert_int_eq(final.fusion_bytes, start.fusion_bytes);
    ck_assert_int_eq(final.cycle_ms, start.cycle_ms);
}
END_TEST

/* A winner by less than the margin is not worth leaving the defaults for. */
static double slight(struct ring__tune_params p)
{
    return p.fusion_bytes == 1u << 20 ? 1.03e9 : 1e9;
}

START_TEST(a_slight_winner_is_not_kept)
{
    struct ring__tune_params final;
    int changes, n = run(0, slight, &changes, &final);
    ck_assert_int_eq(final.fusion_bytes, start.fusion_bytes);
    ck_assert_int_eq(n, RING__TUNE_NFUSION + RING__TUNE_NCYCLE + 2 * RING__TUNE_NCONFIRM);
}
END_TEST

/* When the start wins the search outright, there is nothing to confirm. */
static double start_best(struct ring__tune_params p)
{
    return p.fusion_bytes == start.fusion_bytes && p.cycle_ms == start.cycle_ms ? 2e9 : 1e9;
}

START_TEST(the_start_winning_needs_no_confirmation)
{
    struct ring__tune_params final;
    int changes, n = run(0, start_best, &changes, &final);
    ck_assert_int_eq(final.fusion_bytes, start.fusion_bytes);
    ck_assert_int_eq(final.cycle_ms, start.cycle_ms);
    ck_assert_int_eq(n, RING__TUNE_NFUSION + RING__TUNE_NCYCLE);
}
END_TEST

static double flat(struct ring__tune_params p)
{
    (void)p;
    return 5e8;
}

/* Equal scores: the first candidate measured wins the search (so the outcome is the
 * scores' alone), and then does not beat the start measured again: the start stays. */
START_TEST(ties_keep_the_start)
{
    struct ring__tune_params final;
    int changes;
    run(0, flat, &changes, &final);
    ck_assert_int_eq(final.fusion_bytes, start.fusion_bytes);
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
    ck_assert_int_eq(final.fusion_bytes, start.fusion_bytes);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        ends_within_20_samples_at_any_warmup,
        stays_put_once_done,
        visits_the_grid_in_order,
        a_lucky_sample_does_not_win,
        a_slight_winner_is_not_kept,
        the_start_winning_needs_no_confirmation,
        ties_keep_the_start,
        zero_scores_end_on_a_measured_candidate,
        NULL,
    };
    return unit_main("autotune", tests, 30);
}
