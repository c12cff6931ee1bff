/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rank_check.h - the failure macros of the programs that run as ranks under ringrun in the
 * integration tests. The including file defines `static int rank` (this rank, for the
 * message). A failed check prints "rank R: FAILED file:line: ..." and exits 1, which the
 * test scripts look for.
 */
#ifndef RING_TESTS_RANK_CHECK_H
#define RING_TESTS_RANK_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "ring.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: FAILED %s:%d: ", rank, __FILE__, __LINE__);                  \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* EXPR returned 0, or fail naming WHAT, the error's name and libring's last message. */
#define OK(expr, what)                                                                             \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        CHECK(rc_ == 0, "%s: %s (%s)", what, ring_err_name(rc_), ring_last_error());               \
    } while (0)

#endif
