/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of ringd's SQLite store: jobs, idempotency, paging, rendering, group commit,
 * tokens, the integrity check and the metrics. The migrations are in
 * test_store_migrations.c; what both share in store_world.c. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store_world.h"
#include "unit.h"
START_TEST(create_get_and_owner_scoping)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *s = spec("a", "x"), *job, *got;
    int created;
    ck_assert_int_eq(store_job_create(st, ALICE, "alice", s, NULL, "h", &job, &created, &err), 0);
    ck_assert_int_eq(created, 1);
    ck_assert_str_eq(json_string_value(json_object_get(job, "state")), "QUEUED");
    ck_assert_int_eq(
        store_job_get(st, json_string_value(json_object_get(job, "id")), ALICE, &got, &err), 0);
    json_decref(got);
    ck_assert_int_eq(
        store_job_get(st, json_string_value(json_object_get(job, "id")), BOB, &got, &err), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(
        store_job_get(st, json_string_value(json_object_get(job, "id")), STORE_ANYONE, &got, &err),
        0);
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
    ck_assert_int_eq(store_job_create(st, ALICE, "alice", s, "k", "h1", &j1, &created, &err), 0);
    ck_assert_int_eq(store_job_create(st, ALICE, "alice", s, "k", "h1", &j2, &created, &err), 0);
    ck_assert_int_eq(created, 0);
    ck_assert_str_eq(json_string_value(json_object_get(j1, "id")),
                     json_string_value(json_object_get(j2, "id")));
    json_decref(j2);
    ck_assert_int_eq(store_job_create(st, ALICE, "alice", s, "k", "h2", &j2, &created, &err), -1);
    ck_assert_int_eq(errno, EEXIST);
    /* keys are per owner */
    ck_assert_int_eq(store_job_create(st, BOB, "bob", s, "k", "h2", &j2, &created, &err), 0);
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
    struct store_filter all = {.owner_id = STORE_ANYONE},
                        odd = {U, "u", "QUEUED", "team", "odd", 0},
                        nobody = {.owner_id = STORE_ANYONE, .owner = "nobody"},
                        other = {.owner_id = BOB};
    for (int i = 0; i < 7; i++) {
        json_t *s = spec("j", i % 2 ? "odd" : "even");
        ck_assert_int_eq(store_job_create(st, U, "u", s, NULL, "h", &job, &created, &err), 0);
        json_decref(job);
        json_decref(s);
    }
    next = 0;
    do {
        page = list(st, &all, next, 3, &next);
        seen += (int)json_array_size(page);
        json_decref(page);
    } while (next != 0);
    ck_assert_int_eq(seen, 7);
    page = list(st, &odd, 0, 100, &next);
    ck_assert_int_eq(json_array_size(page), 3);
    job = json_array_get(page, 0);
    ck_assert_str_eq(json_string_value(json_object_get(job, "state")), "QUEUED");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(job, "spec"), "labels"), "team")),
                     "odd");
    json_decref(page);
    page = list(st, &nobody, 0, 100, &next);
    ck_assert_int_eq(json_array_size(page), 0);
    json_decref(page);
    page = list(st, &other, 0, 100, &next); /* another principal's */
    ck_assert_int_eq(json_array_size(page), 0);
    json_decref(page);
    /* Label keys are any text: a quote or a dot in one must not break the lookup. */
    {
        static const char *const keys[] = {"a\"b", "x.y", "$", "\\"};
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
            struct store_filter f = {
                .owner_id = STORE_ANYONE, .label_key = keys[i], .label_value = "v"};
            json_t *s = spec("q", "t");
            json_object_set_new(json_object_get(s, "labels"), keys[i], json_string("v"));
            ck_assert_int_eq(store_job_create(st, U, "u", s, NULL, "h", &job, &created, &err), 0);
            json_decref(job);
            json_decref(s);
            page = list(st, &f, 0, 100, &next);
            ck_assert_msg(json_array_size(page) == 1, "label key %s: %zu jobs", keys[i],
                          json_array_size(page));
            json_decref(page);
        }
    }
    store_close(st);
    unlink(path);
}
END_TEST

/* The rendered job: the row's fields, the spec as an object, the default checkpoint_dir, and
 * attempts with ended_at only once ended. */
START_TEST(render)
{
    struct store *st = open_fresh();
    struct error err;
    json_error_t jerr;
    json_t *s = spec("r\"quote\\\t\x01/", "t"), *job, *got, *a;
    char *text, *run_dir, want[64];
    int created;
    const char *id;
    struct store_attempt at = {1, 2, "localhost:2", "", "123", "/run/1", "Slurm job"};
    struct store_sched sc = {1, 0, 0, 0};

    ck_assert_int_eq(store_job_create(st, ALICE, "alice", s, NULL, "h", &job, &created, &err), 0);
    id = json_string_value(json_object_get(job, "id"));
    ck_assert_int_eq(store_job_render(st, id, ALICE, "/ck/", &text, &run_dir, &err), 0);
    ck_assert_ptr_null(run_dir);
    got = json_loads(text, 0, &jerr);
    ck_assert_msg(got != NULL, "not JSON: %s", text);
    free(text);
    ck_assert_str_eq(json_string_value(json_object_get(got, "name")), "r\"quote\\\t\x01/");
    ck_assert(json_is_object(json_object_get(got, "spec")));
    snprintf(want, sizeof(want), "/ck/%s", id);
    ck_assert_str_eq(json_string_value(json_object_get(got, "checkpoint_dir")), want);
    ck_assert_int_eq(json_array_size(json_object_get(got, "attempts")), 0);
    json_decref(got);
    ck_assert_int_eq(store_job_render(st, id, BOB, "/ck/", &text, NULL, &err), -1);
    ck_assert_int_eq(errno, ENOENT);
    {
        json_t *s2 = spec("explicit", "t"), *job2;
        json_object_set_new(s2, "checkpoint_dir", json_string("/somewhere/else"));
        ck_assert_int_eq(store_job_create(st, ALICE, "alice", s2, NULL, "h", &job2, &created, &err),
                         0);
        ck_assert_int_eq(store_job_render(st, json_string_value(json_object_get(job2, "id")),
                                          STORE_ANYONE, "/ck/", &text, NULL, &err),
                         0);
        got = json_loads(text, 0, &jerr);
        free(text);
        ck_assert_str_eq(json_string_value(json_object_get(got, "checkpoint_dir")),
                         "/somewhere/else");
        json_decref(got);
        json_decref(job2);
        json_decref(s2);
    }

    ck_assert_int_eq(store_attempt_start(st, id, &at, &sc, &err), 0);
    ck_assert_int_eq(store_job_render(st, id, STORE_ANYONE, "/ck/", &text, &run_dir, &err), 0);
    ck_assert_str_eq(run_dir, "/run/1");
    free(run_dir);
    got = json_loads(text, 0, &jerr);
    free(text);
    a = json_array_get(json_object_get(got, "attempts"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "world_size")), 2);
    ck_assert_ptr_null(json_object_get(a, "ended_at"));
    json_decref(got);
    {
        /* The event says what the backend's id is: a Slurm job id is no process group. */
        json_t *ev, *last;
        ck_assert_int_eq(store_events(st, id, 0, 100, &ev, &err), 0);
        last = json_array_get(ev, json_array_size(ev) - 1);
        ck_assert_str_eq(json_string_value(json_object_get(last, "type")), "started");
        ck_assert_str_eq(json_string_value(json_object_get(last, "message")),
                         "attempt 1: 2 workers on localhost:2, GPUs [], Slurm job 123");
        json_decref(ev);
    }
    /* Its resource manager placed it elsewhere: the record follows, with an event. */
    ck_assert_int_eq(store_attempt_placed(st, id, 1, "n2:2", "0,1", "RUNNING",
                                          "attempt 1 runs on n2:2 (planned: n1:2)", &err),
                     0);
    {
        json_t *ev, *last;
        ck_assert_int_eq(store_events(st, id, 0, 100, &ev, &err), 0);
        last = json_array_get(ev, json_array_size(ev) - 1);
        ck_assert_str_eq(json_string_value(json_object_get(last, "type")), "placed");
        ck_assert_str_eq(json_string_value(json_object_get(last, "state")), "RUNNING");
        ck_assert_str_eq(json_string_value(json_object_get(last, "message")),
                         "attempt 1 runs on n2:2 (planned: n1:2)");
        json_decref(ev);
    }
    ck_assert_int_eq(store_attempt_progress(st, id, 1, 2.5, 1234.5, &err), 0);
    ck_assert_int_eq(store_attempt_end(st, id, 1, 3, 1.25, "exit 3", "FAILED", "failed", &sc, &err),
                     0);
    ck_assert_int_eq(store_job_render(st, id, STORE_ANYONE, "/ck/", &text, NULL, &err), 0);
    got = json_loads(text, 0, &jerr);
    free(text);
    a = json_array_get(json_object_get(got, "attempts"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "exit_status")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(a, "hosts")), "n2:2");
    ck_assert_str_eq(json_string_value(json_object_get(a, "gpus")), "0,1");
    ck_assert_str_eq(json_string_value(json_object_get(a, "reason")), "exit 3");
    ck_assert(json_real_value(json_object_get(a, "start_overhead_s")) == 2.5);
    ck_assert(json_real_value(json_object_get(a, "stop_overhead_s")) == 1.25);
    ck_assert(json_real_value(json_object_get(a, "samples_per_s")) == 1234.5);
    ck_assert_str_eq(json_string_value(json_object_get(got, "state")), "FAILED");
    json_decref(got);
    json_decref(job);
    json_decref(s);
    store_close(st);
    unlink(path);
}
END_TEST

/* A batch stores each submission on its own: a reused key fails alone, a repeated key in the
 * same batch creates one job. */
START_TEST(group_commit)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *s1 = spec("a", "t"), *s2 = spec("b", "t"), *job;
    int created;
    struct store_submission subs[4] = {
        {.owner_id = U, .owner = "u", .spec = s1, .idem_key = "k1", .req_hash = "h1"},
        {.owner_id = U,
         .owner = "u",
         .spec = s2,
         .idem_key = "k0",
         .req_hash = "other"}, /* reused key */
        {.owner_id = U,
         .owner = "u",
         .spec = s1,
         .idem_key = "k1",
         .req_hash = "h1"}, /* retry of [0] */
        {.owner_id = U, .owner = "u", .spec = s2, .req_hash = "h2"},
    };
    struct store_submission *ptrs[4] = {&subs[0], &subs[1], &subs[2], &subs[3]};
    int64_t next;
    struct store_filter all = {.owner_id = STORE_ANYONE};
    json_t *page;

    ck_assert_int_eq(store_job_create(st, U, "u", s1, "k0", "h0", &job, &created, &err), 0);
    json_decref(job);
    ck_assert_int_eq(store_job_create_batch(st, ptrs, 4, &err), 0);
    ck_assert_int_eq(subs[0].rc, 0);
    ck_assert_int_eq(subs[0].created, 1);
    ck_assert_int_eq(subs[1].rc, -1);
    ck_assert_int_eq(subs[1].errnum, EEXIST);
    ck_assert_int_eq(subs[2].rc, 0);
    ck_assert_int_eq(subs[2].created, 0);
    ck_assert_str_eq(subs[2].id, subs[0].id);
    ck_assert_int_eq(subs[3].rc, 0);
    /* a new job comes back rendered, as a read would give it; a repeat does not */
    {
        char *read;
        ck_assert_ptr_nonnull(subs[0].job_text);
        ck_assert_ptr_null(subs[1].job_text);
        ck_assert_ptr_null(subs[2].job_text);
        ck_assert_int_eq(store_job_render(st, subs[0].id, STORE_ANYONE, "", &read, NULL, &err), 0);
        ck_assert_str_eq(subs[0].job_text, read);
        free(read);
        for (int i = 0; i < 4; i++)
            free(subs[i].job_text);
    }
    page = list(st, &all, 0, 100, &next);
    ck_assert_int_eq(json_array_size(page), 3);
    json_decref(page);
    json_decref(s1);
    json_decref(s2);
    store_close(st);
    unlink(path);
}
END_TEST

/*
 * A token joins the live principal of its name and Unix user (a rotated key sees the same
 * jobs); the name live for another user, or for admin tokens, is refused; once all of a
 * principal's tokens are revoked, its name is free and a new token of it is someone new.
 */
START_TEST(tokens_speak_for_principals)
{
    struct store *st = open_fresh();
    struct error err;
    struct store_filter mine = {.owner_id = 0};
    json_t *s = spec("a", "x"), *job, *page;
    int64_t p1, p, next;
    int created;
    char id[32];

    ck_assert_int_eq(store_token_create(st, "a1", "alice", "h1", 0, "u1", 0, &p1, &err), 0);
    ck_assert_int_gt(p1, 0);
    ck_assert_int_eq(store_token_create(st, "a2", "alice", "h2", 0, "u2", 0, &p, &err), -1);
    ck_assert_int_eq(errno, EEXIST);
    ck_assert_msg(strstr(err.text, "Unix user 'u1'") && strstr(err.text, "revoke"), "%s", err.text);
    ck_assert_int_eq(store_token_create(st, "a3", "alice", "h3", 0, NULL, 0, &p, &err), -1);
    ck_assert_int_eq(errno, EEXIST);
    ck_assert_int_eq(store_token_create(st, "a4", "alice", "h4", 1, "u1", 0, &p, &err), -1);
    ck_assert_int_eq(errno, EEXIST); /* an admin token may not take a user's name */
    ck_assert_int_eq(store_token_create(st, "a5", "alice", "h5", 0, "u1", 0, &p, &err), 0);
    ck_assert_int_eq(p, p1); /* the same person's second key */

    ck_assert_int_eq(store_job_create(st, p1, "alice", s, "k", "h", &job, &created, &err), 0);
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(job, "id")));
    ck_assert_int_eq(json_integer_value(json_object_get(job, "owner_id")), p1);
    json_decref(job);
    /* rotation: the old key goes, the principal stays */
    ck_assert_int_eq(store_token_revoke(st, "a1", p1, NULL, &err), 0);
    ck_assert_int_eq(store_token_create(st, "a6", "alice", "h6", 0, "u1", 0, &p, &err), 0);
    ck_assert_int_eq(p, p1);
    /* all revoked: retired */
    ck_assert_int_eq(store_token_revoke(st, "a5", STORE_ANYONE, NULL, &err), 0);
    ck_assert_int_eq(store_token_revoke(st, "a6", STORE_ANYONE, NULL, &err), 0);
    ck_assert_int_eq(store_token_create(st, "a7", "alice", "h7", 0, "u2", 0, &p, &err), 0);
    ck_assert_int_ne(p, p1);
    ck_assert_int_eq(store_job_get(st, id, p, &job, &err), -1);
    ck_assert_int_eq(errno, ENOENT);
    mine.owner_id = p;
    page = list(st, &mine, 0, 100, &next);
    ck_assert_int_eq(json_array_size(page), 0);
    json_decref(page);
    /* its idempotency keys are its own too */
    ck_assert_int_eq(store_job_create(st, p, "alice", s, "k", "h", &job, &created, &err), 0);
    ck_assert_int_eq(created, 1);
    ck_assert_str_ne(json_string_value(json_object_get(job, "id")), id);
    json_decref(job);
    /* the retired principal is never rejoined, even by its own user */
    ck_assert_int_eq(store_token_revoke(st, "a7", STORE_ANYONE, NULL, &err), 0);
    ck_assert_int_eq(store_token_create(st, "a8", "alice", "h8", 0, "u1", 0, &p, &err), 0);
    ck_assert_int_ne(p, p1);
    ck_assert_int_eq(store_job_get(st, id, p1, &job, &err), 0); /* the old one still owns it */
    json_decref(job);
    ck_assert_int_eq(store_token_list(st, p, &page, &err), 0);
    ck_assert_int_eq(json_array_size(page), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(page, 0), "id")), "a8");
    json_decref(page);
    json_decref(s);
    store_close(st);
    unlink(path);
}
END_TEST

START_TEST(tokens)
{
    struct store *st = open_fresh();
    struct error err;
    struct store_token t;
    int64_t bob;
    int n;
    ck_assert_int_eq(store_token_count(st, &n, &err), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(store_token_create(st, "abc", "alice", "deadbeef", 0, "alice", 0, NULL, &err),
                     0);
    ck_assert_int_eq(store_token_find(st, "abc", &t, &err), 0);
    ck_assert_str_eq(t.hash, "deadbeef");
    ck_assert_str_eq(t.name, "alice");
    ck_assert_str_eq(t.user, "alice");
    ck_assert_int_eq(t.admin, 0);
    ck_assert_int_eq(store_token_find(st, "zzz", &t, &err), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(store_token_create(st, "abc", "dup", "x", 0, NULL, 0, NULL, &err), -1);
    ck_assert_int_eq(errno, EEXIST);
    ck_assert_int_eq(store_token_create(st, "def", "bob", "cafe", 1, NULL, 0, &bob, &err), 0);
    ck_assert_int_eq(store_token_find(st, "def", &t, &err), 0);
    ck_assert_int_eq(t.principal, bob);
    ck_assert_str_eq(t.user, ""); /* no Unix user: the default user applies */
    {
        json_t *list;
        ck_assert_int_eq(store_token_list(st, STORE_ANYONE, &list, &err), 0);
        ck_assert_int_eq(json_array_size(list), 2);
        ck_assert_ptr_null(json_object_get(json_array_get(list, 0), "hash"));
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "user")),
                         "alice");
        ck_assert_ptr_null(json_object_get(json_array_get(list, 1), "user"));
        json_decref(list);
        ck_assert_int_eq(store_token_list(st, bob, &list, &err), 0);
        ck_assert_int_eq(json_array_size(list), 1);
        json_decref(list);
    }
    /* bob cannot revoke alice's token; an admin (NULL) can, and twice is fine */
    ck_assert_int_eq(store_token_revoke(st, "abc", bob, NULL, &err), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(store_token_revoke(st, "abc", STORE_ANYONE, NULL, &err), 0);
    ck_assert_int_eq(store_token_revoke(st, "abc", STORE_ANYONE, NULL, &err), 0);
    ck_assert_int_eq(store_token_find(st, "abc", &t, &err), -1);
    ck_assert_int_eq(errno, ENOENT);
    store_close(st);
    unlink(path);
}
END_TEST

/* Revoking the last live admin token would leave nobody able to create tokens: refused
 * (EPERM), however it is asked; with a second admin token either may go, once. */
START_TEST(the_last_admin_token_stays)
{
    struct store *st = open_fresh();
    struct error err;
    struct store_token t;
    int64_t admin, alice;
    ck_assert_int_eq(store_token_create(st, "adm", "admin", "aa", 1, NULL, 0, &admin, &err), 0);
    ck_assert_int_eq(store_token_create(st, "usr", "alice", "bb", 0, NULL, 0, &alice, &err), 0);
    ck_assert_int_eq(store_token_revoke(st, "adm", STORE_ANYONE, NULL, &err), -1);
    ck_assert_int_eq(errno, EPERM);
    ck_assert_int_eq(store_token_revoke(st, "adm", admin, NULL, &err), -1);
    ck_assert_int_eq(errno, EPERM);
    ck_assert_int_eq(store_token_revoke(st, "adm", alice, NULL, &err), -1);
    ck_assert_int_eq(errno, ENOENT); /* not alice's to know about */
    ck_assert_int_eq(store_token_find(st, "adm", &t, &err), 0);
    ck_assert_int_eq(store_token_revoke(st, "usr", STORE_ANYONE, NULL, &err),
                     0); /* users may all go */
    ck_assert_int_eq(store_token_create(st, "ad2", "ops", "cc", 1, NULL, 0, NULL, &err), 0);
    ck_assert_int_eq(store_token_revoke(st, "adm", STORE_ANYONE, NULL, &err), 0);
    ck_assert_int_eq(store_token_revoke(st, "adm", STORE_ANYONE, NULL, &err),
                     0); /* twice is fine */
    ck_assert_int_eq(store_token_revoke(st, "ad2", STORE_ANYONE, NULL, &err), -1);
    ck_assert_int_eq(errno, EPERM);
    /* An expired admin token is no other admin: ad2 stays; the expired one may go. */
    ck_assert_int_eq(store_token_create(st, "ad3", "ops", "dd", 1, NULL, 1000000000, NULL, &err),
                     0);
    ck_assert_int_eq(store_token_revoke(st, "ad2", STORE_ANYONE, NULL, &err), -1);
    ck_assert_int_eq(errno, EPERM);
    ck_assert_int_eq(store_token_revoke(st, "ad3", STORE_ANYONE, NULL, &err), 0);
    /* One that has not expired yet is. */
    ck_assert_int_eq(store_token_create(st, "ad4", "ops", "ee", 1, NULL, 4000000000, NULL, &err),
                     0);
    ck_assert_int_eq(store_token_revoke(st, "ad2", STORE_ANYONE, NULL, &err), 0);
    store_close(st);
    unlink(path);
}
END_TEST

/* Overwrites len bytes of the file at path at offset off with garbage. */
static void scribble(const char *file, long off, size_t len)
{
    FILE *f = fopen(file, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, off, SEEK_SET), 0);
    for (size_t i = 0; i < len; i++)
        fputc(0xa5, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* store_check: a sound database (or none yet) passes; a broken b-tree page, or a header
 * that is no SQLite database, is EUCLEAN with what quick_check found. */
START_TEST(check_finds_corruption)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *s = spec("a", "x"), *job;
    sqlite3 *db;
    sqlite3_stmt *q;
    int created, root = 0;

    ck_assert_int_eq(store_check("/nonexistent/ringd.db", &err), 0);
    for (int i = 0; i < 50; i++) {
        ck_assert_int_eq(store_job_create(st, ALICE, "alice", s, NULL, "h", &job, &created, &err),
                         0);
        json_decref(job);
    }
    store_close(st); /* the last connection: the WAL is checkpointed into the file */
    ck_assert_msg(store_check(path, &err) == 0, "%s", err.text);
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT rootpage FROM sqlite_schema WHERE name = "
                                        "'jobs_state'",
                                        -1, &q, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    root = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    ck_assert_int_gt(root, 1);
    scribble(path, (long)(root - 1) * 4096, 64); /* the index's root page header */
    ck_assert_int_eq(store_check(path, &err), -1);
    ck_assert_int_eq(errno, EUCLEAN);
    ck_assert_msg(strstr(err.text, "age") != NULL, "%s", err.text); /* "Page N: ..." etc. */
    scribble(path, 0, 16);                                          /* "SQLite format 3" no more */
    ck_assert_int_eq(store_check(path, &err), -1);
    ck_assert_int_eq(errno, EUCLEAN);
    json_decref(s);
}
END_TEST

/*
 * /metrics' counters never go down: deleting a job (its attempts and events with it)
 * leaves them, while the gauge of jobs by state follows. Before, they were counted from
 * those rows at every scrape, so a DELETE took them back.
 */
START_TEST(metrics_survive_delete)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *before, *after;
    const char *lat = "ringd_scheduling_latency_seconds", *stop = "ringd_attempt_stop_seconds",
               *start = "ringd_attempt_start_seconds";
    char id[32];

    snprintf(id, sizeof(id), "%s", ran_once(st, "a"));
    ran_once(st, "b");
    ck_assert_int_eq(store_metrics(st, &before, &err), 0);
    ck_assert_int_eq(metric(before, "counters", "ringd_resizes_total", NULL), 2);
    ck_assert_int_eq(metric(before, "histograms", lat, "count"), 2);
    ck_assert_int_eq(metric(before, "histograms", stop, "count"), 2);
    ck_assert(metric(before, "histograms", stop, "sum") == 8.0);
    ck_assert_int_eq(metric(before, "histograms", start, "count"), 2);
    ck_assert(metric(before, "histograms", start, "sum") == 3.0);
    ck_assert_int_eq(bucket(before, stop, 3), 0);
    ck_assert_int_eq(bucket(before, stop, 5), 2);
    ck_assert_int_eq(bucket(before, start, 1), 0);
    ck_assert_int_eq(bucket(before, start, 2), 2);
    ck_assert_int_eq(bucket(before, lat, 3600), 2);
    ck_assert_int_eq(json_array_size(json_object_get(
                         json_object_get(json_object_get(before, "histograms"), lat), "buckets")),
                     13);
    ck_assert_int_eq(metric(before, "jobs", "SUCCEEDED", NULL), 2);
    ck_assert_int_eq(metric(before, "submissions", NULL, NULL), 2);

    ck_assert_int_eq(store_job_delete(st, id, &err), 0);
    ck_assert_int_eq(store_metrics(st, &after, &err), 0);
    ck_assert_int_eq(metric(after, "jobs", "SUCCEEDED", NULL), 1);
    json_object_del(before, "jobs");
    json_object_del(after, "jobs");
    ck_assert_msg(json_equal(before, after), "counters changed with a delete");
    json_decref(after);
    /* and they survive a restart */
    store_close(st);
    ck_assert_int_eq(store_open(path, &st, &err), 0);
    ck_assert_int_eq(store_metrics(st, &after, &err), 0);
    json_object_del(after, "jobs");
    ck_assert(json_equal(before, after));
    json_decref(after);
    json_decref(before);
    store_close(st);
    unlink(path);
}
END_TEST

/* Newest first: every job once, in reverse creation order, page after page; filters too. */
START_TEST(paging_newest_first)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *page, *job;
    char ids[7][32];
    int64_t next = 0;
    int created, seen = 0;
    struct store_filter all = {.owner_id = STORE_ANYONE, .newest_first = 1},
                        odd = {.owner_id = U,
                               .label_key = "team",
                               .label_value = "odd",
                               .newest_first = 1};
    for (int i = 0; i < 7; i++) {
        json_t *s = spec("j", i % 2 ? "odd" : "even");
        ck_assert_int_eq(store_job_create(st, U, "u", s, NULL, "h", &job, &created, &err), 0);
        snprintf(ids[i], sizeof(ids[i]), "%s", json_string_value(json_object_get(job, "id")));
        json_decref(job);
        json_decref(s);
    }
    do {
        page = list(st, &all, next, 3, &next);
        for (size_t i = 0; i < json_array_size(page); i++, seen++)
            ck_assert_str_eq(json_string_value(json_object_get(json_array_get(page, i), "id")),
                             ids[6 - seen]);
        json_decref(page);
    } while (next != 0);
    ck_assert_int_eq(seen, 7);
    page = list(st, &odd, 0, 2, &next); /* jobs 5 and 3, then 1 */
    ck_assert_int_eq(json_array_size(page), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(page, 0), "id")), ids[5]);
    json_decref(page);
    page = list(st, &odd, next, 2, &next);
    ck_assert_int_eq(json_array_size(page), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(page, 0), "id")), ids[1]);
    ck_assert_int_eq(next, 0);
    json_decref(page);
    store_close(st);
    unlink(path);
}
END_TEST

/*
 * Every job's events: all of them for an admin, in order, each with its job; only a
 * principal's own for a user. A user whose jobs are quiet moves on past others' events (upto),
 * and a page that is full goes on from its last event.
 */
START_TEST(events_of_every_job)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *job, *ev, *s = spec("e", "t");
    char a[32], b[32];
    int64_t upto, newest, mine;
    int created;

    ck_assert_int_eq(store_events_newest(st, &newest, &err), 0);
    ck_assert_int_eq(newest, 0);
    ck_assert_int_eq(store_job_create(st, ALICE, "alice", s, NULL, "h", &job, &created, &err), 0);
    snprintf(a, sizeof(a), "%s", json_string_value(json_object_get(job, "id")));
    json_decref(job);
    ck_assert_int_eq(store_job_create(st, BOB, "bob", s, NULL, "h", &job, &created, &err), 0);
    snprintf(b, sizeof(b), "%s", json_string_value(json_object_get(job, "id")));
    json_decref(job);
    json_decref(s);
    ck_assert_int_eq(store_job_transition(st, b, "CANCELLED", "cancelled", "by bob", NULL, &err),
                     0);
    ck_assert_int_eq(store_events_newest(st, &newest, &err), 0);
    ck_assert_int_eq(newest, 3);

    ck_assert_int_eq(store_events_all(st, STORE_ANYONE, 0, 100, &ev, &upto, &err), 0);
    ck_assert_int_eq(json_array_size(ev), 3);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(ev, 0), "job_id")), a);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(ev, 2), "job_id")), b);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(ev, 2), "state")),
                     "CANCELLED");
    ck_assert_int_eq(upto, 3);
    json_decref(ev);

    ck_assert_int_eq(store_events_all(st, ALICE, 0, 100, &ev, &upto, &err), 0);
    ck_assert_int_eq(json_array_size(ev), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(ev, 0), "job_id")), a);
    ck_assert_int_eq(upto, 3); /* past bob's two */
    json_decref(ev);
    ck_assert_int_eq(store_events_all(st, ALICE, upto, 100, &ev, &mine, &err), 0);
    ck_assert_int_eq(json_array_size(ev), 0);
    ck_assert_int_eq(mine, 3);
    json_decref(ev);

    ck_assert_int_eq(store_events_all(st, STORE_ANYONE, 0, 2, &ev, &upto, &err), 0);
    ck_assert_int_eq(json_array_size(ev), 2);
    ck_assert_int_eq(upto, 2); /* a full page: on from its last */
    json_decref(ev);
    ck_assert_int_eq(store_events_all(st, BOB, upto, 2, &ev, &upto, &err), 0);
    ck_assert_int_eq(json_array_size(ev), 1);
    ck_assert_int_eq(upto, 3);
    json_decref(ev);
    store_close(st);
    unlink(path);
}
END_TEST

/* The attempts behind the cluster's usage: those running, and those that ended after the
 * window's start, with what they held. */
START_TEST(attempts_since_a_time)
{
    struct store *st = open_fresh();
    struct error err;
    json_t *job, *got,
        *s = json_pack("{s:s, s:[s], s:i, s:i}", "name", "u", "command", "/bin/true",
                       "gpus_per_worker", 2, "cpus_per_worker", 3);
    struct store_attempt at = {1, 2, "n1:2", "0,1,2,3", "7", "/run/1", "process group"};
    struct store_sched sc = {1, 0, 0, 0};
    const char *id;
    int created;
    double now = (double)time(NULL);

    ck_assert_int_eq(store_job_create(st, ALICE, "alice", s, NULL, "h", &job, &created, &err), 0);
    id = json_string_value(json_object_get(job, "id"));
    ck_assert_int_eq(store_attempt_start(st, id, &at, &sc, &err), 0);
    ck_assert_int_eq(store_attempts_since(st, now - 60, &got, &err), 0);
    ck_assert_int_eq(json_array_size(got), 1);
    ck_assert(json_is_null(json_object_get(json_array_get(got, 0), "end_s")));
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(got, 0), "workers")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(got, 0), "gpus")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(got, 0), "slots")), 6);
    ck_assert(fabs(json_real_value(json_object_get(json_array_get(got, 0), "start_s")) - now) < 5);
    json_decref(got);
    ck_assert_int_eq(
        store_attempt_end(st, id, 1, 0, -1, "exit 0", "SUCCEEDED", "succeeded", &sc, &err), 0);
    ck_assert_int_eq(store_attempts_since(st, now - 60, &got, &err), 0);
    ck_assert_int_eq(json_array_size(got), 1); /* ended within the window */
    ck_assert(json_is_real(json_object_get(json_array_get(got, 0), "end_s")));
    json_decref(got);
    ck_assert_int_eq(store_attempts_since(st, now + 60, &got, &err), 0);
    ck_assert_int_eq(json_array_size(got), 0); /* ended before it */
    json_decref(got);
    json_decref(job);
    json_decref(s);
    store_close(st);
    unlink(path);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {create_get_and_owner_scoping,
                            idempotency_keys,
                            paging_and_filters,
                            render,
                            group_commit,
                            tokens,
                            tokens_speak_for_principals,
                            the_last_admin_token_stays,
                            check_finds_corruption,
                            metrics_survive_delete,
                            paging_newest_first,
                            events_of_every_job,
                            attempts_since_a_time,
                            NULL};
    return unit_main("store", tests, 30);
}
