/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy_tiresias.c - Tiresias' discretised two-dimensional least attained service
 * (Gu et al., NSDI'19), the literature's baseline for jobs of unknown length.
 *
 * A job's attained service is GPU-seconds (slot-seconds for jobs without GPUs): it grows
 * with both time and width, the "two dimensions". The service is discretised into queues
 * (policy_params.las_threshold, las_queues): a job starts in the first queue and moves down
 * as its service crosses each threshold. Jobs are served queue by queue, first come first
 * served within a queue; every pass admits them in that order while they fit (backfill),
 * and a running job that no longer fits (a job from a higher queue arrived) is preempted.
 * Sizes are not elastic: a running job keeps its size, a queued one gets the most workers
 * in [min, max] that fit.
 *
 * Starvation: a job that has waited starve_factor times as long as it has run, and at
 * least starve_min_s, goes back to the first queue (Tiresias' "promote" knob), where its
 * old submission time puts it ahead of later arrivals.
 *
 * Thrashing: the order only changes when a job crosses a threshold, arrives, ends or is
 * promoted, so in a steady state each pass gives the same plan.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "policy_impl.h"

static int decide(const struct policy_snapshot *s, const int *cap, int *size, int *order,
                  struct policy_target *out, void *arg)
{
    int n = s->njobs;
    struct order_key *key = malloc((size_t)(n > 0 ? n : 1) * sizeof(*key));
    long slots_left = s->pinned->slots_left, gpus_left = s->pinned->gpus_left;

    if (key == NULL)
        return errno = ENOMEM, -1;
    for (int i = 0; i < n; i++) {
        const struct policy_job *j = &s->job[i];
        key[i] = (struct order_key){{policy_las_queue(s, j), 0, j->submitted}, i};
    }
    order_sort(key, n, order);
    for (int k = 0; k < n; k++) {
        int i = order[k], w;
        const struct policy_job *j = &s->job[i];
        if (!j->eligible)
            continue;
        w = j->workers > 0 ? j->workers : policy_room(j, slots_left, gpus_left);
        if (w > cap[i])
            w = cap[i];
        if ((long)w * j->cpw > slots_left || (long)w * j->gpw > gpus_left || w < j->min) {
            if (j->workers > 0)
                snprintf(out[i].reason, sizeof(out[i].reason),
                         "tiresias: preempted: jobs with less attained service (queue %d, "
                         "%.0f GPU-s here) take its place",
                         policy_las_queue(s, j), j->service);
            continue;
        }
        size[i] = w;
        slots_left -= (long)w * j->cpw;
        gpus_left -= (long)w * j->gpw;
        if (j->workers == 0)
            snprintf(out[i].reason, sizeof(out[i].reason),
                     "tiresias: queue %d (%.0f GPU-s attained), next in line that fits",
                     policy_las_queue(s, j), j->service);
    }
    free(key);
    return 0;
}

static int plan(const struct policy_snapshot *s, struct policy_target *out)
{
    return policy_run(s, out, decide, NULL);
}

const struct policy_ops policy_tiresias = {"tiresias", 0, plan, NULL};
