/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.h - libmicrohttpd glue: a thread pool serving api_handle(), with bodies capped at
 * 1 MiB (413 beyond, never truncated), connection and per-IP limits, timeouts, bearer-token
 * auth, and one SQLite connection per server thread.
 */
#ifndef RINGD_HTTP_H
#define RINGD_HTTP_H

#include "api/api.h"
#include "config.h"

struct http;

/*
 * Starts serving on cfg->listen. db_path is the store every thread opens. Sets *port to the
 * bound port. Returns NULL with err (and errno EADDRINUSE when the address is taken).
 */
struct http *http_start(const struct config *cfg, const struct api_config *api, const char *db_path,
                        int *port, struct error *err);
/* Stops accepting, finishes requests in flight and frees. Accepts NULL. */
void http_stop(struct http *h);

#endif /* RINGD_HTTP_H */
