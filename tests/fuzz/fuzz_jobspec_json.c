/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_jobspec_json - the JobSpec parser (api/jobspec.c) on any bytes, as POST /v1/jobs
 * gives it. Besides memory safety it checks what the parser promises:
 *   - a refusal is a 400 or 422 with at least one {"field", "detail"} string pair;
 *   - an accepted spec has only the documented fields (jobspec.h), valid env names,
 *     label keys of 1..63 bytes and workers normalized to {min, max} with
 *     1 <= min <= max; and it parses again to the very same spec (what is stored is
 *     what would be accepted).
 */
#include <ctype.h>
#include <string.h>

#include <jansson.h>

#include "api/jobspec.h"
#include "fuzz.h"

#define SLOTS 8
#define GPUS  2

/* One node of SLOTS slots and GPUS GPUs, as a small ringd has; made once, kept to the end. */
static const struct jobspec_limits *limits(void)
{
    static struct jobspec_limits lim;
    if (lim.cluster == NULL) {
        lim.cluster = cluster_create(1, SLOTS, GPUS);
        lim.backend = "local";
        FUZZ_CHECK(lim.cluster != NULL);
    }
    return &lim;
}

static const char *const documented[] = {
    "name",        "command",  "workers",      "gpus_per_worker", "cpus_per_worker", "env",
    "working_dir", "priority", "max_restarts", "checkpoint_dir",  "labels",          "backend",
    "launcher",    NULL,
};

static int documented_field(const char *key)
{
    for (int i = 0; documented[i]; i++)
        if (strcmp(documented[i], key) == 0)
            return 1;
    return 0;
}

static int env_name(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_')
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return 0;
    return 1;
}

static void check_refusal(json_t *errors, int status, const char *kind)
{
    size_t i;
    json_t *e;
    FUZZ_CHECK(json_is_array(errors) && json_array_size(errors) > 0);
    FUZZ_CHECK(status == 400 || status == 422);
    FUZZ_CHECK(kind != NULL && *kind != '\0');
    json_array_foreach(errors, i, e)
    {
        FUZZ_CHECK(json_is_string(json_object_get(e, "field")));
        FUZZ_CHECK(json_is_string(json_object_get(e, "detail")));
        FUZZ_CHECK(json_string_length(json_object_get(e, "detail")) > 0);
    }
}

static void check_accepted(json_t *spec)
{
    const char *key;
    json_t *v, *w = json_object_get(spec, "workers");
    char *text;
    json_t *again = NULL, *errors = NULL;
    int status = 0;
    const char *kind = NULL;

    FUZZ_CHECK(json_is_object(spec));
    json_object_foreach(spec, key, v) FUZZ_CHECK(documented_field(key));
    json_object_foreach(json_object_get(spec, "env"), key, v)
    {
        FUZZ_CHECK(env_name(key) && strncmp(key, "RING_", 5) != 0);
        FUZZ_CHECK(json_is_string(v));
    }
    json_object_foreach(json_object_get(spec, "labels"), key, v)
    {
        FUZZ_CHECK(strlen(key) >= 1 && strlen(key) <= 63);
        FUZZ_CHECK(json_is_string(v));
    }
    FUZZ_CHECK(json_is_integer(json_object_get(w, "min")));
    FUZZ_CHECK(json_integer_value(json_object_get(w, "min")) >= 1);
    FUZZ_CHECK(json_integer_value(json_object_get(w, "max")) >=
               json_integer_value(json_object_get(w, "min")));

    text = json_dumps(spec, JSON_COMPACT);
    FUZZ_CHECK(text != NULL);
    FUZZ_CHECK(jobspec_parse(text, strlen(text), limits(), &again, &errors, &status, &kind) == 0);
    FUZZ_CHECK(json_equal(spec, again));
    json_decref(again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *spec = NULL, *errors = NULL;
    int status = 0;
    const char *kind = NULL;

    if (jobspec_parse((const char *)data, size, limits(), &spec, &errors, &status, &kind) == 0) {
        FUZZ_CHECK(errors == NULL);
        check_accepted(spec);
    } else {
        FUZZ_CHECK(spec == NULL);
        check_refusal(errors, status, kind);
    }
    json_decref(spec);
    json_decref(errors);
    return 0;
}
