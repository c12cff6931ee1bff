/* SPDX-License-Identifier: Apache-2.0 */
/* shm_record.c - checking what a local peer shares (shm_record.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "transport/shm_record.h"

#define ALIGN16(n) (((n) + 15) & ~(uint64_t)15)

int ring__shm_rec_read(const char *ring, uint64_t cap, uint64_t tail, uint64_t head, uint64_t taken,
                       struct ring__shm_rec *r, uint64_t *span, char *why, size_t whylen)
{
    uint64_t avail = head - tail, pos = tail % cap, room = cap - pos;

    if (avail > cap) {
        snprintf(why, whylen, "it published %llu bytes into a ring of %llu",
                 (unsigned long long)avail, (unsigned long long)cap);
        return -1;
    }
    if (pos % 16 != 0 || room < RING__SHM_REC_BYTES || avail < RING__SHM_REC_BYTES) {
        snprintf(why, whylen, "a record header does not fit at ring offset %llu",
                 (unsigned long long)pos);
        return -1;
    }
    memcpy(r, ring + pos, sizeof(*r));
    /* One read of the header: every check and use below is of this copy, never of what
     * the peer may have written there since. */
    __asm__ __volatile__("" ::: "memory");
    switch (r->kind) {
    case RING__SHM_PAD:
        *span = room;
        break;
    case RING__SHM_COPY:
        if (r->len > room - RING__SHM_REC_BYTES) {
            snprintf(why, whylen, "a %u-byte record runs past the end of the ring (%llu left)",
                     r->len, (unsigned long long)(room - RING__SHM_REC_BYTES));
            return -1;
        }
        *span = RING__SHM_REC_BYTES + ALIGN16((uint64_t)r->len);
        break;
    case RING__SHM_CMA:
        if (r->len > RING__SHM_CMA_MAX) {
            snprintf(why, whylen, "a %u-byte CMA record (the most is %llu)", r->len,
                     (unsigned long long)RING__SHM_CMA_MAX);
            return -1;
        }
        *span = RING__SHM_REC_BYTES;
        break;
    default:
        snprintf(why, whylen, "a record of unknown kind %u", r->kind);
        return -1;
    }
    if (*span > avail) {
        snprintf(why, whylen, "a %llu-byte record where %llu bytes were published",
                 (unsigned long long)*span, (unsigned long long)avail);
        return -1;
    }
    if (r->kind != RING__SHM_PAD && taken > r->len) {
        snprintf(why, whylen, "a record shrank to %u bytes after %llu were received", r->len,
                 (unsigned long long)taken);
        return -1;
    }
    return 0;
}

int ring__shm_check_segment(int fd, uint64_t bytes, char *why, size_t whylen)
{
    const int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    int seals = fcntl(fd, F_GET_SEALS);
    struct stat st;

    if (seals < 0) {
        snprintf(why, whylen, "it is not a sealable memory file (%s)", strerror(errno));
        return -1;
    }
    if ((seals & need) != need) {
        snprintf(why, whylen, "it is not sealed against shrinking and growing (seals %#x)", seals);
        return -1;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "it is not a memory file");
        return -1;
    }
    if ((uint64_t)st.st_size != bytes) {
        snprintf(why, whylen, "it holds %lld bytes, not the %llu its hello announced",
                 (long long)st.st_size, (unsigned long long)bytes);
        return -1;
    }
    return 0;
}
