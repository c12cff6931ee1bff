/* SPDX-License-Identifier: Apache-2.0 */
/* env.c - strict parsing of the RING_* environment. */
#include <errno.h>
#include <stdlib.h>

#include "base/base.h"

int ring__env_int(const char *name, long dflt, long min, long max, long *out)
{
    const char *v = getenv(name);
    char *end;
    long x;

    *out = dflt;
    if (v == NULL || *v == '\0')
        return 0;
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || x < min || x > max) {
        ring__log(RING_LOG_ERROR, "%s='%s' must be an integer in [%ld, %ld]", name, v, min, max);
        return ring__err(RING_EENV, "%s='%s' must be an integer in [%ld, %ld]", name, v, min, max);
    }
    *out = x;
    return 0;
}
