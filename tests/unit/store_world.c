/* SPDX-License-Identifier: Apache-2.0 */
/* store_world.c - what the store's tests share (store_world.h). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_world.h"

char path[] = "/tmp/ring-store-XXXXXX";

struct store *open_fresh(void)
{
    struct store *st;
    struct error err;
    int fd = mkstemp(path);
    close(fd);
    unlink(path);
    ck_assert_msg(store_open(path, &st, &err) == 0, "%s", err.text);
    return st;
}

json_t *spec(const char *name, const char *team)
{
    return json_pack("{s:s, s:[s], s:{s:s}}", "name", name, "command", "/bin/true", "labels",
                     "team", team);
}

/* store_job_list's text, parsed. */
json_t *list(struct store *st, const struct store_filter *f, int64_t cursor, int limit,
             int64_t *next)
{
    struct error err;
    json_error_t jerr;
    char *text;
    json_t *page;
    ck_assert_int_eq(store_job_list(st, f, cursor, limit, "/ck/", &text, next, &err), 0);
    page = json_loads(text, 0, &jerr);
    ck_assert_msg(json_is_array(page), "not a JSON array: %s", text);
    free(text);
    return page;
}

/* metrics: m's value at path ("counters.ringd_resizes_total", "jobs.QUEUED",
 * "histograms.NAME.count", "histograms.NAME.sum"); 0 when absent. */
double metric(json_t *m, const char *a, const char *b, const char *c)
{
    json_t *v = json_object_get(m, a);
    if (b != NULL)
        v = json_object_get(v, b);
    if (c != NULL)
        v = json_object_get(v, c);
    return json_number_value(v);
}

/* How many observations of histogram name are <= le. */
long long bucket(json_t *m, const char *name, double le)
{
    size_t i;
    json_t *b;
    json_array_foreach(
        json_object_get(json_object_get(json_object_get(m, "histograms"), name), "buckets"), i, b)
    {
        if (json_real_value(json_array_get(b, 0)) == le)
            return (long long)json_integer_value(json_array_get(b, 1));
    }
    return -1;
}

/* A job that ran once: started (scheduling latency), reported progress 1.5 s in (start
 * overhead), was resized (a resizing event) and ended 4 s after its stop request. */
const char *ran_once(struct store *st, const char *name)
{
    static char id[32];
    struct error err;
    json_t *s = spec(name, "x"), *job;
    struct store_attempt a = {.number = 1,
                              .world_size = 1,
                              .hosts = "localhost:1",
                              .gpus = "",
                              .backend_id = "1",
                              .run_dir = "/nonexistent",
                              .id_label = "pid"};
    struct store_sched sched = {.attempts = 1};
    int created;

    ck_assert_int_eq(store_job_create(st, ALICE, "alice", s, NULL, "h", &job, &created, &err), 0);
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(job, "id")));
    json_decref(job);
    json_decref(s);
    ck_assert_int_eq(store_attempt_start(st, id, &a, &sched, &err), 0);
    ck_assert_int_eq(store_attempt_progress(st, id, 1, 1.5, 100, &err), 0);
    ck_assert_int_eq(store_attempt_progress(st, id, 1, -1, 120, &err), 0); /* once per attempt */
    ck_assert_int_eq(store_job_transition(st, id, "STOPPING", "resizing", "to 2", NULL, &err), 0);
    ck_assert_int_eq(
        store_attempt_end(st, id, 1, 0, 4.0, "done", "SUCCEEDED", "succeeded", &sched, &err), 0);
    return id;
}
