/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store_sched.c - the scheduler's side of the store: state transitions with their events,
 * attempts, the event history, deletion and the figures behind /metrics. Each write is one
 * transaction.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "store_impl.h"

/* Writes the scheduler's fields of job id (inside the caller's transaction). */
static int set_sched(struct store *st, const char *id, const struct store_sched *sched,
                     struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_JOB_SCHED];
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, sched->attempts);
    sqlite3_bind_int(s, 3, sched->failures);
    sqlite3_bind_int64(s, 4, sched->not_before);
    sqlite3_bind_int(s, 5, sched->stop_requested);
    return store__step_done(st, s, err, "update job");
}

int store_job_transition(struct store *st, const char *id, const char *state, const char *type,
                         const char *message, const struct store_sched *sched, struct error *err)
{
    char now[40];
    clock_rfc3339(now, sizeof(now));
    if (store__begin(st, err) < 0)
        return -1;
    if (store__set_state(st, id, state, now, err) < 0 ||
        store__event(st, id, now, type, state, message, err) < 0)
        return store__rollback(st);
    if (sched != NULL) {
        if (set_sched(st, id, sched, err) < 0)
            return store__rollback(st);
    }
    return store__commit(st, err);
}

int store_job_transition_if(struct store *st, const char *id, const char *expect, const char *state,
                            const char *type, const char *message, struct error *err)
{
    char now[40];
    clock_rfc3339(now, sizeof(now));
    if (store__begin(st, err) < 0)
        return -1;
    if (store__set_state_if(st, id, expect, state, now, err) < 0 ||
        store__event(st, id, now, type, state, message, err) < 0)
        return store__rollback(st);
    return store__commit(st, err);
}

/* The scheduler's record of the job row under s (SQL_JOBS_ACTIVE's columns). */
static json_t *active_json(sqlite3_stmt *s)
{
    json_error_t jerr;
    json_t *spec = json_loads(store__col(s, 2), 0, &jerr);
    json_t *j = json_pack(
        "{s:s, s:s, s:o, s:i, s:i, s:I, s:i, s:s, s:I, s:f}", "id", store__col(s, 0), "state",
        store__col(s, 1), "spec", spec ? spec : json_object(), "attempts", sqlite3_column_int(s, 3),
        "failures", sqlite3_column_int(s, 4), "not_before", (json_int_t)sqlite3_column_int64(s, 5),
        "stop_requested", sqlite3_column_int(s, 6), "owner", store__col(s, 7), "seq",
        (json_int_t)sqlite3_column_int64(s, 9), "created_s", sqlite3_column_double(s, 10));
    /* The Unix user the job runs as; absent for jobs stored before users were mapped. */
    if (j != NULL && sqlite3_column_type(s, 8) != SQLITE_NULL)
        json_object_set_new(j, "user", json_string(store__col(s, 8)));
    return j;
}

int store_jobs_active(struct store *st, json_t **out, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_JOBS_ACTIVE];
    json_t *arr = json_array();
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        json_array_append_new(arr, active_json(s));
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return store__fail(st, rc, err, "active jobs");
    }
    *out = arr;
    return 0;
}

int store_job_active(struct store *st, const char *id, json_t **out, struct error *err)
{
    return store__get_one(st, st->stmt[S_JOB_ACTIVE], id, STORE_ANYONE, active_json, out, err);
}

int store_jobs_queued(struct store *st, int64_t after, struct store_queued **out, int *n,
                      struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_JOBS_QUEUED];
    struct store_queued *q = NULL;
    int rc, cap = 0, len = 0;

    sqlite3_bind_int64(s, 1, after);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (len == cap) {
            struct store_queued *grown;
            cap = cap ? cap * 2 : 64;
            if ((grown = realloc(q, (size_t)cap * sizeof(*q))) == NULL) {
                sqlite3_reset(s);
                free(q);
                return errno = ENOMEM, errprintf(err, "out of memory");
            }
            q = grown;
        }
        snprintf(q[len].id, sizeof(q[len].id), "%s", store__col(s, 0));
        q[len].min_workers = sqlite3_column_int(s, 1);
        q[len].max_workers = sqlite3_column_int(s, 2);
        q[len].gpus_per_worker = sqlite3_column_int(s, 3);
        q[len].priority = sqlite3_column_int(s, 4);
        q[len].not_before = sqlite3_column_int64(s, 5);
        q[len].seq = sqlite3_column_int64(s, 6);
        q[len].cpus_per_worker = sqlite3_column_int(s, 7);
        q[len].max_restarts = sqlite3_column_int(s, 8);
        snprintf(q[len].owner, sizeof(q[len].owner), "%s", store__col(s, 9));
        q[len].created_at = sqlite3_column_double(s, 10);
        q[len].attempts = sqlite3_column_int(s, 11);
        q[len].failures = sqlite3_column_int(s, 12);
        len++;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) {
        free(q);
        return store__fail(st, rc, err, "queued jobs");
    }
    *out = q;
    *n = len;
    return 0;
}

int store_attempt_start(struct store *st, const char *id, const struct store_attempt *a,
                        const struct store_sched *sched, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_ATTEMPT_INSERT];
    char now[40], msg[256];
    clock_rfc3339(now, sizeof(now));
    if (store__begin(st, err) < 0)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, a->number);
    sqlite3_bind_int(s, 3, a->world_size);
    sqlite3_bind_text(s, 4, a->hosts, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, a->gpus, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, a->backend_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 7, a->run_dir, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 8, now, -1, SQLITE_STATIC);
    if (store__step_done(st, s, err, "insert attempt") < 0)
        return store__rollback(st);
    snprintf(msg, sizeof(msg), "attempt %d: %d worker%s on %s, GPUs [%s], %s %s", a->number,
             a->world_size, a->world_size == 1 ? "" : "s", a->hosts, a->gpus,
             a->id_label ? a->id_label : "attempt", a->backend_id);
    if (store__set_state(st, id, "RUNNING", now, err) < 0 ||
        store__event(st, id, now, "started", "RUNNING", msg, err) < 0)
        return store__rollback(st);
    if (set_sched(st, id, sched, err) < 0)
        return store__rollback(st);
    return store__commit(st, err);
}

int store_attempt_end(struct store *st, const char *id, int number, int exit_status, double stop_s,
                      const char *reason, const char *state, const char *event_type,
                      const struct store_sched *sched, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_ATTEMPT_END];
    char now[40];
    clock_rfc3339(now, sizeof(now));
    if (store__begin(st, err) < 0)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, number);
    sqlite3_bind_text(s, 3, now, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 4, exit_status);
    sqlite3_bind_text(s, 5, reason, -1, SQLITE_STATIC);
    if (stop_s >= 0)
        sqlite3_bind_double(s, 6, stop_s);
    if (store__step_done(st, s, err, "end attempt") < 0 ||
        store__set_state(st, id, state, now, err) < 0 ||
        store__event(st, id, now, event_type, state, reason, err) < 0)
        return store__rollback(st);
    if (set_sched(st, id, sched, err) < 0)
        return store__rollback(st);
    return store__commit(st, err);
}

int store_attempts(struct store *st, const char *id, json_t **out, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_ATTEMPTS_OF];
    json_t *arr = json_array();
    int rc;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *a =
            json_pack("{s:i, s:i, s:s, s:s, s:s, s:s, s:s}", "number", sqlite3_column_int(s, 0),
                      "world_size", sqlite3_column_int(s, 1), "hosts", store__col(s, 2), "gpus",
                      store__col(s, 3), "backend_id", store__col(s, 4), "run_dir", store__col(s, 5),
                      "started_at", store__col(s, 6));
        if (sqlite3_column_type(s, 7) != SQLITE_NULL) {
            json_object_set_new(a, "ended_at", json_string(store__col(s, 7)));
            json_object_set_new(a, "exit_status", json_integer(sqlite3_column_int(s, 8)));
            json_object_set_new(a, "reason", json_string(store__col(s, 9)));
        }
        if (sqlite3_column_type(s, 10) != SQLITE_NULL)
            json_object_set_new(a, "start_overhead_s", json_real(sqlite3_column_double(s, 10)));
        if (sqlite3_column_type(s, 11) != SQLITE_NULL)
            json_object_set_new(a, "stop_overhead_s", json_real(sqlite3_column_double(s, 11)));
        if (sqlite3_column_type(s, 12) != SQLITE_NULL)
            json_object_set_new(a, "samples_per_s", json_real(sqlite3_column_double(s, 12)));
        json_object_set_new(a, "ran_s", json_real(sqlite3_column_double(s, 13)));
        json_array_append_new(arr, a);
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return store__fail(st, rc, err, "attempts");
    }
    *out = arr;
    return 0;
}

int store_events(struct store *st, const char *id, int64_t after, int limit, json_t **out,
                 struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_EVENTS_OF];
    json_t *arr = json_array();
    int rc;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, after);
    sqlite3_bind_int(s, 3, limit);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *e = json_pack("{s:I, s:s, s:s}", "id", (json_int_t)sqlite3_column_int64(s, 0),
                              "time", store__col(s, 1), "type", store__col(s, 2));
        if (sqlite3_column_type(s, 3) != SQLITE_NULL)
            json_object_set_new(e, "state", json_string(store__col(s, 3)));
        if (sqlite3_column_type(s, 4) != SQLITE_NULL)
            json_object_set_new(e, "message", json_string(store__col(s, 4)));
        json_array_append_new(arr, e);
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return store__fail(st, rc, err, "events");
    }
    *out = arr;
    return 0;
}

int store_events_newest(struct store *st, int64_t *id, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_EVENTS_NEWEST];
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *id = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : store__fail(st, rc, err, "newest event");
}

int store_events_all(struct store *st, int64_t owner, int64_t after, int limit, json_t **out,
                     int64_t *upto, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_EVENTS_ALL];
    json_t *arr;
    int64_t newest, last = after;
    int rc, n = 0;

    /* The bound first: an event committed after it waits for the next call, which starts
     * past the bound, so none is skipped. */
    if (store_events_newest(st, &newest, err) < 0)
        return -1;
    if ((arr = json_array()) == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    sqlite3_bind_int64(s, 1, after);
    sqlite3_bind_int64(s, 2, newest);
    if (owner != STORE_ANYONE)
        sqlite3_bind_int64(s, 3, owner);
    sqlite3_bind_int(s, 4, limit);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *e = json_pack("{s:I, s:s, s:s, s:s}", "id", (json_int_t)sqlite3_column_int64(s, 0),
                              "job_id", store__col(s, 5), "time", store__col(s, 1), "type",
                              store__col(s, 2));
        if (e != NULL && sqlite3_column_type(s, 3) != SQLITE_NULL)
            json_object_set_new(e, "state", json_string(store__col(s, 3)));
        if (e != NULL && sqlite3_column_type(s, 4) != SQLITE_NULL)
            json_object_set_new(e, "message", json_string(store__col(s, 4)));
        last = sqlite3_column_int64(s, 0);
        n++;
        if (e == NULL || json_array_append_new(arr, e) < 0) {
            rc = SQLITE_NOMEM;
            break;
        }
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return store__fail(st, rc, err, "events");
    }
    *upto = n < limit && newest > after ? newest : last;
    *out = arr;
    return 0;
}

int store_attempts_since(struct store *st, double since, json_t **out, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_ATTEMPTS_SINCE];
    json_t *arr = json_array();
    int rc = SQLITE_NOMEM;

    sqlite3_bind_double(s, 1, since);
    while (arr != NULL && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *a = json_pack(
            "{s:f, s:o, s:i, s:i, s:i}", "start_s", sqlite3_column_double(s, 0), "end_s",
            sqlite3_column_type(s, 1) == SQLITE_NULL ? json_null()
                                                     : json_real(sqlite3_column_double(s, 1)),
            "workers", sqlite3_column_int(s, 2), "gpus", sqlite3_column_int(s, 3), "slots",
            sqlite3_column_int(s, 4));
        if (a == NULL || json_array_append_new(arr, a) < 0) {
            rc = SQLITE_NOMEM;
            break;
        }
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return store__fail(st, rc, err, "attempts");
    }
    *out = arr;
    return 0;
}

int store_job_delete(struct store *st, const char *id, struct error *err)
{
    sqlite3_stmt *s;
    if (store__begin(st, err) < 0)
        return -1;
    s = st->stmt[S_IDEM_DELETE];
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    if (store__step_done(st, s, err, "delete idempotency keys") < 0)
        return store__rollback(st);
    s = st->stmt[S_JOB_DELETE];
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    if (store__step_done(st, s, err, "delete job") < 0)
        return store__rollback(st);
    return store__commit(st, err);
}

int store_attempt_progress(struct store *st, const char *id, int number, double start_s,
                           double samples_per_s, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_ATTEMPT_PROGRESS];
    if (store__begin(st, err) < 0)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, number);
    if (start_s >= 0)
        sqlite3_bind_double(s, 3, start_s);
    if (samples_per_s >= 0)
        sqlite3_bind_double(s, 4, samples_per_s);
    if (store__step_done(st, s, err, "attempt progress") < 0)
        return store__rollback(st);
    return store__commit(st, err);
}

int store_attempt_placed(struct store *st, const char *id, int number, const char *hosts,
                         const char *gpus, const char *state, const char *message,
                         struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_ATTEMPT_PLACED];
    char now[40];
    clock_rfc3339(now, sizeof(now));
    if (store__begin(st, err) < 0)
        return -1;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, number);
    sqlite3_bind_text(s, 3, hosts, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, gpus, -1, SQLITE_STATIC);
    if (store__step_done(st, s, err, "attempt placement") < 0 ||
        store__event(st, id, now, "placed", state, message, err) < 0)
        return store__rollback(st);
    return store__commit(st, err);
}

/* Adds the rows of s (name, integer) to obj; SQLite's code when it stopped. */
static int metric_rows(sqlite3_stmt *s, json_t *obj)
{
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        json_object_set_new(obj, store__col(s, 0), json_integer(sqlite3_column_int64(s, 1)));
    sqlite3_reset(s);
    return rc;
}

int store_metrics(struct store *st, json_t **out, struct error *err)
{
    json_t *jobs = json_object(), *counters = json_object(), *histograms = json_object();
    sqlite3_stmt *s;
    int64_t submissions = 0;
    int rc;

    *out =
        json_pack("{s:o, s:o, s:o}", "jobs", jobs, "counters", counters, "histograms", histograms);
    if (*out == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    if ((rc = metric_rows(st->stmt[S_STATE_COUNTS], jobs)) != SQLITE_DONE ||
        (rc = metric_rows(st->stmt[S_METRIC_COUNTERS], counters)) != SQLITE_DONE)
        goto error;
    s = st->stmt[S_SUBMISSIONS];
    if ((rc = sqlite3_step(s)) == SQLITE_ROW)
        submissions = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        goto error;
    json_object_set_new(*out, "submissions", json_integer(submissions));
    s = st->stmt[S_METRIC_HISTOGRAMS];
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *name = store__col(s, 0);
        json_t *h = json_object_get(histograms, name);
        if (h == NULL) {
            h = json_pack("{s:I, s:f, s:[]}", "count", (json_int_t)sqlite3_column_int64(s, 1),
                          "sum", sqlite3_column_double(s, 2), "buckets");
            json_object_set_new(histograms, name, h);
        }
        json_array_append_new(json_object_get(h, "buckets"),
                              json_pack("[f, I]", sqlite3_column_double(s, 3),
                                        (json_int_t)sqlite3_column_int64(s, 4)));
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        goto error;
    return 0;
error:
    json_decref(*out);
    *out = NULL;
    return store__fail(st, rc, err, "metrics");
}
