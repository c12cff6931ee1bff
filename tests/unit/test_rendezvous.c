/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of ringrun's rendezvous server against libring's client calls. The server runs
 * its poll loop in a thread; the test is the client.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"
#include "net.h"
#include "rendezvous.h"
#include "ring_internal.h"

static struct rendezvous *server;
static atomic_int stop;
static pthread_t thread;
static char port[16];

static void *serve(void *arg)
{
    struct pollfd pfd[64];
    while (!atomic_load(&stop)) {
        int n = rendezvous_pollfds(server, pfd, 64);
        if (poll(pfd, (nfds_t)n, 20) > 0)
            rendezvous_handle(server, pfd, n);
    }
    return NULL;
}

static void start(void)
{
    struct error err;
    server = rendezvous_create("127.0.0.1", 0, &err);
    ck_assert_ptr_nonnull(server);
    snprintf(port, sizeof(port), "%d", rendezvous_port(server));
    atomic_store(&stop, 0);
    ck_assert_int_eq(pthread_create(&thread, NULL, serve, NULL), 0);
}

static void finish(void)
{
    atomic_store(&stop, 1);
    pthread_join(thread, NULL);
    rendezvous_destroy(server);
}

static int client(void)
{
    int fd;
    ck_assert_int_eq(ring__net_connect("127.0.0.1", port, 0, ring__now_ms() + 2000, &fd), 0);
    return fd;
}

START_TEST(set_then_get)
{
    char v[64];
    int a, b;
    start();
    a = client();
    b = client();
    ck_assert_int_eq(ring__rdv_set(a, "addr.0", "10.0.0.1:4000", ring__now_ms() + 2000), 0);
    ck_assert_int_eq(ring__rdv_get(b, "addr.0", v, sizeof(v), ring__now_ms() + 2000), 0);
    ck_assert_str_eq(v, "10.0.0.1:4000");
    ck_assert_int_eq(ring__rdv_set(a, "addr.0", "10.0.0.2:4000", ring__now_ms() + 2000), 0);
    ck_assert_int_eq(ring__rdv_get(b, "addr.0", v, sizeof(v), ring__now_ms() + 2000), 0);
    ck_assert_str_eq(v, "10.0.0.2:4000");
    ck_assert_int_eq(rendezvous_keys(server), 1);
    close(a);
    close(b);
    finish();
}
END_TEST

START_TEST(get_waits_for_set)
{
    char v[64];
    int a, b;
    const char *req = "GET late\n";
    start();
    a = client();
    b = client();
    /* b asks first; the answer must come only after a sets the key */
    ck_assert_int_eq(ring__net_write_all(b, req, strlen(req), ring__now_ms() + 1000), 0);
    ck_assert_int_eq(ring__net_read_line(b, v, sizeof(v), ring__now_ms() + 200), RING_ETIMEDOUT);
    ck_assert_int_eq(ring__rdv_set(a, "late", "here", ring__now_ms() + 2000), 0);
    ck_assert_int_eq(ring__net_read_line(b, v, sizeof(v), ring__now_ms() + 2000), 0);
    ck_assert_str_eq(v, "VAL here");
    close(a);
    close(b);
    finish();
}
END_TEST

START_TEST(malformed_requests_get_an_error)
{
    static const char *const bad[] = {"HELLO\n", "PUT a b\n", "SET onlykey\n", "GET \n"};
    char line[RING_RDV_LINE_MAX];
    start();
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int fd = client();
        ck_assert_int_eq(ring__net_write_all(fd, bad[i], strlen(bad[i]), ring__now_ms() + 1000), 0);
        ck_assert_int_eq(ring__net_read_line(fd, line, sizeof(line), ring__now_ms() + 2000), 0);
        ck_assert_msg(strncmp(line, "ERR ", 4) == 0, "'%s' got '%s'", bad[i], line);
        /* and the server hangs up on it */
        ck_assert_int_eq(ring__net_read_line(fd, line, sizeof(line), ring__now_ms() + 2000),
                         RING_EPEER);
        close(fd);
    }
    finish();
}
END_TEST

START_TEST(overlong_line_is_refused)
{
    char big[2048], line[RING_RDV_LINE_MAX];
    int fd;
    start();
    fd = client();
    memset(big, 'k', sizeof(big));
    ck_assert_int_eq(ring__net_write_all(fd, big, sizeof(big), ring__now_ms() + 1000), 0);
    ck_assert_int_eq(ring__net_read_line(fd, line, sizeof(line), ring__now_ms() + 2000), 0);
    ck_assert_str_eq(line, "ERR line too long");
    close(fd);
    finish();
}
END_TEST

START_TEST(port_in_use_is_reported)
{
    struct error err;
    struct rendezvous *again;
    start();
    again = rendezvous_create("127.0.0.1", rendezvous_port(server), &err);
    ck_assert_ptr_null(again);
    ck_assert_msg(strstr(err.text, "in use") != NULL, "%s", err.text);
    ck_assert_ptr_null(rendezvous_create("not-an-ip", 0, &err));
    finish();
}
END_TEST

START_TEST(client_helpers_reject_bad_tokens)
{
    char v[8];
    ck_assert_int_eq(ring__rdv_set(-1, "has space", "v", 0), RING_EINVAL);
    ck_assert_int_eq(ring__rdv_get(-1, "", v, sizeof(v), 0), RING_EINVAL);
}
END_TEST

START_TEST(split_hostport)
{
    char h[64], p[8];
    ck_assert_int_eq(ring__net_split_hostport("node1:29500", h, sizeof(h), p, sizeof(p)), 0);
    ck_assert_str_eq(h, "node1");
    ck_assert_str_eq(p, "29500");
    ck_assert_int_eq(ring__net_split_hostport("[::1]:80", h, sizeof(h), p, sizeof(p)), 0);
    ck_assert_str_eq(h, "::1");
    ck_assert_int_eq(ring__net_split_hostport("node1", h, sizeof(h), p, sizeof(p)), RING_EINVAL);
    ck_assert_int_eq(ring__net_split_hostport(":80", h, sizeof(h), p, sizeof(p)), RING_EINVAL);
    ck_assert_int_eq(ring__net_split_hostport("a:8x", h, sizeof(h), p, sizeof(p)), RING_EINVAL);
    ck_assert_int_eq(ring__net_split_hostport("a:", h, sizeof(h), p, sizeof(p)), RING_EINVAL);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        set_then_get,
        get_waits_for_set,
        malformed_requests_get_an_error,
        overlong_line_is_refused,
        port_in_use_is_reported,
        client_helpers_reject_bad_tokens,
        split_hostport,
        NULL,
    };
    return unit_main("rendezvous", tests, 20);
}
