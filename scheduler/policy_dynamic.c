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
 *    running job that is not admitted is preempted.
 * 3. Doubling. In rank order each admitted job doubles from its minimum while the doubling
 *    is efficient (the speed grows by at least 1 + efficiency, 1.5x by default) and fits
 *    beside the minimums of the jobs after it. GPUs that later-ranked running jobs hold
 *    above their minimums are taken only when that saves more than a restart. A running
 *    job then keeps its current size where that is worth as much (V includes the
 *    restart), so it changes size only for a gain above restart x hysteresis.
 * 4. Leftovers. GPUs still free go, one doubling at a time, to the job that saves the most
 *    time per GPU with them (Capes' rule), when that beats the restart.
 * A running job that has not reported progress at its size yet is not grown (its speed
 * there is unmeasured), only kept, shrunk or preempted. A running job shrinks only to make
 * room for jobs ranked before it, or when fewer workers were measured faster by more than a
 * restart: never on a prediction alone (speed.h keeps predictions below a measured larger
 * size's throughput, and a job whose size is not measured yet keeps it where it fits).
 *
 * Re-evaluated every interval_s, and whenever a job arrives or ends (the loop's passes).
 *
 * Thrashing: a plan carried out is worth the most to the next pass too: steps 3 and 4
 * compare values that include the restart, and the rank moves only when a job arrives,
 * ends, or crosses a doubling of its remaining time (test_policy.c checks the fixed point).
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

/* A doubling must make a job at least this much faster (1 + efficiency) in step 3: 0.5,
 * i.e. the added GPUs work at 50% or better, about where Pollux's tuned jobs sit. */
#define EFFICIENCY 0.5
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

struct cand {
    double score;
    int job, from, to;
};

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
                 : forced        ? "jobs ranked before it need the room"
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
                 forced ? "jobs ranked before it need the room"
                        : "fewer workers are worth as much here",
                 then_s, now_s);
    else
        snprintf(t->reason, sizeof(t->reason),
                 "dynamic: preempted: jobs ranked before it (priority, then shortest "
                 "remaining time) need its %s",
                 j->gpw > 0 ? "GPUs" : "slots");
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
    long rs = 0, rg = 0; /* the minimums set aside for jobs not decided yet */
    long hs = 0, hg = 0; /* what running jobs not decided yet hold above their minimum */

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
    {
        long ls = slots, lg = gpus;
        for (int k = 0; k < n; k++) {
            int i = order[k];
            const struct policy_job *j = &s->job[i];
            if (!j->eligible || cap[i] < j->min || room(j, ls, lg) < j->min)
                continue;
            size[i] = j->min; /* admitted; sized below */
            ls -= (long)j->min * j->cpw;
            lg -= (long)j->min * j->gpw;
            rs += (long)j->min * j->cpw;
            rg += (long)j->min * j->gpw;
            if (j->workers > j->min) {
                int keep = j->workers < cap[i] ? j->workers : cap[i];
                hs += (long)(keep - j->min) * j->cpw;
                hg += (long)(keep - j->min) * j->gpw;
            }
        }
    }

    /* 3. Doubling in rank order. */
    for (int k = 0; k < n; k++) {
        int i = order[k], t, c, mx;
        const struct policy_job *j = &s->job[i];
        long as, ag, fs, fg;
        if (size[i] == 0)
            continue;
        t = j->min;
        c = j->workers;
        mx = max_of(&d, i);
        rs -= (long)t * j->cpw;
        rg -= (long)t * j->gpw;
        if (c > t) {
            int keep = c < cap[i] ? c : cap[i];
            hs -= (long)(keep - t) * j->cpw;
            hg -= (long)(keep - t) * j->gpw;
        }
        /* What it may use beside the later minimums, and of that what nobody holds. */
        as = slots - rs;
        ag = gpus - rg;
        fs = as - hs;
        fg = ag - hg;
        while (2 * t <= mx || (t < mx && c > t)) {
            int to = 2 * t <= mx ? 2 * t : mx;
            if (c > t && to > c)
                to = c; /* do not skip past the size it runs at */
            if (room(j, as - (long)t * j->cpw, ag - (long)t * j->gpw) < to - t || !may_grow(j, to))
                break;
            if (to != c && thr_of(j, to) < (1 + EFFICIENCY) * thr_of(j, t))
                break;
            /* Beyond what is free, later-ranked running jobs would have to shrink. */
            if (room(j, fs - (long)t * j->cpw, fg - (long)t * j->gpw) < to - t &&
                -d.work[i] / thr_of(j, to) + d.work[i] / thr_of(j, t) <=
                    s->params.restart_cost_s * s->params.hysteresis)
                break;
            t = to;
        }
        /* The size it runs at, when that fits and is worth as much, or when it is larger
         * and not measured yet (nothing says fewer workers would be faster). */
        if (c > 0 && c != t && c <= mx && room(j, as, ag) >= c &&
            (value(&d, i, c) >= value(&d, i, t) || (c > t && !measured(j, c))))
            t = c;
        if (c > t && room(j, as, ag) < c)
            forced[i] = 1;
        size[i] = t;
        slots -= (long)t * j->cpw;
        gpus -= (long)t * j->gpw;
    }

    /* 4. Leftovers: the doubling that saves most per GPU, while it beats its cost. A job's
     * gain depends on its own size only, so it is worked out once, when the job first has
     * room for its doubling, and again only for the job that grew. The room only shrinks
     * from round to round: a job without room for its doubling has none later either. */
    for (int i = 0; i < n; i++)
        cands[i] = (struct cand){0, -1, size[i], doubling_to(&d, i)};
    for (;;) {
        struct cand best = {0, -1, 0, 0};
        for (int i = 0; i < n; i++) {
            struct cand *c = &cands[i];
            if (c->to == 0)
                continue;
            if (room(&s->job[i], slots, gpus) < c->to - c->from) {
                c->to = 0;
                continue;
            }
            if (c->job < 0) {
                double gain = value(&d, i, c->to) - value(&d, i, c->from);
                if (!(gain > 0)) {
                    c->to = 0;
                    continue;
                }
                c->score = gain / ((double)(c->to - c->from) * policy_unit(&s->job[i]));
                c->job = i;
            }
            if (best.job < 0 || before(c, &best))
                best = *c;
        }
        if (best.job < 0)
            break;
        size[best.job] = best.to;
        slots -= (long)(best.to - best.from) * s->job[best.job].cpw;
        gpus -= (long)(best.to - best.from) * s->job[best.job].gpw;
        cands[best.job] = (struct cand){0, -1, best.to, doubling_to(&d, best.job)};
    }

    for (int i = 0; i < n; i++) {
        const struct policy_job *j = &s->job[i];
        if (size[i] == j->workers || (j->workers == 0 && size[i] == 0))
            continue;
        if (j->workers == 0)
            snprintf(out[i].reason, sizeof(out[i].reason),
                     "dynamic: start at %d workers (min %d, max %d)", size[i], j->min, j->max);
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

const struct policy_ops policy_dynamic = {"dynamic", 1, plan};
