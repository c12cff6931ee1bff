/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.c - SQLite behind ringd: the connection, migrations, every statement's SQL text and
 * transactions. SQL text lives in file-scope constants, statements are prepared at open,
 * reset after each use and finalized at close; migrations are numbered and keyed on PRAGMA
 * user_version, each applied in one transaction. Jobs as the API sees them are in
 * store_jobs.c, tokens and principals in store_tokens.c, the scheduler's side in
 * store_sched.c, backups and checks in backup.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "store_impl.h"

/* A writer waits this long for the lock before giving up with EBUSY. Commits are a few
 * milliseconds, so 5 s only expires when something holds the database far too long. */
#define BUSY_TIMEOUT_MS 5000

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

static const char *const migrations[] = {
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

static const char SQL_JOB_INSERT[] =
    "INSERT INTO jobs (id, name, owner, state, spec, created_at, updated_at, checkpoint_dir, doc,"
    " min_workers, max_workers, gpus_per_worker, priority, run_as, cpus_per_worker,"
    " max_restarts, principal)"
    " VALUES (?1, ?2, ?3, 'QUEUED', ?4, ?5, ?5, ?6, json_object('id', ?1, 'name', ?2, 'owner',"
    " ?3, 'state', 'QUEUED', 'spec', json(?4), 'created_at', ?5, 'updated_at', ?5, 'user', ?11,"
    " 'owner_id', ?14), ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
    " RETURNING doc";
static const char SQL_EVENT_INSERT[] =
    "INSERT INTO events (job_id, time, type, state, message) VALUES (?1, ?2, ?3, ?4, ?5)";
static const char SQL_IDEM_GET[] =
    "SELECT job_id, request_hash FROM idempotency WHERE principal = ?1 AND key = ?2";
static const char SQL_IDEM_INSERT[] =
    "INSERT INTO idempotency (principal, key, job_id, request_hash) VALUES (?1, ?2, ?3, ?4)";
/* ?2, the owner's principal, is NULL for an admin (STORE_ANYONE): every owner's. */
static const char SQL_JOB_GET[] =
    "SELECT id, name, owner, state, spec, created_at, updated_at, principal FROM jobs"
    " WHERE id = ?1 AND (?2 IS NULL OR principal = ?2)";
/*
 * Reads copy the job's stored document (written by SQLite's json_object at submission and
 * kept current by every state change) and add checkpoint_dir, whose default depends on
 * where the data directory is now (see render_row).
 */
#define JOB_COLUMNS "j.doc, j.id, j.checkpoint_dir"
/* A job's attempts, oldest first; ended_at, exit_status and reason once it has ended. */
#define JOB_ATTEMPTS                                                                               \
    "(SELECT json_group_array(json(CASE WHEN ended_at IS NULL THEN o ELSE json_set(o,"             \
    " '$.ended_at', ended_at, '$.exit_status', exit_status, '$.reason', coalesce(reason, ''))"     \
    " END)) FROM (SELECT json_patch(json_object('number', number, 'world_size', world_size,"       \
    " 'hosts', hosts, 'gpus', gpus, 'backend_id', coalesce(backend_id, ''), 'run_dir', run_dir,"   \
    " 'started_at', started_at, 'start_overhead_s', start_s, 'stop_overhead_s', stop_s,"           \
    " 'samples_per_s', samples_per_s, 'ran_s', round((julianday(coalesce(ended_at,"                \
    " strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))) - julianday(started_at)) * 86400.0, 3)),"            \
    " CASE WHEN json_extract(j.spec, '$.backend') = 'slurm' AND backend_id GLOB '[0-9]*'"          \
    " THEN json_object('slurm_job_id', CAST(backend_id AS INTEGER)) ELSE '{}' END)"                \
    " AS o, ended_at, exit_status, reason FROM attempts"                                           \
    " WHERE job_id = j.id ORDER BY number))"
static const char SQL_JOB_RENDER[] =
    "SELECT " JOB_COLUMNS ", " JOB_ATTEMPTS ","
    " (SELECT run_dir FROM attempts WHERE job_id = j.id ORDER BY number DESC LIMIT 1)"
    " FROM jobs j WHERE j.id = ?1 AND (?2 IS NULL OR j.principal = ?2)";
/* ?7: the owner's principal (NULL: anyone's), ?2 the owner's name (NULL: any) */
static const char SQL_JOB_LIST[] =
    "SELECT " JOB_COLUMNS ", j.seq FROM jobs j"
    " WHERE j.seq > ?1 AND (?7 IS NULL OR j.principal = ?7) AND (?2 IS NULL OR j.owner = ?2)"
    " AND (?3 IS NULL OR j.state = ?3)"
    " AND (?4 IS NULL OR EXISTS (SELECT 1 FROM json_each(j.spec, '$.labels')"
    "  WHERE key = ?4 AND value = ?5))"
    " ORDER BY j.seq LIMIT ?6";
/* ?7: when it expires, in Unix seconds (NULL: never), stored as UTC text like created_at. */
static const char SQL_TOKEN_INSERT[] =
    "INSERT INTO tokens (id, name, hash, admin, created_at, unix_user, expires_at, principal)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, strftime('%Y-%m-%dT%H:%M:%SZ', ?7, 'unixepoch'), ?8)";
static const char SQL_TOKEN_FIND[] =
    "SELECT hash, name, admin, unix_user, CAST(strftime('%s', expires_at) AS INTEGER),"
    " principal FROM tokens WHERE id = ?1 AND revoked_at IS NULL";
static const char SQL_TOKEN_COUNT[] = "SELECT count(*) FROM tokens";
static const char SQL_TOKEN_LIST[] =
    "SELECT id, name, admin, created_at, revoked_at, unix_user, expires_at, principal"
    " FROM tokens WHERE ?1 IS NULL OR principal = ?1 ORDER BY created_at, id";
/* The live principals named ?1: each with its Unix user and whether its tokens are admin. */
static const char SQL_PRINCIPAL_LIVE[] =
    "SELECT p.id, p.unix_user, (SELECT max(admin) FROM tokens t WHERE t.principal = p.id)"
    " FROM principals p WHERE p.name = ?1 AND p.retired_at IS NULL ORDER BY p.id";
static const char SQL_PRINCIPAL_INSERT[] =
    "INSERT INTO principals (name, unix_user, created_at) VALUES (?1, ?2, ?3) RETURNING id";
/* Never the last live admin token: without one nobody could create tokens again. An
 * expired admin token is not live: it may go, and does not count as another. */
#define TOKEN_EXPIRED "expires_at <= strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"
static const char SQL_TOKEN_REVOKE[] =
    "UPDATE tokens SET revoked_at = coalesce(revoked_at, ?3)"
    " WHERE id = ?1 AND (?2 IS NULL OR principal = ?2)"
    " AND (admin = 0 OR revoked_at IS NOT NULL OR " TOKEN_EXPIRED " OR"
    "  (SELECT count(*) FROM tokens WHERE admin = 1 AND revoked_at IS NULL"
    "   AND NOT coalesce(" TOKEN_EXPIRED ", 0)) > 1)"
    " RETURNING id, name, admin, created_at, revoked_at, unix_user, expires_at, principal";
static const char SQL_JOB_STATE[] = "UPDATE jobs SET state = ?2, updated_at = ?3,"
                                    " doc = json_set(doc, '$.state', ?2, '$.updated_at', ?3)"
                                    " WHERE id = ?1 AND (?4 IS NULL OR state = ?4)";
static const char SQL_JOB_SCHED[] =
    "UPDATE jobs SET attempts = ?2, failures = ?3, not_before = ?4, stop_requested = ?5"
    " WHERE id = ?1";
static const char SQL_JOBS_QUEUED[] =
    "SELECT id, min_workers, max_workers, gpus_per_worker, priority, not_before, seq,"
    " cpus_per_worker, max_restarts, owner, (julianday(created_at) - 2440587.5) * 86400.0,"
    " attempts, failures FROM jobs WHERE state = 'QUEUED' AND seq > ?1 ORDER BY seq";
#define ACTIVE_COLUMNS                                                                             \
    "id, state, spec, attempts, failures, not_before, stop_requested, owner, run_as, seq,"         \
    " (julianday(created_at) - 2440587.5) * 86400.0"
static const char SQL_JOB_ACTIVE[] = "SELECT " ACTIVE_COLUMNS " FROM jobs WHERE id = ?1";
static const char SQL_JOBS_ACTIVE[] =
    "SELECT " ACTIVE_COLUMNS " FROM jobs"
    " WHERE state IN ('QUEUED', 'STARTING', 'RUNNING', 'STOPPING') ORDER BY seq";
static const char SQL_ATTEMPT_INSERT[] =
    "INSERT INTO attempts (job_id, number, world_size, hosts, gpus, backend_id, run_dir,"
    " started_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
static const char SQL_ATTEMPT_END[] =
    "UPDATE attempts SET ended_at = ?3, exit_status = ?4, reason = ?5, stop_s = ?6"
    " WHERE job_id = ?1 AND number = ?2";
static const char SQL_ATTEMPT_PROGRESS[] =
    "UPDATE attempts SET start_s = coalesce(?3, start_s), samples_per_s = ?4"
    " WHERE job_id = ?1 AND number = ?2";
static const char SQL_ATTEMPT_PLACED[] =
    "UPDATE attempts SET hosts = ?3, gpus = ?4 WHERE job_id = ?1 AND number = ?2";
static const char SQL_EVENTS_OF[] =
    "SELECT id, time, type, state, message FROM events WHERE job_id = ?1 AND id > ?2"
    " ORDER BY id LIMIT ?3";
static const char SQL_JOB_DELETE[] = "DELETE FROM jobs WHERE id = ?1";
static const char SQL_IDEM_DELETE[] = "DELETE FROM idempotency WHERE job_id = ?1";
/* /metrics: the rows that migration 9's triggers keep, a fixed number whatever the jobs. */
static const char SQL_STATE_COUNTS[] = "SELECT state, jobs FROM job_states";
static const char SQL_METRIC_COUNTERS[] = "SELECT name, value FROM metric_counters";
static const char SQL_METRIC_HISTOGRAMS[] =
    "SELECT h.name, h.count, h.sum, b.le, b.count FROM metric_histograms h"
    " JOIN metric_buckets b ON b.name = h.name ORDER BY h.name, b.le";
static const char SQL_SUBMISSIONS[] = "SELECT seq FROM sqlite_sequence WHERE name = 'jobs'";
static const char SQL_ATTEMPTS_OF[] =
    "SELECT number, world_size, hosts, gpus, backend_id, run_dir, started_at, ended_at,"
    " exit_status, reason, start_s, stop_s, samples_per_s,"
    " (julianday(coalesce(ended_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))) -"
    " julianday(started_at)) * 86400.0 FROM attempts WHERE job_id = ?1 ORDER BY number";

static const char *const sql_text[S_COUNT] = {
    [S_JOB_INSERT] = SQL_JOB_INSERT,
    [S_EVENT_INSERT] = SQL_EVENT_INSERT,
    [S_IDEM_GET] = SQL_IDEM_GET,
    [S_IDEM_INSERT] = SQL_IDEM_INSERT,
    [S_JOB_GET] = SQL_JOB_GET,
    [S_JOB_LIST] = SQL_JOB_LIST,
    [S_JOB_RENDER] = SQL_JOB_RENDER,
    [S_TOKEN_INSERT] = SQL_TOKEN_INSERT,
    [S_TOKEN_FIND] = SQL_TOKEN_FIND,
    [S_TOKEN_COUNT] = SQL_TOKEN_COUNT,
    [S_TOKEN_LIST] = SQL_TOKEN_LIST,
    [S_TOKEN_REVOKE] = SQL_TOKEN_REVOKE,
    [S_PRINCIPAL_LIVE] = SQL_PRINCIPAL_LIVE,
    [S_PRINCIPAL_INSERT] = SQL_PRINCIPAL_INSERT,
    [S_JOB_STATE] = SQL_JOB_STATE,
    [S_JOB_SCHED] = SQL_JOB_SCHED,
    [S_JOBS_ACTIVE] = SQL_JOBS_ACTIVE,
    [S_JOBS_QUEUED] = SQL_JOBS_QUEUED,
    [S_JOB_ACTIVE] = SQL_JOB_ACTIVE,
    [S_ATTEMPT_INSERT] = SQL_ATTEMPT_INSERT,
    [S_ATTEMPT_END] = SQL_ATTEMPT_END,
    [S_ATTEMPT_PROGRESS] = SQL_ATTEMPT_PROGRESS,
    [S_ATTEMPT_PLACED] = SQL_ATTEMPT_PLACED,
    [S_ATTEMPTS_OF] = SQL_ATTEMPTS_OF,
    [S_EVENTS_OF] = SQL_EVENTS_OF,
    [S_JOB_DELETE] = SQL_JOB_DELETE,
    [S_IDEM_DELETE] = SQL_IDEM_DELETE,
    [S_STATE_COUNTS] = SQL_STATE_COUNTS,
    [S_SUBMISSIONS] = SQL_SUBMISSIONS,
    [S_METRIC_COUNTERS] = SQL_METRIC_COUNTERS,
    [S_METRIC_HISTOGRAMS] = SQL_METRIC_HISTOGRAMS,
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_BEGIN_READ] = "BEGIN",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_SAVEPOINT] = "SAVEPOINT one",
    [S_RELEASE] = "RELEASE one",
    [S_ROLLBACK_TO] = "ROLLBACK TO one",
};

/* Maps a SQLite result code to errno, records the message and returns -1. */
int store__fail(struct store *st, int rc, struct error *err, const char *what)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        errno = EBUSY;
        break;
    case SQLITE_CONSTRAINT:
        errno = EEXIST;
        break;
    case SQLITE_NOMEM:
        errno = ENOMEM;
        break;
    case SQLITE_FULL:
        errno = ENOSPC;
        break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        errno = EUCLEAN; /* Linux's "structure needs cleaning", as filesystems say it */
        break;
    default:
        errno = EIO;
    }
    return errprintf(err, "%s: %s", what,
                     st && st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
}

static int exec(struct store *st, const char *sql, struct error *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        errprintf(err, "%s", msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        errno = EIO;
        return -1;
    }
    return 0;
}

/* Applies the migrations after the database's version up to n, each in its transaction. */
static int migrate(struct store *st, int n, struct error *err)
{
    int version = store_schema_version(st);

    if (version > (int)(sizeof(migrations) / sizeof(migrations[0])))
        return errno = EPROTO,
               errprintf(err,
                         "the database has schema %d but this ringd knows %d; run a newer "
                         "ringd",
                         version, (int)(sizeof(migrations) / sizeof(migrations[0])));
    for (int v = version; v < n; v++) {
        char pragma[64];
        snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", v + 1);
        if (exec(st, "BEGIN IMMEDIATE", err) < 0)
            return -1;
        if (exec(st, migrations[v], err) < 0 || exec(st, pragma, err) < 0) {
            exec(st, "ROLLBACK", NULL);
            return -1;
        }
        if (exec(st, "COMMIT", err) < 0)
            return -1;
    }
    return 0;
}

int store__background_checkpoints;

/*
 * Before the first connection: no global memory statistics. SQLite keeps them under one
 * process-wide mutex that every allocation takes, which HTTP threads reading in parallel
 * would otherwise queue on.
 */
static void configure_sqlite(void)
{
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int store_open(const char *path, struct store **out, struct error *err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    struct store *st;
    int rc;

    pthread_once(&once, configure_sqlite);
    if ((st = calloc(1, sizeof(*st))) == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    rc = sqlite3_open_v2(path, &st->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        store__fail(st, rc, err, path);
        store_close(st);
        return -1;
    }
    sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
    /* WAL: readers never block the writer. synchronous=FULL: a COMMIT is on disk when it
     * returns, so a job is durable before its 201 is sent. */
    if (exec(st, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON", err) <
            0 ||
        migrate(st, (int)(sizeof(migrations) / sizeof(migrations[0])), err) < 0)
        goto error;
    if (store__background_checkpoints && exec(st, "PRAGMA wal_autocheckpoint=0", err) < 0)
        goto error;
    for (int i = 0; i < S_COUNT; i++) {
        rc = sqlite3_prepare_v2(st->db, sql_text[i], -1, &st->stmt[i], NULL);
        if (rc != SQLITE_OK) {
            store__fail(st, rc, err, "prepare");
            goto error;
        }
    }
    *out = st;
    return 0;
error:
    store_close(st);
    return -1;
}

int store__create_at(const char *path, int version, struct error *err)
{
    struct store st = {0};
    int rc = sqlite3_open_v2(path, &st.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        store__fail(&st, rc, err, path);
        sqlite3_close(st.db);
        return -1;
    }
    rc = exec(&st, "PRAGMA journal_mode=WAL", err) < 0 || migrate(&st, version, err) < 0 ? -1 : 0;
    sqlite3_close(st.db);
    return rc;
}

void store_close(struct store *st)
{
    int saved = errno;
    if (st == NULL)
        return;
    for (int i = 0; i < S_COUNT; i++)
        sqlite3_finalize(st->stmt[i]);
    sqlite3_close(st->db);
    free(st);
    errno = saved;
}

int store_schema_version(struct store *st)
{
    sqlite3_stmt *s;
    int v = -1;
    if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW)
            v = sqlite3_column_int(s, 0);
        sqlite3_finalize(s);
    }
    return v;
}

/* Runs a statement that returns no rows, then resets it. */
int store__step_done(struct store *st, sqlite3_stmt *s, struct error *err, const char *what)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE)
        return store__fail(st, rc, err, what);
    return 0;
}

const char *store__col(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}

int store__get_one(struct store *st, sqlite3_stmt *s, const char *id, int64_t owner,
                   json_t *(*conv)(sqlite3_stmt *), json_t **out, struct error *err)
{
    int rc;

    *out = NULL;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    if (owner != STORE_ANYONE)
        sqlite3_bind_int64(s, 2, owner);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *out = conv(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc == SQLITE_DONE)
        return errno = ENOENT, errprintf(err, "job %s not found", id);
    if (rc != SQLITE_ROW)
        return store__fail(st, rc, err, "job lookup");
    if (*out == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    return 0;
}

int store__begin(struct store *st, struct error *err)
{
    if (st->batch)
        return 0; /* inside store_batch_begin's transaction */
    return store__step_done(st, st->stmt[S_BEGIN], err, "begin");
}

int store__commit(struct store *st, struct error *err)
{
    if (st->batch)
        return 0;
    if (store__step_done(st, st->stmt[S_COMMIT], err, "commit") < 0) {
        int saved = errno;
        store__step_done(st, st->stmt[S_ROLLBACK], NULL, "rollback");
        errno = saved;
        return -1;
    }
    return 0;
}

int store__rollback(struct store *st)
{
    int saved = errno;
    if (st->batch) { /* the whole batch goes at store_batch_commit */
        st->batch_failed = 1;
        return -1;
    }
    store__step_done(st, st->stmt[S_ROLLBACK], NULL, "rollback");
    errno = saved;
    return -1;
}

int store__event(struct store *st, const char *id, const char *now, const char *type,
                 const char *state, const char *message, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_EVENT_INSERT];
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, now, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, type, -1, SQLITE_STATIC);
    if (state)
        sqlite3_bind_text(s, 4, state, -1, SQLITE_STATIC);
    if (message)
        sqlite3_bind_text(s, 5, message, -1, SQLITE_STATIC);
    return store__step_done(st, s, err, "insert event");
}

/* Sets the state; with expect, only when the job is in that state (else EAGAIN). */
int store__set_state_if(struct store *st, const char *id, const char *expect, const char *state,
                        const char *now, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_JOB_STATE];
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, state, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, now, -1, SQLITE_STATIC);
    if (expect)
        sqlite3_bind_text(s, 4, expect, -1, SQLITE_STATIC);
    if (store__step_done(st, s, err, "update job state") < 0)
        return -1;
    if (sqlite3_changes(st->db) == 0)
        return errno = expect ? EAGAIN : ENOENT,
               errprintf(err, expect ? "job %s is not %s" : "job %s not found", id,
                         expect ? expect : "");
    return 0;
}

int store__set_state(struct store *st, const char *id, const char *state, const char *now,
                     struct error *err)
{
    return store__set_state_if(st, id, NULL, state, now, err);
}

int store_batch_begin(struct store *st, struct error *err)
{
    if (store__step_done(st, st->stmt[S_BEGIN], err, "begin") < 0)
        return -1;
    st->batch = 1;
    st->batch_failed = 0;
    return 0;
}

int store_batch_commit(struct store *st, struct error *err)
{
    int failed = st->batch_failed;
    st->batch = st->batch_failed = 0;
    if (failed) {
        store__step_done(st, st->stmt[S_ROLLBACK], NULL, "rollback");
        return errno = EIO, errprintf(err, "a write of the batch failed; none of it was kept");
    }
    return store__commit(st, err);
}

int store_read_begin(struct store *st, struct error *err)
{
    return store__step_done(st, st->stmt[S_BEGIN_READ], err, "begin");
}

void store_read_end(struct store *st)
{
    store__step_done(st, st->stmt[S_COMMIT], NULL, "commit");
}
