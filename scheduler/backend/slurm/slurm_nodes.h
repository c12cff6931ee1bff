/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slurm_nodes.h - Slurm's nodes as ringd sees them: the nodes of a partition with their
 * CPUs and GPUs as a cluster (cluster.h), which of them can take work now, where a running
 * job was placed, and who holds each GPU. Each call is one or two RPCs to slurmctld
 * (slurm_load_node, slurm_load_job); backend_slurm.c calls them from the scheduler's
 * thread. partition "" means every node Slurm has.
 */
#ifndef RINGD_SLURM_NODES_H
#define RINGD_SLURM_NODES_H

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"
#include "scheduler/model/cluster.h"

/*
 * The partition's nodes as a new cluster in *out, those down, drained or not responding
 * marked offline; *max_cpus and *max_gpus get the largest node's. Returns 0, or -1 with err
 * (errno EIO when slurmctld did not answer).
 */
int slurm_nodes_describe(const char *partition, struct cluster **out, int *max_cpus, int *max_gpus,
                         struct error *err);

/* Marks each node of cl offline or not as Slurm sees it now; a node gone from the
 * partition is offline. Returns 0, or -1 with err. */
int slurm_nodes_states(const char *partition, struct cluster *cl, struct error *err);

/*
 * Where running Slurm job jid runs, in c's node indexes: its nodes in Slurm's order, the
 * workers of each (tasks_per_node on each node, the rest on the last) and the GPU ids
 * Slurm gave it. Returns 0, or -1 when it is not running or runs on a node c lacks.
 */
int slurm_nodes_placement(uint32_t jid, const struct cluster *c, struct placement *out);

/* {"nodes": [...]}: each node with its state, CPUs, GPUs and the jobs that hold them
 * (ringd's by their ringd job id, others as "slurm:ID"), or {"error": "..."}. */
json_t *slurm_nodes_json(const char *partition);

#endif /* RINGD_SLURM_NODES_H */
