/* SPDX-License-Identifier: Apache-2.0 */
/*
 * speed.h - a job's throughput at each size it has run, and a scaling model for the sizes
 * it has not. Pure: no clock, no I/O. ringd keeps one per job from rank 0's progress
 * reports; the dynamic policy and the API ask it for predictions.
 *
 * The model is Amdahl's law with the ring allreduce's term. Let tau(n) be the time one unit
 * of work (a sample, or a step) takes on n workers:
 *
 *     tau(n) = a + b/n + c * g(n)
 *
 *   a  the serial part (nothing parallel: data loading on one rank, say)
 *   b  the work that divides among workers
 *   c  the allreduce: a ring moves 2(n-1)/n of the gradients S per rank, at bandwidth B,
 *      so c is S/B per step. Where the per-worker batch is fixed (Horovod's default: weak
 *      scaling, the global batch grows with n) one step does n times the work, so per unit
 *      of work g(n) = 2(n-1)/n^2; where the global batch is fixed (strong scaling)
 *      g(n) = 2(n-1)/n.
 *
 * Observations are throughputs (units of work per second) at a size; tau = 1/throughput.
 * With observations at three or more sizes a, b and c are fitted by least squares (none
 * negative); with two, a = 0 and b, c solve them; with one, a = 0 and c is set by the
 * prior SPEED_PRIOR_COMM (the ring costs that fraction of the compute at one worker) until
 * a second size is seen.
 */
#ifndef RINGD_SPEED_H
#define RINGD_SPEED_H

enum speed_mode {
    SPEED_WEAK = 0,   /* fixed per-worker batch (Horovod's default; the example trainer) */
    SPEED_STRONG = 1, /* fixed global batch (Pollux's tuned jobs) */
};

/* Sizes remembered per job: a job that has run at more sizes forgets the least observed. */
#define SPEED_SIZES 12
/*
 * The ring's cost relative to the compute, before two sizes are known: 0.1 makes doubling
 * from 1 to 2 workers a 1.67x speedup under strong scaling, 1.82x under weak scaling,
 * modest enough that the first doubling does not look better than it usually is.
 */
#define SPEED_PRIOR_COMM 0.1
/*
 * speed_at is kept worked out for 1 .. SPEED_CACHED workers: the dynamic policy asks for
 * the same few sizes of every job several times a pass, and a pass runs at every arrival
 * and end (ringsim's 100k jobs: hundreds of thousands of passes over a thousand jobs or
 * more), while the observations change only at a progress report. 64 covers ringsim's
 * jobs (at most 64 GPUs) and most real ones; larger sizes are worked out on each call.
 */
#define SPEED_CACHED 64

struct speed_obs {
    int workers;
    double thr; /* units of work per second: a running mean of the reports at this size */
    int count;  /* reports averaged */
};

struct speed {
    /* at[k]: speed_at(k) for k in 1 .. SPEED_CACHED, as the observations and the model
     * below stand: speed_observe (which refits) works them out again, so they are never
     * stale as long as nothing else writes the fields below. All 0 (speed_init, or a
     * zeroed struct) is right for no observations. First, so that the small sizes share
     * a cache line with what comes before (loop.h's job). */
    double at[SPEED_CACHED + 1];
    enum speed_mode mode;
    int nobs;
    struct speed_obs obs[SPEED_SIZES];
    double a, b, c; /* the fitted model; b == 0: nothing known */
};

void speed_init(struct speed *s, enum speed_mode mode);
/* Records a throughput report at workers (ignored unless both are positive) and refits. */
void speed_observe(struct speed *s, int workers, double thr);
/* The observed throughput at workers (1 and *thr), or 0 when that size was never seen. */
int speed_observed(const struct speed *s, int workers, double *thr);
/* The throughput at workers: observed where seen, else predicted; 0 when nothing is known.
 * Constant time up to SPEED_CACHED workers. */
double speed_at(const struct speed *s, int workers);
/* The model's prediction at workers, even where observed; 0 when nothing is known. Below
 * the largest size observed it lies between the observations of the sizes either side
 * (never above a larger size's), so that it never rises as workers are taken away. */
double speed_predict(const struct speed *s, int workers);

#endif /* RINGD_SPEED_H */
