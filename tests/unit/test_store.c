/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of ringd's SQLite store: migrations, jobs, idempotency, paging, tokens. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "store.h"

static char path[] = "/tmp/ring-store-XXXXXX";

static struct store *open_fresh(void)
{
    struct store *st;
    struct error err;
    int fd = mkstemp(path);
    close(fd);
    unlink(path);
    ck_assert_msg(store_open(path, &st, &err) == 0, "%s", err.text);
    return st;
}

static json_t *spec(const char *name, const char *team)
{
    return json_pack("{s:s, s:[s], s:{s:s}}", "name", name, "command", "/bin/true", "labels",
                     "team", team);
}

START_TEST(migrations_run_once)
{
    struct store *st = open_fresh(), *again;
    struct error err;
    ck_assert_int_eq(store_schema_version(st), 2);
    store_close(st);
    ck_assert_int_eq(store_open(path, &again, &err), 0);
    ck_assert_int_eq(store_schema_version(again), 2);
    store_close(again);
    unlink(path);
}
END_TEST

START_TEST(create_get_and_owner_scoping)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *s = spec("a", "x"), *job, *got;
    int created;
    ck_assert_int_eq(store_job_create(st, "alice", s, NULL, "h", &job, &created, &err), 0);
    ck_assert_int_eq(created, 1);
    ck_assert_str_eq(json_string_value(json_object_get(job, "state")), "QUEUED");
    ck_assert_int_eq(
        store_job_get(st, json_string_value(json_object_get(job, "id")), "alice", &got, &err), 0);
    json_decref(got);
    ck_assert_int_eq(
        store_job_get(st, json_string_value(json_object_get(job, "id")), "bob", &got, &err), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(
        store_job_get(st, json_string_value(json_object_get(job, "id")), NULL, &got, &err), 0);
    json_decref(got);
    json_decref(job);
    json_decref(s);
    store_close(st);
    unlink(path);
}
END_TEST

START_TEST(idempotency_keys)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *s = spec("a", "x"), *j1, *j2;
    int created;
    ck_assert_int_eq(store_job_create(st, "alice", s, "k", "h1", &j1, &created, &err), 0);
    ck_assert_int_eq(store_job_create(st, "alice", s, "k", "h1", &j2, &created, &err), 0);
    ck_assert_int_eq(created, 0);
    ck_assert_str_eq(json_string_value(json_object_get(j1, "id")),
                     json_string_value(json_object_get(j2, "id")));
    json_decref(j2);
    ck_assert_int_eq(store_job_create(st, "alice", s, "k", "h2", &j2, &created, &err), -1);
    ck_assert_int_eq(errno, EEXIST);
    /* keys are per owner */
    ck_assert_int_eq(store_job_create(st, "bob", s, "k", "h2", &j2, &created, &err), 0);
    ck_assert_int_eq(created, 1);
    json_decref(j1);
    json_decref(j2);
    json_decref(s);
    store_close(st);
    unlink(path);
}
END_TEST

START_TEST(paging_and_filters)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *page, *job;
    int64_t next;
    int created, seen = 0;
    for (int i = 0; i < 7; i++) {
        json_t *s = spec("j", i % 2 ? "odd" : "even");
        ck_assert_int_eq(store_job_create(st, "u", s, NULL, "h", &job, &created, &err), 0);
        json_decref(job);
        json_decref(s);
    }
    next = 0;
    do {
        ck_assert_int_eq(store_job_list(st, NULL, NULL, NULL, NULL, next, 3, &page, &next, &err),
                         0);
        seen += (int)json_array_size(page);
        json_decref(page);
    } while (next != 0);
    ck_assert_int_eq(seen, 7);
    ck_assert_int_eq(store_job_list(st, "u", "QUEUED", "team", "odd", 0, 100, &page, &next, &err),
                     0);
    ck_assert_int_eq(json_array_size(page), 3);
    json_decref(page);
    ck_assert_int_eq(store_job_list(st, "nobody", NULL, NULL, NULL, 0, 100, &page, &next, &err), 0);
    ck_assert_int_eq(json_array_size(page), 0);
    json_decref(page);
    store_close(st);
    unlink(path);
}
END_TEST

START_TEST(tokens)
{
    struct store *st = open_fresh();
    struct error err;
    char hash[65], name[64];
    int admin, n;
    ck_assert_int_eq(store_token_count(st, &n, &err), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(store_token_create(st, "abc", "alice", "deadbeef", 0, &err), 0);
    ck_assert_int_eq(store_token_find(st, "abc", hash, name, sizeof(name), &admin, &err), 0);
    ck_assert_str_eq(hash, "deadbeef");
    ck_assert_str_eq(name, "alice");
    ck_assert_int_eq(admin, 0);
    ck_assert_int_eq(store_token_find(st, "zzz", hash, name, sizeof(name), &admin, &err), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(store_token_create(st, "abc", "dup", "x", 0, &err), -1);
    ck_assert_int_eq(errno, EEXIST);
    store_close(st);
    unlink(path);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {migrations_run_once,
                            create_get_and_owner_scoping,
                            idempotency_keys,
                            paging_and_filters,
                            tokens,
                            NULL};
    return unit_main("store", tests, 30);
}
