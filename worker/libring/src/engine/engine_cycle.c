/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_cycle.c - one negotiation cycle (see engine.c for the whole picture): the control
 * vector, the cache's bit-vector agreement, the full round through the coordinator when a
 * rank needs one (engine_round.c), then execution and the cache update, identically on
 * every rank.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine_impl.h"
#include "ops/ops.h"

static void ctl_set(uint64_t *w, int bit)
{
    w[bit / 64] |= (uint64_t)1 << (bit % 64);
}

static int ctl_get(const uint64_t *w, int bit)
{
    return (int)((w[bit / 64] >> (bit % 64)) & 1u);
}

/* Rank 0: cached tensors some ranks have had ready for longer than the stall check get a
 * full round, so that their names (and the missing ranks) become known. */
static void watch_bits(struct ring__engine *e, int hwm, const uint64_t *all, const uint64_t *notany,
                       int64_t now)
{
    e->force_full = 0;
    for (int bit = 0; bit < hwm; bit++) {
        int some = !ctl_get(notany, bit), every = ctl_get(all, bit);
        if (!some || every) {
            e->bit_since[bit] = 0;
            continue;
        }
        if (e->bit_since[bit] == 0)
            e->bit_since[bit] = now;
        else if (e->stall_check_us > 0 && now - e->bit_since[bit] >= e->stall_check_us)
            e->force_full = 1;
    }
}

/*
 * A program submits a step's gradients in a burst, microseconds apart. Starting the cycle
 * on the first of them would negotiate a handful and leave the rest for later cycles,
 * smaller batches each paying a control round. So wait while the burst lasts, at most the
 * cycle time. The burst is over when the program blocks (a blocking call, ring_wait or
 * ring_test, which signal settle_cv, so the cycle starts at once), or, when every rank's
 * program thread and engine thread have a CPU each, after SETTLE_US without a new
 * submission (one takes a few microseconds). On a crowded host a quiet spell proves
 * nothing: the program's thread may just have lost its CPU in mid-burst (to its own engine
 * thread, or another rank's), and a cycle started then splits the step across cycles on
 * some ranks: at np 2 on 2 CPUs a step of 161 tensors took 1.5-2.5 cycles instead of 1.
 */
#define SETTLE_US 20

static int settle(struct ring__engine *e)
{
    int64_t now = ring__now_us(), limit = now + (int64_t)e->cycle_ms * 1000, mark = now;
    int quiet_ends = !e->ctx->crowded, n;
    uint64_t seq = e->cycle_seq;

    pthread_mutex_lock(&e->mu);
    n = e->nqueued;
    if (e->burst_over || n == 0) {
        pthread_mutex_unlock(&e->mu);
        return 0;
    }
    /* While it waits, the program's first ring_wait may run the cycle itself (engine_fast.c:
     * ring__eng_run_here); cycle_seq tells. */
    e->settling = 1;
    pthread_mutex_unlock(&e->cycle_mu);
    while (!e->burst_over && !e->shutdown && n > 0 && now < limit &&
           !(quiet_ends && now - mark >= SETTLE_US)) {
        int64_t until = quiet_ends && mark + SETTLE_US < limit ? mark + SETTLE_US : limit;
        struct timespec ts = {(time_t)(until / 1000000), (long)(until % 1000000) * 1000};
        pthread_cond_timedwait(&e->settle_cv, &e->mu, &ts);
        now = ring__now_us();
        if (e->nqueued != n) { /* a new submission: the quiet spell starts again */
            n = e->nqueued;
            mark = now;
        }
    }
    e->settling = 0;
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_lock(&e->cycle_mu);
    return e->cycle_seq != seq;
}

/*
 * A group fires from the cache only whole: when one of its members is not cached (the
 * cache evicted it, or it was cached with other parameters), none of them uses its bit, and
 * the group goes to the coordinator as a whole, which waits for all of its members. Every
 * rank's cache is the same, so every rank makes the same choice. A group's members are
 * queued together, so they sit next to each other in the pending list, from first on.
 */
static void group_bits(struct entry *first)
{
    for (struct entry *en = first, *next; en != NULL; en = next) {
        int whole = 1;
        next = en->pnext;
        if (en->req.group_size <= 1 || en->nmem > 0) /* a packed group has one bit */
            continue;
        for (; next != NULL && next->handle == en->handle; next = next->pnext)
            whole &= next->bit >= 0;
        if (whole && en->bit >= 0)
            continue;
        for (struct entry *m = en; m != next; m = m->pnext)
            m->bit = -1;
    }
}

/* Moves the queued submissions into the pending list. */
static void take_queue(struct ring__engine *e)
{
    struct entry *en, *next, *first;
    pthread_mutex_lock(&e->mu);
    en = e->qhead;
    e->qhead = NULL;
    e->qtail = &e->qhead;
    e->nqueued = 0;
    atomic_store(&e->deferred, 0); /* this cycle runs what was deferred */
    if (e->timeline_swapping) {
        ring__timeline_close(e->timeline);
        e->timeline = e->timeline_swap;
        e->timeline_swap = NULL;
        e->timeline_swapping = 0;
        pthread_cond_broadcast(&e->cv); /* ring__engine_timeline waits for it */
    }
    pthread_mutex_unlock(&e->mu);
    first = en;
    for (; en != NULL; en = next) {
        next = en->next;
        en->bit = ring__cache_lookup_h(&e->cache, &en->req, en->hash);
        ring__eng_pending_add(e, en);
        if (e->timeline != NULL) /* submitted before the timeline opened: from now */
            ring__timeline_phase(e->timeline, en->req.name, "NEGOTIATE", 1,
                                 en->submit_us != 0 ? en->submit_us : ring__now_us(), NULL);
    }
    group_bits(first);
}

/*
 * Cached requests while ranks have joined. A joined rank holds no tensors and says it is
 * ready for every cached one, to take part with neutral elements; but the coordinator
 * refuses allgathers, alltoalls and reducescatters then, and broadcasts from a joined
 * root, which the cache would run without it (the joined rank has nothing to send, or
 * nowhere to put what it gets). So a joined rank is ready only for what it can run, and a
 * working rank sends such a request to the coordinator, which fails it with RING_EJOINED,
 * once it sees that some rank has joined (the cycle after it joined). With
 * RING_JOIN_BROADCAST=0 broadcasts are refused too (refuse_joined_broadcasts).
 */
static int runs_with_joined(struct ring__engine *e, const struct ring__request *r,
                            const unsigned char *joined)
{
    const struct ring__pset *ps;
    int root = -1;
    if (!ring__coord_allowed_with_joined(r->type))
        return 0;
    if (r->type != RING__BROADCAST)
        return 1;
    if (!e->ctx->tune.v[RING__K_JOIN_BROADCAST])
        return 0;
    pthread_mutex_lock(&e->mu);
    ps = ring__psets_get(&e->psets, r->process_set);
    if (ps != NULL && r->root >= 0 && r->root < ps->size)
        root = ps->members[r->root];
    pthread_mutex_unlock(&e->mu);
    return root >= 0 && !joined[root];
}

/* Whether anything may ride: the fast path is on and the ring ops run host buffers
 * (RING_CPU_OPERATIONS=mpi's point is that MPI moves the data). */
static int any_attachable(const struct ring__engine *e)
{
    return e->fast && ring__ops_for(e->ctx, -1) == &ring__ops_ring;
}

/* ring__eng_attachable once any_attachable holds: what depends on the request. */
static int req_attachable(const struct ring__engine *e, const struct ring__request *r)
{
    /* GPU buffers (the host cannot touch them) and compression (16 bits on the wire) take
     * their own paths. */
    if (r->process_set != RING_GLOBAL || r->device >= 0)
        return 0;
    if (r->type == RING__BARRIER)
        return 1;
    /* Adasum's combination is no element-wise reduction: it takes its own collective. */
    return r->type == RING__ALLREDUCE && r->op != RING_ADASUM &&
           r->count <= RING__ATTACH_MAX / ring_dtype_size((ring_dtype_t)r->dtype) &&
           !(e->compression >= 0 && r->dtype == RING_FLOAT32 &&
             (r->op == RING_SUM || r->op == RING_AVERAGE));
}

int ring__eng_attachable(const struct ring__engine *e, const struct ring__request *r)
{
    return any_attachable(e) && req_attachable(e, r);
}

/*
 * Step 2's attachment: every cached tensor pending here that may ride in the control round
 * (ring__eng_attachable), in bit order, as long as their data fits in RING__ATTACH_MAX:
 * barriers, and the allreduces of the kind (dtype, and op with AVERAGE as SUM) of the
 * lowest such bit. The key is the bitmap of their bits, so ranks reduce their data into
 * each other's only when they attached the very same tensors (control.c). When they did,
 * every one of those tensors is pending on every rank, and so fires in this cycle: its
 * result is in the attachment, and it needs no collective of its own (complete_attached).
 * A rank that has joined attaches nothing: it holds no tensors, so no attachment of that
 * cycle goes through, and AVERAGE may divide by the world's size. Returns the number of
 * tensors attached; at is zeroed when none.
 */
static int build_attach(struct ring__engine *e, int hwm, int cw, int join_local,
                        struct ring__attach *at)
{
    int n = 0, dtype = -1, op = -1;
    size_t es = 1, total = 0, off = 0;

    memset(at, 0, sizeof(*at));
    if (join_local || !any_attachable(e)) /* once per cycle, not per tensor */
        return 0;
    memset(e->att_key, 0, (size_t)cw * sizeof(uint64_t));
    for (int b = 0; b < hwm; b++) {
        struct entry *en = e->bit_entry[b];
        const struct ring__request *r;
        if (en == NULL || !req_attachable(e, r = &en->req))
            continue;
        if (r->type == RING__ALLREDUCE) {
            int rop = r->op == RING_AVERAGE ? RING_SUM : r->op;
            if (dtype < 0) {
                dtype = r->dtype;
                op = rop;
                es = ring_dtype_size((ring_dtype_t)dtype);
            } else if (r->dtype != dtype || rop != op) {
                continue;
            }
            total += (size_t)r->count * es;
            if (total > RING__ATTACH_MAX)
                return 0; /* too much for one round: the usual way, fused */
        }
        ctl_set(e->att_key, b);
        e->att_ent[n++] = en;
    }
    if (n == 0)
        return 0;
    for (int i = 0; i < n; i++) {
        const struct entry *en = e->att_ent[i];
        if (en->req.type == RING__ALLREDUCE) {
            ring__eng_gather(en, e->fast_buf + off, (ring_dtype_t)dtype, en->req.prescale);
            off += (size_t)en->req.count * es;
        }
    }
    *at = (struct ring__attach){
        .on = 1,
        .key = e->att_key,
        .key_bytes = (size_t)cw * sizeof(uint64_t),
        .data = e->fast_buf,
        .count = total / es,
        .bytes = total,
        .dtype = dtype >= 0 ? (ring_dtype_t)dtype : RING_UINT8,
        .op = op >= 0 ? (ring_op_t)op : RING_SUM,
    };
    return n;
}

/*
 * The n tensors whose reduced data came back in the control round: their results go to
 * the callers' buffers (a barrier has none: the round was the barrier), and they complete
 * without a collective of their own, as one batch.
 */
static void complete_attached(struct ring__engine *e, const struct ring__attach *at, int n,
                              struct ring__fast *f)
{
    size_t es = ring_dtype_size(at->dtype), off = 0;
    uint64_t tensors = 0;

    for (int i = 0; i < n; i++) {
        struct entry *en = e->att_ent[i];
        tensors += en->nmem > 0 ? (uint64_t)en->nmem : 1;
        const struct ring__request *r = &en->req;
        const char *phase = r->type == RING__BARRIER ? "BARRIER" : "ALLREDUCE";
        if (r->type == RING__ALLREDUCE) {
            double post = r->postscale;
            if (r->op == RING_AVERAGE)
                post /= e->ctx->size; /* nobody has joined (build_attach) */
            ring__eng_scatter(en, (char *)at->data + off, at->dtype, post);
            off += (size_t)r->count * es;
        }
        TL_PHASE(e, r->name, "NEGOTIATE", 0, NULL);
        TL_PHASE(e, r->name, phase, 1, "\"fast\":true");
        TL_PHASE(e, r->name, phase, 0, NULL);
        if (e->ctx->rank == 0 && e->stalls.count > 0) {
            struct stall *s = ring__strmap_del(&e->stalls, r->name);
            if (s != NULL) {
                free(s->seen);
                free(s);
            }
        }
        if (f != NULL && en == f->en)
            f->done = 1;
    }
    pthread_mutex_lock(&e->mu);
    e->stats.collectives++;
    e->stats.cache_hits += (uint64_t)n; /* agreed by the cache's bits like the others */
    e->stats.fast_path += tensors;
    pthread_mutex_unlock(&e->mu);
    ring__eng_complete_batch(e, e->att_ent, n); /* the entries may be gone after this */
}

/*
 * Step 2: fills the control vector e->ctl (words long, cw words of cache bits up to hwm):
 * the OR flags (complemented) and the AND flags, the ranks that have not joined, per cached
 * tensor "ready here" and its complement, from one walk over the pending entries, which
 * also maps each cache bit to its pending entry (e->bit_entry) for step 5.
 */
static void control_vector(struct ring__engine *e, int hwm, int cw, int words, int shutdown_local,
                           int join_local)
{
    int size = e->ctx->size, rank = e->ctx->rank, jw = e->jw, uncached = 0, some_joined = 0;
    uint64_t *w = e->ctl, *ready = w + 2 + jw, *mine = w + 2 + jw + cw, or_flags;

    for (int r = 0; r < size; r++)
        some_joined |= e->joined_ranks[r];
    memset(w, 0, (size_t)words * sizeof(uint64_t));
    /* The complement of what this rank really holds, for the OR. */
    for (int i = 0; i < cw; i++)
        w[2 + jw + cw + i] = ~(uint64_t)0;
    memset(e->bit_entry, 0, (size_t)hwm * sizeof(*e->bit_entry));
    for (struct entry *list = e->phead; list != NULL; list = list->pnext) {
        if (list->bit < 0 || (some_joined && !runs_with_joined(e, &list->req, e->joined_ranks))) {
            uncached = 1; /* to the coordinator (runs_with_joined) */
            continue;
        }
        e->bit_entry[list->bit] = list; /* step 5 runs it without a name lookup */
        if (!join_local) {
            ctl_set(ready, list->bit);
            mine[list->bit / 64] &= ~((uint64_t)1 << (list->bit % 64));
        }
    }
    or_flags = (uncached ? F_UNCACHED : 0) | (ring__stop_local() ? F_STOP : 0) |
               (rank == 0 && e->force_full ? F_FORCE_FULL : 0);
    w[0] = ~or_flags;
    w[1] = shutdown_local ? F_SHUTDOWN : 0;
    for (int r = 0; r < size; r++) {
        if (r != rank || !join_local)
            ctl_set(w + 2, r);
    }
    /* A rank is "ready" for tensors of sets it is not in, and once it joined for all that
     * can run without it (runs_with_joined: it counts itself as joined). */
    if (join_local)
        e->joined_ranks[rank] = 1; /* the control round below sets every rank's */
    for (int b = 0; b < hwm; b++) {
        /* absent first: a cache entry is a few hundred bytes, a cache miss each */
        if ((e->absent[b] && e->cache.entries[b].used) ||
            (join_local && e->cache.entries[b].used &&
             runs_with_joined(e, &e->cache.entries[b].req, e->joined_ranks)))
            ctl_set(w + 2 + jw, b);
    }
}

/*
 * Step 3, after the control round: marks in e->fired the cached tensors ready on every rank
 * (and really held by one), and lists those not attached to the round as responses to run
 * (e->fresp, with their entries here in e->fent). Returns how many it listed.
 */
static int fire_cached(struct ring__engine *e, int hwm, int cw, int natt)
{
    const uint64_t *w = e->ctl;
    unsigned char *fired = e->fired;
    struct ring__response *fresp = e->fresp;
    int jw = e->jw, nfired = 0;

    memset(fired, 0, (size_t)hwm);
    for (int b = 0; b < hwm; b++) {
        /* ready on every rank, and really held by at least one */
        /* The bit vectors first: a cache entry is a few hundred bytes, a cache miss each. */
        if (!ctl_get(w + 2 + jw, b) || ctl_get(w + 2 + jw + cw, b) || !e->cache.entries[b].used)
            continue;
        fired[b] = 1;
        if (natt > 0 && ctl_get(e->att_key, b))
            continue; /* every rank attached it: done already, on every rank */
        memset(&fresp[nfired], 0, sizeof(fresp[nfired]));
        /* Shallow: only a packed group has counts here, which execution reads and which
         * stay in the cache until the cache learns, after it. */
        fresp[nfired].req = e->cache.entries[b].req;
        e->fent[nfired] = e->bit_entry[b];
        nfired++;
    }
    return nfired;
}

/*
 * After execution, the same on every rank: the fired cache entries count as used, the
 * negotiated responses enter the cache (failed ones leave it), and the pending entries look
 * their bits up again, since an entry may have been replaced.
 */
static void cache_learn(struct ring__engine *e, int hwm, const struct ring__response *resp,
                        int nresp)
{
    const unsigned char *fired = e->fired;

    for (int b = 0; b < hwm; b++) {
        if (fired[b])
            ring__cache_touch(&e->cache, b);
    }
    for (int i = 0; i < nresp; i++) {
        if (resp[i].error != 0) {
            ring__cache_erase(&e->cache, resp[i].req.name);
        } else {
            int bit = ring__cache_put(&e->cache, &resp[i].req);
            struct ring__comm c;
            if (bit >= 0)
                e->absent[bit] = !ring__eng_pset_view(e, resp[i].req.process_set, &c);
        }
    }
    /* A cache entry may have been replaced: pending entries look their bits up again. */
    if (nresp > 0) {
        for (struct entry *en = e->phead; en != NULL; en = en->pnext)
            en->bit = ring__cache_lookup_h(&e->cache, &en->req, en->hash);
        group_bits(e->phead);
    }
}

/* Join: complete when nobody is left working; the last to join is the highest rank among
 * those that joined in this very cycle. */
static void join_progress(struct ring__engine *e)
{
    int size = e->ctx->size, all_joined = 1, last = -1;

    for (int r = 0; r < size; r++) {
        all_joined &= e->joined_ranks[r];
        if (e->joined_ranks[r] && !e->prev_joined[r])
            last = r;
    }
    memcpy(e->prev_joined, e->joined_ranks, (size_t)size);
    if (!all_joined)
        return;
    pthread_mutex_lock(&e->mu);
    e->joined = 0;
    if (e->join_handle != NULL) {
        e->join_handle->join_last = last;
        ring__eng_finish_handle(e, e->join_handle, 0, NULL);
        e->join_handle = NULL;
    }
    pthread_mutex_unlock(&e->mu);
    ring__eng_flush_waiters(e);
    memset(e->joined_ranks, 0, (size_t)size);
    memset(e->prev_joined, 0, (size_t)size);
}

/* One cycle. Returns 1 when the ranks agreed to shut down, 0 to go on, or an error. Called
 * by the engine thread with f NULL, it first waits for the burst to end (settle), during
 * which it lets go of cycle_mu. */
int ring__eng_cycle(struct ring__engine *e, struct ring__fast *f)
{
    int size = e->ctx->size, rank = e->ctx->rank, jw = e->jw, rc;
    /* Only the cache's used bits travel; every rank's cache is the same, so is its size. */
    int hwm = e->cache.hwm, cw = (hwm + 63) / 64, words = 2 + jw + 2 * cw + RING__TUNE_WORDS;
    int shutdown_local, join_local, stall_shutdown = 0, nresp = 0, nfired = 0, natt;
    uint64_t *w = e->ctl, or_flags, and_flags;
    unsigned char *fired = NULL;
    struct ring__response *resp = NULL, *fresp = NULL;
    struct ring__attach at;
    char msg[384] = "";
    int64_t t0;

    /* A blocking call on the fast path has no burst to wait for. */
    if (f == NULL && settle(e))
        return 0; /* another thread ran the cycle meanwhile */
    e->cycle_seq++;
    t0 = ring__now_us();
    e->last_cycle_us = t0;
    e->defer_since = 0;
    take_queue(e);
    pthread_mutex_lock(&e->mu);
    shutdown_local = e->shutdown;
    if (e->join_pending) {
        e->join_pending = 0;
        e->joined = 1;
    }
    join_local = e->joined;
    pthread_mutex_unlock(&e->mu);

    /* Step 2: the control vector, from one walk over the pending entries. */
    control_vector(e, hwm, cw, words, shutdown_local, join_local);
    /* The tuner's words come last: rank 0's choice of parameters, if any (autotune.h). */
    ring__autotune_put(e->autotune, w + words - RING__TUNE_WORDS);
    natt = build_attach(e, hwm, cw, join_local, &at);
    /* Always recursive doubling (control.c): the algorithm must not follow tunables a
     * program may change between its own calls, or ranks could disagree on it. */
    rc = ring__ctl_allreduce(&e->world, w, (size_t)words, &at, e->ctl_scratch);
    if (rc < 0)
        return rc;
    if (!at.valid)
        natt = 0;
    ring__autotune_take(e, w + words - RING__TUNE_WORDS, t0);
    or_flags = ~w[0];
    and_flags = w[1];
    for (int r = 0; r < size; r++)
        e->joined_ranks[r] = !ctl_get(w + 2, r);
    if (or_flags & F_STOP)
        e->stop_agreed = 1;

    /* Step 3: cached tensors ready everywhere, in bit order. */
    fired = e->fired;
    fresp = e->fresp;
    nfired = fire_cached(e, hwm, cw, natt);
    if (rank == 0)
        watch_bits(e, hwm, w + 2 + jw, w + 2 + jw + cw, t0);
    if (natt > 0)
        complete_attached(e, &at, natt, f);

    /* Step 4. */
    if (or_flags & (F_UNCACHED | F_FORCE_FULL)) {
        rc = ring__eng_full_round(e, fired, &resp, &nresp, &stall_shutdown, msg, sizeof(msg));
        if (rc < 0)
            goto out;
        pthread_mutex_lock(&e->mu);
        e->stats.full_negotiations++;
        pthread_mutex_unlock(&e->mu);
    }
    pthread_mutex_lock(&e->mu);
    e->stats.cycles++;
    e->stats.cache_hits += (uint64_t)nfired;
    e->stats.negotiation_us += (uint64_t)(ring__now_us() - t0);
    pthread_mutex_unlock(&e->mu);
    if (stall_shutdown) {
        ring__eng_fail_all(e, RING_ESTALL, msg);
        rc = RING_ESTALL;
        goto out;
    }

    if (ring__log_enabled(RING_LOG_TRACE))
        ring__log(RING_LOG_TRACE,
                  "cycle: %d pending, %d fired from the cache, %d negotiated, "
                  "flags %llx, joined here %d",
                  e->npending, nfired, nresp, (unsigned long long)or_flags, join_local);
    /* Step 5: run them; then the cache learns, in the same order on every rank. */
    for (int i = 0; i < nfired; i++) {
        TL_PHASE(e, fresp[i].req.name, "NEGOTIATE", 0, NULL);
        TL_PHASE(e, fresp[i].req.name, "QUEUE", 1, NULL);
        if (rank == 0 && e->stalls.count > 0) {
            struct stall *s = ring__strmap_del(&e->stalls, fresp[i].req.name);
            if (s != NULL) {
                free(s->seen);
                free(s);
            }
        }
    }
    for (int i = 0; i < nresp; i++) {
        TL_PHASE(e, resp[i].req.name, "NEGOTIATE", 0, NULL);
        TL_PHASE(e, resp[i].req.name, "QUEUE", 1, NULL);
    }
    if ((rc = ring__eng_execute(e, fresp, nfired, e->fent)) < 0 ||
        (rc = ring__eng_execute(e, resp, nresp, NULL)) < 0)
        goto out;
    cache_learn(e, hwm, resp, nresp);

    join_progress(e);
    ring__autotune_cycle_end(e, fresp, nfired, resp, nresp, natt > 0 ? (uint64_t)at.bytes : 0,
                             ring__now_us());
    ring__timeline_flush(e->timeline);
    rc = (and_flags & F_SHUTDOWN) ? 1 : 0;
out:
    for (int i = 0; i < nresp; i++)
        ring__response_clear(&resp[i]);
    free(resp);
    ring__eng_flush_waiters(e);
    return rc;
}
