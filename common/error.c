/* SPDX-License-Identifier: Apache-2.0 */
/* error.c - errprintf (error.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "error.h"

int errprintf(struct error *err, const char *fmt, ...)
{
    int saved = errno;
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof(err->text), fmt, ap);
        va_end(ap);
    }
    errno = saved;
    return -1;
}
