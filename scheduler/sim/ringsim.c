/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ringsim - replays a workload against ringd's scheduling policies, in virtual time.
 *
 *   ringsim --workload W.csv --traces DIR --nodes 16 --gpus-per-node 4 --policy P[,P...]
 *           [--restart-cost 30] [--interval 60] [--json]
 *   ringsim --synthesize N --traces DIR --nodes 2500 --gpus-per-node 4 [--seed S] > W.csv
 *
 * It drives the scheduler loop ringd runs (loop.c: the same policies and the same diff and
 * apply) over the sim backend (sim_loop.h, backend_sim.c), with a journal that keeps
 * statistics instead of a database. Jobs follow the Pollux-format traces in DIR (trace.h): each
 * trains at the workload's fixed global batch, and a reallocation costs --restart-cost seconds
 * without progress, as in Pollux's simulator. fifo, priority and tiresias run each job at its
 * num_replicas; dynamic, which resizes jobs, gets each one the range from 1 GPU to the most
 * its batch can use (at most 64).
 *
 * The workload CSV has a header naming the columns name, time, application, num_replicas
 * and batch_size (any order; others are ignored). --synthesize writes one: N jobs sampled
 * from DIR/philly.csv, arriving at the rate of Pollux's workloads per GPU (workload.h).
 *
 * Output: per policy, the average, median and 99th percentile job completion time, the
 * makespan, the GPU utilisation (GPU-seconds allocated over GPUs x makespan) and the
 * restarts (attempts beyond each job's first), as a table or one JSON object per row.
 *
 * Exit status: 0 done, 64 bad usage, 65 a malformed workload or trace, 66 an input that
 * cannot be read, 70 a job never finished.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "sim_loop.h"
#include "workload.h"

#define EXIT_USAGE   64
#define EXIT_DATA    65
#define EXIT_NOINPUT 66
#define EXIT_STUCK   70

/* How a run is set up (the command line). */
struct setup {
    int nodes, gpn;
    double restart_cost, interval, hysteresis;
    int per_gpu_batch; /* dynamic keeps the per-GPU batch instead of the global one */
    int verbose;
    FILE *jobs; /* per-job results, or NULL */
};

struct run {
    struct workload *w;
    const struct setup *su;
    int elastic; /* the model counts progress at a per-GPU batch (see model_speed) */
    void *sim;
    int finished, failed;
    double gpu_s;
};

/* ---- the journal: statistics instead of a database ---- */

static struct wjob *wjob_of(struct run *r, const char *id)
{
    int i = atoi(id + 1);
    return i >= 0 && i < r->w->n ? &r->w->job[i] : NULL;
}

static int j_transition(void *j, const struct loop_job *job, const char *state, const char *type,
                        const char *message, const struct journal_sched *s, struct error *err)
{
    if (strcmp(state, "FAILED") == 0 || strcmp(state, "CANCELLED") == 0) {
        struct run *r = j;
        r->failed++;
        log_error("job %s %s: %s", job->id, state, message);
    }
    return 0;
}

static int j_started(void *j, const struct loop_job *job, int attempt, const struct placement *p,
                     const char *backend_id, const char *run_dir, const struct journal_sched *s,
                     struct error *err)
{
    struct wjob *w = wjob_of(j, job->id);
    w->started = job->started;
    w->gpus = p->ngpus;
    return 0;
}

static int j_ended(void *j, const struct loop_job *job, int attempt, int status, double stop_s,
                   const char *state, const char *type, const char *reason,
                   const struct journal_sched *s, struct error *err)
{
    struct run *r = j;
    struct wjob *w = wjob_of(r, job->id);
    double now = backend_sim_ops.now(r->sim); /* ringsim moves the clock to each event */
    if (w == NULL)
        return 0;
    if (attempt > 0 && w->gpus > 0) {
        r->gpu_s += (now - w->started) * w->gpus;
        w->gpus = 0;
    }
    if (strcmp(state, "SUCCEEDED") == 0) {
        w->done = 1;
        w->end = now;
        w->attempts = job->attempts;
        r->finished++;
    } else if (strcmp(state, "QUEUED") != 0) {
        r->failed++;
        log_error("job %s %s: %s", job->id, state, reason);
    }
    return 0;
}

/* ---- the job model ---- */

/*
 * fifo, priority and tiresias run a job at its num_replicas and fixed global batch: it
 * needs trace_iterations() iterations, at one per step time. dynamic resizes it, keeping
 * the per-GPU batch (Horovod's way): on n GPUs the global batch is n x local, and an
 * iteration makes gain_e(n x local) of progress in epoch e, so the model counts progress
 * and its speed changes at each epoch.
 */
static int model_speed(void *arg, const struct backend_start *s, double done, double *rate,
                       double *until, double *steps)
{
    struct run *r = arg;
    struct wjob *w = wjob_of(r, s->job_id);
    const struct trace_app *a;
    int gpus[4096], n = 0, local, e;
    double t;
    if (w == NULL)
        return -1;
    a = r->w->app[w->app];
    for (int i = 0; i < s->placement->nparts && n < 4096; i++)
        gpus[n++] = s->placement->part[i].ngpus;
    if (!r->elastic) {
        t = trace_step_time(a, w->batch, gpus, n);
        if (!(t > 0))
            return -1;
        *rate = 1.0 / t;
        *until = *steps = trace_iterations(a, w->batch);
        return 0;
    }
    local = (w->batch + w->replicas - 1) / w->replicas;
    t = trace_step_time_local(a, local, gpus, n);
    if (!(t > 0))
        return -1;
    for (e = 0; e + 1 < trace_epochs(a) && trace_progress(a, e + 1) <= done; e++)
        ;
    *rate = trace_gain(a, local * s->placement->workers, e) / t;
    *until = trace_progress(a, e + 1);
    *steps = trace_progress(a, trace_epochs(a));
    return 0;
}

/* ---- one run ---- */

struct result {
    const char *policy;
    int jobs, unfinished;
    double avg, p50, p99, makespan, util, wall;
    long restarts, passes;
};

static int cmp_double(const void *a, const void *b)
{
    return (*(const double *)a > *(const double *)b) - (*(const double *)a < *(const double *)b);
}

/* The loop's log lines are ringd's; ringsim reports errors, and with --verbose every
 * decision, each at its virtual time: a job's resizes can then be read as a history. */
static void say(void *arg, enum log_level level, const char *job, const char *msg)
{
    const struct run *r = arg;
    if (r->su->verbose || level == LOG_LEVEL_ERROR)
        log_msg(level, NULL, "%.0f s: %s job %s: %s",
                r->sim != NULL ? backend_sim_ops.now(r->sim) : 0.0, log_level_name(level),
                job ? job : "-", msg);
}

/* Submits the jobs of r's workload from next on that arrive by t. Returns the next one
 * to come. */
static int submit_arrivals(struct run *r, struct loop *l, const struct policy_ops *policy, int next,
                           double t)
{
    const struct workload *w = r->w;
    const struct setup *su = r->su;
    int nodes = su->nodes, gpn = su->gpn;
    struct error err;

    while (next < w->n && w->job[next].time <= t) {
        struct wjob *j = &w->job[next];
        const struct trace_app *a = w->app[j->app];
        int local = (j->batch + j->replicas - 1) / j->replicas;
        char id[32];
        struct loop_submit s = {
            .id = id, .gpw = 1, .cpw = 1, .submitted = j->time, .max_restarts = 0};
        /* dynamic sizes a job from 1 GPU up to its tuned num_replicas at the tuned
         * global batch; keeping the per-GPU batch instead, up to the largest validated
         * batch (at most 64 GPUs, as Pollux's simulator). */
        s.min = s.max = j->replicas;
        if (policy->elastic) {
            s.min = 1;
            if (su->per_gpu_batch) {
                s.max = trace_max_batch(a) / local;
                if (s.max > SIM_ELASTIC_MAX)
                    s.max = SIM_ELASTIC_MAX;
                if (s.max < j->replicas)
                    s.max = j->replicas;
            }
        }
        if (s.max > nodes * gpn)
            s.max = nodes * gpn;
        if (s.min > s.max)
            s.min = s.max;
        snprintf(id, sizeof(id), "w%d", next);
        if (loop_submit(l, &s, &err) < 0)
            log_error("%s", err.text);
        next++;
    }
    return next;
}

/* What a run of policy came to: the --jobs lines, and res (all but the wall time).
 * first..last: the first arrival and the last event the loop saw. */
static void summarize(const struct run *r, const struct policy_ops *policy,
                      const struct loop_stats *st, double first, double last, struct result *res)
{
    const struct workload *w = r->w;
    const struct setup *su = r->su;
    int nodes = su->nodes, gpn = su->gpn;
    double *jct;

    if (su->jobs != NULL)
        for (int i = 0; i < w->n; i++)
            fprintf(su->jobs, "%s,%s,%s,%d,%d,%.0f,%.1f,%d\n", policy->name, w->job[i].name,
                    trace_name(w->app[w->job[i].app]), w->job[i].replicas, w->job[i].batch,
                    w->job[i].time, w->job[i].done ? w->job[i].end - w->job[i].time : -1.0,
                    w->job[i].attempts);
    jct = malloc((size_t)w->n * sizeof(double));
    res->jobs = 0;
    res->unfinished = w->n - r->finished;
    if (jct != NULL) {
        double sum = 0;
        for (int i = 0; i < w->n; i++) {
            if (w->job[i].done) {
                jct[res->jobs++] = w->job[i].end - w->job[i].time;
                sum += w->job[i].end - w->job[i].time;
                if (w->job[i].end > last)
                    last = w->job[i].end;
            }
        }
        qsort(jct, (size_t)res->jobs, sizeof(double), cmp_double);
        res->avg = res->jobs ? sum / res->jobs : 0;
        res->p50 = res->jobs ? jct[(res->jobs - 1) / 2] : 0;
        res->p99 = res->jobs ? jct[(int)ceil(0.99 * res->jobs) - 1] : 0;
        free(jct);
    }
    res->policy = policy->name;
    res->makespan = last - first;
    res->util = res->makespan > 0 ? r->gpu_s / ((double)nodes * gpn * res->makespan) : 0;
    res->restarts = st->starts - r->finished - r->failed;
    res->passes = st->passes;
}

/* Replays w under policy; fills res. Returns 0 or -1. */
static int simulate(struct workload *w, const struct policy_ops *policy, const struct setup *su,
                    struct result *res)
{
    int nodes = su->nodes, gpn = su->gpn;
    struct run r = {.w = w, .su = su, .elastic = policy->elastic && su->per_gpu_batch};
    struct sim_model model = {model_speed, &r};
    struct policy_params params;
    struct sim_loop_config sc = {
        .nodes = nodes,
        .gpus_per_node = gpn,
        .slots_per_node = gpn > 0 ? gpn : 1,
        .start_s = su->restart_cost,
        .stop_s = 0,
        .policy = policy,
        .params = &params,
        .kill_grace_s = 3600,
        .speed_mode = SPEED_STRONG,
        .log = say,
        .log_arg = &r,
    };
    struct journal_ops stats_journal = sim_journal_null;
    struct sim_loop sl;
    struct error err;
    struct loop *l;
    struct loop_stats st;
    void *sim;
    double t0 = clock_mono_s(), first = w->job[0].time, last = first;
    int next = 0;

    policy_params_default(&params);
    params.interval_s = su->interval;
    params.restart_cost_s = su->restart_cost;
    params.hysteresis = su->hysteresis;
    /* The journal keeps the statistics; the rest it need not see. */
    stats_journal.transition = j_transition;
    stats_journal.started = j_started;
    stats_journal.ended = j_ended;
    sc.journal = &stats_journal;
    sc.journal_arg = &r;
    if (sim_loop_create(&sc, &sl, &err) < 0) {
        log_error("%s", err.text);
        return -1;
    }
    l = sl.loop;
    sim = r.sim = sl.sim;
    backend_sim_set_model(sim, &model);
    for (int i = 0; i < w->n; i++)
        w->job[i].done = 0;
    for (;;) {
        double t = backend_sim_next_event(sim), wake = loop_next_wakeup(l);
        if (next < w->n && w->job[next].time < t)
            t = w->job[next].time;
        if (r.finished + r.failed >= w->n)
            break;
        if (wake < t && (next < w->n || loop_njobs(l) > 0))
            t = wake;
        if (!isfinite(t))
            break; /* nothing will ever happen again: stuck */
        backend_sim_advance(sim, t);
        next = submit_arrivals(&r, l, policy, next, t);
        loop_step(l);
        last = t;
    }
    loop_stats(l, &st);
    summarize(&r, policy, &st, first, last, res);
    res->wall = clock_mono_s() - t0;
    sim_loop_destroy(&sl);
    return 0;
}

/* ---- main ---- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ringsim --workload W.csv --traces DIR --nodes N --gpus-per-node G\n"
            "               --policy P[,P...] [--restart-cost S] [--interval S] [--json]\n"
            "               [--hysteresis H] [--elastic-batch global|per-gpu] [--jobs FILE]\n"
            "               [--verbose]\n"
            "       ringsim --synthesize N --traces DIR --nodes N --gpus-per-node G [--seed S]\n"
            "               [--load L]\n"
            "\n"
            "Replays a workload (name,time,application,num_replicas,batch_size) against\n"
            "ringd's scheduling policies (%s) in virtual time,\n"
            "with jobs modelled by the Pollux-format traces in DIR/<application>/.\n"
            "  --restart-cost S   seconds without progress per (re)start (default 30)\n"
            "  --interval S       the policies' re-evaluation period (default 60)\n"
            "  --hysteresis H     a resize must gain H restarts' worth (default 2)\n"
            "  --elastic-batch B  what dynamic keeps as it resizes a job: the global batch\n"
            "                     (default; sizes 1..num_replicas) or the per-GPU batch\n"
            "                     (progress then follows the statistical efficiency)\n"
            "  --jobs FILE        append policy,name,application,num_replicas,batch_size,\n"
            "                     submit_s,jct_s,attempts per job to FILE\n"
            "  --verbose          every scheduling decision, at its virtual time, on stderr\n"
            "  --json             one JSON object per policy instead of a table\n"
            "  --synthesize N     write a workload of N jobs sampled from DIR/philly.csv,\n"
            "                     arriving so that they ask for --load (0.7) of the GPUs\n"
            "\n"
            "Exit status: 0 done, 64 bad usage, 65 malformed input, 66 unreadable input,\n"
            "70 some job never finished.\n",
            policy_names());
}

/* The exit status for a workload_read() or workload_synthesize() error. */
static int exit_status(int err)
{
    return err == EINVAL || err == ENOMEM ? EXIT_DATA : EXIT_NOINPUT;
}

static int number(const char *flag, const char *v, double lo, double *out)
{
    char *end;
    *out = strtod(v, &end);
    if (*end != '\0' || !isfinite(*out) || *out < lo) {
        log_error("%s wants a number >= %g, not '%s'", flag, lo, v);
        return -1;
    }
    return 0;
}

/* ringsim's command line, as parse_args() reads it. */
struct args {
    const char *workload, *traces, *policies, *jobs;
    double nodes, gpn, synth, seed, load;
    int json;
};

/* Reads the command line into a and su (su's nodes and GPUs checked). Returns -1 to go on,
 * or the exit status to end with (0 after --help or --version). */
static int parse_args(int argc, char **argv, struct args *a, struct setup *su)
{
    static const struct option opts[] = {
        {"workload", required_argument, NULL, 'w'},
        {"traces", required_argument, NULL, 't'},
        {"nodes", required_argument, NULL, 'n'},
        {"gpus-per-node", required_argument, NULL, 'g'},
        {"policy", required_argument, NULL, 'p'},
        {"restart-cost", required_argument, NULL, 'r'},
        {"interval", required_argument, NULL, 'i'},
        {"hysteresis", required_argument, NULL, 'H'},
        {"elastic-batch", required_argument, NULL, 'b'},
        {"jobs", required_argument, NULL, 'J'},
        {"verbose", no_argument, NULL, 'v'},
        {"json", no_argument, NULL, 'j'},
        {"synthesize", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, 'S'},
        {"load", required_argument, NULL, 'L'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int o;

    opterr = 0;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        double *target = NULL, lo = 0;
        const char *flag = NULL;
        switch (o) {
        case 'w':
            a->workload = optarg;
            break;
        case 't':
            a->traces = optarg;
            break;
        case 'p':
            a->policies = optarg;
            break;
        case 'J':
            a->jobs = optarg;
            break;
        case 'b':
            if (strcmp(optarg, "global") != 0 && strcmp(optarg, "per-gpu") != 0) {
                log_error("--elastic-batch is global or per-gpu, not '%s'", optarg);
                return EXIT_USAGE;
            }
            su->per_gpu_batch = strcmp(optarg, "per-gpu") == 0;
            break;
        case 'n':
            target = &a->nodes, lo = 1, flag = "--nodes";
            break;
        case 'g':
            target = &a->gpn, lo = 1, flag = "--gpus-per-node";
            break;
        case 'r':
            target = &su->restart_cost, lo = 0, flag = "--restart-cost";
            break;
        case 'i':
            target = &su->interval, lo = 0.001, flag = "--interval";
            break;
        case 'H':
            target = &su->hysteresis, lo = 0, flag = "--hysteresis";
            break;
        case 's':
            target = &a->synth, lo = 1, flag = "--synthesize";
            break;
        case 'S':
            target = &a->seed, lo = 0, flag = "--seed";
            break;
        case 'L':
            target = &a->load, lo = 0.01, flag = "--load";
            break;
        case 'v':
            su->verbose = 1;
            break;
        case 'j':
            a->json = 1;
            break;
        case 'V':
            printf("ringsim %s\n", RING_VERSION_STRING);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            log_error("unknown option or missing value '%s' (see --help)", argv[optind - 1]);
            return EXIT_USAGE;
        }
        if (target != NULL && number(flag, optarg, lo, target) < 0)
            return EXIT_USAGE;
    }
    if (optind < argc) {
        log_error("unexpected argument '%s' (see --help)", argv[optind]);
        return EXIT_USAGE;
    }
    if (a->traces == NULL || a->nodes < 1 || a->gpn < 1) {
        log_error("--traces, --nodes and --gpus-per-node are required (see "
                  "--help)");
        return EXIT_USAGE;
    }
    if (a->nodes * a->gpn > 1e7 || a->nodes != floor(a->nodes) || a->gpn != floor(a->gpn)) {
        log_error("--nodes and --gpus-per-node are whole numbers, at most 10 "
                  "million GPUs in all");
        return EXIT_USAGE;
    }
    su->nodes = (int)a->nodes;
    su->gpn = (int)a->gpn;
    return -1;
}

/* One line of results: a JSON object, or a row of the table. */
static void print_result(const struct result *r, const char *workload, const struct setup *su,
                         int json)
{
    if (json)
        printf("{\"bench\":\"ringsim\",\"impl\":\"ringsim\",\"policy\":\"%s\",\"workload\":"
               "\"%s\",\"nodes\":%d,\"gpus_per_node\":%d,\"restart_cost_s\":%g,"
               "\"interval_s\":%g,\"hysteresis\":%g,\"elastic_batch\":\"%s\",\"jobs\":%d,"
               "\"unfinished\":%d,\"avg_jct_s\":%.1f,\"p50_jct_s\":%.1f,\"p99_jct_s\":%.1f,"
               "\"makespan_s\":%.1f,\"gpu_utilization\":%.4f,\"restarts\":%ld,"
               "\"passes\":%ld,\"wall_s\":%.3f}\n",
               r->policy, workload, su->nodes, su->gpn, su->restart_cost, su->interval,
               su->hysteresis, su->per_gpu_batch ? "per-gpu" : "global", r->jobs, r->unfinished,
               r->avg, r->p50, r->p99, r->makespan, r->util, r->restarts, r->passes, r->wall);
    else
        printf("%-10s %6d %12.0f %12.0f %12.0f %12.0f %8.3f %9ld %8.2f\n", r->policy, r->jobs,
               r->avg, r->p50, r->p99, r->makespan, r->util, r->restarts, r->wall);
}

int main(int argc, char **argv)
{
    struct args a = {.seed = 1, .load = 0.7};
    struct setup su = {.restart_cost = 30, .interval = 60, .hysteresis = 2};
    int rc;
    struct workload w = {0};
    char list[256], msg[1024];

    log_init("ringsim", LOG_STYLE_TEXT);
    if ((rc = parse_args(argc, argv, &a, &su)) >= 0)
        return rc;
    rc = 0;
    if (a.synth > 0) {
        if (workload_synthesize(stdout, a.traces, (int)a.synth, su.nodes, su.gpn, (unsigned)a.seed,
                                a.load, msg, sizeof(msg)) < 0) {
            rc = exit_status(errno);
            log_error("%s", msg);
            return rc;
        }
        return 0;
    }
    if (a.workload == NULL || a.policies == NULL) {
        log_error("--workload and --policy are required (see --help)");
        return EXIT_USAGE;
    }
    if (strlen(a.policies) >= sizeof(list)) {
        log_error("--policy is too long");
        return EXIT_USAGE;
    }
    snprintf(list, sizeof(list), "%s", a.policies);
    for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
        if (policy_find(p) == NULL) {
            log_error("no policy '%s'; the policies are %s", p, policy_names());
            return EXIT_USAGE;
        }
    }
    if (workload_read(a.workload, a.traces, &w, msg, sizeof(msg)) < 0) {
        rc = exit_status(errno);
        log_error("%s", msg);
        workload_free(&w);
        return rc;
    }
    if (a.jobs != NULL && (su.jobs = fopen(a.jobs, "a")) == NULL) {
        log_error("cannot write --jobs %s: %s", a.jobs, strerror(errno));
        workload_free(&w);
        return EXIT_NOINPUT;
    }
    if (!a.json)
        printf("%-10s %6s %12s %12s %12s %12s %8s %9s %8s\n", "policy", "jobs", "avg_jct_s",
               "p50_jct_s", "p99_jct_s", "makespan_s", "gpu_util", "restarts", "wall_s");
    snprintf(list, sizeof(list), "%s", a.policies);
    for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
        struct result r = {0};
        if (simulate(&w, policy_find(p), &su, &r) < 0) {
            rc = EXIT_DATA;
            break;
        }
        print_result(&r, a.workload, &su, a.json);
        fflush(stdout);
        if (r.unfinished > 0) {
            log_error("%s: %d jobs never finished", r.policy, r.unfinished);
            rc = EXIT_STUCK;
        }
    }
    if (su.jobs != NULL)
        fclose(su.jobs);
    workload_free(&w);
    return rc;
}
