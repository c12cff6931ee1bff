/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A peer that holds the job's secret but sends what it must not: real ranks (world.h) with
 * a real mesh, one of them writing forged bytes where the protocol lets it write. The other
 * must refuse each with RING_EPROTO and break the mesh (so that the liar, and everyone
 * else, fails at once), never crash, hang or allocate what it was told to:
 *   - a shared-memory record longer than the ring (transport_shm.c, shm_record.c);
 *   - a segment memfd shorter than its hello says (a SIGBUS on access, if mapped);
 *   - a control message length of 4 GiB, to the coordinator and from it (collectives.c).
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "unit.h"
#include "bootstrap/bootstrap.h"
#include "base/base.h"
#include "ring_internal.h"
#include "transport/shm_record.h"
#include "transport/transport.h"
#include "world.h"

/*
 * The rank that plays the short-segment peer sets this, and its segment's memfd is then
 * sized to one page whatever libring asks: a test stand-in for a peer that sends a short
 * file. The test binary's ftruncate replaces libc's for the libring objects linked into it.
 */
static int short_segment;

int ftruncate(int fd, off_t len)
{
    return (int)syscall(SYS_ftruncate, fd, short_segment ? (off_t)4096 : len);
}

struct side {
    struct ring__tuning tune;
    struct ring__bootstrap *b;
    struct ring__mesh *m;
    struct ring__ctx ctx;
    struct ring__comm c;
};

/* Bootstrap and mesh, as ring_init makes them but without the engine. Returns 0 or an error. */
static int open_side(struct side *s)
{
    struct ring__mesh_cfg cfg;
    int rc;

    memset(s, 0, sizeof(*s));
    if ((rc = ring__tuning_load(&s->tune)) < 0 || (rc = ring__bootstrap_open(5000, &s->b)) < 0)
        return rc;
    ring__tuning_resolve(&s->tune, 0);
    cfg = (struct ring__mesh_cfg){
        .rank = s->b->rank,
        .size = s->b->size,
        .setup_timeout_ms = 5000,
        .op_timeout_ms = 5000,
        .host_addr = s->b->host_addr,
        .tune = &s->tune,
        .key = &s->b->key,
    };
    if ((rc = ring__mesh_create(s->b, &cfg, 50, &s->m)) < 0)
        return rc;
    s->ctx.mesh = s->m;
    s->ctx.rank = s->b->rank;
    s->ctx.size = s->b->size;
    s->c = (struct ring__comm){.ctx = &s->ctx, .rank = s->b->rank, .size = s->b->size};
    return 0;
}

static void close_side(struct side *s)
{
    ring__mesh_destroy(s->m);
    ring__bootstrap_close(s->b);
}

/* This process's mapping of the segment it shares with its one local peer, or NULL. */
static char *segment(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    uintptr_t lo = 0;

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, "ringmaster-shm") != NULL && sscanf(line, "%" SCNxPTR, &lo) == 1)
            break;
        lo = 0;
    }
    if (f != NULL)
        fclose(f);
    return (char *)lo;
}

/*
 * Rank 1 writes a COPY record of 1 MiB into its 4 KiB ring to rank 0 and publishes it; rank
 * 0, receiving 1 MiB, must refuse it rather than copy past the ring. The layout is
 * transport_shm.c's: a 4096-byte header whose second channel (offset 128) is rank 1's, then
 * rank 0's ring to rank 1, then rank 1's ring to rank 0.
 */
static int forged_record_rank(int rank, void *arg)
{
    struct side s;
    char *buf = malloc(1 << 20);
    int rc;

    if (buf == NULL || open_side(&s) != 0)
        return 10;
    if (segment() == NULL) /* the pair is not on shared memory */
        return 11;
    if (rank == 1) {
        struct ring__shm_rec rec = {RING__SHM_COPY, 1u << 20, 0};
        char *seg = segment();
        if (seg == NULL)
            return 12;
        memcpy(seg + 4096 + 4096, &rec, sizeof(rec));
        __atomic_store_n((uint64_t *)(seg + 128), (uint64_t)4096, __ATOMIC_SEQ_CST);
        if (s.b->ops->barrier(s.b) != 0)
            return 13;
        /* Rank 0 breaks the mesh: the liar learns it from its own next wait, at once. */
        rc = ring__mesh_sendrecv(s.m, -1, NULL, 0, 0, buf, 1);
        return rc == RING_EPEER ? 0 : 14;
    }
    if (s.b->ops->barrier(s.b) != 0)
        return 15;
    rc = ring__mesh_sendrecv(s.m, -1, NULL, 0, 1, buf, 1 << 20);
    if (rc != RING_EPROTO || strstr(ring_last_error(), "bad shared-memory record") == NULL ||
        !ring__mesh_broken(s.m)) {
        fprintf(stderr, "rank 0: got %s: %s\n", ring_err_name(rc), ring_last_error());
        return 16;
    }
    close_side(&s);
    free(buf);
    return 0;
}

START_TEST(a_forged_record_length_is_refused)
{
    const char *env[] = {"RING_TRANSPORT=shm", "RING_SHM_RING_BYTES=4096", "RING_SHM_CMA=0", NULL};
    int status[2];
    world_run(2, forged_record_rank, NULL, env, 20, status);
    ck_assert_msg(world_exit_code(status[0]) == 0, "rank 0: status %#x", status[0]);
    ck_assert_msg(world_exit_code(status[1]) == 0, "rank 1: status %#x", status[1]);
}
END_TEST

/*
 * Rank 1 (the dialer, which makes the segment) sends a memfd of one page for a segment of
 * three. Rank 0 must refuse it at set-up; mapped, its first write to the ring would be a
 * SIGBUS, so if set-up succeeds it writes, to show it.
 */
static int short_segment_rank(int rank, void *arg)
{
    struct side s;
    char x[1024] = {0};
    int rc;

    short_segment = rank == 1;
    rc = open_side(&s);
    if (rank == 1)
        return rc < 0 ? 0 : 20; /* rank 0 refused it: this rank's set-up fails too */
    if (rc == 0) {
        (void)ring__mesh_sendrecv(s.m, 1, x, sizeof(x), -1, NULL, 0);
        return 21;
    }
    if (rc != RING_EPROTO || strstr(ring_last_error(), "holds 4096 bytes") == NULL) {
        fprintf(stderr, "rank 0: got %s: %s\n", ring_err_name(rc), ring_last_error());
        return 22;
    }
    return 0;
}

START_TEST(a_short_segment_is_refused)
{
    const char *env[] = {"RING_TRANSPORT=shm", "RING_SHM_RING_BYTES=4096", NULL};
    int status[2];
    world_run(2, short_segment_rank, NULL, env, 20, status);
    ck_assert_msg(world_exit_code(status[0]) == 0, "rank 0: status %#x", status[0]);
    ck_assert_msg(world_exit_code(status[1]) == 0, "rank 1: status %#x", status[1]);
}
END_TEST

/*
 * A control message of 4 GiB announced: by rank 1 to the coordinator (gather), or by rank 0
 * to the others (broadcast, arg non-NULL). The receiver refuses it at once, with no 4 GiB
 * buffer and no wait for 4 GiB that will not come.
 */
static int huge_length_rank(int rank, void *arg)
{
    int liar = arg == NULL ? 1 : 0, rc;
    uint64_t n = (uint64_t)1 << 32;
    int64_t t0;
    struct side s;
    char one;

    if (open_side(&s) != 0)
        return 30;
    if (rank == liar) {
        if (ring__mesh_sendrecv(s.m, 1 - rank, &n, sizeof(n), -1, NULL, 0) != 0)
            return 31;
        t0 = ring__now_ms();
        rc = ring__mesh_sendrecv(s.m, -1, NULL, 0, 1 - rank, &one, 1);
        return rc == RING_EPEER && ring__now_ms() - t0 < 2000 ? 0 : 32;
    }
    t0 = ring__now_ms();
    if (liar == 1) {
        char **bufs;
        size_t *lens;
        rc = ring__gather_bytes(&s.c, "x", 1, &bufs, &lens);
    } else {
        char *buf = NULL;
        size_t len = 0;
        rc = ring__bcast_bytes(&s.c, &buf, &len);
    }
    if (rc != RING_EPROTO || !ring__mesh_broken(s.m) || ring__now_ms() - t0 > 2000 ||
        strstr(ring_last_error(), "4294967296 bytes") == NULL) {
        fprintf(stderr, "rank %d: got %s after %lld ms: %s\n", rank, ring_err_name(rc),
                (long long)(ring__now_ms() - t0), ring_last_error());
        return 33;
    }
    close_side(&s);
    return 0;
}

START_TEST(a_huge_gather_length_is_refused)
{
    int status[2];
    world_run(2, huge_length_rank, NULL, NULL, 20, status);
    ck_assert_msg(world_exit_code(status[0]) == 0, "rank 0: status %#x", status[0]);
    ck_assert_msg(world_exit_code(status[1]) == 0, "rank 1: status %#x", status[1]);
}
END_TEST

START_TEST(a_huge_broadcast_length_is_refused)
{
    int status[2];
    world_run(2, huge_length_rank, "bcast", NULL, 20, status);
    ck_assert_msg(world_exit_code(status[0]) == 0, "rank 0: status %#x", status[0]);
    ck_assert_msg(world_exit_code(status[1]) == 0, "rank 1: status %#x", status[1]);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        a_forged_record_length_is_refused,
        a_short_segment_is_refused,
        a_huge_gather_length_is_refused,
        a_huge_broadcast_length_is_refused,
        NULL,
    };
    return unit_main("hostile_peer", tests, 30);
}
