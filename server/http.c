/* SPDX-License-Identifier: Apache-2.0 */
/* http.c - libmicrohttpd glue for ringd. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <sodium.h>

#include "api/utf8.h"
#include "auth.h"
#include "commit.h"
#include "common/clock.h"
#include "common/log.h"
#include "edge.h"
#include "http.h"
#include "metrics.h"
#include "record.h"
#include "sse.h"
#include "tls.h"
#include "web.h"

/* Request bodies above this get 413. A JobSpec is a few KiB; 1 MiB leaves room for long
 * argument lists and environments while bounding what one request can make us hold. */
#define BODY_MAX (1024 * 1024)

struct http {
    struct MHD_Daemon *d;
    int tls;      /* serving HTTPS: tls.h's pair, which http_tls_reload replaces */
    int key_made; /* store_key exists */
    const struct config *cfg;
    const struct api_config *api;
    char db_path[4200];
    pthread_key_t store_key;
    struct sse *sse;
    struct committer *committer;
    struct record *rec; /* RINGD_RECORD_RESPONSES (record.h); NULL: off */
};

/*
 * One request's state. libmicrohttpd creates it (on_uri) as soon as the request line is
 * read, which is the only time the target is seen as sent, before %-decoding.
 */
#define RAW_URI_KEEP (EDGE_URI_MAX + 2) /* enough to tell that a target is too long */

struct req {
    struct http *h;
    char raw_uri[RAW_URI_KEEP];
    int started; /* on_request has seen the headers */
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
 * A header is kept zero-padded to its slot's size and compared whole in constant time, so
 * that how long a comparison takes says nothing of how much of a guess was right.
 */
#define AUTH_CACHE_SIZE 16

static _Thread_local struct auth_hit {
    char header[160];
    struct auth_identity who;
    int64_t expires;
    unsigned generation;
} auth_cache[AUTH_CACHE_SIZE];

/* auth_check through the thread's cache. */
static int authorize(struct store *st, const char *header, struct auth_identity *who,
                     struct error *err)
{
    int64_t now = clock_mono_ms();
    unsigned gen = auth_generation();
    size_t slot = 0;
    char key[sizeof(auth_cache[0].header)] = {0};
    int cacheable = header != NULL && strlen(header) < sizeof(key);
    if (cacheable) {
        int64_t wall = (int64_t)time(NULL);
        memcpy(key, header, strlen(header));
        for (size_t i = 0; i < AUTH_CACHE_SIZE; i++) {
            /* A token past its own expiry is checked again, which says it expired. */
            if (auth_cache[i].expires > now && auth_cache[i].generation == gen &&
                (auth_cache[i].who.expires == 0 || wall < auth_cache[i].who.expires) &&
                sodium_memcmp(auth_cache[i].header, key, sizeof(key)) == 0) {
                *who = auth_cache[i].who;
                sodium_memzero(key, sizeof(key));
                return 0;
            }
            if (auth_cache[i].expires < auth_cache[slot].expires)
                slot = i;
        }
    }
    if (auth_check(st, header, who, err) < 0) {
        sodium_memzero(key, sizeof(key));
        return -1;
    }
    if (cacheable) {
        memcpy(auth_cache[slot].header, key, sizeof(key));
        sodium_memzero(key, sizeof(key));
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

static const char *query(void *conn, const char *key)
{
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

static const char *header(void *conn, const char *key)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, key);
}

/*
 * The access log. Every field a client chose is escaped (log_escape): a CR or LF in a URL
 * must not start a line of its own that looks like ringd's.
 */
static void log_line(const char *method, const char *target, int status, const char *owner)
{
    char fields[1100], m[40], t[600], o[200];
    snprintf(fields, sizeof(fields), "method=\"%s\" path=\"%s\" status=%d owner=\"%s\"",
             log_escape(method ? method : "", m, sizeof(m)),
             log_escape(target ? target : "", t, sizeof(t)), status,
             log_escape(owner ? owner : "-", o, sizeof(o)));
    log_event(LOG_LEVEL_INFO, NULL, "request", fields);
}

/* A log: the file's bytes, sent from its descriptor (sendfile where there is no TLS, a
 * block at a time otherwise), so that its size never becomes ringd's memory. */
static enum MHD_Result send_file(struct MHD_Connection *c, struct api_response *r)
{
    struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(
        (uint64_t)r->file_len, r->file_fd, (uint64_t)r->file_offset);
    enum MHD_Result ret;
    char off[32];
    if (resp == NULL)
        return MHD_NO; /* the descriptor is still r's */
    r->file = 0;       /* MHD closes it */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->file_type);
    if (r->log_offset >= 0) {
        snprintf(off, sizeof(off), "%lld", r->log_offset);
        MHD_add_response_header(resp, "X-Ring-Log-Offset", off);
    }
    ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, struct api_response *r, int close)
{
    if (r->file)
        return send_file(c, r);
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
    if (r->retry_after > 0 || r->age_s > 0) {
        char v[24];
        if (r->retry_after > 0) {
            snprintf(v, sizeof(v), "%d", r->retry_after);
            MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, v);
        }
        if (r->age_s > 0) {
            snprintf(v, sizeof(v), "%ld", r->age_s);
            MHD_add_response_header(resp, MHD_HTTP_HEADER_AGE, v);
        }
    }
    if (close)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
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
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_CONTENT_TYPE);
    ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* MHD's URI log callback: the request's state, with its target as sent. */
/*
 * What libmicrohttpd reports itself (a failed TLS handshake, a request it answered on its
 * own): a log line with a time and a level like every other, not its bare text on stderr.
 * A client causes these, so they are warnings; a line is cut at 512 bytes.
 */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    size_t n;
    (void)cls;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    for (n = strlen(msg); n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'); n--)
        msg[n - 1] = '\0';
    log_warning("libmicrohttpd: %s", msg);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct req *rq = calloc(1, sizeof(*rq));
    if (rq != NULL) {
        rq->h = cls;
        snprintf(rq->raw_uri, sizeof(rq->raw_uri), "%s", uri ? uri : "");
    }
    return rq;
}

/* Adds what send_json is about to send to the record of responses (record.h), when on. */
static void record_answer(struct req *rq, const char *method, const struct api_response *r)
{
    int text = r->json_text != NULL || r->body != NULL;
    const char *type = r->problem ? "application/problem+json" : "application/json";
    if (rq->h->rec == NULL)
        return;
    if (r->file)
        record_response(rq->h->rec, method, rq->raw_uri, r, r->file_type, "file");
    else
        record_response(rq->h->rec, method, rq->raw_uri, r, text ? type : NULL,
                        text ? "json" : "empty");
}

/* Answers resp (and frees what it holds), counting and logging it. */
static enum MHD_Result answer(struct MHD_Connection *c, struct req *rq, const char *method,
                              const char *owner, struct api_response *resp, int close)
{
    enum MHD_Result ret;
    metrics_count_request(resp->status);
    log_line(method, rq->raw_uri, resp->status, owner);
    record_answer(rq, method, resp);
    ret = send_json(c, resp, close);
    api_response_release(resp);
    return ret;
}

/* The first call, with the headers: checks at the edge, and the body's announced size. */
static enum MHD_Result on_headers(struct http *h, struct MHD_Connection *c, struct req *rq,
                                  const char *url, const char *method)
{
    struct edge_config ec = {.no_auth = h->cfg->no_auth, .tls = h->cfg->tls_cert[0] != '\0'};
    struct api_response resp = {0};
    const char *cl =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    int rc;

    rq->started = 1;
    rc = edge_check(&ec, c, rq->raw_uri, url, method, &resp);
    if (rc < 0) {
        /* Answered before the body was read: the connection cannot carry another request. */
        return answer(c, rq, method, "-", &resp, 1);
    }
    if (cl != NULL && strtoull(cl, NULL, 10) > BODY_MAX)
        rq->too_big = 1;
    return MHD_YES;
}

/* GET /metrics, outside the API's routes: Prometheus text, for any caller. */
static enum MHD_Result metrics(struct MHD_Connection *c, struct req *rq, struct store *st,
                               int reading, const char *method)
{
    struct api_response resp = {0};
    struct error err;
    char *text;
    if (strcmp(method, "GET") != 0) {
        api_problem(&resp, 405, "method-not-allowed", "Method Not Allowed", "/metrics",
                    "/metrics only answers GET");
        snprintf(resp.allow, sizeof(resp.allow), "GET");
    } else if ((text = metrics_render(st, rq->h->api->sched, &err)) != NULL) {
        if (reading)
            store_read_end(st);
        metrics_count_request(200);
        log_line(method, rq->raw_uri, 200, "-");
        resp.status = 200;
        record_response(rq->h->rec, method, rq->raw_uri, &resp, METRICS_CONTENT_TYPE, "text");
        return send_text(c, text);
    } else {
        api_problem(&resp, 503, "busy", "Service Unavailable", "/metrics", "metrics: %s", err.text);
    }
    if (reading)
        store_read_end(st);
    return answer(c, rq, method, "-", &resp, 0);
}

/*
 * Starts the stream resp describes for who, within who's token's share of streams: 429
 * with Retry-After past it. A stream lasts as long as its job, so a client over its share
 * has streams to end first; retrying at once would not help.
 */
#define STREAMS_RETRY_S 30

static enum MHD_Result start_stream(struct http *h, struct MHD_Connection *c, struct req *rq,
                                    const char *url, const char *method,
                                    const struct auth_identity *who, struct api_response *resp)
{
    struct sse_auth sa = {.expires = who->expires};
    const char *authz = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
    enum MHD_Result ret;

    if (!h->cfg->no_auth) {
        snprintf(sa.token, sizeof(sa.token), "%s", who->token);
        snprintf(sa.header, sizeof(sa.header), "%s", authz ? authz : "");
    }
    if (sse_reserve(h->sse, sa.token) < 0) {
        sodium_memzero(sa.header, sizeof(sa.header));
        api_problem(resp, 429, "too-many-streams", "Too Many Requests", url,
                    "token %s holds %d streams (events or log follows) already, the most one "
                    "token may; end one first",
                    sa.token, sse_per_token(h->sse));
        resp->retry_after = STREAMS_RETRY_S;
        return answer(c, rq, method, who->owner, resp, 0);
    }
    metrics_count_request(200);
    log_line(method, rq->raw_uri, 200, who->owner);
    record_response(h->rec, method, rq->raw_uri, resp,
                    resp->stream == API_STREAM_LOGS ? SSE_LOG_TYPE : SSE_EVENTS_TYPE, "stream");
    if (resp->stream == API_STREAM_EVENTS)
        ret = sse_respond(h->sse, c, &sa, resp->stream_job, resp->stream_from, stream_store, h);
    else if (resp->stream == API_STREAM_ALL_EVENTS)
        ret =
            sse_respond_all(h->sse, c, &sa, resp->stream_owner, resp->stream_from, stream_store, h);
    else
        ret = sse_follow_log(h->sse, c, &sa, resp->stream_job, resp->stream_rank,
                             resp->stream_which, resp->stream_from, stream_store, h);
    sodium_memzero(sa.header, sizeof(sa.header));
    return ret;
}

/* GET / and /ui/...: the dashboard's assets, for any caller (they hold no data). */
static enum MHD_Result web(struct MHD_Connection *c, struct req *rq, const char *method,
                           const char *url)
{
    const struct web_asset *a = web_find(url);
    struct api_response resp = {0};
    struct MHD_Response *r;
    enum MHD_Result ret;
    int status;

    if (a == NULL) {
        api_problem(&resp, 404, "not-found", "Not Found", url,
                    "the dashboard has no file %s; it starts at /", url);
        return answer(c, rq, method, "-", &resp, 0);
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        api_problem(&resp, 405, "method-not-allowed", "Method Not Allowed", a->path,
                    "%s is not allowed on %s, the dashboard; use GET", method, a->path);
        snprintf(resp.allow, sizeof(resp.allow), "GET, HEAD");
        return answer(c, rq, method, "-", &resp, 0);
    }
    if ((r = web_response(a, header(c, MHD_HTTP_HEADER_IF_NONE_MATCH), &status)) == NULL)
        return MHD_NO;
    metrics_count_request(status);
    log_line(method, rq->raw_uri, status, "-");
    resp.status = status;
    record_response(rq->h->rec, method, rq->raw_uri, &resp, status == 200 ? a->type : NULL, "file");
    ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
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
    struct auth_identity who = {.principal = STORE_LOCAL, .owner = "local", .admin = 1};
    int reading = 0;

    if (rq == NULL) { /* on_uri could not allocate */
        if ((rq = on_uri(h, url, c)) == NULL)
            return MHD_NO;
        *con_cls = rq;
    }
    if (!rq->started)
        return on_headers(h, c, rq, url, method);
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
        return answer(c, rq, method, "-", &resp, 0);
    }
    if (!rq->queued && (strcmp(url, "/") == 0 || strncmp(url, "/ui/", 4) == 0))
        return web(c, rq, method, url);
    req.store = thread_store(h, &err);
    if (req.store != NULL && rq->queued) {
        /* back from the committer: answer with the stored job */
        snprintf(who.owner, sizeof(who.owner), "%s", rq->submit.owner);
        req.method = method;
        req.path = url;
        req.owner = who.owner;
        req.principal = rq->submit.sub.owner_id;
        req.conn = c;
        req.query = query;
        req.header = header;
        api_submit_end(h->api, &req, &rq->submit, &resp);
        return answer(c, rq, method, who.owner, &resp, 0);
    }
    if (req.store == NULL) {
        api_problem(&resp, 503, "not-ready", "Service Unavailable", url,
                    "cannot open the job database: %s", err.text);
        return answer(c, rq, method, "-", &resp, 0);
    }
    reading = !strcmp(method, "GET") && store_read_begin(req.store, &err) == 0;
    if (!strcmp(url, "/metrics"))
        return metrics(c, rq, req.store, reading, method);
    if (!h->cfg->no_auth && !public_path(url)) {
        if (authorize(req.store, header(c, MHD_HTTP_HEADER_AUTHORIZATION), &who, &err) < 0) {
            if (errno == EACCES || errno == ENOENT)
                api_problem(&resp, 401, "unauthorized", "Unauthorized", url, "%s", err.text);
            else if (errno == EKEYEXPIRED)
                api_problem(&resp, 401, "token-expired", "Unauthorized", url, "%s", err.text);
            else
                api_problem(&resp, 503, "busy", "Service Unavailable", url, "%s", err.text);
            goto send;
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
    req.principal = who.principal;
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
    if (resp.stream != API_STREAM_NONE) {
        /* The handler checked the request and the job; the stream reads afresh each time,
         * so this request's read snapshot ends here. */
        if (reading)
            store_read_end(req.store);
        return start_stream(h, c, rq, url, method, &who, &resp);
    }
send:
    if (reading)
        store_read_end(req.store);
    return answer(c, rq, method, who.owner, &resp, 0);
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

/* The whole of a PEM file (certificate or key), as text; NULL with err. */
/* Frees what http_start made before the daemon runs. Accepts NULL; keeps errno. */
static void http_free(struct http *h)
{
    int saved = errno;
    if (h == NULL)
        return;
    committer_stop(h->committer);
    sse_stop(h->sse);
    sse_free(h->sse);
    record_close(h->rec);
    if (h->key_made)
        pthread_key_delete(h->store_key);
    if (h->tls)
        tls_unload();
    free(h);
    errno = saved;
}

struct http *http_start(const struct config *cfg, const struct api_config *api, const char *db_path,
                        int *port, struct error *err)
{
    struct http *h = calloc(1, sizeof(*h));
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    struct MHD_OptionItem tls[4] = {{MHD_OPTION_END, 0, NULL}};
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
        errno = EINVAL;
        errprintf(err, "listen '%s' is not HOST:PORT", cfg->listen);
        goto error;
    }
    snprintf(host, sizeof(host), "%.*s", (int)(colon - cfg->listen), cfg->listen);
    snprintf(portstr, sizeof(portstr), "%s", colon + 1);
    if (host[0] == '[') { /* [v6]:port */
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = '\0';
    }
    if ((rc = getaddrinfo(host, portstr, &hints, &ai)) != 0) {
        errno = EINVAL;
        errprintf(err, "cannot resolve listen address %s: %s", cfg->listen, gai_strerror(rc));
        goto error;
    }
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (pthread_key_create(&h->store_key, close_store) != 0) {
        errno = EAGAIN;
        errprintf(err, "cannot create a thread key");
        goto error;
    }
    h->key_made = 1;
    if (record_open(&h->rec, err) < 0)
        goto error;
    if ((h->committer = committer_start(h->db_path, on_committed, err)) == NULL)
        goto error;
    if ((h->sse = sse_start(cfg->streams_per_token)) == NULL) {
        errno = ENOMEM;
        errprintf(err, "cannot start the event streams");
        goto error;
    }
    if (cfg->tls_cert[0] != '\0') {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            errno = EINVAL;
            errprintf(err, "this libmicrohttpd was built without TLS (GnuTLS)");
            goto error;
        }
        if (tls_load(cfg->tls_cert, cfg->tls_key, NULL, err) < 0)
            goto error;
        h->tls = 1;
        flags |= MHD_USE_TLS;
        /* Asked at every handshake, so that SIGHUP can replace the pair (tls.h). */
        tls[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)tls_retrieve};
        /* GnuTLS's defaults, without the protocol versions RFC 8996 retired. */
        tls[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                         (void *)"NORMAL:-VERS-TLS1.0:-VERS-TLS1.1"};
    }
    h->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)cfg->connection_limit, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)cfg->per_ip_limit, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout_s,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)EDGE_MHD_MEMORY, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
    if (h->d == NULL) {
        int e = errno ? errno : EIO;
        errno = e;
        if (e == EADDRINUSE)
            errprintf(err, "%s is in use (another ringd?); pick another with --listen",
                      cfg->listen);
        else if (h->tls)
            errprintf(err,
                      "cannot serve HTTPS on %s: check that %s and %s are a PEM certificate "
                      "and its key",
                      cfg->listen, cfg->tls_cert, cfg->tls_key);
        else
            errprintf(err, "cannot listen on %s: %s", cfg->listen, strerror(e));
        goto error;
    }
    freeaddrinfo(ai);
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : 0;
    return h;
error:
    if (ai != NULL)
        freeaddrinfo(ai);
    http_free(h);
    return NULL;
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
    /* Answer what is queued; HTTP threads may still push until the daemon stops, and get a
     * 503 at once, so the committer is freed only after MHD_stop_daemon joined them. */
    committer_close(h->committer);
    sse_stop(h->sse);
    MHD_stop_daemon(h->d);
    h->d = NULL;
    committer_free(h->committer);
    h->committer = NULL;
    sse_free(h->sse);
    h->sse = NULL;
    http_free(h);
}

int http_tls_reload(struct http *h, const char *cert, const char *key, struct tls_info *info,
                    struct error *err)
{
    if (!h->tls)
        return errno = EINVAL, errprintf(err, "ringd serves plain HTTP");
    return tls_load(cert, key, info, err);
}

void http_set_streams_per_token(struct http *h, int n)
{
    sse_set_per_token(h->sse, n);
}
