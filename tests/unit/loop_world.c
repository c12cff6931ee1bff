/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop_world.c - the world the scheduler loop's tests (test_loop.c, test_loop_manager.c) run
 * in: the sim backend with its calls logged, a journal that records into the same log, and
 * a resource manager that places attempts itself (as Slurm does) (loop_world.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_world.h"
#include "unit.h"

/* ---- a log that the journal and the backend both write to, in order ---- */

char logbuf[2000][256];
int nlog;

void note(const char *fmt, ...)
{
    va_list ap;
    if (nlog >= 2000)
        return;
    va_start(ap, fmt);
    vsnprintf(logbuf[nlog++], sizeof(logbuf[0]), fmt, ap);
    va_end(ap);
}

/* The index of the first log line at or after from that starts with prefix, or -1. */
int find(int from, const char *prefix)
{
    for (int i = from; i < nlog; i++)
        if (strncmp(logbuf[i], prefix, strlen(prefix)) == 0)
            return i;
    return -1;
}

/* 1 when some log line starts with prefix and contains text. */
int has(const char *prefix, const char *text)
{
    for (int i = find(0, prefix); i >= 0; i = find(i + 1, prefix))
        if (strstr(logbuf[i], text) != NULL)
            return 1;
    return 0;
}

void dump(void)
{
    for (int i = 0; i < nlog; i++)
        fprintf(stderr, "  %s\n", logbuf[i]);
}

/* ---- the recording journal ---- */

int fail_commit;

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
int manager_down;

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
int manager_loses;

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

struct backend_ops logged;

/* ---- a resource manager that places attempts itself (as Slurm does) ---- */

struct placed_attempt placed[8];
int nplaced;

int m_start(void *ctx, const struct backend_start *s, char *id, size_t idlen, struct error *err)
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

int m_poll(void *ctx, struct backend_event *out, int max)
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
int m_placement_of(void *ctx, const char *id, const struct cluster *c, struct placement *out)
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

void manager_places(const char *job, int node, int release)
{
    ck_assert_int_lt(nplaced, 8);
    memset(&placed[nplaced], 0, sizeof(placed[0]));
    snprintf(placed[nplaced].job, sizeof(placed[0].job), "%s", job);
    placed[nplaced].node = node;
    placed[nplaced].release = release;
    nplaced++;
}

/* Which nodes the backend says are out of service (node_states). */
int node_down[4];

int m_node_states(void *ctx, struct cluster *c, struct error *err)
{
    for (int n = 0; n < c->nnodes && n < 4; n++)
        c->node[n].offline = node_down[n];
    return 0;
}

void manager_release(const char *job)
{
    for (int i = 0; i < nplaced; i++)
        if (strcmp(placed[i].job, job) == 0)
            placed[i].release = 1;
}

/* ---- a world ---- */

void world_init(struct world *w, const char *policy, const char *options, double grace)
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

void world_free(struct world *w)
{
    loop_destroy(w->l);
    backend_sim_ops.fini(w->sim);
}

void submit(struct world *w, const char *id, int min, int max, int gpw)
{
    struct loop_submit s = {
        .id = id, .min = min, .max = max, .gpw = gpw, .cpw = 1, .submitted = -1, .max_restarts = 2};
    struct error err;
    ck_assert_int_eq(loop_submit(w->l, &s, &err), 0);
}

/* Runs the loop from event to event until the clock would pass until. */
void run_until(struct world *w, double until)
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
void check_write_ahead(void)
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
