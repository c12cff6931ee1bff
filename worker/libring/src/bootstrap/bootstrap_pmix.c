/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bootstrap_pmix.c - the bootstrap through PMIx, for jobs started by a PMIx server:
 * `srun --mpi=pmix` (Slurm's slurmstepd serves it) or Open MPI's `mpirun`. No ringrun and
 * no rendezvous are involved.
 *
 * The job's shape comes from the server: rank and namespace from PMIx_Init, the size
 * (PMIX_JOB_SIZE), the local rank and size (PMIX_LOCAL_RANK, PMIX_LOCAL_SIZE), and the
 * host's index and count (PMIX_NODEID, PMIX_NUM_NODES). When a server's node ids are not
 * dense (ids of the whole allocation rather than of the nodes this job uses), the cross
 * rank and size are computed from every rank's node id instead.
 *
 * An allgather is one PMIx exchange: each rank puts its blob under "ring.ag.<seq>"
 * (PMIx_Put, PMIx_Commit), a fence that collects the data (PMIx_Fence with
 * PMIX_COLLECT_DATA) brings every rank's blob to every node, and PMIx_Get reads each of
 * them locally. seq counts this process's allgathers, which every rank makes in the same
 * order. A barrier is a fence without data.
 *
 * The job's secret (auth.h): rank 0 makes it and puts it under "ring.key" before the first
 * allgather, whose fence brings it to every rank. The PMIx server scopes what a process puts
 * to the job's namespace, and it serves only the processes it started (it authenticates
 * each client that connects to it, as PMIx's security plugins do: the uid of the socket's
 * peer, or munge); so only the job's own ranks can read the secret, and nothing but the
 * server ever carries it.
 *
 * Fences run non-blocking (PMIx_Fence_nb) and are waited for with the setup timeout, since
 * a server need not honour PMIX_TIMEOUT: a rank that never arrives gives RING_ETIMEDOUT,
 * not a hang. The wait record lives in the bootstrap's state, so a callback that comes
 * after a timeout still writes to valid memory (PMIx_Finalize ends all callbacks).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "bootstrap/bootstrap.h"

#ifdef RING_HAVE_PMIX
#include <pmix.h>
#include <pthread.h>
#include <sodium.h>
#include <time.h>

struct pmix {
    struct ring__bootstrap b; /* first: the bootstrap is a struct pmix */
    pmix_proc_t me;
    unsigned seq;
    /* the fence in flight (one at a time) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    pmix_status_t status;
};

static int pmix_error(struct pmix *p, const char *what, pmix_status_t st)
{
    ring__log(RING_LOG_ERROR, "PMIx: %s: %s", what, PMIx_Error_string(st));
    return ring__err(RING_EBOOTSTRAP, "rank %d: PMIx %s failed: %s", p ? p->b.rank : -1, what,
                     PMIx_Error_string(st));
}

static void fence_done(pmix_status_t status, void *cbdata)
{
    struct pmix *p = cbdata;
    pthread_mutex_lock(&p->mu);
    p->status = status;
    p->done = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* A fence over the whole job, collecting the committed data when collect is set. */
static int fence(struct pmix *p, int collect)
{
    pmix_proc_t all;
    pmix_info_t info[2];
    bool yes = true;
    int timeout_s = p->b.timeout_ms / 1000 > 0 ? p->b.timeout_ms / 1000 : 1, rc = 0;
    struct timespec until;
    pmix_status_t st;

    PMIX_PROC_CONSTRUCT(&all);
    PMIX_LOAD_PROCID(&all, p->me.nspace, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&info[0], PMIX_TIMEOUT, &timeout_s, PMIX_INT);
    PMIX_INFO_LOAD(&info[1], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    pthread_mutex_lock(&p->mu);
    p->done = 0;
    pthread_mutex_unlock(&p->mu);
    st = PMIx_Fence_nb(&all, 1, info, collect ? 2 : 1, fence_done, p);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (st == PMIX_OPERATION_SUCCEEDED)
        return 0;
    if (st != PMIX_SUCCESS)
        return pmix_error(p, "fence", st);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += p->b.timeout_ms / 1000;
    until.tv_nsec += (long)(p->b.timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->mu);
    while (!p->done && rc == 0)
        rc = pthread_cond_timedwait(&p->cv, &p->mu, &until);
    st = p->status;
    rc = p->done ? 0 : -1;
    pthread_mutex_unlock(&p->mu);
    /* Our deadline or the server's (PMIX_TIMEOUT, the same seconds), whichever came first:
     * one message either way. */
    if (rc < 0 || st == PMIX_ERR_TIMEOUT)
        return ring__err(RING_ETIMEDOUT,
                         "rank %d: not every rank reached the PMIx fence within %d s "
                         "(RING_TIMEOUT_SECONDS); did they all start?",
                         p->b.rank, timeout_s);
    return st == PMIX_SUCCESS ? 0 : pmix_error(p, "fence", st);
}

static int pmix_allgather(struct ring__bootstrap *b, const void *mine, size_t len, void *all)
{
    struct pmix *p = (struct pmix *)b;
    char key[PMIX_MAX_KEYLEN + 1];
    pmix_byte_object_t bo = {.bytes = (char *)mine, .size = len};
    pmix_value_t val;
    pmix_status_t st;
    int rc;

    snprintf(key, sizeof(key), "ring.ag.%u", p->seq++);
    PMIX_VALUE_CONSTRUCT(&val);
    val.type = PMIX_BYTE_OBJECT;
    val.data.bo = bo; /* borrowed: PMIx_Put copies it */
    st = PMIx_Put(PMIX_GLOBAL, key, &val);
    if (st != PMIX_SUCCESS)
        return pmix_error(p, "put", st);
    if ((st = PMIx_Commit()) != PMIX_SUCCESS)
        return pmix_error(p, "commit", st);
    if ((rc = fence(p, 1)) < 0)
        return rc;
    for (int r = 0; r < b->size; r++) {
        pmix_proc_t peer;
        pmix_value_t *v = NULL;
        if (r == b->rank) {
            if (len > 0)
                memcpy((char *)all + (size_t)r * len, mine, len);
            continue;
        }
        PMIX_PROC_CONSTRUCT(&peer);
        PMIX_LOAD_PROCID(&peer, p->me.nspace, (pmix_rank_t)r);
        st = PMIx_Get(&peer, key, NULL, 0, &v);
        if (st != PMIX_SUCCESS || v == NULL) {
            if (v != NULL)
                PMIX_VALUE_RELEASE(v);
            return ring__err(RING_EBOOTSTRAP, "rank %d: PMIx has no address of rank %d (%s)",
                             b->rank, r, PMIx_Error_string(st));
        }
        if (v->type != PMIX_BYTE_OBJECT || v->data.bo.size != len) {
            size_t got = v->type == PMIX_BYTE_OBJECT ? v->data.bo.size : 0;
            PMIX_VALUE_RELEASE(v);
            return ring__err(RING_EBOOTSTRAP,
                             "rank %d: rank %d published %zu bytes, expected %zu (a different "
                             "libring?)",
                             b->rank, r, got, len);
        }
        if (len > 0)
            memcpy((char *)all + (size_t)r * len, v->data.bo.bytes, len);
        PMIX_VALUE_RELEASE(v);
    }
    return 0;
}

static int pmix_barrier(struct ring__bootstrap *b)
{
    return fence((struct pmix *)b, 0);
}

static void pmix_finalize(struct ring__bootstrap *b)
{
    struct pmix *p = (struct pmix *)b;
    ring__key_wipe(&p->b.key);
    PMIx_Finalize(NULL, 0);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

static const struct ring__bootstrap_ops pmix_ops = {
    .name = "pmix",
    .allgather = pmix_allgather,
    .barrier = pmix_barrier,
    .finalize = pmix_finalize,
};

/* An unsigned key of the job (job_level) or of this process; -1 when the server has none. */
static long get_uint(const struct pmix *p, int job_level, const char *key)
{
    pmix_proc_t who;
    pmix_value_t *v = NULL;
    long out = -1;

    PMIX_PROC_CONSTRUCT(&who);
    PMIX_LOAD_PROCID(&who, p->me.nspace, job_level ? PMIX_RANK_WILDCARD : p->me.rank);
    if (PMIx_Get(&who, key, NULL, 0, &v) != PMIX_SUCCESS || v == NULL)
        return -1;
    if (v->type == PMIX_UINT32)
        out = (long)v->data.uint32;
    else if (v->type == PMIX_UINT16)
        out = (long)v->data.uint16;
    else if (v->type == PMIX_UINT64)
        out = (long)v->data.uint64;
    else if (v->type == PMIX_INT)
        out = (long)v->data.integer;
    PMIX_VALUE_RELEASE(v);
    return out;
}

/* Rank 0: makes the job's secret and puts it, to be committed with the next allgather. */
static int put_key(struct pmix *p)
{
    pmix_value_t val;
    pmix_status_t st;
    int rc;

    if ((rc = ring__key_generate(&p->b.key)) < 0)
        return rc;
    PMIX_VALUE_CONSTRUCT(&val);
    val.type = PMIX_BYTE_OBJECT;
    val.data.bo.bytes = (char *)p->b.key.bytes; /* borrowed: PMIx_Put copies it */
    val.data.bo.size = sizeof(p->b.key.bytes);
    if ((st = PMIx_Put(PMIX_GLOBAL, "ring.key", &val)) != PMIX_SUCCESS)
        return pmix_error(p, "put", st);
    p->b.has_key = 1;
    return 0;
}

/* Every other rank: reads rank 0's secret, after the fence of an allgather brought it. */
static int get_key(struct pmix *p)
{
    pmix_proc_t zero;
    pmix_value_t *v = NULL;
    pmix_status_t st;

    PMIX_PROC_CONSTRUCT(&zero);
    PMIX_LOAD_PROCID(&zero, p->me.nspace, 0);
    st = PMIx_Get(&zero, "ring.key", NULL, 0, &v);
    if (st != PMIX_SUCCESS || v == NULL || v->type != PMIX_BYTE_OBJECT ||
        v->data.bo.size != sizeof(p->b.key.bytes)) {
        if (v != NULL)
            PMIX_VALUE_RELEASE(v);
        return ring__err(RING_EBOOTSTRAP, "rank %d: PMIx has no job secret from rank 0 (%s)",
                         p->b.rank, PMIx_Error_string(st));
    }
    memcpy(p->b.key.bytes, v->data.bo.bytes, sizeof(p->b.key.bytes));
    sodium_memzero(v->data.bo.bytes, v->data.bo.size);
    PMIX_VALUE_RELEASE(v);
    p->b.has_key = 1;
    return 0;
}

/*
 * The host's index among the hosts of this job and their number, from every rank's node
 * id: hosts are numbered in the order of their ids, which need not be dense (see
 * pmix_open).
 */
static int cross_from_node_ids(struct pmix *p, long nodeid)
{
    uint32_t mine = (uint32_t)nodeid, *ids = malloc((size_t)p->b.size * sizeof(uint32_t));
    int rc, below = 0, distinct = 0;

    if (ids == NULL)
        return ring__err(RING_ENOMEM, "out of memory for %d node ids", p->b.size);
    if ((rc = pmix_allgather(&p->b, &mine, sizeof(mine), ids)) < 0) {
        free(ids);
        return rc;
    }
    for (int r = 0; r < p->b.size; r++) {
        int first = 1; /* count each id once: at its first rank */
        for (int q = 0; q < r && first; q++)
            first = ids[q] != ids[r];
        if (!first)
            continue;
        distinct++;
        below += ids[r] < mine;
    }
    free(ids);
    p->b.cross_rank = below;
    p->b.cross_size = distinct;
    return 0;
}

static int pmix_open(int timeout_ms, struct ring__bootstrap **out)
{
    const char *env = getenv("PMIX_RANK");
    struct pmix *p;
    pmix_status_t st;
    long size, lrank, lsize, nodeid;
    int rc;

    *out = NULL;
    if (env == NULL || *env == '\0')
        return 0; /* not started by a PMIx server */
    if ((p = calloc(1, sizeof(*p))) == NULL)
        return ring__err(RING_ENOMEM, "out of memory for the bootstrap");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->b.ops = &pmix_ops;
    p->b.timeout_ms = timeout_ms;
    if ((st = PMIx_Init(&p->me, NULL, 0)) != PMIX_SUCCESS) {
        ring__log(RING_LOG_ERROR, "PMIX_RANK=%s is set but PMIx_Init failed: %s", env,
                  PMIx_Error_string(st));
        rc = ring__err(RING_EBOOTSTRAP,
                       "PMIX_RANK=%s is set but PMIx_Init failed: %s (is the PMIx server of "
                       "srun --mpi=pmix or mpirun reachable?)",
                       env, PMIx_Error_string(st));
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        return rc;
    }
    p->b.rank = (int)p->me.rank;
    size = get_uint(p, 1, PMIX_JOB_SIZE);
    lsize = get_uint(p, 1, PMIX_LOCAL_SIZE);
    lrank = get_uint(p, 0, PMIX_LOCAL_RANK);
    nodeid = get_uint(p, 0, PMIX_NODEID);
    if (size < 1 || size > 1 << 20 || p->b.rank >= size || lsize < 1 || lrank < 0 ||
        lrank >= lsize || lsize > size) {
        rc = ring__err(RING_EBOOTSTRAP,
                       "PMIx gave an inconsistent layout: rank %d, size %ld, local rank %ld of "
                       "%ld",
                       p->b.rank, size, lrank, lsize);
        pmix_finalize(&p->b);
        return rc;
    }
    p->b.size = (int)size;
    p->b.local_rank = (int)lrank;
    p->b.local_size = (int)lsize;
    /* Always from every rank's node id, never from PMIX_NODEID alone: a rank cannot tell
     * on its own whether the ids are dense, and the ranks must agree on whether to run the
     * allgather. Open MPI's mpirun inside a Slurm allocation numbers its own host 0 and the
     * allocation's nodes from 1 with PMIX_NUM_NODES 2, so the ranks of one node would see a
     * dense id and those of the other would not. */
    if ((p->b.rank == 0 && size > 1 && (rc = put_key(p)) < 0) ||
        (rc = cross_from_node_ids(p, nodeid < 0 ? 0 : nodeid)) < 0 ||
        (p->b.rank != 0 && (rc = get_key(p)) < 0)) {
        pmix_finalize(&p->b);
        return rc;
    }
    *out = &p->b;
    return 0;
}

#else /* !RING_HAVE_PMIX */

/* Built without PMIx: a process that a PMIx server started must not quietly become a world
 * of one (the single bootstrap would take it), so it is an error that says what to do. */
static int pmix_open(int timeout_ms, struct ring__bootstrap **out)
{
    const char *env = getenv("PMIX_RANK");
    *out = NULL;
    if (env == NULL || *env == '\0')
        return 0;
    ring__log(RING_LOG_ERROR,
              "PMIX_RANK=%s: started by a PMIx launcher (srun --mpi=pmix, mpirun), but this "
              "libring was built without PMIx",
              env);
    return ring__err(RING_ENOTSUP,
                     "PMIX_RANK=%s is set (srun --mpi=pmix or mpirun started this process) but "
                     "libring was built without PMIx; rebuild it with libpmix-dev installed "
                     "(RING_WITH_PMIX), or start the program with ringrun",
                     env);
}

#endif /* RING_HAVE_PMIX */

const struct ring__bootstrap_impl ring__bootstrap_pmix = {"pmix", pmix_open};
