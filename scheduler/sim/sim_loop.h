/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_loop.h - a scheduler loop over the sim backend, set up from a cluster shape, the
 * restart cost and a policy: what ringsim and bench/sched share, so that both run the
 * loop ringd runs (loop.h) on the same simulated cluster.
 */
#ifndef RINGD_SIM_LOOP_H
#define RINGD_SIM_LOOP_H

#include "scheduler/backend/sim/sim.h"
#include "scheduler/core/loop.h"

/*
 * The most workers an elastic policy gives one simulated job, as in Pollux's simulator
 * (64 GPUs: its whole cluster of 16 x 4).
 */
#define SIM_ELASTIC_MAX 64

struct sim_loop_config {
    int nodes, gpus_per_node, slots_per_node;
    double start_s, stop_s; /* an attempt's start (until it progresses) and stop delays */
    const struct policy_ops *policy;
    const struct policy_params *params; /* NULL: policy_params_default() */
    double kill_grace_s;                /* SIGTERM to SIGKILL */
    enum speed_mode speed_mode;         /* how jobs scale, for the speed model */
    /* Where the loop writes its changes (NULL: sim_journal_null), and its context. */
    const struct journal_ops *journal;
    void *journal_arg;
    /* The loop's log (NULL: nothing), and its argument. */
    void (*log)(void *arg, enum log_level level, const char *job, const char *msg);
    void *log_arg;
};

struct sim_loop {
    void *sim; /* the sim backend's context (backend_sim.h) */
    struct loop *loop;
};

/* A journal that keeps nothing: every op succeeds. A journal that keeps only some things
 * starts from a copy of it. */
extern const struct journal_ops sim_journal_null;

/* Starts the sim backend with c's cluster and delays, and a loop over it with c's policy.
 * Returns 0, or -1 with err (out fully undone). */
int sim_loop_create(const struct sim_loop_config *c, struct sim_loop *out, struct error *err);
/* Frees the loop, then the backend. NULL-safe parts. */
void sim_loop_destroy(struct sim_loop *s);

#endif /* RINGD_SIM_LOOP_H */
