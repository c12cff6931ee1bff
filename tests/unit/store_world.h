/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store_world.h - what the store's tests (test_store.c, test_store_migrations.c) share
 * (store_world.c): a fresh database at a temporary path, the principals that own its jobs,
 * a job spec, the job list parsed, the metrics read, and the SQL that takes today's schema
 * back to older ones for the migrations' tests.
 */
#ifndef RING_TEST_STORE_WORLD_H
#define RING_TEST_STORE_WORLD_H

#include <stdint.h>

#include <jansson.h>

#include "db/store_impl.h"

/* Principals that own the jobs of these tests (jobs name theirs by id; store.h). */
#define ALICE 1
#define BOB   2
#define U     3

/* The database's file: a new name at each open_fresh(); each test unlinks it. */
extern char path[];
/* A store of today's schema in a new file at path. */
struct store *open_fresh(void);
/* A job spec named name, labelled team=team, that runs /bin/true. */
json_t *spec(const char *name, const char *team);
/* store_job_list's text, parsed (a new reference). */
json_t *list(struct store *st, const struct store_filter *f, int64_t cursor, int limit,
             int64_t *next);
/* metrics: m's value at path ("counters.ringd_resizes_total", "jobs.QUEUED",
 * "histograms.NAME.count", "histograms.NAME.sum"); 0 when absent. */
double metric(json_t *m, const char *a, const char *b, const char *c);
/* How many observations of histogram name are <= le. */
long long bucket(json_t *m, const char *name, double le);
/* A job that ran once: started (scheduling latency), reported progress 1.5 s in (start
 * overhead), was resized (a resizing event) and ended 4 s after its stop request. Returns
 * its id (static storage). */
const char *ran_once(struct store *st, const char *name);

/* Takes a database of today's schema back to before migration 9 (principals): what the
 * tests of older migrations start from. */
#define UNDO_MIGRATION_9                                                                           \
    "DROP TRIGGER tokens_retire;"                                                                  \
    "DROP INDEX tokens_principal; ALTER TABLE tokens DROP COLUMN principal;"                       \
    "DROP INDEX jobs_principal; ALTER TABLE jobs DROP COLUMN principal;"                           \
    "UPDATE jobs SET doc = json_remove(doc, '$.owner_id');"                                        \
    "DROP TABLE principals;"                                                                       \
    "CREATE TABLE idem8 (owner TEXT NOT NULL, key TEXT NOT NULL, job_id TEXT NOT NULL,"            \
    " request_hash TEXT NOT NULL, PRIMARY KEY (owner, key));"                                      \
    "INSERT INTO idem8 SELECT j.owner, i.key, i.job_id, i.request_hash FROM idempotency i"         \
    " JOIN jobs j ON j.id = i.job_id;"                                                             \
    "DROP TABLE idempotency; ALTER TABLE idem8 RENAME TO idempotency;"

/* The newest schema, and what takes a database back from it to schema 9. */
#define SCHEMA 10
#define UNDO_10                                                                                    \
    "DROP TRIGGER metric_latency; DROP TRIGGER metric_stop; DROP TRIGGER metric_start;"            \
    "DROP TRIGGER metric_resizes; DROP TRIGGER job_state_new; DROP TRIGGER job_state_change;"      \
    "DROP TRIGGER job_state_gone; DROP TABLE metric_counters; DROP TABLE metric_histograms;"       \
    "DROP TABLE metric_buckets; DROP TABLE job_states;"

#endif /* RING_TEST_STORE_WORLD_H */
