/* SPDX-License-Identifier: Apache-2.0 */
/* mpi_env.c - MPI's lifetime and bounded waits for libring (mpi_env.h). */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "base/mpi_env.h"

/*
 * When libring starts MPI, it does so on a thread of its own that lives until MPI_Finalize
 * (the standard wants both on one thread): Open MPI's MPI_Init waits in a fence for every
 * rank of the job, with no timeout, so a rank that never calls ring_init would hang the
 * others. ring_init instead waits for the owner thread until RING_TIMEOUT_SECONDS and fails
 * with RING_ETIMEDOUT; the owner is then left blocked in MPI_Init, which the process's exit
 * ends.
 *
 * ring_init and ring_finalize run on the program's thread, but never race with each other
 * (ring.h); the lock orders them with the owner thread.
 */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int refs, started_here, finalized, broken_seen;
static pthread_t owner;
/* The owner's state: 0 none, 1 in MPI_Init, 2 MPI_Init returned (init_rc, init_level). */
static int owner_state, init_rc, init_level;
/* Told to the owner by the last release: 1 finalize, 2 leave MPI to the process's exit. */
static int owner_exit;

static const char *level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    default:
        return "MPI_THREAD_MULTIPLE";
    }
}

int ring__mpi_launched(void)
{
    const char *o = getenv("OMPI_COMM_WORLD_SIZE"), *p = getenv("PMI_SIZE");
    int inited = 0, done = 0;

    MPI_Initialized(&inited);
    MPI_Finalized(&done);
    return (inited && !done) || (o != NULL && *o != '\0') || (p != NULL && *p != '\0');
}

static void *owner_main(void *arg)
{
    int level = MPI_THREAD_SINGLE, rc, how;

    (void)arg;
    rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &level);
    pthread_mutex_lock(&mu);
    init_rc = rc;
    init_level = level;
    owner_state = 2;
    pthread_cond_broadcast(&cv);
    while (owner_exit == 0)
        pthread_cond_wait(&cv, &mu);
    how = owner_exit;
    pthread_mutex_unlock(&mu);
    if (rc == MPI_SUCCESS && how == 1)
        MPI_Finalize();
    return NULL;
}

/* Starts MPI on the owner thread, or waits for the one already starting it. */
static int start_locked(int timeout_ms)
{
    struct timespec until;
    int err = 0;

    if (owner_state == 0) {
        sigset_t all, old;
        /* The owner takes no signals: the program's handlers run on the program's threads. */
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        err = pthread_create(&owner, NULL, owner_main, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (err != 0)
            return ring__err(RING_ESYS, "cannot start MPI's thread: %s", strerror(err));
        owner_state = 1;
        owner_exit = 0;
    }
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (owner_state == 1 && err == 0)
        err = pthread_cond_timedwait(&cv, &mu, &until);
    if (owner_state == 1)
        return ring__err(RING_ETIMEDOUT,
                         "MPI_Init did not complete within %d s (RING_TIMEOUT_SECONDS): it waits "
                         "for every rank of the mpirun job; did they all start and call "
                         "ring_init?",
                         timeout_ms / 1000);
    if (init_rc != MPI_SUCCESS)
        return ring__err(RING_EBOOTSTRAP, "MPI_Init_thread failed (code %d)", init_rc);
    started_here = 1;
    return 0;
}

static int acquire_locked(int timeout_ms)
{
    int inited = 0, done = 0, level = MPI_THREAD_SINGLE, rc;

    MPI_Finalized(&done);
    if (finalized || done)
        return ring__err(RING_ENOTSUP,
                         "MPI was finalized already, and cannot start twice in one process; "
                         "a program that calls ring_init again under MPI must initialize MPI "
                         "itself (MPI_Init_thread), so that libring leaves it running");
    MPI_Initialized(&inited);
    if (!inited || owner_state == 1) {
        if ((rc = start_locked(timeout_ms)) < 0)
            return rc;
        level = init_level;
    } else {
        MPI_Query_thread(&level);
    }
    if (level < MPI_THREAD_SERIALIZED)
        return ring__err(RING_ENOTSUP,
                         "MPI runs at %s, but libring calls MPI from its background thread and "
                         "needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE (the program "
                         "should initialize MPI with MPI_Init_thread)",
                         level_name(level));
    if (level < MPI_THREAD_MULTIPLE && !started_here)
        ring__log(RING_LOG_WARNING,
                  "MPI runs at %s: the program must not call MPI while libring runs "
                  "collectives (MPI_THREAD_MULTIPLE lifts this)",
                  level_name(level));
    refs++;
    return 0;
}

int ring__mpi_acquire(int timeout_ms)
{
    int rc;
    pthread_mutex_lock(&mu);
    rc = acquire_locked(timeout_ms);
    pthread_mutex_unlock(&mu);
    return rc;
}

void ring__mpi_release(int broken)
{
    int join = 0;

    pthread_mutex_lock(&mu);
    broken_seen |= broken;
    if (refs > 0 && --refs == 0 && started_here) {
        started_here = 0;
        finalized = 1;
        if (broken_seen)
            ring__log(RING_LOG_WARNING, "the job failed: MPI is not finalized (MPI_Finalize "
                                        "could wait for a stuck peer); mpirun reports the "
                                        "failure");
        owner_exit = broken_seen ? 2 : 1;
        pthread_cond_broadcast(&cv);
        join = 1;
    }
    pthread_mutex_unlock(&mu);
    if (join)
        pthread_join(owner, NULL);
}

int ring__mpi_error(int mpi_rc, int rank, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS || len <= 0)
        snprintf(text, sizeof(text), "MPI error %d", mpi_rc);
    return ring__err(RING_EPEER, "rank %d: %s failed: %s", rank, what, text);
}

int ring__mpi_wait(MPI_Request *req, int64_t deadline_ms, int yield, int rank, const char *what)
{
    /* The clock costs more than a poll: read it every 64 polls. */
    for (unsigned polls = 0;; polls++) {
        int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return ring__mpi_error(rc, rank, what);
        if (done)
            return 0;
        if (polls % 64 == 63 && ring__now_ms() > deadline_ms)
            return ring__err(RING_ETIMEDOUT,
                             "rank %d: %s did not complete within RING_OP_TIMEOUT_SECONDS; a "
                             "peer is stuck or dead",
                             rank, what);
        if (yield)
            sched_yield();
    }
}
