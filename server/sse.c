/* SPDX-License-Identifier: Apache-2.0 */
/* sse.c - Server-Sent Events for job events, on suspended connections. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "jobfs.h"
#include "sse.h"

/* How often suspended streams look for new events, and how often an idle stream sends a
 * comment so that proxies and clients keep the connection. */
#define SSE_POLL_MS      250
#define SSE_KEEPALIVE_MS 15000

struct stream {
    struct sse *owner;
    int log; /* 1: follow a rank's log file; 0: job events */
    int rank;
    char which[16]; /* stdout, stderr or launcher */
    char run_dir[4200];
    struct MHD_Connection *conn;
    char id[64];
    long long after;
    char *pending; /* formatted events not yet handed to MHD */
    size_t len, off;
    int finished; /* the job ended: close once pending is sent */
    long long last_sent_ms;
    struct store *(*open_store)(void *arg);
    void *arg;
    struct stream *next; /* in the suspended list */
};

struct sse {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    struct stream *suspended;
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

static void *waker(void *arg)
{
    struct sse *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += SSE_POLL_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &until);
        resume_all(s);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

struct sse *sse_start(void)
{
    struct sse *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, waker, s) != 0) {
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
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
}

void sse_free(struct sse *s)
{
    if (s == NULL)
        return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

static int terminal(const char *state)
{
    return !strcmp(state, "SUCCEEDED") || !strcmp(state, "FAILED") || !strcmp(state, "CANCELLED") ||
           !strcmp(state, "STOPPED");
}

/* Formats new events into pending. Returns 0, or -1 when the store failed. */
static int fill(struct stream *st)
{
    struct store *store = st->open_store(st->arg);
    json_t *events, *e, *job;
    struct error err;
    size_t i;
    int ended = 0;
    FILE *f;

    /*
     * The state first, then the events. A job that was terminal before the events were read
     * has every event in them (a transition commits with its event), so an empty read then
     * is the end. Read the other way round, an event committed between the two reads (the
     * job's last) was never sent, and the stream ended without it.
     */
    if (store == NULL || store_job_get(store, st->id, STORE_ANYONE, &job, &err) < 0)
        return -1;
    ended = terminal(json_string_value(json_object_get(job, "state")));
    json_decref(job);
    if (store_events(store, st->id, st->after, 100, &events, &err) < 0)
        return -1;
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
    /* Finished once the job is terminal and every event has been read. */
    if (json_array_size(events) == 0)
        st->finished = ended;
    if (json_array_size(events) == 0 && !st->finished &&
        now_ms() - st->last_sent_ms >= SSE_KEEPALIVE_MS)
        fputs(": keep-alive\n\n", f);
    json_decref(events);
    fclose(f);
    return 0;
}

/* Log mode: new bytes of the latest attempt's file (a new attempt starts from its byte 0). */
static int fill_log(struct stream *st)
{
    struct store *store = st->open_store(st->arg);
    json_t *attempts, *job;
    struct error err;
    const char *dir = NULL;
    char path[4300];
    int ended;
    FILE *f;

    /* The state first, then the file, as in fill: a job terminal before the read has
     * written all its output by then, so an empty read is the end. */
    if (store == NULL || store_job_get(store, st->id, STORE_ANYONE, &job, &err) < 0)
        return -1;
    ended = terminal(json_string_value(json_object_get(job, "state")));
    json_decref(job);
    if (store_attempts(store, st->id, &attempts, &err) < 0)
        return -1;
    if (json_array_size(attempts) > 0)
        dir = json_string_value(
            json_object_get(json_array_get(attempts, json_array_size(attempts) - 1), "run_dir"));
    if (dir != NULL && strcmp(dir, st->run_dir) != 0) {
        snprintf(st->run_dir, sizeof(st->run_dir), "%s", dir);
        st->after = 0;
    }
    json_decref(attempts);
    free(st->pending);
    st->pending = NULL;
    st->len = st->off = 0;
    if (st->run_dir[0] != '\0') {
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
            st->pending = malloc(65536);
            if (st->pending != NULL && fseek(f, st->after, SEEK_SET) == 0)
                st->len = fread(st->pending, 1, 65536, f);
            st->after += (long long)st->len;
            fclose(f);
        }
    }
    if (st->len == 0)
        st->finished = ended;
    return 0;
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

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *st = cls;
    struct sse *s = st->owner;
    size_t n;

    if (st->off == st->len) {
        if (st->finished || (st->log ? fill_log(st) : fill(st)) < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (st->off == st->len && peer_gone(st->conn))
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (st->off == st->len) {
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
    n = st->len - st->off < max ? st->len - st->off : max;
    memcpy(buf, st->pending + st->off, n);
    st->off += n;
    st->last_sent_ms = now_ms();
    return (ssize_t)n;
}

static void release(void *cls)
{
    struct stream *st = cls;
    free(st->pending);
    free(st);
}

/* A stream for job id after position after, served as content_type. */
static enum MHD_Result queue_stream(struct sse *s, struct MHD_Connection *c, struct stream *st,
                                    const char *id, long long after, const char *content_type,
                                    struct store *(*open_store)(void *arg), void *arg)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;

    st->owner = s;
    st->conn = c;
    snprintf(st->id, sizeof(st->id), "%s", id);
    st->after = after;
    st->open_store = open_store;
    st->arg = arg;
    st->last_sent_ms = now_ms();
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader, st, release);
    if (resp == NULL) {
        free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result sse_respond(struct sse *s, struct MHD_Connection *c, const char *id,
                            long long after, struct store *(*open_store)(void *arg), void *arg)
{
    struct stream *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return MHD_NO;
    return queue_stream(s, c, st, id, after, "text/event-stream", open_store, arg);
}

enum MHD_Result sse_follow_log(struct sse *s, struct MHD_Connection *c, const char *id, int rank,
                               const char *stream, long long offset,
                               struct store *(*open_store)(void *arg), void *arg)
{
    struct stream *st = calloc(1, sizeof(*st));
    struct store *store;
    json_t *attempts;
    struct error err;

    if (st == NULL)
        return MHD_NO;
    st->log = 1;
    st->rank = rank;
    snprintf(st->which, sizeof(st->which), "%s", stream);
    /* The first fill must not mistake the latest run dir for a new one: start from it. */
    store = open_store(arg);
    if (store != NULL && store_attempts(store, id, &attempts, &err) == 0) {
        if (json_array_size(attempts) > 0)
            snprintf(st->run_dir, sizeof(st->run_dir), "%s",
                     json_string_value(json_object_get(
                         json_array_get(attempts, json_array_size(attempts) - 1), "run_dir")));
        json_decref(attempts);
    }
    return queue_stream(s, c, st, id, offset, "text/plain; charset=utf-8", open_store, arg);
}
