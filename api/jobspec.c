/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jobspec.c - validates a JobSpec once, at the edge, and names the field path of every
 * problem ("workers.max must be >= workers.min"). Unknown fields are errors, not ignored:
 * a typo such as "gpu_per_worker" must not silently run a job without GPUs.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "jobspec.h"
#include "utf8.h"

/* Limits that keep one spec from being absurd; each is far above real use. */
#define NAME_MAX_LEN   128
#define ARGV_MAX       4096
#define ENV_MAX        1024
#define LABELS_MAX     64
#define LABEL_LEN_MAX  63
#define WORKERS_MAX    65536
#define PRIORITY_RANGE 1000000
#define RESTARTS_MAX   1000

struct check {
    json_t *errors;
    int lost; /* errors that could not be recorded (out of memory): still errors */
};

static void bad(struct check *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Records an error. Details echo what the client sent, cut to fit: the cut may fall inside
 * a UTF-8 character, and the client's text may not be UTF-8 at all, so both strings are
 * repaired first. An error is never dropped: if it still cannot be recorded, a plain one
 * takes its place, so that a spec with errors can never pass as valid.
 */
static void bad(struct check *c, const char *field, const char *fmt, ...)
{
    char detail[256], f[192];
    va_list ap;
    json_t *e;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    snprintf(f, sizeof(f), "%s", field);
    e = json_pack("{s:s, s:s}", "field", utf8_repair(f), "detail", utf8_repair(detail));
    if (e == NULL)
        e = json_pack("{s:s, s:s}", "field", "", "detail", "the JobSpec is invalid");
    if (e == NULL || json_array_append_new(c->errors, e) < 0)
        c->lost++;
}

static const char *const known[] = {
    "name",        "command",  "workers",      "gpus_per_worker", "cpus_per_worker", "env",
    "working_dir", "priority", "max_restarts", "checkpoint_dir",  "labels",          "backend",
    "launcher",    NULL,
};

static int is_known(const char *key)
{
    for (int i = 0; known[i]; i++) {
        if (strcmp(known[i], key) == 0)
            return 1;
    }
    return 0;
}

/* An optional integer field in [lo, hi], with a default. */
static json_int_t int_field(struct check *c, json_t *spec, const char *key, json_int_t dflt,
                            json_int_t lo, json_int_t hi)
{
    json_t *v = json_object_get(spec, key);
    if (v == NULL)
        return dflt;
    if (!json_is_integer(v)) {
        bad(c, key, "%s must be an integer", key);
        return dflt;
    }
    if (json_integer_value(v) < lo || json_integer_value(v) > hi) {
        bad(c, key, "%s must be in [%lld, %lld], not %lld", key, (long long)lo, (long long)hi,
            (long long)json_integer_value(v));
        return dflt;
    }
    return json_integer_value(v);
}

static int env_name_ok(const char *s)
{
    if (!(isalpha((unsigned char)*s) || *s == '_'))
        return 0;
    for (; *s; s++) {
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return 0;
    }
    return 1;
}

static void check_name(struct check *c, json_t *spec)
{
    json_t *v = json_object_get(spec, "name");
    const char *s;
    if (v == NULL)
        return bad(c, "name", "name is required (letters, digits, '.', '_', '-')");
    if (!json_is_string(v))
        return bad(c, "name", "name must be a string");
    s = json_string_value(v);
    if (*s == '\0' || strlen(s) > NAME_MAX_LEN)
        return bad(c, "name", "name must have 1..%d characters", NAME_MAX_LEN);
    for (; *s; s++) {
        if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' && *s != '-')
            return bad(c, "name", "name may only use letters, digits, '.', '_' and '-'");
    }
}

static void check_command(struct check *c, json_t *spec)
{
    json_t *v = json_object_get(spec, "command"), *arg;
    size_t i;
    if (v == NULL)
        return bad(c, "command",
                   "command is required: the program and its arguments, as an "
                   "array of strings");
    if (!json_is_array(v))
        return bad(c, "command",
                   "command must be an array of strings (it is never run by a "
                   "shell)");
    if (json_array_size(v) == 0)
        return bad(c, "command", "command must not be empty: give at least the program");
    if (json_array_size(v) > ARGV_MAX)
        return bad(c, "command", "command has more than %d arguments", ARGV_MAX);
    json_array_foreach(v, i, arg)
    {
        char field[32];
        snprintf(field, sizeof(field), "command[%zu]", i);
        if (!json_is_string(arg))
            bad(c, field, "%s must be a string", field);
        else if (i == 0 && json_string_length(arg) == 0)
            bad(c, field, "command[0], the program, must not be empty");
        /* Without working_dir a job starts in its own new, empty run directory, where a
         * program named relative to the directory can never be found (exit 127, seen only
         * in the launcher's log): say so now. A bare name is looked up in PATH. */
        else if (i == 0 && json_string_value(arg)[0] != '/' &&
                 strchr(json_string_value(arg), '/') != NULL &&
                 json_object_get(spec, "working_dir") == NULL)
            bad(c, field,
                "command[0] '%.100s' is relative to working_dir, which is not set (a job "
                "starts in its own new run directory): give an absolute path or set "
                "working_dir",
                json_string_value(arg));
    }
}

/* workers: N or {min, max}; normalized to {min, max}. */
static void check_workers(struct check *c, json_t *spec, json_int_t *min, json_int_t *max)
{
    json_t *v = json_object_get(spec, "workers");
    *min = *max = 1;
    if (v == NULL)
        return;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 1 || json_integer_value(v) > WORKERS_MAX)
            return bad(c, "workers", "workers must be in [1, %d], not %lld", WORKERS_MAX,
                       (long long)json_integer_value(v));
        *min = *max = json_integer_value(v);
        return;
    }
    if (json_is_object(v)) {
        const char *key;
        json_t *x, *jmin = json_object_get(v, "min"), *jmax = json_object_get(v, "max");
        json_object_foreach(v, key, x)
        {
            if (strcmp(key, "min") != 0 && strcmp(key, "max") != 0) {
                char field[160];
                snprintf(field, sizeof(field), "workers.%.120s", key);
                bad(c, field, "unknown field '%.120s' in workers (want min and max)", key);
            }
        }
        if (!json_is_integer(jmin) || json_integer_value(jmin) < 1 ||
            json_integer_value(jmin) > WORKERS_MAX)
            return bad(c, "workers.min", "workers.min must be an integer in [1, %d]", WORKERS_MAX);
        if (!json_is_integer(jmax) || json_integer_value(jmax) > WORKERS_MAX)
            return bad(c, "workers.max", "workers.max must be an integer in [1, %d]", WORKERS_MAX);
        *min = json_integer_value(jmin);
        *max = json_integer_value(jmax);
        if (*max < *min)
            bad(c, "workers.max", "workers.max must be >= workers.min (%lld), not %lld",
                (long long)*min, (long long)*max);
        return;
    }
    bad(c, "workers", "workers must be an integer or {\"min\": N, \"max\": M}");
}

static void check_string_map(struct check *c, json_t *spec, const char *key, int env)
{
    json_t *v = json_object_get(spec, key), *x;
    const char *k;
    if (v == NULL)
        return;
    if (!json_is_object(v))
        return bad(c, key, "%s must be an object of strings", key);
    if (json_object_size(v) > (size_t)(env ? ENV_MAX : LABELS_MAX))
        return bad(c, key, "%s has more than %d entries", key, env ? ENV_MAX : LABELS_MAX);
    json_object_foreach(v, k, x)
    {
        char field[160];
        snprintf(field, sizeof(field), "%s.%.120s", key, k);
        if (!json_is_string(x))
            bad(c, field, "%s must be a string", field);
        if (env && !env_name_ok(k))
            bad(c, field,
                "'%.120s' is not a valid environment variable name (letters, digits "
                "and '_', not starting with a digit)",
                k);
        if (env && strncmp(k, "RING_", 5) == 0)
            bad(c, field, "%.120s is set by ringd (the worker contract); remove it", k);
        if (!env && (strlen(k) == 0 || strlen(k) > LABEL_LEN_MAX))
            bad(c, field, "label keys must have 1..%d characters", LABEL_LEN_MAX);
    }
}

/* An absolute path. Whether working_dir exists is checked as the job's user, once the user is
 * known (routes_jobs.c): ringd's own view would tell what the user cannot see. */
static void check_dir(struct check *c, json_t *spec, const char *key)
{
    json_t *v = json_object_get(spec, key);
    if (v == NULL)
        return;
    if (!json_is_string(v) || json_string_value(v)[0] != '/')
        return bad(c, key, "%s must be an absolute path", key);
}

int jobspec_parse(const char *text, size_t len, const struct jobspec_limits *lim, json_t **out,
                  json_t **errors, int *status, const char **kind)
{
    const char *backend = lim && lim->backend ? lim->backend : "local";
    struct check c = {.errors = json_array()};
    json_error_t jerr;
    json_t *spec, *v;
    const char *key;
    json_int_t min, max, gpw, cpw;

    *out = NULL;
    /* Duplicate keys are an error: which one wins would otherwise be an accident. */
    spec = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (spec == NULL) {
        bad(&c, "", "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        *errors = c.errors;
        *status = 400;
        *kind = "malformed-json";
        return -1;
    }
    if (!json_is_object(spec)) {
        /* Not a request at all, as on every route with a body: 400, like JSON that does
         * not parse; 422 is for a JobSpec whose fields are wrong. */
        bad(&c, "", "the body must be a JSON object (a JobSpec), not %s",
            json_is_array(spec) ? "an array" : "a scalar");
        json_decref(spec);
        *errors = c.errors;
        *status = 400;
        *kind = "malformed-json";
        return -1;
    }
    json_object_foreach(spec, key, v)
    {
        if (!is_known(key))
            bad(&c, key, "unknown field '%s' (see /v1/openapi.json for the JobSpec)", key);
    }
    check_name(&c, spec);
    check_command(&c, spec);
    check_workers(&c, spec, &min, &max);
    gpw = int_field(&c, spec, "gpus_per_worker", 0, 0, 64);
    cpw = int_field(&c, spec, "cpus_per_worker", 1, 1, 4096);
    int_field(&c, spec, "priority", 0, -PRIORITY_RANGE, PRIORITY_RANGE);
    int_field(&c, spec, "max_restarts", 0, 0, RESTARTS_MAX);
    check_string_map(&c, spec, "env", 1);
    check_string_map(&c, spec, "labels", 0);
    check_dir(&c, spec, "working_dir");
    check_dir(&c, spec, "checkpoint_dir");
    v = json_object_get(spec, "backend");
    if (v != NULL && (!json_is_string(v) || (strcmp(json_string_value(v), "local") != 0 &&
                                             strcmp(json_string_value(v), "slurm") != 0)))
        bad(&c, "backend", "backend must be \"local\" or \"slurm\"");
    else if (v != NULL && strcmp(json_string_value(v), backend) != 0)
        /* Accepting it would run the job somewhere the user did not ask for. */
        bad(&c, "backend",
            "this ringd runs jobs on the %s backend; the %s backend is not configured here "
            "(drop backend, or submit to a ringd started with backend = %s)",
            backend, json_string_value(v), json_string_value(v));
    v = json_object_get(spec, "launcher");
    if (v != NULL && (!json_is_string(v) || (strcmp(json_string_value(v), "ringrun") != 0 &&
                                             strcmp(json_string_value(v), "mpirun") != 0)))
        bad(&c, "launcher", "launcher must be \"ringrun\" (the default) or \"mpirun\" (Open MPI)");
    if (json_array_size(c.errors) > 0 || c.lost)
        goto invalid;
    /* A job that can never fit is refused now rather than queued forever. */
    if (lim != NULL && lim->cluster != NULL &&
        cluster_capacity(lim->cluster, (int)cpw, (int)gpw) < min) {
        const struct cluster *cl = lim->cluster;
        if (gpw > 0)
            bad(&c, "workers",
                "the job needs %lld workers of %lld GPUs and %lld slots each (workers.min x "
                "gpus_per_worker, cpus_per_worker) but this cluster fits %ld: %d node%s, %ld "
                "GPUs and %ld slots in all",
                (long long)min, (long long)gpw, (long long)cpw,
                cluster_capacity(cl, (int)cpw, (int)gpw), cl->nnodes, cl->nnodes == 1 ? "" : "s",
                cl->gpus, cl->slots);
        else
            bad(&c, "workers",
                "the job needs %lld workers of %lld slots each (workers.min x cpus_per_worker) "
                "but this cluster fits %ld: %d node%s, %ld slots in all",
                (long long)min, (long long)cpw, cluster_capacity(cl, (int)cpw, 0), cl->nnodes,
                cl->nnodes == 1 ? "" : "s", cl->slots);
        goto invalid;
    }
    /* Defaults, so that what is stored says exactly what will run. */
    json_object_set_new(spec, "workers", json_pack("{s:I, s:I}", "min", min, "max", max));
    if (!json_object_get(spec, "gpus_per_worker"))
        json_object_set_new(spec, "gpus_per_worker", json_integer(0));
    if (!json_object_get(spec, "cpus_per_worker"))
        json_object_set_new(spec, "cpus_per_worker", json_integer(1));
    if (!json_object_get(spec, "priority"))
        json_object_set_new(spec, "priority", json_integer(0));
    if (!json_object_get(spec, "max_restarts"))
        json_object_set_new(spec, "max_restarts", json_integer(0));
    if (!json_object_get(spec, "env"))
        json_object_set_new(spec, "env", json_object());
    if (!json_object_get(spec, "labels"))
        json_object_set_new(spec, "labels", json_object());
    if (!json_object_get(spec, "backend"))
        json_object_set_new(spec, "backend", json_string(backend));
    if (!json_object_get(spec, "launcher"))
        json_object_set_new(spec, "launcher", json_string("ringrun"));
    json_decref(c.errors);
    *errors = NULL;
    *out = spec;
    return 0;
invalid:
    json_decref(spec);
    *errors = c.errors;
    *status = 422;
    *kind = "validation-error";
    return -1;
}
