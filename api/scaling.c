/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scaling.c - a job's size history, its throughput per size (observed, and predicted by the
 * scheduler's speed model where it has not run) and its restart overhead, for the API.
 */
#include <math.h>
#include <string.h>

#include "api.h"
#include "scheduler/model/speed.h"

/* Sizes worth showing: every size it ran at, and powers of two up to workers.max. */
static int sizes(json_t *attempts, int max, int *out, int cap)
{
    size_t i;
    json_t *a;
    int n = 0;
    for (int k = 1; k <= max && n < cap; k *= 2)
        out[n++] = k;
    if (max > 0 && n < cap && out[n - 1] != max)
        out[n++] = max;
    json_array_foreach(attempts, i, a)
    {
        int w = (int)json_integer_value(json_object_get(a, "world_size")), seen = 0;
        for (int k = 0; k < n; k++)
            seen |= out[k] == w;
        if (!seen && w > 0 && n < cap)
            out[n++] = w;
    }
    for (int x = 1; x < n; x++) { /* ascending */
        int v = out[x], y = x;
        while (y > 0 && out[y - 1] > v) {
            out[y] = out[y - 1];
            y--;
        }
        out[y] = v;
    }
    return n;
}

json_t *api_job_scaling(json_t *attempts, json_t *spec, const char *state)
{
    json_t *history = json_array(), *thr = json_array(), *a, *last;
    struct speed sp;
    size_t i;
    double stop = 0, start = 0;
    int nstop = 0, nstart = 0, now = 0, list[48], n;
    int max = (int)json_integer_value(json_object_get(json_object_get(spec, "workers"), "max"));

    speed_init(&sp, SPEED_WEAK);
    json_array_foreach(attempts, i, a)
    {
        int w = (int)json_integer_value(json_object_get(a, "world_size"));
        json_t *h = json_pack("{s:O, s:i, s:O, s:O}", "attempt", json_object_get(a, "number"),
                              "workers", w, "started_at", json_object_get(a, "started_at"), "ran_s",
                              json_object_get(a, "ran_s"));
        if (json_object_get(a, "ended_at"))
            json_object_set(h, "ended_at", json_object_get(a, "ended_at"));
        json_array_append_new(history, h);
        if (json_is_number(json_object_get(a, "samples_per_s")))
            speed_observe(&sp, w, json_number_value(json_object_get(a, "samples_per_s")));
        if (json_is_number(json_object_get(a, "stop_overhead_s"))) {
            stop += json_number_value(json_object_get(a, "stop_overhead_s"));
            nstop++;
        }
        /* The first attempt's start is a cold start, not part of a restart. */
        if (i > 0 && json_is_number(json_object_get(a, "start_overhead_s"))) {
            start += json_number_value(json_object_get(a, "start_overhead_s"));
            nstart++;
        }
    }
    last = json_array_get(attempts, json_array_size(attempts) - 1);
    if (last != NULL && json_object_get(last, "ended_at") == NULL &&
        (!strcmp(state, "RUNNING") || !strcmp(state, "STOPPING")))
        now = (int)json_integer_value(json_object_get(last, "world_size"));
    n = sizes(attempts, max, list, (int)(sizeof(list) / sizeof(list[0])));
    for (int k = 0; k < n; k++) {
        double seen, pred = speed_predict(&sp, list[k]);
        json_t *row = json_pack("{s:i}", "workers", list[k]);
        json_object_set_new(row, "observed_samples_per_s",
                            speed_observed(&sp, list[k], &seen) ? json_real(seen) : json_null());
        json_object_set_new(row, "predicted_samples_per_s",
                            pred > 0 ? json_real(round(pred * 10) / 10) : json_null());
        json_array_append_new(thr, row);
    }
    return json_pack("{s:i, s:o, s:o, s:{s:o, s:o, s:i}}", "workers", now, "history", history,
                     "throughput", thr, "restart_overhead_s", "stop",
                     nstop ? json_real(stop / nstop) : json_null(), "start",
                     nstart ? json_real(start / nstart) : json_null(), "restarts",
                     json_array_size(attempts) > 0 ? (int)json_array_size(attempts) - 1 : 0);
}
