/* SPDX-License-Identifier: Apache-2.0 */
/* edge.c - the checks every request passes at ringd's HTTP edge, before routing. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/utf8.h"
#include "edge.h"

/* What the headers say, gathered in one pass. */
struct headers {
    int content_lengths; /* how many Content-Length headers */
    int lengths_differ;  /* two of them disagree, or one is not a plain number */
    char content_length[24];
    int transfer_encodings; /* how many Transfer-Encoding headers */
    char transfer_encoding[64];
    size_t bytes;       /* names and values, all together */
    char bad_name[64];  /* the first header holding NUL, a control byte or bad UTF-8 */
    char not_token[64]; /* the first header name that is not an RFC 9110 token */
    char folded[64];    /* the first name that runs on from Content-Length or
                         * Transfer-Encoding (see gather) */
};

/* tchar (RFC 9110 5.6.2): what a header name is made of. */
static int token_char(unsigned char c)
{
    return isalnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int token(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!token_char((unsigned char)s[i]))
            return 0;
    return 1;
}

/* 1 when name starts with prefix (any case) and goes on past it. */
static int runs_on(const char *name, size_t n, const char *prefix)
{
    size_t pl = strlen(prefix);
    return n > pl && strncasecmp(name, prefix, pl) == 0;
}

static int plain_number(const char *s, size_t n)
{
    if (n == 0 || n > 18)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

static enum MHD_Result gather(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                              const char *value, size_t value_size)
{
    struct headers *h = cls;
    h->bytes += key_size + value_size + 4;
    /*
     * "Content-Length : 2" reaches us as a header named "Content-Length " (libmicrohttpd
     * keeps the blank), which neither it nor we read as a length: the body would then be
     * parsed as the next request. RFC 9112 5.1 says to refuse such a name with 400.
     */
    if (h->not_token[0] == '\0' && !token(key, key_size))
        log_escape(key, h->not_token, sizeof(h->not_token));
    /*
     * An obs-folded line ("Transfer-Encoding:\r\n chunked") is appended by libmicrohttpd
     * to the header's NAME, so the edge sees "Transfer-Encodingchunked" with an empty
     * value, and neither side sees the framing a proxy in front may have used (RFC 9112
     * 5.2 lets it read the fold as a space). No real header's name runs on from the two
     * framing headers' names, so such a name is a folded (or mangled) framing header.
     */
    if (h->folded[0] == '\0' && (runs_on(key, key_size, MHD_HTTP_HEADER_CONTENT_LENGTH) ||
                                 runs_on(key, key_size, MHD_HTTP_HEADER_TRANSFER_ENCODING)))
        log_escape(key, h->folded, sizeof(h->folded));
    if (h->bad_name[0] == '\0' &&
        (!utf8_text_ok(key, key_size) || (value != NULL && !utf8_text_ok(value, value_size))))
        log_escape(key, h->bad_name, sizeof(h->bad_name));
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (!plain_number(value, value_size) ||
            (h->content_lengths > 0 && strcmp(h->content_length, value) != 0))
            h->lengths_differ = 1;
        snprintf(h->content_length, sizeof(h->content_length), "%s", value ? value : "");
        h->content_lengths++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        snprintf(h->transfer_encoding, sizeof(h->transfer_encoding), "%s", value ? value : "");
        h->transfer_encodings++;
    }
    return MHD_YES;
}

/* The same for query arguments: NUL (which libmicrohttpd's %-decoding would let through as
 * a shorter string), control bytes and invalid UTF-8 in a name or a value. */
static enum MHD_Result gather_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                    size_t key_size, const char *value, size_t value_size)
{
    char *bad = cls;
    if (bad[0] == '\0' &&
        (!utf8_text_ok(key, key_size) || (value != NULL && !utf8_text_ok(value, value_size))))
        log_escape(key, bad, 64);
    return MHD_YES;
}

/* 1 when host (a Host header: name or address, with an optional port) is loopback. */
static int loopback_host(const char *host)
{
    char name[256];
    size_t n;
    if (host == NULL)
        return 0;
    if (host[0] == '[') { /* [v6]:port */
        n = strcspn(host + 1, "]");
        snprintf(name, sizeof(name), "%.*s", (int)n, host + 1);
    } else {
        n = strcspn(host, ":");
        snprintf(name, sizeof(name), "%.*s", (int)n, host);
    }
    return !strcasecmp(name, "localhost") || !strcmp(name, "::1") ||
           (!strncmp(name, "127.", 4) && strspn(name, "0123456789.") == strlen(name));
}

/*
 * A browser sends Origin on cross-site requests (and on every POST). Ours is the scheme
 * and the Host the client addressed; anything else, "null" included, is a page of some
 * other site using the user's browser to reach ringd.
 */
static int same_origin(const char *origin, const char *host, int tls)
{
    const char *scheme = tls ? "https://" : "http://";
    size_t sl = strlen(scheme);
    if (origin == NULL)
        return 1;
    return host != NULL && strncasecmp(origin, scheme, sl) == 0 &&
           strcasecmp(origin + sl, host) == 0;
}

/* application/json, optionally with parameters ("; charset=utf-8"). */
static int json_media_type(const char *ct)
{
    size_t n = strlen("application/json");
    if (ct == NULL)
        return 0;
    while (*ct == ' ')
        ct++;
    return strncasecmp(ct, "application/json", n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* The request's framing: refused (and the connection closed: -2) when it could be read two
 * ways. Returns 0, or -2 with the problem in resp. */
static int check_framing(const struct headers *h, const char *instance, struct api_response *resp)
{
    /* Framing (RFC 9112 6.1, 6.3): a request whose length two parsers could read two ways
     * is how one request is smuggled inside another. Refuse it and close the connection. */
    if (h->not_token[0] != '\0') {
        api_problem(resp, 400, "bad-header", "Bad Request", instance,
                    "header name '%s' is not a token: no blank before the colon, no line "
                    "folding (RFC 9112 5.1, 5.2); send 'Name: value' on one line",
                    h->not_token);
        return -2;
    }
    if (h->folded[0] != '\0') {
        api_problem(resp, 400, "bad-framing", "Bad Request", instance,
                    "header '%s' looks like a folded Content-Length or Transfer-Encoding "
                    "(obs-fold, RFC 9112 5.2); send each header on one line",
                    h->folded);
        return -2;
    }
    if (h->content_lengths > 0 && h->transfer_encodings > 0) {
        api_problem(resp, 400, "bad-framing", "Bad Request", instance,
                    "the request has both Content-Length and Transfer-Encoding; send one");
        return -2;
    }
    if (h->lengths_differ) {
        api_problem(resp, 400, "bad-framing", "Bad Request", instance,
                    "Content-Length must be one decimal number, sent once");
        return -2;
    }
    if (h->transfer_encodings > 1 ||
        (h->transfer_encodings == 1 && strcasecmp(h->transfer_encoding, "chunked") != 0)) {
        char te[64];
        api_problem(resp, 501, "unsupported-transfer-encoding", "Not Implemented", instance,
                    "Transfer-Encoding '%s' is not supported; send chunked, or a "
                    "Content-Length",
                    log_escape(h->transfer_encoding, te, sizeof(te)));
        return -2;
    }
    return 0;
}

/* The request target, the query (bad: the first parameter that is not text, or "") and
 * the headers, as text within their bounds. Returns 0, or -1 or -2 (close the connection)
 * with the problem in resp. */
static int check_text(const struct headers *h, const char *raw_uri, const char *url,
                      const char *bad, const char *instance, struct api_response *resp)
{
    /* What the request says must be text: no NUL (which would silently cut an id, as in
     * DELETE /v1/jobs/<id>%00.bak) and nothing that is not UTF-8. */
    if (raw_uri != NULL && strstr(raw_uri, "%00") != NULL) {
        api_problem(resp, 400, "bad-request-target", "Bad Request", instance,
                    "the request target holds a NUL byte (%%00); ids and parameters are text");
        return -1;
    }
    if (raw_uri != NULL && strlen(raw_uri) > EDGE_URI_MAX) {
        api_problem(resp, 414, "uri-too-long", "URI Too Long", "",
                    "the request target has %zu bytes; at most %d are accepted", strlen(raw_uri),
                    EDGE_URI_MAX);
        return -1;
    }
    if (url == NULL || !utf8_text_ok(url, strlen(url))) {
        api_problem(resp, 400, "bad-request-target", "Bad Request", "",
                    "the request path, once %%-decoded, must be UTF-8 text without control "
                    "characters");
        return -1;
    }
    if (bad[0] != '\0') {
        api_problem(resp, 400, "bad-parameter", "Bad Request", instance,
                    "query parameter '%s' holds a NUL byte, a control character or text that "
                    "is not UTF-8",
                    bad);
        return -1;
    }
    if (h->bytes > EDGE_HEADERS_MAX) {
        api_problem(resp, 431, "headers-too-large", "Request Header Fields Too Large", instance,
                    "the headers have %zu bytes; at most %d are accepted", h->bytes,
                    EDGE_HEADERS_MAX);
        return -2;
    }
    if (h->bad_name[0] != '\0') {
        api_problem(resp, 400, "bad-header", "Bad Request", instance,
                    "header '%s' holds a NUL byte, a control character or text that is not "
                    "UTF-8",
                    h->bad_name);
        return -1;
    }
    return 0;
}

int edge_check(const struct edge_config *cfg, struct MHD_Connection *c, const char *raw_uri,
               const char *url, const char *method, struct api_response *resp)
{
    struct headers h = {0};
    char bad[64] = "";
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    const char *instance = url != NULL && utf8_text_ok(url, strlen(url)) ? url : "";
    int rc;

    MHD_get_connection_values_n(c, MHD_HEADER_KIND, gather, &h);

    if ((rc = check_framing(&h, instance, resp)) != 0)
        return rc;
    MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, gather_query, bad);
    if ((rc = check_text(&h, raw_uri, url, bad, instance, resp)) != 0)
        return rc;

    /* Where it comes from. Without tokens, the user's browser is the only thing between a
     * web page and the API: a page may not post to it (Origin), nor reach it through a
     * name of its own that resolves to 127.0.0.1 (Host). */
    if (!same_origin(origin, host, cfg->tls)) {
        char o[96];
        api_problem(resp, 403, "cross-origin", "Forbidden", instance,
                    "requests from origin '%s' are refused: ringd's API is not for web pages "
                    "of other sites",
                    log_escape(origin, o, sizeof(o)));
        return -1;
    }
    if (cfg->no_auth && !loopback_host(host)) {
        api_problem(resp, 421, "wrong-host", "Misdirected Request", instance,
                    "without auth, ringd answers only requests addressed to a loopback name "
                    "(127.0.0.1, [::1] or localhost)");
        return -1;
    }

    /* A body is JSON. A form or text/plain body is what a cross-site page can send without
     * asking the browser first; nothing here reads one. */
    if ((h.transfer_encodings > 0 ||
         (h.content_lengths > 0 && strtoull(h.content_length, NULL, 10) > 0)) &&
        !json_media_type(ct)) {
        char t[96];
        api_problem(resp, 415, "unsupported-media-type", "Unsupported Media Type", instance,
                    "%s bodies must be application/json, not '%s'", method,
                    ct ? log_escape(ct, t, sizeof(t)) : "(none)");
        return -2;
    }
    return 0;
}
