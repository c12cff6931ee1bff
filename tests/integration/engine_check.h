/* SPDX-License-Identifier: Apache-2.0 */
/* What engine_check.c and engine_check_paths.c share: this rank, the clock, a generator,
 * and the scenarios that live in engine_check_paths.c. */
#ifndef ENGINE_CHECK_H
#define ENGINE_CHECK_H

extern int rank, size;

double now_s(void);
unsigned rnd(unsigned *s); /* a small LCG: the same sequence on every rank from one seed */

void mode_blocking(void);
void mode_fast(void);
void mode_barrier(void);
void mode_grouped(void);
void mode_grouped_big(void);

#endif /* ENGINE_CHECK_H */
