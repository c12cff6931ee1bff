/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.c - SQLite behind ringd: the connection, migrations, every statement's SQL text,
 * transactions and tokens. SQL text lives in file-scope constants, statements are prepared
 * at open, reset after each use and finalized at close; migrations are numbered and keyed
 * on PRAGMA user_version, each applied in one transaction. Jobs as the API sees them are in
 * store_jobs.c, the scheduler's side in store_sched.c.
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
 * Migration 9's text. A histogram is a row of metric_histograms (its count and sum) and
 * one row of metric_buckets per upper bound (le): an observation x bumps every bucket
 * with le >= x; the +Inf bucket is the count. The bounds:
 *   scheduling latency (submission -> first start): 10 ms (an idle ringd) to 1 h (a busy
 *     cluster);
 *   restart overheads (stop requested -> exited; start -> first progress): 100 ms (a small
 *     job on this host) to 10 min (a large model reloading its checkpoint from shared
 *     storage).
 */
/* clang-format off: it cannot lay out string literals joined with macros */
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
#define METRICS_MIGRATION                                                                                                                                                                                   \
    "CREATE TABLE metric_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"                                                                                                                          \
    " WITHOUT ROWID;"                                                                                                                                                                                       \
    "CREATE TABLE metric_histograms (name TEXT PRIMARY KEY, count INTEGER NOT NULL,"                                                                                                                        \
    " sum REAL NOT NULL) WITHOUT ROWID;"                                                                                                                                                                    \
    "CREATE TABLE metric_buckets (name TEXT NOT NULL, le REAL NOT NULL,"                                                                                                                                    \
    " count INTEGER NOT NULL, PRIMARY KEY (name, le)) WITHOUT ROWID;"                                                                                                                                       \
    "CREATE TABLE job_states (state TEXT PRIMARY KEY, jobs INTEGER NOT NULL) WITHOUT ROWID;"                                                                                                                \
    "INSERT INTO metric_counters VALUES ('ringd_resizes_total',"                                                                                                                                            \
    " (SELECT count(*) FROM events WHERE type = 'resizing'));"                                                                                                                                              \
    "INSERT INTO metric_histograms VALUES ('ringd_scheduling_latency_seconds', 0, 0),"                                                                                                                      \
    " ('ringd_attempt_stop_seconds', 0, 0), ('ringd_attempt_start_seconds', 0, 0);"                                                                                                                         \
    "INSERT INTO metric_buckets SELECT 'ringd_scheduling_latency_seconds', value, 0"                                                                                                                        \
    " FROM json_each('[" LATENCY_BOUNDS "]');"                                                                                                                                                              \
    "INSERT INTO metric_buckets SELECT h.name, b.value, 0"                                                                                                                                                  \
    " FROM json_each('[" OVERHEAD_BOUNDS "]') b, metric_histograms h"                                                                                                                                       \
    " WHERE h.name IN ('ringd_attempt_stop_seconds', "                                                                                                                                                      \
    "'ringd_attempt_start_seconds');" METRIC_BACKFILL(                                                                                                                                                      \
        "ringd_scheduling_latency_seconds",                                                                                                                                                                 \
        "SELECT " LATENCY_OF("a.started_at", "a.job_id") " AS x FROM attempts a"                                                                                                                            \
                                                         " WHERE a.number = 1")                                                                                                                             \
        METRIC_BACKFILL("ringd_attempt_stop_seconds", "SELECT stop_s AS x FROM attempts WHERE "                                                                                                             \
                                                      "stop_s IS NOT NULL") METRIC_BACKFILL(                                                                                                                \
            "ringd_attempt_start_seconds", "SELECT start_s AS x FROM attempts WHERE start_s IS "                                                                                                            \
                                           "NOT NULL") "INSERT INTO job_states SELECT state, "                                                                                                              \
                                                       "count(*) FROM jobs GROUP BY state;"                                                                                                                 \
                                                       "CREATE TRIGGER metric_latency AFTER "                                                                                                               \
                                                       "INSERT ON attempts WHEN NEW.number = 1 "                                                                                                            \
                                                       "BEGIN" METRIC_OBSERVE(                                                                                                                              \
                                                           "ringd_scheduling_latency_seconds",                                                                                                              \
                                                           LATENCY_OF(                                                                                                                                      \
                                                               "NEW.started_at",                                                                                                                            \
                                                               "NEW.job_id")) " END;"                                                                                                                       \
                                                                              "CREATE TRIGGER "                                                                                                             \
                                                                              "metric_stop AFTER "                                                                                                          \
                                                                              "UPDATE OF stop_s "                                                                                                           \
                                                                              "ON attempts"                                                                                                                 \
                                                                              " WHEN OLD.stop_s "                                                                                                           \
                                                                              "IS NULL AND "                                                                                                                \
                                                                              "NEW.stop_s IS NOT "                                                                                                          \
                                                                              "NULL "                                                                                                                       \
                                                                              "BEGI"                                                                                                                        \
                                                                              "N" METRIC_OBSERVE(                                                                                                           \
                                                                                  "ringd_attempt_"                                                                                                          \
                                                                                  "stop_seconds",                                                                                                           \
                                                                                  "NEW.stop_s") " END;"                                                                                                     \
                                                                                                "CREATE TRIGGER metric_start AFTER UPDATE OF start_s ON attempts"                                           \
                                                                                                " WHEN OLD.start_s IS NULL AND NEW.start_s IS NOT NULL BEGIN" METRIC_OBSERVE(                               \
                                                                                                    "ringd_attempt_start_seconds",                                                                          \
                                                                                                    "NEW.start_s") " END;"                                                                                  \
                                                                                                                   "CREATE TRIGGER metric_resizes AFTER INSERT ON events WHEN NEW.type = 'resizing' BEGIN"  \
                                                                                                                   " UPDATE metric_counters SET value = value + 1 WHERE name = 'ringd_resizes_total'; END;" \
                                                                                                                   "CREATE TRIGGER job_state_new AFTER INSERT ON jobs BEGIN" JOB_STATE_PLUS                 \
                                                                                                                   " END;"                                                                                  \
                                                                                                                   "CREATE TRIGGER job_state_change AFTER UPDATE OF state ON jobs"                          \
                                                                                                                   " WHEN OLD.state IS NOT NEW.state BEGIN"                                                 \
                                                                                                                   " UPDATE job_states SET jobs = jobs - 1 WHERE state = OLD.state;" JOB_STATE_PLUS         \
                                                                                                                   " END;"                                                                                  \
                                                                                                                   "CREATE TRIGGER job_state_gone AFTER DELETE ON jobs BEGIN"                               \
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
    /* 9: what /metrics shows, kept apart from the rows it counts. DELETE /v1/jobs/{id}
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
    " max_restarts)"
    " VALUES (?1, ?2, ?3, 'QUEUED', ?4, ?5, ?5, ?6, json_object('id', ?1, 'name', ?2, 'owner',"
    " ?3, 'state', 'QUEUED', 'spec', json(?4), 'created_at', ?5, 'updated_at', ?5, 'user', ?11),"
    " ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
    " RETURNING doc";
static const char SQL_EVENT_INSERT[] =
    "INSERT INTO events (job_id, time, type, state, message) VALUES (?1, ?2, ?3, ?4, ?5)";
static const char SQL_IDEM_GET[] =
    "SELECT job_id, request_hash FROM idempotency WHERE owner = ?1 AND key = ?2";
static const char SQL_IDEM_INSERT[] =
    "INSERT INTO idempotency (owner, key, job_id, request_hash) VALUES (?1, ?2, ?3, ?4)";
static const char SQL_JOB_GET[] =
    "SELECT id, name, owner, state, spec, created_at, updated_at FROM jobs"
    " WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)";
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
    " FROM jobs j WHERE j.id = ?1 AND (?2 IS NULL OR j.owner = ?2)";
static const char SQL_JOB_LIST[] =
    "SELECT " JOB_COLUMNS ", j.seq FROM jobs j"
    " WHERE j.seq > ?1 AND (?2 IS NULL OR j.owner = ?2) AND (?3 IS NULL OR j.state = ?3)"
    " AND (?4 IS NULL OR EXISTS (SELECT 1 FROM json_each(j.spec, '$.labels')"
    "  WHERE key = ?4 AND value = ?5))"
    " ORDER BY j.seq LIMIT ?6";
/* ?7: when it expires, in Unix seconds (NULL: never), stored as UTC text like created_at. */
static const char SQL_TOKEN_INSERT[] =
    "INSERT INTO tokens (id, name, hash, admin, created_at, unix_user, expires_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, strftime('%Y-%m-%dT%H:%M:%SZ', ?7, 'unixepoch'))";
static const char SQL_TOKEN_FIND[] =
    "SELECT hash, name, admin, unix_user, CAST(strftime('%s', expires_at) AS INTEGER)"
    " FROM tokens WHERE id = ?1 AND revoked_at IS NULL";
static const char SQL_TOKEN_COUNT[] = "SELECT count(*) FROM tokens";
static const char SQL_TOKEN_LIST[] =
    "SELECT id, name, admin, created_at, revoked_at, unix_user, expires_at FROM tokens"
    " WHERE ?1 IS NULL OR name = ?1 ORDER BY created_at, id";
/* Never the last live admin token: without one nobody could create tokens again. An
 * expired admin token is not live: it may go, and does not count as another. */
#define TOKEN_EXPIRED "expires_at <= strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"
static const char SQL_TOKEN_REVOKE[] =
    "UPDATE tokens SET revoked_at = coalesce(revoked_at, ?3)"
    " WHERE id = ?1 AND (?2 IS NULL OR name = ?2)"
    " AND (admin = 0 OR revoked_at IS NOT NULL OR " TOKEN_EXPIRED " OR"
    "  (SELECT count(*) FROM tokens WHERE admin = 1 AND revoked_at IS NULL"
    "   AND NOT coalesce(" TOKEN_EXPIRED ", 0)) > 1)"
    " RETURNING id, name, admin, created_at, revoked_at, unix_user, expires_at";
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
    default:
        errno = EIO;
    }
    return errprintf(err, "%s: %s", what,
                     st && st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
}

void store_now_iso(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    char date[32];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%.20s.%03dZ", date, (int)(ts.tv_nsec / 1000000) % 1000);
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

static int migrate(struct store *st, struct error *err)
{
    int n = (int)(sizeof(migrations) / sizeof(migrations[0]));
    int version = store_schema_version(st);

    if (version > n)
        return errno = EPROTO,
               errprintf(err,
                         "the database has schema %d but this ringd knows %d; run a newer "
                         "ringd",
                         version, n);
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
        migrate(st, err) < 0)
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

int store__get_one(struct store *st, sqlite3_stmt *s, const char *id, const char *owner,
                   json_t *(*conv)(sqlite3_stmt *), json_t **out, struct error *err)
{
    int rc;

    *out = NULL;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    if (owner)
        sqlite3_bind_text(s, 2, owner, -1, SQLITE_STATIC);
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

int store_token_create(struct store *st, const char *id, const char *name, const char *hash,
                       int admin, const char *unix_user, int64_t expires, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_TOKEN_INSERT];
    char now[40];
    store_now_iso(now, sizeof(now));
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, hash, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 4, admin);
    sqlite3_bind_text(s, 5, now, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, unix_user, -1, SQLITE_STATIC);
    if (expires > 0)
        sqlite3_bind_int64(s, 7, expires);
    return store__step_done(st, s, err, "insert token");
}

int store_token_find(struct store *st, const char *id, struct store_token *out, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_TOKEN_FIND];
    int rc;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        snprintf(out->hash, sizeof(out->hash), "%s", store__col(s, 0));
        snprintf(out->name, sizeof(out->name), "%s", store__col(s, 1));
        out->admin = sqlite3_column_int(s, 2);
        snprintf(out->user, sizeof(out->user), "%s",
                 sqlite3_column_type(s, 3) == SQLITE_NULL ? "" : store__col(s, 3));
        out->expires = sqlite3_column_int64(s, 4); /* NULL reads 0: never */
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc == SQLITE_DONE)
        return errno = ENOENT, errprintf(err, "no such token");
    if (rc != SQLITE_ROW)
        return store__fail(st, rc, err, "token lookup");
    return 0;
}

int store_token_count(struct store *st, int *count, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_TOKEN_COUNT];
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *count = sqlite3_column_int(s, 0);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW)
        return store__fail(st, rc, err, "token count");
    return 0;
}

/* The token row under s (SQL_TOKEN_LIST's columns) as JSON; never its hash. */
static json_t *token_json(sqlite3_stmt *s)
{
    json_t *t = json_pack("{s:s, s:s, s:b, s:s}", "id", store__col(s, 0), "name", store__col(s, 1),
                          "admin", sqlite3_column_int(s, 2), "created_at", store__col(s, 3));
    if (t != NULL && sqlite3_column_type(s, 4) != SQLITE_NULL)
        json_object_set_new(t, "revoked_at", json_string(store__col(s, 4)));
    if (t != NULL && sqlite3_column_type(s, 5) != SQLITE_NULL)
        json_object_set_new(t, "user", json_string(store__col(s, 5)));
    if (t != NULL && sqlite3_column_type(s, 6) != SQLITE_NULL)
        json_object_set_new(t, "expires_at", json_string(store__col(s, 6)));
    return t;
}

int store_token_list(struct store *st, const char *name, json_t **out, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_TOKEN_LIST];
    json_t *arr = json_array();
    int rc;
    if (arr == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    if (name)
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        json_array_append_new(arr, token_json(s));
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return store__fail(st, rc, err, "token list");
    }
    *out = arr;
    return 0;
}

int store_token_revoke(struct store *st, const char *id, const char *name, json_t **out,
                       struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_TOKEN_REVOKE];
    json_t *t = NULL;
    char now[40];
    int rc;

    store_now_iso(now, sizeof(now));
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    if (name)
        sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, now, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        t = token_json(s);
        rc = sqlite3_step(s);
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_NOTFOUND;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc == SQLITE_NOTFOUND) {
        struct store_token live;
        if (store_token_find(st, id, &live, err) == 0 && live.admin &&
            (name == NULL || strcmp(live.name, name) == 0))
            return errno = EPERM, errprintf(err, "token %s is the last admin token", id);
        return errno = ENOENT, errprintf(err, "no token %s", id);
    }
    if (rc != SQLITE_DONE) {
        json_decref(t);
        return store__fail(st, rc, err, "revoke token");
    }
    if (out != NULL)
        *out = t;
    else
        json_decref(t);
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
