/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scheduler.h - ringd's scheduler thread: one thread owns allocation decisions and backend
 * calls. It runs the scheduler loop (loop.h) over the configured backend (backend.h) and
 * policy (policy.h), with ringd's SQLite store as its journal: every transition is
 * committed before it takes effect. HTTP threads reach it through the calls below, which
 * hand a request to the thread and wait for its answer, half a second at most: a backend
 * call can hold the thread for long (libslurm's, while slurmctld is unreachable), and an
 * HTTP thread must not wait with it.
 *
 * Past that deadline a request fails with errno ETIMEDOUT when the thread had not taken it
 * (it is withdrawn: nothing was done, the client may retry), or EINPROGRESS when it had (the
 * thread is carrying it out and will finish it). The reads (snapshot, info) answer instead
 * with what the thread last said, and how old that is.
 */
#ifndef RINGD_SCHEDULER_H
#define RINGD_SCHEDULER_H

#include "common/setting.h"
#include "db/store.h"
#include "scheduler/model/cluster.h"
#include "scheduler/policy/policy.h"

struct scheduler_config {
    const char *db_path;
    const char *data_dir;     /* ringd's data directory (absolute; hidden from jobs) */
    const char *ringrun;      /* the launcher's path */
    const char *mpirun;       /* Open MPI's mpirun (launcher "mpirun") */
    const char *default_user; /* as root, the user of jobs stored without one */
    int no_auth;              /* ringd serves without tokens */
    int slots, gpus;          /* this host's, as ringd's configuration says */
    int kill_grace_s;         /* after SIGTERM, SIGKILL the attempt */
    const char *backend;      /* a name of backend.h's table (NULL: local) */
    const char *backend_options;
    /* the backend's own settings as configured (backend.h), nsettings of them */
    const struct setting_value *settings;
    int nsettings;
    const char *policy; /* a name of policy.h's table (NULL: fifo) */
    struct policy_params params;
};

struct scheduler;

/*
 * The backend's config op (backend.h) for cfg: its settings, checked before anything
 * starts. Returns 0, or -1 with errno EINVAL (an unknown backend, a bad setting) and err.
 */
int scheduler_config(const struct scheduler_config *cfg, struct error *err);
/*
 * Starts the backend and the loop, makes the checkpoints/ directory in the backend's work
 * directory, recovers the attempts a previous ringd left (their workers are stopped and
 * the jobs queued again to resume from their checkpoints), then starts the thread. Returns
 * NULL with errno and err: EINVAL when the configuration cannot work on this host (an
 * unknown policy or backend, a directory the backend cannot make or use, an isolation it
 * cannot give: ringd exits 64), else a backend that declines or fails, the store.
 */
struct scheduler *scheduler_start(const struct scheduler_config *cfg, struct error *err);
/* Stops the thread; running attempts keep running (a restarted ringd recovers them), but
 * local ones are asked to stop as the thread ends (backend.h, fini). */
void scheduler_stop(struct scheduler *s);
/* New work may be startable (a submission): wake the thread. Thread-safe. */
void scheduler_wake(struct scheduler *s);
/*
 * Cancels job id, from any thread: a queued or STOPPED job becomes CANCELLED; a running or stopping
 * one gets SIGTERM, then SIGKILL after the grace period, and becomes CANCELLED when it exits,
 * whatever it was being stopped for (cancel wins). Returns 0, or -1 with errno ENOENT (no
 * such active job: finished, or unknown) or EALREADY (it is being cancelled already), or
 * ETIMEDOUT / EINPROGRESS (see above).
 */
int scheduler_cancel(struct scheduler *s, const char *id, struct error *err);
/*
 * Stops job id gracefully: a queued job becomes STOPPED; a running one gets SIGTERM, which
 * libring agrees on across ranks so that the program checkpoints and exits 75, and becomes
 * STOPPED when it exits (SIGKILL after the grace period). Resume puts it back in the queue.
 * Returns 0, or -1 with errno ENOENT (not queued or running) or EALREADY (being cancelled:
 * it ends CANCELLED), or ETIMEDOUT / EINPROGRESS (see above).
 */
int scheduler_stop_job(struct scheduler *s, const char *id, struct error *err);
/* Puts STOPPED job id back in the queue. Returns 0, or -1 with errno ENOENT (no such job)
 * or EAGAIN (it is not STOPPED; err says what it is), or ETIMEDOUT / EINPROGRESS. */
int scheduler_resume(struct scheduler *s, const char *id, struct error *err);
/*
 * The cluster as the scheduler sees it, as a new reference: {"policy", "nodes": [{"name",
 * "slots", "slots_free", "gpus_free", "gpus": [{"id", "job"}], "jobs": [{"id", "attempt",
 * "workers", "gpus", "backend_id", "state"}]}]}. *age_s gets 0, or when the thread did
 * not answer in time the age in seconds of what it last said, which is returned instead.
 * NULL when out of memory.
 */
json_t *scheduler_snapshot(struct scheduler *s, double *age_s);
/* {"policy", "policies", "backend", "interval_s", "restart_cost_s", "hysteresis", "settings"
 * (the active policy's: {name: value}), "passes", "resizes", "preemptions", "pass_ms_mean",
 * "pass_ms_max"} as a new reference; *age_s as for scheduler_snapshot. */
json_t *scheduler_info(struct scheduler *s, double *age_s);
/* Switches the policy at runtime; *info (when not NULL) gets scheduler_info's object after
 * the switch (a new reference). Returns 0, or -1 with errno EINVAL (no such policy), or
 * ETIMEDOUT / EINPROGRESS. */
int scheduler_set_policy(struct scheduler *s, const char *name, json_t **info, struct error *err);
/*
 * What GET /metrics shows of the scheduler: what each node's attempts hold, and the policy,
 * as the thread saw them at the end of its last turn (it takes one at least every tick, but
 * not while a backend call holds it). Never waits for the thread, and costs O(nodes)
 * whatever the number of jobs. use gets scheduler_cluster(s)->nnodes entries, policy (len
 * bytes) the policy's name. Returns how many seconds ago the thread saw them.
 */
struct scheduler_node_use {
    int slots_free, gpus_free, offline;
};
double scheduler_usage(struct scheduler *s, struct scheduler_node_use *use, char *policy,
                       size_t len);
/* The cluster, the backend's name, and where runs/ and checkpoints/ live (the backend's
 * work directory, else the data directory): fixed at start, safe to read from any thread. */
const struct cluster *scheduler_cluster(const struct scheduler *s);
const char *scheduler_backend(const struct scheduler *s);
const char *scheduler_work_dir(const struct scheduler *s);

#endif /* RINGD_SCHEDULER_H */
