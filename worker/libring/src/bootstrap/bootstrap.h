/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bootstrap.h - how the ranks of a job find each other, before any transport exists.
 *
 * A bootstrap knows the job's shape (rank, size, and the host-relative local and cross
 * ranks) and can do three slow, small things among all ranks: an allgather of opaque
 * blobs, a barrier, and a goodbye. libring uses it once at ring_init: every transport
 * writes its address into this rank's blob (transport.h), one allgather gives every rank
 * everybody's, and the transports connect from there. After that the bootstrap is idle
 * until ring_finalize, but stays usable (collective ops that need a second exchange, such as
 * NCCL's unique id, may use it).
 *
 * Implementations, tried in this order by ring__bootstrap_open() (docs/design.md,
 * "libring"); the first that does not decline wins:
 *   pmix        PMIX_RANK is set: the job was started by a PMIx server (srun --mpi=pmix,
 *               Open MPI's mpirun); bootstrap_pmix.c. A libring built without PMIx refuses
 *               such a process rather than letting it run alone as a world of one.
 *   rendezvous  RING_RENDEZVOUS is set: ringrun's key-value server (bootstrap_rendezvous.c).
 *   mpi         built with MPI, and launched by mpirun or MPI already initialized by the
 *               program (bootstrap_mpi.c).
 *   single      otherwise: a world of one process (RING_SIZE must be 1 or unset).
 * RING_BOOTSTRAP=NAME tries only the one named (pmix, rendezvous, mpi or single, as built):
 * under Open MPI's mpirun, which sets PMIX_RANK too, RING_BOOTSTRAP=mpi skips PMIx. When the
 * named one declines, ring_init fails with RING_EBOOTSTRAP.
 *
 * Adding one (bootstrap_pmix.c, say):
 *   1. Embed struct ring__bootstrap as the first member of your state and fill its fields,
 *      ops and timeout_ms in open(). When the world has more than one rank, open() must
 *      also give every rank the same job secret in key (auth.h) and set has_key: the
 *      transports' handshakes prove it (handshake.h). Get it from the launcher if it made
 *      one (ringrun's RING_JOB_SECRET), or let rank 0 make it (ring__key_generate) and share
 *      it over a channel that only the job's processes can read (PMIx, MPI).
 *   2. Write open(): return 0 with *out NULL to decline (the environment says the job was
 *      not launched your way), 0 with *out set to join, or a RING_E* error (with a
 *      ring__err() text) when it was launched your way and something failed: the error
 *      then ends ring_init, it is not a reason to try the next implementation.
 *   3. allgather(b, mine, len, all): every rank passes len bytes (the same len on every
 *      rank); all receives size * len bytes, rank r's at all + r * len. Collective: every
 *      rank calls it, the same number of times, in the same order.
 *   4. barrier(b): returns when every rank has entered it. Collective, as allgather.
 *   5. finalize(b): says goodbye to the server if there is one and frees b. Not collective,
 *      never blocks for long, and must work after an error (a peer may be dead).
 *   6. List it in the table in bootstrap.c, under its #ifdef, in the order above.
 * Every call returns 0 or a RING_E* code, and gives up with RING_ETIMEDOUT when the job's
 * setup timeout (timeout_ms, from RING_TIMEOUT_SECONDS) passes, never hangs.
 */
#ifndef RING_BOOTSTRAP_H
#define RING_BOOTSTRAP_H

#include <stddef.h>

#include "bootstrap/auth.h"

struct ring__bootstrap;

struct ring__bootstrap_ops {
    const char *name; /* "rendezvous", "pmix", ... for logs */
    int (*allgather)(struct ring__bootstrap *b, const void *mine, size_t len, void *all);
    int (*barrier)(struct ring__bootstrap *b);
    void (*finalize)(struct ring__bootstrap *b);
};

struct ring__bootstrap {
    const struct ring__bootstrap_ops *ops;
    int rank, size;             /* this rank, and the world size */
    int local_rank, local_size; /* this rank's place among the ranks on its host */
    int cross_rank, cross_size; /* this host's index, and the number of hosts */
    int timeout_ms;             /* setup timeout for every call */
    char host_addr[64];         /* an IP address of this host that peers can reach, if the
                                   bootstrap knows one (the TCP transport publishes it), or "" */
    int job_failed;             /* set by ring_finalize before finalize when the job failed (a
                                   peer may be dead or stuck): finalize must not wait for peers */
    struct ring__key key;       /* the job's secret, when has_key (see "Adding one") */
    int has_key;
};

struct ring__bootstrap_impl {
    const char *name;
    int (*open)(int timeout_ms, struct ring__bootstrap **out);
};

/* The implementations; each declines unless the environment names it. */
extern const struct ring__bootstrap_impl ring__bootstrap_pmix; /* bootstrap_pmix.c */
extern const struct ring__bootstrap_impl ring__bootstrap_rendezvous;
extern const struct ring__bootstrap_impl ring__bootstrap_mpi; /* built with RING_WITH_MPI */
extern const struct ring__bootstrap_impl ring__bootstrap_single;

/*
 * Opens the first implementation of the list above that accepts this process (only the one
 * RING_BOOTSTRAP names, when set). Returns 0 and *out (release with ring__bootstrap_close),
 * or a RING_E* code with a ring__err() text: RING_EENV for an unknown RING_BOOTSTRAP,
 * RING_EBOOTSTRAP when the one it names declines.
 */
int ring__bootstrap_open(int timeout_ms, struct ring__bootstrap **out);
/* Wipes b's key and finalizes b. Accepts NULL. */
void ring__bootstrap_close(struct ring__bootstrap *b);

/*
 * Reads the worker contract (RING_RANK, RING_SIZE, RING_LOCAL_*, RING_CROSS_*) into b's
 * shape, for implementations whose launcher sets it (rendezvous, single). All absent is a
 * world of one. Returns 0 or RING_EENV naming the variable.
 */
int ring__bootstrap_read_contract(struct ring__bootstrap *b);

#endif /* RING_BOOTSTRAP_H */
