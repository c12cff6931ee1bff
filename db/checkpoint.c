/* SPDX-License-Identifier: Apache-2.0 */
/*
 * checkpoint.c - WAL checkpoints off the commit path.
 *
 * By default SQLite checkpoints inside whichever COMMIT pushes the WAL past 1000 pages:
 * that commit then copies the WAL into the database and fsyncs it, and the requests
 * waiting on it see a latency spike many times the usual commit. ringd's connections turn
 * that off and this thread checkpoints instead, every CHECKPOINT_MS, in PASSIVE mode (it
 * never blocks readers or writers; what it cannot copy now it copies next time).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_impl.h"

#define CHECKPOINT_MS 250

struct store_checkpointer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    struct store *st;
};

static void *run(void *arg)
{
    struct store_checkpointer *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += CHECKPOINT_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&c->cv, &c->mu, &until);
        if (c->stop)
            break;
        pthread_mutex_unlock(&c->mu);
        sqlite3_wal_checkpoint_v2(c->st->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    /* Last one on the way out: the WAL is copied and emptied when nobody else reads. */
    sqlite3_wal_checkpoint_v2(c->st->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    return NULL;
}

struct store_checkpointer *store_checkpointer_start(const char *path, struct error *err)
{
    struct store_checkpointer *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    store__background_checkpoints = 1;
    if (store_open(path, &c->st, err) < 0) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if ((errno = pthread_create(&c->thread, NULL, run, c)) != 0) {
        errprintf(err, "cannot start the checkpoint thread: %s", strerror(errno));
        store_close(c->st);
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return NULL;
    }
    return c;
}

void store_checkpointer_stop(struct store_checkpointer *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    store_close(c->st);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
