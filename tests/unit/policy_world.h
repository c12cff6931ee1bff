/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy_world.h - a snapshot under construction for the policy tests (policy_world.c): a
 * cluster, jobs, and where the running ones run; a plan made on it, checked against the
 * invariants of any plan (capacity, min/max, backoff), and carried out.
 */
#ifndef RING_TEST_POLICY_WORLD_H
#define RING_TEST_POLICY_WORLD_H

#include "scheduler/model/cluster.h"
#include "scheduler/policy/policy.h"
#include "scheduler/policy/policy_impl.h"

#define MAXJ 64

/* A snapshot under construction: a cluster, jobs, and where the running ones run. */
struct world {
    struct cluster *c;
    struct usage pinned, taken;
    struct policy_job job[MAXJ];
    struct placement place[MAXJ];
    struct speed speed[MAXJ];
    int n;
    struct policy_snapshot s;
    struct policy_target out[MAXJ];
};

/* nodes nodes of slots slots and gpus GPUs each; the clock at 10000 s. */
void world_init(struct world *w, int nodes, int slots, int gpus);
void world_free(struct world *w);
/* A queued job; returns its index. */
int queued(struct world *w, int min, int max, int gpw, double submitted);
/* A running job at workers, placed where there is room; returns its index. */
int running(struct world *w, int min, int max, int gpw, int workers, double started);
/* Plans with policy p into w->out. */
void plan(struct world *w, const struct policy_ops *p);
/* The invariants of any plan. */
void check_invariants(struct world *w, const char *policy);
/* Carries the plan out in the world: targets run, the rest wait. */
void carry_out(struct world *w);

#endif /* RING_TEST_POLICY_WORLD_H */
