/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svclog.h - the log lines of the service's own files (notify.c, reload.c, tls.c), in
 * ringd's logfmt with a timestamp, until the one shared logger (common/log.h) replaces it:
 * the same names, so that the switch is an include.
 */
#ifndef RINGD_SVCLOG_H
#define RINGD_SVCLOG_H

#include <stdarg.h>
#include <stdio.h>

#include "store.h" /* store_now_iso */

enum log_level { LOG_LEVEL_ERROR, LOG_LEVEL_WARNING, LOG_LEVEL_INFO };

static inline void log_msg(enum log_level level, const char *job, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void log_msg(enum log_level level, const char *job, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warning", "info"};
    char now[40], msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    store_now_iso(now, sizeof(now));
    fprintf(stderr, "ts=%s level=%s job=%s msg=\"%s\"\n", now, names[level], job ? job : "-",
            msg);
}

#define log_error(...)   log_msg(LOG_LEVEL_ERROR, NULL, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_LEVEL_WARNING, NULL, __VA_ARGS__)
#define log_info(...)    log_msg(LOG_LEVEL_INFO, NULL, __VA_ARGS__)

#endif /* RINGD_SVCLOG_H */
