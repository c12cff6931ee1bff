/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.c - ringctl's side of HTTP: one request with its answer, a problem+json
 * answer turned into ringctl's exit status, and a long GET streamed piece by piece (SSE, a
 * log being followed). TLS is verified against the system's CAs or --cacert's, and a
 * token goes in clear text only to loopback.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/log.h"
#include "http.h"

struct ringctl_conn ringctl__conn;

/* HTTPS: the server is verified against the system's CAs, or --cacert's (a private CA or
 * ringd's self-signed certificate). */
static void setup_tls(CURL *c)
{
    if (ringctl__conn.cacert != NULL && *ringctl__conn.cacert)
        curl_easy_setopt(c, CURLOPT_CAINFO, ringctl__conn.cacert);
}

void ringctl__set_url(const char *url)
{
    static char buf[2048];
    size_t n;
    /* "host:port" is http://host:port to curl: make it so here too, so that the clear-text
     * check below sees the scheme the token would travel with. */
    snprintf(buf, sizeof(buf), "%s%s", strstr(url, "://") ? "" : "http://", url);
    /* ".../" + "/v1/jobs" would be "//v1/jobs", which no route matches */
    n = strlen(buf);
    while (n > 0 && buf[n - 1] == '/')
        buf[--n] = '\0';
    ringctl__conn.base_url = buf;
}

/* 1 when name is loopback: localhost, ::1 or an IPv4 address in 127/8 (as an address, not a
 * name such as 127.example.com). */
static int loopback_name(const char *name)
{
    struct in_addr a;
    if (!strcmp(name, "localhost") || !strcmp(name, "::1"))
        return 1;
    return inet_pton(AF_INET, name, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/*
 * A token sent over plain HTTP can be read by anyone on the path. Loopback never leaves
 * the host; anything else needs https://, unless the user says otherwise (--insecure-http).
 * Returns 0, or EXIT_USAGE after saying why.
 */
int ringctl__token_transport_ok(void)
{
    const char *host;
    char name[256];
    size_t n;
    if (ringctl__conn.token == NULL || *ringctl__conn.token == '\0' ||
        ringctl__conn.insecure_http || strncasecmp(ringctl__conn.base_url, "http://", 7) != 0)
        return 0;
    host = ringctl__conn.base_url + 7;
    if (host[0] == '[') {
        n = strcspn(host + 1, "]");
        snprintf(name, sizeof(name), "%.*s", (int)n, host + 1);
    } else {
        n = strcspn(host, ":/");
        snprintf(name, sizeof(name), "%.*s", (int)n, host);
    }
    if (loopback_name(name))
        return 0;
    log_error("refusing to send RINGMASTER_TOKEN in clear text to %s; use an https:// "
              "RINGMASTER_URL (with --cacert FILE for a private CA), or --insecure-http",
              ringctl__conn.base_url);
    return EXIT_USAGE;
}

size_t ringctl__collect(char *p, size_t size, size_t n, void *arg)
{
    struct ringctl_buf *b = arg;
    char *grown = realloc(b->data, b->len + size * n + 1);
    if (grown == NULL)
        return 0;
    b->data = grown;
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

static size_t header_cb(char *p, size_t size, size_t n, void *arg)
{
    long long *off = arg;
    if (strncasecmp(p, "X-Ring-Log-Offset:", 18) == 0)
        *off = atoll(p + 18);
    return size * n;
}

/* Sends method path with body (may be NULL). Fills *body and *status; returns 0, or
 * EXIT_UNAVAILABLE when ringd cannot be reached. */
int ringctl__request(const char *method, const char *path, const char *body, const char *idem,
                     struct ringctl_buf *out, long *status, long long *log_offset)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char url[4096], auth[512], key[300];
    CURLcode rc;

    if (c == NULL)
        return EXIT_UNAVAILABLE;
    snprintf(url, sizeof(url), "%s%s", ringctl__conn.base_url, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    setup_tls(c);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ringctl__collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (log_offset != NULL) {
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, log_offset);
    }
    if (ringctl__conn.token != NULL && *ringctl__conn.token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", ringctl__conn.token);
        h = curl_slist_append(h, auth);
    }
    if (idem != NULL) {
        snprintf(key, sizeof(key), "Idempotency-Key: %s", idem);
        h = curl_slist_append(h, key);
    }
    if (body != NULL) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        log_error("cannot reach ringd at %s: %s (set RINGMASTER_URL)", ringctl__conn.base_url,
                  curl_easy_strerror(rc));
        return EXIT_UNAVAILABLE;
    }
    return 0;
}

/* Maps an HTTP error to an exit status, after printing the problem's detail. */
int ringctl__problem(long status, const struct ringctl_buf *b)
{
    json_error_t jerr;
    json_t *p = b->data ? json_loads(b->data, 0, &jerr) : NULL;
    const char *detail = json_string_value(json_object_get(p, "detail"));
    json_t *errors = json_object_get(p, "errors"), *e;
    size_t i;

    log_error("%s (HTTP %ld)", detail ? detail : "request failed", status);
    json_array_foreach(errors, i, e)
    {
        if (i > 0)
            fprintf(stderr, "  %s: %s\n", json_string_value(json_object_get(e, "field")),
                    json_string_value(json_object_get(e, "detail")));
    }
    json_decref(p);
    if (status == 404)
        return EXIT_NOTFOUND;
    if (status == 409)
        return EXIT_CONFLICT;
    if (status == 401 || status == 403)
        return EXIT_AUTH;
    if (status >= 500)
        return EXIT_UNAVAILABLE;
    return EXIT_REFUSED;
}

/* Calls and parses JSON into *out (may be NULL for no body). Returns an exit status. */
int ringctl__call_idem(const char *method, const char *path, const char *body, const char *idem,
                       json_t **out)
{
    struct ringctl_buf b = {0};
    long status = 0;
    int rc = ringctl__request(method, path, body, idem, &b, &status, NULL);
    json_error_t jerr;

    if (rc != 0) {
        free(b.data);
        return rc;
    }
    if (status >= 400) {
        rc = ringctl__problem(status, &b);
        free(b.data);
        return rc;
    }
    if (out != NULL) {
        *out = b.data ? json_loads(b.data, 0, &jerr) : json_object();
        if (*out == NULL) {
            log_error("ringd sent something that is not JSON");
            free(b.data);
            return EXIT_UNAVAILABLE;
        }
    }
    free(b.data);
    return 0;
}

/*
 * A long GET whose body is handed to on_data piece by piece as it arrives (Server-Sent
 * Events, or a log being followed), with no overall timeout. Returns 0 when the server
 * ended the stream, an exit status after an HTTP error (its problem printed), or -1 when
 * the connection failed or broke (the caller may reconnect).
 */
struct stream {
    CURL *c;
    size_t (*on_data)(const char *p, size_t n, void *arg);
    void *arg;
    struct ringctl_buf error; /* the body of an error response */
};

static size_t stream_write(char *p, size_t size, size_t n, void *arg)
{
    struct stream *st = arg;
    long status = 0;
    curl_easy_getinfo(st->c, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 400)
        return ringctl__collect(p, size, n, &st->error);
    return st->on_data(p, size * n, st->arg);
}

int ringctl__stream_get(const char *path, const char *accept, const char *last_event_id,
                        size_t (*on_data)(const char *p, size_t n, void *arg), void *arg)
{
    struct stream st = {curl_easy_init(), on_data, arg, {0}};
    struct curl_slist *h = NULL;
    char url[4096], auth[512], hdr[128];
    long status = 0;
    CURLcode rc;

    if (st.c == NULL)
        return EXIT_UNAVAILABLE;
    snprintf(url, sizeof(url), "%s%s", ringctl__conn.base_url, path);
    curl_easy_setopt(st.c, CURLOPT_URL, url);
    setup_tls(st.c);
    curl_easy_setopt(st.c, CURLOPT_WRITEFUNCTION, stream_write);
    curl_easy_setopt(st.c, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(st.c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(st.c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(st.c, CURLOPT_TCP_KEEPALIVE, 1L);
    if (ringctl__conn.token != NULL && *ringctl__conn.token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", ringctl__conn.token);
        h = curl_slist_append(h, auth);
    }
    if (accept != NULL) {
        snprintf(hdr, sizeof(hdr), "Accept: %s", accept);
        h = curl_slist_append(h, hdr);
    }
    if (last_event_id != NULL) {
        snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", last_event_id);
        h = curl_slist_append(h, hdr);
    }
    curl_easy_setopt(st.c, CURLOPT_HTTPHEADER, h);
    rc = curl_easy_perform(st.c);
    curl_easy_getinfo(st.c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(st.c);
    if (status >= 400) {
        int ex = ringctl__problem(status, &st.error);
        free(st.error.data);
        return ex;
    }
    free(st.error.data);
    return rc == CURLE_OK ? 0 : -1;
}

int ringctl__call(const char *method, const char *path, const char *body, json_t **out)
{
    return ringctl__call_idem(method, path, body, NULL, out);
}
