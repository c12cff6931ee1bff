/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slurm.h - ringrun inside a Slurm allocation. As horovodrun does under Slurm, ringrun then
 * starts the ranks with one `srun --mpi=pmix` step instead of forking them or using a remote
 * shell: Slurm places them on the allocation's nodes and GPUs, and each rank learns its
 * place and finds its peers through PMIx (libring's PMIx bootstrap), so ringrun serves no
 * rendezvous.
 *
 * ringrun keeps its own behaviour on top of srun: rank-prefixed output ("[3]<stdout>:...",
 * from srun --label), --output-dir's per-rank files, a graceful SIGTERM (srun itself would
 * kill the step at once, so ringrun signals the step's tasks through scancel and kills the
 * step only after --kill-grace), and the first failing rank's exit status.
 */
#ifndef RINGRUN_SLURM_H
#define RINGRUN_SLURM_H

#include <stddef.h>

#include "hosts.h"

struct slurm_launch {
    int np;            /* ranks; 0: the allocation's SLURM_NTASKS */
    int gpus_per_rank; /* 0: leave GPUs to the allocation (srun's default) */
    int grace_s;       /* after a rank fails or a signal arrives, before the step is killed */
    int timeout_s;     /* 0: leave RING_TIMEOUT_SECONDS to the environment */
    const char *output_dir;
    const char *step_name; /* srun -J: how ringrun finds its step to signal it */
    int verbose;
    int hup_ignored; /* ringrun was started with SIGHUP ignored (nohup): keep it so */
    char **argv;     /* the program and its arguments */
};

/* 1 when this process runs inside a Slurm allocation (SLURM_JOB_ID and SLURM_NODELIST). */
int slurm_in_allocation(void);

/*
 * Builds srun's argument vector for l into av (at most cap entries, NULL-terminated),
 * with the number strings in buf (cap bufcap). Returns the number of entries, or -1 with
 * errno EINVAL when np is missing (0 and no SLURM_NTASKS), E2BIG when the vector does not
 * fit, and err.
 * Pointers in av point into l->argv, buf or string constants.
 */
int slurm_srun_argv(const struct slurm_launch *l, char **av, int cap, char *buf, size_t bufcap,
                    struct error *err);

/*
 * Runs the job through srun and returns ringrun's exit status: srun's (the first failing
 * rank's status, 128+N for signal N), 127 when srun cannot be started, 64 on bad
 * arguments.
 */
int slurm_run(const struct slurm_launch *l);

#endif /* RINGRUN_SLURM_H */
