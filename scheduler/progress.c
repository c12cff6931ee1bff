/* SPDX-License-Identifier: Apache-2.0 */
/* progress.c - reads rank 0's progress.json. */
#include <jansson.h>

#include "jobfs.h"

#include "progress.h"

static double number(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) && json_number_value(v) >= 0 ? json_number_value(v) : -1;
}

int progress_read(const char *path, struct progress *p)
{
    json_error_t jerr;
    /* The job owns the file: never through a link, never a FIFO (jobfs.h). */
    FILE *f = jobfs_fopen(path);
    json_t *o = f ? json_loadf(f, 0, &jerr) : NULL;
    if (f != NULL)
        fclose(f);
    if (!json_is_object(o)) {
        json_decref(o);
        return -1;
    }
    p->step = (long)number(o, "step");
    p->total_steps = (long)number(o, "total_steps");
    p->samples_per_s = number(o, "samples_per_s");
    p->samples = number(o, "samples");
    p->total_samples = number(o, "total_samples");
    p->world_size = (int)number(o, "world_size");
    json_decref(o);
    return 0;
}
