/* SPDX-License-Identifier: Apache-2.0 */
/* trace.c - Pollux-format application traces and the job model over them (trace.h). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

struct table { /* one validation-B.csv */
    int batch, rows;
    double *progress, *sqr, *var;
};

struct meas {     /* one measurement of step and sync time */
    char key[24]; /* the placement's digits ("" for scalability rows) */
    int nodes, replicas;
    double lbsz, step, sync;
};

struct pair { /* every measurement of one (nodes, replicas), sorted by lbsz */
    int nodes, replicas, n;
    double *lbsz, *step, *sync;
};

struct trace_app {
    char name[64];
    int ntab, *batches;
    struct table *tab;
    int epochs, init_bsz, max_bsz;
    double min_lbsz, max_lbsz;
    struct meas *m; /* exact placements, sorted by key then lbsz */
    int nm;
    struct pair *pairs; /* grouped means and scalability rows */
    int npairs;
    struct {
        int batch;
        double iterations;
    } cache[16];
    int ncache;
};

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

/* Reads a CSV of numbers after its header: calls row(arg, fields, n) per line. */
static int read_csv(const char *path, int (*row)(void *, char **, int), void *arg, char *err,
                    size_t errlen)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int lineno = 0;
    if (f == NULL)
        return fail(err, errlen, "cannot read %s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL) {
        char *fields[8], *save = NULL, *tok;
        int n = 0;
        if (lineno++ == 0)
            continue; /* header */
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0')
            continue;
        for (tok = strtok_r(line, ",", &save); tok && n < 8; tok = strtok_r(NULL, ",", &save))
            fields[n++] = tok;
        if (row(arg, fields, n) < 0) {
            fclose(f);
            return fail(err, errlen, "%s:%d: not a row of this format", path, lineno);
        }
    }
    fclose(f);
    return 0;
}

static int num(const char *s, double *out)
{
    char *end;
    *out = strtod(s, &end);
    return end != s && *end == '\0' && isfinite(*out) ? 0 : -1;
}

static int table_row(void *arg, char **f, int n)
{
    struct table *t = arg;
    double p, it, metric, sqr, var;
    double *np, *ns, *nv;
    if (n < 5 || num(f[0], &p) || num(f[1], &it) || num(f[2], &metric) || num(f[3], &sqr) ||
        num(f[4], &var))
        return -1;
    np = realloc(t->progress, (size_t)(t->rows + 1) * sizeof(double));
    if (np == NULL)
        return -1;
    t->progress = np;
    ns = realloc(t->sqr, (size_t)(t->rows + 1) * sizeof(double));
    if (ns == NULL)
        return -1;
    t->sqr = ns;
    nv = realloc(t->var, (size_t)(t->rows + 1) * sizeof(double));
    if (nv == NULL)
        return -1;
    t->var = nv;
    t->progress[t->rows] = p;
    t->sqr[t->rows] = sqr;
    t->var[t->rows] = var;
    t->rows++;
    return 0;
}

struct meas_list {
    struct meas *m;
    int n, cap, scal;
};

static int meas_row(void *arg, char **f, int n)
{
    struct meas_list *l = arg;
    struct meas x;
    double a, b;
    memset(&x, 0, sizeof(x));
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 256;
        struct meas *grown = realloc(l->m, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return -1;
        l->m = grown;
        l->cap = cap;
    }
    if (!l->scal) { /* placement,local_bsz,step_time,sync_time */
        if (n < 4 || strlen(f[0]) >= sizeof(x.key) || strspn(f[0], "0123456789") != strlen(f[0]) ||
            num(f[1], &x.lbsz) || num(f[2], &x.step) || num(f[3], &x.sync))
            return -1;
        snprintf(x.key, sizeof(x.key), "%s", f[0]);
        for (const char *c = f[0]; *c; c++) {
            if (*c != '0') {
                x.nodes++;
                x.replicas += *c - '0';
            }
        }
    } else { /* num_nodes,num_replicas,local_bsz,step_time,sync_time */
        if (n < 5 || num(f[0], &a) || num(f[1], &b) || num(f[2], &x.lbsz) || num(f[3], &x.step) ||
            num(f[4], &x.sync))
            return -1;
        x.nodes = (int)a;
        x.replicas = (int)b;
    }
    l->m[l->n++] = x;
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static int cmp_meas(const void *pa, const void *pb)
{
    const struct meas *a = pa, *b = pb;
    int c = strcmp(a->key, b->key);
    if (c)
        return c;
    if (a->nodes != b->nodes)
        return a->nodes - b->nodes;
    if (a->replicas != b->replicas)
        return a->replicas - b->replicas;
    return (a->lbsz > b->lbsz) - (a->lbsz < b->lbsz);
}

/* Groups the measurements by (nodes, replicas) into pairs, averaging equal lbsz. */
static int build_pairs(struct trace_app *a, struct meas *all, int n)
{
    struct meas *m = malloc((size_t)(n > 0 ? n : 1) * sizeof(*m));
    if (m == NULL)
        return -1;
    memcpy(m, all, (size_t)n * sizeof(*m));
    for (int i = 0; i < n; i++)
        m[i].key[0] = '\0';
    qsort(m, (size_t)n, sizeof(*m), cmp_meas);
    a->pairs = calloc((size_t)(n > 0 ? n : 1), sizeof(*a->pairs));
    if (a->pairs == NULL) {
        free(m);
        return -1;
    }
    for (int i = 0; i < n;) {
        struct pair *p = &a->pairs[a->npairs++];
        int j = i;
        while (j < n && m[j].nodes == m[i].nodes && m[j].replicas == m[i].replicas)
            j++;
        p->nodes = m[i].nodes;
        p->replicas = m[i].replicas;
        p->lbsz = malloc((size_t)(j - i) * sizeof(double));
        p->step = malloc((size_t)(j - i) * sizeof(double));
        p->sync = malloc((size_t)(j - i) * sizeof(double));
        if (p->lbsz == NULL || p->step == NULL || p->sync == NULL) {
            free(m);
            return -1;
        }
        for (int k = i; k < j;) {
            int e = k, cnt = 0;
            double st = 0, sy = 0;
            while (e < j && m[e].lbsz == m[k].lbsz) {
                st += m[e].step;
                sy += m[e].sync;
                cnt++;
                e++;
            }
            p->lbsz[p->n] = m[k].lbsz;
            p->step[p->n] = st / cnt;
            p->sync[p->n] = sy / cnt;
            p->n++;
            k = e;
        }
        i = j;
    }
    free(m);
    return 0;
}

/* The batch sizes that path (dir/name, application name's folder) has a validation-B.csv
 * for, into a->tab. Returns 0, or -1 after writing the error. */
static int find_tables(struct trace_app *a, const char *dir, const char *name, const char *path,
                       char *err, size_t errlen)
{
    DIR *d = opendir(path);
    struct dirent *e;

    if (d == NULL)
        return fail(err, errlen, "no traces for application '%s' in %s: %s", name, dir,
                    strerror(errno));
    while ((e = readdir(d)) != NULL) {
        int b;
        char tail[8];
        if (sscanf(e->d_name, "validation-%d.%7s", &b, tail) == 2 && strcmp(tail, "csv") == 0 &&
            b > 0) {
            struct table *grown = realloc(a->tab, (size_t)(a->ntab + 1) * sizeof(*grown));
            if (grown == NULL) {
                closedir(d);
                return fail(err, errlen, "out of memory");
            }
            a->tab = grown;
            memset(&a->tab[a->ntab], 0, sizeof(a->tab[0]));
            a->tab[a->ntab++].batch = b;
        }
    }
    closedir(d);
    if (a->ntab == 0)
        return fail(err, errlen, "%s has no validation-B.csv", path);
    return 0;
}

/* Application name's validation tables from dir, in batch order (a->batches); path
 * (pathlen bytes) holds dir/name, and is used for the tables' paths. Returns 0, or -1 after
 * writing the error. */
static int read_tables(struct trace_app *a, const char *dir, const char *name, char *path,
                       size_t pathlen, char *err, size_t errlen)
{
    if (find_tables(a, dir, name, path, err, errlen) < 0)
        return -1;
    a->batches = malloc((size_t)a->ntab * sizeof(int));
    if (a->batches == NULL)
        return fail(err, errlen, "out of memory");
    for (int i = 0; i < a->ntab; i++)
        a->batches[i] = a->tab[i].batch;
    qsort(a->batches, (size_t)a->ntab, sizeof(int), cmp_int);
    for (int i = 0; i < a->ntab; i++) { /* tables in batch order */
        for (int k = i; k < a->ntab; k++) {
            if (a->tab[k].batch == a->batches[i]) {
                struct table t = a->tab[i];
                a->tab[i] = a->tab[k];
                a->tab[k] = t;
            }
        }
        snprintf(path, pathlen, "%s/%s/validation-%d.csv", dir, name, a->tab[i].batch);
        if (read_csv(path, table_row, &a->tab[i], err, errlen) < 0)
            return -1;
        if (a->tab[i].rows == 0)
            return fail(err, errlen, "%s has no rows", path);
    }
    return 0;
}

struct trace_app *trace_load(const char *dir, const char *name, int epochs, int max_local_bsz,
                             char *err, size_t errlen)
{
    struct trace_app *a = calloc(1, sizeof(*a));
    struct meas_list pl = {0}, sc = {.scal = 1};
    char path[4200];

    if (a == NULL)
        return fail(err, errlen, "out of memory"), NULL;
    snprintf(a->name, sizeof(a->name), "%s", name);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (read_tables(a, dir, name, path, sizeof(path), err, errlen) < 0)
        goto error;
    a->init_bsz = a->batches[0];
    a->max_bsz = a->batches[a->ntab - 1];
    a->epochs = a->tab[0].rows;
    for (int i = 1; i < a->ntab; i++)
        if (a->tab[i].rows < a->epochs)
            a->epochs = a->tab[i].rows;
    if (epochs > 0 && epochs < a->epochs)
        a->epochs = epochs;
    snprintf(path, sizeof(path), "%s/%s/placements.csv", dir, name);
    if (read_csv(path, meas_row, &pl, err, errlen) < 0)
        goto error;
    snprintf(path, sizeof(path), "%s/%s/scalability.csv", dir, name);
    if (read_csv(path, meas_row, &sc, err, errlen) < 0)
        goto error;
    if (pl.n == 0) {
        fail(err, errlen, "%s/%s/placements.csv has no rows", dir, name);
        goto error;
    }
    a->min_lbsz = a->max_lbsz = pl.m[0].lbsz;
    for (int i = 0; i < pl.n; i++) {
        if (pl.m[i].lbsz < a->min_lbsz)
            a->min_lbsz = pl.m[i].lbsz;
        if (pl.m[i].lbsz > a->max_lbsz)
            a->max_lbsz = pl.m[i].lbsz;
    }
    if (max_local_bsz > 0)
        a->max_lbsz = max_local_bsz;
    qsort(pl.m, (size_t)pl.n, sizeof(*pl.m), cmp_meas);
    {
        /* every measurement, for the placements that were not measured */
        struct meas *all = malloc((size_t)(pl.n + sc.n) * sizeof(*all));
        if (all == NULL)
            goto oom;
        memcpy(all, pl.m, (size_t)pl.n * sizeof(*all));
        if (sc.n > 0)
            memcpy(all + pl.n, sc.m, (size_t)sc.n * sizeof(*all));
        if (build_pairs(a, all, pl.n + sc.n) < 0) {
            free(all);
            goto oom;
        }
        free(all);
    }
    a->m = pl.m;
    a->nm = pl.n;
    free(sc.m);
    return a;
oom:
    fail(err, errlen, "out of memory");
error:
    free(pl.m);
    free(sc.m);
    trace_free(a);
    return NULL;
}

void trace_free(struct trace_app *a)
{
    if (a == NULL)
        return;
    for (int i = 0; i < a->ntab; i++) {
        free(a->tab[i].progress);
        free(a->tab[i].sqr);
        free(a->tab[i].var);
    }
    for (int i = 0; i < a->npairs; i++) {
        free(a->pairs[i].lbsz);
        free(a->pairs[i].step);
        free(a->pairs[i].sync);
    }
    free(a->pairs);
    free(a->tab);
    free(a->batches);
    free(a->m);
    free(a);
}

const char *trace_name(const struct trace_app *a)
{
    return a->name;
}

const int *trace_batches(const struct trace_app *a, int *n)
{
    *n = a->ntab;
    return a->batches;
}

/* Epoch e's progress mark (the smallest any table gives); P(0) = 0. */
static double progress_mark(const struct trace_app *a, int e)
{
    double p = INFINITY;
    if (e == 0)
        return 0;
    for (int i = 0; i < a->ntab; i++)
        if (a->tab[i].rows >= e && a->tab[i].progress[e - 1] < p)
            p = a->tab[i].progress[e - 1];
    return p;
}

/* Gradient statistics of epoch e at batch M, between the validated batches around it. */
static void grad_stats(const struct trace_app *a, int batch, int e, double *sqr, double *var)
{
    int lo = 0, hi = a->ntab - 1;
    for (int i = 0; i < a->ntab; i++) {
        if (a->tab[i].batch <= batch)
            lo = i;
        if (a->tab[i].batch >= batch) {
            hi = i;
            break;
        }
    }
    if (batch <= a->tab[0].batch)
        lo = hi = 0;
    if (batch >= a->tab[a->ntab - 1].batch)
        lo = hi = a->ntab - 1;
    if (e >= a->tab[lo].rows)
        e = a->tab[lo].rows - 1;
    if (e >= a->tab[hi].rows)
        e = a->tab[hi].rows - 1;
    if (lo == hi) {
        *sqr = a->tab[lo].sqr[e];
        *var = a->tab[lo].var[e];
        return;
    }
    {
        double w = (double)(batch - a->tab[lo].batch) / (a->tab[hi].batch - a->tab[lo].batch);
        *sqr = (1 - w) * a->tab[lo].sqr[e] + w * a->tab[hi].sqr[e];
        *var = (1 - w) * a->tab[lo].var[e] + w * a->tab[hi].var[e];
    }
}

double trace_iterations(const struct trace_app *a, int batch)
{
    struct trace_app *w = (struct trace_app *)a; /* the cache only */
    double total = 0;
    for (int i = 0; i < a->ncache; i++)
        if (a->cache[i].batch == batch)
            return a->cache[i].iterations;
    for (int e = 0; e < a->epochs; e++)
        total += (progress_mark(a, e + 1) - progress_mark(a, e)) / trace_gain(a, batch, e);
    if (w->ncache < (int)(sizeof(w->cache) / sizeof(w->cache[0]))) {
        w->cache[w->ncache].batch = batch;
        w->cache[w->ncache++].iterations = total;
    }
    return total;
}

void trace_local_range(const struct trace_app *a, double *min, double *max)
{
    *min = a->min_lbsz;
    *max = a->max_lbsz;
}

int trace_max_batch(const struct trace_app *a)
{
    return a->max_bsz;
}

/* Linear interpolation of (xs, ys) at x, clamped to the ends. */
static double interp(const double *xs, const double *ys, int n, double x)
{
    if (n == 1 || x <= xs[0])
        return ys[0];
    if (x >= xs[n - 1])
        return ys[n - 1];
    for (int i = 1; i < n; i++) {
        if (x <= xs[i]) {
            double w = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
            return ys[i - 1] + w * (ys[i] - ys[i - 1]);
        }
    }
    return ys[n - 1];
}

/* step and sync of placement key at lbsz, when that placement was measured. */
static int exact(const struct trace_app *a, const char *key, double lbsz, double *step,
                 double *sync)
{
    int lo = 0, hi = a->nm, first, n;
    double xs[64], st[64], sy[64];
    while (lo < hi) { /* the first row with this key */
        int mid = (lo + hi) / 2;
        if (strcmp(a->m[mid].key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    first = lo;
    for (n = 0; first + n < a->nm && n < 64 && strcmp(a->m[first + n].key, key) == 0; n++) {
        xs[n] = a->m[first + n].lbsz;
        st[n] = a->m[first + n].step;
        sy[n] = a->m[first + n].sync;
    }
    if (n == 0)
        return 0;
    *step = interp(xs, st, n, lbsz);
    *sync = interp(xs, sy, n, lbsz);
    return 1;
}

/* step and sync of pairs with `nodes` nodes at replicas, between the measured replica
 * counts around it (clamped); 0 when there are none with that many nodes. */
static int at_nodes(const struct trace_app *a, int nodes, int replicas, double lbsz, double *step,
                    double *sync)
{
    const struct pair *lo = NULL, *hi = NULL;
    for (int i = 0; i < a->npairs; i++) {
        const struct pair *p = &a->pairs[i];
        if (p->nodes != nodes)
            continue;
        if (p->replicas <= replicas && (lo == NULL || p->replicas > lo->replicas))
            lo = p;
        if (p->replicas >= replicas && (hi == NULL || p->replicas < hi->replicas))
            hi = p;
    }
    if (lo == NULL)
        lo = hi;
    if (hi == NULL)
        hi = lo;
    if (lo == NULL)
        return 0;
    {
        double s1 = interp(lo->lbsz, lo->step, lo->n, lbsz),
               y1 = interp(lo->lbsz, lo->sync, lo->n, lbsz);
        double s2 = interp(hi->lbsz, hi->step, hi->n, lbsz),
               y2 = interp(hi->lbsz, hi->sync, hi->n, lbsz);
        double w = hi->replicas == lo->replicas
                       ? 0
                       : (double)(replicas - lo->replicas) / (hi->replicas - lo->replicas);
        *step = s1 + w * (s2 - s1);
        *sync = y1 + w * (y2 - y1);
    }
    return 1;
}

/* Interpolated over (nodes, replicas, lbsz): the node counts measured around nodes. */
static void grid(const struct trace_app *a, int nodes, int replicas, double lbsz, double *step,
                 double *sync)
{
    int lo = -1, hi = -1;
    double s1, y1, s2, y2;
    if (nodes > 16)
        nodes = 16; /* the measurements end at 16 nodes; more spread costs no more */
    for (int i = 0; i < a->npairs; i++) {
        int n = a->pairs[i].nodes;
        if (n <= nodes && n > lo)
            lo = n;
        if (n >= nodes && (hi < 0 || n < hi))
            hi = n;
    }
    if (lo < 0)
        lo = hi;
    if (hi < 0)
        hi = lo;
    at_nodes(a, lo, replicas, lbsz, &s1, &y1);
    at_nodes(a, hi, replicas, lbsz, &s2, &y2);
    if (hi == lo) {
        *step = s1;
        *sync = y1;
    } else {
        double w = (double)(nodes - lo) / (hi - lo);
        *step = s1 + w * (s2 - s1);
        *sync = y1 + w * (y2 - y1);
    }
}

/* Seconds per step of atomic per-GPU batch on the placement with counts[0..k-1] GPUs per
 * node, plus accum accumulation steps of compute. */
static double step_of(const struct trace_app *a, double atomic, int accum, const int *counts, int k,
                      int n)
{
    char key[24] = "";
    int best = 0;
    double step, sync;
    /* The placement's name: its GPU counts from the rotation that reads smallest. */
    if (k <= (int)sizeof(key) - 1) {
        int ok = 1;
        for (int i = 0; i < k; i++)
            ok &= counts[i] <= 9;
        for (int r = 1; ok && r < k; r++) {
            for (int i = 0; i < k; i++) {
                int x = counts[(r + i) % k], y = counts[(best + i) % k];
                if (x != y) {
                    if (x < y)
                        best = r;
                    break;
                }
            }
        }
        for (int i = 0; ok && i < k; i++)
            key[i] = (char)('0' + counts[(best + i) % k]);
        key[ok ? k : 0] = '\0';
    }
    if (key[0] == '\0' || !exact(a, key, atomic, &step, &sync))
        grid(a, k, n, atomic, &step, &sync);
    return step + accum * (step - sync);
}

/* The nodes that hold GPUs, in rank order, into counts; returns their number, and the GPUs
 * in *n. */
static int squeeze(const int *gpus, int nnodes, int *counts, int *n)
{
    int k = 0;
    *n = 0;
    for (int i = 0; i < nnodes && k < 64; i++) {
        if (gpus[i] > 0) {
            counts[k++] = gpus[i];
            *n += gpus[i];
        }
    }
    return k;
}

double trace_step_time(const struct trace_app *a, int batch, const int *gpus, int nnodes)
{
    int counts[64], n, k = squeeze(gpus, nnodes, counts, &n), accum;
    double local, atomic;

    if (n == 0 || batch < n)
        return -1;
    /* Gradient accumulation above the largest measured local batch, as Pollux's jobs do;
     * one GPU on a batch above the smallest validated one accumulates at least once. */
    local = ceil((double)batch / n - 1e-8);
    accum = (int)ceil(local / a->max_lbsz - 1e-8) - 1;
    if (accum < 0)
        accum = 0;
    if (n == 1 && batch > a->init_bsz && accum < 1)
        accum = 1;
    atomic = ceil(local / (accum + 1) - 1e-8);
    if (atomic > floor((double)a->max_bsz / (n * (accum + 1))) &&
        floor((double)a->max_bsz / (n * (accum + 1))) >= 1)
        atomic = floor((double)a->max_bsz / (n * (accum + 1)));
    return step_of(a, atomic, accum, counts, k, n);
}

double trace_step_time_local(const struct trace_app *a, int local, const int *gpus, int nnodes)
{
    int counts[64], n, k = squeeze(gpus, nnodes, counts, &n), accum;
    if (n == 0 || local < 1)
        return -1;
    accum = (int)ceil(local / a->max_lbsz - 1e-8) - 1;
    if (accum < 0)
        accum = 0;
    return step_of(a, ceil(local / (accum + 1.0) - 1e-8), accum, counts, k, n);
}

int trace_epochs(const struct trace_app *a)
{
    return a->epochs;
}

double trace_progress(const struct trace_app *a, int epoch)
{
    return progress_mark(a, epoch);
}

double trace_gain(const struct trace_app *a, int batch, int epoch)
{
    double sqr, var, scale = (double)batch / a->init_bsz, gain;
    grad_stats(a, batch, epoch, &sqr, &var);
    gain = (var + sqr) / (var / scale + sqr);
    return gain > 0 ? gain : 1;
}
