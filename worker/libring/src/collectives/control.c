/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.c - the engine's control allreduce, with small allreduces riding along.
 *
 * Every cycle the ranks AND a vector of control words (engine_cycle.c). A program that makes
 * small allreduces would pay for that round and then for the data's own: two latencies
 * where one would do. So the control round can carry an attachment: the data of cached
 * allreduces, laid out one after the other and named by a key (the engine's: a bitmap of
 * their cache bits). Recursive doubling exchanges, at every round,
 * [control words][attachment header][key][payload]; a rank reduces the payloads only when
 * both sides attached the same key with the same length and both are still valid, and
 * otherwise drops them and marks its attachment invalid. Validity is combined like the
 * words, by an AND over all ranks through the same exchanges, so every rank ends with the
 * same verdict: either every rank holds the reduced data (those allreduces are done, and
 * the words say their bits were ready everywhere), or no rank uses it and the tensors run
 * the usual way. The key is compared byte for byte, not hashed: two different sets of
 * tensors must never be reduced into each other.
 *
 * A rank's message length depends on its own attachment only, and the header travels
 * first, so the receiver learns from the header how much key and payload follow: a rank
 * that did not attach never waits for bytes that will not come.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/collectives.h"
#include "transport/transport.h"

struct attach_header {
    uint32_t valid;
    uint32_t key_bytes;
    uint64_t bytes; /* of payload, after the key */
};

/* One exchange: a plain message out; [words][header][announced key and payload] in. */
struct xchg {
    struct ring__stream s;
    const char *out;
    char *in;         /* fixed_len bytes of words and header, then the payload */
    size_t fixed_len; /* words and header */
    size_t cap;       /* the most key and payload accepted */
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

/* Once the fixed part is in, grows the stream by the key and payload its header announces. */
static int xchg_done(void *arg, size_t off, size_t len)
{
    struct xchg *x = arg;
    struct attach_header h;

    if (off + len != x->fixed_len || x->s.rx_total != x->fixed_len)
        return 0;
    memcpy(&h, x->in + x->fixed_len - sizeof(h), sizeof(h));
    if (!h.valid)
        return 0;
    if (h.bytes > x->cap || h.key_bytes > x->cap - h.bytes)
        return ring__err(RING_EPROTO, "rank %d: a control message announced %llu + %u bytes",
                         x->rank, (unsigned long long)h.bytes, h.key_bytes);
    x->s.rx_total = x->fixed_len + h.key_bytes + (size_t)h.bytes;
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
    struct attach_header h = {(uint32_t)valid, valid ? (uint32_t)a->key_bytes : 0,
                              valid ? a->bytes : 0};
    size_t n = nwords * sizeof(uint64_t);
    memcpy(msg, words, n);
    memcpy(msg + n, &h, sizeof(h));
    n += sizeof(h);
    if (valid) {
        memcpy(msg + n, a->key, a->key_bytes);
        n += a->key_bytes;
        memcpy(msg + n, a->data, a->bytes);
        n += a->bytes;
    }
    return n;
}

/* The payload of a received message when it carries the same tensors as a, else NULL. */
static const char *same_tensors(const struct ring__attach *a, const char *in, size_t n)
{
    struct attach_header h;
    memcpy(&h, in + n, sizeof(h));
    if (a == NULL || !a->on || !h.valid || h.key_bytes != a->key_bytes || h.bytes != a->bytes ||
        memcmp(in + n + sizeof(h), a->key, a->key_bytes) != 0)
        return NULL;
    return in + n + sizeof(h) + h.key_bytes;
}

/* Folds a received message into words and the attachment; returns the new validity. */
static int combine(uint64_t *words, size_t nwords, struct ring__attach *a, int valid,
                   const char *in)
{
    size_t n = nwords * sizeof(uint64_t);
    const char *payload;
    for (size_t i = 0; i < nwords; i++) {
        uint64_t v;
        memcpy(&v, in + i * sizeof(v), sizeof(v));
        words[i] &= v;
    }
    if (!valid || (payload = same_tensors(a, in, n)) == NULL)
        return 0;
    ring__reduce(a->data, a->data, payload, a->count, a->dtype, a->op);
    return 1;
}

/* Takes a finished message (words and verdict) from the rank that computed it. */
static int adopt(uint64_t *words, size_t nwords, struct ring__attach *a, const char *in)
{
    size_t n = nwords * sizeof(uint64_t);
    const char *payload;
    memcpy(words, in, n);
    if ((payload = same_tensors(a, in, n)) == NULL)
        return 0;
    memcpy(a->data, payload, a->bytes);
    return 1;
}

size_t ring__ctl_scratch_bytes(size_t nwords)
{
    /* Our message (words, header, key, our payload) and the incoming one (up to the cap). */
    return 2 * (nwords * sizeof(uint64_t) + sizeof(struct attach_header)) +
           2 * (RING__ATTACH_MAX + nwords * sizeof(uint64_t));
}

int ring__ctl_allreduce(const struct ring__comm *c, uint64_t *words, size_t nwords,
                        struct ring__attach *a, void *scratch)
{
    size_t fixed = nwords * sizeof(uint64_t) + sizeof(struct attach_header);
    int valid = a != NULL && a->on && a->bytes <= RING__ATTACH_MAX &&
                a->key_bytes <= nwords * sizeof(uint64_t);
    size_t mine = valid ? a->key_bytes + a->bytes : 0;
    size_t cap = RING__ATTACH_MAX + nwords * sizeof(uint64_t);
    int p = ring__pow2_floor(c->size), extra = c->size - p, rank = c->rank, rc = 0;
    char *msg, *in;

    if (a != NULL)
        a->valid = 0;
    if (c->size == 1) {
        if (a != NULL)
            a->valid = valid;
        return 0;
    }
    /* Any rank may attach up to the cap, whatever this one attached. */
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
