/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routes_jobs.c - the jobs' routes of REST API v1: submit (alone, or batched by the server
 * through api_submit_begin/end), get, list, cancel, stop, resume, delete, the events (JSON
 * pages or an SSE stream) and the ranks' logs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "jobspec.h"
#include "routes_impl.h"
#include "scheduler/backend/identity.h"
#include "scheduler/backend/jobfs.h"

#define PAGE_SIZE_DEFAULT 100
#define PAGE_SIZE_MAX     1000

static api__handler job_create, job_list, job_get, job_cancel, job_stop, job_resume, job_delete,
    job_events, job_logs;

const struct api__route api__job_routes[] = {
    {"POST", "/v1/jobs", job_create},
    {"GET", "/v1/jobs", job_list},
    {"GET", "/v1/jobs/{}", job_get},
    {"DELETE", "/v1/jobs/{}", job_delete},
    {"POST", "/v1/jobs/{}/cancel", job_cancel},
    {"POST", "/v1/jobs/{}/stop", job_stop},
    {"POST", "/v1/jobs/{}/resume", job_resume},
    {"GET", "/v1/jobs/{}/events", job_events},
    {"GET", "/v1/jobs/{}/logs", job_logs},
    {NULL, NULL, NULL},
};

/* Reads the progress file rank 0 keeps in its run directory; NULL when absent or not JSON. */
static char *progress_text(const char *run_dir)
{
    char path[4400];
    json_error_t jerr;
    json_t *progress;
    char *text, buf[16384];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "%s/progress.json", run_dir);
    if ((f = jobfs_fopen(path)) == NULL)
        return NULL;
    /* Rank 0 rewrites it in a few hundred bytes; anything far larger is not a progress
     * report, and is not worth a thread's time or memory. */
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    progress = n < sizeof(buf) ? json_loadb(buf, n, 0, &jerr) : NULL;
    if (progress == NULL)
        return NULL;
    text = json_dumps(progress, JSON_COMPACT);
    json_decref(progress);
    return text;
}

/*
 * Whose jobs the caller may reach: an admin anyone's (STORE_ANYONE), a user their
 * principal's. Never a name: two tokens named alike may be two people (store.h).
 */
static int64_t caller_scope(const struct api_request *req)
{
    return req->admin ? STORE_ANYONE : req->principal;
}

/* Renders job id with its attempts and its latest progress into resp (404 when it is not
 * there for owner, a principal or STORE_ANYONE). */
static void render_job(const struct api_config *cfg, const struct api_request *req, const char *id,
                       int64_t owner, int status, struct api_response *resp)
{
    char *text, *run_dir, *progress;
    struct error err;

    if (store_job_render(req->store, id, owner, cfg->ckpt_prefix, &text, &run_dir, &err) < 0) {
        if (errno == ENOENT)
            api_problem(resp, 404, "job-not-found", "Not Found", req->path,
                        "there is no job %s (or it is not yours)", id);
        else
            api__store_problem(resp, req->path, &err);
        return;
    }
    progress = run_dir ? progress_text(run_dir) : NULL;
    {
        /* ,"scaling":{...}: sizes, speeds and restart overheads from the attempts */
        json_error_t jerr;
        json_t *job = json_loads(text, 0, &jerr);
        json_t *sc =
            job ? api_job_scaling(json_object_get(job, "attempts"), json_object_get(job, "spec"),
                                  json_string_value(json_object_get(job, "state")) ?: "")
                : NULL;
        char *sct = sc ? json_dumps(sc, JSON_COMPACT) : NULL;
        if (sct != NULL) {
            size_t tl = strlen(text), sl = strlen(sct);
            char *grown = realloc(text, tl + sl + 13);
            if (grown != NULL) {
                text = grown;
                snprintf(text + tl - 1, sl + 14, ",\"scaling\":%s}", sct);
            }
        }
        free(sct);
        json_decref(sc);
        json_decref(job);
    }
    if (progress != NULL) { /* splice ,"progress":{...} before the closing brace */
        size_t tl = strlen(text), pl = strlen(progress);
        char *grown = realloc(text, tl + pl + 13);
        if (grown != NULL) {
            text = grown;
            snprintf(text + tl - 1, pl + 14, ",\"progress\":%s}", progress);
        }
    }
    free(progress);
    free(run_dir);
    resp->status = status;
    resp->json_text = text;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* 1 when path is dir or lies under it, by the text alone (the paths are absolute). */
static int path_within(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/*
 * Who the job runs as, into s->run_as: the token's Unix user, else the configured default
 * user; as root one of them is required. The job's own directories may not lie in ringd's
 * data directory, which jobs never see. Returns 1, or 0 with a problem in resp.
 */
static int submit_user(const struct api_config *cfg, const struct api_request *req, json_t *spec,
                       struct api_submit *s, struct api_response *resp)
{
    const char *user = req->user;
    const char *dirs[] = {"working_dir", "checkpoint_dir"}, *wd;
    struct identity id;
    struct error err;

    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        const char *d = json_string_value(json_object_get(spec, dirs[i]));
        if (d != NULL && cfg->data_dir != NULL &&
            (path_within(d, cfg->data_dir) || strstr(d, "/../") != NULL ||
             (strlen(d) >= 3 && strcmp(d + strlen(d) - 3, "/..") == 0))) {
            json_t *p = api_problem(resp, 422, "validation-error", "Invalid JobSpec", req->path,
                                    "%s must be outside ringd's data directory and must not "
                                    "contain '..'",
                                    dirs[i]);
            json_object_set_new(p, "errors",
                                json_pack("[{s:s, s:s}]", "field", dirs[i], "detail",
                                          "inside ringd's data directory, or contains '..'"));
            return 0;
        }
    }
    if (user == NULL && cfg->default_user != NULL && cfg->default_user[0] != '\0')
        user = cfg->default_user;
    if (user == NULL && geteuid() == 0) {
        api_problem(resp, 403, "no-unix-user", "Forbidden", req->path,
                    "ringd runs as root and token '%s' is not mapped to a Unix user, so its "
                    "jobs have no account to run as; an admin creates a token with "
                    "{\"user\": \"NAME\"} or sets ringd's default_user",
                    req->owner);
        return 0;
    }
    if (identity_lookup(user, &id, &err) < 0) {
        api_problem(resp, 403, "no-unix-user", "Forbidden", req->path, "%s", err.text);
        return 0;
    }
    /* As the job's user: root's own look would tell whether a directory exists where the
     * user cannot search. */
    wd = json_string_value(json_object_get(spec, "working_dir"));
    if (wd != NULL && identity_dir_reachable(&id, wd) < 0) {
        json_t *p = api_problem(resp, 422, "validation-error", "Invalid JobSpec", req->path,
                                "working_dir '%s' does not exist, is not a directory, or user "
                                "%s cannot reach it",
                                wd, id.name);
        json_object_set_new(p, "errors",
                            json_pack("[{s:s, s:s}]", "field", "working_dir", "detail",
                                      "does not exist, or the job's user cannot reach it"));
        return 0;
    }
    snprintf(s->run_as, sizeof(s->run_as), "%s", id.name);
    return 1;
}

int api_submit_begin(const struct api_config *cfg, const struct api_request *req,
                     struct api_submit *s, struct api_response *resp)
{
    json_t *spec, *errors;
    const char *kind, *key = req->header(req->conn, "Idempotency-Key");
    char *canon;
    int status;

    memset(s, 0, sizeof(*s));
    if (key != NULL && (strlen(key) == 0 || strlen(key) >= sizeof(s->key))) {
        api_problem(resp, 400, "bad-idempotency-key", "Bad Request", req->path,
                    "Idempotency-Key must have 1..%zu characters", sizeof(s->key) - 1);
        return 0;
    }
    struct jobspec_limits lim = {cfg->cluster, cfg->backend};
    if (jobspec_parse(req->body, req->body_len, &lim, &spec, &errors, &status, &kind) < 0) {
        json_t *first = json_array_get(errors, 0);
        json_t *p =
            api_problem(resp, status, kind, status == 400 ? "Malformed JSON" : "Invalid JobSpec",
                        req->path, "%s", json_string_value(json_object_get(first, "detail")));
        json_object_set_new(p, "errors", errors);
        return 0;
    }
    /* The request's fingerprint: a retry with the same key must send the same spec. */
    canon = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    snprintf(s->hash, sizeof(s->hash), "%016llx", canon ? (unsigned long long)fnv1a(canon) : 0ull);
    free(canon);
    if (!submit_user(cfg, req, spec, s, resp)) {
        json_decref(spec);
        return 0;
    }
    snprintf(s->owner, sizeof(s->owner), "%s", req->owner);
    s->sub.owner = s->owner;
    s->sub.owner_id = req->principal;
    s->sub.run_as = s->run_as;
    s->sub.ckpt_prefix = cfg->ckpt_prefix;
    s->sub.spec = spec;
    s->sub.req_hash = s->hash;
    if (key != NULL) {
        snprintf(s->key, sizeof(s->key), "%s", key);
        s->sub.idem_key = s->key;
    }
    return 1;
}

void api_submit_end(const struct api_config *cfg, const struct api_request *req,
                    struct api_submit *s, struct api_response *resp)
{
    json_decref(s->sub.spec);
    s->sub.spec = NULL;
    if (s->sub.rc < 0) {
        errno = s->sub.errnum;
        if (errno == EEXIST)
            api_problem(resp, 422, "idempotency-key-reused", "Unprocessable Content", req->path,
                        "%s; use a new key for a new job", s->sub.err.text);
        else
            api__store_problem(resp, req->path, &s->sub.err);
        return;
    }
    if (s->sub.created && cfg->sched != NULL)
        scheduler_wake(cfg->sched);
    if (s->sub.job_text != NULL) { /* rendered by the store as it inserted the job */
        resp->status = 201;
        resp->json_text = s->sub.job_text;
        s->sub.job_text = NULL;
    } else {
        render_job(cfg, req, s->sub.id, STORE_ANYONE, 201, resp); /* the caller's new job */
    }
    if (resp->status == 201)
        snprintf(resp->location, sizeof(resp->location), "/v1/jobs/%s", s->sub.id);
}

/* POST /v1/jobs: checked here; stored here (a batch of one), or later by the server's group
 * committer when it gave a place for the submission (req->defer). */
static void job_create(const struct api_config *cfg, const struct api_request *req,
                       const char *param, struct api_response *resp)
{
    struct api_submit own, *s = req->defer ? req->defer : &own;
    struct store_submission *one = &s->sub;
    struct error err;

    if (!api_submit_begin(cfg, req, s, resp))
        return;
    if (req->defer) {
        resp->deferred = 1;
        return;
    }
    store_job_create_batch(req->store, &one, 1, &err);
    api_submit_end(cfg, req, s, resp);
}

static void job_get(const struct api_config *cfg, const struct api_request *req, const char *param,
                    struct api_response *resp)
{
    /* Another user's job is "not found", not "forbidden": its existence is not theirs to
     * learn. */
    render_job(cfg, req, param, caller_scope(req), 200, resp);
}

static int finished(const char *state)
{
    return !strcmp(state, "SUCCEEDED") || !strcmp(state, "FAILED") || !strcmp(state, "CANCELLED") ||
           !strcmp(state, "STOPPED");
}

/* Loads the caller's job param into *job (new reference); else fills resp and returns -1. */
static int own_job(const struct api_request *req, const char *param, struct api_response *resp,
                   json_t **job)
{
    struct error err;
    if (store_job_get(req->store, param, caller_scope(req), job, &err) == 0)
        return 0;
    if (errno == ENOENT)
        api_problem(resp, 404, "job-not-found", "Not Found", req->path,
                    "there is no job %s (or it is not yours)", param);
    else
        api__store_problem(resp, req->path, &err);
    return -1;
}

/* Answers with the job as it is now (own_job checked that it is the caller's). */
static void reply_job(const struct api_config *cfg, const struct api_request *req, const char *id,
                      int status, struct api_response *resp)
{
    render_job(cfg, req, id, caller_scope(req), status, resp);
}

/* cancel and stop: the scheduler carries them out; a running job ends when reaped. */
static void end_job(const struct api_config *cfg, const struct api_request *req, const char *param,
                    struct api_response *resp, int stop)
{
    json_t *job;
    struct error err;
    const char *state;
    int rc;

    if (own_job(req, param, resp, &job) < 0)
        return;
    state = json_string_value(json_object_get(job, "state"));
    /* A STOPPED job waits to be resumed: a cancel ends it for good, a stop has nothing to do. */
    if (finished(state) && !(strcmp(state, "STOPPED") == 0 && !stop)) {
        api_problem(resp, 409, "job-finished", "Conflict", req->path,
                    "job %s is already %s; there is nothing to %s", param, state,
                    stop ? "stop" : "cancel");
        json_decref(job);
        return;
    }
    json_decref(job);
    rc = stop ? scheduler_stop_job(cfg->sched, param, &err)
              : scheduler_cancel(cfg->sched, param, &err);
    if (rc < 0) {
        if (errno == ETIMEDOUT)
            api__sched_busy(resp, req->path, &err);
        else if (errno == EINPROGRESS) /* taken: it is being carried out */
            reply_job(cfg, req, param, 202, resp);
        else if (errno == ENOENT)
            api_problem(resp, 409, "job-finished", "Conflict", req->path,
                        "job %s finished meanwhile; there is nothing to %s", param,
                        stop ? "stop" : "cancel");
        else if (errno == EALREADY && !stop) /* cancelled twice: the same outcome */
            reply_job(cfg, req, param, 202, resp);
        else if (errno == EALREADY)
            api_problem(resp, 409, "job-cancelling", "Conflict", req->path,
                        "job %s is being cancelled; it ends CANCELLED, so it cannot be stopped "
                        "to resume later",
                        param);
        else
            api__store_problem(resp, req->path, &err);
        return;
    }
    /* 202: a running job ends once its workers exit; a cancel wins over a stop or a resize
     * already under way, so this job ends CANCELLED (or STOPPED). */
    reply_job(cfg, req, param, 202, resp);
}

static void job_cancel(const struct api_config *cfg, const struct api_request *req,
                       const char *param, struct api_response *resp)
{
    end_job(cfg, req, param, resp, 0);
}

static void job_stop(const struct api_config *cfg, const struct api_request *req, const char *param,
                     struct api_response *resp)
{
    end_job(cfg, req, param, resp, 1);
}

static void job_resume(const struct api_config *cfg, const struct api_request *req,
                       const char *param, struct api_response *resp)
{
    json_t *job;
    struct error err;

    if (own_job(req, param, resp, &job) < 0)
        return;
    if (scheduler_resume(cfg->sched, param, &err) < 0) {
        if (errno == ETIMEDOUT) {
            api__sched_busy(resp, req->path, &err);
        } else if (errno == EINPROGRESS) { /* taken: it is being carried out */
            reply_job(cfg, req, param, 202, resp);
        } else if (errno == EAGAIN) { /* the state read above, unless it changed since */
            const char *state = json_string_value(json_object_get(job, "state"));
            api_problem(resp, 409, "job-not-stopped", "Conflict", req->path,
                        "only a STOPPED job can be resumed, and job %s is %s", param,
                        strcmp(state, "STOPPED") ? state : "no longer STOPPED");
        } else
            api__store_problem(resp, req->path, &err);
        json_decref(job);
        return;
    }
    json_decref(job);
    reply_job(cfg, req, param, 200, resp);
}

static void job_delete(const struct api_config *cfg, const struct api_request *req,
                       const char *param, struct api_response *resp)
{
    json_t *job;
    struct error err;
    const char *state;
    char path[4400];
    int own_ckpt;

    if (own_job(req, param, resp, &job) < 0)
        return;
    state = json_string_value(json_object_get(job, "state"));
    if (!finished(state)) {
        api_problem(resp, 409, "job-active", "Conflict", req->path,
                    "job %s is %s; cancel it first, then delete it", param, state);
        json_decref(job);
        return;
    }
    /* A checkpoint_dir the user named is theirs to keep; the default one goes with the job. */
    own_ckpt = json_object_get(json_object_get(job, "spec"), "checkpoint_dir") == NULL;
    json_decref(job);
    if (store_job_delete(req->store, param, &err) < 0) {
        api__store_problem(resp, req->path, &err);
        return;
    }
    /* The job's files: what a later job could never use. The id came from the database,
     * so it names a directory under ours and nothing else. */
    snprintf(path, sizeof(path), "%s/runs/%s", cfg->work_dir ? cfg->work_dir : cfg->data_dir,
             param);
    jobfs_remove_tree(path);
    if (own_ckpt) {
        snprintf(path, sizeof(path), "%s%s", cfg->ckpt_prefix, param);
        jobfs_remove_tree(path);
    }
    resp->status = 204;
}

int api__parse_count(const char *s, long long max, long long *out)
{
    char *end;
    long long v;
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > max)
        return -1;
    *out = v;
    return 0;
}

/* The largest rank a logs request may name: no job has more workers than the JobSpec's cap. */
#define RANK_MAX 65535

/*
 * tail=N looks for N lines back from the end, a block at a time, but no further back than
 * this: a log without newlines (or with very long lines) would otherwise be read whole, at
 * a client's request, on an HTTP thread. 16 MiB holds 10,000 lines of 1.6 KiB, far more
 * than a terminal shows, and takes a few milliseconds to scan from the page cache; past
 * it the answer starts at the bound, and offset= reads anything before.
 */
#define TAIL_SCAN_MAX (16LL << 20)
#define TAIL_BLOCK    (64 << 10)

/* Where the last tail lines of fd (size bytes) start: after the tail-th newline from the
 * end (a newline that ends the file ends the last line, it does not start one), at most
 * TAIL_SCAN_MAX back; 0 when the file has fewer lines. */
static long long tail_start(int fd, long long size, long long tail)
{
    long long pos = size, floor = size > TAIL_SCAN_MAX ? size - TAIL_SCAN_MAX : 0, lines = 0;
    char *buf;

    if (tail == 0)
        return size;
    if ((buf = malloc(TAIL_BLOCK)) == NULL)
        return floor;
    while (pos > floor) {
        size_t n = pos - floor < TAIL_BLOCK ? (size_t)(pos - floor) : TAIL_BLOCK;
        ssize_t got = pread(fd, buf, n, pos - (long long)n);
        const char *nl;
        if (got != (ssize_t)n) /* the file shrank, or failed: from where it was read */
            break;
        /* buf holds [pos - n, pos); the byte at size - 1 does not count */
        for (size_t end = n - (pos == size && buf[n - 1] == '\n');
             end > 0 && (nl = memrchr(buf, '\n', end)) != NULL; end = (size_t)(nl - buf)) {
            if (++lines >= tail) {
                long long at = pos - (long long)n + (nl - buf) + 1;
                free(buf);
                return at;
            }
        }
        pos -= (long long)n;
    }
    free(buf);
    return pos;
}

/*
 * GET /v1/jobs/{id}/events: the history as JSON, or with Accept: text/event-stream a live
 * stream, resuming after Last-Event-ID (or ?after=). Both are checked here, once: the
 * server only starts the stream that resp describes.
 */
static void job_events(const struct api_config *cfg, const struct api_request *req,
                       const char *param, struct api_response *resp)
{
    json_t *job, *events;
    struct error err;
    const char *after = req->query(req->conn, "after");
    const char *last = req->header(req->conn, "Last-Event-ID");
    const char *accept = req->header(req->conn, "Accept");
    long long from = 0;
    int stream = accept != NULL && strstr(accept, "text/event-stream") != NULL;

    if (after != NULL && api__parse_count(after, INT64_MAX, &from) < 0) {
        api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                    "after must be an event id (a non-negative integer), not '%.64s'", after);
        return;
    }
    if (stream && last != NULL && api__parse_count(last, INT64_MAX, &from) < 0) {
        api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                    "Last-Event-ID must be an event id (a non-negative integer), not '%.64s'",
                    last);
        return;
    }
    if (own_job(req, param, resp, &job) < 0)
        return;
    json_decref(job);
    if (stream) {
        resp->status = 200;
        resp->stream = API_STREAM_EVENTS;
        snprintf(resp->stream_job, sizeof(resp->stream_job), "%s", param);
        resp->stream_from = from;
        return;
    }
    if (store_events(req->store, param, from, 10000, &events, &err) < 0) {
        api__store_problem(resp, req->path, &err);
        return;
    }
    resp->status = 200;
    resp->body = json_pack("{s:o}", "events", events);
}

/*
 * GET /v1/jobs/{id}/logs?rank=R&stream=stdout|stderr|launcher&tail=N&offset=B: a rank's
 * output in the latest attempt, or its launcher's (rank ignored), as text. offset returns what
 * follows byte B, so a client follows the log by passing back the X-Ring-Log-Offset it got; tail
 * returns the last N lines. follow=1 streams the output from offset as it is written, until the job
 * ends.
 */
static void job_logs(const struct api_config *cfg, const struct api_request *req, const char *param,
                     struct api_response *resp)
{
    const char *rank_s = req->query(req->conn, "rank"), *tail_s = req->query(req->conn, "tail");
    const char *stream = req->query(req->conn, "stream"), *off_s = req->query(req->conn, "offset");
    const char *follow_s = req->query(req->conn, "follow");
    json_t *job, *attempts;
    struct error err;
    const char *run_dir;
    long long rank = 0, tail = -1, offset = -1;
    char path[4400];
    FILE *f;
    struct stat sb;
    long long size;
    int fd;

    if (stream == NULL)
        stream = "stdout";
    if ((rank_s && api__parse_count(rank_s, RANK_MAX, &rank) < 0) ||
        (tail_s && api__parse_count(tail_s, INT32_MAX, &tail) < 0) ||
        (off_s && api__parse_count(off_s, INT64_MAX, &offset) < 0) ||
        (follow_s && strcmp(follow_s, "0") && strcmp(follow_s, "1")) ||
        (strcmp(stream, "stdout") && strcmp(stream, "stderr") && strcmp(stream, "launcher"))) {
        api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                    "rank must be an integer in [0, %d], tail and offset non-negative "
                    "integers, follow 0 or 1, and stream stdout, stderr or launcher",
                    RANK_MAX);
        return;
    }
    if (follow_s != NULL && !strcmp(follow_s, "1")) {
        if (own_job(req, param, resp, &job) < 0)
            return;
        json_decref(job);
        resp->status = 200;
        resp->stream = API_STREAM_LOGS;
        snprintf(resp->stream_job, sizeof(resp->stream_job), "%s", param);
        resp->stream_from = offset < 0 ? 0 : offset;
        resp->stream_rank = (int)rank;
        snprintf(resp->stream_which, sizeof(resp->stream_which), "%s", stream);
        return;
    }
    if (own_job(req, param, resp, &job) < 0)
        return;
    json_decref(job);
    if (store_attempts(req->store, param, &attempts, &err) < 0) {
        api__store_problem(resp, req->path, &err);
        return;
    }
    if (json_array_size(attempts) == 0) {
        json_decref(attempts);
        api_problem(resp, 404, "no-logs", "Not Found", req->path,
                    "job %s has not started yet; there are no logs", param);
        return;
    }
    run_dir = json_string_value(
        json_object_get(json_array_get(attempts, json_array_size(attempts) - 1), "run_dir"));
    if (strcmp(stream, "launcher") != 0) {
        snprintf(path, sizeof(path), "%s/rank.%ld/%s", run_dir, (long)rank, stream);
        f = jobfs_fopen(path);
    } else { /* ringrun's (or mpirun's) output, or the Slurm batch job's: why a job that
              * never reached its program failed */
        snprintf(path, sizeof(path), "%s/ringrun.log", run_dir);
        if ((f = jobfs_fopen(path)) == NULL) {
            snprintf(path, sizeof(path), "%s/slurm.out", run_dir);
            f = jobfs_fopen(path);
        }
    }
    json_decref(attempts);
    if (f == NULL && strcmp(stream, "launcher") == 0) {
        api_problem(resp, 404, "no-logs", "Not Found", req->path,
                    "no launcher log for the latest attempt of job %s", param);
        return;
    }
    if (f == NULL) {
        api_problem(resp, 404, "no-logs", "Not Found", req->path,
                    "no %s for rank %lld of job %s (is the rank in range?)", stream, rank, param);
        return;
    }
    /* Served from its own descriptor, streamed by the server: a log of any size costs the
     * same memory. */
    fd = fcntl(fileno(f), F_DUPFD_CLOEXEC, 0);
    fclose(f);
    if (fd < 0 || fstat(fd, &sb) < 0) {
        if (fd >= 0)
            close(fd);
        api_problem(resp, 503, "busy", "Service Unavailable", req->path, "cannot read the log: %s",
                    strerror(errno));
        return;
    }
    size = (long long)sb.st_size;
    if (offset > size)
        offset = size;
    if (offset < 0)
        offset = 0;
    if (tail >= 0 && off_s == NULL)
        offset = tail_start(fd, size, tail);
    resp->file = 1;
    resp->file_fd = fd;
    resp->file_offset = offset;
    resp->file_len = size - offset;
    resp->file_type = "text/plain; charset=utf-8";
    resp->log_offset = size;
    resp->status = 200;
}

static int valid_state(const char *s)
{
    static const char *const states[] = {"QUEUED",   "STARTING",  "RUNNING",
                                         "STOPPING", "STOPPED",   "SUCCEEDED",
                                         "FAILED",   "CANCELLED", NULL};
    for (int i = 0; states[i]; i++) {
        if (strcmp(states[i], s) == 0)
            return 1;
    }
    return 0;
}

static void job_list(const struct api_config *cfg, const struct api_request *req, const char *param,
                     struct api_response *resp)
{
    const char *ps = req->query(req->conn, "page_size"), *tok = req->query(req->conn, "page_token");
    const char *state = req->query(req->conn, "state"), *label = req->query(req->conn, "label");
    const char *owner = req->query(req->conn, "owner");
    const char *owner_id = req->query(req->conn, "owner_id");
    const char *order = req->query(req->conn, "order");
    char key[128] = "", *end;
    const char *value = NULL;
    long size = PAGE_SIZE_DEFAULT;
    long long cursor = 0;
    int64_t next, newest;
    char *jobs;
    struct error err;
    struct store_filter filter = {.owner_id = STORE_ANYONE};
    long long principal;

    if (owner_id != NULL && api__parse_count(owner_id, INT64_MAX, &principal) < 0) {
        api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                    "owner_id must be a principal's id (a non-negative integer), not '%.64s'",
                    owner_id);
        return;
    }
    if (owner_id != NULL)
        filter.owner_id = principal;
    if (order != NULL && strcmp(order, "oldest") != 0 && strcmp(order, "newest") != 0) {
        api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                    "order must be oldest (the default) or newest, not '%.64s'", order);
        return;
    }
    filter.newest_first = order != NULL && strcmp(order, "newest") == 0;
    if (ps != NULL) {
        long long v;
        if (api__parse_count(ps, PAGE_SIZE_MAX, &v) < 0 || v < 1) {
            api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                        "page_size must be an integer in [1, %d], not '%s'", PAGE_SIZE_MAX, ps);
            return;
        }
        size = (long)v;
    }
    if (tok != NULL) {
        /* Only what next_page_token gives out: hex digits of a positive int64, nothing that
         * strtoll would also take (a sign, blanks, "0x") and no value it would clamp. */
        errno = 0;
        cursor = strtoll(tok, &end, 16);
        if (*tok == '\0' || strspn(tok, "0123456789abcdefABCDEF") != strlen(tok) || errno != 0 ||
            cursor < 0) {
            api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                        "page_token '%s' is not one this server gave out", tok);
            return;
        }
    }
    if (state != NULL && !valid_state(state)) {
        api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                    "state '%s' is not a job state (QUEUED, STARTING, RUNNING, STOPPING, "
                    "STOPPED, SUCCEEDED, FAILED, CANCELLED)",
                    state);
        return;
    }
    if (label != NULL) {
        const char *eq = strchr(label, '=');
        if (eq == NULL || eq == label || (size_t)(eq - label) >= sizeof(key)) {
            api_problem(resp, 400, "bad-parameter", "Bad Request", req->path,
                        "label must be key=value, not '%s'", label);
            return;
        }
        memcpy(key, label, (size_t)(eq - label));
        key[eq - label] = '\0';
        value = eq + 1;
    }
    /* Users list their own jobs; admins anyone's, optionally one owner's (by name: every
     * principal that had it; by owner_id: one). */
    if (!req->admin) {
        filter.owner_id = req->principal;
        owner = NULL;
    }
    filter.owner = owner;
    filter.state = state;
    filter.label_key = value ? key : NULL;
    filter.label_value = value;
    /*
     * The newest event first, then the jobs: the page reflects every event up to it (and
     * maybe some after), so a client that follows GET /v1/events after it, as a dashboard
     * does, misses no change (a list, then a watch from where it was taken).
     */
    if (store_events_newest(req->store, &newest, &err) < 0 ||
        store_job_list(req->store, &filter, cursor, (int)size, cfg->ckpt_prefix, &jobs, &next,
                       &err) < 0) {
        api__store_problem(resp, req->path, &err);
        return;
    }
    /* {"jobs":[...],"next_page_token":"...","last_event_id":N} around the rendered array */
    {
        size_t n = strlen(jobs), used;
        char tail[96], *text = malloc(n + sizeof(tail) + 16);
        if (text == NULL) {
            free(jobs);
            api_problem(resp, 503, "busy", "Service Unavailable", req->path, "out of memory");
            return;
        }
        used = next > 0 ? (size_t)snprintf(tail, sizeof(tail), ",\"next_page_token\":\"%llx\"",
                                           (unsigned long long)next)
                        : 0;
        snprintf(tail + used, sizeof(tail) - used, ",\"last_event_id\":%lld}", (long long)newest);
        memcpy(text, "{\"jobs\":", 8);
        memcpy(text + 8, jobs, n);
        memcpy(text + 8 + n, tail, strlen(tail) + 1);
        free(jobs);
        resp->status = 200;
        resp->json_text = text;
    }
}
