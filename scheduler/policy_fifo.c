/* SPDX-License-Identifier: Apache-2.0 */
/* policy_fifo.c - first come, first served, with backfill. */
#include <stdlib.h>

#include "policy.h"

static int free_gpus(const struct policy_cluster *c)
{
    int n = 0;
    for (int g = 0; g < c->gpus && g < POLICY_MAX_GPUS; g++)
        n += !c->busy[g];
    return n;
}

int policy_fifo(const struct policy_job *queue, int n, struct policy_cluster *cluster, int64_t now,
                struct policy_start *out)
{
    int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof(int)), started = 0;

    if (order == NULL)
        return 0;
    for (int i = 0; i < n; i++)
        order[i] = i;
    /* Stable insertion sort by priority: equal priorities keep submission order. */
    for (int i = 1; i < n; i++) {
        int k = order[i], j = i;
        while (j > 0 && queue[order[j - 1]].priority < queue[k].priority) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = k;
    }
    for (int oi = 0; oi < n; oi++) {
        const struct policy_job *j = &queue[order[oi]];
        int w = j->max_workers;
        if (j->not_before > now)
            continue;
        if (w > cluster->slots_free)
            w = cluster->slots_free;
        if (j->gpus_per_worker > 0 && w * j->gpus_per_worker > free_gpus(cluster))
            w = free_gpus(cluster) / j->gpus_per_worker;
        if (w < j->min_workers)
            continue; /* does not fit now: let a later job use what is free */
        out[started].job = order[oi];
        out[started].workers = w;
        out[started].ngpus = 0;
        for (int g = 0; g < cluster->gpus && out[started].ngpus < w * j->gpus_per_worker; g++) {
            if (!cluster->busy[g]) {
                cluster->busy[g] = 1;
                out[started].gpu[out[started].ngpus++] = g;
            }
        }
        cluster->slots_free -= w;
        started++;
    }
    free(order);
    return started;
}
