/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.c - the public collectives: argument checks at the edge, then a request to the
 * engine. The blocking calls are a submission under a generated name and a wait.
 */
#include <math.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "ops/ops.h"
#include "ring_internal.h"

/*
 * A blocking call is named after its kind alone ("allreduce.noname"): a rank has at most one
 * in flight per kind (a second one from another thread is refused as a duplicate name), so
 * the names match across ranks whatever the threads' interleaving, and a program that
 * repeats the same call hits the response cache (one bit-vector allreduce to agree) instead
 * of negotiating through the coordinator each time. A call whose arguments changed misses
 * the cache and is negotiated, and validated, in full.
 */

/*
 * The fingerprint of the shape ring_shape_next declared on this thread (declared), which
 * the next call of this file takes (taken: every entry calls engine() first), so that a
 * call that fails before its request is built cannot hand it to a later one; base_request
 * puts it in the request. A program that never declares a shape never touches them
 * (shapes_declared): a thread-local in a shared library costs a __tls_get_addr call, which
 * the blocking 4 KiB allreduce (a few microseconds) would pay twice.
 */
static _Thread_local uint64_t declared, taken;
static atomic_int shapes_declared;

/* The engine, or NULL with *rc set. */
static struct ring__engine *engine(int *rc)
{
    struct ring__ctx *c = ring__ctx_usable(rc);
    if (atomic_load_explicit(&shapes_declared, memory_order_relaxed)) {
        taken = declared;
        declared = 0;
    }
    return c != NULL ? c->engine : NULL;
}

static int check_name(const char *what, const char *name)
{
    size_t n;
    if (name == NULL || (n = strlen(name)) == 0 || n > RING__NAME_MAX)
        return ring__err(RING_EINVAL, "%s: a name of 1..%d characters is required", what,
                         RING__NAME_MAX);
    for (const char *p = name; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return ring__err(RING_EINVAL, "%s: name '%s' has a control character", what, name);
    }
    return 0;
}

static int check_dtype(const char *what, ring_dtype_t dtype)
{
    if ((unsigned)dtype >= RING_DTYPE_COUNT)
        return ring__err(RING_EINVAL, "%s: invalid dtype %d", what, (int)dtype);
    return 0;
}

/*
 * Refuses counts whose buffer no process could hold: n elements of dtype, times mult (the
 * set size for allgather and alltoall), must fit in PTRDIFF_MAX bytes, the largest object C
 * allows. Checked once here, so that nothing below multiplies counts into a wrapped size.
 */
static int check_bytes(const char *what, const char *name, size_t n, size_t mult,
                       ring_dtype_t dtype)
{
    size_t es = ring_dtype_size(dtype), bytes;
    if (__builtin_mul_overflow(n, mult, &bytes) || __builtin_mul_overflow(bytes, es, &bytes) ||
        bytes > (size_t)PTRDIFF_MAX)
        return ring__err(RING_EINVAL,
                         "%s '%s': %zu x %zu elements of %s (%zu bytes each) exceed the largest "
                         "possible buffer (%td bytes); the count is wrong",
                         what, name, n, mult, ring_dtype_name(dtype), es, PTRDIFF_MAX);
    return 0;
}

/* The sum of n counts, or RING_EINVAL when it (as bytes of dtype) overflows. */
static int check_counts(const char *what, const char *name, const size_t *counts, int n,
                        ring_dtype_t dtype)
{
    size_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (__builtin_add_overflow(sum, counts[i], &sum))
            return ring__err(RING_EINVAL,
                             "%s '%s': the counts add up past SIZE_MAX at index %d; "
                             "the counts are wrong",
                             what, name, i);
    }
    return check_bytes(what, name, sum, 1, dtype);
}

/* Writes i in decimal at p, with its NUL (snprintf was a fifth of a grouped submission).
 * Returns the number of digits. */
static size_t member_index(char *p, unsigned i)
{
    char d[12];
    size_t n = 0, len;
    do
        d[n++] = (char)('0' + i % 10);
    while ((i /= 10) > 0);
    len = n;
    while (n > 0)
        *p++ = d[--n];
    *p = '\0';
    return len;
}

/* Fills the fields every request has and checks the process set; sets *set_rank/size. */
static int base_request(struct ring__engine *e, struct ring__request *r, int type, const char *name,
                        ring_dtype_t dtype, ring_process_set_t ps, int *set_rank, int *set_size)
{
    const char *what = ring__optype_name(type);
    int rc;

    /* Field by field: zeroing the whole request (its name buffer is 256 bytes) and then
     * copying the name was a tenth of a small tensor's submission. */
    r->name[0] = '\0';
    r->op = r->root = 0;
    r->shape = 0;
    r->count = 0;
    r->counts = NULL;
    r->ncounts = 0;
    if ((rc = check_name(what, name)) < 0 || (rc = check_dtype(what, dtype)) < 0)
        return rc;
    if (ring__engine_pset_info(e, ps, set_rank, set_size) < 0)
        return ring__err(RING_EINVAL, "%s '%s': process set %d does not exist", what, name, ps);
    if (*set_rank < 0)
        return ring__err(RING_EINVAL, "%s '%s': this rank is not a member of process set %d", what,
                         name, ps);
    /* Names are per process set, as in Horovod: two sets may both reduce "grad/w1" at once.
     * The set's id qualifies the name of the request, and so its messages. */
    if (ps != RING_GLOBAL &&
        (size_t)snprintf(r->name, sizeof(r->name), "set%d:%s", ps, name) >= sizeof(r->name))
        return ring__err(RING_EINVAL, "%s '%s': name too long", what, name);
    if (ps == RING_GLOBAL) /* check_name bounded its length */
        strcpy(r->name, name);
    r->type = type;
    r->dtype = (int)dtype;
    r->process_set = ps;
    r->device = -1; /* host memory until located() says otherwise */
    r->prescale = r->postscale = 1.0;
    r->group_size = 1;
    if (atomic_load_explicit(&shapes_declared, memory_order_relaxed)) {
        r->shape = taken;
        taken = 0;
    }
    return 0;
}

/*
 * Sets r->device from where the buffers a and b live (host memory, or a GPU: ops/ops.h), so
 * that the engine sends the request to the right ops and the coordinator can tell ranks
 * that disagree. Returns 0 or RING_EINVAL.
 */
static int located(struct ring__request *r, const char *name, const void *a, const void *b)
{
    int rc = ring__buffer_device(ring__ctx(), ring__optype_name(r->type), name, a, b, &r->device);
    int scaled = r->prescale != 1.0 || r->postscale != 1.0 || r->op == RING_AVERAGE;
    int integer = !ring__dtype_is_float((ring_dtype_t)r->dtype);
    int integral = integer && r->op == RING_SUM && r->prescale == (double)(int64_t)r->prescale &&
                   r->postscale == (double)(int64_t)r->postscale;
    int reduces = r->type == RING__ALLREDUCE || r->type == RING__REDUCESCATTER;

    if (rc < 0 || r->device < 0 || !reduces)
        return rc;
    /* NCCL has neither Adasum nor 16-bit integers, and its booleans would add up past 1. */
    if (r->op == RING_ADASUM || r->dtype == RING_INT16 || r->dtype == RING_UINT16 ||
        r->dtype == RING_BOOL)
        return ring__err(RING_ENOTSUP, "%s '%s': %s of %s is not supported on a GPU",
                         ring__optype_name(r->type), name, ring_op_name((ring_op_t)r->op),
                         ring_dtype_name((ring_dtype_t)r->dtype));
    if (!scaled)
        return rc;
    /* NCCL scales through a pre-multiplied SUM of the tensor's own type (ops_nccl.c). */
    if (r->op == RING_PRODUCT || (integer && !integral))
        return ring__err(RING_ENOTSUP,
                         "%s '%s': on a GPU, scale factors and AVERAGE take SUM of a "
                         "floating-point tensor (or integral factors for integers)",
                         ring__optype_name(r->type), name);
    return 0;
}

/* Checks a reduction's op and scale factors and puts them in r (after base_request). */
static int reduce_args(struct ring__request *r, const char *name, ring_dtype_t dtype, ring_op_t op,
                       double prescale, double postscale)
{
    if (!ring__op_valid(dtype, op, prescale, postscale))
        return ring__err(RING_EINVAL,
                         "%s '%s': invalid op %s or scale factors %g/%g for %s (MIN and MAX "
                         "take no scaling, bool neither scaling nor AVERAGE, ADASUM float "
                         "dtypes only; factors must be finite)",
                         ring__optype_name(r->type), name, ring_op_name(op), prescale, postscale,
                         ring_dtype_name(dtype));
    if (op == RING_ADASUM && r->type != RING__ALLREDUCE)
        return ring__err(RING_EINVAL, "%s '%s': ADASUM is an allreduce only",
                         ring__optype_name(r->type), name);
    r->op = (int)op;
    r->prescale = prescale;
    r->postscale = postscale;
    return 0;
}

static int submit1(struct ring__engine *e, struct ring__request *r, const void *sendbuf,
                   void *recvbuf, ring_handle_t **handle)
{
    struct ring__submit s = {*r, sendbuf, recvbuf};
    return ring__engine_submit(e, &s, 1, handle);
}

/* Checks an allreduce's arguments and fills in its submission. */
static int allreduce_sub(struct ring__engine *e, const char *name, const void *sendbuf,
                         void *recvbuf, size_t count, ring_dtype_t dtype, ring_op_t op,
                         double prescale, double postscale, ring_process_set_t ps,
                         struct ring__submit *sub)
{
    struct ring__request *r = &sub->req;
    int rc, sr, ss;

    if ((rc = base_request(e, r, RING__ALLREDUCE, name, dtype, ps, &sr, &ss)) < 0 ||
        (rc = reduce_args(r, name, dtype, op, prescale, postscale)) < 0)
        return rc;
    if ((rc = check_bytes("allreduce", name, count, 1, dtype)) < 0)
        return rc;
    if (sendbuf == RING_IN_PLACE)
        sendbuf = recvbuf;
    if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
        return ring__err(RING_EINVAL, "allreduce '%s': NULL buffer with count %zu", name, count);
    if ((rc = located(r, name, sendbuf, recvbuf)) < 0)
        return rc;
    r->count = count;
    sub->sendbuf = sendbuf;
    sub->recvbuf = recvbuf;
    return 0;
}

int ring_allreduce_async(const char *name, const void *sendbuf, void *recvbuf, size_t count,
                         ring_dtype_t dtype, ring_op_t op, double prescale, double postscale,
                         ring_process_set_t ps, ring_handle_t **handle)
{
    struct ring__submit sub;
    int rc;
    struct ring__engine *e = engine(&rc);

    if (e == NULL)
        return rc;
    if ((rc = allreduce_sub(e, name, sendbuf, recvbuf, count, dtype, op, prescale, postscale, ps,
                            &sub)) < 0)
        return rc;
    return ring__engine_submit(e, &sub, 1, handle);
}

int ring_grouped_allreduce_async(const char *name, int n, const void *const *sendbufs,
                                 void *const *recvbufs, const size_t *counts, ring_dtype_t dtype,
                                 ring_op_t op, ring_process_set_t ps, ring_handle_t **handle)
{
    struct ring__submit *subs;
    struct ring__request first;
    size_t plen;
    int rc, sr, ss;
    struct ring__engine *e = engine(&rc);

    if (e == NULL)
        return rc;
    if (n < 1 || n > 65536 || sendbufs == NULL || recvbufs == NULL || counts == NULL)
        return ring__err(RING_EINVAL, "grouped allreduce: 1..65536 tensors with buffers and "
                                      "counts are required");
    if ((rc = check_name("grouped allreduce", name)) < 0)
        return rc;
    if (strlen(name) + 7 > RING__NAME_MAX)
        return ring__err(RING_EINVAL, "grouped allreduce '%s': name too long", name);
    if ((rc = check_counts("grouped allreduce", name, counts, n, dtype)) < 0)
        return rc;
    /* What the members share is checked once, on member 0; each then differs from it only
     * in its name (the group's, which check_name passed, and "/<i>"), count and buffers. */
    {
        char member[RING__NAME_MAX + 1];
        snprintf(member, sizeof(member), "%s/0", name);
        if ((rc = base_request(e, &first, RING__ALLREDUCE, member, dtype, ps, &sr, &ss)) < 0 ||
            (rc = reduce_args(&first, member, dtype, op, 1.0, 1.0)) < 0)
            return rc;
        first.group_size = n;
        plen = strlen(first.name) - 1; /* the qualified name up to the '/' */
        /* The last member's index is the longest (a process set's prefix counts too). */
        if (plen + member_index(member, (unsigned)(n - 1)) > RING__NAME_MAX)
            return ring__err(RING_EINVAL, "grouped allreduce '%s': name too long", name);
    }
    /*
     * Host memory goes whole, as one request (ring__engine_submit_group): one name in
     * flight, one cache bit, one buffer reduced, one completion, instead of one of each per
     * member. A group with a GPU buffer goes member by member, each located on its own;
     * so does a group of one, which is the same as an allreduce of its member.
     */
    if (n > 1) {
        /* Without a GPU every buffer is host memory: no member needs locating (it cost a
         * third of a group's submission). */
        int host = 1, gpus = ring__gpus_visible();
        for (int i = 0; i < n && host; i++) {
            const void *sb = sendbufs[i] == RING_IN_PLACE ? recvbufs[i] : sendbufs[i];
            if (counts[i] > 0 && (sb == NULL || recvbufs[i] == NULL)) {
                member_index(first.name + plen, (unsigned)i);
                return ring__err(RING_EINVAL, "grouped allreduce '%s': NULL buffer", first.name);
            }
            if (!gpus)
                continue;
            member_index(first.name + plen, (unsigned)i); /* for located's messages */
            if ((rc = located(&first, first.name, sb, recvbufs[i])) < 0)
                return rc;
            host = first.device < 0;
        }
        if (host) {
            member_index(first.name + plen, 0);
            first.device = -1;
            return ring__engine_submit_group(e, &first, n, sendbufs, recvbufs, counts, handle);
        }
        member_index(first.name + plen, 0);
    }
    subs = malloc((size_t)n * sizeof(*subs));
    if (subs == NULL)
        return ring__err(RING_ENOMEM, "grouped allreduce: out of memory");
    for (int i = 0; i < n && rc == 0; i++) {
        struct ring__request *r = &subs[i].req;
        const void *sb = sendbufs[i] == RING_IN_PLACE ? recvbufs[i] : sendbufs[i];
        ring__request_assign(r, &first);
        member_index(r->name + plen, (unsigned)i); /* fits: checked for the longest above */
        if (counts[i] > 0 && (sb == NULL || recvbufs[i] == NULL)) {
            rc = ring__err(RING_EINVAL, "grouped allreduce '%s': NULL buffer", r->name);
            break;
        }
        if ((rc = located(r, r->name, sb, recvbufs[i])) < 0)
            break;
        r->count = counts[i];
        subs[i].sendbuf = sb;
        subs[i].recvbuf = recvbufs[i];
    }
    if (rc == 0)
        rc = ring__engine_submit(e, subs, n, handle);
    free(subs);
    return rc;
}

int ring_allgatherv_async(const char *name, const void *sendbuf, size_t sendcount, void *recvbuf,
                          const size_t *recvcounts, ring_dtype_t dtype, ring_process_set_t ps,
                          ring_handle_t **handle)
{
    struct ring__request r;
    int rc, sr, ss;
    struct ring__engine *e = engine(&rc);

    if (e == NULL)
        return rc;
    if ((rc = base_request(e, &r, RING__ALLGATHERV, name, dtype, ps, &sr, &ss)) < 0)
        return rc;
    if (recvcounts == NULL || recvbuf == NULL || (sendbuf == NULL && sendcount > 0))
        return ring__err(RING_EINVAL, "allgatherv '%s': NULL buffer or recvcounts", name);
    if ((rc = check_counts("allgatherv", name, recvcounts, ss, dtype)) < 0)
        return rc;
    if (recvcounts[sr] != sendcount)
        return ring__err(RING_EINVAL,
                         "allgatherv '%s': sendcount %zu differs from "
                         "recvcounts[%d] = %zu",
                         name, sendcount, sr, recvcounts[sr]);
    if ((rc = located(&r, name, sendbuf, recvbuf)) < 0)
        return rc;
    r.count = sendcount;
    r.ncounts = (uint32_t)ss;
    r.counts = malloc((size_t)ss * sizeof(uint64_t));
    if (r.counts == NULL)
        return ring__err(RING_ENOMEM, "allgatherv: out of memory");
    for (int i = 0; i < ss; i++)
        r.counts[i] = recvcounts[i];
    /* RING_IN_PLACE travels as is: the engine then leaves this rank's block where it is. */
    rc = submit1(e, &r, sendbuf, recvbuf, handle);
    ring__request_clear(&r);
    return rc;
}

int ring_allgather_async(const char *name, const void *sendbuf, size_t sendcount, void *recvbuf,
                         ring_dtype_t dtype, ring_process_set_t ps, ring_handle_t **handle)
{
    struct ring__request r;
    int rc, sr, ss;
    struct ring__engine *e = engine(&rc);

    if (e == NULL)
        return rc;
    if ((rc = base_request(e, &r, RING__ALLGATHER, name, dtype, ps, &sr, &ss)) < 0)
        return rc;
    if ((rc = check_bytes("allgather", name, sendcount, (size_t)ss, dtype)) < 0)
        return rc;
    if (sendcount > 0 && (sendbuf == NULL || recvbuf == NULL))
        return ring__err(RING_EINVAL, "allgather '%s': NULL buffer with count %zu", name,
                         sendcount);
    if ((rc = located(&r, name, sendbuf, recvbuf)) < 0)
        return rc;
    r.count = sendcount;
    return submit1(e, &r, sendbuf, recvbuf, handle);
}

int ring_broadcast_async(const char *name, void *buf, size_t count, ring_dtype_t dtype, int root,
                         ring_process_set_t ps, ring_handle_t **handle)
{
    struct ring__request r;
    int rc, sr, ss;
    struct ring__engine *e = engine(&rc);

    if (e == NULL)
        return rc;
    if ((rc = base_request(e, &r, RING__BROADCAST, name, dtype, ps, &sr, &ss)) < 0)
        return rc;
    if (root < 0 || root >= ss)
        return ring__err(RING_EINVAL, "broadcast '%s': root %d is not a rank of a set of %d", name,
                         root, ss);
    if ((rc = check_bytes("broadcast", name, count, 1, dtype)) < 0)
        return rc;
    if (count > 0 && buf == NULL)
        return ring__err(RING_EINVAL, "broadcast '%s': NULL buffer with count %zu", name, count);
    if ((rc = located(&r, name, buf, buf)) < 0)
        return rc;
    r.count = count;
    r.root = root;
    return submit1(e, &r, buf, buf, handle);
}

int ring_reducescatter_async(const char *name, const void *sendbuf, void *recvbuf, size_t count,
                             ring_dtype_t dtype, ring_op_t op, double prescale, double postscale,
                             ring_process_set_t ps, ring_handle_t **handle)
{
    struct ring__request r;
    int rc, sr, ss;
    struct ring__engine *e = engine(&rc);

    if (e == NULL)
        return rc;
    if ((rc = base_request(e, &r, RING__REDUCESCATTER, name, dtype, ps, &sr, &ss)) < 0 ||
        (rc = reduce_args(&r, name, dtype, op, prescale, postscale)) < 0)
        return rc;
    if ((rc = check_bytes("reducescatter", name, count, 1, dtype)) < 0)
        return rc;
    /* In place, recvbuf holds all count elements and gets this rank's block at its start
     * (ring.h); the data plane takes sendbuf == recvbuf for that. */
    if (sendbuf == RING_IN_PLACE)
        sendbuf = recvbuf;
    if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
        return ring__err(RING_EINVAL, "reducescatter '%s': NULL buffer with count %zu", name,
                         count);
    if ((rc = located(&r, name, sendbuf, recvbuf)) < 0)
        return rc;
    r.count = count;
    return submit1(e, &r, sendbuf, recvbuf, handle);
}

static int alltoall_common(const char *name, const void *sendbuf, const size_t *sendcounts,
                           void *recvbuf, const size_t *recvcounts, size_t count,
                           ring_dtype_t dtype, ring_process_set_t ps, ring_handle_t **handle)
{
    struct ring__request r;
    int v = sendcounts != NULL, rc, sr, ss;
    struct ring__engine *e = engine(&rc);

    if (e == NULL)
        return rc;
    if ((rc = base_request(e, &r, v ? RING__ALLTOALLV : RING__ALLTOALL, name, dtype, ps, &sr,
                           &ss)) < 0)
        return rc;
    if (sendbuf == RING_IN_PLACE)
        return ring__err(RING_EINVAL, "alltoall '%s' does not take RING_IN_PLACE", name);
    if (v && ((rc = check_counts("alltoallv", name, sendcounts, ss, dtype)) < 0 ||
              (rc = check_counts("alltoallv", name, recvcounts, ss, dtype)) < 0))
        return rc;
    if (!v && (rc = check_bytes("alltoall", name, count, (size_t)ss, dtype)) < 0)
        return rc;
    if ((v || count > 0) && (sendbuf == NULL || recvbuf == NULL))
        return ring__err(RING_EINVAL, "alltoall '%s': NULL buffer", name);
    if ((rc = located(&r, name, sendbuf, recvbuf)) < 0)
        return rc;
    r.count = count;
    if (v) {
        if (sendcounts[sr] != recvcounts[sr])
            return ring__err(RING_EINVAL,
                             "alltoallv '%s': sendcounts[%d] = %zu but "
                             "recvcounts[%d] = %zu for this rank's own block",
                             name, sr, sendcounts[sr], sr, recvcounts[sr]);
        r.ncounts = 2u * (uint32_t)ss;
        r.counts = malloc(r.ncounts * sizeof(uint64_t));
        if (r.counts == NULL)
            return ring__err(RING_ENOMEM, "alltoallv: out of memory");
        for (int i = 0; i < ss; i++) {
            r.counts[i] = sendcounts[i];
            r.counts[ss + i] = recvcounts[i];
        }
    }
    rc = submit1(e, &r, sendbuf, recvbuf, handle);
    ring__request_clear(&r);
    return rc;
}

int ring_alltoall_async(const char *name, const void *sendbuf, void *recvbuf, size_t count,
                        ring_dtype_t dtype, ring_process_set_t ps, ring_handle_t **handle)
{
    return alltoall_common(name, sendbuf, NULL, recvbuf, NULL, count, dtype, ps, handle);
}

int ring_alltoallv_async(const char *name, const void *sendbuf, const size_t *sendcounts,
                         void *recvbuf, const size_t *recvcounts, ring_dtype_t dtype,
                         ring_process_set_t ps, ring_handle_t **handle)
{
    if (sendcounts == NULL || recvcounts == NULL)
        return ring__err(RING_EINVAL, "alltoallv '%s': NULL sendcounts or recvcounts",
                         name ? name : "");
    return alltoall_common(name, sendbuf, sendcounts, recvbuf, recvcounts, 0, dtype, ps, handle);
}

/* ---- handles ---- */

int ring_wait(ring_handle_t *h)
{
    struct ring__ctx *ctx = ring__ctx();
    struct ring__engine *e = ctx ? ctx->engine : NULL;

    if (h == NULL || e == NULL)
        return ring__err(h == NULL ? RING_EINVAL : RING_ENOTINIT, "ring_wait: %s",
                         h == NULL ? "NULL handle" : "libring is not initialized");
    return ring__engine_wait(e, h);
}

int ring_test(ring_handle_t *h)
{
    struct ring__ctx *ctx = ring__ctx();
    if (h == NULL || ctx == NULL || ctx->engine == NULL)
        return 0;
    return ring__engine_test(ctx->engine, h);
}

/* ---- blocking calls: a generated name, a submission and a wait ---- */

static void noname(char *buf, size_t len, const char *what)
{
    snprintf(buf, len, "%s.noname", what);
}

#define BLOCKING(what, call)                                                                       \
    do {                                                                                           \
        char name[64];                                                                             \
        ring_handle_t *h;                                                                          \
        int rc_;                                                                                   \
        noname(name, sizeof(name), what);                                                          \
        ring__engine_next_is_blocking(1);                                                          \
        rc_ = (call);                                                                              \
        ring__engine_next_is_blocking(0); /* when the call failed before submitting */             \
        return rc_ < 0 ? rc_ : ring_wait(h);                                                       \
    } while (0)

int ring_allreduce_scaled(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype,
                          ring_op_t op, double prescale, double postscale)
{
    struct ring__submit sub;
    char name[64];
    int rc;
    struct ring__engine *e = engine(&rc);

    if (e == NULL)
        return rc;
    noname(name, sizeof(name), "allreduce");
    if ((rc = allreduce_sub(e, name, sendbuf, recvbuf, count, dtype, op, prescale, postscale,
                            RING_GLOBAL, &sub)) < 0)
        return rc;
    /* The fast path when it applies (engine_fast.c), else a submission and a wait. */
    return ring__engine_blocking(e, &sub);
}

int ring_allreduce(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype,
                   ring_op_t op)
{
    return ring_allreduce_scaled(sendbuf, recvbuf, count, dtype, op, 1.0, 1.0);
}

int ring_allgather(const void *sendbuf, size_t sendcount, void *recvbuf, ring_dtype_t dtype)
{
    BLOCKING("allgather",
             ring_allgather_async(name, sendbuf, sendcount, recvbuf, dtype, RING_GLOBAL, &h));
}

int ring_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t *recvcounts,
                    ring_dtype_t dtype)
{
    BLOCKING("allgatherv", ring_allgatherv_async(name, sendbuf, sendcount, recvbuf, recvcounts,
                                                 dtype, RING_GLOBAL, &h));
}

int ring_broadcast(void *buf, size_t count, ring_dtype_t dtype, int root)
{
    BLOCKING("broadcast", ring_broadcast_async(name, buf, count, dtype, root, RING_GLOBAL, &h));
}

int ring_reducescatter_scaled(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype,
                              ring_op_t op, double prescale, double postscale)
{
    BLOCKING("reducescatter", ring_reducescatter_async(name, sendbuf, recvbuf, count, dtype, op,
                                                       prescale, postscale, RING_GLOBAL, &h));
}

int ring_reducescatter(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype,
                       ring_op_t op)
{
    return ring_reducescatter_scaled(sendbuf, recvbuf, count, dtype, op, 1.0, 1.0);
}

size_t ring_reducescatter_count(size_t count, int size, int rank, size_t *offset)
{
    size_t off, len;
    if (size < 1 || rank < 0 || rank >= size)
        return 0;
    ring__chunk(count, size, rank, &off, &len);
    if (offset != NULL)
        *offset = off;
    return len;
}

int ring_alltoall(const void *sendbuf, void *recvbuf, size_t count, ring_dtype_t dtype)
{
    BLOCKING("alltoall",
             ring_alltoall_async(name, sendbuf, recvbuf, count, dtype, RING_GLOBAL, &h));
}

int ring_alltoallv(const void *sendbuf, const size_t *sendcounts, void *recvbuf,
                   const size_t *recvcounts, ring_dtype_t dtype)
{
    BLOCKING("alltoallv", ring_alltoallv_async(name, sendbuf, sendcounts, recvbuf, recvcounts,
                                               dtype, RING_GLOBAL, &h));
}

int ring_barrier(void)
{
    struct ring__submit sub = {.sendbuf = NULL, .recvbuf = NULL};
    char name[64];
    int rc, sr, ss;
    struct ring__engine *e = engine(&rc);

    if (e == NULL)
        return rc;
    noname(name, sizeof(name), "barrier");
    if ((rc = base_request(e, &sub.req, RING__BARRIER, name, RING_UINT8, RING_GLOBAL, &sr, &ss)) <
        0)
        return rc;
    /* On the fast path like a small allreduce (engine_fast.c): a program that synchronizes then
     * times a call (bench/allreduce) would otherwise wake the engine thread to run the
     * barrier and be woken by it after. */
    return ring__engine_blocking(e, &sub);
}

int ring_shape_next(int ndim, const int64_t *dims)
{
    /* FNV-1a over the rank and the dimensions; 0 is kept for "none". */
    uint64_t h = 0xcbf29ce484222325ull;
    if (ndim < 0 || ndim > 64 || (ndim > 0 && dims == NULL))
        return ring__err(RING_EINVAL, "ring_shape_next: 0..64 dimensions, got %d", ndim);
    h = (h ^ (uint64_t)ndim) * 0x100000001b3ull;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0)
            return ring__err(RING_EINVAL, "ring_shape_next: dimension %d is %lld", i,
                             (long long)dims[i]);
        h = (h ^ (uint64_t)dims[i]) * 0x100000001b3ull;
    }
    atomic_store_explicit(&shapes_declared, 1, memory_order_relaxed);
    declared = h != 0 ? h : 1;
    return 0;
}

/* ---- join, process sets, timeline, stats ---- */

int ring_join(void)
{
    int rc;
    struct ring__engine *e = engine(&rc);
    if (e == NULL)
        return rc;
    return ring__engine_join(e);
}

int ring_process_set_create(const int *ranks, int n, ring_process_set_t *ps)
{
    int rc, id;
    struct ring__engine *e = engine(&rc);
    int64_t h[2];
    uint64_t hash = 0xcbf29ce484222325ull;

    if (e == NULL)
        return rc;
    if (ps == NULL)
        return ring__err(RING_EINVAL, "ring_process_set_create: NULL ps");
    if ((id = ring__engine_add_pset(e, ranks, n)) < 0)
        return id;
    /* Every rank must have passed the same list: compare a hash of it and the id. */
    for (int i = 0; i < n; i++)
        hash = (hash ^ (uint64_t)ranks[i]) * 0x100000001b3ull;
    hash = (hash ^ (uint64_t)id) * 0x100000001b3ull;
    h[0] = (int64_t)(hash >> 1);
    h[1] = -h[0];
    if ((rc = ring_allreduce(RING_IN_PLACE, h, 2, RING_INT64, RING_MAX)) < 0)
        return rc;
    if (h[0] != -h[1])
        return ring__err(RING_EMISMATCH, "ring_process_set_create: ranks passed different rank "
                                         "lists (or created sets in a different order)");
    *ps = id;
    return 0;
}

int ring_process_set_remove(ring_process_set_t ps)
{
    int rc, local;
    struct ring__engine *e = engine(&rc);
    /* {id, -id, refused}: MAX tells whether every rank named the same set, and whether any
     * rank may not remove it, so that all ranks remove it or none does. */
    int64_t h[3];
    char why[256];

    if (e == NULL)
        return rc;
    local = ring__engine_remove_pset(e, ps, 0);
    snprintf(why, sizeof(why), "%s", local < 0 ? ring_last_error() : "");
    h[0] = ps;
    h[1] = -(int64_t)ps;
    h[2] = local < 0;
    if ((rc = ring_allreduce(RING_IN_PLACE, h, 3, RING_INT64, RING_MAX)) < 0)
        return rc;
    if (h[0] != -h[1])
        return ring__err(RING_EMISMATCH, "ring_process_set_remove: ranks removed different "
                                         "process sets (or in a different order)");
    if (local < 0)
        return ring__err(local, "ring_process_set_remove: %s", why);
    if (h[2] != 0)
        return ring__err(RING_EINVAL,
                         "ring_process_set_remove: another rank cannot remove "
                         "process set %d (see its error)",
                         ps);
    return ring__engine_remove_pset(e, ps, 1);
}

int ring_process_set_rank(ring_process_set_t ps)
{
    int rc, rank, size;
    struct ring__engine *e = engine(&rc);
    if (e == NULL || ring__engine_pset_info(e, ps, &rank, &size) < 0)
        return -1;
    return rank;
}

int ring_process_set_size(ring_process_set_t ps)
{
    int rc, rank, size;
    struct ring__engine *e = engine(&rc);
    if (e == NULL || ring__engine_pset_info(e, ps, &rank, &size) < 0)
        return -1;
    return size;
}

int ring_timeline_start(const char *path)
{
    int rc;
    struct ring__engine *e = engine(&rc);
    if (e == NULL)
        return rc;
    if (path == NULL || *path == '\0')
        return ring__err(RING_EINVAL, "ring_timeline_start: a path is required");
    return ring__engine_timeline(e, path);
}

int ring_timeline_stop(void)
{
    int rc;
    struct ring__engine *e = engine(&rc);
    return e == NULL ? rc : ring__engine_timeline(e, NULL);
}

int ring_engine_stats(struct ring_engine_stats *out)
{
    int rc;
    struct ring__engine *e = engine(&rc);
    if (e == NULL)
        return rc;
    if (out == NULL)
        return ring__err(RING_EINVAL, "ring_engine_stats: NULL out");
    ring__engine_stats(e, out);
    return 0;
}
