/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sse.h - GET /v1/jobs/{id}/events with Accept: text/event-stream: the job's events as
 * Server-Sent Events ("id: N", "event: <type>", "data: <json>"), resuming after
 * Last-Event-ID, until the job has finished.
 *
 * No thread is held per client: when a stream has nothing to send, its connection is
 * suspended, and one waker thread resumes the suspended ones every SSE_POLL_MS to look for
 * new events. So a thousand idle followers cost a list entry each, not a thread.
 */
#ifndef RINGD_SSE_H
#define RINGD_SSE_H

#include <microhttpd.h>

#include "store.h"

struct sse;

/* Starts the waker. Returns NULL when out of memory. */
struct sse *sse_start(void);
/* Ends every stream (they send what they have and close) and stops the waker. Call before
 * MHD_stop_daemon, which needs every connection resumed. Accepts NULL. */
void sse_stop(struct sse *s);
/* Frees after MHD_stop_daemon (streams refer to it until then). Accepts NULL. */
void sse_free(struct sse *s);
/*
 * Queues a stream for job id (whose ownership the caller checked) after event after.
 * open_store returns this thread's store connection for the reader. Returns MHD_YES/MHD_NO.
 */
enum MHD_Result sse_respond(struct sse *s, struct MHD_Connection *c, const char *id,
                            long long after, struct store *(*open_store)(void *arg), void *arg);

/*
 * Queues a log follower (GET /v1/jobs/{id}/logs?follow=1): the rank's stdout or stderr in
 * the latest attempt, from byte offset, as text/plain, for as long as the job runs; a
 * restart continues with the new attempt's log. Same waker, same suspension.
 */
enum MHD_Result sse_follow_log(struct sse *s, struct MHD_Connection *c, const char *id, int rank,
                               const char *stream, long long offset,
                               struct store *(*open_store)(void *arg), void *arg);

#endif /* RINGD_SSE_H */
