/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the start of every pair's connection (transport/handshake.h): both ends
 * prove the job's secret, with fresh nonces and their roles, so that no answer can be
 * forged, replayed into another connection or reflected; and of the check a shared-memory
 * segment passes before it is mapped (transport/shm_record.h).
 */
#include <check.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "unit.h"
#include "transport/handshake.h"
#include "transport/shm_record.h"

#define MAGIC 0x54455354u /* "TEST" */

static struct ring__key key, other_key;

/* The acceptor wants any higher rank of a world of 4: rank 0 accepts ranks 1..3. */
static int wants_higher(void *arg, uint32_t rank, uint32_t size)
{
    return size == 4 && rank > 0 && rank < 4;
}

static int wants_nobody(void *arg, uint32_t rank, uint32_t size)
{
    return 0;
}

static struct ring__hs_ctx ctx(const struct ring__key *k, int rank)
{
    return (struct ring__hs_ctx){.key = k, .wire = "tcp", .magic = MAGIC, .rank = rank, .size = 4};
}

static void keys(void)
{
    ck_assert_int_eq(ring__key_generate(&key), 0);
    ck_assert_int_eq(ring__key_generate(&other_key), 0);
}

/* Feeds n bytes one at a time; returns the last verdict. */
static int feed(struct ring__hs *h, const struct ring__hs_ctx *c, const void *buf, size_t n,
                ring__hs_wanted_fn *wanted, struct ring__hs_challenge *reply)
{
    int v = RING__HS_MORE;
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(v, RING__HS_MORE);
        ck_assert_uint_ge(ring__hs_need(h), 1);
        v = ring__hs_accept_take(h, c, (const char *)buf + i, 1, wanted, NULL, reply);
    }
    return v;
}

START_TEST(an_honest_handshake_completes)
{
    struct ring__hs_ctx dialer = ctx(&key, 3), acceptor = ctx(&key, 0);
    struct ring__hs_hello hello;
    struct ring__hs_challenge ch;
    struct ring__hs_proof proof;
    struct ring__hs h;
    char why[128];

    keys();
    ring__hs_dial_hello(&dialer, &hello);
    ring__hs_accept_init(&h);
    ck_assert_int_eq(feed(&h, &acceptor, &hello, sizeof(hello), wants_higher, &ch), RING__HS_SEND);
    ck_assert_int_eq(ch.rank, 0);
    ck_assert_int_eq(ring__hs_dial_check(&dialer, &hello, 0, &ch, &proof, why, sizeof(why)), 0);
    ck_assert_int_eq(feed(&h, &acceptor, &proof, sizeof(proof), wants_higher, &ch), RING__HS_OK);
    ck_assert_int_eq(h.peer, 3);
    ck_assert_uint_eq(ring__hs_need(&h), 0);
    /* Nothing more is taken once it is done. */
    ck_assert_int_eq(ring__hs_accept_take(&h, &acceptor, "x", 1, wants_higher, NULL, &ch),
                     RING__HS_REFUSE);
}
END_TEST

START_TEST(another_jobs_secret_is_refused_both_ways)
{
    struct ring__hs_ctx dialer = ctx(&other_key, 2), acceptor = ctx(&key, 0);
    struct ring__hs_hello hello;
    struct ring__hs_challenge ch;
    struct ring__hs_proof proof;
    struct ring__hs h;
    char why[128];

    keys();
    /* The dialer holds another key: it refuses the acceptor's challenge... */
    ring__hs_dial_hello(&dialer, &hello);
    ring__hs_accept_init(&h);
    ck_assert_int_eq(feed(&h, &acceptor, &hello, sizeof(hello), wants_higher, &ch), RING__HS_SEND);
    ck_assert_int_eq(ring__hs_dial_check(&dialer, &hello, 0, &ch, &proof, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "it did not prove the job's secret");
    /* ...and a proof made with its key anyway is refused by the acceptor. */
    {
        struct ring__auth_transcript t;
        memset(&t, 0, sizeof(t));
        strcpy(t.wire, "tcp");
        t.dialer = 2;
        t.acceptor = 0;
        t.size = 4;
        memcpy(t.dialer_nonce, hello.nonce, sizeof(t.dialer_nonce));
        memcpy(t.acceptor_nonce, ch.nonce, sizeof(t.acceptor_nonce));
        ring__auth_mac(&other_key, RING__ROLE_DIALER, &t, proof.mac);
    }
    ck_assert_int_eq(feed(&h, &acceptor, &proof, sizeof(proof), wants_higher, &ch),
                     RING__HS_REFUSE);
    ck_assert_msg(strstr(h.why, "did not prove the job's secret") != NULL, "%s", h.why);
}
END_TEST

START_TEST(a_bad_hello_is_refused)
{
    struct ring__hs_ctx dialer = ctx(&key, 1), acceptor = ctx(&key, 0);
    struct ring__hs_hello hello;
    struct ring__hs_challenge ch;
    struct ring__hs h;

    keys();
    ring__hs_dial_hello(&dialer, &hello);
    hello.magic ^= 1;
    ring__hs_accept_init(&h);
    ck_assert_int_eq(feed(&h, &acceptor, &hello, sizeof(hello), wants_higher, &ch),
                     RING__HS_REFUSE);
    ck_assert_str_eq(h.why, "not a libring hello");
    /* A rank the acceptor does not wait for. */
    ring__hs_dial_hello(&dialer, &hello);
    ring__hs_accept_init(&h);
    ck_assert_int_eq(feed(&h, &acceptor, &hello, sizeof(hello), wants_nobody, &ch),
                     RING__HS_REFUSE);
    /* More bytes than the message in one go. */
    {
        char big[sizeof(hello) + 1] = {0};
        ring__hs_accept_init(&h);
        ck_assert_int_eq(
            ring__hs_accept_take(&h, &acceptor, big, sizeof(big), wants_higher, NULL, &ch),
            RING__HS_REFUSE);
    }
}
END_TEST

/* What an eavesdropper saw of one connection proves nothing on the next. */
START_TEST(a_proof_cannot_be_replayed)
{
    struct ring__hs_ctx dialer = ctx(&key, 1), acceptor = ctx(&key, 0);
    struct ring__hs_hello hello;
    struct ring__hs_challenge ch1, ch2;
    struct ring__hs_proof proof;
    struct ring__hs h1, h2;
    char why[128];

    keys();
    ring__hs_dial_hello(&dialer, &hello);
    ring__hs_accept_init(&h1);
    ck_assert_int_eq(feed(&h1, &acceptor, &hello, sizeof(hello), wants_higher, &ch1),
                     RING__HS_SEND);
    ck_assert_int_eq(ring__hs_dial_check(&dialer, &hello, 0, &ch1, &proof, why, sizeof(why)), 0);
    ck_assert_int_eq(feed(&h1, &acceptor, &proof, sizeof(proof), wants_higher, &ch1), RING__HS_OK);
    /* The same hello and proof replayed on a second connection. */
    ring__hs_accept_init(&h2);
    ck_assert_int_eq(feed(&h2, &acceptor, &hello, sizeof(hello), wants_higher, &ch2),
                     RING__HS_SEND);
    ck_assert(memcmp(ch1.nonce, ch2.nonce, sizeof(ch1.nonce)) != 0);
    ck_assert_int_eq(feed(&h2, &acceptor, &proof, sizeof(proof), wants_higher, &ch2),
                     RING__HS_REFUSE);
}
END_TEST

/* The acceptor's own MAC handed back as the dialer's proof is no proof. */
START_TEST(a_challenge_cannot_be_reflected)
{
    struct ring__hs_ctx dialer = ctx(&key, 1), acceptor = ctx(&key, 0);
    struct ring__hs_hello hello;
    struct ring__hs_challenge ch;
    struct ring__hs_proof proof;
    struct ring__hs h;

    keys();
    ring__hs_dial_hello(&dialer, &hello);
    ring__hs_accept_init(&h);
    ck_assert_int_eq(feed(&h, &acceptor, &hello, sizeof(hello), wants_higher, &ch), RING__HS_SEND);
    memcpy(proof.mac, ch.mac, sizeof(proof.mac));
    ck_assert_int_eq(feed(&h, &acceptor, &proof, sizeof(proof), wants_higher, &ch),
                     RING__HS_REFUSE);
}
END_TEST

/* A listener that answers as another rank (an address taken over) is refused by the dialer. */
START_TEST(a_challenge_from_another_rank_is_refused)
{
    struct ring__hs_ctx dialer = ctx(&key, 3), acceptor = ctx(&key, 2);
    struct ring__hs_hello hello;
    struct ring__hs_challenge ch;
    struct ring__hs_proof proof;
    struct ring__hs h;
    char why[128];

    keys();
    ring__hs_dial_hello(&dialer, &hello);
    ring__hs_accept_init(&h);
    ck_assert_int_eq(feed(&h, &acceptor, &hello, sizeof(hello), wants_higher, &ch), RING__HS_SEND);
    ck_assert_int_eq(ring__hs_dial_check(&dialer, &hello, 1, &ch, &proof, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "it answered as rank 2 of 4, not as rank 1 of 4");
}
END_TEST

/* A segment is mapped only when sealed against shrinking and growing, at its size. */
START_TEST(a_segment_must_be_sealed_at_its_size)
{
    char why[128];
    int fds[2];
    int fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 12288), 0);
    ck_assert_int_eq(ring__shm_check_segment(fd, 12288, why, sizeof(why)), -1);
    ck_assert_msg(strstr(why, "not sealed") != NULL, "%s", why);
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
    ck_assert_int_eq(ring__shm_check_segment(fd, 12288, why, sizeof(why)), 0);
    ck_assert_int_eq(ring__shm_check_segment(fd, 16384, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "it holds 12288 bytes, not the 16384 its hello announced");
    close(fd);
    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(ring__shm_check_segment(fds[0], 12288, why, sizeof(why)), -1);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

/* The record reader: every way a record can lie about its size is refused. */
START_TEST(a_record_never_reads_past_the_ring)
{
    static char ring[4096] __attribute__((aligned(16)));
    struct ring__shm_rec r = {RING__SHM_COPY, 100, 0}, got;
    uint64_t span;
    char why[128];

    memcpy(ring, &r, sizeof(r));
    ck_assert_int_eq(ring__shm_rec_read(ring, 4096, 0, 128, 0, &got, &span, why, sizeof(why)), 0);
    ck_assert_uint_eq(span, 16 + 112);
    /* Longer than what was published. */
    ck_assert_int_eq(ring__shm_rec_read(ring, 4096, 0, 64, 0, &got, &span, why, sizeof(why)), -1);
    /* Past the end of the ring. */
    r.len = 4096;
    memcpy(ring, &r, sizeof(r));
    ck_assert_int_eq(ring__shm_rec_read(ring, 4096, 0, 4096, 0, &got, &span, why, sizeof(why)), -1);
    ck_assert_msg(strstr(why, "past the end of the ring") != NULL, "%s", why);
    /* More published than the ring holds; an unknown kind; a record shorter than taken. */
    r.len = 100;
    memcpy(ring, &r, sizeof(r));
    ck_assert_int_eq(ring__shm_rec_read(ring, 4096, 0, 8192, 0, &got, &span, why, sizeof(why)), -1);
    ck_assert_int_eq(ring__shm_rec_read(ring, 4096, 0, 128, 101, &got, &span, why, sizeof(why)),
                     -1);
    r.kind = 9;
    memcpy(ring, &r, sizeof(r));
    ck_assert_int_eq(ring__shm_rec_read(ring, 4096, 0, 128, 0, &got, &span, why, sizeof(why)), -1);
    /* A CMA record over the most a CMA record moves. */
    r = (struct ring__shm_rec){RING__SHM_CMA, (uint32_t)RING__SHM_CMA_MAX + 1, 4096};
    memcpy(ring, &r, sizeof(r));
    ck_assert_int_eq(ring__shm_rec_read(ring, 4096, 0, 16, 0, &got, &span, why, sizeof(why)), -1);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        an_honest_handshake_completes,
        another_jobs_secret_is_refused_both_ways,
        a_bad_hello_is_refused,
        a_proof_cannot_be_replayed,
        a_challenge_cannot_be_reflected,
        a_challenge_from_another_rank_is_refused,
        a_segment_must_be_sealed_at_its_size,
        a_record_never_reads_past_the_ring,
        NULL,
    };
    return unit_main("handshake", tests, 20);
}
