/* SPDX-License-Identifier: Apache-2.0 */
/* web.c - the dashboard's assets: lookup, and their responses with security headers. */
#include <string.h>

#include "web.h"

/*
 * 'self' for what the page loads and connects to (its API calls and streams are same-origin
 * fetches); nothing inline, so an injected <script> or style="" does nothing; no plugins,
 * no <base> to redirect relative URLs, no form posts, and no page may frame the dashboard
 * (clickjacking a Cancel button).
 */
#define WEB_CSP                                                                                    \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "                    \
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "                 \
    "frame-ancestors 'none'"

const struct web_asset *web_find(const char *url)
{
    for (const struct web_asset *a = web_assets; a->path != NULL; a++)
        if (strcmp(a->path, url) == 0)
            return a;
    return NULL;
}

/* 1 when header (an If-None-Match value: "*" or a list of ETags, weak or strong) names etag. */
static int etag_matches(const char *header, const char *etag)
{
    size_t n = strlen(etag);
    const char *p = header;
    if (header == NULL)
        return 0;
    if (strcmp(header, "*") == 0)
        return 1;
    while ((p = strstr(p, etag)) != NULL) {
        if (p[n] == '\0' || p[n] == ',' || p[n] == ' ')
            return 1;
        p += n;
    }
    return 0;
}

struct MHD_Response *web_response(const struct web_asset *a, const char *if_none_match, int *status)
{
    int fresh = etag_matches(if_none_match, a->etag);
    struct MHD_Response *r = MHD_create_response_from_buffer(
        fresh ? 0 : a->len, fresh ? (void *)"" : (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return NULL;
    *status = fresh ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_OK;
    if (!fresh)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, a->etag);
    /* Revalidated on every load (a 304 costs a round trip and no bytes): a new ringd binary
     * is a new dashboard at once, with no stale script against a changed API. */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "Content-Security-Policy", WEB_CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Cross-Origin-Opener-Policy", "same-origin");
    MHD_add_response_header(r, "Cross-Origin-Resource-Policy", "same-origin");
    return r;
}
