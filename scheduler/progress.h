/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress.h - rank 0's progress report, RING_RUN_DIR/progress.json (the worker contract):
 *   {"step": 120, "total_steps": 1000, "samples_per_s": 5100.0, "world_size": 4,
 *    "samples": 61440, "total_samples": 512000, "epoch": 3, "epochs": 25, "loss": 0.31}
 * Every field is optional; samples and total_samples count the whole job's work (every
 * attempt), so that the scheduler knows how much is left whatever the world size.
 */
#ifndef RINGD_PROGRESS_H
#define RINGD_PROGRESS_H

struct progress {
    long step, total_steps;        /* -1: absent */
    double samples_per_s;          /* -1: absent */
    double samples, total_samples; /* -1: absent */
    int world_size;                /* -1: absent */
};

/* Reads path. Returns 0, or -1 when it is missing or not a JSON object. */
int progress_read(const char *path, struct progress *p);

#endif /* RINGD_PROGRESS_H */
