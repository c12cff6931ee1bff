/* SPDX-License-Identifier: Apache-2.0 */
/*
 * attempts.h - the scheduler loop's attempts on the backend (attempts.c), as the pass
 * (pass.c) calls them. Internal to scheduler/core/: the calls go pass -> attempts -> table
 * (loop_impl.h), never back.
 */
#ifndef RINGD_ATTEMPTS_H
#define RINGD_ATTEMPTS_H

#include "loop_impl.h"

/*
 * Starts attempt attempts+1 of j at p. journaled: its STARTING is already in the journal
 * (a pass's batch); else it is written here first. Returns 0 when it runs; -1 when it did
 * not start: it waits for the next pass (its place was taken), is queued again after a
 * backoff, or is FAILED and dropped (then j is freed).
 */
int loop__start(struct loop *l, struct loop_job *j, const struct placement *p, const char *reason,
                int journaled);
/* Starts the reservations that fit now, oldest job first. Returns how many it started. */
int loop__start_reserved(struct loop *l);
/* Asks j's attempt to stop, for why (SIGTERM; SIGKILL at the kill deadline). The journal
 * has it already. */
void loop__ask_stop(struct loop *l, struct loop_job *j, enum loop_stop why);
/* Reads the backend's events (exits, progress) and applies them. Returns how many. */
int loop__read_events(struct loop *l);
/* SIGKILL to the attempts whose stop is past its grace period. */
void loop__enforce_kills(struct loop *l, double now);

#endif /* RINGD_ATTEMPTS_H */
