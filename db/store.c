/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.c - SQLite behind ringd: the connection, applying the migrations, every statement's
 * SQL text and transactions. SQL text lives in file-scope constants, statements are
 * prepared at open, reset after each use and finalized at close; migrations (their SQL in
 * migrations.c) are numbered and keyed on PRAGMA user_version, each applied in one
 * transaction. Jobs as the API sees them are in
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
#define JOB_LIST_MATCH                                                                             \
    " AND (?7 IS NULL OR j.principal = ?7) AND (?2 IS NULL OR j.owner = ?2)"                       \
    " AND (?3 IS NULL OR j.state = ?3)"                                                            \
    " AND (?4 IS NULL OR EXISTS (SELECT 1 FROM json_each(j.spec, '$.labels')"                      \
    "  WHERE key = ?4 AND value = ?5))"
static const char SQL_JOB_LIST[] = "SELECT " JOB_COLUMNS ", j.seq FROM jobs j"
                                   " WHERE j.seq > ?1" JOB_LIST_MATCH " ORDER BY j.seq LIMIT ?6";
/* Newest first (a dashboard's view): the cursor is the last job shown, 0 the newest. */
static const char SQL_JOB_LIST_DESC[] =
    "SELECT " JOB_COLUMNS ", j.seq FROM jobs j"
    " WHERE (?1 = 0 OR j.seq < ?1)" JOB_LIST_MATCH " ORDER BY j.seq DESC LIMIT ?6";
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
/* Every job's events (GET /v1/events), ?3 the owner's principal (NULL: anyone's), up to ?2:
 * the newest event when the read began (see store_events_all). */
static const char SQL_EVENTS_ALL[] =
    "SELECT e.id, e.time, e.type, e.state, e.message, e.job_id FROM events e"
    " JOIN jobs j ON j.id = e.job_id WHERE e.id > ?1 AND e.id <= ?2"
    " AND (?3 IS NULL OR j.principal = ?3) ORDER BY e.id LIMIT ?4";
static const char SQL_EVENTS_NEWEST[] = "SELECT coalesce(max(id), 0) FROM events";
/* Attempts running at some time after ?1 (Unix seconds), for the cluster's usage: their
 * times as Unix seconds, and the workers, GPUs and slots they held. */
#define UNIX_S(t) "(julianday(" t ") - 2440587.5) * 86400.0"
static const char SQL_ATTEMPTS_SINCE[] = "SELECT " UNIX_S("a.started_at") ", " UNIX_S(
    "a.ended_at") ", a.world_size,"
                  " a.world_size * j.gpus_per_worker, a.world_size * j.cpus_per_worker"
                  " FROM attempts a JOIN jobs j ON j.id = a.job_id"
                  " WHERE a.ended_at IS NULL OR a.ended_at > strftime('%Y-%m-%dT%H:%M:%fZ', ?1, "
                  "'unixepoch')"
                  " ORDER BY a.started_at";
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
    [S_JOB_LIST_DESC] = SQL_JOB_LIST_DESC,
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
    [S_EVENTS_ALL] = SQL_EVENTS_ALL,
    [S_EVENTS_NEWEST] = SQL_EVENTS_NEWEST,
    [S_ATTEMPTS_SINCE] = SQL_ATTEMPTS_SINCE,
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

    if (version > store__nmigrations)
        return errno = EPROTO,
               errprintf(err,
                         "the database has schema %d but this ringd knows %d; run a newer "
                         "ringd",
                         version, store__nmigrations);
    for (int v = version; v < n; v++) {
        char pragma[64];
        snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", v + 1);
        if (exec(st, "BEGIN IMMEDIATE", err) < 0)
            return -1;
        if (exec(st, store__migrations[v], err) < 0 || exec(st, pragma, err) < 0) {
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
        migrate(st, store__nmigrations, err) < 0)
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
