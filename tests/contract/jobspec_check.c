/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jobspec_check - runs ringd's JobSpec validator (api/jobspec.c) over specs, for
 * jobspec_agree.py, which compares its verdicts with the OpenAPI document's JobSpec schema.
 *
 *   jobspec_check < specs      one JSON text per line in; one verdict per line out:
 *                              "1" accepted, or "0 STATUS FIELD" refused
 *
 * The validator runs as POST /v1/jobs runs it on a ringd of the local backend, without the
 * cluster-size check (which depends on the cluster, not on the spec: see the schema's
 * description).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/jobspec.h"

int main(void)
{
    struct jobspec_limits lim = {.cluster = NULL, .backend = "local"};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;

    while ((n = getline(&line, &cap, stdin)) > 0) {
        json_t *spec = NULL, *errors = NULL;
        const char *kind;
        int status = 0;
        if (line[n - 1] == '\n')
            line[--n] = '\0';
        if (jobspec_parse(line, (size_t)n, &lim, &spec, &errors, &status, &kind) == 0) {
            puts("1");
        } else {
            const char *field =
                json_string_value(json_object_get(json_array_get(errors, 0), "field"));
            printf("0 %d %s\n", status, field && *field ? field : "-");
        }
        json_decref(spec);
        json_decref(errors);
    }
    free(line);
    if (ferror(stdin) || fflush(stdout) != 0) {
        perror("jobspec_check");
        return 1;
    }
    return 0;
}
