/* SPDX-License-Identifier: Apache-2.0 */
/* unit.h - the shared main() of the Check suites. */
#ifndef RING_TEST_UNIT_H
#define RING_TEST_UNIT_H

#include <check.h>

/*
 * Runs tests[] (NULL-terminated) as suite name, each in its own process (Check's fork
 * mode), with a per-test timeout in seconds. Returns the process exit status: 0 when all
 * passed, 1 otherwise.
 */
static inline int unit_main(const char *name, const TTest *const *tests, double timeout)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, timeout);
    for (; *tests != NULL; tests++)
        tcase_add_test(tc, *tests);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

#endif /* RING_TEST_UNIT_H */
