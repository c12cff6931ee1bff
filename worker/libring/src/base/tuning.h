/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tuning.h - libring's knobs in one table: every segment size, threshold, timeout and
 * algorithm switch that the environment may override, with its default, range, unit and
 * a line of documentation. ring_init parses the whole table once (ring__tuning_load);
 * every part then reads its values from the context (ctx->tune) and none reads the
 * environment itself. The README's table of tuning variables is kept in sync with this
 * one by tests/unit/test_tuning.c.
 *
 * Not here: variables that name things rather than tune them (RING_TRANSPORT,
 * RING_BOOTSTRAP, RING_CPU_OPERATIONS, RING_TCP_ADDR, paths such as RING_TIMELINE and
 * RING_AUTOTUNE_LOG), the worker contract (RING_RANK, ...), and RING_LOG_LEVEL, which is
 * read before anything else and is never fatal.
 */
#ifndef RING_TUNING_H
#define RING_TUNING_H

#include <stddef.h>

enum ring__knob {
    RING__K_TIMEOUT_SECONDS,
    RING__K_OP_TIMEOUT_SECONDS,
    RING__K_HANDLE_SIGTERM,
    RING__K_ALLREDUCE_ALGO, /* RING__ALGO_* */
    RING__K_SMALL_ALLREDUCE_BYTES,
    RING__K_RHD_ALLREDUCE_BYTES,
    RING__K_HIERARCHICAL, /* RING__HIER_* */
    RING__K_SEGMENT_BYTES,
    RING__K_SPIN_US,
    RING__K_TCP_SPIN_US,
    RING__K_TCP_SPIN_BYTES,
    RING__K_SOCKET_BUFFER_BYTES,
    RING__K_SHM_RING_BYTES,
    RING__K_SHM_CMA_BYTES,
    RING__K_SHM_CMA,
    RING__K_BIND, /* RING__BIND_* */
    RING__K_CYCLE_TIME_MS,
    RING__K_FUSION_THRESHOLD,
    RING__K_CACHE_CAPACITY,
    RING__K_FAST_PATH,
    RING__K_FAST_GRACE_US,
    RING__K_STALL_CHECK_SECONDS,
    RING__K_STALL_SHUTDOWN_SECONDS,
    RING__K_JOIN_BROADCAST,
    RING__K_COMPRESSION, /* 0 none, 1 fp16, 2 bf16 */
    RING__K_AUTOTUNE,
    RING__K_AUTOTUNE_WARMUP_SAMPLES,
    RING__K_AUTOTUNE_CYCLES_PER_SAMPLE,
    RING__K_COUNT
};

/* A value that depends on where the job runs: each entry says which defaults apply. */
enum ring__knob_ctx {
    RING__KC_NONE,   /* one default */
    RING__KC_OVERSUB /* dflt_alt when this host has more ranks than CPUs */
};

struct ring__knob_def {
    const char *env;            /* RING_... */
    long dflt;                  /* the default (for choices, an index into choices) */
    long min, max;              /* the accepted range, inclusive (integers only) */
    const char *unit;           /* bytes, us, ms, s, entries, samples, cycles; "" for a
                                   switch (0 or 1) or a choice */
    const char *const *choices; /* NULL for an integer; else names of the values 0, 1, ...
                                   ended by NULL, matched without regard to case */
    enum ring__knob_ctx ctx;    /* which other default may apply */
    long dflt_alt;              /* that other default */
    const char *doc;            /* one line for the README */
};

/* The table, in enum ring__knob's order, ended by an entry whose env is NULL. */
extern const struct ring__knob_def ring__knobs[RING__K_COUNT + 1];

struct ring__tuning {
    long v[RING__K_COUNT];
    unsigned char set[RING__K_COUNT]; /* given in the environment (not the default) */
};

/*
 * Parses every entry of the table from the environment into *t, the defaults for the
 * unset ones (context-dependent ones get their plain default until ring__tuning_resolve).
 * Returns 0, or RING_EENV for the first bad value, with a message (ring_last_error, and
 * logged as an error) that names the variable and what it must be.
 */
int ring__tuning_load(struct ring__tuning *t);

/* Fills *t with the table's defaults, as if the environment set nothing. Never fails. */
void ring__tuning_defaults(struct ring__tuning *t);

/* Applies the context-dependent defaults to the entries the environment did not set. */
void ring__tuning_resolve(struct ring__tuning *t, int oversubscribed);

/*
 * Writes the README row of entry k, "| `RING_X` | default | range | unit | doc |", into
 * buf (len bytes, NUL-terminated, truncated if short). Returns the length it needed.
 */
int ring__tuning_markdown_row(enum ring__knob k, char *buf, size_t len);

#endif /* RING_TUNING_H */
