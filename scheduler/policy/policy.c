/* SPDX-License-Identifier: Apache-2.0 */
/* policy.c - what the policies share: defaults, lookup, ordering keys and placement. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_impl.h"

void policy_params_default(struct policy_params *p)
{
    *p = (struct policy_params){
        .interval_s = 60,
        /* Pollux's simulator charges 30 s per reallocation; a measured cost replaces it. */
        .restart_cost_s = 30,
        .hysteresis = 2,
        /* One threshold at 16 GPU-hours, as in Pollux's Tiresias baseline. */
        .las_threshold = 16 * 3600.0,
        .las_queues = 2,
        .starve_factor = 4,
        .starve_min_s = 600,
        .aging_s = 3600,
        .reserve_after_s = 3600,
    };
}

static const struct policy_ops *const all[] = {&policy_fifo, &policy_priority, &policy_tiresias,
                                               &policy_dynamic, NULL};

const struct policy_ops *policy_find(const char *name)
{
    for (int i = 0; all[i]; i++) {
        if (name != NULL && strcmp(all[i]->name, name) == 0)
            return all[i];
    }
    return NULL;
}

const struct policy_ops *policy_at(int i)
{
    return i >= 0 && i < (int)(sizeof(all) / sizeof(all[0])) ? all[i] : NULL;
}

const char *policy_names(void)
{
    static char names[256]; /* written once: the table is constant */
    if (names[0] == '\0') {
        size_t at = 0;
        for (int i = 0; all[i] && at < sizeof(names); i++)
            at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s", i ? ", " : "",
                                   all[i]->name);
    }
    return names;
}

const struct policy_setting *policy_setting_find(const char *key)
{
    for (int i = 0; all[i]; i++)
        for (const struct policy_setting *ps = all[i]->settings; ps && ps->s.key; ps++)
            if (key != NULL && strcmp(ps->s.key, key) == 0)
                return ps;
    return NULL;
}

int policy_config(struct policy_params *p, const char *key, const char *value, struct error *err)
{
    const struct policy_setting *ps = policy_setting_find(key);
    char *end;
    double x;
    if (ps == NULL)
        return errno = ENOENT, errprintf(err, "no policy has a setting '%s'", key);
    errno = 0;
    x = strtod(value, &end);
    if (errno || end == value || *end != '\0' || !(x >= ps->lo && x <= ps->hi))
        return errno = EINVAL, errprintf(err, "bad value '%s' for %s", value, key);
    *(double *)((char *)p + ps->offset) = x;
    return 0;
}

void policy_targets_clear(struct policy_target *out, int n)
{
    for (int i = 0; i < n; i++)
        placement_clear(&out[i].placement);
}

static int key_cmp(const void *pa, const void *pb)
{
    const struct order_key *a = pa, *b = pb;
    for (int k = 0; k < 3; k++) {
        if (a->k[k] != b->k[k])
            return a->k[k] < b->k[k] ? -1 : 1;
    }
    return (a->job > b->job) - (a->job < b->job);
}

/* Distinct (k[0], k[1]) classes the counting sort handles; beyond, qsort. */
#define CLASSES 64
/* Slots of the table that finds a key's class: a power of two, twice CLASSES, so that a
 * probe sequence always ends at an empty slot and stays short. */
#define CLASS_SLOTS 128

/*
 * Where (a, b)'s class is looked up first in order_sort's table. Keys equal by == must
 * hash alike: adding 0.0 turns -0.0 (a negated priority of 0) into 0.0.
 */
static unsigned class_hash(double a, double b)
{
    uint64_t x, y;
    a += 0.0;
    b += 0.0;
    memcpy(&x, &a, sizeof(x));
    memcpy(&y, &b, sizeof(y));
    x = (x ^ (y * 0x9e3779b97f4a7c15u)) * 0xbf58476d1ce4e5b9u;
    return (unsigned)(x >> 57) & (CLASS_SLOTS - 1);
}

void order_sort(struct order_key *key, int n, int *order)
{
    double c0[CLASSES], c1[CLASSES];
    int nc = 0, count[CLASSES + 1] = {0}, rank[CLASSES], fast = 1;
    unsigned char slot[CLASS_SLOTS] = {0}; /* class + 1, or 0: empty */
    unsigned char *cls = malloc((size_t)(n > 0 ? n : 1));

    /*
     * Policies give jobs in submission order with keys (class, class, submitted): then the
     * order is a stable counting sort over a few classes, O(n), which matters when a pass
     * runs over thousands of jobs at every arrival. Anything else goes to qsort.
     */
    for (int i = 0; i < n && fast && cls != NULL; i++) {
        unsigned h = class_hash(key[i].k[0], key[i].k[1]);
        int c;
        /* Linear probing: a pass sorts every job, and a walk over the classes was most of
         * a 100k-job ringsim run's sorting. */
        while (slot[h] != 0 && (c0[slot[h] - 1] != key[i].k[0] || c1[slot[h] - 1] != key[i].k[1]))
            h = (h + 1) & (CLASS_SLOTS - 1);
        if (slot[h] != 0) {
            c = slot[h] - 1;
        } else {
            if (nc == CLASSES) {
                fast = 0;
                break;
            }
            c = nc;
            c0[nc] = key[i].k[0];
            c1[nc++] = key[i].k[1];
            slot[h] = (unsigned char)nc;
        }
        cls[i] = (unsigned char)c;
        count[c + 1]++;
        if (i > 0 && cls[i - 1] == c && key[i - 1].k[2] > key[i].k[2])
            fast = 0; /* not in k[2] order within a class */
    }
    if (fast && cls != NULL) {
        /* k[2] must also rise within each class across non-adjacent entries. */
        double last[CLASSES];
        for (int c = 0; c < nc; c++)
            last[c] = -INFINITY;
        for (int i = 0; i < n && fast; i++) {
            if (key[i].k[2] < last[cls[i]])
                fast = 0;
            last[cls[i]] = key[i].k[2];
        }
    }
    if (!fast || cls == NULL) {
        qsort(key, (size_t)n, sizeof(*key), key_cmp);
        for (int i = 0; i < n; i++)
            order[i] = key[i].job;
        free(cls);
        return;
    }
    /* The classes' order, then each job into its class's slot. */
    for (int c = 0; c < nc; c++) {
        rank[c] = 0;
        for (int d = 0; d < nc; d++)
            if (c0[d] < c0[c] || (c0[d] == c0[c] && c1[d] < c1[c]))
                rank[c]++;
    }
    {
        int start[CLASSES], by_rank[CLASSES];
        for (int c = 0; c < nc; c++)
            by_rank[rank[c]] = c;
        for (int r = 0, at = 0; r < nc; r++) {
            start[by_rank[r]] = at;
            at += count[by_rank[r] + 1];
        }
        for (int i = 0; i < n; i++)
            order[start[cls[i]]++] = key[i].job;
    }
    free(cls);
}

double policy_aged_priority(const struct policy_snapshot *s, const struct policy_job *j)
{
    /* A running job keeps the levels it gained while it waited: otherwise a job that has
     * just started would rank below the jobs still waiting beside it and be preempted at
     * once. */
    double until = j->workers > 0 ? j->started : s->now;
    double p = j->priority;
    if (s->params.aging_s > 0 && until > j->waiting_since)
        p += floor((until - j->waiting_since) / s->params.aging_s);
    return p;
}

/* Tiresias' promotion: a job that waited starve_factor times as long as it had run (and at
 * least starve_min_s) is served as if new. */
static int starved(const struct policy_params *p, double waited, double run_time)
{
    return run_time > 0 && waited >= p->starve_min_s && waited >= p->starve_factor * run_time;
}

int policy_las_queue(const struct policy_snapshot *s, const struct policy_job *j)
{
    const struct policy_params *p = &s->params;
    double bound = p->las_threshold, service = j->service;
    int q = 0;

    /* Starvation: a waiting job that starved is served as if new: its wait is bounded by
     * that, plus the time the first queue's jobs ahead of it take. */
    if (j->workers == 0 && starved(p, s->now - j->waiting_since, j->run_time))
        return 0;
    /* A job that started because it starved counts only what it has attained since, as
     * Tiresias resets a promoted job's executed time: else it would be demoted, and
     * preempted, the moment it started. */
    if (j->workers > 0) {
        double ran = s->now > j->started ? s->now - j->started : 0;
        if (starved(p, j->started - j->waiting_since, j->run_time - ran))
            service = ran * j->workers * policy_unit(j);
    }
    while (q + 1 < p->las_queues && service >= bound) {
        q++;
        bound *= 10;
    }
    return q;
}

static void note(struct policy_target *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends to t's reason. */
static void note(struct policy_target *t, const char *fmt, ...)
{
    size_t n = strlen(t->reason);
    va_list ap;
    if (n + 2 >= sizeof(t->reason))
        return;
    va_start(ap, fmt);
    vsnprintf(t->reason + n, sizeof(t->reason) - n, fmt, ap);
    va_end(ap);
}

int placer_init(struct placer *p, const struct policy_snapshot *s, struct policy_target *out)
{
    memset(p, 0, sizeof(*p));
    p->s = s;
    p->out = out;
    if (usage_init_copy(&p->u, s->occupied != NULL ? s->occupied : s->pinned) < 0)
        return -1;
    p->all_taken = s->occupied != NULL;
    p->kept = calloc((size_t)(s->njobs > 0 ? s->njobs : 1), sizeof(int));
    if (p->kept == NULL) {
        usage_clear(&p->u);
        return errno = ENOMEM, -1;
    }
    for (int i = 0; i < s->njobs; i++)
        out[i].workers = 0;
    return 0;
}

/* With all_taken, a running job that is not kept gives its place back. */
static void placer_release(struct placer *p, int i)
{
    const struct policy_job *j = &p->s->job[i];
    if (p->all_taken && j->workers > 0 && j->placement != NULL)
        usage_take(&p->u, j->placement, j->cpw, -1);
}

void placer_fini(struct placer *p)
{
    usage_clear(&p->u);
    free(p->kept);
    p->kept = NULL;
}

/* Parts with more workers first (then as they were). */
static int part_cmp(const void *pa, const void *pb)
{
    const struct placement_part *a = pa, *b = pb;
    if (a->workers != b->workers)
        return b->workers - a->workers;
    return a->gpu_off - b->gpu_off;
}

/*
 * A shrink of pl to keep workers that keeps its largest parts: a resize restarts the job
 * anyway, and the fewer nodes it then spans, the less of its step goes to the network
 * (Pollux's traces: yolov3 on 2+2 GPUs steps 1.8x slower than on one node of 4).
 */
static int shrink_packed(const struct usage *u, const struct placement *pl, int keep, int cpw,
                         int gpw, struct placement *out)
{
    struct placement sorted = *pl;
    int rc;
    if (pl->nparts < 2)
        return usage_resize(u, pl, keep, cpw, gpw, out);
    sorted.part = malloc((size_t)pl->nparts * sizeof(*sorted.part));
    if (sorted.part == NULL)
        return errno = ENOMEM, -1;
    memcpy(sorted.part, pl->part, (size_t)pl->nparts * sizeof(*sorted.part));
    qsort(sorted.part, (size_t)pl->nparts, sizeof(*sorted.part), part_cmp);
    rc = usage_resize(u, &sorted, keep, cpw, gpw, out);
    free(sorted.part);
    return rc;
}

int placer_keep(struct placer *p, int i, int keep)
{
    const struct policy_job *j = &p->s->job[i];
    struct policy_target *t = &p->out[i];
    if (keep > j->workers)
        keep = j->workers;
    if (keep <= 0 || j->placement == NULL || p->kept[i] > 0)
        return p->kept[i];
    if (keep == j->workers) { /* where it is: no copy (the loop checks the plan after) */
        if (!p->all_taken)
            usage_take(&p->u, j->placement, j->cpw, 1);
        t->unchanged = 1;
        p->kept[i] = t->workers = keep;
        return keep;
    }
    placer_release(p, i);
    if (shrink_packed(&p->u, j->placement, keep, j->cpw, j->gpw, &t->placement) < 0 ||
        usage_apply(&p->u, &t->placement, j->cpw, 1) < 0) {
        placement_clear(&t->placement);
        return 0;
    }
    p->kept[i] = t->workers = keep;
    return keep;
}

int placer_grow(struct placer *p, int i, int want)
{
    const struct policy_job *j = &p->s->job[i];
    struct policy_target *t = &p->out[i];
    struct placement pl = {0};
    int have = p->kept[i], asked = want;

    if (want > j->max)
        want = asked = j->max;
    if (want <= have)
        return have;
    /* A cheap bound first: a long queue that does not fit costs no placement search. */
    if (policy_room(j, p->u.slots_left + (long)have * j->cpw,
                    p->u.gpus_left + (long)have * j->gpw) < (have ? have + 1 : j->min)) {
        if (have == 0)
            note(t, "; no room for %d worker%s", asked, asked == 1 ? "" : "s");
        return have;
    }
    while (want > have) {
        int rc = have > 0 ? usage_resize(&p->u, policy_where(p->s, i, t), want, j->cpw, j->gpw, &pl)
                          : usage_place(&p->u, want, j->cpw, j->gpw, &pl);
        if (rc == 0 && have > 0 && pl.nparts > 1) {
            /* It restarts anyway: on fewer nodes, when a fresh placement finds them. */
            const struct placement *cur = policy_where(p->s, i, t);
            struct placement fresh = {0};
            usage_take(&p->u, cur, j->cpw, -1);
            if (usage_place(&p->u, want, j->cpw, j->gpw, &fresh) == 0 && fresh.nparts < pl.nparts) {
                placement_clear(&pl);
                pl = fresh;
                fresh = (struct placement){0};
            }
            placement_clear(&fresh);
            usage_take(&p->u, cur, j->cpw, 1);
        }
        if (rc == 0)
            break;
        if (errno == ENOMEM)
            return -1;
        want = have > 0 ? have + (want - have) / 2 : want / 2;
        if (have == 0 && want < j->min)
            want = 0;
    }
    if (want <= have) {
        if (have > 0)
            note(t, "; no room to grow to %d, stays at %d", asked, have);
        else
            note(t, "; no room for %d worker%s", asked, asked == 1 ? "" : "s");
        return have;
    }
    if (want != asked)
        note(t, "; %d fit of the %d planned", want, asked);
    if (have > 0)
        usage_apply(&p->u, policy_where(p->s, i, t), j->cpw, -1);
    usage_apply(&p->u, &pl, j->cpw, 1);
    placement_clear(&t->placement);
    t->placement = pl;
    t->unchanged = 0;
    p->kept[i] = t->workers = want;
    return want;
}

int policy_place(const struct policy_snapshot *s, const int *size, const int *order,
                 struct policy_target *out)
{
    struct placer p;
    if (placer_init(&p, s, out) < 0)
        return -1;
    for (int i = 0; i < s->njobs; i++) {
        if (s->job[i].workers == 0)
            continue;
        if (size[i] > 0)
            placer_keep(&p, i, size[i]);
        else
            placer_release(&p, i);
    }
    for (int k = 0; k < s->njobs; k++) {
        int i = order[k];
        if (size[i] > p.kept[i] && placer_grow(&p, i, size[i]) < 0) {
            placer_fini(&p);
            return -1;
        }
    }
    placer_fini(&p);
    return 0;
}

/* Rounds of decide-and-place: each one only caps jobs that did not fit, so a few suffice. */
#define PLACE_ROUNDS 6

int policy_run(const struct policy_snapshot *s, struct policy_target *out, policy_decide_fn *decide,
               void *arg)
{
    int n = s->njobs, m = n > 0 ? n : 1, rc = -1;
    int *cap = malloc((size_t)m * sizeof(int)), *size = malloc((size_t)m * sizeof(int));
    int *order = malloc((size_t)m * sizeof(int));

    if (cap == NULL || size == NULL || order == NULL) {
        errno = ENOMEM;
        goto done;
    }
    for (int i = 0; i < n; i++)
        cap[i] = s->job[i].max;
    for (int round = 0; round < PLACE_ROUNDS; round++) {
        int short_of = 0;
        for (int i = 0; i < n; i++) {
            size[i] = 0;
            out[i].reason[0] = '\0';
            out[i].unchanged = 0;
        }
        policy_targets_clear(out, n);
        if (decide(s, cap, size, order, out, arg) < 0 || policy_place(s, size, order, out) < 0)
            goto done;
        for (int i = 0; i < n; i++) {
            if (out[i].workers < size[i]) {
                cap[i] = out[i].workers;
                short_of = 1;
            }
        }
        if (!short_of)
            break;
    }
    rc = 0;
done:
    free(cap);
    free(size);
    free(order);
    return rc;
}
