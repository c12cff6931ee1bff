/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h - GET /metrics in the Prometheus text format: jobs by state, submissions, the
 * scheduling latency histogram (queue to first start), and HTTP requests by status code.
 */
#ifndef RINGD_METRICS_H
#define RINGD_METRICS_H

#include "store.h"

/* What GET /metrics answers with: Prometheus' text format 0.0.4. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Counts one answered request. Thread-safe. */
void metrics_count_request(int status);
/* Renders the metrics (malloc'ed text, the caller frees), or NULL with err. */
char *metrics_render(struct store *st, struct error *err);

#endif /* RINGD_METRICS_H */
