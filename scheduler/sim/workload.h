/* SPDX-License-Identifier: Apache-2.0 */
/*
 * workload.h - ringsim's input: a workload of jobs in the Pollux format, each bound to its
 * application's traces (trace.h), read from a CSV or synthesised from Philly's log.
 *
 * The workload CSV has a header naming the columns name, time, application, num_replicas
 * and batch_size (any order; others are ignored), then one job per line. A synthesised one
 * samples DIR/philly.csv (timestamp,duration,num_gpus,gpu_time,cluster) as Pollux's
 * workloads were made.
 *
 * Errors: -1 with errno and a message in err (errlen bytes): EINVAL for a malformed
 * workload, log or trace, ENOMEM, or the errno of a file that cannot be opened.
 */
#ifndef RINGD_WORKLOAD_H
#define RINGD_WORKLOAD_H

#include <stddef.h>
#include <stdio.h>

#include "trace.h"

struct wjob {
    char name[64];
    double time; /* arrival, s */
    int app;     /* index into workload.app */
    int replicas, batch;
    /* results, for the driver (ringsim) to fill */
    double end, gpu_s, started;
    int gpus, done, attempts;
};

struct workload {
    struct wjob *job; /* in arrival order */
    int n;
    struct trace_app **app; /* each application once, loaded from its trace folder */
    int napps;
};

/* Reads the workload CSV at path into w (zeroed by the caller), loading each application's
 * traces from traces/<application>/ once. Jobs are sorted by arrival (stable). Returns 0 or
 * -1; w then holds what was read so far, for workload_free. */
int workload_read(const char *path, const char *traces, struct workload *w, char *err,
                  size_t errlen);
/* Frees what w holds, and leaves it empty. */
void workload_free(struct workload *w);

/*
 * Writes to out a workload CSV of n jobs sampled from traces/philly.csv (seeded by seed),
 * whose arrivals are spread so that the jobs ask for `load` of a cluster of nodes x gpn
 * GPUs. Returns 0 or -1.
 */
int workload_synthesize(FILE *out, const char *traces, int n, int nodes, int gpn, unsigned seed,
                        double load, char *err, size_t errlen);

#endif /* RINGD_WORKLOAD_H */
