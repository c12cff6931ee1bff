/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy_impl.h - what the policies share (policy.c): ordering keys, the aggregate room
 * left, and the placer that turns sizes into placements as a policy decides them.
 */
#ifndef RINGD_POLICY_IMPL_H
#define RINGD_POLICY_IMPL_H

#include "policy.h"

/* Sort keys: ascending k[0], then k[1], then k[2], then the job index (stable). key[i] is
 * job i's. */
struct order_key {
    double k[3];
    int job;
};
/* Writes the job indexes in key order to order[]. key[] may be reordered (read the keys
 * by job index only before the call). Fast (linear) when k[0] and k[1] take few values and
 * k[2] rises with the index within each of them, as submission times do. */
void order_sort(struct order_key *key, int n, int *order);

/* The resource a worker of j uses, for "per GPU" comparisons: its GPUs, or its slots. */
static inline int policy_unit(const struct policy_job *j)
{
    return j->gpw > 0 ? j->gpw : j->cpw > 0 ? j->cpw : 1;
}
/* j's effective priority: its priority plus a level per aging_s it waited (until now, or
 * until its attempt started). */
double policy_aged_priority(const struct policy_snapshot *s, const struct policy_job *j);
/* j's LAS queue (0 first) by attained service, after the starvation promotion. */
int policy_las_queue(const struct policy_snapshot *s, const struct policy_job *j);
/* n / d, without the division where d is 1 (most jobs: one slot and one GPU a worker). */
static inline long policy_per(long n, int d)
{
    return d == 1 ? n : n / d;
}
/* How many workers of j fit in slots_left and gpus_left (aggregate, not placement), at
 * most its max. Inline, and without divisions for one slot or GPU a worker: the dynamic
 * policy asks a dozen times per job per pass, and a pass runs at every arrival and end. */
static inline int policy_room(const struct policy_job *j, long slots_left, long gpus_left)
{
    long room = j->cpw > 0 ? policy_per(slots_left, j->cpw) : j->max;
    if (j->gpw > 0 && policy_per(gpus_left, j->gpw) < room)
        room = policy_per(gpus_left, j->gpw);
    if (room < 0)
        room = 0;
    return room > j->max ? j->max : (int)room;
}

/*
 * The placer: places jobs one at a time on top of what is pinned, as a policy decides.
 * Running jobs are kept first (placer_keep), then grown or started (placer_grow).
 */
struct placer {
    const struct policy_snapshot *s;
    struct policy_target *out;
    struct usage u; /* pinned plus what has been placed */
    int *kept;      /* per job: workers placed so far */
    int all_taken;  /* u started as s->occupied: running jobs' places are taken already */
};
/* Returns 0 or -1 (ENOMEM). */
int placer_init(struct placer *p, const struct policy_snapshot *s, struct policy_target *out);
void placer_fini(struct placer *p);
/* Keeps keep workers of running job i where they are, from its largest parts on (as few
 * nodes as it can). Returns the workers kept (0 only when the snapshot is inconsistent: a
 * placement off the cluster or on a GPU already taken). */
int placer_keep(struct placer *p, int i, int keep);
/*
 * Grows job i to want workers (a running job around what it kept, or afresh where that
 * spans fewer nodes; a queued one anywhere).
 * Where there is no room, tries half the growth, then half again; a start never goes below
 * the job's min. Returns the workers job i has now (maybe unchanged), or -1 (ENOMEM).
 */
int placer_grow(struct placer *p, int i, int want);

/*
 * A policy's decision, given cap[i] (the most workers job i may get this pass: its max, or
 * less where placement found no room for more): size[i] for every job (0: none), and
 * order[] (every job index once), the order in which placement serves them. It may write
 * out[i].reason. Returns 0 or -1 (ENOMEM).
 */
typedef int policy_decide_fn(const struct policy_snapshot *s, const int *cap, int *size, int *order,
                             struct policy_target *out, void *arg);
/*
 * Runs decide, then places its sizes (policy_place). Sizes are decided from aggregate
 * counts of slots and GPUs, but a worker needs both on one node, so a size may not fit
 * when placed; then that job is capped at what did fit and the decision is made again
 * (at most a few times), so that what it left free goes to the jobs after it. Returns 0 or
 * -1 (ENOMEM).
 */
int policy_run(const struct policy_snapshot *s, struct policy_target *out, policy_decide_fn *decide,
               void *arg);

/* fifo's decision (policy_fifo.c); arg points to an int: 1 for priority's preemption. */
policy_decide_fn policy__fifo_decide;

#endif /* RINGD_POLICY_IMPL_H */
