/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy.h - scheduling policies: pure functions from a snapshot (the time, the cluster,
 * running jobs with their allocation, speed and attained service, queued jobs) to a target
 * allocation for every job: a size and a placement, or none. No clock, no I/O, no globals:
 * ringd and ringsim run the very same code, and unit tests feed it hand-made snapshots.
 * The loop (loop.h) diffs the target against what runs and carries the difference out.
 *
 *   fifo      first come, first served with backfill; never stops a running job
 *   priority  fifo by priority, and a higher-priority job preempts lower ones
 *   tiresias  2D-LAS: least attained GPU-service first, in discretised queues
 *   dynamic   after Capes et al.: every job at its minimum, then repeatedly double the job
 *             whose doubling raises its completion rate (1/remaining time) the most per
 *             GPU, restart cost counted, with hysteresis (policy_dynamic.c says why)
 *
 * Invariants every policy keeps (tests/unit/test_policy.c checks them on hand-made
 * snapshots): the targets fit the cluster together with what is pinned; a target is 0 or in
 * [min, max]; a job that is backing off gets 0; a job does not wait forever (each policy's
 * header comment says how it bounds starvation); and planning again on a snapshot where
 * the previous plan was carried out gives the same plan (no thrashing in steady state).
 */
#ifndef RINGD_POLICY_H
#define RINGD_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/setting.h"

#include "scheduler/model/cluster.h"
#include "scheduler/model/speed.h"

/* Tunables, from ringd.conf or ringsim's flags; policy_params_default gives the defaults. */
struct policy_params {
    double interval_s;      /* dynamic: re-evaluated at least this often (60) */
    double restart_cost_s;  /* a restart's cost where the job has no measurement (30) */
    double hysteresis;      /* dynamic: a change must gain restart cost x this (2) */
    double las_threshold;   /* tiresias, dynamic: GPU-seconds of service per queue (16 GPU-h) */
    int las_queues;         /* how many queues; queue k starts at threshold x 10^(k-1) (2) */
    double starve_factor;   /* a job that waited this many times its run time, and at least
                             * starve_min_s, goes to the first queue again (4) */
    double starve_min_s;    /* (600) */
    double aging_s;         /* fifo, priority: a waiting job gains one priority level per this
                             * many seconds; 0 never (3600) */
    double reserve_after_s; /* fifo, priority: a job that waited this long stops backfill
                             * past it until it starts (3600) */
};

void policy_params_default(struct policy_params *p);

struct policy_job {
    int min, max;                      /* workers */
    int gpw, cpw;                      /* GPUs and slots per worker */
    int priority;                      /* higher first */
    int workers;                       /* running now at this size; 0 when queued */
    const struct placement *placement; /* where it runs now; NULL when queued */
    int eligible;                      /* 0: backing off after a failure: gets nothing */
    double submitted;                  /* when it was submitted (the loop's clock) */
    double waiting_since;              /* queued: since when it waits */
    double started;                    /* running: when the current attempt started */
    double service;                    /* attained service: GPU-seconds (slot-seconds
                                        * for jobs without GPUs), all attempts */
    double run_time;                   /* seconds run, all attempts */
    double restart_cost;               /* its measured stop + start overhead, or < 0 */
    double work_left;                  /* work left in the unit of its throughput, or < 0
                                        * when unknown */
    const struct speed *speed;         /* throughput per size */
    int settled;                       /* queued, or its attempt has reported progress: its
                                        * speed at this size is measured */
};

struct policy_snapshot {
    double now;
    const struct cluster *cluster;
    /* What the policy must not use: attempts being stopped and places reserved for
     * restarts already decided. The targets fit on top of it. */
    const struct usage *pinned;
    /* pinned plus every running job's placement, or NULL (placement then builds it): with
     * it, a pass costs nothing for the jobs that stay where they are */
    const struct usage *occupied;
    const struct policy_job *job; /* running and queued jobs, in submission order */
    int njobs;
    struct policy_params params;
};

struct policy_target {
    int workers;                /* 0: none (a running job is stopped, a queued one waits) */
    int unchanged;              /* 1: exactly where it runs now (placement is left empty:
                                 * most jobs stay put, and a copy each would cost a pass) */
    struct placement placement; /* where, unless unchanged; empty when workers is 0 */
    char reason[160];           /* why, when the target differs from what runs */
};

/* Where target t of job i of snapshot s runs. */
static inline const struct placement *policy_where(const struct policy_snapshot *s, int i,
                                                   const struct policy_target *t)
{
    return t->unchanged ? s->job[i].placement : &t->placement;
}

/*
 * A setting of ringd's configuration that a policy reads: a number of struct
 * policy_params. Declared by the policy (policy_ops.settings), so that ringd reads, prints
 * and shows it (GET /v1/scheduler) without knowing it.
 */
struct policy_setting {
    struct setting s; /* key in ringd.conf, environment variable, flag, default, help */
    const char *json; /* its name in GET /v1/scheduler: "restart_cost_s" */
    size_t offset;    /* the double of struct policy_params it sets */
    double lo, hi;    /* the values it takes */
};

struct policy_ops {
    const char *name;
    int elastic; /* it moves jobs between sizes over time (ringsim gives its jobs a range) */
    /* Fills out[0 .. s->njobs-1] (each with workers 0, unchanged 0, an empty placement and
     * an empty reason). Returns 0, or -1 with errno ENOMEM: then nothing changes. */
    int (*plan)(const struct policy_snapshot *s, struct policy_target *out);
    /* The settings it reads, ended by a row with s.key NULL; NULL: none. ringd takes every
     * policy's (a policy may be switched to while ringd runs) and shows the active one's. */
    const struct policy_setting *settings;
};

extern const struct policy_ops policy_fifo, policy_priority, policy_tiresias, policy_dynamic;

/* The policy called name, or NULL. */
const struct policy_ops *policy_find(const char *name);
/* The i-th policy of the table (0, 1, ...), NULL past the last: for listing them. */
const struct policy_ops *policy_at(int i);
/* The names, comma-separated ("fifo, priority, tiresias, dynamic"), from the table. */
const char *policy_names(void);
/* The setting called key (a key of ringd.conf) of any policy, or NULL. */
const struct policy_setting *policy_setting_find(const char *key);
/*
 * A policy's config op, table-driven: sets the setting called key to value in p. Returns
 * 0, or -1 with errno EINVAL and err ("bad value ...") when value is not a number in the
 * setting's range, ENOENT when no policy has such a setting.
 */
int policy_config(struct policy_params *p, const char *key, const char *value, struct error *err);
/* The value of setting ps in p. */
static inline double policy_setting_value(const struct policy_setting *ps,
                                          const struct policy_params *p)
{
    return *(const double *)((const char *)p + ps->offset);
}
/* Releases the placements of out[0 .. n-1]. */
void policy_targets_clear(struct policy_target *out, int n);

/*
 * Turns sizes into placements: size[i] workers for job i (0: none). Jobs keep the part of
 * their current placement they still use (a shrink keeps its largest parts); the rest are
 * placed in the order given (order[] lists every job index once), a grow on a fresh
 * placement where that spans fewer nodes than growing around the old one (a resize
 * restarts the job anyway, and every node more puts more of its step on the network). Where
 * fragmentation leaves no room for a size, the size shrinks (halving, not below min) and a running
 * job keeps its current size instead; what still does not fit gets 0. Fills out[i].workers and
 * out[i].placement, and appends to out[i].reason when a size had to change. Returns 0 or -1
 * (ENOMEM).
 */
int policy_place(const struct policy_snapshot *s, const int *size, const int *order,
                 struct policy_target *out);

#endif /* RINGD_POLICY_H */
