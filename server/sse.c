/* SPDX-License-Identifier: Apache-2.0 */
/* sse.c - event streams and log followers, on suspended connections. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "auth.h"
#include "common/clock.h"
#include "common/ticker.h"
#include "scheduler/backend/jobfs.h"
#include "sse.h"

/* How often suspended streams look for new events, and how often an idle stream sends a
 * comment so that proxies and clients keep the connection. */
#define SSE_POLL_MS      250
#define SSE_KEEPALIVE_MS 15000

struct stream {
    struct sse *owner;
    int log;       /* 1: follow a rank's log file; 0: job events */
    int all;       /* events of every job of scope's, not of job id's */
    int64_t scope; /* all: whose jobs (a principal, or STORE_ANYONE) */
    int rank;
    char which[16]; /* stdout, stderr or launcher */
    char *run_dir;  /* log: the latest attempt's (malloc'ed), NULL before it has one */
    int fd;         /* log: the latest attempt's file, -1 until it exists */
    struct MHD_Connection *conn;
    char id[64];
    long long after;
    char *pending; /* events: formatted, not yet handed to MHD */
    size_t len, off;
    int finished; /* the job ended, or the token no longer works: close once pending is sent */
    long long last_sent_ms;
    struct sse_auth auth;
    unsigned generation;  /* auth_generation() when the token was last checked */
    long long checked_ms; /* and when */
    int reserved;         /* holds a place of auth.token's */
    struct store *(*open_store)(void *arg);
    void *arg;
    struct stream *next; /* in the suspended list */
};

/* How many streams a token holds (under mu). */
struct token_streams {
    char token[16];
    int n;
    struct token_streams *next;
};

struct sse {
    struct ticker *waker; /* resumes the suspended streams every SSE_POLL_MS */
    pthread_mutex_t mu;
    int stop;
    int per_token;
    struct stream *suspended;
    struct token_streams *tokens;
};

/* Resumes every suspended stream (the caller holds mu). */
static void resume_all(struct sse *s)
{
    while (s->suspended != NULL) {
        struct stream *st = s->suspended;
        s->suspended = st->next;
        st->next = NULL;
        MHD_resume_connection(st->conn);
    }
}

static void wake_all(void *arg)
{
    struct sse *s = arg;
    pthread_mutex_lock(&s->mu);
    resume_all(s);
    pthread_mutex_unlock(&s->mu);
}

struct sse *sse_start(int per_token)
{
    struct sse *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->per_token = per_token;
    pthread_mutex_init(&s->mu, NULL);
    if ((s->waker = ticker_start(SSE_POLL_MS, wake_all, s)) == NULL) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    return s;
}

void sse_stop(struct sse *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    resume_all(s);
    pthread_mutex_unlock(&s->mu);
    ticker_stop(s->waker);
    s->waker = NULL;
}

void sse_free(struct sse *s)
{
    if (s == NULL)
        return;
    while (s->tokens != NULL) {
        struct token_streams *t = s->tokens;
        s->tokens = t->next;
        free(t);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int sse_reserve(struct sse *s, const char *token)
{
    struct token_streams *t;
    int rc = 0;
    if (token[0] == '\0')
        return 0;
    pthread_mutex_lock(&s->mu);
    for (t = s->tokens; t != NULL && strcmp(t->token, token) != 0; t = t->next)
        ;
    if (t == NULL && (t = calloc(1, sizeof(*t))) != NULL) {
        snprintf(t->token, sizeof(t->token), "%s", token);
        t->next = s->tokens;
        s->tokens = t;
    }
    if (t == NULL) {
        errno = ENOMEM;
        rc = -1;
    } else if (t->n >= s->per_token) {
        errno = EUSERS;
        rc = -1;
    } else {
        t->n++;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Gives back a place sse_reserve gave token. */
static void unreserve(struct sse *s, const char *token)
{
    struct token_streams **pp;
    pthread_mutex_lock(&s->mu);
    for (pp = &s->tokens; *pp != NULL && strcmp((*pp)->token, token) != 0; pp = &(*pp)->next)
        ;
    if (*pp != NULL && --(*pp)->n <= 0) {
        struct token_streams *t = *pp;
        *pp = t->next;
        free(t);
    }
    pthread_mutex_unlock(&s->mu);
}

static int terminal(const char *state)
{
    return !strcmp(state, "SUCCEEDED") || !strcmp(state, "FAILED") || !strcmp(state, "CANCELLED") ||
           !strcmp(state, "STOPPED");
}

/*
 * Whether the stream's token still works. A stream with auth off always does. The check
 * itself (a query and a hash) runs when a revocation was seen, every AUTH_CACHE_MS, and
 * at the expiry; otherwise this is a clock read and an atomic load. Returns 0 while it
 * works; -1 with the problem's kind in *kind and why in err once it does not.
 */
static int token_lapsed(struct stream *st, const char **kind, struct error *err)
{
    struct auth_identity who;
    struct store *store;
    unsigned gen = auth_generation();
    long long now = clock_mono_ms();

    if (st->auth.token[0] == '\0')
        return 0;
    if (gen == st->generation && now - st->checked_ms < AUTH_CACHE_MS &&
        (st->auth.expires == 0 || (int64_t)time(NULL) < st->auth.expires))
        return 0;
    if ((store = st->open_store(st->arg)) == NULL)
        return 0; /* no verdict: the next look asks again */
    if (auth_check(store, st->auth.header, &who, err) < 0) {
        if (errno == EKEYEXPIRED)
            return *kind = "token-expired", -1;
        if (errno == EACCES || errno == ENOENT)
            return *kind = "unauthorized", -1;
        return 0; /* the store is busy: no verdict */
    }
    st->generation = gen;
    st->checked_ms = now;
    st->auth.expires = who.expires;
    return 0;
}

/* The last event of a stream whose token stopped working: its type is the problem's kind
 * and its data the problem. Returns 0, or -1 when out of memory. */
static int lapsed_event(struct stream *st, const char *kind, const struct error *why)
{
    char type[64], instance[128], *data;
    json_t *p;
    int n;
    snprintf(type, sizeof(type), "urn:ringmaster:problem:%s", kind);
    if (st->all)
        snprintf(instance, sizeof(instance), "/v1/events");
    else
        snprintf(instance, sizeof(instance), "/v1/jobs/%s/events", st->id);
    p = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", "Unauthorized", "status", 401,
                  "detail", why->text, "instance", instance);
    data = p ? json_dumps(p, JSON_COMPACT) : NULL;
    json_decref(p);
    free(st->pending);
    st->pending = NULL;
    st->len = st->off = 0;
    n = data ? asprintf(&st->pending, "event: %s\ndata: %s\n\n", kind, data) : -1;
    free(data);
    if (n < 0) {
        st->pending = NULL;
        return -1;
    }
    st->len = (size_t)n;
    return 0;
}

/* Formats new events into pending. Returns 0, or -1 when the store failed. */
static int fill(struct stream *st)
{
    struct store *store = st->open_store(st->arg);
    json_t *events, *e, *job;
    struct error err;
    size_t i;
    int ended = 0;
    int64_t upto = 0;
    FILE *f;

    if (store == NULL)
        return -1;
    if (st->all) {
        /* Every job's events: a stream that ends only with its client, its token or ringd. */
        if (store_events_all(store, st->scope, st->after, 100, &events, &upto, &err) < 0)
            return -1;
    } else {
        /*
         * The state first, then the events. A job that was terminal before the events were
         * read has every event in them (a transition commits with its event), so an empty
         * read then is the end. Read the other way round, an event committed between the two
         * reads (the job's last) was never sent, and the stream ended without it.
         */
        if (store_job_get(store, st->id, STORE_ANYONE, &job, &err) < 0)
            return -1;
        ended = terminal(json_string_value(json_object_get(job, "state")));
        json_decref(job);
        if (store_events(store, st->id, st->after, 100, &events, &err) < 0)
            return -1;
    }
    free(st->pending);
    st->pending = NULL;
    st->len = st->off = 0;
    f = open_memstream(&st->pending, &st->len);
    if (f == NULL) {
        json_decref(events);
        return -1;
    }
    json_array_foreach(events, i, e)
    {
        char *data = json_dumps(e, JSON_COMPACT);
        st->after = json_integer_value(json_object_get(e, "id"));
        fprintf(f, "id: %lld\nevent: %s\ndata: %s\n\n", st->after,
                json_string_value(json_object_get(e, "type")), data ? data : "{}");
        free(data);
    }
    if (st->all) /* past the events of jobs that are not the caller's, too */
        st->after = upto;
    /* Finished once the job is terminal and every event has been read. */
    if (json_array_size(events) == 0)
        st->finished = ended;
    if (json_array_size(events) == 0 && !st->finished &&
        clock_mono_ms() - st->last_sent_ms >= SSE_KEEPALIVE_MS)
        fputs(": keep-alive\n\n", f);
    json_decref(events);
    fclose(f);
    return 0;
}

/* Opens the log the stream follows in its run_dir into fd, when it exists. */
static void open_log(struct stream *st)
{
    char path[4300];
    FILE *f;
    if (st->run_dir == NULL)
        return;
    if (strcmp(st->which, "launcher") != 0) {
        snprintf(path, sizeof(path), "%s/rank.%d/%s", st->run_dir, st->rank, st->which);
        f = jobfs_fopen(path);
    } else { /* ringrun's (or mpirun's) output, or the Slurm batch job's */
        snprintf(path, sizeof(path), "%s/ringrun.log", st->run_dir);
        if ((f = jobfs_fopen(path)) == NULL) {
            snprintf(path, sizeof(path), "%s/slurm.out", st->run_dir);
            f = jobfs_fopen(path);
        }
    }
    if (f != NULL) {
        st->fd = fcntl(fileno(f), F_DUPFD_CLOEXEC, 0);
        fclose(f);
    }
}

/* Log mode, when the file gave nothing new: the job's state (*ended) and its latest
 * attempt, whose log (from byte 0) replaces the previous one's. Returns 0, or -1 when the
 * store failed. */
static int look_again(struct stream *st, int *ended)
{
    struct store *store = st->open_store(st->arg);
    json_t *attempts, *job;
    struct error err;
    const char *dir = NULL;

    /* The state first, then the file, as in fill: a job terminal before the read has
     * written all its output by then, so an empty read is the end. */
    if (store == NULL || store_job_get(store, st->id, STORE_ANYONE, &job, &err) < 0)
        return -1;
    *ended = terminal(json_string_value(json_object_get(job, "state")));
    json_decref(job);
    if (store_attempts(store, st->id, &attempts, &err) < 0)
        return -1;
    if (json_array_size(attempts) > 0)
        dir = json_string_value(
            json_object_get(json_array_get(attempts, json_array_size(attempts) - 1), "run_dir"));
    if (dir != NULL && (st->run_dir == NULL || strcmp(dir, st->run_dir) != 0)) {
        char *copy = strdup(dir);
        if (copy == NULL) {
            json_decref(attempts);
            return -1;
        }
        free(st->run_dir);
        st->run_dir = copy;
        st->after = 0;
        if (st->fd >= 0)
            close(st->fd);
        st->fd = -1;
    }
    json_decref(attempts);
    if (st->fd < 0)
        open_log(st);
    return 0;
}

/* Bytes of the log from after, straight into buf. */
static ssize_t log_bytes(struct stream *st, char *buf, size_t max)
{
    ssize_t n = st->fd >= 0 ? pread(st->fd, buf, max, st->after) : 0;
    if (n < 0) /* EINTR, or a file the job made unreadable: nothing for now */
        n = 0;
    st->after += n;
    return n;
}

/* Log mode: new bytes into buf. Returns how many (0: nothing yet; finished is set once
 * the job ended and everything was sent), or -1 when the store failed. */
static ssize_t read_log(struct stream *st, char *buf, size_t max)
{
    ssize_t n = log_bytes(st, buf, max);
    int ended;
    if (n > 0)
        return n;
    /* The state first, then the file, as in fill: a job terminal before the read has
     * written all its output by then, so an empty read is the end. */
    if (look_again(st, &ended) < 0)
        return -1;
    if ((n = log_bytes(st, buf, max)) == 0)
        st->finished = ended;
    return n;
}

/*
 * Whether the client has gone: its end of the connection is closed (or broken). An idle
 * stream writes nothing for up to SSE_KEEPALIVE_MS, so without this check a client that
 * went away would hold its descriptor and connection slot until the next keep-alive
 * failed to send; with it, for at most one SSE_POLL_MS.
 */
static int peer_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct pollfd p;
    if (info == NULL)
        return 0;
    p.fd = info->connect_fd;
    p.events = POLLRDHUP;
    p.revents = 0;
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* Event mode: what pending holds next, into buf. Returns how many bytes, 0 when there is
 * nothing yet, -1 at the end of the stream. */
static ssize_t read_events(struct stream *st, char *buf, size_t max)
{
    size_t n;
    if (st->off == st->len) {
        /* sent: an idle stream keeps no buffer */
        free(st->pending);
        st->pending = NULL;
        st->len = st->off = 0;
        if (st->finished || fill(st) < 0)
            return -1;
    }
    if (st->off == st->len)
        return 0;
    n = st->len - st->off < max ? st->len - st->off : max;
    memcpy(buf, st->pending + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *st = cls;
    struct sse *s = st->owner;
    const char *kind;
    struct error why;
    ssize_t n;

    if (!st->finished && token_lapsed(st, &kind, &why) < 0) {
        st->finished = 1;
        if (st->log || lapsed_event(st, kind, &why) < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (st->log)
        n = st->finished ? -1 : read_log(st, buf, max);
    else
        n = read_events(st, buf, max);
    if (n < 0 || (n == 0 && st->log && st->finished))
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (n > 0) {
        st->last_sent_ms = clock_mono_ms();
        return n;
    }
    if (peer_gone(st->conn))
        return MHD_CONTENT_READER_END_WITH_ERROR;
    pthread_mutex_lock(&s->mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    /* Nothing new: sleep without a thread until the waker resumes us. */
    MHD_suspend_connection(st->conn);
    st->next = s->suspended;
    s->suspended = st;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void release(void *cls)
{
    struct stream *st = cls;
    if (st->reserved)
        unreserve(st->owner, st->auth.token);
    if (st->fd >= 0)
        close(st->fd);
    sodium_memzero(st->auth.header, sizeof(st->auth.header));
    free(st->run_dir);
    free(st->pending);
    free(st);
}

/* A stream for job id after position after, served as content_type; st's place is
 * reserved (sse_reserve), and given back with st whatever happens. */
static enum MHD_Result queue_stream(struct sse *s, struct MHD_Connection *c, struct stream *st,
                                    const char *id, long long after, const char *content_type,
                                    struct store *(*open_store)(void *arg), void *arg)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;

    st->conn = c;
    snprintf(st->id, sizeof(st->id), "%s", id);
    st->after = after;
    st->open_store = open_store;
    st->arg = arg;
    st->last_sent_ms = st->checked_ms = clock_mono_ms();
    st->generation = auth_generation();
    /* The reads go straight into libmicrohttpd's write buffer (chunked, HTTP/1.1); the
     * block size sizes a buffer of the response's own, used only for an HTTP/1.0 client,
     * which every stream would otherwise carry. */
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, reader, st, release);
    if (resp == NULL) {
        release(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* A new stream of s for who, holding who's reserved place; NULL (the place given back)
 * when out of memory. */
static struct stream *stream_new(struct sse *s, const struct sse_auth *who)
{
    struct stream *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        if (who->token[0] != '\0')
            unreserve(s, who->token);
        return NULL;
    }
    st->owner = s;
    st->fd = -1;
    st->auth = *who;
    st->reserved = who->token[0] != '\0';
    return st;
}

enum MHD_Result sse_respond(struct sse *s, struct MHD_Connection *c, const struct sse_auth *who,
                            const char *id, long long after, struct store *(*open_store)(void *arg),
                            void *arg)
{
    struct stream *st = stream_new(s, who);
    if (st == NULL)
        return MHD_NO;
    return queue_stream(s, c, st, id, after, SSE_EVENTS_TYPE, open_store, arg);
}

enum MHD_Result sse_respond_all(struct sse *s, struct MHD_Connection *c, const struct sse_auth *who,
                                int64_t scope, long long after,
                                struct store *(*open_store)(void *arg), void *arg)
{
    struct stream *st = stream_new(s, who);
    int n;
    if (st == NULL)
        return MHD_NO;
    st->all = 1;
    st->scope = scope;
    /* Where the stream starts, as an id without data: a client that reconnects with it as
     * Last-Event-ID misses nothing, even when no event came meanwhile. */
    n = asprintf(&st->pending, "id: %lld\n\n", after);
    if (n < 0) {
        st->pending = NULL;
        release(st);
        return MHD_NO;
    }
    st->len = (size_t)n;
    return queue_stream(s, c, st, "", after, SSE_EVENTS_TYPE, open_store, arg);
}

enum MHD_Result sse_follow_log(struct sse *s, struct MHD_Connection *c, const struct sse_auth *who,
                               const char *id, int rank, const char *stream, long long offset,
                               struct store *(*open_store)(void *arg), void *arg)
{
    struct stream *st = stream_new(s, who);
    struct store *store;
    json_t *attempts;
    struct error err;

    if (st == NULL)
        return MHD_NO;
    st->log = 1;
    st->rank = rank;
    snprintf(st->which, sizeof(st->which), "%s", stream);
    /* The first look must not mistake the latest run dir for a new one: start from it. */
    store = open_store(arg);
    if (store != NULL && store_attempts(store, id, &attempts, &err) == 0) {
        const char *dir = json_string_value(
            json_object_get(json_array_get(attempts, json_array_size(attempts) - 1), "run_dir"));
        if (dir != NULL && (st->run_dir = strdup(dir)) == NULL) {
            json_decref(attempts);
            release(st);
            return MHD_NO;
        }
        json_decref(attempts);
    }
    open_log(st);
    return queue_stream(s, c, st, id, offset, SSE_LOG_TYPE, open_store, arg);
}
