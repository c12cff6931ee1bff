/* SPDX-License-Identifier: Apache-2.0 */
/* commit.c - the group committer of job submissions (see commit.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "commit.h"

/* Submissions per transaction at most: bounds how long one commit holds the write lock. */
#define BATCH_MAX 512

struct committer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct commit_item *head, *tail; /* FIFO: submissions are stored in arrival order */
    int stopping;
    void (*done)(void *arg);
    char db_path[4200];
};

static void *run(void *arg)
{
    struct committer *c = arg;
    struct store_submission *subs[BATCH_MAX];
    struct commit_item *batch[BATCH_MAX];
    struct store *st = NULL;
    struct error err;

    for (;;) {
        int n = 0;
        pthread_mutex_lock(&c->mu);
        while (c->head == NULL && !c->stopping)
            pthread_cond_wait(&c->cv, &c->mu);
        while (c->head != NULL && n < BATCH_MAX) {
            batch[n] = c->head;
            subs[n] = c->head->sub;
            c->head = c->head->next;
            n++;
        }
        if (c->head == NULL)
            c->tail = NULL;
        pthread_mutex_unlock(&c->mu);
        if (n == 0)
            break; /* stopping, and nothing left */
        if (st == NULL && store_open(c->db_path, &st, &err) < 0) {
            int e = errno;
            for (int i = 0; i < n; i++)
                store_submission_fail(batch[i]->sub, e, &err);
        } else {
            store_job_create_batch(st, subs, n, &err);
        }
        for (int i = 0; i < n; i++)
            c->done(batch[i]->arg);
    }
    store_close(st);
    return NULL;
}

struct committer *committer_start(const char *db_path, void (*done)(void *arg), struct error *err)
{
    struct committer *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    snprintf(c->db_path, sizeof(c->db_path), "%s", db_path);
    c->done = done;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if ((errno = pthread_create(&c->thread, NULL, run, c)) != 0) {
        errprintf(err, "cannot start the committer thread");
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return NULL;
    }
    return c;
}

void committer_push(struct committer *c, struct commit_item *item)
{
    item->next = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->stopping) {
        struct error why;
        pthread_mutex_unlock(&c->mu);
        errprintf(&why, "ringd is shutting down; retry the submission");
        store_submission_fail(item->sub, EBUSY, &why);
        c->done(item->arg);
        return;
    }
    if (c->tail)
        c->tail->next = item;
    else
        c->head = item;
    c->tail = item;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void committer_close(struct committer *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    if (c->stopping) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    c->stopping = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
}

void committer_free(struct committer *c)
{
    if (c == NULL)
        return;
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void committer_stop(struct committer *c)
{
    committer_close(c);
    committer_free(c);
}
