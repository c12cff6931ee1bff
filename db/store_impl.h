/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store_impl.h - what the store's files share: store.c (the connection and SQL),
 * migrations.c (the schema), store_tokens.c (tokens and the principals they speak for),
 * store_jobs.c (submission, a job's document, the list), store_sched.c (the scheduler's
 * transitions, attempts, events and metrics) and backup.c.
 */
#ifndef RINGD_STORE_IMPL_H
#define RINGD_STORE_IMPL_H

#include <sqlite3.h>

#include "store.h"

enum {
    S_JOB_INSERT,
    S_EVENT_INSERT,
    S_IDEM_GET,
    S_IDEM_INSERT,
    S_JOB_GET,
    S_JOB_LIST,
    S_JOB_LIST_DESC,
    S_JOB_RENDER,
    S_TOKEN_INSERT,
    S_TOKEN_FIND,
    S_TOKEN_COUNT,
    S_TOKEN_LIST,
    S_TOKEN_REVOKE,
    S_PRINCIPAL_LIVE,
    S_PRINCIPAL_INSERT,
    S_JOB_STATE,
    S_JOB_SCHED,
    S_JOBS_ACTIVE,
    S_JOBS_QUEUED,
    S_JOB_ACTIVE,
    S_ATTEMPT_INSERT,
    S_ATTEMPT_END,
    S_ATTEMPT_PROGRESS,
    S_ATTEMPT_PLACED,
    S_ATTEMPTS_OF,
    S_EVENTS_OF,
    S_EVENTS_ALL,
    S_EVENTS_NEWEST,
    S_ATTEMPTS_SINCE,
    S_JOB_DELETE,
    S_IDEM_DELETE,
    S_STATE_COUNTS,
    S_SUBMISSIONS,
    S_METRIC_COUNTERS,
    S_METRIC_HISTOGRAMS,
    S_BEGIN,
    S_BEGIN_READ,
    S_COMMIT,
    S_ROLLBACK,
    S_SAVEPOINT,
    S_RELEASE,
    S_ROLLBACK_TO,
    S_COUNT
};

struct store {
    sqlite3 *db;
    sqlite3_stmt *stmt[S_COUNT];
    int batch, batch_failed; /* inside store_batch_begin; an op in it failed */
};

/* Set by store_checkpointer_start: new connections do not checkpoint on commit. */
extern int store__background_checkpoints;

/* migrations.c: the SQL that takes schema v to v + 1, for v in [0, store__nmigrations). */
extern const char *const store__migrations[];
extern const int store__nmigrations;

/* Maps a SQLite result code to errno, records the message and returns -1. */
int store__fail(struct store *st, int rc, struct error *err, const char *what);
/* Runs a statement that returns no rows, then resets it. Returns 0 or -1. */
int store__step_done(struct store *st, sqlite3_stmt *s, struct error *err, const char *what);
/* Column i as text ("" for NULL). */
const char *store__col(sqlite3_stmt *s, int i);
/* BEGIN IMMEDIATE, COMMIT (rolling back on failure) and ROLLBACK (keeps errno; returns -1). */
int store__begin(struct store *st, struct error *err);
int store__commit(struct store *st, struct error *err);
int store__rollback(struct store *st);
/* Runs s (?1 the id, ?2 the owner's principal unless owner is STORE_ANYONE) for its one row,
 * converted by conv into *out; ENOENT when there is none. */
int store__get_one(struct store *st, sqlite3_stmt *s, const char *id, int64_t owner,
                   json_t *(*conv)(sqlite3_stmt *), json_t **out, struct error *err);
/* For a migration's tests: creates the database at path with the migrations up to version
 * only, as a ringd of that schema would have. Returns 0 or -1 with err. */
int store__create_at(const char *path, int version, struct error *err);
/* Appends an event to job id. */
int store__event(struct store *st, const char *id, const char *now, const char *type,
                 const char *state, const char *message, struct error *err);
/* Sets a job's state; with expect, only from that state (else EAGAIN). */
int store__set_state_if(struct store *st, const char *id, const char *expect, const char *state,
                        const char *now, struct error *err);
int store__set_state(struct store *st, const char *id, const char *state, const char *now,
                     struct error *err);

#endif /* RINGD_STORE_IMPL_H */
