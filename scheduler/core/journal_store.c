/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal_store.c - ringd's journal (journal.h) over its SQLite store: each change is a
 * state transition with its event, written (synchronous=FULL) before the loop carries it
 * out; a pass's changes share one transaction (store_batch_begin).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "journal_store.h"
#include "loop.h"

#define ST(j) (((struct journal_store *)(j))->st)

static struct store_sched sched_of(const struct journal_sched *j)
{
    return (struct store_sched){j->attempts, j->failures,
                                (int64_t)(j->not_before > 0 ? ceil(j->not_before) : 0), 0};
}

static int js_begin(void *j, struct error *err)
{
    return store_batch_begin(ST(j), err);
}

static int js_commit(void *j, struct error *err)
{
    return store_batch_commit(ST(j), err);
}

static int js_transition(void *j, const struct loop_job *job, const char *state, const char *type,
                         const char *message, const struct journal_sched *sched, struct error *err)
{
    struct store_sched s = sched_of(sched);
    return store_job_transition(ST(j), job->id, state, type, message, &s, err);
}

static int js_starting(void *j, const struct loop_job *job, int attempt, const struct placement *p,
                       const char *reason, const struct journal_sched *sched, struct error *err)
{
    struct store_sched s = sched_of(sched);
    char msg[400];
    snprintf(msg, sizeof(msg), "attempt %d on %d worker%s: %s", attempt, p->workers,
             p->workers == 1 ? "" : "s", reason[0] ? reason : "resources allocated");
    return store_job_transition(ST(j), job->id, "STARTING", "starting", msg, &s, err);
}

static int js_started(void *j, const struct loop_job *job, int attempt, const struct placement *p,
                      const char *backend_id, const char *run_dir,
                      const struct journal_sched *sched, struct error *err)
{
    struct journal_store *js = j;
    struct store_sched s = sched_of(sched);
    struct store_attempt a;
    char hosts[1024], gpus[1024];
    placement_hosts(js->cluster, p, hosts, sizeof(hosts));
    placement_gpus(p, gpus, sizeof(gpus));
    a = (struct store_attempt){.number = attempt,
                               .world_size = p->workers,
                               .hosts = hosts,
                               .gpus = gpus,
                               .backend_id = backend_id,
                               .run_dir = run_dir,
                               .id_label = js->id_label ? js->id_label : "attempt"};
    return store_attempt_start(js->st, job->id, &a, &s, err);
}

static int js_stopping(void *j, const struct loop_job *job, const char *type, const char *reason,
                       struct error *err)
{
    /* What the stop is for survives a ringd restart: 1 its user's stop, 2 a cancel. */
    struct store_sched s = {job->attempts, job->failures,
                            (int64_t)(job->not_before > 0 ? ceil(job->not_before) : 0),
                            strcmp(type, "stopping") == 0 ? 1 : strcmp(type, "cancelling") == 0};
    if (strcmp(type, "cancelling") == 0)
        s.stop_requested = 2;
    return store_job_transition(ST(j), job->id, "STOPPING", type, reason, &s, err);
}

static int js_ended(void *j, const struct loop_job *job, int attempt, int exit_status,
                    double stop_s, const char *state, const char *type, const char *reason,
                    const struct journal_sched *sched, struct error *err)
{
    struct store_sched s = sched_of(sched);
    if (attempt <= 0)
        return store_job_transition(ST(j), job->id, state, type, reason, &s, err);
    return store_attempt_end(ST(j), job->id, attempt, exit_status, stop_s, reason, state, type, &s,
                             err);
}

static int js_progress(void *j, const struct loop_job *job, int attempt, double start_s,
                       double samples_per_s, struct error *err)
{
    return store_attempt_progress(ST(j), job->id, attempt, start_s, samples_per_s, err);
}

static int js_placed(void *j, const struct loop_job *job, int attempt, const struct placement *p,
                     const char *message, struct error *err)
{
    struct journal_store *js = j;
    char hosts[1024], gpus[1024];
    placement_hosts(js->cluster, p, hosts, sizeof(hosts));
    placement_gpus(p, gpus, sizeof(gpus));
    return store_attempt_placed(js->st, job->id, attempt, hosts, gpus,
                                job->state == LOOP_STOPPING ? "STOPPING" : "RUNNING", message, err);
}

static json_t *js_spec(void *j, const char *job_id, char *user, size_t len, struct error *err)
{
    json_t *job, *spec;
    if (store_job_active(ST(j), job_id, &job, err) < 0)
        return NULL;
    snprintf(user, len, "%s", json_string_value(json_object_get(job, "user")) ?: "");
    spec = json_incref(json_object_get(job, "spec"));
    json_decref(job);
    return spec;
}

const struct journal_ops journal_store_ops = {
    .begin = js_begin,
    .commit = js_commit,
    .transition = js_transition,
    .starting = js_starting,
    .started = js_started,
    .stopping = js_stopping,
    .ended = js_ended,
    .progress = js_progress,
    .placed = js_placed,
    .spec = js_spec,
};
