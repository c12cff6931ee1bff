/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.h - ringctl's HTTP client (http.c), shared by its commands
 * (jobs.c, logs.c, tokens.c, sched.c, admin.c), and ringctl's exit statuses.
 */
#ifndef RINGCTL_HTTP_H
#define RINGCTL_HTTP_H

#include <stddef.h>

#include <jansson.h>

/* ringctl's exit statuses (ringctl.c's header says when each is used). */
#define EXIT_REFUSED     1
#define EXIT_USAGE       2
#define EXIT_NOTFOUND    3
#define EXIT_CONFLICT    4
#define EXIT_AUTH        5
#define EXIT_UNAVAILABLE 69
#define EXIT_JOBFAILED   70

/* Where ringd is and how to talk to it: set by main before the first request. */
struct ringctl_conn {
    const char *base_url; /* RINGMASTER_URL */
    const char *token;    /* RINGMASTER_TOKEN, or NULL */
    const char *cacert;   /* --cacert or RINGMASTER_CACERT, or NULL */
    int insecure_http;    /* --insecure-http: a token may go in clear text anywhere */
};
extern struct ringctl_conn ringctl__conn;

/* Sets ringctl__conn.base_url from RINGMASTER_URL as people write it: "host:port" means
 * http://host:port (as to curl), and trailing slashes are dropped. Keeps a copy. */
void ringctl__set_url(const char *url);

/* A response body as it arrives; data is NUL-terminated, freed by the caller. */
struct ringctl_buf {
    char *data;
    size_t len;
};

/* A curl write callback that appends to the ringctl_buf in arg. */
size_t ringctl__collect(char *p, size_t size, size_t n, void *arg);

/* 0 when the token may be sent to base_url (https, loopback, or --insecure-http), else
 * EXIT_USAGE after saying why. */
int ringctl__token_transport_ok(void);

/* Sends method path with body (may be NULL) and an Idempotency-Key (may be NULL). Fills
 * *out and *status, and *log_offset from X-Ring-Log-Offset when not NULL; returns 0, or
 * EXIT_UNAVAILABLE when ringd cannot be reached. */
int ringctl__request(const char *method, const char *path, const char *body, const char *idem,
                     struct ringctl_buf *out, long *status, long long *log_offset);

/* Maps an HTTP error to an exit status, after printing the problem's detail. */
int ringctl__problem(long status, const struct ringctl_buf *b);

/* Sends a request and parses the JSON answer into *out (a new reference; out NULL: the
 * answer is dropped). Returns 0 or ringctl's exit status for the failure. */
int ringctl__call_idem(const char *method, const char *path, const char *body, const char *idem,
                       json_t **out);

/* ringctl__call_idem without an Idempotency-Key. */
int ringctl__call(const char *method, const char *path, const char *body, json_t **out);

/* A long GET whose body goes to on_data piece by piece as it arrives, with no overall
 * timeout. Returns 0 when the server ended the stream, an exit status after an HTTP error
 * (its problem printed), or -1 when the connection failed or broke (the caller may
 * reconnect). */
int ringctl__stream_get(const char *path, const char *accept, const char *last_event_id,
                        size_t (*on_data)(const char *p, size_t n, void *arg), void *arg);

#endif /* RINGCTL_HTTP_H */
