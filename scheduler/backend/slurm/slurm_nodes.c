/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slurm_nodes.c - Slurm's nodes as ringd's cluster, where Slurm placed a job, and who holds
 * each GPU (slurm_nodes.h), from slurm_load_node, slurm_load_partitions and slurm_load_job.
 */
#include <errno.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slurm_job.h"
#include "slurm_nodes.h"

static const char *slurm_err(void)
{
    return slurm_strerror(slurm_get_errno());
}

/* -1 with err saying why slurm_load_node failed, errno EIO (read before it is set). */
static int node_error(struct error *err)
{
    errprintf(err, "slurm_load_node: %s", slurm_err());
    errno = EIO;
    return -1;
}

/*
 * Slurm's nodes; with a partition configured, each node's "partitions" filled in (Slurm
 * leaves it empty unless the partitions are loaded too). Returns 0 or -1 (slurm errno).
 */
static int load_nodes(const char *partition, node_info_msg_t **out)
{
    partition_info_msg_t *parts = NULL;
    if (slurm_load_node(0, out, SHOW_ALL) != SLURM_SUCCESS)
        return -1;
    if (partition[0] == '\0')
        return 0;
    if (slurm_load_partitions(0, &parts, SHOW_ALL) != SLURM_SUCCESS) {
        slurm_free_node_info_msg(*out);
        *out = NULL;
        return -1;
    }
    slurm_populate_node_partitions(*out, parts);
    slurm_free_partition_info_msg(parts);
    return 0;
}

/* 1 when node n belongs to the configured partition (any partition when none is set). */
static int in_partition(const char *partition, const node_info_t *n)
{
    size_t len = strlen(partition);
    const char *p = n->partitions;
    if (len == 0)
        return 1;
    while (p != NULL && *p) {
        if (strncmp(p, partition, len) == 0 && (p[len] == ',' || p[len] == '\0'))
            return 1;
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
    }
    return 0;
}

/* A node that can take work: not down, drained, draining or failing. */
static int node_usable(const node_info_t *n)
{
    uint32_t base = n->node_state & NODE_STATE_BASE;
    return base != NODE_STATE_DOWN && base != NODE_STATE_FUTURE && base != NODE_STATE_UNKNOWN &&
           !(n->node_state & (NODE_STATE_DRAIN | NODE_STATE_FAIL | NODE_STATE_NO_RESPOND));
}

int slurm_nodes_describe(const char *partition, struct cluster **out, int *max_cpus_out,
                         int *max_gpus_out, struct error *err)
{
    node_info_msg_t *msg = NULL;
    struct cluster *cl;
    int max_cpus = 0, max_gpus = 0;

    if (load_nodes(partition, &msg) < 0)
        return node_error(err);
    if ((cl = cluster_create(0, 0, 0)) == NULL) {
        slurm_free_node_info_msg(msg);
        return errno = ENOMEM, errprintf(err, "out of memory");
    }
    for (uint32_t i = 0; i < msg->record_count; i++) {
        const node_info_t *n = &msg->node_array[i];
        int gpus;
        if (n->name == NULL || !in_partition(partition, n))
            continue;
        gpus = slurm_gres_count(n->gres, "gpu");
        if (cluster_add_node(cl, n->name, n->cpus, gpus) < 0) {
            cluster_free(cl);
            slurm_free_node_info_msg(msg);
            return errno = ENOMEM, errprintf(err, "out of memory");
        }
        cl->node[cl->nnodes - 1].offline = !node_usable(n);
        if (n->cpus > max_cpus)
            max_cpus = n->cpus;
        if (gpus > max_gpus)
            max_gpus = gpus;
    }
    slurm_free_node_info_msg(msg);
    *max_cpus_out = max_cpus;
    *max_gpus_out = max_gpus;
    *out = cl;
    return 0;
}

int slurm_nodes_states(const char *partition, struct cluster *cl, struct error *err)
{
    node_info_msg_t *msg = NULL;
    unsigned char *seen = calloc((size_t)cl->nnodes + 1, 1);

    if (seen == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    if (load_nodes(partition, &msg) < 0) {
        free(seen);
        return node_error(err);
    }
    for (uint32_t i = 0; i < msg->record_count; i++) {
        const node_info_t *n = &msg->node_array[i];
        if (n->name == NULL || !in_partition(partition, n))
            continue;
        for (int k = 0; k < cl->nnodes; k++) {
            if (strcmp(cl->node[k].name, n->name) == 0) {
                seen[k] = 1 + node_usable(n);
                break;
            }
        }
    }
    slurm_free_node_info_msg(msg);
    /* A node gone from the partition is out of service as far as ringd is concerned. */
    for (int k = 0; k < cl->nnodes; k++)
        cl->node[k].offline = seen[k] != 2;
    free(seen);
    return 0;
}

/* The nodes come in Slurm's order, which is the order of gres_detail_str. */
int slurm_nodes_placement(uint32_t jid, const struct cluster *c, struct placement *out)
{
    job_info_msg_t *msg = NULL;
    const slurm_job_info_t *j;
    hostlist_t hl = NULL;
    char *name;
    int nnodes, left, per, ngpus = 0, rc = -1;

    memset(out, 0, sizeof(*out));
    if (slurm_load_job(&msg, jid, SHOW_ALL | SHOW_DETAIL) != SLURM_SUCCESS)
        return -1;
    if (msg->record_count != 1)
        goto done;
    j = &msg->job_array[0];
    if ((j->job_state & JOB_STATE_BASE) != JOB_RUNNING || j->nodes == NULL || j->num_nodes < 1)
        goto done; /* pending: Slurm has not placed it yet */
    nnodes = (int)j->num_nodes;
    left = (int)j->num_tasks;
    per = j->ntasks_per_node > 0 && j->ntasks_per_node != (uint16_t)NO_VAL16
              ? j->ntasks_per_node
              : (left + nnodes - 1) / nnodes;
    out->part = calloc((size_t)nnodes, sizeof(*out->part));
    out->gpu = calloc((size_t)nnodes * 64 + 1, sizeof(int));
    if (out->part == NULL || out->gpu == NULL || (hl = slurm_hostlist_create(j->nodes)) == NULL)
        goto done;
    for (int k = 0; k < nnodes && (name = slurm_hostlist_shift(hl)) != NULL; k++) {
        struct placement_part *pp = &out->part[out->nparts];
        int n = 0, idx[64], cnt = 0;
        while (n < c->nnodes && strcmp(c->node[n].name, name) != 0)
            n++;
        free(name);
        if (n == c->nnodes)
            goto done; /* a node ringd does not count as its own (another partition) */
        pp->node = n;
        pp->workers = k == nnodes - 1 ? left : (left < per ? left : per);
        left -= pp->workers;
        if (j->gres_detail_str != NULL && (uint32_t)k < j->gres_detail_cnt)
            cnt = slurm_gres_indexes(j->gres_detail_str[k], "gpu", idx, 64);
        pp->gpu_off = ngpus;
        for (int g = 0; g < cnt; g++)
            out->gpu[ngpus++] = idx[g];
        pp->ngpus = cnt;
        out->workers += pp->workers;
        out->ngpus += cnt;
        out->nparts++;
    }
    rc = out->nparts == nnodes && out->workers == (int)j->num_tasks ? 0 : -1;
done:
    if (hl != NULL)
        slurm_hostlist_destroy(hl);
    slurm_free_job_info_msg(msg);
    if (rc < 0)
        placement_clear(out);
    return rc;
}

/* For GET /v1/cluster. ringd's attempts are named by the ringd job, from the comment ringd
 * gives them. */
json_t *slurm_nodes_json(const char *partition)
{
    node_info_msg_t *nodes = NULL;
    job_info_msg_t *jobs = NULL;
    json_t *out;

    if (load_nodes(partition, &nodes) < 0)
        return json_pack("{s:s}", "error", slurm_err());
    if (slurm_load_jobs(0, &jobs, SHOW_ALL | SHOW_DETAIL) != SLURM_SUCCESS)
        jobs = NULL;
    out = json_array();
    for (uint32_t i = 0; i < nodes->record_count; i++) {
        const node_info_t *n = &nodes->node_array[i];
        int ngpus;
        json_t *gpus, *held = json_array();
        if (n->name == NULL || !in_partition(partition, n))
            continue;
        ngpus = slurm_gres_count(n->gres, "gpu");
        gpus = json_array();
        for (int g = 0; g < ngpus; g++)
            json_array_append_new(gpus, json_pack("{s:i, s:n}", "id", g, "job"));
        for (uint32_t k = 0; jobs != NULL && k < jobs->record_count; k++) {
            const slurm_job_info_t *j = &jobs->job_array[k];
            uint32_t base = j->job_state & JOB_STATE_BASE;
            char ringd_job[64] = "", holder[80];
            int idx[64], cnt;
            if (base != JOB_RUNNING && base != JOB_SUSPENDED)
                continue;
            if (j->comment != NULL && sscanf(j->comment, "ringd job %63s attempt", ringd_job) == 1)
                snprintf(holder, sizeof(holder), "%s", ringd_job);
            else
                snprintf(holder, sizeof(holder), "slurm:%u", j->job_id);
            /* gres_detail_str has one entry per node of the job, in the order of node_inx's
             * index pairs: count along them to n. */
            {
                int nth = -1, seen = 0;
                for (int p = 0; j->node_inx != NULL && j->node_inx[p] >= 0; p += 2) {
                    for (int x = j->node_inx[p]; x <= j->node_inx[p + 1]; x++, seen++) {
                        if (x == (int)i)
                            nth = seen;
                    }
                }
                if (nth < 0)
                    continue;
                json_array_append_new(
                    held, json_pack("{s:s, s:i}", "job", holder, "slurm_job_id", (int)j->job_id));
                if ((uint32_t)nth >= j->gres_detail_cnt || j->gres_detail_str == NULL)
                    continue;
                cnt = slurm_gres_indexes(j->gres_detail_str[nth], "gpu", idx, 64);
                for (int g = 0; g < cnt; g++) {
                    if (idx[g] < ngpus)
                        json_object_set_new(json_array_get(gpus, (size_t)idx[g]), "job",
                                            json_string(holder));
                }
            }
        }
        json_array_append_new(out, json_pack("{s:s, s:s, s:i, s:o, s:o}", "name", n->name, "state",
                                             node_usable(n) ? "up" : "down", "cpus", (int)n->cpus,
                                             "gpus", gpus, "jobs", held));
    }
    slurm_free_node_info_msg(nodes);
    if (jobs != NULL)
        slurm_free_job_info_msg(jobs);
    return json_pack("{s:o}", "nodes", out);
}
