/* SPDX-License-Identifier: Apache-2.0 */
/*
 * autotune.h - RING_AUTOTUNE=1: the fusion threshold and the cycle time tuned online.
 *
 * Two parts. The search (ring__tune_search_*) is pure: it takes each sample's score and
 * says which parameters the next sample runs with; no clock, no I/O. The engine's side
 * (ring__autotune_*) measures samples on rank 0, and moves rank 0's choice to every rank
 * inside the control round of the next cycle, where every rank applies it before running
 * that cycle's collectives: the ranks cannot disagree on the fusion threshold, which
 * decides how they batch their tensors.
 */
#ifndef RING_AUTOTUNE_H
#define RING_AUTOTUNE_H

#include <stdint.h>
#include <stdio.h>

struct ring__engine;
struct ring__response;

struct ring__tune_params {
    uint64_t fusion_bytes;
    uint32_t cycle_ms;
};

/* The candidates (autotune.c says why these). */
#define RING__TUNE_NFUSION 6
#define RING__TUNE_NCYCLE  4
extern const uint64_t ring__tune_fusion_grid[RING__TUNE_NFUSION];
extern const uint32_t ring__tune_cycle_grid[RING__TUNE_NCYCLE];

/* The most samples a search takes, warm-up included (RING_AUTOTUNE_WARMUP_SAMPLES <= 5). */
/* The re-measurement of a winner against the starting parameters: samples of each, taken
 * in turn, and by how much the winner's mean must beat the start's to be kept. */
#define RING__TUNE_NCONFIRM 2
#define RING__TUNE_MARGIN   0.05

#define RING__TUNE_MAX_SAMPLES                                                                     \
    (5 + RING__TUNE_NFUSION + RING__TUNE_NCYCLE + 2 * RING__TUNE_NCONFIRM)

enum ring__tune_phase {
    RING__TUNE_WARMUP,
    RING__TUNE_FUSION,
    RING__TUNE_CYCLE,
    RING__TUNE_CONFIRM,
    RING__TUNE_DONE
};

struct ring__tune_search {
    int warmup;  /* warm-up samples in all */
    int phase;   /* enum ring__tune_phase */
    int idx;     /* the sample's index within its phase */
    int samples; /* samples fed so far, warm-up included */
    struct ring__tune_params initial, best;
    double best_score;                 /* < 0: nothing scored yet */
    double confirm_best, confirm_init; /* the confirm phase's sums of scores */
    int kept_initial;                  /* done: the winner did not hold up; the start stays */
};

/* Starts a search from the parameters in force, with warmup samples discarded first. */
void ring__tune_search_init(struct ring__tune_search *s, int warmup,
                            struct ring__tune_params initial);
/* The parameters the current sample runs with (after init: the first sample's). */
struct ring__tune_params ring__tune_search_current(const struct ring__tune_search *s);
/*
 * Feeds the score (bytes per second) of the sample that ran with
 * ring__tune_search_current(s) and moves on. Returns 1 when the search has ended (from
 * then on current() is the best sample's parameters and stays so), else 0. Feeding an
 * ended search changes nothing.
 */
int ring__tune_search_feed(struct ring__tune_search *s, double score);

/* Control words every cycle carries for the tuner (always, so that every rank's control
 * vector has the same length whatever its environment says). */
#define RING__TUNE_WORDS 2

struct ring__autotune;

/*
 * Creates the engine's tuner state. On rank 0 with RING_AUTOTUNE=1 it searches, writing
 * a CSV of the samples to RING_AUTOTUNE_LOG when set (a file that cannot be opened is a
 * warning); elsewhere it only applies what rank 0 sends. Returns NULL when out of memory.
 * Free with ring__autotune_destroy (accepts NULL).
 */
struct ring__autotune *ring__autotune_create(struct ring__engine *e);
void ring__autotune_destroy(struct ring__autotune *a);
/* Fills this rank's tuner words of the control vector (before the AND). */
void ring__autotune_put(struct ring__autotune *a, uint64_t *words);
/* Applies the ANDed words: rank 0's choice, if it sent one. Every rank, every cycle. */
void ring__autotune_take(struct ring__engine *e, const uint64_t *words, int64_t now_us);
/*
 * After a cycle ran its collectives (fired and negotiated responses, and fast_bytes moved
 * on the fast path): counts the allreduced bytes into rank 0's sample and, when a sample
 * is complete, scores it and picks the next parameters.
 */
void ring__autotune_cycle_end(struct ring__engine *e, const struct ring__response *fired,
                              int nfired, const struct ring__response *resp, int nresp,
                              uint64_t fast_bytes, int64_t now_us);

#endif /* RING_AUTOTUNE_H */
