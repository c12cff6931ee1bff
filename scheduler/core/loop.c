/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.c - the scheduler loop's table of jobs (loop.h): the loop made and freed, its jobs
 * added, found, dropped and compacted, its settings, and what it shows (stats, describe).
 * The loop is three files that call one way only:
 *   pass.c      a turn: one scheduling pass (snapshot -> policy -> check -> journal ->
 *               carry out) and what each turn looks after (events, kill deadlines, nodes)
 *   attempts.c  attempts on the backend: starts, stops (and the cancel and stop requests),
 *               exits, progress, where the backend put them, recovery
 *   loop.c      the table both of them work on (loop_impl.h)
 *
 * Resources: `used` holds what attempts hold now (running and stopping ones). A place
 * decided for a job that cannot start yet (a resize waiting for its old attempt to exit,
 * or a start waiting for preempted attempts to exit) is reserved: reservations are pinned
 * for the policy, so no later plan gives them away, and each starts as soon as `used`
 * leaves room for it. Every reservation was planned on top of the earlier ones and of the
 * attempts that keep running, so when the attempts being stopped have exited (which the
 * kill deadline bounds) every reservation fits: they cannot deadlock.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_impl.h"

void loop__say(struct loop *l, enum log_level level, const char *job, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    if (l->cfg.log == NULL) {
        log_vmsg(level, job, fmt, ap);
        va_end(ap);
        return;
    }
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    l->cfg.log(l->cfg.log_arg, level, job, msg);
}

struct loop *loop_create(const struct loop_config *cfg, const struct backend_ops *backend,
                         void *backend_ctx, const struct journal_ops *journal, void *journal_ctx,
                         struct error *err)
{
    struct loop *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    l->cfg = *cfg;
    l->b = backend;
    l->bctx = backend_ctx;
    l->jo = journal;
    l->jctx = journal_ctx;
    if (backend->describe(backend_ctx, &l->cluster, err) < 0) {
        free(l);
        return NULL;
    }
    if (usage_init(&l->used, l->cluster) < 0 || usage_init(&l->pinned, l->cluster) < 0 ||
        usage_init(&l->check, l->cluster) < 0 || usage_init(&l->running, l->cluster) < 0 ||
        usage_init(&l->occupied, l->cluster) < 0) {
        usage_clear(&l->used);
        usage_clear(&l->pinned);
        usage_clear(&l->check);
        usage_clear(&l->running);
        cluster_free(l->cluster);
        free(l);
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    }
    l->dirty = 1;
    l->last_pass = -INFINITY;
    l->next_backoff = INFINITY;
    return l;
}

static void job_free(struct loop_job *j)
{
    if (j == NULL)
        return;
    placement_clear(&j->placement);
    placement_clear(&j->reserved);
    free(j);
}

void loop_destroy(struct loop *l)
{
    if (l == NULL)
        return;
    for (int i = 0; i < l->njobs; i++)
        job_free(l->job[i]);
    free(l->job);
    idmap_free(&l->by_id);
    idmap_free(&l->by_backend);
    usage_clear(&l->used);
    usage_clear(&l->pinned);
    usage_clear(&l->check);
    usage_clear(&l->running);
    usage_clear(&l->occupied);
    cluster_free(l->cluster);
    free(l->pj);
    free(l->pmap);
    free(l->out);
    free(l);
}

const struct cluster *loop_cluster(const struct loop *l)
{
    return l->cluster;
}

void loop_node_free(const struct loop *l, int n, int *slots_free, int *gpus_free)
{
    *slots_free = l->used.slots_free[n];
    *gpus_free = l->used.gpus_free[n];
}

const struct policy_ops *loop_policy(const struct loop *l)
{
    return l->cfg.policy;
}

void loop_set_policy(struct loop *l, const struct policy_ops *p)
{
    if (p != NULL && p != l->cfg.policy) {
        loop__say(l, LOG_LEVEL_INFO, NULL, "policy %s -> %s", l->cfg.policy->name, p->name);
        l->cfg.policy = p;
        l->dirty = 1;
    }
}

const struct policy_params *loop_params(const struct loop *l)
{
    return &l->cfg.params;
}

struct loop_job *loop__new_job(struct loop *l, const struct loop_submit *s, struct error *err)
{
    struct loop_job *j;
    if (idmap_get(&l->by_id, s->id, NULL) != NULL)
        return errno = EEXIST, errprintf(err, "job %s is already known", s->id), NULL;
    if (l->njobs == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        struct loop_job **grown = realloc(l->job, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
        l->job = grown;
        l->cap = cap;
    }
    j = calloc(1, sizeof(*j));
    if (j == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    snprintf(j->id, sizeof(j->id), "%s", s->id);
    snprintf(j->owner, sizeof(j->owner), "%s", s->owner ? s->owner : "");
    j->min = s->min > 0 ? s->min : 1;
    j->max = s->max >= j->min ? s->max : j->min;
    j->gpw = s->gpw;
    j->cpw = s->cpw > 0 ? s->cpw : 1;
    j->priority = s->priority;
    j->max_restarts = s->max_restarts;
    j->state = LOOP_QUEUED;
    j->submitted = s->submitted >= 0 ? s->submitted : l->b->now(l->bctx);
    j->waiting_since = j->submitted;
    j->restart_cost = j->last_stop_s = -1;
    j->work_left = -1;
    j->first_progress = -1;
    j->f_prev = -1;
    j->user = s->user;
    j->attempts = s->attempts;
    j->failures = s->failures;
    j->not_before = s->not_before;
    j->service = s->service;
    j->run_time = s->run_time;
    speed_init(&j->speed, l->cfg.speed_mode);
    if (idmap_put(&l->by_id, j->id, j) < 0) {
        free(j);
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    }
    l->job[l->njobs++] = j;
    return j;
}

int loop_submit(struct loop *l, const struct loop_submit *s, struct error *err)
{
    if (loop__new_job(l, s, err) == NULL)
        return -1;
    l->dirty = 1;
    return 0;
}

void loop__drop(struct loop *l, struct loop_job *j)
{
    idmap_del(&l->by_id, j->id);
    if (j->backend_id[0])
        idmap_del(&l->by_backend, j->backend_id);
    for (int i = 0; i < l->njobs; i++) {
        if (l->job[i] == j) {
            l->job[i] = NULL;
            l->holes++;
            break;
        }
    }
    job_free(j);
}

void loop__compact(struct loop *l)
{
    int k = 0;
    if (l->holes == 0)
        return;
    for (int i = 0; i < l->njobs; i++)
        if (l->job[i] != NULL)
            l->job[k++] = l->job[i];
    l->njobs = k;
    l->holes = 0;
}
/* ---- reading ---- */

const struct loop_job *loop_job(const struct loop *l, const char *id)
{
    return idmap_get(&l->by_id, id, NULL);
}

int loop_njobs(const struct loop *l)
{
    return l->njobs;
}

const struct loop_job *loop_job_at(const struct loop *l, int i)
{
    return i >= 0 && i < l->njobs ? l->job[i] : NULL;
}

void loop_stats(const struct loop *l, struct loop_stats *out)
{
    *out = l->stats;
}

json_t *loop_describe(const struct loop *l)
{
    json_t *out;
    const struct cluster *c = l->cluster;
    json_t *nodes = json_array();
    for (int n = 0; n < c->nnodes; n++) {
        json_t *gpus = json_array(), *jobs = json_array();
        for (int g = 0; g < c->node[n].gpus; g++)
            json_array_append_new(gpus, json_pack("{s:i}", "id", g));
        for (int i = 0; i < l->njobs; i++) {
            const struct loop_job *j = l->job[i];
            if (j == NULL || j->state == LOOP_QUEUED)
                continue;
            for (int p = 0; p < j->placement.nparts; p++) {
                const struct placement_part *pp = &j->placement.part[p];
                json_t *ids = json_array();
                if (pp->node != n)
                    continue;
                for (int g = 0; g < pp->ngpus; g++) {
                    int id = j->placement.gpu[pp->gpu_off + g];
                    json_array_append_new(ids, json_integer(id));
                    json_object_set_new(json_array_get(gpus, (size_t)id), "job",
                                        json_string(j->id));
                }
                json_array_append_new(
                    jobs,
                    json_pack("{s:s, s:i, s:i, s:o, s:s, s:s}", "id", j->id, "attempt", j->attempt,
                              "workers", pp->workers, "gpus", ids, "backend_id", j->backend_id,
                              "state", j->state == LOOP_STOPPING ? "STOPPING" : "RUNNING"));
            }
        }
        json_array_append_new(nodes,
                              json_pack("{s:s, s:i, s:i, s:i, s:o, s:o, s:b}", "name",
                                        c->node[n].name, "slots", c->node[n].slots, "slots_free",
                                        l->used.slots_free[n], "gpus_free", l->used.gpus_free[n],
                                        "gpus", gpus, "jobs", jobs, "offline", c->node[n].offline));
    }
    out = json_pack("{s:o, s:s, s:s}", "nodes", nodes, "policy", l->cfg.policy->name, "backend",
                    l->b->name);
    /* The backend's own view beside the loop's (Slurm's nodes, GPUs and every job holding
     * them, ringd's or not), under the backend's name. */
    if (out != NULL && l->b->cluster_json != NULL)
        json_object_set_new(out, l->b->name, l->b->cluster_json(l->bctx));
    return out;
}
