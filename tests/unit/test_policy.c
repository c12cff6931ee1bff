/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_policy.c - the scheduling policies on hand-made snapshots (policy_world.c): what
 * fifo, priority and tiresias decide, and the invariants every policy keeps (capacity,
 * min/max, backoff, bounded starvation, and a fixed point: planning again where the plan
 * was carried out changes nothing). dynamic and placement are in test_policy_dynamic.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_world.h"
#include "unit.h"

/* ---- fifo ---- */

START_TEST(fifo_order_and_backfill)
{
    struct world w;
    int a, b, c;
    world_init(&w, 1, 4, 0);
    a = queued(&w, 2, 2, 0, 9991);
    b = queued(&w, 3, 3, 0, 9992);
    c = queued(&w, 1, 1, 0, 9993);
    plan(&w, &policy_fifo);
    check_invariants(&w, "fifo");
    ck_assert_int_eq(w.out[a].workers, 2);
    ck_assert_int_eq(w.out[b].workers, 0); /* does not fit behind a */
    ck_assert_int_eq(w.out[c].workers, 1); /* backfills */
    world_free(&w);
}
END_TEST

START_TEST(fifo_most_workers_that_fit)
{
    struct world w;
    int a, b;
    world_init(&w, 1, 6, 0);
    a = queued(&w, 1, 4, 0, 1);
    b = queued(&w, 1, 8, 0, 2);
    plan(&w, &policy_fifo);
    check_invariants(&w, "fifo");
    ck_assert_int_eq(w.out[a].workers, 4);
    ck_assert_int_eq(w.out[b].workers, 2);
    world_free(&w);
}
END_TEST

START_TEST(fifo_never_stops_a_running_job)
{
    struct world w;
    int r, q;
    world_init(&w, 1, 4, 0);
    q = queued(&w, 2, 2, 0, 1);
    w.job[q].priority = 100;
    r = running(&w, 4, 4, 0, 4, 5000);
    plan(&w, &policy_fifo);
    check_invariants(&w, "fifo");
    ck_assert_int_eq(w.out[r].workers, 4);
    ck_assert(placement_equal(policy_where(&w.s, r, &w.out[r]), &w.place[r]));
    ck_assert_int_eq(w.out[q].workers, 0);
    world_free(&w);
}
END_TEST

START_TEST(fifo_priority_then_submission)
{
    struct world w;
    int a, b;
    world_init(&w, 1, 2, 0);
    a = queued(&w, 2, 2, 0, 1);
    b = queued(&w, 2, 2, 0, 2);
    w.job[b].priority = 5;
    plan(&w, &policy_fifo);
    ck_assert_int_eq(w.out[a].workers, 0);
    ck_assert_int_eq(w.out[b].workers, 2);
    world_free(&w);
}
END_TEST

START_TEST(fifo_gpus_are_distinct_and_on_their_node)
{
    struct world w;
    int a, b, c;
    world_init(&w, 2, 8, 2);
    a = queued(&w, 2, 2, 1, 1);
    b = queued(&w, 1, 1, 1, 2);
    c = queued(&w, 2, 2, 1, 3); /* one GPU left */
    plan(&w, &policy_fifo);
    check_invariants(&w, "fifo");
    ck_assert_int_eq(w.out[a].workers, 2);
    ck_assert_int_eq(policy_where(&w.s, a, &w.out[a])->nparts, 1); /* one node, not two */
    ck_assert_int_eq(w.out[b].workers, 1);
    ck_assert_int_eq(w.out[c].workers, 0);
    world_free(&w);
}
END_TEST

START_TEST(fifo_backoff_gets_nothing)
{
    struct world w;
    int a;
    world_init(&w, 1, 4, 0);
    a = queued(&w, 1, 1, 0, 1);
    w.job[a].eligible = 0;
    plan(&w, &policy_fifo);
    ck_assert_int_eq(w.out[a].workers, 0);
    world_free(&w);
}
END_TEST

/* Starvation: after reserve_after_s a large job stops the backfill past it. */
START_TEST(fifo_reservation_bounds_starvation)
{
    struct world w;
    int big, small;
    world_init(&w, 1, 4, 0);
    running(&w, 2, 2, 0, 2, 9000);
    big = queued(&w, 4, 4, 0, 100);
    small = queued(&w, 1, 1, 0, 200);
    w.s.now = 100 + w.s.params.reserve_after_s - 1;
    plan(&w, &policy_fifo);
    ck_assert_int_eq(w.out[small].workers, 1); /* backfill while big has not waited long */
    w.s.now = 100 + w.s.params.reserve_after_s;
    plan(&w, &policy_fifo);
    ck_assert_int_eq(w.out[big].workers, 0);
    ck_assert_int_eq(w.out[small].workers, 0); /* held back: the big job goes next */
    world_free(&w);
}
END_TEST

/* Starvation by priority: aging lets a low-priority job overtake. */
START_TEST(fifo_aging_overtakes_priority)
{
    struct world w;
    int low, high;
    world_init(&w, 1, 1, 0);
    low = queued(&w, 1, 1, 0, 0);
    high = queued(&w, 1, 1, 0, 5000);
    w.job[high].priority = 2;
    w.s.now = 5000;
    plan(&w, &policy_fifo);
    ck_assert_int_eq(w.out[high].workers, 1);
    w.s.now = 3 * w.s.params.aging_s; /* low has gained 3 levels, high none */
    w.job[high].waiting_since = w.s.now;
    plan(&w, &policy_fifo);
    ck_assert_int_eq(w.out[low].workers, 1);
    ck_assert_int_eq(w.out[high].workers, 0);
    world_free(&w);
}
END_TEST

/* ---- priority ---- */

START_TEST(priority_preempts_lower_only_when_it_helps)
{
    struct world w;
    int low, mid, high;
    world_init(&w, 1, 4, 0);
    low = running(&w, 2, 2, 0, 2, 9000);
    mid = running(&w, 2, 2, 0, 2, 9500);
    w.job[mid].priority = 5;
    high = queued(&w, 2, 2, 0, 9990);
    w.job[high].priority = 10;
    plan(&w, &policy_priority);
    check_invariants(&w, "priority");
    ck_assert_int_eq(w.out[high].workers, 2);
    ck_assert_int_eq(w.out[low].workers, 0); /* the lowest priority goes */
    ck_assert_int_eq(w.out[mid].workers, 2);
    ck_assert_ptr_nonnull(strstr(w.out[low].reason, "preempted"));
    /* A job that would not fit even after every lower one went stops nobody. */
    w.job[high].min = w.job[high].max = 5;
    plan(&w, &policy_priority);
    ck_assert_int_eq(w.out[high].workers, 0);
    ck_assert_int_eq(w.out[low].workers, 2);
    ck_assert_int_eq(w.out[mid].workers, 2);
    /* Equal priority never preempts. */
    w.job[high].min = w.job[high].max = 2;
    w.job[high].priority = 0;
    plan(&w, &policy_priority);
    ck_assert_int_eq(w.out[high].workers, 0);
    world_free(&w);
}
END_TEST

/* Two arrivals that each need a victim take different ones, and a third, for which nothing
 * of lower priority is left, stops nobody: the victims are counted once per pass. */
START_TEST(priority_victims_are_taken_once)
{
    struct world w;
    int a, b, h1, h2, h3;
    world_init(&w, 1, 4, 0);
    a = running(&w, 2, 2, 0, 2, 9000);
    b = running(&w, 2, 2, 0, 2, 9500);
    h1 = queued(&w, 2, 2, 0, 9990);
    h2 = queued(&w, 2, 2, 0, 9991);
    h3 = queued(&w, 2, 2, 0, 9992);
    w.job[h1].priority = w.job[h2].priority = w.job[h3].priority = 10;
    plan(&w, &policy_priority);
    check_invariants(&w, "priority");
    ck_assert_int_eq(w.out[h1].workers, 2);
    ck_assert_int_eq(w.out[h2].workers, 2);
    ck_assert_int_eq(w.out[h3].workers, 0);
    ck_assert_int_eq(w.out[a].workers, 0);
    ck_assert_int_eq(w.out[b].workers, 0);
    world_free(&w);
}
END_TEST

START_TEST(priority_preempted_job_comes_back_by_aging)
{
    struct world w;
    int low, high;
    world_init(&w, 1, 2, 0);
    low = queued(&w, 2, 2, 0, 0);
    high = running(&w, 2, 2, 0, 2, 0);
    w.job[high].priority = 3;
    w.s.now = 3 * w.s.params.aging_s - 1;
    plan(&w, &policy_priority);
    ck_assert_int_eq(w.out[low].workers, 0);
    w.s.now = 4 * w.s.params.aging_s; /* low: 0 + 4 levels > 3 */
    plan(&w, &policy_priority);
    ck_assert_int_eq(w.out[low].workers, 2);
    ck_assert_int_eq(w.out[high].workers, 0);
    world_free(&w);
}
END_TEST

/* ---- tiresias ---- */

START_TEST(tiresias_least_attained_first_and_preempts)
{
    struct world w;
    int old, fresh;
    world_init(&w, 1, 8, 4);
    old = running(&w, 4, 4, 1, 4, 1000);
    w.job[old].service = w.s.params.las_threshold + 1; /* in the second queue */
    fresh = queued(&w, 4, 4, 1, 9990);
    plan(&w, &policy_tiresias);
    check_invariants(&w, "tiresias");
    ck_assert_int_eq(w.out[fresh].workers, 4);
    ck_assert_int_eq(w.out[old].workers, 0);
    /* Two jobs in the first queue: first come, first served, and nobody is preempted. */
    w.job[old].service = 100;
    plan(&w, &policy_tiresias);
    ck_assert_int_eq(w.out[old].workers, 4);
    ck_assert_int_eq(w.out[fresh].workers, 0);
    world_free(&w);
}
END_TEST

START_TEST(tiresias_starved_job_is_promoted)
{
    struct world w;
    int starved, fresh;
    world_init(&w, 1, 8, 4);
    starved = queued(&w, 4, 4, 1, 0);
    w.job[starved].service = w.s.params.las_threshold * 2;
    w.job[starved].run_time = 1000;
    w.job[starved].waiting_since = 5000;
    fresh = running(&w, 4, 4, 1, 4, 9000);
    w.s.now = 5000 + w.s.params.starve_factor * 1000 - 1;
    plan(&w, &policy_tiresias);
    ck_assert_int_eq(w.out[starved].workers, 0);
    w.s.now = 5000 + w.s.params.starve_factor * 1000;
    plan(&w, &policy_tiresias);
    ck_assert_int_eq(w.out[starved].workers, 4); /* back in the first queue, and older */
    ck_assert_int_eq(w.out[fresh].workers, 0);
    world_free(&w);
}
END_TEST

/* ---- every policy: random snapshots ---- */

static unsigned lcg(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

START_TEST(invariants_and_fixed_point_for_every_policy)
{
    const struct policy_ops *ps[] = {&policy_fifo, &policy_priority, &policy_tiresias,
                                     &policy_dynamic};
    unsigned seed = 7;
    for (int round = 0; round < 200; round++) {
        for (size_t p = 0; p < sizeof(ps) / sizeof(ps[0]); p++) {
            struct world w;
            int nodes = 1 + (int)(lcg(&seed) % 4), gpus = (int)(lcg(&seed) % 3) * 2;
            int njobs = 1 + (int)(lcg(&seed) % 20);
            world_init(&w, nodes, 8, gpus);
            for (int k = 0; k < njobs; k++) {
                int gpw = gpus > 0 ? (int)(lcg(&seed) % 2) : 0;
                int min = 1 + (int)(lcg(&seed) % 3), max = min + (int)(lcg(&seed) % 6);
                int i = queued(&w, min, max, gpw, (double)(lcg(&seed) % 9000));
                w.job[i].priority = (int)(lcg(&seed) % 3);
                w.job[i].service = (double)(lcg(&seed) % 3) * w.s.params.las_threshold;
                w.job[i].run_time = (double)(lcg(&seed) % 2000);
                w.job[i].eligible = lcg(&seed) % 8 != 0;
                if (lcg(&seed) % 2) {
                    speed_observe(&w.speed[i], min, 1.0 + lcg(&seed) % 5);
                    w.job[i].work_left = (double)(lcg(&seed) % 100000);
                }
            }
            /* Steady state: planning again where the plan was carried out soon changes
             * nothing, and no job ever goes back to a size it left. Usually the first plan
             * is the fixed point; a second pass may still use room that placement order
             * left fragmented in the first. */
            int hist[4][MAXJ], fixed = 0, fixed_at = -1;
            for (int pass = 0; pass < 4 && !fixed; pass++) {
                plan(&w, ps[p]);
                check_invariants(&w, ps[p]->name);
                fixed = pass > 0;
                for (int i = 0; i < w.n; i++) {
                    hist[pass][i] = w.out[i].workers;
                    if (pass > 0 &&
                        (w.out[i].workers != w.job[i].workers ||
                         (w.job[i].workers > 0 &&
                          !placement_equal(policy_where(&w.s, i, &w.out[i]), &w.place[i]))))
                        fixed = 0;
                    for (int q = 0; q + 1 < pass; q++)
                        ck_assert_msg(hist[q][i] != hist[pass][i] || hist[q + 1][i] == hist[q][i],
                                      "%s round %d: job %d goes back to %d workers", ps[p]->name,
                                      round, i, hist[pass][i]);
                }
                if (!fixed)
                    carry_out(&w);
                else
                    fixed_at = pass;
            }
            ck_assert_msg(fixed, "%s round %d: still changing after 4 passes", ps[p]->name, round);
            /* Without GPUs nothing fragments: the first plan is the fixed point. */
            if (gpus == 0)
                ck_assert_msg(hist[1][0] == hist[0][0] && fixed_at == 1,
                              "%s round %d: a CPU-only plan changed on the second pass",
                              ps[p]->name, round);
            world_free(&w);
        }
    }
}
END_TEST

/* Pinned resources (attempts being stopped, reservations) are never planned on. */
START_TEST(pinned_is_left_alone)
{
    const struct policy_ops *ps[] = {&policy_fifo, &policy_priority, &policy_tiresias,
                                     &policy_dynamic};
    for (size_t p = 0; p < sizeof(ps) / sizeof(ps[0]); p++) {
        struct world w;
        struct placement pin = {0};
        int a;
        world_init(&w, 1, 8, 4);
        ck_assert_int_eq(usage_place(&w.pinned, 3, 1, 1, &pin), 0);
        ck_assert_int_eq(usage_apply(&w.pinned, &pin, 1, 1), 0);
        a = queued(&w, 1, 4, 1, 1);
        plan(&w, ps[p]);
        check_invariants(&w, ps[p]->name);
        ck_assert_int_eq(w.out[a].workers, 1);
        placement_clear(&pin);
        world_free(&w);
    }
}
END_TEST

START_TEST(lookup_by_name)
{
    ck_assert_ptr_eq(policy_find("fifo"), &policy_fifo);
    ck_assert_ptr_eq(policy_find("priority"), &policy_priority);
    ck_assert_ptr_eq(policy_find("tiresias"), &policy_tiresias);
    ck_assert_ptr_eq(policy_find("dynamic"), &policy_dynamic);
    ck_assert_ptr_null(policy_find("lottery"));
    ck_assert_ptr_null(policy_find(NULL));
    ck_assert(policy_dynamic.elastic && !policy_fifo.elastic);
}
END_TEST

/* order_sort's order, the slow and obvious way: ascending keys (== equal: -0.0 is 0.0),
 * then the job index. */
static int sorted_before(const struct order_key *a, const struct order_key *b)
{
    for (int k = 0; k < 3; k++)
        if (a->k[k] != b->k[k])
            return a->k[k] < b->k[k];
    return a->job < b->job;
}

/* order_sort finds each key's class in a hash table (few classes: counting sort) and
 * falls back to qsort (more than 64): both must give the obvious order, -0.0 and 0.0 in
 * one class, whatever the number of classes. */
START_TEST(order_sort_is_the_obvious_order)
{
    enum { N = 1000 };
    static struct order_key key[N], want[N];
    static int order[N];
    unsigned seed = 11;
    for (int trial = 0; trial < 40; trial++) {
        int classes = trial < 20 ? 1 + trial * 3 : 30 + trial * 2; /* 1 .. 58, then 70 .. 108 */
        int n = trial % 5 == 0 ? trial : N;
        for (int i = 0; i < n; i++) {
            int c;
            seed = seed * 1103515245u + 12345u;
            c = (int)((seed >> 16) % (unsigned)classes);
            /* (-priority, bucket, submitted): a priority of 0 negates to -0.0; submission
             * times rise, except in every fourth trial */
            key[i] = (struct order_key){{c % 3 == 0 ? -0.0 : -(double)(c % 3), (double)(c / 3),
                                         trial % 4 == 3 ? (double)((seed >> 8) % 50) : (double)i},
                                        i};
            if (c % 3 == 0 && i % 2)
                key[i].k[0] = 0.0;
        }
        memcpy(want, key, (size_t)n * sizeof(*key));
        for (int i = 1; i < n; i++) /* insertion sort: stable, and plainly right */
            for (int j = i; j > 0 && sorted_before(&want[j], &want[j - 1]); j--) {
                struct order_key t = want[j];
                want[j] = want[j - 1];
                want[j - 1] = t;
            }
        order_sort(key, n, order);
        for (int i = 0; i < n; i++)
            ck_assert_msg(order[i] == want[i].job,
                          "trial %d (%d classes): position %d is job %d, not %d", trial, classes, i,
                          order[i], want[i].job);
    }
}
END_TEST

int main(void)
{
    const TTest *tests[] = {order_sort_is_the_obvious_order,
                            fifo_order_and_backfill,
                            fifo_most_workers_that_fit,
                            fifo_never_stops_a_running_job,
                            fifo_priority_then_submission,
                            fifo_gpus_are_distinct_and_on_their_node,
                            fifo_backoff_gets_nothing,
                            fifo_reservation_bounds_starvation,
                            fifo_aging_overtakes_priority,
                            priority_preempts_lower_only_when_it_helps,
                            priority_victims_are_taken_once,
                            priority_preempted_job_comes_back_by_aging,
                            tiresias_least_attained_first_and_preempts,
                            tiresias_starved_job_is_promoted,
                            invariants_and_fixed_point_for_every_policy,
                            pinned_is_left_alone,
                            lookup_by_name,
                            NULL};
    return unit_main("policy", tests, 60);
}
