/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_sched - the wall time of one scheduling pass of ringd's loop (loop.c: snapshot,
 * policy, diff and apply) on a large simulated cluster, for each policy.
 *
 *   bench_sched [--nodes 1000] [--gpus-per-node 4] [--queued 10000] [--passes 21]
 *               [--policy fifo,priority,tiresias,dynamic] [--seed S] [--json]
 *
 * The cluster is the sim backend's (no processes). Jobs ask for 1, 2, 4, 8 or 16 GPUs in
 * the proportions of Philly's log (most ask for one). The bench submits jobs until the
 * cluster is full and --queued more wait behind them, runs the first pass (which places
 * the running ones: the "cold" figure), then times --passes further passes at the same
 * instant, each one forced, as a submission or an attempt's end forces one in ringd. The
 * steady passes are what a busy ringd pays per event. fifo, priority and tiresias run each
 * job at its size; dynamic (elastic) gets each job the range 1 .. 4 x its size, at most 64
 * (SIM_ELASTIC_MAX, ringsim's cap too). The loop is set up as ringsim's (sim_loop.h).
 *
 * Output: one row per policy, the median and worst of the steady passes and the cold pass,
 * as a table or one JSON object per row ({"bench":"sched","impl":policy,...}). The issue's
 * budget is 50 ms for 10,000 queued jobs on 1,000 nodes; budget_ratio is the median over it.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "scheduler/sim/sim_loop.h"

#define BUDGET_US 50000.0

/* ---- the bench ---- */

struct result {
    int running, queued, njobs;
    double cold_us, median_us, max_us;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A size in GPUs, in Philly's proportions (about 70% one GPU, then fewer at each doubling). */
static int philly_size(unsigned *seed)
{
    int r = rand_r(seed) % 100;
    return r < 70 ? 1 : r < 82 ? 2 : r < 92 ? 4 : r < 98 ? 8 : 16;
}

/* Submits job prefix<n> of size GPUs: that size, or for an elastic policy 1 .. 4 x size (at
 * most SIM_ELASTIC_MAX). Returns 0 or -1 (said on stderr). */
static int submit(struct loop *l, const struct policy_ops *p, const char *prefix, int n, int size)
{
    char id[32];
    struct loop_submit s = {
        .id = id, .min = size, .max = size, .gpw = 1, .cpw = 1, .submitted = -1};
    struct error err;
    if (p->elastic) {
        s.min = 1;
        s.max = 4 * size > SIM_ELASTIC_MAX ? SIM_ELASTIC_MAX : 4 * size;
    }
    snprintf(id, sizeof(id), "%s%d", prefix, n);
    if (loop_submit(l, &s, &err) < 0) {
        log_error("%s", err.text);
        return -1;
    }
    return 0;
}

static int run_policy(const struct policy_ops *p, int nodes, int gpn, int queued, int passes,
                      unsigned seed, struct result *out)
{
    /* The sim backend with no processes and a journal that keeps nothing: the pass's own
     * cost, not SQLite's. */
    struct sim_loop_config sc = {
        .nodes = nodes,
        .gpus_per_node = gpn,
        .slots_per_node = 2 * gpn,
        .start_s = 30,
        .policy = p,
        .kill_grace_s = 30,
    };
    struct sim_loop sl;
    struct error err;
    struct loop *l;
    void *sim;
    double *t = NULL;
    long capacity = (long)nodes * gpn, asked = 0;
    int rc = -1;

    if (sim_loop_create(&sc, &sl, &err) < 0) {
        log_error("%s", err.text);
        return -1;
    }
    l = sl.loop;
    sim = sl.sim;
    memset(out, 0, sizeof(*out));
    /* Enough to fill the cluster at the jobs' sizes, then `queued` more behind them. */
    for (int n = 0; asked < capacity; n++, out->njobs++) {
        int size = philly_size(&seed);
        if (submit(l, p, "j", n, size) < 0)
            goto done;
        asked += size;
    }
    for (int n = 0; n < queued; n++, out->njobs++) {
        if (submit(l, p, "q", n, philly_size(&seed)) < 0)
            goto done;
    }
    {
        double t0 = clock_mono_s();
        if (loop_pass(l) < 0)
            goto done;
        out->cold_us = (clock_mono_s() - t0) * 1e6;
    }
    /* Let the attempts reach their first progress report, so that the steady passes see
     * settled jobs, as a busy ringd does between events. */
    backend_sim_advance(sim, 31);
    loop_step(l);
    t = malloc((size_t)passes * sizeof(*t));
    if (t == NULL)
        goto done;
    for (int i = 0; i < passes; i++) {
        double t0 = clock_mono_s();
        if (loop_pass(l) < 0)
            goto done;
        t[i] = (clock_mono_s() - t0) * 1e6;
    }
    qsort(t, (size_t)passes, sizeof(*t), cmp_double);
    out->median_us = t[passes / 2];
    out->max_us = t[passes - 1];
    out->running = backend_sim_running(sim);
    out->queued = 0;
    for (int i = 0; i < loop_njobs(l); i++) {
        const struct loop_job *j = loop_job_at(l, i);
        out->queued += j != NULL && j->state == LOOP_QUEUED;
    }
    rc = 0;
done:
    free(t);
    sim_loop_destroy(&sl);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_sched [--nodes N] [--gpus-per-node G] [--queued Q] [--passes P]\n"
               "                   [--policy P[,P...]] [--seed S] [--json] [--version]\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"nodes", required_argument, NULL, 'n'},  {"gpus-per-node", required_argument, NULL, 'g'},
        {"queued", required_argument, NULL, 'q'}, {"passes", required_argument, NULL, 'p'},
        {"policy", required_argument, NULL, 'P'}, {"seed", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},         {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    int nodes = 1000, gpn = 4, queued = 10000, passes = 21, json = 0, c;
    unsigned seed = 1;
    char policies[256] = "", *save = NULL;

    log_init("bench_sched", LOG_STYLE_TEXT);
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        long v = 0;
        if (c == 'n' || c == 'g' || c == 'q' || c == 'p' || c == 's') {
            errno = 0;
            v = strtol(optarg, &end, 10);
            if (errno || *end || v < (c == 'q' ? 0 : 1) || v > 10000000) {
                log_error("--%s wants a positive integer, not '%s'",
                          c == 'n'   ? "nodes"
                          : c == 'g' ? "gpus-per-node"
                          : c == 'q' ? "queued"
                          : c == 'p' ? "passes"
                                     : "seed",
                          optarg);
                return 64;
            }
        }
        switch (c) {
        case 'n':
            nodes = (int)v;
            break;
        case 'g':
            gpn = (int)v;
            break;
        case 'q':
            queued = (int)v;
            break;
        case 'p':
            passes = (int)v;
            break;
        case 's':
            seed = (unsigned)v;
            break;
        case 'P':
            snprintf(policies, sizeof(policies), "%s", optarg);
            break;
        case 'j':
            json = 1;
            break;
        case 'V':
            printf("bench_sched %s\n", RING_VERSION_STRING);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 64;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 64;
    }
    if (!json)
        printf("%-9s %6s %6s %7s %7s | %11s %11s %11s %9s\n", "policy", "nodes", "gpus", "running",
               "queued", "median ms", "max ms", "cold ms", "med/50ms");
    if (policies[0] == '\0') { /* every policy of the table */
        const struct policy_ops *p;
        for (int i = 0; (p = policy_at(i)) != NULL; i++)
            snprintf(policies + strlen(policies), sizeof(policies) - strlen(policies), "%s%s",
                     i ? "," : "", p->name);
    }
    for (char *name = strtok_r(policies, ",", &save); name != NULL;
         name = strtok_r(NULL, ",", &save)) {
        const struct policy_ops *p = policy_find(name);
        struct result r;
        if (p == NULL) {
            log_error("no policy '%s' (there are %s)", name, policy_names());
            return 64;
        }
        if (run_policy(p, nodes, gpn, queued, passes, seed, &r) < 0)
            return 1;
        if (json)
            printf("{\"bench\":\"sched\",\"impl\":\"%s\",\"nodes\":%d,\"gpus\":%d,\"running\":%d,"
                   "\"queued\":%d,\"jobs\":%d,\"passes\":%d,\"median_us\":%.1f,\"max_us\":%.1f,"
                   "\"cold_us\":%.1f,\"budget_ratio\":%.3f}\n",
                   p->name, nodes, nodes * gpn, r.running, r.queued, r.njobs, passes, r.median_us,
                   r.max_us, r.cold_us, r.median_us / BUDGET_US);
        else
            printf("%-9s %6d %6d %7d %7d | %11.2f %11.2f %11.2f %9.3f\n", p->name, nodes,
                   nodes * gpn, r.running, r.queued, r.median_us / 1e3, r.max_us / 1e3,
                   r.cold_us / 1e3, r.median_us / BUDGET_US);
        fflush(stdout);
    }
    if (!json)
        printf("one pass = snapshot + policy + diff-and-apply, null journal; median and max of "
               "%d steady passes, cold = the first (places every running job); med/50ms = the "
               "median over the issue's budget\n",
               passes);
    return 0;
}
