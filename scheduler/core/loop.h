/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.h - the scheduler loop: the jobs it knows, the policy it asks, the backend it runs
 * attempts on and the journal it writes first. ringd's scheduler thread (scheduler.c) and
 * ringsim both drive it through loop_step(), so the policies and the diff-and-apply code
 * are one and the same in both.
 *
 * A pass builds a snapshot (policy.h), asks the policy for a target allocation of every
 * job, and carries out the difference:
 *   - a running job whose target is none is stopped ("preempting") and queued again;
 *   - a running job whose target differs is stopped ("resizing"); its new place is
 *     reserved, and it restarts there as soon as its old attempt has exited;
 *   - a queued job with a target is started there, at once if the place is free, else as
 *     soon as the attempts being stopped to make room have exited.
 * Every change is written to the journal, a pass's changes in one batch, before any of
 * them is carried out. Stops are graceful: SIGTERM, then SIGKILL after the grace period.
 *
 * A pass runs when something changed (a submission, an attempt's end, a cancel, a stop, a
 * change of policy, a backoff's end) and at least every policy interval.
 *
 * Errors: -1 with errno and err, as elsewhere.
 */
#ifndef RINGD_LOOP_H
#define RINGD_LOOP_H

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"
#include "common/log.h"
#include "journal.h"
#include "scheduler/backend/backend.h"
#include "scheduler/model/cluster.h"
#include "scheduler/model/speed.h"
#include "scheduler/policy/policy.h"

enum loop_state {
    LOOP_QUEUED,   /* waiting: for room, a backoff, or (reserved) for its place to free */
    LOOP_RUNNING,  /* an attempt runs */
    LOOP_STOPPING, /* its attempt was asked to stop */
};

/* Why a running attempt is being stopped. */
enum loop_stop {
    STOP_NONE,
    STOP_RESIZE,  /* the policy changed its size: restart at the reserved place */
    STOP_PREEMPT, /* the policy took its place: queued again */
    STOP_USER,    /* POST .../stop: STOPPED once it exits */
    STOP_CANCEL,  /* POST .../cancel: CANCELLED once it exits (wins over the others) */
};

/* A job as the loop keeps it. Journals read it; only the loop writes it. */
struct loop_job {
    /*
     * The fields every pass reads come first, together with the start of the speed
     * model's cache (speed.h): a pass reads them for every job, and a 100k-job ringsim run
     * makes hundreds of thousands of passes over thousands of jobs, so that where they
     * lie in memory, not the arithmetic, set its pace.
     */
    enum loop_state state;
    int has_reserved; /* reserved below holds a place */
    int min, max, gpw, cpw, priority;
    double submitted;     /* the loop's clock */
    double waiting_since; /* queued since */
    double not_before;    /* backoff: no start before */
    /* the current attempt (RUNNING, STOPPING) */
    double started, kill_at, first_progress;
    struct placement placement;
    /* feedback */
    double service;              /* GPU-seconds (slot-seconds without GPUs) of ended attempts */
    double run_time;             /* seconds of ended attempts */
    double restart_cost;         /* last measured stop + start overhead, or -1 */
    double work_left, work_time; /* work left at work_time (reports), or -1 */
    struct speed speed;

    char id[32];
    char owner[64];
    int max_restarts;
    enum loop_stop stop;
    int attempts, failures, restarts;
    int lost; /* attempts the resource manager lost (backend.h), restarted for free */
    /* the attempt whose oversized progress.json the job's events told of */
    int progress_ignored;
    /* the current attempt (RUNNING, STOPPING) */
    int attempt;
    char backend_id[64];
    double stop_requested;
    /* a reserved place to start at (QUEUED after a resize, or a start waiting for room) */
    struct placement reserved;
    char reserved_reason[160];
    double last_stop_s;    /* the stop overhead of the attempt that ended last, or -1 */
    int misplaced;         /* the backend placed the attempt itself, and placement is still
                            * the loop's plan (attempts.c: reconcile) */
    double f_prev, t_prev; /* the attempt's previous report: fraction done, time */
    void *user;            /* the driver's (ringsim: its job model) */
};

struct loop_config {
    const struct policy_ops *policy;
    struct policy_params params;
    double kill_grace_s;        /* SIGTERM to SIGKILL */
    const char *data_dir;       /* runs/<job>/<attempt>, checkpoints/<job>; NULL: none */
    enum speed_mode speed_mode; /* how jobs scale, for the speed model */
    /* Logs one line (job may be NULL); NULL: the program's logger (common/log.h). */
    void (*log)(void *arg, enum log_level level, const char *job, const char *msg);
    void *log_arg;
};

/* What a submission gives the loop. */
struct loop_submit {
    const char *id;
    const char *owner;
    int min, max, gpw, cpw, priority, max_restarts;
    double submitted; /* the loop's clock; < 0: now */
    void *user;
    /* what an older job had already (a recovery, a resume); zero for a new one */
    int attempts, failures;
    double not_before, service, run_time;
};

struct loop;

/* A loop over backend (initialised: ctx) and journal. It asks the backend to describe
 * the cluster. Returns NULL with err. */
struct loop *loop_create(const struct loop_config *cfg, const struct backend_ops *backend,
                         void *backend_ctx, const struct journal_ops *journal, void *journal_ctx,
                         struct error *err);
/* Frees the loop (attempts keep running). NULL-safe. */
void loop_destroy(struct loop *l);

/* The cluster the backend described (borrowed for the loop's lifetime). */
const struct cluster *loop_cluster(const struct loop *l);
/* The slots and GPUs of node n that no attempt holds now. */
void loop_node_free(const struct loop *l, int n, int *slots_free, int *gpus_free);
/* The policy now, and a change of it (takes effect at the next pass, which it causes). */
const struct policy_ops *loop_policy(const struct loop *l);
void loop_set_policy(struct loop *l, const struct policy_ops *p);
const struct policy_params *loop_params(const struct loop *l);

/* A new queued job. EEXIST when the id is known. */
int loop_submit(struct loop *l, const struct loop_submit *s, struct error *err);
/*
 * A job a previous ringd left running or stopping: recover() asks the backend what is left
 * of attempt number (backend_id), then the job is queued again; or, when it was being
 * stopped by its user (stopping 1) or cancelled (stopping 2), STOPPED or CANCELLED.
 */
int loop_recover(struct loop *l, const struct loop_submit *s, int number, const char *backend_id,
                 int stopping, struct error *err);
/*
 * Cancel: a queued job becomes CANCELLED; a running or stopping one gets SIGTERM (SIGKILL
 * after the grace period) and becomes CANCELLED when it exits, whatever it was being
 * stopped for. Stop: the same, but STOPPED; a job already being cancelled stays cancelled
 * (EALREADY). ENOENT when the loop has no such job.
 */
int loop_cancel(struct loop *l, const char *id, struct error *err);
int loop_stop_job(struct loop *l, const char *id, struct error *err);

/*
 * One turn: reads the backend's events (exits, progress), enforces kill deadlines, starts
 * what waited for room, and runs a pass when one is due. Returns how many things changed.
 */
int loop_step(struct loop *l);
/* When the loop next needs a turn (the loop's clock): the next pass, kill deadline or
 * backoff end. */
double loop_next_wakeup(const struct loop *l);
/* Runs a pass now (bench/sched, tests). Returns 0 or -1. */
int loop_pass(struct loop *l);

/* The job (NULL when unknown), and every job the loop holds. */
const struct loop_job *loop_job(const struct loop *l, const char *id);
int loop_njobs(const struct loop *l);
const struct loop_job *loop_job_at(const struct loop *l, int i);

/* Counters since creation. */
struct loop_stats {
    long passes, starts, stops, resizes, preemptions, exits;
    double pass_time_s, pass_time_max_s; /* wall time spent in passes */
};
void loop_stats(const struct loop *l, struct loop_stats *out);

/* {"nodes": [{"name", "slots", "slots_free", "gpus": [{"id", "job"}], "jobs": [{"id",
 * "attempt", "workers", "gpus"}]}], "policy": name} as a new reference. */
json_t *loop_describe(const struct loop *l);

#endif /* RINGD_LOOP_H */
