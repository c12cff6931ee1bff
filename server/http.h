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
#include "tls.h"

struct http;

/*
 * Starts serving on cfg->listen. db_path is the store every thread opens. Sets *port to the
 * bound port. Returns NULL with err (and errno EADDRINUSE when the address is taken).
 */
struct http *http_start(const struct config *cfg, const struct api_config *api, const char *db_path,
                        int *port, struct error *err);
/*
 * Makes the PEM certificate chain at cert and the key at key the pair that new TLS
 * connections get; open connections keep theirs (tls.h). Returns 0 with *info, or -1 with
 * err when h serves plain HTTP or the pair is bad (the pair in use stays). Not
 * thread-safe against itself: one caller (ringd's main thread, at SIGHUP).
 */
int http_tls_reload(struct http *h, const char *cert, const char *key, struct tls_info *info,
                    struct error *err);
/* From now on one token may start n streams at once; streams already open stay open. */
void http_set_streams_per_token(struct http *h, int n);
/* Stops accepting, finishes requests in flight and frees. Accepts NULL. */
void http_stop(struct http *h);

#endif /* RINGD_HTTP_H */
