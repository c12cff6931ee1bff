/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_speed.c - the speed model of speed.h: observations win where they exist, the fit
 * predicts the sizes between and beyond, and below the largest size measured a prediction
 * never rises as workers are taken away.
 */
#include <math.h>

#include "scheduler/model/speed.h"
#include "unit.h"

/* Weak scaling, tau(n) = b/n + c 2(n-1)/n^2 per sample: the throughput at n. */
static double weak(double b, double c, int n)
{
    return 1.0 / (b / n + c * 2.0 * (n - 1) / ((double)n * n));
}

START_TEST(observed_sizes_are_what_was_measured)
{
    struct speed s;
    speed_init(&s, SPEED_WEAK);
    ck_assert(speed_at(&s, 2) == 0);
    speed_observe(&s, 2, 100.0);
    ck_assert_double_eq_tol(speed_at(&s, 2), 100.0, 1e-9);
    /* One size: the prior's ring cost, so 4 workers are faster, but not twice as fast. */
    ck_assert(speed_at(&s, 4) > 150.0 && speed_at(&s, 4) < 200.0);
    ck_assert(speed_at(&s, 1) < 100.0);
    speed_observe(&s, 0, 5.0); /* ignored */
    speed_observe(&s, 3, -1.0);
    ck_assert_int_eq(s.nobs, 1);
}
END_TEST

/*
 * A ring term three times the compute (c = 3b) fits the measurements at 2 and 4 exactly,
 * and then puts 1 worker above both: the curve bends down at small n. The prediction is
 * held under the measured larger sizes, so no policy sees a speed-up in fewer workers.
 */
START_TEST(fewer_workers_are_never_predicted_faster_than_measured)
{
    struct speed s;
    double t2 = weak(1, 3, 2), t4 = weak(1, 3, 4);
    ck_assert(weak(1, 3, 1) > t4 && t4 > t2); /* what the model alone would say */
    speed_init(&s, SPEED_WEAK);
    speed_observe(&s, 2, t2);
    speed_observe(&s, 4, t4);
    ck_assert_double_eq_tol(speed_at(&s, 2), t2, 1e-9);
    ck_assert_double_eq_tol(speed_at(&s, 4), t4, 1e-9);
    ck_assert_msg(speed_at(&s, 1) <= t2 + 1e-9, "1 worker predicted at %g, above 2's %g",
                  speed_at(&s, 1), t2);
    /* Between measured sizes: between their throughputs. */
    ck_assert(speed_at(&s, 3) >= t2 - 1e-9 && speed_at(&s, 3) <= t4 + 1e-9);
    /* Beyond the largest measured size the model alone speaks. */
    ck_assert_double_eq_tol(speed_at(&s, 8), weak(1, 3, 8), 1e-6 * weak(1, 3, 8));
}
END_TEST

/* Where the measurements themselves fall with n, the bound from above wins: a size between
 * them is predicted no faster than the larger, slower one. */
START_TEST(disagreeing_measurements_bound_from_above)
{
    struct speed s;
    speed_init(&s, SPEED_STRONG);
    speed_observe(&s, 1, 10.0);
    speed_observe(&s, 4, 8.0);
    for (int n = 1; n <= 4; n++)
        ck_assert_msg(n == 1 || speed_at(&s, n) <= 8.0 + 1e-9, "%d workers predicted at %g", n,
                      speed_at(&s, n));
    ck_assert_double_eq_tol(speed_at(&s, 1), 10.0, 1e-9); /* measured: as measured */
}
END_TEST

/* Below the largest measured size, predictions do not fall as n grows, on any fit. */
START_TEST(monotone_up_to_the_largest_measured_size)
{
    unsigned seed = 7;
    for (int trial = 0; trial < 200; trial++) {
        struct speed s;
        int top = 0;
        speed_init(&s, trial % 2 ? SPEED_STRONG : SPEED_WEAK);
        for (int k = 0; k < 3; k++) {
            int n = 1 << (k + trial % 2);
            seed = seed * 1103515245u + 12345u;
            speed_observe(&s, n, 1.0 + (seed >> 16) % 1000 / 100.0);
            top = n;
        }
        for (int n = 1; n < top; n++) {
            double lo = speed_at(&s, n), hi = speed_at(&s, n + 1), obs;
            if (speed_observed(&s, n, &obs)) /* a measured size may exceed the next */
                continue;
            ck_assert_msg(lo <= hi + 1e-9, "trial %d: %d workers at %g, %d at %g", trial, n, lo,
                          n + 1, hi);
        }
    }
}
END_TEST

/* speed_at as speed.h defines it, worked out afresh: the measured throughput where there
 * is one, else the model's prediction. */
static double at_afresh(const struct speed *s, int n)
{
    double thr;
    return speed_observed(s, n, &thr) ? thr : speed_predict(s, n);
}

/* speed_at keeps its answers for small sizes between observations (speed.h): each report
 * must show in them at once, at every size, cached or not. */
START_TEST(every_observation_shows_in_speed_at_at_once)
{
    static const struct {
        int n;
        double thr;
    } reports[] = {{2, 100}, {2, 200},  {4, 300},  {1, 40},   {8, 500},
                   {4, 250}, {64, 900}, {65, 910}, {16, 700}, {3, 10}};
    struct speed s;
    speed_init(&s, SPEED_WEAK);
    for (int n = 1; n <= SPEED_CACHED + 2; n++)
        ck_assert(speed_at(&s, n) == 0);
    for (size_t r = 0; r < sizeof(reports) / sizeof(reports[0]); r++) {
        double before = speed_at(&s, 6);
        speed_observe(&s, reports[r].n, reports[r].thr);
        /* Exactly what a fresh computation gives: == on purpose, the cache must not even
         * round differently. */
        for (int n = 1; n <= SPEED_CACHED + 2; n++)
            ck_assert_msg(speed_at(&s, n) == at_afresh(&s, n),
                          "after report %zu: %d workers at %.17g, afresh %.17g", r, n,
                          speed_at(&s, n), at_afresh(&s, n));
        /* An unmeasured size moves with the model (the first report sets it; a later
         * size's changes it). */
        if (r == 0 || r == 2 || r == 4)
            ck_assert_msg(speed_at(&s, 6) != before, "report %zu left 6 workers at %g", r, before);
    }
    /* A size measured again reads the running mean at once: (100 + 200) / 2. */
    {
        struct speed t;
        speed_init(&t, SPEED_STRONG);
        speed_observe(&t, 2, 100);
        ck_assert(speed_at(&t, 2) == 100);
        speed_observe(&t, 2, 200);
        ck_assert(speed_at(&t, 2) == 150);
    }
    /* Ignored reports change nothing. */
    {
        double six = speed_at(&s, 6);
        speed_observe(&s, 0, 100);
        speed_observe(&s, 6, -1);
        speed_observe(&s, 6, NAN);
        ck_assert(speed_at(&s, 6) == six);
    }
}
END_TEST

int main(void)
{
    const TTest *tests[] = {observed_sizes_are_what_was_measured,
                            fewer_workers_are_never_predicted_faster_than_measured,
                            disagreeing_measurements_bound_from_above,
                            monotone_up_to_the_largest_measured_size,
                            every_observation_shows_in_speed_at_at_once,
                            NULL};
    return unit_main("speed", tests, 60);
}
