/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h - GET /metrics in the Prometheus text format: jobs by state, submissions, the
 * scheduling latency histogram (queue to first start), and HTTP requests by status code.
 */
#ifndef RINGD_METRICS_H
#define RINGD_METRICS_H

#include "db/store.h"

/* Counts one answered request. Thread-safe. */
void metrics_count_request(int status);
/* Renders the metrics (malloc'ed text, the caller frees), or NULL with err. */
char *metrics_render(struct store *st, struct error *err);

#endif /* RINGD_METRICS_H */
