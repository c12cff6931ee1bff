/* SPDX-License-Identifier: Apache-2.0 */
/* clock.c - the monotonic clock that every deadline and timestamp of libring reads. */
#include <time.h>

#include "base/base.h"

int64_t ring__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ring__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
