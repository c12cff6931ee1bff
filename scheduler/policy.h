/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy.h - scheduling policies: pure functions from a snapshot of the cluster and the
 * queue to the attempts to start now, so that ringd and ringsim run the very same code.
 */
#ifndef RINGD_POLICY_H
#define RINGD_POLICY_H

#include <stdint.h>

#define POLICY_MAX_GPUS 64

struct policy_job {
    int min_workers, max_workers;
    int gpus_per_worker;
    int priority;       /* higher first */
    int64_t not_before; /* unix seconds; a backoff keeps it waiting until then */
};

struct policy_cluster {
    int slots_free;                      /* one per worker */
    int gpus;                            /* GPUs 0..gpus-1 */
    unsigned char busy[POLICY_MAX_GPUS]; /* 1 when allocated */
};

struct policy_start {
    int job; /* index into the queue */
    int workers;
    int ngpus;
    int gpu[POLICY_MAX_GPUS]; /* ids given to the workers, gpus_per_worker each, in order */
};

/*
 * FIFO with backfill: jobs in order of priority, then of submission (the queue's order);
 * each gets the most workers in [min, max] that fit, and a job that does not fit lets later
 * ones that do run ("backfill"; a large job can wait behind a stream of small ones, which a
 * reservation-based policy would avoid). Fills out (at most n entries) and returns how many
 * attempts to start. cluster is updated to what remains free.
 */
int policy_fifo(const struct policy_job *queue, int n, struct policy_cluster *cluster, int64_t now,
                struct policy_start *out);

#endif /* RINGD_POLICY_H */
