/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.h - the error text of every program of the tree (ringd, ringrun, ringctl, ringsim;
 * libring has its own codes): functions return -1 with errno set and, when given a struct
 * error, a message saying what went wrong and what to do, as flux-core's errprintf does:
 *
 *     return errno = EINVAL, errprintf(err, "bad slot count in '%s'", entry);
 */
#ifndef RING_COMMON_ERROR_H
#define RING_COMMON_ERROR_H

struct error {
    char text[160];
};

/* Formats into err (when not NULL) and returns -1; errno is left as the caller set it
 * (formatting never changes it). */
int errprintf(struct error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* RING_COMMON_ERROR_H */
