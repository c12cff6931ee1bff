/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routes_views.c - the routes that sum up many jobs at once, which a dashboard reads: the
 * events of every job the caller may see (GET /v1/events, JSON pages or one live stream) and
 * the cluster's usage over time (GET /v1/cluster/usage).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "routes_impl.h"

static api__handler all_events, cluster_usage;

const struct api__route api__view_routes[] = {
    {"GET", "/v1/events", all_events},
    {"GET", "/v1/cluster/usage", cluster_usage},
    {NULL, NULL, NULL},
};

/*
 * A page of events: as many as a dashboard shows of a busy minute, and a bound on what one
 * request makes the store read and the server hold (events are ~150 bytes of JSON each).
 */
#define EVENTS_PAGE_MAX 1000

/*
 * GET /v1/events: the events of every job the caller may see (an admin's: all; a user's:
 * their principal's), as JSON pages after ?after= (at most ?limit=), or with Accept:
 * text/event-stream as one live stream of them all. A stream without Last-Event-ID or
 * ?after= starts at the newest event rather than the first: the store holds every job's
 * history, which GET /v1/jobs already sums up.
 */
static void all_events(const struct api_config *cfg, const struct api_request *req,
                       const char *param, struct api_response *resp)
{
    const char *after = req->query(req->conn, "after"), *limit = req->query(req->conn, "limit");
    const char *last = req->header(req->conn, "Last-Event-ID");
    const char *accept = req->header(req->conn, "Accept");
    int stream = accept != NULL && strstr(accept, "text/event-stream") != NULL;
    int64_t scope = req->admin ? STORE_ANYONE : req->principal, upto = 0;
    long long from = 0, n = EVENTS_PAGE_MAX;
    json_t *events;
    struct error err;

    if ((after != NULL && api__parse_count(after, INT64_MAX, &from) < 0) ||
        (limit != NULL && (api__parse_count(limit, EVENTS_PAGE_MAX, &n) < 0 || n < 1))) {
        api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                    "after must be an event id (a non-negative integer) and limit an integer "
                    "in [1, %d]",
                    EVENTS_PAGE_MAX);
        return;
    }
    if (stream && last != NULL && api__parse_count(last, INT64_MAX, &from) < 0) {
        api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                    "Last-Event-ID must be an event id (a non-negative integer), not '%.64s'",
                    last);
        return;
    }
    if (stream) {
        if (after == NULL && last == NULL) {
            if (store_events_newest(req->store, &upto, &err) < 0) {
                api__store_problem(resp, req->path, &err);
                return;
            }
            from = upto;
        }
        resp->status = 200;
        resp->stream = API_STREAM_ALL_EVENTS;
        resp->stream_owner = scope;
        resp->stream_from = from;
        return;
    }
    if (store_events_all(req->store, scope, from, (int)n, &events, &upto, &err) < 0) {
        api__store_problem(resp, req->path, &err);
        return;
    }
    resp->status = 200;
    resp->body = json_pack("{s:o, s:I}", "events", events, "next_after", (json_int_t)upto);
}

/* t (Unix seconds) as the API writes times: UTC, milliseconds, "2027-01-31T12:00:00.250Z". */
static json_t *iso_time(double t)
{
    char date[32], out[40];
    time_t whole = (time_t)floor(t);
    struct tm tm;
    int ms = (int)((t - (double)whole) * 1000.0);
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", gmtime_r(&whole, &tm));
    snprintf(out, sizeof(out), "%s.%03dZ", date, ms < 0 ? 0 : ms > 999 ? 999 : ms);
    return json_string(out);
}

/* One change in use: at t, gpus, slots and workers more (or fewer, when negative). */
struct change {
    double t;
    int gpus, slots, workers;
};

static int by_time(const void *a, const void *b)
{
    double x = ((const struct change *)a)->t, y = ((const struct change *)b)->t;
    return (x > y) - (x < y);
}

static json_t *point(double t, long gpus, long slots, long workers)
{
    return json_pack("{s:o, s:I, s:I, s:I}", "t", iso_time(t), "gpus", (json_int_t)gpus, "slots",
                     (json_int_t)slots, "workers", (json_int_t)workers);
}

json_t *api_cluster_usage(json_t *attempts, double from, double to)
{
    size_t na = json_array_size(attempts), n = 0, i;
    struct change *c = calloc(2 * na + 1, sizeof(*c));
    json_t *points = json_array(), *a;
    long gpus = 0, slots = 0, workers = 0;

    if (c == NULL || points == NULL) {
        free(c);
        json_decref(points);
        return NULL;
    }
    /* What ran at from is where the series starts; each start and end after it a step. */
    json_array_foreach(attempts, i, a)
    {
        double start = json_number_value(json_object_get(a, "start_s"));
        json_t *end = json_object_get(a, "end_s");
        int g = (int)json_integer_value(json_object_get(a, "gpus"));
        int s = (int)json_integer_value(json_object_get(a, "slots"));
        int w = (int)json_integer_value(json_object_get(a, "workers"));
        if (start > to || (json_is_number(end) && json_number_value(end) <= from))
            continue;
        c[n++] = (struct change){start > from ? start : from, g, s, w};
        if (json_is_number(end) && json_number_value(end) < to)
            c[n++] = (struct change){json_number_value(end), -g, -s, -w};
    }
    qsort(c, n, sizeof(*c), by_time);
    i = 0;
    while (i < n && c[i].t <= from) { /* the usage at from */
        gpus += c[i].gpus;
        slots += c[i].slots;
        workers += c[i].workers;
        i++;
    }
    json_array_append_new(points, point(from, gpus, slots, workers));
    while (i < n) { /* changes at one instant (a resize's end and start) make one step */
        double t = c[i].t;
        for (; i < n && c[i].t == t; i++) {
            gpus += c[i].gpus;
            slots += c[i].slots;
            workers += c[i].workers;
        }
        json_array_append_new(points, point(t, gpus, slots, workers));
    }
    json_array_append_new(points, point(to, gpus, slots, workers));
    free(c);
    return points;
}

/*
 * The longest window GET /v1/cluster/usage looks back: a month. Every attempt that ran in it
 * is read (the attempts have no index by time), so a bound keeps one request's work and
 * answer proportionate; a dashboard shows an hour by default.
 */
#define USAGE_WINDOW_MAX_S (30LL * 86400)
#define USAGE_WINDOW_MIN_S 60

/*
 * GET /v1/cluster/usage?window=S: GPUs, slots and workers in use over the last S seconds
 * (3600 by default), from the attempts that ran then, as a step series, with the
 * cluster's capacity. Any caller may read it: it names no job, and GET /v1/cluster already
 * shows every caller which jobs hold what now.
 */
static void cluster_usage(const struct api_config *cfg, const struct api_request *req,
                          const char *param, struct api_response *resp)
{
    const char *w = req->query(req->conn, "window");
    long long window = 3600;
    struct timespec now;
    double to, from;
    json_t *attempts, *points;
    long gpus, slots;
    struct error err;

    if (w != NULL &&
        (api__parse_count(w, USAGE_WINDOW_MAX_S, &window) < 0 || window < USAGE_WINDOW_MIN_S)) {
        api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                    "window must be a number of seconds in [%d, %lld], not '%.64s'",
                    USAGE_WINDOW_MIN_S, USAGE_WINDOW_MAX_S, w);
        return;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    to = (double)now.tv_sec + now.tv_nsec / 1e9;
    from = to - (double)window;
    if (store_attempts_since(req->store, from, &attempts, &err) < 0) {
        api__store_problem(resp, req->path, &err);
        return;
    }
    points = api_cluster_usage(attempts, from, to);
    json_decref(attempts);
    gpus = cfg->cluster ? cfg->cluster->gpus : 0;
    slots = cfg->cluster ? cfg->cluster->slots : 0;
    resp->body = json_pack("{s:I, s:{s:I, s:I}, s:o?}", "window_s", (json_int_t)window, "capacity",
                           "gpus", (json_int_t)gpus, "slots", (json_int_t)slots, "points", points);
    if (points == NULL || resp->body == NULL) {
        json_decref(resp->body);
        resp->body = NULL;
        api_problem(resp, 503, "busy", "Service Unavailable", req->path, "out of memory");
        return;
    }
    resp->status = 200;
}
