/* SPDX-License-Identifier: Apache-2.0 */
/*
 * commit.h - group commit of job submissions.
 *
 * A 201 may only leave once its job is on disk (synchronous=FULL), and an fsync costs
 * milliseconds. So HTTP threads do not commit submissions themselves: they queue the
 * validated submission, suspend the connection and go on serving others. One committer
 * thread takes everything queued, stores it in ONE transaction (one fsync for the lot,
 * store_job_create_batch), then hands each result back through done(), which resumes the
 * connection so that its handler answers. Under load a batch grows by itself: whatever
 * arrives during one commit goes into the next.
 */
#ifndef RINGD_COMMIT_H
#define RINGD_COMMIT_H

#include "db/store.h"

/* A queued submission; the caller embeds it in its per-request state. */
struct commit_item {
    struct store_submission *sub;
    void *arg; /* handed to done() */
    struct commit_item *next;
};

struct committer;

/*
 * Starts the committer on its own connection to db_path. done(arg) is called from the
 * committer thread once item->sub holds its result. Returns NULL with err on failure.
 */
struct committer *committer_start(const char *db_path, void (*done)(void *arg), struct error *err);
/*
 * Queues item. After committer_stop has begun, the item fails at once (EBUSY, "shutting
 * down") and done() is called from this thread before the call returns.
 */
void committer_push(struct committer *c, struct commit_item *item);
/*
 * Stops taking submissions (from now on committer_push answers them at once, as above),
 * commits what is queued, answers it, and joins the thread. The committer stays valid for
 * pushes until committer_free: a server stops its HTTP threads between the two, because
 * they may still be pushing. Accepts NULL.
 */
void committer_close(struct committer *c);
/* Frees a closed committer. Accepts NULL. */
void committer_free(struct committer *c);
/* committer_close then committer_free, when nothing can push any more. Accepts NULL. */
void committer_stop(struct committer *c);

#endif /* RINGD_COMMIT_H */
