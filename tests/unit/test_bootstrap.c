/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the bootstrap seam (bootstrap/bootstrap.h): the choice of implementation,
 * and the rendezvous implementation's allgather and barrier among real processes that meet
 * at ringrun's real rendezvous server (world.h).
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "unit.h"
#include "bootstrap/bootstrap.h"
#include "ring_internal.h"
#include "world.h"

START_TEST(single_process_without_launcher)
{
    struct ring__bootstrap *b;
    char in[5] = "abcd", out[5] = {0};
    ck_assert_int_eq(ring__bootstrap_open(1000, &b), 0);
    ck_assert_str_eq(b->ops->name, "single");
    ck_assert_int_eq(b->rank, 0);
    ck_assert_int_eq(b->size, 1);
    ck_assert_int_eq(b->ops->allgather(b, in, 5, out), 0);
    ck_assert_str_eq(out, "abcd");
    ck_assert_int_eq(b->ops->barrier(b), 0);
    ring__bootstrap_close(b);
}
END_TEST

START_TEST(single_refuses_a_larger_world)
{
    struct ring__bootstrap *b;
    setenv("RING_SIZE", "3", 1);
    ck_assert_int_eq(ring__bootstrap_open(1000, &b), RING_EENV);
    ck_assert_str_eq(ring_last_error(), "RING_SIZE=3 but RING_RENDEZVOUS is not set");
}
END_TEST

/* A rendezvous without the job's secret is refused before anything is sent. */
START_TEST(a_rendezvous_needs_the_job_secret)
{
    struct ring__bootstrap *b;
    setenv("RING_SIZE", "2", 1);
    setenv("RING_RANK", "1", 1);
    setenv("RING_RENDEZVOUS", "127.0.0.1:9", 1);
    unsetenv("RING_JOB_SECRET");
    ck_assert_int_eq(ring__bootstrap_open(1000, &b), RING_EENV);
    ck_assert_msg(strstr(ring_last_error(), "RING_RENDEZVOUS is set but RING_JOB_SECRET is not") !=
                      NULL,
                  "%s", ring_last_error());
    setenv("RING_JOB_SECRET", "0123", 1);
    ck_assert_int_eq(ring__bootstrap_open(1000, &b), RING_EENV);
    ck_assert_str_eq(ring_last_error(),
                     "RING_JOB_SECRET is not 64 hex digits (start the program with ringrun)");
    /* Scrubbed even when it was malformed: it is nobody else's business. */
    ck_assert_ptr_null(getenv("RING_JOB_SECRET"));
}
END_TEST

/* Rank r's blob byte i, different for every rank, part and allgather. */
static unsigned char blob_byte(int round, int r, size_t i)
{
    return (unsigned char)(round * 131 + r * 37 + i * 7 + (i >> 8));
}

/*
 * Each rank: three allgathers of different lengths (one spanning several rendezvous
 * values), a barrier between them, and checks every byte of every rank's blob.
 */
static int allgather_rank(int rank, void *arg)
{
    static const size_t lens[] = {1, 300, 17};
    struct ring__bootstrap *b;
    int size;

    if (ring__bootstrap_open(5000, &b) != 0 || strcmp(b->ops->name, "rendezvous") != 0)
        return 10;
    /* The secret left the environment: neither a child nor /proc/PID/environ shows it. */
    if (getenv("RING_JOB_SECRET") != NULL || system("test -z \"$RING_JOB_SECRET\"") != 0)
        return 17;
    size = b->size;
    if (b->rank != rank || b->local_size != size || b->host_addr[0] == '\0')
        return 11;
    for (int round = 0; round < 3; round++) {
        size_t len = lens[round];
        unsigned char *mine = malloc(len), *all = malloc(len * (size_t)size);
        for (size_t i = 0; i < len; i++)
            mine[i] = blob_byte(round, rank, i);
        if (b->ops->allgather(b, mine, len, all) != 0)
            return 12;
        for (int r = 0; r < size; r++) {
            for (size_t i = 0; i < len; i++) {
                if (all[(size_t)r * len + i] != blob_byte(round, r, i)) {
                    fprintf(stderr, "rank %d: round %d, rank %d's byte %zu is wrong\n", rank, round,
                            r, i);
                    return 13;
                }
            }
        }
        free(mine);
        free(all);
        if (b->ops->barrier(b) != 0)
            return 14;
    }
    ring__bootstrap_close(b);
    return 0;
}

START_TEST(rendezvous_allgather_and_barrier)
{
    int status[5];
    world_run(5, allgather_rank, NULL, NULL, 20, status);
    for (int r = 0; r < 5; r++)
        ck_assert_msg(world_exit_code(status[r]) == 0, "rank %d: status %#x", r, status[r]);
}
END_TEST

/* A rank that never arrives: the others' allgather ends with a message that names it. */
static int missing_rank(int rank, void *arg)
{
    struct ring__bootstrap *b;
    char one = 1, all[3];
    char want[200];
    int rc;

    if (rank == 2)
        return 0; /* never bootstraps */
    if (ring__bootstrap_open(1000, &b) != 0)
        return 10;
    rc = b->ops->allgather(b, &one, 1, all);
    snprintf(want, sizeof(want),
             "rank %d: rank 2 did not reach the rendezvous at %s within 1 s "
             "(RING_TIMEOUT_SECONDS); did it start?",
             rank, getenv("RING_RENDEZVOUS"));
    if (rc != RING_ETIMEDOUT || strcmp(ring_last_error(), want) != 0) {
        fprintf(stderr, "rank %d: got %d '%s'\n", rank, rc, ring_last_error());
        return 11;
    }
    ring__bootstrap_close(b);
    return 0;
}

START_TEST(rendezvous_names_the_missing_rank)
{
    int status[3];
    world_run(3, missing_rank, NULL, NULL, 10, status);
    for (int r = 0; r < 3; r++)
        ck_assert_msg(world_exit_code(status[r]) == 0, "rank %d: status %#x", r, status[r]);
}
END_TEST

/* A rank with another job's secret is refused by the rendezvous (and refuses it). */
static int wrong_secret_rank(int rank, void *arg)
{
    struct ring__bootstrap *b;
    int rc;

    if (rank == 1)
        setenv("RING_JOB_SECRET",
               "00000000000000000000000000000000000000000000000000000000000000ff", 1);
    rc = ring__bootstrap_open(2000, &b);
    if (rank == 0) {
        if (rc != 0)
            return 10;
        ring__bootstrap_close(b);
        return 0;
    }
    if (rc != RING_EBOOTSTRAP ||
        strstr(ring_last_error(), "authenticating with the rendezvous at") == NULL) {
        fprintf(stderr, "rank 1: got %s: %s\n", ring_err_name(rc), ring_last_error());
        return 11;
    }
    return 0;
}

START_TEST(another_jobs_secret_is_refused)
{
    int status[2];
    world_run(2, wrong_secret_rank, NULL, NULL, 10, status);
    for (int r = 0; r < 2; r++)
        ck_assert_msg(world_exit_code(status[r]) == 0, "rank %d: status %#x", r, status[r]);
}
END_TEST

/* The rank of a_rank_pushed_out_before_it_spoke_dials_again: a world of one. */
static int lone_rank(int port, const char *hex)
{
    struct ring__bootstrap *b;
    char v[64];

    setenv("RING_RANK", "0", 1);
    setenv("RING_LOCAL_RANK", "0", 1);
    setenv("RING_SIZE", "1", 1);
    setenv("RING_LOCAL_SIZE", "1", 1);
    snprintf(v, sizeof(v), "127.0.0.1:%d", port);
    setenv("RING_RENDEZVOUS", v, 1);
    setenv(RING__SECRET_ENV, hex, 1);
    if (ring__bootstrap_open(10000, &b) != 0) {
        fprintf(stderr, "%s\n", ring_last_error());
        return 10;
    }
    if (b->ops->barrier(b) != 0)
        return 11;
    ring__bootstrap_close(b);
    return 0;
}

/*
 * A rendezvous that closes a rank's first connection before the handshake, as one flooded
 * with connections that prove nothing may (ringrun's rendezvous.c): the rank dials again
 * and gets in. The port first listens on a plain socket that hangs up on the rank, then
 * ringrun's rendezvous takes it over.
 */
START_TEST(a_rank_pushed_out_before_it_spoke_dials_again)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    char hex[RING__KEY_HEX + 1];
    struct rendezvous *rdv;
    struct ring__key key;
    struct error err;
    int lfd, fd, port, status;
    pid_t pid;

    ck_assert_int_eq(ring__key_generate(&key), 0);
    ring__key_hex(&key, hex);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(lfd, 0);
    /* The hung-up connection lingers in TIME_WAIT: the rendezvous binds the port anyway. */
    ck_assert_int_eq(setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int)), 0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(lfd, 8), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(lfd); /* or the port would listen on after the parent closed it */
        _exit(lone_rank(port, hex));
    }
    fd = accept(lfd, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    close(fd);
    close(lfd);
    rdv = rendezvous_create("127.0.0.1", port, &key, 1, &err);
    ck_assert_msg(rdv != NULL, "rendezvous: %s", err.text);
    while (waitpid(pid, &status, WNOHANG) == 0) {
        struct pollfd pfd[128];
        int n = rendezvous_pollfds(rdv, pfd, 128);
        if (poll(pfd, (nfds_t)n, 10) >= 0)
            rendezvous_handle(rdv, pfd, n);
    }
    rendezvous_destroy(rdv);
    ck_assert_msg(world_exit_code(status) == 0, "rank 0: status %#x", status);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        single_process_without_launcher,
        single_refuses_a_larger_world,
        a_rendezvous_needs_the_job_secret,
        rendezvous_allgather_and_barrier,
        rendezvous_names_the_missing_rank,
        another_jobs_secret_is_refused,
        a_rank_pushed_out_before_it_spoke_dials_again,
        NULL,
    };
    return unit_main("bootstrap", tests, 30);
}
