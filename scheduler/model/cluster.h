/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster.h - the cluster as the scheduler sees it: any number of nodes, each with worker
 * slots (CPUs) and GPUs, and no fixed caps. A placement says where one attempt runs: a list
 * of (node, workers, GPU ids). A usage records which slots and GPUs are taken, so that
 * policies can plan on a copy of it without touching the real one.
 *
 * A worker of a job takes cpus_per_worker slots and gpus_per_worker GPUs, all on one node.
 *
 * Ownership: every struct here owns its arrays; *_free() functions accept NULL. Functions
 * that allocate return -1 with errno ENOMEM when memory runs out.
 */
#ifndef RINGD_CLUSTER_H
#define RINGD_CLUSTER_H

#include <stddef.h>

struct cluster_node {
    char name[64]; /* host name (local), or the Slurm node name */
    int slots;     /* worker slots: CPUs */
    int gpus;      /* GPUs, with ids 0 .. gpus-1 on this node */
    int offline;   /* out of service (Slurm: down, drained, not responding): nothing new is
                    * placed there, while what runs there stays accounted for until it ends */
};

struct cluster {
    int nnodes;
    struct cluster_node *node; /* nnodes entries */
    long slots, gpus;          /* totals over the nodes */
    int *gpu_base;             /* node n's GPU g is bit gpu_base[n] + g of a usage */
};

/* An empty cluster of nnodes nodes named "node<i>", each with slots and gpus, or NULL with
 * errno ENOMEM. cluster_add_node appends one more; returns 0 or -1 (ENOMEM). */
struct cluster *cluster_create(int nnodes, int slots, int gpus);
int cluster_add_node(struct cluster *c, const char *name, int slots, int gpus);
void cluster_free(struct cluster *c);

/* Where one attempt runs. parts are in rank order: the first part's workers are ranks 0..,
 * and part p's GPUs are gpu[gpu_off .. gpu_off + ngpus - 1], gpus_per_worker per worker in
 * worker order. */
struct placement_part {
    int node;
    int workers;
    int ngpus;
    int gpu_off;
};

struct placement {
    int nparts;
    int workers; /* the sum over parts */
    int ngpus;   /* the sum over parts */
    struct placement_part *part;
    int *gpu; /* GPU ids on their node (not usage bits) */
};

/* Releases p's arrays and zeroes it (p itself is the caller's). Accepts an empty p. */
void placement_clear(struct placement *p);
/* Copies src into dst (cleared first). Returns 0 or -1 (ENOMEM; dst is then empty). */
int placement_copy(struct placement *dst, const struct placement *src);
/* 1 when a and b use the same GPUs and the same workers on the same nodes. */
int placement_equal(const struct placement *a, const struct placement *b);
/* "node0:2,node1:2" into buf (truncated to len), for logs and ringrun's -H. */
void placement_hosts(const struct cluster *c, const struct placement *p, char *buf, size_t len);
/* "0,1;2,3": the GPU ids per part, parts separated by ';' ("" when none). */
void placement_gpus(const struct placement *p, char *buf, size_t len);

/* What is taken on a cluster. */
struct usage {
    const struct cluster *c; /* borrowed */
    int *slots_free;         /* per node */
    int *gpus_free;          /* per node */
    unsigned char *gpu_busy; /* per GPU, indexed by cluster.gpu_base[node] + id */
    long slots_left, gpus_left;
};

/* A usage of c with nothing taken. Returns 0 or -1 (ENOMEM). */
int usage_init(struct usage *u, const struct cluster *c);
/* A new usage that is a copy of src (usage_init then usage_copy, without filling what the
 * copy overwrites: a policy makes one per pass). Returns 0 or -1 (ENOMEM). */
int usage_init_copy(struct usage *u, const struct usage *src);
void usage_clear(struct usage *u);
/* Marks everything free again. */
void usage_reset(struct usage *u);
/* dst (initialised on the same cluster) becomes a copy of src. */
void usage_copy(struct usage *dst, const struct usage *src);
/* Marks p's slots and GPUs taken (add > 0) or free again (add < 0); a worker takes cpw
 * slots. Returns 0, or -1 with errno EBUSY (taking what is taken or freeing what is free:
 * the usage is then unchanged). */
int usage_apply(struct usage *u, const struct placement *p, int cpw, int add);
/* usage_apply without the check, for placements known to be consistent with u (a running
 * job's own, on a usage built from disjoint ones): a pass over thousands of jobs. */
void usage_take(struct usage *u, const struct placement *p, int cpw, int add);
/* 1 when p uses a node that is offline. */
int placement_offline(const struct cluster *c, const struct placement *p);
/* Takes every slot and GPU still free in u on the offline nodes of its cluster, in u and in
 * also (NULL: none), so that plans made on either leave them alone. For a pass's scratch
 * usages: there is no undoing it. */
void usage_block_offline(struct usage *u, struct usage *also);

/* 1 when p's slots and GPUs are all free in u. */
int usage_fits(const struct usage *u, const struct placement *p, int cpw);

/* How many workers of (cpw, gpw) could run on node n as u leaves it (0 when offline). */
int usage_node_room(const struct usage *u, int n, int cpw, int gpw);

/*
 * Finds room for workers workers of cpw slots and gpw GPUs each, on as few nodes as it can:
 * the fullest single node that fits them all (best fit, which keeps large holes for large
 * jobs), otherwise the nodes with the most room first; never on an offline node. Fills *out
 * (cleared first) without taking anything. Returns 0, or -1 with errno ENOSPC (no room) or ENOMEM.
 */
int usage_place(const struct usage *u, int workers, int cpw, int gpw, struct placement *out);
/*
 * The placement of p grown or shrunk to workers: a shrink keeps p's first workers, a grow
 * keeps all of p and adds room found in u (p's own resources must already be free or
 * counted as p's in u: they are not taken again). Returns 0, or -1 (ENOSPC, ENOMEM).
 */
int usage_resize(const struct usage *u, const struct placement *p, int workers, int cpw, int gpw,
                 struct placement *out);

/* The most workers of (cpw, gpw) the empty cluster can hold: what a job may ask for. */
long cluster_capacity(const struct cluster *c, int cpw, int gpw);

#endif /* RINGD_CLUSTER_H */
