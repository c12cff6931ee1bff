/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jobspec.h - the JobSpec: parsing, validation at the edge, and defaults.
 *
 *   {"name": "resnet", "command": ["./train", "--epochs", "10"], "workers": 4 | {"min":2,"max":8},
 *    "gpus_per_worker": 1, "cpus_per_worker": 1, "env": {"K": "V"}, "working_dir": "/abs",
 *    "priority": 0, "max_restarts": 0, "checkpoint_dir": "/abs", "labels": {"k": "v"},
 *    "backend": "local" | "slurm", "launcher": "ringrun" | "mpirun"}
 */
#ifndef RINGD_JOBSPEC_H
#define RINGD_JOBSPEC_H

#include <jansson.h>

#include "scheduler/model/cluster.h"

/* What this ringd can run (borrowed). */
struct jobspec_limits {
    const struct cluster *cluster; /* a job whose workers.min can never fit is refused;
                                    * NULL: no check */
    const char *backend;           /* the backend this ringd runs ("local"); a JobSpec that
                                    * names another is refused; NULL: "local" */
};

/*
 * Parses text (len bytes) into a validated JobSpec with every default filled in, as a new
 * reference in *out. On failure returns -1 and sets *errors to a new array of
 * {"field": path, "detail": what to fix} (at least one), *status to the HTTP status
 * (400 malformed JSON, 422 invalid values) and *kind to the problem kind.
 */
int jobspec_parse(const char *text, size_t len, const struct jobspec_limits *lim, json_t **out,
                  json_t **errors, int *status, const char **kind);

#endif /* RINGD_JOBSPEC_H */
