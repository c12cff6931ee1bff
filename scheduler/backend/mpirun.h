/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpirun.h - a job's ranks under Open MPI's mpirun (JobSpec "launcher": "mpirun"), on this
 * host or inside a Slurm allocation. The ranks bootstrap through mpirun's PMIx server.
 *
 * Two things of mpirun's do not fit ringd's stop contract (SIGTERM to every rank, the ranks
 * agree, checkpoint and exit 75), and a small wrapper around each rank fixes both:
 *   - mpirun answers a SIGTERM of its own by killing the job, and puts each rank in a
 *     process group of its own, out of reach of a signal to mpirun's group. But it passes
 *     SIGUSR2 on to every rank. So ringd stops an mpirun job with SIGUSR2 to mpirun, and the
 *     wrapper turns it into the SIGTERM the program expects.
 *   - Each rank's output goes to RING_RUN_DIR/rank.N/stdout and stderr, as under ringrun
 *     and srun, which ringd's logs API reads.
 * The wrapper is a fixed shell text; the program and its arguments reach it as "$@", so no
 * user text is read by a shell. mpirun's exit status is the first failing rank's (75 when
 * they all stop), since it aborts the job when a rank exits non-zero.
 */
#ifndef RINGD_MPIRUN_H
#define RINGD_MPIRUN_H

#include <stddef.h>

#include "common/stop_relay.h"

/*
 * A job's command reaches mpirun and srun as words after the program they start (sh with a
 * wrapper), and both read a word ":" anywhere on their command line as the start of another
 * program: an app context of mpirun, a heterogeneous step of srun, which would run outside
 * the job's slots and GPUs (no CUDA_VISIBLE_DEVICES of the rank's own). So every word goes
 * with LAUNCH_WORD_MARK in front, and LAUNCH_UNMARK, at the head of each rank's wrapper,
 * takes it off again: the program gets its words exactly, ":" included. Fixed shell text,
 * with no single quote (batch scripts embed it in one).
 */
#define LAUNCH_WORD_MARK "_"
#define LAUNCH_UNMARK    "for a; do shift; set -- \"$@\" \"${a#_}\"; done; "

/*
 * words[0..n-1] with LAUNCH_WORD_MARK in front of each, as a new NULL-terminated array in
 * one allocation (the caller frees it, once). Returns NULL when words is NULL or out of
 * memory.
 */
char **launch_words_mark(char *const *words, size_t n);

/* The signal that asks an mpirun job to stop (see above). */
#define MPIRUN_STOP_SIGNAL RANK_STOP_SIGNAL

/* The per-rank wrapper: sh -c MPIRUN_WRAPPER rank PROGRAM ARGS..., each word marked. */
extern const char MPIRUN_WRAPPER[];

/* How many entries mpirun_args may append for np ranks and a command of ncmd words. */
size_t mpirun_argc(int np, size_t ncmd);

/*
 * Appends to av, from index at, the command line of mpirun running cmd (ncmd words,
 * borrowed, marked here) on np ranks, each wrapped: on hosts ("host:slots,...", NULL inside a Slurm
 * allocation, where mpirun asks Slurm). With gpus ("0,1,2,3", NULL or "" for none) each
 * rank gets its own gpus_per_rank of them in CUDA_VISIBLE_DEVICES, through one app context
 * per rank ("-np 1 -x CUDA_VISIBLE_DEVICES=0 ... : -np 1 ..."). av must have room for
 * mpirun_argc(np, ncmd) more entries; the list is NULL-terminated. *storage gets a malloc'ed
 * block that some entries point into: free it after av's last use. Returns the new count,
 * or -1 when out of memory.
 */
int mpirun_args(char **av, int at, const char *mpirun, int np, const char *hosts, const char *gpus,
                int gpus_per_rank, char *const *cmd, size_t ncmd, char **storage);

#endif /* RINGD_MPIRUN_H */
