/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine.c - the background thread that negotiates and runs every collective.
 *
 * User threads queue requests and wait on handles; communication happens one cycle at a
 * time, on this thread, or on the caller's: for a blocking small allreduce with nothing
 * else in flight (the fast path), and for the first wait after a burst of submissions
 * (run_here). Whoever holds cycle_mu runs the next cycle. A cycle:
 *
 *   1. take the new submissions; look each up in the response cache;
 *   2. one allreduce (bitwise AND) of a control vector: flags, which ranks have not joined,
 *      and per cached tensor "ready here" (and its complement, which yields the OR); the
 *      data of the small cached tensors ready here rides along (control.c), so that when
 *      every rank has the same ones ready, they are done in this one exchange;
 *   3. cached tensors ready everywhere fire at once, in bit order, with no names sent;
 *   4. if any rank holds an uncached request (or rank 0 asks, to inspect a stall), every
 *      rank sends its unfired requests to rank 0, which matches and validates them
 *      (coordinator.c) and broadcasts the ordered responses;
 *   5. every rank runs the same responses in the same order, fusing small allreduces.
 *
 * Between cycles the thread sleeps in poll() on an eventfd (new work, stop, shutdown) and on
 * the peers' sockets: a rank that starts a cycle sends its part of step 2, which wakes the
 * others (a rank with nothing to do only once the sender has spun a while for the answer,
 * which its program's next blocking call may give first: RING__IDLE_LAZY, transport.h). An
 * idle job therefore costs no CPU, and a waiting one cycles every RING_CYCLE_TIME_MS, as
 * Horovod's does.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "engine_impl.h"
#include "transport.h"

static atomic_int stop_visible;
static _Thread_local int next_blocking;

void ring__engine_next_is_blocking(int yes)
{
    next_blocking = yes;
}

int ring__engine_stop_seen(void)
{
    return atomic_load(&stop_visible);
}

void ring__engine_wake(struct ring__engine *e)
{
    uint64_t one = 1;
    if (e != NULL && write(e->wake_fd, &one, sizeof(one)) < 0)
        return; /* the counter is saturated: the thread is awake anyway */
}

int ring__engine_wake_fd(const struct ring__engine *e)
{
    return e->wake_fd;
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

/* ---- the thread ---- */

/*
 * Under cycle_mu: whether a cycle must run now (1), else how long the thread may sleep:
 * *timeout_us (-1: until something happens), and *defer is 1 when a peer's cycle is held
 * back. Work of its own starts a cycle at once, and so does a peer that started one (its
 * bytes are waiting); while this rank waits on others (for tensors, a join or the shutdown)
 * it cycles every RING_CYCLE_TIME_MS, as Horovod does.
 *
 * A peer's cycle that finds this rank with nothing to do is answered only after
 * RING_FAST_GRACE_US (unless a local blocking call takes it first, the fast path): in a
 * program of blocking small allreduces the ranks arrive a few microseconds apart, and the
 * first one's control round would otherwise be answered by the others' engine threads
 * without their data, which costs two more rounds and two thread wake-ups. Answering an
 * idle rank's part late delays nothing that could complete without it but a joined rank's
 * or another process set's tensors, by at most the grace.
 */
static int needs_cycle(struct ring__engine *e, int64_t *timeout_us, int *defer)
{
    int busy, waiting;
    int64_t now;

    *timeout_us = -1;
    *defer = 0;
    pthread_mutex_lock(&e->mu);
    busy = e->qhead != NULL || e->join_pending || e->timeline_swapping;
    waiting = e->shutdown; /* ring__engine_stop sets it from the program's thread */
    pthread_mutex_unlock(&e->mu);
    if (busy || ring__stop_local() > e->stop_agreed)
        return 1;
    now = ring__now_us();
    if (e->ctx->mesh != NULL && (e->defer_since != 0 || ring__mesh_rx_ready(e->ctx->mesh))) {
        if (waiting || e->npending > 0 || e->joined || !e->fast || e->grace_us == 0)
            return 1;
        if (e->defer_since == 0)
            e->defer_since = now;
        *timeout_us = e->defer_since + e->grace_us - now;
        if (*timeout_us <= 0)
            return 1;
        *defer = 1;
        return 0;
    }
    if (waiting || e->npending > 0 || e->joined) {
        *timeout_us = e->last_cycle_us + (int64_t)e->cycle_ms * 1000 - now;
        if (*timeout_us <= 0)
            return 1;
    }
    return 0;
}

/*
 * Sleeps until there is work, a peer starts a cycle, or timeout_us passes (-1: no limit).
 * With defer, a peer has started a cycle already: sleep on the wake fd alone. Called with
 * cycle_mu held, which it drops while it sleeps: a blocking call may run cycles meanwhile
 * (the fast path), and lowers the mesh's idle flags while it does (see fast_cycle).
 */
static void sleep_for_work(struct ring__engine *e, int64_t timeout_us, int defer)
{
    struct ring__mesh *m = e->ctx->mesh;
    int ready = 0, timeout_ms = timeout_us < 0 ? -1 : (int)((timeout_us + 999) / 1000), how;

    pthread_mutex_lock(&e->mu);
    /* Lazily when needs_cycle would hold a peer's cycle back anyway (transport.h). */
    how = m == NULL || defer ? RING__IDLE_OFF
          : e->shutdown || e->npending > 0 || e->joined || !e->fast || e->grace_us == 0
              ? RING__IDLE_NOW
              : RING__IDLE_LAZY;
    e->sleeping = 1;
    e->idle_waiting = how;
    ready = e->qhead != NULL || e->join_pending || e->timeline_swapping;
    pthread_mutex_unlock(&e->mu);
    if (how != RING__IDLE_OFF)
        ready |= ring__mesh_idle_arm(m, how);
    ready |= ring__stop_local() > e->stop_agreed; /* stop_agreed belongs to cycle_mu */
    pthread_mutex_unlock(&e->cycle_mu);
    if (!ready) {
        if (m != NULL && !defer) {
            ring__mesh_idle_poll(m, e->wake_fd, timeout_ms);
        } else {
            struct pollfd pfd = {.fd = e->wake_fd, .events = POLLIN};
            struct timespec ts = {(time_t)(timeout_us / 1000000),
                                  (long)(timeout_us % 1000000) * 1000};
            uint64_t v;
            if (ppoll(&pfd, 1, timeout_us < 0 ? NULL : &ts, NULL) > 0 &&
                read(e->wake_fd, &v, sizeof(v)) < 0)
                v = 0; /* EAGAIN: another read took it */
        }
    }
    pthread_mutex_lock(&e->cycle_mu);
    pthread_mutex_lock(&e->mu);
    e->sleeping = 0;
    e->idle_waiting = 0;
    pthread_mutex_unlock(&e->mu);
    if (m != NULL && !defer)
        ring__mesh_idle_disarm(m);
}

/* After a failed cycle: every request fails with the error (a stall did that itself). */
static void cycle_failed(struct ring__engine *e, int rc)
{
    /* The code travels beside the text, which names this rank already. Copied, since
     * failing the handles may record errors of its own. */
    if (rc != RING_ESTALL) {
        char msg[384];
        snprintf(msg, sizeof(msg), "%s", ring_last_error());
        ring__eng_fail_all(e, rc, msg);
    }
}

static void *engine_main(void *arg)
{
    struct ring__engine *e = arg;
    /* The default 50 us timer slack would stretch the 20 us settle sleeps (engine_cycle.c)
     * to 70 us; 1 us keeps them near what they ask for. This thread only. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    pthread_mutex_lock(&e->cycle_mu);
    for (;;) {
        int rc, defer, failed;
        int64_t timeout;

        pthread_mutex_lock(&e->mu);
        failed = e->failed; /* a cycle on the fast path failed */
        pthread_mutex_unlock(&e->mu);
        if (failed)
            break;
        if (!needs_cycle(e, &timeout, &defer)) {
            sleep_for_work(e, timeout, defer);
            continue;
        }
        rc = ring__eng_cycle(e, NULL);
        if (rc == 1)
            break;
        if (rc < 0) {
            cycle_failed(e, rc);
            break;
        }
    }
    /* Whatever is still queued will never run. */
    pthread_mutex_lock(&e->mu);
    if (e->failed == 0) {
        e->failed = RING_ESHUTDOWN;
        snprintf(e->failed_msg, sizeof(e->failed_msg), "rank %d: the engine has shut down",
                 e->ctx->rank);
        pthread_cond_broadcast(&e->cv); /* a ring_timeline_stop waiting for a swap */
    }
    pthread_mutex_unlock(&e->mu);
    if (e->npending > 0)
        ring__eng_fail_all(e, RING_ESHUTDOWN, "the engine shut down before the operation ran");
    pthread_mutex_unlock(&e->cycle_mu);
    return NULL;
}

int ring__engine_start(struct ring__ctx *ctx, struct ring__engine **out)
{
    struct ring__engine *e = calloc(1, sizeof(*e));
    const long *v = ctx->tune.v;
    long cache = v[RING__K_CACHE_CAPACITY];
    const char *tl = getenv("RING_TIMELINE");
    int rc;

    if (e == NULL)
        return RING_ENOMEM;
    /* A stop agreed by an earlier job (before a ring_finalize and a new ring_init) is not
     * this one's. */
    atomic_store(&stop_visible, 0);
    e->ctx = ctx;
    e->world = ring__world(ctx);
    e->wake_fd = -1;
    e->qtail = &e->qhead;
    e->compression = -1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->cycle_mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* settle's deadlines (ring__now_us) */
        pthread_cond_init(&e->settle_cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    /* The knobs come from the tuning table (tuning.c says where the defaults come from). */
    e->fast = (int)v[RING__K_FAST_PATH];
    e->grace_us = v[RING__K_FAST_GRACE_US];
    e->cycle_ms = (int)v[RING__K_CYCLE_TIME_MS];
    e->fusion_threshold = (size_t)v[RING__K_FUSION_THRESHOLD];
    e->stall_check_us = v[RING__K_STALL_CHECK_SECONDS] * 1000000;
    e->stall_shutdown_us = v[RING__K_STALL_SHUTDOWN_SECONDS] * 1000000;
    {
        static const int wire[] = {-1, RING_FLOAT16, RING_BFLOAT16}; /* none, fp16, bf16 */
        e->compression = wire[v[RING__K_COMPRESSION]];
    }
    e->jw = (ctx->size + 63) / 64;
    e->cw = ((int)cache + 63) / 64;
    e->words = 2 + e->jw + 2 * e->cw + RING__TUNE_WORDS;
    e->ctl = calloc((size_t)e->words, sizeof(uint64_t));
    e->ctl_scratch = malloc(ring__ctl_scratch_bytes((size_t)e->words));
    e->joined_ranks = calloc((size_t)ctx->size, 1);
    e->prev_joined = calloc((size_t)ctx->size, 1);
    e->bit_since = calloc((size_t)cache + 1, sizeof(int64_t));
    e->absent = calloc((size_t)cache + 1, 1);
    e->fired = calloc((size_t)cache + 1, 1);
    e->fresp = calloc((size_t)cache + 1, sizeof(*e->fresp));
    e->bit_entry = calloc((size_t)cache + 1, sizeof(*e->bit_entry));
    e->fent = calloc((size_t)cache + 1, sizeof(*e->fent));
    e->fast_buf = malloc(RING__ATTACH_MAX);
    e->att_key = calloc((size_t)e->cw + 1, sizeof(uint64_t));
    e->att_ent = calloc((size_t)cache + 1, sizeof(*e->att_ent));
    if (e->att_key == NULL || e->att_ent == NULL || e->ctl == NULL || e->joined_ranks == NULL ||
        e->prev_joined == NULL || e->bit_since == NULL || e->absent == NULL || e->fired == NULL ||
        e->fresp == NULL || e->bit_entry == NULL || e->fent == NULL || e->fast_buf == NULL ||
        e->ctl_scratch == NULL || ring__cache_init(&e->cache, (int)cache) < 0 ||
        ring__psets_init(&e->psets, ctx->size, ctx->rank) < 0) {
        rc = RING_ENOMEM;
        goto error;
    }
    e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (e->wake_fd < 0) {
        rc = ring__err(RING_ESYS, "eventfd: %s", strerror(errno));
        goto error;
    }
    if (tl != NULL && *tl != '\0' && ctx->rank == 0) {
        e->timeline = ring__timeline_open(tl);
        if (e->timeline == NULL)
            ring__log(RING_LOG_WARNING, "cannot write RING_TIMELINE=%s: %s; no timeline", tl,
                      strerror(errno));
    }
    if ((e->autotune = ring__autotune_create(e)) == NULL) {
        rc = RING_ENOMEM;
        goto error;
    }
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        rc = ring__err(RING_ESYS, "cannot start the engine thread");
        goto error;
    }
    e->started = 1;
    *out = e;
    return 0;
error:
    ring__engine_stop(e);
    return rc;
}

static void free_stall(const char *key, void *value, void *arg)
{
    struct stall *s = value;
    free(s->seen);
    free(s);
}

int ring__engine_stop(struct ring__engine *e)
{
    if (e == NULL)
        return 0;
    if (e->started) {
        pthread_mutex_lock(&e->mu);
        e->shutdown = 1;
        pthread_cond_signal(&e->settle_cv);
        pthread_mutex_unlock(&e->mu);
        ring__engine_wake(e);
        pthread_join(e->thread, NULL);
    }
    ring__autotune_destroy(e->autotune);
    ring__timeline_close(e->timeline);
    ring__timeline_close(e->timeline_swap);
    ring__strmap_each(&e->stalls, free_stall, NULL);
    ring__strmap_free(&e->stalls);
    ring__strmap_free(&e->inflight);
    ring__cache_free(&e->cache);
    ring__psets_free(&e->psets);
    for (int i = 0; i < 2; i++) {
        struct solo *sp = i == 0 ? e->pool : atomic_load(&e->freed), *next;
        for (; sp != NULL; sp = next) {
            next = (struct solo *)sp->en.next;
            free(sp);
        }
    }
    if (e->wake_fd >= 0)
        close(e->wake_fd);
    free(e->join_handle);
    free(e->ctl);
    free(e->joined_ranks);
    free(e->prev_joined);
    free(e->bit_since);
    free(e->absent);
    free(e->fired);
    free(e->fresp);
    free(e->bit_entry);
    free(e->fent);
    free(e->fusion);
    free(e->fast_buf);
    free(e->att_key);
    free(e->att_ent);
    free(e->ctl_scratch);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->cycle_mu);
    pthread_cond_destroy(&e->cv);
    pthread_cond_destroy(&e->settle_cv);
    free(e);
    return 0;
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

/* Fills every field of en but req (the caller copies that in) and hash. */
static void entry_init(struct entry *en, const struct ring__submit *sub, struct ring_handle *h)
{
    en->sendbuf = sub->sendbuf;
    en->recvbuf = sub->recvbuf;
    en->handle = h;
    en->submit_us = 0;
    en->bit = -1;
    en->nmem = 0;
    en->taken = 0;
    en->next = en->pprev = en->pnext = NULL;
}

static void handle_init(struct ring_handle *h, int n, int solo)
{
    atomic_init(&h->done, 0);
    h->status = 0;
    h->remaining = n;
    h->stop_seen = 0;
    h->join_last = 0;
    h->solo = solo;
    h->message[0] = '\0';
}

/* A struct solo from the pool, or a new one (NULL when out of memory). Under mu. */
static struct solo *solo_take(struct ring__engine *e)
{
    struct solo *s = e->pool;
    if (s == NULL && (s = atomic_exchange(&e->freed, NULL)) == NULL)
        return malloc(sizeof(*s));
    e->pool = (struct solo *)s->en.next;
    return s;
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
 * group, engine.c: ring__engine_submit_group), a sleeping thread is left asleep when
 * nothing else is in flight: the program's wait will run the cycle (run_here), and
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
        handle_init(h, n, 0);
    }
    for (int i = 0; n > 1 && i < n; i++) {
        struct entry *en = &((struct group *)h)->en[i];
        if (ring__request_copy(&en->req, &subs[i].req) < 0) {
            rc = ring__err(RING_ENOMEM, "out of memory queuing '%s'", subs[i].req.name);
            break;
        }
        entry_init(en, &subs[i], h);
        en->hash = ring__strmap_hash(en->req.name);
        *tail = en;
        tail = &en->next;
    }
    pthread_mutex_lock(&e->mu);
    if (rc == 0 && e->failed != 0)
        rc = refuse(e);
    if (rc == 0 && n == 1) {
        struct solo *s = solo_take(e);
        if (s == NULL || ring__request_copy(&s->en.req, &subs[0].req) < 0) {
            free(s);
            rc = ring__err(RING_ENOMEM, "out of memory queuing '%s'", subs[0].req.name);
        } else {
            h = &s->h;
            handle_init(h, 1, 1);
            entry_init(&s->en, &subs[0], h);
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
    handle_init(&p->h, 1, 0);
    entry_init(en, &(struct ring__submit){.sendbuf = NULL, .recvbuf = NULL}, &p->h);
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
 * The fast path of a blocking allreduce or barrier: with nothing else in flight on this
 * rank and the request in the response cache, the calling thread runs the next cycle
 * itself and the data rides in its control round (control.c); a barrier attaches no data,
 * since the control round is itself a barrier (no rank's result is complete before every
 * rank has sent its part). When every rank did the same, the call is done after one round
 * and no thread was woken. Otherwise (another rank was not ready, or is not on the fast
 * path) the request is pending like any other, and the engine thread carries it on; a
 * mismatch or a failure ends it on every rank as usual. Returns 1 with the call's status
 * in *status, or 0 when the path does not apply (then submit as usual).
 */
static int fast_cycle(struct ring__engine *e, const struct ring__submit *sub, int *status)
{
    const struct ring__request *r = &sub->req;
    struct ring__mesh *m = e->ctx->mesh;
    struct solo *s;
    struct ring_handle *h;
    struct entry *en;
    struct ring__fast f;
    int bit, ok, idle, rc, done;

    if ((r->type != RING__ALLREDUCE && r->type != RING__BARRIER) || !ring__eng_attachable(e, r))
        return 0;
    pthread_mutex_lock(&e->mu);
    s = solo_take(e);
    pthread_mutex_unlock(&e->mu);
    if (s == NULL)
        return 0;
    h = &s->h;
    en = &s->en;
    handle_init(h, 1, 1);
    entry_init(en, sub, h);
    if (ring__request_copy(&en->req, r) < 0) {
        free(s);
        return 0;
    }
    en->hash = ring__strmap_hash(en->req.name);
    pthread_mutex_lock(&e->cycle_mu);
    pthread_mutex_lock(&e->mu);
    ok = !e->failed && !e->shutdown && e->qhead == NULL && !e->join_pending && !e->joined &&
         !e->timeline_swapping && e->npending == 0;
    bit = ok ? ring__cache_lookup_h(&e->cache, r, en->hash) : -1;
    /* Absent from the in-flight table, or another thread's call of this name is. */
    if (bit >= 0 && ring__strmap_add_h(&e->inflight, en->req.name, en->hash, en) != 0)
        bit = -1;
    idle = e->idle_waiting;
    pthread_mutex_unlock(&e->mu);
    if (bit < 0) {
        pthread_mutex_unlock(&e->cycle_mu);
        ring__request_clear(&en->req);
        free(s);
        return 0;
    }
    en->bit = bit;
    ring__eng_pending_add(e, en);
    if (e->timeline != NULL) {
        en->submit_us = ring__now_us();
        ring__timeline_phase(e->timeline, en->req.name, "NEGOTIATE", 1, en->submit_us, NULL);
    }

    /* The cycle attaches the tensor (with anything else cached that was submitted since). */
    f = (struct ring__fast){.en = en};
    /* The engine thread sleeps with the peers asked to wake it when a cycle starts: this
     * thread runs the cycle, so lower the flags for it, and raise them again after. */
    if (idle)
        ring__mesh_idle_disarm(m);
    rc = ring__eng_cycle(e, &f);
    if (rc < 0)
        cycle_failed(e, rc);
    if (idle && ring__mesh_idle_arm(m, idle))
        ring__engine_wake(e); /* a peer started the next cycle meanwhile */
    done = f.done;
    pthread_mutex_unlock(&e->cycle_mu);
    /* Not done: the engine thread takes it from here (it cycles while tensors wait). */
    if (!done || rc < 0)
        ring__engine_wake(e);
    *status = ring_wait(h);
    return 1;
}

int ring__engine_blocking(struct ring__engine *e, const struct ring__submit *sub)
{
    struct ring_handle *h;
    int rc, status;

    if (fast_cycle(e, sub, &status))
        return status;
    ring__engine_next_is_blocking(1);
    rc = ring__engine_submit(e, sub, 1, &h);
    ring__engine_next_is_blocking(0);
    return rc < 0 ? rc : ring_wait(h);
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

/*
 * The program's first wait after a burst runs the cycle on its own thread when it can
 * (RING_FAST_PATH, as the blocking fast path does), rather than waking the engine thread
 * and waiting for it to run: on a crowded host the handover to the engine thread and back
 * took 15-130 us of a step of 161 small tensors at np 2, as long as the cycle itself. It
 * can when no cycle runs (the engine thread sleeps, or waits in settle() for this very
 * burst to end, having let go of cycle_mu) and nothing special is under way (a join, a
 * shutdown, a timeline swap). If tensors are left waiting for other ranks, the engine
 * thread is woken to go on cycling. Returns 1 when it ran the cycle.
 */
static int run_here(struct ring__engine *e)
{
    struct ring__mesh *m = e->ctx->mesh;
    int ok, idle, rc, more;

    if (!e->fast || pthread_mutex_trylock(&e->cycle_mu) != 0)
        return 0;
    pthread_mutex_lock(&e->mu);
    ok = !e->failed && !e->shutdown && e->qhead != NULL && !e->join_pending && !e->joined &&
         !e->timeline_swapping;
    if (ok)
        e->burst_over = 1; /* no signal: a settling engine thread sees cycle_seq moved */
    idle = e->idle_waiting;
    pthread_mutex_unlock(&e->mu);
    if (!ok) {
        pthread_mutex_unlock(&e->cycle_mu);
        return 0;
    }
    /* As in fast_cycle: the peers must not wake a sleeping engine thread meanwhile. */
    if (idle)
        ring__mesh_idle_disarm(m);
    rc = ring__eng_cycle(e, NULL);
    if (rc < 0)
        cycle_failed(e, rc);
    if (idle && ring__mesh_idle_arm(m, idle))
        ring__engine_wake(e); /* a peer started the next cycle meanwhile */
    more = e->npending > 0;
    pthread_mutex_unlock(&e->cycle_mu);
    if (more || rc != 0) {
        pthread_mutex_lock(&e->mu);
        if (e->settling)
            pthread_cond_signal(&e->settle_cv);
        pthread_mutex_unlock(&e->mu);
        ring__engine_wake(e);
    }
    return 1;
}

static void await_handle(struct ring__engine *e, struct ring_handle *h)
{
    int64_t until;

    if (!atomic_load(&e->burst_over) && (atomic_load(&h->done) || !run_here(e)))
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

int ring_wait(ring_handle_t *h)
{
    struct ring__ctx *ctx = ring__ctx();
    struct ring__engine *e = ctx ? ctx->engine : NULL;
    int status;

    if (h == NULL || e == NULL)
        return ring__err(h == NULL ? RING_EINVAL : RING_ENOTINIT, "ring_wait: %s",
                         h == NULL ? "NULL handle" : "libring is not initialized");
    await_handle(e, h);
    status = h->status;
    if (h->stop_seen)
        atomic_store(&stop_visible, 1);
    if (status != 0)
        ring__err(status, "%s", h->message);
    handle_free(e, h);
    return status;
}

int ring_test(ring_handle_t *h)
{
    struct ring__ctx *ctx = ring__ctx();
    int done;
    if (h == NULL || ctx == NULL || ctx->engine == NULL)
        return 0;
    end_burst(ctx->engine); /* as in ring_wait */
    done = atomic_load(&h->done);
    return done;
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
