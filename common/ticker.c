/* SPDX-License-Identifier: Apache-2.0 */
/* ticker.c - a thread that does one thing every period until stopped (ticker.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "clock.h"
#include "ticker.h"

struct ticker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_REALTIME, the default */
    int stop;          /* under mu */
    int period_ms;
    void (*tick)(void *arg);
    void *arg;
};

static void *run(void *arg)
{
    struct ticker *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec until = clock_deadline(CLOCK_REALTIME, t->period_ms / 1e3);
        while (!t->stop && pthread_cond_timedwait(&t->cv, &t->mu, &until) == 0)
            ; /* woken early for nothing (spurious): wait out the period */
        if (t->stop)
            break;
        pthread_mutex_unlock(&t->mu);
        t->tick(t->arg);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

struct ticker *ticker_start(int period_ms, void (*tick)(void *arg), void *arg)
{
    struct ticker *t = calloc(1, sizeof(*t));
    int e;
    if (t == NULL)
        return errno = ENOMEM, NULL;
    t->period_ms = period_ms;
    t->tick = tick;
    t->arg = arg;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if ((e = pthread_create(&t->thread, NULL, run, t)) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return errno = e, NULL;
    }
    return t;
}

void ticker_stop(struct ticker *t)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
