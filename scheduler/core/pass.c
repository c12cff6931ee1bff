/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pass.c - the scheduler loop's turn (loop.h): one scheduling pass, which builds a
 * snapshot, asks the policy for a target allocation, checks it, writes the difference to
 * the journal as one batch and carries it out; and what every turn looks after besides:
 * the backend's events, kill deadlines, reservations that can start, nodes going in and out
 * of service. It calls the attempts (attempts.h) and the table (loop_impl.h), never the
 * other way round.
 *
 * Resources: `used` holds what attempts hold now (running and stopping ones). A place
 * decided for a job that cannot start yet (a resize waiting for its old attempt to exit,
 * or a start waiting for preempted attempts to exit) is reserved: reservations are pinned
 * for the policy, so no later plan gives them away, and each starts as soon as `used`
 * leaves room for it. Every reservation was planned on top of the earlier ones and of the
 * attempts that keep running, so when the attempts being stopped have exited (which the
 * kill deadline bounds) every reservation fits: they cannot deadlock.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempts.h"
#include "common/clock.h"
#include "loop_impl.h"

/* How often the loop asks a backend whose nodes come and go (node_states) which are in
 * service: a drained node is seen within this, and Slurm answers in about a millisecond. */
#define NODE_CHECK_S 5.0

/*
 * Jobs ahead whose fields a pass asks the memory for before it needs them. The jobs lie
 * apart on the heap, where the processor cannot guess the next one, and a pass over
 * thousands of them otherwise waits on memory at each (on a contended 100k-job ringsim
 * run this took an eighth off the time). 8 ahead: a few hundred cycles of work per job
 * cover a load from memory.
 */
#define PREFETCH_AHEAD 8

/* Asks for the first cache lines of j, where the fields a pass reads lie (loop.h). */
static void prefetch_job(const struct loop_job *j)
{
    const char *p = (const char *)j;
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
    __builtin_prefetch(p + 128);
}

static int scratch(struct loop *l, int n)
{
    if (n <= l->scratch_cap)
        return 0;
    free(l->pj);
    free(l->pmap);
    free(l->out);
    l->scratch_cap = n > 2 * l->scratch_cap ? n : 2 * l->scratch_cap;
    l->pj = calloc((size_t)l->scratch_cap, sizeof(*l->pj));
    l->pmap = calloc((size_t)l->scratch_cap, sizeof(*l->pmap));
    l->out = calloc((size_t)l->scratch_cap, sizeof(*l->out));
    if (l->pj == NULL || l->pmap == NULL || l->out == NULL) {
        l->scratch_cap = 0;
        return errno = ENOMEM, -1;
    }
    return 0;
}

enum change_kind { CH_START, CH_RESERVE, CH_RESIZE, CH_PREEMPT };

/*
 * Checks what a policy answered before anything is carried out, so that a policy bug cannot
 * oversubscribe: sizes within [min, max], nothing for a job backing off, and the targets
 * that move fitting beside what is pinned and each other. (A target that overlapped a job
 * staying where it is could never start, loop__start() checks what attempts hold: it would wait,
 * not double up.) Jobs that stay put cost nothing here.
 */
static int valid(struct loop *l, const struct policy_snapshot *s, struct usage *check)
{
    usage_copy(check, s->pinned);
    for (int i = 0; i < s->njobs; i++) {
        const struct policy_job *j = &s->job[i];
        const struct policy_target *t = &l->out[i];
        const struct placement *p = policy_where(s, i, t);
        if (t->workers == 0 || (t->unchanged && t->workers == j->workers))
            continue;
        if (t->workers < j->min || t->workers > j->max || !j->eligible ||
            t->workers != p->workers || p->ngpus != t->workers * j->gpw ||
            usage_apply(check, p, j->cpw, 1) < 0) {
            loop__say(l, LOG_LEVEL_ERROR, l->pmap[i]->id,
                      "internal: policy %s planned %d workers (min %d, max %d) that do not fit; "
                      "nothing changes this pass",
                      l->cfg.policy->name, t->workers, j->min, j->max);
            return 0;
        }
    }
    return 1;
}

/*
 * The snapshot the policy plans on (policy.h): every job that may change, into l->pj and
 * l->pmap; what is pinned (reservations, attempts being stopped or started this instant)
 * into l->pinned, and that with the running attempts into l->occupied. Notes the next
 * backoff's end. Returns the number of jobs in the snapshot.
 */
static int snapshot(struct loop *l, double now)
{
    struct usage *pinned = &l->pinned;
    int n = 0;

    usage_reset(pinned);
    usage_copy(&l->occupied, &l->running);
    for (int i = 0; i < l->njobs; i++) {
        struct loop_job *j = l->job[i];
        struct policy_job *p;
        if (i + PREFETCH_AHEAD < l->njobs)
            prefetch_job(l->job[i + PREFETCH_AHEAD]);
        if (j->has_reserved) {
            if (usage_apply(pinned, &j->reserved, j->cpw, 1) < 0 ||
                usage_apply(&l->occupied, &j->reserved, j->cpw, 1) < 0)
                loop__say(l, LOG_LEVEL_ERROR, j->id,
                          "internal: a reservation overlaps another place");
            continue;
        }
        if (j->state == LOOP_STOPPING)
            continue;
        /* An attempt started at this very instant (a virtual clock stands still while the
         * loop turns) is left alone until time moves: a pass can then never undo what the
         * previous one did in the same instant, so the loop always gets to the next event. */
        if (j->state == LOOP_RUNNING && j->started >= now) {
            if (usage_apply(pinned, &j->placement, j->cpw, 1) < 0)
                loop__say(l, LOG_LEVEL_ERROR, j->id,
                          "internal: a new attempt overlaps a reservation");
            continue;
        }
        p = &l->pj[n];
        l->pmap[n] = j;
        *p = (struct policy_job){
            .min = j->min,
            .max = j->max,
            .gpw = j->gpw,
            .cpw = j->cpw,
            .priority = j->priority,
            .workers = j->state == LOOP_RUNNING ? j->placement.workers : 0,
            .placement = j->state == LOOP_RUNNING ? &j->placement : NULL,
            .eligible = j->state == LOOP_RUNNING || j->not_before <= now,
            .submitted = j->submitted,
            .waiting_since = j->waiting_since,
            .started = j->started,
            .service = j->service,
            .run_time = j->run_time,
            .restart_cost = j->restart_cost,
            .work_left = j->work_left,
            .speed = &j->speed,
            .settled = j->state != LOOP_RUNNING || j->first_progress >= 0,
        };
        if (j->state == LOOP_RUNNING) {
            double ran = now - j->started;
            p->service += ran * j->placement.workers * loop__unit(j);
            p->run_time += ran;
            if (j->work_left >= 0) { /* what it has done since its last report */
                double done = speed_at(&j->speed, j->placement.workers) * (now - j->work_time);
                p->work_left = j->work_left > done ? j->work_left - done : 0;
            }
        } else if (j->not_before > now && j->not_before < l->next_backoff) {
            l->next_backoff = j->not_before;
        }
        n++;
    }
    /* Nothing new goes to a node out of service: what is free there is taken for the pass. */
    usage_block_offline(&l->occupied, pinned);
    return n;
}

/* The difference between the targets in l->out[0..n-1] and what runs: the index of each
 * job that changes into chg[], how into kind[]. Returns how many change. */
static int diff(struct loop *l, int n, int *chg, enum change_kind *kind)
{
    int nchg = 0;
    for (int i = 0; i < n; i++) {
        const struct loop_job *j = l->pmap[i];
        const struct policy_target *t = &l->out[i];
        /* Whether it runs, from the snapshot (a placement only for running jobs): that
         * keeps this loop off every job's own memory, where most jobs do not change. */
        if (l->pj[i].placement != NULL) {
            if (t->workers == 0)
                kind[nchg] = CH_PREEMPT;
            else if (!t->unchanged && !placement_equal(&t->placement, &j->placement))
                kind[nchg] = CH_RESIZE;
            else
                continue;
        } else if (t->workers > 0) {
            kind[nchg] = usage_fits(&l->used, &t->placement, j->cpw) ? CH_START : CH_RESERVE;
        } else {
            continue;
        }
        chg[nchg++] = i;
    }
    return nchg;
}

/* Writes the changes to the journal first, as one batch. Returns 0, or -1 when the batch
 * could not be committed (nothing is then carried out). */
static int record(struct loop *l, int nchg, const int *chg, const enum change_kind *kind)
{
    struct error err;
    if (l->jo->begin(l->jctx, &err) < 0) {
        loop__say(l, LOG_LEVEL_ERROR, NULL, "cannot record the pass: %s", err.text);
        return -1;
    }
    for (int c = 0; c < nchg; c++) {
        struct loop_job *j = l->pmap[chg[c]];
        const struct policy_target *t = &l->out[chg[c]];
        struct journal_sched sched;
        char msg[400];
        int w = -1;
        switch (kind[c]) {
        case CH_PREEMPT:
            w = l->jo->stopping(l->jctx, j, "preempting", t->reason, &err);
            break;
        case CH_RESIZE:
            w = l->jo->stopping(l->jctx, j, "resizing", t->reason, &err);
            break;
        case CH_START:
            j->attempts++;
            sched = loop__sched_of(j);
            w = l->jo->starting(l->jctx, j, j->attempts, &t->placement, t->reason, &sched, &err);
            j->attempts--;
            break;
        case CH_RESERVE:
            snprintf(msg, sizeof(msg),
                     "%s; its place is reserved until the attempts being stopped for it exit",
                     t->reason);
            sched = loop__sched_of(j);
            w = l->jo->transition(l->jctx, j, "QUEUED", "reserved", msg, &sched, &err);
            break;
        }
        if (w < 0)
            break;
    }
    if (l->jo->commit(l->jctx, &err) < 0) {
        loop__say(l, LOG_LEVEL_ERROR, NULL,
                  "cannot record the pass (%d changes): %s; nothing changes", nchg, err.text);
        return -1;
    }
    return 0;
}

/* j keeps target t's place for a start that waits (a resize's restart, or a start behind
 * attempts being stopped): t's placement moves into j's reservation. */
static void reserve(struct loop *l, struct loop_job *j, struct policy_target *t)
{
    j->reserved = t->placement;
    t->placement = (struct placement){0};
    j->has_reserved = 1;
    l->any_reserved = 1;
    snprintf(j->reserved_reason, sizeof(j->reserved_reason), "%s", t->reason);
}

/* Carries the recorded changes out: stops first, then what fits now. */
static void carry_out(struct loop *l, int nchg, const int *chg, const enum change_kind *kind)
{
    for (int c = 0; c < nchg; c++) {
        struct loop_job *j = l->pmap[chg[c]];
        struct policy_target *t = &l->out[chg[c]];
        if (kind[c] == CH_PREEMPT || kind[c] == CH_RESIZE) {
            loop__say(l, LOG_LEVEL_INFO, j->id, "%s", t->reason);
            if (kind[c] == CH_RESIZE) {
                reserve(l, j, t);
                l->stats.resizes++;
            } else {
                l->stats.preemptions++;
            }
            loop__ask_stop(l, j, kind[c] == CH_RESIZE ? STOP_RESIZE : STOP_PREEMPT);
        } else if (kind[c] == CH_RESERVE) {
            reserve(l, j, t);
        }
    }
    for (int c = 0; c < nchg; c++) {
        if (kind[c] == CH_START)
            loop__start(l, l->pmap[chg[c]], &l->out[chg[c]].placement, l->out[chg[c]].reason, 1);
    }
}

int loop_pass(struct loop *l)
{
    struct policy_snapshot s;
    double now = l->b->now(l->bctx), t0 = clock_mono_s(), dt;
    int n = 0, rc = -1, nchg, *chg = NULL;
    enum change_kind *kind = NULL;

    l->dirty = 0;
    l->last_pass = now;
    l->next_backoff = INFINITY;
    loop__compact(l);
    if (scratch(l, l->njobs + 1) < 0)
        return -1;
    chg = malloc((size_t)(l->njobs + 1) * sizeof(int));
    kind = malloc((size_t)(l->njobs + 1) * sizeof(*kind));
    if (chg == NULL || kind == NULL)
        goto done;
    n = snapshot(l, now);
    s = (struct policy_snapshot){now,   l->cluster, &l->pinned,   &l->occupied,
                                 l->pj, n,          l->cfg.params};
    for (int i = 0; i < n; i++) {
        l->out[i].workers = l->out[i].unchanged = 0;
        l->out[i].reason[0] = '\0';
    }
    if (l->cfg.policy->plan(&s, l->out) < 0) {
        loop__say(l, LOG_LEVEL_ERROR, NULL, "policy %s failed: out of memory", l->cfg.policy->name);
        goto done;
    }
    if (!valid(l, &s, &l->check))
        goto done;
    rc = 0;
    if ((nchg = diff(l, n, chg, kind)) > 0) {
        if ((rc = record(l, nchg, chg, kind)) == 0)
            carry_out(l, nchg, chg, kind);
    }
done:
    policy_targets_clear(l->out, n);
    free(chg);
    free(kind);
    dt = clock_mono_s() - t0;
    l->stats.passes++;
    l->stats.pass_time_s += dt;
    if (dt > l->stats.pass_time_max_s)
        l->stats.pass_time_max_s = dt;
    return rc;
}

/*
 * Every NODE_CHECK_S, the backend's word on which nodes are in service. A node that goes
 * out of service (drained, down) takes no new work: the reservations on it are dropped, and
 * the next pass plans without it, while what runs there goes on until it ends (Slurm ends
 * the jobs of a node that is down, and the loop restarts them elsewhere). A node that comes
 * back is planned on again.
 */
static void check_nodes(struct loop *l, double now)
{
    struct cluster *c = l->cluster;
    unsigned char *was;
    struct error err;
    int changed = 0;

    if (l->b->node_states == NULL || now < l->next_nodes)
        return;
    l->next_nodes = now + NODE_CHECK_S;
    if ((was = malloc((size_t)c->nnodes + 1)) == NULL)
        return;
    for (int n = 0; n < c->nnodes; n++)
        was[n] = (unsigned char)c->node[n].offline;
    if (l->b->node_states(l->bctx, c, &err) < 0) {
        loop__say(l, LOG_LEVEL_WARNING, NULL, "cannot tell which nodes are in service: %s",
                  err.text);
        free(was);
        return;
    }
    for (int n = 0; n < c->nnodes; n++) {
        if (c->node[n].offline == was[n])
            continue;
        changed++;
        if (c->node[n].offline)
            loop__say(l, LOG_LEVEL_WARNING, NULL,
                      "node %s is out of service in %s: nothing new is placed there",
                      c->node[n].name, l->b->name);
        else
            loop__say(l, LOG_LEVEL_INFO, NULL, "node %s is back in service in %s", c->node[n].name,
                      l->b->name);
    }
    free(was);
    if (changed == 0)
        return;
    for (int i = 0; l->any_reserved && i < l->njobs; i++) {
        struct loop_job *j = l->job[i];
        if (j == NULL || !j->has_reserved || !placement_offline(c, &j->reserved))
            continue;
        loop__say(l, LOG_LEVEL_INFO, j->id,
                  "its reserved place is on a node out of service; replanned");
        placement_clear(&j->reserved);
        j->has_reserved = 0;
    }
    l->dirty = 1;
}

int loop_step(struct loop *l)
{
    double now;
    int changed = loop__read_events(l);
    now = l->b->now(l->bctx);
    check_nodes(l, now);
    loop__enforce_kills(l, now);
    if (changed)
        changed += loop__start_reserved(l);
    if (now >= l->next_backoff)
        l->dirty = 1;
    if (l->dirty || now >= l->last_pass + l->cfg.params.interval_s) {
        loop_pass(l);
        changed++;
    }
    return changed;
}

double loop_next_wakeup(const struct loop *l)
{
    double t = l->last_pass + l->cfg.params.interval_s;
    if (l->dirty)
        return l->b->now(l->bctx);
    if (l->next_backoff < t)
        t = l->next_backoff;
    for (int i = 0; l->any_stopping && i < l->njobs; i++) {
        const struct loop_job *j = l->job[i];
        if (j != NULL && j->state == LOOP_STOPPING && j->kill_at < t)
            t = j->kill_at;
    }
    return t;
}
