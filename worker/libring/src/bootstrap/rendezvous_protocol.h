/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rendezvous_protocol.h - ringrun's rendezvous as the ranks and ringrun speak it: the
 * request parser that ringrun's server (worker/ringrun/rendezvous.c) and the fuzz harness
 * use, the transcript that both ends' proofs cover, and the client's calls, which the
 * rendezvous bootstrap (bootstrap_rendezvous.c) makes.
 *
 * The client's calls wait with the deadlines of net.h: an absolute time in ring__now_ms()
 * time, RING_ETIMEDOUT when it passes. Errors are RING_E* codes with details in ring__err().
 */
#ifndef RING_RENDEZVOUS_PROTOCOL_H
#define RING_RENDEZVOUS_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/auth.h"

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

/*
 * Rendezvous client calls over a connected fd. ring__rdv_auth comes first: it proves key
 * to the server of a world of size ranks and checks the server's proof. Returns 0, an I/O
 * error, or RING_EBOOTSTRAP when either side's proof fails (the text says which).
 */
int ring__rdv_auth(int fd, const struct ring__key *key, int size, int64_t deadline);
int ring__rdv_set(int fd, const char *key, const char *value, int64_t deadline);
int ring__rdv_get(int fd, const char *key, char *value, size_t cap, int64_t deadline);

#endif /* RING_RENDEZVOUS_PROTOCOL_H */
