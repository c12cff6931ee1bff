/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_local.h - runs an attempt on this host: ringrun in a process group of its own,
 * with the worker contract, each rank pinned to its GPUs, logs in the attempt's run dir.
 *
 * ringd never forks itself into a job. It builds everything (argument vector, environment,
 * the user's identity) first, then posix_spawns ringd-exec with an empty environment;
 * ringd-exec isolates the job from ringd's data directory, becomes the job's user and
 * execs ringrun (see ringd_exec.c for the steps and why).
 */
#ifndef RINGD_BACKEND_LOCAL_H
#define RINGD_BACKEND_LOCAL_H

#include <jansson.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "common/error.h"

/* The resource limits a job starts with (ringd's job_limits setting). */
#define LOCAL_LIMITS_MAX 9
struct local_limit {
    int resource;      /* RLIMIT_* */
    rlim_t soft, hard; /* RLIM_INFINITY: unlimited */
    char name[8];
};
struct local_limits {
    int n;
    struct local_limit v[LOCAL_LIMITS_MAX];
};
/*
 * Parses job_limits: "name=value,..." with names as ulimit's (as, core, cpu, data, fsize,
 * memlock, nofile, nproc, stack) and values a number or "unlimited", or "soft:hard" (one
 * value sets both). NULL or "" is no limit (a job inherits ringd's). Returns 0, or -1 with
 * errno EINVAL and err naming what to fix.
 */
int local_limits_parse(const char *text, struct local_limits *out, struct error *err);
/* Whether ringd can set limits: without root no hard limit may exceed ringd's own.
 * Returns 0, or -1 with errno EPERM and err. */
int local_limits_allowed(const struct local_limits *limits, struct error *err);

struct local_launch {
    const char *ringrun;     /* path of ringrun */
    const char *mpirun;      /* path of mpirun: set for launcher "mpirun" jobs, else NULL */
    const char *exec_helper; /* path of ringd-exec */
    const char *job_id;
    int attempt;
    int workers;
    const char *gpus; /* "0,1" (gpus_per_worker per rank, in rank order) or "" */
    int gpus_per_worker;
    const char *run_dir;        /* created by the caller; logs and progress.json go here */
    const char *checkpoint_dir; /* RING_CHECKPOINT_DIR */
    int checkpoint_in_data_dir; /* 1: ringd's default (created by the caller, inside
                                 * hide_dir); 0: the user named it (created as the user) */
    const char *hide_dir;       /* the data directory, hidden from the job; NULL: no isolation */
    const char *user;           /* the job's Unix user; NULL: ringd's own */
    const struct local_limits *limits; /* what the job starts with; NULL: ringd's own */
    json_t *spec;                      /* borrowed: command, env, working_dir */
};

/*
 * Starts the attempt. Returns the pid of ringrun, or of mpirun (mpirun.h) when l->mpirun is
 * set (also its process group), or -1 with err.
 * The run directory (and the default checkpoint directory) are given to the job's user.
 * Errors that happen after the spawn (isolation, the user switch, exec) end the attempt
 * with status 126 or 127 and a "ringd-exec:" line in the run directory's ringrun.log.
 */
pid_t local_launch(const struct local_launch *l, struct error *err);
/* Sends sig to the attempt's process group. Returns 0, or -1 when it is gone. */
int local_signal(pid_t pgid, int sig);
/*
 * Whether ringd-exec can hide dir from jobs on this host (a private mount namespace; a
 * user namespace too when not root). Returns 1, or 0 with err saying why not.
 */
int local_isolation_works(const char *exec_helper, const char *dir, struct error *err);

#endif /* RINGD_BACKEND_LOCAL_H */
