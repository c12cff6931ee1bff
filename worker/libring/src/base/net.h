/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net.h - socket helpers shared by libring and ringrun, and the rendezvous protocol.
 *
 * Every helper that waits takes an absolute deadline in ring__now_ms() time and returns
 * RING_ETIMEDOUT when it passes. Errors are RING_E* codes with details in ring__err().
 */
#ifndef RING_NET_H
#define RING_NET_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"

/*
 * The rendezvous is a line protocol over TCP, served by ringrun. A connection first proves
 * the job's secret both ways (auth.h), the client dialing and the server accepting:
 *   "HELLO <client nonce>\n"  ->  "CHAL <server nonce> <server MAC>\n"
 *   "AUTH <client MAC>\n"     ->  "OK\n"
 * (nonces of RING__NONCE_BYTES, MACs of RING__MAC_BYTES, in lowercase hex; the transcript is
 * ring__rdv_transcript's). Then, and only then:
 *   "SET <key> <value>\n"     ->  "OK\n"; a key is set once: a second SET of it is refused
 *   "GET <key>\n"             ->  "VAL <value>\n", sent once some rank has SET the key
 *   anything malformed, out of turn or refused  ->  "ERR <reason>\n", and the server closes
 * Keys and values are 1..RING_RDV_TOKEN_MAX printable characters without spaces.
 */
#define RING_RDV_TOKEN_MAX 255
#define RING_RDV_LINE_MAX  (RING_RDV_TOKEN_MAX * 2 + 8)

enum { RING__RDV_HELLO, RING__RDV_AUTH, RING__RDV_SET, RING__RDV_GET };

/* One request line, parsed (ring__rdv_parse). key and value point into the line. */
struct ring__rdv_req {
    int verb; /* RING__RDV_* */
    const char *key, *value;
    unsigned char nonce[RING__NONCE_BYTES]; /* HELLO */
    unsigned char mac[RING__MAC_BYTES];     /* AUTH */
};

/*
 * Parses one request line (without its newline), cutting it in place. Returns 0 with *req,
 * or -1 with *why, a static reason for the ERR answer. A pure function: the server's
 * framing and the fuzz harness (tests/fuzz/fuzz_rendezvous.c) rely on it alone.
 */
int ring__rdv_parse(char *line, struct ring__rdv_req *req, const char **why);
/* The transcript both MACs of a rendezvous connection cover, in a world of size ranks. */
void ring__rdv_transcript(struct ring__auth_transcript *t, int size,
                          const unsigned char client_nonce[RING__NONCE_BYTES],
                          const unsigned char server_nonce[RING__NONCE_BYTES]);

/* Milliseconds and microseconds on the monotonic clock. */
int64_t ring__now_ms(void);
int64_t ring__now_us(void);

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

/*
 * Rendezvous client calls over a connected fd. ring__rdv_auth comes first: it proves key
 * to the server of a world of size ranks and checks the server's proof. Returns 0, an I/O
 * error, or RING_EBOOTSTRAP when either side's proof fails (the text says which).
 */
int ring__rdv_auth(int fd, const struct ring__key *key, int size, int64_t deadline);
int ring__rdv_set(int fd, const char *key, const char *value, int64_t deadline);
int ring__rdv_get(int fd, const char *key, char *value, size_t cap, int64_t deadline);

#endif /* RING_NET_H */
