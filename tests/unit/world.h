/* SPDX-License-Identifier: Apache-2.0 */
/*
 * world.h - runs a small libring job inside a unit test: np forked processes, each with
 * the worker contract in its environment, meeting at ringrun's real rendezvous server,
 * which the test process serves until every rank has exited.
 *
 * Ranks are real processes with real sockets; only the launcher is the test itself, so a
 * test can script what each rank does (die, stall, check a message) and see every rank's
 * exit status. As ringrun does, the test makes a job secret, which the server requires and
 * every rank gets in RING_JOB_SECRET (world_key() returns it, for tests that play a peer).
 */
#ifndef RING_TEST_WORLD_H
#define RING_TEST_WORLD_H

#include <check.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/auth.h"
#include "rendezvous.h"

#define WORLD_MAX 16

/* The secret of the world world_run last started (or is running). */
static struct ring__key world_key_;

static inline const struct ring__key *world_key(void)
{
    return &world_key_;
}

/*
 * Runs fn(rank, arg) in np processes and returns once all have exited, with each one's
 * wait status in status[] (np entries). A rank's exit status is fn's return value. Extra
 * environment (NAME=VALUE strings, NULL-terminated, may be NULL) is set in every rank.
 * Ranks still running after timeout_s seconds are killed with SIGKILL (status shows it).
 */
static inline void world_run(int np, int (*fn)(int rank, void *arg), void *arg,
                             const char *const *env, int timeout_s, int *status)
{
    struct error err;
    struct rendezvous *rdv;
    pid_t pids[WORLD_MAX];
    int left = np;
    struct timespec t0, now;
    char hex[RING__KEY_HEX + 1];
    int port;

    ck_assert_int_eq(ring__key_generate(&world_key_), 0);
    ring__key_hex(&world_key_, hex);
    rdv = rendezvous_create("127.0.0.1", 0, &world_key_, np, &err);
    ck_assert_msg(rdv != NULL, "rendezvous: %s", err.text);
    ck_assert_int_le(np, WORLD_MAX);
    port = rendezvous_port(rdv);
    fflush(NULL);
    for (int r = 0; r < np; r++) {
        pids[r] = fork();
        ck_assert_int_ge(pids[r], 0);
        if (pids[r] == 0) {
            char v[64];
            rendezvous_destroy(rdv);
            snprintf(v, sizeof(v), "%d", r);
            setenv("RING_RANK", v, 1);
            setenv("RING_LOCAL_RANK", v, 1);
            snprintf(v, sizeof(v), "%d", np);
            setenv("RING_SIZE", v, 1);
            setenv("RING_LOCAL_SIZE", v, 1);
            snprintf(v, sizeof(v), "127.0.0.1:%d", port);
            setenv("RING_RENDEZVOUS", v, 1);
            setenv(RING__SECRET_ENV, hex, 1);
            for (int i = 0; env != NULL && env[i] != NULL; i++)
                putenv((char *)env[i]);
            _exit(fn(r, arg));
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (left > 0) {
        struct pollfd pfd[160]; /* rendezvous_max_pollfds of WORLD_MAX ranks, and more */
        int n = rendezvous_pollfds(rdv, pfd, 160);
        if (poll(pfd, (nfds_t)n, 10) >= 0) /* a timeout too (rendezvous.h) */
            rendezvous_handle(rdv, pfd, n);
        for (int r = 0; r < np; r++) {
            if (pids[r] > 0 && waitpid(pids[r], &status[r], WNOHANG) == pids[r]) {
                pids[r] = 0;
                left--;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > timeout_s) {
            for (int r = 0; r < np; r++) {
                if (pids[r] > 0) {
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], &status[r], 0);
                    pids[r] = 0;
                    left--;
                }
            }
        }
    }
    rendezvous_destroy(rdv);
}

/* The exit code of a rank that exited normally, else -1 (killed). */
static inline int world_exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#endif /* RING_TEST_WORLD_H */
