/* SPDX-License-Identifier: Apache-2.0 */
/* log.c - libring's only way to print: one line per message on stderr, with the rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/base.h"

static const char *const level_names[] = {"error", "warning", "info", "debug", "trace"};
static int log_level = RING_LOG_WARNING;
static int log_rank = -1;

void ring__log_init(int rank)
{
    const char *v = getenv("RING_LOG_LEVEL");
    log_rank = rank;
    if (v == NULL || *v == '\0')
        return;
    for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++) {
        if (strcasecmp(v, level_names[i]) == 0) {
            log_level = i;
            return;
        }
    }
    ring__log(RING_LOG_WARNING,
              "RING_LOG_LEVEL='%s' is not one of error, warning, info, debug, trace; "
              "using warning",
              v);
}

int ring__log_enabled(enum ring__log_level level)
{
    return (int)level <= log_level;
}

void ring__log(enum ring__log_level level, const char *fmt, ...)
{
    char line[1024];
    int n;
    va_list ap;

    if (!ring__log_enabled(level))
        return;
    if (log_rank >= 0)
        n = snprintf(line, sizeof(line), "[ring %d] %s: ", log_rank, level_names[level]);
    else
        n = snprintf(line, sizeof(line), "[ring] %s: ", level_names[level]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = (int)strlen(line);
    line[n++] = '\n';
    /* One write per line so that ranks sharing a pipe do not interleave mid-line. A failed
     * log write has nowhere to be reported, so it is dropped. */
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}
