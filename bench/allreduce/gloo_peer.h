/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gloo_peer.h - C calls into Gloo for bench_allreduce.c (gloo_peer.cc). Each returns 0, or
 * -1 after printing Gloo's error to stderr.
 */
#ifndef RING_BENCH_GLOO_PEER_H
#define RING_BENCH_GLOO_PEER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Connects every rank (see gloo_peer.cc for the environment); fills rank and size. */
int gloo_peer_init(int *rank, int *size);
void gloo_peer_finish(void);
/* Sums count floats of every rank's in into out (ring algorithm). */
int gloo_peer_allreduce(float *in, float *out, size_t count);
/* Replaces *v by its maximum over the ranks. */
int gloo_peer_max(double *v);
int gloo_peer_barrier(void);

#ifdef __cplusplus
}
#endif

#endif
