/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy_world.c - the hand-made snapshots the policy tests (test_policy.c,
 * test_policy_dynamic.c) plan on, and the invariants every plan keeps (policy_world.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_world.h"
#include "unit.h"

void world_init(struct world *w, int nodes, int slots, int gpus)
{
    memset(w, 0, sizeof(*w));
    w->c = cluster_create(nodes, slots, gpus);
    ck_assert_ptr_nonnull(w->c);
    ck_assert_int_eq(usage_init(&w->pinned, w->c), 0);
    ck_assert_int_eq(usage_init(&w->taken, w->c), 0);
    policy_params_default(&w->s.params);
    w->s.cluster = w->c;
    w->s.pinned = &w->pinned;
    w->s.now = 10000;
}

void world_free(struct world *w)
{
    policy_targets_clear(w->out, w->n);
    for (int i = 0; i < w->n; i++)
        placement_clear(&w->place[i]);
    usage_clear(&w->pinned);
    usage_clear(&w->taken);
    cluster_free(w->c);
}

/* A queued job; returns its index. */
int queued(struct world *w, int min, int max, int gpw, double submitted)
{
    int i = w->n++;
    w->job[i] = (struct policy_job){
        .min = min,
        .max = max,
        .gpw = gpw,
        .cpw = 1,
        .eligible = 1,
        .submitted = submitted,
        .waiting_since = submitted,
        .restart_cost = -1,
        .work_left = -1,
        .settled = 1,
    };
    speed_init(&w->speed[i], SPEED_WEAK);
    w->job[i].speed = &w->speed[i];
    return i;
}

/* A running job at workers, placed where there is room. */
int running(struct world *w, int min, int max, int gpw, int workers, double started)
{
    int i = queued(w, min, max, gpw, started - 100);
    ck_assert_int_eq(usage_place(&w->taken, workers, 1, gpw, &w->place[i]), 0);
    ck_assert_int_eq(usage_apply(&w->taken, &w->place[i], 1, 1), 0);
    w->job[i].workers = workers;
    w->job[i].placement = &w->place[i];
    w->job[i].started = started;
    return i;
}

void plan(struct world *w, const struct policy_ops *p)
{
    policy_targets_clear(w->out, w->n);
    memset(w->out, 0, sizeof(w->out));
    w->s.job = w->job;
    w->s.njobs = w->n;
    ck_assert_int_eq(p->plan(&w->s, w->out), 0);
}

/* The invariants of any plan. */
void check_invariants(struct world *w, const char *policy)
{
    struct usage u;
    ck_assert_int_eq(usage_init(&u, w->c), 0);
    usage_copy(&u, &w->pinned);
    for (int i = 0; i < w->n; i++) {
        const struct policy_job *j = &w->job[i];
        const struct policy_target *t = &w->out[i];
        const struct placement *where = policy_where(&w->s, i, t);
        if (t->workers == 0) {
            ck_assert_int_eq(t->placement.workers, 0);
            continue;
        }
        ck_assert_msg(t->workers >= j->min && t->workers <= j->max,
                      "%s: job %d got %d workers outside [%d, %d]", policy, i, t->workers, j->min,
                      j->max);
        ck_assert_msg(j->eligible, "%s: job %d is backing off but got workers", policy, i);
        ck_assert_int_eq(where->workers, t->workers);
        ck_assert_int_eq(where->ngpus, t->workers * j->gpw);
        ck_assert_msg(usage_apply(&u, where, j->cpw, 1) == 0,
                      "%s: job %d's place is taken or off the cluster", policy, i);
    }
    usage_clear(&u);
}

/* Carries the plan out in the world: targets run, the rest wait. */
void carry_out(struct world *w)
{
    struct placement next[MAXJ];
    usage_clear(&w->taken);
    ck_assert_int_eq(usage_init(&w->taken, w->c), 0);
    for (int i = 0; i < w->n; i++) {
        memset(&next[i], 0, sizeof(next[i]));
        if (w->out[i].workers > 0)
            ck_assert_int_eq(placement_copy(&next[i], policy_where(&w->s, i, &w->out[i])), 0);
    }
    for (int i = 0; i < w->n; i++) {
        struct policy_job *j = &w->job[i];
        struct policy_target *t = &w->out[i];
        placement_clear(&w->place[i]);
        w->place[i] = next[i];
        if (t->workers > 0) {
            ck_assert_int_eq(usage_apply(&w->taken, &w->place[i], j->cpw, 1), 0);
            if (j->workers != t->workers || j->workers == 0)
                j->started = w->s.now;
            j->workers = t->workers;
            j->placement = &w->place[i];
        } else {
            if (j->workers > 0)
                j->waiting_since = w->s.now;
            j->workers = 0;
            j->placement = NULL;
        }
    }
}
