/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_cycle.c - one negotiation cycle (see engine.c for the whole picture): the control
 * vector, the cache's bit-vector agreement, the full round through the coordinator, stall
 * inspection, then execution and the cache update, identically on every rank.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "engine_impl.h"

static void ctl_set(uint64_t *w, int bit)
{
    w[bit / 64] |= (uint64_t)1 << (bit % 64);
}

static int ctl_get(const uint64_t *w, int bit)
{
    return (int)((w[bit / 64] >> (bit % 64)) & 1u);
}

/* Rank 0: stall bookkeeping for the names of a full round that are not ready yet. */
static void inspect_stalls(struct ring__engine *e, struct ring__request **reqs, const int *nreqs,
                           const struct ring__response *resp, int nresp, int64_t now, int *shutdown,
                           char *msg, size_t msglen)
{
    int size = e->ctx->size;

    for (int i = 0; i < nresp; i++) {
        struct stall *s = ring__strmap_del(&e->stalls, resp[i].req.name);
        if (s != NULL) {
            for (int r = 0; r < size; r++) {
                char what[32];
                snprintf(what, sizeof(what), "rank %d ready", r);
                if (!s->seen[r])
                    ring__timeline_mark(e->timeline, resp[i].req.name, what, now);
            }
            free(s->seen);
            free(s);
        }
    }
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < nreqs[r]; i++) {
            const char *name = reqs[r][i].name;
            struct stall *s;
            int done = 0;
            for (int k = 0; k < nresp && !done; k++)
                done = strcmp(resp[k].req.name, name) == 0;
            if (done)
                continue;
            s = ring__strmap_get(&e->stalls, name);
            if (s == NULL) {
                s = calloc(1, sizeof(*s));
                if (s == NULL || (s->seen = calloc((size_t)size, 1)) == NULL ||
                    ring__strmap_put(&e->stalls, name, s) < 0) {
                    if (s != NULL)
                        free(s->seen);
                    free(s);
                    continue;
                }
                s->first_us = now;
            }
            if (!s->seen[r]) {
                char what[32];
                snprintf(what, sizeof(what), "rank %d ready", r);
                ring__timeline_mark(e->timeline, name, what, now);
                s->seen[r] = 1;
            }
        }
    }
    /* Warn about (or give up on) names some ranks have lacked for too long. */
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < nreqs[r]; i++) {
            const char *name = reqs[r][i].name;
            struct stall *s = ring__strmap_get(&e->stalls, name);
            char have[256], missing[256];
            size_t hl = 0, ml = 0;
            int64_t age;
            if (s == NULL)
                continue;
            age = now - s->first_us;
            have[0] = missing[0] = '\0';
            for (int k = 0; k < size; k++) {
                char *b = s->seen[k] ? have : missing;
                size_t *l = s->seen[k] ? &hl : &ml;
                if (*l + 12 < sizeof(have))
                    *l += (size_t)snprintf(b + *l, sizeof(have) - *l, "%s%d", *l ? ", " : "", k);
            }
            if (e->stall_shutdown_us > 0 && age >= e->stall_shutdown_us && !*shutdown) {
                *shutdown = 1;
                snprintf(msg, msglen,
                         "%s '%s' stalled for %lld s (RING_STALL_SHUTDOWN_SECONDS): submitted "
                         "by ranks %s, never by ranks %s",
                         ring__optype_name(reqs[r][i].type), name, (long long)(age / 1000000), have,
                         missing);
            }
            if (e->stall_check_us > 0 && age >= e->stall_check_us &&
                now - s->warned_us >= e->stall_check_us) {
                s->warned_us = now;
                ring__log(RING_LOG_WARNING,
                          "stall: %s '%s' was submitted by ranks %s but not by ranks %s for "
                          "%lld s; those ranks may have diverged (different code paths, "
                          "uneven data without ring_join)",
                          ring__optype_name(reqs[r][i].type), name, have, missing,
                          (long long)(age / 1000000));
            }
        }
    }
}

/*
 * RING_JOIN_BROADCAST=0, on rank 0: while ranks have joined, every broadcast fails with
 * RING_EJOINED, as in Horovod, rather than only those from a joined root (coordinator.c).
 * Returns 0 or RING_ENOMEM.
 */
static int refuse_joined_broadcasts(struct ring__engine *e, struct ring__response *resp, int n)
{
    int joined = -1;
    if (e->ctx->tune.v[RING__K_JOIN_BROADCAST])
        return 0;
    for (int r = 0; r < e->ctx->size && joined < 0; r++)
        joined = e->joined_ranks[r] ? r : -1;
    for (int i = 0; joined >= 0 && i < n; i++) {
        char msg[RING__NAME_MAX + 128];
        if (resp[i].req.type != RING__BROADCAST || resp[i].error != 0)
            continue;
        snprintf(msg, sizeof(msg),
                 "broadcast '%s': not allowed while ranks have joined (rank %d has; "
                 "RING_JOIN_BROADCAST=0)",
                 resp[i].req.name, joined);
        if ((resp[i].message = strdup(msg)) == NULL)
            return ring__err(RING_ENOMEM, "coordinator: out of memory");
        resp[i].error = RING_EJOINED;
    }
    return 0;
}

/* Step 4: every rank's unfired requests to rank 0 and the responses back. */
static int full_round(struct ring__engine *e, const unsigned char *fired,
                      struct ring__response **out, int *nout, int *shutdown, char *msg,
                      size_t msglen)
{
    struct ring__buf b = {0};
    uint64_t nreq = 0;
    char **bufs = NULL, *payload = NULL;
    size_t *lens = NULL, plen = 0;
    int size = e->ctx->size, rc;

    *out = NULL;
    *nout = 0;
    ring__put_u64(&b, 0); /* count, patched below */
    for (struct entry *en = e->phead; en != NULL; en = en->pnext) {
        if (en->bit < 0 || !fired[en->bit]) {
            ring__put_request(&b, &en->req);
            nreq++;
        }
    }
    if (b.oom) {
        ring__buf_free(&b);
        return ring__err(RING_ENOMEM, "out of memory serializing requests");
    }
    for (int i = 0; i < 8; i++)
        b.data[i] = (char)(nreq >> (8 * i));
    rc = ring__gather_bytes(&e->world, b.data, b.len, &bufs, &lens);
    ring__buf_free(&b);
    if (rc < 0)
        return rc;

    if (e->ctx->rank == 0) {
        struct ring__request **reqs = calloc((size_t)size, sizeof(*reqs));
        int *nreqs = calloc((size_t)size, sizeof(int));
        struct ring__response *resp = NULL;
        struct ring__buf ob = {0};
        int nresp = 0;
        int64_t now = ring__now_us();

        rc = reqs && nreqs ? 0 : ring__err(RING_ENOMEM, "coordinator: out of memory");
        for (int r = 0; r < size && rc == 0; r++) {
            struct ring__reader rd = {bufs[r], bufs[r] + lens[r], 0};
            uint64_t n = ring__get_u64(&rd);
            if (rd.bad || n > lens[r] / RING__REQUEST_WIRE_MIN) {
                rc = ring__err(RING_EPROTO, "rank %d sent a malformed request list", r);
                break;
            }
            reqs[r] = calloc(n > 0 ? n : 1, sizeof(**reqs));
            if (reqs[r] == NULL) {
                rc = RING_ENOMEM;
                break;
            }
            for (uint64_t i = 0; i < n && rc == 0; i++) {
                if ((rc = ring__get_request(&rd, &reqs[r][i])) < 0)
                    rc = ring__err(RING_EPROTO, "rank %d sent a malformed request", r);
                else
                    nreqs[r]++;
            }
        }
        if (rc == 0) {
            pthread_mutex_lock(&e->mu);
            for (int r = 0; r < size; r++)
                e->stats.coordinator_names += (uint64_t)nreqs[r];
            rc = ring__coord_match(size, reqs, nreqs, e->joined_ranks, &e->psets, &resp, &nresp);
            pthread_mutex_unlock(&e->mu);
        }
        if (rc == 0)
            rc = refuse_joined_broadcasts(e, resp, nresp);
        if (rc == 0)
            inspect_stalls(e, reqs, nreqs, resp, nresp, now, shutdown, msg, msglen);
        ring__put_u64(&ob, (uint64_t)*shutdown);
        ring__put_str(&ob, *shutdown ? msg : "");
        ring__put_u64(&ob, (uint64_t)nresp);
        for (int i = 0; i < nresp; i++)
            ring__put_response(&ob, &resp[i]);
        for (int r = 0; r < size; r++) {
            for (int i = 0; reqs && reqs[r] && i < nreqs[r]; i++)
                ring__request_clear(&reqs[r][i]);
            if (reqs)
                free(reqs[r]);
            free(bufs[r]);
        }
        free(reqs);
        free(nreqs);
        free(bufs);
        free(lens);
        for (int i = 0; i < nresp; i++)
            ring__response_clear(&resp[i]);
        free(resp);
        if (rc == 0 && ob.oom)
            rc = ring__err(RING_ENOMEM, "coordinator: out of memory");
        if (rc < 0) {
            /* Still answer, so the other ranks fail with a message instead of timing out. */
            ring__buf_free(&ob);
            ring__put_u64(&ob, 1);
            ring__put_str(&ob, ring_last_error());
            ring__put_u64(&ob, 0);
        }
        payload = ob.data;
        plen = ob.len;
    }
    rc = ring__bcast_bytes(&e->world, &payload, &plen);
    if (rc == 0) {
        struct ring__reader rd = {payload, payload + plen, 0};
        uint64_t n;
        char *smsg;
        *shutdown = (int)ring__get_u64(&rd);
        smsg = ring__get_str(&rd);
        if (smsg != NULL) {
            snprintf(msg, msglen, "%s", smsg);
            free(smsg);
        }
        n = ring__get_u64(&rd);
        if (rd.bad || n > plen / RING__RESPONSE_WIRE_MIN) {
            rc = ring__err(RING_EPROTO, "malformed response list from rank 0");
        } else if (n > 0) {
            *out = calloc(n, sizeof(**out));
            if (*out == NULL)
                rc = RING_ENOMEM;
            for (uint64_t i = 0; i < n && rc == 0; i++) {
                if ((rc = ring__get_response(&rd, &(*out)[i])) == 0)
                    (*nout)++;
            }
        }
    }
    free(payload);
    return rc;
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
    /* While it waits, the program's first ring_wait may run the cycle itself (engine.c:
     * run_here); cycle_seq tells. */
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

/* Whether anything may ride: the fast path is on and the ring backend runs host buffers
 * (RING_CPU_OPERATIONS=mpi's point is that MPI moves the data). */
static int any_attachable(const struct ring__engine *e)
{
    return e->fast && ring__backend_for(e->ctx, -1) == &ring__backend_ring;
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

/* One cycle. Returns 1 when the ranks agreed to shut down, 0 to go on, or an error. Called
 * by the engine thread with f NULL, it first waits for the burst to end (settle), during
 * which it lets go of cycle_mu. */
int ring__eng_cycle(struct ring__engine *e, struct ring__fast *f)
{
    int size = e->ctx->size, rank = e->ctx->rank, jw = e->jw, rc;
    /* Only the cache's used bits travel; every rank's cache is the same, so is its size. */
    int hwm = e->cache.hwm, cw = (hwm + 63) / 64, words = 2 + jw + 2 * cw + RING__TUNE_WORDS;
    int shutdown_local, join_local, stall_shutdown = 0, nresp = 0, nfired = 0, uncached = 0, natt;
    uint64_t *w = e->ctl, or_flags, and_flags;
    unsigned char *fired = NULL;
    int some_joined = 0;
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
    for (int r = 0; r < size; r++)
        some_joined |= e->joined_ranks[r];

    /* Step 2: the control vector, from one walk over the pending entries. */
    memset(w, 0, (size_t)words * sizeof(uint64_t));
    /* The complement of what this rank really holds, for the OR. */
    for (int i = 0; i < cw; i++)
        w[2 + jw + cw + i] = ~(uint64_t)0;
    memset(e->bit_entry, 0, (size_t)hwm * sizeof(*e->bit_entry));
    {
        uint64_t *ready = w + 2 + jw, *mine = w + 2 + jw + cw;
        for (struct entry *list = e->phead; list != NULL; list = list->pnext) {
            if (list->bit < 0 ||
                (some_joined && !runs_with_joined(e, &list->req, e->joined_ranks))) {
                uncached = 1; /* to the coordinator (runs_with_joined) */
                continue;
            }
            e->bit_entry[list->bit] = list; /* step 5 runs it without a name lookup */
            if (!join_local) {
                ctl_set(ready, list->bit);
                mine[list->bit / 64] &= ~((uint64_t)1 << (list->bit % 64));
            }
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
    if (rank == 0)
        watch_bits(e, hwm, w + 2 + jw, w + 2 + jw + cw, t0);
    if (natt > 0)
        complete_attached(e, &at, natt, f);

    /* Step 4. */
    if (or_flags & (F_UNCACHED | F_FORCE_FULL)) {
        rc = full_round(e, fired, &resp, &nresp, &stall_shutdown, msg, sizeof(msg));
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

    /* Join: complete when nobody is left working; the last to join is the highest rank
     * among those that joined in this very cycle. */
    {
        int all_joined = 1, last = -1;
        for (int r = 0; r < size; r++) {
            all_joined &= e->joined_ranks[r];
            if (e->joined_ranks[r] && !e->prev_joined[r])
                last = r;
        }
        memcpy(e->prev_joined, e->joined_ranks, (size_t)size);
        if (all_joined) {
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
    }
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
