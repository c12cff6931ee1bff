/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ringctl - the command-line client of ringd's REST API.
 *
 *   ringctl submit -n 4 -- ./train --epochs 10
 *   ringctl submit -f job.json               (or job.yaml)
 *   ringctl ls [--state S] [--label k=v]      ringctl show ID
 *   ringctl cancel|stop|resume|rm ID          ringctl events ID [-f]
 *   ringctl logs ID [--rank R] [--stderr | --launcher] [--tail N] [-f]
 *   ringctl cluster                           ringctl policy [NAME]
 *   ringctl token create NAME [--admin] [--user U] [--expires-in 30d | --expires-at T]
 *   ringctl token list                        ringctl token revoke ID
 *   ringctl admin backup FILE                 (a copy of ringd's database, taken live)
 *
 * RINGMASTER_URL (default http://127.0.0.1:8080) and RINGMASTER_TOKEN configure it. Output
 * is a table for people, or the server's JSON with --json.
 *
 * Exit status: 0 done; 1 the server refused the request (4xx); 2 bad usage; 3 not found;
 * 4 conflict (the job's state does not allow it); 5 not authorized; 69 ringd unreachable or
 * failing (5xx); 70 the job ended FAILED or CANCELLED while following it.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "admin.h"
#include "common/log.h"
#include "http.h"
#include "sched.h"
#include "spec_yaml.h"

static int json_out;

/* Reconnecting after a broken stream: up to this long without reaching ringd. */
#define RECONNECT_S 30

static void print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s != NULL) {
        puts(s);
        free(s);
    }
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* An int, all of s: 0 and *out, or -1 (atoi would read '2-4' as 2 and 'x' as 0, and
 * submit something else than asked). */
static int int_all(const char *s, int *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < INT_MIN || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

/* An integer flag value in [lo, hi]: 0 and *out, or -1 after saying what is wrong. */
static int flag_int(const char *flag, const char *s, int lo, int hi, const char *what, int *out)
{
    if (int_all(s, out) < 0 || *out < lo || *out > hi) {
        log_error("%s '%s' must be %s", flag, s, what);
        return -1;
    }
    return 0;
}

/* /v1/jobs/ID followed by suffix (may be ""), the id escaped so that it stays one path
 * segment: "../tokens" must not name another resource. */
static void job_path(char *buf, size_t len, const char *id, const char *suffix)
{
    char *e = curl_easy_escape(NULL, id, 0);
    snprintf(buf, len, "/v1/jobs/%s%s", e ? e : "", suffix);
    curl_free(e);
}

/* ---- commands ---- */

/* A spec file: YAML when it is named .yaml or .yml, JSON otherwise. NULL after saying why. */
static json_t *load_spec(const char *file)
{
    const char *dot = strrchr(file, '.');
    json_t *spec;
    if (dot != NULL && (!strcmp(dot, ".yaml") || !strcmp(dot, ".yml"))) {
        char err[512];
        if ((spec = spec_yaml_load_file(file, err, sizeof(err))) == NULL)
            log_error("%s", err);
    } else {
        json_error_t jerr;
        if ((spec = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr)) == NULL)
            log_error("%s:%d: %s", file, jerr.line, jerr.text);
    }
    if (spec != NULL && !json_is_object(spec)) {
        log_error("%s: a job spec is a mapping (an object) at the top", file);
        json_decref(spec);
        spec = NULL;
    }
    return spec;
}

static int cmd_submit(int argc, char **argv)
{
    static const struct option opts[] = {
        {"workers", required_argument, NULL, 'n'},
        {"name", required_argument, NULL, 'N'},
        {"gpus-per-worker", required_argument, NULL, 'g'},
        {"env", required_argument, NULL, 'e'},
        {"label", required_argument, NULL, 'l'},
        {"max-restarts", required_argument, NULL, 'r'},
        {"priority", required_argument, NULL, 'p'},
        {"workdir", required_argument, NULL, 'w'},
        {"file", required_argument, NULL, 'f'},
        {"idempotency-key", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char usage_submit[] =
        "usage: ringctl submit [-n N|MIN:MAX] [--name N] [--gpus-per-worker G] "
        "[--env K=V] [--label K=V] [--max-restarts R] [--priority P] "
        "[--workdir DIR] [--idempotency-key K] (-f spec.json|spec.yaml | -- program "
        "args...)\n";
    json_t *spec = json_object(), *env = json_object(), *labels = json_object(), *job, *cmd;
    const char *idem = NULL, *file = NULL;
    char *body;
    int o, rc = 0;

    optind = 1;
    while ((o = getopt_long(argc, argv, "+hn:N:g:e:l:r:p:w:f:k:", opts, NULL)) != -1) {
        char *eq;
        switch (o) {
        case 'n': {
            /* N or MIN:MAX; the range is checked by ringd, which knows the cluster */
            char *colon = strchr(optarg, ':');
            int lo, hi, bad;
            if (colon != NULL)
                *colon = '\0';
            bad = int_all(optarg, &lo) < 0 || (colon != NULL && int_all(colon + 1, &hi) < 0);
            if (colon != NULL)
                *colon = ':';
            if (bad) {
                log_error("-n '%s' must be N or MIN:MAX", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            if (colon != NULL)
                json_object_set_new(spec, "workers", json_pack("{s:i, s:i}", "min", lo, "max", hi));
            else
                json_object_set_new(spec, "workers", json_integer(lo));
            break;
        }
        case 'N':
            json_object_set_new(spec, "name", json_string(optarg));
            break;
        case 'g':
        case 'r':
        case 'p': {
            static const char *const flag[] = {"--gpus-per-worker", "--max-restarts", "--priority"};
            static const char *const key[] = {"gpus_per_worker", "max_restarts", "priority"};
            int k = o == 'g' ? 0 : o == 'r' ? 1 : 2, v;
            if (flag_int(flag[k], optarg, INT_MIN, INT_MAX, "an integer", &v) < 0) {
                rc = EXIT_USAGE;
                goto out;
            }
            json_object_set_new(spec, key[k], json_integer(v));
            break;
        }
        case 'w':
            json_object_set_new(spec, "working_dir", json_string(optarg));
            break;
        case 'e':
        case 'l':
            if ((eq = strchr(optarg, '=')) == NULL) {
                log_error("--%s wants KEY=VALUE, not '%s'", o == 'e' ? "env" : "label", optarg);
                rc = EXIT_USAGE;
                goto out;
            }
            *eq = '\0';
            json_object_set_new(o == 'e' ? env : labels, optarg, json_string(eq + 1));
            break;
        case 'f':
            file = optarg;
            break;
        case 'k':
            idem = optarg;
            break;
        case 'h':
            fputs(usage_submit, stdout);
            goto out; /* rc 0 */
        default:
            fputs(usage_submit, stderr);
            rc = EXIT_USAGE;
            goto out;
        }
    }
    if (file != NULL) {
        json_t *f = load_spec(file);
        if (f == NULL) {
            rc = EXIT_USAGE;
            goto out;
        }
        json_object_update_missing(f, spec); /* flags override nothing the file says */
        json_decref(spec);
        spec = f;
    }
    if (optind < argc) {
        cmd = json_array();
        for (int i = optind; i < argc; i++)
            json_array_append_new(cmd, json_string(argv[i]));
        json_object_set_new(spec, "command", cmd);
        if (!json_object_get(spec, "name")) {
            const char *base = strrchr(argv[optind], '/');
            char name[129];
            snprintf(name, sizeof(name), "%s", base ? base + 1 : argv[optind]);
            for (char *c = name; *c; c++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
                            *c))
                    *c = '-';
            json_object_set_new(spec, "name", json_string(name));
        }
    }
    {
        /* A program named relative to the directory (./train) means the one here, as in a
         * shell: the job starts in this directory (ringd would otherwise start it in its
         * new run directory, and refuse the spec). */
        const char *prog = json_string_value(json_array_get(json_object_get(spec, "command"), 0));
        char cwd[4096];
        if (prog != NULL && prog[0] != '/' && strchr(prog, '/') != NULL &&
            json_object_get(spec, "working_dir") == NULL && getcwd(cwd, sizeof(cwd)) != NULL)
            json_object_set_new(spec, "working_dir", json_string(cwd));
    }
    if (json_object_size(env) > 0)
        json_object_set(spec, "env", env);
    if (json_object_size(labels) > 0)
        json_object_set(spec, "labels", labels);
    body = json_dumps(spec, JSON_COMPACT);
    rc = ringctl__call_idem("POST", "/v1/jobs", body, idem, &job);
    free(body);
    if (rc == 0) {
        if (json_out)
            print_json(job);
        else
            printf("%s\n", str(job, "id"));
        json_decref(job);
    }
out:
    json_decref(env);
    json_decref(labels);
    json_decref(spec);
    return rc;
}

static void workers_text(json_t *spec, char *buf, size_t len)
{
    json_t *w = json_object_get(spec, "workers");
    long long lo = json_integer_value(json_object_get(w, "min")),
              hi = json_integer_value(json_object_get(w, "max"));
    if (lo == hi)
        snprintf(buf, len, "%lld", lo);
    else
        snprintf(buf, len, "%lld-%lld", lo, hi);
}

static int cmd_ls(int argc, char **argv)
{
    static const struct option opts[] = {{"state", required_argument, NULL, 's'},
                                         {"label", required_argument, NULL, 'l'},
                                         {NULL, 0, NULL, 0}};
    char path[1024], q[600] = "", esc[300];
    const char *token_next = NULL;
    json_t *all, *page = NULL, *j;
    size_t i;
    int o, rc;

    optind = 1;
    while ((o = getopt_long(argc, argv, "s:l:", opts, NULL)) != -1) {
        char *e;
        if (o != 's' && o != 'l') {
            fprintf(stderr, "usage: ringctl ls [--state S] [--label K=V]\n");
            return EXIT_USAGE;
        }
        e = curl_easy_escape(NULL, optarg, 0);
        snprintf(esc, sizeof(esc), "&%s=%s", o == 's' ? "state" : "label", e ? e : "");
        curl_free(e);
        strncat(q, esc, sizeof(q) - strlen(q) - 1);
    }
    all = json_array();
    do { /* every page */
        snprintf(path, sizeof(path), "/v1/jobs?page_size=1000%s%s%s", q,
                 token_next ? "&page_token=" : "", token_next ? token_next : "");
        json_decref(page);
        if ((rc = ringctl__call("GET", path, NULL, &page)) != 0) {
            json_decref(all);
            return rc;
        }
        json_array_extend(all, json_object_get(page, "jobs"));
        token_next = json_string_value(json_object_get(page, "next_page_token"));
    } while (token_next != NULL);
    json_decref(page);
    if (json_out) {
        json_t *o2 = json_pack("{s:o}", "jobs", all);
        print_json(o2);
        json_decref(o2);
        return 0;
    }
    printf("%-20s %-20s %-10s %-10s %-8s %s\n", "ID", "NAME", "OWNER", "STATE", "WORKERS",
           "CREATED");
    json_array_foreach(all, i, j)
    {
        char w[32];
        workers_text(json_object_get(j, "spec"), w, sizeof(w));
        printf("%-20s %-20.20s %-10.10s %-10s %-8s %s\n", str(j, "id"), str(j, "name"),
               str(j, "owner"), str(j, "state"), w, str(j, "created_at"));
    }
    json_decref(all);
    return 0;
}

static int cmd_show(const char *id)
{
    char path[256];
    json_t *j, *a, *p;
    size_t i;
    int rc;
    job_path(path, sizeof(path), id, "");
    if ((rc = ringctl__call("GET", path, NULL, &j)) != 0)
        return rc;
    if (json_out) {
        print_json(j);
        json_decref(j);
        return 0;
    }
    printf("job        %s (%s)\nowner      %s\nstate      %s\ncreated    %s\ncheckpoint %s\n",
           str(j, "id"), str(j, "name"), str(j, "owner"), str(j, "state"), str(j, "created_at"),
           str(j, "checkpoint_dir"));
    p = json_object_get(j, "progress");
    if (p != NULL)
        printf("progress   epoch %lld/%lld, step %lld/%lld, loss %.4f, %.0f samples/s on %lld "
               "worker%s\n",
               json_integer_value(json_object_get(p, "epoch")),
               json_integer_value(json_object_get(p, "epochs")),
               json_integer_value(json_object_get(p, "step")),
               json_integer_value(json_object_get(p, "total_steps")),
               json_number_value(json_object_get(p, "loss")),
               json_number_value(json_object_get(p, "samples_per_s")),
               json_integer_value(json_object_get(p, "world_size")),
               json_integer_value(json_object_get(p, "world_size")) == 1 ? "" : "s");
    ringctl_show_scaling(j);
    json_array_foreach(json_object_get(j, "attempts"), i, a)
    {
        json_int_t w = json_integer_value(json_object_get(a, "world_size"));
        printf("attempt %lld: %lld worker%s on %s, started %s",
               json_integer_value(json_object_get(a, "number")), w, w == 1 ? "" : "s",
               str(a, "hosts"), str(a, "started_at"));
        if (json_object_get(a, "ended_at"))
            printf(", ended %s: %s", str(a, "ended_at"), str(a, "reason"));
        printf("\n");
    }
    json_decref(j);
    return 0;
}

static int cmd_action(const char *method, const char *id, const char *action)
{
    char path[256];
    json_t *j = NULL;
    int rc;
    char suffix[32];
    snprintf(suffix, sizeof(suffix), "%s%s", action ? "/" : "", action ? action : "");
    job_path(path, sizeof(path), id, suffix);
    if ((rc = ringctl__call(method, path, NULL, !strcmp(method, "DELETE") ? NULL : &j)) != 0)
        return rc;
    if (j != NULL && json_out)
        print_json(j);
    else if (j != NULL)
        printf("%s: %s\n", id, str(j, "state"));
    else
        printf("%s: removed\n", id);
    json_decref(j);
    return 0;
}

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
    job_path(path, sizeof(path), id, "");
    if ((rc = ringctl__call("GET", path, NULL, &j)) != 0)
        return rc;
    snprintf(out, len, "%s", str(j, "state"));
    json_decref(j);
    return 0;
}

static int end_status(const char *state)
{
    return !strcmp(state, "FAILED") || !strcmp(state, "CANCELLED") ? EXIT_JOBFAILED : 0;
}

static void print_event(json_t *e)
{
    if (json_out) {
        char *s = json_dumps(e, JSON_COMPACT);
        puts(s ? s : "{}");
        free(s);
    } else {
        printf("%s  %-10s %-10s %s\n", str(e, "time"), str(e, "type"), str(e, "state"),
               str(e, "message"));
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

static int cmd_events(const char *id, int follow)
{
    struct events_follow f = {0};
    char state[32] = "";
    json_t *j, *e;
    size_t i;
    int rc;

    job_path(f.path, sizeof(f.path), id, "/events");
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
    job_path(path, sizeof(path), f->id, q);
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
        job_path(path, sizeof(path), id, q);
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

static int cmd_logs(int argc, char **argv)
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
            if (flag_int("--rank", optarg, 0, INT_MAX, "a rank (a non-negative integer)", &rank) <
                0)
                return EXIT_USAGE;
            break;
        case 't':
            if (flag_int("--tail", optarg, 0, INT_MAX, "a non-negative integer", &tail) < 0)
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
        job_path(path, sizeof(path), id, q);
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

static int cmd_cluster(void)
{
    json_t *c, *n;
    size_t i;
    int rc = ringctl__call("GET", "/v1/cluster", NULL, &c);
    if (rc != 0)
        return rc;
    if (json_out) {
        print_json(c);
        json_decref(c);
        return 0;
    }
    printf("%-20s %6s %6s %5s %s\n", "NODE", "SLOTS", "FREE", "GPUS", "JOBS");
    json_array_foreach(json_object_get(c, "nodes"), i, n)
    {
        json_t *jobs = json_object_get(n, "jobs"), *j;
        size_t k;
        printf("%-20s %6lld %6lld %5zu%s", str(n, "name"),
               json_integer_value(json_object_get(n, "slots")),
               json_integer_value(json_object_get(n, "slots_free")),
               json_array_size(json_object_get(n, "gpus")),
               json_is_true(json_object_get(n, "offline")) ? " offline" : "");
        json_array_foreach(jobs, k, j)
            printf(" %s(%lld)", str(j, "id"), json_integer_value(json_object_get(j, "workers")));
        printf("\n");
    }
    json_decref(c);
    return 0;
}

static int token_usage(void)
{
    fprintf(stderr, "usage: ringctl token create NAME [--admin] [--user UNIX_USER] "
                    "[--expires-in N[s|m|h|d] | --expires-at RFC3339] | "
                    "token list | "
                    "token revoke ID\n");
    return EXIT_USAGE;
}

/* "90", "90s", "15m", "12h", "30d" as seconds; -1 when s is none of these. The server
 * bounds the value. */
static long long duration_s(const char *s)
{
    char *end;
    long long v;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || v > 1000000000000LL)
        return -1;
    switch (*end) {
    case '\0':
    case 's':
        break;
    case 'm':
        v *= 60;
        break;
    case 'h':
        v *= 3600;
        break;
    case 'd':
        v *= 86400;
        break;
    default:
        return -1;
    }
    return *end == '\0' || end[1] == '\0' ? v : -1;
}

static int cmd_token(int argc, char **argv)
{
    json_t *t, *list, *tok;
    char *body, path[256];
    size_t i;
    int rc;

    if (argc >= 3 && !strcmp(argv[1], "create")) {
        int admin = 0;
        const char *user = NULL, *at = NULL;
        long long in = 0;
        for (int a = 3; a < argc; a++) {
            if (!strcmp(argv[a], "--admin")) {
                admin = 1;
            } else if (!strcmp(argv[a], "--user") && a + 1 < argc) {
                user = argv[++a];
            } else if (!strcmp(argv[a], "--expires-at") && a + 1 < argc) {
                at = argv[++a];
            } else if (!strcmp(argv[a], "--expires-in") && a + 1 < argc) {
                if ((in = duration_s(argv[++a])) <= 0) {
                    log_error("--expires-in '%s' must be a positive number of seconds, "
                              "or of minutes, hours or days with m, h or d (e.g. 30d)",
                              argv[a]);
                    return EXIT_USAGE;
                }
            } else {
                return token_usage();
            }
        }
        t = json_pack("{s:s, s:b}", "name", argv[2], "admin", admin);
        if (t != NULL && user != NULL)
            json_object_set_new(t, "user", json_string(user));
        if (t != NULL && in > 0)
            json_object_set_new(t, "expires_in", json_integer(in));
        if (t != NULL && at != NULL)
            json_object_set_new(t, "expires_at", json_string(at));
        body = json_dumps(t, JSON_COMPACT);
        json_decref(t);
        rc = ringctl__call("POST", "/v1/tokens", body, &t);
        free(body);
        if (rc != 0)
            return rc;
        if (json_out)
            print_json(t);
        else
            printf("%s\n", str(t, "token")); /* the secret, shown this once */
        json_decref(t);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "list")) {
        if ((rc = ringctl__call("GET", "/v1/tokens", NULL, &t)) != 0)
            return rc;
        if (json_out) {
            print_json(t);
            json_decref(t);
            return 0;
        }
        /* PRINCIPAL: who the token speaks for; two rows of one name may be two people. */
        printf("%-14s %-20s %-9s %-6s %-12s %-25s %-21s %s\n", "ID", "NAME", "PRINCIPAL", "ADMIN",
               "USER", "CREATED", "EXPIRES", "REVOKED");
        list = json_object_get(t, "tokens");
        json_array_foreach(list, i, tok)
        {
            printf("%-14s %-20.20s %-9lld %-6s %-12.12s %-25s %-21s %s\n", str(tok, "id"),
                   str(tok, "name"),
                   (long long)json_integer_value(json_object_get(tok, "principal")),
                   json_is_true(json_object_get(tok, "admin")) ? "yes" : "no",
                   json_object_get(tok, "user") ? str(tok, "user") : "-", str(tok, "created_at"),
                   json_object_get(tok, "expires_at") ? str(tok, "expires_at") : "never",
                   json_object_get(tok, "revoked_at") ? str(tok, "revoked_at") : "-");
        }
        json_decref(t);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "revoke")) {
        char *e = curl_easy_escape(NULL, argv[2], 0);
        snprintf(path, sizeof(path), "/v1/tokens/%s", e ? e : "");
        curl_free(e);
        if ((rc = ringctl__call("DELETE", path, NULL, &t)) != 0)
            return rc;
        if (json_out)
            print_json(t);
        else
            printf("revoked %s (%s)\n", str(t, "id"), str(t, "name"));
        json_decref(t);
        return 0;
    }
    return token_usage();
}

int ringctl__json_out(void)
{
    return json_out;
}

void ringctl__print_json(json_t *j)
{
    print_json(j);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ringctl [--json] [--cacert FILE] [--insecure-http] COMMAND ...\n"
               "  submit [-n N|MIN:MAX] [options] (-f spec.json|spec.yaml | -- program args...)\n"
               "  ls [--state S] [--label K=V]\n"
               "  show ID\n"
               "  cancel ID | stop ID | resume ID | rm ID\n"
               "  events ID [-f]\n"
               "  logs ID [--rank R] [--stderr | --launcher] [--tail N] [-f]\n"
               "  cluster\n"
               "  policy [NAME]   (shows the scheduler; switching the policy takes an admin)\n"
               "  token create NAME [--admin] [--user UNIX_USER] [--expires-in N[s|m|h|d] |\n"
               "    --expires-at RFC3339] | "
               "token list | token revoke ID\n"
               "  admin backup FILE   (ringd's database, taken while it runs; admins only)\n"
               "Environment: RINGMASTER_URL (default http://127.0.0.1:8080), RINGMASTER_TOKEN,\n"
               "RINGMASTER_CACERT (as --cacert). Tokens go in clear text only to loopback,\n"
               "unless --insecure-http.\n"
               "Exit status: 0 ok, 1 refused, 2 usage, 3 not found, 4 conflict, 5 not "
               "authorized,\n69 ringd unreachable or failing, 70 a followed job FAILED or was "
               "CANCELLED.\n");
}

int main(int argc, char **argv)
{
    const char *cmd;
    int rc;

    log_init("ringctl", LOG_STYLE_TEXT);
    {
        const char *url = getenv("RINGMASTER_URL");
        ringctl__set_url(url != NULL && *url != '\0' ? url : "http://127.0.0.1:8080");
    }
    ringctl__conn.token = getenv("RINGMASTER_TOKEN");
    ringctl__conn.cacert = getenv("RINGMASTER_CACERT");
    while (argc > 1 && argv[1][0] == '-') {
        if (!strcmp(argv[1], "--json"))
            json_out = 1;
        else if (!strcmp(argv[1], "--insecure-http"))
            ringctl__conn.insecure_http = 1;
        else if (!strcmp(argv[1], "--cacert")) {
            if (argc < 3) {
                log_error("--cacert needs a file (the CA certificate of ringd's "
                          "HTTPS)");
                return EXIT_USAGE;
            }
            ringctl__conn.cacert = argv[2];
            argv++;
            argc--;
        } else if (!strcmp(argv[1], "--version")) {
            printf("ringctl %s\n", RING_VERSION_STRING);
            return 0;
        } else if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
            usage(stdout);
            return 0;
        } else {
            log_error("unknown option %s", argv[1]);
            usage(stderr);
            return EXIT_USAGE;
        }
        argv++;
        argc--;
    }
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if ((rc = ringctl__token_transport_ok()) != 0)
        return rc;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    cmd = argv[1];
    argv++;
    argc--;
    if (!strcmp(cmd, "submit"))
        rc = cmd_submit(argc, argv);
    else if (!strcmp(cmd, "ls"))
        rc = cmd_ls(argc, argv);
    else if (!strcmp(cmd, "logs"))
        rc = cmd_logs(argc, argv);
    else if (!strcmp(cmd, "cluster"))
        rc = cmd_cluster();
    else if (!strcmp(cmd, "policy"))
        rc = ringctl_policy(argc, argv);
    else if (!strcmp(cmd, "token"))
        rc = cmd_token(argc, argv);
    else if (!strcmp(cmd, "admin"))
        rc = ringctl_admin(argc, argv);
    else if ((!strcmp(cmd, "show") || !strcmp(cmd, "cancel") || !strcmp(cmd, "stop") ||
              !strcmp(cmd, "resume") || !strcmp(cmd, "rm") || !strcmp(cmd, "events")) &&
             argc >= 2) {
        int follow = argc >= 3 && (!strcmp(argv[2], "-f") || !strcmp(argv[2], "--follow"));
        if (!strcmp(cmd, "show"))
            rc = cmd_show(argv[1]);
        else if (!strcmp(cmd, "rm"))
            rc = cmd_action("DELETE", argv[1], NULL);
        else if (!strcmp(cmd, "events"))
            rc = cmd_events(argv[1], follow);
        else
            rc = cmd_action("POST", argv[1], cmd);
    } else {
        log_error("unknown command or missing job id: %s", cmd);
        usage(stderr);
        rc = EXIT_USAGE;
    }
    curl_global_cleanup();
    return rc;
}
