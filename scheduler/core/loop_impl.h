/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop_impl.h - the scheduler loop's table (loop.c), which the attempts (attempts.c) and the
 * pass (pass.c) work on: the loop itself and the calls into the table. Only those three
 * files include it; loop.c calls neither of the others.
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

/* Logs one line through cfg.log (common/log.h's logger without one); job may be NULL. */
void loop__say(struct loop *l, enum log_level level, const char *job, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A new queued job from s, in the table and the id map. Returns it (owned by the loop), or
 * NULL with err: EEXIST when the id is known, ENOMEM. */
struct loop_job *loop__new_job(struct loop *l, const struct loop_submit *s, struct error *err);
/* Forgets an ended job and frees it. */
void loop__drop(struct loop *l, struct loop_job *j);
/* Closes the holes ended jobs left in the table, keeping submission order. */
void loop__compact(struct loop *l);

/* The resource a worker of j uses, for service: its GPUs, or its slots. */
static inline int loop__unit(const struct loop_job *j)
{
    return j->gpw > 0 ? j->gpw : j->cpw > 0 ? j->cpw : 1;
}

static inline struct journal_sched loop__sched_of(const struct loop_job *j)
{
    return (struct journal_sched){j->attempts, j->failures, j->not_before};
}

#endif /* RINGD_LOOP_IMPL_H */
