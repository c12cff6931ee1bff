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

/* The signal that asks an mpirun job to stop (see above). */
#define MPIRUN_STOP_SIGNAL SIGUSR2

/* The per-rank wrapper: sh -c MPIRUN_WRAPPER rank PROGRAM ARGS... */
extern const char MPIRUN_WRAPPER[];

/*
 * The argument vector of mpirun for np ranks on hosts ("host:slots,..."; NULL inside a
 * Slurm allocation, where mpirun asks Slurm), each rank wrapped, running argv (NULL-
 * terminated, borrowed). Returns a malloc'ed NULL-terminated vector whose strings point
 * into argv, hosts, string constants or the vector's own storage (freed with it), or NULL
 * when out of memory.
 */
char **mpirun_argv(const char *mpirun, int np, const char *hosts, char *const *argv);

#endif /* RINGD_MPIRUN_H */
