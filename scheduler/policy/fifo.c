/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy_fifo.c - first come, first served, with backfill (and, for policy_priority.c,
 * preemption by priority).
 *
 * Jobs go in order of (aged) priority, then of submission. Running jobs keep what they
 * have: fifo never stops one. Each queued job in turn gets the most workers in [min, max]
 * that fit; a job that does not fit lets later ones that do run ("backfill").
 *
 * Starvation: backfill alone lets a large job wait behind a stream of small ones. Once a
 * job has waited reserve_after_s, nothing behind it starts until it does, so it waits at
 * most reserve_after_s plus the time the jobs then running take to end. A stream of
 * higher-priority jobs is bounded by aging: a waiting job gains a priority level every
 * aging_s, so it overtakes any fixed priority eventually.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "policy_impl.h"

/*
 * Priority's preemption: queued job q (which does not fit) may take the place of running
 * jobs whose priority is lower than q's aged priority, lowest priority first and, among
 * equals, the most recently started (it loses the least work). Only when stopping them
 * makes q fit: nothing is stopped for nothing. Returns 1 when q now fits.
 *
 * victims[0 .. nv-1] lists the running jobs in that order once per decision (a running
 * job's aged priority does not change within a pass), so a queued job's search only reads
 * the prefix of lower priority: with 10,000 queued jobs a search per job over all jobs
 * would make the pass quadratic (bench/sched).
 */
static int preempt_for(const struct policy_snapshot *s, int q, int *size, long *slots_left,
                       long *gpus_left, const double *vprio, const int *victims, int nv,
                       struct policy_target *out)
{
    const struct policy_job *jq = &s->job[q];
    double pq = policy_aged_priority(s, jq);
    long slots = *slots_left, gpus = *gpus_left;
    int k = 0;

    for (; k < nv && vprio[k] < pq && policy_room(jq, slots, gpus) < jq->min; k++) {
        const struct policy_job *v = &s->job[victims[k]];
        if (size[victims[k]] == 0)
            continue; /* preempted already, for a job before q */
        slots += (long)v->workers * v->cpw;
        gpus += (long)v->workers * v->gpw;
    }
    if (policy_room(jq, slots, gpus) < jq->min)
        return 0;
    for (int t = 0; t < k; t++) {
        int v = victims[t];
        if (size[v] == 0)
            continue;
        size[v] = 0;
        snprintf(out[v].reason, sizeof(out[v].reason),
                 "priority: preempted (priority %.0f) for a job of priority %.0f", vprio[t], pq);
    }
    *slots_left = slots;
    *gpus_left = gpus;
    return 1;
}

int policy__fifo_decide(const struct policy_snapshot *s, const int *cap, int *size, int *order,
                        struct policy_target *out, void *arg)
{
    int preempt = *(const int *)arg, n = s->njobs, m = n > 0 ? n : 1, rc = -1, blocked = 0;
    int nv = 0;
    int *victims = malloc((size_t)m * sizeof(int));
    struct order_key *key = malloc((size_t)m * sizeof(*key));
    struct order_key *vkey = malloc((size_t)m * sizeof(*vkey));
    double *vprio = malloc((size_t)m * sizeof(*vprio));
    long slots_left = s->pinned->slots_left, gpus_left = s->pinned->gpus_left;
    const char *name = preempt ? "priority" : "fifo";

    if (victims == NULL || key == NULL || vkey == NULL || vprio == NULL) {
        errno = ENOMEM;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const struct policy_job *j = &s->job[i];
        key[i] = (struct order_key){{-policy_aged_priority(s, j), 0, j->submitted}, i};
        /* Running jobs keep their size: it is taken off what is left first. */
        if (j->workers > 0) {
            size[i] = j->workers;
            slots_left -= (long)j->workers * j->cpw;
            gpus_left -= (long)j->workers * j->gpw;
            if (preempt)
                vkey[nv++] = (struct order_key){{policy_aged_priority(s, j), -j->started, 0}, i};
        }
    }
    order_sort(key, n, order);
    order_sort(vkey, nv, victims);
    for (int k = 0; k < nv; k++)
        vprio[k] = policy_aged_priority(s, &s->job[victims[k]]);
    for (int k = 0; k < n; k++) {
        int i = order[k], w;
        const struct policy_job *j = &s->job[i];
        if (j->workers > 0 || !j->eligible || blocked)
            continue;
        w = policy_room(j, slots_left, gpus_left);
        if (w < j->min && cap[i] >= j->min && preempt &&
            preempt_for(s, i, size, &slots_left, &gpus_left, vprio, victims, nv, out))
            w = policy_room(j, slots_left, gpus_left);
        if (w > cap[i])
            w = cap[i];
        if (w < j->min) {
            if (s->now - j->waiting_since >= s->params.reserve_after_s)
                blocked = 1; /* it has waited long enough: no backfill past it */
            continue;
        }
        size[i] = w;
        slots_left -= (long)w * j->cpw;
        gpus_left -= (long)w * j->gpw;
        snprintf(out[i].reason, sizeof(out[i].reason), "%s: next in line (priority %.0f)", name,
                 policy_aged_priority(s, j));
    }
    rc = 0;
done:
    free(victims);
    free(key);
    free(vkey);
    free(vprio);
    return rc;
}

static int plan(const struct policy_snapshot *s, struct policy_target *out)
{
    int preempt = 0;
    return policy_run(s, out, policy__fifo_decide, &preempt);
}

const struct policy_ops policy_fifo = {"fifo", 0, plan, NULL};
