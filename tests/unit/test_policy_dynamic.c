/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_policy_dynamic.c - the dynamic policy on hand-made snapshots (policy_world.c): it
 * starts jobs small and grows them into free GPUs while that raises the completion rate,
 * shrinks them for arrivals, with hysteresis and never on a prediction alone; and where a
 * resize puts a job (as few nodes as it can).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_world.h"
#include "unit.h"

/* ---- dynamic ---- */

/* Throughput that scales perfectly: thr(n) = n. */
static void linear_speed(struct world *w, int i)
{
    speed_observe(&w->speed[i], 1, 1.0);
    speed_observe(&w->speed[i], 2, 2.0);
    speed_observe(&w->speed[i], 4, 4.0);
}

START_TEST(dynamic_starts_at_min_and_doubles_into_free_gpus)
{
    struct world w;
    int a;
    world_init(&w, 2, 8, 4);
    a = queued(&w, 1, 8, 1, 1);
    linear_speed(&w, a);
    w.job[a].work_left = 100000;
    plan(&w, &policy_dynamic);
    check_invariants(&w, "dynamic");
    ck_assert_int_eq(w.out[a].workers, 8);
    world_free(&w);
}
END_TEST

START_TEST(dynamic_shrinks_a_job_for_an_arrival)
{
    struct world w;
    int a, b;
    world_init(&w, 1, 8, 4);
    a = running(&w, 1, 4, 1, 4, 5000);
    linear_speed(&w, a);
    w.job[a].work_left = 100000;
    b = queued(&w, 1, 4, 1, 9999);
    linear_speed(&w, b);
    w.job[b].work_left = 100000;
    plan(&w, &policy_dynamic);
    check_invariants(&w, "dynamic");
    ck_assert_int_ge(w.out[b].workers, 1);
    ck_assert_int_lt(w.out[a].workers, 4);
    ck_assert_ptr_nonnull(strstr(w.out[a].reason, "shrink"));
    world_free(&w);
}
END_TEST

START_TEST(dynamic_grows_when_another_ends)
{
    struct world w;
    int a;
    world_init(&w, 1, 8, 4);
    a = running(&w, 1, 4, 1, 2, 5000);
    linear_speed(&w, a);
    w.job[a].work_left = 100000; /* 50000 s left at 2: doubling saves 25000 s */
    plan(&w, &policy_dynamic);
    ck_assert_int_eq(w.out[a].workers, 4);
    ck_assert_ptr_nonnull(strstr(w.out[a].reason, "grow 2 -> 4"));
    world_free(&w);
}
END_TEST

/* Hysteresis: a gain below restart cost x hysteresis changes nothing; above, it does. */
START_TEST(dynamic_hysteresis)
{
    struct world w;
    int a;
    world_init(&w, 1, 8, 4);
    a = running(&w, 1, 4, 1, 2, 5000);
    linear_speed(&w, a);
    w.job[a].restart_cost = 10;
    w.s.params.hysteresis = 2;
    /* At 2 it has 19 s left; at 4, 9.5 s: 9.5 s saved < 10 s x 2. */
    w.job[a].work_left = 38;
    plan(&w, &policy_dynamic);
    ck_assert_int_eq(w.out[a].workers, 2);
    ck_assert(placement_equal(policy_where(&w.s, a, &w.out[a]), &w.place[a]));
    /* 25 s saved > 20 s. */
    w.job[a].work_left = 100;
    plan(&w, &policy_dynamic);
    ck_assert_int_eq(w.out[a].workers, 4);
    world_free(&w);
}
END_TEST

/* A job that does not scale is not given more GPUs than its minimum. */
START_TEST(dynamic_does_not_grow_what_does_not_scale)
{
    struct world w;
    int a, b;
    world_init(&w, 1, 8, 4);
    a = queued(&w, 1, 4, 1, 1);
    speed_observe(&w.speed[a], 1, 10.0);
    speed_observe(&w.speed[a], 2, 9.0);
    w.job[a].work_left = 100000;
    b = queued(&w, 1, 4, 1, 2);
    linear_speed(&w, b);
    w.job[b].work_left = 100000;
    plan(&w, &policy_dynamic);
    ck_assert_int_eq(w.out[a].workers, 1);
    ck_assert_int_eq(w.out[b].workers, 2); /* doubled; a second doubling does not fit */
    world_free(&w);
}
END_TEST

/*
 * Measured at 2 and 4 with a ring term three times the compute, the fitted model puts 1
 * worker above both. A job running at 4 must not be shrunk to 1 for that prediction: it
 * shrinks for room, or for a smaller size measured faster, never for a guess.
 */
START_TEST(dynamic_never_shrinks_on_a_prediction)
{
    struct world w;
    int a;
    world_init(&w, 1, 8, 4);
    a = running(&w, 1, 4, 1, 4, 5000);
    speed_observe(&w.speed[a], 2, 1.0 / 2.0);   /* tau(2) = b/2 + c/2 with b = 1, c = 3 */
    speed_observe(&w.speed[a], 4, 1.0 / 1.375); /* tau(4) = b/4 + 3c/8 */
    w.job[a].work_left = 100000;
    plan(&w, &policy_dynamic);
    ck_assert_msg(w.out[a].workers == 4, "shrunk to %d: %s", w.out[a].workers, w.out[a].reason);
    world_free(&w);
}
END_TEST

/* Running at a size not measured yet, a job is not shrunk for what the model says of it. */
START_TEST(dynamic_keeps_an_unmeasured_size)
{
    struct world w;
    int a;
    world_init(&w, 1, 8, 4);
    a = running(&w, 1, 4, 1, 4, 5000);
    /* Measured at 1 and 2 with c = 3b: the model puts 4 (0.73) below 1 (1.0). */
    speed_observe(&w.speed[a], 1, 1.0);
    speed_observe(&w.speed[a], 2, 0.5);
    ck_assert(speed_at(&w.speed[a], 4) < 1.0);
    w.job[a].work_left = 100000;
    plan(&w, &policy_dynamic);
    ck_assert_msg(w.out[a].workers == 4, "shrunk to %d: %s", w.out[a].workers, w.out[a].reason);
    /* A job ranked before it that needs the room still gets it. */
    {
        int b = queued(&w, 2, 2, 1, 1);
        w.job[b].priority = 5;
        plan(&w, &policy_dynamic);
        ck_assert_int_eq(w.out[b].workers, 2);
        ck_assert_int_le(w.out[a].workers, 2);
        ck_assert_ptr_nonnull(strstr(w.out[a].reason, "need the room"));
    }
    world_free(&w);
}
END_TEST

/*
 * Free GPUs go where they raise the completion rate 1/T the most per GPU, not where they
 * save the most seconds (Capes' rule). A short job that scales poorly (1.4x on 2 workers,
 * 1.8x on 4) against a long one that scales perfectly, on 6 GPUs: the short one's steps
 * raise 1/T by 4e-3 and 2e-3 per GPU, the long one's by 1e-5, so the short one gets 4
 * and the long one the 2 left. Most seconds per GPU would have given the long one 4.
 */
START_TEST(dynamic_grows_what_raises_the_completion_rate)
{
    struct world w;
    int a, b;
    world_init(&w, 1, 8, 6);
    a = queued(&w, 1, 4, 1, 1);
    speed_observe(&w.speed[a], 1, 1.0);
    speed_observe(&w.speed[a], 2, 1.4);
    speed_observe(&w.speed[a], 4, 1.8);
    w.job[a].work_left = 100; /* 100 s on 1, 71 s on 2, 56 s on 4 */
    b = queued(&w, 1, 8, 1, 2);
    linear_speed(&w, b);
    w.job[b].work_left = 100000;
    plan(&w, &policy_dynamic);
    check_invariants(&w, "dynamic");
    ck_assert_int_eq(w.out[a].workers, 4);
    ck_assert_int_eq(w.out[b].workers, 2);
    world_free(&w);
}
END_TEST

/* ---- placement: a resize restarts the job, so it packs onto as few nodes as it can ---- */

/* Places sizes size[0 .. w->n - 1] in job order (policy_place). */
static void place_sizes(struct world *w, const int *size)
{
    int order[MAXJ];
    for (int i = 0; i < w->n; i++)
        order[i] = i;
    policy_targets_clear(w->out, w->n);
    memset(w->out, 0, sizeof(w->out));
    w->s.job = w->job;
    w->s.njobs = w->n;
    ck_assert_int_eq(policy_place(&w->s, size, order, w->out), 0);
}

/* A shrink keeps the job's largest parts: 4 workers on node0:1 + node1:3 shrunk to 3 stay
 * on node1 alone (keeping the first workers in rank order would span both nodes). */
START_TEST(place_shrink_keeps_the_largest_parts)
{
    struct world w;
    struct placement grown = {0};
    int a, c, size[2];
    world_init(&w, 2, 8, 4);
    c = running(&w, 3, 3, 1, 3, 5000); /* node0: 3 of 4 GPUs */
    a = running(&w, 1, 4, 1, 1, 5000); /* node0's last GPU */
    ck_assert_int_eq(w.place[a].part[0].node, 0);
    ck_assert_int_eq(usage_resize(&w.taken, &w.place[a], 4, 1, 1, &grown), 0);
    ck_assert_int_eq(grown.nparts, 2); /* node0:1, then node1:3 */
    ck_assert_int_eq(grown.part[0].node, 0);
    ck_assert_int_eq(usage_apply(&w.taken, &w.place[a], 1, -1), 0);
    placement_clear(&w.place[a]);
    w.place[a] = grown;
    ck_assert_int_eq(usage_apply(&w.taken, &w.place[a], 1, 1), 0);
    w.job[a].workers = 4;
    size[c] = 3;
    size[a] = 3;
    place_sizes(&w, size);
    check_invariants(&w, "place");
    ck_assert_int_eq(w.out[a].workers, 3);
    ck_assert_int_eq(w.out[a].placement.nparts, 1);
    ck_assert_int_eq(w.out[a].placement.part[0].node, 1);
    world_free(&w);
}
END_TEST

/* A grow takes a fresh placement where that spans fewer nodes: 2 workers on node0 (1 GPU
 * left there) grown to 4 move to the empty node1, rather than node0:3 + node1:1. */
START_TEST(place_grow_moves_to_fewer_nodes)
{
    struct world w;
    int a, c, size[2];
    world_init(&w, 2, 8, 4);
    c = running(&w, 1, 1, 1, 1, 5000); /* node0 */
    a = running(&w, 1, 4, 1, 2, 5000); /* node0: the fullest node that fits */
    ck_assert_int_eq(w.place[a].nparts, 1);
    ck_assert_int_eq(w.place[a].part[0].node, 0);
    size[c] = 1;
    size[a] = 4;
    place_sizes(&w, size);
    check_invariants(&w, "place");
    ck_assert_int_eq(w.out[a].workers, 4);
    ck_assert_int_eq(w.out[a].placement.nparts, 1);
    ck_assert_int_eq(w.out[a].placement.part[0].node, 1);
    ck_assert(w.out[c].unchanged);
    world_free(&w);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {dynamic_starts_at_min_and_doubles_into_free_gpus,
                            dynamic_shrinks_a_job_for_an_arrival,
                            dynamic_grows_when_another_ends,
                            dynamic_hysteresis,
                            dynamic_does_not_grow_what_does_not_scale,
                            dynamic_never_shrinks_on_a_prediction,
                            dynamic_keeps_an_unmeasured_size,
                            dynamic_grows_what_raises_the_completion_rate,
                            place_shrink_keeps_the_largest_parts,
                            place_grow_moves_to_fewer_nodes,
                            NULL};
    return unit_main("policy_dynamic", tests, 60);
}
