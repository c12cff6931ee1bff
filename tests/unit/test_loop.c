/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_loop.c - the scheduler loop's diff-and-apply on the sim backend: starts, resizes
 * (stop, then restart at the new size), preemption, cancels and stops while stopping, kill
 * deadlines, failed starts, attempts that a resource manager placed elsewhere than planned,
 * nodes going out of service and back, and the rule that every change is journaled before the
 * backend sees it.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/backend/sim/sim.h"
#include "scheduler/core/loop.h"
#include "unit.h"

/* ---- a log that the journal and the backend both write to, in order ---- */

static char logbuf[2000][256];
static int nlog;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    va_list ap;
    if (nlog >= 2000)
        return;
    va_start(ap, fmt);
    vsnprintf(logbuf[nlog++], sizeof(logbuf[0]), fmt, ap);
    va_end(ap);
}

/* The index of the first log line at or after from that starts with prefix, or -1. */
static int find(int from, const char *prefix)
{
    for (int i = from; i < nlog; i++)
        if (strncmp(logbuf[i], prefix, strlen(prefix)) == 0)
            return i;
    return -1;
}

/* 1 when some log line starts with prefix and contains text. */
static int has(const char *prefix, const char *text)
{
    for (int i = find(0, prefix); i >= 0; i = find(i + 1, prefix))
        if (strstr(logbuf[i], text) != NULL)
            return 1;
    return 0;
}

static void dump(void)
{
    for (int i = 0; i < nlog; i++)
        fprintf(stderr, "  %s\n", logbuf[i]);
}

/* ---- the recording journal ---- */

static int fail_commit;

static int j_begin(void *j, struct error *err)
{
    note("J begin");
    return 0;
}

static int j_commit(void *j, struct error *err)
{
    note("J commit");
    if (fail_commit)
        return errno = EIO, errprintf(err, "the test's journal refuses");
    return 0;
}

static int j_transition(void *j, const struct loop_job *job, const char *state, const char *type,
                        const char *message, const struct journal_sched *s, struct error *err)
{
    note("J %s %s %s", type, job->id, state);
    return 0;
}

static int j_starting(void *j, const struct loop_job *job, int attempt, const struct placement *p,
                      const char *reason, const struct journal_sched *s, struct error *err)
{
    note("J starting %s %d %d", job->id, attempt, p->workers);
    return 0;
}

static int j_started(void *j, const struct loop_job *job, int attempt, const struct placement *p,
                     const char *backend_id, const char *run_dir, const struct journal_sched *s,
                     struct error *err)
{
    note("J started %s %d %d", job->id, attempt, p->workers);
    return 0;
}

static int j_stopping(void *j, const struct loop_job *job, const char *type, const char *reason,
                      struct error *err)
{
    note("J %s %s (%s)", type, job->id, reason);
    return 0;
}

static int j_ended(void *j, const struct loop_job *job, int attempt, int status, double stop_s,
                   const char *state, const char *type, const char *reason,
                   const struct journal_sched *s, struct error *err)
{
    note("J ended %s %d %d %s %s: %s", job->id, attempt, status, state, type, reason);
    return 0;
}

static int j_progress(void *j, const struct loop_job *job, int attempt, double start_s, double thr,
                      struct error *err)
{
    if (start_s >= 0)
        note("J progress %s %d start %.0f", job->id, attempt, start_s);
    return 0;
}

static int j_placed(void *j, const struct loop_job *job, int attempt, const struct placement *p,
                    const char *message, struct error *err)
{
    note("J placed %s %d %s", job->id, attempt, message);
    return 0;
}

static const struct journal_ops journal = {
    .begin = j_begin,
    .commit = j_commit,
    .transition = j_transition,
    .starting = j_starting,
    .started = j_started,
    .stopping = j_stopping,
    .ended = j_ended,
    .progress = j_progress,
    .placed = j_placed,
};

/* ---- the sim backend, with its calls logged ---- */

/* While set, the resource manager cannot be reached: starts fail with EAGAIN, as the Slurm
 * backend's do while slurmctld is down. */
static int manager_down;

static int b_start(void *ctx, const struct backend_start *s, char *id, size_t idlen,
                   struct error *err)
{
    int rc;
    if (manager_down) {
        note("B start %s %d %d -> unreachable", s->job_id, s->attempt, s->placement->workers);
        errprintf(err, "slurmctld cannot be reached (the test's outage)");
        errno = EAGAIN;
        return -1;
    }
    rc = backend_sim_ops.start(ctx, s, id, idlen, err);
    note("B start %s %d %d -> %s", s->job_id, s->attempt, s->placement->workers,
         rc == 0 ? id : "failed");
    return rc;
}

/* While set, every attempt that ends was lost by the resource manager (a node failed). */
static int manager_loses;

static int b_poll(void *ctx, struct backend_event *out, int max)
{
    int n = backend_sim_ops.poll(ctx, out, max);
    for (int i = 0; i < n; i++)
        if (out[i].kind == BACKEND_EXITED && manager_loses) {
            out[i].lost = 1;
            snprintf(out[i].reason, sizeof(out[i].reason), "node failure (the test's)");
        }
    return n;
}

static int b_signal(void *ctx, const char *id, int sig)
{
    note("B signal %s %d", id, sig);
    return backend_sim_ops.signal(ctx, id, sig);
}

static struct backend_ops logged;

/* ---- a resource manager that places attempts itself (as Slurm does) ---- */

/* Where the manager puts each job's attempts (node), and whether it has said so yet. */
static struct {
    char job[16], id[64];
    int node, workers, gpw, release, told;
} placed[8];
static int nplaced;

static int m_start(void *ctx, const struct backend_start *s, char *id, size_t idlen,
                   struct error *err)
{
    int rc = b_start(ctx, s, id, idlen, err);
    for (int i = 0; rc == 0 && i < nplaced; i++)
        if (strcmp(placed[i].job, s->job_id) == 0) {
            snprintf(placed[i].id, sizeof(placed[i].id), "%s", id);
            placed[i].workers = s->placement->workers;
            placed[i].gpw = s->gpus_per_worker;
            placed[i].told = 0;
        }
    return rc;
}

static int m_poll(void *ctx, struct backend_event *out, int max)
{
    int n = backend_sim_ops.poll(ctx, out, max);
    for (int i = 0; i < nplaced && n < max; i++)
        if (placed[i].id[0] && placed[i].release && !placed[i].told) {
            memset(&out[n], 0, sizeof(out[n]));
            out[n].kind = BACKEND_PLACED;
            snprintf(out[n].id, sizeof(out[n].id), "%s", placed[i].id);
            n++;
            placed[i].told = 1;
        }
    return n;
}

/* The attempt's workers all on its job's node, on the GPUs after those of the jobs placed
 * there before it. */
static int m_placement_of(void *ctx, const char *id, const struct cluster *c, struct placement *out)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < nplaced; i++)
        if (strcmp(placed[i].id, id) == 0) {
            int g = placed[i].workers * placed[i].gpw, first = 0;
            for (int k = 0; k < i; k++)
                if (placed[k].id[0] && placed[k].node == placed[i].node)
                    first += placed[k].workers * placed[k].gpw;
            out->part = calloc(1, sizeof(*out->part));
            out->gpu = calloc((size_t)g + 1, sizeof(int));
            ck_assert(out->part != NULL && out->gpu != NULL);
            out->part[0] = (struct placement_part){placed[i].node, placed[i].workers, g, 0};
            for (int k = 0; k < g; k++)
                out->gpu[k] = first + k;
            out->nparts = 1;
            out->workers = placed[i].workers;
            out->ngpus = g;
            return 0;
        }
    return -1;
}

static void manager_places(const char *job, int node, int release)
{
    ck_assert_int_lt(nplaced, 8);
    memset(&placed[nplaced], 0, sizeof(placed[0]));
    snprintf(placed[nplaced].job, sizeof(placed[0].job), "%s", job);
    placed[nplaced].node = node;
    placed[nplaced].release = release;
    nplaced++;
}

/* Which nodes the backend says are out of service (node_states). */
static int node_down[4];

static int m_node_states(void *ctx, struct cluster *c, struct error *err)
{
    for (int n = 0; n < c->nnodes && n < 4; n++)
        c->node[n].offline = node_down[n];
    return 0;
}

static void manager_release(const char *job)
{
    for (int i = 0; i < nplaced; i++)
        if (strcmp(placed[i].job, job) == 0)
            placed[i].release = 1;
}

/* ---- a world ---- */

struct world {
    void *sim;
    struct loop *l;
};

static void world_init(struct world *w, const char *policy, const char *options, double grace)
{
    struct backend_config bc = {.options = options};
    struct loop_config lc = {.kill_grace_s = grace};
    struct error err;
    nlog = 0;
    fail_commit = 0;
    logged = backend_sim_ops;
    logged.start = b_start;
    logged.signal = b_signal;
    logged.poll = b_poll;
    manager_loses = 0;
    nplaced = 0;
    manager_down = 0;
    memset(node_down, 0, sizeof(node_down));
    ck_assert_int_eq(backend_sim_ops.init(&bc, &w->sim, &err), 0);
    lc.policy = policy_find(policy);
    policy_params_default(&lc.params);
    lc.params.restart_cost_s = 10;
    w->l = loop_create(&lc, &logged, w->sim, &journal, NULL, &err);
    ck_assert_msg(w->l != NULL, "%s", err.text);
}

static void world_free(struct world *w)
{
    loop_destroy(w->l);
    backend_sim_ops.fini(w->sim);
}

static void submit(struct world *w, const char *id, int min, int max, int gpw)
{
    struct loop_submit s = {
        .id = id, .min = min, .max = max, .gpw = gpw, .cpw = 1, .submitted = -1, .max_restarts = 2};
    struct error err;
    ck_assert_int_eq(loop_submit(w->l, &s, &err), 0);
}

/* Runs the loop from event to event until the clock would pass until. */
static void run_until(struct world *w, double until)
{
    for (int guard = 0; guard < 100000; guard++) {
        double t;
        loop_step(w->l);
        t = backend_sim_next_event(w->sim);
        if (loop_next_wakeup(w->l) < t)
            t = loop_next_wakeup(w->l);
        if (t > until) {
            backend_sim_advance(w->sim, until);
            loop_step(w->l);
            return;
        }
        backend_sim_advance(w->sim, t);
    }
    ck_abort_msg("the loop does not settle");
}

/* Every backend start and signal of a job comes after the journal recorded it. */
static void check_write_ahead(void)
{
    for (int i = 0; i < nlog; i++) {
        char id[64], want[200];
        int attempt, workers, found = 0;
        if (sscanf(logbuf[i], "B start %63s %d %d", id, &attempt, &workers) == 3) {
            snprintf(want, sizeof(want), "J starting %s %d %d", id, attempt, workers);
            for (int k = 0; k < i; k++)
                found |= strcmp(logbuf[k], want) == 0;
            if (!found)
                dump();
            ck_assert_msg(found, "'%s' was not journaled before", logbuf[i]);
        }
    }
}

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
    const TTest *tests[] = {fifo_runs_jobs_to_completion,
                            dynamic_resize_stops_then_restarts_at_the_new_size,
                            preempted_job_is_queued_and_resumes,
                            cancel_while_stopping_wins,
                            stop_while_resizing_ends_stopped,
                            kill_after_the_grace_period,
                            failed_starts_back_off_then_fail,
                            unreachable_manager_is_not_a_failed_start,
                            lost_attempts_do_not_spend_restarts,
                            unrecorded_pass_changes_nothing,
                            switching_policy_causes_a_pass,
                            sim_model_gets_the_placement_after_the_attempts_grow,
                            loop_follows_where_the_manager_placed_attempts,
                            attempts_that_traded_places_move_together,
                            nothing_new_is_placed_on_an_offline_node,
                            loop_follows_nodes_in_and_out_of_service,
                            NULL};
    return unit_main("loop", tests, 60);
}
