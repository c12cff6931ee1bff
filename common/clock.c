/* SPDX-License-Identifier: Apache-2.0 */
/* clock.c - the clocks every program reads (clock.h). */
#include <stdio.h>

#include "clock.h"

double clock_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int64_t clock_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double clock_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct timespec clock_deadline(clockid_t id, double delay_s)
{
    struct timespec t;
    long long ns;
    if (!(delay_s > 0)) /* and NaN */
        delay_s = 0;
    clock_gettime(id, &t);
    ns = t.tv_nsec + (long long)((delay_s - (double)(long long)delay_s) * 1e9);
    t.tv_sec += (time_t)delay_s + (time_t)(ns / 1000000000LL);
    t.tv_nsec = (long)(ns % 1000000000LL);
    return t;
}

void clock_rfc3339(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    char date[32];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%.20s.%03dZ", date, (int)(ts.tv_nsec / 1000000) % 1000);
}
