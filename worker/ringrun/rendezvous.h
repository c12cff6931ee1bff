/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rendezvous.h - ringrun's key-value service, through which ranks exchange addresses.
 * The protocol is in libring's net.h: a client proves the job's secret first, and a key is
 * set once. The server is driven by the caller's poll loop: rendezvous_pollfds() says what
 * to wait for and rendezvous_handle() does the work, so ringrun serves it from the same
 * loop that forwards output and reaps ranks.
 */
#ifndef RINGRUN_RENDEZVOUS_H
#define RINGRUN_RENDEZVOUS_H

#include <poll.h>

#include "bootstrap/auth.h"
#include "hosts.h"

struct rendezvous;

/*
 * Listens on bind_addr:port (port 0 picks a free one) for the ranks of a world of size,
 * which must prove key (copied). Returns the server, or NULL with err->text set ("port
 * 29500 is in use") and errno from the failing call.
 */
struct rendezvous *rendezvous_create(const char *bind_addr, int port, const struct ring__key *key,
                                     int size, struct error *err);
/* Closes every connection. Accepts NULL and keeps errno. */
void rendezvous_destroy(struct rendezvous *r);
/* The port it listens on. */
int rendezvous_port(const struct rendezvous *r);
/* Number of keys set so far. */
int rendezvous_keys(const struct rendezvous *r);
/* Number of connections closed before they proved the secret (refused, or gone). */
int rendezvous_refused(const struct rendezvous *r);

/* The most pollfds rendezvous_pollfds can fill: size a poll set with it. */
int rendezvous_max_pollfds(const struct rendezvous *r);
/*
 * Fills at most max pollfds with the server's sockets and returns how many. The listener
 * is left out while no newcomer fits (rendezvous.c: the limits); poll with a timeout no
 * longer than rendezvous_timeout() then.
 */
int rendezvous_pollfds(const struct rendezvous *r, struct pollfd *pfd, int max);
/* Milliseconds until the server must be handled even if poll saw nothing, or -1 (never). */
int rendezvous_timeout(const struct rendezvous *r);
/*
 * Handles what poll() reported in pfd[0..n-1] (other fds are ignored), once per poll: the
 * server takes every client it holds to have been in that poll, as rendezvous_pollfds put
 * them there. Call it after a poll that timed out too.
 */
void rendezvous_handle(struct rendezvous *r, const struct pollfd *pfd, int n);
/*
 * Serves fd, a connected non-blocking socket, as a client that has not proved the secret
 * yet (accepting a connection does this; the fuzz harness passes one end of a socketpair).
 * The server owns fd from here. Returns 0, or -1 (fd not taken) when the table of unproven
 * clients is full and none of them may be pushed out yet.
 */
int rendezvous_adopt(struct rendezvous *r, int fd);

#endif /* RINGRUN_RENDEZVOUS_H */
