/* SPDX-License-Identifier: Apache-2.0 */
/* http.c - libmicrohttpd glue for ringd. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "auth.h"
#include "commit.h"
#include "http.h"
#include "metrics.h"
#include "sse.h"

/* Request bodies above this get 413. A JobSpec is a few KiB; 1 MiB leaves room for long
 * argument lists and environments while bounding what one request can make us hold. */
#define BODY_MAX (1024 * 1024)

struct http {
    struct MHD_Daemon *d;
    const struct config *cfg;
    const struct api_config *api;
    char db_path[4200];
    pthread_key_t store_key;
    struct sse *sse;
    struct committer *committer;
};

struct req {
    char *body;
    size_t len;
    int too_big;
    /* POST /v1/jobs: queued for the group committer while the connection is suspended; the
     * handler runs again only after on_committed resumed it */
    int queued;
    struct MHD_Connection *conn;
    struct api_submit submit;
    struct commit_item item;
};

/* The committer stored rq's submission: let its connection answer. */
static void on_committed(void *arg)
{
    struct req *rq = arg;
    MHD_resume_connection(rq->conn);
}

/*
 * Tokens recently checked by this thread. A client sends the same token on every request;
 * checking it costs a query and a SHA-256, so a hit within AUTH_CACHE_MS skips both. A
 * revocation through this server changes auth_generation(), which empties every thread's
 * cache at once; a token revoked by other means keeps working for at most AUTH_CACHE_MS.
 */
#define AUTH_CACHE_SIZE 16
#define AUTH_CACHE_MS   10000

static _Thread_local struct auth_hit {
    char header[160];
    struct auth_identity who;
    int64_t expires;
    unsigned generation;
} auth_cache[AUTH_CACHE_SIZE];

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* auth_check through the thread's cache. */
static int authorize(struct store *st, const char *header, struct auth_identity *who,
                     struct error *err)
{
    int64_t now = mono_ms();
    unsigned gen = auth_generation();
    size_t slot = 0;
    if (header != NULL && strlen(header) < sizeof(auth_cache[0].header)) {
        for (size_t i = 0; i < AUTH_CACHE_SIZE; i++) {
            if (auth_cache[i].expires > now && auth_cache[i].generation == gen &&
                strcmp(auth_cache[i].header, header) == 0) {
                *who = auth_cache[i].who;
                return 0;
            }
            if (auth_cache[i].expires < auth_cache[slot].expires)
                slot = i;
        }
    }
    if (auth_check(st, header, who, err) < 0)
        return -1;
    if (header != NULL && strlen(header) < sizeof(auth_cache[0].header)) {
        snprintf(auth_cache[slot].header, sizeof(auth_cache[slot].header), "%s", header);
        auth_cache[slot].who = *who;
        auth_cache[slot].expires = now + AUTH_CACHE_MS;
        auth_cache[slot].generation = gen;
    }
    return 0;
}

static void close_store(void *p)
{
    store_close(p);
}

/* This server thread's store, opened on its first request. */
static struct store *thread_store(struct http *h, struct error *err)
{
    struct store *st = pthread_getspecific(h->store_key);
    if (st == NULL) {
        if (store_open(h->db_path, &st, err) < 0)
            return NULL;
        pthread_setspecific(h->store_key, st);
    }
    return st;
}

static struct store *stream_store(void *arg)
{
    struct error err;
    return thread_store(arg, &err);
}

/* The job id of "/v1/jobs/<id><suffix>", or 0 when url is something else. */
static int job_path(const char *url, const char *suffix, char *id, size_t len)
{
    const char *rest;
    size_t n;
    if (strncmp(url, "/v1/jobs/", 9) != 0)
        return 0;
    rest = url + 9;
    n = strcspn(rest, "/");
    if (n == 0 || n >= len || strcmp(rest + n, suffix) != 0)
        return 0;
    memcpy(id, rest, n);
    id[n] = '\0';
    return 1;
}

/*
 * Before a stream: the job must be the caller's (else a 404 problem in resp and 0). The
 * stream reads later, each time afresh, so the request's read snapshot is closed here.
 */
static int stream_allowed(const struct api_request *req, const char *id, const char *owner,
                          int reading, const char *url, struct api_response *resp)
{
    json_t *job;
    struct error err;
    if (store_job_get(req->store, id, owner, &job, &err) < 0) {
        api_problem(resp, 404, "job-not-found", "Not Found", url,
                    "there is no job %s (or it is not yours)", id);
        return 0;
    }
    json_decref(job);
    if (reading)
        store_read_end(req->store);
    metrics_count_request(200);
    return 1;
}

static const char *query(void *conn, const char *key)
{
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

static const char *header(void *conn, const char *key)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, key);
}

static void log_line(const char *method, const char *url, int status, const char *owner)
{
    char now[40];
    store_now_iso(now, sizeof(now));
    /* One fprintf per line: stderr is unbuffered, so lines from threads do not mix. */
    fprintf(stderr, "ts=%s level=info msg=request method=%s path=%s status=%d owner=%s\n", now,
            method, url, status, owner ? owner : "-");
}

static enum MHD_Result send_json(struct MHD_Connection *c, struct api_response *r)
{
    if (r->text != NULL) { /* logs */
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(r->text_len, r->text, MHD_RESPMEM_MUST_COPY);
        enum MHD_Result ret;
        char off[32];
        if (resp == NULL)
            return MHD_NO;
        snprintf(off, sizeof(off), "%lld", r->log_offset);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        MHD_add_response_header(resp, "X-Ring-Log-Offset", off);
        ret = MHD_queue_response(c, (unsigned)r->status, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    /* A rendered body changes hands: MHD frees it. */
    char *text = r->json_text != NULL ? r->json_text
                 : r->body != NULL    ? json_dumps(r->body, JSON_COMPACT)
                                      : NULL;
    struct MHD_Response *resp;
    enum MHD_Result ret;
    size_t len = text ? strlen(text) : 0;

    r->json_text = NULL;
    resp = MHD_create_response_from_buffer(len, text ? text : (char *)"",
                                           text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (resp == NULL) {
        free(text);
        return MHD_NO;
    }
    if (text)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                r->problem ? "application/problem+json" : "application/json");
    if (r->location[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, r->location);
    if (r->allow[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"ringd\"");
    ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static int public_path(const char *url)
{
    return !strcmp(url, "/healthz") || !strcmp(url, "/readyz") ||
           !strcmp(url, "/v1/openapi.json") || !strcmp(url, "/metrics");
}

static enum MHD_Result send_text(struct MHD_Connection *c, char *text)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    enum MHD_Result ret;
    if (resp == NULL) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct http *h = cls;
    struct req *rq = *con_cls;
    struct api_response resp = {0};
    struct api_request req = {0};
    struct error err;
    struct auth_identity who = {.owner = "local", .admin = 1};
    int reading = 0;
    enum MHD_Result ret;

    if (rq == NULL) { /* first call: headers only */
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        rq = calloc(1, sizeof(*rq));
        if (rq == NULL)
            return MHD_NO;
        if (cl != NULL && strtoull(cl, NULL, 10) > BODY_MAX)
            rq->too_big = 1;
        *con_cls = rq;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        if (!rq->too_big && rq->len + n > BODY_MAX)
            rq->too_big = 1;
        if (!rq->too_big) {
            char *grown = realloc(rq->body, rq->len + n + 1);
            if (grown == NULL)
                return MHD_NO;
            rq->body = grown;
            memcpy(rq->body + rq->len, upload_data, n);
            rq->len += n;
            rq->body[rq->len] = '\0';
        }
        *upload_data_size = 0; /* consumed (or dropped, once too big) */
        return MHD_YES;
    }
    if (rq->too_big) {
        api_problem(&resp, 413, "body-too-large", "Content Too Large", url,
                    "the request body is over %d bytes; send a smaller JobSpec", BODY_MAX);
        goto send;
    }
    req.store = thread_store(h, &err);
    if (req.store != NULL && rq->queued) {
        /* back from the committer: answer with the stored job */
        snprintf(who.owner, sizeof(who.owner), "%s", rq->submit.owner);
        req.method = method;
        req.path = url;
        req.owner = who.owner;
        req.conn = c;
        req.query = query;
        req.header = header;
        api_submit_end(h->api, &req, &rq->submit, &resp);
        goto send;
    }
    if (req.store == NULL) {
        api_problem(&resp, 503, "not-ready", "Service Unavailable", url,
                    "cannot open the job database: %s", err.text);
        goto send;
    }
    reading = !strcmp(method, "GET") && store_read_begin(req.store, &err) == 0;
    if (!h->cfg->no_auth && !public_path(url)) {
        if (authorize(req.store, header(c, MHD_HTTP_HEADER_AUTHORIZATION), &who, &err) < 0) {
            if (errno == EACCES || errno == ENOENT)
                api_problem(&resp, 401, "unauthorized", "Unauthorized", url, "%s", err.text);
            else
                api_problem(&resp, 503, "busy", "Service Unavailable", url, "%s", err.text);
            goto send;
        }
    }
    if (!strcmp(url, "/metrics") && !strcmp(method, "GET")) {
        char *text = metrics_render(req.store, &err);
        if (text != NULL) {
            if (reading)
                store_read_end(req.store);
            metrics_count_request(200);
            return send_text(c, text);
        }
        api_problem(&resp, 503, "busy", "Service Unavailable", url, "metrics: %s", err.text);
        goto send;
    }
    {
        char id[64];
        const char *accept = header(c, MHD_HTTP_HEADER_ACCEPT);
        if (!strcmp(method, "GET") && accept != NULL && strstr(accept, "text/event-stream") &&
            job_path(url, "/events", id, sizeof(id))) {
            const char *last = header(c, "Last-Event-ID");
            const char *after = query(c, "after");
            if (!stream_allowed(&req, id, who.admin ? NULL : who.owner, reading, url, &resp))
                goto send;
            log_line(method, url, 200, who.owner);
            return sse_respond(h->sse, c, id,
                               atoll(last    ? last
                                     : after ? after
                                             : "0"),
                               stream_store, h);
        }
    }
    {
        /* logs?follow=1: the rank's output as it is written, until the job ends. */
        char id[64];
        const char *follow = query(c, "follow"), *rank_s = query(c, "rank");
        const char *stream = query(c, "stream"), *off_s = query(c, "offset");
        if (!strcmp(method, "GET") && follow != NULL && !strcmp(follow, "1") &&
            job_path(url, "/logs", id, sizeof(id))) {
            long rank = rank_s ? strtol(rank_s, NULL, 10) : 0;
            if (stream == NULL)
                stream = "stdout";
            if (rank < 0 || (strcmp(stream, "stdout") && strcmp(stream, "stderr"))) {
                api_problem(&resp, 400, "bad-parameter", "Bad Request", url,
                            "rank must be a non-negative integer and stream stdout or stderr");
                goto send;
            }
            if (!stream_allowed(&req, id, who.admin ? NULL : who.owner, reading, url, &resp))
                goto send;
            log_line(method, url, 200, who.owner);
            return sse_follow_log(h->sse, c, id, (int)rank, stream, off_s ? atoll(off_s) : 0,
                                  stream_store, h);
        }
    }
    req.method = method;
    req.path = url;
    req.body = rq->body;
    req.body_len = rq->len;
    req.query = query;
    req.header = header;
    req.conn = c;
    req.owner = who.owner;
    req.user = who.user[0] ? who.user : NULL;
    req.admin = who.admin;
    req.defer = &rq->submit;
    api_handle(h->api, &req, &resp);
    if (resp.deferred) {
        /* A checked submission: the committer stores it with others in one commit. */
        rq->queued = 1;
        rq->conn = c;
        rq->item.sub = &rq->submit.sub;
        rq->item.arg = rq;
        MHD_suspend_connection(c);
        committer_push(h->committer, &rq->item);
        return MHD_YES;
    }
send:
    if (reading)
        store_read_end(req.store);
    metrics_count_request(resp.status);
    log_line(method, url, resp.status, who.owner);
    ret = send_json(c, &resp);
    json_decref(resp.body);
    free(resp.json_text);
    free(resp.text);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct req *rq = *con_cls;
    if (rq != NULL) {
        json_decref(rq->submit.sub.spec); /* when the answer never came to be sent */
        free(rq->submit.sub.job_text);
        free(rq->body);
        free(rq);
        *con_cls = NULL;
    }
}

struct http *http_start(const struct config *cfg, const struct api_config *api, const char *db_path,
                        int *port, struct error *err)
{
    struct http *h = calloc(1, sizeof(*h));
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char host[256], portstr[16];
    const char *colon = strrchr(cfg->listen, ':');
    const union MHD_DaemonInfo *info;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
                     MHD_ALLOW_SUSPEND_RESUME;
    int rc;

    if (h == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    h->cfg = cfg;
    h->api = api;
    snprintf(h->db_path, sizeof(h->db_path), "%s", db_path);
    if (colon == NULL || (size_t)(colon - cfg->listen) >= sizeof(host)) {
        free(h);
        return errno = EINVAL, errprintf(err, "listen '%s' is not HOST:PORT", cfg->listen), NULL;
    }
    snprintf(host, sizeof(host), "%.*s", (int)(colon - cfg->listen), cfg->listen);
    snprintf(portstr, sizeof(portstr), "%s", colon + 1);
    if (host[0] == '[') { /* [v6]:port */
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = '\0';
    }
    if ((rc = getaddrinfo(host, portstr, &hints, &ai)) != 0) {
        free(h);
        return errno = EINVAL,
               errprintf(err, "cannot resolve listen address %s: %s", cfg->listen,
                         gai_strerror(rc)),
               NULL;
    }
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    pthread_key_create(&h->store_key, close_store);
    if ((h->committer = committer_start(h->db_path, on_committed, err)) == NULL) {
        pthread_key_delete(h->store_key);
        freeaddrinfo(ai);
        free(h);
        return NULL;
    }
    if ((h->sse = sse_start()) == NULL) {
        committer_stop(h->committer);
        pthread_key_delete(h->store_key);
        freeaddrinfo(ai);
        free(h);
        return errno = ENOMEM, errprintf(err, "cannot start the event streams"), NULL;
    }
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->per_ip_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout_s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (h->d == NULL) {
        int e = errno;
        committer_stop(h->committer);
        sse_stop(h->sse);
        sse_free(h->sse);
        pthread_key_delete(h->store_key);
        free(h);
        errno = e;
        if (e == EADDRINUSE)
            errprintf(err, "%s is in use (another ringd?); pick another with --listen",
                      cfg->listen);
        else
            errprintf(err, "cannot listen on %s: %s", cfg->listen, strerror(e ? e : EIO));
        return NULL;
    }
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : 0;
    return h;
}

void http_stop(struct http *h)
{
    if (h == NULL)
        return;
    /* MHD_stop_daemon needs every suspended connection resumed; streams then end. */
    {
        MHD_socket lfd = MHD_quiesce_daemon(h->d); /* no new connections; we own the socket */
        if (lfd != MHD_INVALID_SOCKET)
            close(lfd);
    }
    committer_stop(h->committer); /* answers what is queued; later submissions get 503 */
    sse_stop(h->sse);
    MHD_stop_daemon(h->d);
    sse_free(h->sse);
    pthread_key_delete(h->store_key);
    free(h);
}
