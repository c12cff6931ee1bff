/* SPDX-License-Identifier: Apache-2.0 */
/* cluster.c - nodes, placements and what is taken on them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

struct cluster *cluster_create(int nnodes, int slots, int gpus)
{
    struct cluster *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return errno = ENOMEM, NULL;
    for (int i = 0; i < nnodes; i++) {
        char name[32];
        snprintf(name, sizeof(name), "node%d", i);
        if (cluster_add_node(c, name, slots, gpus) < 0) {
            cluster_free(c);
            return errno = ENOMEM, NULL;
        }
    }
    return c;
}

int cluster_add_node(struct cluster *c, const char *name, int slots, int gpus)
{
    struct cluster_node *node = realloc(c->node, (size_t)(c->nnodes + 1) * sizeof(*node));
    int *base;
    if (node == NULL)
        return errno = ENOMEM, -1;
    c->node = node;
    base = realloc(c->gpu_base, (size_t)(c->nnodes + 1) * sizeof(*base));
    if (base == NULL)
        return errno = ENOMEM, -1;
    c->gpu_base = base;
    snprintf(c->node[c->nnodes].name, sizeof(c->node[c->nnodes].name), "%s", name);
    c->node[c->nnodes].slots = slots;
    c->node[c->nnodes].gpus = gpus;
    c->node[c->nnodes].offline = 0;
    c->gpu_base[c->nnodes] = (int)c->gpus;
    c->nnodes++;
    c->slots += slots;
    c->gpus += gpus;
    return 0;
}

void cluster_free(struct cluster *c)
{
    int saved = errno;
    if (c == NULL)
        return;
    free(c->node);
    free(c->gpu_base);
    free(c);
    errno = saved;
}

void placement_clear(struct placement *p)
{
    /* Most targets of a pass have nothing to free: no call into the allocator for them. */
    if (p->part != NULL || p->gpu != NULL) {
        free(p->part);
        free(p->gpu);
    }
    memset(p, 0, sizeof(*p));
}

/* Room for nparts parts and ngpus GPU ids in p (whose arrays are replaced). */
static int placement_alloc(struct placement *p, int nparts, int ngpus)
{
    placement_clear(p);
    p->part = calloc((size_t)(nparts > 0 ? nparts : 1), sizeof(*p->part));
    p->gpu = calloc((size_t)(ngpus > 0 ? ngpus : 1), sizeof(int));
    if (p->part == NULL || p->gpu == NULL) {
        placement_clear(p);
        return errno = ENOMEM, -1;
    }
    return 0;
}

int placement_copy(struct placement *dst, const struct placement *src)
{
    if (dst == src)
        return 0;
    if (placement_alloc(dst, src->nparts, src->ngpus) < 0)
        return -1;
    dst->nparts = src->nparts;
    dst->workers = src->workers;
    dst->ngpus = src->ngpus;
    if (src->nparts > 0)
        memcpy(dst->part, src->part, (size_t)src->nparts * sizeof(*src->part));
    if (src->ngpus > 0)
        memcpy(dst->gpu, src->gpu, (size_t)src->ngpus * sizeof(int));
    return 0;
}

int placement_equal(const struct placement *a, const struct placement *b)
{
    if (a->nparts != b->nparts || a->workers != b->workers || a->ngpus != b->ngpus)
        return 0;
    for (int i = 0; i < a->nparts; i++) {
        if (a->part[i].node != b->part[i].node || a->part[i].workers != b->part[i].workers ||
            a->part[i].ngpus != b->part[i].ngpus)
            return 0;
    }
    return a->ngpus == 0 || memcmp(a->gpu, b->gpu, (size_t)a->ngpus * sizeof(int)) == 0;
}

void placement_hosts(const struct cluster *c, const struct placement *p, char *buf, size_t len)
{
    size_t used = 0;
    if (len > 0)
        buf[0] = '\0';
    for (int i = 0; i < p->nparts && used < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%s:%d", i ? "," : "",
                         c->node[p->part[i].node].name, p->part[i].workers);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

void placement_gpus(const struct placement *p, char *buf, size_t len)
{
    size_t used = 0;
    if (len > 0)
        buf[0] = '\0';
    for (int i = 0; i < p->nparts && used < len; i++) {
        for (int g = 0; g < p->part[i].ngpus && used < len; g++) {
            int n = snprintf(buf + used, len - used, "%s%d", g ? "," : (i ? ";" : ""),
                             p->gpu[p->part[i].gpu_off + g]);
            if (n < 0)
                return;
            used += (size_t)n;
        }
    }
}

int usage_init(struct usage *u, const struct cluster *c)
{
    memset(u, 0, sizeof(*u));
    u->c = c;
    u->slots_free = malloc((size_t)(c->nnodes > 0 ? c->nnodes : 1) * sizeof(int));
    u->gpus_free = malloc((size_t)(c->nnodes > 0 ? c->nnodes : 1) * sizeof(int));
    u->gpu_busy = calloc((size_t)(c->gpus > 0 ? c->gpus : 1), 1);
    if (u->slots_free == NULL || u->gpus_free == NULL || u->gpu_busy == NULL) {
        usage_clear(u);
        return errno = ENOMEM, -1;
    }
    for (int n = 0; n < c->nnodes; n++) {
        u->slots_free[n] = c->node[n].slots;
        u->gpus_free[n] = c->node[n].gpus;
    }
    u->slots_left = c->slots;
    u->gpus_left = c->gpus;
    return 0;
}

int usage_init_copy(struct usage *u, const struct usage *src)
{
    const struct cluster *c = src->c;
    memset(u, 0, sizeof(*u));
    u->c = c;
    u->slots_free = malloc((size_t)(c->nnodes > 0 ? c->nnodes : 1) * sizeof(int));
    u->gpus_free = malloc((size_t)(c->nnodes > 0 ? c->nnodes : 1) * sizeof(int));
    u->gpu_busy = malloc((size_t)(c->gpus > 0 ? c->gpus : 1));
    if (u->slots_free == NULL || u->gpus_free == NULL || u->gpu_busy == NULL) {
        usage_clear(u);
        return errno = ENOMEM, -1;
    }
    usage_copy(u, src);
    return 0;
}

void usage_clear(struct usage *u)
{
    free(u->slots_free);
    free(u->gpus_free);
    free(u->gpu_busy);
    memset(u, 0, sizeof(*u));
}

void usage_reset(struct usage *u)
{
    const struct cluster *c = u->c;
    for (int n = 0; n < c->nnodes; n++) {
        u->slots_free[n] = c->node[n].slots;
        u->gpus_free[n] = c->node[n].gpus;
    }
    memset(u->gpu_busy, 0, (size_t)(c->gpus > 0 ? c->gpus : 1));
    u->slots_left = c->slots;
    u->gpus_left = c->gpus;
}

void usage_copy(struct usage *dst, const struct usage *src)
{
    const struct cluster *c = src->c;
    memcpy(dst->slots_free, src->slots_free, (size_t)c->nnodes * sizeof(int));
    memcpy(dst->gpus_free, src->gpus_free, (size_t)c->nnodes * sizeof(int));
    memcpy(dst->gpu_busy, src->gpu_busy, (size_t)c->gpus);
    dst->slots_left = src->slots_left;
    dst->gpus_left = src->gpus_left;
}

int usage_fits(const struct usage *u, const struct placement *p, int cpw)
{
    for (int i = 0; i < p->nparts; i++) {
        const struct placement_part *pp = &p->part[i];
        if (pp->node < 0 || pp->node >= u->c->nnodes ||
            u->slots_free[pp->node] < pp->workers * cpw || u->gpus_free[pp->node] < pp->ngpus)
            return 0;
        for (int g = 0; g < pp->ngpus; g++) {
            int id = p->gpu[pp->gpu_off + g];
            if (id < 0 || id >= u->c->node[pp->node].gpus ||
                u->gpu_busy[u->c->gpu_base[pp->node] + id])
                return 0;
        }
    }
    return 1;
}

/* Checks that p's resources can be freed: every one of them is taken. */
static int usage_held(const struct usage *u, const struct placement *p, int cpw)
{
    for (int i = 0; i < p->nparts; i++) {
        const struct placement_part *pp = &p->part[i];
        if (pp->node < 0 || pp->node >= u->c->nnodes ||
            u->slots_free[pp->node] + pp->workers * cpw > u->c->node[pp->node].slots)
            return 0;
        for (int g = 0; g < pp->ngpus; g++) {
            int id = p->gpu[pp->gpu_off + g];
            if (id < 0 || id >= u->c->node[pp->node].gpus ||
                !u->gpu_busy[u->c->gpu_base[pp->node] + id])
                return 0;
        }
    }
    return 1;
}

int usage_apply(struct usage *u, const struct placement *p, int cpw, int add)
{
    if (add > 0 ? !usage_fits(u, p, cpw) : !usage_held(u, p, cpw))
        return errno = EBUSY, -1;
    usage_take(u, p, cpw, add);
    return 0;
}

void usage_take(struct usage *u, const struct placement *p, int cpw, int add)
{
    int sign = add > 0 ? 1 : -1;
    for (int i = 0; i < p->nparts; i++) {
        const struct placement_part *pp = &p->part[i];
        u->slots_free[pp->node] -= sign * pp->workers * cpw;
        u->gpus_free[pp->node] -= sign * pp->ngpus;
        for (int g = 0; g < pp->ngpus; g++)
            u->gpu_busy[u->c->gpu_base[pp->node] + p->gpu[pp->gpu_off + g]] = add > 0;
    }
    u->slots_left -= (long)sign * p->workers * cpw;
    u->gpus_left -= (long)sign * p->ngpus;
}

int placement_offline(const struct cluster *c, const struct placement *p)
{
    for (int i = 0; i < p->nparts; i++)
        if (p->part[i].node >= 0 && p->part[i].node < c->nnodes && c->node[p->part[i].node].offline)
            return 1;
    return 0;
}

void usage_block_offline(struct usage *u, struct usage *also)
{
    const struct cluster *c = u->c;
    for (int n = 0; n < c->nnodes; n++) {
        /* What is free in u, taken in both: u last, as its free counts say how much. */
        struct usage *both[2] = {also, u};
        int slots = u->slots_free[n], gpus = u->gpus_free[n];
        if (!c->node[n].offline)
            continue;
        for (int k = 0; k < 2; k++) {
            if (both[k] == NULL)
                continue;
            for (int g = 0, base = c->gpu_base[n]; g < c->node[n].gpus; g++)
                both[k]->gpu_busy[base + g] |= !u->gpu_busy[base + g];
            both[k]->slots_free[n] -= slots;
            both[k]->slots_left -= slots;
            both[k]->gpus_free[n] -= gpus;
            both[k]->gpus_left -= gpus;
        }
    }
}

int usage_node_room(const struct usage *u, int n, int cpw, int gpw)
{
    if (u->c->node[n].offline)
        return 0;
    int room = cpw > 0 ? u->slots_free[n] / cpw : u->c->node[n].slots > 0 ? 1 << 30 : 0;
    if (gpw > 0 && u->gpus_free[n] / gpw < room)
        room = u->gpus_free[n] / gpw;
    return room;
}

/*
 * Appends a part of k workers on node n to out, with the lowest free GPU ids there that
 * are not in taken (out's own GPUs on n, which u does not yet count). out has room for the
 * parts and GPUs (the caller sized it).
 */
static void add_part(const struct usage *u, struct placement *out, int n, int k, int gpw)
{
    struct placement_part *pp = &out->part[out->nparts++];
    int base = u->c->gpu_base[n];
    pp->node = n;
    pp->workers = k;
    pp->ngpus = k * gpw;
    pp->gpu_off = out->ngpus;
    for (int id = 0, got = 0; got < pp->ngpus && id < u->c->node[n].gpus; id++) {
        int mine = 0;
        if (u->gpu_busy[base + id])
            continue;
        for (int q = 0; q < out->nparts - 1 && !mine; q++) {
            if (out->part[q].node != n)
                continue;
            for (int g = 0; g < out->part[q].ngpus; g++)
                mine |= out->gpu[out->part[q].gpu_off + g] == id;
        }
        if (!mine) {
            out->gpu[out->ngpus++] = id;
            got++;
        }
    }
    out->workers += k;
}

/* n / d without the division where d is 1 (most jobs): extend() asks every node. */
static int per(int n, int d)
{
    return d == 1 ? n : n / d;
}

/* The room of node n, less what out already takes there. */
static int room_left(const struct usage *u, const struct placement *out, int n, int cpw, int gpw)
{
    int slots = u->slots_free[n], gpus = u->gpus_free[n], room;
    if (u->c->node[n].offline)
        return 0;
    for (int q = 0; q < out->nparts; q++) {
        if (out->part[q].node == n) {
            slots -= out->part[q].workers * cpw;
            gpus -= out->part[q].ngpus;
        }
    }
    room = cpw > 0 ? per(slots, cpw) : u->c->node[n].slots > 0 ? 1 << 30 : 0;
    if (gpw > 0 && per(gpus, gpw) < room)
        room = per(gpus, gpw);
    return room < 0 ? 0 : room;
}

/* Adds workers more workers to out (already holding its own parts): out's own nodes first,
 * then the fullest single node that takes the rest, then the nodes with most room. */
static int extend(const struct usage *u, struct placement *out, int workers, int cpw, int gpw)
{
    const struct cluster *c = u->c;
    int need = workers, own = out->nparts;

    if ((long)workers * cpw > u->slots_left || (long)workers * gpw > u->gpus_left)
        return errno = ENOSPC, -1;
    for (int q = 0; q < own && need > 0; q++) {
        int n = out->part[q].node, k = room_left(u, out, n, cpw, gpw);
        if (k > need)
            k = need;
        if (k > 0) {
            add_part(u, out, n, k, gpw);
            need -= k;
        }
    }
    while (need > 0) {
        int best = -1, best_room = 0, fit = -1, fit_room = 0;
        for (int n = 0; n < c->nnodes; n++) {
            int k = room_left(u, out, n, cpw, gpw);
            if (k >= need && (fit < 0 || k < fit_room)) {
                fit = n;
                fit_room = k;
            }
            if (k > best_room) {
                best = n;
                best_room = k;
            }
        }
        if (fit >= 0) {
            add_part(u, out, fit, need, gpw);
            need = 0;
        } else if (best >= 0) {
            add_part(u, out, best, best_room, gpw);
            need -= best_room;
        } else {
            return errno = ENOSPC, -1;
        }
    }
    return 0;
}

/* Merges parts on the same node (a grow may add a second part on a node it had). */
static void merge_parts(struct placement *p)
{
    int *gpu = p->gpu;
    int ngpus = 0, nparts = 0;
    int *sorted = malloc((size_t)(p->ngpus > 0 ? p->ngpus : 1) * sizeof(int));
    if (sorted == NULL)
        return; /* correct as it is, only less tidy */
    for (int i = 0; i < p->nparts; i++) {
        struct placement_part cur = p->part[i];
        int j, dup = 0;
        for (j = 0; j < nparts; j++)
            dup |= p->part[j].node == cur.node;
        if (dup)
            continue;
        cur.gpu_off = ngpus;
        cur.workers = cur.ngpus = 0;
        for (j = i; j < p->nparts; j++) {
            if (p->part[j].node != cur.node)
                continue;
            cur.workers += p->part[j].workers;
            for (int g = 0; g < p->part[j].ngpus; g++)
                sorted[ngpus + cur.ngpus++] = gpu[p->part[j].gpu_off + g];
        }
        ngpus += cur.ngpus;
        p->part[nparts++] = cur;
    }
    memcpy(p->gpu, sorted, (size_t)ngpus * sizeof(int));
    free(sorted);
    p->nparts = nparts;
}

int usage_place(const struct usage *u, int workers, int cpw, int gpw, struct placement *out)
{
    int nodes = u->c->nnodes;
    if (placement_alloc(out, nodes < workers ? nodes : workers, workers * gpw) < 0)
        return -1;
    if (workers <= 0 || extend(u, out, workers, cpw, gpw) < 0) {
        int e = workers <= 0 ? EINVAL : errno;
        placement_clear(out);
        return errno = e, -1;
    }
    return 0;
}

int usage_resize(const struct usage *u, const struct placement *p, int workers, int cpw, int gpw,
                 struct placement *out)
{
    int nodes = u->c->nnodes, left = workers;
    if (workers <= 0)
        return errno = EINVAL, -1;
    if (placement_alloc(out, nodes + p->nparts, workers * gpw + p->ngpus) < 0)
        return -1;
    /* The first workers of p, in rank order, except those on an offline node (a restart
     * could not start there). */
    for (int i = 0; i < p->nparts && left > 0; i++) {
        struct placement_part *pp;
        int k = p->part[i].workers < left ? p->part[i].workers : left;
        if (u->c->node[p->part[i].node].offline)
            continue;
        pp = &out->part[out->nparts++];
        *pp = p->part[i];
        pp->workers = k;
        pp->ngpus = k * gpw;
        if (pp->ngpus > p->part[i].ngpus)
            pp->ngpus = p->part[i].ngpus;
        pp->gpu_off = out->ngpus;
        memcpy(out->gpu + out->ngpus, p->gpu + p->part[i].gpu_off, (size_t)pp->ngpus * sizeof(int));
        out->ngpus += pp->ngpus;
        out->workers += k;
        left -= k;
    }
    if (left > 0) {
        /* room_left subtracts out's parts from u's free counts, but p's are already taken
         * in u: count only the new parts. */
        struct placement grown = {0};
        int rc;
        if (placement_alloc(&grown, nodes + p->nparts, left * gpw) < 0) {
            placement_clear(out);
            return -1;
        }
        /* Prefer p's nodes: seed grown with empty parts on them. */
        for (int i = 0; i < p->nparts; i++) {
            grown.part[grown.nparts] = (struct placement_part){p->part[i].node, 0, 0, grown.ngpus};
            grown.nparts++;
        }
        rc = extend(u, &grown, left, cpw, gpw);
        if (rc == 0) {
            for (int i = 0; i < grown.nparts; i++) {
                struct placement_part *pp;
                if (grown.part[i].workers == 0)
                    continue;
                pp = &out->part[out->nparts++];
                *pp = grown.part[i];
                pp->gpu_off = out->ngpus;
                memcpy(out->gpu + out->ngpus, grown.gpu + grown.part[i].gpu_off,
                       (size_t)pp->ngpus * sizeof(int));
                out->ngpus += pp->ngpus;
                out->workers += pp->workers;
            }
        }
        placement_clear(&grown);
        if (rc < 0) {
            int e = errno;
            placement_clear(out);
            return errno = e, -1;
        }
        merge_parts(out);
    }
    return 0;
}

long cluster_capacity(const struct cluster *c, int cpw, int gpw)
{
    long total = 0;
    for (int n = 0; n < c->nnodes; n++) {
        long room = cpw > 0 ? c->node[n].slots / cpw : c->node[n].slots > 0 ? 1L << 30 : 0;
        if (gpw > 0 && c->node[n].gpus / gpw < room)
            room = c->node[n].gpus / gpw;
        total += room;
    }
    return total;
}
