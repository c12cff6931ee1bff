/* SPDX-License-Identifier: Apache-2.0 */
/* scheduler.c - the scheduler thread of ringd. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend_local.h"
#include "policy.h"
#include "scheduler.h"

/* The thread looks at the world at least this often, for backoffs and kill deadlines. */
#define TICK_MS 200
/* Backoff after the n-th failure: 2^(n-1) s, at most a minute, as systemd and Kubernetes do. */
#define BACKOFF_MAX_S 60

struct run {
    char id[32];
    int attempt;
    pid_t pid;
    int workers;
    int gpu[POLICY_MAX_GPUS], ngpus;
    int cancel;      /* cancel requested: CANCELLED when reaped */
    int stop;        /* graceful stop requested: STOPPED when reaped */
    int64_t kill_at; /* SIGKILL the group then (ms), 0 when no kill is pending */
    int failures, max_restarts, attempts;
    struct run *next;
};

enum action { ACT_CANCEL, ACT_STOP, ACT_SNAPSHOT };

struct request {
    char id[32];
    enum action action;
    json_t *snapshot;
    int done, rc;
    struct error err;
    struct request *next;
};

struct scheduler {
    struct scheduler_config cfg;
    struct store *st;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv, done_cv;
    int stop, wake;
    struct request *requests; /* under mu */
    /* scheduler thread only */
    struct run *runs;
    int64_t next_due; /* unix seconds: a backoff in the queue ends then */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t unix_s(void)
{
    return (int64_t)time(NULL);
}

static void log_job(const char *level, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void log_job(const char *level, const char *id, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "level=%s job=%s msg=\"%s\"\n", level, id, msg);
}

static int mkdirs(const char *path)
{
    char buf[4200];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* ---- attempts ending ---- */

static void finish(struct scheduler *s, struct run *r, int status)
{
    struct store_sched sched = {.attempts = r->attempts, .failures = r->failures};
    struct error err;
    char reason[256];
    const char *state, *type;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

    if (r->cancel) {
        state = "CANCELLED";
        type = "cancelled";
        snprintf(reason, sizeof(reason), "cancelled by request (ringrun exited %d)", code);
    } else if (r->stop) {
        state = "STOPPED";
        type = "stopped";
        sched.stop_requested = 0;
        if (code == 75)
            snprintf(reason, sizeof(reason),
                     "stopped by request after a checkpoint (exit 75); resume to continue");
        else
            snprintf(reason, sizeof(reason),
                     "stopped by request, but the program exited %d instead of 75: its last "
                     "checkpoint may be older",
                     code);
    } else if (code == 0) {
        state = "SUCCEEDED";
        type = "succeeded";
        snprintf(reason, sizeof(reason), "every worker exited 0");
    } else {
        sched.failures++;
        if (sched.failures <= r->max_restarts) {
            int backoff = 1 << (sched.failures - 1 < 6 ? sched.failures - 1 : 6);
            if (backoff > BACKOFF_MAX_S)
                backoff = BACKOFF_MAX_S;
            sched.not_before = unix_s() + backoff;
            state = "QUEUED";
            type = "retry";
            snprintf(reason, sizeof(reason),
                     "attempt %d failed (exit status %d); restart %d of %d in %d s", r->attempt,
                     code, sched.failures, r->max_restarts, backoff);
        } else {
            state = "FAILED";
            type = "failed";
            snprintf(reason, sizeof(reason),
                     "attempt %d failed (exit status %d; see %s/runs/%s/%d) and no restarts are "
                     "left (max_restarts %d)",
                     r->attempt, code, s->cfg.data_dir, r->id, r->attempt, r->max_restarts);
        }
    }
    if (store_attempt_end(s->st, r->id, r->attempt, code, reason, state, type, &sched, &err) < 0)
        log_job("error", r->id, "cannot record the end of attempt %d: %s", r->attempt, err.text);
    log_job("info", r->id, "%s: %s", state, reason);
}

/* Records the attempts that ended; returns how many. */
static int reap(struct scheduler *s)
{
    int ended = 0;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        struct run **pp;
        if (pid <= 0)
            return ended;
        ended++;
        for (pp = &s->runs; *pp; pp = &(*pp)->next) {
            if ((*pp)->pid == pid) {
                struct run *r = *pp;
                *pp = r->next;
                finish(s, r, status);
                free(r);
                break;
            }
        }
    }
}

static void enforce_kills(struct scheduler *s)
{
    int64_t now = now_ms();
    for (struct run *r = s->runs; r; r = r->next) {
        if (r->kill_at && now >= r->kill_at) {
            local_signal(r->pid, SIGKILL);
            r->kill_at = now + 1000; /* again, if something survives */
        }
    }
}

/* ---- requests from API threads ---- */

/* Cancel (CANCELLED) or graceful stop (STOPPED) of one job. */
static int end_one(struct scheduler *s, const char *id, int stop, struct error *err)
{
    json_t *job;
    int found = 0;

    for (struct run *r = s->runs; r; r = r->next) {
        if (strcmp(r->id, id) == 0) {
            if (!r->cancel && !r->stop) {
                if (stop)
                    r->stop = 1;
                else
                    r->cancel = 1;
                r->kill_at = now_ms() + (int64_t)s->cfg.kill_grace_s * 1000;
                if (stop)
                    store_job_transition(s->st, id, "STOPPING", "stopping",
                                         "SIGTERM sent: the workers checkpoint and exit", NULL,
                                         err);
                local_signal(r->pid, SIGTERM);
                log_job("info", id, "%s: SIGTERM to process group %d", stop ? "stop" : "cancel",
                        (int)r->pid);
            }
            return 0;
        }
    }
    if (store_job_active(s->st, id, &job, err) == 0) {
        found = strcmp(json_string_value(json_object_get(job, "state")), "QUEUED") == 0;
        json_decref(job);
    } else if (errno != ENOENT) {
        return -1;
    }
    if (!found)
        return errno = ENOENT, errprintf(err, "job %s is not queued or running", id);
    if (store_job_transition(
            s->st, id, stop ? "STOPPED" : "CANCELLED", stop ? "stopped" : "cancelled",
            stop ? "stopped while queued" : "cancelled while queued", NULL, err) < 0)
        return -1;
    log_job("info", id, "%s while queued", stop ? "stopped" : "cancelled");
    return 0;
}

static json_t *snapshot(struct scheduler *s)
{
    char host[256] = "localhost";
    json_t *gpus = json_array(), *jobs = json_array();
    int used = 0;

    gethostname(host, sizeof(host));
    host[sizeof(host) - 1] = '\0';
    for (int g = 0; g < s->cfg.gpus && g < POLICY_MAX_GPUS; g++) {
        const char *owner = NULL;
        for (struct run *r = s->runs; r && !owner; r = r->next) {
            for (int k = 0; k < r->ngpus; k++)
                if (r->gpu[k] == g)
                    owner = r->id;
        }
        json_array_append_new(gpus, json_pack("{s:i, s:s?}", "id", g, "job", owner));
    }
    for (struct run *r = s->runs; r; r = r->next) {
        json_t *ids = json_array();
        for (int k = 0; k < r->ngpus; k++)
            json_array_append_new(ids, json_integer(r->gpu[k]));
        json_array_append_new(jobs, json_pack("{s:s, s:i, s:i, s:o, s:i}", "id", r->id, "attempt",
                                              r->attempt, "workers", r->workers, "gpus", ids,
                                              "pgid", (int)r->pid));
        used += r->workers;
    }
    return json_pack("{s:[{s:s, s:i, s:i, s:o, s:o}]}", "nodes", "name", host, "slots",
                     s->cfg.slots, "slots_free", s->cfg.slots - used, "gpus", gpus, "jobs", jobs);
}

/* Carries out the API threads' requests; returns how many. */
static int serve_requests(struct scheduler *s)
{
    int served = 0;
    pthread_mutex_lock(&s->mu);
    while (s->requests != NULL) {
        served++;
        struct request *q = s->requests;
        s->requests = q->next;
        pthread_mutex_unlock(&s->mu);
        if (q->action == ACT_SNAPSHOT) {
            q->snapshot = snapshot(s);
            q->rc = 0;
        } else {
            q->rc = end_one(s, q->id, q->action == ACT_STOP, &q->err);
            if (q->rc < 0 && errno == ENOENT)
                q->rc = -ENOENT;
        }
        pthread_mutex_lock(&s->mu);
        q->done = 1;
        pthread_cond_broadcast(&s->done_cv);
    }
    pthread_mutex_unlock(&s->mu);
    return served;
}

/* ---- starting attempts ---- */

static void start_attempt(struct scheduler *s, json_t *job, const struct policy_start *ps)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    json_t *spec = json_object_get(job, "spec");
    const char *ckpt = json_string_value(json_object_get(spec, "checkpoint_dir"));
    struct store_sched sched = {
        .attempts = (int)json_integer_value(json_object_get(job, "attempts")) + 1,
        .failures = (int)json_integer_value(json_object_get(job, "failures")),
    };
    char run_dir[4200], ckpt_dir[4200], gpus[512] = "", hosts[64], pgid[32];
    struct store_attempt a;
    struct local_launch l;
    struct error err;
    struct run *r;
    const char *user;
    size_t gl = 0;
    pid_t pid;

    for (int g = 0; g < ps->ngpus && gl + 8 < sizeof(gpus); g++)
        gl += (size_t)snprintf(gpus + gl, sizeof(gpus) - gl, "%s%d", g ? "," : "", ps->gpu[g]);
    snprintf(run_dir, sizeof(run_dir), "%s/runs/%s/%d", s->cfg.data_dir, id, sched.attempts);
    snprintf(ckpt_dir, sizeof(ckpt_dir), "%s", ckpt ? ckpt : "");
    if (ckpt == NULL)
        snprintf(ckpt_dir, sizeof(ckpt_dir), "%s/checkpoints/%s", s->cfg.data_dir, id);
    if (store_job_transition(s->st, id, "STARTING", "starting", "resources allocated", &sched,
                             &err) < 0) {
        log_job("error", id, "cannot record STARTING: %s", err.text);
        return;
    }
    /* A checkpoint directory the user named is created by the job itself, as its user. */
    if (mkdirs(run_dir) < 0 || (ckpt == NULL && mkdirs(ckpt_dir) < 0)) {
        char msg[300];
        snprintf(msg, sizeof(msg), "cannot create the run or checkpoint directory: %s",
                 strerror(errno));
        store_job_transition(s->st, id, "FAILED", "failed", msg, &sched, &err);
        return;
    }
    user = json_string_value(json_object_get(job, "user"));
    if (user == NULL && geteuid() == 0) /* a job stored before users were mapped */
        user = s->cfg.default_user && s->cfg.default_user[0] ? s->cfg.default_user : NULL;
    if (user == NULL && geteuid() == 0) {
        store_job_transition(s->st, id, "FAILED", "failed",
                             "the job has no Unix user to run as and ringd has no default_user",
                             &sched, &err);
        return;
    }
    l = (struct local_launch){
        .ringrun = s->cfg.ringrun,
        .exec_helper = s->cfg.exec_helper,
        .checkpoint_in_data_dir = ckpt == NULL,
        .hide_dir = s->cfg.isolate ? s->cfg.data_dir : NULL,
        .user = user,
        .job_id = id,
        .attempt = sched.attempts,
        .workers = ps->workers,
        .gpus = gpus,
        .gpus_per_worker = (int)json_integer_value(json_object_get(spec, "gpus_per_worker")),
        .run_dir = run_dir,
        .checkpoint_dir = ckpt_dir,
        .spec = spec,
    };
    pid = local_launch(&l, &err);
    if (pid < 0) {
        store_job_transition(s->st, id, "FAILED", "failed", err.text, &sched, &err);
        return;
    }
    snprintf(hosts, sizeof(hosts), "localhost:%d", ps->workers);
    snprintf(pgid, sizeof(pgid), "%d", (int)pid);
    a = (struct store_attempt){sched.attempts, ps->workers, hosts, gpus, pgid, run_dir};
    if (store_attempt_start(s->st, id, &a, &sched, &err) < 0)
        log_job("error", id, "cannot record the attempt: %s", err.text);
    r = calloc(1, sizeof(*r));
    if (r == NULL) { /* cannot track it: stop it rather than lose it */
        local_signal(pid, SIGKILL);
        return;
    }
    snprintf(r->id, sizeof(r->id), "%s", id);
    r->attempt = sched.attempts;
    r->pid = pid;
    r->workers = ps->workers;
    r->ngpus = ps->ngpus;
    memcpy(r->gpu, ps->gpu, sizeof(r->gpu));
    r->failures = sched.failures;
    r->attempts = sched.attempts;
    r->max_restarts = (int)json_integer_value(json_object_get(spec, "max_restarts"));
    r->next = s->runs;
    s->runs = r;
    log_job("info", id, "attempt %d: %d workers, GPUs [%s], ringrun pid %d", r->attempt, r->workers,
            gpus, (int)pid);
}

/*
 * One scheduling pass: the policy over the queue (read without specs), then the chosen
 * jobs' records to launch them. Remembers when the earliest backoff in the queue ends, for
 * the loop to pass again then.
 */
static void schedule(struct scheduler *s)
{
    struct policy_cluster c = {.slots_free = s->cfg.slots, .gpus = s->cfg.gpus};
    struct policy_job *q = NULL;
    struct policy_start *out = NULL;
    struct store_queued *queued = NULL;
    struct error err;
    int64_t now = unix_s();
    int n = 0, k;

    s->next_due = INT64_MAX;
    for (struct run *r = s->runs; r; r = r->next) {
        c.slots_free -= r->workers;
        for (int g = 0; g < r->ngpus; g++)
            c.busy[r->gpu[g]] = 1;
    }
    if (c.slots_free <= 0)
        return; /* an exit (which marks the loop dirty) must come first */
    if (store_jobs_queued(s->st, &queued, &n, &err) < 0) {
        log_job("error", "-", "reading the queue: %s", err.text);
        s->next_due = now + 1;
        return;
    }
    q = calloc((size_t)n + 1, sizeof(*q));
    out = calloc((size_t)n + 1, sizeof(*out));
    if (q == NULL || out == NULL) {
        s->next_due = now + 1;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        q[i] = (struct policy_job){queued[i].min_workers, queued[i].max_workers,
                                   queued[i].gpus_per_worker, queued[i].priority,
                                   queued[i].not_before};
        if (queued[i].not_before > now && queued[i].not_before < s->next_due)
            s->next_due = queued[i].not_before;
    }
    k = policy_fifo(q, n, &c, now, out);
    for (int x = 0; x < k; x++) {
        json_t *job;
        if (store_job_active(s->st, queued[out[x].job].id, &job, &err) < 0) {
            log_job("error", queued[out[x].job].id, "cannot read the job to start it: %s",
                    err.text);
            continue;
        }
        start_attempt(s, job, &out[x]);
        json_decref(job);
    }
done:
    free(q);
    free(out);
    free(queued);
}

/* 1 when process group pgid is still led by a ringrun (a recycled pid must not be killed). */
static int ringrun_alive(pid_t pgid)
{
    char path[64], cmd[4096];
    FILE *f;
    size_t n;
    const char *base;
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pgid);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    n = fread(cmd, 1, sizeof(cmd) - 1, f);
    fclose(f);
    cmd[n] = '\0';
    base = strrchr(cmd, '/');
    return strcmp(base ? base + 1 : cmd, "ringrun") == 0 && local_signal(pgid, 0) == 0;
}

/* Attempts a previous ringd left running: their workers are stopped and the jobs queued
 * again (not counted as failures), to resume from their checkpoints. */
static void recover(struct scheduler *s)
{
    json_t *jobs, *j, *attempts;
    struct error err;
    size_t i;

    if (store_jobs_active(s->st, &jobs, &err) < 0) {
        log_job("error", "-", "recovery: %s", err.text);
        return;
    }
    json_array_foreach(jobs, i, j)
    {
        const char *id = json_string_value(json_object_get(j, "id"));
        const char *state = json_string_value(json_object_get(j, "state"));
        struct store_sched sched = {
            .attempts = (int)json_integer_value(json_object_get(j, "attempts")),
            .failures = (int)json_integer_value(json_object_get(j, "failures")),
        };
        json_t *last;
        int number = 0, alive = 0;
        pid_t pgid = 0;
        char reason[256];

        if (strcmp(state, "QUEUED") == 0)
            continue;
        if (store_attempts(s->st, id, &attempts, &err) == 0) {
            last = json_array_get(attempts, json_array_size(attempts) - 1);
            number = (int)json_integer_value(json_object_get(last, "number"));
            pgid = (pid_t)atoi(json_string_value(json_object_get(last, "backend_id")) ?: "0");
            json_decref(attempts);
        }
        if (pgid > 0 && ringrun_alive(pgid)) {
            alive = 1;
            local_signal(pgid, SIGTERM);
            sleep(1);
            local_signal(pgid, SIGKILL);
        }
        /* A job the user was stopping stays stopped; any other is queued again. */
        if (strcmp(state, "STOPPING") == 0)
            snprintf(reason, sizeof(reason),
                     "ringd restarted while attempt %d was stopping; %s; resume to continue",
                     number,
                     alive ? "its surviving workers were stopped" : "its workers were gone");
        else
            snprintf(reason, sizeof(reason),
                     "ringd restarted while attempt %d ran; %s; the job is queued again to "
                     "resume from its checkpoint",
                     number,
                     alive ? "its surviving workers were stopped" : "its workers were gone");
        state = strcmp(state, "STOPPING") == 0 ? "STOPPED" : "QUEUED";
        if (number > 0)
            store_attempt_end(s->st, id, number, -1, reason, state, "requeued", &sched, &err);
        else
            store_job_transition(s->st, id, state, "requeued", reason, &sched, &err);
        log_job("warning", id, "%s", reason);
    }
    json_decref(jobs);
}

/*
 * The loop passes over the queue only when something could change the outcome: a
 * submission or resume (scheduler_wake), an attempt that ended, a cancel or stop, or the
 * end of a backoff. An idle daemon with a long queue that does not fit costs nothing.
 */
static void *main_loop(void *arg)
{
    struct scheduler *s = arg;
    s->next_due = 0; /* a first pass at start */
    for (;;) {
        struct timespec until;
        int woken, changed;
        pthread_mutex_lock(&s->mu);
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += TICK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
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
        changed = serve_requests(s);
        changed += reap(s);
        enforce_kills(s);
        if (woken || changed || unix_s() >= s->next_due)
            schedule(s);
    }
    return NULL;
}

struct scheduler *scheduler_start(const struct scheduler_config *cfg, struct error *err)
{
    struct scheduler *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return errprintf(err, "out of memory"), NULL;
    s->cfg = *cfg;
    if (store_open(cfg->db_path, &s->st, err) < 0) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    recover(s);
    if (pthread_create(&s->thread, NULL, main_loop, s) != 0) {
        store_close(s->st);
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
    while (s->runs) {
        struct run *r = s->runs;
        s->runs = r->next;
        free(r);
    }
    store_close(s->st);
    free(s);
}

void scheduler_wake(struct scheduler *s)
{
    pthread_mutex_lock(&s->mu);
    s->wake = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Hands a request to the scheduler thread and waits for its answer. */
static int ask(struct scheduler *s, struct request *q, struct error *err)
{
    pthread_mutex_lock(&s->mu);
    q->next = s->requests;
    s->requests = q;
    pthread_cond_broadcast(&s->cv);
    while (!q->done)
        pthread_cond_wait(&s->done_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (q->rc < 0) {
        if (err)
            *err = q->err;
        errno = q->rc == -ENOENT ? ENOENT : EIO;
        return -1;
    }
    return 0;
}

int scheduler_cancel(struct scheduler *s, const char *id, struct error *err)
{
    struct request q = {.action = ACT_CANCEL};
    snprintf(q.id, sizeof(q.id), "%s", id);
    return ask(s, &q, err);
}

int scheduler_stop_job(struct scheduler *s, const char *id, struct error *err)
{
    struct request q = {.action = ACT_STOP};
    snprintf(q.id, sizeof(q.id), "%s", id);
    return ask(s, &q, err);
}

json_t *scheduler_snapshot(struct scheduler *s)
{
    struct request q = {.action = ACT_SNAPSHOT};
    return ask(s, &q, NULL) == 0 ? q.snapshot : NULL;
}
