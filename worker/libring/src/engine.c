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
#include <unistd.h>

#include "engine.h"
#include "net.h"

#define MAX_PSETS 256

/* OR flags (sent complemented) and AND flags of the control vector. */
#define F_UNCACHED   1u
#define F_STOP       2u
#define F_FORCE_FULL 4u
#define F_SHUTDOWN   1u

struct ring_handle {
    int done; /* under mu */
    int status;
    int remaining; /* tensors of this handle not yet completed */
    int stop_seen; /* the stop was agreed before this completed */
    int join_last;
    char message[384];
};

struct entry {
    struct ring__request req;
    const void *sendbuf;
    void *recvbuf;
    struct ring_handle *handle;
    int64_t submit_us;
    int bit; /* cache bit, or -1 */
    struct entry *next;
};

struct stall {
    int64_t first_us, warned_us;
    unsigned char *seen; /* per world rank: its request has been seen */
};

struct ring__engine {
    struct ring__ctx *ctx;
    struct ring__comm world;
    pthread_t thread;
    int started;
    int wake_fd;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    struct entry *qhead, **qtail;
    struct ring__strmap inflight;
    int shutdown;
    int join_pending;
    struct ring_handle *join_handle;
    int failed;
    char failed_msg[384];
    struct ring__timeline *timeline_swap;
    int timeline_swapping;
    struct ring_engine_stats stats;
    struct ring__process_sets psets;

    /* engine thread only */
    struct ring__strmap pending;
    int npending;
    struct ring__cache cache;
    int joined;
    unsigned char *joined_ranks;
    int stop_agreed;
    size_t fusion_threshold;
    char *fusion;
    size_t fusion_cap;
    int compression; /* -1 none, else the 16-bit dtype */
    int cycle_ms;
    int64_t stall_check_us, stall_shutdown_us;
    struct ring__timeline *timeline;
    struct ring__strmap stalls; /* rank 0: name -> struct stall */
    int64_t *bit_since;         /* rank 0: when a cached bit was first partly ready */
    int force_full;
    int words, jw, cw; /* control vector layout */
    uint64_t *ctl;
    unsigned char *absent;      /* per cache bit: this rank is not in the entry's set */
    unsigned char *prev_joined; /* joined_ranks of the cycle before */
};

static atomic_int stop_visible;

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

/* ---- completing work (engine thread) ---- */

static void finish_handle(struct ring__engine *e, struct ring_handle *h, int status,
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
        pthread_cond_broadcast(&e->cv);
    }
}

/* Removes a completed entry and completes its part of the handle. */
static void complete(struct ring__engine *e, struct entry *en, int status, const char *msg)
{
    ring__strmap_del(&e->pending, en->req.name);
    e->npending--;
    pthread_mutex_lock(&e->mu);
    ring__strmap_del(&e->inflight, en->req.name);
    finish_handle(e, en->handle, status, msg);
    e->stats.tensors++;
    pthread_mutex_unlock(&e->mu);
    ring__request_clear(&en->req);
    free(en);
}

static void fail_each(const char *key, void *value, void *arg)
{
    struct entry **list = arg;
    struct entry *en = value;
    en->next = *list;
    *list = en;
}

/* The engine cannot go on: every queued and pending request fails with err, and so will
 * every later submission. */
static void fail_all(struct ring__engine *e, int err, const char *msg)
{
    struct entry *list = NULL, *en, *next;

    /* First refuse new work, so that a caller woken by the failures below and submitting
     * again is told the engine is gone rather than queued behind it. */
    pthread_mutex_lock(&e->mu);
    e->failed = err;
    snprintf(e->failed_msg, sizeof(e->failed_msg), "%s", msg);
    pthread_mutex_unlock(&e->mu);
    ring__strmap_each(&e->pending, fail_each, &list);
    for (en = list; en != NULL; en = next) {
        next = en->next;
        complete(e, en, err, msg);
    }
    pthread_mutex_lock(&e->mu);
    for (en = e->qhead; en != NULL; en = next) {
        next = en->next;
        ring__strmap_del(&e->inflight, en->req.name);
        finish_handle(e, en->handle, err, msg);
        ring__request_clear(&en->req);
        free(en);
    }
    e->qhead = NULL;
    e->qtail = &e->qhead;
    if (e->join_handle != NULL) {
        finish_handle(e, e->join_handle, err, msg);
        e->join_handle = NULL;
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    ring__log(RING_LOG_ERROR, "engine stopped: %s", msg);
}

/* ---- executing responses ---- */

static int pset_view(struct ring__engine *e, int id, struct ring__comm *c)
{
    const struct ring__pset *ps;
    pthread_mutex_lock(&e->mu);
    ps = ring__psets_get(&e->psets, id);
    if (ps != NULL) {
        c->ctx = e->ctx;
        c->rank = ps->my_rank;
        c->size = ps->size;
        c->members = id == 0 ? NULL : ps->members;
    }
    pthread_mutex_unlock(&e->mu);
    return ps != NULL && c->rank >= 0;
}

static int active_members(struct ring__engine *e, const struct ring__comm *c)
{
    int n = 0;
    for (int i = 0; i < c->size; i++)
        n += !e->joined_ranks[ring__peer(c, i)];
    return n > 0 ? n : 1;
}

/* Fills n elements with op's neutral element, for ranks that have joined. */
static void neutral(void *buf, size_t n, int dtype, int op)
{
    size_t es = ring_dtype_size((ring_dtype_t)dtype);
    char one[8], *p = buf;
    double v = op == RING_PRODUCT ? 1.0 : 0.0;

    if (op == RING_MIN || op == RING_MAX) {
        static const double big[RING_DTYPE_COUNT] = {
            [RING_UINT8] = 255,         [RING_INT8] = 127,          [RING_INT32] = 2147483647.0,
            [RING_INT64] = 9.2e18,      [RING_FLOAT16] = 1.0 / 0.0, [RING_BFLOAT16] = 1.0 / 0.0,
            [RING_FLOAT32] = 1.0 / 0.0, [RING_FLOAT64] = 1.0 / 0.0,
        };
        v = op == RING_MIN ? big[dtype]
                           : (dtype == RING_UINT8 ? 0 : -big[dtype] - (dtype < RING_FLOAT16));
    }
    switch (dtype) {
    case RING_UINT8:
        *(uint8_t *)one = (uint8_t)v;
        break;
    case RING_INT8:
        *(int8_t *)one = (int8_t)v;
        break;
    case RING_INT32:
        *(int32_t *)one = (int32_t)v;
        break;
    case RING_INT64:
        *(int64_t *)one = v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
        break;
    case RING_FLOAT16:
        *(uint16_t *)one = ring__float_to_half((float)v);
        break;
    case RING_BFLOAT16:
        *(uint16_t *)one = ring__float_to_bf16((float)v);
        break;
    case RING_FLOAT32:
        *(float *)one = (float)v;
        break;
    default:
        *(double *)one = v;
        break;
    }
    for (size_t i = 0; i < n; i++)
        memcpy(p + i * es, one, es);
}

static int grow_fusion(struct ring__engine *e, size_t bytes)
{
    char *p;
    if (bytes <= e->fusion_cap)
        return 0;
    p = realloc(e->fusion, bytes);
    if (p == NULL)
        return ring__err(RING_ENOMEM, "cannot grow the fusion buffer to %zu bytes", bytes);
    e->fusion = p;
    e->fusion_cap = bytes;
    return 0;
}

static void tl_args(const struct ring__request *r, char *buf, size_t len)
{
    snprintf(buf, len, "\"dtype\":\"%s\",\"count\":%llu", ring_dtype_name((ring_dtype_t)r->dtype),
             (unsigned long long)r->count);
}

static const char *phase_name(int type)
{
    static const char *const names[RING__OPTYPE_COUNT] = {
        [RING__ALLREDUCE] = "ALLREDUCE",         [RING__ALLGATHER] = "ALLGATHER",
        [RING__ALLGATHERV] = "ALLGATHERV",       [RING__BROADCAST] = "BROADCAST",
        [RING__REDUCESCATTER] = "REDUCESCATTER", [RING__ALLTOALL] = "ALLTOALL",
        [RING__ALLTOALLV] = "ALLTOALLV",         [RING__BARRIER] = "BARRIER",
    };
    return type >= 0 && type < RING__OPTYPE_COUNT ? names[type] : "COLLECTIVE";
}

/*
 * Runs a batch of compatible allreduces resp[0..n-1] through the fusion buffer (or in place
 * when alone and uncompressed). Entries are NULL on a rank that has joined.
 */
static int run_allreduce_batch(struct ring__engine *e, const struct ring__comm *c,
                               const struct ring__response *resp, struct entry **en, int n)
{
    const struct ring__request *r0 = &resp[0].req;
    ring_dtype_t dt = (ring_dtype_t)r0->dtype, wire = dt;
    ring_op_t op = (ring_op_t)r0->op;
    double post = r0->postscale;
    size_t es = ring_dtype_size(dt), total = 0, off = 0;
    struct ring__timeline *tl = e->timeline;
    int rc, compress =
                e->compression >= 0 && dt == RING_FLOAT32 && (op == RING_SUM || op == RING_AVERAGE);
    char args[128];

    if (op == RING_AVERAGE) {
        op = RING_SUM;
        post /= active_members(e, c);
    }
    for (int i = 0; i < n; i++)
        total += resp[i].req.count;
    if (n == 1 && !compress && en[0] != NULL) {
        ring__timeline_phase(tl, r0->name, "ALLREDUCE", 1, ring__now_us(), NULL);
        rc = ring__allreduce(c, en[0]->sendbuf, en[0]->recvbuf, r0->count, dt, op, r0->prescale,
                             post);
        ring__timeline_phase(tl, r0->name, "ALLREDUCE", 0, ring__now_us(), NULL);
        return rc;
    }
    if (compress)
        wire = (ring_dtype_t)e->compression;
    if ((rc = grow_fusion(e, total * es + total * ring_dtype_size(wire))) < 0)
        return rc;
    for (int i = 0; i < n; i++) {
        tl_args(&resp[i].req, args, sizeof(args));
        ring__timeline_phase(tl, resp[i].req.name, "MEMCPY_IN_FUSION_BUFFER", 1, ring__now_us(),
                             args);
        if (en[i] != NULL)
            memcpy(e->fusion + off * es, en[i]->sendbuf, resp[i].req.count * es);
        else
            neutral(e->fusion + off * es, resp[i].req.count, dt, r0->op);
        off += resp[i].req.count;
        ring__timeline_phase(tl, resp[i].req.name, "MEMCPY_IN_FUSION_BUFFER", 0, ring__now_us(),
                             NULL);
    }
    for (int i = 0; i < n; i++)
        ring__timeline_phase(tl, resp[i].req.name, "ALLREDUCE", 1, ring__now_us(), NULL);
    if (compress) {
        /* 16 bits on the wire; each step still adds in float32 (reduce.c). */
        float *f = (float *)e->fusion;
        uint16_t *h = (uint16_t *)(e->fusion + total * es);
        for (size_t i = 0; i < total; i++)
            h[i] = wire == RING_FLOAT16 ? ring__float_to_half(f[i] * (float)r0->prescale)
                                        : ring__float_to_bf16(f[i] * (float)r0->prescale);
        rc = ring__allreduce(c, h, h, total, wire, op, 1.0, post);
        for (size_t i = 0; rc == 0 && i < total; i++)
            f[i] = wire == RING_FLOAT16 ? ring__half_to_float(h[i]) : ring__bf16_to_float(h[i]);
    } else {
        rc = ring__allreduce(c, e->fusion, e->fusion, total, dt, op, r0->prescale, post);
    }
    for (int i = 0; i < n; i++)
        ring__timeline_phase(tl, resp[i].req.name, "ALLREDUCE", 0, ring__now_us(), NULL);
    off = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        ring__timeline_phase(tl, resp[i].req.name, "MEMCPY_OUT", 1, ring__now_us(), NULL);
        if (en[i] != NULL)
            memcpy(en[i]->recvbuf, e->fusion + off * es, resp[i].req.count * es);
        off += resp[i].req.count;
        ring__timeline_phase(tl, resp[i].req.name, "MEMCPY_OUT", 0, ring__now_us(), NULL);
    }
    return rc;
}

static size_t *to_sizes(const uint64_t *v, size_t n)
{
    size_t *s = malloc((n > 0 ? n : 1) * sizeof(size_t));
    for (size_t i = 0; s != NULL && i < n; i++)
        s[i] = (size_t)v[i];
    return s;
}

/* Runs one non-allreduce response (en is NULL on a joined rank). */
static int run_other(struct ring__engine *e, const struct ring__comm *c,
                     const struct ring__response *resp, struct entry *en)
{
    const struct ring__request *r = &resp->req;
    ring_dtype_t dt = (ring_dtype_t)r->dtype;
    size_t es = ring_dtype_size(dt);
    struct ring__timeline *tl = e->timeline;
    const char *phase = phase_name(r->type);
    int rc = 0;

    ring__timeline_phase(tl, r->name, phase, 1, ring__now_us(), NULL);
    switch (r->type) {
    case RING__BROADCAST:
        if (en != NULL) {
            rc = ring__broadcast(c, en->recvbuf, r->count, dt, r->root);
        } else { /* joined: pass the data along, keep nothing */
            char *tmp = malloc(r->count * es + 1);
            rc = tmp ? ring__broadcast(c, tmp, r->count, dt, r->root)
                     : ring__err(RING_ENOMEM, "broadcast: out of memory");
            free(tmp);
        }
        break;
    case RING__BARRIER:
        rc = ring__barrier(c);
        break;
    case RING__ALLGATHER:
        rc = ring__allgatherv(c, en->sendbuf == RING_IN_PLACE ? NULL : en->sendbuf, r->count,
                              en->recvbuf, NULL, dt);
        break;
    case RING__ALLGATHERV: {
        size_t *counts = to_sizes(en->req.counts, en->req.ncounts);
        rc = counts ? ring__allgatherv(c, en->sendbuf == RING_IN_PLACE ? NULL : en->sendbuf,
                                       r->count, en->recvbuf, counts, dt)
                    : RING_ENOMEM;
        free(counts);
        break;
    }
    case RING__REDUCESCATTER: {
        ring_op_t op = (ring_op_t)r->op;
        double post = r->postscale;
        if (op == RING_AVERAGE) {
            op = RING_SUM;
            post /= c->size;
        }
        rc = ring__reducescatter(c, en->sendbuf, en->recvbuf, r->count, dt, op, r->prescale, post);
        break;
    }
    case RING__ALLTOALL:
        rc = ring__alltoallv(c, en->sendbuf, NULL, en->recvbuf, NULL, r->count, dt);
        break;
    case RING__ALLTOALLV: {
        size_t *counts = to_sizes(en->req.counts, en->req.ncounts);
        rc = counts ? ring__alltoallv(c, en->sendbuf, counts, en->recvbuf, counts + c->size, 0, dt)
                    : RING_ENOMEM;
        free(counts);
        break;
    }
    default:
        rc = ring__err(RING_EPROTO, "unknown operation %d for '%s'", r->type, r->name);
    }
    ring__timeline_phase(tl, r->name, phase, 0, ring__now_us(), NULL);
    return rc;
}

/*
 * Runs the responses of one cycle in order, in fused batches. Error responses complete
 * their entries with the error. Returns 0 or a transport error (the engine then fails).
 */
static int execute(struct ring__engine *e, struct ring__response *resp, int n)
{
    int *starts = malloc(((size_t)n + 1) * sizeof(int));
    struct entry **en = malloc(((size_t)n + 1) * sizeof(*en));
    int nb, rc = 0;

    if (starts == NULL || en == NULL) {
        free(starts);
        free(en);
        return ring__err(RING_ENOMEM, "out of memory for %d responses", n);
    }
    for (int i = 0; i < n; i++) {
        en[i] = ring__strmap_get(&e->pending, resp[i].req.name);
        ring__timeline_phase(e->timeline, resp[i].req.name, "QUEUE", 0, ring__now_us(), NULL);
    }
    nb = ring__fusion_plan(resp, n, e->fusion_threshold, starts);
    starts[nb] = n;
    for (int b = 0; b < nb && rc == 0; b++) {
        int i0 = starts[b], cnt = starts[b + 1] - starts[b];
        const struct ring__response *r = &resp[i0];
        struct ring__comm c;
        int member;

        if (r->error != 0) {
            if (en[i0] != NULL)
                complete(e, en[i0], r->error, r->message);
            en[i0] = NULL;
            continue;
        }
        member = pset_view(e, r->req.process_set, &c);
        if (!member)
            continue;
        if (r->req.type == RING__ALLREDUCE)
            rc = run_allreduce_batch(e, &c, r, en + i0, cnt);
        else if (en[i0] != NULL || e->joined)
            rc = run_other(e, &c, r, en[i0]);
        pthread_mutex_lock(&e->mu);
        e->stats.collectives++;
        pthread_mutex_unlock(&e->mu);
        for (int i = i0; rc == 0 && i < i0 + cnt; i++) {
            if (en[i] != NULL)
                complete(e, en[i], 0, NULL);
            en[i] = NULL;
        }
    }
    free(starts);
    free(en);
    return rc;
}

/* ---- negotiation ---- */

static void ctl_set(uint64_t *w, int bit)
{
    w[bit / 64] |= (uint64_t)1 << (bit % 64);
}

static int ctl_get(const uint64_t *w, int bit)
{
    return (int)((w[bit / 64] >> (bit % 64)) & 1u);
}

struct collect {
    struct ring__buf *b;
    const unsigned char *fired; /* per cache bit */
    uint64_t n;
    int uncached;
};

static void collect_request(const char *key, void *value, void *arg)
{
    struct collect *c = arg;
    struct entry *en = value;
    if (en->bit >= 0 && c->fired[en->bit])
        return;
    ring__put_request(c->b, &en->req);
    c->n++;
}

static void count_uncached(const char *key, void *value, void *arg)
{
    struct collect *c = arg;
    struct entry *en = value;
    if (en->bit < 0)
        c->uncached = 1;
}

static void set_ready_bits(const char *key, void *value, void *arg)
{
    struct ring__engine *e = arg;
    struct entry *en = value;
    if (en->bit >= 0)
        ctl_set(e->ctl + 2 + e->jw, en->bit);
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

/* Step 4: every rank's unfired requests to rank 0 and the responses back. */
static int full_round(struct ring__engine *e, const unsigned char *fired,
                      struct ring__response **out, int *nout, int *shutdown, char *msg,
                      size_t msglen)
{
    struct ring__buf b = {0};
    struct collect col = {.b = &b, .fired = fired};
    char **bufs = NULL, *payload = NULL;
    size_t *lens = NULL, plen = 0;
    int size = e->ctx->size, rc;

    *out = NULL;
    *nout = 0;
    ring__put_u64(&b, 0); /* count, patched below */
    ring__strmap_each(&e->pending, collect_request, &col);
    if (b.oom) {
        ring__buf_free(&b);
        return ring__err(RING_ENOMEM, "out of memory serializing requests");
    }
    for (int i = 0; i < 8; i++)
        b.data[i] = (char)(col.n >> (8 * i));
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
            if (rd.bad || n > lens[r]) {
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
        if (rd.bad || n > plen) {
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
static void watch_bits(struct ring__engine *e, const uint64_t *all, const uint64_t *notany,
                       int64_t now)
{
    e->force_full = 0;
    for (int bit = 0; bit < e->cache.capacity; bit++) {
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

/* Moves the queued submissions into the pending table. */
static void take_queue(struct ring__engine *e)
{
    struct entry *en, *next;
    pthread_mutex_lock(&e->mu);
    en = e->qhead;
    e->qhead = NULL;
    e->qtail = &e->qhead;
    if (e->timeline_swapping) {
        ring__timeline_close(e->timeline);
        e->timeline = e->timeline_swap;
        e->timeline_swap = NULL;
        e->timeline_swapping = 0;
    }
    pthread_mutex_unlock(&e->mu);
    for (; en != NULL; en = next) {
        next = en->next;
        en->bit = ring__cache_lookup(&e->cache, &en->req);
        if (ring__strmap_put(&e->pending, en->req.name, en) < 0) {
            complete(e, en, RING_ENOMEM, "out of memory queuing the request");
            continue;
        }
        e->npending++;
        ring__timeline_phase(e->timeline, en->req.name, "NEGOTIATE", 1, en->submit_us, NULL);
    }
}

/* One cycle. Returns 1 when the ranks agreed to shut down, 0 to go on, or an error. */
static int cycle(struct ring__engine *e)
{
    int size = e->ctx->size, rank = e->ctx->rank, jw = e->jw, cw = e->cw, rc;
    int shutdown_local, join_local, stall_shutdown = 0, nresp = 0, nfired = 0;
    uint64_t *w = e->ctl, or_flags, and_flags;
    unsigned char *fired = NULL;
    struct ring__response *resp = NULL, *fresp = NULL;
    struct collect col = {0};
    char msg[384] = "";
    int64_t t0 = ring__now_us();

    take_queue(e);
    pthread_mutex_lock(&e->mu);
    shutdown_local = e->shutdown;
    if (e->join_pending) {
        e->join_pending = 0;
        e->joined = 1;
    }
    join_local = e->joined;
    pthread_mutex_unlock(&e->mu);

    /* Step 2: the control vector. */
    memset(w, 0, (size_t)e->words * sizeof(uint64_t));
    ring__strmap_each(&e->pending, count_uncached, &col);
    or_flags = (col.uncached ? F_UNCACHED : 0) | (ring__stop_local() ? F_STOP : 0) |
               (rank == 0 && e->force_full ? F_FORCE_FULL : 0);
    w[0] = ~or_flags;
    w[1] = shutdown_local ? F_SHUTDOWN : 0;
    for (int r = 0; r < size; r++) {
        if (r != rank || !join_local)
            ctl_set(w + 2, r);
    }
    /* A rank is "ready" for tensors of sets it is not in, and for all once it joined. */
    for (int b = 0; b < e->cache.capacity; b++) {
        if (join_local || (e->cache.entries[b].used && e->absent[b]))
            ctl_set(w + 2 + jw, b);
    }
    if (!join_local)
        ring__strmap_each(&e->pending, set_ready_bits, e);
    /* The complement of what this rank really holds, for the OR. */
    for (int i = 0; i < cw; i++)
        w[2 + jw + cw + i] = ~(uint64_t)0;
    if (!join_local) {
        uint64_t *mine = w + 2 + jw + cw;
        struct entry *list = NULL;
        ring__strmap_each(&e->pending, fail_each, &list);
        for (; list != NULL; list = list->next) {
            if (list->bit >= 0)
                mine[list->bit / 64] &= ~((uint64_t)1 << (list->bit % 64));
        }
    }
    /* Always recursive doubling: the algorithm must not follow tunables a program may change
     * between its own calls, or ranks could disagree on it. */
    rc = e->ctx->size > 1 ? ring__allreduce_rd(&e->world, w, w, (size_t)e->words, RING_INT64,
                                               RING__OP_BAND, 1.0, 1.0)
                          : 0;
    if (rc < 0)
        return rc;
    or_flags = ~w[0];
    and_flags = w[1];
    for (int r = 0; r < size; r++)
        e->joined_ranks[r] = !ctl_get(w + 2, r);
    if (or_flags & F_STOP)
        e->stop_agreed = 1;

    /* Step 3: cached tensors ready everywhere, in bit order. */
    fired = calloc((size_t)(e->cache.capacity > 0 ? e->cache.capacity : 1), 1);
    fresp = calloc((size_t)(e->cache.capacity > 0 ? e->cache.capacity : 1), sizeof(*fresp));
    if (fired == NULL || fresp == NULL) {
        rc = ring__err(RING_ENOMEM, "out of memory in a cycle");
        goto out;
    }
    for (int b = 0; b < e->cache.capacity; b++) {
        /* ready on every rank, and really held by at least one */
        if (!e->cache.entries[b].used || !ctl_get(w + 2 + jw, b) || ctl_get(w + 2 + jw + cw, b))
            continue;
        fired[b] = 1;
        fresp[nfired].req = e->cache.entries[b].req; /* shallow: cacheable has no counts */
        fresp[nfired].req.counts = NULL;
        nfired++;
    }
    if (rank == 0)
        watch_bits(e, w + 2 + jw, w + 2 + jw + cw, t0);

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
        fail_all(e, RING_ESTALL, msg);
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
        ring__timeline_phase(e->timeline, fresp[i].req.name, "NEGOTIATE", 0, ring__now_us(), NULL);
        ring__timeline_phase(e->timeline, fresp[i].req.name, "QUEUE", 1, ring__now_us(), NULL);
        if (rank == 0) {
            struct stall *s = ring__strmap_del(&e->stalls, fresp[i].req.name);
            if (s != NULL) {
                free(s->seen);
                free(s);
            }
        }
    }
    for (int i = 0; i < nresp; i++) {
        ring__timeline_phase(e->timeline, resp[i].req.name, "NEGOTIATE", 0, ring__now_us(), NULL);
        ring__timeline_phase(e->timeline, resp[i].req.name, "QUEUE", 1, ring__now_us(), NULL);
    }
    if ((rc = execute(e, fresp, nfired)) < 0 || (rc = execute(e, resp, nresp)) < 0)
        goto out;
    for (int b = 0; b < e->cache.capacity; b++) {
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
                e->absent[bit] = !pset_view(e, resp[i].req.process_set, &c);
        }
    }
    /* A cache entry may have been replaced: pending entries look their bits up again. */
    if (nresp > 0) {
        struct entry *list = NULL;
        ring__strmap_each(&e->pending, fail_each, &list);
        for (; list != NULL; list = list->next)
            list->bit = ring__cache_lookup(&e->cache, &list->req);
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
                finish_handle(e, e->join_handle, 0, NULL);
                e->join_handle = NULL;
            }
            pthread_mutex_unlock(&e->mu);
            memset(e->joined_ranks, 0, (size_t)size);
            memset(e->prev_joined, 0, (size_t)size);
        }
    }
    ring__timeline_flush(e->timeline);
    rc = (and_flags & F_SHUTDOWN) ? 1 : 0;
out:
    for (int i = 0; i < nresp; i++)
        ring__response_clear(&resp[i]);
    free(resp);
    free(fresp);
    free(fired);
    return rc;
}

/* ---- the thread ---- */

/* Sleeps until there is work, a peer starts a cycle, or the cycle time passes. */
static void wait_for_work(struct ring__engine *e, int64_t last_cycle_us)
{
    int size = e->ctx->size, n = 0, timeout = -1;
    struct pollfd *pfd = calloc((size_t)size + 1, sizeof(*pfd));
    int busy;

    pthread_mutex_lock(&e->mu);
    busy = e->qhead != NULL || e->join_pending || e->timeline_swapping;
    pthread_mutex_unlock(&e->mu);
    if (busy || ring__stop_local() > e->stop_agreed) {
        free(pfd);
        return;
    }
    /* Waiting on other ranks (for tensors, a join or the shutdown): cycle at the cycle time. */
    if (e->npending > 0 || e->joined || e->shutdown) {
        int64_t left = last_cycle_us + (int64_t)e->cycle_ms * 1000 - ring__now_us();
        if (left <= 0) {
            free(pfd);
            return;
        }
        timeout = (int)((left + 999) / 1000);
    }
    if (pfd == NULL) { /* cannot watch the sockets: fall back to cycling */
        usleep(1000);
        return;
    }
    pfd[n++] = (struct pollfd){.fd = e->wake_fd, .events = POLLIN};
    for (int r = 0; r < size; r++) {
        if (r != e->ctx->rank)
            pfd[n++] = (struct pollfd){.fd = ring__tp_fd(e->ctx->tp, r), .events = POLLIN};
    }
    if (poll(pfd, (nfds_t)n, timeout) > 0 && (pfd[0].revents & POLLIN)) {
        uint64_t v;
        if (read(e->wake_fd, &v, sizeof(v)) < 0)
            v = 0; /* EAGAIN: another read took it */
    }
    free(pfd);
}

static void *engine_main(void *arg)
{
    struct ring__engine *e = arg;
    for (;;) {
        int64_t start = ring__now_us();
        int rc = cycle(e);
        if (rc == 1)
            break;
        if (rc < 0) {
            if (rc != RING_ESTALL) {
                char msg[384];
                snprintf(msg, sizeof(msg), "%s: %s", ring_err_name(rc), ring_last_error());
                fail_all(e, rc, msg);
            }
            break;
        }
        wait_for_work(e, start);
    }
    /* Whatever is still queued will never run. */
    pthread_mutex_lock(&e->mu);
    if (e->failed == 0) {
        e->failed = RING_ESHUTDOWN;
        snprintf(e->failed_msg, sizeof(e->failed_msg), "the engine has shut down");
    }
    pthread_mutex_unlock(&e->mu);
    if (e->npending > 0)
        fail_all(e, RING_ESHUTDOWN, "the engine shut down before the operation ran");
    return NULL;
}

static int env_long(const char *name, long dflt, long min, long max, long *out)
{
    return ring__env_int(name, dflt, min, max, out);
}

int ring__engine_start(struct ring__ctx *ctx, struct ring__engine **out)
{
    struct ring__engine *e = calloc(1, sizeof(*e));
    long cycle_ms, fusion, cache, stall_check, stall_shutdown;
    const char *comp = getenv("RING_COMPRESSION"), *tl = getenv("RING_TIMELINE");
    int rc;

    if (e == NULL)
        return RING_ENOMEM;
    e->ctx = ctx;
    e->world = ring__world(ctx);
    e->wake_fd = -1;
    e->qtail = &e->qhead;
    e->compression = -1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    /* 1 ms and 128 MiB are Horovod's defaults (HOROVOD_CYCLE_TIME, HOROVOD_FUSION_THRESHOLD);
     * 1024 cache entries covers the tensor count of common models (ResNet-50 has 161). */
    if ((rc = env_long("RING_CYCLE_TIME_MS", 1, 0, 60000, &cycle_ms)) < 0 ||
        (rc = env_long("RING_FUSION_THRESHOLD", 128L << 20, 0, 1L << 40, &fusion)) < 0 ||
        (rc = env_long("RING_CACHE_CAPACITY", 1024, 0, 1 << 20, &cache)) < 0 ||
        (rc = env_long("RING_STALL_CHECK_SECONDS", 60, 0, 1L << 30, &stall_check)) < 0 ||
        (rc = env_long("RING_STALL_SHUTDOWN_SECONDS", 0, 0, 1L << 30, &stall_shutdown)) < 0)
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
    if (e->ctl == NULL || e->joined_ranks == NULL || e->prev_joined == NULL ||
        e->bit_since == NULL || e->absent == NULL || ring__cache_init(&e->cache, (int)cache) < 0 ||
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
    free(e->fusion);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
    return 0;
}

/* ---- what user threads call ---- */

/* The error for work submitted after the engine stopped (called under mu). A transport
 * failure leaves the world broken for good; a stall or a shutdown keeps its own code. */
static int refuse(struct ring__engine *e)
{
    int code = e->failed == RING_ESTALL || e->failed == RING_ESHUTDOWN ? e->failed : RING_EBROKEN;
    return ring__err(code, "rank %d: %s", e->ctx->rank, e->failed_msg);
}

int ring__engine_submit(struct ring__engine *e, const struct ring__submit *subs, int n,
                        struct ring_handle **handle)
{
    struct ring_handle *h = calloc(1, sizeof(*h));
    struct entry *first = NULL, **tail = &first;
    int64_t now = ring__now_us();
    int rc = 0;

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
    } else {
        for (struct entry *en = first; en != NULL; en = en->next)
            if (ring__strmap_get(&e->inflight, en->req.name) == h)
                ring__strmap_del(&e->inflight, en->req.name);
    }
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
    ring__engine_wake(e);
    *handle = h;
    return 0;
}

int ring_wait(ring_handle_t *h)
{
    struct ring__ctx *ctx = ring__ctx();
    struct ring__engine *e = ctx ? ctx->engine : NULL;
    int status;

    if (h == NULL || e == NULL)
        return ring__err(h == NULL ? RING_EINVAL : RING_ENOTINIT, "ring_wait: %s",
                         h == NULL ? "NULL handle" : "libring is not initialized");
    pthread_mutex_lock(&e->mu);
    while (!h->done)
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
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
    pthread_mutex_lock(&e->mu);
    while (!h->done)
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
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
