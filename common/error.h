/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.h - the service side's error text (db, api, server): functions return -1 with errno
 * set and, when given a struct error, a message saying what went wrong and what to do.
 * It lives in db/ because db/ is the bottom of server -> api -> db.
 */
#ifndef RINGD_ERROR_H
#define RINGD_ERROR_H

struct error {
    char text[160];
};

/* Formats into err (when not NULL) and returns -1; errno is left as the caller set it. */
int errprintf(struct error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* RINGD_ERROR_H */
