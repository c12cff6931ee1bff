/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop_impl.h - what the two halves of the scheduler loop share: the loop itself, and the
 * calls between the pass and requests (loop.c) and the attempts on the backend
 * (loop_attempt.c). Only those two files include it.
 */
#ifndef RINGD_LOOP_IMPL_H
#define RINGD_LOOP_IMPL_H

#include "idmap.h"
#include "loop.h"

struct loop {
    struct loop_config cfg;
    const struct backend_ops *b;
    void *bctx;
    const struct journal_ops *jo;
    void *jctx;
    struct cluster *cluster;
    struct usage used;    /* what attempts hold now */
    struct usage running; /* what RUNNING attempts hold (not those being stopped) */
    struct loop_job **job;
    int njobs, cap, holes; /* holes: NULL entries left by ended jobs */
    struct idmap by_id, by_backend;
    int dirty;
    int any_reserved, any_stopping; /* 0: no job has a reservation / is stopping (scans skip) */
    int nmisplaced;                 /* jobs with misplaced set */
    double last_pass, next_backoff;
    double next_nodes; /* when to ask the backend which nodes are in service */
    struct loop_stats stats;
    /* scratch for passes, kept between them */
    struct usage pinned, check, occupied;
    struct policy_job *pj;
    struct loop_job **pmap;
    struct policy_target *out;
    int scratch_cap;
};

/* ---- loop.c ---- */

/* Logs one line through cfg.log (common/log.h's logger without one); job may be NULL. */
void loop__say(struct loop *l, enum log_level level, const char *job, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A new queued job from s, in the table and the id map. Returns it (owned by the loop), or
 * NULL with err: EEXIST when the id is known, ENOMEM. */
struct loop_job *loop__new_job(struct loop *l, const struct loop_submit *s, struct error *err);
/* Forgets an ended job and frees it. */
void loop__drop(struct loop *l, struct loop_job *j);

/* The resource a worker of j uses, for service: its GPUs, or its slots. */
static inline int loop__unit(const struct loop_job *j)
{
    return j->gpw > 0 ? j->gpw : j->cpw > 0 ? j->cpw : 1;
}

static inline struct journal_sched loop__sched_of(const struct loop_job *j)
{
    return (struct journal_sched){j->attempts, j->failures, j->not_before};
}

/* ---- loop_attempt.c ---- */

/*
 * Starts attempt attempts+1 of j at p. journaled: its STARTING is already in the journal
 * (a pass's batch); else it is written here first. Returns 0 when it runs; -1 when it did
 * not start: it waits for the next pass (its place was taken), is queued again after a
 * backoff, or is FAILED and dropped (then j is freed).
 */
int loop__start(struct loop *l, struct loop_job *j, const struct placement *p, const char *reason,
                int journaled);
/* Starts the reservations that fit now, oldest job first. Returns how many it started. */
int loop__start_reserved(struct loop *l);
/* Asks j's attempt to stop, for why (SIGTERM; SIGKILL at the kill deadline). The journal
 * has it already. */
void loop__ask_stop(struct loop *l, struct loop_job *j, enum loop_stop why);
/* Reads the backend's events (exits, progress) and applies them. Returns how many. */
int loop__read_events(struct loop *l);
/* SIGKILL to the attempts whose stop is past its grace period. */
void loop__enforce_kills(struct loop *l, double now);

#endif /* RINGD_LOOP_IMPL_H */
