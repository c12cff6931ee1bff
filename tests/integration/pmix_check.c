/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pmix_check.c - checks the PMIx service a launcher (srun --mpi=pmix, Open MPI's mpirun)
 * gives its processes, with nothing of Ringmaster in between: the job's layout (rank, size,
 * local rank and size, node id, node count), then one Put/Commit/Fence/Get round in which
 * every process publishes "<rank>@<node>" and reads every other's.
 *
 * Prints one line per process:
 *   pmix rank R of N local L/LS node I/NN on NODE: got N addresses
 * and exits 0, or prints what failed and exits 1. The node is SLURMD_NODENAME under Slurm
 * (two slurmds on one machine share a hostname), else the hostname.
 */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY "ringtest.addr"

static int fail(const pmix_proc_t *me, const char *what, pmix_status_t rc)
{
    fprintf(stderr, "pmix rank %u: %s: %s\n", me->rank, what, PMIx_Error_string(rc));
    return 1;
}

/* Reads a job-level (wildcard) or own uint key; -1 when missing. */
static long get_uint(const pmix_proc_t *me, int job_level, const char *key)
{
    pmix_proc_t p;
    pmix_value_t *v = NULL;
    long out = -1;

    PMIX_PROC_CONSTRUCT(&p);
    PMIX_LOAD_PROCID(&p, me->nspace, job_level ? PMIX_RANK_WILDCARD : me->rank);
    if (PMIx_Get(&p, key, NULL, 0, &v) != PMIX_SUCCESS || v == NULL)
        return -1;
    if (v->type == PMIX_UINT32)
        out = (long)v->data.uint32;
    else if (v->type == PMIX_UINT16)
        out = (long)v->data.uint16;
    PMIX_VALUE_RELEASE(v);
    return out;
}

int main(void)
{
    pmix_proc_t me, all;
    pmix_value_t val;
    pmix_info_t collect;
    pmix_status_t rc;
    char node[256], mine[300];
    const char *nodename = getenv("SLURMD_NODENAME");
    long size, lrank, lsize, nodeid, nnodes;
    int bad = 0, got = 0;
    bool yes = true;

    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix: PMIx_Init: %s (not launched with PMIx?)\n", PMIx_Error_string(rc));
        return 1;
    }
    if (nodename != NULL)
        snprintf(node, sizeof(node), "%s", nodename);
    else if (gethostname(node, sizeof(node)) < 0)
        snprintf(node, sizeof(node), "?");
    size = get_uint(&me, 1, PMIX_JOB_SIZE);
    lsize = get_uint(&me, 1, PMIX_LOCAL_SIZE);
    nnodes = get_uint(&me, 1, PMIX_NUM_NODES);
    lrank = get_uint(&me, 0, PMIX_LOCAL_RANK);
    nodeid = get_uint(&me, 0, PMIX_NODEID);
    if (size < 1 || lsize < 1 || lrank < 0 || nodeid < 0 || nnodes < 1) {
        fprintf(stderr, "pmix rank %u: incomplete layout: size %ld local %ld/%ld node %ld/%ld\n",
                me.rank, size, lrank, lsize, nodeid, nnodes);
        PMIx_Finalize(NULL, 0);
        return 1;
    }

    snprintf(mine, sizeof(mine), "%u@%s", me.rank, node);
    PMIX_VALUE_LOAD(&val, mine, PMIX_STRING);
    if ((rc = PMIx_Put(PMIX_GLOBAL, KEY, &val)) != PMIX_SUCCESS)
        return fail(&me, "PMIx_Put", rc);
    PMIX_VALUE_DESTRUCT(&val);
    if ((rc = PMIx_Commit()) != PMIX_SUCCESS)
        return fail(&me, "PMIx_Commit", rc);
    PMIX_PROC_CONSTRUCT(&all);
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    rc = PMIx_Fence(&all, 1, &collect, 1);
    PMIX_INFO_DESTRUCT(&collect);
    if (rc != PMIX_SUCCESS)
        return fail(&me, "PMIx_Fence", rc);

    for (long r = 0; r < size; r++) {
        pmix_proc_t peer;
        pmix_value_t *v = NULL;
        char prefix[32];
        PMIX_PROC_CONSTRUCT(&peer);
        PMIX_LOAD_PROCID(&peer, me.nspace, (pmix_rank_t)r);
        rc = PMIx_Get(&peer, KEY, NULL, 0, &v);
        snprintf(prefix, sizeof(prefix), "%ld@", r);
        if (rc != PMIX_SUCCESS || v == NULL || v->type != PMIX_STRING ||
            strncmp(v->data.string, prefix, strlen(prefix)) != 0) {
            fprintf(stderr, "pmix rank %u: rank %ld's address: %s\n", me.rank, r,
                    rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "wrong value");
            bad = 1;
        } else {
            got++;
        }
        if (v != NULL)
            PMIX_VALUE_RELEASE(v);
    }
    printf("pmix rank %u of %ld local %ld/%ld node %ld/%ld on %s: got %d addresses\n", me.rank,
           size, lrank, lsize, nodeid, nnodes, node, got);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return bad;
}
