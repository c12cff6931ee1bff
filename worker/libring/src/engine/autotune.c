/* SPDX-License-Identifier: Apache-2.0 */
/*
 * autotune.c - RING_AUTOTUNE=1 (autotune.h): a coordinate descent over a small grid.
 *
 * Horovod's autotuner scores bytes allreduced per second over windows of steps and
 * searches the fusion threshold and cycle time with Bayesian optimization. Here the
 * score is the same, but the search is a plain, deterministic one, which bounds the
 * number of samples by construction:
 *
 *   warm-up   W samples at the starting parameters, not scored (cache misses, page
 *             faults and the first negotiations make the first steps slow);
 *   fusion    one sample per fusion threshold, at the starting cycle time;
 *   cycle     one sample per cycle time, at the best fusion threshold so far;
 *   confirm   when the best sample's parameters are not the starting ones: two more
 *             samples of each, in turn (best, start, best, start). The best of ten
 *             single samples is the one that noise flattered most, so its score says
 *             little; the winner is kept only when its new samples beat the start's by
 *             RING__TUNE_MARGIN on average. On a noisy machine (bench/engine on 2 cores,
 *             np 4) the search without it settled on parameters slower than the defaults;
 *   done      the parameters kept, for good.
 *
 * With W <= 5 that is at most 5 + 6 + 4 + 4 = 19 samples before the last change, within
 * the 20 the issue allows. A sample is RING_AUTOTUNE_CYCLES_PER_SAMPLE cycles that moved
 * allreduce data, timed from the cycle that applied its parameters to the end of its
 * last cycle: the program's time between steps counts too, as it does for the program.
 *
 * The grids: the engine runs a cycle's batches one after another, so a threshold only
 * trades a copy into and out of the fusion buffer against one collective's latency per
 * batch; 0 (no fusion, no copies) and 1 to 128 MiB in steps of 4 span "every tensor
 * alone" to "a ResNet-50 step in one batch" (Horovod searches 0 to 64 MiB). On 2 cores
 * bench/engine's step ran faster unfused than fused, so 0 must be a candidate. The cycle time
 * bounds how long the engine waits for a burst of submissions to end (engine_cycle.c: settle): 1 ms
 * is the default, and beyond 10 ms a step would wait longer than it computes on small models. 0 ms
 * is not a candidate: ranks waiting for each other would then cycle without pause.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autotune.h"
#include "engine/engine_impl.h"

#define MIB ((uint64_t)1 << 20)

const uint64_t ring__tune_fusion_grid[RING__TUNE_NFUSION] = {0,        1 * MIB,  4 * MIB,
                                                             16 * MIB, 64 * MIB, 128 * MIB};
const uint32_t ring__tune_cycle_grid[RING__TUNE_NCYCLE] = {1, 2, 5, 10};

static const char *const phase_names[] = {"warmup", "fusion", "cycle", "confirm", "done"};

/* ---- the search (pure) ---- */

void ring__tune_search_init(struct ring__tune_search *s, int warmup,
                            struct ring__tune_params initial)
{
    memset(s, 0, sizeof(*s));
    s->warmup = warmup;
    s->phase = warmup > 0 ? RING__TUNE_WARMUP : RING__TUNE_FUSION;
    s->initial = initial;
    s->best = initial;
    s->best_score = -1.0;
}

struct ring__tune_params ring__tune_search_current(const struct ring__tune_search *s)
{
    struct ring__tune_params p = s->initial;

    switch (s->phase) {
    case RING__TUNE_FUSION:
        p.fusion_bytes = ring__tune_fusion_grid[s->idx];
        break;
    case RING__TUNE_CYCLE:
        p.fusion_bytes = s->best.fusion_bytes;
        p.cycle_ms = ring__tune_cycle_grid[s->idx];
        break;
    case RING__TUNE_CONFIRM:
        p = s->idx % 2 == 0 ? s->best : s->initial;
        break;
    case RING__TUNE_DONE:
        p = s->best;
        break;
    default:
        break;
    }
    return p;
}

static int same_params(struct ring__tune_params a, struct ring__tune_params b)
{
    return a.fusion_bytes == b.fusion_bytes && a.cycle_ms == b.cycle_ms;
}

/* The end of the confirm phase: the winner stays only if it held up. */
static void confirm_end(struct ring__tune_search *s)
{
    double best = s->confirm_best / RING__TUNE_NCONFIRM;
    double init = s->confirm_init / RING__TUNE_NCONFIRM;
    if (best > init * (1 + RING__TUNE_MARGIN)) {
        s->best_score = best;
    } else {
        s->best = s->initial;
        s->best_score = init;
        s->kept_initial = 1;
    }
}

int ring__tune_search_feed(struct ring__tune_search *s, double score)
{
    if (s->phase == RING__TUNE_DONE)
        return 1;
    s->samples++;
    if (s->phase == RING__TUNE_CONFIRM) {
        if (s->idx % 2 == 0)
            s->confirm_best += score;
        else
            s->confirm_init += score;
        if (++s->idx >= 2 * RING__TUNE_NCONFIRM) {
            confirm_end(s);
            s->phase = RING__TUNE_DONE;
            s->idx = 0;
        }
        return s->phase == RING__TUNE_DONE;
    }
    /* Strictly better only: on a tie the earlier candidate stays, so the outcome depends
     * on the scores alone. */
    if (s->phase != RING__TUNE_WARMUP && score > s->best_score) {
        s->best = ring__tune_search_current(s);
        s->best_score = score;
    }
    s->idx++;
    if (s->phase == RING__TUNE_WARMUP && s->idx >= s->warmup) {
        s->phase = RING__TUNE_FUSION;
        s->idx = 0;
    } else if (s->phase == RING__TUNE_FUSION && s->idx >= RING__TUNE_NFUSION) {
        s->phase = RING__TUNE_CYCLE;
        s->idx = 0;
    } else if (s->phase == RING__TUNE_CYCLE && s->idx >= RING__TUNE_NCYCLE) {
        s->phase = same_params(s->best, s->initial) ? RING__TUNE_DONE : RING__TUNE_CONFIRM;
        s->idx = 0;
    }
    return s->phase == RING__TUNE_DONE;
}

/* ---- the engine's side ---- */

struct ring__autotune {
    int searching; /* rank 0 with RING_AUTOTUNE=1, until the search ends */
    struct ring__tune_search s;
    int cycles_per_sample;
    uint64_t cycle;                /* control rounds seen: the same count on every rank */
    struct ring__tune_params sent; /* rank 0: the parameters it asks for */
    int sending;                   /* rank 0: sent is not in force yet */
    int64_t window_us;             /* when the sample's parameters took effect */
    uint64_t window_bytes;         /* allreduced in the sample so far */
    int window_cycles;             /* cycles of the sample that moved data */
    FILE *csv;                     /* RING_AUTOTUNE_LOG, rank 0 */
};

static struct ring__tune_params in_force(const struct ring__engine *e)
{
    struct ring__tune_params p = {(uint64_t)e->fusion_threshold, (uint32_t)e->cycle_ms};
    return p;
}

/* Rank 0: asks every rank for the search's current parameters, if they are new. */
static void propose(struct ring__engine *e, struct ring__autotune *a)
{
    struct ring__tune_params want = ring__tune_search_current(&a->s);
    if (!same_params(want, in_force(e))) {
        a->sent = want;
        a->sending = 1;
    }
}

struct ring__autotune *ring__autotune_create(struct ring__engine *e)
{
    struct ring__autotune *a = calloc(1, sizeof(*a));
    const long *v = e->ctx->tune.v;
    const char *path = getenv("RING_AUTOTUNE_LOG");

    if (a == NULL)
        return NULL;
    if (e->ctx->rank != 0 || !v[RING__K_AUTOTUNE])
        return a;
    a->searching = 1;
    a->cycles_per_sample = (int)v[RING__K_AUTOTUNE_CYCLES_PER_SAMPLE];
    ring__tune_search_init(&a->s, (int)v[RING__K_AUTOTUNE_WARMUP_SAMPLES], in_force(e));
    if (path != NULL && *path != '\0') {
        a->csv = fopen(path, "w");
        if (a->csv == NULL)
            ring__log(RING_LOG_WARNING, "cannot write RING_AUTOTUNE_LOG=%s: %s; no CSV", path,
                      strerror(errno));
        else
            fprintf(a->csv, "sample,phase,fusion_threshold_bytes,cycle_time_ms,cycles,bytes,"
                            "seconds,score_bytes_per_s\n");
    }
    ring__log(RING_LOG_INFO,
              "autotune: tuning the fusion threshold and the cycle time from %zu bytes, %d ms "
              "(%d warm-up samples, then %d, each of %d cycles that move data)",
              e->fusion_threshold, e->cycle_ms, a->s.warmup, RING__TUNE_NFUSION + RING__TUNE_NCYCLE,
              a->cycles_per_sample);
    propose(e, a); /* without warm-up, the first candidate starts at once */
    return a;
}

void ring__autotune_destroy(struct ring__autotune *a)
{
    if (a == NULL)
        return;
    if (a->csv != NULL)
        fclose(a->csv);
    free(a);
}

void ring__autotune_put(struct ring__autotune *a, uint64_t *words)
{
    /* All ones is the AND's identity: only rank 0's request survives. */
    words[0] = words[1] = ~(uint64_t)0;
    if (a != NULL && a->sending) {
        words[0] = a->sent.fusion_bytes;
        words[1] = a->sent.cycle_ms;
    }
}

void ring__autotune_take(struct ring__engine *e, const uint64_t *words, int64_t now_us)
{
    struct ring__autotune *a = e->autotune;
    char args[160];

    if (a == NULL)
        return;
    a->cycle++;
    if (words[0] == ~(uint64_t)0 && words[1] == ~(uint64_t)0)
        return;
    /* The same on every rank, before this cycle runs anything. cycle_ms came from rank 0's
     * table, which bounds it, but a word is a word: clamp to the table's range. */
    e->fusion_threshold = (size_t)words[0];
    e->cycle_ms = words[1] > 60000 ? 60000 : (int)words[1];
    ring__log(RING_LOG_INFO,
              "autotune: cycle %" PRIu64 ": fusion threshold %zu bytes, cycle time %d ms", a->cycle,
              e->fusion_threshold, e->cycle_ms);
    snprintf(args, sizeof(args),
             "\"cycle\":%" PRIu64 ",\"fusion_threshold_bytes\":%zu,\"cycle_time_ms\":%d", a->cycle,
             e->fusion_threshold, e->cycle_ms);
    ring__timeline_instant(e->timeline, "autotune", "autotune", now_us, args);
    if (a->sending && same_params(a->sent, in_force(e))) {
        a->sending = 0;
        a->window_us = now_us;
        a->window_bytes = 0;
        a->window_cycles = 0;
    }
}

static uint64_t allreduced_bytes(const struct ring__response *r, int n)
{
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].error == 0 && r[i].req.type == RING__ALLREDUCE)
            bytes += r[i].req.count * ring_dtype_size((ring_dtype_t)r[i].req.dtype);
    }
    return bytes;
}

/* Rank 0: the sample is complete; score it and move the search on. */
static void end_sample(struct ring__engine *e, struct ring__autotune *a, int64_t now_us)
{
    struct ring__tune_params p = ring__tune_search_current(&a->s);
    double secs = (double)(now_us - a->window_us) / 1e6;
    double score = secs > 0 ? (double)a->window_bytes / secs : 0;
    int phase = a->s.phase, done;

    if (a->csv != NULL) {
        fprintf(a->csv, "%d,%s,%" PRIu64 ",%u,%d,%" PRIu64 ",%.6f,%.0f\n", a->s.samples + 1,
                phase_names[phase], p.fusion_bytes, p.cycle_ms, a->window_cycles, a->window_bytes,
                secs, score);
        fflush(a->csv);
    }
    ring__log(RING_LOG_DEBUG,
              "autotune: sample %d (%s): fusion threshold %" PRIu64 " bytes, cycle time %u ms: "
              "%.1f MB/s",
              a->s.samples + 1, phase_names[phase], p.fusion_bytes, p.cycle_ms, score / 1e6);
    done = ring__tune_search_feed(&a->s, score);
    a->window_us = now_us;
    a->window_bytes = 0;
    a->window_cycles = 0;
    if (done) {
        a->searching = 0;
        ring__log(RING_LOG_INFO,
                  "autotune: done after %d samples: fusion threshold %" PRIu64
                  " bytes, cycle time %u ms (%.1f MB/s allreduced)%s",
                  a->s.samples, a->s.best.fusion_bytes, a->s.best.cycle_ms, a->s.best_score / 1e6,
                  a->s.kept_initial ? "; the starting parameters, as the best sample's did not "
                                      "beat them when measured again"
                                    : "");
        if (e->timeline != NULL) {
            char args[160];
            snprintf(args, sizeof(args),
                     "\"samples\":%d,\"fusion_threshold_bytes\":%" PRIu64
                     ",\"cycle_time_ms\":%u,\"score_bytes_per_s\":%.0f",
                     a->s.samples, a->s.best.fusion_bytes, a->s.best.cycle_ms, a->s.best_score);
            ring__timeline_instant(e->timeline, "autotune", "autotune done", now_us, args);
        }
    }
    propose(e, a);
}

void ring__autotune_cycle_end(struct ring__engine *e, const struct ring__response *fired,
                              int nfired, const struct ring__response *resp, int nresp,
                              uint64_t fast_bytes, int64_t now_us)
{
    struct ring__autotune *a = e->autotune;
    uint64_t bytes;

    /* Nothing to measure while a choice is on its way: the sample starts when it lands. */
    if (a == NULL || !a->searching || a->sending)
        return;
    bytes = allreduced_bytes(fired, nfired) + allreduced_bytes(resp, nresp) + fast_bytes;
    if (bytes == 0)
        return;
    if (a->window_us == 0)
        a->window_us = now_us; /* the very first sample, at the starting parameters */
    a->window_bytes += bytes;
    if (++a->window_cycles >= a->cycles_per_sample)
        end_sample(e, a, now_us);
}
