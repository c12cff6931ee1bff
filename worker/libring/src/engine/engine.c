/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine.c - the background thread that negotiates and runs every collective.
 *
 * User threads only queue requests and wait on handles; all communication happens on this
 * thread, one cycle at a time. A cycle:
 *
 *   1. take the new submissions; look each up in the response cache;
 *   2. one allreduce (bitwise AND) of a control vector: flags, which ranks have not joined,
 *      and per cached tensor "ready here" (and its complement, which yields the OR);
 *   3. cached tensors ready everywhere fire at once, in bit order, with no names sent;
 *   4. if any rank holds an uncached request (or rank 0 asks, to inspect a stall), every
 *      rank sends its unfired requests to rank 0, which matches and validates them
 *      (coordinator.c) and broadcasts the ordered responses;
 *   5. every rank runs the same responses in the same order, fusing small allreduces.
 *
 * Between cycles the thread sleeps in poll() on an eventfd (new work, stop, shutdown) and on
 * the peers' sockets: a rank that starts a cycle sends its part of step 2, which wakes the
 * others. An idle job therefore costs no CPU, and a waiting one cycles every
 * RING_CYCLE_TIME_MS, as Horovod's does.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

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

/* Removes a completed entry and completes its part of the handle. */
void ring__eng_complete(struct ring__engine *e, struct entry *en, int status, const char *msg)
{
    ring__strmap_del(&e->pending, en->req.name);
    e->npending--;
    pthread_mutex_lock(&e->mu);
    ring__strmap_del(&e->inflight, en->req.name);
    ring__eng_finish_handle(e, en->handle, status, msg);
    e->stats.tensors++;
    pthread_mutex_unlock(&e->mu);
    ring__request_clear(&en->req);
    free(en);
}

void ring__eng_list_each(const char *key, void *value, void *arg)
{
    struct entry **list = arg;
    struct entry *en = value;
    en->next = *list;
    *list = en;
}

/* The engine cannot go on: every queued and pending request fails with err, and so will
 * every later submission. */
void ring__eng_fail_all(struct ring__engine *e, int err, const char *msg)
{
    struct entry *list = NULL, *en, *next;

    /* First refuse new work, so that a caller woken by the failures below and submitting
     * again is told the engine is gone rather than queued behind it. */
    pthread_mutex_lock(&e->mu);
    e->failed = err;
    snprintf(e->failed_msg, sizeof(e->failed_msg), "%s", msg);
    pthread_mutex_unlock(&e->mu);
    ring__strmap_each(&e->pending, ring__eng_list_each, &list);
    for (en = list; en != NULL; en = next) {
        next = en->next;
        ring__eng_complete(e, en, err, msg);
    }
    pthread_mutex_lock(&e->mu);
    for (en = e->qhead; en != NULL; en = next) {
        next = en->next;
        ring__strmap_del(&e->inflight, en->req.name);
        ring__eng_finish_handle(e, en->handle, err, msg);
        ring__request_clear(&en->req);
        free(en);
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

/* Sleeps until there is work, a peer starts a cycle, or the cycle time passes. */
static void wait_for_work(struct ring__engine *e, int64_t last_cycle_us)
{
    int timeout = -1, busy, shutdown;

    pthread_mutex_lock(&e->mu);
    busy = e->qhead != NULL || e->join_pending || e->timeline_swapping;
    shutdown = e->shutdown; /* ring__engine_stop sets it from the program's thread */
    e->sleeping = !busy;
    pthread_mutex_unlock(&e->mu);
    if (busy || ring__stop_local() > e->stop_agreed)
        goto awake;
    /* Waiting on other ranks (for tensors, a join or the shutdown): cycle at the cycle time. */
    if (e->npending > 0 || e->joined || shutdown) {
        int64_t left = last_cycle_us + (int64_t)e->cycle_ms * 1000 - ring__now_us();
        if (left <= 0)
            goto awake;
        timeout = (int)((left + 999) / 1000);
    }
    if (e->ctx->mesh != NULL) {
        ring__mesh_idle_wait(e->ctx->mesh, e->wake_fd, timeout);
    } else {
        struct pollfd pfd = {.fd = e->wake_fd, .events = POLLIN};
        uint64_t v;
        if (poll(&pfd, 1, timeout) > 0 && read(e->wake_fd, &v, sizeof(v)) < 0)
            v = 0; /* EAGAIN: another read took it */
    }
awake:
    pthread_mutex_lock(&e->mu);
    e->sleeping = 0;
    pthread_mutex_unlock(&e->mu);
}

static void *engine_main(void *arg)
{
    struct ring__engine *e = arg;
    /* The default 50 us timer slack would stretch the 20 us settle sleeps (engine_cycle.c)
     * to 70 us; 1 us keeps them near what they ask for. This thread only. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    for (;;) {
        int64_t start = ring__now_us();
        int rc = ring__eng_cycle(e);
        if (rc == 1)
            break;
        if (rc < 0) {
            /* The code travels beside the text, which names this rank already. Copied,
             * since failing the handles may record errors of its own. */
            if (rc != RING_ESTALL) {
                char msg[384];
                snprintf(msg, sizeof(msg), "%s", ring_last_error());
                ring__eng_fail_all(e, rc, msg);
            }
            break;
        }
        wait_for_work(e, start);
    }
    /* Whatever is still queued will never run. */
    pthread_mutex_lock(&e->mu);
    if (e->failed == 0) {
        e->failed = RING_ESHUTDOWN;
        snprintf(e->failed_msg, sizeof(e->failed_msg), "rank %d: the engine has shut down",
                 e->ctx->rank);
    }
    pthread_mutex_unlock(&e->mu);
    if (e->npending > 0)
        ring__eng_fail_all(e, RING_ESHUTDOWN, "the engine shut down before the operation ran");
    return NULL;
}

int ring__engine_start(struct ring__ctx *ctx, struct ring__engine **out)
{
    struct ring__engine *e = calloc(1, sizeof(*e));
    long cycle_ms, fusion, cache, stall_check, stall_shutdown;
    const char *comp = getenv("RING_COMPRESSION"), *tl = getenv("RING_TIMELINE");
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
    pthread_cond_init(&e->cv, NULL);
    /* 1 ms and 128 MiB are Horovod's defaults (HOROVOD_CYCLE_TIME, HOROVOD_FUSION_THRESHOLD);
     * 1024 cache entries covers the tensor count of common models (ResNet-50 has 161). */
    if ((rc = ring__env_int("RING_CYCLE_TIME_MS", 1, 0, 60000, &cycle_ms)) < 0 ||
        (rc = ring__env_int("RING_FUSION_THRESHOLD", 128L << 20, 0, 1L << 40, &fusion)) < 0 ||
        (rc = ring__env_int("RING_CACHE_CAPACITY", 1024, 0, 1 << 20, &cache)) < 0 ||
        (rc = ring__env_int("RING_STALL_CHECK_SECONDS", 60, 0, 1L << 30, &stall_check)) < 0 ||
        (rc = ring__env_int("RING_STALL_SHUTDOWN_SECONDS", 0, 0, 1L << 30, &stall_shutdown)) < 0)
        goto error;
    e->cycle_ms = (int)cycle_ms;
    e->fusion_threshold = (size_t)fusion;
    e->stall_check_us = stall_check * 1000000;
    e->stall_shutdown_us = stall_shutdown * 1000000;
    if (comp != NULL && *comp != '\0' && strcmp(comp, "none") != 0) {
        if (strcmp(comp, "fp16") == 0)
            e->compression = RING_FLOAT16;
        else if (strcmp(comp, "bf16") == 0)
            e->compression = RING_BFLOAT16;
        else {
            ring__log(RING_LOG_ERROR, "RING_COMPRESSION='%s' must be none, fp16 or bf16", comp);
            rc = ring__err(RING_EENV, "RING_COMPRESSION='%s' must be none, fp16 or bf16", comp);
            goto error;
        }
    }
    e->jw = (ctx->size + 63) / 64;
    e->cw = ((int)cache + 63) / 64;
    e->words = 2 + e->jw + 2 * e->cw;
    e->ctl = calloc((size_t)e->words, sizeof(uint64_t));
    e->joined_ranks = calloc((size_t)ctx->size, 1);
    e->prev_joined = calloc((size_t)ctx->size, 1);
    e->bit_since = calloc((size_t)cache + 1, sizeof(int64_t));
    e->absent = calloc((size_t)cache + 1, 1);
    e->fired = calloc((size_t)cache + 1, 1);
    e->fresp = calloc((size_t)cache + 1, sizeof(*e->fresp));
    if (e->ctl == NULL || e->joined_ranks == NULL || e->prev_joined == NULL ||
        e->bit_since == NULL || e->absent == NULL || e->fired == NULL || e->fresp == NULL ||
        ring__cache_init(&e->cache, (int)cache) < 0 ||
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
        pthread_mutex_unlock(&e->mu);
        ring__engine_wake(e);
        pthread_join(e->thread, NULL);
    }
    ring__timeline_close(e->timeline);
    ring__timeline_close(e->timeline_swap);
    ring__strmap_each(&e->stalls, free_stall, NULL);
    ring__strmap_free(&e->stalls);
    ring__strmap_free(&e->pending);
    ring__strmap_free(&e->inflight);
    ring__cache_free(&e->cache);
    ring__psets_free(&e->psets);
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
    free(e->fusion);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
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

int ring__engine_submit(struct ring__engine *e, const struct ring__submit *subs, int n,
                        struct ring_handle **handle)
{
    struct ring_handle *h = calloc(1, sizeof(*h));
    struct entry *first = NULL, **tail = &first;
    int64_t now = ring__now_us();
    int rc = 0, wake;

    if (h == NULL)
        return ring__err(RING_ENOMEM, "out of memory for a handle");
    h->remaining = n;
    for (int i = 0; i < n; i++) {
        struct entry *en = calloc(1, sizeof(*en));
        if (en == NULL || ring__request_copy(&en->req, &subs[i].req) < 0) {
            free(en);
            rc = ring__err(RING_ENOMEM, "out of memory queuing '%s'", subs[i].req.name);
            break;
        }
        en->sendbuf = subs[i].sendbuf;
        en->recvbuf = subs[i].recvbuf;
        en->handle = h;
        en->submit_us = now;
        *tail = en;
        tail = &en->next;
    }
    pthread_mutex_lock(&e->mu);
    if (rc == 0 && e->failed != 0)
        rc = refuse(e);
    for (struct entry *en = first; rc == 0 && en != NULL; en = en->next) {
        if (ring__strmap_get(&e->inflight, en->req.name) != NULL)
            rc = ring__err(RING_EINVAL,
                           "%s '%s': a request of this name is already in flight on rank %d; "
                           "names must be unique until their operation completes",
                           ring__optype_name(en->req.type), en->req.name, e->ctx->rank);
    }
    for (struct entry *en = first; rc == 0 && en != NULL; en = en->next) {
        if (ring__strmap_put(&e->inflight, en->req.name, h) < 0)
            rc = RING_ENOMEM;
    }
    if (rc == 0) {
        *e->qtail = first;
        e->qtail = tail;
        e->nqueued += n;
        e->burst_over = next_blocking;
        next_blocking = 0;
    } else {
        for (struct entry *en = first; en != NULL; en = en->next)
            if (ring__strmap_get(&e->inflight, en->req.name) == h)
                ring__strmap_del(&e->inflight, en->req.name);
    }
    wake = e->sleeping;
    pthread_mutex_unlock(&e->mu);
    if (rc < 0) {
        while (first != NULL) {
            struct entry *next = first->next;
            ring__request_clear(&first->req);
            free(first);
            first = next;
        }
        free(h);
        return rc;
    }
    /* A syscall per submission adds up over a burst: only a sleeping thread needs one. */
    if (wake)
        ring__engine_wake(e);
    *handle = h;
    return 0;
}

/* Blocks until h is done. A program that waits has submitted what it had: the burst is
 * over (see settle() in engine_cycle.c). */
static void await_handle(struct ring__engine *e, struct ring_handle *h)
{
    pthread_mutex_lock(&e->mu);
    e->burst_over = 1;
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
    free(h);
    return status;
}

int ring_test(ring_handle_t *h)
{
    struct ring__ctx *ctx = ring__ctx();
    int done;
    if (h == NULL || ctx == NULL || ctx->engine == NULL)
        return 0;
    pthread_mutex_lock(&ctx->engine->mu);
    ctx->engine->burst_over = 1; /* as in ring_wait */
    done = h->done;
    pthread_mutex_unlock(&ctx->engine->mu);
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

int ring__engine_pset_info(struct ring__engine *e, int id, int *rank, int *size)
{
    const struct ring__pset *ps;
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
    return 0;
}

void ring__engine_stats(struct ring__engine *e, struct ring_engine_stats *out)
{
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->mu);
}
