/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.h - ringd's REST API v1, independent of the HTTP library: the server hands each
 * request to api_handle() and sends back what it fills in. Routes, handlers, the JobSpec
 * codec and RFC 9457 problem details live in api/.
 */
#ifndef RINGD_API_H
#define RINGD_API_H

#include <jansson.h>
#include <stddef.h>

#include "db/store.h"
#include "scheduler/core/scheduler.h"

/* What the API needs from the daemon, fixed at start-up. */
struct api_config {
    const char *data_dir;    /* ringd's own: jobs' directories may not lie in it */
    const char *work_dir;    /* runs/ and checkpoints/ live here: data_dir, or slurm_work_dir */
    const char *ckpt_prefix; /* work_dir/checkpoints/: the default checkpoint_dir is this + id */
    const struct cluster *cluster; /* what jobs run on (the scheduler's, fixed at start) */
    const char *backend;           /* the backend's name: what JobSpecs may ask for */
    /* Creates an API token (the server owns the hashing) that expires at expires (Unix
     * seconds; 0: never): writes the secret token into token (at least 128 bytes) and its
     * principal into *principal (store_token_create says which one; EEXIST: the name is
     * another user's). Returns 0 or -1 with err. */
    int (*token_create)(struct store *st, const char *name, int admin, const char *unix_user,
                        int64_t expires, char *token, int64_t *principal, struct error *err);
    /* Called after a token is revoked: the server drops the tokens it had checked. */
    void (*token_revoked)(void);
    struct scheduler *sched; /* woken on submissions; carries out cancels */
    /*
     * Who jobs run as. As root: a token's Unix user, else default_user; a job with neither
     * is refused. Otherwise every job runs as ringd's own user, and tokens may only name
     * that user.
     */
    const char *default_user; /* NULL or "": none */
};

struct api_submit;

struct api_request {
    const char *method;
    const char *path;
    const char *body; /* NUL-terminated; NULL when there is none */
    size_t body_len;
    /* Query argument and header lookups; return NULL when absent. */
    const char *(*query)(void *conn, const char *key);
    const char *(*header)(void *conn, const char *key);
    void *conn;
    int64_t principal;   /* who is calling: what owns the jobs it submits (store.h); without
                          * auth STORE_LOCAL */
    const char *owner;   /* the principal's name, as jobs show their owner */
    const char *user;    /* the token's Unix user; NULL when it has none */
    int admin;           /* an admin acts on every owner's jobs */
    struct store *store; /* this thread's connection */
    /* Where POST /v1/jobs leaves a checked submission for the server to commit with others
     * (then resp->deferred is set); NULL: the handler stores it itself. */
    struct api_submit *defer;
};

struct api_response {
    int status;
    json_t *body; /* owned; NULL for no body */
    int problem;  /* body is application/problem+json */
    int deferred; /* no answer yet: req->defer holds a submission to commit, then
                   * api_submit_end answers */
    char location[128];
    char allow[64];  /* for 405 */
    char *json_text; /* owned; a JSON body already rendered (job reads), instead of body */
    int retry_after; /* > 0: seconds, sent as Retry-After (with 429 and 503) */
    long age_s;      /* > 0: the body is what ringd knew this many seconds ago (Age) */
    /*
     * A body read from a file instead of JSON (a log, the database's backup), when file is
     * set: file_len bytes of file_fd from file_offset, of type file_type (static text),
     * streamed, never held in memory whole. Whoever answers owns file_fd and closes it, sent
     * or not.
     */
    int file;
    int file_fd;
    long long file_offset, file_len;
    const char *file_type;
    long long log_offset; /* a log's: where the client continues (X-Ring-Log-Offset); < 0: none */
    /*
     * A stream to start instead of a body (status 200): the handler checked the request
     * and the caller's right to the job; the server runs the stream.
     */
    enum { API_STREAM_NONE, API_STREAM_EVENTS, API_STREAM_LOGS, API_STREAM_ALL_EVENTS } stream;
    char stream_job[64];   /* events of one job, logs; "" for every job's events */
    int64_t stream_owner;  /* every job's events: whose (a principal, or STORE_ANYONE) */
    long long stream_from; /* events: after this event id; logs: from this byte */
    int stream_rank;       /* logs */
    char stream_which[16]; /* logs: "stdout", "stderr" or "launcher" */
};

/* Routes req, runs its handler and fills resp (status, body, headers). Never fails: every
 * error becomes a problem response. */
void api_handle(const struct api_config *cfg, const struct api_request *req,
                struct api_response *resp);
/* Frees what resp holds (body, json_text, the file's descriptor); keeps errno. */
void api_response_release(struct api_response *resp);

/*
 * POST /v1/jobs in two halves around the store, so that the server can commit the
 * submissions of many connections in one transaction (group commit, see
 * store_job_create_batch) without holding a thread per request:
 * - api_submit_begin checks the request; it returns 1 with s->sub ready to be stored, or 0
 *   with resp filled (a problem);
 * - api_submit_end answers from s->sub's result (201 with the job, or a problem) and
 *   releases what begin took.
 * POST /v1/jobs through api_handle runs both around a batch of one, unless the request
 * gives a place to defer the submission to (api_request.defer).
 */
struct api_submit {
    struct store_submission sub;
    char owner[128];
    char key[256];
    char hash[32];
    char run_as[64]; /* the Unix user the job will run as */
};
int api_submit_begin(const struct api_config *cfg, const struct api_request *req,
                     struct api_submit *s, struct api_response *resp);
void api_submit_end(const struct api_config *cfg, const struct api_request *req,
                    struct api_submit *s, struct api_response *resp);

/*
 * Fills resp with an RFC 9457 problem: type "urn:ringmaster:problem:<kind>", title, status,
 * detail (what to fix) and instance (the request path). Returns resp->body for extensions.
 */
json_t *api_problem(struct api_response *resp, int status, const char *kind, const char *title,
                    const char *instance, const char *detail_fmt, ...)
    __attribute__((format(printf, 6, 7)));

/*
 * A job's sizes and speeds as the API shows them (scaling.c), as a new reference, from its
 * attempts (store_attempts), its spec (borrowed) and its state:
 *   {"workers": size now (0 when not running), "history": [{"attempt", "workers",
 *    "started_at", "ended_at"?, "ran_s", "reason"?}], "throughput": [{"workers",
 *    "observed_samples_per_s" (null where never run), "predicted_samples_per_s"}],
 *    "restart_overhead_s": {"stop": mean, "start": mean, "restarts": n} }
 * The prediction is speed.h's model fitted to the observations.
 */
json_t *api_job_scaling(json_t *attempts, json_t *spec, const char *state);

/*
 * The cluster's usage between from and to (Unix seconds) as a step series (routes_views.c),
 * a new reference or NULL when out of memory, from the attempts that ran then
 * (store_attempts_since; borrowed): [{"t", "gpus", "slots", "workers"}], one point at from,
 * one at each instant the usage changed, and one at to. An attempt's end and its
 * successor's start at the same instant make one step.
 */
json_t *api_cluster_usage(json_t *attempts, double from, double to);

/* The OpenAPI 3.1 document (static text). */
const char *api_openapi(void);

#endif /* RINGD_API_H */
