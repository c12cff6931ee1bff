/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - the clocks every program reads, in one place.
 *
 * Two clocks, for two questions: how long something took or until when to wait
 * (CLOCK_MONOTONIC, which no clock adjustment moves), and what time it is (CLOCK_REALTIME:
 * timestamps that are stored, compared with the store's, or shown). A condition variable
 * waits on CLOCK_REALTIME unless it was created for CLOCK_MONOTONIC: clock_deadline takes
 * the clock to match.
 */
#ifndef RING_COMMON_CLOCK_H
#define RING_COMMON_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC, in seconds and in milliseconds: for durations and timeouts. */
double clock_mono_s(void);
int64_t clock_mono_ms(void);
/* CLOCK_REALTIME in seconds since the epoch: for times that are stored or compared with
 * stored ones. */
double clock_wall_s(void);
/* The absolute time delay_s (>= 0) from now on clock id, for pthread_cond_timedwait and
 * the like. */
struct timespec clock_deadline(clockid_t id, double delay_s);
/* Writes the time now as RFC 3339 in UTC with milliseconds ("2025-06-01T10:00:00.123Z",
 * 24 characters) to buf (len >= CLOCK_RFC3339_LEN: shorter buffers get a cut string).
 * Thread-safe. */
#define CLOCK_RFC3339_LEN 25
void clock_rfc3339(char *buf, size_t len);

#endif /* RING_COMMON_CLOCK_H */
