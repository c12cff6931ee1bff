/* SPDX-License-Identifier: Apache-2.0 */
/* sim_loop.c - a scheduler loop over the sim backend (sim_loop.h). */
#include <stdio.h>

#include "sim_loop.h"

static int null_ok(void *j, struct error *err)
{
    return 0;
}

static int null_transition(void *j, const struct loop_job *job, const char *state, const char *type,
                           const char *message, const struct journal_sched *s, struct error *err)
{
    return 0;
}

static int null_starting(void *j, const struct loop_job *job, int attempt,
                         const struct placement *p, const char *reason,
                         const struct journal_sched *s, struct error *err)
{
    return 0;
}

static int null_started(void *j, const struct loop_job *job, int attempt, const struct placement *p,
                        const char *backend_id, const char *run_dir, const struct journal_sched *s,
                        struct error *err)
{
    return 0;
}

static int null_stopping(void *j, const struct loop_job *job, const char *type, const char *reason,
                         struct error *err)
{
    return 0;
}

static int null_ended(void *j, const struct loop_job *job, int attempt, int status, double stop_s,
                      const char *state, const char *type, const char *reason,
                      const struct journal_sched *s, struct error *err)
{
    return 0;
}

static int null_progress(void *j, const struct loop_job *job, int attempt, double start_s,
                         double thr, struct error *err)
{
    return 0;
}

const struct journal_ops sim_journal_null = {
    .begin = null_ok,
    .commit = null_ok,
    .transition = null_transition,
    .starting = null_starting,
    .started = null_started,
    .stopping = null_stopping,
    .ended = null_ended,
    .progress = null_progress,
    .placed = NULL, /* the sim backend starts attempts where the loop asks */
    .spec = NULL,   /* the sim backend runs no command */
};

static void quiet(void *arg, enum log_level level, const char *job, const char *msg) {}

int sim_loop_create(const struct sim_loop_config *c, struct sim_loop *out, struct error *err)
{
    char options[200];
    struct backend_config bc = {.options = options};
    struct loop_config lc = {
        .policy = c->policy,
        .kill_grace_s = c->kill_grace_s,
        .speed_mode = c->speed_mode,
        .log = c->log ? c->log : quiet,
        .log_arg = c->log_arg,
    };

    out->sim = NULL;
    out->loop = NULL;
    snprintf(options, sizeof(options), "nodes=%d,gpus=%d,slots=%d,start_s=%g,stop_s=%g", c->nodes,
             c->gpus_per_node, c->slots_per_node, c->start_s, c->stop_s);
    if (backend_sim_ops.init(&bc, &out->sim, err) < 0)
        return -1;
    if (c->params != NULL)
        lc.params = *c->params;
    else
        policy_params_default(&lc.params);
    out->loop = loop_create(&lc, &backend_sim_ops, out->sim,
                            c->journal ? c->journal : &sim_journal_null, c->journal_arg, err);
    if (out->loop == NULL) {
        backend_sim_ops.fini(out->sim);
        out->sim = NULL;
        return -1;
    }
    return 0;
}

void sim_loop_destroy(struct sim_loop *s)
{
    loop_destroy(s->loop);
    if (s->sim != NULL)
        backend_sim_ops.fini(s->sim);
    s->loop = NULL;
    s->sim = NULL;
}
