/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_loop.c - the scheduler loop's diff-and-apply on the sim backend: starts, resizes
 * (stop, then restart at the new size), preemption, cancels and stops while stopping, kill
 * deadlines, failed starts, and the rule that every change is journaled before the backend
 * sees it. Where a resource manager puts attempts, and nodes in and out of service, are in
 * test_loop_manager.c; the world both run in is loop_world.c.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_world.h"
#include "unit.h"

/* ---- tests ---- */

START_TEST(fifo_runs_jobs_to_completion)
{
    struct world w;
    world_init(&w, "fifo", "nodes=1,gpus=4,slots=8,start_s=10", 5);
    submit(&w, "a", 2, 2, 1);
    submit(&w, "b", 4, 4, 1);
    run_until(&w, 5);
    ck_assert_int_eq(backend_sim_running(w.sim), 1); /* b waits for a's GPUs */
    /* a: 600 steps at 2 steps/s after a 10 s start: ends at 310; b then starts. */
    run_until(&w, 309);
    ck_assert_ptr_nonnull(loop_job(w.l, "a"));
    run_until(&w, 311);
    ck_assert_ptr_null(loop_job(w.l, "a"));
    ck_assert_int_ge(find(0, "J ended a 1 0 SUCCEEDED"), 0);
    ck_assert_int_ge(find(0, "J starting b 1 4"), 0);
    run_until(&w, 310 + 10 + 150 + 1);
    ck_assert_int_eq(loop_njobs(w.l) > 0 ? loop_job_at(w.l, 0) != NULL : 0, 0);
    ck_assert_int_ge(find(0, "J ended b 1 0 SUCCEEDED"), 0);
    ck_assert_int_ge(find(0, "J progress a 1 start 10"), 0);
    check_write_ahead();
    world_free(&w);
}
END_TEST

START_TEST(dynamic_resize_stops_then_restarts_at_the_new_size)
{
    struct world w;
    int stop, sig, ended, restarted;
    world_init(&w, "dynamic", "nodes=1,gpus=4,slots=8,start_s=5,stop_s=2", 30);
    submit(&w, "a", 1, 4, 1);
    run_until(&w, 50);
    ck_assert_int_eq(loop_job(w.l, "a")->placement.workers, 4); /* alone: all of it */
    submit(&w, "b", 1, 4, 1);
    run_until(&w, 60);
    /* a was asked to stop for a resize, journaled first; it exited (stop_s later) and
     * restarted at fewer workers; b runs beside it. */
    stop = find(0, "J resizing a");
    sig = find(0, "B signal s0 15");
    ended = find(0, "J ended a 1 75 QUEUED resized");
    restarted = find(0, "B start a 2");
    if (stop < 0 || sig < 0 || ended < 0 || restarted < 0)
        dump();
    ck_assert_int_ge(stop, 0);
    ck_assert_int_gt(sig, stop);
    ck_assert_int_gt(ended, sig);
    ck_assert_int_gt(restarted, ended);
    ck_assert_int_lt(loop_job(w.l, "a")->placement.workers, 4);
    ck_assert_int_ge(loop_job(w.l, "b")->placement.workers, 1);
    ck_assert_int_le(loop_job(w.l, "a")->placement.workers + loop_job(w.l, "b")->placement.workers,
                     4);
    /* a's work carried over the restart (the checkpoint): not back to zero. */
    ck_assert(backend_sim_steps(w.sim, "a") > 100);
    /* b ends; a grows back into the GPUs it frees. */
    run_until(&w, 2000);
    ck_assert(has("J ended b", "SUCCEEDED succeeded"));
    ck_assert(has("J ended a", "SUCCEEDED succeeded"));
    check_write_ahead();
    {
        struct loop_stats st;
        loop_stats(w.l, &st);
        ck_assert_int_ge(st.resizes, 1);
    }
    world_free(&w);
}
END_TEST

START_TEST(preempted_job_is_queued_and_resumes)
{
    struct world w;
    struct loop_submit s = {
        .id = "hi", .min = 4, .max = 4, .gpw = 1, .cpw = 1, .submitted = -1, .priority = 5};
    struct error err;
    world_init(&w, "priority", "nodes=1,gpus=4,slots=8,start_s=1,stop_s=1", 30);
    submit(&w, "lo", 4, 4, 1);
    run_until(&w, 100);
    ck_assert_int_eq(loop_submit(w.l, &s, &err), 0);
    run_until(&w, 110);
    ck_assert_int_ge(find(0, "J preempting lo"), 0);
    ck_assert_int_ge(find(0, "J ended lo 1 75 QUEUED preempted"), 0);
    ck_assert_int_ge(find(0, "J started hi 1 4"), 0);
    run_until(&w, 1000);
    ck_assert_int_ge(find(0, "J ended hi 1 0 SUCCEEDED"), 0);
    ck_assert_int_ge(find(0, "J ended lo 2 0 SUCCEEDED"), 0);
    /* lo kept the ~98 steps it had done before it was preempted. */
    check_write_ahead();
    world_free(&w);
}
END_TEST

/* Issue 8: a cancel while a stop is under way wins: the job ends CANCELLED. */
START_TEST(cancel_while_stopping_wins)
{
    struct world w;
    struct error err;
    world_init(&w, "fifo", "nodes=1,gpus=4,slots=8,start_s=1,stop_s=10", 60);
    submit(&w, "a", 1, 1, 0);
    run_until(&w, 20);
    ck_assert_int_eq(loop_stop_job(w.l, "a", &err), 0);
    run_until(&w, 22);
    ck_assert_int_eq(loop_job(w.l, "a")->state, LOOP_STOPPING);
    ck_assert_int_eq(loop_cancel(w.l, "a", &err), 0);
    ck_assert_int_eq(loop_stop_job(w.l, "a", &err), -1); /* a stop no longer changes it */
    ck_assert_int_eq(errno, EALREADY);
    run_until(&w, 40);
    if (find(0, "J ended a 1 75 CANCELLED cancelled") < 0)
        dump();
    ck_assert_int_ge(find(0, "J ended a 1 75 CANCELLED cancelled"), 0);
    ck_assert_int_lt(find(0, "J ended a 1 75 STOPPED"), 0);
    ck_assert_int_eq(loop_cancel(w.l, "a", &err), -1);
    ck_assert_int_eq(errno, ENOENT);
    world_free(&w);
}
END_TEST

START_TEST(stop_while_resizing_ends_stopped)
{
    struct world w;
    struct error err;
    world_init(&w, "dynamic", "nodes=1,gpus=4,slots=8,start_s=1,stop_s=5", 60);
    submit(&w, "a", 1, 4, 1);
    run_until(&w, 20);
    submit(&w, "b", 1, 4, 1);
    run_until(&w, 21); /* a is stopping for a resize */
    ck_assert_int_eq(loop_job(w.l, "a")->state, LOOP_STOPPING);
    ck_assert_int_eq(loop_stop_job(w.l, "a", &err), 0);
    run_until(&w, 40);
    ck_assert_int_ge(find(0, "J ended a 1 75 STOPPED stopped"), 0);
    ck_assert_int_lt(find(0, "B start a 2"), 0);
    world_free(&w);
}
END_TEST

START_TEST(kill_after_the_grace_period)
{
    struct world w;
    struct error err;
    world_init(&w, "fifo", "nodes=1,gpus=4,slots=8,start_s=1,stop_s=1000", 5);
    submit(&w, "a", 1, 1, 0);
    run_until(&w, 20);
    ck_assert_int_eq(loop_stop_job(w.l, "a", &err), 0);
    run_until(&w, 24);
    ck_assert_int_lt(find(0, "B signal s0 9"), 0);
    run_until(&w, 30);
    ck_assert_int_ge(find(0, "B signal s0 9"), 0);
    ck_assert_int_ge(find(0, "J ended a 1 137 STOPPED stopped"), 0);
    world_free(&w);
}
END_TEST

/* A model that cannot run job "bad": its starts fail, are retried with backoff, then FAILED. */
static int picky(void *arg, const struct backend_start *s, double done, double *rate, double *until,
                 double *steps)
{
    if (strcmp(s->job_id, "bad") == 0)
        return -1;
    *rate = s->placement->workers;
    *until = *steps = 100;
    return 0;
}

START_TEST(failed_starts_back_off_then_fail)
{
    struct world w;
    struct sim_model m = {picky, NULL};
    world_init(&w, "fifo", "nodes=1,gpus=4,slots=8,start_s=1", 5);
    backend_sim_set_model(w.sim, &m);
    submit(&w, "bad", 1, 1, 0);
    run_until(&w, 0.5);
    ck_assert_int_ge(find(0, "J retry bad QUEUED"), 0);
    ck_assert_int_lt(find(find(0, "J retry bad QUEUED") + 1, "J retry bad QUEUED"), 0);
    run_until(&w, 100); /* backoff 1 s, then 2 s; max_restarts 2 */
    ck_assert_int_ge(find(0, "J failed bad FAILED"), 0);
    ck_assert_ptr_null(loop_job(w.l, "bad"));
    world_free(&w);
}
END_TEST

/* A start that the resource manager could not take (slurmctld down) is not the job's
 * failure: through an outage longer than its restarts' backoff would allow, the job waits,
 * tried again every few seconds, spends no restart, and its first attempt starts as
 * attempt 1 once the manager is back. */
START_TEST(unreachable_manager_is_not_a_failed_start)
{
    struct world w;
    int tries = 0;
    world_init(&w, "fifo", "nodes=1,gpus=4,slots=8,start_s=1", 5);
    manager_down = 1;
    submit(&w, "a", 1, 1, 0); /* max_restarts 2: three failed starts would end it */
    run_until(&w, 30);
    for (int i = find(0, "B start a"); i >= 0; i = find(i + 1, "B start a"))
        tries++;
    ck_assert_int_ge(tries, 4);
    ck_assert_int_le(tries, 8); /* spaced, not one per loop step */
    ck_assert_int_lt(find(0, "J failed a"), 0);
    ck_assert_ptr_nonnull(loop_job(w.l, "a"));
    ck_assert_int_ge(find(0, "J retry a QUEUED"), 0);

    manager_down = 0;
    run_until(&w, 40);
    if (find(0, "J started a 1 1") < 0)
        dump();
    ck_assert_int_ge(find(0, "J started a 1 1"), 0);
    run_until(&w, 2000);
    ck_assert_int_ge(find(0, "J ended a 1 0 SUCCEEDED"), 0);
    world_free(&w);
}
END_TEST

/* Attempts that the resource manager lost (a node failed) are started again without
 * spending the job's restarts, a few times; after that they count as failures, so that a
 * job cannot stay queued forever. max_restarts is 2 here: 3 lost attempts, then 3 failures,
 * and the job fails at its 6th attempt. */
START_TEST(lost_attempts_do_not_spend_restarts)
{
    struct world w;
    world_init(&w, "fifo", "nodes=1,gpus=4,slots=8,start_s=1", 5);
    submit(&w, "a", 1, 1, 0);
    manager_loses = 1;
    for (int k = 1; k <= 6; k++) {
        char line[64], id[64];
        int i;
        snprintf(line, sizeof(line), "B start a %d 1 -> ", k);
        run_until(&w, backend_sim_ops.now(w.sim) + 10);
        i = find(0, line);
        if (i < 0)
            dump();
        ck_assert_int_ge(i, 0);
        snprintf(id, sizeof(id), "%s", logbuf[i] + strlen(line));
        backend_sim_ops.signal(w.sim, id, SIGKILL); /* the node under it fails */
    }
    run_until(&w, backend_sim_ops.now(w.sim) + 10);
    ck_assert(has("J ended a 1 137 QUEUED retry", "without spending a restart (1 of 3"));
    ck_assert(has("J ended a 3 137 QUEUED retry", "(3 of 3 such)"));
    ck_assert(has("J ended a 4 137 QUEUED retry", "restart 1 of 2"));
    ck_assert(has("J ended a 6 137 FAILED failed", "no restarts are left"));
    ck_assert_ptr_null(loop_job(w.l, "a"));
    world_free(&w);
}
END_TEST

/* When the journal cannot record a pass, nothing of it is carried out. */
START_TEST(unrecorded_pass_changes_nothing)
{
    struct world w;
    world_init(&w, "fifo", "nodes=1,gpus=4,slots=8,start_s=1", 5);
    fail_commit = 1;
    submit(&w, "a", 1, 1, 0);
    loop_pass(w.l);
    ck_assert_int_lt(find(0, "B start"), 0);
    ck_assert_int_eq(backend_sim_running(w.sim), 0);
    fail_commit = 0;
    loop_pass(w.l);
    ck_assert_int_ge(find(0, "B start a 1 1"), 0);
    world_free(&w);
}
END_TEST

START_TEST(switching_policy_causes_a_pass)
{
    struct world w;
    world_init(&w, "fifo", "nodes=1,gpus=4,slots=8,start_s=1", 5);
    submit(&w, "a", 1, 4, 1);
    run_until(&w, 10);
    ck_assert_int_eq(loop_job(w.l, "a")->placement.workers, 4); /* fifo: the most that fits */
    loop_set_policy(w.l, &policy_tiresias);
    ck_assert_str_eq(loop_policy(w.l)->name, "tiresias");
    ck_assert(loop_next_wakeup(w.l) <= backend_sim_ops.now(w.sim));
    world_free(&w);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        fifo_runs_jobs_to_completion,        dynamic_resize_stops_then_restarts_at_the_new_size,
        preempted_job_is_queued_and_resumes, cancel_while_stopping_wins,
        stop_while_resizing_ends_stopped,    kill_after_the_grace_period,
        failed_starts_back_off_then_fail,    unreachable_manager_is_not_a_failed_start,
        lost_attempts_do_not_spend_restarts, unrecorded_pass_changes_nothing,
        switching_policy_causes_a_pass,      NULL};
    return unit_main("loop", tests, 60);
}
