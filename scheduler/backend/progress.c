/* SPDX-License-Identifier: Apache-2.0 */
/* progress.c - reads rank 0's progress.json, a bounded number of bytes at most. */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include <jansson.h>

#include "jobfs.h"

#include "progress.h"

static double number(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) && json_number_value(v) >= 0 ? json_number_value(v) : -1;
}

/* Reads path into buf (PROGRESS_MAX + 1 bytes), NUL-terminated: the length, or -1 with
 * errno (EFBIG when it is larger than PROGRESS_MAX). */
static long read_bounded(const char *path, char *buf)
{
    /* The job owns the file: never through a link, never a FIFO (jobfs.h). */
    FILE *f = jobfs_fopen(path);
    struct stat sb;
    size_t n;
    int e;

    if (f == NULL)
        return -1;
    /* A file too large is refused by its size, without reading it; one that grows while
     * it is read is refused when it gives more than PROGRESS_MAX bytes. */
    if (fstat(fileno(f), &sb) < 0) {
        e = errno;
        fclose(f);
        return errno = e, -1;
    }
    if (sb.st_size > PROGRESS_MAX) {
        fclose(f);
        return errno = EFBIG, -1;
    }
    n = fread(buf, 1, PROGRESS_MAX + 1, f);
    e = ferror(f) ? EIO : 0;
    fclose(f);
    if (e != 0)
        return errno = e, -1;
    if (n > PROGRESS_MAX)
        return errno = EFBIG, -1;
    buf[n] = '\0';
    return (long)n;
}

int progress_read(const char *path, struct progress *p)
{
    char buf[PROGRESS_MAX + 1];
    json_error_t jerr;
    json_t *o;
    long n = read_bounded(path, buf);

    if (n < 0)
        return -1;
    o = json_loadb(buf, (size_t)n, 0, &jerr);
    if (!json_is_object(o)) {
        json_decref(o);
        return errno = EINVAL, -1;
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
