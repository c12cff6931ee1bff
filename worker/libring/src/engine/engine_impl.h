/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_impl.h - the engine's state, shared by its files: engine.c (the thread and its
 * lifecycle), engine_submit.c (the queue, handles and their completion), engine_fast.c
 * (cycles on the program's thread), engine_cycle.c (negotiation), engine_round.c (its full
 * round through rank 0), engine_exec.c (running the agreed responses) and engine_info.c
 * (process sets, timeline, stats). Nothing outside the engine includes this.
 */
#ifndef RING_ENGINE_IMPL_H
#define RING_ENGINE_IMPL_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "engine/autotune.h"
#include "engine/engine.h"

#define MAX_PSETS 256

/* OR flags (sent complemented) and AND flags of the control vector. */
#define F_UNCACHED   1u
#define F_STOP       2u
#define F_FORCE_FULL 4u
#define F_SHUTDOWN   1u

struct ring_handle {
    atomic_int done; /* written under mu; await_handle's spin reads it without */
    int status;
    int remaining; /* tensors of this handle not yet completed */
    int stop_seen; /* the stop was agreed before this completed */
    int join_last;
    int solo; /* the head of a struct solo: ring_wait gives it back to the engine's pool */
    char message[384];
};

/*
 * One tensor of a submission: queued (under mu), then pending (taken by a cycle; the
 * pending list belongs to cycle_mu) until it completes. The in-flight table maps its name
 * to it from submission to completion.
 */
struct entry {
    struct ring__request req;
    const void *sendbuf;
    void *recvbuf;
    struct ring_handle *handle;
    size_t hash;       /* ring__strmap_hash(req.name), for the in-flight table and the cache */
    int64_t submit_us; /* only with a timeline open, else 0 */
    int bit;           /* cache bit, or -1 */
    int nmem;          /* a packed group's members (req.counts their counts), else 0 */
    const void *const *msend; /* with nmem: the members' send and receive buffers */
    void *const *mrecv;
    int taken;                   /* cycle: in the pending list */
    struct entry *next;          /* the queue; then a cycle's scratch lists */
    struct entry *pprev, *pnext; /* cycle: the pending list, in submission order */
};

/* A submission of one tensor, the common case: handle and entry in one allocation. The
 * handle comes first, so that ring_wait's free(h) frees both. */
struct solo {
    struct ring_handle h;
    struct entry en;
};

/* A grouped allreduce of GPU buffers: the handle and its members' entries in one allocation
 * (host memory goes as one packed entry: struct pack, engine_submit.c). */
struct group {
    struct ring_handle h;
    struct entry en[];
};

struct stall {
    int64_t first_us, warned_us;
    unsigned char *seen; /* per world rank: its request has been seen */
};

/*
 * Who runs cycles. Usually the engine thread; but a blocking allreduce with nothing else
 * in flight may run the cycle itself, on the caller's thread (the fast path,
 * engine_fast.c), and so may the first ring_wait after a burst (ring__eng_run_here), which
 * saves waking the engine thread and waiting for it. Whoever holds cycle_mu runs the next
 * cycle and owns the fields marked "cycle" below; the engine thread drops it while it
 * sleeps, and while it waits in settle() for a burst to end.
 */
struct ring__engine {
    struct ring__ctx *ctx;
    struct ring__comm world;
    pthread_t thread;
    int started;
    int wake_fd;
    pthread_mutex_t cycle_mu;
    int fast;               /* the fast path is on (RING_FAST_PATH), and with it attachments */
    char *fast_buf;         /* cycle: the attachment's data, RING__ATTACH_MAX bytes */
    uint64_t *att_key;      /* cycle: the attachment's key, a bitmap of cw words */
    struct entry **att_ent; /* cycle: the attached entries, in bit order */
    void *ctl_scratch;      /* cycle: the control round's messages (ring__ctl_scratch_bytes) */

    /* Spare struct solo, linked through en.next, so that a step of many small tensors costs
     * no malloc or free per tensor (glibc keeps only 7 blocks of a size per thread): ring_wait
     * pushes what it is done with onto freed without a lock; submissions take from pool,
     * under mu, and move all of freed there when it runs dry. Taking the whole list at once
     * (one exchange) is what makes the lock-free push safe. There are never more than were
     * in flight at once. */
    _Atomic(struct solo *) freed;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    struct solo *pool;
    struct entry *qhead, **qtail;
    int nqueued;
    /* The last submission was a blocking call, or the program now waits. Written under mu;
     * await_handle reads it without, to skip the lock when it is set already. */
    atomic_int burst_over;
    int settling;             /* the engine waits in settle() for the burst to end */
    pthread_cond_t settle_cv; /* signalled when burst_over becomes 1 while settling */
    int wake_waiters;
    struct ring__strmap inflight; /* name -> struct entry, queued or pending */
    int shutdown;
    int join_pending;
    struct ring_handle *join_handle;
    int failed;
    char failed_msg[384];
    struct ring__timeline *timeline_swap;
    int timeline_swapping;
    /* A small group was queued without waking the sleeping engine thread: the program's
     * wait runs it (ring__eng_run_here), and end_burst wakes the thread if it did not. */
    atomic_int deferred;
    struct ring_engine_stats stats;
    struct ring__process_sets psets;

    /* cycle (see cycle_mu) */
    struct entry *phead, *ptail; /* the pending entries */
    int npending;
    struct ring__cache cache;
    int joined;
    unsigned char *joined_ranks;
    int stop_agreed;
    size_t fusion_threshold;
    char *fusion;
    size_t fusion_cap;
    int compression; /* -1 none, else the 16-bit dtype */
    int cycle_ms;
    int64_t stall_check_us, stall_shutdown_us;
    struct ring__timeline *timeline;
    struct ring__strmap stalls; /* rank 0: name -> struct stall */
    int64_t *bit_since;         /* rank 0: when a cached bit was first partly ready */
    int force_full;
    int words, jw, cw; /* control vector layout */
    uint64_t *ctl;
    unsigned char *absent;        /* per cache bit: this rank is not in the entry's set */
    unsigned char *fired;         /* per cache bit, this cycle */
    struct ring__response *fresp; /* the fired entries' responses, this cycle */
    struct entry **bit_entry;     /* per cache bit: the pending entry holding it, this cycle */
    struct entry **fent;          /* the fired responses' entries here (NULL: not held) */
    int sleeping;                 /* under mu: the thread is (about to be) in the idle poll, and no
                                     submission has woken it since */
    int idle_waiting;             /* under mu: the thread sleeps with the mesh's idle flags up:
                                     how (RING__IDLE_*, transport.h), or 0 */
    int64_t last_cycle_us;        /* cycle: when the last cycle started */
    uint64_t cycle_seq;           /* cycle: cycles started so far */
    int64_t defer_since;          /* cycle: a peer's cycle held back since (0: none) */
    int64_t grace_us;             /* how long (RING_FAST_GRACE_US; see needs_cycle) */
    unsigned char *prev_joined;   /* joined_ranks of the cycle before */

    struct ring__autotune *autotune; /* cycle: RING_AUTOTUNE (autotune.h) */
};

/* Timeline events cost a clock read and formatting: only when a timeline is open. */
#define TL_PHASE(e, name, phase, begin, args)                                                      \
    do {                                                                                           \
        if ((e)->timeline != NULL)                                                                 \
            ring__timeline_phase((e)->timeline, name, phase, begin, ring__now_us(), args);         \
    } while (0)

/* ---- engine.c: the thread ---- */

/* After a failed cycle: every request fails with the error (a stall did that itself). */
void ring__eng_cycle_failed(struct ring__engine *e, int rc);
/* A handle the program waited for saw the agreed stop: ring_stop_requested says so now. */
void ring__eng_note_stop_seen(void);

/* ---- engine_fast.c ---- */

/* The program's first wait after a burst runs the cycle itself when it can: 1 if it did. */
int ring__eng_run_here(struct ring__engine *e);

/* ---- engine_submit.c: handles and entries (user threads) ---- */

/* Fills every field of en but req (the caller copies that in) and hash. */
static inline void ring__eng_entry_init(struct entry *en, const struct ring__submit *sub,
                                        struct ring_handle *h)
{
    en->sendbuf = sub->sendbuf;
    en->recvbuf = sub->recvbuf;
    en->handle = h;
    en->submit_us = 0;
    en->bit = -1;
    en->nmem = 0;
    en->taken = 0;
    en->next = en->pprev = en->pnext = NULL;
}

static inline void ring__eng_handle_init(struct ring_handle *h, int n, int solo)
{
    atomic_init(&h->done, 0);
    h->status = 0;
    h->remaining = n;
    h->stop_seen = 0;
    h->join_last = 0;
    h->solo = solo;
    h->message[0] = '\0';
}

/* A struct solo from the pool, or a new one (NULL when out of memory). Under mu. */
static inline struct solo *ring__eng_solo_take(struct ring__engine *e)
{
    struct solo *s = e->pool;
    if (s == NULL && (s = atomic_exchange(&e->freed, NULL)) == NULL)
        return malloc(sizeof(*s));
    e->pool = (struct solo *)s->en.next;
    return s;
}

/* ---- engine_submit.c: completing work (engine thread) ---- */

/* Counts one completed tensor of handle h (under mu); the last one marks it done. */
void ring__eng_finish_handle(struct ring__engine *e, struct ring_handle *h, int status,
                             const char *msg);
/* Appends en to the pending list (cycle). */
void ring__eng_pending_add(struct ring__engine *e, struct entry *en);
/* The pending entry named name, or NULL (cycle). */
struct entry *ring__eng_pending_get(struct ring__engine *e, const char *name);
/* Completes en (removing it from the pending list) with status and msg. The entry
 * may be freed by its waiter as soon as this returns. */
void ring__eng_complete(struct ring__engine *e, struct entry *en, int status, const char *msg);
/* Completes the n entries en[] (NULLs skipped) successfully, taking mu once. */
void ring__eng_complete_batch(struct ring__engine *e, struct entry **en, int n);
/* Wakes the threads waiting on handles completed since the last call. */
void ring__eng_flush_waiters(struct ring__engine *e);
/* Fails everything queued and pending with err, and refuses later submissions. */
void ring__eng_fail_all(struct ring__engine *e, int err, const char *msg);

/* ---- engine_exec.c ---- */

/* Copies en's data (its members' in order, for a packed group) to dst, count elements of
 * dt in all, and scales them by factor. */
void ring__eng_gather(const struct entry *en, void *dst, ring_dtype_t dt, double factor);
/* Scales src (count elements, in place) by factor and copies it to en's receive buffers. */
void ring__eng_scatter(const struct entry *en, void *src, ring_dtype_t dt, double factor);

/* The view of process set id for this rank; returns 1 when this rank is a member. */
int ring__eng_pset_view(struct ring__engine *e, int id, struct ring__comm *c);
/*
 * Runs one cycle's responses in order, in fused batches. known (may be NULL) gives each
 * response's pending entry on this rank (NULL: none), found by name otherwise. Returns 0 or
 * a transport error.
 */
int ring__eng_execute(struct ring__engine *e, struct ring__response *resp, int n,
                      struct entry *const *known);

/* ---- engine_round.c ---- */

/*
 * Step 4 of a cycle, under cycle_mu: sends this rank's requests that did not fire from the
 * cache (fired, per cache bit) to rank 0 and returns the responses every rank runs, in
 * order (*out, *nout: the caller clears and frees them). *shutdown and msg (msglen bytes)
 * say when rank 0 shut the job down for a stall. Returns 0 or an error.
 */
int ring__eng_full_round(struct ring__engine *e, const unsigned char *fired,
                         struct ring__response **out, int *nout, int *shutdown, char *msg,
                         size_t msglen);

/* ---- engine_cycle.c ---- */

/* A blocking allreduce or barrier taken on the fast path: its entry. */
struct ring__fast {
    struct entry *en;
    int done; /* out: the cycle completed en */
};

/*
 * Whether a cached request may ride in the control round (an attachment, control.c): an
 * allreduce of host memory on the global set, of at most RING__ATTACH_MAX bytes, that the
 * ring ops run uncompressed; or a barrier on the global set. Nonzero only with
 * RING_FAST_PATH on. Depends on the request alone, so it is the same on every rank.
 */
int ring__eng_attachable(const struct ring__engine *e, const struct ring__request *r);

/*
 * One negotiation cycle, under cycle_mu: 1 when the ranks agreed to shut down, 0 to go on,
 * or an error. Cached small tensors ready here ride in the control round (control.c); f
 * (may be NULL) is a fast-path call's, and learns whether it was done there.
 */
int ring__eng_cycle(struct ring__engine *e, struct ring__fast *f);

#endif /* RING_ENGINE_IMPL_H */
