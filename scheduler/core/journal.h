/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.h - where the scheduler loop writes every change before it takes effect. ringd's
 * journal is its SQLite store (journal_store.c: each change a transition with its event,
 * a pass's changes in one transaction); ringsim's keeps its statistics in memory. The loop
 * is the same code over both.
 *
 * Every op is called on the loop's thread. An op that returns -1 (errno, err) means the
 * change is not recorded: the loop then does not carry it out (a start is not made, a
 * stop is not sent) and logs err.
 */
#ifndef RINGD_JOURNAL_H
#define RINGD_JOURNAL_H

#include <jansson.h>

#include "common/error.h"

struct loop_job;
struct placement;

/* The job's scheduling fields as the journal keeps them with every change. */
struct journal_sched {
    int attempts, failures;
    double not_before; /* backoff: no start before then (the loop's clock) */
};

struct journal_ops {
    /* A pass's changes in one batch (one transaction), begun before the first and
     * committed after the last. commit returns -1 when nothing of the batch was kept (an op
     * in it failed, or the commit did): the loop then carries none of it out. Outside a
     * batch each op is a transaction of its own. */
    int (*begin)(void *j, struct error *err);
    int (*commit)(void *j, struct error *err);
    /* job moves to state with an event of type and message (a queued job cancelled or
     * stopped, a start that failed, a requeue). */
    int (*transition)(void *j, const struct loop_job *job, const char *state, const char *type,
                      const char *message, const struct journal_sched *sched, struct error *err);
    /* QUEUED -> STARTING: attempt is about to start at placement p, for reason. */
    int (*starting)(void *j, const struct loop_job *job, int attempt, const struct placement *p,
                    const char *reason, const struct journal_sched *sched, struct error *err);
    /* The backend started attempt as backend_id in run_dir: the attempt's record, RUNNING. */
    int (*started)(void *j, const struct loop_job *job, int attempt, const struct placement *p,
                   const char *backend_id, const char *run_dir, const struct journal_sched *sched,
                   struct error *err);
    /* RUNNING -> STOPPING: type "resizing", "preempting", "stopping" or "cancelling". */
    int (*stopping)(void *j, const struct loop_job *job, const char *type, const char *reason,
                    struct error *err);
    /* Attempt ended with exit_status (-1: unknown); the job moves to state with an event of
     * type and reason. stop_s is the stop overhead (stop requested -> every rank exited),
     * or < 0 when nobody asked it to stop. */
    int (*ended)(void *j, const struct loop_job *job, int attempt, int exit_status, double stop_s,
                 const char *state, const char *type, const char *reason,
                 const struct journal_sched *sched, struct error *err);
    /* The attempt's first progress report came start_s after its start; samples_per_s is its
     * throughput then. Later reports update samples_per_s (start_s < 0: unchanged). */
    int (*progress)(void *j, const struct loop_job *job, int attempt, double start_s,
                    double samples_per_s, struct error *err);
    /* Optional (NULL: nothing to record). The backend placed attempt elsewhere than the
     * loop planned: p is where it runs; message says where it was planned. */
    int (*placed)(void *j, const struct loop_job *job, int attempt, const struct placement *p,
                  const char *message, struct error *err);
    /* The job's JobSpec as a new reference (command, env, ...), for the backend, and the
     * Unix user it runs as into user (len bytes; "" when it has none); NULL with err when
     * it cannot be read. May be NULL in a journal whose backend needs neither. */
    json_t *(*spec)(void *j, const char *job_id, char *user, size_t len, struct error *err);
};

#endif /* RINGD_JOURNAL_H */
