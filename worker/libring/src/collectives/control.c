/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.c - the engine's control allreduce, with a small allreduce riding along.
 *
 * Every cycle the ranks AND a vector of control words (engine_cycle.c). A program that makes
 * one small blocking allreduce at a time would pay for that round and then for the data's
 * own: two latencies where one would do. So the control round can carry an attachment:
 * the data of one cached allreduce, named by its cache bit. Recursive doubling exchanges,
 * at every round, [control words][attachment header][payload]; a rank reduces the
 * payloads only when both sides attached the same bit with the same length and both are
 * still valid, and otherwise drops them and marks its attachment invalid. Validity is
 * combined like the words, by an AND over all ranks through the same exchanges, so every
 * rank ends with the same verdict: either every rank holds the reduced data (that
 * allreduce is done, and the words say its bit was ready everywhere), or no rank uses it
 * and the tensor runs the usual way.
 *
 * A rank's message length depends on its own attachment only, and the header travels
 * first, so the receiver learns from the header how much payload follows: a rank that did
 * not attach never waits for bytes that will not come.
 */
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"
#include "transport.h"

struct attach_header {
    uint32_t bit;
    uint32_t valid;
    uint64_t bytes;
};

/* One exchange: a plain message out; [words][header][announced payload] in. */
struct xchg {
    struct ring__stream s;
    const char *out;
    char *in;         /* fixed_len bytes of words and header, then the payload */
    size_t fixed_len; /* words and header */
    size_t cap;       /* the most payload accepted */
    int rank;
};

static const void *xchg_src(void *arg, size_t off, size_t *len)
{
    struct xchg *x = arg;
    *len = x->s.tx_total - off;
    return x->out + off;
}

static void *xchg_dst(void *arg, size_t off, size_t *len)
{
    struct xchg *x = arg;
    *len = x->s.rx_total - off;
    return x->in + off;
}

/* Once the fixed part is in, grows the stream by the payload its header announces. */
static int xchg_done(void *arg, size_t off, size_t len)
{
    struct xchg *x = arg;
    struct attach_header h;

    if (off + len != x->fixed_len || x->s.rx_total != x->fixed_len)
        return 0;
    memcpy(&h, x->in + x->fixed_len - sizeof(h), sizeof(h));
    if (!h.valid)
        return 0;
    if (h.bytes > x->cap)
        return ring__err(RING_EPROTO, "rank %d: a control message announced %llu bytes", x->rank,
                         (unsigned long long)h.bytes);
    x->s.rx_total = x->fixed_len + (size_t)h.bytes;
    return 0;
}

static int exchange(const struct ring__comm *c, int dst, const char *out, size_t outlen, int src,
                    char *in, size_t fixed_len, size_t cap)
{
    struct xchg x = {.out = out, .in = in, .fixed_len = fixed_len, .cap = cap, .rank = c->rank};
    x.s = (struct ring__stream){
        .tx_peer = dst >= 0 ? ring__peer(c, dst) : -1,
        .rx_peer = src >= 0 ? ring__peer(c, src) : -1,
        .tx_total = dst >= 0 ? outlen : 0,
        .rx_total = src >= 0 ? fixed_len : 0,
        .tx_src = xchg_src,
        .rx_dst = xchg_dst,
        .rx_done = xchg_done,
        .arg = &x,
    };
    return ring__mesh_stream(c->ctx->mesh, &x.s);
}

/* Writes this rank's message into msg; returns its length. */
static size_t compose(char *msg, const uint64_t *words, size_t nwords, const struct ring__attach *a,
                      int valid)
{
    struct attach_header h = {a != NULL && a->bit >= 0 ? (uint32_t)a->bit : 0, (uint32_t)valid,
                              valid ? a->bytes : 0};
    size_t n = nwords * sizeof(uint64_t);
    memcpy(msg, words, n);
    memcpy(msg + n, &h, sizeof(h));
    n += sizeof(h);
    if (valid) {
        memcpy(msg + n, a->data, a->bytes);
        n += a->bytes;
    }
    return n;
}

/* Folds a received message into words and the attachment; returns the new validity. */
static int combine(uint64_t *words, size_t nwords, struct ring__attach *a, int valid,
                   const char *in)
{
    struct attach_header h;
    size_t n = nwords * sizeof(uint64_t);
    for (size_t i = 0; i < nwords; i++) {
        uint64_t v;
        memcpy(&v, in + i * sizeof(v), sizeof(v));
        words[i] &= v;
    }
    memcpy(&h, in + n, sizeof(h));
    if (!valid || !h.valid || h.bit != (uint32_t)a->bit || h.bytes != a->bytes)
        return 0;
    ring__reduce(a->data, a->data, in + n + sizeof(h), a->count, a->dtype, a->op);
    return 1;
}

/* Takes a finished message (words and verdict) from the rank that computed it. */
static int adopt(uint64_t *words, size_t nwords, struct ring__attach *a, const char *in)
{
    struct attach_header h;
    size_t n = nwords * sizeof(uint64_t);
    memcpy(words, in, n);
    memcpy(&h, in + n, sizeof(h));
    if (a == NULL || a->bit < 0 || !h.valid || h.bit != (uint32_t)a->bit || h.bytes != a->bytes)
        return 0;
    memcpy(a->data, in + n + sizeof(h), a->bytes);
    return 1;
}

size_t ring__ctl_scratch_bytes(size_t nwords)
{
    /* Our message (words, header, our payload) and the incoming one (up to the cap). */
    return 2 * (nwords * sizeof(uint64_t) + sizeof(struct attach_header)) + 2 * RING__ATTACH_MAX;
}

int ring__ctl_allreduce(const struct ring__comm *c, uint64_t *words, size_t nwords,
                        struct ring__attach *a, void *scratch)
{
    size_t fixed = nwords * sizeof(uint64_t) + sizeof(struct attach_header);
    size_t mine = a != NULL && a->bit >= 0 ? a->bytes : 0, cap = RING__ATTACH_MAX;
    int p = ring__pow2_floor(c->size), extra = c->size - p, rank = c->rank, rc = 0;
    int valid = a != NULL && a->bit >= 0 && a->bytes <= RING__ATTACH_MAX;
    char *msg, *in;

    if (a != NULL)
        a->valid = 0;
    if (c->size == 1) {
        if (a != NULL)
            a->valid = valid;
        return 0;
    }
    /* Any rank may attach up to RING__ATTACH_MAX bytes, whatever this one attached. */
    msg = scratch;
    in = msg + fixed + mine;

    if (rank >= p) {
        /* Folded: hand everything to rank - p, get the verdict back. */
        size_t n = compose(msg, words, nwords, a, valid);
        rc = exchange(c, rank - p, msg, n, -1, NULL, 0, 0);
        if (rc == 0)
            rc = exchange(c, -1, NULL, 0, rank - p, in, fixed, cap);
        if (rc == 0)
            valid = adopt(words, nwords, a, in);
        goto out;
    }
    if (rank < extra) {
        if ((rc = exchange(c, -1, NULL, 0, rank + p, in, fixed, cap)) < 0)
            goto out;
        valid = combine(words, nwords, a, valid, in);
    }
    for (int round = 0; (1 << round) < p; round++) {
        int partner = ring__rd_partner(rank, round);
        size_t n = compose(msg, words, nwords, a, valid);
        if ((rc = exchange(c, partner, msg, n, partner, in, fixed, cap)) < 0)
            goto out;
        valid = combine(words, nwords, a, valid, in);
    }
    if (rank < extra) {
        size_t n = compose(msg, words, nwords, a, valid);
        rc = exchange(c, rank + p, msg, n, -1, NULL, 0, 0);
    }
out:
    if (rc == 0 && a != NULL)
        a->valid = valid;
    return rc;
}
