/* SPDX-License-Identifier: Apache-2.0 */
/* handshake.c - the start of every pair's connection (handshake.h). */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "transport/handshake.h"

static void transcript(struct ring__auth_transcript *t, const struct ring__hs_ctx *c,
                       uint32_t dialer, uint32_t acceptor, const unsigned char *dialer_nonce,
                       const unsigned char *acceptor_nonce)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->wire, sizeof(t->wire), "%s", c->wire);
    t->dialer = dialer;
    t->acceptor = acceptor;
    t->size = (uint32_t)c->size;
    memcpy(t->dialer_nonce, dialer_nonce, RING__NONCE_BYTES);
    memcpy(t->acceptor_nonce, acceptor_nonce, RING__NONCE_BYTES);
}

/* ---- the acceptor ---- */

void ring__hs_accept_init(struct ring__hs *h)
{
    memset(h, 0, sizeof(*h));
    h->stage = RING__HS_HELLO;
}

size_t ring__hs_need(const struct ring__hs *h)
{
    if (h->stage == RING__HS_HELLO)
        return sizeof(struct ring__hs_hello) - h->got;
    if (h->stage == RING__HS_PROOF)
        return sizeof(struct ring__hs_proof) - h->got;
    return 0;
}

static int refuse(struct ring__hs *h, const char *why)
{
    h->stage = RING__HS_REFUSED;
    snprintf(h->why, sizeof(h->why), "%s", why);
    return RING__HS_REFUSE;
}

/* A complete hello: who claims to call. */
static int take_hello(struct ring__hs *h, const struct ring__hs_ctx *c, ring__hs_wanted_fn *wanted,
                      void *arg, struct ring__hs_challenge *reply)
{
    struct ring__hs_hello hello;
    struct ring__auth_transcript t;

    memcpy(&hello, h->in, sizeof(hello));
    if (hello.magic != c->magic)
        return refuse(h, "not a libring hello");
    if (!wanted(arg, hello.rank, hello.size)) {
        snprintf(h->why, sizeof(h->why), "a hello as rank %u of %u, which is not a rank expected",
                 hello.rank, hello.size);
        h->stage = RING__HS_REFUSED;
        return RING__HS_REFUSE;
    }
    h->peer = hello.rank;
    memcpy(h->dialer_nonce, hello.nonce, RING__NONCE_BYTES);
    ring__auth_nonce(h->acceptor_nonce);
    memset(reply, 0, sizeof(*reply));
    reply->magic = c->magic;
    reply->rank = (uint32_t)c->rank;
    reply->size = (uint32_t)c->size;
    memcpy(reply->nonce, h->acceptor_nonce, RING__NONCE_BYTES);
    transcript(&t, c, h->peer, (uint32_t)c->rank, h->dialer_nonce, h->acceptor_nonce);
    ring__auth_mac(c->key, RING__ROLE_ACCEPTOR, &t, reply->mac);
    h->stage = RING__HS_PROOF;
    h->got = 0;
    return RING__HS_SEND;
}

int ring__hs_accept_take(struct ring__hs *h, const struct ring__hs_ctx *c, const void *buf,
                         size_t n, ring__hs_wanted_fn *wanted, void *arg,
                         struct ring__hs_challenge *reply)
{
    size_t need = ring__hs_need(h);
    struct ring__auth_transcript t;
    struct ring__hs_proof proof;

    if (h->stage == RING__HS_DONE || h->stage == RING__HS_REFUSED)
        return refuse(h, "bytes after the handshake ended");
    if (n > need)
        return refuse(h, "more bytes than the handshake's message");
    memcpy(h->in + h->got, buf, n);
    h->got += n;
    if (h->got < (h->stage == RING__HS_HELLO ? sizeof(struct ring__hs_hello)
                                             : sizeof(struct ring__hs_proof)))
        return RING__HS_MORE;
    if (h->stage == RING__HS_HELLO)
        return take_hello(h, c, wanted, arg, reply);
    memcpy(&proof, h->in, sizeof(proof));
    transcript(&t, c, h->peer, (uint32_t)c->rank, h->dialer_nonce, h->acceptor_nonce);
    if (!ring__auth_check(c->key, RING__ROLE_DIALER, &t, proof.mac)) {
        snprintf(h->why, sizeof(h->why), "a caller as rank %u that did not prove the job's secret",
                 h->peer);
        h->stage = RING__HS_REFUSED;
        return RING__HS_REFUSE;
    }
    h->stage = RING__HS_DONE;
    return RING__HS_OK;
}

/* ---- the dialer ---- */

void ring__hs_dial_hello(const struct ring__hs_ctx *c, struct ring__hs_hello *hello)
{
    memset(hello, 0, sizeof(*hello));
    hello->magic = c->magic;
    hello->rank = (uint32_t)c->rank;
    hello->size = (uint32_t)c->size;
    ring__auth_nonce(hello->nonce);
}

int ring__hs_dial_check(const struct ring__hs_ctx *c, const struct ring__hs_hello *hello, int peer,
                        const struct ring__hs_challenge *ch, struct ring__hs_proof *proof,
                        char *why, size_t whylen)
{
    struct ring__auth_transcript t;

    if (ch->magic != c->magic || ch->rank != (uint32_t)peer || ch->size != (uint32_t)c->size) {
        snprintf(why, whylen, "it answered as rank %u of %u, not as rank %d of %d", ch->rank,
                 ch->size, peer, c->size);
        return -1;
    }
    transcript(&t, c, (uint32_t)c->rank, (uint32_t)peer, hello->nonce, ch->nonce);
    if (!ring__auth_check(c->key, RING__ROLE_ACCEPTOR, &t, ch->mac)) {
        snprintf(why, whylen, "it did not prove the job's secret");
        return -1;
    }
    ring__auth_mac(c->key, RING__ROLE_DIALER, &t, proof->mac);
    return 0;
}
