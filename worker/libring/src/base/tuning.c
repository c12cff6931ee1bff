/* SPDX-License-Identifier: Apache-2.0 */
/* tuning.c - the table of libring's knobs (tuning.h) and its parsing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "base/tuning.h"

static const char *const algo_names[] = {"auto", "ring", "rd", "rhd", NULL};
static const char *const hier_names[] = {"0", "auto", "1", NULL};
static const char *const bind_names[] = {"0", "auto", "1", NULL};
static const char *const compression_names[] = {"none", "fp16", "bf16", NULL};

#define KIB 1024L
#define MIB (1024L * 1024L)
#define INT_KNOB(env_, dflt_, min_, max_, unit_, doc_)                                             \
    {                                                                                              \
        .env = env_, .dflt = dflt_, .min = min_, .max = max_, .unit = unit_, .doc = doc_           \
    }
#define SWITCH_KNOB(env_, dflt_, doc_) INT_KNOB(env_, dflt_, 0, 1, "", doc_)
#define CHOICE_KNOB(env_, names_, dflt_, doc_)                                                     \
    {                                                                                              \
        .env = env_, .dflt = dflt_, .unit = "", .choices = names_, .doc = doc_                     \
    }

/*
 * Where the defaults come from:
 * - Timeouts, 30 s: Horovod's start timeout; long enough for a slow launch on a loaded
 *   node, short enough that a dead job is noticed within a minute.
 * - Small allreduce, 64 KiB: where the ring's 2(n-1) latency terms stop dominating on TCP
 *   (bench/allreduce).
 * - Recursive halving-doubling up to 16 MiB at 4, 8, 16... ranks: at np 4 on 2 cores it
 *   beat the ring by 10-15% from 1 to 16 MiB over shm and by 4-13% at 1-4 MiB over tcp
 *   (bench/allreduce, medians of 5 interleaved runs; 16 MiB is the largest size measured).
 *   Its log2(p) exchanges between two partners wait less on ranks that have no CPU than
 *   the ring's p-1 dependent steps. At np 2 it is the ring without the pipelining from
 *   reduce-scatter into allgather, so the ring stays.
 * - Segments, 256 KiB: fit many times into the 4 MiB socket buffers, so the kernel keeps
 *   receiving while a segment is reduced (bench/allreduce measured the buffers against
 *   the kernel's defaults).
 * - Spin, 50 us, or 100 us when the host is oversubscribed, where the spin yields the CPU
 *   at every turn (mesh.c) so that a peer that needs it to answer gets it. Without the
 *   spin every wait there slept: a 4 KiB allreduce at np 4 on 2 cores took ~150 us
 *   against ~55 us with it (bench/allreduce, RING_SPIN_US 0 and 100).
 * - TCP streams that move more than 128 KiB spin apart (RING_TCP_SPIN_US): not at all,
 *   or 50 us when oversubscribed. Each turn of a TCP spin is a send() and a recv(); at
 *   np 2, 50 us of it made 256 KiB take ~450 us and 1 MiB ~1.15-1.4 ms, against ~240 us
 *   and ~1.0 ms sleeping in poll() at once (bench/allreduce, medians of 5-7 interleaved
 *   runs; a spin on poll() instead of the tries did no better). Up to 64 KiB the spin
 *   still pays when the machine is quiet (4 KiB: ~10 us against ~35 us), so small
 *   streams, the engine's control rounds among them, keep RING_SPIN_US. Oversubscribed,
 *   where each turn yields, 50 us still won by 4-25% at np 4.
 * - Shared memory: 1 MiB per direction holds four 256 KiB segments, enough to keep both
 *   sides busy while copying. Sends from 256 KiB on go by CMA: at np 2 (RING_SHM_CMA_BYTES
 *   swept over 1 B, 64 KiB, 256 KiB, 1 MiB and off) the ring's second copy wins below that,
 *   where the kernel's page pinning costs more, and CMA wins above, by 2x at 64 MiB.
 * - CPU binding, auto: on a host with fewer than two CPUs per rank, ranks that wake each
 *   other pile up on one CPU unless held apart (affinity.c); at np 2 on 2 CPUs a 1 MiB
 *   allreduce over TCP took 0.4-0.6 ms bound against 0.7-1.1 ms unbound, 4 MiB 2.3-3.7 ms
 *   against 5.7-6.0 ms (bench/allreduce, interleaved runs).
 * - Cycle time 1 ms and fusion 128 MiB: Horovod's defaults (HOROVOD_CYCLE_TIME,
 *   HOROVOD_FUSION_THRESHOLD). 1024 cache entries cover the tensor count of common models
 *   (ResNet-50 has 161).
 * - Autotune: 2 warm-up samples absorb the first steps (cache misses, page faults); a
 *   sample of 10 cycles that moved data spans a few training steps (autotune.c).
 */
const struct ring__knob_def ring__knobs[RING__K_COUNT + 1] = {
    [RING__K_TIMEOUT_SECONDS] =
        INT_KNOB("RING_TIMEOUT_SECONDS", 30, 1, 86400, "s", "setup: rendezvous and connections"),
    [RING__K_OP_TIMEOUT_SECONDS] = INT_KNOB("RING_OP_TIMEOUT_SECONDS", 30, 1, 86400, "s",
                                            "longest a collective waits with no byte moving"),
    [RING__K_HANDLE_SIGTERM] =
        SWITCH_KNOB("RING_HANDLE_SIGTERM", 1, "SIGTERM requests a stop (`ring_stop_requested()`)"),
    [RING__K_ALLREDUCE_ALGO] = CHOICE_KNOB(
        "RING_ALLREDUCE_ALGO", algo_names, 0,
        "ring, recursive doubling (rd), recursive halving-doubling (rhd), or auto: rd up to "
        "`RING_SMALL_ALLREDUCE_BYTES`, rhd up to `RING_RHD_ALLREDUCE_BYTES` on 4, 8, 16... "
        "ranks, the ring above"),
    [RING__K_SMALL_ALLREDUCE_BYTES] =
        INT_KNOB("RING_SMALL_ALLREDUCE_BYTES", 64 * KIB, 0, 1L << 40, "bytes",
                 "auto picks recursive doubling up to this size"),
    [RING__K_RHD_ALLREDUCE_BYTES] =
        INT_KNOB("RING_RHD_ALLREDUCE_BYTES", 16 * MIB, 0, 1L << 40, "bytes",
                 "auto picks recursive halving-doubling above `RING_SMALL_ALLREDUCE_BYTES` up to "
                 "this size, when the world size is a power of two above 2; 0 never"),
    [RING__K_HIERARCHICAL] = CHOICE_KNOB(
        "RING_HIERARCHICAL", hier_names, 1,
        "hierarchical allreduce when ranks span hosts and some host has several (reduce-scatter "
        "in the host over shm, one ring per slice across hosts over tcp, allgather in the "
        "host): auto above `RING_SMALL_ALLREDUCE_BYTES`, 1 at any size, 0 never. Uneven hosts "
        "are handled (as many slices as the smallest host has ranks). `RING_LOG_LEVEL=info` "
        "logs the plan at ring_init and the first use"),
    [RING__K_SEGMENT_BYTES] = INT_KNOB("RING_SEGMENT_BYTES", 256 * KIB, 4096, 1L << 30, "bytes",
                                       "pipeline segment (rounded down to a multiple of 8)"),
    [RING__K_SPIN_US] = {.env = "RING_SPIN_US",
                         .dflt = 50,
                         .min = 0,
                         .max = 1000000,
                         .unit = "us",
                         .ctx = RING__KC_OVERSUB,
                         .dflt_alt = 100,
                         .doc = "busy-poll before sleeping in poll() (a stream over TCP uses "
                                "`RING_TCP_SPIN_US`); oversubscribed, each turn "
                                "yields the CPU (sched_yield); a thread in `ring_wait` (or a "
                                "blocking call) polls its handle as long, always yielding, "
                                "before it sleeps"},
    [RING__K_TCP_SPIN_US] = {.env = "RING_TCP_SPIN_US",
                             .dflt = 0,
                             .min = 0,
                             .max = 1000000,
                             .unit = "us",
                             .ctx = RING__KC_OVERSUB,
                             .dflt_alt = 50,
                             .doc = "`RING_SPIN_US` for a stream that sends or receives over TCP, "
                                    "where every try is a system call, and moves more than "
                                    "`RING_TCP_SPIN_BYTES`"},
    [RING__K_TCP_SPIN_BYTES] =
        INT_KNOB("RING_TCP_SPIN_BYTES", 128 * KIB, 0, 1L << 40, "bytes",
                 "a stream over TCP that moves at most this much (sent plus received) spins for "
                 "`RING_SPIN_US`, a larger one for `RING_TCP_SPIN_US`"),
    [RING__K_SOCKET_BUFFER_BYTES] =
        INT_KNOB("RING_SOCKET_BUFFER_BYTES", 4 * MIB, 0, 1L << 30, "bytes",
                 "SO_SNDBUF/SO_RCVBUF; 0 leaves it to the kernel"),
    [RING__K_SHM_RING_BYTES] =
        INT_KNOB("RING_SHM_RING_BYTES", 1 * MIB, 4096, 1L << 30, "bytes",
                 "shared-memory ring per direction and peer (rounded down to a multiple of 16)"),
    [RING__K_SHM_CMA_BYTES] =
        INT_KNOB("RING_SHM_CMA_BYTES", 256 * KIB, 0, 1L << 40, "bytes",
                 "sends of at least this size are read from the sender's memory (CMA)"),
    [RING__K_SHM_CMA] = SWITCH_KNOB("RING_SHM_CMA", 1, "0 copies everything through the rings"),
    [RING__K_BIND] =
        CHOICE_KNOB(
            "RING_BIND", bind_names, 1,
            "hold the thread that calls ring_init, and the threads it starts afterwards (the "
            "engine's), on one CPU: the (local rank mod n)-th of the n it may run on; auto only "
            "when this host has fewer than 2 CPUs per local rank and no launcher or cpuset bound "
            "the process; 1 always; 0 never. `RING_LOG_LEVEL=info` logs the CPU"),
    [RING__K_CYCLE_TIME_MS] =
        INT_KNOB("RING_CYCLE_TIME_MS", 1, 0, 60000, "ms",
                 "cycle period while tensors wait for other ranks, and the longest wait for a "
                 "burst of submissions to end"),
    [RING__K_FUSION_THRESHOLD] = INT_KNOB("RING_FUSION_THRESHOLD", 128 * MIB, 0, 1L << 40, "bytes",
                                          "bytes fused into one collective; 0 disables fusion"),
    [RING__K_CACHE_CAPACITY] = INT_KNOB("RING_CACHE_CAPACITY", 1024, 0, 1 << 20, "entries",
                                        "response cache entries; 0 disables the cache"),
    [RING__K_FAST_PATH] = SWITCH_KNOB(
        "RING_FAST_PATH", 1,
        "a blocking allreduce of at most 64 KiB or a blocking barrier, cached, with nothing else "
        "in flight, rides in the control round on the calling thread; 0 turns that off"),
    [RING__K_FAST_GRACE_US] = INT_KNOB("RING_FAST_GRACE_US", 200, 0, 1000000, "us",
                                       "how long an idle rank holds back its answer to a peer's "
                                       "cycle, so that its own blocking call can meet it there"),
    [RING__K_STALL_CHECK_SECONDS] = INT_KNOB("RING_STALL_CHECK_SECONDS", 60, 0, 1L << 30, "s",
                                             "warn about stalled tensors; 0 disables"),
    [RING__K_STALL_SHUTDOWN_SECONDS] = INT_KNOB("RING_STALL_SHUTDOWN_SECONDS", 0, 0, 1L << 30, "s",
                                                "fail all ranks after a stall this long; 0 never"),
    [RING__K_JOIN_BROADCAST] = SWITCH_KNOB(
        "RING_JOIN_BROADCAST", 1,
        "while ranks have joined, a broadcast from a rank that has not runs (joined ranks "
        "take part); 0 fails it with RING_EJOINED, as Horovod does (ringmaster.torch sets 0; "
        "rank 0's setting decides, set it alike everywhere)"),
    [RING__K_COMPRESSION] = CHOICE_KNOB("RING_COMPRESSION", compression_names, 0,
                                        "fp16 or bf16 wire format for float32 sum/average"),
    [RING__K_AUTOTUNE] = SWITCH_KNOB(
        "RING_AUTOTUNE", 0,
        "1 tunes `RING_FUSION_THRESHOLD` and `RING_CYCLE_TIME_MS` online (rank 0's setting "
        "decides for all); the choices go to the timeline and the info log"),
    [RING__K_AUTOTUNE_WARMUP_SAMPLES] =
        INT_KNOB("RING_AUTOTUNE_WARMUP_SAMPLES", 2, 0, 5, "samples",
                 "samples discarded before autotune scores anything"),
    [RING__K_AUTOTUNE_CYCLES_PER_SAMPLE] =
        INT_KNOB("RING_AUTOTUNE_CYCLES_PER_SAMPLE", 10, 1, 100000, "cycles",
                 "cycles that moved allreduce data in one autotune sample"),
    {0},
};

/* "a, b or c" */
static void choices_text(const char *const *names, char *buf, size_t len)
{
    size_t n = 0, used = 0;

    while (names[n] != NULL)
        n++;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        int w = snprintf(buf + used, len - used, "%s%s", sep, names[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static int load_choice(const struct ring__knob_def *d, long *out, unsigned char *set)
{
    const char *v = getenv(d->env);
    char want[128];

    *out = d->dflt;
    *set = 0;
    if (v == NULL || *v == '\0')
        return 0;
    for (long i = 0; d->choices[i] != NULL; i++) {
        if (strcasecmp(v, d->choices[i]) == 0) {
            *out = i;
            *set = 1;
            return 0;
        }
    }
    choices_text(d->choices, want, sizeof(want));
    ring__log(RING_LOG_ERROR, "%s='%s' must be %s", d->env, v, want);
    return ring__err(RING_EENV, "%s='%s' must be %s", d->env, v, want);
}

int ring__tuning_load(struct ring__tuning *t)
{
    int rc;

    for (int k = 0; k < RING__K_COUNT; k++) {
        const struct ring__knob_def *d = &ring__knobs[k];
        const char *v = getenv(d->env);

        if (d->choices != NULL) {
            if ((rc = load_choice(d, &t->v[k], &t->set[k])) < 0)
                return rc;
            continue;
        }
        if ((rc = ring__env_int(d->env, d->dflt, d->min, d->max, &t->v[k])) < 0)
            return rc;
        t->set[k] = v != NULL && *v != '\0';
    }
    return 0;
}

void ring__tuning_defaults(struct ring__tuning *t)
{
    for (int k = 0; k < RING__K_COUNT; k++) {
        t->v[k] = ring__knobs[k].dflt;
        t->set[k] = 0;
    }
}

void ring__tuning_resolve(struct ring__tuning *t, int oversubscribed)
{
    for (int k = 0; k < RING__K_COUNT; k++) {
        const struct ring__knob_def *d = &ring__knobs[k];
        if (!t->set[k] && d->ctx == RING__KC_OVERSUB)
            t->v[k] = oversubscribed ? d->dflt_alt : d->dflt;
    }
}

int ring__tuning_markdown_row(enum ring__knob k, char *buf, size_t len)
{
    const struct ring__knob_def *d = &ring__knobs[k];
    char dflt[96], range[128];

    if (d->choices != NULL) {
        snprintf(dflt, sizeof(dflt), "%s", d->choices[d->dflt]);
        choices_text(d->choices, range, sizeof(range));
    } else {
        if (d->ctx == RING__KC_OVERSUB)
            snprintf(dflt, sizeof(dflt), "%ld, or %ld when oversubscribed", d->dflt, d->dflt_alt);
        else
            snprintf(dflt, sizeof(dflt), "%ld", d->dflt);
        snprintf(range, sizeof(range), "%ld to %ld", d->min, d->max);
    }
    return snprintf(buf, len, "| `%s` | %s | %s | %s | %s |", d->env, dflt, range, d->unit, d->doc);
}
