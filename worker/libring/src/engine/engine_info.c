/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_info.c - what the program asks of the engine besides collectives: process sets
 * (added, removed, looked up: the table is process_set.c's), the timeline switch
 * (ring_timeline_start/stop) and the stats. Each takes mu; the timeline switch also waits
 * for the next cycle, which makes it (engine_cycle.c).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "engine/engine_impl.h"

int ring__engine_add_pset(struct ring__engine *e, const int *ranks, int n)
{
    int id;
    pthread_mutex_lock(&e->mu);
    if (e->psets.count >= MAX_PSETS)
        id = ring__err(RING_EINVAL, "at most %d process sets", MAX_PSETS);
    else
        id = ring__psets_add(&e->psets, ranks, n, e->ctx->size, e->ctx->rank);
    pthread_mutex_unlock(&e->mu);
    return id;
}

struct pset_busy {
    int id, n;
};

static void count_in_set(const char *name, void *value, void *arg)
{
    const struct entry *en = value;
    struct pset_busy *b = arg;
    (void)name;
    b->n += en->req.process_set == b->id;
}

int ring__engine_remove_pset(struct ring__engine *e, int id, int remove)
{
    struct pset_busy busy = {id, 0};
    int rc = 0;
    pthread_mutex_lock(&e->mu);
    if (id == RING_GLOBAL)
        rc = ring__err(RING_EINVAL, "the global process set cannot be removed");
    else if (ring__psets_get(&e->psets, id) == NULL)
        rc = ring__err(RING_EINVAL, "there is no process set %d to remove", id);
    if (rc == 0)
        ring__strmap_each(&e->inflight, count_in_set, &busy);
    if (rc == 0 && busy.n > 0)
        rc = ring__err(RING_EINVAL,
                       "process set %d has %d operation%s of rank %d in flight; wait for them "
                       "before removing it",
                       id, busy.n, busy.n == 1 ? "" : "s", e->ctx->rank);
    if (rc == 0 && remove)
        rc = ring__psets_remove(&e->psets, id);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int ring__engine_pset_info(struct ring__engine *e, int id, int *rank, int *size)
{
    const struct ring__pset *ps;
    if (id == RING_GLOBAL) { /* the world, fixed at start: every submission asks */
        *rank = e->ctx->rank;
        *size = e->ctx->size;
        return 0;
    }
    pthread_mutex_lock(&e->mu);
    ps = ring__psets_get(&e->psets, id);
    if (ps != NULL) {
        *rank = ps->my_rank;
        *size = ps->size;
    }
    pthread_mutex_unlock(&e->mu);
    return ps != NULL ? 0 : RING_EINVAL;
}

int ring__engine_timeline(struct ring__engine *e, const char *path)
{
    struct ring__timeline *t = NULL;
    int swapped;
    if (e->ctx->rank != 0)
        return 0;
    if (path != NULL && (t = ring__timeline_open(path)) == NULL)
        return ring__err(RING_ESYS, "cannot write the timeline to %s: %s", path, strerror(errno));
    pthread_mutex_lock(&e->mu);
    ring__timeline_close(e->timeline_swap);
    e->timeline_swap = t;
    e->timeline_swapping = 1;
    pthread_mutex_unlock(&e->mu);
    ring__engine_wake(e);
    /* Wait for the swap, so that a stopped timeline's file is complete when this returns.
     * The next cycle makes it (every peer's engine answers a cycle on its own, so it comes
     * within a control round, or the round fails). A failed engine runs no more cycles:
     * then the swap is made here, once its thread has let go of the cycle. */
    pthread_mutex_lock(&e->mu);
    while (e->timeline_swapping && !e->failed)
        pthread_cond_wait(&e->cv, &e->mu);
    swapped = !e->timeline_swapping;
    pthread_mutex_unlock(&e->mu);
    if (swapped)
        return 0;
    pthread_mutex_lock(&e->cycle_mu);
    pthread_mutex_lock(&e->mu);
    if (e->timeline_swapping) {
        ring__timeline_close(e->timeline);
        e->timeline = e->timeline_swap;
        e->timeline_swap = NULL;
        e->timeline_swapping = 0;
    }
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_unlock(&e->cycle_mu);
    return 0;
}

void ring__engine_stats(struct ring__engine *e, struct ring_engine_stats *out)
{
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->mu);
}
