/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coordinator.c - rank 0's part of negotiation: which tensors are ready on every rank, and
 * whether the ranks agree on them. Pure functions of the requests, so that every rule can
 * be unit-tested without a job.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

static int mismatch(char *msg, size_t len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void sibling(const char *name, int i, char *out, size_t len);

static int mismatch(char *msg, size_t len, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return code;
}

static const char *op_name(int op)
{
    return ring_op_name((ring_op_t)op);
}

static const char *device_name(int device, char *buf, size_t len)
{
    if (device < 0)
        return "a CPU buffer";
    snprintf(buf, len, "a buffer on GPU %d", device);
    return buf;
}

static int set_rank(const struct ring__pset *ps, int world)
{
    for (int i = 0; i < ps->size; i++) {
        if (ps->members[i] == world)
            return i;
    }
    return -1;
}

/* Operations that have a meaning when some ranks contribute nothing. */
int ring__coord_allowed_with_joined(int type)
{
    return type == RING__ALLREDUCE || type == RING__BROADCAST || type == RING__BARRIER;
}

/* The first difference between two ranks' requests of one name (ra's a, rb's b), as a
 * RING_EMISMATCH message in msg, or 0 when they agree. */
static int compare_pair(const struct ring__request *a, const struct ring__request *b, int ra,
                        int rb, char *msg, size_t msglen)
{
    const char *what = ring__optype_name(a->type), *name = a->name;
    char b1[48], b2[48];

    if (b->type != a->type)
        return mismatch(msg, msglen, RING_EMISMATCH,
                        "tensor '%s': rank %d submitted %s, rank %d submitted %s", name, ra, what,
                        rb, ring__optype_name(b->type));
    if (b->process_set != a->process_set)
        return mismatch(msg, msglen, RING_EMISMATCH,
                        "%s '%s': rank %d used process set %d, rank %d process set %d", what, name,
                        ra, a->process_set, rb, b->process_set);
    if (b->dtype != a->dtype)
        return mismatch(msg, msglen, RING_EMISMATCH, "%s '%s': rank %d sent %s, rank %d sent %s",
                        what, name, ra, ring_dtype_name((ring_dtype_t)a->dtype), rb,
                        ring_dtype_name((ring_dtype_t)b->dtype));
    /* Ranks drive different GPUs (each its own), so only host versus GPU must agree. */
    if ((b->device >= 0) != (a->device >= 0))
        return mismatch(msg, msglen, RING_EMISMATCH, "%s '%s': rank %d sent %s, rank %d sent %s",
                        what, name, ra, device_name(a->device, b1, sizeof(b1)), rb,
                        device_name(b->device, b2, sizeof(b2)));
    if (b->op != a->op)
        return mismatch(msg, msglen, RING_EMISMATCH,
                        "%s '%s': rank %d asked for %s, rank %d for %s", what, name, ra,
                        op_name(a->op), rb, op_name(b->op));
    /* Before the counts: a group's count is its members' sum. */
    if (b->group_size != a->group_size)
        return mismatch(msg, msglen, RING_EMISMATCH,
                        "%s '%s': rank %d put it in a group of %d, rank %d of %d", what, name, ra,
                        a->group_size, rb, b->group_size);
    /* Only a corrupt message sends a host group member by member (api.c). */
    if ((ring__request_packed(a) || ring__request_packed(b)) && a->ncounts != b->ncounts)
        return mismatch(msg, msglen, RING_EMISMATCH,
                        "%s '%s': rank %d sent its group %s, rank %d %s", what, name, ra,
                        a->ncounts > 0 ? "whole" : "member by member", rb,
                        b->ncounts > 0 ? "whole" : "member by member");
    if (ring__request_packed(a) &&
        memcmp(a->counts, b->counts, a->ncounts * sizeof(uint64_t)) != 0) {
        char member[RING__NAME_MAX + 16];
        uint32_t k = 0;
        while (k + 1 < a->ncounts && a->counts[k] == b->counts[k])
            k++;
        sibling(name, (int)k, member, sizeof(member));
        return mismatch(msg, msglen, RING_EMISMATCH,
                        "%s '%s': rank %d sent %llu elements, rank %d sent %llu (member %u "
                        "of a group of %d)",
                        what, member, ra, (unsigned long long)a->counts[k], rb,
                        (unsigned long long)b->counts[k], k, a->group_size);
    }
    if (a->type != RING__ALLGATHERV && a->type != RING__ALLTOALLV && b->count != a->count)
        return mismatch(msg, msglen, RING_EMISMATCH,
                        "%s '%s': rank %d sent %llu elements, rank %d sent %llu", what, name, ra,
                        (unsigned long long)a->count, rb, (unsigned long long)b->count);
    if (b->shape != a->shape)
        return mismatch(msg, msglen, RING_EMISMATCH,
                        "%s '%s': rank %d and rank %d sent %llu elements in different "
                        "shapes",
                        what, name, ra, rb, (unsigned long long)a->count);
    if (b->root != a->root)
        return mismatch(msg, msglen, RING_EMISMATCH,
                        "%s '%s': rank %d named root %d, rank %d root %d", what, name, ra, a->root,
                        rb, b->root);
    if (b->prescale != a->prescale || b->postscale != a->postscale)
        return mismatch(msg, msglen, RING_EMISMATCH,
                        "%s '%s': rank %d scales by %g/%g (pre/post), rank %d by %g/%g", what, name,
                        ra, a->prescale, a->postscale, rb, b->prescale, b->postscale);
    if (a->type == RING__ALLGATHERV &&
        (b->ncounts != a->ncounts ||
         memcmp(a->counts, b->counts, a->ncounts * sizeof(uint64_t)) != 0))
        return mismatch(msg, msglen, RING_EMISMATCH,
                        "allgatherv '%s': rank %d and rank %d passed different recvcounts", name,
                        ra, rb);
    return 0;
}

/* allgatherv's and alltoallv's counts, which each rank gives for every rank: do they add
 * up between the ranks (req, ranks: n of them, in process set ps)? */
static int check_v_counts(const struct ring__request *const *req, const int *ranks, int n,
                          const struct ring__pset *ps, char *msg, size_t msglen)
{
    const struct ring__request *a = req[0];
    const char *name = a->name;

    if (a->type == RING__ALLGATHERV) {
        for (int i = 0; i < n; i++) {
            int sr = set_rank(ps, ranks[i]);
            if (sr < 0 || sr >= (int)a->ncounts || req[i]->count != a->counts[sr])
                return mismatch(msg, msglen, RING_EMISMATCH,
                                "allgatherv '%s': rank %d sends %llu elements but recvcounts[%d] "
                                "is %llu",
                                name, ranks[i], (unsigned long long)req[i]->count, sr,
                                sr >= 0 && sr < (int)a->ncounts ? (unsigned long long)a->counts[sr]
                                                                : 0ull);
        }
    }
    if (a->type == RING__ALLTOALLV) {
        int m = ps->size;
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                int si = set_rank(ps, ranks[i]), sj = set_rank(ps, ranks[j]);
                uint64_t sends, recvs;
                if (req[i]->ncounts != 2u * (uint32_t)m || req[j]->ncounts != 2u * (uint32_t)m)
                    return mismatch(msg, msglen, RING_EMISMATCH,
                                    "alltoallv '%s': counts for a set of %d ranks expected", name,
                                    m);
                sends = req[i]->counts[sj];
                recvs = req[j]->counts[m + si];
                if (sends != recvs)
                    return mismatch(msg, msglen, RING_EMISMATCH,
                                    "alltoallv '%s': rank %d sends %llu elements to rank %d, which "
                                    "expects %llu",
                                    name, ranks[i], (unsigned long long)sends, ranks[j],
                                    (unsigned long long)recvs);
            }
        }
    }
    return 0;
}

/* Whether a's operation may run while ranks of its set have joined (joined: per world rank). */
static int check_joined(const struct ring__request *a, const struct ring__pset *ps,
                        const unsigned char *joined, char *msg, size_t msglen)
{
    const char *what = ring__optype_name(a->type), *name = a->name;

    for (int i = 0; i < ps->size; i++) {
        int w = ps->members[i];
        if (!joined[w])
            continue;
        if (!ring__coord_allowed_with_joined(a->type))
            return mismatch(msg, msglen, RING_EJOINED,
                            "%s '%s': not allowed while ranks have joined (rank %d has)", what,
                            name, w);
        if (a->type == RING__BROADCAST && i == a->root)
            return mismatch(msg, msglen, RING_EJOINED,
                            "broadcast '%s': root %d (rank %d) has joined and has no data", name,
                            a->root, w);
    }
    return 0;
}

int ring__coord_validate(const struct ring__request *const *req, const int *ranks, int n,
                         const struct ring__pset *ps, const unsigned char *joined, char *msg,
                         size_t msglen)
{
    int rc;

    for (int i = 1; i < n; i++) {
        if ((rc = compare_pair(req[0], req[i], ranks[0], ranks[i], msg, msglen)) != 0)
            return rc;
    }
    if ((rc = check_v_counts(req, ranks, n, ps, msg, msglen)) != 0)
        return rc;
    return check_joined(req[0], ps, joined, msg, msglen);
}

struct slot {
    const char *name;
    int order; /* first appearance */
    const struct ring__request **by_rank;
    int ready;
    int emitted;
};

struct match {
    struct slot *slots;
    int nslots;
    struct ring__strmap index; /* name -> slot index + 1 */
};

static struct slot *slot_of(struct match *m, const char *name)
{
    intptr_t i = (intptr_t)ring__strmap_get(&m->index, name);
    return i > 0 ? &m->slots[i - 1] : NULL;
}

/* Name of member i of the group that name belongs to ("g/3" -> "g/i"). */
static void sibling(const char *name, int i, char *out, size_t len)
{
    const char *slash = strrchr(name, '/');
    int prefix = slash ? (int)(slash - name) : (int)strlen(name);
    snprintf(out, len, "%.*s/%d", prefix, name, i);
}

static int emit(struct ring__response *out, int *nout, struct slot *s, int size,
                const struct ring__process_sets *psets, const unsigned char *joined)
{
    const struct ring__request *reqs[size];
    int ranks[size], n = 0;
    struct ring__response *r = &out[(*nout)++];
    const struct ring__pset *ps;
    char msg[512];

    for (int w = 0; w < size; w++) {
        if (s->by_rank[w] != NULL) {
            reqs[n] = s->by_rank[w];
            ranks[n++] = w;
        }
    }
    memset(r, 0, sizeof(*r));
    if (ring__request_copy(&r->req, reqs[0]) < 0)
        return RING_ENOMEM;
    s->emitted = 1;
    ps = ring__psets_get(psets, reqs[0]->process_set);
    if (ps == NULL) {
        snprintf(msg, sizeof(msg), "%s '%s': process set %d does not exist",
                 ring__optype_name(reqs[0]->type), s->name, reqs[0]->process_set);
        r->error = RING_EINVAL;
    } else {
        r->error = ring__coord_validate(reqs, ranks, n, ps, joined, msg, sizeof(msg));
    }
    if (r->error != 0 && (r->message = strdup(msg)) == NULL)
        return RING_ENOMEM;
    return 0;
}

/* Emits an error response for every not yet emitted member of err's group. */
static int fail_group(struct match *m, struct ring__response *resp, int *nout,
                      const struct ring__response *err, int size)
{
    int gs = err->req.group_size, code = err->error;
    char *msg = err->message;

    if (ring__request_packed(&err->req)) /* a group sent whole has no other members */
        return 0;

    /* The group size another rank gave, when this response came from a rank that gave none. */
    for (int i = 0; i < m->nslots && gs <= 1; i++) {
        if (strcmp(m->slots[i].name, err->req.name) != 0)
            continue;
        for (int w = 0; w < size; w++) {
            if (m->slots[i].by_rank[w] != NULL && m->slots[i].by_rank[w]->group_size > gs)
                gs = m->slots[i].by_rank[w]->group_size;
        }
    }
    for (int g = 0; g < gs; g++) {
        char sib[RING__NAME_MAX + 16];
        struct slot *t;
        struct ring__response *r;
        const struct ring__request *any = NULL;
        sibling(err->req.name, g, sib, sizeof(sib));
        t = slot_of(m, sib);
        if (t == NULL || t->emitted)
            continue;
        for (int w = 0; w < size && any == NULL; w++)
            any = t->by_rank[w];
        r = &resp[(*nout)++];
        memset(r, 0, sizeof(*r));
        t->emitted = 1;
        if (ring__request_copy(&r->req, any) < 0)
            return RING_ENOMEM;
        r->error = code;
        r->message = malloc(strlen(msg) + RING__NAME_MAX + 64);
        if (r->message == NULL)
            return RING_ENOMEM;
        sprintf(r->message, "allreduce '%s': its group failed: %s", sib, msg);
    }
    return 0;
}

/* Turns r into the error for a group member whose name is not "<group>/<i>", i < n. */
static int misnamed(struct ring__response *r, int n)
{
    char msg[RING__NAME_MAX + 128];
    snprintf(msg, sizeof(msg), "allreduce '%s': not a member name of a group of %d", r->req.name,
             n);
    r->error = RING_EPROTO;
    return (r->message = strdup(msg)) == NULL ? RING_ENOMEM : 0;
}

/* Puts every rank's requests (reqs[r]: nreqs[r] of them) in m's slots, one per name, in
 * order of first appearance, lowest rank first. Returns 0 or RING_ENOMEM. */
static int fill_slots(struct match *m, int size, struct ring__request *const *reqs,
                      const int *nreqs)
{
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < nreqs[r]; i++) {
            const struct ring__request *q = &reqs[r][i];
            struct slot *s = slot_of(m, q->name);
            if (s == NULL) {
                s = &m->slots[m->nslots];
                s->name = q->name;
                s->order = m->nslots;
                s->by_rank = calloc((size_t)size, sizeof(*s->by_rank));
                if (s->by_rank == NULL ||
                    ring__strmap_put(&m->index, q->name, (void *)(intptr_t)(m->nslots + 1)) < 0) {
                    free(s->by_rank);
                    return RING_ENOMEM;
                }
                m->nslots++;
            }
            s->by_rank[r] = q;
        }
    }
    return 0;
}

/* Marks the slots that are ready: every member of the set that has not joined (joined:
 * per world rank) submitted it, and, for a member of a group sent member by member, every
 * member of the group is ready too. */
static void mark_ready(struct match *m, int size, const unsigned char *joined,
                       const struct ring__process_sets *psets)
{
    /* Ready: every member of the set that has not joined submitted it. */
    for (int i = 0; i < m->nslots; i++) {
        struct slot *s = &m->slots[i];
        const struct ring__request *any = NULL;
        const struct ring__pset *ps;
        for (int w = 0; w < size && any == NULL; w++)
            any = s->by_rank[w];
        ps = ring__psets_get(psets, any->process_set);
        s->ready = 1;
        if (ps == NULL)
            continue; /* ready, so that the error reaches every rank now */
        for (int k = 0; k < ps->size; k++) {
            int w = ps->members[k];
            if (!joined[w] && s->by_rank[w] == NULL)
                s->ready = 0;
        }
    }
    /* A group is ready when all of its members are. */
    for (int i = 0; i < m->nslots; i++) {
        struct slot *s = &m->slots[i];
        const struct ring__request *any = NULL;
        for (int w = 0; w < size && any == NULL; w++)
            any = s->by_rank[w];
        if (!s->ready || any->group_size <= 1 || ring__request_packed(any))
            continue; /* a group sent whole (packed) is ready as one tensor */
        /* Ranks that disagree on the group are a mismatch to report now, not a wait. */
        for (int w = 0; w < size; w++) {
            if (s->by_rank[w] != NULL && s->by_rank[w]->group_size != any->group_size)
                goto next_slot;
        }
        for (int g = 0; g < any->group_size && s->ready; g++) {
            char sib[RING__NAME_MAX + 16];
            struct slot *t;
            sibling(s->name, g, sib, sizeof(sib));
            t = slot_of(m, sib);
            if (t == NULL || !t->ready)
                s->ready = 0;
        }
    next_slot:;
    }
}

int ring__coord_match(int size, struct ring__request *const *reqs, const int *nreqs,
                      const unsigned char *joined, const struct ring__process_sets *psets,
                      struct ring__response **out, int *nout)
{
    struct match m = {0};
    struct ring__response *resp = NULL;
    int total = 0, rc = 0;

    *out = NULL;
    *nout = 0;
    for (int r = 0; r < size; r++)
        total += nreqs[r];
    if (total == 0)
        return 0;
    m.slots = calloc((size_t)total, sizeof(*m.slots));
    resp = calloc((size_t)total, sizeof(*resp));
    if (m.slots == NULL || resp == NULL) {
        rc = RING_ENOMEM;
        goto out;
    }
    if ((rc = fill_slots(&m, size, reqs, nreqs)) < 0)
        goto out;
    mark_ready(&m, size, joined, psets);
    for (int i = 0; i < m.nslots && rc == 0; i++) {
        struct slot *s = &m.slots[i];
        const struct ring__request *any = NULL;
        if (!s->ready || s->emitted)
            continue;
        for (int w = 0; w < size && any == NULL; w++)
            any = s->by_rank[w];
        if (any->group_size > 1 && !ring__request_packed(any)) { /* the whole group, in order */
            for (int g = 0; g < any->group_size && rc == 0; g++) {
                char sib[RING__NAME_MAX + 16];
                struct slot *t;
                sibling(s->name, g, sib, sizeof(sib));
                t = slot_of(&m, sib);
                if (t != NULL && t->ready && !t->emitted)
                    rc = emit(resp, nout, t, size, psets, joined);
            }
        }
        /* Alone: not in a group; or a name that is not among the members of its own group
         * (only a corrupt message names one so), which fails. */
        if (rc == 0 && !s->emitted) {
            rc = emit(resp, nout, s, size, psets, joined);
            if (rc == 0 && resp[*nout - 1].error == 0 && any->group_size > 1 &&
                !ring__request_packed(any))
                rc = misnamed(&resp[*nout - 1], any->group_size);
        }
        /* A failed member fails its whole group, so no rank waits for the rest. */
        if (rc == 0 && resp[*nout - 1].error != 0)
            rc = fail_group(&m, resp, nout, &resp[*nout - 1], size);
    }
out:
    for (int i = 0; i < m.nslots; i++)
        free(m.slots[i].by_rank);
    free(m.slots);
    ring__strmap_free(&m.index);
    if (rc < 0) {
        for (int i = 0; i < *nout; i++)
            ring__response_clear(&resp[i]);
        free(resp);
        *nout = 0;
        return rc;
    }
    if (*nout == 0) {
        free(resp);
        resp = NULL;
    }
    *out = resp;
    return 0;
}
