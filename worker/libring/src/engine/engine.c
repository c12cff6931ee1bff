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
 * The engine's files, by job: engine.c (this one: the thread, its sleep between cycles, its
 * start and stop, and the stop request), engine_submit.c (the submission queue, handles and
 * their completion), engine_fast.c (cycles run on the program's thread), engine_cycle.c
 * (one negotiation cycle), engine_exec.c (running the agreed responses) and engine_info.c
 * (process sets, the timeline switch and the stats).
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
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine_impl.h"
#include "transport/transport.h"

static atomic_int stop_visible;
/* This rank's own stop request; read by the engine thread, set by the SIGTERM handler. */
static atomic_int stop_flag;

void ring__stop_request(void)
{
    atomic_store(&stop_flag, 1);
}

void ring__stop_clear(void)
{
    atomic_store(&stop_flag, 0);
}

int ring__stop_local(void)
{
    return atomic_load(&stop_flag) != 0;
}

void ring__eng_note_stop_seen(void)
{
    atomic_store(&stop_visible, 1);
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

void ring__eng_cycle_failed(struct ring__engine *e, int rc)
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
            ring__eng_cycle_failed(e, rc);
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
