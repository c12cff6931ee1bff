/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scheduler.c - ringd's scheduler thread: the loop (loop.h) over the configured backend,
 * with the store as its journal, and the bridge to the HTTP threads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "journal_store.h"
#include "loop.h"
#include "scheduler.h"
#include "scheduler/backend/backend.h"

/* The thread looks at the world at least this often: the local backend has no way to wake
 * it when a child exits or rank 0 reports progress, so it polls. 100 ms keeps a stop ->
 * restart well inside a second without costing an idle ringd anything measurable. */
#define TICK_MS 100

/*
 * How long an HTTP thread waits for the scheduler thread to carry out its request. The
 * thread takes a request within a tick (TICK_MS) when idle and after a pass when busy (a
 * pass over thousands of queued jobs is milliseconds: GET /v1/scheduler's pass_ms_max),
 * but a backend call can hold it far longer: libslurm waits out its connection retries,
 * about 10 s a call, while slurmctld is unreachable. 500 ms is five ticks, far past a
 * pass, and leaves the other half of the second in which every route must answer to
 * reading and rendering. Past it the request is withdrawn if the thread has not taken
 * it yet (nothing was done: 503 with Retry-After), or left to the thread if it has.
 */
#define ASK_DEADLINE_MS 500

enum action { ACT_CANCEL, ACT_STOP, ACT_RESUME, ACT_SNAPSHOT, ACT_INFO, ACT_POLICY };

/*
 * A request from an HTTP thread, on the heap: a caller that gives up must not leave the
 * scheduler thread a pointer into its stack. Who frees it is decided under mu: the caller
 * once it is DONE, or withdrawn while still QUEUED; the scheduler thread when the caller
 * abandoned it while TAKEN.
 */
enum request_state { REQ_QUEUED, REQ_TAKEN, REQ_DONE };

struct request {
    char id[32];
    enum action action;
    json_t *out;
    int rc, errnum;
    struct error err;
    enum request_state state; /* under mu */
    int abandoned;            /* under mu: the caller stopped waiting while TAKEN */
    struct request *next;     /* in the queue, under mu */
};

/* What the thread last said of the cluster and of itself, for readers it cannot answer in
 * time (under pub_mu): JSON text, and when it was made (CLOCK_MONOTONIC seconds). */
struct published {
    char *text;
    double at;
};

struct scheduler {
    struct scheduler_config cfg;
    const struct backend_ops *bops;
    void *bctx;
    const char *work_dir; /* the backend's, else cfg.data_dir */
    struct journal_store journal;
    struct loop *loop;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv, done_cv; /* done_cv on CLOCK_MONOTONIC */
    int stop, wake;
    struct request *requests, **requests_end; /* a FIFO, under mu */
    int64_t last_seq;                         /* the newest submission the loop was told of */
    pthread_mutex_t pub_mu;
    struct published snapshot, info; /* under pub_mu */
    /* under pub_mu: what scheduler_usage reads, kept at the end of every turn */
    struct scheduler_node_use *use; /* per node */
    char use_policy[32];
    double use_at;
};

/* Keeps what the thread just said (v, borrowed) for readers it will not answer in time. */
static void publish(struct scheduler *s, struct published *p, json_t *v)
{
    char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    if (text == NULL)
        return;
    pthread_mutex_lock(&s->pub_mu);
    free(p->text);
    p->text = text;
    p->at = clock_mono_s();
    pthread_mutex_unlock(&s->pub_mu);
}

/* The last published p as a new object, its age in *age_s; NULL when there is none. */
static json_t *published(struct scheduler *s, struct published *p, double *age_s)
{
    json_t *v = NULL;
    json_error_t jerr;
    pthread_mutex_lock(&s->pub_mu);
    if (p->text != NULL) {
        v = json_loads(p->text, 0, &jerr);
        *age_s = clock_mono_s() - p->at;
    }
    pthread_mutex_unlock(&s->pub_mu);
    return v;
}

/* Keeps what each node's attempts hold, and the policy, for scheduler_usage: a few ints per
 * node, so that /metrics never asks the thread nor walks the jobs. */
static void publish_usage(struct scheduler *s)
{
    const struct cluster *c = loop_cluster(s->loop);
    pthread_mutex_lock(&s->pub_mu);
    for (int n = 0; n < c->nnodes; n++) {
        loop_node_free(s->loop, n, &s->use[n].slots_free, &s->use[n].gpus_free);
        s->use[n].offline = c->node[n].offline;
    }
    snprintf(s->use_policy, sizeof(s->use_policy), "%s", loop_policy(s->loop)->name);
    s->use_at = clock_mono_s();
    pthread_mutex_unlock(&s->pub_mu);
}

/* The loop's view of a job from its store record (store_jobs_active's object). */
static void submit_of(json_t *rec, struct loop_submit *s)
{
    json_t *spec = json_object_get(rec, "spec"), *w = json_object_get(spec, "workers");
    json_t *cpw = json_object_get(spec, "cpus_per_worker");
    *s = (struct loop_submit){
        .id = json_string_value(json_object_get(rec, "id")),
        .owner = json_string_value(json_object_get(rec, "owner")),
        .min = (int)json_integer_value(json_object_get(w, "min")),
        .max = (int)json_integer_value(json_object_get(w, "max")),
        .gpw = (int)json_integer_value(json_object_get(spec, "gpus_per_worker")),
        .cpw = json_is_integer(cpw) ? (int)json_integer_value(cpw) : 1,
        .priority = (int)json_integer_value(json_object_get(spec, "priority")),
        .max_restarts = (int)json_integer_value(json_object_get(spec, "max_restarts")),
        .submitted = json_real_value(json_object_get(rec, "created_s")),
        .attempts = (int)json_integer_value(json_object_get(rec, "attempts")),
        .failures = (int)json_integer_value(json_object_get(rec, "failures")),
        .not_before = (double)json_integer_value(json_object_get(rec, "not_before")),
    };
}

/* Tells the loop of the submissions since the last time. */
static void absorb(struct scheduler *s)
{
    struct store_queued *q;
    struct error err;
    int n;
    if (store_jobs_queued(s->journal.st, s->last_seq, &q, &n, &err) < 0) {
        log_error("%s", err.text);
        return;
    }
    for (int i = 0; i < n; i++) {
        struct loop_submit sub = {
            .id = q[i].id,
            .owner = q[i].owner,
            .min = q[i].min_workers,
            .max = q[i].max_workers,
            .gpw = q[i].gpus_per_worker,
            .cpw = q[i].cpus_per_worker,
            .priority = q[i].priority,
            .max_restarts = q[i].max_restarts,
            .submitted = q[i].created_at,
            .attempts = q[i].attempts,
            .failures = q[i].failures,
            .not_before = (double)q[i].not_before,
        };
        if (loop_submit(s->loop, &sub, &err) < 0 && errno != EEXIST)
            log_msg(LOG_LEVEL_ERROR, q[i].id, "%s", err.text);
        if (q[i].seq > s->last_seq)
            s->last_seq = q[i].seq;
    }
    free(q);
}

/* What attempts of job id attained: GPU-seconds (slot-seconds) and seconds run. */
static void attained(json_t *attempts, int unit, double *service, double *run_time)
{
    size_t i;
    json_t *a;
    *service = *run_time = 0;
    json_array_foreach(attempts, i, a)
    {
        double ran = json_real_value(json_object_get(a, "ran_s"));
        if (ran > 0) {
            *run_time += ran;
            *service += ran * unit * json_integer_value(json_object_get(a, "world_size"));
        }
    }
}

/* The jobs a previous ringd left: running ones are recovered (stopped and queued again),
 * queued ones handed to the loop. */
static void recover(struct scheduler *s)
{
    json_t *jobs, *rec;
    struct error err;
    size_t i;

    if (store_jobs_active(s->journal.st, &jobs, &err) < 0) {
        log_error("%s", err.text);
        return;
    }
    json_array_foreach(jobs, i, rec)
    {
        const char *state = json_string_value(json_object_get(rec, "state"));
        struct loop_submit sub;
        json_t *attempts = NULL, *last;
        int number = 0;
        const char *backend_id = NULL;

        submit_of(rec, &sub);
        if (json_integer_value(json_object_get(rec, "seq")) > s->last_seq)
            s->last_seq = json_integer_value(json_object_get(rec, "seq"));
        if (store_attempts(s->journal.st, sub.id, &attempts, &err) == 0) {
            attained(attempts,
                     sub.gpw > 0   ? sub.gpw
                     : sub.cpw > 0 ? sub.cpw
                                   : 1,
                     &sub.service, &sub.run_time);
            last = json_array_get(attempts, json_array_size(attempts) - 1);
            number = (int)json_integer_value(json_object_get(last, "number"));
            backend_id = json_string_value(json_object_get(last, "backend_id"));
        }
        if (strcmp(state, "QUEUED") == 0
                ? loop_submit(s->loop, &sub, &err) < 0
                : loop_recover(s->loop, &sub, number, backend_id,
                               strcmp(state, "STOPPING") == 0
                                   ? (int)json_integer_value(json_object_get(rec, "stop_requested"))
                                   : 0,
                               &err) < 0)
            log_msg(LOG_LEVEL_ERROR, sub.id, "%s", err.text);
        json_decref(attempts);
    }
    json_decref(jobs);
}

static int resume(struct scheduler *s, const char *id, struct error *err)
{
    json_t *rec, *attempts;
    struct loop_submit sub;
    int rc;

    if (store_job_transition_if(s->journal.st, id, "STOPPED", "QUEUED", "resumed",
                                "resumed by request; it restarts from its checkpoint", err) < 0)
        return -1;
    if (store_job_active(s->journal.st, id, &rec, err) < 0)
        return -1;
    submit_of(rec, &sub);
    sub.submitted = s->bops->now(s->bctx); /* it waits from now, as a new job would */
    if (store_attempts(s->journal.st, id, &attempts, NULL) == 0) {
        attained(attempts, sub.gpw > 0 ? sub.gpw : sub.cpw, &sub.service, &sub.run_time);
        json_decref(attempts);
    }
    rc = loop_submit(s->loop, &sub, err);
    json_decref(rec);
    return rc;
}

/* A STOPPED job is the store's alone (the loop let it go): a cancel ends it there, so that
 * a job stopped to resume later can still be ended for good. */
static int cancel(struct scheduler *s, const char *id, struct error *err)
{
    if (loop_cancel(s->loop, id, err) == 0)
        return 0;
    if (errno != ENOENT)
        return -1;
    if (store_job_transition_if(s->journal.st, id, "STOPPED", "CANCELLED", "cancelled",
                                "cancelled by request while STOPPED; it will not be resumed",
                                err) == 0)
        return 0;
    return errno = ENOENT, -1; /* finished meanwhile (or resumed and ended) */
}

/* The names of policy.h's table, as a new JSON array. */
static json_t *policy_list(void)
{
    json_t *a = json_array();
    const struct policy_ops *p;
    for (int i = 0; a != NULL && (p = policy_at(i)) != NULL; i++)
        json_array_append_new(a, json_string(p->name));
    return a;
}

/* The settings policy reads (policy.h), as they stand in p: {json name: value}. */
static json_t *policy_settings(const struct policy_ops *policy, const struct policy_params *p)
{
    json_t *o = json_object();
    for (const struct policy_setting *ps = policy->settings; o && ps && ps->s.key; ps++)
        json_object_set_new(o, ps->json, json_real(policy_setting_value(ps, p)));
    return o;
}

static json_t *info(struct scheduler *s)
{
    const struct policy_params *p = loop_params(s->loop);
    struct loop_stats st;
    loop_stats(s->loop, &st);
    /* interval_s, restart_cost_s and hysteresis stay for the clients that read them; what
     * the active policy reads is "settings". */
    return json_pack("{s:s, s:o, s:s, s:f, s:f, s:f, s:o, s:I, s:I, s:I, s:f, s:f}", "policy",
                     loop_policy(s->loop)->name, "policies", policy_list(), "backend",
                     s->bops->name, "interval_s", p->interval_s, "restart_cost_s",
                     p->restart_cost_s, "hysteresis", p->hysteresis, "settings",
                     policy_settings(loop_policy(s->loop), p), "passes", (json_int_t)st.passes,
                     "resizes", (json_int_t)st.resizes, "preemptions", (json_int_t)st.preemptions,
                     "pass_ms_mean", st.passes ? st.pass_time_s / st.passes * 1e3 : 0.0,
                     "pass_ms_max", st.pass_time_max_s * 1e3);
}

/* Carries out request q (on the scheduler thread, without mu). */
static void carry_out(struct scheduler *s, struct request *q)
{
    q->rc = 0;
    switch (q->action) {
    case ACT_SNAPSHOT:
        q->out = loop_describe(s->loop);
        publish(s, &s->snapshot, q->out);
        break;
    case ACT_INFO:
        q->out = info(s);
        publish(s, &s->info, q->out);
        break;
    case ACT_POLICY: {
        const struct policy_ops *p = policy_find(q->id);
        if (p == NULL) {
            q->rc = -1;
            q->errnum = EINVAL;
            errprintf(&q->err, "no policy '%s'; the policies are %s", q->id, policy_names());
        } else {
            loop_set_policy(s->loop, p);
            q->out = info(s);
            publish(s, &s->info, q->out);
        }
        break;
    }
    case ACT_CANCEL:
    case ACT_STOP:
    case ACT_RESUME:
        absorb(s); /* a job submitted a moment ago is the loop's to cancel */
        q->rc = q->action == ACT_CANCEL ? cancel(s, q->id, &q->err)
                : q->action == ACT_STOP ? loop_stop_job(s->loop, q->id, &q->err)
                                        : resume(s, q->id, &q->err);
        q->errnum = errno;
        break;
    }
}

static void request_free(struct request *q)
{
    if (q != NULL)
        json_decref(q->out);
    free(q);
}

/* Carries out the HTTP threads' requests; returns how many. */
static int serve_requests(struct scheduler *s)
{
    int served = 0;
    pthread_mutex_lock(&s->mu);
    while (s->requests != NULL) {
        struct request *q = s->requests;
        if ((s->requests = q->next) == NULL)
            s->requests_end = &s->requests;
        q->next = NULL;
        q->state = REQ_TAKEN;
        pthread_mutex_unlock(&s->mu);
        served++;
        carry_out(s, q);
        pthread_mutex_lock(&s->mu);
        if (q->abandoned) {
            request_free(q); /* its caller answered without it */
        } else {
            q->state = REQ_DONE;
            pthread_cond_broadcast(&s->done_cv);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return served;
}

static void *main_loop(void *arg)
{
    struct scheduler *s = arg;
    for (;;) {
        struct timespec until;
        double wait_s = loop_next_wakeup(s->loop) - s->bops->now(s->bctx);
        int woken;
        if (!(wait_s < TICK_MS / 1e3))
            wait_s = TICK_MS / 1e3;
        if (wait_s < 0)
            wait_s = 0;
        pthread_mutex_lock(&s->mu);
        until = clock_deadline(CLOCK_REALTIME, wait_s);
        while (!s->stop && !s->wake && s->requests == NULL &&
               pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0)
            ;
        woken = s->wake;
        s->wake = 0;
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        pthread_mutex_unlock(&s->mu);
        if (woken)
            absorb(s);
        serve_requests(s);
        loop_step(s->loop);
        publish_usage(s);
    }
    return NULL;
}

/* The backend cfg names, and what every backend is given, into *bops and *bcfg. Returns 0,
 * or -1 with errno EINVAL and err. */
static int backend_of(const struct scheduler_config *cfg, const struct backend_ops **bops,
                      struct backend_config *bcfg, struct error *err)
{
    const char *name = cfg->backend ? cfg->backend : "local";
    if ((*bops = backend_find(name)) == NULL)
        return errno = EINVAL,
               errprintf(err, "no backend '%s' in this ringd (it has: %s)", name, backend_names());
    *bcfg = (struct backend_config){
        .data_dir = cfg->data_dir,
        .ringrun = cfg->ringrun,
        .mpirun = cfg->mpirun,
        .slots = cfg->slots,
        .gpus = cfg->gpus,
        .kill_grace_s = cfg->kill_grace_s,
        .no_auth = cfg->no_auth,
        .default_user = cfg->default_user,
        .options = cfg->backend_options,
        .settings = cfg->settings,
        .nsettings = cfg->nsettings,
    };
    return 0;
}

int scheduler_config(const struct scheduler_config *cfg, struct error *err)
{
    const struct backend_ops *bops;
    struct backend_config bcfg;
    if (backend_of(cfg, &bops, &bcfg, err) < 0)
        return -1;
    return bops->config != NULL ? bops->config(&bcfg, err) : 0;
}

/* WORK/checkpoints, 0755 whatever the umask: job users pass through to their
 * checkpoints/<job>. Returns 0, or -1 with errno EINVAL and err. */
static int checkpoints_dir(const char *work, struct error *err)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/checkpoints", work);
    if ((mkdir(path, 0755) < 0 && errno != EEXIST) || chmod(path, 0755) < 0)
        return errprintf(err, "cannot create %s: %s", path, strerror(errno)), errno = EINVAL, -1;
    return 0;
}

struct scheduler *scheduler_start(const struct scheduler_config *cfg, struct error *err)
{
    struct scheduler *s = calloc(1, sizeof(*s));
    const struct policy_ops *policy = policy_find(cfg->policy ? cfg->policy : "fifo");
    struct backend_config bcfg;
    struct loop_config lcfg;

    if (s == NULL)
        return errprintf(err, "out of memory"), NULL;
    s->cfg = *cfg;
    if (policy == NULL) {
        free(s);
        return errno = EINVAL,
               errprintf(err, "no policy '%s'; the policies are %s", cfg->policy, policy_names()),
               NULL;
    }
    if (backend_of(cfg, &s->bops, &bcfg, err) < 0) {
        free(s);
        return NULL;
    }
    if (s->bops->init(&bcfg, &s->bctx, err) < 0) {
        free(s);
        return NULL;
    }
    s->work_dir = s->bops->work_dir ? s->bops->work_dir(s->bctx) : cfg->data_dir;
    if (checkpoints_dir(s->work_dir, err) < 0 ||
        store_open(cfg->db_path, &s->journal.st, err) < 0) {
        s->bops->fini(s->bctx);
        free(s);
        return NULL;
    }
    lcfg = (struct loop_config){
        .policy = policy,
        .params = cfg->params,
        .kill_grace_s = cfg->kill_grace_s,
        .data_dir = s->work_dir,
        .speed_mode = SPEED_WEAK,
    };
    s->journal.id_label = s->bops->id_label;
    s->loop = loop_create(&lcfg, s->bops, s->bctx, &journal_store_ops, &s->journal, err);
    if (s->loop == NULL) {
        store_close(s->journal.st);
        s->bops->fini(s->bctx);
        free(s);
        return NULL;
    }
    s->journal.cluster = loop_cluster(s->loop);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->pub_mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->done_cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    s->requests_end = &s->requests;
    s->use = calloc((size_t)loop_cluster(s->loop)->nnodes + 1, sizeof(*s->use));
    if (s->use == NULL) {
        loop_destroy(s->loop);
        store_close(s->journal.st);
        s->bops->fini(s->bctx);
        free(s);
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    }
    recover(s);
    absorb(s);
    publish_usage(s);
    /* Something to show before the thread first answers (a backend call may hold it). */
    {
        json_t *v = loop_describe(s->loop);
        publish(s, &s->snapshot, v);
        json_decref(v);
        v = info(s);
        publish(s, &s->info, v);
        json_decref(v);
    }
    if (pthread_create(&s->thread, NULL, main_loop, s) != 0) {
        free(s->use);
        loop_destroy(s->loop);
        store_close(s->journal.st);
        s->bops->fini(s->bctx);
        free(s);
        return errprintf(err, "cannot start the scheduler thread"), NULL;
    }
    return s;
}

void scheduler_stop(struct scheduler *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    /* The HTTP server stopped first: no caller waits any more, and none left a request
     * queued (a caller withdraws its own when it gives up). */
    while (s->requests != NULL) {
        struct request *q = s->requests;
        s->requests = q->next;
        request_free(q);
    }
    loop_destroy(s->loop);
    s->bops->fini(s->bctx);
    store_close(s->journal.st);
    free(s->snapshot.text);
    free(s->info.text);
    free(s->use);
    pthread_mutex_destroy(&s->pub_mu);
    free(s);
}

void scheduler_wake(struct scheduler *s)
{
    pthread_mutex_lock(&s->mu);
    s->wake = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/*
 * Hands q (heap, filled in) to the scheduler thread and waits at most ASK_DEADLINE_MS for
 * it. Returns 0 with q carried out (rc, out): the caller frees q. Returns -1 with errno
 * ETIMEDOUT when the thread had not taken q (withdrawn: nothing was done) or EINPROGRESS
 * when it had (it carries q out and frees it); q is then no longer the caller's.
 */
static int hand_over(struct scheduler *s, struct request *q)
{
    struct timespec until = clock_deadline(CLOCK_MONOTONIC, ASK_DEADLINE_MS / 1e3);
    int e = 0;

    pthread_mutex_lock(&s->mu);
    q->state = REQ_QUEUED;
    *s->requests_end = q;
    s->requests_end = &q->next;
    pthread_cond_broadcast(&s->cv);
    while (q->state != REQ_DONE && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&s->done_cv, &s->mu, &until);
    if (q->state == REQ_DONE) {
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    if (q->state == REQ_QUEUED) {
        struct request **pp = &s->requests;
        while (*pp != q)
            pp = &(*pp)->next;
        if ((*pp = q->next) == NULL)
            s->requests_end = pp;
        pthread_mutex_unlock(&s->mu);
        request_free(q);
        return errno = ETIMEDOUT, -1;
    }
    q->abandoned = 1;
    pthread_mutex_unlock(&s->mu);
    return errno = EINPROGRESS, -1;
}

/* A request for action on id (NULL: none), handed over; *out (when not NULL) gets its
 * result. Returns 0, or -1 with errno and err: the action's own, or hand_over's. */
static int ask(struct scheduler *s, enum action a, const char *id, json_t **out, struct error *err)
{
    struct request *q = calloc(1, sizeof(*q));
    int rc;

    if (q == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    q->action = a;
    snprintf(q->id, sizeof(q->id), "%s", id ? id : "");
    if (hand_over(s, q) < 0) {
        int e = errno;
        errprintf(err, e == ETIMEDOUT ? "the scheduler is busy (a backend call is taking long: is "
                                        "the resource manager reachable?); nothing was done"
                                      : "the scheduler is carrying the request out, slowly (a "
                                        "backend call is taking long)");
        return errno = e, -1;
    }
    rc = q->rc;
    if (rc < 0) {
        if (err)
            *err = q->err;
        errno = q->errnum ? q->errnum : EIO;
    } else if (out != NULL) {
        *out = q->out;
        q->out = NULL;
    }
    request_free(q);
    return rc;
}

int scheduler_cancel(struct scheduler *s, const char *id, struct error *err)
{
    return ask(s, ACT_CANCEL, id, NULL, err);
}

int scheduler_stop_job(struct scheduler *s, const char *id, struct error *err)
{
    return ask(s, ACT_STOP, id, NULL, err);
}

int scheduler_resume(struct scheduler *s, const char *id, struct error *err)
{
    return ask(s, ACT_RESUME, id, NULL, err);
}

/* A read: the thread's answer, or what it last published when it cannot answer in time. */
static json_t *read_view(struct scheduler *s, enum action a, struct published *p, double *age_s)
{
    json_t *v = NULL;
    *age_s = 0;
    if (ask(s, a, NULL, &v, NULL) == 0)
        return v;
    return published(s, p, age_s);
}

json_t *scheduler_snapshot(struct scheduler *s, double *age_s)
{
    return read_view(s, ACT_SNAPSHOT, &s->snapshot, age_s);
}

json_t *scheduler_info(struct scheduler *s, double *age_s)
{
    return read_view(s, ACT_INFO, &s->info, age_s);
}

int scheduler_set_policy(struct scheduler *s, const char *name, json_t **info, struct error *err)
{
    if (strlen(name) >= sizeof(((struct request *)0)->id))
        return errno = EINVAL,
               errprintf(err, "no policy '%.40s'; the policies are %s", name, policy_names());
    return ask(s, ACT_POLICY, name, info, err);
}

double scheduler_usage(struct scheduler *s, struct scheduler_node_use *use, char *policy,
                       size_t len)
{
    double age;
    pthread_mutex_lock(&s->pub_mu);
    memcpy(use, s->use, (size_t)loop_cluster(s->loop)->nnodes * sizeof(*use));
    snprintf(policy, len, "%s", s->use_policy);
    age = clock_mono_s() - s->use_at;
    pthread_mutex_unlock(&s->pub_mu);
    return age;
}

const struct cluster *scheduler_cluster(const struct scheduler *s)
{
    return loop_cluster(s->loop);
}

const char *scheduler_backend(const struct scheduler *s)
{
    return s->bops->name;
}

const char *scheduler_work_dir(const struct scheduler *s)
{
    return s->work_dir;
}
