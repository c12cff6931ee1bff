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
#include "bootstrap/auth.h"
#include "base/net.h"
#include "bootstrap/rendezvous_protocol.h"
#include "rendezvous.h"
#include "ring_internal.h"

static struct rendezvous *server;
static struct ring__key key;
static atomic_int stop;
static pthread_t thread;
static char port[16];

/* The loop ringrun runs, less its ranks: a poll that times out is handled too. */
static void *serve(void *arg)
{
    struct pollfd pfd[256];
    while (!atomic_load(&stop)) {
        int n = rendezvous_pollfds(server, pfd, 256), t = rendezvous_timeout(server);
        if (poll(pfd, (nfds_t)n, t >= 0 && t < 20 ? t : 20) >= 0)
            rendezvous_handle(server, pfd, n);
    }
    return NULL;
}

/* A server for a world of size ranks, with a fresh secret in key, not serving yet. */
static void create(int size)
{
    struct error err;
    ck_assert_int_eq(ring__key_generate(&key), 0);
    server = rendezvous_create("127.0.0.1", 0, &key, size, &err);
    ck_assert_ptr_nonnull(server);
    ck_assert_int_le(rendezvous_max_pollfds(server), 256);
    snprintf(port, sizeof(port), "%d", rendezvous_port(server));
}

/* Serves from here on, in a thread. */
static void run(void)
{
    atomic_store(&stop, 0);
    ck_assert_int_eq(pthread_create(&thread, NULL, serve, NULL), 0);
}

static void start_size(int size)
{
    create(size);
    run();
}

static void start(void)
{
    start_size(4);
}

/* Stops the server thread; the server stays for the test to read until finish_free. */
static void finish_thread(void)
{
    atomic_store(&stop, 1);
    pthread_join(thread, NULL);
}

static void finish(void)
{
    finish_thread();
    rendezvous_destroy(server);
}

/* A connection that has proved nothing yet. */
static int raw_client(void)
{
    int fd;
    ck_assert_int_eq(ring__net_connect("127.0.0.1", port, 0, ring__now_ms() + 2000, &fd), 0);
    return fd;
}

/* A connection that proved the job's secret, as a rank's. */
static int client(void)
{
    int fd = raw_client();
    ck_assert_int_eq(ring__rdv_auth(fd, &key, 4, ring__now_ms() + 2000), 0);
    return fd;
}

/* Sends line and reads the answer into out. */
static void say(int fd, const char *line, char *out, size_t cap)
{
    ck_assert_int_eq(ring__net_write_all(fd, line, strlen(line), ring__now_ms() + 1000), 0);
    ck_assert_int_eq(ring__net_read_line(fd, out, cap, ring__now_ms() + 2000), 0);
}

/* Says HELLO on fd with client nonce cn, as a rank does the moment it connects. */
static void hello(int fd, const unsigned char *cn)
{
    char line[128], hex[2 * RING__NONCE_BYTES + 1];
    ring__hex_encode(cn, RING__NONCE_BYTES, hex);
    snprintf(line, sizeof(line), "HELLO %s\n", hex);
    ck_assert_int_eq(ring__net_write_all(fd, line, strlen(line), ring__now_ms() + 1000), 0);
}

/* Reads the server's CHAL on fd, which said HELLO with cn, checks it, and proves the secret. */
static void prove(int fd, const unsigned char *cn, int size)
{
    unsigned char sn[RING__NONCE_BYTES], mac[RING__MAC_BYTES];
    char line[RING_RDV_LINE_MAX], hex[2 * RING__MAC_BYTES + 1];
    struct ring__auth_transcript t;

    ck_assert_int_eq(ring__net_read_line(fd, line, sizeof(line), ring__now_ms() + 5000), 0);
    ck_assert_msg(strncmp(line, "CHAL ", 5) == 0, "HELLO got '%s'", line);
    ck_assert_int_eq(ring__hex_decode(line + 6 + 2 * RING__NONCE_BYTES, mac, sizeof(mac)), 0);
    line[5 + 2 * RING__NONCE_BYTES] = '\0';
    ck_assert_int_eq(ring__hex_decode(line + 5, sn, sizeof(sn)), 0);
    ring__rdv_transcript(&t, size, cn, sn);
    ck_assert(ring__auth_check(&key, RING__ROLE_ACCEPTOR, &t, mac));
    ring__auth_mac(&key, RING__ROLE_DIALER, &t, mac);
    ring__hex_encode(mac, sizeof(mac), hex);
    snprintf(line, sizeof(line), "AUTH %s\n", hex);
    say(fd, line, line, sizeof(line));
    ck_assert_str_eq(line, "OK");
}

/* The server closed fd. */
static void expect_closed(int fd)
{
    char line[RING_RDV_LINE_MAX];
    ck_assert_int_eq(ring__net_read_line(fd, line, sizeof(line), ring__now_ms() + 2000),
                     RING_EPEER);
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
    close(a);
    close(b);
    finish_thread();
    ck_assert_int_eq(rendezvous_keys(server), 1);
    rendezvous_destroy(server);
}
END_TEST

/* A key is set once: a second SET is refused and closed, and the first value stays. */
START_TEST(a_key_is_set_once)
{
    char v[64];
    int a, b;
    start();
    a = client();
    b = client();
    ck_assert_int_eq(ring__rdv_set(a, "addr.0", "10.0.0.1:4000", ring__now_ms() + 2000), 0);
    ck_assert_int_eq(ring__rdv_set(b, "addr.0", "10.6.6.6:4000", ring__now_ms() + 2000),
                     RING_EBOOTSTRAP);
    ck_assert_msg(strstr(ring_last_error(), "addr.0 is set already") != NULL, "%s",
                  ring_last_error());
    expect_closed(b);
    close(b);
    b = client();
    ck_assert_int_eq(ring__rdv_get(b, "addr.0", v, sizeof(v), ring__now_ms() + 2000), 0);
    ck_assert_str_eq(v, "10.0.0.1:4000");
    close(a);
    close(b);
    finish();
}
END_TEST

/* A world of one may set RDV_KEYS_PER_RANK (256) keys; the next is refused. */
START_TEST(the_number_of_keys_is_capped)
{
    char k[32];
    int a;
    start_size(1);
    a = raw_client();
    ck_assert_int_eq(ring__rdv_auth(a, &key, 1, ring__now_ms() + 2000), 0);
    for (int i = 0; i < 256; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        ck_assert_int_eq(ring__rdv_set(a, k, "v", ring__now_ms() + 2000), 0);
    }
    ck_assert_int_eq(ring__rdv_set(a, "one.too.many", "v", ring__now_ms() + 2000), RING_EBOOTSTRAP);
    ck_assert_msg(strstr(ring_last_error(), "as many keys as a job may set") != NULL, "%s",
                  ring_last_error());
    close(a);
    finish_thread();
    ck_assert_int_eq(rendezvous_keys(server), 256);
    rendezvous_destroy(server);
}
END_TEST

/* Without the secret, nothing but HELLO and AUTH: a SET or GET is refused and closed. */
START_TEST(nothing_before_the_proof)
{
    static const char *const before[] = {"SET k v\n", "GET k\n", "AUTH " /* no HELLO */};
    char line[RING_RDV_LINE_MAX];
    start();
    for (size_t i = 0; i < sizeof(before) / sizeof(before[0]); i++) {
        int fd = raw_client();
        char req[256];
        if (strncmp(before[i], "AUTH", 4) == 0) {
            memset(req, 'a', sizeof(req));
            memcpy(req, "AUTH ", 5);
            req[5 + 64] = '\n';
            req[6 + 64] = '\0';
        } else {
            snprintf(req, sizeof(req), "%s", before[i]);
        }
        say(fd, req, line, sizeof(line));
        ck_assert_msg(strncmp(line, "ERR prove the job's secret first", 32) == 0, "'%s' got '%s'",
                      req, line);
        expect_closed(fd);
        close(fd);
    }
    finish_thread();
    ck_assert_int_eq(rendezvous_keys(server), 0);
    ck_assert_int_eq(rendezvous_refused(server), 3);
    rendezvous_destroy(server);
}
END_TEST

/* Another job's secret: the server refuses the client, and the client the server. */
START_TEST(a_wrong_secret_is_refused_both_ways)
{
    struct ring__key other;
    int fd;
    start();
    ck_assert_int_eq(ring__key_generate(&other), 0);
    fd = raw_client();
    ck_assert_int_eq(ring__rdv_auth(fd, &other, 4, ring__now_ms() + 2000), RING_EBOOTSTRAP);
    /* The client checks the server first: it sees a server without its secret. */
    ck_assert_msg(strstr(ring_last_error(), "does not hold this job's secret") != NULL, "%s",
                  ring_last_error());
    close(fd);
    /* A world of another size is another transcript: the proofs differ. */
    fd = raw_client();
    ck_assert_int_eq(ring__rdv_auth(fd, &key, 3, ring__now_ms() + 2000), RING_EBOOTSTRAP);
    close(fd);
    finish();
}
END_TEST

/*
 * A proof is good for its own connection only: an AUTH line seen on one connection (an
 * eavesdropper's catch) is refused on another, whose server nonce differs; and the server's
 * own MAC sent back as the client's (a reflection) is refused too.
 */
START_TEST(a_proof_cannot_be_replayed_or_reflected)
{
    unsigned char cn[RING__NONCE_BYTES] = {1, 2, 3}, sn[RING__NONCE_BYTES], mac[RING__MAC_BYTES];
    char line[RING_RDV_LINE_MAX], hello[128], good[128], reflected[128];
    char hex[2 * RING__MAC_BYTES + 1];
    struct ring__auth_transcript t;
    int a, b;
    start();
    ring__hex_encode(cn, sizeof(cn), hex);
    snprintf(hello, sizeof(hello), "HELLO %s\n", hex);
    /* A genuine proof for connection a, as a rank makes it. */
    a = raw_client();
    say(a, hello, line, sizeof(line));
    ck_assert(strncmp(line, "CHAL ", 5) == 0);
    line[5 + 2 * RING__NONCE_BYTES] = '\0';
    ck_assert_int_eq(ring__hex_decode(line + 5, sn, sizeof(sn)), 0);
    ring__rdv_transcript(&t, 4, cn, sn);
    ring__auth_mac(&key, RING__ROLE_DIALER, &t, mac);
    ring__hex_encode(mac, sizeof(mac), hex);
    snprintf(good, sizeof(good), "AUTH %s\n", hex);
    /* The same HELLO and AUTH on b: its challenge is new, so a's proof is no proof there. */
    b = raw_client();
    say(b, hello, line, sizeof(line));
    ck_assert(strncmp(line, "CHAL ", 5) == 0);
    say(b, good, line, sizeof(line));
    ck_assert_str_eq(line, "ERR that is not a proof of this job's secret");
    expect_closed(b);
    close(b);
    /* b's challenge MAC handed back as b's proof. */
    b = raw_client();
    say(b, hello, line, sizeof(line));
    snprintf(reflected, sizeof(reflected), "AUTH %.64s\n", line + 6 + 2 * RING__NONCE_BYTES);
    say(b, reflected, line, sizeof(line));
    ck_assert_str_eq(line, "ERR that is not a proof of this job's secret");
    close(b);
    /* And on a, its own proof works. */
    say(a, good, line, sizeof(line));
    ck_assert_str_eq(line, "OK");
    close(a);
    finish();
}
END_TEST

/* Callers that connect and say nothing are pushed out; a rank still gets in and works. */
START_TEST(silent_callers_do_not_lock_ranks_out)
{
    int silent[100], a;
    char v[16];
    start();
    for (int i = 0; i < 100; i++)
        silent[i] = raw_client();
    a = client();
    ck_assert_int_eq(ring__rdv_set(a, "x", "1", ring__now_ms() + 2000), 0);
    ck_assert_int_eq(ring__rdv_get(a, "x", v, sizeof(v), ring__now_ms() + 2000), 0);
    for (int i = 0; i < 100; i++)
        close(silent[i]);
    close(a);
    finish();
}
END_TEST

/*
 * A flood of connections that prove nothing, queued behind a rank that said HELLO before
 * the server looked: closed at once (closed) or held silent. However many, the rank's HELLO
 * is answered and its proof accepted; the flood does not push it out.
 */
static void flood_behind_a_rank(int closed)
{
    unsigned char cn[RING__NONCE_BYTES] = {42};
    int silent[300], a;
    char v[16];
    create(4);
    a = raw_client();
    hello(a, cn);
    for (int i = 0; i < 300; i++) {
        silent[i] = raw_client();
        if (closed)
            close(silent[i]);
    }
    run();
    prove(a, cn, 4);
    ck_assert_int_eq(ring__rdv_set(a, "x", "1", ring__now_ms() + 2000), 0);
    ck_assert_int_eq(ring__rdv_get(a, "x", v, sizeof(v), ring__now_ms() + 2000), 0);
    for (int i = 0; !closed && i < 300; i++)
        close(silent[i]);
    close(a);
    finish();
}

START_TEST(closed_callers_do_not_push_out_a_rank)
{
    flood_behind_a_rank(1);
}
END_TEST

START_TEST(silent_callers_do_not_push_out_a_rank)
{
    flood_behind_a_rank(0);
}
END_TEST

/*
 * A world larger than the table of unproven clients (64) whose ranks all dial and say HELLO
 * before the server looks: the latecomers wait in the backlog while the first prove the
 * secret, and none is pushed out.
 */
START_TEST(a_world_that_dials_at_once_gets_in)
{
    enum { SIZE = 90 };
    unsigned char cn[SIZE][RING__NONCE_BYTES];
    int fd[SIZE];
    create(SIZE);
    for (int i = 0; i < SIZE; i++) {
        memset(cn[i], i + 1, sizeof(cn[i]));
        fd[i] = raw_client();
        hello(fd[i], cn[i]);
    }
    run();
    for (int i = 0; i < SIZE; i++)
        prove(fd[i], cn[i], SIZE);
    for (int i = 0; i < SIZE; i++)
        close(fd[i]);
    finish_thread();
    ck_assert_int_eq(rendezvous_refused(server), 0);
    rendezvous_destroy(server);
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
    again = rendezvous_create("127.0.0.1", rendezvous_port(server), &key, 4, &err);
    ck_assert_ptr_null(again);
    ck_assert_msg(strstr(err.text, "in use") != NULL, "%s", err.text);
    ck_assert_ptr_null(rendezvous_create("not-an-ip", 0, &key, 4, &err));
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
        a_key_is_set_once,
        the_number_of_keys_is_capped,
        nothing_before_the_proof,
        a_wrong_secret_is_refused_both_ways,
        a_proof_cannot_be_replayed_or_reflected,
        silent_callers_do_not_lock_ranks_out,
        closed_callers_do_not_push_out_a_rank,
        silent_callers_do_not_push_out_a_rank,
        a_world_that_dials_at_once_gets_in,
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
