/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_exec.c - runs the responses every rank agreed on, in the same order everywhere:
 * allreduces (large batches tensor by tensor over their own memory; small ones, compressed
 * ones and a joined rank's fused in the fusion buffer; device memory as one collective over
 * the tensors' own buffers), and every other collective on its process set, each through
 * the collective ops of its buffers (ops/ops.h: ring or mpi for host memory, nccl for
 * GPU memory).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "ops/ops.h"
#include "transport/transport.h"

int ring__eng_pset_view(struct ring__engine *e, int id, struct ring__comm *c)
{
    const struct ring__pset *ps;
    pthread_mutex_lock(&e->mu);
    ps = ring__psets_get(&e->psets, id);
    if (ps != NULL) {
        c->ctx = e->ctx;
        c->rank = ps->my_rank;
        c->size = ps->size;
        c->members = id == 0 ? NULL : ps->members;
        c->set = id;
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

/* memcpy of a few bytes, inline for the sizes of one element: a packed group's members are
 * often that small, and a call per member cost more than the copy. */
static inline void copy_small(void *dst, const void *src, size_t b)
{
    switch (b) {
    case 0:
        break;
    case 2:
        memcpy(dst, src, 2);
        break;
    case 4:
        memcpy(dst, src, 4);
        break;
    case 8:
        memcpy(dst, src, 8);
        break;
    default:
        memcpy(dst, src, b);
    }
}

/*
 * A packed group's members are usually tiny (a model's biases and norms: one to a few
 * hundred elements), so they are copied with memcpy each and scaled once as a whole: a
 * scaling call per member cost more than the copy.
 */
void ring__eng_gather(const struct entry *en, void *dst, ring_dtype_t dt, double factor)
{
    size_t es = ring_dtype_size(dt);
    char *p = dst;

    if (en->nmem == 0) {
        ring__scale(dst, en->sendbuf, (size_t)en->req.count, dt, factor);
        return;
    }
    for (int i = 0; i < en->nmem; i++) {
        size_t b = (size_t)en->req.counts[i] * es;
        copy_small(p, en->msend[i], b);
        p += b;
    }
    ring__scale(dst, dst, (size_t)en->req.count, dt, factor);
}

void ring__eng_scatter(const struct entry *en, void *src, ring_dtype_t dt, double factor)
{
    size_t es = ring_dtype_size(dt);
    const char *p = src;

    if (en->nmem == 0) {
        ring__scale(en->recvbuf, src, (size_t)en->req.count, dt, factor);
        return;
    }
    ring__scale(src, src, (size_t)en->req.count, dt, factor);
    for (int i = 0; i < en->nmem; i++) {
        size_t b = (size_t)en->req.counts[i] * es;
        copy_small(en->mrecv[i], p, b);
        p += b;
    }
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
 * A fused batch as one collective over the tensors' own buffers (see ring__bufv), through
 * the ops' allreduce_bufv. Pieces of a joined rank (en NULL) are NULL: only device
 * ops are given those (ops/ops.h); the host path fuses them through the fusion buffer.
 */
static int run_zero_copy(struct ring__engine *e, const struct ring__comm *c,
                         const struct ring__ops *be, const struct ring__response *resp,
                         struct entry **en, int n, ring_op_t op, double post)
{
    size_t es = ring_dtype_size((ring_dtype_t)resp[0].req.dtype), total = 0;
    char **recv = malloc((size_t)n * sizeof(*recv));
    const char **send = malloc((size_t)n * sizeof(*send));
    size_t *start = malloc(((size_t)n + 1) * sizeof(*start));
    int rc;

    if (recv == NULL || send == NULL || start == NULL) {
        free(recv);
        free(send);
        free(start);
        return ring__err(RING_ENOMEM, "out of memory for a batch of %d tensors", n);
    }
    for (int i = 0; i < n; i++) {
        recv[i] = en[i] != NULL ? en[i]->recvbuf : NULL;
        send[i] = en[i] != NULL ? en[i]->sendbuf : NULL;
        start[i] = total * es;
        total += resp[i].req.count;
        TL_PHASE(e, resp[i].req.name, "ALLREDUCE", 1, NULL);
    }
    start[n] = total * es;
    {
        struct ring__bufv bv = {n, recv, send, start};
        rc = be->allreduce_bufv(c, &bv, total, (ring_dtype_t)resp[0].req.dtype, op,
                                resp[0].req.prescale, post);
    }
    for (int i = 0; i < n; i++)
        TL_PHASE(e, resp[i].req.name, "ALLREDUCE", 0, NULL);
    free(recv);
    free(send);
    free(start);
    return rc;
}

/*
 * An Adasum batch: the tensors go through the fusion buffer (a joined rank's as zeros,
 * which Adasum's combination leaves out), each tensor, and each member of a packed group,
 * a segment of its own with its own coefficients, as one collective over libring's mesh
 * whatever RING_CPU_OPERATIONS says (MPI has no Adasum).
 */
static int run_adasum_batch(struct ring__engine *e, const struct ring__comm *c,
                            const struct ring__response *resp, struct entry **en, int n)
{
    const struct ring__request *r0 = &resp[0].req;
    ring_dtype_t dt = (ring_dtype_t)r0->dtype;
    size_t es = ring_dtype_size(dt), total = 0, off = 0, *segs;
    int nseg = 0, k = 0, rc;

    for (int i = 0; i < n; i++) {
        total += resp[i].req.count;
        nseg += ring__request_packed(&resp[i].req) ? (int)resp[i].req.ncounts : 1;
    }
    if ((segs = malloc((size_t)nseg * sizeof(*segs))) == NULL)
        return ring__err(RING_ENOMEM, "out of memory for an Adasum batch of %d tensors", n);
    if ((rc = grow_fusion(e, total * es)) < 0) {
        free(segs);
        return rc;
    }
    for (int i = 0; i < n; i++) {
        const struct ring__request *ri = &resp[i].req;
        if (en[i] != NULL)
            ring__eng_gather(en[i], e->fusion + off * es, dt, 1.0);
        else
            ring__neutral(e->fusion + off * es, ri->count, dt, RING_ADASUM);
        off += ri->count;
        if (ring__request_packed(ri)) {
            for (uint32_t m = 0; m < ri->ncounts; m++)
                segs[k++] = (size_t)ri->counts[m];
        } else {
            segs[k++] = (size_t)ri->count;
        }
        TL_PHASE(e, ri->name, "ADASUM", 1, NULL);
    }
    rc = ring__allreduce_adasum(c, e->fusion, total, dt, segs, nseg, r0->prescale, r0->postscale);
    off = 0;
    for (int i = 0; i < n; i++) {
        TL_PHASE(e, resp[i].req.name, "ADASUM", 0, NULL);
        if (rc == 0 && en[i] != NULL)
            ring__eng_scatter(en[i], e->fusion + off * es, dt, 1.0);
        off += resp[i].req.count;
    }
    free(segs);
    return rc;
}

/*
 * Runs a batch of compatible allreduces resp[0..n-1] through the fusion buffer (or in place
 * when alone and uncompressed). Entries are NULL on a rank that has joined.
 */
static int run_allreduce_batch(struct ring__engine *e, const struct ring__comm *c,
                               const struct ring__response *resp, struct entry **en, int n)
{
    const struct ring__request *r0 = &resp[0].req;
    const struct ring__ops *be = ring__ops_for(e->ctx, r0->device);
    ring_dtype_t dt = (ring_dtype_t)r0->dtype, wire = dt;
    ring_op_t op = (ring_op_t)r0->op;
    double post = r0->postscale;
    size_t es = ring_dtype_size(dt), total = 0, off = 0;
    int rc, compress = e->compression >= 0 && !be->device_memory && dt == RING_FLOAT32 &&
                       (op == RING_SUM || op == RING_AVERAGE);
    char args[128];

    if (op == RING_ADASUM)
        return run_adasum_batch(e, c, resp, en, n);
    if (op == RING_AVERAGE) {
        op = RING_SUM;
        post /= active_members(e, c);
    }
    if (be->device_memory) /* the ops fuse on the device (ops/ops.h) */
        return run_zero_copy(e, c, be, resp, en, n, op, post);
    for (int i = 0; i < n; i++)
        total += resp[i].req.count;
    if (n == 1 && !compress && en[0] != NULL && en[0]->nmem == 0) {
        TL_PHASE(e, r0->name, "ALLREDUCE", 1, NULL);
        rc =
            be->allreduce(c, en[0]->sendbuf, en[0]->recvbuf, r0->count, dt, op, r0->prescale, post);
        TL_PHASE(e, r0->name, "ALLREDUCE", 0, NULL);
        return rc;
    }
    if (!compress && be->allreduce_bufv != NULL && total * es > c->ctx->small_bytes &&
        c->ctx->algo != RING__ALGO_RD && c->size > 1) {
        /*
         * Large batches need no fusion buffer, and gain nothing from being one collective:
         * each tensor runs on its own memory, one after the other. One ring over all of
         * them as one logical buffer (run_zero_copy) cut its segments at every tensor's
         * edge into pieces too small for CMA, which went through the shm rings' two copies,
         * and swept 25 MB between its reduce-scatter and its allgather, where one tensor's
         * stay in cache: a ResNet-50-shaped step took 1.34x (np 2) and 1.20x (np 4) one
         * allreduce of its bytes; tensor by tensor, 0.94x and 0.95x (medians of 5 and 3).
         * The decision depends on the batch alone, so every rank makes the same calls; a
         * rank that has joined contributes neutral elements to each.
         */
        rc = 0;
        for (int i = 0; i < n && rc == 0; i++) {
            const struct ring__request *ri = &resp[i].req;
            /* A packed group member by member, as its members were tensors of their own:
             * the response's counts, which every rank holds, joined or not. */
            int packed = ring__request_packed(ri);
            TL_PHASE(e, ri->name, "ALLREDUCE", 1, NULL);
            for (uint32_t k = 0; k < (packed ? ri->ncounts : 1) && rc == 0; k++) {
                size_t cnt = packed ? (size_t)ri->counts[k] : (size_t)ri->count;
                if (en[i] != NULL) {
                    rc = be->allreduce(c, packed ? en[i]->msend[k] : en[i]->sendbuf,
                                       packed ? en[i]->mrecv[k] : en[i]->recvbuf, cnt, dt, op,
                                       ri->prescale, post);
                } else if ((rc = grow_fusion(e, cnt * es)) == 0) {
                    ring__neutral(e->fusion, cnt, dt, (ring_op_t)r0->op);
                    rc = be->allreduce(c, e->fusion, e->fusion, cnt, dt, op, ri->prescale, post);
                }
            }
            TL_PHASE(e, ri->name, "ALLREDUCE", 0, NULL);
        }
        return rc;
    }
    if (compress)
        wire = (ring_dtype_t)e->compression;
    if ((rc = grow_fusion(e, total * es + total * ring_dtype_size(wire))) < 0)
        return rc;
    for (int i = 0; i < n; i++) {
        if (e->timeline != NULL)
            tl_args(&resp[i].req, args, sizeof(args));
        TL_PHASE(e, resp[i].req.name, "MEMCPY_IN_FUSION_BUFFER", 1, args);
        if (en[i] != NULL)
            ring__eng_gather(en[i], e->fusion + off * es, dt, 1.0);
        else
            ring__neutral(e->fusion + off * es, resp[i].req.count, dt, (ring_op_t)r0->op);
        off += resp[i].req.count;
        TL_PHASE(e, resp[i].req.name, "MEMCPY_IN_FUSION_BUFFER", 0, NULL);
    }
    for (int i = 0; i < n; i++)
        TL_PHASE(e, resp[i].req.name, "ALLREDUCE", 1, NULL);
    if (compress) {
        /* 16 bits on the wire; each step still adds in float32 (reduce.c). */
        float *f = (float *)e->fusion;
        uint16_t *h = (uint16_t *)(e->fusion + total * es);
        for (size_t i = 0; i < total; i++)
            h[i] = wire == RING_FLOAT16 ? ring__float_to_half(f[i] * (float)r0->prescale)
                                        : ring__float_to_bf16(f[i] * (float)r0->prescale);
        rc = be->allreduce(c, h, h, total, wire, op, 1.0, post);
        for (size_t i = 0; rc == 0 && i < total; i++)
            f[i] = wire == RING_FLOAT16 ? ring__half_to_float(h[i]) : ring__bf16_to_float(h[i]);
    } else {
        rc = be->allreduce(c, e->fusion, e->fusion, total, dt, op, r0->prescale, post);
    }
    for (int i = 0; i < n; i++)
        TL_PHASE(e, resp[i].req.name, "ALLREDUCE", 0, NULL);
    off = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        TL_PHASE(e, resp[i].req.name, "MEMCPY_OUT", 1, NULL);
        if (en[i] != NULL)
            ring__eng_scatter(en[i], e->fusion + off * es, dt, 1.0);
        off += resp[i].req.count;
        TL_PHASE(e, resp[i].req.name, "MEMCPY_OUT", 0, NULL);
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
    const struct ring__ops *be = ring__ops_for(e->ctx, r->device);
    ring_dtype_t dt = (ring_dtype_t)r->dtype;
    const char *phase = phase_name(r->type);
    int rc = 0;

    TL_PHASE(e, r->name, phase, 1, NULL);
    switch (r->type) {
    case RING__BROADCAST: /* joined (en NULL): pass the data along, keep nothing */
        rc = be->broadcast(c, en != NULL ? en->recvbuf : NULL, r->count, dt, r->root);
        break;
    case RING__BARRIER:
        rc = be->barrier(c);
        break;
    case RING__ALLGATHER:
        rc = be->allgatherv(c, en->sendbuf == RING_IN_PLACE ? NULL : en->sendbuf, r->count,
                            en->recvbuf, NULL, dt);
        break;
    case RING__ALLGATHERV: {
        size_t *counts = to_sizes(en->req.counts, en->req.ncounts);
        rc = counts ? be->allgatherv(c, en->sendbuf == RING_IN_PLACE ? NULL : en->sendbuf, r->count,
                                     en->recvbuf, counts, dt)
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
        rc = be->reducescatter(c, en->sendbuf, en->recvbuf, r->count, dt, op, r->prescale, post);
        break;
    }
    case RING__ALLTOALL:
        rc = be->alltoallv(c, en->sendbuf, NULL, en->recvbuf, NULL, r->count, dt);
        break;
    case RING__ALLTOALLV: {
        size_t *counts = to_sizes(en->req.counts, en->req.ncounts);
        rc = counts ? be->alltoallv(c, en->sendbuf, counts, en->recvbuf, counts + c->size, 0, dt)
                    : RING_ENOMEM;
        free(counts);
        break;
    }
    default:
        rc = ring__err(RING_EPROTO, "unknown operation %d for '%s'", r->type, r->name);
    }
    TL_PHASE(e, r->name, phase, 0, NULL);
    return rc;
}

/*
 * Whether rank 0's response r may run here, with this rank's own request for it (local, or
 * NULL on a rank that joined): the fields that size buffers or name peers must be this
 * rank's. The coordinator made every rank's agree (coordinator.c), so only a corrupt rank 0
 * sends one that does not, and then it must not steer this rank's copies.
 */
static int response_fits(const struct ring__request *r, const struct ring__request *local,
                         const struct ring__comm *c)
{
    if (r->dtype < 0 || r->dtype >= RING_DTYPE_COUNT)
        return 0;
    if (r->type == RING__BROADCAST && (r->root < 0 || r->root >= c->size))
        return 0;
    if (local == NULL)
        return 1;
    return r->type == local->type && r->dtype == local->dtype && r->op == local->op &&
           r->root == local->root && r->process_set == local->process_set &&
           r->group_size == local->group_size && (r->device >= 0) == (local->device >= 0) &&
           (r->type == RING__ALLGATHERV || r->type == RING__ALLTOALLV || r->count == local->count);
}

/*
 * Runs the responses of one cycle in order, in fused batches. Error responses complete
 * their entries with the error. Returns 0 or a transport error (the engine then fails), or
 * RING_EPROTO for a response that does not fit this rank's request (the mesh then breaks).
 */
int ring__eng_execute(struct ring__engine *e, struct ring__response *resp, int n,
                      struct entry *const *known)
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
        en[i] = known != NULL ? known[i] : ring__eng_pending_get(e, resp[i].req.name);
        TL_PHASE(e, resp[i].req.name, "QUEUE", 0, NULL);
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
                ring__eng_complete(e, en[i0], r->error, r->message);
            en[i0] = NULL;
            continue;
        }
        member = ring__eng_pset_view(e, r->req.process_set, &c);
        if (!member)
            continue;
        for (int i = i0; known == NULL && i < i0 + cnt && rc == 0; i++) {
            if (!response_fits(&resp[i].req, en[i] != NULL ? &en[i]->req : NULL, &c)) {
                ring__err(RING_EPROTO,
                          "rank %d: rank 0 answered %s '%s' with parameters this rank did not "
                          "submit (a broken or hostile coordinator)",
                          e->ctx->rank, ring__optype_name(resp[i].req.type), resp[i].req.name);
                rc =
                    e->ctx->mesh != NULL ? ring__mesh_fail(e->ctx->mesh, RING_EPROTO) : RING_EPROTO;
            }
        }
        if (rc < 0)
            break;
        if (r->req.type == RING__ALLREDUCE)
            rc = run_allreduce_batch(e, &c, r, en + i0, cnt);
        else if (en[i0] != NULL || e->joined)
            rc = run_other(e, &c, r, en[i0]);
        pthread_mutex_lock(&e->mu);
        e->stats.collectives++;
        pthread_mutex_unlock(&e->mu);
        if (rc == 0) {
            ring__eng_complete_batch(e, en + i0, cnt);
            memset(en + i0, 0, (size_t)cnt * sizeof(*en));
        }
        ring__eng_flush_waiters(e);
    }
    ring__eng_flush_waiters(e); /* error responses */
    free(starts);
    free(en);
    return rc;
}
