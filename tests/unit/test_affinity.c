/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_affinity.c - RING_BIND (affinity.c): which CPU each local rank gets, when auto
 * leaves the mask alone, and that ring_init binds and ring_finalize gives the mask back.
 */
#include <check.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"
#include "unit.h"

static cpu_set_t cpus(const int *list, int n)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    for (int i = 0; i < n; i++)
        CPU_SET(list[i], &s);
    return s;
}

START_TEST(each_local_rank_gets_the_next_allowed_cpu)
{
    static const int list[] = {2, 3, 5, 7};
    cpu_set_t s = cpus(list, 4);

    /* RING__BIND_ON: the (local rank mod n)-th allowed CPU, wrapping when oversubscribed. */
    for (int r = 0; r < 9; r++)
        ck_assert_int_eq(ring__bind_choose(&s, 8, r, 9, RING__BIND_ON), list[r % 4]);
    /* off never binds */
    ck_assert_int_eq(ring__bind_choose(&s, 4, 0, 4, RING__BIND_OFF), -1);
}
END_TEST

START_TEST(auto_binds_only_a_crowded_unbound_host)
{
    static const int two[] = {0, 1}, four[] = {0, 1, 2, 3};
    cpu_set_t s2 = cpus(two, 2), s4 = cpus(four, 4);

    /* 2 CPUs, all online: 2 ranks (np 2) and 4 (oversubscribed) and 3 (odd) are crowded */
    ck_assert_int_eq(ring__bind_choose(&s2, 2, 0, 2, RING__BIND_AUTO), 0);
    ck_assert_int_eq(ring__bind_choose(&s2, 2, 1, 2, RING__BIND_AUTO), 1);
    ck_assert_int_eq(ring__bind_choose(&s2, 2, 3, 4, RING__BIND_AUTO), 1);
    ck_assert_int_eq(ring__bind_choose(&s2, 2, 2, 3, RING__BIND_AUTO), 0);
    /* one rank on 2 CPUs, or 2 on 4, has a CPU for the engine thread: left alone */
    ck_assert_int_eq(ring__bind_choose(&s2, 2, 0, 1, RING__BIND_AUTO), -1);
    ck_assert_int_eq(ring__bind_choose(&s4, 4, 1, 2, RING__BIND_AUTO), -1);
    /* 3 ranks on 4 CPUs are crowded */
    ck_assert_int_eq(ring__bind_choose(&s4, 4, 2, 3, RING__BIND_AUTO), 2);
    /* a mask narrower than the online CPUs: a launcher or a cpuset placed the process */
    ck_assert_int_eq(ring__bind_choose(&s2, 4, 0, 2, RING__BIND_AUTO), -1);
    /* ... which an explicit 1 overrides */
    ck_assert_int_eq(ring__bind_choose(&s2, 4, 1, 2, RING__BIND_ON), 1);
}
END_TEST

START_TEST(bad_arguments_bind_nothing)
{
    static const int one[] = {0};
    cpu_set_t s = cpus(one, 1), none;
    CPU_ZERO(&none);
    ck_assert_int_eq(ring__bind_choose(&none, 1, 0, 1, RING__BIND_ON), -1);
    ck_assert_int_eq(ring__bind_choose(&s, 1, -1, 1, RING__BIND_ON), -1);
    ck_assert_int_eq(ring__bind_choose(&s, 1, 0, 0, RING__BIND_ON), -1);
}
END_TEST

/* ring_init in a world of one with RING_BIND=1 holds this thread on its first allowed CPU;
 * ring_finalize gives the old mask back; RING_BIND=0 leaves it alone. */
START_TEST(ring_init_binds_and_finalize_restores)
{
    cpu_set_t before, during, after;
    int first = -1;

    ck_assert_int_eq(sched_getaffinity(0, sizeof(before), &before), 0);
    for (int cpu = 0; cpu < CPU_SETSIZE && first < 0; cpu++)
        first = CPU_ISSET(cpu, &before) ? cpu : -1;
    setenv("RING_BIND", "1", 1);
    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(sched_getaffinity(0, sizeof(during), &during), 0);
    ck_assert_int_eq(CPU_COUNT(&during), 1);
    ck_assert(CPU_ISSET(first, &during));
    ck_assert_int_eq(ring_finalize(), 0);
    ck_assert_int_eq(sched_getaffinity(0, sizeof(after), &after), 0);
    ck_assert(CPU_EQUAL(&before, &after));

    setenv("RING_BIND", "0", 1);
    ck_assert_int_eq(ring_init(), 0);
    ck_assert_int_eq(sched_getaffinity(0, sizeof(during), &during), 0);
    ck_assert(CPU_EQUAL(&before, &during));
    ck_assert_int_eq(ring_finalize(), 0);
    unsetenv("RING_BIND");
}
END_TEST

START_TEST(a_bad_value_fails_ring_init)
{
    setenv("RING_BIND", "core", 1);
    ck_assert_int_eq(ring_init(), RING_EENV);
    ck_assert_msg(strstr(ring_last_error(), "RING_BIND") != NULL, "%s", ring_last_error());
    unsetenv("RING_BIND");
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        each_local_rank_gets_the_next_allowed_cpu,
        auto_binds_only_a_crowded_unbound_host,
        bad_arguments_bind_nothing,
        ring_init_binds_and_finalize_restores,
        a_bad_value_fails_ring_init,
        NULL,
    };
    return unit_main("affinity", tests, 30);
}
