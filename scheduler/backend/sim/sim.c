/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_sim.c - attempts on a virtual clock, without processes (backend_sim.h). Events
 * wait in a heap ordered by time, so a step of the clock costs only what happens in it:
 * ringsim's hundred thousand jobs never scan every attempt.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_job {
    char id[32];
    double done; /* steps kept by checkpoints */
    double total;
    struct sim_job *next; /* hash chain */
};

enum { EV_READY, EV_REPORT, EV_EXIT, EV_SEGMENT };

struct sim_attempt {
    int live;
    unsigned gen; /* events of an older generation are stale */
    struct sim_job *job;
    int workers;
    struct backend_start start; /* for the model at each segment (placement copied) */
    struct placement placement;
    double ready;                 /* progress starts then */
    double seg_t, seg_done, rate; /* the current segment: from seg_t at seg_done, at rate */
    double seg_until;             /* ... until this many steps */
    int exiting, status;
    int next_free;
};

struct sim_event {
    double t;
    int att;
    unsigned gen;
    int kind;
};

struct sim {
    double now, start_s, stop_s, report_s;
    int nodes, slots, gpus;
    struct sim_model model;
    struct sim_attempt *att;
    int natt, cap, free_head, running;
    struct sim_event *heap;
    int nheap, heap_cap;
    struct sim_job **bucket;
    size_t nbuckets, njobs;
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static struct sim_job *job_find(struct sim *s, const char *id, int create)
{
    struct sim_job *j;
    size_t b;
    if (s->nbuckets == 0 || (create && s->njobs >= s->nbuckets)) {
        size_t n = s->nbuckets ? s->nbuckets * 2 : 1024;
        struct sim_job **grown = calloc(n, sizeof(*grown));
        if (grown == NULL)
            return NULL;
        for (size_t i = 0; i < s->nbuckets; i++) {
            while (s->bucket[i]) {
                struct sim_job *x = s->bucket[i];
                s->bucket[i] = x->next;
                x->next = grown[hash_str(x->id) & (n - 1)];
                grown[hash_str(x->id) & (n - 1)] = x;
            }
        }
        free(s->bucket);
        s->bucket = grown;
        s->nbuckets = n;
    }
    b = hash_str(id) & (s->nbuckets - 1);
    for (j = s->bucket[b]; j; j = j->next)
        if (strcmp(j->id, id) == 0)
            return j;
    if (!create || (j = calloc(1, sizeof(*j))) == NULL)
        return NULL;
    snprintf(j->id, sizeof(j->id), "%s", id);
    j->next = s->bucket[b];
    s->bucket[b] = j;
    s->njobs++;
    return j;
}

static int push(struct sim *s, double t, int att, int kind)
{
    int i;
    if (s->nheap == s->heap_cap) {
        int cap = s->heap_cap ? s->heap_cap * 2 : 256;
        struct sim_event *grown = realloc(s->heap, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return errno = ENOMEM, -1;
        s->heap = grown;
        s->heap_cap = cap;
    }
    i = s->nheap++;
    while (i > 0 && s->heap[(i - 1) / 2].t > t) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = (struct sim_event){t, att, s->att[att].gen, kind};
    return 0;
}

static struct sim_event pop(struct sim *s)
{
    struct sim_event top = s->heap[0], last = s->heap[--s->nheap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= s->nheap)
            break;
        if (c + 1 < s->nheap && s->heap[c + 1].t < s->heap[c].t)
            c++;
        if (s->heap[c].t >= last.t)
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    s->heap[i] = last;
    return top;
}

/* Drops stale events from the top, so that the top is a real one. */
static void clean_top(struct sim *s)
{
    while (s->nheap > 0) {
        struct sim_event *e = &s->heap[0];
        if (s->att[e->att].live && s->att[e->att].gen == e->gen)
            return;
        pop(s);
    }
}

static int default_speed(void *arg, const struct backend_start *s, double done, double *rate,
                         double *until, double *steps)
{
    *rate = s->placement->workers;
    *until = *steps = 600;
    return 0;
}

static void set_option(struct sim *s, const char *key, double v)
{
    if (!strcmp(key, "nodes"))
        s->nodes = (int)v;
    else if (!strcmp(key, "slots"))
        s->slots = (int)v;
    else if (!strcmp(key, "gpus"))
        s->gpus = (int)v;
    else if (!strcmp(key, "start_s"))
        s->start_s = v;
    else if (!strcmp(key, "stop_s"))
        s->stop_s = v;
    else if (!strcmp(key, "report_s"))
        s->report_s = v;
}

static int sim_init(const struct backend_config *cfg, void **ctx, struct error *err)
{
    struct sim *s = calloc(1, sizeof(*s));
    const char *o = cfg ? cfg->options : NULL;
    if (s == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    s->nodes = 4;
    s->slots = 8;
    s->gpus = 4;
    s->start_s = 30;
    s->free_head = -1;
    s->model = (struct sim_model){default_speed, NULL};
    while (o != NULL && *o) {
        char key[32];
        double v;
        int n = 0;
        if (sscanf(o, "%31[a-z_]=%lf%n", key, &v, &n) != 2 || n == 0) {
            free(s);
            return errno = EINVAL, errprintf(err, "sim backend: bad option at '%.40s'", o);
        }
        set_option(s, key, v);
        o += n;
        if (*o == ',')
            o++;
    }
    if (s->nodes < 1 || s->slots < 0 || s->gpus < 0) {
        free(s);
        return errno = EINVAL, errprintf(err, "sim backend: nodes must be >= 1");
    }
    *ctx = s;
    return 0;
}

static void sim_fini(void *ctx)
{
    struct sim *s = ctx;
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nbuckets; i++) {
        while (s->bucket[i]) {
            struct sim_job *x = s->bucket[i];
            s->bucket[i] = x->next;
            free(x);
        }
    }
    free(s->bucket);
    for (int i = 0; i < s->natt; i++)
        placement_clear(&s->att[i].placement);
    free(s->att);
    free(s->heap);
    free(s);
}

static int sim_describe(void *ctx, struct cluster **out, struct error *err)
{
    struct sim *s = ctx;
    *out = cluster_create(s->nodes, s->slots, s->gpus);
    if (*out == NULL)
        return errprintf(err, "out of memory");
    return 0;
}

static int att_of(struct sim *s, const char *id)
{
    char *end;
    long i;
    if (id[0] != 's')
        return -1;
    i = strtol(id + 1, &end, 10);
    if (*end != '\0' || i < 0 || i >= s->natt || !s->att[i].live)
        return -1;
    return (int)i;
}

/* Schedules attempt i's next event from its segment: the segment's end, or the exit. */
static int schedule(struct sim *s, int i)
{
    struct sim_attempt *a = &s->att[i];
    double from = a->seg_t > a->ready ? a->seg_t : a->ready;
    double t = from + (a->seg_until - a->seg_done) / a->rate;
    return push(s, t, i, a->seg_until >= a->job->total ? EV_EXIT : EV_SEGMENT);
}

/* The model's speed for attempt a from done steps on. */
static int segment(struct sim *s, struct sim_attempt *a, double done)
{
    double rate, until, total;
    /* Pointed again at every call: the attempts' table moves when it grows (sim_start), and
     * a placement pointer kept from the start would read freed memory. */
    a->start.placement = &a->placement;
    if (s->model.speed(s->model.arg, &a->start, done, &rate, &until, &total) < 0 || !(rate > 0) ||
        !(total > 0))
        return -1;
    a->job->total = total;
    a->rate = rate;
    a->seg_done = done;
    a->seg_until = until > done && until < total ? until : total;
    return 0;
}

static int sim_start(void *ctx, const struct backend_start *bs, char *id, size_t idlen,
                     struct error *err)
{
    struct sim *s = ctx;
    struct sim_job *job = job_find(s, bs->job_id, 1);
    struct sim_attempt *a;
    int i;

    if (job == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    if (s->free_head >= 0) {
        i = s->free_head;
        s->free_head = s->att[i].next_free;
    } else {
        if (s->natt == s->cap) {
            int cap = s->cap ? s->cap * 2 : 256;
            struct sim_attempt *grown = realloc(s->att, (size_t)cap * sizeof(*grown));
            if (grown == NULL)
                return errno = ENOMEM, errprintf(err, "out of memory");
            s->att = grown;
            s->cap = cap;
        }
        i = s->natt++;
        memset(&s->att[i], 0, sizeof(s->att[i]));
    }
    a = &s->att[i];
    a->gen++;
    a->job = job;
    a->workers = bs->placement->workers;
    a->start = *bs;
    a->start.spec = NULL;
    a->start.run_dir = a->start.checkpoint_dir = a->start.owner = NULL;
    a->start.job_id = job->id;
    if (placement_copy(&a->placement, bs->placement) < 0)
        goto oom;
    a->ready = a->seg_t = s->now + s->start_s;
    a->exiting = 0;
    a->status = 0;
    if (segment(s, a, job->done) < 0) {
        placement_clear(&a->placement);
        a->next_free = s->free_head;
        s->free_head = i;
        return errno = EINVAL, errprintf(err, "the sim model cannot run %s on %d workers",
                                         bs->job_id, bs->placement->workers);
    }
    a->live = 1;
    if (push(s, a->ready, i, EV_READY) < 0 || schedule(s, i) < 0) {
        a->live = 0;
        goto oom;
    }
    s->running++;
    snprintf(id, idlen, "s%d", i);
    return 0;
oom:
    placement_clear(&a->placement);
    a->next_free = s->free_head;
    s->free_head = i;
    return errno = ENOMEM, errprintf(err, "out of memory");
}

/* Steps attempt a has done by now (its checkpoint included). */
static double steps_now(const struct sim *s, const struct sim_attempt *a)
{
    double from = a->seg_t > a->ready ? a->seg_t : a->ready, d = a->seg_done;
    if (!a->exiting && s->now > from)
        d += (s->now - from) * a->rate;
    return d < a->seg_until ? d : a->seg_until;
}

static int sim_signal(void *ctx, const char *id, int sig)
{
    struct sim *s = ctx;
    int i = att_of(s, id);
    struct sim_attempt *a;
    if (i < 0)
        return errno = ESRCH, -1;
    a = &s->att[i];
    if (sig == 0)
        return 0;
    if (sig == SIGKILL) {
        a->gen++;
        a->exiting = 1;
        a->status = 128 + SIGKILL;
        return push(s, s->now, i, EV_EXIT);
    }
    if (a->exiting)
        return 0;
    a->job->done = steps_now(s, a); /* the checkpoint at the stop */
    a->exiting = 1;
    a->status = 75;
    a->gen++;
    return push(s, s->now + s->stop_s, i, EV_EXIT);
}

static int sim_poll(void *ctx, struct backend_event *out, int max)
{
    struct sim *s = ctx;
    int n = 0;
    while (n < max) {
        struct sim_event e;
        struct sim_attempt *a;
        clean_top(s);
        if (s->nheap == 0 || s->heap[0].t > s->now)
            break;
        e = pop(s);
        a = &s->att[e.att];
        memset(&out[n], 0, sizeof(out[n]));
        snprintf(out[n].id, sizeof(out[n].id), "s%d", e.att);
        out[n].time = e.t;
        if (e.kind == EV_SEGMENT) { /* the speed changes here: no event for the loop */
            a->seg_t = e.t;
            if (segment(s, a, a->seg_until) < 0) {
                a->exiting = 1;
                a->status = 1;
                push(s, e.t, e.att, EV_EXIT);
            } else {
                schedule(s, e.att);
            }
            continue;
        }
        if (e.kind == EV_EXIT) {
            out[n].kind = BACKEND_EXITED;
            out[n].status = a->status;
            if (a->status == 0)
                a->job->done = a->job->total;
            placement_clear(&a->placement);
            a->live = 0;
            a->gen++;
            a->next_free = s->free_head;
            s->free_head = e.att;
            s->running--;
        } else {
            double done = steps_now(s, a);
            out[n].kind = BACKEND_PROGRESS;
            out[n].step = (long)done;
            out[n].total_steps = (long)a->job->total;
            out[n].samples = done;
            out[n].total_samples = a->job->total;
            out[n].samples_per_s = a->rate;
            out[n].world_size = a->workers;
            out[n].steady = 1;
            if (s->report_s > 0)
                push(s, e.t + s->report_s, e.att, EV_REPORT);
        }
        n++;
    }
    return n;
}

static int sim_recover(void *ctx, const char *id, const struct backend_start *s, struct error *err)
{
    return BACKEND_GONE; /* a new sim backend knows nothing of an old one */
}

static double sim_now(void *ctx)
{
    return ((struct sim *)ctx)->now;
}

const struct backend_ops backend_sim_ops = {
    .name = "sim",
    .summary = "no processes: a virtual clock and a model of each job's speed",
    .id_label = "simulated attempt",
    .init = sim_init,
    .fini = sim_fini,
    .describe = sim_describe,
    .start = sim_start,
    .signal = sim_signal,
    .poll = sim_poll,
    .recover = sim_recover,
    .now = sim_now,
};

void backend_sim_set_model(void *ctx, const struct sim_model *m)
{
    struct sim *s = ctx;
    if (m != NULL)
        s->model = *m;
    else
        s->model = (struct sim_model){default_speed, NULL};
}

void backend_sim_advance(void *ctx, double t)
{
    struct sim *s = ctx;
    if (t > s->now)
        s->now = t;
}

double backend_sim_next_event(void *ctx)
{
    struct sim *s = ctx;
    clean_top(s);
    return s->nheap > 0 ? s->heap[0].t : INFINITY;
}

double backend_sim_steps(void *ctx, const char *job_id)
{
    struct sim *s = ctx;
    struct sim_job *j = job_find(s, job_id, 0);
    if (j == NULL)
        return 0;
    for (int i = 0; i < s->natt; i++) {
        if (s->att[i].live && s->att[i].job == j)
            return steps_now(s, &s->att[i]);
    }
    return j->done;
}

int backend_sim_running(void *ctx)
{
    return ((struct sim *)ctx)->running;
}
