/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trace.h - measured training traces in the format of the Pollux simulator (Qiao et al.,
 * OSDI'21), for ringsim: one folder per application with
 *   placements.csv   placement,local_bsz,step_time,sync_time (a digit per node: GPUs used)
 *   scalability.csv  num_nodes,num_replicas,local_bsz,step_time,sync_time
 *   validation-B.csv progress,iteration,metric,grad_sqr,grad_var (one row per epoch, at
 *                    global batch B)
 *
 * The job model (our own, from the format's documented meaning):
 * - A job trains at a fixed global batch M for a number of epochs (per application).
 *   Statistical progress is counted in iterations of the smallest validated batch M0: epoch
 *   e ends when progress reaches P(e), the smallest `progress` any table gives for it.
 * - One iteration at M does gain_e(M) = (var + sqr) / (var / (M / M0) + sqr) of progress,
 *   with the gradient statistics of epoch e interpolated between the validated batches
 *   around M. So the job needs sum_e (P(e+1) - P(e)) / gain_e(M) iterations, whatever its
 *   placement.
 * - An iteration on n GPUs takes step_time at local batch ceil(M / n) (split into gradient
 *   accumulation steps above the largest measured local batch), looked up for that exact
 *   placement and interpolated over local_bsz, or else interpolated over (nodes, replicas,
 *   local_bsz) from all the measurements.
 */
#ifndef RINGD_TRACE_H
#define RINGD_TRACE_H

#include <stddef.h>

struct trace_app;

/*
 * Loads dir/name (a folder of the format above). epochs is how many epochs a job runs
 * (0: as many as the validation tables have); max_local_bsz caps the per-GPU batch (0: the
 * largest measured). Returns NULL with a message in err (errlen bytes).
 */
struct trace_app *trace_load(const char *dir, const char *name, int epochs, int max_local_bsz,
                             char *err, size_t errlen);
void trace_free(struct trace_app *a);
const char *trace_name(const struct trace_app *a);

/* Iterations a job at global batch M needs to finish. */
double trace_iterations(const struct trace_app *a, int batch);
/* Seconds per iteration at global batch M on a placement of nnodes nodes with gpus[i] GPUs
 * on node i (in rank order); < 0 when M cannot be split over that many GPUs. */
double trace_step_time(const struct trace_app *a, int batch, const int *gpus, int nnodes);
/* Seconds per iteration with a per-GPU batch of local (accumulating above the largest
 * measured local batch) on that placement: Horovod's way, where the global batch grows
 * with the GPUs. < 0 when local < 1. */
double trace_step_time_local(const struct trace_app *a, int local, const int *gpus, int nnodes);
/* Epochs a job runs; the progress mark P(e) that ends epoch e-1 (P(0) = 0, in iterations of
 * the smallest validated batch); and the progress one iteration at global batch M makes in
 * epoch e, gain_e(M). */
int trace_epochs(const struct trace_app *a);
double trace_progress(const struct trace_app *a, int epoch);
double trace_gain(const struct trace_app *a, int batch, int epoch);
/* The smallest measured per-GPU batch, and the largest one used without accumulation. */
void trace_local_range(const struct trace_app *a, double *min, double *max);
/* The largest validated global batch. */
int trace_max_batch(const struct trace_app *a);
/* The batch sizes with a validation table, ascending (*n of them; borrowed). */
const int *trace_batches(const struct trace_app *a, int *n);

#endif /* RINGD_TRACE_H */
