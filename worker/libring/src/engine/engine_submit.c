/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_submit.c - the engine's side of the program's threads: the submission queue, the
 * in-flight table, the handles and how they complete and are waited for (engine.c gives
 * the whole picture). User threads queue under mu; the thread that runs a cycle completes
 * entries, and the waiters take their handles back.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"

static _Thread_local int next_blocking;

void ring__engine_next_is_blocking(int yes)
{
    next_blocking = yes;
}

/* ---- completing work (engine thread) ---- */

void ring__eng_finish_handle(struct ring__engine *e, struct ring_handle *h, int status,
                             const char *msg)
{
    if (status != 0 && h->status == 0) {
        h->status = status;
        snprintf(h->message, sizeof(h->message), "%s", msg ? msg : ring_strerror(status));
    }
    if (e->stop_agreed)
        h->stop_seen = 1;
    if (--h->remaining == 0) {
        h->done = 1;
        e->wake_waiters = 1; /* one broadcast per batch, in ring__eng_flush_waiters() */
    }
}

/* Wakes the threads waiting on handles, once for everything completed since the last call. */
void ring__eng_flush_waiters(struct ring__engine *e)
{
    pthread_mutex_lock(&e->mu);
    if (e->wake_waiters) {
        e->wake_waiters = 0;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
}

void ring__eng_pending_add(struct ring__engine *e, struct entry *en)
{
    en->taken = 1;
    en->pnext = NULL;
    en->pprev = e->ptail;
    if (e->ptail != NULL)
        e->ptail->pnext = en;
    else
        e->phead = en;
    e->ptail = en;
    e->npending++;
}

static void pending_remove(struct ring__engine *e, struct entry *en)
{
    if (en->pprev != NULL)
        en->pprev->pnext = en->pnext;
    else
        e->phead = en->pnext;
    if (en->pnext != NULL)
        en->pnext->pprev = en->pprev;
    else
        e->ptail = en->pprev;
    en->taken = 0;
    e->npending--;
}

struct entry *ring__eng_pending_get(struct ring__engine *e, const char *name)
{
    struct entry *en;
    pthread_mutex_lock(&e->mu);
    en = ring__strmap_get(&e->inflight, name);
    pthread_mutex_unlock(&e->mu);
    return en != NULL && en->taken ? en : NULL; /* taken belongs to the cycle, as we do */
}

/*
 * Takes en out of the tables and completes its part of the handle. Every entry lives in
 * its handle's allocation (struct solo, struct group), which the waiter frees as soon as
 * the handle is done: nothing may touch en after this. Under mu.
 */
static void finish_entry(struct ring__engine *e, struct entry *en, int status, const char *msg)
{
    ring__strmap_del_h(&e->inflight, en->req.name, en->hash);
    if (en->req.counts != NULL && en->nmem == 0) /* a packed group's are in its allocation */
        ring__request_clear(&en->req);
    ring__eng_finish_handle(e, en->handle, status, msg);
}

/* Removes a completed entry and completes its part of the handle. */
void ring__eng_complete(struct ring__engine *e, struct entry *en, int status, const char *msg)
{
    if (en->taken)
        pending_remove(e, en);
    pthread_mutex_lock(&e->mu);
    e->stats.tensors += en->nmem > 0 ? (uint64_t)en->nmem : 1;
    finish_entry(e, en, status, msg);
    pthread_mutex_unlock(&e->mu);
}

void ring__eng_complete_batch(struct ring__engine *e, struct entry **en, int n)
{
    for (int i = 0; i < n; i++) {
        if (en[i] != NULL && en[i]->taken)
            pending_remove(e, en[i]);
    }
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < n; i++) {
        if (en[i] != NULL) {
            e->stats.tensors += en[i]->nmem > 0 ? (uint64_t)en[i]->nmem : 1;
            finish_entry(e, en[i], 0, NULL);
            en[i] = NULL;
        }
    }
    pthread_mutex_unlock(&e->mu);
}

/* The engine cannot go on: every queued and pending request fails with err, and so will
 * every later submission. */
void ring__eng_fail_all(struct ring__engine *e, int err, const char *msg)
{
    struct entry *en, *next;

    /* First refuse new work, so that a caller woken by the failures below and submitting
     * again is told the engine is gone rather than queued behind it. */
    pthread_mutex_lock(&e->mu);
    e->failed = err;
    snprintf(e->failed_msg, sizeof(e->failed_msg), "%s", msg);
    pthread_mutex_unlock(&e->mu);
    for (en = e->phead; en != NULL; en = next) {
        next = en->pnext;
        ring__eng_complete(e, en, err, msg);
    }
    pthread_mutex_lock(&e->mu);
    for (en = e->qhead; en != NULL; en = next) {
        next = en->next; /* en may be freed once finished */
        finish_entry(e, en, err, msg);
    }
    e->qhead = NULL;
    e->qtail = &e->qhead;
    if (e->join_handle != NULL) {
        ring__eng_finish_handle(e, e->join_handle, err, msg);
        e->join_handle = NULL;
    }
    e->wake_waiters = 0;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    ring__log(RING_LOG_ERROR, "engine stopped: %s", msg);
}

/* ---- what user threads call ---- */

/* The error for work submitted after the engine stopped (called under mu). A transport
 * failure leaves the world broken for good; a stall or a shutdown keeps its own code. The
 * stored text already says which rank saw what, so it is repeated as is, not re-prefixed. */
static int refuse(struct ring__engine *e)
{
    if (e->failed == RING_ESTALL || e->failed == RING_ESHUTDOWN)
        return ring__err(e->failed, "%s", e->failed_msg);
    return ring__err(RING_EBROKEN, "%s; the communicator stays broken", e->failed_msg);
}

/* Gives a waited-for handle back: a solo to the pool, anything else to free(). */
static void handle_free(struct ring__engine *e, struct ring_handle *h)
{
    struct solo *s = (struct solo *)h, *head; /* the handle comes first (struct solo) */
    if (!h->solo) {
        free(h);
        return;
    }
    head = atomic_load_explicit(&e->freed, memory_order_relaxed);
    do
        s->en.next = (struct entry *)head;
    while (!atomic_compare_exchange_weak_explicit(&e->freed, &head, s, memory_order_release,
                                                  memory_order_relaxed));
}

/*
 * Under mu: puts the n entries first..*tail (linked through next) in the in-flight table
 * and the queue, or none of them (returns an error: a name is in flight already, or out of
 * memory). *wake says whether the caller must wake the engine thread. With defer (a small
 * group: ring__engine_submit_group), a sleeping thread is left asleep when
 * nothing else is in flight: the program's wait will run the cycle (ring__eng_run_here), and
 * end_burst wakes the thread if it does not.
 */
static int enqueue(struct ring__engine *e, struct entry *first, struct entry **tail, int n,
                   int defer, int *wake)
{
    int rc = 0;

    /* One lookup per name: in the table unless a request of that name is in flight. */
    for (struct entry *en = first; rc == 0 && en != NULL; en = en->next) {
        int had = ring__strmap_add_h(&e->inflight, en->req.name, en->hash, en);
        if (had == 1)
            rc = ring__err(RING_EINVAL,
                           "%s '%s': a request of this name is already in flight on rank %d; "
                           "names must be unique until their operation completes",
                           ring__optype_name(en->req.type), en->req.name, e->ctx->rank);
        else if (had < 0)
            rc = RING_ENOMEM;
    }
    /* The clock only for the timeline's NEGOTIATE phase (take_queue). */
    if (rc == 0 && (e->timeline != NULL || e->timeline_swapping)) {
        int64_t now = ring__now_us();
        for (struct entry *en = first; en != NULL; en = en->next)
            en->submit_us = now;
    }
    if (rc < 0) {
        for (struct entry *en = first; en != NULL; en = en->next)
            if (ring__strmap_get_h(&e->inflight, en->req.name, en->hash) == en)
                ring__strmap_del_h(&e->inflight, en->req.name, en->hash);
        *wake = 0;
        return rc;
    }
    /* Only what is alone in flight: anything else may wait for the engine thread. */
    defer = defer && e->fast && !next_blocking && e->inflight.count == (size_t)n;
    *e->qtail = first;
    e->qtail = tail;
    e->nqueued += n;
    e->burst_over = next_blocking;
    if (next_blocking && e->settling)
        pthread_cond_signal(&e->settle_cv);
    next_blocking = 0;
    /* The first submission to find the thread asleep wakes it; the rest of the burst need
     * not, since it sees the queue when it wakes (sleep_for_work checks it under mu). */
    *wake = e->sleeping && !defer;
    if (*wake)
        e->sleeping = 0;
    else if (defer && e->sleeping)
        atomic_store(&e->deferred, 1);
    return rc;
}

/* Frees a list of entries that were never queued, and their handle. */
static void free_unqueued(struct entry *first, struct ring_handle *h)
{
    for (; first != NULL; first = first->next) /* each in h's allocation */
        ring__request_clear(&first->req);
    free(h);
}

int ring__engine_submit(struct ring__engine *e, const struct ring__submit *subs, int n,
                        struct ring_handle **handle)
{
    struct ring_handle *h = NULL;
    struct entry *first = NULL, **tail = &first;
    size_t hash1 = n == 1 ? ring__strmap_hash(subs[0].req.name) : 0;
    int rc = 0, wake = 0;

    /* A step submits each of its tensors on its own: handle and entry in one block, from the
     * pool (below, under mu), with no zeroing of the handle's message buffer. */
    if (n > 1) {
        struct group *g = malloc(sizeof(*g) + (size_t)n * sizeof(g->en[0]));
        if (g == NULL)
            return ring__err(RING_ENOMEM, "out of memory for a group of %d", n);
        h = &g->h;
        ring__eng_handle_init(h, n, 0);
    }
    for (int i = 0; n > 1 && i < n; i++) {
        struct entry *en = &((struct group *)h)->en[i];
        if (ring__request_copy(&en->req, &subs[i].req) < 0) {
            rc = ring__err(RING_ENOMEM, "out of memory queuing '%s'", subs[i].req.name);
            break;
        }
        ring__eng_entry_init(en, &subs[i], h);
        en->hash = ring__strmap_hash(en->req.name);
        *tail = en;
        tail = &en->next;
    }
    pthread_mutex_lock(&e->mu);
    if (rc == 0 && e->failed != 0)
        rc = refuse(e);
    if (rc == 0 && n == 1) {
        struct solo *s = ring__eng_solo_take(e);
        if (s == NULL || ring__request_copy(&s->en.req, &subs[0].req) < 0) {
            free(s);
            rc = ring__err(RING_ENOMEM, "out of memory queuing '%s'", subs[0].req.name);
        } else {
            h = &s->h;
            ring__eng_handle_init(h, 1, 1);
            ring__eng_entry_init(&s->en, &subs[0], h);
            s->en.hash = hash1;
            first = &s->en;
            tail = &s->en.next;
        }
    }
    if (rc == 0)
        rc = enqueue(e, first, tail, n, 0, &wake);
    pthread_mutex_unlock(&e->mu);
    if (rc < 0) {
        free_unqueued(first, h);
        return rc;
    }
    /* A syscall per submission adds up over a burst (it was 7% of a step of 161 tensors
     * at np 1, each write until the thread ran): only a sleeping thread needs one. */
    if (wake)
        ring__engine_wake(e);
    *handle = h;
    return 0;
}

/*
 * A packed group (ring__engine_submit_group): the handle, its one entry, then the members'
 * send buffers, receive buffers and counts, in one allocation that ring_wait frees.
 */
struct pack {
    struct ring_handle h;
    struct entry en;
};

int ring__engine_submit_group(struct ring__engine *e, const struct ring__request *req, int n,
                              const void *const *sendbufs, void *const *recvbufs,
                              const size_t *counts, struct ring_handle **handle)
{
    struct pack *p = malloc(sizeof(*p) + (size_t)n * (2 * sizeof(void *) + sizeof(uint64_t)));
    const void **send;
    void **recv;
    uint64_t *cnt, total = 0;
    struct entry *en;
    int rc = 0, wake = 0;

    if (p == NULL)
        return ring__err(RING_ENOMEM, "out of memory for a group of %d", n);
    send = (const void **)(p + 1);
    recv = (void **)(send + n);
    cnt = (uint64_t *)(recv + n);
    for (int i = 0; i < n; i++) {
        send[i] = sendbufs[i] == RING_IN_PLACE ? recvbufs[i] : sendbufs[i];
        recv[i] = recvbufs[i];
        cnt[i] = counts[i];
        total += counts[i];
    }
    en = &p->en;
    ring__eng_handle_init(&p->h, 1, 0);
    ring__eng_entry_init(en, &(struct ring__submit){.sendbuf = NULL, .recvbuf = NULL}, &p->h);
    ring__request_assign(&en->req, req);
    en->req.group_size = n;
    en->req.count = total;
    en->req.counts = cnt;
    en->req.ncounts = (uint32_t)n;
    en->nmem = n;
    en->msend = send;
    en->mrecv = recv;
    en->hash = ring__strmap_hash(en->req.name);
    pthread_mutex_lock(&e->mu);
    if (e->failed != 0)
        rc = refuse(e);
    else
        rc = enqueue(e, en, &en->next, 1,
                     total * ring_dtype_size((ring_dtype_t)req->dtype) <= RING__ATTACH_MAX, &wake);
    pthread_mutex_unlock(&e->mu);
    if (rc < 0) {
        free(p);
        return rc;
    }
    if (wake)
        ring__engine_wake(e);
    *handle = &p->h;
    return 0;
}

/*
 * Blocks until h is done. A program that waits has submitted what it had: the burst is
 * over (see settle() in engine_cycle.c).
 *
 * It spins for RING_SPIN_US before it sleeps on the condition variable, yielding the CPU
 * at every turn, since the engine thread needs a CPU to finish the work. A sleeping waiter
 * is woken through a futex, which on 2 busy cores took 100-200 us: at np 2 a blocking
 * ring_barrier left one rank's program that much later than the other's, and the 4 KiB
 * allreduce timed after it (bench/allreduce) was bimodal, ~10 us or ~130-200 us.
 */
static void end_burst(struct ring__engine *e)
{
    /* A small group left the engine thread asleep for this wait to run it (enqueue); the
     * wait did not (or this is ring_test): the thread takes it from here. */
    if (atomic_load(&e->deferred) && atomic_exchange(&e->deferred, 0))
        ring__engine_wake(e);
    /* Once per burst: the program's next waits find it set and take no lock. */
    if (atomic_load(&e->burst_over))
        return;
    pthread_mutex_lock(&e->mu);
    e->burst_over = 1;
    if (e->settling)
        pthread_cond_signal(&e->settle_cv); /* the engine starts the cycle now */
    pthread_mutex_unlock(&e->mu);
}

static void await_handle(struct ring__engine *e, struct ring_handle *h)
{
    int64_t until;

    if (!atomic_load(&e->burst_over) && (atomic_load(&h->done) || !ring__eng_run_here(e)))
        end_burst(e);
    if (atomic_load(&h->done))
        return;
    end_burst(e); /* whatever happened, nothing is left deferred while this thread sleeps */
    until = ring__now_us() + e->ctx->spin_us;
    while (!atomic_load(&h->done) && ring__now_us() < until)
        sched_yield();
    pthread_mutex_lock(&e->mu);
    while (!h->done)
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

int ring__engine_wait(struct ring__engine *e, struct ring_handle *h)
{
    int status;

    await_handle(e, h);
    status = h->status;
    if (h->stop_seen)
        ring__eng_note_stop_seen();
    if (status != 0)
        ring__err(status, "%s", h->message);
    handle_free(e, h);
    return status;
}

int ring__engine_test(struct ring__engine *e, struct ring_handle *h)
{
    end_burst(e); /* as in ring__engine_wait */
    return atomic_load(&h->done);
}

int ring__engine_join(struct ring__engine *e)
{
    struct ring_handle *h = calloc(1, sizeof(*h));
    int status, last;

    if (h == NULL)
        return ring__err(RING_ENOMEM, "out of memory for a join");
    h->remaining = 1;
    pthread_mutex_lock(&e->mu);
    if (e->failed != 0 || e->join_handle != NULL) {
        int rc = e->failed ? refuse(e) : ring__err(RING_EINVAL, "ring_join is already waiting");
        pthread_mutex_unlock(&e->mu);
        free(h);
        return rc;
    }
    e->join_pending = 1;
    e->join_handle = h;
    pthread_mutex_unlock(&e->mu);
    ring__engine_wake(e);
    await_handle(e, h);
    status = h->status;
    last = h->join_last;
    if (status != 0)
        ring__err(status, "%s", h->message);
    free(h);
    return status != 0 ? status : last;
}
