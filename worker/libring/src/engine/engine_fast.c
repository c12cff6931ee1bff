/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_fast.c - cycles run on the program's own thread rather than the engine's
 * (RING_FAST_PATH): a blocking allreduce or barrier with nothing else in flight
 * (fast_cycle), and the first wait after a burst of submissions (ring__eng_run_here).
 * Whoever holds cycle_mu runs the next cycle (engine_impl.h); these take it only when no
 * cycle runs and nothing special (a join, a shutdown, a timeline switch) is under way.
 */
#include <pthread.h>

#include "engine/engine_impl.h"
#include "transport/transport.h"

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
    s = ring__eng_solo_take(e);
    pthread_mutex_unlock(&e->mu);
    if (s == NULL)
        return 0;
    h = &s->h;
    en = &s->en;
    ring__eng_handle_init(h, 1, 1);
    ring__eng_entry_init(en, sub, h);
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
        ring__eng_cycle_failed(e, rc);
    if (idle && ring__mesh_idle_arm(m, idle))
        ring__engine_wake(e); /* a peer started the next cycle meanwhile */
    done = f.done;
    pthread_mutex_unlock(&e->cycle_mu);
    /* Not done: the engine thread takes it from here (it cycles while tensors wait). */
    if (!done || rc < 0)
        ring__engine_wake(e);
    *status = ring__engine_wait(e, h);
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
    return rc < 0 ? rc : ring__engine_wait(e, h);
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
int ring__eng_run_here(struct ring__engine *e)
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
        ring__eng_cycle_failed(e, rc);
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
