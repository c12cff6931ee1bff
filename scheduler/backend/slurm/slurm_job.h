/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slurm_job.h - an attempt as a Slurm batch job, without any RPC: the shape ringd asks for
 * (nodes, tasks, GPUs per node), the batch script, the GPU request in the syntax of this
 * Slurm, what a job's state means for the attempt, and the GRES strings of nodes and jobs.
 * Pure functions over libslurm's types, so the unit tests feed them hand-made records;
 * backend_slurm.c does the RPCs.
 */
#ifndef RINGD_SLURM_JOB_H
#define RINGD_SLURM_JOB_H

#include <slurm/slurm.h>
#include <stddef.h>

#include "common/error.h"
#include "common/stop_relay.h"

/* What ringd asks Slurm for: ringd decides the size, Slurm places it. */
struct slurm_shape {
    int nodes;          /* min_nodes = max_nodes */
    int ntasks;         /* the workers */
    int tasks_per_node; /* at most this many workers on one node */
    int cpus_per_task;
    int gpus_per_node; /* tres_per_node gres gpu count; 0 for none */
};

/*
 * The fewest nodes that hold workers workers of cpw CPUs and gpw GPUs each, when a node has
 * node_cpus CPUs and node_gpus GPUs (the largest node of the partition). Returns 0, or -1
 * with err when one worker does not fit on any node.
 */
int slurm_shape(int workers, int cpw, int gpw, int node_cpus, int node_gpus,
                struct slurm_shape *out, struct error *err);

/* The tres_per_node request for n GPUs: "gres:gpu:n" up to Slurm 23.02, "gres/gpu:n" from
 * 23.11 on (the syntax changed there), by the Slurm this was built against. */
void slurm_gpu_tres(int n, char *buf, size_t len);

/* The signal that asks the ranks of an srun job to stop, sent to the job's steps; each
 * rank's wrapper (RANK_STOP_WRAPPER) turns it into SIGTERM. stop_relay.h says why. */
#define SLURM_STOP_SIGNAL RANK_STOP_SIGNAL

/* Which program a batch job runs its ranks under. */
enum slurm_launcher {
    SLURM_LAUNCH_SRUN,   /* srun --mpi=pmix: libring bootstraps through PMIx */
    SLURM_LAUNCH_MPIRUN, /* Open MPI's mpirun inside the allocation (JobSpec launcher) */
};

/*
 * The batch script of an attempt, as a malloc'ed string (NULL when out of memory). It
 * runs the command given as the script's arguments (job_desc argv), so that no user text
 * goes through the shell: srun --mpi=pmix with one output file per rank under
 * $RING_RUN_DIR/rank.N, a failing rank's peers killed after grace_s seconds, and
 * gpus_per_task GPUs bound to each rank, each rank wrapped (RANK_STOP_WRAPPER); or mpirun with the
 * allocation's hosts and slots.
 */
char *slurm_script(enum slurm_launcher launcher, int grace_s, int gpus_per_task, const char *job_id,
                   int attempt);

/* How a Slurm job stands, for its attempt. */
struct slurm_outcome {
    int ended;        /* 1: the job is over (the attempt ended) */
    int running;      /* 1: it runs (RUNNING, SUSPENDED) */
    int status;       /* when ended: the batch script's exit status, or 128+N for signal N */
    int cancelled;    /* when ended: Slurm cancelled it (scancel, by ringd or someone else) */
    int lost;         /* when ended: by a node failure or boot failure, not by the program */
    char reason[200]; /* Slurm's word on it: "time limit reached", "node failure on n2",
                       * "cancelled (scancel)", the pending reason... ("" when none) */
};

/* Reads j's state (job_state & JOB_STATE_BASE), exit code and reason into out. */
void slurm_outcome(const slurm_job_info_t *j, struct slurm_outcome *out);

/*
 * Whether every rank of an ended attempt started. srun exits 0 when the step could not be
 * launched on one node (its slurmstepd failed to set it up) if the ranks elsewhere ended
 * before srun aborted them, and a job whose ranks never ran must not pass for a success.
 * Each rank that starts gets $RING_RUN_DIR/rank.N/stdout (slurmstepd or the mpirun wrapper
 * creates it before the program runs). So, for an ended outcome that Slurm did not cancel,
 * whose run_dir lacks the file of some of its ntasks ranks: a status 0 becomes 1, with a
 * reason that says which ranks never started; another status keeps its reason, with the
 * ranks added; either way the outcome is lost (Slurm's doing, not the program's). Returns
 * how many never started.
 */
int slurm_check_ranks_started(const char *run_dir, int ntasks, struct slurm_outcome *out);

/*
 * Whether Slurm error e (slurm_get_errno()) means that slurmctld could not be reached or
 * was too busy to answer (a connection refused or timed out, a controller in standby,
 * "temporarily unable to accept"): nothing was done, and the same call may work later.
 */
int slurm_unreachable(int e);

/* The count of gres name in a GRES string such as "gpu:2", "gpu:a100:4(S:0-1)" or
 * "gpu:2,mps:100"; 0 when absent. */
int slurm_gres_count(const char *gres, const char *name);

/*
 * The indexes of gres name in a GRES detail string such as "gpu:1(IDX:0)",
 * "gpu(IDX:0-1)" or "gpu:a100:3(IDX:0,2-3)", written to idx (at most max). Returns how
 * many, 0 when none.
 */
int slurm_gres_indexes(const char *detail, const char *name, int *idx, int max);

#endif /* RINGD_SLURM_JOB_H */
