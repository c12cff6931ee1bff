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

/*
 * The most of progress.json that ringd reads. A report is a few hundred bytes (libring's
 * and the examples' are under 300); 16 KiB leaves room for a program's own fields while
 * keeping what a job can make ringd read and parse, on the scheduler's thread at every
 * rewrite and on an HTTP thread at every GET of the job, to a few microseconds' work.
 */
#define PROGRESS_MAX 16384

struct progress {
    long step, total_steps;        /* -1: absent */
    double samples_per_s;          /* -1: absent */
    double samples, total_samples; /* -1: absent */
    int world_size;                /* -1: absent */
};

/*
 * Reads path, without following links (jobfs.h), never more than PROGRESS_MAX bytes.
 * Returns 0, or -1 with errno: EFBIG when the file is larger than PROGRESS_MAX (it is not
 * read), EINVAL when it is not a JSON object, or what opening it gave (ENOENT, ELOOP...).
 */
int progress_read(const char *path, struct progress *p);

#endif /* RINGD_PROGRESS_H */
