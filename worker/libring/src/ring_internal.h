/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring_internal.h - declarations shared between libring's files. Names are ring__*; none of
 * this is exported from the shared library.
 */
#ifndef RING_INTERNAL_H
#define RING_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ring.h"
#include "tuning.h"

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

/* ---- the process-wide state (ring.c) -------------------------------------------------- */

struct ring__engine;
struct ring__bootstrap;
struct ring__mesh;
struct ring__backends;

struct ring__ctx {
    struct ring__tuning tune; /* every knob, parsed once by ring_init (tuning.h) */
    int rank, size;
    int local_rank, local_size, cross_rank, cross_size;
    int algo;                     /* RING__ALGO_* */
    int hier;                     /* RING__HIER_*: RING_HIERARCHICAL */
    int hier_logged;              /* the first hierarchical allreduce was logged */
    size_t small_bytes;           /* auto: recursive doubling at or below this */
    size_t rhd_bytes;             /* auto: halving-doubling above small_bytes, up to this */
    size_t segment_bytes;         /* pipeline reduction granularity */
    char *scratch;                /* one segment, allocated on first use by the engine thread */
    struct ring__bootstrap *boot; /* how the ranks met (bootstrap/bootstrap.h) */
    struct ring__mesh *mesh;      /* every peer's pair; NULL when size == 1 (transport.h) */
    int oversubscribed;           /* more ranks on this host than CPUs */
    int crowded;                  /* fewer CPUs than ranks' threads (program and engine) */
    int spin_us;                  /* how long a wait spins before it sleeps (RING_SPIN_US) */
    struct ring__engine *engine;

    int setup_timeout_ms;            /* RING_TIMEOUT_SECONDS */
    int op_timeout_ms;               /* RING_OP_TIMEOUT_SECONDS */
    struct ring__backends *backends; /* what moves the data of each request (backend.h) */
};

enum { RING__ALGO_AUTO, RING__ALGO_RING, RING__ALGO_RD, RING__ALGO_RHD };
enum { RING__HIER_OFF, RING__HIER_AUTO, RING__HIER_ON };

/* Returns the context, or NULL when libring is not initialized. */
struct ring__ctx *ring__ctx(void);
/* Returns the context, or NULL with *rc = RING_ENOTINIT when libring is not initialized. */
struct ring__ctx *ring__ctx_usable(int *rc);
/* This rank's own stop request (SIGTERM or ring_request_stop), before agreement. */
int ring__stop_local(void);

/* ---- communicators ------------------------------------------------------------------------ */

/*
 * A view of some ranks over the world's transport: the world itself, or a process set.
 * Collectives take one and speak in its ranks; ring__peer() maps them to world ranks.
 */
struct ring__comm {
    struct ring__ctx *ctx;
    int rank, size;     /* this rank's place in the view, and the view's size */
    const int *members; /* world rank of each member; NULL for the world */
    int set;            /* the process set's id (0: the world); backends that keep a
                           communicator per set (mpi, nccl) key it on this */
};

static inline int ring__peer(const struct ring__comm *c, int i)
{
    return c->members != NULL ? c->members[i] : i;
}

/* The world as a communicator. */
struct ring__comm ring__world(struct ring__ctx *ctx);

/* Internal reduction ops on integer dtypes, for the engine's control vectors. */
#define RING__OP_BAND ((ring_op_t)(RING_OP_COUNT + 0))
#define RING__OP_BOR  ((ring_op_t)(RING_OP_COUNT + 1))

/* The schedules, kernels and algorithms. */
#include "collectives.h"

#endif /* RING_INTERNAL_H */
