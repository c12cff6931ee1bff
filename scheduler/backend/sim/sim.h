/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim.h - the sim backend: its ops, and its own controls.
 *
 * No processes: each attempt is a record on a virtual clock. A job has a number of steps
 * to do; an attempt does them at the rate its model gives for its placement, after a start
 * delay (the restart cost: loading the checkpoint, rendezvous, warm-up) during which it does
 * nothing; its speed may change at points the model names (an epoch, say). SIGTERM is a
 * graceful stop: the steps done so far are kept (the checkpoint), and
 * the attempt exits 75 after the stop delay; SIGKILL exits 137 at once and loses the steps
 * of that attempt. An attempt that finishes its steps exits 0. When it starts to make
 * progress, an attempt reports it once (BACKEND_PROGRESS: steps done and total, steps per
 * second), and again every report_s.
 *
 * Options (backend_config.options, comma-separated): nodes=N (4), slots=S per node (8),
 * gpus=G per node (4), start_s=D (30), stop_s=D (0), report_s=D (0: only the first
 * report). Without a model every job has 600 steps and does one step per second per
 * worker.
 *
 * The clock only moves when the driver moves it (backend_sim_advance): the loop and ringsim
 * jump from event to event.
 */
#ifndef RINGD_BACKEND_SIM_H
#define RINGD_BACKEND_SIM_H

#include "scheduler/backend/backend.h"

/* The sim backend's ops (not in backend.c's table: ringd never runs it). */
extern const struct backend_ops backend_sim_ops;

struct sim_model {
    /*
     * The speed of job s->job_id's attempt at s->placement once it has done `done` steps:
     * *steps_per_s, which holds until it has done *until steps (the next point where the
     * speed changes, such as an epoch whose statistics differ; *steps when it never does),
     * and the job's total *steps. Returns 0, or -1 when the model cannot run it there (the
     * attempt then fails to start).
     */
    int (*speed)(void *arg, const struct backend_start *s, double done, double *steps_per_s,
                 double *until, double *steps);
    void *arg;
};

/* Replaces the model (NULL: the default). */
void backend_sim_set_model(void *ctx, const struct sim_model *m);
/* Moves the clock to t (never backwards). */
void backend_sim_advance(void *ctx, double t);
/* The time of the next thing that will happen by itself (a start delay ending, an exit),
 * or INFINITY. */
double backend_sim_next_event(void *ctx);
/* Steps done by job_id so far (its checkpoint plus what its running attempt has done). */
double backend_sim_steps(void *ctx, const char *job_id);
/* How many attempts run (or are being stopped). */
int backend_sim_running(void *ctx);

#endif /* RINGD_BACKEND_SIM_H */
