/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handshake.h - how a pair's connection starts, on every wire (tcp, shm): the dialer says
 * who it is, and both prove that they hold the job's secret (auth.h) before the transport
 * sends anything of its own.
 *
 *   1. hello      dialer -> acceptor   magic, the dialer's rank and world size, its nonce
 *   2. challenge  acceptor -> dialer   magic, the acceptor's rank and size, its nonce, and
 *                                      its MAC of the transcript (role: acceptor)
 *   3. proof      dialer -> acceptor   the dialer's MAC of the same transcript (role: dialer)
 *
 * The dialer checks the challenge before it sends its proof or anything else; the acceptor
 * hands the connection to the transport only after the proof checks out. Each message has a
 * fixed size, so the acceptor reads exactly what it expects and never more.
 *
 * Both sides are pure functions, bytes in and bytes or a verdict out, with no I/O: the
 * acceptor's a state machine (ring__hs_accept_*), the dialer's two steps (ring__hs_dial_*).
 * mesh.c runs every dial and every accepted connection of a rank at once from one poll
 * loop, so no rank waits on another's progress through its other peers, and a caller that
 * connects and says nothing (or garbage) holds up nobody. The fuzz harness
 * (tests/fuzz/fuzz_handshake.c) drives the same functions.
 */
#ifndef RING_HANDSHAKE_H
#define RING_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/auth.h"

struct ring__hs_hello {
    uint32_t magic;
    uint32_t rank, size; /* the dialer, and its world */
    uint32_t pad;
    unsigned char nonce[RING__NONCE_BYTES];
};

struct ring__hs_challenge {
    uint32_t magic;
    uint32_t rank, size; /* the acceptor, and its world */
    uint32_t pad;
    unsigned char nonce[RING__NONCE_BYTES];
    unsigned char mac[RING__MAC_BYTES];
};

struct ring__hs_proof {
    unsigned char mac[RING__MAC_BYTES];
};

/* What this end knows: the key, the wire, and who it is. Borrowed pointers. */
struct ring__hs_ctx {
    const struct ring__key *key;
    const char *wire; /* "tcp", "shm": at most 7 characters */
    uint32_t magic;   /* the wire's, first in every hello and challenge */
    int rank, size;
};

/* ---- the acceptor ---- */

enum { RING__HS_HELLO, RING__HS_PROOF, RING__HS_DONE, RING__HS_REFUSED };

/* ring__hs_accept_take's verdicts. */
enum { RING__HS_MORE = 0, RING__HS_SEND = 1, RING__HS_OK = 2, RING__HS_REFUSE = -1 };

struct ring__hs {
    int stage;  /* RING__HS_* above */
    size_t got; /* bytes of the current message so far */
    unsigned char in[sizeof(struct ring__hs_hello) > sizeof(struct ring__hs_proof)
                         ? sizeof(struct ring__hs_hello)
                         : sizeof(struct ring__hs_proof)];
    uint32_t peer; /* the rank the hello claimed; proven once the stage is DONE */
    unsigned char dialer_nonce[RING__NONCE_BYTES];
    unsigned char acceptor_nonce[RING__NONCE_BYTES];
    char why[128]; /* why it was refused, for the log */
};

/*
 * Whether a hello from rank of a world of size names a pair still wanted (mesh.c:
 * ring__mesh_wanted), asked once the hello is complete. 1 yes, 0 no.
 */
typedef int ring__hs_wanted_fn(void *arg, uint32_t rank, uint32_t size);

/* Starts a handshake for a connection just accepted. */
void ring__hs_accept_init(struct ring__hs *h);
/* Bytes the current message still needs: read at most this many. 0 once done or refused. */
size_t ring__hs_need(const struct ring__hs *h);
/*
 * Takes n bytes (at most ring__hs_need) received from the dialer. Returns
 *   RING__HS_MORE    the message is not complete yet;
 *   RING__HS_SEND    the hello was good: send *reply (the challenge) and read on;
 *   RING__HS_OK      the proof checks out: the connection is rank h->peer's;
 *   RING__HS_REFUSE  close the connection (h->why says why: a bad magic, a rank not
 *                    wanted, a wrong proof). Also for any call after a verdict.
 */
int ring__hs_accept_take(struct ring__hs *h, const struct ring__hs_ctx *c, const void *buf,
                         size_t n, ring__hs_wanted_fn *wanted, void *arg,
                         struct ring__hs_challenge *reply);

/* ---- the dialer ---- */

/* Fills the hello, with a fresh nonce. */
void ring__hs_dial_hello(const struct ring__hs_ctx *c, struct ring__hs_hello *hello);
/*
 * Checks the challenge that answered hello, from rank peer, and fills the proof. Returns 0,
 * or -1 with a reason in why when the challenge is not peer's (magic, rank, size) or its MAC
 * does not prove the key.
 */
int ring__hs_dial_check(const struct ring__hs_ctx *c, const struct ring__hs_hello *hello, int peer,
                        const struct ring__hs_challenge *ch, struct ring__hs_proof *proof,
                        char *why, size_t whylen);
#endif /* RING_HANDSHAKE_H */
