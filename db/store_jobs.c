/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store_jobs.c - jobs in the store as the API sees them: submission (one or a batch in one
 * transaction, with idempotency keys), a job's document, one job and the filtered list.
 * The SQL text and the connection are store.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <sqlite3.h>

#include "common/clock.h"
#include "store_impl.h"

static void new_job_id(char *buf, size_t len)
{
    unsigned char r[8];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        memcpy(r, &ts.tv_nsec, sizeof(r) < sizeof(ts.tv_nsec) ? sizeof(r) : sizeof(ts.tv_nsec));
    }
    snprintf(buf, len, "j-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5],
             r[6], r[7]);
}

/* The job row under the cursor as JSON. */
static json_t *row_json(sqlite3_stmt *s)
{
    json_error_t jerr;
    json_t *spec = json_loads(store__col(s, 4), 0, &jerr);
    return json_pack("{s:s, s:s, s:s, s:I, s:s, s:o, s:s, s:s}", "id", store__col(s, 0), "name",
                     store__col(s, 1), "owner", store__col(s, 2), "owner_id",
                     (json_int_t)sqlite3_column_int64(s, 7), "state", store__col(s, 3), "spec",
                     spec ? spec : json_object(), "created_at", store__col(s, 5), "updated_at",
                     store__col(s, 6));
}

int store_job_get(struct store *st, const char *id, int64_t owner, json_t **out, struct error *err)
{
    return store__get_one(st, st->stmt[S_JOB_GET], id, owner, row_json, out, err);
}

/* A growing text buffer; a failed append leaves ok = 0. */
struct text {
    char *p;
    size_t len, cap;
    int ok;
};

static void text_add(struct text *t, const char *s, size_t n)
{
    if (!t->ok)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        char *grown;
        while (cap < t->len + n + 1)
            cap *= 2;
        if ((grown = realloc(t->p, cap)) == NULL) {
            t->ok = 0;
            return;
        }
        t->p = grown;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

/* s as a JSON string literal, quotes included (malloc'ed; NULL when out of memory). */
static char *json_quote(const char *s)
{
    json_t *v = json_string_nocheck(s);
    char *q = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    return q;
}

/* Appends s as a JSON string. */
static void text_add_quoted(struct text *t, const char *s)
{
    char *q = json_quote(s);
    if (q == NULL)
        t->ok = 0;
    else
        text_add(t, q, strlen(q));
    free(q);
}

/*
 * Appends the API's job object without its closing brace: the stored document doc (n bytes)
 * with checkpoint_dir added: ckpt, or by default the prefix followed by the id. prefix_q is
 * the prefix as a JSON string (json_quote), quoted once per request rather than per row.
 */
static void render_doc(struct text *t, const char *doc, size_t n, const char *id, const char *ckpt,
                       const char *prefix_q)
{
    if (n > 1 && doc[n - 1] == '}') {
        text_add(t, doc, n - 1);
        text_add(t, ",", 1);
    } else { /* no document: a row written outside ringd; at least its id */
        text_add(t, "{\"id\":", 6);
        text_add_quoted(t, id);
        text_add(t, ",", 1);
    }
    text_add(t, "\"checkpoint_dir\":", 17);
    if (ckpt == NULL) { /* the id has nothing to escape */
        text_add(t, prefix_q, strlen(prefix_q) - 1);
        text_add(t, id, strlen(id));
        text_add(t, "\"", 1);
    } else {
        text_add_quoted(t, ckpt);
    }
}

/* render_doc for the row under s (JOB_COLUMNS). */
static void render_row(struct text *t, sqlite3_stmt *s, const char *prefix_q)
{
    render_doc(t, store__col(s, 0), (size_t)sqlite3_column_bytes(s, 0), store__col(s, 1),
               sqlite3_column_type(s, 2) == SQLITE_NULL ? NULL : store__col(s, 2), prefix_q);
}

/* The values of S_JOB_INSERT for submission sub: its spec as text, submitted at now. */
static void bind_job(sqlite3_stmt *s, const struct store_submission *sub, const char *text,
                     const char *now)
{
    sqlite3_bind_text(s, 1, sub->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, json_string_value(json_object_get(sub->spec, "name")), -1,
                      SQLITE_STATIC);
    sqlite3_bind_text(s, 3, sub->owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, text, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, now, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, json_string_value(json_object_get(sub->spec, "checkpoint_dir")), -1,
                      SQLITE_STATIC);
    {
        json_t *w = json_object_get(sub->spec, "workers");
        json_int_t min = json_is_integer(w) ? json_integer_value(w)
                                            : json_integer_value(json_object_get(w, "min"));
        json_int_t max = json_is_integer(w) ? min : json_integer_value(json_object_get(w, "max"));
        sqlite3_bind_int64(s, 7, min > 0 ? min : 1);
        sqlite3_bind_int64(s, 8, max > 0 ? max : 1);
        sqlite3_bind_int64(s, 9, json_integer_value(json_object_get(sub->spec, "gpus_per_worker")));
        sqlite3_bind_int64(s, 10, json_integer_value(json_object_get(sub->spec, "priority")));
        {
            json_t *cpw = json_object_get(sub->spec, "cpus_per_worker");
            sqlite3_bind_int64(s, 12, json_is_integer(cpw) ? json_integer_value(cpw) : 1);
        }
        sqlite3_bind_int64(s, 13, json_integer_value(json_object_get(sub->spec, "max_restarts")));
    }
    sqlite3_bind_text(s, 11, sub->run_as, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 14, sub->owner_id);
}

/* The job the insert returned (s at its row) as the API shows it, answered without a read:
 * a new string, or NULL when out of memory (the caller then reads it back). */
static char *inserted_doc(sqlite3_stmt *s, const struct store_submission *sub)
{
    struct text t = {.ok = 1};
    char *prefix_q = json_quote(sub->ckpt_prefix ? sub->ckpt_prefix : "");
    if (prefix_q != NULL)
        render_doc(&t, store__col(s, 0), (size_t)sqlite3_column_bytes(s, 0), sub->id,
                   json_string_value(json_object_get(sub->spec, "checkpoint_dir")), prefix_q);
    text_add(&t, ",\"attempts\":[]}", 15);
    if (prefix_q == NULL || !t.ok) {
        free(t.p);
        t.p = NULL;
    }
    free(prefix_q);
    return t.p;
}

/*
 * One submission inside the open transaction, under its own savepoint so that its failure
 * undoes only its own rows. Sets sub->id, sub->created, and sub->rc/errnum/err.
 */
static void create_one(struct store *st, struct store_submission *sub)
{
    char now[40];
    char *text = NULL;
    sqlite3_stmt *s;
    int rc;

    sub->rc = -1;
    if (store__step_done(st, st->stmt[S_SAVEPOINT], &sub->err, "savepoint") < 0)
        goto out;
    if (sub->idem_key != NULL) {
        s = st->stmt[S_IDEM_GET];
        sqlite3_bind_int64(s, 1, sub->owner_id);
        sqlite3_bind_text(s, 2, sub->idem_key, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            int same = strcmp(store__col(s, 1), sub->req_hash) == 0;
            snprintf(sub->id, sizeof(sub->id), "%s", store__col(s, 0));
            sqlite3_reset(s);
            sqlite3_clear_bindings(s);
            store__step_done(st, st->stmt[S_RELEASE], NULL, "release");
            if (!same) {
                errno = EEXIST;
                errprintf(&sub->err, "Idempotency-Key '%s' was used for a different request",
                          sub->idem_key);
                goto out;
            }
            sub->created = 0;
            sub->rc = 0;
            goto out;
        }
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        if (rc != SQLITE_DONE) {
            store__fail(st, rc, &sub->err, "idempotency lookup");
            goto undo;
        }
    }
    new_job_id(sub->id, sizeof(sub->id));
    clock_rfc3339(now, sizeof(now));
    text = json_dumps(sub->spec, JSON_COMPACT | JSON_SORT_KEYS);
    if (text == NULL) {
        errno = ENOMEM;
        errprintf(&sub->err, "out of memory");
        goto undo;
    }
    s = st->stmt[S_JOB_INSERT];
    bind_job(s, sub, text, now);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) { /* the new job as the API shows it, answered without a read */
        sub->job_text = inserted_doc(s, sub);
        rc = sqlite3_step(s);
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) {
        store__fail(st, rc, &sub->err, "insert job");
        goto undo;
    }
    if (store__event(st, sub->id, now, "submitted", "QUEUED", "job accepted", &sub->err) < 0)
        goto undo;
    if (sub->idem_key != NULL) {
        s = st->stmt[S_IDEM_INSERT];
        sqlite3_bind_int64(s, 1, sub->owner_id);
        sqlite3_bind_text(s, 2, sub->idem_key, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, sub->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, sub->req_hash, -1, SQLITE_STATIC);
        if (store__step_done(st, s, &sub->err, "insert idempotency key") < 0)
            goto undo;
    }
    store__step_done(st, st->stmt[S_RELEASE], NULL, "release");
    sub->created = 1;
    sub->rc = 0;
    goto out;
undo : {
    int saved = errno;
    free(sub->job_text);
    sub->job_text = NULL;
    store__step_done(st, st->stmt[S_ROLLBACK_TO], NULL, "rollback to savepoint");
    store__step_done(st, st->stmt[S_RELEASE], NULL, "release");
    errno = saved;
}
out:
    sub->errnum = sub->rc < 0 ? errno : 0;
    free(text);
}

int store_job_create_batch(struct store *st, struct store_submission *const *subs, int n,
                           struct error *err)
{
    struct error local;
    if (err == NULL)
        err = &local;
    if (store__begin(st, err) < 0)
        goto failed;
    for (int i = 0; i < n; i++)
        create_one(st, subs[i]);
    if (store__commit(st, err) == 0)
        return 0;
failed : /* nothing of the batch is stored: every submission fails with the reason */
{
    int e = errno;
    for (int i = 0; i < n; i++)
        store_submission_fail(subs[i], e, err);
    errno = e;
}
    return -1;
}

void store_submission_fail(struct store_submission *sub, int errnum, const struct error *why)
{
    free(sub->job_text);
    sub->job_text = NULL;
    sub->rc = -1;
    sub->errnum = errnum;
    sub->created = 0;
    sub->err = *why;
}

int store_job_create(struct store *st, int64_t owner, const char *owner_name, json_t *spec,
                     const char *idem_key, const char *req_hash, json_t **job_out, int *created,
                     struct error *err)
{
    struct store_submission sub = {.owner_id = owner,
                                   .owner = owner_name,
                                   .spec = spec,
                                   .idem_key = idem_key,
                                   .req_hash = req_hash};
    struct store_submission *one = &sub;

    if (store_job_create_batch(st, &one, 1, err) < 0)
        return -1;
    if (sub.rc < 0) {
        if (err)
            *err = sub.err;
        errno = sub.errnum;
        return -1;
    }
    free(sub.job_text);
    *created = sub.created;
    return store_job_get(st, sub.id, owner, job_out, err);
}

int store_job_render(struct store *st, const char *id, int64_t owner, const char *ckpt_prefix,
                     char **out, char **last_run_dir, struct error *err)
{
    sqlite3_stmt *s = st->stmt[S_JOB_RENDER];
    struct text t = {.ok = 1};
    char *prefix_q = json_quote(ckpt_prefix);
    int rc;

    *out = NULL;
    if (last_run_dir)
        *last_run_dir = NULL;
    if (prefix_q == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    if (owner != STORE_ANYONE)
        sqlite3_bind_int64(s, 2, owner);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        render_row(&t, s, prefix_q);
        text_add(&t, ",\"attempts\":", 12);
        text_add(&t, store__col(s, 3), (size_t)sqlite3_column_bytes(s, 3));
        text_add(&t, "}", 1);
        if (last_run_dir && sqlite3_column_type(s, 4) != SQLITE_NULL)
            *last_run_dir = strdup(store__col(s, 4));
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    free(prefix_q);
    if (rc == SQLITE_DONE)
        return errno = ENOENT, errprintf(err, "job %s not found", id);
    if (rc != SQLITE_ROW || !t.ok) {
        free(t.p);
        if (last_run_dir) {
            free(*last_run_dir);
            *last_run_dir = NULL;
        }
        if (rc != SQLITE_ROW)
            return store__fail(st, rc, err, "job lookup");
        return errno = ENOMEM, errprintf(err, "out of memory");
    }
    *out = t.p;
    return 0;
}

int store_job_list(struct store *st, const struct store_filter *f, int64_t cursor, int limit,
                   const char *ckpt_prefix, char **out, int64_t *next, struct error *err)
{
    sqlite3_stmt *s = st->stmt[f->newest_first ? S_JOB_LIST_DESC : S_JOB_LIST];
    struct text t = {.ok = 1};
    char *prefix_q = json_quote(ckpt_prefix);
    int64_t last = 0;
    int rc = SQLITE_DONE, n = 0;

    sqlite3_bind_int64(s, 1, cursor);
    if (f->owner_id != STORE_ANYONE)
        sqlite3_bind_int64(s, 7, f->owner_id);
    if (f->owner)
        sqlite3_bind_text(s, 2, f->owner, -1, SQLITE_STATIC);
    if (f->state)
        sqlite3_bind_text(s, 3, f->state, -1, SQLITE_STATIC);
    if (f->label_key) {
        sqlite3_bind_text(s, 4, f->label_key, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 5, f->label_value, -1, SQLITE_STATIC);
    }
    /* One more than asked: it tells whether a next page exists. */
    sqlite3_bind_int(s, 6, limit + 1);
    t.p = malloc(t.cap = (size_t)limit * 640 + 64); /* a typical job is 400-600 bytes */
    t.ok = t.p != NULL && prefix_q != NULL;
    text_add(&t, "[", 1);
    while (t.ok && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == limit)
            break;
        if (n > 0)
            text_add(&t, ",", 1);
        render_row(&t, s, prefix_q);
        text_add(&t, "}", 1);
        last = sqlite3_column_int64(s, 3);
        n++;
    }
    text_add(&t, "]", 1);
    *next = rc == SQLITE_ROW ? last : 0;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    free(prefix_q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        free(t.p);
        return store__fail(st, rc, err, "job list");
    }
    if (!t.ok) {
        free(t.p);
        return errno = ENOMEM, errprintf(err, "out of memory");
    }
    *out = t.p;
    return 0;
}
