/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fault_check - one rank fails in the middle of a large allreduce; every other rank must get
 * an error back within the operation timeout, never hang.
 *
 *   fault_check kill  VICTIM DELAY_MS [COUNT|barrier]   the victim SIGKILLs itself mid-call
 *   fault_check stall VICTIM DELAY_MS [COUNT|barrier]   the victim SIGSTOPs itself (alive,
 *                                                       silent); the survivors time out,
 *                                                       then rank 0 kills it
 *
 * COUNT floats per allreduce, 4 Mi (16 MiB) by default; a small one (16) runs blocking
 * allreduces back to back on the engine's fast path instead, and "barrier" blocking
 * barriers (also on the fast path).
 *
 * Survivors print "rank R: got RING_E... after N ms" and exit 0 when the error came in
 * time (RING_OP_TIMEOUT_SECONDS + 2 s of slack), 1 when it came late or never.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"

static int delay_ms, stall;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *victim(void *arg)
{
    usleep((useconds_t)delay_ms * 1000);
    raise(stall ? SIGSTOP : SIGKILL);
    return NULL;
}

int main(int argc, char **argv)
{
    size_t count = 4 << 20; /* 16 MiB of float32: each allreduce takes tens of ms */
    float *buf;
    int rank, target, rc = 0, barriers = 0;
    double limit_ms, t0 = 0;
    const char *tmo = getenv("RING_OP_TIMEOUT_SECONDS");
    pthread_t th;

    if (argc < 4 || argc > 5 || (strcmp(argv[1], "kill") != 0 && strcmp(argv[1], "stall") != 0)) {
        fprintf(stderr, "usage: fault_check kill|stall VICTIM DELAY_MS [COUNT]\n");
        return 2;
    }
    stall = strcmp(argv[1], "stall") == 0;
    target = atoi(argv[2]);
    delay_ms = atoi(argv[3]);
    if (argc == 5 && strcmp(argv[4], "barrier") == 0)
        barriers = 1;
    else if (argc == 5 && (count = strtoul(argv[4], NULL, 10)) == 0) {
        fprintf(stderr, "fault_check: COUNT must be at least 1, or barrier\n");
        return 2;
    }
    limit_ms = ((tmo ? atof(tmo) : 30.0) + 2.0) * 1000.0;
    if ((rc = ring_init()) != 0) {
        fprintf(stderr, "ring_init: %s\n", ring_strerror(rc));
        return 1;
    }
    rank = ring_rank();
    buf = calloc(count, sizeof(float));
    if (buf == NULL)
        return 1;
    /* Publish the pid so rank 0 can clean up a stopped victim. */
    {
        int64_t pids[64] = {0};
        pids[rank] = getpid();
        ring_allreduce(RING_IN_PLACE, pids, 64, RING_INT64, RING_MAX);
        if (rank == target)
            pthread_create(&th, NULL, victim, NULL);
        for (long i = 0; i < 100000000; i++) {
            t0 = now_ms();
            rc = barriers ? ring_barrier()
                          : ring_allreduce(RING_IN_PLACE, buf, count, RING_FLOAT32, RING_SUM);
            if (rc != 0)
                break;
        }
        if (rc == 0) {
            printf("rank %d: every call succeeded; the failure went unnoticed\n", rank);
            return 1;
        }
        printf("rank %d: got %s after %.0f ms (%s)\n", rank, ring_err_name(rc), now_ms() - t0,
               ring_last_error());
        /* A broken communicator stays broken. */
        if (ring_barrier() != RING_EBROKEN) {
            printf("rank %d: the communicator did not stay broken\n", rank);
            return 1;
        }
        if (stall && rank == 0)
            kill((pid_t)pids[target], SIGKILL);
    }
    fflush(stdout);
    ring_finalize();
    free(buf);
    return now_ms() - t0 <= limit_ms ? 0 : 1;
}
