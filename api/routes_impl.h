/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routes_impl.h - what routes.c (the dispatch, and the routes other than jobs') and
 * routes_jobs.c (the jobs' routes) share: the shape of a route table, which each file keeps
 * for the routes it serves, and the answer to a failed store call.
 */
#ifndef RINGD_ROUTES_IMPL_H
#define RINGD_ROUTES_IMPL_H

#include "api.h"
#include "common/error.h"

/* A handler gets the path's "{}" segment in param ("" when the route has none). */
typedef void api__handler(const struct api_config *cfg, const struct api_request *req,
                          const char *param, struct api_response *resp);

struct api__route {
    const char *method;
    const char *pattern; /* a trailing "{}" segment matches one path segment */
    api__handler *fn;
};

/* routes_jobs.c's and routes_views.c's tables, each ended by a NULL method. */
extern const struct api__route api__job_routes[];
extern const struct api__route api__view_routes[];

/*
 * A non-negative decimal integer at most max, all of s; 0 and the value in *out, or -1.
 * "abc", "1.5", "-1", "" and anything past max (or past long long) are refused.
 */
int api__parse_count(const char *s, long long max, long long *out);

/* 503 when the database is busy (retry), else 500, with err's text. */
void api__store_problem(struct api_response *resp, const char *path, const struct error *err);

/*
 * When a client is told to retry a request the scheduler thread could not take in time
 * (scheduler.h: ETIMEDOUT). It normally takes one within a tick or a pass, far less than
 * this; a backend call that holds it longer (libslurm's ~10 s while slurmctld is
 * unreachable) gets the client told again, rather than a client retrying in a tight loop.
 */
#define API_SCHED_RETRY_S 2

/* 503 "scheduler-busy" with Retry-After: the scheduler thread did not take the request in
 * time, so nothing was done; err says so. */
void api__sched_busy(struct api_response *resp, const char *path, const struct error *err);

#endif /* RINGD_ROUTES_IMPL_H */
