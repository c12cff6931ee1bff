/* SPDX-License-Identifier: Apache-2.0 */
/*
 * edge.h - what every request must pass before any handler sees it: how its body is framed
 * (no request smuggling), what its target, query and headers hold (no NUL, valid UTF-8),
 * how big they are, where it comes from (no cross-site or DNS-rebinding requests) and what
 * its body is (JSON). Each refusal is an RFC 9457 problem that says what to fix.
 */
#ifndef RINGD_EDGE_H
#define RINGD_EDGE_H

#include <microhttpd.h>

#include "api/api.h"

/* A request target longer than this is refused with 414, headers larger than this with
 * 431: JobSpecs travel in bodies, so real targets and headers are well below. ringd gives
 * libmicrohttpd room above both (EDGE_MHD_MEMORY), so that ringd answers them itself. */
#define EDGE_URI_MAX     8192
#define EDGE_HEADERS_MAX 16384
#define EDGE_MHD_MEMORY  (64 * 1024)

struct edge_config {
    int no_auth; /* no tokens: the Host must also be a loopback name (DNS rebinding) */
    int tls;     /* the scheme of the server's own origin */
};

/*
 * Checks the request whose headers have just arrived (libmicrohttpd's first call).
 * raw_uri is the request target as sent (before %-decoding; NULL when unknown), url the
 * decoded path. Returns 0 when it may go on; otherwise fills resp with a problem and
 * returns -1, or -2 when the connection must also be closed after the answer (the framing
 * of the body cannot be trusted, so nothing after it on the connection can be either).
 */
int edge_check(const struct edge_config *cfg, struct MHD_Connection *c, const char *raw_uri,
               const char *url, const char *method, struct api_response *resp);

#endif /* RINGD_EDGE_H */
