/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - Prometheus text exposition. Job counts and the latency histogram come from
 * the store at scrape time, so they are exact and survive restarts; request counts live
 * in memory since the process started, as counters do.
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

/* A Prometheus histogram of v[0 .. n-1] over bounds. */
static void histogram(FILE *f, const char *name, const char *help, const double *v, int n,
                      const double *bounds, size_t nb)
{
    double sum = 0;
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (size_t b = 0; b < nb; b++) {
        int k = 0;
        for (int i = 0; i < n; i++)
            k += v[i] <= bounds[b];
        fprintf(f, "%s_bucket{le=\"%g\"} %d\n", name, bounds[b], k);
    }
    for (int i = 0; i < n; i++)
        sum += v[i];
    fprintf(f, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %.6f\n%s_count %d\n", name, n, name, sum, name,
            n);
}

char *metrics_render(struct store *st, struct error *err)
{
    static const char *const states[] = {"QUEUED",  "STARTING",  "RUNNING", "STOPPING",
                                         "STOPPED", "SUCCEEDED", "FAILED",  "CANCELLED"};
    /* Buckets from 10 ms (an idle ringd) to 1 h (a busy cluster). */
    static const double bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600};
    size_t nb = sizeof(bounds) / sizeof(bounds[0]);
    json_t *counts;
    int64_t submissions;
    double *lat, sum = 0;
    int nlat;
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    if (store_metrics(st, &counts, &submissions, &lat, &nlat, err) < 0)
        return NULL;
    f = open_memstream(&text, &len);
    if (f == NULL) {
        json_decref(counts);
        free(lat);
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    }
    fprintf(f, "# HELP ringd_jobs Jobs by state.\n# TYPE ringd_jobs gauge\n");
    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
        fprintf(f, "ringd_jobs{state=\"%s\"} %lld\n", states[i],
                (long long)json_integer_value(json_object_get(counts, states[i])));
    fprintf(f,
            "# HELP ringd_submissions_total Jobs accepted since the store was created.\n"
            "# TYPE ringd_submissions_total counter\nringd_submissions_total %lld\n",
            (long long)submissions);
    fprintf(f, "# HELP ringd_scheduling_latency_seconds From submission to the first attempt's "
               "start.\n# TYPE ringd_scheduling_latency_seconds histogram\n");
    for (size_t b = 0; b < nb; b++) {
        int n = 0;
        for (int i = 0; i < nlat; i++)
            n += lat[i] <= bounds[b];
        fprintf(f, "ringd_scheduling_latency_seconds_bucket{le=\"%g\"} %d\n", bounds[b], n);
    }
    for (int i = 0; i < nlat; i++)
        sum += lat[i];
    fprintf(f,
            "ringd_scheduling_latency_seconds_bucket{le=\"+Inf\"} %d\n"
            "ringd_scheduling_latency_seconds_sum %.6f\nringd_scheduling_latency_seconds_count "
            "%d\n",
            nlat, sum, nlat);
    {
        /* Restart overheads: from 100 ms (a small job on this host) to 10 min (a large model
         * reloading its checkpoint from shared storage). */
        static const double ob[] = {0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 120, 600};
        double *stop, *start;
        int nstop, nstart;
        int64_t resizes;
        if (store_overheads(st, &stop, &nstop, &start, &nstart, &resizes, NULL) == 0) {
            histogram(f, "ringd_attempt_stop_seconds",
                      "From a stop request (resize, preemption, stop, cancel) until every rank of "
                      "the attempt exited.",
                      stop, nstop, ob, sizeof(ob) / sizeof(ob[0]));
            histogram(f, "ringd_attempt_start_seconds",
                      "From an attempt's start until rank 0's first progress report.", start,
                      nstart, ob, sizeof(ob) / sizeof(ob[0]));
            fprintf(f,
                    "# HELP ringd_resizes_total Resizes the scheduler decided (each a stop and a "
                    "restart at another size).\n# TYPE ringd_resizes_total counter\n"
                    "ringd_resizes_total %lld\n",
                    (long long)resizes);
            free(stop);
            free(start);
        }
    }
    fprintf(f, "# HELP ringd_http_requests_total Requests answered, by status code.\n"
               "# TYPE ringd_http_requests_total counter\n");
    for (int code = 100; code < 600; code++) {
        unsigned long n = atomic_load(&requests[code]);
        if (n > 0)
            fprintf(f, "ringd_http_requests_total{code=\"%d\"} %lu\n", code, n);
    }
    fclose(f);
    json_decref(counts);
    free(lat);
    return text;
}
