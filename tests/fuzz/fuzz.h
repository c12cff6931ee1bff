/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz.h - what every harness shares. A harness defines LLVMFuzzerTestOneInput; it runs
 * under libFuzzer (make fuzz) and under replay.c, which feeds it the committed corpus as a
 * ctest regression test in every ordinary build.
 */
#ifndef RING_FUZZ_H
#define RING_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * A property the code under test promises on every input. A violation aborts, which
 * libFuzzer reports as a crash (and saves the input), and which fails the replay test.
 */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: property does not hold: %s\n", __FILE__, __LINE__, #cond);     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif /* RING_FUZZ_H */
