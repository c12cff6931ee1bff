/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migrations.c - the schema of ringd's database as numbered SQL, and nothing else: entry
 * v takes a database from schema v to v + 1 (PRAGMA user_version). store.c applies them,
 * each in its own transaction. A change to the schema is a new entry at the end; an
 * entry, once released, never changes.
 */
#include "store_impl.h"

/*
 * 9: jobs belong to principals, not to names. Until now a job's owner was its token's name,
 * so two tokens named alike (for two Unix users, or a name given out again after its tokens
 * were revoked) saw, cancelled and deleted each other's jobs. A principal is a row whose id
 * is never reused (AUTOINCREMENT), with a name and a Unix user; each token speaks for one,
 * and a job, its idempotency keys and every "is this mine" check key on its id.
 *
 * Existing data: one principal per (name, Unix user) among the tokens, retired (its name
 * free for another) when all its tokens are revoked. A job goes to the principal of its
 * owner's name; where that name has several, to the one whose user the job ran as, else
 * to the one with no user (its jobs ran as the default user). A job that matches none (an
 * owner with no token, e.g. "local" from --no-auth, or a user that no principal of the name
 * has) gets a principal of its own, made retired: admins see it, no later token does. No
 * job is dropped.
 */
#define MIGRATION_PRINCIPALS                                                                       \
    "CREATE TABLE principals ("                                                                    \
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"                                                      \
    "  name TEXT NOT NULL,"                                                                        \
    "  unix_user TEXT,"                                                                            \
    "  created_at TEXT NOT NULL,"                                                                  \
    "  retired_at TEXT);"                                                                          \
    "CREATE INDEX principals_name ON principals(name);"                                            \
    "INSERT INTO principals (name, unix_user, created_at, retired_at)"                             \
    " SELECT name, unix_user, min(created_at),"                                                    \
    "  CASE WHEN count(*) = count(revoked_at) THEN max(revoked_at) END"                            \
    " FROM tokens GROUP BY name, unix_user ORDER BY min(created_at), name;"                        \
    "ALTER TABLE tokens ADD COLUMN principal INTEGER REFERENCES principals(id);"                   \
    "UPDATE tokens SET principal = (SELECT p.id FROM principals p"                                 \
    " WHERE p.name = tokens.name AND p.unix_user IS tokens.unix_user);"                            \
    "CREATE INDEX tokens_principal ON tokens(principal);"                                          \
    "ALTER TABLE jobs ADD COLUMN principal INTEGER NOT NULL DEFAULT 0;"                            \
    "UPDATE jobs SET principal = coalesce((SELECT p.id FROM principals p"                          \
    " WHERE p.name = jobs.owner AND ((SELECT count(*) FROM principals q WHERE q.name = p.name) = " \
    "1"                                                                                            \
    "  OR p.unix_user = jobs.run_as OR (p.unix_user IS NULL AND NOT EXISTS (SELECT 1 FROM"         \
    "  principals q WHERE q.name = p.name AND q.unix_user = jobs.run_as)))"                        \
    " ORDER BY p.unix_user IS NULL LIMIT 1), 0);"                                                  \
    "INSERT INTO principals (name, unix_user, created_at, retired_at)"                             \
    " SELECT owner, run_as, min(created_at), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"                \
    " FROM jobs WHERE principal = 0 GROUP BY owner, run_as ORDER BY min(seq);"                     \
    "UPDATE jobs SET principal = (SELECT p.id FROM principals p WHERE p.name = jobs.owner"         \
    " AND p.unix_user IS jobs.run_as AND NOT EXISTS (SELECT 1 FROM tokens t"                       \
    "  WHERE t.principal = p.id)) WHERE principal = 0;"                                            \
    "UPDATE jobs SET doc = json_set(doc, '$.owner_id', principal);"                                \
    "CREATE INDEX jobs_principal ON jobs(principal, seq);"                                         \
    "CREATE TABLE idempotency_by_principal ("                                                      \
    "  principal INTEGER NOT NULL,"                                                                \
    "  key TEXT NOT NULL,"                                                                         \
    "  job_id TEXT NOT NULL,"                                                                      \
    "  request_hash TEXT NOT NULL,"                                                                \
    "  PRIMARY KEY (principal, key));"                                                             \
    "INSERT OR IGNORE INTO idempotency_by_principal"                                               \
    " SELECT j.principal, i.key, i.job_id, i.request_hash FROM idempotency i"                      \
    " JOIN jobs j ON j.id = i.job_id;"                                                             \
    "DROP TABLE idempotency;"                                                                      \
    "ALTER TABLE idempotency_by_principal RENAME TO idempotency;"                                  \
    "CREATE TRIGGER tokens_retire AFTER UPDATE OF revoked_at ON tokens"                            \
    " WHEN NEW.revoked_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tokens"                        \
    "  WHERE principal = NEW.principal AND revoked_at IS NULL)"                                    \
    " BEGIN UPDATE principals SET retired_at = coalesce(retired_at, NEW.revoked_at)"               \
    "  WHERE id = NEW.principal; END;"

/*
 * 10: what /metrics shows, kept apart from the rows it counts (see the migration's entry).
 * A histogram is a row of metric_histograms (its count and sum) and one row of
 * metric_buckets per upper bound (le): an observation x bumps every bucket with le >= x;
 * the +Inf bucket is the count. The bounds:
 *   scheduling latency (submission -> first start): 10 ms (an idle ringd) to 1 h (a busy
 *     cluster);
 *   restart overheads (stop requested -> exited; start -> first progress): 100 ms (a small
 *     job on this host) to 10 min (a large model reloading its checkpoint from shared
 *     storage).
 */
#define METRIC_OBSERVE(h, x)                                                                       \
    " UPDATE metric_buckets SET count = count + 1 WHERE name = '" h "' AND le >= (" x ");"         \
    " UPDATE metric_histograms SET count = count + 1, sum = sum + (" x ") WHERE name = '" h "';"
#define METRIC_BACKFILL(h, rows)                                                                   \
    "UPDATE metric_buckets SET count = (SELECT count(*) FROM (" rows ") WHERE x <= le)"            \
    " WHERE name = '" h "';"                                                                       \
    "UPDATE metric_histograms SET count = (SELECT count(*) FROM (" rows ")),"                      \
    " sum = (SELECT coalesce(sum(x), 0) FROM (" rows ")) WHERE name = '" h "';"
#define LATENCY_OF(started, job)                                                                   \
    "(julianday(" started ") - julianday((SELECT created_at FROM jobs WHERE id = " job ")))"       \
    " * 86400.0"
#define LATENCY_BOUNDS  "0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600"
#define OVERHEAD_BOUNDS "0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 120, 600"
#define JOB_STATE_PLUS                                                                             \
    " INSERT INTO job_states VALUES (NEW.state, 1) ON CONFLICT (state) DO UPDATE"                  \
    " SET jobs = jobs + 1;"
#define LATENCY_ROWS                                                                               \
    "SELECT " LATENCY_OF("a.started_at", "a.job_id") " AS x FROM attempts a WHERE a.number = 1"
#define STOP_ROWS  "SELECT stop_s AS x FROM attempts WHERE stop_s IS NOT NULL"
#define START_ROWS "SELECT start_s AS x FROM attempts WHERE start_s IS NOT NULL"
/* clang-format off */
#define METRICS_MIGRATION                                                                          \
    "CREATE TABLE metric_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"                 \
    " WITHOUT ROWID;"                                                                              \
    "CREATE TABLE metric_histograms (name TEXT PRIMARY KEY, count INTEGER NOT NULL,"               \
    " sum REAL NOT NULL) WITHOUT ROWID;"                                                           \
    "CREATE TABLE metric_buckets (name TEXT NOT NULL, le REAL NOT NULL,"                           \
    " count INTEGER NOT NULL, PRIMARY KEY (name, le)) WITHOUT ROWID;"                              \
    "CREATE TABLE job_states (state TEXT PRIMARY KEY, jobs INTEGER NOT NULL) WITHOUT ROWID;"       \
    "INSERT INTO metric_counters VALUES ('ringd_resizes_total',"                                   \
    " (SELECT count(*) FROM events WHERE type = 'resizing'));"                                     \
    "INSERT INTO metric_histograms VALUES ('ringd_scheduling_latency_seconds', 0, 0),"             \
    " ('ringd_attempt_stop_seconds', 0, 0), ('ringd_attempt_start_seconds', 0, 0);"                \
    "INSERT INTO metric_buckets SELECT 'ringd_scheduling_latency_seconds', value, 0"               \
    " FROM json_each('[" LATENCY_BOUNDS "]');"                                                     \
    "INSERT INTO metric_buckets SELECT h.name, b.value, 0"                                         \
    " FROM json_each('[" OVERHEAD_BOUNDS "]') b, metric_histograms h"                              \
    " WHERE h.name IN ('ringd_attempt_stop_seconds', 'ringd_attempt_start_seconds');"              \
    METRIC_BACKFILL("ringd_scheduling_latency_seconds", LATENCY_ROWS)                              \
    METRIC_BACKFILL("ringd_attempt_stop_seconds", STOP_ROWS)                                       \
    METRIC_BACKFILL("ringd_attempt_start_seconds", START_ROWS)                                     \
    "INSERT INTO job_states SELECT state, count(*) FROM jobs GROUP BY state;"                      \
    "CREATE TRIGGER metric_latency AFTER INSERT ON attempts WHEN NEW.number = 1 BEGIN"             \
    METRIC_OBSERVE("ringd_scheduling_latency_seconds", LATENCY_OF("NEW.started_at", "NEW.job_id")) \
    " END;"                                                                                        \
    "CREATE TRIGGER metric_stop AFTER UPDATE OF stop_s ON attempts"                                \
    " WHEN OLD.stop_s IS NULL AND NEW.stop_s IS NOT NULL BEGIN"                                    \
    METRIC_OBSERVE("ringd_attempt_stop_seconds", "NEW.stop_s")                                     \
    " END;"                                                                                        \
    "CREATE TRIGGER metric_start AFTER UPDATE OF start_s ON attempts"                              \
    " WHEN OLD.start_s IS NULL AND NEW.start_s IS NOT NULL BEGIN"                                  \
    METRIC_OBSERVE("ringd_attempt_start_seconds", "NEW.start_s")                                   \
    " END;"                                                                                        \
    "CREATE TRIGGER metric_resizes AFTER INSERT ON events WHEN NEW.type = 'resizing' BEGIN"        \
    " UPDATE metric_counters SET value = value + 1 WHERE name = 'ringd_resizes_total'; END;"       \
    "CREATE TRIGGER job_state_new AFTER INSERT ON jobs BEGIN" JOB_STATE_PLUS " END;"               \
    "CREATE TRIGGER job_state_change AFTER UPDATE OF state ON jobs"                                \
    " WHEN OLD.state IS NOT NEW.state BEGIN"                                                       \
    " UPDATE job_states SET jobs = jobs - 1 WHERE state = OLD.state;" JOB_STATE_PLUS " END;"       \
    "CREATE TRIGGER job_state_gone AFTER DELETE ON jobs BEGIN"                                     \
    " UPDATE job_states SET jobs = jobs - 1 WHERE state = OLD.state; END;"
/* clang-format on */

const char *const store__migrations[] = {
    /* 1: jobs, events, idempotency keys, tokens */
    "CREATE TABLE jobs ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  id TEXT UNIQUE NOT NULL,"
    "  name TEXT NOT NULL,"
    "  owner TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  spec TEXT NOT NULL,"
    "  created_at TEXT NOT NULL,"
    "  updated_at TEXT NOT NULL);"
    "CREATE INDEX jobs_owner ON jobs(owner, seq);"
    "CREATE INDEX jobs_state ON jobs(state, seq);"
    "CREATE TABLE events ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  time TEXT NOT NULL,"
    "  type TEXT NOT NULL,"
    "  state TEXT,"
    "  message TEXT);"
    "CREATE INDEX events_job ON events(job_id, id);"
    "CREATE TABLE idempotency ("
    "  owner TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  job_id TEXT NOT NULL,"
    "  request_hash TEXT NOT NULL,"
    "  PRIMARY KEY (owner, key));"
    "CREATE TABLE tokens ("
    "  id TEXT PRIMARY KEY,"
    "  name TEXT NOT NULL,"
    "  hash TEXT UNIQUE NOT NULL,"
    "  admin INTEGER NOT NULL,"
    "  created_at TEXT NOT NULL,"
    "  revoked_at TEXT);",
    /* 2: attempts, and what the scheduler keeps per job */
    "CREATE TABLE attempts ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  number INTEGER NOT NULL,"
    "  world_size INTEGER NOT NULL,"
    "  hosts TEXT NOT NULL,"
    "  gpus TEXT NOT NULL,"
    "  backend_id TEXT,"
    "  run_dir TEXT NOT NULL,"
    "  started_at TEXT NOT NULL,"
    "  ended_at TEXT,"
    "  exit_status INTEGER,"
    "  reason TEXT,"
    "  UNIQUE (job_id, number));"
    "ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN not_before INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN stop_requested INTEGER NOT NULL DEFAULT 0;",
    /* 3: the spec's checkpoint_dir as a column (NULL: the default under the data directory),
     * so that rendering a job needs no JSON parse */
    "ALTER TABLE jobs ADD COLUMN checkpoint_dir TEXT;"
    "UPDATE jobs SET checkpoint_dir = json_extract(spec, '$.checkpoint_dir');",
    /* 4: the job as the API shows it (but checkpoint_dir), kept with every state change, so
     * that a read copies one column instead of assembling the object */
    "ALTER TABLE jobs ADD COLUMN doc TEXT;"
    "UPDATE jobs SET doc = json_object('id', id, 'name', name, 'owner', owner, 'state', state,"
    " 'spec', json(spec), 'created_at', created_at, 'updated_at', updated_at);",
    /* 5: what the scheduling policy reads of a spec, as columns: a pass over a long queue
     * reads them from the (state, seq) index's rows instead of parsing every spec */
    "ALTER TABLE jobs ADD COLUMN min_workers INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE jobs ADD COLUMN max_workers INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE jobs ADD COLUMN gpus_per_worker INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;"
    "UPDATE jobs SET min_workers = coalesce(json_extract(spec, '$.workers.min'), 1),"
    " max_workers = coalesce(json_extract(spec, '$.workers.max'), 1),"
    " gpus_per_worker = coalesce(json_extract(spec, '$.gpus_per_worker'), 0),"
    " priority = coalesce(json_extract(spec, '$.priority'), 0);",
    /* 6: who a job runs as. A token maps to a Unix user (the admin chooses it); a job keeps
     * the user it was submitted for, so that a later change of the mapping does not move a
     * running job to another account. Older jobs (NULL) ran as ringd's own user. */
    "ALTER TABLE tokens ADD COLUMN unix_user TEXT;"
    "ALTER TABLE jobs ADD COLUMN run_as TEXT;"
    "UPDATE jobs SET doc = json_set(doc, '$.user', run_as);",
    /* 7: what the scheduler's loop needs of a spec, as columns too; and per attempt its two
     * overheads (stop requested -> exited, start -> first progress) and its throughput */
    "ALTER TABLE jobs ADD COLUMN cpus_per_worker INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE jobs ADD COLUMN max_restarts INTEGER NOT NULL DEFAULT 0;"
    "UPDATE jobs SET cpus_per_worker = coalesce(json_extract(spec, '$.cpus_per_worker'), 1),"
    " max_restarts = coalesce(json_extract(spec, '$.max_restarts'), 0);"
    "ALTER TABLE attempts ADD COLUMN stop_s REAL;"
    "ALTER TABLE attempts ADD COLUMN start_s REAL;"
    "ALTER TABLE attempts ADD COLUMN samples_per_s REAL;",
    /* 8: a token may expire (UTC, whole seconds: "2027-01-31T12:00:00Z"); NULL, as every
     * older token gets, never does */
    "ALTER TABLE tokens ADD COLUMN expires_at TEXT;",
    MIGRATION_PRINCIPALS,
    /* 10: what /metrics shows, kept apart from the rows it counts. DELETE /v1/jobs/{id}
     * removes a job's attempts and events, and counters recomputed from them went down,
     * which Prometheus reads as a restart of the counter; and a scrape read every attempt
     * and event. Triggers now bump the counters in the transaction of the change they
     * count (an attempt starts, ends, reports progress; a resize event), a delete leaves
     * them, and a scrape reads a few fixed rows however many jobs there are. The jobs
     * per state are kept the same way. The histograms' bounds are the rows made here;
     * the counts start from the rows there are now. */
    METRICS_MIGRATION,
};

const int store__nmigrations = (int)(sizeof(store__migrations) / sizeof(store__migrations[0]));
