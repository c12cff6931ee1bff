/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_loop_manager.c - the scheduler loop with a resource manager that places attempts
 * itself (as Slurm does): the loop follows where they went, attempts that traded places
 * move together, nothing new goes to a node out of service and nodes come back; and the sim
 * backend's model keeps each attempt's placement as its table grows (loop_world.c).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_world.h"
#include "unit.h"

/* A model whose speed changes every 10 steps, so that the sim backend asks it again during
 * an attempt: job "j<i>" runs on i % 2 + 1 workers, and it counts placements that say
 * otherwise. */
static int wrong_placements;
static int every_10_steps(void *arg, const struct backend_start *s, double done, double *rate,
                          double *until, double *steps)
{
    int want = atoi(s->job_id + 1) % 2 + 1;
    if (s->placement->workers != want || s->placement->ngpus != want)
        wrong_placements++;
    *rate = 1;
    *until = done + 10;
    *steps = 50;
    return 0;
}

/* More attempts at once than the sim backend first has room for (256): its table of
 * attempts moves as it grows, and the model must still get each attempt's own placement
 * at its later speed changes (a stale pointer read freed memory: ASan stops at it, and
 * the count above catches it where the memory was reused). */
START_TEST(sim_model_gets_the_placement_after_the_attempts_grow)
{
    struct world w;
    struct sim_model m = {every_10_steps, NULL};
    world_init(&w, "fifo", "nodes=1,gpus=1000,slots=1000", 5);
    backend_sim_set_model(w.sim, &m);
    wrong_placements = 0;
    for (int i = 0; i < 400; i++) {
        char id[16];
        snprintf(id, sizeof(id), "j%d", i);
        submit(&w, id, i % 2 + 1, i % 2 + 1, 1);
    }
    run_until(&w, 10);
    ck_assert_int_eq(backend_sim_running(w.sim), 400);
    run_until(&w, 1000);
    ck_assert_int_eq(backend_sim_running(w.sim), 0);
    ck_assert_int_eq(wrong_placements, 0);
    world_free(&w);
}
END_TEST

static int node_of(struct world *w, const char *job)
{
    const struct loop_job *j = loop_job(w->l, job);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(j->placement.nparts, 1);
    return j->placement.part[0].node;
}

/* The manager put a and b on node 1, where the loop planned node 0: the loop follows, so
 * that c, which needs a whole node, is planned where the manager has room. */
START_TEST(loop_follows_where_the_manager_placed_attempts)
{
    struct world w;
    world_init(&w, "fifo", "nodes=2,gpus=4,slots=4,start_s=1,stop_s=1", 5);
    logged.start = m_start;
    logged.poll = m_poll;
    logged.placement_of = m_placement_of;
    manager_places("a", 1, 1);
    manager_places("b", 1, 1);
    manager_places("c", 0, 1);
    submit(&w, "a", 2, 2, 1);
    submit(&w, "b", 2, 2, 1);
    run_until(&w, 0.5);
    ck_assert_int_ge(find(0, "B start b 1 2"), 0);
    ck_assert_int_eq(node_of(&w, "a"), 1);
    ck_assert_int_eq(node_of(&w, "b"), 1);
    ck_assert(has("J placed a 1", "on node1") && has("J placed a 1", "planned: node0:2"));
    ck_assert(has("J placed b 1", "on node1"));
    submit(&w, "c", 4, 4, 1);
    run_until(&w, 1.5);
    ck_assert_int_ge(find(0, "B start c 1 4"), 0);
    ck_assert_int_eq(node_of(&w, "c"), 0);
    ck_assert_int_lt(find(0, "J placed c"), 0); /* planned where the manager put it */
    world_free(&w);
}
END_TEST

/* a and b traded places, and the manager tells of a first: a cannot move onto b's planned
 * node yet, and stays as planned; when the manager tells of b, both move together. */
START_TEST(attempts_that_traded_places_move_together)
{
    struct world w;
    world_init(&w, "fifo", "nodes=2,gpus=4,slots=4,start_s=1,stop_s=1", 5);
    logged.start = m_start;
    logged.poll = m_poll;
    logged.placement_of = m_placement_of;
    manager_places("a", 1, 0);
    manager_places("b", 0, 0);
    submit(&w, "a", 4, 4, 1);
    submit(&w, "b", 4, 4, 1);
    run_until(&w, 0.5);
    ck_assert_int_eq(node_of(&w, "a"), 0);
    ck_assert_int_eq(node_of(&w, "b"), 1);
    manager_release("a");
    run_until(&w, 0.7);
    ck_assert_int_eq(node_of(&w, "a"), 0); /* its node is b's, as far as the loop knows */
    ck_assert_int_lt(find(0, "J placed"), 0);
    manager_release("b");
    run_until(&w, 0.9);
    ck_assert_int_eq(node_of(&w, "a"), 1);
    ck_assert_int_eq(node_of(&w, "b"), 0);
    ck_assert_int_ge(find(0, "J placed a 1"), 0);
    ck_assert_int_ge(find(0, "J placed b 1"), 0);
    /* The model is whole: when both end, every slot and GPU is free again (a new job of
     * the whole cluster starts). */
    submit(&w, "c", 8, 8, 1);
    run_until(&w, 2000);
    ck_assert_int_ge(find(0, "B start c 1 8"), 0);
    world_free(&w);
}
END_TEST

/* An offline node takes nothing new: placements go around it, a resize leaves it, and a
 * pass's scratch usages see its free slots and GPUs as taken. */
START_TEST(nothing_new_is_placed_on_an_offline_node)
{
    struct cluster *c = cluster_create(2, 4, 4);
    struct usage u, also;
    struct placement p = {0}, q = {0};
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(usage_init(&u, c), 0);
    ck_assert_int_eq(usage_init(&also, c), 0);
    ck_assert_int_eq(usage_place(&u, 2, 1, 1, &p), 0); /* best fit: node 0 */
    ck_assert_int_eq(p.part[0].node, 0);
    usage_take(&u, &p, 1, 1);
    usage_take(&also, &p, 1, 1);
    c->node[0].offline = 1;
    ck_assert(placement_offline(c, &p));
    ck_assert_int_eq(usage_node_room(&u, 0, 1, 1), 0);
    ck_assert_int_eq(usage_place(&u, 1, 1, 1, &q), 0); /* not in node 0's free half */
    ck_assert_int_eq(q.part[0].node, 1);
    placement_clear(&q);
    ck_assert_int_eq(usage_resize(&u, &p, 3, 1, 1, &q), 0); /* restarts go elsewhere */
    ck_assert_int_eq(q.nparts, 1);
    ck_assert_int_eq(q.part[0].node, 1);
    ck_assert_int_eq(q.workers, 3);
    placement_clear(&q);
    usage_block_offline(&u, &also);
    ck_assert_int_eq(u.slots_free[0], 0);
    ck_assert_int_eq(u.gpus_free[0], 0);
    ck_assert_int_eq(u.gpus_left, 4);
    ck_assert_int_eq(also.gpus_left, 4);
    ck_assert_int_eq(also.slots_free[0], 0);
    usage_take(&u, &p, 1, -1); /* what ran there is given back as before */
    ck_assert_int_eq(u.slots_free[0], 2);
    c->node[0].offline = 0;
    ck_assert(!placement_offline(c, &p));
    placement_clear(&p);
    usage_clear(&also);
    usage_clear(&u);
    cluster_free(c);
}
END_TEST

/* Node 1 is out of service at first: a job of up to 8 workers runs on node 0's 4; when node 1
 * comes back, a waiting job runs there. Then node 0 goes out of service: its job runs on to
 * its end, and a new job waits for node 1 rather than start on node 0. */
START_TEST(loop_follows_nodes_in_and_out_of_service)
{
    struct world w;
    world_init(&w, "fifo", "nodes=2,gpus=4,slots=4,start_s=1,stop_s=1", 5);
    logged.node_states = m_node_states;
    node_down[1] = 1;
    submit(&w, "a", 1, 8, 1);
    submit(&w, "b", 4, 4, 1);
    run_until(&w, 3);
    ck_assert_int_eq(loop_job(w.l, "a")->placement.workers, 4);
    ck_assert_int_eq(node_of(&w, "a"), 0);
    ck_assert_int_eq(loop_job(w.l, "b")->state, LOOP_QUEUED);
    node_down[1] = 0;
    run_until(&w, 10);
    ck_assert_int_eq(loop_job(w.l, "b")->state, LOOP_RUNNING);
    ck_assert_int_eq(node_of(&w, "b"), 1);
    node_down[0] = 1;
    submit(&w, "c", 1, 1, 1);
    run_until(&w, 20);
    ck_assert_int_eq(loop_job(w.l, "a")->state, LOOP_RUNNING); /* drained, not killed */
    ck_assert_int_eq(loop_job(w.l, "c")->state, LOOP_QUEUED);
    /* a (600 steps at 4 workers) ends first; c still waits for node 1, where b runs. */
    while (loop_job(w.l, "a") != NULL)
        run_until(&w, backend_sim_ops.now(w.sim) + 10);
    ck_assert_int_eq(loop_job(w.l, "c")->state, LOOP_QUEUED);
    while (loop_job(w.l, "b") != NULL)
        run_until(&w, backend_sim_ops.now(w.sim) + 10);
    run_until(&w, backend_sim_ops.now(w.sim) + 1);
    ck_assert_int_eq(loop_job(w.l, "c")->state, LOOP_RUNNING);
    ck_assert_int_eq(node_of(&w, "c"), 1);
    world_free(&w);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {sim_model_gets_the_placement_after_the_attempts_grow,
                            loop_follows_where_the_manager_placed_attempts,
                            attempts_that_traded_places_move_together,
                            nothing_new_is_placed_on_an_offline_node,
                            loop_follows_nodes_in_and_out_of_service,
                            NULL};
    return unit_main("loop_manager", tests, 60);
}
