/* SPDX-License-Identifier: Apache-2.0 */
/* unit.h - the shared main() of the Check suites. */
#ifndef RING_TEST_UNIT_H
#define RING_TEST_UNIT_H

#include <check.h>

/*
 * Runs tests[] (NULL-terminated) as suite name, each in its own process (Check's fork
 * mode), with a per-test timeout in seconds; setup and teardown (either may be NULL) run in
 * that process before and after each test. Returns the process exit status: 0 when all
 * passed, 1 otherwise.
 */
static inline int unit_main_fixture(const char *name, const TTest *const *tests, double timeout,
                                    void (*setup)(void), void (*teardown)(void))
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, timeout);
    if (setup != NULL || teardown != NULL)
        tcase_add_checked_fixture(tc, setup, teardown);
    for (; *tests != NULL; tests++)
        tcase_add_test(tc, *tests);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

/* unit_main_fixture without a fixture. */
static inline int unit_main(const char *name, const TTest *const *tests, double timeout)
{
    return unit_main_fixture(name, tests, timeout, NULL, NULL);
}

#endif /* RING_TEST_UNIT_H */
