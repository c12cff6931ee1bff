/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - the one line logger of ringd, ringrun, ringctl and ringsim.
 *
 * Every line has a time (RFC 3339 in UTC, with milliseconds), a level, and the job it is
 * about where there is one, in one of two shapes:
 *
 *   logfmt (ringd, whose log a machine reads):
 *     ts=2025-06-01T10:00:00.123Z level=info job=j-1f2e msg="attempt 2 started"
 *     ts=2025-06-01T10:00:00.125Z level=info msg=request method="GET" path="/v1/jobs" ...
 *   text (the command-line programs, whose lines a person reads):
 *     2025-06-01T10:00:00.123Z error ringctl: cannot reach ringd at http://127.0.0.1:8080
 *
 * A line goes to its output whole, in one write(2) (stderr, unbuffered by default), so
 * that the lines of several threads never mix. The output is a function (log_set_output),
 * so that another sink (the systemd journal) can take the lines, with their fields, instead.
 *
 * Threads: log_init and log_set_output before any thread logs; the rest from any thread.
 */
#ifndef RING_COMMON_LOG_H
#define RING_COMMON_LOG_H

#include <stdarg.h>

/* (Not LOG_ERR and the like: <syslog.h>, which a journal output needs, has those.) */
enum log_level { LOG_LEVEL_ERROR, LOG_LEVEL_WARNING, LOG_LEVEL_INFO };

enum log_style {
    LOG_STYLE_TEXT,   /* "TIME LEVEL PROGRAM: [job JOB: ]MESSAGE" (the default) */
    LOG_STYLE_LOGFMT, /* "ts=TIME level=LEVEL [job=JOB ]msg=..." */
};

/* One line's parts, for an output function. Every pointer is borrowed for the call. */
struct log_line {
    enum log_level level;
    const char *time;    /* RFC 3339, UTC, milliseconds */
    const char *program; /* as log_init named it */
    const char *job;     /* the job the line is about, or NULL */
    const char *msg;     /* what happened */
    const char *fields;  /* log_event's key="value" pairs after msg, or NULL */
};

/* Takes one line: l's parts, and text, the whole line as the style renders it (without a
 * newline). Must not log. */
typedef void log_output_fn(void *arg, const struct log_line *l, const char *text);

/* The program's name and its lines' shape. Without a call: the program's own name, text. */
void log_init(const char *program, enum log_style style);
/* Where lines go from now on; NULL: stderr (the default). */
void log_set_output(log_output_fn *out, void *arg);

/* Logs one line about job (NULL: none). A message is cut at 2 KiB. */
void log_msg(enum log_level level, const char *job, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void log_vmsg(enum log_level level, const char *job, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* A line that names an event and carries fields (ringd's access log): logfmt's
 * "msg=EVENT FIELDS", text's "EVENT FIELDS". fields are key="value" pairs whose values the
 * caller escaped. */
void log_event(enum log_level level, const char *job, const char *event, const char *fields);

/* Shorthands for a line about no job. */
#define log_error(...)   log_msg(LOG_LEVEL_ERROR, NULL, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_LEVEL_WARNING, NULL, __VA_ARGS__)
#define log_info(...)    log_msg(LOG_LEVEL_INFO, NULL, __VA_ARGS__)

/* "error", "warning", "info". */
const char *log_level_name(enum log_level level);

#endif /* RING_COMMON_LOG_H */
