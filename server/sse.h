/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sse.h - the streams ringd serves: GET /v1/jobs/{id}/events with Accept: text/event-stream
 * (the job's events as Server-Sent Events, "id: N", "event: <type>", "data: <json>",
 * resuming after Last-Event-ID, until the job has finished) and GET /v1/jobs/{id}/logs?
 * follow=1 (a rank's output as it is written).
 *
 * No thread is held per client: when a stream has nothing to send, its connection is
 * suspended, and one waker thread resumes the suspended ones every SSE_POLL_MS to look for
 * new events. So a thousand idle followers cost a list entry each, not a thread, and a
 * stream holds no buffer of its own between reads: a log is read straight into
 * libmicrohttpd's buffer, whatever its size.
 *
 * A stream outlives the request that checked its token, so it checks the token again: at
 * once when a token is revoked through this server (auth_generation), every AUTH_CACHE_MS
 * for a revocation by other means, and at its expiry. It then ends: an event stream with a
 * last event whose type is the problem ("unauthorized" or "token-expired") and whose data
 * is the problem's JSON, a log with the end of its body. One token may hold at most
 * sse_start's per_token streams at once. GET /v1/events is one event stream of every job a
 * token may see (sse_respond_all), so that a dashboard holds one stream, not one per job.
 */
#ifndef RINGD_SSE_H
#define RINGD_SSE_H

#include <stdint.h>

#include <microhttpd.h>

#include "db/store.h"

struct sse;

/* The media types of the two streams (what the record of responses says they sent). */
#define SSE_EVENTS_TYPE "text/event-stream"
#define SSE_LOG_TYPE    "text/plain; charset=utf-8"

/* Whom a stream serves, as its request's token check found. */
struct sse_auth {
    char header[160]; /* the Authorization value it came with; "" with auth off */
    char token[16];   /* the token's id; "" with auth off (no limit, no checks) */
    int64_t expires;  /* Unix seconds; 0: never */
};

/* Starts the waker; one token may hold per_token streams. Returns NULL when out of
 * memory. */
struct sse *sse_start(int per_token);
/* Ends every stream (they send what they have and close) and stops the waker. Call before
 * MHD_stop_daemon, which needs every connection resumed. Accepts NULL. */
void sse_stop(struct sse *s);
/* Frees after MHD_stop_daemon (streams refer to it until then). Accepts NULL. */
void sse_free(struct sse *s);
/*
 * Takes one of token's stream places ("": auth off, always given) for the stream that
 * sse_respond or sse_follow_log starts next with the same who, which gives it back when it
 * ends (or fails to start). Returns 0, or -1 with errno EUSERS when token holds per_token
 * streams already.
 */
int sse_reserve(struct sse *s, const char *token);
/*
 * Queues a stream for job id (whose ownership the caller checked) after event after, for
 * who (copied; its place reserved). open_store returns this thread's store connection for
 * the reader. Returns MHD_YES/MHD_NO.
 */
enum MHD_Result sse_respond(struct sse *s, struct MHD_Connection *c, const struct sse_auth *who,
                            const char *id, long long after, struct store *(*open_store)(void *arg),
                            void *arg);

/*
 * Queues a stream of the events of every job of scope's (a principal, or STORE_ANYONE for
 * all; the caller checked who may see them) after event after, for who as sse_respond
 * does: GET /v1/events. Its events' data carry their job_id; it opens with "id: <after>"
 * and no data (the position, for Last-Event-ID), and ends only when its client goes, its
 * token stops working or ringd stops.
 */
enum MHD_Result sse_respond_all(struct sse *s, struct MHD_Connection *c, const struct sse_auth *who,
                                int64_t scope, long long after,
                                struct store *(*open_store)(void *arg), void *arg);

/*
 * Queues a log follower (GET /v1/jobs/{id}/logs?follow=1): the rank's stdout or stderr in
 * the latest attempt, from byte offset, as text/plain, for as long as the job runs; a
 * restart continues with the new attempt's log. Same waker, same suspension, same checks.
 */
enum MHD_Result sse_follow_log(struct sse *s, struct MHD_Connection *c, const struct sse_auth *who,
                               const char *id, int rank, const char *stream, long long offset,
                               struct store *(*open_store)(void *arg), void *arg);

#endif /* RINGD_SSE_H */
