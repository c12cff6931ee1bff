/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop_world.h - the scheduler loop's test world (loop_world.c): one log that the journal
 * ("J ...") and the backend ("B ...") write to in order, so that a test can check what
 * happened and that every change was journaled before the backend saw it; the sim backend;
 * and a resource manager that places attempts itself.
 */
#ifndef RING_TEST_LOOP_WORLD_H
#define RING_TEST_LOOP_WORLD_H

#include <stddef.h>

#include "scheduler/backend/sim/sim.h"
#include "scheduler/core/loop.h"

/* ---- the log ---- */

extern char logbuf[2000][256];
extern int nlog;
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The index of the first log line at or after from that starts with prefix, or -1. */
int find(int from, const char *prefix);
/* 1 when some log line starts with prefix and contains text. */
int has(const char *prefix, const char *text);
/* Prints the log (when a check is about to fail). */
void dump(void);
/* Every backend start of a job comes after the journal recorded it. */
void check_write_ahead(void);

/* ---- the journal and the backend ---- */

extern int fail_commit;   /* set: the journal's commits fail */
extern int manager_down;  /* set: starts fail with EAGAIN (slurmctld down) */
extern int manager_loses; /* attempts the manager loses (they end as lost) */
/* The sim backend's ops with start, signal and poll logged; a test may replace more. */
extern struct backend_ops logged;

/* ---- a resource manager that places attempts itself ---- */

/* Where the manager puts each job's attempts (node), and whether it has said so yet. */
struct placed_attempt {
    char job[16], id[64];
    int node, workers, gpw, release, told;
};
extern struct placed_attempt placed[8];
extern int nplaced;
extern int node_down[4]; /* set: the node is out of service */
int m_start(void *ctx, const struct backend_start *s, char *id, size_t idlen, struct error *err);
int m_poll(void *ctx, struct backend_event *out, int max);
int m_placement_of(void *ctx, const char *id, const struct cluster *c, struct placement *out);
int m_node_states(void *ctx, struct cluster *c, struct error *err);
/* job's attempts go to node; release: it says so only when manager_release(job). */
void manager_places(const char *job, int node, int release);
void manager_release(const char *job);

/* ---- a world ---- */

struct world {
    void *sim;
    struct loop *l;
};

/* A loop with policy on the sim backend with options, kill grace grace; the log, the
 * journal and the manager reset. */
void world_init(struct world *w, const char *policy, const char *options, double grace);
void world_free(struct world *w);
/* Submits job id for min..max workers of gpw GPUs each (and 1 slot), 2 restarts. */
void submit(struct world *w, const char *id, int min, int max, int gpw);
/* Runs the loop from event to event until the clock would pass until. */
void run_until(struct world *w, double until);

#endif /* RING_TEST_LOOP_WORLD_H */
