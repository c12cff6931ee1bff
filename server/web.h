/* SPDX-License-Identifier: Apache-2.0 */
/*
 * web.h - the dashboard ringd serves at / (its sources are server/web/, embedded in the
 * binary at build time by server/web/embed.cmake, so nothing is read from disk or fetched
 * from a network at run time). The assets hold no data and need no token; the page reads
 * everything through the API with the token the user typed, from the tab's session
 * storage. Every asset goes out with a Content-Security-Policy that allows only this
 * origin's scripts, styles, images and connections, no inline script or style, no
 * framing, no form posts and no base URL, and with nosniff and no Referer.
 */
#ifndef RINGD_WEB_H
#define RINGD_WEB_H

#include <stddef.h>

#include <microhttpd.h>

struct web_asset {
    const char *path; /* "/" or "/ui/<name>" */
    const char *type; /* its Content-Type */
    const char *etag; /* quoted, from its SHA-256 */
    const unsigned char *data;
    size_t len;
};

/* Every asset, ended by one whose path is NULL (generated: web_assets.c). */
extern const struct web_asset web_assets[];

/* The asset served at url, or NULL when url is no asset's. */
const struct web_asset *web_find(const char *url);

/*
 * The response to a GET or HEAD of a (static data, never copied), with its security and
 * caching headers: 304 without a body when if_none_match (NULL: none) names its ETag, else
 * 200. *status gets which. Returns NULL when out of memory.
 */
struct MHD_Response *web_response(const struct web_asset *a, const char *if_none_match,
                                  int *status);

#endif /* RINGD_WEB_H */
