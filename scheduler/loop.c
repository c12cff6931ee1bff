/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.c - the scheduler loop: snapshot -> policy -> diff -> journal -> backend (loop.h).
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
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loop.h"

/* Backoff after the n-th failure: 2^(n-1) s, at most a minute, as systemd and Kubernetes do. */
#define BACKOFF_MAX_S 60
/* After SIGKILL, look again this often until the attempt is reaped. */
#define REKILL_S 1.0

/* ---- a map from ids to jobs: open addressing with tombstones ---- */

struct idmap {
    struct loop_job **slot; /* NULL empty, &tomb deleted */
    const char **key;
    size_t cap, used; /* used counts tombstones too */
};

static struct loop_job tomb;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static int idmap_grow(struct idmap *m)
{
    struct idmap n = {0};
    n.cap = m->cap ? m->cap * 2 : 64;
    n.slot = calloc(n.cap, sizeof(*n.slot));
    n.key = calloc(n.cap, sizeof(*n.key));
    if (n.slot == NULL || n.key == NULL) {
        free(n.slot);
        free(n.key);
        return errno = ENOMEM, -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slot[i] != NULL && m->slot[i] != &tomb) {
            size_t k = hash_str(m->key[i]) & (n.cap - 1);
            while (n.slot[k] != NULL)
                k = (k + 1) & (n.cap - 1);
            n.slot[k] = m->slot[i];
            n.key[k] = m->key[i];
            n.used++;
        }
    }
    free(m->slot);
    free(m->key);
    *m = n;
    return 0;
}

/* key must live as long as the entry (it points into the job). */
static int idmap_put(struct idmap *m, const char *key, struct loop_job *j)
{
    size_t k;
    if ((m->used + 1) * 2 > m->cap && idmap_grow(m) < 0)
        return -1;
    k = hash_str(key) & (m->cap - 1);
    while (m->slot[k] != NULL && m->slot[k] != &tomb)
        k = (k + 1) & (m->cap - 1);
    if (m->slot[k] == NULL)
        m->used++;
    m->slot[k] = j;
    m->key[k] = key;
    return 0;
}

static struct loop_job *idmap_get(const struct idmap *m, const char *key, size_t *at)
{
    size_t k;
    if (m->cap == 0)
        return NULL;
    k = hash_str(key) & (m->cap - 1);
    while (m->slot[k] != NULL) {
        if (m->slot[k] != &tomb && strcmp(m->key[k], key) == 0) {
            if (at)
                *at = k;
            return m->slot[k];
        }
        k = (k + 1) & (m->cap - 1);
    }
    return NULL;
}

static void idmap_del(struct idmap *m, const char *key)
{
    size_t at;
    if (idmap_get(m, key, &at) != NULL)
        m->slot[at] = &tomb;
}

static void idmap_free(struct idmap *m)
{
    free(m->slot);
    free(m->key);
    memset(m, 0, sizeof(*m));
}

/* ---- the loop ---- */

struct loop {
    struct loop_config cfg;
    const struct backend_ops *b;
    void *bctx;
    const struct journal_ops *jo;
    void *jctx;
    struct cluster *cluster;
    struct usage used;    /* what attempts hold now */
    struct usage running; /* what RUNNING attempts hold (not those being stopped) */
    struct loop_job **job;
    int njobs, cap, holes; /* holes: NULL entries left by ended jobs */
    struct idmap by_id, by_backend;
    int dirty;
    int any_reserved, any_stopping; /* 0: no job has a reservation / is stopping (scans skip) */
    double last_pass, next_backoff;
    struct loop_stats stats;
    /* scratch for passes, kept between them */
    struct usage pinned, check, occupied;
    struct policy_job *pj;
    struct loop_job **pmap;
    struct policy_target *out;
    int scratch_cap;
};

static void say(struct loop *l, const char *level, const char *job, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void say(struct loop *l, const char *level, const char *job, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (l->cfg.log)
        l->cfg.log(l->cfg.log_arg, level, job, msg);
    else
        fprintf(stderr, "level=%s job=%s msg=\"%s\"\n", level, job ? job : "-", msg);
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int unit(const struct loop_job *j)
{
    return j->gpw > 0 ? j->gpw : j->cpw > 0 ? j->cpw : 1;
}

static struct journal_sched sched_of(const struct loop_job *j)
{
    return (struct journal_sched){j->attempts, j->failures, j->not_before};
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
        say(l, "info", NULL, "policy %s -> %s", l->cfg.policy->name, p->name);
        l->cfg.policy = p;
        l->dirty = 1;
    }
}

const struct policy_params *loop_params(const struct loop *l)
{
    return &l->cfg.params;
}

void loop_dirty(struct loop *l)
{
    l->dirty = 1;
}

static struct loop_job *new_job(struct loop *l, const struct loop_submit *s, struct error *err)
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
    if (new_job(l, s, err) == NULL)
        return -1;
    l->dirty = 1;
    return 0;
}

/* Forgets an ended job. */
static void drop(struct loop *l, struct loop_job *j)
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

/* The run and checkpoint directories of attempt of j (empty without a data_dir). */
static void dirs(struct loop *l, const struct loop_job *j, int attempt, json_t *spec, char *run,
                 size_t rlen, char *ckpt, size_t clen)
{
    const char *own = json_string_value(json_object_get(spec, "checkpoint_dir"));
    run[0] = ckpt[0] = '\0';
    if (l->cfg.data_dir == NULL)
        return;
    snprintf(run, rlen, "%s/runs/%s/%d", l->cfg.data_dir, j->id, attempt);
    if (own != NULL)
        snprintf(ckpt, clen, "%s", own);
    else
        snprintf(ckpt, clen, "%s/checkpoints/%s", l->cfg.data_dir, j->id);
}

/* A failed attempt or start: back off and queue again, or FAILED. Returns the new state. */
static const char *failure(struct loop *l, struct loop_job *j, double now, char *reason, size_t len,
                           const char *what)
{
    j->failures++;
    if (j->failures <= j->max_restarts) {
        int backoff = 1 << (j->failures - 1 < 6 ? j->failures - 1 : 6);
        if (backoff > BACKOFF_MAX_S)
            backoff = BACKOFF_MAX_S;
        j->not_before = now + backoff;
        if (j->not_before < l->next_backoff)
            l->next_backoff = j->not_before;
        snprintf(reason, len, "%s; restart %d of %d in %d s", what, j->failures, j->max_restarts,
                 backoff);
        return "QUEUED";
    }
    snprintf(reason, len, "%s and no restarts are left (max_restarts %d)", what, j->max_restarts);
    return "FAILED";
}

/*
 * Starts attempt attempts+1 of j at p. journaled: its STARTING is already in the journal
 * (a pass's batch); else it is written here first. Returns 0 when it runs.
 */
static int start(struct loop *l, struct loop_job *j, const struct placement *p, const char *reason,
                 int journaled)
{
    struct backend_start s = {0};
    struct journal_sched sched;
    struct error err;
    json_t *spec = NULL;
    char run[4200], ckpt[4200], id[64], why[400], user[64] = "";
    double now = l->b->now(l->bctx);
    int attempt = j->attempts + 1;

    if (!usage_fits(&l->used, p, j->cpw)) {
        say(l, "error", j->id, "internal: its place is taken; it waits for the next pass");
        if (journaled) {
            sched = sched_of(j);
            l->jo->transition(l->jctx, j, "QUEUED", "requeued",
                              "its place was taken before it could start; it waits", &sched, &err);
        }
        l->dirty = 1;
        return -1;
    }
    j->attempts = attempt;
    sched = sched_of(j);
    if (!journaled && l->jo->starting(l->jctx, j, attempt, p, reason, &sched, &err) < 0) {
        j->attempts--;
        say(l, "error", j->id, "cannot record STARTING: %s", err.text);
        return -1;
    }
    if (l->jo->spec != NULL &&
        (spec = l->jo->spec(l->jctx, j->id, user, sizeof(user), &err)) == NULL) {
        snprintf(why, sizeof(why), "cannot read its JobSpec: %s", err.text);
        goto failed;
    }
    dirs(l, j, attempt, spec, run, sizeof(run), ckpt, sizeof(ckpt));
    s = (struct backend_start){
        .job_id = j->id,
        .attempt = attempt,
        .placement = p,
        .cluster = l->cluster,
        .gpus_per_worker = j->gpw,
        .cpus_per_worker = j->cpw,
        .spec = spec,
        .run_dir = run[0] ? run : NULL,
        .checkpoint_dir = ckpt[0] ? ckpt : NULL,
        .checkpoint_is_default = json_object_get(spec, "checkpoint_dir") == NULL,
        .owner = j->owner,
        .user = user[0] ? user : NULL,
    };
    if (l->b->start(l->bctx, &s, id, sizeof(id), &err) < 0) {
        snprintf(why, sizeof(why), "attempt %d could not start: %s", attempt, err.text);
        goto failed;
    }
    json_decref(spec);
    spec = NULL;
    usage_apply(&l->used, p, j->cpw, 1);
    usage_take(&l->running, p, j->cpw, 1);
    if (placement_copy(&j->placement, p) < 0) {
        /* Out of memory with the attempt running: stop it rather than lose track of it. */
        l->b->signal(l->bctx, id, SIGKILL);
        usage_apply(&l->used, p, j->cpw, -1);
        usage_take(&l->running, p, j->cpw, -1);
        snprintf(why, sizeof(why), "attempt %d: out of memory", attempt);
        goto failed;
    }
    snprintf(j->backend_id, sizeof(j->backend_id), "%s", id);
    if (idmap_put(&l->by_backend, j->backend_id, j) < 0)
        say(l, "error", j->id, "out of memory: the end of attempt %d may go unnoticed", attempt);
    j->state = LOOP_RUNNING;
    j->stop = STOP_NONE;
    j->attempt = attempt;
    j->started = now;
    j->stop_requested = j->kill_at = 0;
    j->first_progress = -1;
    j->f_prev = -1;
    if (j->has_reserved) {
        placement_clear(&j->reserved);
        j->has_reserved = 0;
    }
    l->stats.starts++;
    sched = sched_of(j);
    if (l->jo->started(l->jctx, j, attempt, p, id, run, &sched, &err) < 0)
        say(l, "error", j->id, "cannot record attempt %d (%s): %s", attempt, id, err.text);
    return 0;
failed : {
    const char *state;
    char msg[600];
    json_decref(spec);
    if (j->has_reserved) {
        placement_clear(&j->reserved);
        j->has_reserved = 0;
    }
    state = failure(l, j, now, msg, sizeof(msg), why);
    sched = sched_of(j);
    say(l, "error", j->id, "%s", msg);
    if (l->jo->transition(l->jctx, j, state, strcmp(state, "FAILED") ? "retry" : "failed", msg,
                          &sched, &err) < 0)
        say(l, "error", j->id, "cannot record the failed start: %s", err.text);
    j->state = LOOP_QUEUED;
    j->waiting_since = now;
    if (strcmp(state, "FAILED") == 0)
        drop(l, j);
    l->dirty = 1;
    return -1;
}
}

/* Starts the reservations that fit now, oldest job first. */
static int start_reserved(struct loop *l)
{
    int started = 0, left = 0;
    if (!l->any_reserved)
        return 0;
    for (int i = 0; i < l->njobs; i++) {
        struct loop_job *j = l->job[i];
        if (j != NULL && j->has_reserved)
            left++;
        if (j == NULL || j->state != LOOP_QUEUED || !j->has_reserved)
            continue;
        if (usage_fits(&l->used, &j->reserved, j->cpw)) {
            struct placement p = j->reserved;
            char reason[160];
            snprintf(reason, sizeof(reason), "%s", j->reserved_reason);
            j->reserved = (struct placement){0};
            j->has_reserved = 0;
            start(l, j, &p, reason, 0);
            placement_clear(&p);
            started++;
            left--;
        }
    }
    l->any_reserved = left > 0;
    return started;
}

/* Asks j's attempt to stop, for why. The journal has it already. */
static void ask_stop(struct loop *l, struct loop_job *j, enum loop_stop why)
{
    double now = l->b->now(l->bctx);
    j->stop = why;
    if (j->state == LOOP_STOPPING)
        return; /* already signalled: the new reason decides what its exit means */
    j->state = LOOP_STOPPING;
    usage_take(&l->running, &j->placement, j->cpw, -1);
    l->any_stopping = 1;
    j->stop_requested = now;
    j->kill_at = now + l->cfg.kill_grace_s;
    l->stats.stops++;
    if (l->b->signal(l->bctx, j->backend_id, SIGTERM) < 0 && errno != ESRCH)
        say(l, "warning", j->id, "SIGTERM to attempt %d (%s) failed", j->attempt, j->backend_id);
}

/* ---- attempts ending, progress ---- */

static void attempt_exited(struct loop *l, struct loop_job *j, const struct backend_event *e)
{
    int status = e->status;
    double t = e->time;
    /* Slurm's word on an end ringd did not ask for ("Slurm job 42: node failure on n2"). */
    const char *told = e->reason[0] ? e->reason : NULL;
    struct journal_sched sched;
    struct error err;
    char reason[600];
    const char *state, *type;
    double ran = t - j->started, stop_s = j->stop != STOP_NONE ? t - j->stop_requested : -1;
    int attempt = j->attempt, workers = j->placement.workers;
    enum loop_stop why = j->stop;

    if (ran < 0)
        ran = 0;
    j->service += ran * workers * unit(j);
    j->run_time += ran;
    j->last_stop_s = stop_s;
    if (j->state == LOOP_RUNNING) /* it ended by itself */
        usage_take(&l->running, &j->placement, j->cpw, -1);
    usage_apply(&l->used, &j->placement, j->cpw, -1);
    placement_clear(&j->placement);
    idmap_del(&l->by_backend, j->backend_id);
    j->backend_id[0] = '\0';
    l->stats.exits++;
    if (why == STOP_CANCEL) {
        state = "CANCELLED";
        type = "cancelled";
        snprintf(reason, sizeof(reason), "cancelled by request (attempt %d exited %d)", attempt,
                 status);
    } else if (e->cancelled && why == STOP_NONE) {
        /* Someone cancelled it in the resource manager (scancel): the job ends as they
         * asked, rather than being restarted behind their back. */
        state = "CANCELLED";
        type = "cancelled";
        snprintf(reason, sizeof(reason), "attempt %d was cancelled outside ringd: %s", attempt,
                 told ? told : "by its resource manager");
    } else if (status == 0) {
        state = "SUCCEEDED";
        type = "succeeded";
        snprintf(reason, sizeof(reason), "every worker exited 0");
    } else if (why == STOP_USER) {
        state = "STOPPED";
        type = "stopped";
        if (status == 75)
            snprintf(reason, sizeof(reason),
                     "stopped by request after a checkpoint (exit 75, %.1f s after SIGTERM); "
                     "resume to continue",
                     stop_s);
        else
            snprintf(reason, sizeof(reason),
                     "stopped by request, but the program exited %d instead of 75: its last "
                     "checkpoint may be older",
                     status);
    } else if (why == STOP_RESIZE || why == STOP_PREEMPT) {
        state = "QUEUED";
        type = why == STOP_RESIZE ? "resized" : "preempted";
        snprintf(reason, sizeof(reason), "attempt %d (%d workers) stopped in %.1f s%s%s%s", attempt,
                 workers, stop_s,
                 status == 75 ? " after a checkpoint"
                              : " but exited other than 75 (its last "
                                "checkpoint may be older)",
                 why == STOP_RESIZE && j->has_reserved ? "; restarting: " : "; queued again",
                 why == STOP_RESIZE && j->has_reserved ? j->reserved_reason : "");
    } else {
        char what[400];
        if (told != NULL)
            snprintf(what, sizeof(what), "attempt %d failed (exit status %d): %s", attempt, status,
                     told);
        else
            snprintf(what, sizeof(what),
                     "attempt %d failed (exit status %d; see its run directory)", attempt, status);
        state = failure(l, j, t, reason, sizeof(reason), what);
        type = strcmp(state, "FAILED") ? "retry" : "failed";
    }
    if (strcmp(state, "QUEUED") != 0 && j->has_reserved) {
        placement_clear(&j->reserved);
        j->has_reserved = 0;
    }
    sched = sched_of(j);
    if (l->jo->ended(l->jctx, j, attempt, status, stop_s, state, type, reason, &sched, &err) < 0)
        say(l, "error", j->id, "cannot record the end of attempt %d: %s", attempt, err.text);
    j->stop = STOP_NONE;
    if (strcmp(state, "QUEUED") == 0) {
        j->state = LOOP_QUEUED;
        j->waiting_since = t;
        j->restarts++;
    } else {
        drop(l, j);
    }
    l->dirty = 1;
}

static void attempt_progress(struct loop *l, struct loop_job *j, const struct backend_event *e)
{
    struct error err;
    double start_s = -1;
    int n = e->world_size > 0 ? e->world_size : j->placement.workers;

    if (j->first_progress < 0) {
        j->first_progress = e->time;
        start_s = e->time - j->started;
        if (j->last_stop_s >= 0)
            j->restart_cost = j->last_stop_s + start_s;
        else if (j->restart_cost < 0)
            j->restart_cost = start_s; /* a first start: no stop to add yet */
    }
    if (e->samples_per_s > 0)
        speed_observe(&j->speed, n, e->samples_per_s);
    if (e->samples >= 0 && e->total_samples > 0) {
        j->work_left = e->total_samples > e->samples ? e->total_samples - e->samples : 0;
        j->work_time = e->time;
    } else if (e->step >= 0 && e->total_steps > 0) {
        /* No totals in samples: the fraction of steps done, and how fast it grew since the
         * attempt's previous report, give the time left; at this throughput, the work. */
        double f = (double)e->step / (double)e->total_steps;
        if (j->f_prev >= 0 && f > j->f_prev && e->time > j->t_prev && e->samples_per_s > 0) {
            j->work_left = (1 - f) / ((f - j->f_prev) / (e->time - j->t_prev)) * e->samples_per_s;
            j->work_time = e->time;
        }
        j->f_prev = f;
        j->t_prev = e->time;
    }
    if (l->jo->progress(l->jctx, j, j->attempt, start_s, e->samples_per_s, &err) < 0)
        say(l, "warning", j->id, "cannot record progress: %s", err.text);
}

static int read_events(struct loop *l)
{
    struct backend_event ev[64];
    int total = 0, n;
    while ((n = l->b->poll(l->bctx, ev, 64)) > 0) {
        for (int i = 0; i < n; i++) {
            struct loop_job *j = idmap_get(&l->by_backend, ev[i].id, NULL);
            if (j == NULL)
                continue; /* an attempt this loop does not track (recovered and gone) */
            if (ev[i].kind == BACKEND_EXITED)
                attempt_exited(l, j, &ev[i]);
            else
                attempt_progress(l, j, &ev[i]);
            total++;
        }
        if (n < 64)
            break;
    }
    return total;
}

static void enforce_kills(struct loop *l, double now)
{
    int stopping = 0;
    if (!l->any_stopping)
        return;
    for (int i = 0; i < l->njobs; i++) {
        struct loop_job *j = l->job[i];
        stopping += j != NULL && j->state == LOOP_STOPPING;
        if (j != NULL && j->state == LOOP_STOPPING && now >= j->kill_at) {
            say(l, "warning", j->id, "attempt %d did not exit %.0f s after SIGTERM: SIGKILL",
                j->attempt, l->cfg.kill_grace_s);
            l->b->signal(l->bctx, j->backend_id, SIGKILL);
            j->kill_at = now + REKILL_S;
        }
    }
    l->any_stopping = stopping > 0;
}

/* ---- the pass ---- */

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
 * staying where it is could never start, start() checks what attempts hold: it would wait,
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
            say(l, "error", l->pmap[i]->id,
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
    double now = l->b->now(l->bctx), t0 = wall_s(), dt;
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
        if (j->has_reserved) {
            if (usage_apply(pinned, &j->reserved, j->cpw, 1) < 0 ||
                usage_apply(&l->occupied, &j->reserved, j->cpw, 1) < 0)
                say(l, "error", j->id, "internal: a reservation overlaps another place");
            continue;
        }
        if (j->state == LOOP_STOPPING)
            continue;
        /* An attempt started at this very instant (a virtual clock stands still while the
         * loop turns) is left alone until time moves: a pass can then never undo what the
         * previous one did in the same instant, so the loop always gets to the next event. */
        if (j->state == LOOP_RUNNING && j->started >= now) {
            if (usage_apply(pinned, &j->placement, j->cpw, 1) < 0)
                say(l, "error", j->id, "internal: a new attempt overlaps a reservation");
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
            p->service += ran * j->placement.workers * unit(j);
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
    s = (struct policy_snapshot){now, l->cluster, pinned, &l->occupied, l->pj, n, l->cfg.params};
    for (int i = 0; i < n; i++) {
        l->out[i].workers = l->out[i].unchanged = 0;
        l->out[i].reason[0] = '\0';
    }
    if (l->cfg.policy->plan(&s, l->out) < 0) {
        say(l, "error", NULL, "policy %s failed: out of memory", l->cfg.policy->name);
        goto done;
    }
    if (!valid(l, &s, &l->check))
        goto done;
    /* The difference. */
    for (int i = 0; i < n; i++) {
        const struct loop_job *j = l->pmap[i];
        const struct policy_target *t = &l->out[i];
        if (j->state == LOOP_RUNNING) {
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
        say(l, "error", NULL, "cannot record the pass: %s", err.text);
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
            sched = sched_of(j);
            w = l->jo->starting(l->jctx, j, j->attempts, &t->placement, t->reason, &sched, &err);
            j->attempts--;
            break;
        case CH_RESERVE:
            snprintf(msg, sizeof(msg),
                     "%s; its place is reserved until the attempts being stopped for it exit",
                     t->reason);
            sched = sched_of(j);
            w = l->jo->transition(l->jctx, j, "QUEUED", "reserved", msg, &sched, &err);
            break;
        }
        if (w < 0)
            break;
    }
    if (l->jo->commit(l->jctx, &err) < 0) {
        say(l, "error", NULL, "cannot record the pass (%d changes): %s; nothing changes", nchg,
            err.text);
        rc = -1;
        goto done;
    }
    /* Carried out: stops first, then what fits now. */
    for (int c = 0; c < nchg; c++) {
        struct loop_job *j = l->pmap[chg[c]];
        struct policy_target *t = &l->out[chg[c]];
        if (kind[c] == CH_PREEMPT || kind[c] == CH_RESIZE) {
            say(l, "info", j->id, "%s", t->reason);
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
            ask_stop(l, j, kind[c] == CH_RESIZE ? STOP_RESIZE : STOP_PREEMPT);
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
            start(l, l->pmap[chg[c]], &l->out[chg[c]].placement, l->out[chg[c]].reason, 1);
    }
done:
    policy_targets_clear(l->out, n);
    free(chg);
    free(kind);
    dt = wall_s() - t0;
    l->stats.passes++;
    l->stats.pass_time_s += dt;
    if (dt > l->stats.pass_time_max_s)
        l->stats.pass_time_max_s = dt;
    return rc;
}

int loop_step(struct loop *l)
{
    double now;
    int changed = read_events(l);
    now = l->b->now(l->bctx);
    enforce_kills(l, now);
    if (changed)
        changed += start_reserved(l);
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
        sched = sched_of(j);
        if (l->jo->transition(l->jctx, j, state, why == STOP_CANCEL ? "cancelled" : "stopped",
                              why == STOP_CANCEL ? "cancelled while queued"
                                                 : "stopped while queued",
                              &sched, err) < 0)
            return -1;
        say(l, "info", j->id, "%s while queued", verb);
        drop(l, j);
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
    say(l, "info", j->id, "%s: SIGTERM to attempt %d (%s)", verb, j->attempt, j->backend_id);
    ask_stop(l, j, why);
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

int loop_recover(struct loop *l, const struct loop_submit *s, int number, const char *backend_id,
                 int stopping, struct error *err)
{
    struct loop_job *j = new_job(l, s, err);
    struct backend_start bs = {.job_id = s->id, .attempt = number, .cluster = l->cluster};
    struct journal_sched sched;
    struct placement where = {0};
    char reason[300], run[4200];
    int found = BACKEND_GONE;
    double now = l->b->now(l->bctx);

    if (j == NULL)
        return -1;
    if (l->cfg.data_dir != NULL) { /* where start() put it: progress.json is read there */
        snprintf(run, sizeof(run), "%s/runs/%s/%d", l->cfg.data_dir, s->id, number);
        bs.run_dir = run;
    }
    if (backend_id != NULL && backend_id[0] != '\0') {
        found = l->b->recover(l->bctx, backend_id, &bs, err);
        if (found < 0) {
            say(l, "warning", j->id, "recovering attempt %d (%s): %s", number, backend_id,
                err->text);
            found = BACKEND_GONE;
        }
    }
    if (found == BACKEND_ADOPTED) {
        snprintf(j->backend_id, sizeof(j->backend_id), "%s", backend_id);
        idmap_put(&l->by_backend, j->backend_id, j);
        j->attempt = number;
        j->state = LOOP_RUNNING;
        j->started = now;
        j->first_progress = -1;
        j->f_prev = -1;
        /* A backend that can say where it runs (Slurm) keeps it running: the loop takes
         * that place as the attempt's and goes on as before the restart. */
        if (!stopping && l->b->placement_of != NULL &&
            l->b->placement_of(l->bctx, backend_id, l->cluster, &where) == 0 &&
            usage_fits(&l->used, &where, j->cpw)) {
            usage_apply(&l->used, &where, j->cpw, 1);
            usage_take(&l->running, &where, j->cpw, 1);
            j->placement = where; /* moved: the job owns the arrays now */
            snprintf(reason, sizeof(reason),
                     "ringd restarted; attempt %d still runs (%s %s, %d workers) and is tracked "
                     "again",
                     number, l->b->name, backend_id, where.workers);
            sched = sched_of(j);
            if (l->jo->transition(l->jctx, j, "RUNNING", "adopted", reason, &sched, err) < 0)
                say(l, "error", j->id, "cannot record the adoption: %s", err->text);
            say(l, "info", j->id, "%s", reason);
            l->dirty = 1;
            return 0;
        }
        placement_clear(&where);
        /* Otherwise the loop does not know its place: it is stopped gracefully and
         * restarted where the policy says, like a resize. */
        ask_stop(l, j, stopping == 2 ? STOP_CANCEL : stopping ? STOP_USER : STOP_PREEMPT);
        return 0;
    }
    snprintf(reason, sizeof(reason),
             stopping == 2 ? "ringd restarted while attempt %d was being cancelled; %s"
             : stopping    ? "ringd restarted while attempt %d was stopping; %s; resume to "
                             "continue"
                           : "ringd restarted while attempt %d ran; %s; the job is queued again "
                             "to resume from its checkpoint",
             number,
             found == BACKEND_STOPPED ? "its surviving workers were stopped"
                                      : "its workers were gone");
    sched = sched_of(j);
    if (l->jo->ended(l->jctx, j, number, -1, -1,
                     stopping == 2 ? "CANCELLED"
                     : stopping    ? "STOPPED"
                                   : "QUEUED",
                     stopping == 2 ? "cancelled" : "requeued", reason, &sched, err) < 0) {
        drop(l, j);
        return -1;
    }
    say(l, "warning", j->id, "%s", reason);
    if (stopping)
        drop(l, j);
    l->dirty = 1;
    return 0;
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
        json_array_append_new(nodes, json_pack("{s:s, s:i, s:i, s:i, s:o, s:o}", "name",
                                               c->node[n].name, "slots", c->node[n].slots,
                                               "slots_free", l->used.slots_free[n], "gpus_free",
                                               l->used.gpus_free[n], "gpus", gpus, "jobs", jobs));
    }
    out = json_pack("{s:o, s:s, s:s}", "nodes", nodes, "policy", l->cfg.policy->name, "backend",
                    l->b->name);
    /* The backend's own view beside the loop's (Slurm's nodes, GPUs and every job holding
     * them, ringd's or not), under the backend's name. */
    if (out != NULL && l->b->cluster_json != NULL)
        json_object_set_new(out, l->b->name, l->b->cluster_json(l->bctx));
    return out;
}
