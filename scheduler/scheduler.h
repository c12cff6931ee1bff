/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scheduler.h - ringd's scheduler: one thread owns allocation decisions and backend calls.
 * It starts queued jobs (policy_fifo) through the local backend, reaps attempts, restarts
 * failed ones with exponential backoff up to max_restarts, and carries out cancels. Every
 * transition is committed to the store before it takes effect.
 */
#ifndef RINGD_SCHEDULER_H
#define RINGD_SCHEDULER_H

#include "store.h"

struct scheduler_config {
    const char *db_path;
    const char *data_dir;     /* runs/<job>/<attempt> and checkpoints/<job> live here */
    const char *ringrun;      /* the launcher's path */
    const char *exec_helper;  /* ringd-exec's path: isolates a job and becomes its user */
    int isolate;              /* hide data_dir from jobs (a private mount namespace) */
    const char *default_user; /* as root, the user of jobs stored without one */
    int slots, gpus;
    int kill_grace_s; /* after SIGTERM, SIGKILL the attempt's group */
};

struct scheduler;

/* Recovers attempts a previous ringd left (their workers are stopped and the jobs requeued),
 * then starts the thread. Returns NULL with err. */
struct scheduler *scheduler_start(const struct scheduler_config *cfg, struct error *err);
/* Stops the thread; running attempts keep running (a restarted ringd recovers them). */
void scheduler_stop(struct scheduler *s);
/* New work may be startable (a submission): wake the thread. Thread-safe. */
void scheduler_wake(struct scheduler *s);
/*
 * Cancels job id, from any thread: a queued job becomes CANCELLED; a running one gets
 * SIGTERM, then SIGKILL after the grace period, and becomes CANCELLED when reaped.
 * Returns 0, or -1 with errno ENOENT (no such active job: finished, or unknown).
 */
int scheduler_cancel(struct scheduler *s, const char *id, struct error *err);
/*
 * Stops job id gracefully: a queued job becomes STOPPED; a running one gets SIGTERM, which
 * libring agrees on across ranks so that the program checkpoints and exits 75, and becomes
 * STOPPED when reaped (SIGKILL after the grace period). Resume puts it back in the queue.
 * Returns 0, or -1 with errno ENOENT (not queued or running).
 */
int scheduler_stop_job(struct scheduler *s, const char *id, struct error *err);
/*
 * The cluster as the scheduler sees it, as a new reference: {"nodes": [{"name", "slots",
 * "slots_free", "gpus": [{"id", "job"}], "jobs": [{"id", "attempt", "workers", "gpus"}]}]}.
 */
json_t *scheduler_snapshot(struct scheduler *s);

#endif /* RINGD_SCHEDULER_H */
