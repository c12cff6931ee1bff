/* SPDX-License-Identifier: Apache-2.0 */
/*
 * message.c - requests and responses, and their wire format.
 *
 * Little-endian fixed-width integers, doubles as their IEEE bits, strings as a length and
 * bytes. Ranks of one job run the same build, so the format carries no version; the reader
 * still checks every length against the end of the buffer, so a corrupt message gives
 * RING_EPROTO instead of a wild read.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

static const char *const optype_names[RING__OPTYPE_COUNT] = {
    [RING__ALLREDUCE] = "allreduce",         [RING__ALLGATHER] = "allgather",
    [RING__ALLGATHERV] = "allgatherv",       [RING__BROADCAST] = "broadcast",
    [RING__REDUCESCATTER] = "reducescatter", [RING__ALLTOALL] = "alltoall",
    [RING__ALLTOALLV] = "alltoallv",         [RING__BARRIER] = "barrier",
};

const char *ring__optype_name(int type)
{
    return type >= 0 && type < RING__OPTYPE_COUNT ? optype_names[type] : "unknown";
}

void ring__request_assign(struct ring__request *dst, const struct ring__request *src)
{
    /* The name is most of the struct and usually a few bytes long; it comes first. */
    const size_t rest = offsetof(struct ring__request, type);
    memcpy(dst->name, src->name, strlen(src->name) + 1);
    memcpy((char *)dst + rest, (const char *)src + rest, sizeof(*dst) - rest);
}

void ring__request_clear(struct ring__request *r)
{
    free(r->counts);
    r->counts = NULL;
    r->ncounts = 0;
}

int ring__request_copy(struct ring__request *dst, const struct ring__request *src)
{
    ring__request_assign(dst, src);
    dst->counts = NULL;
    if (src->ncounts > 0) {
        dst->counts = malloc(src->ncounts * sizeof(uint64_t));
        if (dst->counts == NULL) {
            dst->ncounts = 0;
            return RING_ENOMEM;
        }
        memcpy(dst->counts, src->counts, src->ncounts * sizeof(uint64_t));
    }
    return 0;
}

int ring__request_same(const struct ring__request *a, const struct ring__request *b)
{
    return strcmp(a->name, b->name) == 0 && ring__request_same_params(a, b);
}

int ring__request_same_params(const struct ring__request *a, const struct ring__request *b)
{
    return a->type == b->type && a->dtype == b->dtype && a->op == b->op && a->root == b->root &&
           a->process_set == b->process_set && (a->device >= 0) == (b->device >= 0) &&
           a->group_size == b->group_size && a->count == b->count && a->shape == b->shape &&
           a->prescale == b->prescale && a->postscale == b->postscale && a->ncounts == b->ncounts &&
           (a->ncounts == 0 || memcmp(a->counts, b->counts, a->ncounts * sizeof(uint64_t)) == 0);
}

void ring__response_clear(struct ring__response *r)
{
    ring__request_clear(&r->req);
    free(r->message);
    r->message = NULL;
}

/* ---- writing ---- */

void ring__buf_free(struct ring__buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static void put(struct ring__buf *b, const void *p, size_t n)
{
    if (b->oom || n == 0)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *grown;
        while (cap < b->len + n)
            cap *= 2;
        grown = realloc(b->data, cap);
        if (grown == NULL) {
            b->oom = 1;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void ring__put_u64(struct ring__buf *b, uint64_t v)
{
    unsigned char x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    put(b, x, 8);
}

void ring__put_f64(struct ring__buf *b, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    ring__put_u64(b, bits);
}

void ring__put_str(struct ring__buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    ring__put_u64(b, n);
    put(b, s, n);
}

void ring__put_request(struct ring__buf *b, const struct ring__request *r)
{
    ring__put_str(b, r->name);
    ring__put_u64(b, (uint64_t)r->type);
    ring__put_u64(b, (uint64_t)r->dtype);
    ring__put_u64(b, (uint64_t)r->op);
    ring__put_u64(b, (uint64_t)(int64_t)r->root);
    ring__put_u64(b, (uint64_t)r->process_set);
    ring__put_u64(b, (uint64_t)(int64_t)r->device);
    ring__put_u64(b, (uint64_t)r->group_size);
    ring__put_u64(b, r->count);
    ring__put_u64(b, r->shape);
    ring__put_f64(b, r->prescale);
    ring__put_f64(b, r->postscale);
    ring__put_u64(b, r->ncounts);
    for (uint32_t i = 0; i < r->ncounts; i++)
        ring__put_u64(b, r->counts[i]);
}

void ring__put_response(struct ring__buf *b, const struct ring__response *r)
{
    ring__put_request(b, &r->req);
    ring__put_u64(b, (uint64_t)(int64_t)r->error);
    ring__put_str(b, r->message);
}

/* ---- reading ---- */

uint64_t ring__get_u64(struct ring__reader *rd)
{
    uint64_t v = 0;
    if (rd->bad || rd->end - rd->p < 8) {
        rd->bad = 1;
        return 0;
    }
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)(unsigned char)rd->p[i] << (8 * i);
    rd->p += 8;
    return v;
}

double ring__get_f64(struct ring__reader *rd)
{
    uint64_t bits = ring__get_u64(rd);
    double v;
    memcpy(&v, &bits, sizeof(v));
    return v;
}

char *ring__get_str(struct ring__reader *rd)
{
    uint64_t n = ring__get_u64(rd);
    char *s;
    if (rd->bad || n > (uint64_t)(rd->end - rd->p)) {
        rd->bad = 1;
        return NULL;
    }
    s = malloc(n + 1);
    if (s == NULL) {
        rd->bad = 1;
        return NULL;
    }
    memcpy(s, rd->p, n);
    s[n] = '\0';
    rd->p += n;
    return s;
}

int ring__get_request(struct ring__reader *rd, struct ring__request *r)
{
    char *name = ring__get_str(rd);
    uint64_t n, group;

    memset(r, 0, sizeof(*r));
    if (name == NULL || strlen(name) > RING__NAME_MAX) {
        free(name);
        rd->bad = 1;
        return RING_EPROTO;
    }
    strcpy(r->name, name);
    free(name);
    r->type = (int)ring__get_u64(rd);
    r->dtype = (int)ring__get_u64(rd);
    r->op = (int)ring__get_u64(rd);
    r->root = (int)(int64_t)ring__get_u64(rd);
    r->process_set = (int)ring__get_u64(rd);
    r->device = (int)(int64_t)ring__get_u64(rd);
    group = ring__get_u64(rd);
    r->group_size = group <= RING__GROUP_MAX ? (int)group : -1;
    r->count = ring__get_u64(rd);
    r->shape = ring__get_u64(rd);
    r->prescale = ring__get_f64(rd);
    r->postscale = ring__get_f64(rd);
    n = ring__get_u64(rd);
    if (rd->bad || n > (uint64_t)(rd->end - rd->p) / 8) {
        rd->bad = 1;
        return RING_EPROTO;
    }
    if (n > 0) {
        r->counts = malloc(n * sizeof(uint64_t));
        if (r->counts == NULL) {
            rd->bad = 1;
            return RING_ENOMEM;
        }
        r->ncounts = (uint32_t)n;
        for (uint64_t i = 0; i < n; i++)
            r->counts[i] = ring__get_u64(rd);
    }
    /* The group size bounds the coordinator's loops over a group's members: a corrupt
     * one must not make rank 0 count to two billion. */
    /* A packed group's counts are its members' (engine.h): the engine runs the members by
     * them and a joined rank by the sum, so both must hold. */
    if (!rd->bad && ring__request_packed(r)) {
        uint64_t sum = 0;
        for (uint32_t i = 0; i < r->ncounts; i++)
            sum += r->counts[i];
        if (r->ncounts != (uint32_t)r->group_size || sum != r->count)
            rd->bad = 1;
    }
    if (rd->bad || r->type < 0 || r->type >= RING__OPTYPE_COUNT || r->group_size < 0) {
        ring__request_clear(r);
        rd->bad = 1;
        return RING_EPROTO;
    }
    return 0;
}

int ring__get_response(struct ring__reader *rd, struct ring__response *r)
{
    int rc = ring__get_request(rd, &r->req);
    r->message = NULL;
    r->error = 0;
    if (rc < 0)
        return rc;
    r->error = (int)(int64_t)ring__get_u64(rd);
    r->message = ring__get_str(rd);
    if (rd->bad) {
        ring__response_clear(r);
        return RING_EPROTO;
    }
    if (r->message[0] == '\0') {
        free(r->message);
        r->message = NULL;
    }
    return 0;
}
