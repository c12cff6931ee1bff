/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.c - the scheduler loop: its jobs, the pass (snapshot -> policy -> diff -> journal), the
 * requests (cancel, stop) and what it shows (loop.h). What happens to attempts on the
 * backend (starts, stops, exits, progress, recovery) is in loop_attempt.c.
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "loop_impl.h"

/* How often the loop asks a backend whose nodes come and go (node_states) which are in
 * service: a drained node is seen within this, and Slurm answers in about a millisecond. */
#define NODE_CHECK_S 5.0

void loop__say(struct loop *l, enum log_level level, const char *job, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    if (l->cfg.log == NULL) {
        log_vmsg(level, job, fmt, ap);
        va_end(ap);
        return;
    }
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    l->cfg.log(l->cfg.log_arg, level, job, msg);
}

struct loop *loop_create(const struct loop_config *cfg, const struct backend_ops *backend,
                         void *backend_ctx, const struct journal_ops *journal, void *journal_ctx,
                         struct error *err)
{
    struct loop *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    l->cfg = *cfg;
    l->b = backend;
    l->bctx = backend_ctx;
    l->jo = journal;
    l->jctx = journal_ctx;
    if (backend->describe(backend_ctx, &l->cluster, err) < 0) {
        free(l);
        return NULL;
    }
    if (usage_init(&l->used, l->cluster) < 0 || usage_init(&l->pinned, l->cluster) < 0 ||
        usage_init(&l->check, l->cluster) < 0 || usage_init(&l->running, l->cluster) < 0 ||
        usage_init(&l->occupied, l->cluster) < 0) {
        usage_clear(&l->used);
        usage_clear(&l->pinned);
        usage_clear(&l->check);
        usage_clear(&l->running);
        cluster_free(l->cluster);
        free(l);
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    }
    l->dirty = 1;
    l->last_pass = -INFINITY;
    l->next_backoff = INFINITY;
    return l;
}

static void job_free(struct loop_job *j)
{
    if (j == NULL)
        return;
    placement_clear(&j->placement);
    placement_clear(&j->reserved);
    free(j);
}

void loop_destroy(struct loop *l)
{
    if (l == NULL)
        return;
    for (int i = 0; i < l->njobs; i++)
        job_free(l->job[i]);
    free(l->job);
    idmap_free(&l->by_id);
    idmap_free(&l->by_backend);
    usage_clear(&l->used);
    usage_clear(&l->pinned);
    usage_clear(&l->check);
    usage_clear(&l->running);
    usage_clear(&l->occupied);
    cluster_free(l->cluster);
    free(l->pj);
    free(l->pmap);
    free(l->out);
    free(l);
}

const struct cluster *loop_cluster(const struct loop *l)
{
    return l->cluster;
}

const struct policy_ops *loop_policy(const struct loop *l)
{
    return l->cfg.policy;
}

void loop_set_policy(struct loop *l, const struct policy_ops *p)
{
    if (p != NULL && p != l->cfg.policy) {
        loop__say(l, LOG_LEVEL_INFO, NULL, "policy %s -> %s", l->cfg.policy->name, p->name);
        l->cfg.policy = p;
        l->dirty = 1;
    }
}

const struct policy_params *loop_params(const struct loop *l)
{
    return &l->cfg.params;
}

struct loop_job *loop__new_job(struct loop *l, const struct loop_submit *s, struct error *err)
{
    struct loop_job *j;
    if (idmap_get(&l->by_id, s->id, NULL) != NULL)
        return errno = EEXIST, errprintf(err, "job %s is already known", s->id), NULL;
    if (l->njobs == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        struct loop_job **grown = realloc(l->job, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
        l->job = grown;
        l->cap = cap;
    }
    j = calloc(1, sizeof(*j));
    if (j == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    snprintf(j->id, sizeof(j->id), "%s", s->id);
    snprintf(j->owner, sizeof(j->owner), "%s", s->owner ? s->owner : "");
    j->min = s->min > 0 ? s->min : 1;
    j->max = s->max >= j->min ? s->max : j->min;
    j->gpw = s->gpw;
    j->cpw = s->cpw > 0 ? s->cpw : 1;
    j->priority = s->priority;
    j->max_restarts = s->max_restarts;
    j->state = LOOP_QUEUED;
    j->submitted = s->submitted >= 0 ? s->submitted : l->b->now(l->bctx);
    j->waiting_since = j->submitted;
    j->restart_cost = j->last_stop_s = -1;
    j->work_left = -1;
    j->first_progress = -1;
    j->f_prev = -1;
    j->user = s->user;
    j->attempts = s->attempts;
    j->failures = s->failures;
    j->not_before = s->not_before;
    j->service = s->service;
    j->run_time = s->run_time;
    speed_init(&j->speed, l->cfg.speed_mode);
    if (idmap_put(&l->by_id, j->id, j) < 0) {
        free(j);
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    }
    l->job[l->njobs++] = j;
    return j;
}

int loop_submit(struct loop *l, const struct loop_submit *s, struct error *err)
{
    if (loop__new_job(l, s, err) == NULL)
        return -1;
    l->dirty = 1;
    return 0;
}

void loop__drop(struct loop *l, struct loop_job *j)
{
    idmap_del(&l->by_id, j->id);
    if (j->backend_id[0])
        idmap_del(&l->by_backend, j->backend_id);
    for (int i = 0; i < l->njobs; i++) {
        if (l->job[i] == j) {
            l->job[i] = NULL;
            l->holes++;
            break;
        }
    }
    job_free(j);
}

/* Closes the holes ended jobs left, keeping submission order. */
static void compact(struct loop *l)
{
    int k = 0;
    if (l->holes == 0)
        return;
    for (int i = 0; i < l->njobs; i++)
        if (l->job[i] != NULL)
            l->job[k++] = l->job[i];
    l->njobs = k;
    l->holes = 0;
}
/* ---- the pass ---- */

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

int loop_pass(struct loop *l)
{
    struct policy_snapshot s;
    struct usage *pinned = &l->pinned;
    struct error err;
    double now = l->b->now(l->bctx), t0 = clock_mono_s(), dt;
    int n = 0, rc = -1, nchg = 0, *chg = NULL;
    enum change_kind *kind = NULL;

    l->dirty = 0;
    l->last_pass = now;
    l->next_backoff = INFINITY;
    compact(l);
    if (scratch(l, l->njobs + 1) < 0)
        return -1;
    usage_reset(pinned);
    usage_copy(&l->occupied, &l->running);
    chg = malloc((size_t)(l->njobs + 1) * sizeof(int));
    kind = malloc((size_t)(l->njobs + 1) * sizeof(*kind));
    if (chg == NULL || kind == NULL)
        goto done;
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
    s = (struct policy_snapshot){now, l->cluster, pinned, &l->occupied, l->pj, n, l->cfg.params};
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
    /* The difference. */
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
    rc = 0;
    if (nchg == 0)
        goto done;
    /* Written first, as one batch. */
    if (l->jo->begin(l->jctx, &err) < 0) {
        loop__say(l, LOG_LEVEL_ERROR, NULL, "cannot record the pass: %s", err.text);
        rc = -1;
        goto done;
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
        rc = -1;
        goto done;
    }
    /* Carried out: stops first, then what fits now. */
    for (int c = 0; c < nchg; c++) {
        struct loop_job *j = l->pmap[chg[c]];
        struct policy_target *t = &l->out[chg[c]];
        if (kind[c] == CH_PREEMPT || kind[c] == CH_RESIZE) {
            loop__say(l, LOG_LEVEL_INFO, j->id, "%s", t->reason);
            if (kind[c] == CH_RESIZE) {
                j->reserved = t->placement;
                t->placement = (struct placement){0};
                j->has_reserved = 1;
                l->any_reserved = 1;
                snprintf(j->reserved_reason, sizeof(j->reserved_reason), "%s", t->reason);
                l->stats.resizes++;
            } else {
                l->stats.preemptions++;
            }
            loop__ask_stop(l, j, kind[c] == CH_RESIZE ? STOP_RESIZE : STOP_PREEMPT);
        } else if (kind[c] == CH_RESERVE) {
            j->reserved = t->placement;
            t->placement = (struct placement){0};
            j->has_reserved = 1;
            l->any_reserved = 1;
            snprintf(j->reserved_reason, sizeof(j->reserved_reason), "%s", t->reason);
        }
    }
    for (int c = 0; c < nchg; c++) {
        if (kind[c] == CH_START)
            loop__start(l, l->pmap[chg[c]], &l->out[chg[c]].placement, l->out[chg[c]].reason, 1);
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

/* ---- requests ---- */

static int end_request(struct loop *l, const char *id, enum loop_stop why, struct error *err)
{
    struct loop_job *j = idmap_get(&l->by_id, id, NULL);
    struct journal_sched sched;
    const char *verb = why == STOP_CANCEL ? "cancel" : "stop";

    if (j == NULL)
        return errno = ENOENT, errprintf(err, "job %s is not queued or running", id);
    if (j->state == LOOP_QUEUED) {
        const char *state = why == STOP_CANCEL ? "CANCELLED" : "STOPPED";
        sched = loop__sched_of(j);
        if (l->jo->transition(l->jctx, j, state, why == STOP_CANCEL ? "cancelled" : "stopped",
                              why == STOP_CANCEL ? "cancelled while queued"
                                                 : "stopped while queued",
                              &sched, err) < 0)
            return -1;
        loop__say(l, LOG_LEVEL_INFO, j->id, "%s while queued", verb);
        loop__drop(l, j);
        l->dirty = 1;
        return 0;
    }
    if (j->state == LOOP_STOPPING && j->stop == STOP_CANCEL)
        return errno = EALREADY,
               errprintf(err, "job %s is being cancelled already; it ends CANCELLED", id);
    if (j->state == LOOP_STOPPING && j->stop == STOP_USER && why == STOP_USER)
        return 0; /* asked twice: same outcome */
    if (l->jo->stopping(l->jctx, j, why == STOP_CANCEL ? "cancelling" : "stopping",
                        why == STOP_CANCEL
                            ? "cancel requested: SIGTERM sent; it ends CANCELLED once it exits"
                            : "stop requested: SIGTERM sent: the workers checkpoint and exit",
                        err) < 0)
        return -1;
    if (j->has_reserved) { /* a resize in flight: it will not restart */
        placement_clear(&j->reserved);
        j->has_reserved = 0;
    }
    loop__say(l, LOG_LEVEL_INFO, j->id, "%s: SIGTERM to attempt %d (%s)", verb, j->attempt,
              j->backend_id);
    loop__ask_stop(l, j, why);
    return 0;
}

int loop_cancel(struct loop *l, const char *id, struct error *err)
{
    return end_request(l, id, STOP_CANCEL, err);
}

int loop_stop_job(struct loop *l, const char *id, struct error *err)
{
    return end_request(l, id, STOP_USER, err);
}

/* ---- reading ---- */

const struct loop_job *loop_job(const struct loop *l, const char *id)
{
    return idmap_get(&l->by_id, id, NULL);
}

int loop_njobs(const struct loop *l)
{
    return l->njobs;
}

const struct loop_job *loop_job_at(const struct loop *l, int i)
{
    return i >= 0 && i < l->njobs ? l->job[i] : NULL;
}

void loop_stats(const struct loop *l, struct loop_stats *out)
{
    *out = l->stats;
}

json_t *loop_describe(const struct loop *l)
{
    json_t *out;
    const struct cluster *c = l->cluster;
    json_t *nodes = json_array();
    for (int n = 0; n < c->nnodes; n++) {
        json_t *gpus = json_array(), *jobs = json_array();
        for (int g = 0; g < c->node[n].gpus; g++)
            json_array_append_new(gpus, json_pack("{s:i}", "id", g));
        for (int i = 0; i < l->njobs; i++) {
            const struct loop_job *j = l->job[i];
            if (j == NULL || j->state == LOOP_QUEUED)
                continue;
            for (int p = 0; p < j->placement.nparts; p++) {
                const struct placement_part *pp = &j->placement.part[p];
                json_t *ids = json_array();
                if (pp->node != n)
                    continue;
                for (int g = 0; g < pp->ngpus; g++) {
                    int id = j->placement.gpu[pp->gpu_off + g];
                    json_array_append_new(ids, json_integer(id));
                    json_object_set_new(json_array_get(gpus, (size_t)id), "job",
                                        json_string(j->id));
                }
                json_array_append_new(
                    jobs,
                    json_pack("{s:s, s:i, s:i, s:o, s:s, s:s}", "id", j->id, "attempt", j->attempt,
                              "workers", pp->workers, "gpus", ids, "backend_id", j->backend_id,
                              "state", j->state == LOOP_STOPPING ? "STOPPING" : "RUNNING"));
            }
        }
        json_array_append_new(nodes,
                              json_pack("{s:s, s:i, s:i, s:i, s:o, s:o, s:b}", "name",
                                        c->node[n].name, "slots", c->node[n].slots, "slots_free",
                                        l->used.slots_free[n], "gpus_free", l->used.gpus_free[n],
                                        "gpus", gpus, "jobs", jobs, "offline", c->node[n].offline));
    }
    out = json_pack("{s:o, s:s, s:s}", "nodes", nodes, "policy", l->cfg.policy->name, "backend",
                    l->b->name);
    /* The backend's own view beside the loop's (Slurm's nodes, GPUs and every job holding
     * them, ringd's or not), under the backend's name. */
    if (out != NULL && l->b->cluster_json != NULL)
        json_object_set_new(out, l->b->name, l->b->cluster_json(l->bctx));
    return out;
}
