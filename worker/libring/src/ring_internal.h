/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring_internal.h - declarations shared between libring's files. Names are ring__*; none of
 * this is exported from the shared library.
 */
#ifndef RING_INTERNAL_H
#define RING_INTERNAL_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "base/tuning.h"

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
    int bind;                     /* RING__BIND_*: RING_BIND */
    int bound_cpu;                /* the CPU ring_init bound the calling thread to, or -1 */
    cpu_set_t bind_saved;         /* that thread's mask before, for ring_finalize */
    struct ring__engine *engine;

    int setup_timeout_ms;            /* RING_TIMEOUT_SECONDS */
    int op_timeout_ms;               /* RING_OP_TIMEOUT_SECONDS */
    struct ring__backends *backends; /* what moves the data of each request (backend.h) */
};

enum { RING__ALGO_AUTO, RING__ALGO_RING, RING__ALGO_RD, RING__ALGO_RHD };
enum { RING__HIER_OFF, RING__HIER_AUTO, RING__HIER_ON };
enum { RING__BIND_OFF, RING__BIND_AUTO, RING__BIND_ON };

/* ---- CPU binding (affinity.c) ---------------------------------------------------------- */

/*
 * The CPU that local rank of local_size should be held on, by mode (RING__BIND_*), given
 * the CPUs it may run on (allowed) and the number online: the (local_rank mod n)-th of the
 * n allowed. -1 to leave it alone: mode OFF; AUTO unless allowed holds every online CPU
 * and fewer than 2 * local_size of them. A pure function.
 */
int ring__bind_choose(const cpu_set_t *allowed, long online, int local_rank, int local_size,
                      int mode);
/*
 * Binds the calling thread as ring__bind_choose says for c (c->bind, local rank and size),
 * saving its mask in c. Returns the CPU, or -1 when it left the mask alone (a failed
 * system call is logged as a warning, never fatal).
 */
int ring__bind_apply(struct ring__ctx *c);
/* Gives the calling thread the mask ring__bind_apply saved, if it bound it. */
void ring__bind_restore(struct ring__ctx *c);

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
#include "collectives/collectives.h"

#endif /* RING_INTERNAL_H */
