/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net.h - socket helpers with deadlines, shared by the rendezvous client (bootstrap/),
 * the TCP transport and the mesh (transport/), and ringrun.
 *
 * Every helper that waits takes an absolute deadline in ring__now_ms() time (base.h) and
 * returns RING_ETIMEDOUT when it passes. Errors are RING_E* codes with details in
 * ring__err().
 */
#ifndef RING_NET_H
#define RING_NET_H

#include <stddef.h>
#include <stdint.h>

/*
 * Splits "host:port" (or "[v6addr]:port") into host and port. Returns 0 or RING_EINVAL when
 * either part is missing or does not fit.
 */
int ring__net_split_hostport(const char *s, char *host, size_t hostlen, char *port, size_t portlen);

/*
 * Connects to host:port, retrying refused connections until the deadline (the peer may not
 * be listening yet). On success *fd is a blocking socket with TCP_NODELAY. sockbuf > 0 sets
 * SO_SNDBUF/SO_RCVBUF before connecting, as TCP window scaling requires.
 */
int ring__net_connect(const char *host, const char *port, int sockbuf, int64_t deadline, int *fd);

/* Sets O_NONBLOCK. Returns 0 or RING_ESYS. */
int ring__net_set_nonblock(int fd);
/* Sets TCP_NODELAY; returns 0 or RING_ESYS. */
int ring__net_nodelay(int fd);

/* Writes all len bytes, waiting in poll for a non-blocking fd. Handles EINTR and short writes. */
int ring__net_write_all(int fd, const void *buf, size_t len, int64_t deadline);
/* Reads exactly len bytes. A closed connection gives RING_EPEER. */
int ring__net_read_all(int fd, void *buf, size_t len, int64_t deadline);
/* Reads one '\n'-terminated line (without the newline) into buf. RING_EPROTO if too long. */
int ring__net_read_line(int fd, char *buf, size_t cap, int64_t deadline);

#endif /* RING_NET_H */
