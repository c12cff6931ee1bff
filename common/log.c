/* SPDX-License-Identifier: Apache-2.0 */
/* log.c - the one line logger (log.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

/*
 * A message's longest text, and a line's: ringd's longest messages (a job's end with the
 * resource manager's reason, a JobSpec path in an error) stay under 1 KiB; the access log's
 * fields are capped at about 900 bytes by its caller. Longer is cut, never split.
 */
#define LOG_MSG_MAX  2048
#define LOG_LINE_MAX 4096

static const char *log_program;
static enum log_style log_shape = LOG_STYLE_TEXT;
static log_output_fn *log_out;
static void *log_out_arg;

void log_init(const char *program, enum log_style style)
{
    log_program = program;
    log_shape = style;
}

void log_set_output(log_output_fn *out, void *arg)
{
    log_out = out;
    log_out_arg = arg;
}

const char *log_level_name(enum log_level level)
{
    switch (level) {
    case LOG_LEVEL_ERROR:
        return "error";
    case LOG_LEVEL_WARNING:
        return "warning";
    default:
        return "info";
    }
}

/* The default output: the line and a newline to stderr in one write, through EINTR and
 * short writes. */
static void to_stderr(const char *text)
{
    char buf[LOG_LINE_MAX + 1];
    size_t len = strlen(text), off = 0;
    memcpy(buf, text, len);
    buf[len++] = '\n';
    while (off < len) {
        ssize_t n = write(STDERR_FILENO, buf + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* nowhere to say it */
        off += (size_t)n;
    }
}

static void emit(const struct log_line *l)
{
    char text[LOG_LINE_MAX];
    const char *level = log_level_name(l->level);
    int saved = errno;
    if (log_shape == LOG_STYLE_LOGFMT) {
        if (l->fields != NULL)
            snprintf(text, sizeof(text), "ts=%s level=%s%s%s msg=%s %s", l->time, level,
                     l->job ? " job=" : "", l->job ? l->job : "", l->msg, l->fields);
        else
            snprintf(text, sizeof(text), "ts=%s level=%s%s%s msg=\"%s\"", l->time, level,
                     l->job ? " job=" : "", l->job ? l->job : "", l->msg);
    } else {
        snprintf(text, sizeof(text), "%s %s %s: %s%s%s%s%s%s", l->time, level, l->program,
                 l->job ? "job " : "", l->job ? l->job : "", l->job ? ": " : "", l->msg,
                 l->fields ? " " : "", l->fields ? l->fields : "");
    }
    if (log_out != NULL)
        log_out(log_out_arg, l, text);
    else
        to_stderr(text);
    errno = saved; /* a log line never changes what the caller reports */
}

void log_vmsg(enum log_level level, const char *job, const char *fmt, va_list ap)
{
    char now[CLOCK_RFC3339_LEN], msg[LOG_MSG_MAX];
    clock_rfc3339(now, sizeof(now));
    vsnprintf(msg, sizeof(msg), fmt, ap);
    emit(&(struct log_line){level, now, log_program ? log_program : program_invocation_short_name,
                            job, msg, NULL});
}

void log_msg(enum log_level level, const char *job, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, job, fmt, ap);
    va_end(ap);
}

void log_event(enum log_level level, const char *job, const char *event, const char *fields)
{
    char now[CLOCK_RFC3339_LEN];
    clock_rfc3339(now, sizeof(now));
    emit(&(struct log_line){level, now, log_program ? log_program : program_invocation_short_name,
                            job, event, fields});
}
