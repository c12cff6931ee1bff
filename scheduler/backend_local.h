/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_local.h - runs an attempt on this host: ringrun in a process group of its own,
 * with the worker contract, each rank pinned to its GPUs, logs in the attempt's run dir.
 */
#ifndef RINGD_BACKEND_LOCAL_H
#define RINGD_BACKEND_LOCAL_H

#include <jansson.h>
#include <sys/types.h>

#include "error.h"

struct local_launch {
    const char *ringrun; /* path of ringrun */
    const char *job_id;
    int attempt;
    int workers;
    const char *gpus; /* "0,1" (gpus_per_worker per rank, in rank order) or "" */
    int gpus_per_worker;
    const char *run_dir;        /* created by the caller; logs and progress.json go here */
    const char *checkpoint_dir; /* RING_CHECKPOINT_DIR */
    json_t *spec;               /* borrowed: command, env, working_dir */
};

/* Starts the attempt. Returns the pid of ringrun (also its process group), or -1 with err. */
pid_t local_launch(const struct local_launch *l, struct error *err);
/* Sends sig to the attempt's process group. Returns 0, or -1 when it is gone. */
int local_signal(pid_t pgid, int sig);

#endif /* RINGD_BACKEND_LOCAL_H */
