/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.h - ringd's SQLite store: jobs, their events, idempotency keys, API tokens and the
 * principals (users) that tokens speak for and jobs belong to.
 *
 * One struct store per thread (SQLite connections are not shared between threads); all of
 * them open the same file in WAL mode with a busy timeout, so readers never block the writer
 * and writers queue instead of failing. Every write is one short IMMEDIATE transaction that
 * commits (synchronous=FULL: on disk) before the caller answers the client.
 *
 * Errors: functions return 0 or -1 with errno set (ENOENT not found, EEXIST conflict,
 * EBUSY locked too long, EUCLEAN the database file is corrupt, EIO anything else) and a
 * message in err when err is not NULL.
 *
 * Who owns a job is a principal's id (a row of the principals table), never a name: ids come
 * from AUTOINCREMENT and are never reused, so a name given out again, or the same name given
 * to another Unix user, is another principal that cannot reach the first one's jobs. Where a
 * function takes an owner, STORE_ANYONE (an admin's view) matches every owner.
 */
#ifndef RINGD_STORE_H
#define RINGD_STORE_H

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"

struct store;

/* An owner argument that matches every job's owner: what an admin sees. */
#define STORE_ANYONE ((int64_t)-1)
/* The owner of the jobs submitted to a ringd without auth: its one local caller, who is no
 * principal (no principal has id 0). Only an admin's view (STORE_ANYONE) reaches them. */
#define STORE_LOCAL ((int64_t)0)

/* Opens (creating) path and runs the numbered migrations up to the newest. */
int store_open(const char *path, struct store **out, struct error *err);
/* Finalizes the statements and closes. Accepts NULL; keeps errno. */
void store_close(struct store *st);
/* The schema version (PRAGMA user_version) after migrations. */
int store_schema_version(struct store *st);

/*
 * Creates a job of principal owner (named owner_name, as the API shows it) in state QUEUED
 * with its first event, in one transaction. spec is the validated JobSpec (borrowed). With
 * idem_key, a second call with the same owner and key returns the job the first one created
 * (*created = 0) when req_hash matches, and fails with EEXIST when the request differs. On
 * success *job_out is a new reference to the job's JSON (the caller decrefs).
 */
int store_job_create(struct store *st, int64_t owner, const char *owner_name, json_t *spec,
                     const char *idem_key, const char *req_hash, json_t **job_out, int *created,
                     struct error *err);
/*
 * Group commit: the submissions of many requests in ONE transaction, so one fsync covers
 * them all. Each runs as store_job_create would, under its own savepoint (a failure undoes
 * only its rows) and gets its own result in rc/errnum/err. When the transaction itself
 * cannot begin or commit, nothing is stored, every submission fails with that reason, and
 * the call returns -1.
 */
struct store_submission {
    /* in (borrowed) */
    int64_t owner_id;  /* the principal that owns the job (STORE_LOCAL without auth) */
    const char *owner; /* its name, as the API shows it */
    json_t *spec;
    const char *idem_key; /* NULL: none */
    const char *req_hash;
    const char *ckpt_prefix; /* for job_text: the default checkpoint_dir's prefix */
    const char *run_as;      /* the Unix user the job runs as (NULL: ringd's own) */
    /* out */
    int rc;      /* 0 or -1 */
    int errnum;  /* errno when rc is -1 */
    int created; /* 0: an earlier submission with the same key */
    char id[32];
    char *job_text; /* a new job as store_job_render would give it (malloc'ed; the caller
                     * frees it), or NULL (a repeated key, a failure, out of memory) */
    struct error err;
};
int store_job_create_batch(struct store *st, struct store_submission *const *subs, int n,
                           struct error *err);
/* Marks sub failed with errno errnum and the reason why (its job_text, if any, freed). */
void store_submission_fail(struct store_submission *sub, int errnum, const struct error *why);
/* The job as JSON (new reference), or ENOENT when there is no job id of owner (STORE_ANYONE:
 * of anyone). */
int store_job_get(struct store *st, const char *id, int64_t owner, json_t **out, struct error *err);
/*
 * The job as the API shows it, as JSON text rendered by SQLite (a malloc'ed string): the
 * fields of store_job_get plus checkpoint_dir (ckpt_prefix followed by the id when the spec
 * names none) and its attempts. *last_run_dir (when not NULL) gets the newest attempt's run
 * directory (malloc'ed) or NULL. ENOENT when there is no such job of owner (STORE_ANYONE:
 * of anyone).
 */
int store_job_render(struct store *st, const char *id, int64_t owner, const char *ckpt_prefix,
                     char **out, char **last_run_dir, struct error *err);

/* Which jobs a list shows; a NULL field matches anything. */
struct store_filter {
    int64_t owner_id;  /* the owner's principal, or STORE_ANYONE (0 is STORE_LOCAL's jobs) */
    const char *owner; /* the owner's name: every principal that had it */
    const char *state;
    const char *label_key, *label_value; /* one label key=value */
    int newest_first; /* 1: the newest job first, each page going on with older ones */
};

/*
 * Jobs matching f in creation order after cursor (0 = from the start; with f->newest_first,
 * in the reverse order, 0 being the newest), at most limit, as a JSON array text (malloc'ed)
 * of the objects store_job_render gives, without attempts. *next is the cursor for the next
 * page or 0 when there is none.
 */
int store_job_list(struct store *st, const struct store_filter *f, int64_t cursor, int limit,
                   const char *ckpt_prefix, char **out, int64_t *next, struct error *err);

/*
 * Tokens: hash is the hex SHA-256 of the secret; the secret itself is never stored. Every
 * token speaks for one principal, found or made when the token is created:
 * - a live principal (one with a token not revoked) named name with the same Unix user
 *   (unix_user, NULL: none) and the same kind (admin or not): the token joins it, and sees
 *   its jobs (a key rotated: create the new token, then revoke the old one);
 * - a live principal named name for another Unix user, or of the other kind: refused with
 *   EEXIST, err saying which and what to do;
 * - else a new principal. A name whose tokens were all revoked is retired: its principal
 *   stays with its jobs, and the new token starts a new one that does not see them.
 * expires is when the token stops working, in Unix seconds (0: never). *principal (when not
 * NULL) gets the token's principal.
 */
int store_token_create(struct store *st, const char *id, const char *name, const char *hash,
                       int admin, const char *unix_user, int64_t expires, int64_t *principal,
                       struct error *err);
/* A live token as store_token_find gives it. */
struct store_token {
    char hash[65];
    char name[128];    /* its principal's name */
    char user[64];     /* its Unix user, "" when it has none */
    int64_t principal; /* who it speaks for: the owner of the jobs it submits */
    int admin;
    int64_t expires; /* Unix seconds; 0: never. An expired token is still found: the caller
                      * decides, so that it can say why the token no longer works. */
};
/* Finds the unrevoked token id into *out, or fails with ENOENT (unknown or revoked). */
int store_token_find(struct store *st, const char *id, struct store_token *out, struct error *err);
/* Tokens as a new array of {id, name, principal, admin, user?, created_at, revoked_at?,
 * expires_at?}, oldest first; only principal's when it is not STORE_ANYONE. Neither secrets
 * nor hashes. */
int store_token_list(struct store *st, int64_t principal, json_t **out, struct error *err);
/* Revokes token id (when principal is not STORE_ANYONE, only if it is principal's); revoking
 * twice keeps the first time. Revoking a principal's last live token retires the principal
 * (see store_token_create). *out (when not NULL) gets the token as store_token_list shows it.
 * ENOENT when there is no such token (of principal); EPERM when it is the last live admin
 * token. */
int store_token_revoke(struct store *st, const char *id, int64_t principal, json_t **out,
                       struct error *err);
/* Number of tokens ever created (revoked ones included). */
int store_token_count(struct store *st, int *count, struct error *err);

/*
 * Backups and checks (backup.c).
 *
 * store_backup copies the database as it is at one instant (SQLite's online backup API in
 * one step: one read snapshot, so commits going on meanwhile neither wait for it nor tear
 * it) into a new file in dir, and gives that file open for reading at its start in *fd
 * (the caller closes it), with its size in *size. The file is unlinked before the call
 * returns: nothing is left behind, whatever becomes of the caller. It is 0600, as it holds
 * what the database holds.
 */
int store_backup(struct store *st, const char *dir, int *fd, int64_t *size, struct error *err);
/* Removes from dir the copies of backups that a crash cut short (store_backup unlinks its
 * copy at once, but a crash between its creation and then leaves it). Call it while no
 * backup can be under way: at start, holding the data directory's lock. */
void store_backup_sweep(const char *dir);
/*
 * Checks the database file at path (PRAGMA quick_check: every page and b-tree, but not that
 * indexes agree with their tables) without changing it. Returns 0 when it is sound or does
 * not exist yet; -1 with EUCLEAN and the first problems found in err when it is corrupt, or
 * another errno when it cannot be read.
 */
int store_check(const char *path, struct error *err);

/* ---- the scheduler's side: every transition is one transaction with its event ---- */

/* What the scheduler keeps per job besides its state. */
struct store_sched {
    int attempts;       /* attempts started so far */
    int failures;       /* failed attempts (counted against max_restarts) */
    int64_t not_before; /* unix seconds before which a retry must not start (backoff) */
    int stop_requested; /* what a STOPPING job is being stopped for: 1 its user's stop,
                         * 2 a cancel, 0 the scheduler (a resize or a preemption) */
};

struct store_attempt {
    int number; /* 1, 2, ... */
    int world_size;
    const char *hosts;      /* "localhost:4" */
    const char *gpus;       /* "0,1,2,3" or "" */
    const char *backend_id; /* the process group, or the Slurm job id */
    const char *run_dir;
    const char *id_label; /* what backend_id is, for the event: "process group", "Slurm job" */
};

/* Sets state, records an event of type with message, and (when sched) the scheduler fields. */
int store_job_transition(struct store *st, const char *id, const char *state, const char *type,
                         const char *message, const struct store_sched *sched, struct error *err);
/* As store_job_transition, but only from state expect: else fails with EAGAIN. */
int store_job_transition_if(struct store *st, const char *id, const char *expect, const char *state,
                            const char *type, const char *message, struct error *err);
/* Jobs not finished (QUEUED, STARTING, RUNNING, STOPPING) in creation order, as a new array
 * of {id, state, spec, attempts, failures, not_before, stop_requested, owner, user?, seq,
 * created_s (unix seconds)}. */
int store_jobs_active(struct store *st, json_t **out, struct error *err);
/* One job's record as store_jobs_active gives it (a new reference), or ENOENT. */
int store_job_active(struct store *st, const char *id, json_t **out, struct error *err);

/* What the scheduler needs of a queued job. */
struct store_queued {
    char id[32];
    char owner[64];
    int min_workers, max_workers, gpus_per_worker, cpus_per_worker, priority, max_restarts;
    int attempts, failures;
    int64_t not_before;
    int64_t seq;       /* submission order */
    double created_at; /* unix seconds */
};
/* The QUEUED jobs submitted after seq after (0: all), in submission order, as a malloc'ed
 * array of *n (the caller frees it). Reads no spec: a long queue costs a row each. */
int store_jobs_queued(struct store *st, int64_t after, struct store_queued **out, int *n,
                      struct error *err);

/* Records a started attempt and moves the job to RUNNING. */
int store_attempt_start(struct store *st, const char *id, const struct store_attempt *a,
                        const struct store_sched *sched, struct error *err);
/* Records how attempt number ended (stop_s: seconds from the stop request to the exit, or
 * < 0 when nobody asked it to stop) and moves the job to state with an event. */
int store_attempt_end(struct store *st, const char *id, int number, int exit_status, double stop_s,
                      const char *reason, const char *state, const char *event_type,
                      const struct store_sched *sched, struct error *err);
/* Records attempt number's throughput (samples_per_s) and, when start_s >= 0, the seconds
 * from its start to its first progress report. */
int store_attempt_progress(struct store *st, const char *id, int number, double start_s,
                           double samples_per_s, struct error *err);
/* Attempt number runs on hosts with gpus (its resource manager placed it there, not where
 * it was planned): updates its record, with a "placed" event in the job's state (unchanged)
 * carrying message. */
int store_attempt_placed(struct store *st, const char *id, int number, const char *hosts,
                         const char *gpus, const char *state, const char *message,
                         struct error *err);
/* The job's attempts, oldest first, as a new array of {number, world_size, hosts, gpus,
 * backend_id, run_dir, started_at, ran_s, [ended_at, exit_status, reason,]
 * [start_overhead_s,] [stop_overhead_s,] [samples_per_s]} (ran_s: until now if running). */
int store_attempts(struct store *st, const char *id, json_t **out, struct error *err);

/* Events of job id after event id after (0: from the first), at most limit, as a new array
 * of {id, time, type, state?, message?}. */
int store_events(struct store *st, const char *id, int64_t after, int limit, json_t **out,
                 struct error *err);
/*
 * Events of every job of owner (STORE_ANYONE: of anyone's) after event id after, oldest
 * first, at most limit, as a new array of {id, job_id, time, type, state?, message?}.
 * *upto gets where the next call goes on from: the last event returned or, when fewer than
 * limit came, the newest event (anyone's) there was at the call. So a caller whose jobs are
 * quiet while others' are busy moves on past the others' events instead of reading them
 * again at every call.
 */
int store_events_all(struct store *st, int64_t owner, int64_t after, int limit, json_t **out,
                     int64_t *upto, struct error *err);
/* The newest event's id (anyone's; 0 when there is none) into *id. */
int store_events_newest(struct store *st, int64_t *id, struct error *err);
/*
 * The attempts that ran at some time after since (Unix seconds): those still running and
 * those that ended after it, by start time, as a new array of {start_s, end_s (null while
 * running), workers, gpus, slots} (times in Unix seconds; gpus and slots all its workers
 * held together).
 */
int store_attempts_since(struct store *st, double since, json_t **out, struct error *err);
/* Removes a job with its attempts, events and idempotency keys. */
int store_job_delete(struct store *st, const char *id, struct error *err);
/*
 * For /metrics, from a fixed number of rows however many jobs there are (triggers keep
 * them, migration 9): *out gets a new object
 *   {"jobs": {STATE: n}, "submissions": n, "counters": {NAME: n},
 *    "histograms": {NAME: {"count": n, "sum": x, "buckets": [[le, n], ...]}}}
 * (buckets by increasing le, each counting the observations <= le). Counters and
 * histograms never go down: deleting a job leaves them.
 */
int store_metrics(struct store *st, json_t **out, struct error *err);

/*
 * Checkpoints off the commit path (checkpoint.c): starting one makes every connection this
 * process opens afterwards leave WAL checkpoints to its thread, which runs them in the
 * background every 250 ms and once more at stop. Returns NULL with err on failure.
 */
struct store_checkpointer;
struct store_checkpointer *store_checkpointer_start(const char *path, struct error *err);
/* Stops the thread after a final checkpoint. Accepts NULL. */
void store_checkpointer_stop(struct store_checkpointer *c);

/*
 * A batch: the writes between store_batch_begin and store_batch_commit on st share one
 * transaction (the scheduler's pass). When one of them fails, store_batch_commit rolls all
 * of them back and fails (EIO).
 */
int store_batch_begin(struct store *st, struct error *err);
int store_batch_commit(struct store *st, struct error *err);

/*
 * One read transaction around several reads (a GET request's token, job and attempts): one
 * snapshot, and one set of WAL locks instead of one per statement.
 */
int store_read_begin(struct store *st, struct error *err);
void store_read_end(struct store *st);

#endif /* RINGD_STORE_H */
