/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy_dynamic.c - dynamic stop/restart scheduling after Capes et al., "Dynamic
 * Scheduling of MPI-based Distributed Deep Learning Training Jobs" (arXiv 1908.08082):
 * Horovod jobs are cheap to stop and restart from a checkpoint, so the scheduler keeps
 * re-dividing the GPUs among them. Every job starts at its minimum, and jobs double while
 * doubling saves time.
 *
 * The model of a job j: its remaining work (from rank 0's progress reports) and its speed
 * at each size (speed.h: measured where it ran, Amdahl with the ring term elsewhere) give
 * T(k), its remaining time on k workers. Its value at k is V(k) = -T(k), less a restart
 * (its measured stop + start overhead, restart_cost_s until measured, times hysteresis)
 * when it runs now at a size other than k.
 *
 * 1. Rank. Aged priority first; then the predicted remaining time at the job's minimum,
 *    shortest first (SRPT), in doubling buckets (1, 2, 4, ... minutes) so that jobs of
 *    about the same length keep their order: where the remaining work is not known yet,
 *    the time the job has run stands in for it (least attained service, as Tiresias: a
 *    new job goes first); then submission.
 * 2. Admission. In rank order each job's minimum is set aside while it fits (backfill); a
 *    running job that is not admitted is preempted. A running job whose size is not
 *    measured yet keeps it where it fits beside those minimums (nothing says fewer
 *    workers would be faster).
 * 3. Growth. The GPUs left go, one step at a time, to the admitted job whose step raises
 *    its completion rate 1/T the most per GPU: (T(from) - T(to)) / (T(from) T(to)), with
 *    the restart counted in T (the value V above). A step is a doubling, or for a running
 *    job straight back to the size it runs at. Summed over the jobs, 1/T is the share of
 *    a job the cluster completes per second, the quantity that brings the average
 *    completion time down: where jobs scale perfectly it serves the shortest first (SRPT),
 *    where they scale poorly it spreads the GPUs, and a long job's larger saving in
 *    seconds does not outbid a short job's finishing. (Ranked by Capes' rule instead, the
 *    most seconds saved per GPU, the steps gave 1.2-2.1x this average JCT in ringsim on
 *    Pollux's workloads 1-4.) A job's step is worth the same whatever the others do, so a
 *    heap serves them in O((n + steps) log n).
 * A running job that has not reported progress at its size yet is not grown (its speed
 * there is unmeasured), only kept, shrunk or preempted. A running job shrinks only when
 * its GPUs raise others' completion rates more, restart included, or when fewer workers
 * were measured faster by more than a restart: never on a prediction of its own speed
 * alone (speed.h keeps predictions below a measured larger size's throughput, so the way
 * back to the size it runs at always gains).
 *
 * Re-evaluated every interval_s, and whenever a job arrives or ends (the loop's passes).
 *
 * Thrashing: a plan carried out is worth the most to the next pass too: step 3 compares
 * values that include the restart, and the rank moves only when a job arrives, ends, or
 * crosses a doubling of its remaining time (test_policy.c checks the fixed point).
 *
 * Starvation: a waiting job gains a priority level per aging_s (policy_aged_priority),
 * which outranks any remaining time: it is admitted after at most aging_s plus the time
 * the jobs of its new level ahead of it take.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "policy_impl.h"

/* Rank buckets start at a minute: below that, differences in remaining time are noise. */
#define BUCKET_S 60.0

struct dyn {
    const struct policy_snapshot *s;
    const int *cap;
    int *size;
    double *work;
};

/* Throughput where the job's model knows nothing yet: the prior's shape (speed.h) in
 * relative units, so that work / throughput compares sizes of the same job. */
static double thr_of(const struct policy_job *j, int k)
{
    double t = j->speed ? speed_at(j->speed, k) : 0;
    if (t > 0)
        return t;
    return k / (1.0 + SPEED_PRIOR_COMM * 2.0 * (k - 1.0) / k);
}

/* The job's remaining work in its throughput unit; where unknown, as long again as it has
 * run, and at least an interval, at its minimum. */
static double work_of(const struct policy_snapshot *s, const struct policy_job *j)
{
    double t;
    if (j->work_left >= 0)
        return j->work_left;
    t = j->run_time > s->params.interval_s ? j->run_time : s->params.interval_s;
    return t * thr_of(j, j->min);
}

/*
 * floor(log2(x)) for x >= 1, as libm's log2 rounds it: the binary exponent, which costs
 * nothing, where x is not within a hair of a power of two (the mantissa m in [0.5, 1)
 * more than 1e-9 away from either end: there the exact log2 is that far from an integer,
 * far beyond log2's error of an ulp, so both give the same integer). Near a power of two,
 * where log2's rounding could land on the integer either side, libm is asked. Every job
 * gets a bucket at every pass, and log2 was a twentieth of a 100k-job ringsim run.
 */
static double floor_log2(double x)
{
    int e;
    double m = frexp(x, &e);
    if (m > 0.5 + 1e-9 && m < 1 - 1e-9)
        return e - 1;
    return floor(log2(x));
}

/* The rank's length bucket: SRPT where the work is known, else the time it has run. */
static double bucket(const struct policy_job *j, double work)
{
    double t = j->work_left >= 0 ? work / thr_of(j, j->min) : j->run_time;
    return t < BUCKET_S ? 0 : floor_log2(t / BUCKET_S) + 1;
}

static double restart_of(const struct policy_snapshot *s, const struct policy_job *j)
{
    return (j->restart_cost >= 0 ? j->restart_cost : s->params.restart_cost_s) *
           s->params.hysteresis;
}

static double value(const struct dyn *d, int i, int k)
{
    const struct policy_job *j = &d->s->job[i];
    double v = -d->work[i] / thr_of(j, k);
    if (j->workers > 0 && k != j->workers)
        v -= restart_of(d->s, j);
    return v;
}

static int max_of(const struct dyn *d, int i)
{
    const struct policy_job *j = &d->s->job[i];
    return d->cap[i] < j->max ? d->cap[i] : j->max;
}

/* May job j grow to `to`? Not while unmeasured at the size it runs at (back to that size,
 * always). */
static int may_grow(const struct policy_job *j, int to)
{
    return j->workers == 0 || to <= j->workers || j->settled;
}

/* Was job j's speed measured at k workers? */
static int measured(const struct policy_job *j, int k)
{
    double thr;
    return j->speed != NULL && speed_observed(j->speed, k, &thr);
}

static int room(const struct policy_job *j, long slots, long gpus)
{
    return policy_room(j, slots, gpus);
}

/* A step of growth: job from -> to workers, worth score. */
struct cand {
    double score;
    int job, from, to;
};

/* The better step first; ties to the job submitted first (deterministic plans). */
static int before(const struct cand *a, const struct cand *b)
{
    return a->score > b->score || (a->score == b->score && a->job < b->job);
}

/* The size job i would double to from its size in d, or 0 when it cannot grow (at its
 * maximum, or not measured at the size it runs at). */
static int doubling_to(const struct dyn *d, int i)
{
    const struct policy_job *j = &d->s->job[i];
    int from = d->size[i], to = 2 * from, mx = max_of(d, i);

    if (from == 0 || from >= mx)
        return 0;
    if (to > mx)
        to = mx;
    if (j->workers > from && to > j->workers)
        to = j->workers;
    return may_grow(j, to) ? to : 0;
}

static void describe(const struct dyn *d, int i, struct policy_target *t, int forced)
{
    const struct policy_job *j = &d->s->job[i];
    int to = d->size[i];
    double now_s = d->work[i] / thr_of(j, j->workers), then_s = d->work[i] / thr_of(j, to);
    double r = j->restart_cost >= 0 ? j->restart_cost : d->s->params.restart_cost_s;
    if (j->work_left < 0 && to > 0) /* nothing reported yet: no times to quote */
        snprintf(t->reason, sizeof(t->reason),
                 "dynamic: %s %d -> %d workers: %s (it has not reported its progress yet)",
                 to > j->workers ? "grow" : "shrink", j->workers, to,
                 to > j->workers ? "room is free"
                 : forced        ? "jobs ranked before it or gaining more from it need the room"
                                 : "fewer workers are worth as much here");
    else if (to > j->workers)
        snprintf(t->reason, sizeof(t->reason),
                 "dynamic: grow %d -> %d workers: predicted %.0f s left instead of %.0f s, "
                 "more than its %.1f s restart x %.1f",
                 j->workers, to, then_s, now_s, r, d->s->params.hysteresis);
    else if (to > 0)
        snprintf(t->reason, sizeof(t->reason),
                 "dynamic: shrink %d -> %d workers: %s (predicted %.0f s left instead of "
                 "%.0f s)",
                 j->workers, to,
                 forced ? "jobs ranked before it or gaining more from it need the room"
                        : "fewer workers are worth as much here",
                 then_s, now_s);
    else
        snprintf(t->reason, sizeof(t->reason),
                 "dynamic: preempted: jobs ranked before it (priority, then shortest "
                 "remaining time) need its %s",
                 j->gpw > 0 ? "GPUs" : "slots");
}

/* ---- 3. growth by completion rate ---- */

/* How much stepping job i from `from` to `to` workers raises its completion rate 1/T, per
 * unit of resource (the header's step 3); 0 when it does not. */
static double rate_gain(const struct dyn *d, int i, int from, int to)
{
    double a = -value(d, i, from), b = -value(d, i, to);
    if (!(a > b))
        return 0;
    if (!(b > 0)) /* nothing left at `to` (the size it runs at): it is about to end there */
        return INFINITY;
    return (a - b) / (a * b) / ((double)(to - from) * policy_unit(&d->s->job[i]));
}

static void heap_push(struct cand *h, int *n, struct cand c)
{
    int i = (*n)++;
    while (i > 0 && before(&c, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static struct cand heap_pop(struct cand *h, int *n)
{
    struct cand top = h[0], last = h[--*n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && before(&h[c + 1], &h[c]))
            c++;
        if (!before(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

/*
 * Puts job i's best next step in the heap, if it has one that gains: straight back to the
 * size it runs at (unless back is 0: that did not fit), or a doubling. One entry per job
 * at most, so the heap never holds more than n.
 */
static void offer(const struct dyn *d, struct cand *h, int *nh, int i, int back)
{
    const struct policy_job *j = &d->s->job[i];
    int from = d->size[i], dbl = doubling_to(d, i);
    struct cand best = {0, i, from, 0};
    if (back && j->workers > from && j->workers <= max_of(d, i) && j->workers != dbl) {
        best.score = rate_gain(d, i, from, j->workers);
        best.to = j->workers;
    }
    if (dbl > from) {
        double g = rate_gain(d, i, from, dbl);
        if (g > best.score) {
            best.score = g;
            best.to = dbl;
        }
    }
    if (best.score > 0)
        heap_push(h, nh, best);
}

/*
 * Would a running job, free to climb, get back to the size it runs at? Yes when that is
 * above its size now and no size below it was measured faster: predictions below it are
 * held under its measured speed (speed.h), so the way back always gains the restart, and
 * doublings on the way gain too. Then the climb can start there: most jobs in a pass
 * stay where they are, and this skips their climb.
 */
static int back_is_best(const struct dyn *d, int i)
{
    const struct policy_job *j = &d->s->job[i];
    double at;
    int c = j->workers;
    if (c <= d->size[i] || c > max_of(d, i) || j->speed == NULL || !(restart_of(d->s, j) > 0) ||
        !speed_observed(j->speed, c, &at))
        return 0;
    for (int k = 0; k < j->speed->nobs; k++)
        if (j->speed->obs[k].workers < c && j->speed->obs[k].thr > at)
            return 0;
    return 1;
}

/* Step 3 over what is left in *slots and *gpus. Room only shrinks as steps are granted,
 * so a step that does not fit now never will. h has room for n entries. */
static void grow(struct dyn *d, struct cand *h, long *slots, long *gpus)
{
    int nh = 0, n = d->s->njobs;
    long want_slots = 0, want_gpus = 0;

    /* Room for every job at its max (a quiet cluster, where most passes run): the order of
     * the steps does not matter then, and each job climbs on its own, without the heap. */
    for (int i = 0; i < n; i++) {
        if (d->size[i] > 0) {
            const struct policy_job *j = &d->s->job[i];
            want_slots += (long)(max_of(d, i) - d->size[i]) * j->cpw;
            want_gpus += (long)(max_of(d, i) - d->size[i]) * j->gpw;
        }
    }
    if (want_slots <= *slots && want_gpus <= *gpus) {
        for (int i = 0; i < n; i++) {
            const struct policy_job *j = &d->s->job[i];
            int from = d->size[i];
            if (from == 0)
                continue;
            if (back_is_best(d, i))
                d->size[i] = j->workers;
            for (;;) {
                offer(d, h, &nh, i, 1);
                if (nh == 0)
                    break;
                d->size[i] = h[--nh].to;
            }
            *slots -= (long)(d->size[i] - from) * j->cpw;
            *gpus -= (long)(d->size[i] - from) * j->gpw;
        }
        return;
    }
    for (int i = 0; i < n; i++)
        if (d->size[i] > 0)
            offer(d, h, &nh, i, 1);
    while (nh > 0) {
        struct cand c = heap_pop(h, &nh);
        const struct policy_job *j = &d->s->job[c.job];
        if (room(j, *slots, *gpus) < c.to - c.from) {
            /* Back to its size does not fit: a doubling (a smaller step) may. */
            if (c.to == j->workers && c.to != doubling_to(d, c.job))
                offer(d, h, &nh, c.job, 0);
            continue;
        }
        d->size[c.job] = c.to;
        *slots -= (long)(c.to - c.from) * j->cpw;
        *gpus -= (long)(c.to - c.from) * j->gpw;
        offer(d, h, &nh, c.job, 1);
    }
}

static int decide(const struct policy_snapshot *s, const int *cap, int *size, int *order,
                  struct policy_target *out, void *arg)
{
    int n = s->njobs, m = n > 0 ? n : 1, rc = -1;
    struct order_key *key = malloc((size_t)m * sizeof(*key));
    char *forced = calloc((size_t)m, 1);
    struct cand *cands = malloc((size_t)m * sizeof(*cands));
    struct dyn d = {s, cap, size, malloc((size_t)m * sizeof(double))};
    long slots = s->pinned->slots_left, gpus = s->pinned->gpus_left;

    if (key == NULL || forced == NULL || cands == NULL || d.work == NULL) {
        errno = ENOMEM;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const struct policy_job *j = &s->job[i];
        d.work[i] = work_of(s, j);
        key[i] = (struct order_key){
            {-policy_aged_priority(s, j), bucket(j, d.work[i]), j->submitted}, i};
    }
    order_sort(key, n, order);

    /* 2. Admission: the minimums, in rank order, while they fit. */
    for (int k = 0; k < n; k++) {
        int i = order[k];
        const struct policy_job *j = &s->job[i];
        if (!j->eligible || cap[i] < j->min || room(j, slots, gpus) < j->min)
            continue;
        size[i] = j->min; /* admitted; sized below */
        slots -= (long)j->min * j->cpw;
        gpus -= (long)j->min * j->gpw;
    }
    /* A running job not measured at its size keeps it where it fits beside the minimums. */
    for (int k = 0; k < n; k++) {
        int i = order[k], c = s->job[i].workers;
        const struct policy_job *j = &s->job[i];
        if (size[i] == 0 || c <= size[i] || c > max_of(&d, i) || measured(j, c) ||
            room(j, slots, gpus) < c - size[i])
            continue;
        slots -= (long)(c - size[i]) * j->cpw;
        gpus -= (long)(c - size[i]) * j->gpw;
        size[i] = c;
    }

    /* 3. Growth by completion rate. */
    grow(&d, cands, &slots, &gpus);
    for (int i = 0; i < n; i++) {
        const struct policy_job *j = &s->job[i];
        forced[i] =
            size[i] > 0 && j->workers > size[i] && room(j, slots, gpus) < j->workers - size[i];
    }

    for (int i = 0; i < n; i++) {
        const struct policy_job *j = &s->job[i];
        if (size[i] == j->workers || (j->workers == 0 && size[i] == 0))
            continue;
        if (j->workers == 0)
            snprintf(out[i].reason, sizeof(out[i].reason),
                     "dynamic: start at %d worker%s (min %d, max %d)", size[i],
                     size[i] == 1 ? "" : "s", j->min, j->max);
        else
            describe(&d, i, &out[i], forced[i]);
    }
    rc = 0;
done:
    free(key);
    free(forced);
    free(cands);
    free(d.work);
    return rc;
}

static int plan(const struct policy_snapshot *s, struct policy_target *out)
{
    return policy_run(s, out, decide, NULL);
}

/* Its settings in ringd's configuration; the defaults are ringd's (ringsim has flags). */
static const struct policy_setting settings[] = {
    {{"restart_cost", NULL, 0, "10", "10 seconds a restart costs a job\nuntil measured (dynamic)"},
     "restart_cost_s",
     offsetof(struct policy_params, restart_cost_s),
     0,
     86400},
    {{"hysteresis", NULL, 0, "2", "2: a resize must gain that many\nrestarts' worth (dynamic)"},
     "hysteresis",
     offsetof(struct policy_params, hysteresis),
     0,
     1000},
    {{NULL, NULL, 0, NULL, NULL}, NULL, 0, 0, 0},
};

const struct policy_ops policy_dynamic = {"dynamic", 1, plan, settings};
