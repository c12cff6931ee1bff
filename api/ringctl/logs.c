/* SPDX-License-Identifier: Apache-2.0 */
/*
 * logs.c - ringctl's views of a job as it runs: events (Server-Sent Events, -f follows them)
 * and logs (a rank's stdout, stderr or the launcher's; -f follows them), both resumed
 * after a broken stream for as long as the job runs.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/log.h"
#include "http.h"
#include "ringctl.h"

/* Reconnecting after a broken stream: up to this long without reaching ringd. */
#define RECONNECT_S 30

static int finished(const char *state)
{
    return !strcmp(state, "SUCCEEDED") || !strcmp(state, "FAILED") || !strcmp(state, "CANCELLED") ||
           !strcmp(state, "STOPPED");
}

/* The job's state, or NULL when it cannot be read. */
static int job_state(const char *id, char *out, size_t len)
{
    char path[256];
    json_t *j;
    int rc;
    ringctl__job_path(path, sizeof(path), id, "");
    if ((rc = ringctl__call("GET", path, NULL, &j)) != 0)
        return rc;
    snprintf(out, len, "%s", ringctl__str(j, "state"));
    json_decref(j);
    return 0;
}

static int end_status(const char *state)
{
    return !strcmp(state, "FAILED") || !strcmp(state, "CANCELLED") ? EXIT_JOBFAILED : 0;
}

static void print_event(json_t *e)
{
    if (ringctl__json_out()) {
        char *s = json_dumps(e, JSON_COMPACT);
        puts(s ? s : "{}");
        free(s);
    } else {
        printf("%s  %-10s %-10s %s\n", ringctl__str(e, "time"), ringctl__str(e, "type"),
               ringctl__str(e, "state"), ringctl__str(e, "message"));
    }
}

/* Server-Sent Events as they arrive: "id:" and "data:" lines, dispatched at a blank line. */
struct sse_reader {
    struct ringctl_buf line;
    char last_id[32];
    char data[8192];
};

static void sse_line(struct sse_reader *r, const char *l)
{
    if (strncmp(l, "id:", 3) == 0) {
        snprintf(r->last_id, sizeof(r->last_id), "%s", l + 3 + (l[3] == ' '));
    } else if (strncmp(l, "data:", 5) == 0) {
        snprintf(r->data, sizeof(r->data), "%s", l + 5 + (l[5] == ' '));
    } else if (*l == '\0' && r->data[0]) { /* the end of one event */
        json_error_t jerr;
        json_t *e = json_loads(r->data, 0, &jerr);
        if (e != NULL)
            print_event(e);
        json_decref(e);
        fflush(stdout);
        r->data[0] = '\0';
    } /* "event:" repeats data's type; ":" lines are keep-alives */
}

static size_t sse_data(const char *p, size_t n, void *arg)
{
    struct sse_reader *r = arg;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            if (r->line.len > 0 && r->line.data[r->line.len - 1] == '\r')
                r->line.data[--r->line.len] = '\0';
            sse_line(r, r->line.len ? r->line.data : "");
            r->line.len = 0;
        } else if (ringctl__collect((char *)p + i, 1, 1, &r->line) != 1) {
            return 0;
        }
    }
    return n;
}

/*
 * Follows a stream for as long as job id runs: attempt() opens it once (a stream_get); a
 * stream that broke is opened again a second later, for up to RECONNECT_S without ringd.
 * Returns 0 once the job has finished (its state in state), or an exit status.
 */
static int follow_job(const char *id, int (*attempt)(void *arg), void *arg, char *state, size_t len)
{
    time_t down_since = 0;
    for (;;) {
        int rc = attempt(arg);
        if (rc > 0)
            return rc;
        if (rc == 0 && job_state(id, state, len) == 0 && finished(state))
            return 0;
        if (rc == 0) {
            down_since = 0;
        } else if (down_since == 0) {
            down_since = time(NULL);
        } else if (time(NULL) - down_since > RECONNECT_S) {
            log_error("lost ringd at %s for %d s", ringctl__conn.base_url, RECONNECT_S);
            return EXIT_UNAVAILABLE;
        }
        sleep(1);
    }
}

struct events_follow {
    char path[256];
    struct sse_reader r;
};

/* One attempt at the event stream, resuming after the last event seen. */
static int events_open(void *arg)
{
    struct events_follow *f = arg;
    return ringctl__stream_get(f->path, "text/event-stream", f->r.last_id[0] ? f->r.last_id : NULL,
                               sse_data, &f->r);
}

int ringctl_events(const char *id, int follow)
{
    struct events_follow f = {0};
    char state[32] = "";
    json_t *j, *e;
    size_t i;
    int rc;

    ringctl__job_path(f.path, sizeof(f.path), id, "/events");
    if (!follow) {
        if ((rc = ringctl__call("GET", f.path, NULL, &j)) != 0)
            return rc;
        json_array_foreach(json_object_get(j, "events"), i, e) print_event(e);
        json_decref(j);
        return 0;
    }
    rc = follow_job(id, events_open, &f, state, sizeof(state));
    free(f.r.line.data);
    return rc != 0 ? rc : end_status(state);
}

/* logs -f: where the stream goes on from, and how far it has come. */
struct logs_follow {
    const char *id, *stream;
    int rank;
    long long offset; /* bytes of the log printed so far */
};

/* Followed output goes straight to stdout; the offset counts it, to resume. */
static size_t log_data(const char *p, size_t n, void *arg)
{
    struct logs_follow *f = arg;
    if (fwrite(p, 1, n, stdout) != n)
        return 0;
    fflush(stdout);
    f->offset += (long long)n;
    return n;
}

/* One attempt at logs?follow=1, from the byte reached. */
static int logs_open(void *arg)
{
    struct logs_follow *f = arg;
    char path[512], q[128];
    snprintf(q, sizeof(q), "/logs?rank=%d&stream=%s&follow=1&offset=%lld", f->rank, f->stream,
             f->offset);
    ringctl__job_path(path, sizeof(path), f->id, q);
    return ringctl__stream_get(path, NULL, NULL, log_data, f);
}

/* logs -f: the last tail lines (all when tail < 0), then the output as ringd streams it
 * until the job ends. */
static int follow_logs(const char *id, int rank, const char *stream, int tail)
{
    struct logs_follow f = {id, stream, rank, 0};
    char state[32];
    int rc = 0;

    if (tail >= 0) { /* where the last tail lines start */
        struct ringctl_buf b = {0};
        long status = 0;
        long long next = -1;
        char path[512], q[128];
        snprintf(q, sizeof(q), "/logs?rank=%d&stream=%s&tail=%d", rank, stream, tail);
        ringctl__job_path(path, sizeof(path), id, q);
        if ((rc = ringctl__request("GET", path, NULL, NULL, &b, &status, &next)) != 0)
            return rc;
        if (status < 400 && next >= 0) {
            if (b.len > 0 && fwrite(b.data, 1, b.len, stdout) != b.len)
                rc = EXIT_REFUSED;
            f.offset = next;
        }
        free(b.data);
        if (rc != 0)
            return rc;
    }
    return follow_job(id, logs_open, &f, state, sizeof(state));
}

int ringctl_logs(int argc, char **argv)
{
    static const struct option opts[] = {
        {"rank", required_argument, NULL, 'r'}, {"tail", required_argument, NULL, 't'},
        {"stderr", no_argument, NULL, 'e'},     {"follow", no_argument, NULL, 'f'},
        {"launcher", no_argument, NULL, 'L'},   {NULL, 0, NULL, 0}};
    int o, rank = 0, tail = -1, err = 0, launcher = 0, follow = 0, rc;
    const char *stream;
    const char *id;
    char path[512];
    struct ringctl_buf b = {0};
    long status = 0;

    optind = 1;
    while ((o = getopt_long(argc, argv, "r:t:efL", opts, NULL)) != -1) {
        switch (o) {
        case 'r':
            if (ringctl__flag_int("--rank", optarg, 0, INT_MAX, "a rank (a non-negative integer)",
                                  &rank) < 0)
                return EXIT_USAGE;
            break;
        case 't':
            if (ringctl__flag_int("--tail", optarg, 0, INT_MAX, "a non-negative integer", &tail) <
                0)
                return EXIT_USAGE;
            break;
        case 'e':
            err = 1;
            break;
        case 'f':
            follow = 1;
            break;
        case 'L':
            launcher = 1;
            break;
        default:
            fprintf(stderr, "usage: ringctl logs ID [--rank R] [--stderr | --launcher] [--tail N] "
                            "[-f]\n");
            return EXIT_USAGE;
        }
    }
    if (optind >= argc || (launcher && err)) {
        fprintf(stderr,
                "usage: ringctl logs ID [--rank R] [--stderr | --launcher] [--tail N] [-f]\n");
        return EXIT_USAGE;
    }
    id = argv[optind];
    /* --launcher: ringrun's own log (why a job that never reached its program failed) */
    stream = launcher ? "launcher" : err ? "stderr" : "stdout";
    if (follow)
        return follow_logs(id, rank, stream, tail);
    {
        char q[128];
        snprintf(q, sizeof(q), "/logs?rank=%d&stream=%s%s%d", rank, stream,
                 tail >= 0 ? "&tail=" : "&offset=", tail >= 0 ? tail : 0);
        ringctl__job_path(path, sizeof(path), id, q);
    }
    if ((rc = ringctl__request("GET", path, NULL, NULL, &b, &status, NULL)) != 0)
        return rc;
    if (status >= 400)
        rc = ringctl__problem(status, &b);
    else if (b.len > 0 && fwrite(b.data, 1, b.len, stdout) != b.len)
        rc = EXIT_REFUSED;
    free(b.data);
    return rc;
}
