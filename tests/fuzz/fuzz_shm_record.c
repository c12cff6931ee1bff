/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_shm_record - the reader of a shared-memory ring's records
 * (worker/libring/src/transport/shm_record.c) on any bytes a peer could write, driven the
 * way shm_recv drives it: from the reader's tail to the head the peer published, taking
 * each record in pieces. Byte 0 picks the ring's size (16 to 4096 bytes, a multiple of 16),
 * bytes 1-2 how many bytes the peer claims to have published past the tail (any number,
 * also more than the ring), byte 3 the size of the pieces (low 6 bits) and where the tail
 * starts (high 2 bits: 0 to 3 times 16 bytes, wrapped into the ring); the rest is the
 * ring's content (zeros past the input). It checks:
 *   - a record that is accepted lies inside the ring and inside what was published: its
 *     payload is read from the ring buffer, a heap block of exactly the ring's size, so
 *     AddressSanitizer catches any byte past it;
 *   - a refused record says why;
 *   - the reader always moves on (every accepted record spans at least 16 bytes) and never
 *     past the head.
 */
#include <string.h>

#include "fuzz.h"
#include "transport/shm_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t cap, head, tail, taken = 0;
    size_t piece;
    char *ring, sink[4096], why[128];

    if (size < 4)
        return 0;
    cap = 16 * (1 + (uint64_t)data[0] % 256);
    tail = 16 * (uint64_t)(data[3] >> 6);
    head = tail + ((uint64_t)data[1] | (uint64_t)data[2] << 8);
    piece = 1 + data[3] % 64;
    ring = calloc(1, cap);
    FUZZ_CHECK(ring != NULL);
    memcpy(ring, data + 4, size - 4 < cap ? size - 4 : cap);
    while (tail != head) {
        struct ring__shm_rec r;
        uint64_t span;
        why[0] = '\0';
        if (ring__shm_rec_read(ring, cap, tail, head, taken, &r, &span, why, sizeof(why)) < 0) {
            FUZZ_CHECK(why[0] != '\0');
            break;
        }
        FUZZ_CHECK(span >= RING__SHM_REC_BYTES && span <= head - tail && span <= cap);
        if (r.kind == RING__SHM_COPY) {
            uint64_t pos = tail % cap;
            FUZZ_CHECK(pos + RING__SHM_REC_BYTES + r.len <= cap);
            /* shm_recv's copy, in pieces: each reads what is left of the record. */
            while (taken < r.len) {
                uint64_t n = r.len - taken < piece ? r.len - taken : piece;
                memcpy(sink, ring + pos + RING__SHM_REC_BYTES + taken, n);
                taken += n;
            }
        }
        taken = 0;
        tail += span;
    }
    free(ring);
    return 0;
}
