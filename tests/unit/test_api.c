/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of libring's public API in one process: errors, argument checks, the
 * environment, a world of size 1, and bootstrap failures that must end in an error, not a
 * hang. Check runs each test in its own process, so environment changes stay local.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"
#include "ring.h"

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
    ck_assert_int_eq(ring_reducescatter(RING_IN_PLACE, x, 1, RING_FLOAT32, RING_SUM), RING_EINVAL);
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

START_TEST(version_string)
{
    ck_assert_str_eq(ring_version(), RING_VERSION_STRING);
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
        silent_rendezvous_times_out,
        sigterm_requests_a_stop,
        request_stop_without_signal,
        version_string,
        NULL,
    };
    return unit_main("api", tests, 10);
}
