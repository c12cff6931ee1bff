/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base.h - the base layer: what every layer of libring uses and that knows nothing of
 * ranks, wires or collectives. Errors (error.c), the log (log.c), the environment (env.c)
 * and the clock (clock.c). Names are ring__*; none of this is exported from the shared
 * library.
 *
 * The base's other modules have headers of their own, for the files that use them: the
 * tuning table (tuning.h), sockets with deadlines (net.h) and MPI's lifetime in the process
 * (mpi_env.h, built with MPI).
 */
#ifndef RING_BASE_H
#define RING_BASE_H

#include <stdarg.h>
#include <stdint.h>

#include "ring.h"

/* ---- logging (log.c) ---------------------------------------------------------------- */

enum ring__log_level {
    RING_LOG_ERROR,
    RING_LOG_WARNING,
    RING_LOG_INFO,
    RING_LOG_DEBUG,
    RING_LOG_TRACE,
};

/* Reads RING_LOG_LEVEL; unknown values keep the default (warning) and say so. */
void ring__log_init(int rank);
int ring__log_enabled(enum ring__log_level level);
/* Writes one line to stderr: "[ring 3] warning: text". Never fails visibly. */
void ring__log(enum ring__log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- errors (error.c) ------------------------------------------------------------------ */

/*
 * Records a detailed message for ring_last_error(), logs it at debug level and returns err,
 * so that callers can write `return ring__err(RING_EPEER, "recv from rank %d", peer)`.
 */
int ring__err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- environment (env.c) ------------------------------------------------------------- */

/*
 * Parses the integer environment variable name into *out, within [min, max]. Returns 0
 * (unset leaves *out = dflt) or RING_EENV with a message naming the variable. Only the
 * worker contract (bootstrap) and the tuning table (tuning.c) call it: every knob is read
 * from ctx->tune.
 */
int ring__env_int(const char *name, long dflt, long min, long max, long *out);

/* ---- the clock (clock.c) --------------------------------------------------------------- */

/*
 * Milliseconds and microseconds on the monotonic clock. Every deadline in libring is in
 * ring__now_ms() time.
 */
int64_t ring__now_ms(void);
int64_t ring__now_us(void);

#endif /* RING_BASE_H */
