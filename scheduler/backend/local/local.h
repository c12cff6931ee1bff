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
#include <limits.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/setting.h"
#include "scheduler/backend/backend.h"

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

/* ---- its settings (local_config.c) ---- */

/* The keys of ringd's configuration that are the local backend's (backend.h: settings). */
extern const struct setting local_settings[];

enum { LOCAL_ISOLATION_AUTO, LOCAL_ISOLATION_NAMESPACE, LOCAL_ISOLATION_NONE };

/* The local backend's settings, read and checked. */
struct local_settings {
    int isolation;              /* LOCAL_ISOLATION_* */
    struct local_limits limits; /* job_limits */
    char exec_helper[PATH_MAX]; /* ringd-exec (local_config.c), resolved and checked */
};

/*
 * Reads and checks the settings in cfg (backend_setting()): isolation's value and
 * job_limits (parsed, and within what ringd may grant); finds the ringd-exec next to
 * ringd. Returns 0, or -1 with errno EINVAL and err saying what to fix.
 */
int local_settings_read(const struct backend_config *cfg, struct local_settings *out,
                        struct error *err);
/* The config op (backend.h): local_settings_read, and the ringd-exec it finds must be
 * safe to run with ringd's privileges (only root or ringd's own user may change it, or a
 * directory above it). */
int local_config(const struct backend_config *cfg, struct error *err);
/*
 * Whether jobs run in a private mount namespace that hides cfg->data_dir (1) or not (0),
 * as set->isolation asks and this host allows; with isolation none as root, opens the data
 * directory for traversal (0711: job users reach their run directories). Returns -1 with
 * errno EINVAL and err when ringd must not start: isolation asked for and impossible, or
 * impossible where jobs could read ringd's data.
 */
int local_isolation_choose(const struct backend_config *cfg, const struct local_settings *set,
                           struct error *err);

#endif /* RINGD_BACKEND_LOCAL_H */
