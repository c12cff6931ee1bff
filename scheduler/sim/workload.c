/* SPDX-License-Identifier: Apache-2.0 */
/* workload.c - ringsim's workloads: read from a CSV, or synthesised from Philly's log
 * (workload.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

/* Epochs until a job counts as complete, and per-GPU batch caps, of the applications in
 * Pollux's traces (its simulator's settings); others run every epoch their tables have. */
static const struct {
    const char *name;
    int epochs, max_local_bsz;
} known_apps[] = {
    {"bert", 2, 0},      {"cifar10", 100, 0},    {"ncf", 10, 0},
    {"imagenet", 90, 0}, {"deepspeech2", 80, 0}, {"yolov3", 50, 8},
};

static int workload_error(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Formats into err, sets errno to code and returns -1. */
static int workload_error(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    errno = code;
    return -1;
}

/* The index of application name in w, loading its traces the first time. Returns -1 with
 * err when they cannot be loaded. */
static int app_index(struct workload *w, const char *traces, const char *name, char *err,
                     size_t errlen)
{
    int epochs = 0, cap = 0;
    struct trace_app *a, **grown;
    for (int i = 0; i < w->napps; i++)
        if (strcmp(trace_name(w->app[i]), name) == 0)
            return i;
    for (size_t k = 0; k < sizeof(known_apps) / sizeof(known_apps[0]); k++) {
        if (strcmp(known_apps[k].name, name) == 0) {
            epochs = known_apps[k].epochs;
            cap = known_apps[k].max_local_bsz;
        }
    }
    a = trace_load(traces, name, epochs, cap, err, errlen);
    if (a == NULL)
        return errno = EINVAL, -1;
    grown = realloc(w->app, (size_t)(w->napps + 1) * sizeof(*grown));
    if (grown == NULL) {
        trace_free(a);
        return workload_error(err, errlen, ENOMEM, "out of memory");
    }
    w->app = grown;
    w->app[w->napps] = a;
    return w->napps++;
}

/* Splits a CSV line in place; returns the number of fields. */
static int split(char *line, char **f, int max)
{
    int n = 0;
    line[strcspn(line, "\r\n")] = '\0';
    for (char *p = line; n < max;) {
        f[n++] = p;
        p = strchr(p, ',');
        if (p == NULL)
            break;
        *p++ = '\0';
    }
    return n;
}

int workload_read(const char *path, const char *traces, struct workload *w, char *err,
                  size_t errlen)
{
    FILE *f = fopen(path, "r");
    char line[1024], *f_[16];
    int col[5] = {-1, -1, -1, -1, -1}, n, lineno = 1, cap = 0;
    static const char *const names[5] = {"name", "time", "application", "num_replicas",
                                         "batch_size"};

    if (f == NULL)
        return workload_error(err, errlen, errno, "cannot read --workload %s: %s", path,
                              strerror(errno));
    if (fgets(line, sizeof(line), f) == NULL) {
        fclose(f);
        return workload_error(err, errlen, EINVAL,
                              "%s is empty; want a header and one job per line", path);
    }
    n = split(line, f_, 16);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 5; k++)
            if (strcmp(f_[i], names[k]) == 0)
                col[k] = i;
    for (int k = 0; k < 5; k++) {
        if (col[k] < 0) {
            fclose(f);
            return workload_error(err, errlen, EINVAL,
                                  "%s: the header lacks the column '%s' (want name, time, "
                                  "application, num_replicas, batch_size)",
                                  path, names[k]);
        }
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        struct wjob j;
        char *end;
        int app;
        memset(&j, 0, sizeof(j));
        lineno++;
        if (line[0] == '\n' || line[0] == '\0')
            continue;
        n = split(line, f_, 16);
        if (n <= col[0] || n <= col[1] || n <= col[2] || n <= col[3] || n <= col[4])
            goto bad;
        snprintf(j.name, sizeof(j.name), "%s", f_[col[0]]);
        j.time = strtod(f_[col[1]], &end);
        if (*end || !isfinite(j.time) || j.time < 0)
            goto bad;
        j.replicas = (int)strtol(f_[col[3]], &end, 10);
        if (*end || j.replicas < 1)
            goto bad;
        j.batch = (int)strtol(f_[col[4]], &end, 10);
        if (*end || j.batch < 1)
            goto bad;
        if ((app = app_index(w, traces, f_[col[2]], err, errlen)) < 0) {
            fclose(f);
            return errno = EINVAL, -1;
        }
        j.app = app;
        if (w->n == cap) {
            struct wjob *grown;
            cap = cap ? cap * 2 : 256;
            grown = realloc(w->job, (size_t)cap * sizeof(*grown));
            if (grown == NULL) {
                fclose(f);
                return workload_error(err, errlen, ENOMEM, "out of memory");
            }
            w->job = grown;
        }
        w->job[w->n++] = j;
        continue;
    bad:
        fclose(f);
        return workload_error(err, errlen, EINVAL,
                              "%s:%d: want name,time,application,num_replicas,batch_size with a "
                              "time >= 0 and positive integers",
                              path, lineno);
    }
    fclose(f);
    if (w->n == 0)
        return workload_error(err, errlen, EINVAL, "%s has no jobs", path);
    /* Arrival order: the loop's submission order. */
    for (int i = 1; i < w->n; i++) {
        struct wjob x = w->job[i];
        int k = i;
        while (k > 0 && w->job[k - 1].time > x.time) {
            w->job[k] = w->job[k - 1];
            k--;
        }
        w->job[k] = x;
    }
    return 0;
}

void workload_free(struct workload *w)
{
    for (int i = 0; i < w->napps; i++)
        trace_free(w->app[i]);
    free(w->app);
    free(w->job);
    memset(w, 0, sizeof(*w));
}

/* ---- synthesis from philly.csv ---- */

struct philly {
    double duration, gpus, gpu_time;
};

struct synth {
    const char *app;
    int replicas, batch;
    double time;
};

static int cmp_synth(const void *a, const void *b)
{
    double x = ((const struct synth *)a)->time, y = ((const struct synth *)b)->time;
    return (x > y) - (x < y);
}

/*
 * As Pollux's workloads were made: each job's GPU-time in the log picks its application
 * (under 1 GPU-hour cifar10 or ncf, under 10 deepspeech2 or bert, under 100 yolov3, else
 * imagenet); a validated batch is drawn, and the log's GPU count kept where each GPU's share
 * of the batch was measured. Arrivals are uniform over a span chosen so that the jobs ask
 * for `load` of the cluster's GPU-time at their sizes.
 */
int workload_synthesize(FILE *out, const char *traces, int n, int nodes, int gpn, unsigned seed,
                        double load, char *err, size_t errlen)
{
    struct synth *spec = NULL;
    double offered = 0, span;
    char path[4200], line[512], *f[8];
    struct philly *rows = NULL;
    int nrows = 0, cap = 0, rc = -1;
    struct workload w = {0};
    FILE *in;
    static const char *const short_apps[] = {"cifar10", "ncf"};
    static const char *const mid_apps[] = {"deepspeech2", "bert"};

    snprintf(path, sizeof(path), "%s/philly.csv", traces);
    if ((in = fopen(path, "r")) == NULL)
        return workload_error(err, errlen, errno, "cannot read %s: %s", path, strerror(errno));
    if (fgets(line, sizeof(line), in) == NULL) { /* the header */
        fclose(in);
        return workload_error(err, errlen, EINVAL, "%s is empty", path);
    }
    while (fgets(line, sizeof(line), in) != NULL) {
        struct philly p;
        if (split(line, f, 8) < 4)
            continue;
        p.duration = atof(f[1]);
        p.gpus = atof(f[2]);
        p.gpu_time = atof(f[3]);
        /* As Pollux's workloads: jobs of at least a minute and under 1000 GPU-hours. */
        if (p.duration < 60 || p.gpu_time >= 1000 * 3600.0 || p.gpus < 1)
            continue;
        if (nrows == cap) {
            struct philly *grown;
            cap = cap ? cap * 2 : 4096;
            if ((grown = realloc(rows, (size_t)cap * sizeof(*grown))) == NULL) {
                fclose(in);
                workload_error(err, errlen, ENOMEM, "out of memory");
                goto done;
            }
            rows = grown;
        }
        rows[nrows++] = p;
    }
    fclose(in);
    if (nrows == 0) {
        workload_error(err, errlen, EINVAL, "%s has no usable jobs", path);
        goto done;
    }
    spec = malloc((size_t)n * sizeof(*spec));
    if (spec == NULL) {
        workload_error(err, errlen, ENOMEM, "out of memory");
        goto done;
    }
    srand(seed);
    for (int i = 0; i < n; i++) {
        const struct philly *p = &rows[rand() % nrows];
        double h = p->gpu_time / 3600.0, lo, hi, step;
        const char *name = h < 1     ? short_apps[rand() % 2]
                           : h < 10  ? mid_apps[rand() % 2]
                           : h < 100 ? "yolov3"
                                     : "imagenet";
        int app = app_index(&w, traces, name, err, errlen), nb, replicas, batch, g[64], k = 0;
        const int *batches;
        if (app < 0)
            goto done;
        batches = trace_batches(w.app[app], &nb);
        /* A validated batch, and the job's GPU count from the trace, kept where each GPU's
         * share of the batch is one that was measured. */
        batch = batches[rand() % nb];
        trace_local_range(w.app[app], &lo, &hi);
        replicas = (int)p->gpus;
        if (replicas > (int)(batch / lo))
            replicas = (int)(batch / lo);
        if (replicas < (int)ceil(batch / hi))
            replicas = (int)ceil(batch / hi);
        if (replicas < 1)
            replicas = 1;
        if (replicas > nodes * gpn)
            replicas = nodes * gpn;
        for (int left = replicas; left > 0 && k < 64; k++) {
            g[k] = left < gpn ? left : gpn;
            left -= g[k];
        }
        step = trace_step_time(w.app[app], batch, g, k);
        spec[i] = (struct synth){name, replicas, batch, 0};
        /* What it asks of the cluster: its GPUs for as long as it trains there. */
        if (step > 0)
            offered += (trace_iterations(w.app[app], batch) * step + 30) * replicas;
    }
    /* Arrivals spread so that the jobs ask for `load` of the cluster's GPU-time. */
    span = offered / ((double)nodes * gpn * load);
    for (int i = 0; i < n; i++)
        spec[i].time = (double)rand() / RAND_MAX * span;
    qsort(spec, (size_t)n, sizeof(*spec), cmp_synth);
    fprintf(out, "name,time,application,num_replicas,batch_size\n");
    for (int i = 0; i < n; i++)
        fprintf(out, "%s-%d,%.0f,%s,%d,%d\n", spec[i].app, i, spec[i].time, spec[i].app,
                spec[i].replicas, spec[i].batch);
    rc = 0;
done:
    workload_free(&w);
    free(rows);
    free(spec);
    return rc;
}
