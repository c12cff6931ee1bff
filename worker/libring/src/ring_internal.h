/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring_internal.h - the top layer: what the public API (api.c) and ring_init/ring_finalize
 * (ring.c) share. Names are ring__*; none of this is exported from the shared library.
 *
 * Every layer below has its own header (src/README.md); this one is included by nothing
 * below the top.
 */
#ifndef RING_INTERNAL_H
#define RING_INTERNAL_H

#include <sched.h>

#include "collectives/collectives.h"

/* Returns the context, or NULL when libring is not initialized. */
struct ring__ctx *ring__ctx(void);
/* Returns the context, or NULL with *rc = RING_ENOTINIT when libring is not initialized. */
struct ring__ctx *ring__ctx_usable(int *rc);

/* ---- CPU binding (affinity.c) ---------------------------------------------------------- */

enum { RING__BIND_OFF, RING__BIND_AUTO, RING__BIND_ON };

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

#endif /* RING_INTERNAL_H */
