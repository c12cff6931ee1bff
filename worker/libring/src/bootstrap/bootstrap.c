/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bootstrap.c - picks the bootstrap (bootstrap.h), reads the worker contract, and the
 * bootstrap of a world of one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "bootstrap/bootstrap.h"

/* In the order of docs/design.md; the first that does not decline wins. */
static const struct ring__bootstrap_impl *const impls[] = {
    &ring__bootstrap_pmix,   &ring__bootstrap_rendezvous,
#ifdef RING_HAVE_MPI
    &ring__bootstrap_mpi,
#endif
    &ring__bootstrap_single, NULL,
};

/* Why a bootstrap that RING_BOOTSTRAP named declined: what its environment lacked. */
static const char *declined_because(const char *name)
{
    if (strcmp(name, "rendezvous") == 0)
        return "RING_RENDEZVOUS is not set (start the program with ringrun)";
    if (strcmp(name, "mpi") == 0)
        return "the process was not started by mpirun and MPI is not initialized";
    if (strcmp(name, "pmix") == 0)
        return "PMIX_RANK is not set (start the program with srun --mpi=pmix or mpirun)";
    return "its environment is missing";
}

int ring__bootstrap_open(int timeout_ms, struct ring__bootstrap **out)
{
    const char *only = getenv("RING_BOOTSTRAP");
    int named = 0;

    *out = NULL;
    if (only != NULL && (*only == '\0' || strcmp(only, "auto") == 0))
        only = NULL;
    for (int i = 0; impls[i] != NULL; i++) {
        int rc;
        if (only != NULL && strcmp(only, impls[i]->name) != 0)
            continue;
        named = 1;
        if ((rc = impls[i]->open(timeout_ms, out)) < 0)
            return rc;
        if (*out != NULL && (*out)->size > 1 && !(*out)->has_key) {
            /* Every implementation shares one (bootstrap.h); a new one that forgot must
             * not leave the transports without a secret to prove. */
            ring__bootstrap_close(*out);
            *out = NULL;
            return ring__err(RING_EBOOTSTRAP, "the %s bootstrap gave no job secret",
                             impls[i]->name);
        }
        if (*out != NULL) {
            ring__log(RING_LOG_DEBUG, "bootstrap: %s, rank %d of %d", impls[i]->name, (*out)->rank,
                      (*out)->size);
            return 0;
        }
    }
    if (only != NULL && !named) {
        char names[128] = "";
        for (int i = 0; impls[i] != NULL; i++)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
                     i > 0 ? ", " : "", impls[i]->name);
        ring__log(RING_LOG_ERROR, "RING_BOOTSTRAP='%s' is not one of auto, %s (this build)", only,
                  names);
        return ring__err(RING_EENV, "RING_BOOTSTRAP='%s' is not one of auto, %s (this build)", only,
                         names);
    }
    if (only != NULL) {
        ring__log(RING_LOG_ERROR, "RING_BOOTSTRAP=%s, but %s", only, declined_because(only));
        return ring__err(RING_EBOOTSTRAP, "RING_BOOTSTRAP=%s, but %s", only,
                         declined_because(only));
    }
    return ring__err(RING_EBOOTSTRAP, "no bootstrap accepted this process");
}

void ring__bootstrap_close(struct ring__bootstrap *b)
{
    if (b != NULL) {
        ring__key_wipe(&b->key);
        b->ops->finalize(b);
    }
}

int ring__bootstrap_read_contract(struct ring__bootstrap *b)
{
    long v[6]; /* rank, size, local rank, local size, cross rank, cross size */
    int rc;

    if ((rc = ring__env_int("RING_SIZE", 1, 1, 1 << 20, &v[1])) < 0)
        return rc;
    if ((rc = ring__env_int("RING_RANK", 0, 0, v[1] - 1, &v[0])) < 0)
        return rc;
    if ((rc = ring__env_int("RING_LOCAL_SIZE", v[1], 1, v[1], &v[3])) < 0 ||
        (rc = ring__env_int("RING_LOCAL_RANK", v[0] % v[3], 0, v[3] - 1, &v[2])) < 0 ||
        (rc = ring__env_int("RING_CROSS_SIZE", 1, 1, v[1], &v[5])) < 0 ||
        (rc = ring__env_int("RING_CROSS_RANK", 0, 0, v[5] - 1, &v[4])) < 0)
        return rc;
    b->rank = (int)v[0];
    b->size = (int)v[1];
    b->local_rank = (int)v[2];
    b->local_size = (int)v[3];
    b->cross_rank = (int)v[4];
    b->cross_size = (int)v[5];
    return 0;
}

/* ---- a world of one: every collective of the bootstrap is a copy ---- */

static int single_allgather(struct ring__bootstrap *b, const void *mine, size_t len, void *all)
{
    if (len > 0)
        memcpy(all, mine, len);
    return 0;
}

static int single_barrier(struct ring__bootstrap *b)
{
    return 0;
}

static void single_finalize(struct ring__bootstrap *b)
{
    free(b);
}

static const struct ring__bootstrap_ops single_ops = {
    .name = "single",
    .allgather = single_allgather,
    .barrier = single_barrier,
    .finalize = single_finalize,
};

/* The last resort: it never declines, so a RING_SIZE above 1 here is an error. */
static int single_open(int timeout_ms, struct ring__bootstrap **out)
{
    struct ring__bootstrap c = {.ops = &single_ops, .timeout_ms = timeout_ms};
    int rc = ring__bootstrap_read_contract(&c);

    if (rc < 0)
        return rc;
    if (c.size > 1) {
        ring__log(RING_LOG_ERROR,
                  "RING_SIZE=%d but RING_RENDEZVOUS is not set; launch the program with ringrun",
                  c.size);
        return ring__err(RING_EENV, "RING_SIZE=%d but RING_RENDEZVOUS is not set", c.size);
    }
    if ((*out = malloc(sizeof(**out))) == NULL)
        return ring__err(RING_ENOMEM, "out of memory for the bootstrap");
    **out = c;
    return 0;
}

const struct ring__bootstrap_impl ring__bootstrap_single = {"single", single_open};
