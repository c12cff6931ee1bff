/* SPDX-License-Identifier: Apache-2.0 */
/* record.c - the response record of the contract tests (record.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record.h"
#include "api/utf8.h"

struct record {
    int fd;
    int failed; /* a write failed: said once */
    pthread_mutex_t mu;
};

int record_open(struct record **out, struct error *err)
{
    const char *path = getenv("RINGD_RECORD_RESPONSES");
    struct record *r;

    *out = NULL;
    if (path == NULL || *path == '\0')
        return 0;
    if ((r = calloc(1, sizeof(*r))) == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    r->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (r->fd < 0) {
        int e = errno;
        free(r);
        errno = e;
        return errprintf(err, "cannot open RINGD_RECORD_RESPONSES=%s: %s", path, strerror(e));
    }
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return 0;
}

void record_close(struct record *r)
{
    int saved = errno;
    if (r == NULL)
        return;
    close(r->fd);
    pthread_mutex_destroy(&r->mu);
    free(r);
    errno = saved;
}

/* Writes all of line (len bytes) in one append, through short writes and EINTR. */
static int write_all(int fd, const char *line, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, line, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        line += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The answer's body as JSON text (borrowed or made: *made says which to free). */
static const char *body_text(const struct api_response *resp, char **made)
{
    *made = NULL;
    if (resp->json_text != NULL)
        return resp->json_text;
    if (resp->body != NULL)
        return *made = json_dumps(resp->body, JSON_COMPACT);
    return NULL;
}

void record_response(struct record *r, const char *method, const char *target,
                     const struct api_response *resp, const char *content_type, const char *kind)
{
    char t[2048], *made, *line;
    const char *text;
    json_t *rec, *body;
    json_error_t jerr;

    if (r == NULL)
        return;
    /* A hostile target may be anything; the record must stay JSON. */
    snprintf(t, sizeof(t), "%s", target ? target : "");
    rec = json_pack("{s:s, s:s, s:i, s:s}", "method", method ? method : "", "target",
                    utf8_repair(t), "status", resp->status, "kind", kind);
    if (rec == NULL)
        return;
    if (content_type != NULL)
        json_object_set_new(rec, "content_type", json_string(content_type));
    if (strcmp(kind, "json") == 0 && (text = body_text(resp, &made)) != NULL) {
        if ((body = json_loads(text, JSON_DECODE_ANY, &jerr)) != NULL)
            json_object_set_new(rec, "body", body);
        else
            json_object_set_new(rec, "body_text", json_string(text));
        free(made);
    }
    line = json_dumps(rec, JSON_COMPACT);
    json_decref(rec);
    if (line == NULL)
        return;
    /* One write per line under the lock: lines from threads never interleave. */
    {
        size_t n = strlen(line);
        line[n] = '\n'; /* json_dumps' NUL becomes the line's end; n + 1 bytes go out */
        pthread_mutex_lock(&r->mu);
        if (write_all(r->fd, line, n + 1) < 0 && !r->failed) {
            r->failed = 1;
            fprintf(stderr, "level=error msg=\"cannot append to RINGD_RECORD_RESPONSES: %s\"\n",
                    strerror(errno));
        }
        pthread_mutex_unlock(&r->mu);
    }
    free(line);
}
