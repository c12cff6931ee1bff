/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ride_check - steps of many small cached tensors, whose data may ride in the engine's
 * control round (control.c, engine_cycle.c): results must be right whether they ride or
 * not, for mixed dtypes, ops and scales, in a different order on every rank, with steps
 * whose tensors do not fit in one round, with ranks that hold different sets of tensors
 * when a cycle starts, and with a mismatch in a cached step, which must fail on every rank
 * for that tensor alone while the rest of the step completes; and a large batch while a
 * rank has joined. Each step also has a grouped allreduce, cached as one entry (its
 * members' counts in it), which rides like a single tensor; a changed count in one member
 * fails the whole group on every rank.
 *
 *   ringrun -np N ride_check [small-cache]
 *
 * small-cache: run with a cache too small for a step (RING_CACHE_CAPACITY=8): the other
 * tensors evict the group's entry, and the group must still run whole and right, through
 * the coordinator. Then steps are negotiated, which is not checked against.
 *
 * How many tensors rode is printed, not checked: it depends on how the ranks' cycles meet.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ring.h"

static int rank, size;

#include "rank_check.h"

enum { NT = 40, STEPS = 24, BIG = 20000, NG = 6 };

struct tensor {
    char name[32];
    ring_dtype_t dtype;
    ring_op_t op;
    double pre, post;
    size_t count;
    union {
        float f[3];
        double d[3];
        int32_t i[3];
    } v;
    ring_handle_t *h;
};

static struct tensor t[NT];
static float big[BIG];
/* Tensor k's kind: mostly float32 (average, sum with scales), some float64 and int32. */
static void describe(int k)
{
    struct tensor *x = &t[k];
    snprintf(x->name, sizeof(x->name), "ride/%d", k);
    x->count = 1 + (size_t)(k % 3);
    x->pre = x->post = 1.0;
    if (k % 8 == 5) {
        x->dtype = RING_FLOAT64;
        x->op = RING_SUM;
    } else if (k % 8 == 7) {
        x->dtype = RING_INT32;
        x->op = RING_MAX;
    } else if (k % 4 == 1) {
        x->dtype = RING_FLOAT32;
        x->op = RING_SUM;
        x->pre = 2.0;
        x->post = 0.25;
    } else {
        x->dtype = RING_FLOAT32;
        x->op = RING_AVERAGE;
    }
}

/* This rank's input for element e of tensor k at step s. */
static double input(int r, int k, int e, int s)
{
    return (double)(r + 1) * (k + 1) + e + s;
}

static void fill(int k, int s)
{
    struct tensor *x = &t[k];
    for (size_t e = 0; e < x->count; e++) {
        double v = input(rank, k, (int)e, s);
        if (x->dtype == RING_FLOAT32)
            x->v.f[e] = (float)v;
        else if (x->dtype == RING_FLOAT64)
            x->v.d[e] = v;
        else
            x->v.i[e] = (int32_t)v;
    }
}

static void check(int k, int s)
{
    struct tensor *x = &t[k];
    for (size_t e = 0; e < x->count; e++) {
        double want = 0, got;
        for (int r = 0; r < size; r++) {
            double v = input(r, k, (int)e, s);
            want = x->op == RING_MAX ? (r == 0 || v > want ? v : want) : want + v * x->pre;
        }
        if (x->op == RING_AVERAGE)
            want /= size;
        if (x->op != RING_MAX)
            want *= x->post;
        got = x->dtype == RING_FLOAT32   ? x->v.f[e]
              : x->dtype == RING_FLOAT64 ? x->v.d[e]
                                         : x->v.i[e];
        CHECK(fabs(got - want) <= 1e-5 * fabs(want), "step %d: %s[%zu] is %g, not %g", s, x->name,
              e, got, want);
    }
}

/* The group: member m has 1 + m % 3 float32 elements, summed. */
static float gv[NG][3];
static ring_handle_t *gh;

static size_t gcount(int m)
{
    return 1 + (size_t)(m % 3);
}

/* Submits the group; with bad, member 2 has one element more on the last rank. */
static int submit_group(int bad)
{
    const void *sb[NG];
    void *rb[NG];
    size_t n[NG];
    for (int m = 0; m < NG; m++) {
        sb[m] = RING_IN_PLACE;
        rb[m] = gv[m];
        n[m] = gcount(m) + (bad && m == 2 && rank == size - 1 ? 1 : 0);
    }
    return ring_grouped_allreduce_async("rgroup", NG, sb, rb, n, RING_FLOAT32, RING_SUM,
                                        RING_GLOBAL, &gh);
}

static void fill_group(int s)
{
    for (int m = 0; m < NG; m++)
        for (size_t e = 0; e < gcount(m); e++)
            gv[m][e] = (float)input(rank, 100 + m, (int)e, s);
}

static void check_group(int s)
{
    for (int m = 0; m < NG; m++) {
        for (size_t e = 0; e < gcount(m); e++) {
            double want = 0;
            for (int r = 0; r < size; r++)
                want += input(r, 100 + m, (int)e, s);
            CHECK(fabs(gv[m][e] - want) <= 1e-5 * want, "step %d: rgroup/%d[%zu] is %g, not %g", s,
                  m, e, gv[m][e], want);
        }
    }
}

static int submit(int k, size_t count)
{
    struct tensor *x = &t[k];
    return ring_allreduce_async(x->name, RING_IN_PLACE, &x->v, count, x->dtype, x->op, x->pre,
                                x->post, RING_GLOBAL, &x->h);
}

/*
 * One step: every rank submits the NT tensors, starting at a different one; on steps where
 * with_big, one more tensor too large to ride along; with late (>= 0), rank 0 submits that
 * tensor only after it waited for another, so the ranks' sets differ when cycles start.
 */
static void step(int s, int with_big, int late)
{
    ring_handle_t *hb = NULL;
    for (int k = 0; k < NT; k++)
        fill(k, s);
    fill_group(s);
    for (int j = 0; j < NT; j++) {
        int k = (j + rank * 7) % NT;
        if (k != late || rank != 0)
            OK(submit(k, t[k].count), t[k].name);
        if (j == (rank * 13) % NT) /* the group somewhere else on every rank */
            OK(submit_group(0), "rgroup");
    }
    if (with_big) {
        for (int i = 0; i < BIG; i++)
            big[i] = 1.0f;
        OK(ring_allreduce_async("ride/big", RING_IN_PLACE, big, BIG, RING_FLOAT32, RING_SUM, 1, 1,
                                RING_GLOBAL, &hb),
           "ride/big");
    }
    if (late >= 0 && rank == 0) {
        int first = (late + 1) % NT;
        OK(ring_wait(t[first].h), "the first wait");
        t[first].h = NULL;
        OK(submit(late, t[late].count), "the late tensor");
    }
    for (int k = 0; k < NT; k++) {
        if (t[k].h != NULL)
            OK(ring_wait(t[k].h), t[k].name);
        t[k].h = NULL;
    }
    if (hb != NULL) {
        OK(ring_wait(hb), "ride/big");
        CHECK(big[0] == (float)size && big[BIG - 1] == (float)size, "big %g", big[0]);
    }
    OK(ring_wait(gh), "rgroup");
    for (int k = 0; k < NT; k++)
        check(k, s);
    check_group(s);
}

int main(int argc, char **argv)
{
    struct ring_engine_stats s0, s1;
    int rc, bad = 3, small = argc > 1 && strcmp(argv[1], "small-cache") == 0;

    if ((rc = ring_init()) != 0) {
        fprintf(stderr, "ring_init: %s (%s)\n", ring_strerror(rc), ring_last_error());
        return 1;
    }
    rank = ring_rank();
    size = ring_size();
    for (int k = 0; k < NT; k++)
        describe(k);
    step(-1, 1, -1); /* negotiated: fills the cache */
    OK(ring_engine_stats(&s0), "stats");
    for (int s = 0; s < STEPS; s++)
        step(s, s % 6 == 5, s % 6 == 2 ? 11 : -1);
    OK(ring_engine_stats(&s1), "stats");
    printf("rank %d: %llu of %d cached tensors done in the control round\n", rank,
           (unsigned long long)(s1.fast_path - s0.fast_path), STEPS * (NT + NG));
    CHECK(small || s1.coordinator_names == s0.coordinator_names, "cached steps were negotiated");

    /* A count mismatch in a cached step: the last rank's tensor no longer matches its cache
     * entry. Every rank gets the usual error for it, and the rest of the step is right. */
    for (int k = 0; k < NT; k++)
        fill(k, 100);
    for (int k = 0; k < NT; k++)
        OK(submit(k, k == bad && rank == size - 1 ? t[k].count + 1 : t[k].count), t[k].name);
    OK(submit_group(1), "rgroup");
    rc = ring_wait(gh);
    CHECK(rc == RING_EMISMATCH && strstr(ring_last_error(), "rgroup/"),
          "the group's mismatch gave %s: %s", ring_err_name(rc), ring_last_error());
    printf("rank %d: group mismatch: RING_EMISMATCH: %s\n", rank, ring_last_error());
    for (int k = 0; k < NT; k++) {
        rc = ring_wait(t[k].h);
        if (k == bad) {
            CHECK(rc == RING_EMISMATCH && strstr(ring_last_error(), "ride/3"),
                  "the mismatch gave %s: %s", ring_err_name(rc), ring_last_error());
            printf("rank %d: mismatch: RING_EMISMATCH: %s\n", rank, ring_last_error());
        } else {
            OK(rc, t[k].name);
            check(k, 100);
        }
    }
    step(101, 0, -1); /* and the engine goes on */

    /* Rank 0 joins while the others run steps of two large tensors (a batch run tensor by
     * tensor: engine_exec.c): it contributes neutral elements to each, in the same calls. */
    if (rank == 0) {
        rc = ring_join();
    } else {
        static float l1[BIG], l2[BIG];
        for (int s = 0; s < 2; s++) {
            ring_handle_t *h1, *h2;
            for (int i = 0; i < BIG; i++) {
                l1[i] = (float)rank;
                l2[i] = 1.0f;
            }
            OK(ring_allreduce_async("join/a", RING_IN_PLACE, l1, BIG, RING_FLOAT32, RING_SUM, 1, 1,
                                    RING_GLOBAL, &h1),
               "join/a");
            OK(ring_allreduce_async("join/b", RING_IN_PLACE, l2, BIG, RING_FLOAT32, RING_AVERAGE, 1,
                                    1, RING_GLOBAL, &h2),
               "join/b");
            OK(ring_wait(h1), "join/a");
            OK(ring_wait(h2), "join/b");
            CHECK(l1[0] == (float)(size * (size - 1) / 2) && l1[BIG - 1] == l1[0],
                  "joined step %d: sum %g", s, l1[0]);
            CHECK(l2[0] == 1.0f && l2[BIG - 1] == 1.0f, "joined step %d: average %g", s, l2[0]);
        }
        rc = ring_join();
    }
    /* Rank 0 joined first; which of the others joined last is a race (TSan once made it
     * rank 1 of 3): every rank must name the same one of them. */
    CHECK(rc >= 1 && rc < size, "ring_join returned %d (%s)", rc, ring_last_error());
    {
        int32_t lo = rc, hi = rc;
        OK(ring_allreduce(RING_IN_PLACE, &lo, 1, RING_INT32, RING_MIN), "join min");
        OK(ring_allreduce(RING_IN_PLACE, &hi, 1, RING_INT32, RING_MAX), "join max");
        CHECK(lo == hi, "the ranks disagree on the last to join: %d to %d", (int)lo, (int)hi);
    }
    OK(ring_barrier(), "final barrier");
    if (rank == 0)
        printf("ride_check: ok\n");
    fflush(stdout);
    ring_finalize();
    return 0;
}
