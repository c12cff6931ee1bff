/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_record.h - what a rank takes from a local peer over shared memory (transport_shm.c),
 * and the checks it passes before use: the records of a ring, and the segment itself.
 *
 * A ring is cap bytes (a multiple of 16) that the sender fills with records and the
 * receiver empties, each side keeping its own index: head (bytes published) and tail (bytes
 * consumed), counted from the start and taken modulo cap. A record is a 16-byte header, then
 * for COPY its payload padded to 16 bytes; it never wraps around the end of the ring: a PAD
 * record skips what is left before the end. A CMA record carries only the address of the
 * sender's bytes.
 *
 * The peer can write anything into the ring and into its index, so the reader checks every
 * record against what the ring can hold before it uses it, and reads each header once, into
 * its own memory.
 */
#ifndef RING_SHM_RECORD_H
#define RING_SHM_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define RING__SHM_REC_BYTES 16
/* A CMA record moves at most this much, so that its length fits the header. */
#define RING__SHM_CMA_MAX ((uint64_t)1 << 30)

enum { RING__SHM_COPY = 1, RING__SHM_CMA = 2, RING__SHM_PAD = 3 };

struct ring__shm_rec {
    uint32_t kind;
    uint32_t len;  /* payload bytes (COPY), or bytes at addr (CMA) */
    uint64_t addr; /* CMA: where the bytes are in the sender */
};

/*
 * Reads the record at tail of the ring of cap bytes at ring, whose sender says it published
 * up to head (tail != head); taken is how much of this record was received already (0 for a
 * new one). tail is the reader's own index, a multiple of 16 (it is never read back from
 * the shared memory). Returns 0 with *r, a copy of the header, and *span, the ring bytes the
 * record takes (what tail advances by once it is consumed); a COPY record's len bytes then
 * lie inside the ring, at ring + tail % cap + RING__SHM_REC_BYTES. Returns -1 with a reason
 * in why (whylen bytes) when the peer published more than the ring holds, or the record is
 * of an unknown kind, runs past what was published or past the end of the ring, or is
 * shorter than what was taken of it.
 */
int ring__shm_rec_read(const char *ring, uint64_t cap, uint64_t tail, uint64_t head, uint64_t taken,
                       struct ring__shm_rec *r, uint64_t *span, char *why, size_t whylen);

/*
 * Whether fd, a memory file a peer sent, may be mapped as a segment of bytes bytes: sealed
 * against shrinking and growing and against new seals (F_SEAL_SHRINK | F_SEAL_GROW |
 * F_SEAL_SEAL), so that nobody can cut it under the mapping, and exactly bytes long. Returns
 * 0, or -1 with a reason in why (whylen bytes).
 */
int ring__shm_check_segment(int fd, uint64_t bytes, char *why, size_t whylen);

#endif /* RING_SHM_RECORD_H */
