/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h - GET /metrics in the Prometheus text format: jobs by state, submissions,
 * resizes, the scheduling latency and attempt overhead histograms, each node's slots and
 * GPUs (allocated or not), the policy and backend, the build, and HTTP requests by status
 * code. README's Metrics section lists each one.
 */
#ifndef RINGD_METRICS_H
#define RINGD_METRICS_H

#include "db/store.h"
#include "scheduler/core/scheduler.h"

/* What GET /metrics answers with: Prometheus' text format 0.0.4. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Counts one answered request. Thread-safe. */
void metrics_count_request(int status);
/* Renders the metrics (malloc'ed text, the caller frees), or NULL with err. Costs the same
 * whatever the number of jobs. sched may be NULL: no cluster or policy gauges. */
char *metrics_render(struct store *st, struct scheduler *sched, struct error *err);

#endif /* RINGD_METRICS_H */
