/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine.h - the pieces of libring's background engine: requests and responses and their
 * wire format (message.c), a string map (strmap.c), the response cache (cache.c), the
 * coordinator's matching and validation (coordinator.c), fusion planning (fusion.c), the
 * timeline (timeline.c), process sets (process_set.c) and the engine itself (engine.c, the
 * thread, and the files engine_impl.h lists).
 *
 * Everything but the engine's own files is a pure data structure or function, unit-tested
 * on its own.
 */
#ifndef RING_ENGINE_H
#define RING_ENGINE_H

#include <stdint.h>
#include <stdio.h>

#include "collectives/collectives.h"

#define RING__NAME_MAX 255
/* Tensors in one grouped allreduce at most (ring_grouped_allreduce_async's limit). */
#define RING__GROUP_MAX 65536

enum ring__optype {
    RING__ALLREDUCE,
    RING__ALLGATHER,
    RING__ALLGATHERV,
    RING__BROADCAST,
    RING__REDUCESCATTER,
    RING__ALLTOALL,
    RING__ALLTOALLV,
    RING__BARRIER,
    RING__OPTYPE_COUNT
};

/* Returns "allreduce" etc. */
const char *ring__optype_name(int type);

/*
 * What one rank asks for. counts holds, for allgatherv, the recvcounts of every member
 * (ncounts = set size); for alltoallv, the sendcounts then the recvcounts (2 x set size).
 * The struct owns counts (free with ring__request_clear).
 */
struct ring__request {
    char name[RING__NAME_MAX + 1]; /* first: ring__request_assign copies the rest at once */
    int type;                      /* enum ring__optype */
    int dtype, op;
    int root; /* broadcast, relative to the set */
    int process_set;
    int device;     /* -1: host memory */
    int group_size; /* > 1 for a member of a grouped allreduce */
    uint64_t count; /* elements: the tensor, or per rank for allgather/alltoall */
    uint64_t shape; /* fingerprint of the declared shape (ring_shape_next), 0: none */
    double prescale, postscale;
    uint64_t *counts;
    uint32_t ncounts;
};

void ring__request_clear(struct ring__request *r);
/* *dst = *src, but only the name's bytes up to its NUL; shallow (dst->counts is src's). */
void ring__request_assign(struct ring__request *dst, const struct ring__request *src);
/* Deep copy. Returns 0 or RING_ENOMEM. */
int ring__request_copy(struct ring__request *dst, const struct ring__request *src);
/* 1 when two requests agree on everything that must match across ranks. */
int ring__request_same(const struct ring__request *a, const struct ring__request *b);
/* The same but for the names (the caller knows they are equal). */
int ring__request_same_params(const struct ring__request *a, const struct ring__request *b);
/*
 * 1 when r is a whole grouped allreduce as one request (a packed group): named after its
 * member 0 ("grad/0"), group_size members whose counts are counts[0..ncounts-1]
 * (ncounts == group_size), count their sum. A group of GPU buffers is sent member by
 * member instead: one request per member, each with its own name and count and no counts.
 */
static inline int ring__request_packed(const struct ring__request *r)
{
    return r->type == RING__ALLREDUCE && r->ncounts > 0;
}

/*
 * What every rank executes: the request as agreed (the lowest submitting rank's), or an
 * error that every rank reports for that tensor.
 */
struct ring__response {
    struct ring__request req;
    int error;     /* 0, or the code every rank returns for this tensor */
    char *message; /* with error: what went wrong, naming ranks and values */
};

void ring__response_clear(struct ring__response *r);

/* ---- wire format (message.c): a growable byte buffer and a bounded reader ---- */

struct ring__buf {
    char *data;
    size_t len, cap;
    int oom; /* set when a put failed; the buffer is then unusable */
};

void ring__buf_free(struct ring__buf *b);
void ring__put_u64(struct ring__buf *b, uint64_t v);
void ring__put_f64(struct ring__buf *b, double v);
void ring__put_str(struct ring__buf *b, const char *s);
void ring__put_request(struct ring__buf *b, const struct ring__request *r);
void ring__put_response(struct ring__buf *b, const struct ring__response *r);

struct ring__reader {
    const char *p, *end;
    int bad; /* set on a read past the end or malformed data */
};

uint64_t ring__get_u64(struct ring__reader *rd);
double ring__get_f64(struct ring__reader *rd);
/* Reads a string into a malloc'ed copy (NULL when bad). */
char *ring__get_str(struct ring__reader *rd);
/*
 * The fewest bytes a request and a response take on the wire (an empty name, no counts):
 * a reader that is told n of them follow in len bytes refuses n above len divided by this,
 * rather than allocate n entries for a peer's number.
 */
#define RING__REQUEST_WIRE_MIN  (8 + 8 * 8 + 2 * 8 + 8)
#define RING__RESPONSE_WIRE_MIN (RING__REQUEST_WIRE_MIN + 8 + 8)

/* Returns 0, or RING_EPROTO for malformed input (r is then cleared): a read past the end, a
 * name over RING__NAME_MAX, an unknown operation type or a group size outside
 * 0..RING__GROUP_MAX. */
int ring__get_request(struct ring__reader *rd, struct ring__request *r);
int ring__get_response(struct ring__reader *rd, struct ring__response *r);

/* ---- string map (strmap.c): name -> pointer, chained hashing ----
 * A zeroed struct is an empty map; ring__strmap_free frees what it holds. */

struct ring__strmap_node;
struct ring__strmap {
    struct ring__strmap_node **buckets;
    size_t nbuckets, count;
    struct ring__strmap_node *spare; /* deleted nodes, reused by puts */
};

/* Returns the value for key, or NULL. */
void *ring__strmap_get(const struct ring__strmap *m, const char *key);
/* Sets key to value (replacing). Returns 0 or RING_ENOMEM. */
int ring__strmap_put(struct ring__strmap *m, const char *key, void *value);
/* Removes key; returns its value or NULL. */
void *ring__strmap_del(struct ring__strmap *m, const char *key);
/* Calls fn for every entry (the map must not change meanwhile). */
void ring__strmap_each(const struct ring__strmap *m,
                       void (*fn)(const char *key, void *value, void *arg), void *arg);
void ring__strmap_free(struct ring__strmap *m);
/*
 * The same with the key's hash given, for callers that look one name up several times
 * (the engine, per tensor): h must be ring__strmap_hash(key). ring__strmap_add_h puts key
 * only when it is absent: returns 0 when it put it, 1 when key was there already (its value
 * unchanged), or RING_ENOMEM.
 */
size_t ring__strmap_hash(const char *key);
void *ring__strmap_get_h(const struct ring__strmap *m, const char *key, size_t h);
int ring__strmap_add_h(struct ring__strmap *m, const char *key, size_t h, void *value);
void *ring__strmap_del_h(struct ring__strmap *m, const char *key, size_t h);

/* ---- response cache (cache.c) ----
 *
 * Every rank holds the same cache, because every rank inserts and touches entries in the
 * same order: the order of the responses it executes. An entry's index is its bit in the
 * cycle's bit vector. When full, the least recently used entry is replaced.
 */
struct ring__cache {
    int capacity;
    struct ring__cache_entry {
        int used;
        uint64_t last_use;
        struct ring__request req;
    } * entries;
    struct ring__strmap index; /* name -> entry index + 1 */
    uint64_t clock;
    int hwm; /* every used bit is below this (puts fill the lowest free bit first) */
};

/* Returns 0 or RING_ENOMEM. capacity 0 makes a cache that never holds anything. */
int ring__cache_init(struct ring__cache *c, int capacity);
void ring__cache_free(struct ring__cache *c);
/* The bit of a cached entry equal to req, or -1 (absent, or cached with other parameters).
 * The _h form takes the name's ring__strmap_hash. */
int ring__cache_lookup(const struct ring__cache *c, const struct ring__request *req);
int ring__cache_lookup_h(const struct ring__cache *c, const struct ring__request *req, size_t h);
/* Returns 1 when req's kind of operation may be cached (uniform sizes, not grouped). */
int ring__cache_cacheable(const struct ring__request *req);
/* Inserts or refreshes req (evicting the LRU entry when full). Returns its bit or -1. */
int ring__cache_put(struct ring__cache *c, const struct ring__request *req);
/* Marks bit as just used. */
void ring__cache_touch(struct ring__cache *c, int bit);
/* Forgets name if cached. */
void ring__cache_erase(struct ring__cache *c, const char *name);

/* ---- process sets (process_set.c) ---- */

struct ring__process_sets {
    int count;
    struct ring__pset {
        int size;
        int *members; /* world ranks, ascending */
        int my_rank;  /* this rank's place, or -1 */
    } * sets;
};

/* Creates set 0, the world of size ranks. Returns 0 or RING_ENOMEM. */
int ring__psets_init(struct ring__process_sets *p, int size, int rank);
void ring__psets_free(struct ring__process_sets *p);
/* Adds a set (ranks need not be sorted). Returns its id, or RING_EINVAL / RING_ENOMEM. */
int ring__psets_add(struct ring__process_sets *p, const int *ranks, int n, int world_size,
                    int rank);
/* The set, or NULL (no such set, or removed). */
const struct ring__pset *ring__psets_get(const struct ring__process_sets *p, int id);
/* Removes set id (not 0): its id stays taken and ring__psets_get returns NULL for it.
 * Returns 0, or RING_EINVAL when there is no such set. */
int ring__psets_remove(struct ring__process_sets *p, int id);

/* ---- coordinator (coordinator.c): rank 0's decisions, as pure functions ---- */

/*
 * Matches one full negotiation round. reqs[r][0..nreqs[r]-1] are rank r's pending requests.
 * A tensor is ready when every member of its process set that has not joined (joined[r])
 * submitted it; a grouped allreduce when all of its members are. Ready tensors are checked
 * against each other and become responses, in order of first submission by the lowest
 * rank; a mismatch becomes an error response naming both ranks and values.
 * Fills *out (malloc'ed, caller frees with ring__response_clear on each) and *nout.
 * Returns 0 or RING_ENOMEM.
 */
int ring__coord_match(int size, struct ring__request *const *reqs, const int *nreqs,
                      const unsigned char *joined, const struct ring__process_sets *psets,
                      struct ring__response **out, int *nout);

/* Whether an operation of this type may run while some ranks have joined: allreduce,
 * broadcast (from a root that has not joined) and barrier. */
int ring__coord_allowed_with_joined(int type);
/*
 * Validates one tensor's requests from several ranks of set ps (req[i] from world rank
 * ranks[i], i < n, ascending). joined marks world ranks that have joined. Returns 0 when
 * they agree; else RING_EMISMATCH or RING_EJOINED with a message in msg.
 */
int ring__coord_validate(const struct ring__request *const *req, const int *ranks, int n,
                         const struct ring__pset *ps, const unsigned char *joined, char *msg,
                         size_t msglen);

/* ---- fusion (fusion.c) ---- */

/*
 * Splits responses into batches run as one collective each: consecutive error-free
 * allreduces with the same dtype, op, scales, process set and device, while their bytes
 * fit in threshold (a tensor larger than threshold runs alone). Grouped allreduces stay in
 * one batch when they fit. Fills starts[] with each batch's first index and returns the
 * number of batches.
 */
int ring__fusion_plan(const struct ring__response *resp, int n, size_t threshold, int *starts);

/* ---- timeline (timeline.c) ---- */

struct ring__timeline;

/* Opens path for writing a Chrome trace. Returns NULL with errno set on failure. */
struct ring__timeline *ring__timeline_open(const char *path);
/* Writes the closing bracket and closes. Accepts NULL. */
void ring__timeline_close(struct ring__timeline *t);
/* Begins ("B") or ends ("E") phase of tensor name at time us; args may be NULL. */
void ring__timeline_phase(struct ring__timeline *t, const char *name, const char *phase, int begin,
                          int64_t us, const char *args);
/* An instant mark ("i") on tensor name. */
void ring__timeline_mark(struct ring__timeline *t, const char *name, const char *what, int64_t us);
/* An instant mark with args, a JSON object's members (e.g. "\"x\":1"). Accepts t NULL. */
void ring__timeline_instant(struct ring__timeline *t, const char *name, const char *what,
                            int64_t us, const char *args);
/* Makes what was written so far a valid JSON document on disk. */
void ring__timeline_flush(struct ring__timeline *t);

/* ---- the engine (engine*.c; engine.c gives the whole picture) ---- */

struct ring__engine;
struct ring_handle;

/* Starts the engine thread on ctx. Returns 0 or an error code. */
int ring__engine_start(struct ring__ctx *ctx, struct ring__engine **out);
/* Agrees on shutdown with the other ranks, stops the thread and frees everything. */
int ring__engine_stop(struct ring__engine *e);

/*
 * One tensor of a submission. The engine copies req; the buffers are the caller's.
 * sendbuf == recvbuf for in place.
 */
struct ring__submit {
    struct ring__request req;
    const void *sendbuf;
    void *recvbuf;
};

/*
 * Queues n tensors under one handle (n > 1 only for a grouped allreduce). Checks that no
 * name is already in flight on this rank. Returns 0 and *handle, or an error code.
 */
int ring__engine_submit(struct ring__engine *e, const struct ring__submit *subs, int n,
                        struct ring_handle **handle);
/*
 * Queues a grouped allreduce of host memory as one packed request (req, see
 * ring__request_packed: name, dtype, op, scales, set and group_size n given; count and
 * counts are filled here from counts[]), so that a repeat of the same group costs one
 * entry, one in-flight name, one cache bit and one completion, and its data is gathered
 * into one buffer and reduced as one. sendbufs[i] may be RING_IN_PLACE. The engine copies
 * the arrays; the buffers are the caller's. Returns 0 and *handle, or an error code.
 */
int ring__engine_submit_group(struct ring__engine *e, const struct ring__request *req, int n,
                              const void *const *sendbufs, void *const *recvbufs,
                              const size_t *counts, struct ring_handle **handle);
/*
 * A blocking call (an allreduce, a barrier...): the fast path (engine_fast.c) when it applies,
 * else a submission and a wait. Returns the call's status, as ring_wait.
 */
int ring__engine_blocking(struct ring__engine *e, const struct ring__submit *sub);
/*
 * Says (yes = 1) that the calling thread's next submission is a blocking call: it will
 * wait at once, so no burst follows it and the engine need not wait for one
 * (engine_cycle.c, settle). yes = 0 clears it.
 */
void ring__engine_next_is_blocking(int yes);
/* The process sets (read-mostly; creation goes through ring__engine_add_pset). */
int ring__engine_add_pset(struct ring__engine *e, const int *ranks, int n);
/*
 * Checks that set id may be removed here (it exists, is not the world, and none of this
 * rank's requests on it is in flight), and with remove set, removes it. Returns 0 or
 * RING_EINVAL with a message.
 */
int ring__engine_remove_pset(struct ring__engine *e, int id, int remove);
int ring__engine_pset_info(struct ring__engine *e, int id, int *rank, int *size);
int ring__engine_join(struct ring__engine *e);
int ring__engine_timeline(struct ring__engine *e, const char *path);
void ring__engine_stats(struct ring__engine *e, struct ring_engine_stats *out);
/* Wakes the engine thread. */
void ring__engine_wake(struct ring__engine *e);
/*
 * The eventfd that wakes the engine thread: writing an 8-byte 1 to it is what
 * ring__engine_wake does, and is async-signal-safe. Valid until ring__engine_stop.
 */
int ring__engine_wake_fd(const struct ring__engine *e);
/*
 * Waits for h (ring_wait): returns its status, with its message in ring__err() when it
 * failed, and frees h. ring__engine_test says whether h is done (ring_test), without
 * waiting.
 */
int ring__engine_wait(struct ring__engine *e, struct ring_handle *h);
int ring__engine_test(struct ring__engine *e, struct ring_handle *h);
/* The agreed stop flag as the caller's completed operations have seen it. */
int ring__engine_stop_seen(void);
/*
 * This rank's own stop request, before the ranks agree on it (the engine's negotiation
 * carries it): ring__stop_request sets it (SIGTERM's handler and ring_request_stop; an
 * atomic store, so async-signal-safe), ring__stop_clear clears it for a new job, and
 * ring__stop_local reads it.
 */
void ring__stop_request(void);
void ring__stop_clear(void);
int ring__stop_local(void);

#endif /* RING_ENGINE_H */
