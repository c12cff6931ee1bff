/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpi_env.h - MPI's lifetime in a libring process, shared by the MPI bootstrap
 * (bootstrap_mpi.c) and the MPI collective ops (ops_mpi.c). Built with RING_WITH_MPI.
 *
 * MPI starts at most once per process and cannot start again after MPI_Finalize. libring
 * initializes it only when the program has not: then the last ring__mpi_release finalizes
 * it, and a later ring_init that needs MPI gets RING_ENOTSUP (a program that calls
 * ring_init more than once under MPI initializes MPI itself). A program that initialized
 * MPI keeps it: libring never finalizes what it did not start.
 *
 * libring calls MPI from its engine thread, and from the program's thread in ring_init and
 * ring_finalize, never from two threads at once: MPI_THREAD_SERIALIZED is enough for
 * libring, MPI_THREAD_MULTIPLE is needed if the program calls MPI itself meanwhile.
 */
#ifndef RING_MPI_ENV_H
#define RING_MPI_ENV_H

#include <mpi.h>
#include <stdint.h>

/*
 * 1 when this process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE for
 * Open MPI, PMI_SIZE for MPICH's Hydra) or the program has initialized MPI itself.
 */
int ring__mpi_launched(void);
/*
 * Takes a reference on MPI, initializing it (MPI_Init_thread, asking for
 * MPI_THREAD_MULTIPLE, on a thread of libring's own) when nobody has, waiting for that at
 * most timeout_ms. Returns 0, or RING_ETIMEDOUT (MPI_Init still waits for a rank of the
 * job), RING_ENOTSUP (MPI was finalized already, or gives less than
 * MPI_THREAD_SERIALIZED), RING_EBOOTSTRAP (MPI_Init_thread failed) or RING_ESYS, with a
 * ring__err() text.
 */
int ring__mpi_acquire(int timeout_ms);
/*
 * Drops a reference. The last one finalizes MPI if libring initialized it, unless broken
 * (here or in an earlier release): after a failed job MPI_Finalize may wait forever for a
 * stuck peer, so MPI is then left to the launcher, which reports the failure anyway.
 */
void ring__mpi_release(int broken);

/*
 * Waits for the non-blocking operation *req by polling MPI_Test until deadline_ms
 * (ring__now_ms() clock). yield: call sched_yield() between polls (an oversubscribed
 * host, where spinning would steal the CPU the peers need). Returns 0, RING_ETIMEDOUT (the
 * request is then left pending: the caller marks its communicator broken), or RING_EPEER
 * for an MPI error; what names the operation in the ring__err() text.
 */
int ring__mpi_wait(MPI_Request *req, int64_t deadline_ms, int yield, int rank, const char *what);
/* Turns an MPI error code into a RING_EPEER with MPI's text. */
int ring__mpi_error(int mpi_rc, int rank, const char *what);

#endif /* RING_MPI_ENV_H */
