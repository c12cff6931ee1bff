/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the engine's control round (control.c) with attachments: real ranks
 * (world.h) over a real mesh (shm, or tcp with RING_TRANSPORT=tcp), no engine. Every rank
 * knows what every other one attaches, so each can check the verdict it must reach: the
 * data is reduced only when every rank attached the same key and length, and every rank
 * reaches the same verdict, at world sizes with and without folded ranks.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "bootstrap/bootstrap.h"
#include "collectives/collectives.h"
#include "ring_internal.h"
#include "transport/transport.h"
#include "base/tuning.h"
#include "world.h"

#define NWORDS 5

/* What rank r attaches in one scenario: on, its key (two words) and its element count. */
struct plan {
    int on;
    uint64_t key[2];
    size_t count;
};

enum { SAME, OTHER_KEY, ONE_ABSENT, OTHER_LENGTH, KEY_ONLY, FULL, NSCENARIOS };

static struct plan plan_of(int scenario, int r, int size)
{
    struct plan p = {1, {0x5, 0x80000001ull}, 100};
    switch (scenario) {
    case OTHER_KEY: /* the last rank holds one more tensor, of no bytes (a barrier) */
        if (r == size - 1)
            p.key[1] |= 2;
        break;
    case ONE_ABSENT:
        p.on = r != 1;
        break;
    case OTHER_LENGTH:
        if (r == 0)
            p.count = 50;
        break;
    case KEY_ONLY:
        p.count = 0;
        break;
    case FULL:
        p.count = RING__ATTACH_MAX / sizeof(float);
        break;
    default:
        break;
    }
    return p;
}

static int valid_expected(int scenario)
{
    return scenario == SAME || scenario == KEY_ONLY || scenario == FULL;
}

/* A world's context and mesh without the engine, as ring_init connects them. */
static int connect(struct ring__ctx *c)
{
    struct ring__mesh_cfg cfg;
    if (ring__tuning_load(&c->tune) < 0 || ring__bootstrap_open(10000, &c->boot) < 0)
        return -1;
    c->rank = c->boot->rank;
    c->size = c->boot->size;
    ring__tuning_resolve(&c->tune, 0);
    cfg = (struct ring__mesh_cfg){
        .rank = c->rank,
        .size = c->size,
        .setup_timeout_ms = 10000,
        .op_timeout_ms = 10000,
        .host_addr = c->boot->host_addr,
        .tune = &c->tune,
        .key = &c->boot->key,
    };
    return ring__mesh_create(c->boot, &cfg, 50, &c->mesh);
}

static int control_rank(int rank, void *arg)
{
    struct ring__ctx c = {0};
    struct ring__comm w;
    size_t cap = RING__ATTACH_MAX / sizeof(float);
    float *data = malloc(cap * sizeof(float));
    void *scratch = malloc(ring__ctl_scratch_bytes(NWORDS));

    if (data == NULL || scratch == NULL || connect(&c) < 0) {
        fprintf(stderr, "rank %d: set-up: %s\n", rank, ring_last_error());
        return 10;
    }
    w = (struct ring__comm){.ctx = &c, .rank = c.rank, .size = c.size};
    for (int round = 0; round < 2; round++) {
        for (int s = 0; s < NSCENARIOS; s++) {
            struct plan p = plan_of(s, rank, c.size);
            uint64_t words[NWORDS];
            struct ring__attach at = {
                .on = p.on,
                .key = p.key,
                .key_bytes = sizeof(p.key),
                .data = data,
                .count = p.count,
                .bytes = p.count * sizeof(float),
                .dtype = RING_FLOAT32,
                .op = RING_SUM,
            };
            for (size_t i = 0; i < p.count; i++)
                data[i] = (float)(rank + (int)(i % 7));
            for (int i = 0; i < NWORDS; i++) /* every rank clears its own bit of each word */
                words[i] = ~((uint64_t)1 << (rank + i));
            if (ring__ctl_allreduce(&w, words, NWORDS, &at, scratch) < 0) {
                fprintf(stderr, "rank %d: scenario %d: %s\n", rank, s, ring_last_error());
                return 11;
            }
            for (int i = 0; i < NWORDS; i++) {
                uint64_t want = ~(uint64_t)0;
                for (int r = 0; r < c.size; r++)
                    want &= ~((uint64_t)1 << (r + i));
                if (words[i] != want) {
                    fprintf(stderr, "rank %d: scenario %d: word %d is %llx\n", rank, s, i,
                            (unsigned long long)words[i]);
                    return 12;
                }
            }
            if (at.valid != (p.on && valid_expected(s))) {
                fprintf(stderr, "rank %d: scenario %d: valid %d\n", rank, s, at.valid);
                return 13;
            }
            for (size_t i = 0; at.valid && i < p.count; i++) {
                float want = 0;
                for (int r = 0; r < c.size; r++)
                    want += (float)(r + (int)(i % 7));
                if (data[i] != want) {
                    fprintf(stderr, "rank %d: scenario %d: element %zu is %g, not %g\n", rank, s, i,
                            data[i], want);
                    return 14;
                }
            }
        }
    }
    free(data);
    free(scratch);
    ring__mesh_destroy(c.mesh);
    ring__bootstrap_close(c.boot);
    return 0;
}

static void run_world(int np, const char *transport)
{
    const char *env[] = {transport, NULL};
    int status[8];
    world_run(np, control_rank, NULL, env, 60, status);
    for (int r = 0; r < np; r++)
        ck_assert_msg(world_exit_code(status[r]) == 0, "np %d %s: rank %d: status %#x", np,
                      transport, r, status[r]);
}

START_TEST(attachments_at_np2)
{
    run_world(2, "RING_TRANSPORT=shm");
}
END_TEST

START_TEST(attachments_at_np3_folded)
{
    run_world(3, "RING_TRANSPORT=shm");
}
END_TEST

START_TEST(attachments_at_np5_folded)
{
    run_world(5, "RING_TRANSPORT=shm");
}
END_TEST

START_TEST(attachments_over_tcp)
{
    run_world(3, "RING_TRANSPORT=tcp");
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        attachments_at_np2,
        attachments_at_np3_folded,
        attachments_at_np5_folded,
        attachments_over_tcp,
        NULL,
    };
    return unit_main("control", tests, 90);
}
