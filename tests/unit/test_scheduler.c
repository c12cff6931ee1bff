/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of ringd's scheduler thread as the HTTP threads reach it (scheduler.h), with
 * the local backend and a real store. The thread is held the way a slow backend call would
 * hold it: another connection keeps the database's write lock, so the thread's next write
 * waits (SQLite's busy timeout, 5 s). Callers must then get an answer within the deadline:
 * a request the thread took is left to it (EINPROGRESS) and carried out once it is free, one
 * it had not taken is withdrawn (ETIMEDOUT), and reads get what it last said. Run several
 * times with several callers at once, so that a caller giving up while the thread takes
 * its request happens too (ASan and TSan watch the hand-over).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "scheduler/core/scheduler.h"
#include "unit.h"

static char dir[] = "/tmp/ring-scheduler-XXXXXX";
static char db_path[256];
static struct scheduler *sched;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void setup(void)
{
    /* No ringd-exec beside the test to isolate jobs with (and no job ever starts). */
    static const struct setting_value settings[] = {{"isolation", "none"}};
    struct scheduler_config cfg = {
        .db_path = db_path,
        .data_dir = dir,
        .ringrun = "/nonexistent/ringrun",
        .slots = 1, /* the test's jobs want 2 workers: they stay queued, never started */
        .kill_grace_s = 1,
        .backend = "local",
        .settings = settings,
        .nsettings = 1,
        .policy = "fifo",
    };
    struct store *st;
    struct error err;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(db_path, sizeof(db_path), "%s/ringd.db", dir);
    ck_assert_msg(store_open(db_path, &st, &err) == 0, "%s", err.text);
    store_close(st);
    cfg.params = (struct policy_params){.interval_s = 60, .restart_cost_s = 10, .hysteresis = 2};
    sched = scheduler_start(&cfg, &err);
    ck_assert_msg(sched != NULL, "%s", err.text);
}

static void teardown(void)
{
    char cmd[300];
    scheduler_stop(sched);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

/* A queued job of 2 workers (more than the 1 slot: it never starts); its id into id. */
static void queued_job(char id[32])
{
    struct store *st;
    struct error err;
    json_t *spec = json_pack("{s:s, s:[s], s:{s:i, s:i}}", "name", "held", "command", "/bin/true",
                             "workers", "min", 2, "max", 2),
           *job;
    int created;
    ck_assert_int_eq(store_open(db_path, &st, &err), 0);
    ck_assert_msg(store_job_create(st, 1, "alice", spec, NULL, "h", &job, &created, &err) == 0,
                  "%s", err.text);
    snprintf(id, 32, "%s", json_string_value(json_object_get(job, "id")));
    json_decref(job);
    json_decref(spec);
    store_close(st);
    scheduler_wake(sched);
}

/* The job's state now. */
static void job_state(const char *id, char *state, size_t len)
{
    struct store *st;
    struct error err;
    json_t *job;
    ck_assert_int_eq(store_open(db_path, &st, &err), 0);
    ck_assert_int_eq(store_job_get(st, id, STORE_ANYONE, &job, &err), 0);
    snprintf(state, len, "%s", json_string_value(json_object_get(job, "state")));
    json_decref(job);
    store_close(st);
}

/* A caller: one request of kind, timed. */
struct caller {
    pthread_t t;
    int kind; /* 0 cancel, 1 resume, 2 info, 3 snapshot, 4 set policy */
    const char *id;
    int rc, errnum;
    double took, age;
};

static void *call(void *arg)
{
    struct caller *c = arg;
    struct error err;
    json_t *v = NULL;
    double t0 = now_s();
    c->age = -1;
    switch (c->kind) {
    case 0:
        c->rc = scheduler_cancel(sched, c->id, &err);
        break;
    case 1:
        c->rc = scheduler_resume(sched, c->id, &err);
        break;
    case 2:
        v = scheduler_info(sched, &c->age);
        c->rc = v ? 0 : -1;
        break;
    case 3:
        v = scheduler_snapshot(sched, &c->age);
        c->rc = v ? 0 : -1;
        break;
    default:
        c->rc = scheduler_set_policy(sched, "priority", &v, &err);
        break;
    }
    c->errnum = errno;
    c->took = now_s() - t0;
    json_decref(v);
    return NULL;
}

START_TEST(a_held_scheduler_answers_in_time)
{
    for (int round = 0; round < 4; round++) {
        char id[32], other[32], state[32];
        struct caller c[6];
        sqlite3 *db;
        double t0;

        queued_job(id);
        queued_job(other);
        /* the thread knows both before the lock */
        {
            json_t *v;
            double age;
            v = scheduler_info(sched, &age);
            ck_assert_ptr_nonnull(v);
            json_decref(v);
        }
        ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
        ck_assert_int_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
        /* The cancel is taken and waits for the lock inside the thread ... */
        c[0] = (struct caller){.kind = 0, .id = id};
        ck_assert_int_eq(pthread_create(&c[0].t, NULL, call, &c[0]), 0);
        usleep(100 * 1000);
        /* ... while these queue behind it. */
        for (int i = 1; i < 6; i++) {
            c[i] = (struct caller){.kind = i == 1 ? 0 : i - 1, .id = i == 1 ? other : id};
            ck_assert_int_eq(pthread_create(&c[i].t, NULL, call, &c[i]), 0);
        }
        t0 = now_s();
        for (int i = 0; i < 6; i++)
            pthread_join(c[i].t, NULL);
        ck_assert_double_lt(now_s() - t0, 2.0);
        for (int i = 0; i < 6; i++)
            ck_assert_msg(c[i].took < 1.5, "round %d caller %d waited %.2f s", round, i, c[i].took);
        ck_assert_int_eq(c[0].rc, -1);
        ck_assert_int_eq(c[0].errnum, EINPROGRESS);
        ck_assert_int_eq(c[1].rc, -1);
        ck_assert_int_eq(c[1].errnum, ETIMEDOUT); /* withdrawn: nothing done */
        ck_assert_int_eq(c[2].rc, -1);            /* resume */
        ck_assert_int_eq(c[2].errnum, ETIMEDOUT);
        ck_assert_int_eq(c[3].rc, 0); /* info: what the thread said last */
        ck_assert_double_ge(c[3].age, 0);
        ck_assert_int_eq(c[4].rc, 0); /* snapshot: the same */
        ck_assert_int_eq(c[5].rc, -1);
        ck_assert_int_eq(c[5].errnum, ETIMEDOUT);
        /* Free again, the thread carries out what it took, and only that. */
        ck_assert_int_eq(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        for (int i = 0; i < 100; i++) {
            job_state(id, state, sizeof(state));
            if (strcmp(state, "CANCELLED") == 0)
                break;
            usleep(50 * 1000);
        }
        ck_assert_str_eq(state, "CANCELLED");
        job_state(other, state, sizeof(state));
        ck_assert_str_eq(state, "QUEUED"); /* its cancel was withdrawn */
        {
            json_t *v;
            double age;
            v = scheduler_info(sched, &age);
            ck_assert_ptr_nonnull(v);
            ck_assert(age == 0); /* answered by the thread itself again */
            ck_assert_str_eq(json_string_value(json_object_get(v, "policy")), "fifo");
            json_decref(v);
        }
        ck_assert_int_eq(scheduler_cancel(sched, other, NULL), 0);
    }
}
END_TEST

int main(void)
{
    const TTest *tests[] = {a_held_scheduler_answers_in_time, NULL};
    return unit_main_fixture("scheduler", tests, 120, setup, teardown);
}
