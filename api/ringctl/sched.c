/* SPDX-License-Identifier: Apache-2.0 */
/* sched.c - ringctl's scheduler views: `ringctl cluster`, `ringctl policy`, and what
 * `ringctl show` says of sizes and speeds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "ringctl.h"

int ringctl_policy(int argc, char **argv)
{
    json_t *info = NULL;
    int rc;
    if (argc > 2) {
        fprintf(stderr, "usage: ringctl policy [NAME]   (ringctl policy lists the names)\n");
        return EXIT_USAGE;
    }
    if (argc == 2) {
        json_t *body = json_pack("{s:s}", "policy", argv[1]);
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        rc = ringctl__call("PUT", "/v1/scheduler", text, &info);
        free(text);
    } else {
        rc = ringctl__call("GET", "/v1/scheduler", NULL, &info);
    }
    if (rc != 0)
        return rc;
    if (ringctl__json_out()) {
        ringctl__print_json(info);
    } else {
        json_t *p, *v;
        const char *name;
        size_t i;
        printf("policy     %s (", json_string_value(json_object_get(info, "policy")));
        json_array_foreach(json_object_get(info, "policies"), i, p)
            printf("%s%s", i ? ", " : "", json_string_value(p));
        printf(")\nbackend    %s\ninterval   %g s",
               json_string_value(json_object_get(info, "backend")),
               json_number_value(json_object_get(info, "interval_s")));
        /* Only what the active policy reads: "restart_cost_s" shows as "restart cost 10 s". */
        i = 0;
        json_object_foreach(json_object_get(info, "settings"), name, v)
        {
            char label[64];
            size_t n = strlen(name);
            int seconds = n > 2 && strcmp(name + n - 2, "_s") == 0;
            snprintf(label, sizeof(label), "%.*s", (int)(seconds ? n - 2 : n), name);
            for (char *c = label; *c; c++)
                *c = *c == '_' ? ' ' : *c;
            printf("%s%s %g%s", i++ ? ", " : "; ", label, json_number_value(v),
                   seconds ? " s" : "");
        }
        printf("\npasses     %lld (%.2f ms mean, %.2f ms max), %lld resizes, %lld preemptions\n",
               json_integer_value(json_object_get(info, "passes")),
               json_number_value(json_object_get(info, "pass_ms_mean")),
               json_number_value(json_object_get(info, "pass_ms_max")),
               json_integer_value(json_object_get(info, "resizes")),
               json_integer_value(json_object_get(info, "preemptions")));
    }
    json_decref(info);
    return 0;
}

void ringctl_show_scaling(json_t *job)
{
    json_t *sc = json_object_get(job, "scaling"), *h, *t, *ro;
    size_t i;
    if (sc == NULL)
        return;
    printf("size       %lld workers now; sizes so far:",
           json_integer_value(json_object_get(sc, "workers")));
    json_array_foreach(json_object_get(sc, "history"), i, h)
        printf("%s%lld", i ? " -> " : " ", json_integer_value(json_object_get(h, "workers")));
    printf("\nthroughput %7s %14s %14s\n", "workers", "observed/s", "predicted/s");
    json_array_foreach(json_object_get(sc, "throughput"), i, t)
    {
        json_t *o = json_object_get(t, "observed_samples_per_s");
        json_t *p = json_object_get(t, "predicted_samples_per_s");
        char obs[32] = "-", pred[32] = "-";
        if (json_is_number(o))
            snprintf(obs, sizeof(obs), "%.1f", json_number_value(o));
        if (json_is_number(p))
            snprintf(pred, sizeof(pred), "%.1f", json_number_value(p));
        printf("           %7lld %14s %14s\n", json_integer_value(json_object_get(t, "workers")),
               obs, pred);
    }
    ro = json_object_get(sc, "restart_overhead_s");
    printf("restarts   %lld", json_integer_value(json_object_get(ro, "restarts")));
    if (json_is_number(json_object_get(ro, "stop")))
        printf(", stop %.2f s", json_number_value(json_object_get(ro, "stop")));
    if (json_is_number(json_object_get(ro, "start")))
        printf(", start %.2f s", json_number_value(json_object_get(ro, "start")));
    printf(" (mean: stop requested -> every rank exited; start -> first progress)\n");
}

int ringctl_cluster(void)
{
    json_t *c, *n;
    size_t i;
    int rc = ringctl__call("GET", "/v1/cluster", NULL, &c);
    if (rc != 0)
        return rc;
    if (ringctl__json_out()) {
        ringctl__print_json(c);
        json_decref(c);
        return 0;
    }
    printf("%-20s %6s %6s %5s %s\n", "NODE", "SLOTS", "FREE", "GPUS", "JOBS");
    json_array_foreach(json_object_get(c, "nodes"), i, n)
    {
        json_t *jobs = json_object_get(n, "jobs"), *j;
        size_t k;
        printf("%-20s %6lld %6lld %5zu%s", ringctl__str(n, "name"),
               json_integer_value(json_object_get(n, "slots")),
               json_integer_value(json_object_get(n, "slots_free")),
               json_array_size(json_object_get(n, "gpus")),
               json_is_true(json_object_get(n, "offline")) ? " offline" : "");
        json_array_foreach(jobs, k, j) printf(" %s(%lld)", ringctl__str(j, "id"),
                                              json_integer_value(json_object_get(j, "workers")));
        printf("\n");
    }
    json_decref(c);
    return 0;
}
