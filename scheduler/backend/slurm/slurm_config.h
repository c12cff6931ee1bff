/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slurm_config.h - the Slurm backend's own settings (slurm_config.c): where its batch jobs
 * go (partition, account, QOS, time limit) and the work directory every node sees, for the
 * jobs' runs/ and checkpoints/. ringd reads them without knowing them (backend.h).
 */
#ifndef RINGD_SLURM_CONFIG_H
#define RINGD_SLURM_CONFIG_H

#include <limits.h>

#include "common/error.h"
#include "common/setting.h"
#include "scheduler/backend/backend.h"

/* The keys of ringd's configuration that are the Slurm backend's (slurm_partition, ...). */
extern const struct setting slurm_settings[];

struct slurm_settings {
    char partition[128], account[128], qos[128]; /* "": Slurm's default */
    int time_limit_min;                          /* 0: the partition's */
    char work_dir[PATH_MAX];                     /* as configured (slurm_work_dir) */
};

/*
 * Reads and checks the settings in cfg (backend_setting(), then cfg->options, whose
 * partition=, account=, qos= and time_limit= keys the slurm_* settings once went through).
 * Returns 0, or -1 with errno EINVAL and err saying what to fix: slurm_work_dir is
 * required.
 */
int slurm_settings_read(const struct backend_config *cfg, struct slurm_settings *out,
                        struct error *err);
/* The config op (backend.h): slurm_settings_read, keeping nothing. */
int slurm_config(const struct backend_config *cfg, struct error *err);
/*
 * Makes the work directory dir (runs/ and checkpoints/, which every Slurm node must see and
 * the jobs' users reach) and resolves it into out (len bytes): it must lie outside
 * data_dir, belong to root or ringd's user (ringd makes each job's directories in it as
 * root), and is made traversable (0755). Returns 0, or -1 with errno EINVAL and err.
 */
int slurm_work_dir_prepare(const char *dir, const char *data_dir, char *out, size_t len,
                           struct error *err);

#endif /* RINGD_SLURM_CONFIG_H */
