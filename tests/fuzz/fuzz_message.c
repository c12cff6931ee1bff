/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_message - libring's wire format (worker/libring/src/message.c) on any bytes, read
 * the way the engine reads it (engine_cycle.c): the coordinator reads each rank's request
 * list, and every rank reads rank 0's response list, each count bounded by the bytes that
 * could hold that many (RING__REQUEST_WIRE_MIN, RING__RESPONSE_WIRE_MIN). The first byte picks
 * which, and the world size; the second says which ranks have joined. It checks:
 *   - a malformed message is refused (RING_EPROTO), never read past its end;
 *   - whatever decodes is a fixed point: encoded again it decodes to a message that
 *     encodes to the very same bytes, so every rank agrees on what was sent;
 *   - request lists that decode go through the coordinator (ring__coord_match), which
 *     answers every ready tensor, and its responses are a fixed point too.
 */
#include <string.h>

#include "engine/engine.h"
#include "fuzz.h"

#define WORLD_MAX 8

static void fixed_point_request(const struct ring__request *r)
{
    struct ring__buf a = {0}, b = {0};
    struct ring__request again;
    struct ring__reader rd;

    ring__put_request(&a, r);
    FUZZ_CHECK(!a.oom);
    rd = (struct ring__reader){a.data, a.data + a.len, 0};
    FUZZ_CHECK(ring__get_request(&rd, &again) == 0);
    FUZZ_CHECK(rd.p == rd.end);
    ring__put_request(&b, &again);
    FUZZ_CHECK(!b.oom && a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    ring__request_clear(&again);
    ring__buf_free(&a);
    ring__buf_free(&b);
}

static void fixed_point_response(const struct ring__response *r)
{
    struct ring__buf a = {0}, b = {0};
    struct ring__response again;
    struct ring__reader rd;

    ring__put_response(&a, r);
    FUZZ_CHECK(!a.oom);
    rd = (struct ring__reader){a.data, a.data + a.len, 0};
    FUZZ_CHECK(ring__get_response(&rd, &again) == 0);
    FUZZ_CHECK(rd.p == rd.end);
    ring__put_response(&b, &again);
    FUZZ_CHECK(!b.oom && a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    ring__response_clear(&again);
    ring__buf_free(&a);
    ring__buf_free(&b);
}

/* Rank 0's answer as every rank reads it: shutdown flag, message, then the responses. */
static void response_list(struct ring__reader *rd, size_t plen)
{
    struct ring__response *out;
    uint64_t n;
    char *msg;

    (void)ring__get_u64(rd);
    msg = ring__get_str(rd);
    free(msg);
    n = ring__get_u64(rd);
    if (rd->bad || n > plen / RING__RESPONSE_WIRE_MIN || n == 0)
        return;
    out = calloc(n, sizeof(*out));
    FUZZ_CHECK(out != NULL);
    for (uint64_t i = 0; i < n; i++) {
        int rc = ring__get_response(rd, &out[i]);
        if (rc != 0) {
            FUZZ_CHECK(rc == RING_EPROTO && rd->bad);
            break;
        }
        fixed_point_response(&out[i]);
        ring__response_clear(&out[i]);
    }
    free(out);
}

/* Each rank's pending requests as the coordinator reads them, then its decisions. */
static void request_lists(struct ring__reader *rd, size_t plen, int size, unsigned joined_bits)
{
    struct ring__request *reqs[WORLD_MAX] = {0};
    int nreqs[WORLD_MAX] = {0}, complete = 1, nresp = 0;
    unsigned char joined[WORLD_MAX];
    struct ring__process_sets ps;
    struct ring__response *resp = NULL;

    for (int r = 0; r < size && complete; r++) {
        uint64_t n = ring__get_u64(rd);
        if (rd->bad || n > plen / RING__REQUEST_WIRE_MIN) {
            complete = 0;
            break;
        }
        reqs[r] = calloc(n > 0 ? n : 1, sizeof(**reqs));
        FUZZ_CHECK(reqs[r] != NULL);
        for (uint64_t i = 0; i < n; i++) {
            int rc = ring__get_request(rd, &reqs[r][i]);
            if (rc != 0) {
                FUZZ_CHECK(rc == RING_EPROTO && rd->bad);
                complete = 0;
                break;
            }
            FUZZ_CHECK(reqs[r][i].type >= 0 && reqs[r][i].type < RING__OPTYPE_COUNT);
            fixed_point_request(&reqs[r][i]);
            nreqs[r]++;
        }
    }
    if (complete) {
        int even[WORLD_MAX], neven = 0;
        for (int r = 0; r < size; r++) {
            joined[r] = (unsigned char)((joined_bits >> r) & 1);
            if (r % 2 == 0)
                even[neven++] = r;
        }
        FUZZ_CHECK(ring__psets_init(&ps, size, 0) == 0);
        FUZZ_CHECK(ring__psets_add(&ps, even, neven, size, 0) >= 0); /* process set 1 */
        FUZZ_CHECK(ring__coord_match(size, reqs, nreqs, joined, &ps, &resp, &nresp) == 0);
        for (int i = 0; i < nresp; i++) {
            fixed_point_response(&resp[i]);
            ring__response_clear(&resp[i]);
        }
        free(resp);
        ring__psets_free(&ps);
    }
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < nreqs[r]; i++)
            ring__request_clear(&reqs[r][i]);
        free(reqs[r]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ring__reader rd;

    if (size < 2)
        return 0;
    rd = (struct ring__reader){(const char *)data + 2, (const char *)data + size, 0};
    if (data[0] & 1)
        request_lists(&rd, size - 2, 1 + (data[0] >> 1) % WORLD_MAX, data[1]);
    else
        response_list(&rd, size - 2);
    return 0;
}
