/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_jobspec_yaml - a YAML job spec as ringctl submit -f reads it (api/spec_yaml.c), then
 * on to the JobSpec parser as ringd would get it. Besides memory safety (libyaml's document
 * API, aliases, deep nesting) it checks:
 *   - a refusal says where: "<name>:" starts the message;
 *   - a mapping (ringctl sends nothing else: "a job spec is a mapping") converts to JSON
 *     that Jansson writes out and the JobSpec parser reads back: it takes it, or refuses it
 *     as invalid (422), never as malformed (400).
 */
#include <string.h>

#include <jansson.h>

#include "api/jobspec.h"
#include "api/ringctl/spec_yaml.h"
#include "fuzz.h"

/* One node of 8 slots and 2 GPUs, as a small ringd has; made once, kept to the end. */
static const struct jobspec_limits *limits(void)
{
    static struct jobspec_limits lim;
    if (lim.cluster == NULL) {
        lim.cluster = cluster_create(1, 8, 2);
        lim.backend = "local";
        FUZZ_CHECK(lim.cluster != NULL);
    }
    return &lim;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512] = "";
    json_t *doc = spec_yaml_load_string((const char *)data, size, "spec.yaml", err, sizeof(err));
    json_t *spec = NULL, *errors = NULL;
    int status = 0;
    const char *kind = NULL;
    char *text;

    if (doc == NULL) {
        FUZZ_CHECK(strncmp(err, "spec.yaml:", 10) == 0);
        return 0;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        return 0;
    }
    text = json_dumps(doc, JSON_COMPACT);
    FUZZ_CHECK(text != NULL);
    if (jobspec_parse(text, strlen(text), limits(), &spec, &errors, &status, &kind) == 0)
        FUZZ_CHECK(json_is_object(spec) && errors == NULL);
    else
        FUZZ_CHECK(json_array_size(errors) > 0 && status == 422); /* 400: unreadable JSON */
    free(text);
    json_decref(spec);
    json_decref(errors);
    json_decref(doc);
    return 0;
}
