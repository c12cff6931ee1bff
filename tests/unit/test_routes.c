/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the REST routes through api_handle, on a real store: matching, 404 and 405
 * with Allow, owner scoping, parameter checks shared by plain and streaming reads, the
 * stream a handler asks the server to start, and token requests.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "server/auth.h"
#include "unit.h"

static char path[] = "/tmp/ring-routes-XXXXXX";

/* A request's query and headers, as "key" "value" pairs. */
struct fake {
    const char *query[8][2];
    const char *header[8][2];
};

static const char *lookup(const char *(*kv)[2], const char *key)
{
    for (int i = 0; i < 8 && kv[i][0] != NULL; i++)
        if (strcasecmp(kv[i][0], key) == 0)
            return kv[i][1];
    return NULL;
}

static const char *fake_query(void *conn, const char *key)
{
    return lookup(((struct fake *)conn)->query, key);
}

static const char *fake_header(void *conn, const char *key)
{
    return lookup(((struct fake *)conn)->header, key);
}

static struct store *st;
static struct api_config cfg = {
    .data_dir = "/nonexistent/ringd",
    .ckpt_prefix = "/nonexistent/ringd/checkpoints/",
    .default_user = "", /* the test's own user runs the jobs (see submit) */
    .token_create = auth_token_create,
};

static void setup(void)
{
    struct error err;
    static struct cluster *four; /* one node of 4 slots */
    if (four == NULL)
        four = cluster_create(1, 4, 0);
    cfg.cluster = four;
    struct passwd *pw = getpwuid(geteuid());
    int fd = mkstemp(path);
    static char me[64];
    snprintf(me, sizeof(me), "%s", pw ? pw->pw_name : "root");
    cfg.default_user = me;
    close(fd);
    unlink(path);
    ck_assert_int_eq(auth_init(), 0);
    ck_assert_msg(store_open(path, &st, &err) == 0, "%s", err.text);
}

/* A test's run directory (attempt_with_log), with rank 0's log. */
static char run_dir[] = "/tmp/ring-routes-run-XXXXXX";
static char log_path[400];

static void teardown(void)
{
    store_close(st);
    unlink(path);
    if (log_path[0] != '\0') {
        char dir[300];
        unlink(log_path);
        snprintf(dir, sizeof(dir), "%s/rank.0", run_dir);
        rmdir(dir);
        rmdir(run_dir);
    }
}

/*
 * The principal of a user token named owner, made on first use (the store gives each name
 * its principal, as POST /v1/tokens would): what a request of owner's speaks for.
 */
static int64_t principal_named(const char *owner)
{
    struct store_token t;
    struct error err;
    int64_t p;
    char hash[80];
    if (store_token_find(st, owner, &t, &err) == 0)
        return t.principal;
    snprintf(hash, sizeof(hash), "hash-of-%s", owner);
    ck_assert_msg(store_token_create(st, owner, owner, hash, 0, NULL, 0, &p, &err) == 0, "%s",
                  err.text);
    return p;
}

/* Handles one request from principal, named owner (admin when owner is NULL); the response
 * is the caller's. */
static void handle_as(const char *method, const char *url, const char *body, struct fake *f,
                      const char *owner, int64_t principal, struct api_response *resp)
{
    static struct fake none;
    struct api_request req = {
        .method = method,
        .path = url,
        .body = body,
        .body_len = body ? strlen(body) : 0,
        .query = fake_query,
        .header = fake_header,
        .conn = f ? f : &none,
        .owner = owner ? owner : "admin",
        .principal = principal,
        .admin = owner == NULL,
        .store = st,
    };
    memset(resp, 0, sizeof(*resp));
    api_handle(&cfg, &req, resp);
}

/* handle_as owner's principal (admin when owner is NULL). */
static void handle(const char *method, const char *url, const char *body, struct fake *f,
                   const char *owner, struct api_response *resp)
{
    handle_as(method, url, body, f, owner,
              owner ? principal_named(owner) : principal_named("admin"), resp);
}

static void release(struct api_response *r)
{
    api_response_release(r);
}

static const char *problem_type(const struct api_response *r)
{
    return json_string_value(json_object_get(r->body, "type"));
}

/* Submits a job as owner; returns its id (static). */
static const char *submit(const char *owner)
{
    static char id[64];
    struct api_response r;
    json_error_t jerr;
    json_t *job;
    handle("POST", "/v1/jobs", "{\"name\":\"a\",\"command\":[\"/bin/true\"]}", NULL, owner, &r);
    ck_assert_msg(r.status == 201, "submit: %d", r.status);
    job = json_loads(r.json_text, 0, &jerr);
    ck_assert_ptr_nonnull(job);
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(job, "id")));
    json_decref(job);
    release(&r);
    return id;
}

START_TEST(unknown_paths_are_404_and_wrong_methods_405_with_allow)
{
    struct api_response r;
    handle("GET", "/v1/nothing", NULL, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 404);
    ck_assert_int_eq(r.problem, 1);
    release(&r);
    handle("GET", "/v1/jobs/a/b/c", NULL, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 404);
    release(&r);
    handle("PATCH", "/v1/jobs", NULL, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 405);
    ck_assert_ptr_nonnull(strstr(r.allow, "GET"));
    ck_assert_ptr_nonnull(strstr(r.allow, "POST"));
    release(&r);
    handle("PUT", "/v1/jobs/j-1", NULL, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 405);
    ck_assert_ptr_nonnull(strstr(r.allow, "DELETE"));
    release(&r);
}
END_TEST

START_TEST(another_owners_job_is_not_found)
{
    struct api_response r;
    char url[128];
    const char *id = submit("alice");
    snprintf(url, sizeof(url), "/v1/jobs/%s", id);
    handle("GET", url, NULL, NULL, "bob", &r);
    ck_assert_int_eq(r.status, 404);
    ck_assert_str_eq(problem_type(&r), "urn:ringmaster:problem:job-not-found");
    release(&r);
    handle("GET", url, NULL, NULL, "alice", &r);
    ck_assert_int_eq(r.status, 200);
    release(&r);
    handle("GET", url, NULL, NULL, NULL, &r); /* admin */
    ck_assert_int_eq(r.status, 200);
    release(&r);
}
END_TEST

/*
 * What decides whose a job is: the principal, not the name. A caller named like the owner
 * (another Unix user's token of that name, or the name given out again) reaches none of
 * its routes: each answers 404, as for a job that does not exist.
 */
START_TEST(a_namesake_reaches_nothing)
{
    static const char *const routes[][2] = {
        {"GET", ""},       {"GET", "/events"},  {"GET", "/logs"}, {"POST", "/cancel"},
        {"POST", "/stop"}, {"POST", "/resume"}, {"DELETE", ""},
    };
    struct fake sse = {.header = {{"Accept", "text/event-stream"}}};
    struct fake follow = {.query = {{"follow", "1"}}};
    struct api_response r;
    char url[160];
    const char *id = submit("alice");
    int64_t namesake = principal_named("alice") + 1000;

    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        snprintf(url, sizeof(url), "/v1/jobs/%s%s", id, routes[i][1]);
        handle_as(routes[i][0], url, NULL, NULL, "alice", namesake, &r);
        ck_assert_msg(r.status == 404, "%s %s: %d", routes[i][0], url, r.status);
        ck_assert_str_eq(problem_type(&r), "urn:ringmaster:problem:job-not-found");
        release(&r);
    }
    snprintf(url, sizeof(url), "/v1/jobs/%s/events", id);
    handle_as("GET", url, NULL, &sse, "alice", namesake, &r);
    ck_assert_int_eq(r.status, 404);
    ck_assert_int_eq(r.stream, API_STREAM_NONE);
    release(&r);
    snprintf(url, sizeof(url), "/v1/jobs/%s/logs", id);
    handle_as("GET", url, NULL, &follow, "alice", namesake, &r);
    ck_assert_int_eq(r.status, 404);
    ck_assert_int_eq(r.stream, API_STREAM_NONE);
    release(&r);
    {
        /* nor the list, even asking for alice's jobs by name */
        struct fake by_name = {.query = {{"owner", "alice"}}};
        json_error_t jerr;
        json_t *page;
        handle_as("GET", "/v1/jobs", NULL, &by_name, "alice", namesake, &r);
        ck_assert_int_eq(r.status, 200);
        page = json_loads(r.json_text, 0, &jerr);
        ck_assert_int_eq(json_array_size(json_object_get(page, "jobs")), 0);
        json_decref(page);
        release(&r);
        handle("GET", "/v1/jobs", NULL, NULL, "alice", &r);
        page = json_loads(r.json_text, 0, &jerr);
        ck_assert_int_eq(json_array_size(json_object_get(page, "jobs")), 1);
        ck_assert_int_eq(json_integer_value(json_object_get(
                             json_array_get(json_object_get(page, "jobs"), 0), "owner_id")),
                         principal_named("alice"));
        json_decref(page);
        release(&r);
    }
}
END_TEST

/* A token's name live for another Unix user is refused with what to do; the same user's
 * joins its principal (the response names it). */
START_TEST(a_name_speaks_for_one_user)
{
    struct api_response r;
    char body[200];
    int64_t p;
    handle("POST", "/v1/tokens", "{\"name\":\"carol\"}", NULL, NULL, &r);
    ck_assert_int_eq(r.status, 201);
    p = json_integer_value(json_object_get(r.body, "principal"));
    ck_assert_int_gt(p, 0);
    release(&r);
    snprintf(body, sizeof(body), "{\"name\":\"carol\",\"user\":\"%s\"}", cfg.default_user);
    handle("POST", "/v1/tokens", body, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 409);
    ck_assert_str_eq(problem_type(&r), "urn:ringmaster:problem:token-name-taken");
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(r.body, "detail")), "revoke all of them"));
    release(&r);
    handle("POST", "/v1/tokens", "{\"name\":\"carol\"}", NULL, NULL, &r);
    ck_assert_int_eq(r.status, 201);
    ck_assert_int_eq(json_integer_value(json_object_get(r.body, "principal")), p);
    release(&r);
    handle("POST", "/v1/tokens", "{\"name\":\"carol\",\"admin\":true}", NULL, NULL, &r);
    ck_assert_int_eq(r.status, 409);
    release(&r);
}
END_TEST

/* The same checks whether the client streams or not: once, in the route. */
START_TEST(stream_parameters_are_checked_like_plain_ones)
{
    static const char *const bad_logs[] = {"abc", "1.5", "-1", "99999999999999999999", "", "1e3"};
    struct api_response r;
    char url[128], events[128];
    const char *id = submit("alice");
    snprintf(url, sizeof(url), "/v1/jobs/%s/logs", id);
    snprintf(events, sizeof(events), "/v1/jobs/%s/events", id);
    for (size_t i = 0; i < sizeof(bad_logs) / sizeof(bad_logs[0]); i++) {
        struct fake follow = {.query = {{"follow", "1"}, {"rank", bad_logs[i]}}};
        struct fake plain = {.query = {{"rank", bad_logs[i]}}};
        struct fake off = {.query = {{"follow", "1"}, {"offset", bad_logs[i]}}};
        handle("GET", url, NULL, &follow, NULL, &r);
        ck_assert_msg(r.status == 400, "follow rank=%s: %d", bad_logs[i], r.status);
        ck_assert_int_eq(r.stream, API_STREAM_NONE);
        release(&r);
        handle("GET", url, NULL, &plain, NULL, &r);
        ck_assert_msg(r.status == 400, "rank=%s: %d", bad_logs[i], r.status);
        release(&r);
        if (strcmp(bad_logs[i], "1e3") && strcmp(bad_logs[i], "abc") &&
            strcmp(bad_logs[i], "1.5") && strcmp(bad_logs[i], "-1") && bad_logs[i][0])
            continue; /* a huge offset is a valid offset */
        handle("GET", url, NULL, &off, NULL, &r);
        ck_assert_msg(r.status == 400, "offset=%s: %d", bad_logs[i], r.status);
        release(&r);
    }
    {
        struct fake sse = {.query = {{"after", "abc"}},
                           .header = {{"Accept", "text/event-stream"}}};
        struct fake last = {.header = {{"Accept", "text/event-stream"}, {"Last-Event-ID", "7x"}}};
        handle("GET", events, NULL, &sse, NULL, &r);
        ck_assert_int_eq(r.status, 400);
        ck_assert_int_eq(r.stream, API_STREAM_NONE);
        release(&r);
        handle("GET", events, NULL, &last, NULL, &r);
        ck_assert_int_eq(r.status, 400);
        release(&r);
    }
}
END_TEST

START_TEST(a_valid_stream_request_describes_the_stream)
{
    struct api_response r;
    char url[128];
    const char *id = submit("alice");
    struct fake sse = {.header = {{"Accept", "text/event-stream"}, {"Last-Event-ID", "3"}}};
    struct fake logs = {
        .query = {{"follow", "1"}, {"rank", "2"}, {"stream", "stderr"}, {"offset", "10"}}};
    snprintf(url, sizeof(url), "/v1/jobs/%s/events", id);
    handle("GET", url, NULL, &sse, "alice", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.stream, API_STREAM_EVENTS);
    ck_assert_str_eq(r.stream_job, id);
    ck_assert_int_eq(r.stream_from, 3);
    release(&r);
    handle("GET", url, NULL, &sse, "bob", &r); /* not bob's: no stream */
    ck_assert_int_eq(r.status, 404);
    ck_assert_int_eq(r.stream, API_STREAM_NONE);
    release(&r);
    snprintf(url, sizeof(url), "/v1/jobs/%s/logs", id);
    handle("GET", url, NULL, &logs, "alice", &r);
    ck_assert_int_eq(r.stream, API_STREAM_LOGS);
    ck_assert_int_eq(r.stream_rank, 2);
    ck_assert_str_eq(r.stream_which, "stderr");
    ck_assert_int_eq(r.stream_from, 10);
    release(&r);
}
END_TEST

/*
 * GET /v1/events: an admin's pages hold every job's events, a user's only their own; a
 * stream starts at the newest event unless told where, for the caller's scope; bad
 * parameters are refused whether streamed or not.
 */
START_TEST(every_jobs_events_for_whom_may_see_them)
{
    struct api_response r;
    struct fake page = {.query = {{"after", "0"}, {"limit", "1000"}}};
    struct fake sse = {.header = {{"Accept", "text/event-stream"}}};
    struct fake resume = {.header = {{"Accept", "text/event-stream"}, {"Last-Event-ID", "1"}}};
    static const char *const bad[][2] = {
        {"after", "x"}, {"limit", "0"}, {"limit", "1001"}, {"after", "-1"}};
    char a[64];
    json_t *ev;

    snprintf(a, sizeof(a), "%s", submit("alice"));
    submit("bob");
    handle("GET", "/v1/events", NULL, &page, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ev = json_object_get(r.body, "events");
    ck_assert_int_eq(json_array_size(ev), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(r.body, "next_after")), 2);
    release(&r);
    handle("GET", "/v1/events", NULL, &page, "alice", &r);
    ev = json_object_get(r.body, "events");
    ck_assert_int_eq(json_array_size(ev), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(ev, 0), "job_id")), a);
    ck_assert_int_eq(json_integer_value(json_object_get(r.body, "next_after")), 2);
    release(&r);

    handle("GET", "/v1/events", NULL, &sse, "alice", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.stream, API_STREAM_ALL_EVENTS);
    ck_assert_int_eq(r.stream_from, 2); /* the newest, not the first */
    ck_assert_int_eq(r.stream_owner, principal_named("alice"));
    release(&r);
    handle("GET", "/v1/events", NULL, &resume, NULL, &r);
    ck_assert_int_eq(r.stream, API_STREAM_ALL_EVENTS);
    ck_assert_int_eq(r.stream_from, 1);
    ck_assert_int_eq(r.stream_owner, STORE_ANYONE);
    release(&r);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct fake q = {.query = {{bad[i][0], bad[i][1]}}};
        struct fake qs = {.query = {{bad[i][0], bad[i][1]}},
                          .header = {{"Accept", "text/event-stream"}}};
        handle("GET", "/v1/events", NULL, &q, NULL, &r);
        ck_assert_msg(r.status == 400, "%s=%s: %d", bad[i][0], bad[i][1], r.status);
        ck_assert_str_eq(problem_type(&r), "urn:ringmaster:problem:bad-parameter");
        release(&r);
        handle("GET", "/v1/events", NULL, &qs, NULL, &r);
        ck_assert_msg(r.status == 400 && r.stream == API_STREAM_NONE, "stream %s=%s: %d", bad[i][0],
                      bad[i][1], r.status);
        release(&r);
    }
}
END_TEST

/* GET /v1/jobs?order=newest lists the newest first; another order is refused. */
START_TEST(jobs_newest_first)
{
    struct api_response r;
    struct fake newest = {.query = {{"order", "newest"}, {"page_size", "1"}}};
    struct fake wrong = {.query = {{"order", "random"}}};
    char second[64];
    json_t *page;
    json_error_t jerr;

    submit("alice");
    snprintf(second, sizeof(second), "%s", submit("alice"));
    handle("GET", "/v1/jobs", NULL, &newest, "alice", &r);
    ck_assert_int_eq(r.status, 200);
    page = json_loads(r.json_text, 0, &jerr);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(page, "jobs"), 0), "id")),
        second);
    ck_assert_ptr_nonnull(json_object_get(page, "next_page_token"));
    /* where a watch of GET /v1/events goes on from: the two submissions' events */
    ck_assert_int_eq(json_integer_value(json_object_get(page, "last_event_id")), 2);
    json_decref(page);
    release(&r);
    handle("GET", "/v1/jobs", NULL, &wrong, "alice", &r);
    ck_assert_int_eq(r.status, 400);
    ck_assert_str_eq(problem_type(&r), "urn:ringmaster:problem:bad-parameter");
    release(&r);
}
END_TEST

/* The usage series: a point at each end of the window, a step at each start and end inside
 * it, one step for an end and a start at the same instant, nothing from outside it. */
START_TEST(usage_is_a_step_series)
{
    json_error_t jerr;
    json_t *attempts =
        json_loads("["
                   "{\"start_s\":50,\"end_s\":150,\"workers\":4,\"gpus\":4,\"slots\":4},"
                   "{\"start_s\":150,\"end_s\":null,\"workers\":2,\"gpus\":2,\"slots\":2},"
                   "{\"start_s\":120,\"end_s\":130,\"workers\":1,\"gpus\":0,\"slots\":1},"
                   "{\"start_s\":10,\"end_s\":90,\"workers\":8,\"gpus\":8,\"slots\":8},"
                   "{\"start_s\":500,\"end_s\":null,\"workers\":9,\"gpus\":9,\"slots\":9}]",
                   0, &jerr);
    /* window [100, 200]: 4 at 100; +1 at 120; -1 at 130; -4 +2 at 150; 2 at 200 */
    static const long want[][2] = {{100, 4}, {120, 5}, {130, 4}, {150, 2}, {200, 2}};
    json_t *p = api_cluster_usage(attempts, 100, 200), *pt;
    size_t i;
    ck_assert_ptr_nonnull(attempts);
    ck_assert_int_eq(json_array_size(p), 5);
    json_array_foreach(p, i, pt)
    {
        ck_assert_int_eq(json_integer_value(json_object_get(pt, "workers")), want[i][1]);
        ck_assert_int_eq(json_integer_value(json_object_get(pt, "gpus")),
                         want[i][1] - (i == 1)); /* the one-worker attempt holds no GPU */
    }
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(p, 0), "t")),
                     "1970-01-01T00:01:40.000Z");
    json_decref(p);
    json_decref(attempts);
}
END_TEST

START_TEST(usage_window_is_checked)
{
    struct api_response r;
    static const char *const bad[] = {"59", "2592001", "x", ""};
    struct fake ok = {.query = {{"window", "600"}}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct fake q = {.query = {{"window", bad[i]}}};
        handle("GET", "/v1/cluster/usage", NULL, &q, "alice", &r);
        ck_assert_msg(r.status == 400, "window=%s: %d", bad[i], r.status);
        release(&r);
    }
    handle("GET", "/v1/cluster/usage", NULL, &ok, "alice", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(r.body, "window_s")), 600);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(r.body, "capacity"), "slots")), 4);
    ck_assert_int_eq(json_array_size(json_object_get(r.body, "points")), 2); /* idle: flat */
    release(&r);
}
END_TEST

START_TEST(token_requests_are_checked)
{
    static const char *const bad[] = {
        "{\"name\":\"\"}",
        "{\"name\":\"a b\"}",
        "{\"name\":\"a\",\"admin\":\"yes\"}",
        "{\"name\":\"a\",\"sudo\":true}",
        "{\"name\":\"a\",\"user\":\"no-such-user-here\"}",
        "{\"name\":\"a\",\"user\":\"../etc\"}",
    };
    struct api_response r;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        handle("POST", "/v1/tokens", bad[i], NULL, NULL, &r);
        ck_assert_msg(r.status == 422, "%s: %d", bad[i], r.status);
        release(&r);
    }
    handle("POST", "/v1/tokens", "{\"name\":\"a\"}", NULL, "alice", &r);
    ck_assert_int_eq(r.status, 403);
    release(&r);
    handle("POST", "/v1/tokens", "[", NULL, NULL, &r);
    ck_assert_int_eq(r.status, 400);
    release(&r);
}
END_TEST

/* GET /v1/admin/backup: admins get the database as a file (a nameless copy in the data
 * directory); users 403. */
START_TEST(backup_is_a_database_for_admins)
{
    struct api_response r;
    char dir[] = "/tmp/ring-backup-XXXXXX", copy[64], head[16];
    const char *saved = cfg.data_dir, *id = submit("alice");
    struct store *back;
    struct error err;
    json_t *job;
    DIR *d;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    cfg.data_dir = dir;
    handle("GET", "/v1/admin/backup", NULL, NULL, "alice", &r);
    ck_assert_int_eq(r.status, 403);
    ck_assert_int_eq(r.file, 0);
    release(&r);
    handle("GET", "/v1/admin/backup", NULL, NULL, NULL, &r);
    cfg.data_dir = saved;
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.file, 1);
    ck_assert_str_eq(r.file_type, "application/vnd.sqlite3");
    ck_assert_int_eq(pread(r.file_fd, head, sizeof(head), 0), (ssize_t)sizeof(head));
    ck_assert_int_eq(memcmp(head, "SQLite format 3", 16), 0);
    ck_assert_int_eq(lseek(r.file_fd, 0, SEEK_END), r.file_len);
    /* nothing left in the data directory: the copy has no name */
    ck_assert_ptr_nonnull(d = opendir(dir));
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        ck_assert_msg(e->d_name[0] == '.', "left in the data directory: %s", e->d_name);
    closedir(d);
    /* and it is the database: the job is in it */
    snprintf(copy, sizeof(copy), "%s/copy.db", dir);
    ck_assert_ptr_nonnull(f = fopen(copy, "wb"));
    {
        char buf[65536];
        ssize_t n;
        lseek(r.file_fd, 0, SEEK_SET);
        while ((n = read(r.file_fd, buf, sizeof(buf))) > 0)
            ck_assert_int_eq(fwrite(buf, 1, (size_t)n, f), (size_t)n);
    }
    ck_assert_int_eq(fclose(f), 0);
    release(&r);
    ck_assert_msg(store_check(copy, &err) == 0, "%s", err.text);
    ck_assert_msg(store_open(copy, &back, &err) == 0, "%s", err.text);
    ck_assert_int_eq(store_job_get(back, id, STORE_ANYONE, &job, &err), 0);
    json_decref(job);
    store_close(back);
    unlink(copy);
    rmdir(dir);
}
END_TEST

/* A run directory with rank 0's stdout holding size bytes: text, then a hole (zeros, no
 * newline) up to size when size is larger. The job's latest attempt runs there. */
static void attempt_with_log(const char *id, const char *text, long long size)
{
    struct store_attempt a = {.number = 1,
                              .world_size = 1,
                              .hosts = "localhost:1",
                              .gpus = "",
                              .backend_id = "1",
                              .id_label = "process group"};
    struct store_sched sched = {.attempts = 1};
    struct error err;
    char dir[300];
    int fd;

    ck_assert_ptr_nonnull(mkdtemp(run_dir));
    snprintf(dir, sizeof(dir), "%s/rank.0", run_dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(log_path, sizeof(log_path), "%s/stdout", dir);
    fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    if (size > (long long)strlen(text))
        ck_assert_int_eq(ftruncate(fd, size), 0);
    close(fd);
    a.run_dir = run_dir;
    ck_assert_msg(store_attempt_start(st, id, &a, &sched, &err) == 0, "%s", err.text);
}

/* GET .../logs with query q as admin: the response, which must be a file. */
static void get_log(const char *id, struct fake *q, struct api_response *r)
{
    char url[128];
    snprintf(url, sizeof(url), "/v1/jobs/%s/logs", id);
    handle("GET", url, NULL, q, NULL, r);
    ck_assert_msg(r->status == 200 && r->file, "logs: %d", r->status);
}

/* What the response's file holds in the range it names. */
static char *file_text(const struct api_response *r)
{
    char *t = malloc((size_t)r->file_len + 1);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(pread(r->file_fd, t, (size_t)r->file_len, r->file_offset), r->file_len);
    t[r->file_len] = '\0';
    return t;
}

START_TEST(logs_are_served_from_the_file)
{
    static const struct {
        const char *tail, *offset, *want;
    } cases[] = {
        {NULL, NULL, "one\ntwo\nthree\n"},
        {"2", NULL, "two\nthree\n"},
        {"1", NULL, "three\n"},
        {"0", NULL, ""},
        {"9", NULL, "one\ntwo\nthree\n"},
        {NULL, "8", "three\n"},
        {NULL, "99", ""},
    };
    struct api_response r;
    const char *id = submit("alice");
    attempt_with_log(id, "one\ntwo\nthree\n", 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fake q = {.query = {{cases[i].tail ? "tail" : "offset",
                                    cases[i].tail ? cases[i].tail : cases[i].offset}}};
        char *t;
        get_log(id, &q, &r);
        t = file_text(&r);
        ck_assert_msg(strcmp(t, cases[i].want) == 0, "case %zu: '%s'", i, t);
        ck_assert_int_eq(r.log_offset, 14); /* where a follower goes on: the end */
        free(t);
        release(&r);
    }
}
END_TEST

/* A tail whose lines span the scan's blocks: found across them. */
START_TEST(a_tail_across_blocks)
{
    struct api_response r;
    struct fake q = {.query = {{"tail", "2"}}};
    const char *id = submit("alice");
    size_t line = 100 * 1024; /* longer than a block */
    char *text = malloc(3 * line + 1);
    ck_assert_ptr_nonnull(text);
    for (int l = 0; l < 3; l++) {
        memset(text + l * line, 'a' + l, line - 1);
        text[l * line + line - 1] = '\n';
    }
    text[3 * line] = '\0';
    attempt_with_log(id, text, 0);
    get_log(id, &q, &r);
    ck_assert_int_eq(r.file_offset, (long long)line);
    ck_assert_int_eq(r.file_len, (long long)(2 * line));
    release(&r);
    free(text);
}
END_TEST

/*
 * A log of 10 GiB (sparse: no newline) costs the handler nothing: the answer is the file
 * and a range, not its bytes in memory; and a tail looks back 16 MiB at most, so that a
 * log without newlines is not read whole.
 */
START_TEST(a_huge_log_is_never_read_whole)
{
    struct api_response r;
    struct fake all = {0}, tail = {.query = {{"tail", "5"}}};
    const char *id = submit("alice");
    long long size = 10LL << 30;
    attempt_with_log(id, "start\n", size);
    get_log(id, &all, &r);
    ck_assert_int_eq(r.file_offset, 0);
    ck_assert_int_eq(r.file_len, size);
    release(&r);
    get_log(id, &tail, &r);
    ck_assert_int_eq(r.file_offset, size - (16LL << 20));
    ck_assert_int_eq(r.file_len, 16LL << 20);
    ck_assert_int_eq(r.log_offset, size);
    release(&r);
}
END_TEST

/* Every problem has a body, even when what it quotes is not UTF-8. */
START_TEST(problems_always_have_a_body)
{
    struct api_response r = {0};
    api_problem(&r, 400, "bad-parameter", "Bad Request", "/v1/x\xff",
                "after must be an event id, not '%.5s'", "ab\xc3\xa9\xc3\xa9");
    ck_assert_ptr_nonnull(r.body);
    ck_assert_ptr_nonnull(json_string_value(json_object_get(r.body, "detail")));
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(r.body, "detail")), "ab\xc3\xa9"));
    release(&r);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {unknown_paths_are_404_and_wrong_methods_405_with_allow,
                            another_owners_job_is_not_found,
                            a_namesake_reaches_nothing,
                            a_name_speaks_for_one_user,
                            stream_parameters_are_checked_like_plain_ones,
                            a_valid_stream_request_describes_the_stream,
                            token_requests_are_checked,
                            backup_is_a_database_for_admins,
                            problems_always_have_a_body,
                            logs_are_served_from_the_file,
                            a_tail_across_blocks,
                            a_huge_log_is_never_read_whole,
                            every_jobs_events_for_whom_may_see_them,
                            jobs_newest_first,
                            usage_is_a_step_series,
                            usage_window_is_checked,
                            NULL};
    return unit_main_fixture("routes", tests, 30, setup, teardown);
}
