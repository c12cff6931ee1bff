/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ticker.h - a thread that does one thing every period until it is stopped: ringd's WAL
 * checkpoints (db/checkpoint.c) and the waker of its suspended event streams (server/sse.c).
 * Stopping wakes it at once rather than after the rest of a period.
 */
#ifndef RING_COMMON_TICKER_H
#define RING_COMMON_TICKER_H

struct ticker;

/*
 * Starts a thread that calls tick(arg) every period_ms (the first time one period from
 * now), each call outside the ticker's lock, until ticker_stop. Returns the ticker, or NULL
 * with errno (ENOMEM, or pthread_create's error).
 */
struct ticker *ticker_start(int period_ms, void (*tick)(void *arg), void *arg);
/* Stops the thread and frees t: once it returns, tick is not running and never runs again.
 * From any thread but t's own. NULL-safe. */
void ticker_stop(struct ticker *t);

#endif /* RING_COMMON_TICKER_H */
