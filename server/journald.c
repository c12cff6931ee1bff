/* SPDX-License-Identifier: Apache-2.0 */
/* journald.c - a syslog priority before each log line for the journal (journald.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "journald.h"

/* log.c cuts a line at 4 KiB; the prefix and the newline fit beside it. */
#define JOURNALD_LINE_MAX (4096 + 8)

/* The line as "<N>TEXT\n", in one write(2) so that threads' lines never mix. */
static void to_journal(void *arg, const struct log_line *l, const char *text)
{
    static const int priority[] = {
        [LOG_LEVEL_ERROR] = 3, [LOG_LEVEL_WARNING] = 4, [LOG_LEVEL_INFO] = 6};
    char buf[JOURNALD_LINE_MAX];
    int n = snprintf(buf, sizeof(buf), "<%d>%s\n", priority[l->level], text);
    size_t len, off = 0;

    (void)arg;
    if (n < 0)
        return;
    len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
    buf[len - 1] = '\n'; /* a line cut short still ends */
    while (off < len) {
        ssize_t w = write(STDERR_FILENO, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere to say it */
        off += (size_t)w;
    }
}

int journald_init(void)
{
    const char *stream = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat sb;

    if (stream == NULL || sscanf(stream, "%llu:%llu", &dev, &ino) != 2 ||
        fstat(STDERR_FILENO, &sb) < 0 || (unsigned long long)sb.st_dev != dev ||
        (unsigned long long)sb.st_ino != ino)
        return 0;
    log_set_output(to_journal, NULL);
    return 1;
}
