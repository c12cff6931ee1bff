/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - Prometheus text exposition. Job counts, counters and histograms come from
 * rows of the store that triggers keep (store_metrics): a scrape reads a fixed number of
 * rows whatever the number of jobs, the counters survive restarts, and deleting a job
 * never takes a count back. Each node's slots and GPUs, and the policy, are what the
 * scheduler thread kept at the end of its last turn (scheduler_usage): a few ints per node,
 * read without waiting for the thread. Request counts live in memory since the process
 * started, as a counter may (Prometheus reads the restart as a reset).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

static atomic_ulong requests[600];

void metrics_count_request(int status)
{
    if (status >= 100 && status < 600)
        atomic_fetch_add(&requests[status], 1);
}

/* What each stored counter and histogram means, in the order they are shown. */
static const struct {
    const char *name, *type, *help;
} stored[] = {
    {"ringd_resizes_total", "counter",
     "Resizes the scheduler decided (each a stop and a restart at another size)."},
    {"ringd_scheduling_latency_seconds", "histogram",
     "From submission to the first attempt's start."},
    {"ringd_attempt_stop_seconds", "histogram",
     "From a stop request (resize, preemption, stop, cancel) until every rank of the attempt "
     "exited."},
    {"ringd_attempt_start_seconds", "histogram",
     "From an attempt's start until rank 0's first progress report."},
};

/* s as a label value: '\\', '"' and newlines escaped, as the text format wants. */
static void label(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fputc('\\', f);
        if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

/* One gauge per node of the cluster: name, help, and node n's value from get. */
static void node_gauge(FILE *f, const struct cluster *c, const struct scheduler_node_use *use,
                       const char *name, const char *help,
                       int (*get)(const struct cluster_node *, const struct scheduler_node_use *))
{
    fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    for (int n = 0; n < c->nnodes; n++) {
        fprintf(f, "%s{node=\"", name);
        label(f, c->node[n].name);
        fprintf(f, "\"} %d\n", get(&c->node[n], &use[n]));
    }
}

static int slots(const struct cluster_node *n, const struct scheduler_node_use *u)
{
    return n->slots;
}
static int slots_allocated(const struct cluster_node *n, const struct scheduler_node_use *u)
{
    return n->slots - u->slots_free;
}
static int gpus(const struct cluster_node *n, const struct scheduler_node_use *u)
{
    return n->gpus;
}
static int gpus_allocated(const struct cluster_node *n, const struct scheduler_node_use *u)
{
    return n->gpus - u->gpus_free;
}
static int offline(const struct cluster_node *n, const struct scheduler_node_use *u)
{
    return u->offline != 0;
}

/* The scheduler's gauges: each node's slots and GPUs, held or not, and the policy. Returns 0,
 * or -1 (ENOMEM). */
static int scheduler_gauges(FILE *f, struct scheduler *sched)
{
    const struct cluster *c = scheduler_cluster(sched);
    struct scheduler_node_use *use = calloc((size_t)c->nnodes + 1, sizeof(*use));
    char policy[32];
    double age;

    if (use == NULL)
        return -1;
    age = scheduler_usage(sched, use, policy, sizeof(policy));
    node_gauge(f, c, use, "ringd_node_slots", "Worker slots (CPUs) of the node.", slots);
    node_gauge(f, c, use, "ringd_node_slots_allocated",
               "Slots of the node that attempts hold (cpus_per_worker per worker).",
               slots_allocated);
    node_gauge(f, c, use, "ringd_node_gpus", "GPUs of the node.", gpus);
    node_gauge(f, c, use, "ringd_node_gpus_allocated", "GPUs of the node that attempts hold.",
               gpus_allocated);
    node_gauge(f, c, use, "ringd_node_offline",
               "1 when the backend took the node out of service (nothing new is placed there).",
               offline);
    fprintf(f,
            "# HELP ringd_scheduler_info The scheduling policy now (PUT /v1/scheduler changes it) "
            "and the backend.\n# TYPE ringd_scheduler_info gauge\n"
            "ringd_scheduler_info{policy=\"%s\",backend=\"%s\"} 1\n",
            policy, scheduler_backend(sched));
    fprintf(f,
            "# HELP ringd_scheduler_view_age_seconds Seconds since the scheduler thread last "
            "finished a turn, when the node gauges were taken; it grows while a backend call "
            "holds the thread (slurmctld unreachable).\n"
            "# TYPE ringd_scheduler_view_age_seconds gauge\nringd_scheduler_view_age_seconds "
            "%.3f\n",
            age);
    free(use);
    return 0;
}

/* One stored histogram h ({"count", "sum", "buckets": [[le, n], ...]}) as name. */
static void histogram(FILE *f, const char *name, json_t *h)
{
    long long count = (long long)json_integer_value(json_object_get(h, "count"));
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(h, "buckets"), i, b)
    {
        fprintf(f, "%s_bucket{le=\"%g\"} %lld\n", name, json_real_value(json_array_get(b, 0)),
                (long long)json_integer_value(json_array_get(b, 1)));
    }
    fprintf(f, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.6f\n%s_count %lld\n", name, count, name,
            json_real_value(json_object_get(h, "sum")), name, count);
}

char *metrics_render(struct store *st, struct scheduler *sched, struct error *err)
{
    static const char *const states[] = {"QUEUED",  "STARTING",  "RUNNING", "STOPPING",
                                         "STOPPED", "SUCCEEDED", "FAILED",  "CANCELLED"};
    json_t *m, *jobs, *counters, *histograms;
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    if (store_metrics(st, &m, err) < 0)
        return NULL;
    f = open_memstream(&text, &len);
    if (f == NULL) {
        json_decref(m);
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    }
    jobs = json_object_get(m, "jobs");
    counters = json_object_get(m, "counters");
    histograms = json_object_get(m, "histograms");
    fprintf(f, "# HELP ringd_jobs Jobs by state.\n# TYPE ringd_jobs gauge\n");
    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
        fprintf(f, "ringd_jobs{state=\"%s\"} %lld\n", states[i],
                (long long)json_integer_value(json_object_get(jobs, states[i])));
    fprintf(f,
            "# HELP ringd_submissions_total Jobs accepted since the store was created.\n"
            "# TYPE ringd_submissions_total counter\nringd_submissions_total %lld\n",
            (long long)json_integer_value(json_object_get(m, "submissions")));
    for (size_t i = 0; i < sizeof(stored) / sizeof(stored[0]); i++) {
        int hist = strcmp(stored[i].type, "histogram") == 0;
        json_t *v = json_object_get(hist ? histograms : counters, stored[i].name);
        if (v == NULL)
            continue;
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", stored[i].name, stored[i].help, stored[i].name,
                stored[i].type);
        if (hist)
            histogram(f, stored[i].name, v);
        else
            fprintf(f, "%s %lld\n", stored[i].name, (long long)json_integer_value(v));
    }
    if (sched != NULL && scheduler_gauges(f, sched) < 0) {
        fclose(f);
        free(text);
        json_decref(m);
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    }
    fprintf(f,
            "# HELP ringd_build_info The build of ringd that answers.\n# TYPE ringd_build_info "
            "gauge\nringd_build_info{version=\"%s\"} 1\n",
            RING_VERSION_STRING);
    fprintf(f, "# HELP ringd_http_requests_total Requests answered, by status code.\n"
               "# TYPE ringd_http_requests_total counter\n");
    for (int code = 100; code < 600; code++) {
        unsigned long n = atomic_load(&requests[code]);
        if (n > 0)
            fprintf(f, "ringd_http_requests_total{code=\"%d\"} %lu\n", code, n);
    }
    fclose(f);
    json_decref(m);
    return text;
}
