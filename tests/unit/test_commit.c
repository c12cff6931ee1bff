/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the group committer (server/commit.c) over a real SQLite database: what is
 * queued together is stored in one transaction, a failing submission is undone alone by
 * its savepoint, arrival order is kept, and stopping answers everything.
 *
 * Batches are made deterministic through done(): it runs on the committer thread between
 * two batches, so whatever it pushes forms exactly the next batch. Transactions are counted
 * as the commit records in the database's write-ahead log.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "db/store.h"
#include "server/commit.h"
#include "unit.h"

#define ITEMS_MAX 256

struct item {
    struct commit_item ci;
    struct store_submission sub;
    char name[32];
    atomic_int done;
    pthread_t by; /* the thread that called done() */
};

static char path[64];
static struct item items[ITEMS_MAX];
static int nitems;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int answered;
static void (*after_first)(void); /* runs inside the first done() */
static struct committer *committer;

static void on_done(void *arg)
{
    struct item *it = arg;
    int first;

    it->by = pthread_self();
    atomic_store(&it->done, 1);
    pthread_mutex_lock(&mu);
    first = answered++ == 0;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    if (first && after_first != NULL)
        after_first();
}

/* A new item named name (the job's name), with an Idempotency-Key when key is not NULL. */
static struct item *item(const char *name, const char *key, const char *hash)
{
    struct item *it;
    ck_assert_int_lt(nitems, ITEMS_MAX);
    it = &items[nitems++];
    memset(it, 0, sizeof(*it));
    snprintf(it->name, sizeof(it->name), "%s", name);
    it->sub.owner = "tester";
    it->sub.spec = json_pack("{s:s, s:[s]}", "name", name, "command", "/bin/true");
    it->sub.idem_key = key;
    it->sub.req_hash = hash ? hash : name;
    it->ci.sub = &it->sub;
    it->ci.arg = it;
    return it;
}

static void push(struct item *it)
{
    committer_push(committer, &it->ci);
}

/* Waits until n items were answered; fails after 30 s. */
static void wait_answered(int n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&mu);
    while (answered < n)
        if (pthread_cond_timedwait(&cv, &mu, &until) != 0)
            break;
    pthread_mutex_unlock(&mu);
    ck_assert_msg(answered >= n, "%d of %d submissions answered after 30 s", answered, n);
}

static sqlite3 *db; /* the test's own connection: it keeps the WAL from being removed */

static void setup(void)
{
    struct store *st;
    struct error err;
    int fd;

    snprintf(path, sizeof(path), "/tmp/ring-commit-XXXXXX");
    fd = mkstemp(path);
    close(fd);
    unlink(path);
    ck_assert_msg(store_open(path, &st, &err) == 0, "%s", err.text); /* runs the migrations */
    store_close(st);
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    nitems = answered = 0;
    after_first = NULL;
    committer = committer_start(path, on_done, &err);
    ck_assert_msg(committer != NULL, "%s", err.text);
}

static void teardown(void)
{
    char p[80];
    committer_stop(committer);
    committer = NULL;
    sqlite3_close(db);
    for (int i = 0; i < nitems; i++) {
        json_decref(items[i].sub.spec);
        free(items[i].sub.job_text);
    }
    unlink(path);
    snprintf(p, sizeof(p), "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", path);
    unlink(p);
}

static int count(const char *sql)
{
    sqlite3_stmt *s;
    int n;
    ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    n = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return n;
}

static int jobs_named(const char *name)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM jobs WHERE name = '%s'", name);
    return count(sql);
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/*
 * The commit records in the write-ahead log: frames whose "database size after commit" is
 * not zero, among those that carry the header's salts (frames left from before a reset of
 * the log do not). Nothing checkpoints here, so every transaction of the test is there.
 */
static int wal_commits(void)
{
    char p[80];
    unsigned char h[32], fh[24];
    uint32_t page, salt1, salt2;
    int n = 0;
    FILE *f;

    snprintf(p, sizeof(p), "%s-wal", path);
    if ((f = fopen(p, "rb")) == NULL)
        return 0;
    if (fread(h, 1, sizeof(h), f) == sizeof(h)) {
        page = be32(h + 8) == 1 ? 65536 : be32(h + 8);
        salt1 = be32(h + 16);
        salt2 = be32(h + 20);
        while (fread(fh, 1, sizeof(fh), f) == sizeof(fh) && be32(fh + 8) == salt1 &&
               be32(fh + 12) == salt2) {
            n += be32(fh + 4) != 0;
            if (fseek(f, page, SEEK_CUR) != 0)
                break;
        }
    }
    fclose(f);
    return n;
}

START_TEST(a_submission_is_stored_and_answered)
{
    struct item *a = item("alone", NULL, NULL);
    push(a);
    wait_answered(1);
    ck_assert_int_eq(a->sub.rc, 0);
    ck_assert_int_eq(a->sub.created, 1);
    ck_assert_ptr_nonnull(a->sub.job_text);
    ck_assert_ptr_nonnull(strstr(a->sub.job_text, a->sub.id));
    ck_assert_int_eq(jobs_named("alone"), 1);
    ck_assert_int_eq(count("SELECT count(*) FROM events WHERE type = 'submitted'"), 1);
}
END_TEST

START_TEST(done_runs_on_the_committer_thread)
{
    struct item *a = item("a", NULL, NULL);
    push(a);
    wait_answered(1);
    ck_assert(!pthread_equal(a->by, pthread_self()));
}
END_TEST

/* The WAL counter itself: one submission alone is one transaction. */
START_TEST(one_submission_is_one_commit)
{
    int before = wal_commits();
    push(item("one", NULL, NULL));
    wait_answered(1);
    ck_assert_int_eq(wal_commits() - before, 1);
}
END_TEST

#define BATCH 100
static int commits_between;

static void push_batch(void)
{
    commits_between = wal_commits();
    for (int i = 0; i < BATCH; i++) {
        char name[32];
        snprintf(name, sizeof(name), "b%d", i);
        push(item(name, NULL, NULL));
    }
}

/* What is queued while a commit runs goes into the next one, all of it in one transaction. */
START_TEST(queued_submissions_share_one_commit)
{
    after_first = push_batch;
    push(item("first", NULL, NULL));
    wait_answered(1 + BATCH);
    ck_assert_int_eq(wal_commits() - commits_between, 1);
    ck_assert_int_eq(count("SELECT count(*) FROM jobs"), 1 + BATCH);
    for (int i = 1; i <= BATCH; i++) {
        ck_assert_int_eq(items[i].sub.rc, 0);
        ck_assert_int_eq(items[i].sub.created, 1);
    }
}
END_TEST

/* Jobs are stored in the order their submissions arrived, within a batch and across. */
START_TEST(arrival_order_is_kept)
{
    sqlite3_stmt *s;
    int i = 0;

    after_first = push_batch;
    push(item("first", NULL, NULL));
    wait_answered(1 + BATCH);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT name FROM jobs ORDER BY seq", -1, &s, NULL),
                     SQLITE_OK);
    while (sqlite3_step(s) == SQLITE_ROW) {
        ck_assert_int_lt(i, nitems);
        ck_assert_str_eq((const char *)sqlite3_column_text(s, 0), items[i].name);
        i++;
    }
    sqlite3_finalize(s);
    ck_assert_int_eq(i, 1 + BATCH);
}
END_TEST

static void push_good_poison_good(void)
{
    commits_between = wal_commits();
    push(item("good1", NULL, NULL));
    push(item("poison", NULL, NULL));
    push(item("good2", NULL, NULL));
}

/*
 * A submission that fails after its job row was inserted (here its event is refused by a
 * trigger) is rolled back to its savepoint: its rows are gone, and the submissions before
 * and after it in the same transaction are stored.
 */
START_TEST(a_failing_submission_is_undone_alone)
{
    char *msg = NULL;
    ck_assert_int_eq(sqlite3_exec(db,
                                  "CREATE TRIGGER poison BEFORE INSERT ON events WHEN (SELECT name "
                                  "FROM jobs WHERE id = NEW.job_id) = 'poison' BEGIN SELECT "
                                  "RAISE(ABORT, 'poisoned by the test'); END",
                                  NULL, NULL, &msg),
                     SQLITE_OK);
    after_first = push_good_poison_good;
    push(item("first", NULL, NULL));
    wait_answered(4);
    ck_assert_int_eq(wal_commits() - commits_between, 1); /* one transaction for the three */
    ck_assert_int_eq(items[1].sub.rc, 0);
    ck_assert_int_eq(items[3].sub.rc, 0);
    ck_assert_int_eq(items[2].sub.rc, -1);
    ck_assert_int_ne(items[2].sub.errnum, 0);
    ck_assert_msg(strstr(items[2].sub.err.text, "poisoned by the test") != NULL, "%s",
                  items[2].sub.err.text);
    ck_assert_ptr_null(items[2].sub.job_text);
    ck_assert_int_eq(jobs_named("good1"), 1);
    ck_assert_int_eq(jobs_named("good2"), 1);
    ck_assert_int_eq(jobs_named("poison"), 0);
    ck_assert_int_eq(count("SELECT count(*) FROM events"), 3); /* first, good1, good2 */
}
END_TEST

static void push_key_twice(void)
{
    push(item("k-first", "key", "h1"));
    push(item("k-other", "key", "h2")); /* same key, another request */
    push(item("k-retry", "key", "h1")); /* same key, same request */
}

/* Idempotency inside one batch: a reused key fails alone, a retry gets the first job. */
START_TEST(a_reused_key_fails_alone_in_a_batch)
{
    after_first = push_key_twice;
    push(item("first", NULL, NULL));
    wait_answered(4);
    ck_assert_int_eq(items[1].sub.rc, 0);
    ck_assert_int_eq(items[1].sub.created, 1);
    ck_assert_int_eq(items[2].sub.rc, -1);
    ck_assert_int_eq(items[2].sub.errnum, EEXIST);
    ck_assert_int_eq(items[3].sub.rc, 0);
    ck_assert_int_eq(items[3].sub.created, 0);
    ck_assert_str_eq(items[3].sub.id, items[1].sub.id);
    ck_assert_int_eq(count("SELECT count(*) FROM jobs"), 2);
}
END_TEST

/* Stopping commits what is queued and answers all of it before it returns. */
START_TEST(stop_answers_what_is_queued)
{
    for (int i = 0; i < 50; i++) {
        char name[32];
        snprintf(name, sizeof(name), "q%d", i);
        push(item(name, NULL, NULL));
    }
    committer_stop(committer);
    committer = NULL;
    ck_assert_int_eq(answered, 50);
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(items[i].sub.rc, 0);
    ck_assert_int_eq(count("SELECT count(*) FROM jobs"), 50);
}
END_TEST

static sem_t stop_called;
static int refused_at = -1;

/* In the first done(): once another thread has begun committer_stop, pushes until one is
 * refused. It is refused at once: done() runs inside committer_push, on this thread. */
static void push_until_refused(void)
{
    struct timespec t0, now;
    ck_assert_int_eq(sem_wait(&stop_called), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct item *it = item("late", NULL, NULL);
        push(it);
        if (atomic_load(&it->done)) {
            refused_at = (int)(it - items);
            return;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        ck_assert_msg(now.tv_sec - t0.tv_sec < 10, "pushes still queue 10 s into the stop");
        usleep(1000);
    }
}

static void *stopper(void *arg)
{
    sem_post(&stop_called);
    committer_stop(committer);
    return NULL;
}

START_TEST(a_push_during_stop_fails_at_once)
{
    pthread_t t;

    ck_assert_int_eq(sem_init(&stop_called, 0, 0), 0);
    after_first = push_until_refused;
    push(item("first", NULL, NULL));
    ck_assert_int_eq(pthread_create(&t, NULL, stopper, NULL), 0);
    pthread_join(t, NULL);
    committer = NULL;
    ck_assert_int_ge(refused_at, 1);
    ck_assert_int_eq(items[refused_at].sub.rc, -1);
    ck_assert_int_eq(items[refused_at].sub.errnum, EBUSY);
    ck_assert_ptr_nonnull(strstr(items[refused_at].sub.err.text, "shutting down"));
    /* what was queued before the stop began is stored and answered */
    for (int i = 0; i < refused_at; i++) {
        ck_assert(atomic_load(&items[i].done));
        ck_assert_int_eq(items[i].sub.rc, 0);
    }
    ck_assert_int_eq(count("SELECT count(*) FROM jobs"), refused_at);
    ck_assert_int_eq(answered, refused_at + 1);
}
END_TEST

/* After committer_close (which a server calls before it stops its HTTP threads), a push is
 * answered at once with EBUSY, and what was queued before the close is stored. */
START_TEST(a_push_after_close_fails_at_once)
{
    struct item *late;

    for (int i = 0; i < 10; i++) {
        char name[32];
        snprintf(name, sizeof(name), "c%d", i);
        push(item(name, NULL, NULL));
    }
    committer_close(committer);
    ck_assert_int_eq(answered, 10);
    late = item("late", NULL, NULL);
    push(late);
    ck_assert(atomic_load(&late->done));
    ck_assert(pthread_equal(late->by, pthread_self()));
    ck_assert_int_eq(late->sub.rc, -1);
    ck_assert_int_eq(late->sub.errnum, EBUSY);
    ck_assert_ptr_nonnull(strstr(late->sub.err.text, "shutting down"));
    committer_free(committer);
    committer = NULL;
    ck_assert_int_eq(count("SELECT count(*) FROM jobs"), 10);
}
END_TEST

/* A database the committer cannot open: every submission fails, and is answered. */
START_TEST(an_unopenable_database_fails_every_submission)
{
    struct error err;
    committer_stop(committer);
    committer = committer_start("/nonexistent-ringd-dir/ringd.db", on_done, &err);
    ck_assert_ptr_nonnull(committer);
    push(item("x", NULL, NULL));
    push(item("y", NULL, NULL));
    wait_answered(2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(items[i].sub.rc, -1);
        ck_assert_int_ne(items[i].sub.errnum, 0);
        ck_assert_str_ne(items[i].sub.err.text, "");
    }
}
END_TEST

int main(void)
{
    const TTest *tests[] = {a_submission_is_stored_and_answered,
                            done_runs_on_the_committer_thread,
                            one_submission_is_one_commit,
                            queued_submissions_share_one_commit,
                            arrival_order_is_kept,
                            a_failing_submission_is_undone_alone,
                            a_reused_key_fails_alone_in_a_batch,
                            stop_answers_what_is_queued,
                            a_push_during_stop_fails_at_once,
                            a_push_after_close_fails_at_once,
                            an_unopenable_database_fails_every_submission,
                            NULL};
    return unit_main_fixture("commit", tests, 60, setup, teardown);
}
