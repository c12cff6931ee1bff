/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of libring's public API in one process: errors, argument checks, the
 * environment, a world of size 1, and bootstrap failures that must end in an error, not a
 * hang. Check runs each test in its own process, so environment changes stay local.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "ring.h"
#include "world.h"

START_TEST(error_names_and_messages)
{
    ck_assert_str_eq(ring_err_name(0), "RING_OK");
    ck_assert_str_eq(ring_err_name(RING_ETIMEDOUT), "RING_ETIMEDOUT");
    ck_assert_str_eq(ring_err_name(RING_EPEER), "RING_EPEER");
    ck_assert_str_eq(ring_err_name(-9999), "RING_EUNKNOWN");
    ck_assert_str_eq(ring_strerror(-9999), "unknown error");
    ck_assert_str_eq(ring_strerror(0), "success");
    ck_assert(strstr(ring_strerror(RING_ENOTINIT), "ring_init") != NULL);
    /* every code has its own message */
    for (int a = RING_ENOTSUP; a < 0; a++)
        for (int b = a + 1; b < 0; b++)
            ck_assert_str_ne(ring_strerror(a), ring_strerror(b));
}
END_TEST

START_TEST(calls_before_init_fail_cleanly)
{
    float x = 1;
    ck_assert_int_eq(ring_initialized(), 0);
    ck_assert_int_eq(ring_rank(), -1);
    ck_assert_int_eq(ring_size(), -1);
    ck_assert_int_eq(ring_allreduce(&x, &x, 1, RING_FLOAT32, RING_SUM), RING_ENOTINIT);
    ck_assert_int_eq(ring_barrier(), RING_ENOTINIT);
    ck_assert_int_eq(ring_broadcast(&x, 1, RING_FLOAT32, 0), RING_ENOTINIT);
    ck_assert_int_eq(ring_finalize(), RING_ENOTINIT);
}
END_TEST

START_TEST(single_process_world)
{
    double in[3] = {1, 2, 3}, out[3];
    int32_t iv[4] = {5, 6, 7, 8}, io[4];

    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(ring_init(), RING_EALREADY);
    ck_assert_int_eq(ring_rank(), 0);
    ck_assert_int_eq(ring_size(), 1);
    ck_assert_int_eq(ring_local_size(), 1);
    ck_assert_int_eq(ring_cross_size(), 1);
    ck_assert_int_eq(ring_allreduce_scaled(in, out, 3, RING_FLOAT64, RING_AVERAGE, 2.0, 0.5), 0);
    ck_assert(out[0] == 1 && out[2] == 3);
    ck_assert_int_eq(ring_allgather(iv, 4, io, RING_INT32), 0);
    ck_assert_int_eq(io[3], 8);
    ck_assert_int_eq(ring_alltoall(iv, io, 4, RING_INT32), 0);
    ck_assert_int_eq(io[0], 5);
    ck_assert_int_eq(ring_reducescatter(iv, io, 4, RING_INT32, RING_MAX), 0);
    ck_assert_int_eq(io[1], 6);
    ck_assert_uint_eq(ring_reducescatter_count(10, 4, 1, NULL), 3);
    ck_assert_uint_eq(ring_reducescatter_count(10, 4, 3, NULL), 2);
    ck_assert_int_eq(ring_broadcast(iv, 4, RING_INT32, 0), 0);
    ck_assert_int_eq(ring_barrier(), 0);
    ck_assert_int_eq(ring_allreduce(NULL, NULL, 0, RING_FLOAT32, RING_SUM), 0);
    ck_assert_int_eq(ring_finalize(), 0);
    ck_assert_int_eq(ring_initialized(), 0);
    ck_assert_int_eq(ring_init(), 0); /* init again after finalize */
    ck_assert_int_eq(ring_finalize(), 0);
}
END_TEST

START_TEST(invalid_arguments)
{
    float x[4] = {0};
    size_t counts[1] = {3};

    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(ring_allreduce(NULL, x, 4, RING_FLOAT32, RING_SUM), RING_EINVAL);
    ck_assert_int_eq(ring_allreduce(x, x, 4, (ring_dtype_t)42, RING_SUM), RING_EINVAL);
    ck_assert_int_eq(ring_allreduce(x, x, 4, RING_FLOAT32, (ring_op_t)42), RING_EINVAL);
    ck_assert_int_eq(ring_allreduce_scaled(x, x, 4, RING_FLOAT32, RING_MAX, 2.0, 1.0), RING_EINVAL);
    ck_assert(strstr(ring_last_error(), "MIN and MAX") != NULL);
    ck_assert_int_eq(ring_broadcast(x, 4, RING_FLOAT32, 1), RING_EINVAL);
    ck_assert_int_eq(ring_broadcast(x, 4, RING_FLOAT32, -1), RING_EINVAL);
    ck_assert_int_eq(ring_alltoall(RING_IN_PLACE, x, 1, RING_FLOAT32), RING_EINVAL);
    ck_assert_int_eq(ring_allgatherv(x, 2, x, counts, RING_FLOAT32), RING_EINVAL);
    ck_assert_int_eq(ring_allgatherv(x, 2, x, NULL, RING_FLOAT32), RING_EINVAL);
    ck_assert_int_eq(ring_alltoallv(x, NULL, x, counts, RING_FLOAT32), RING_EINVAL);
    ring_finalize();
}
END_TEST

START_TEST(malformed_environment)
{
    static const char *const cases[][2] = {
        {"RING_SIZE", "abc"},
        {"RING_SIZE", "0"},
        {"RING_ALLREDUCE_ALGO", "fastest"},
        {"RING_HIERARCHICAL", "yes"},
        {"RING_TIMEOUT_SECONDS", "-3"},
        {"RING_SEGMENT_BYTES", "12"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        setenv(cases[i][0], cases[i][1], 1);
        ck_assert_int_eq(ring_init(), RING_EENV);
        ck_assert(strstr(ring_last_error(), cases[i][0]) != NULL);
        unsetenv(cases[i][0]);
    }
    setenv("RING_SIZE", "2", 1);
    setenv("RING_RANK", "2", 1); /* rank must be below size */
    ck_assert_int_eq(ring_init(), RING_EENV);
    setenv("RING_RANK", "1", 1); /* no rendezvous to meet the other rank at */
    ck_assert_int_eq(ring_init(), RING_EENV);
    ck_assert(strstr(ring_last_error(), "RING_RENDEZVOUS") != NULL);
    setenv("RING_RENDEZVOUS", "no-port-here", 1);
    ck_assert_int_eq(ring_init(), RING_EENV);
    ck_assert_int_eq(ring_initialized(), 0);
}
END_TEST

START_TEST(bad_log_level_is_not_fatal)
{
    setenv("RING_LOG_LEVEL", "loud", 1);
    ck_assert_int_eq(ring_init(), 0);
    ring_finalize();
}
END_TEST

/* A port nobody listens on: bind, read the port, close. */
static int closed_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;
    ck_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    ck_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static void set_world(int port)
{
    char rdv[64];
    snprintf(rdv, sizeof(rdv), "127.0.0.1:%d", port);
    setenv("RING_SIZE", "2", 1);
    setenv("RING_RANK", "1", 1);
    setenv("RING_RENDEZVOUS", rdv, 1);
    setenv("RING_JOB_SECRET", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
           1);
    setenv("RING_TIMEOUT_SECONDS", "1", 1);
}

START_TEST(unreachable_rendezvous_times_out)
{
    int rc;
    set_world(closed_port());
    rc = ring_init();
    ck_assert_msg(rc == RING_EBOOTSTRAP || rc == RING_ETIMEDOUT, "got %s", ring_err_name(rc));
    ck_assert_int_eq(ring_initialized(), 0);
}
END_TEST

/* An error wrapped around another one says each thing once. */
START_TEST(rendezvous_error_says_it_once)
{
    char want[160];
    int port = closed_port();
    set_world(port);
    ck_assert_int_eq(ring_init(), RING_EBOOTSTRAP);
    snprintf(want, sizeof(want),
             "cannot reach the rendezvous (RING_RENDEZVOUS): connect to 127.0.0.1:%d: "
             "Connection refused",
             port);
    ck_assert_str_eq(ring_last_error(), want);
}
END_TEST

/*
 * After a peer dies, the first error names this rank once, and a later call's RING_EBROKEN
 * repeats that text once, with no second rank prefix or error name inside.
 */
static int broken_rank(int rank, void *arg)
{
    char first[256];
    float x = 1;
    int rc;

    if (ring_init() != 0)
        return 10;
    if (rank == 1)
        _exit(0); /* dies without a word: rank 0 sees the connection close */
    rc = ring_allreduce(RING_IN_PLACE, &x, 1, RING_FLOAT32, RING_SUM);
    if (rc != RING_EPEER)
        return 11;
    snprintf(first, sizeof(first), "%s", ring_last_error());
    if (strncmp(first, "rank 0: ", 8) != 0 || strstr(first + 8, "rank 0:") != NULL ||
        strstr(first, "RING_E") != NULL) {
        fprintf(stderr, "first error: '%s'\n", first);
        return 12;
    }
    if (ring_barrier() != RING_EBROKEN)
        return 13;
    {
        char want[300];
        snprintf(want, sizeof(want), "%s; the communicator stays broken", first);
        if (strcmp(ring_last_error(), want) != 0) {
            fprintf(stderr, "broken: '%s', want '%s'\n", ring_last_error(), want);
            return 14;
        }
    }
    ring_finalize();
    return 0;
}

START_TEST(broken_communicator_says_it_once)
{
    int status[2];
    const char *env[] = {"RING_OP_TIMEOUT_SECONDS=5", NULL};
    world_run(2, broken_rank, NULL, env, 8, status);
    ck_assert_msg(world_exit_code(status[1]) == 0, "rank 1: status %#x", status[1]);
    ck_assert_msg(world_exit_code(status[0]) == 0, "rank 0: status %#x", status[0]);
}
END_TEST

START_TEST(silent_rendezvous_times_out)
{
    /* Accepts connections (the kernel does, via the backlog) but never answers. */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 8) == 0);
    ck_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    set_world(ntohs(sa.sin_port));
    ck_assert_int_eq(ring_init(), RING_ETIMEDOUT);
    close(fd);
}
END_TEST

START_TEST(sigterm_requests_a_stop)
{
    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(ring_stop_requested(), 0);
    raise(SIGTERM);
    ck_assert_int_eq(ring_stop_requested(), 1);
    ring_finalize();
}
END_TEST

START_TEST(request_stop_without_signal)
{
    setenv("RING_HANDLE_SIGTERM", "0", 1);
    ck_assert_int_eq(ring_init(), 0);
    ring_request_stop();
    ck_assert_int_eq(ring_stop_requested(), 1);
    ring_finalize();
}
END_TEST

static atomic_int program_sigterms;

static void program_handler(int sig)
{
    atomic_fetch_add(&program_sigterms, 1);
}

static void install_program_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = program_handler;
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(SIGTERM, &sa, NULL), 0);
}

static void *current_handler(void)
{
    struct sigaction sa;
    ck_assert_int_eq(sigaction(SIGTERM, NULL, &sa), 0);
    return (void *)sa.sa_handler;
}

/* The program's own handler comes back with ring_finalize, and gets SIGTERM again. */
START_TEST(finalize_restores_the_programs_handler)
{
    install_program_handler();
    ck_assert_int_eq(ring_init(), 0);
    ck_assert_ptr_ne(current_handler(), (void *)program_handler);
    raise(SIGTERM);
    ck_assert_int_eq(atomic_load(&program_sigterms), 0);
    ck_assert_int_eq(ring_finalize(), 0);
    ck_assert_ptr_eq(current_handler(), (void *)program_handler);
    raise(SIGTERM);
    ck_assert_int_eq(atomic_load(&program_sigterms), 1);
}
END_TEST

/* With no handler of the program's, SIGTERM after ring_finalize terminates the process. */
START_TEST(sigterm_after_finalize_is_not_swallowed)
{
    int status;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGTERM, SIG_DFL);
        if (ring_init() != 0 || ring_finalize() != 0)
            _exit(2);
        raise(SIGTERM);
        _exit(0); /* reached only when the signal was swallowed */
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM,
                  "the child %s %d instead of dying of SIGTERM",
                  WIFEXITED(status) ? "exited" : "died of signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}
END_TEST

/*
 * After a stop, a late copy of the stop's SIGTERM (the signal reaching this rank after its
 * peers agreed) must not kill the rank on its way out with 143 instead of 75; the next job
 * without a stop gets the default action back.
 */
START_TEST(late_sigterm_after_a_stop_is_absorbed)
{
    int status;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGTERM, SIG_DFL);
        if (ring_init() != 0)
            _exit(2);
        raise(SIGTERM);
        if (!ring_stop_requested() || ring_finalize() != 0)
            _exit(3);
        raise(SIGTERM); /* the late copy */
        _exit(75);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 75,
                  "the child %s %d instead of exiting 75",
                  WIFEXITED(status) ? "exited" : "died of signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGTERM, SIG_DFL);
        if (ring_init() != 0)
            _exit(2);
        ring_request_stop();
        if (ring_finalize() != 0 || ring_init() != 0 || ring_finalize() != 0)
            _exit(3);
        raise(SIGTERM); /* no stop in the last job: the default action again */
        _exit(0);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM,
                  "the child %s %d instead of dying of SIGTERM",
                  WIFEXITED(status) ? "exited" : "died of signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}
END_TEST

/* A stop belongs to one job: after finalize and a new init nothing has asked to stop. */
START_TEST(stop_request_does_not_outlive_finalize)
{
    ck_assert_int_eq(ring_init(), 0);
    raise(SIGTERM);
    ck_assert_int_eq(ring_stop_requested(), 1);
    ck_assert_int_eq(ring_finalize(), 0);
    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(ring_stop_requested(), 0);
    ring_request_stop();
    ck_assert_int_eq(ring_stop_requested(), 1);
    ck_assert_int_eq(ring_finalize(), 0);
    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(ring_stop_requested(), 0);
    ck_assert_int_eq(ring_finalize(), 0);
}
END_TEST

static atomic_int storm_over;

static void *sigterm_storm(void *arg)
{
    while (!atomic_load(&storm_over)) {
        kill(getpid(), SIGTERM);
        sched_yield();
    }
    return NULL;
}

/*
 * SIGTERM arriving on any thread while libring starts and stops, over and over: the
 * handler must never touch what finalize frees (ASan and UBSan watch this in CI) and
 * every signal lands in libring's handler or the program's, never in the default action.
 */
START_TEST(sigterm_during_init_and_finalize)
{
    pthread_t th;
    install_program_handler();
    ck_assert_int_eq(pthread_create(&th, NULL, sigterm_storm, NULL), 0);
    for (int i = 0; i < 200; i++) {
        ck_assert_int_eq(ring_init(), 0);
        ck_assert_int_eq(ring_finalize(), 0);
    }
    atomic_store(&storm_over, 1);
    pthread_join(th, NULL);
    {
        int n = atomic_load(&program_sigterms);
        raise(SIGTERM); /* libring is gone: this one is the program's */
        ck_assert_int_eq(atomic_load(&program_sigterms), n + 1);
    }
}
END_TEST

/* ring_version() is what ring.h's version macros say, so a release bumps both. */
START_TEST(version_matches_the_header)
{
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", RING_VERSION_MAJOR, RING_VERSION_MINOR,
             RING_VERSION_PATCH);
    ck_assert_str_eq(ring_version(), want);
}
END_TEST

/* In place, recvbuf holds the whole vector and gets this rank's part at its start. */
START_TEST(reducescatter_in_place_single_rank)
{
    int32_t v[5] = {1, 2, 3, 4, 5};
    double d[3] = {1, 2, 3};
    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(ring_reducescatter(RING_IN_PLACE, v, 5, RING_INT32, RING_SUM), 0);
    ck_assert_int_eq(v[0], 1);
    ck_assert_int_eq(v[4], 5);
    ck_assert_int_eq(ring_reducescatter_scaled(d, d, 3, RING_FLOAT64, RING_SUM, 2.0, 0.25), 0);
    ck_assert(d[0] == 0.5 && d[2] == 1.5);
    ring_finalize();
}
END_TEST

/* The new dtypes and Adasum in a world of one: what is refused, and what one rank gets. */
START_TEST(new_dtypes_and_adasum_arguments)
{
    uint8_t flags[3] = {1, 0, 1};
    int16_t s16[2] = {-3, 4};
    uint16_t u16[2] = {65535, 2};
    float f[3] = {1, -2, 4}, g[3];
    int32_t i[2] = {1, 2};

    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(ring_allreduce(RING_IN_PLACE, flags, 3, RING_BOOL, RING_SUM), 0);
    ck_assert(flags[0] == 1 && flags[1] == 0);
    ck_assert_int_eq(ring_allreduce(RING_IN_PLACE, flags, 3, RING_BOOL, RING_AVERAGE), RING_EINVAL);
    ck_assert(strstr(ring_last_error(), "bool") != NULL);
    ck_assert_int_eq(ring_allreduce_scaled(RING_IN_PLACE, flags, 3, RING_BOOL, RING_SUM, 2, 1),
                     RING_EINVAL);
    ck_assert_int_eq(ring_allreduce(RING_IN_PLACE, s16, 2, RING_INT16, RING_AVERAGE), 0);
    ck_assert_int_eq(s16[0], -3);
    ck_assert_int_eq(ring_broadcast(u16, 2, RING_UINT16, 0), 0);
    ck_assert_int_eq(u16[0], 65535);
    /* one rank's Adasum is its own vector, scaled */
    ck_assert_int_eq(ring_allreduce_scaled(f, g, 3, RING_FLOAT32, RING_ADASUM, 2.0, 0.25), 0);
    ck_assert(g[0] == 0.5f && g[1] == -1.0f && g[2] == 2.0f);
    ck_assert_int_eq(ring_allreduce(RING_IN_PLACE, i, 2, RING_INT32, RING_ADASUM), RING_EINVAL);
    ck_assert(strstr(ring_last_error(), "ADASUM float") != NULL);
    ck_assert_int_eq(ring_reducescatter(f, g, 3, RING_FLOAT32, RING_ADASUM), RING_EINVAL);
    ck_assert(strstr(ring_last_error(), "allreduce only") != NULL);
    ring_finalize();
}
END_TEST

/* A declared shape is validated, and taken by the next submission only. */
START_TEST(shape_declarations)
{
    int64_t dims[2] = {2, 3}, bad[1] = {-1};
    float x[6] = {0};

    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(ring_shape_next(2, dims), 0);
    ck_assert_int_eq(ring_shape_next(-1, dims), RING_EINVAL);
    ck_assert_int_eq(ring_shape_next(65, dims), RING_EINVAL);
    ck_assert_int_eq(ring_shape_next(1, bad), RING_EINVAL);
    ck_assert_int_eq(ring_shape_next(2, NULL), RING_EINVAL);
    ck_assert_int_eq(ring_shape_next(0, NULL), 0); /* a scalar */
    ck_assert_int_eq(ring_allreduce(RING_IN_PLACE, x, 6, RING_FLOAT32, RING_SUM), 0);
    ck_assert_int_eq(ring_allreduce(RING_IN_PLACE, x, 6, RING_FLOAT32, RING_SUM), 0);
    ring_finalize();
}
END_TEST

/* Removing a process set: the world and unknown sets are refused, a removed set's id stays
 * invalid, and a set with an operation in flight cannot go. */
START_TEST(process_set_remove)
{
    int me = 0;
    ring_process_set_t ps, ps2;
    float x = 1;
    ring_handle_t *h;

    ck_assert_int_eq(ring_process_set_remove(1), RING_ENOTINIT);
    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(ring_process_set_create(&me, 1, &ps), 0);
    ck_assert_int_eq(ring_process_set_size(ps), 1);
    ck_assert_int_eq(ring_process_set_remove(RING_GLOBAL), RING_EINVAL);
    ck_assert(strstr(ring_last_error(), "global") != NULL);
    ck_assert_int_eq(ring_process_set_remove(ps + 7), RING_EINVAL);
    ck_assert(strstr(ring_last_error(), "no process set") != NULL);
    ck_assert_int_eq(ring_process_set_remove(ps), 0);
    ck_assert_int_eq(ring_process_set_size(ps), -1);
    ck_assert_int_eq(ring_process_set_rank(ps), -1);
    ck_assert_int_eq(ring_allreduce_async("x", &x, &x, 1, RING_FLOAT32, RING_SUM, 1, 1, ps, &h),
                     RING_EINVAL);
    ck_assert_int_eq(ring_process_set_remove(ps), RING_EINVAL); /* twice */
    /* a new set gets a new id */
    ck_assert_int_eq(ring_process_set_create(&me, 1, &ps2), 0);
    ck_assert_int_ne(ps2, ps);
    ck_assert_int_eq(ring_process_set_size(ps2), 1);
    ring_finalize();
}
END_TEST

/* count x dtype size that no buffer can hold is refused at every public entry. */
START_TEST(counts_that_overflow_are_refused)
{
    const size_t huge = SIZE_MAX / 4 + 1; /* x 4 bytes wraps to 0 */
    const size_t big = (size_t)PTRDIFF_MAX / 2 + 1;
    size_t two[2] = {SIZE_MAX, 2}, one_big[1] = {huge};
    float x[4] = {0};
    const void *sb[2] = {x, x};
    void *rb[2] = {x, x};
    ring_handle_t *h;

    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(ring_allreduce(x, x, huge, RING_FLOAT32, RING_SUM), RING_EINVAL);
    ck_assert_str_eq(ring_last_error(),
                     "allreduce 'allreduce.noname': 4611686018427387904 x 1 elements of float32 (4 "
                     "bytes each) exceed the largest possible buffer (9223372036854775807 bytes); "
                     "the count is wrong");
    ck_assert_int_eq(ring_allreduce(x, x, big * 2, RING_INT8, RING_SUM), RING_EINVAL);
    ck_assert_int_eq(
        ring_allreduce_async("g", x, x, huge, RING_FLOAT64, RING_SUM, 1, 1, RING_GLOBAL, &h),
        RING_EINVAL);
    ck_assert_int_eq(ring_broadcast(x, huge, RING_INT32, 0), RING_EINVAL);
    ck_assert_int_eq(ring_reducescatter(x, x, huge, RING_FLOAT32, RING_SUM), RING_EINVAL);
    ck_assert_int_eq(ring_allgather(x, huge, x, RING_INT32), RING_EINVAL);
    ck_assert_int_eq(ring_alltoall(x, x + 1, huge, RING_FLOAT32), RING_EINVAL);
    ck_assert(strstr(ring_last_error(), "alltoall") != NULL);
    ck_assert_int_eq(ring_allgatherv(x, huge, x, one_big, RING_FLOAT32), RING_EINVAL);
    ck_assert_int_eq(ring_alltoallv(x, one_big, x + 1, one_big, RING_FLOAT32), RING_EINVAL);
    ck_assert_int_eq(
        ring_grouped_allreduce_async("grp", 2, sb, rb, two, RING_UINT8, RING_SUM, RING_GLOBAL, &h),
        RING_EINVAL);
    ck_assert_str_eq(ring_last_error(), "grouped allreduce 'grp': the counts add up past SIZE_MAX "
                                        "at index 1; the counts are wrong");
    /* the edge itself: PTRDIFF_MAX bytes pass the check (and then fail for NULL buffers) */
    ck_assert_int_eq(ring_allreduce(NULL, NULL, (size_t)PTRDIFF_MAX, RING_UINT8, RING_SUM),
                     RING_EINVAL);
    ck_assert(strstr(ring_last_error(), "NULL buffer") != NULL);
    ring_finalize();
}
END_TEST

int main(void)
{
    /* The timeout tests take about RING_TIMEOUT_SECONDS (1 s); 10 s means a hang. */
    const TTest *tests[] = {
        error_names_and_messages,
        calls_before_init_fail_cleanly,
        single_process_world,
        invalid_arguments,
        malformed_environment,
        bad_log_level_is_not_fatal,
        unreachable_rendezvous_times_out,
        rendezvous_error_says_it_once,
        broken_communicator_says_it_once,
        silent_rendezvous_times_out,
        sigterm_requests_a_stop,
        request_stop_without_signal,
        finalize_restores_the_programs_handler,
        sigterm_after_finalize_is_not_swallowed,
        late_sigterm_after_a_stop_is_absorbed,
        stop_request_does_not_outlive_finalize,
        sigterm_during_init_and_finalize,
        version_matches_the_header,
        reducescatter_in_place_single_rank,
        counts_that_overflow_are_refused,
        new_dtypes_and_adasum_arguments,
        process_set_remove,
        shape_declarations,
        NULL,
    };
    return unit_main("api", tests, 10);
}
