/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_handshake - the start of every TCP and shared-memory pair
 * (worker/libring/src/transport/handshake.c) on any bytes a caller could send. Byte 0 picks
 * the plan: bit 0, an honest dialer completes the handshake first (the rest then arrives
 * after it); bit 1, the rest is also offered to a dialer as the acceptor's challenge. Byte 1
 * sizes the pieces the bytes arrive in. It checks:
 *   - the acceptor takes no more than each message needs, and answers a hello only with a
 *     challenge that names itself;
 *   - bytes that do not prove the key never complete a handshake (they cannot: the proof is
 *     a MAC under a key the input does not know), and after a verdict nothing is taken;
 *   - a dialer never accepts bytes as a challenge unless they prove the key;
 *   - the honest dialer always completes, with the rank it claimed.
 */
#include <string.h>

#include "fuzz.h"
#include "transport/handshake.h"

#define MAGIC 0x46555a5au /* "FUZZ" */

static struct ring__key key;

static int wants_any_higher(void *arg, uint32_t rank, uint32_t size)
{
    return size == 8 && rank > 0 && rank < 8;
}

static const struct ring__hs_ctx acceptor = {&key, "tcp", MAGIC, 0, 8};
static const struct ring__hs_ctx dialer = {&key, "tcp", MAGIC, 5, 8};

/* Feeds n bytes in pieces; returns the last verdict (RING__HS_MORE if none came). */
static int feed(struct ring__hs *h, const uint8_t *p, size_t n, size_t piece, int honest)
{
    struct ring__hs_challenge reply;
    int v = RING__HS_MORE;

    while (n > 0) {
        size_t need = ring__hs_need(h), k = n < piece ? n : piece;
        if (need == 0) {
            FUZZ_CHECK(ring__hs_accept_take(h, &acceptor, p, k, wants_any_higher, NULL, &reply) ==
                       RING__HS_REFUSE);
            return RING__HS_REFUSE;
        }
        if (k > need)
            k = need;
        v = ring__hs_accept_take(h, &acceptor, p, k, wants_any_higher, NULL, &reply);
        p += k;
        n -= k;
        if (v == RING__HS_SEND)
            FUZZ_CHECK(reply.magic == MAGIC && reply.rank == 0 && reply.size == 8);
        if (v == RING__HS_OK)
            FUZZ_CHECK(honest);
        if (v == RING__HS_REFUSE) {
            FUZZ_CHECK(h->why[0] != '\0' && ring__hs_need(h) == 0);
            return v;
        }
    }
    return v;
}

/* An honest dialer's whole handshake against h. */
static void honest(struct ring__hs *h)
{
    struct ring__hs_hello hello;
    struct ring__hs_challenge ch;
    struct ring__hs_proof proof;
    char why[128];

    ring__hs_dial_hello(&dialer, &hello);
    FUZZ_CHECK(ring__hs_accept_take(h, &acceptor, &hello, sizeof(hello), wants_any_higher, NULL,
                                    &ch) == RING__HS_SEND);
    FUZZ_CHECK(ring__hs_dial_check(&dialer, &hello, 0, &ch, &proof, why, sizeof(why)) == 0);
    FUZZ_CHECK(ring__hs_accept_take(h, &acceptor, &proof, sizeof(proof), wants_any_higher, NULL,
                                    &ch) == RING__HS_OK);
    FUZZ_CHECK(h->peer == 5);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int keyed;
    struct ring__hs h;

    if (!keyed) {
        FUZZ_CHECK(ring__key_generate(&key) == 0);
        keyed = 1;
    }
    if (size < 2)
        return 0;
    ring__hs_accept_init(&h);
    if (data[0] & 1)
        honest(&h);
    feed(&h, data + 2, size - 2, 1 + data[1] % 48, 0);
    if ((data[0] & 2) && size - 2 >= sizeof(struct ring__hs_challenge)) {
        struct ring__hs_hello hello;
        struct ring__hs_challenge ch;
        struct ring__hs_proof proof;
        char why[128];
        ring__hs_dial_hello(&dialer, &hello);
        memcpy(&ch, data + 2, sizeof(ch));
        FUZZ_CHECK(ring__hs_dial_check(&dialer, &hello, 0, &ch, &proof, why, sizeof(why)) == -1);
    }
    return 0;
}
