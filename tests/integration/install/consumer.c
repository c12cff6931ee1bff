/* SPDX-License-Identifier: Apache-2.0 */
/*
 * consumer.c - a program built against an installed libring (install.sh): through
 * pkg-config's ring.pc, through CMake's find_package(Ring), and as a job of an installed
 * ringd. One allreduce over whatever ranks it is started as (one, alone); prints
 * "consumer: ok" and exits 0 when the sum is right.
 */
#include <stdio.h>

#include <ring.h>

int main(void)
{
    float in[3] = {1, 2, 3}, out[3];
    int rc, size;

    if ((rc = ring_init()) != 0) {
        fprintf(stderr, "consumer: ring_init: %s\n", ring_strerror(rc));
        return 1;
    }
    size = ring_size();
    rc = ring_allreduce(in, out, 3, RING_FLOAT32, RING_SUM);
    if (rc != 0) {
        fprintf(stderr, "consumer: ring_allreduce: %s\n", ring_strerror(rc));
        ring_finalize();
        return 1;
    }
    for (int i = 0; i < 3; i++) {
        if (out[i] != in[i] * (float)size) {
            fprintf(stderr, "consumer: element %d is %g, want %g\n", i, out[i], in[i] * size);
            ring_finalize();
            return 1;
        }
    }
    if ((rc = ring_finalize()) != 0) {
        fprintf(stderr, "consumer: ring_finalize: %s\n", ring_strerror(rc));
        return 1;
    }
    printf("consumer: ok (libring %s, %d rank%s)\n", ring_version(), size, size == 1 ? "" : "s");
    return 0;
}
