/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of ringd's SQLite store's migrations: each runs once, and each carries older
 * databases' rows forward (store_world.c). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store_world.h"
#include "unit.h"
START_TEST(migrations_run_once)
{
    struct store *st = open_fresh(), *again;
    struct error err;
    ck_assert_int_eq(store_schema_version(st), SCHEMA);
    store_close(st);
    ck_assert_int_eq(store_open(path, &again, &err), 0);
    ck_assert_int_eq(store_schema_version(again), SCHEMA);
    store_close(again);
    unlink(path);
}
END_TEST

/* A database from before migrations 4 to 6 gets every job's document, equal to a fresh
 * one's, its scheduling columns from the spec, and no Unix user. */
START_TEST(migrations_4_to_7_backfill)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *s = spec("old", "x"), *job;
    char *before, *after;
    const char *id;
    sqlite3 *db;
    int created;

    json_object_set_new(s, "workers", json_pack("{s:i, s:i}", "min", 2, "max", 4));
    json_object_set_new(s, "gpus_per_worker", json_integer(1));
    json_object_set_new(s, "priority", json_integer(7));
    json_object_set_new(s, "cpus_per_worker", json_integer(3));

    ck_assert_int_eq(store_job_create(st, ALICE, "alice", s, NULL, "h", &job, &created, &err), 0);
    id = json_string_value(json_object_get(job, "id"));
    ck_assert_int_eq(store_job_render(st, id, STORE_ANYONE, "/ck/", &before, NULL, &err), 0);
    store_close(st);
    /* back to schema 3 */
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db,
                                  UNDO_10 UNDO_MIGRATION_9
                                  "ALTER TABLE jobs DROP COLUMN doc;"
                                  "ALTER TABLE jobs DROP COLUMN min_workers;"
                                  "ALTER TABLE jobs DROP COLUMN max_workers;"
                                  "ALTER TABLE jobs DROP COLUMN gpus_per_worker;"
                                  "ALTER TABLE jobs DROP COLUMN priority;"
                                  "ALTER TABLE jobs DROP COLUMN run_as;"
                                  "ALTER TABLE tokens DROP COLUMN unix_user;"
                                  "ALTER TABLE jobs DROP COLUMN cpus_per_worker;"
                                  "ALTER TABLE jobs DROP COLUMN max_restarts;"
                                  "ALTER TABLE attempts DROP COLUMN stop_s;"
                                  "ALTER TABLE attempts DROP COLUMN start_s;"
                                  "ALTER TABLE attempts DROP COLUMN samples_per_s;"
                                  "ALTER TABLE tokens DROP COLUMN expires_at;"
                                  "PRAGMA user_version = 3",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    ck_assert_int_eq(store_open(path, &st, &err), 0);
    ck_assert_int_eq(store_schema_version(st), SCHEMA);
    ck_assert_int_eq(store_job_render(st, id, STORE_ANYONE, "/ck/", &after, NULL, &err), 0);
    ck_assert_str_eq(after, before);
    free(before);
    free(after);
    {
        struct store_queued *q;
        int n;
        ck_assert_int_eq(store_jobs_queued(st, 0, &q, &n, &err), 0);
        ck_assert_int_eq(n, 1);
        ck_assert_int_eq(q[0].min_workers, 2);
        ck_assert_int_eq(q[0].max_workers, 4);
        ck_assert_int_eq(q[0].gpus_per_worker, 1);
        ck_assert_int_eq(q[0].priority, 7);
        ck_assert_int_eq(q[0].cpus_per_worker, 3); /* backfilled from the spec */
        ck_assert_str_eq(q[0].owner, "alice");
        ck_assert_int_gt(q[0].seq, 0);
        free(q);
        /* only what was submitted after a sequence number */
        ck_assert_int_eq(store_jobs_queued(st, 1000, &q, &n, &err), 0);
        ck_assert_int_eq(n, 0);
        free(q);
    }
    json_decref(job);
    json_decref(s);
    store_close(st);
    unlink(path);
}
END_TEST

/* A database from before migration 8 keeps its tokens, which never expire; new ones may. */
START_TEST(migration_8_token_expiry)
{
    struct store *st = open_fresh();
    struct error err;
    struct store_token t;
    json_t *list;
    sqlite3 *db;

    ck_assert_int_eq(store_token_create(st, "old", "alice", "aa", 0, NULL, 0, NULL, &err), 0);
    store_close(st);
    /* back to schema 7 */
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db,
                                  UNDO_10 UNDO_MIGRATION_9
                                  "ALTER TABLE tokens DROP COLUMN expires_at;"
                                  "PRAGMA user_version = 7",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    ck_assert_int_eq(store_open(path, &st, &err), 0);
    ck_assert_int_eq(store_schema_version(st), SCHEMA);
    ck_assert_int_eq(store_token_find(st, "old", &t, &err), 0);
    ck_assert_int_eq(t.expires, 0);
    /* 2027-01-31T12:00:00Z */
    ck_assert_int_eq(store_token_create(st, "new", "alice", "bb", 0, NULL, 1801396800, NULL, &err),
                     0);
    ck_assert_int_eq(store_token_find(st, "new", &t, &err), 0);
    ck_assert_int_eq(t.expires, 1801396800);
    ck_assert_int_eq(store_token_list(st, STORE_ANYONE, &list, &err), 0);
    ck_assert_int_eq(json_array_size(list), 2);
    ck_assert_ptr_null(json_object_get(json_array_get(list, 0), "expires_at"));
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 1), "expires_at")),
                     "2027-01-31T12:00:00Z");
    json_decref(list);
    /* a revoked token shows its expiry too */
    ck_assert_int_eq(store_token_revoke(st, "new", STORE_ANYONE, &list, &err), 0);
    ck_assert_str_eq(json_string_value(json_object_get(list, "expires_at")),
                     "2027-01-31T12:00:00Z");
    json_decref(list);
    store_close(st);
    unlink(path);
}
END_TEST

/* A job row as a ringd of schema 8 wrote it: owned by a name, run as run_as (NULL: before
 * users were mapped). */
static void old_job(sqlite3 *db, const char *id, const char *owner, const char *run_as)
{
    char *sql = sqlite3_mprintf(
        "INSERT INTO jobs (id, name, owner, state, spec, created_at, updated_at, doc, run_as)"
        " VALUES (%Q, 'n', %Q, 'QUEUED', '{}', '2025-01-04T00:00:00.000Z',"
        " '2025-01-04T00:00:00.000Z', json_object('id', %Q, 'name', 'n', 'owner', %Q,"
        " 'state', 'QUEUED', 'spec', json('{}'), 'created_at', '2025-01-04T00:00:00.000Z',"
        " 'updated_at', '2025-01-04T00:00:00.000Z', 'user', %Q), %Q)",
        id, owner, id, owner, run_as, run_as);
    ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_free(sql);
}

/* The principal of token id. */
static int64_t principal_of(struct store *st, const char *id)
{
    struct store_token t;
    struct error err;
    ck_assert_msg(store_token_find(st, id, &t, &err) == 0, "token %s: %s", id, err.text);
    return t.principal;
}

/* The owner_id of job id as the API shows it. */
static int64_t owner_of(struct store *st, const char *id)
{
    struct error err;
    json_t *job;
    int64_t who;
    ck_assert_msg(store_job_get(st, id, STORE_ANYONE, &job, &err) == 0, "%s: %s", id, err.text);
    who = json_integer_value(json_object_get(job, "owner_id"));
    json_decref(job);
    return who;
}

/*
 * Migration 9 on a database of schema 8 (made by migrations 1-8 themselves, with rows as
 * that ringd wrote them): every job goes to the principal of its owner's name, and where the
 * name had tokens for several Unix users, to the one it ran as; an owner no token matches
 * keeps its job under a principal of its own that no later token reaches.
 */
START_TEST(migration_9_principals)
{
    struct store *st;
    struct error err;
    json_t *job, *s = spec("again", "x");
    sqlite3 *db;
    int created;
    int64_t j3, j6, p;

    ck_assert_int_eq(mkstemp(path) >= 0, 1);
    unlink(path);
    ck_assert_msg(store__create_at(path, 8, &err) == 0, "%s", err.text);
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(
        sqlite3_exec(db,
                     "INSERT INTO tokens (id, name, hash, admin, created_at, revoked_at, unix_user)"
                     " VALUES"
                     " ('t1', 'alice', 'h1', 0, '2025-01-01T00:00:01.000Z', NULL, 'alice1'),"
                     " ('t2', 'alice', 'h2', 0, '2025-01-01T00:00:02.000Z', NULL, 'alice2'),"
                     " ('t3', 'bob', 'h3', 0, '2025-01-01T00:00:03.000Z',"
                     "  '2025-01-02T00:00:00.000Z', 'bob'),"
                     " ('t4', 'bob', 'h4', 0, '2025-01-03T00:00:00.000Z', NULL, 'bob'),"
                     " ('t5', 'carol', 'h5', 0, '2025-01-01T00:00:05.000Z',"
                     "  '2025-01-02T00:00:00.000Z', NULL),"
                     " ('t6', 'admin', 'h6', 1, '2025-01-01T00:00:00.000Z', NULL, NULL),"
                     " ('t7', 'dave', 'h7', 0, '2025-01-01T00:00:07.000Z', NULL, 'dave'),"
                     " ('t8', 'dave', 'h8', 0, '2025-01-01T00:00:08.000Z', NULL, NULL)",
                     NULL, NULL, NULL),
        SQLITE_OK);
    old_job(db, "j1", "alice", "alice1");
    old_job(db, "j2", "alice", "alice2");
    old_job(db, "j3", "alice", "mallory"); /* neither of alice's users */
    old_job(db, "j4", "bob", "bob");
    old_job(db, "j5", "carol", "root"); /* a retired name's */
    old_job(db, "j6", "local", "root"); /* --no-auth: no token at all */
    old_job(db, "j7", "dave", "root");  /* dave's token without a user: the default user */
    old_job(db, "j8", "dave", "dave");
    old_job(db, "j9", "admin", NULL); /* from before users were mapped */
    ck_assert_int_eq(sqlite3_exec(db,
                                  "INSERT INTO idempotency VALUES ('alice', 'k', 'j1', 'hk'),"
                                  " ('alice', 'k2', 'j2', 'hk2')",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);

    ck_assert_msg(store_open(path, &st, &err) == 0, "%s", err.text);
    ck_assert_int_eq(store_schema_version(st), SCHEMA);
    ck_assert_int_ne(principal_of(st, "t1"), principal_of(st, "t2"));
    ck_assert_int_eq(principal_of(st, "t4"), owner_of(st, "j4")); /* t3's too */
    ck_assert_int_eq(owner_of(st, "j1"), principal_of(st, "t1"));
    ck_assert_int_eq(owner_of(st, "j2"), principal_of(st, "t2"));
    ck_assert_int_eq(owner_of(st, "j7"), principal_of(st, "t8"));
    ck_assert_int_eq(owner_of(st, "j8"), principal_of(st, "t7"));
    ck_assert_int_eq(owner_of(st, "j9"), principal_of(st, "t6"));
    j3 = owner_of(st, "j3");
    j6 = owner_of(st, "j6");
    ck_assert_int_gt(j3, 0);
    ck_assert_int_gt(j6, 0);
    ck_assert_int_ne(j3, principal_of(st, "t1"));
    ck_assert_int_ne(j3, principal_of(st, "t2"));
    ck_assert_int_ne(j3, j6);
    /* alice1 no longer reaches alice2's job */
    ck_assert_int_eq(store_job_get(st, "j2", principal_of(st, "t1"), &job, &err), -1);
    ck_assert_int_eq(errno, ENOENT);
    {
        struct store_filter local = {.owner_id = STORE_LOCAL}, all = {.owner_id = STORE_ANYONE};
        int64_t next;
        json_t *page = list(st, &local, 0, 100, &next);
        ck_assert_int_eq(json_array_size(page), 0); /* every job has a principal */
        json_decref(page);
        page = list(st, &all, 0, 100, &next);
        ck_assert_int_eq(json_array_size(page), 9); /* and none was dropped */
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(page, 2), "owner")),
                         "alice");
        json_decref(page);
    }
    /* Retired (carol's, and the unmatched owners'): a new token of the name is someone new.
     * Live (bob's): a new token for the same user is bob again. */
    ck_assert_int_eq(store_token_create(st, "n1", "carol", "x1", 0, NULL, 0, &p, &err), 0);
    ck_assert_int_ne(p, owner_of(st, "j5"));
    ck_assert_int_eq(store_token_create(st, "n2", "local", "x2", 0, "root", 0, &p, &err), 0);
    ck_assert_int_ne(p, j6);
    ck_assert_int_eq(store_token_create(st, "n3", "bob", "x3", 0, "bob", 0, &p, &err), 0);
    ck_assert_int_eq(p, owner_of(st, "j4"));
    ck_assert_int_eq(store_token_create(st, "n4", "alice", "x4", 0, "mallory", 0, &p, &err), -1);
    ck_assert_int_eq(errno, EEXIST); /* alice is live for alice1 and alice2 */
    /* Idempotency keys moved to the principals: alice2 reuses alice1's key for a new job. */
    ck_assert_int_eq(
        store_job_create(st, principal_of(st, "t2"), "alice", s, "k", "hk", &job, &created, &err),
        0);
    ck_assert_int_eq(created, 1);
    json_decref(job);
    ck_assert_int_eq(
        store_job_create(st, principal_of(st, "t1"), "alice", s, "k", "hk", &job, &created, &err),
        0);
    ck_assert_int_eq(created, 0);
    ck_assert_str_eq(json_string_value(json_object_get(job, "id")), "j1");
    json_decref(job);
    json_decref(s);
    store_close(st);
    unlink(path);
}
END_TEST

/* A database from schema 9 gets its counters from the rows it has, and the jobs per
 * state; the triggers then count on from there. */
START_TEST(migration_10_backfill)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *fresh, *m;
    sqlite3 *db;

    ran_once(st, "a");
    ran_once(st, "b");
    ck_assert_int_eq(store_metrics(st, &fresh, &err), 0);
    store_close(st);
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, UNDO_10 "PRAGMA user_version = 9", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    ck_assert_int_eq(store_open(path, &st, &err), 0);
    ck_assert_int_eq(store_schema_version(st), SCHEMA);
    ck_assert_int_eq(store_metrics(st, &m, &err), 0);
    ck_assert_int_eq(metric(m, "jobs", "SUCCEEDED", NULL), 2);
    json_object_del(m, "jobs"); /* a fresh store also keeps the states it saw, at 0 */
    json_object_del(fresh, "jobs");
    ck_assert_msg(json_equal(fresh, m), "backfilled metrics differ");
    json_decref(m);
    ran_once(st, "c");
    ck_assert_int_eq(store_metrics(st, &m, &err), 0);
    ck_assert_int_eq(metric(m, "counters", "ringd_resizes_total", NULL), 3);
    ck_assert_int_eq(metric(m, "jobs", "SUCCEEDED", NULL), 3);
    json_decref(m);
    json_decref(fresh);
    store_close(st);
    unlink(path);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {migrations_run_once,      migrations_4_to_7_backfill,
                            migration_8_token_expiry, migration_9_principals,
                            migration_10_backfill,    NULL};
    return unit_main("store_migrations", tests, 30);
}
