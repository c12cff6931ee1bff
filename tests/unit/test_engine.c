/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the engine's pure parts: the coordinator's matching and validation, fusion
 * planning, the response cache, the wire format and the string map.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "engine/engine.h"

static struct ring__request req(const char *name, int type, int dtype, uint64_t count)
{
    struct ring__request r;
    memset(&r, 0, sizeof(r));
    snprintf(r.name, sizeof(r.name), "%s", name);
    r.type = type;
    r.dtype = dtype;
    r.op = RING_SUM;
    r.count = count;
    r.device = -1;
    r.group_size = 1;
    r.prescale = r.postscale = 1.0;
    return r;
}

static struct ring__process_sets world(int size)
{
    struct ring__process_sets p;
    ck_assert_int_eq(ring__psets_init(&p, size, 0), 0);
    return p;
}

/* Validates a from rank 0 against b from rank 1 in a world of 2; returns the code. */
static int validate2(const struct ring__request *a, const struct ring__request *b, char *msg)
{
    struct ring__process_sets p = world(2);
    const struct ring__request *rs[2] = {a, b};
    int ranks[2] = {0, 1};
    unsigned char joined[2] = {0, 0};
    int rc = ring__coord_validate(rs, ranks, 2, ring__psets_get(&p, 0), joined, msg, 512);
    ring__psets_free(&p);
    return rc;
}

START_TEST(validate_every_mismatch_kind)
{
    struct ring__request a = req("grad/w1", RING__ALLREDUCE, RING_FLOAT32, 8), b;
    char msg[512];

    b = a;
    ck_assert_int_eq(validate2(&a, &b, msg), 0);
    b.dtype = RING_FLOAT64;
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert_str_eq(msg, "allreduce 'grad/w1': rank 0 sent float32, rank 1 sent float64");
    b = a;
    b.op = RING_MAX;
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert_str_eq(msg, "allreduce 'grad/w1': rank 0 asked for sum, rank 1 for max");
    b = a;
    b.count = 9;
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert_str_eq(msg, "allreduce 'grad/w1': rank 0 sent 8 elements, rank 1 sent 9");
    b = a;
    b.device = 0;
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert_str_eq(
        msg, "allreduce 'grad/w1': rank 0 sent a CPU buffer, rank 1 sent a buffer on GPU 0");
    /* every rank drives its own GPU: GPU 0 on one rank and GPU 1 on another agree */
    a.device = 0;
    b.device = 1;
    ck_assert_int_eq(validate2(&a, &b, msg), 0);
    ck_assert(ring__request_same(&a, &b));
    a.device = -1;
    b = a;
    b.postscale = 0.5;
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert(strstr(msg, "scales by 1/1 (pre/post), rank 1 by 1/0.5") != NULL);
    b = a;
    b.type = RING__BROADCAST;
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert_str_eq(msg,
                     "tensor 'grad/w1': rank 0 submitted allreduce, rank 1 submitted broadcast");
    a.type = b.type = RING__BROADCAST;
    b.root = 1;
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert_str_eq(msg, "broadcast 'grad/w1': rank 0 named root 0, rank 1 root 1");
    /* the same count in another declared shape (ring_shape_next), or in none */
    a = req("grad/w1", RING__ALLREDUCE, RING_FLOAT32, 8);
    b = a;
    a.shape = 0x1234;
    b.shape = 0x4321;
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert_str_eq(msg,
                     "allreduce 'grad/w1': rank 0 and rank 1 sent 8 elements in different shapes");
    ck_assert(!ring__request_same(&a, &b)); /* nor does the cache take one for the other */
    b.shape = 0;
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    b.shape = a.shape;
    ck_assert_int_eq(validate2(&a, &b, msg), 0);
}
END_TEST

START_TEST(validate_variable_sized_ops)
{
    uint64_t counts[2] = {3, 5}, other[2] = {3, 4};
    uint64_t a2a0[4] = {1, 2, 1, 7}, a2a1[4] = {7, 1, 2, 1}; /* send[0..1], recv[0..1] */
    struct ring__request a = req("x", RING__ALLGATHERV, RING_INT32, 3), b;
    char msg[512];

    a.counts = counts;
    a.ncounts = 2;
    b = a;
    b.count = 5;
    ck_assert_int_eq(validate2(&a, &b, msg), 0);
    b.count = 4;
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert(strstr(msg, "rank 1 sends 4 elements but recvcounts[1] is 5") != NULL);
    b.count = 5;
    b.counts = other;
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert(strstr(msg, "different recvcounts") != NULL);

    a = req("y", RING__ALLTOALLV, RING_INT32, 0);
    b = a;
    a.counts = a2a0;
    a.ncounts = 4;
    b.counts = a2a1;
    b.ncounts = 4;
    ck_assert_int_eq(validate2(&a, &b, msg), 0);
    a2a1[2] = 3; /* rank 1 now expects 3 from rank 0, which sends 2 */
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert(strstr(msg, "rank 0 sends 2 elements to rank 1, which expects 3") != NULL);
}
END_TEST

START_TEST(validate_ops_with_joined_ranks)
{
    struct ring__process_sets p = world(3);
    struct ring__request a = req("x", RING__ALLGATHER, RING_INT32, 3);
    const struct ring__request *rs[1] = {&a};
    int ranks[1] = {0};
    unsigned char joined[3] = {0, 0, 1};
    char msg[512];

    ck_assert_int_eq(ring__coord_validate(rs, ranks, 1, ring__psets_get(&p, 0), joined, msg, 512),
                     RING_EJOINED);
    ck_assert(strstr(msg, "not allowed while ranks have joined (rank 2 has)") != NULL);
    a.type = RING__ALLREDUCE;
    ck_assert_int_eq(ring__coord_validate(rs, ranks, 1, ring__psets_get(&p, 0), joined, msg, 512),
                     0);
    a.type = RING__BROADCAST;
    a.root = 2;
    ck_assert_int_eq(ring__coord_validate(rs, ranks, 1, ring__psets_get(&p, 0), joined, msg, 512),
                     RING_EJOINED);
    ring__psets_free(&p);
}
END_TEST

/* Runs ring__coord_match on per-rank request lists and returns the responses. */
static int match(int size, struct ring__request **reqs, int *nreqs, unsigned char *joined,
                 struct ring__process_sets *p, struct ring__response **out)
{
    int n;
    ck_assert_int_eq(ring__coord_match(size, reqs, nreqs, joined, p, out, &n), 0);
    return n;
}

START_TEST(match_needs_every_rank_and_keeps_order)
{
    struct ring__process_sets p = world(3);
    struct ring__request r0[3] = {req("a", 0, RING_FLOAT32, 4), req("b", 0, RING_FLOAT32, 4),
                                  req("c", 0, RING_FLOAT32, 4)};
    struct ring__request r1[2] = {req("c", 0, RING_FLOAT32, 4), req("a", 0, RING_FLOAT32, 4)};
    struct ring__request r2[3] = {req("b", 0, RING_FLOAT32, 4), req("a", 0, RING_FLOAT32, 4),
                                  req("c", 0, RING_FLOAT32, 4)};
    struct ring__request *reqs[3] = {r0, r1, r2};
    int nreqs[3] = {3, 2, 3};
    unsigned char joined[3] = {0};
    struct ring__response *resp;
    int n = match(3, reqs, nreqs, joined, &p, &resp);

    ck_assert_int_eq(n, 2); /* b is missing on rank 1 */
    ck_assert_str_eq(resp[0].req.name, "a");
    ck_assert_str_eq(resp[1].req.name, "c");
    for (int i = 0; i < n; i++)
        ring__response_clear(&resp[i]);
    free(resp);
    joined[1] = 1; /* once rank 1 joined, b is ready */
    n = match(3, reqs, nreqs, joined, &p, &resp);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(resp[1].req.name, "b");
    for (int i = 0; i < n; i++)
        ring__response_clear(&resp[i]);
    free(resp);
    ring__psets_free(&p);
}
END_TEST

START_TEST(match_groups_and_process_sets)
{
    struct ring__process_sets p = world(3);
    int members[2] = {0, 2};
    struct ring__request g0 = req("g/0", 0, RING_FLOAT32, 4), g1 = req("g/1", 0, RING_FLOAT32, 4);
    struct ring__request s = req("set1:x", 0, RING_FLOAT32, 4);
    struct ring__request r0[3], r1[1], r2[3];
    struct ring__request *reqs[3] = {r0, r1, r2};
    int nreqs[3] = {3, 1, 3};
    unsigned char joined[3] = {0};
    struct ring__response *resp;
    int n;

    ck_assert_int_eq(ring__psets_add(&p, members, 2, 3, 0), 1);
    g0.group_size = g1.group_size = 2;
    s.process_set = 1;
    r0[0] = g0, r0[1] = g1, r0[2] = s;
    r1[0] = g0; /* rank 1 lacks g/1: the group must wait, the set's tensor need not */
    r2[0] = s, r2[1] = g1, r2[2] = g0;
    n = match(3, reqs, nreqs, joined, &p, &resp);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(resp[0].req.name, "set1:x");
    ring__response_clear(&resp[0]);
    free(resp);
    r1[0] = g1;
    nreqs[1] = 1;
    {
        struct ring__request both[2] = {g1, g0};
        reqs[1] = both;
        nreqs[1] = 2;
        n = match(3, reqs, nreqs, joined, &p, &resp);
    }
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(resp[0].req.name, "g/0"); /* a group comes out whole, in member order */
    ck_assert_str_eq(resp[1].req.name, "g/1");
    for (int i = 0; i < n; i++)
        ring__response_clear(&resp[i]);
    free(resp);
    ring__psets_free(&p);
}
END_TEST

START_TEST(match_reports_errors_as_responses)
{
    struct ring__process_sets p = world(2);
    struct ring__request r0[1] = {req("w", 0, RING_FLOAT32, 4)};
    struct ring__request r1[1] = {req("w", 0, RING_INT32, 4)};
    struct ring__request *reqs[2] = {r0, r1};
    int nreqs[2] = {1, 1};
    unsigned char joined[2] = {0};
    struct ring__response *resp;
    int n = match(2, reqs, nreqs, joined, &p, &resp);

    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(resp[0].error, RING_EMISMATCH);
    ck_assert_str_eq(resp[0].message, "allreduce 'w': rank 0 sent float32, rank 1 sent int32");
    ring__response_clear(&resp[0]);
    free(resp);
    ring__psets_free(&p);
}
END_TEST

/*
 * Found by fuzzing (tests/fuzz/corpus/message/group_size_on_a_plain_name): ranks that
 * disagree on the group of a tensor whose name is no member name ("j", not "j/0") made the
 * coordinator emit nothing for it and then read the response before the first.
 */
START_TEST(match_group_disagreement_on_a_plain_name)
{
    struct ring__process_sets p = world(3);
    struct ring__request r0[1] = {req("j", 0, RING_FLOAT32, 16)};
    struct ring__request r2[1] = {req("j", 0, RING_FLOAT32, 16)};
    struct ring__request *reqs[3] = {r0, NULL, r2};
    int nreqs[3] = {1, 0, 1};
    unsigned char joined[3] = {0, 1, 0};
    struct ring__response *resp;
    int n;

    r0[0].group_size = 64;
    r2[0].group_size = 0;
    n = match(3, reqs, nreqs, joined, &p, &resp);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(resp[0].req.name, "j");
    ck_assert_int_ne(resp[0].error, 0);
    ck_assert_ptr_nonnull(resp[0].message);
    ring__response_clear(&resp[0]);
    free(resp);
    ring__psets_free(&p);
}
END_TEST

/* A name that is not among its own group's members ("x/5" in a group of 2) fails, instead
 * of never being answered; the group it names, complete and agreed, runs. */
START_TEST(match_misnamed_group_member)
{
    struct ring__process_sets p = world(2);
    struct ring__request m[3] = {req("x/5", 0, RING_FLOAT32, 4), req("x/0", 0, RING_FLOAT32, 4),
                                 req("x/1", 0, RING_FLOAT32, 4)};
    struct ring__request *reqs[2] = {m, m};
    int nreqs[2] = {3, 3};
    unsigned char joined[2] = {0};
    struct ring__response *resp;
    int n;

    for (int i = 0; i < 3; i++)
        m[i].group_size = 2;
    n = match(2, reqs, nreqs, joined, &p, &resp);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(resp[0].req.name, "x/0"); /* the group of x/5's first, as it names it */
    ck_assert_str_eq(resp[1].req.name, "x/1");
    ck_assert_str_eq(resp[2].req.name, "x/5");
    ck_assert_int_eq(resp[2].error, RING_EPROTO);
    ck_assert_str_eq(resp[2].message, "allreduce 'x/5': not a member name of a group of 2");
    ck_assert_int_eq(resp[0].error, 0);
    ck_assert_int_eq(resp[1].error, 0);
    for (int i = 0; i < n; i++)
        ring__response_clear(&resp[i]);
    free(resp);
    ring__psets_free(&p);
}
END_TEST

START_TEST(fusion_batches)
{
    struct ring__response r[6];
    int starts[7];
    memset(r, 0, sizeof(r));
    r[0].req = req("a", RING__ALLREDUCE, RING_FLOAT32, 100);
    r[1].req = req("b", RING__ALLREDUCE, RING_FLOAT32, 100);
    r[2].req = req("c", RING__ALLREDUCE, RING_FLOAT64, 100); /* another dtype */
    r[3].req = req("d", RING__BROADCAST, RING_FLOAT64, 100); /* not an allreduce */
    r[4].req = req("e", RING__ALLREDUCE, RING_FLOAT64, 100);
    r[5].req = req("f", RING__ALLREDUCE, RING_FLOAT64, 100);
    ck_assert_int_eq(ring__fusion_plan(r, 6, 1 << 20, starts), 4);
    ck_assert_int_eq(starts[0], 0);
    ck_assert_int_eq(starts[1], 2);
    ck_assert_int_eq(starts[2], 3);
    ck_assert_int_eq(starts[3], 4);
    /* 800 bytes fit, 1600 do not */
    ck_assert_int_eq(ring__fusion_plan(r + 4, 2, 1000, starts), 2);
    ck_assert_int_eq(ring__fusion_plan(r + 4, 2, 1600, starts), 1);
    /* threshold 0 disables fusion */
    ck_assert_int_eq(ring__fusion_plan(r, 2, 0, starts), 2);
    /* an error response never fuses */
    r[1].error = RING_EMISMATCH;
    ck_assert_int_eq(ring__fusion_plan(r, 2, 1 << 20, starts), 2);
}
END_TEST

START_TEST(cache_lookup_put_and_lru)
{
    struct ring__cache c;
    struct ring__request a = req("a", 0, RING_FLOAT32, 4), b = req("b", 0, RING_FLOAT32, 4);
    struct ring__request x = req("x", 0, RING_FLOAT32, 4), a2 = a;
    int ba, bb, bx;

    ck_assert_int_eq(ring__cache_init(&c, 2), 0);
    ck_assert_int_eq(ring__cache_lookup(&c, &a), -1);
    ba = ring__cache_put(&c, &a);
    bb = ring__cache_put(&c, &b);
    ck_assert_int_ne(ba, bb);
    ck_assert_int_eq(ring__cache_lookup(&c, &a), ba);
    a2.count = 5; /* same name, other parameters: a miss */
    ck_assert_int_eq(ring__cache_lookup(&c, &a2), -1);
    ring__cache_touch(&c, ba); /* b is now the least recently used */
    bx = ring__cache_put(&c, &x);
    ck_assert_int_eq(bx, bb);
    ck_assert_int_eq(ring__cache_lookup(&c, &b), -1);
    ck_assert_int_eq(ring__cache_lookup(&c, &x), bx);
    ring__cache_erase(&c, "a");
    ck_assert_int_eq(ring__cache_lookup(&c, &a), -1);
    {
        struct ring__request v = req("v", RING__ALLGATHERV, RING_FLOAT32, 4);
        ck_assert_int_eq(ring__cache_put(&c, &v), -1); /* sizes vary: never cached */
    }
    ring__cache_free(&c);
    ck_assert_int_eq(ring__cache_init(&c, 0), 0);
    ck_assert_int_eq(ring__cache_put(&c, &a), -1);
    ring__cache_free(&c);
}
END_TEST

START_TEST(wire_format_round_trip)
{
    uint64_t counts[3] = {1, 2, 3};
    struct ring__response in = {0}, out;
    struct ring__buf b = {0};
    struct ring__reader rd;

    in.req = req("layer/weights", RING__ALLGATHERV, RING_BFLOAT16, 77);
    in.req.counts = counts;
    in.req.ncounts = 3;
    in.req.prescale = 0.25;
    in.req.root = -1;
    in.req.shape = 0xfedcba9876543210ull;
    in.error = RING_EMISMATCH;
    in.message = "ranks disagree";
    ring__put_response(&b, &in);
    rd = (struct ring__reader){b.data, b.data + b.len, 0};
    ck_assert_int_eq(ring__get_response(&rd, &out), 0);
    ck_assert(ring__request_same(&in.req, &out.req));
    ck_assert_int_eq(out.error, RING_EMISMATCH);
    ck_assert_str_eq(out.message, "ranks disagree");
    ring__response_clear(&out);
    /* Every truncation is refused, never read past. */
    for (size_t cut = 0; cut < b.len; cut++) {
        rd = (struct ring__reader){b.data, b.data + cut, 0};
        ck_assert_int_eq(ring__get_response(&rd, &out), RING_EPROTO);
    }
    ring__buf_free(&b);
}
END_TEST

/*
 * Found by fuzzing (tests/fuzz/corpus/message/group_size_of_a_billion): a request claiming
 * a group of 1072693248 tensors kept the coordinator looping over the group's member
 * names for minutes. A group size above RING__GROUP_MAX is refused when read.
 */
START_TEST(wire_format_refuses_absurd_group_sizes)
{
    static const uint64_t sizes[] = {RING__GROUP_MAX + 1, 1072693248, UINT32_MAX + 2ULL,
                                     UINT64_MAX};
    struct ring__request in = req("g/0", RING__ALLREDUCE, RING_FLOAT32, 4), out;
    struct ring__buf b = {0};
    struct ring__reader rd;

    in.group_size = RING__GROUP_MAX;
    ring__put_request(&b, &in);
    rd = (struct ring__reader){b.data, b.data + b.len, 0};
    ck_assert_int_eq(ring__get_request(&rd, &out), 0);
    ck_assert_int_eq(out.group_size, RING__GROUP_MAX);
    ring__request_clear(&out);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        /* after the name (its length, then its bytes) six numbers precede the group size */
        size_t at = 8 + strlen(in.name) + 6 * 8;
        for (int k = 0; k < 8; k++)
            b.data[at + k] = (char)(sizes[i] >> (8 * k));
        rd = (struct ring__reader){b.data, b.data + b.len, 0};
        ck_assert_int_eq(ring__get_request(&rd, &out), RING_EPROTO);
    }
    ring__buf_free(&b);
}
END_TEST

/* A grouped allreduce sent whole (engine.h: ring__request_packed): "g/0" with its members'
 * counts. */
static struct ring__request packed(uint64_t *counts, int n)
{
    struct ring__request r = req("g/0", RING__ALLREDUCE, RING_FLOAT32, 0);
    r.group_size = n;
    r.counts = counts;
    r.ncounts = (uint32_t)n;
    for (int i = 0; i < n; i++)
        r.count += counts[i];
    return r;
}

START_TEST(packed_group_validation_and_matching)
{
    uint64_t c0[3] = {1, 2, 3}, c1[3] = {1, 5, 3}, c2[3] = {1, 2, 3};
    struct ring__request a = packed(c0, 3), b = packed(c1, 3), same = packed(c2, 3);
    struct ring__request single = req("g/0", RING__ALLREDUCE, RING_FLOAT32, 6);
    struct ring__process_sets p = world(2);
    struct ring__request *reqs[2] = {&a, &same};
    int nreqs[2] = {1, 1};
    unsigned char joined[2] = {0};
    struct ring__response *resp;
    char msg[512];

    ck_assert_int_eq(validate2(&a, &same, msg), 0);
    ck_assert_int_eq(validate2(&a, &b, msg), RING_EMISMATCH);
    ck_assert_str_eq(msg, "allreduce 'g/1': rank 0 sent 2 elements, rank 1 sent 5 (member 1 of a "
                          "group of 3)");
    /* The same total as one tensor: the group is what differs. */
    ck_assert_int_eq(validate2(&a, &single, msg), RING_EMISMATCH);
    ck_assert_str_eq(msg, "allreduce 'g/0': rank 0 put it in a group of 3, rank 1 of 1");
    /* A member of a group sent member by member (a GPU group's way) with the same total. */
    single.group_size = 3;
    ck_assert_int_eq(validate2(&a, &single, msg), RING_EMISMATCH);
    ck_assert_str_eq(msg, "allreduce 'g/0': rank 0 sent its group whole, rank 1 member by member");
    /* Ready as one tensor: no other member names are waited for. */
    ck_assert_int_eq(match(2, reqs, nreqs, joined, &p, &resp), 1);
    ck_assert_int_eq(resp[0].error, 0);
    ck_assert_int_eq(resp[0].req.ncounts, 3);
    ck_assert_int_eq(resp[0].req.count, 6);
    ring__response_clear(&resp[0]);
    free(resp);
    /* A mismatch is one error response, for the group. */
    reqs[1] = &b;
    ck_assert_int_eq(match(2, reqs, nreqs, joined, &p, &resp), 1);
    ck_assert_int_eq(resp[0].error, RING_EMISMATCH);
    ring__response_clear(&resp[0]);
    free(resp);
    ring__psets_free(&p);
}
END_TEST

START_TEST(packed_group_cache_and_wire)
{
    uint64_t c0[3] = {1, 2, 3}, c1[3] = {1, 5, 3};
    struct ring__request a = packed(c0, 3), b = packed(c1, 3), out;
    struct ring__cache c;
    struct ring__buf buf = {0};
    struct ring__reader rd;
    int bit;

    ck_assert_int_eq(ring__cache_init(&c, 4), 0);
    bit = ring__cache_put(&c, &a);
    ck_assert_int_ge(bit, 0);
    ck_assert_int_eq(ring__cache_lookup(&c, &a), bit);
    ck_assert_int_eq(ring__cache_lookup(&c, &b), -1); /* other counts: a miss */
    ring__cache_free(&c);

    ring__put_request(&buf, &a);
    rd = (struct ring__reader){buf.data, buf.data + buf.len, 0};
    ck_assert_int_eq(ring__get_request(&rd, &out), 0);
    ck_assert(ring__request_same(&a, &out));
    ring__request_clear(&out);
    ring__buf_free(&buf);
    /* Counts that do not add up to the count, or not one per member: malformed. */
    a.count = 7;
    ring__put_request(&buf, &a);
    rd = (struct ring__reader){buf.data, buf.data + buf.len, 0};
    ck_assert_int_eq(ring__get_request(&rd, &out), RING_EPROTO);
    ring__buf_free(&buf);
    a.count = 6;
    a.group_size = 4;
    ring__put_request(&buf, &a);
    rd = (struct ring__reader){buf.data, buf.data + buf.len, 0};
    ck_assert_int_eq(ring__get_request(&rd, &out), RING_EPROTO);
    ring__buf_free(&buf);
}
END_TEST

START_TEST(strmap_basics)
{
    struct ring__strmap m = {0};
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        ck_assert_int_eq(ring__strmap_put(&m, key, (void *)(intptr_t)(i + 1)), 0);
    }
    ck_assert_uint_eq(m.count, 1000);
    ck_assert_ptr_eq(ring__strmap_get(&m, "k500"), (void *)(intptr_t)501);
    ck_assert_ptr_eq(ring__strmap_del(&m, "k500"), (void *)(intptr_t)501);
    ck_assert_ptr_null(ring__strmap_get(&m, "k500"));
    ck_assert_ptr_null(ring__strmap_get(&m, "nope"));
    ck_assert_uint_eq(m.count, 999);
    ring__strmap_free(&m);
}
END_TEST

/* With the hash given: an add does not replace a present key, and says it was there. */
START_TEST(strmap_hashed_add_keeps_present_key)
{
    struct ring__strmap m = {0};
    size_t h = ring__strmap_hash("grad/7");
    ck_assert_int_eq(ring__strmap_add_h(&m, "grad/7", h, (void *)(intptr_t)1), 0);
    ck_assert_int_eq(ring__strmap_add_h(&m, "grad/7", h, (void *)(intptr_t)2), 1);
    ck_assert_ptr_eq(ring__strmap_get(&m, "grad/7"), (void *)(intptr_t)1);
    ck_assert_ptr_eq(ring__strmap_get_h(&m, "grad/7", h), (void *)(intptr_t)1);
    ck_assert_uint_eq(m.count, 1);
    ck_assert_ptr_eq(ring__strmap_del_h(&m, "grad/7", h), (void *)(intptr_t)1);
    ck_assert_ptr_null(ring__strmap_get_h(&m, "grad/7", h));
    ck_assert_int_eq(ring__strmap_add_h(&m, "grad/7", h, (void *)(intptr_t)3), 0);
    ck_assert_ptr_eq(ring__strmap_get(&m, "grad/7"), (void *)(intptr_t)3);
    ring__strmap_free(&m);
}
END_TEST

/* Deleted nodes are reused by later puts: keys of every length still come back intact. */
START_TEST(strmap_reuses_deleted_nodes)
{
    struct ring__strmap m = {0};
    char key[RING__NAME_MAX + 1];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 100; i++) {
            /* short keys, then keys longer than any node freed before them */
            int len = round == 1 ? 200 + i % 50 : 1 + i % 20;
            memset(key, 'a' + i % 26, (size_t)len);
            snprintf(key + len, sizeof(key) - (size_t)len, "%d", i);
            ck_assert_int_eq(ring__strmap_put(&m, key, (void *)(intptr_t)(i + 1)), 0);
        }
        ck_assert_uint_eq(m.count, 100);
        for (int i = 0; i < 100; i++) {
            int len = round == 1 ? 200 + i % 50 : 1 + i % 20;
            memset(key, 'a' + i % 26, (size_t)len);
            snprintf(key + len, sizeof(key) - (size_t)len, "%d", i);
            ck_assert_ptr_eq(ring__strmap_get(&m, key), (void *)(intptr_t)(i + 1));
            ck_assert_ptr_eq(ring__strmap_del(&m, key), (void *)(intptr_t)(i + 1));
            ck_assert_ptr_null(ring__strmap_get(&m, key));
        }
        ck_assert_uint_eq(m.count, 0);
    }
    ring__strmap_free(&m);
}
END_TEST

START_TEST(process_set_registry)
{
    struct ring__process_sets p = world(4);
    int ok[3] = {3, 1, 2}, dup[2] = {1, 1}, out[2] = {0, 4};
    ck_assert_int_eq(ring__psets_add(&p, ok, 3, 4, 2), 1);
    ck_assert_int_eq(ring__psets_get(&p, 1)->members[0], 1); /* sorted */
    ck_assert_int_eq(ring__psets_get(&p, 1)->my_rank, 1);
    ck_assert_int_eq(ring__psets_add(&p, dup, 2, 4, 2), RING_EINVAL);
    ck_assert_int_eq(ring__psets_add(&p, out, 2, 4, 2), RING_EINVAL);
    ck_assert_int_eq(ring__psets_add(&p, ok, 0, 4, 2), RING_EINVAL);
    ck_assert_ptr_null(ring__psets_get(&p, 7));
    /* removal: the id stays taken, and the world cannot go */
    ck_assert_int_eq(ring__psets_remove(&p, 1), 0);
    ck_assert_ptr_null(ring__psets_get(&p, 1));
    ck_assert_int_eq(ring__psets_remove(&p, 1), RING_EINVAL);
    ck_assert_int_eq(ring__psets_remove(&p, 0), RING_EINVAL);
    ck_assert_int_eq(ring__psets_add(&p, ok, 3, 4, 2), 2);
    ring__psets_free(&p);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        validate_every_mismatch_kind,
        validate_variable_sized_ops,
        validate_ops_with_joined_ranks,
        match_needs_every_rank_and_keeps_order,
        match_groups_and_process_sets,
        match_reports_errors_as_responses,
        match_group_disagreement_on_a_plain_name,
        match_misnamed_group_member,
        fusion_batches,
        cache_lookup_put_and_lru,
        wire_format_round_trip,
        wire_format_refuses_absurd_group_sizes,
        packed_group_validation_and_matching,
        packed_group_cache_and_wire,
        strmap_basics,
        strmap_reuses_deleted_nodes,
        strmap_hashed_add_keeps_present_key,
        process_set_registry,
        NULL,
    };
    return unit_main("engine", tests, 30);
}
