/* SPDX-License-Identifier: Apache-2.0 */
/*
 * attempts.c - the scheduler loop's attempts on the backend: a start (journal first, then
 * the backend), a graceful stop and its kill deadline (and the cancel and stop requests
 * that ask for one), an exit and what it means for the job (queued again, a backoff, an
 * end), the progress reports that feed the speed model and the restart cost, and the
 * recovery of attempts a previous ringd left (loop.h, attempts.h). It works on the table
 * (loop_impl.h) and never calls the pass.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempts.h"

/* Backoff after the n-th failure: 2^(n-1) s, at most a minute, as systemd and Kubernetes do. */
#define BACKOFF_MAX_S 60
/* Attempts the resource manager lost (a node failed, the ranks never started) are started
 * again without spending max_restarts this many times; later ones count as failures, so
 * that a manager that loses every attempt of a job cannot keep it queued forever. */
#define LOST_RETRIES 3
/* A start the resource manager could not take (slurmctld down): tried again this often. */
#define UNREACHABLE_RETRY_S 5
/* After SIGKILL, look again this often until the attempt is reaped. */
#define REKILL_S 1.0

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

/* Job j waits until t before it may start again; the loop wakes up for it. */
static void hold_until(struct loop *l, struct loop_job *j, double t)
{
    j->not_before = t;
    if (t < l->next_backoff)
        l->next_backoff = t;
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
        hold_until(l, j, now + backoff);
        snprintf(reason, len, "%s; restart %d of %d in %d s", what, j->failures, j->max_restarts,
                 backoff);
        return "QUEUED";
    }
    snprintf(reason, len, "%s and no restarts are left (max_restarts %d)", what, j->max_restarts);
    return "FAILED";
}

/* j cannot start at its planned place: a node of it went out of service (offline), or
 * (a bug) what attempts hold overlaps it. It waits for the next pass; journaled: its
 * STARTING is in the journal, and a QUEUED now follows it. Returns -1. */
static int place_gone(struct loop *l, struct loop_job *j, int offline, int journaled)
{
    struct journal_sched sched;
    struct error err;

    loop__say(l, offline ? LOG_LEVEL_INFO : LOG_LEVEL_ERROR, j->id,
              "%s; it waits for the next pass",
              offline ? "its place is on a node out of service" : "internal: its place is taken");
    if (journaled) {
        sched = loop__sched_of(j);
        l->jo->transition(l->jctx, j, "QUEUED", "requeued",
                          offline ? "its place went out of service before it could start; "
                                    "it waits"
                                  : "its place was taken before it could start; it waits",
                          &sched, &err);
    }
    l->dirty = 1;
    return -1;
}

/* Attempt j->attempts of j did not start, for why: the job is queued again, after a
 * backoff (unreachable: the resource manager could not be reached, which spends no
 * restart), or FAILED and dropped (then j is freed). */
static void start_failed(struct loop *l, struct loop_job *j, double now, const char *why,
                         int unreachable)
{
    struct journal_sched sched;
    struct error err;
    const char *state;
    char msg[600];
    if (j->has_reserved) {
        placement_clear(&j->reserved);
        j->has_reserved = 0;
    }
    if (unreachable) {
        /* Not the job's doing: it waits, its attempt number unused, and no restart is spent. */
        j->attempts--;
        hold_until(l, j, now + UNREACHABLE_RETRY_S);
        snprintf(msg, sizeof(msg), "%s; it waits and is tried again in %d s", why,
                 UNREACHABLE_RETRY_S);
        state = "QUEUED";
    } else
        state = failure(l, j, now, msg, sizeof(msg), why);
    sched = loop__sched_of(j);
    loop__say(l, unreachable ? LOG_LEVEL_WARNING : LOG_LEVEL_ERROR, j->id, "%s", msg);
    if (l->jo->transition(l->jctx, j, state, strcmp(state, "FAILED") ? "retry" : "failed", msg,
                          &sched, &err) < 0)
        loop__say(l, LOG_LEVEL_ERROR, j->id, "cannot record the failed start: %s", err.text);
    j->state = LOOP_QUEUED;
    j->waiting_since = now;
    if (strcmp(state, "FAILED") == 0)
        loop__drop(l, j);
    l->dirty = 1;
}

/* See attempts.h. */
int loop__start(struct loop *l, struct loop_job *j, const struct placement *p, const char *reason,
                int journaled)
{
    struct backend_start s = {0};
    struct journal_sched sched;
    struct error err;
    json_t *spec = NULL;
    char run[4200], ckpt[4200], id[64], why[400], user[64] = "";
    double now = l->b->now(l->bctx);
    int attempt = j->attempts + 1, offline = placement_offline(l->cluster, p), unreachable = 0;

    if (offline || !usage_fits(&l->used, p, j->cpw))
        return place_gone(l, j, offline, journaled);
    j->attempts = attempt;
    sched = loop__sched_of(j);
    if (!journaled && l->jo->starting(l->jctx, j, attempt, p, reason, &sched, &err) < 0) {
        j->attempts--;
        loop__say(l, LOG_LEVEL_ERROR, j->id, "cannot record STARTING: %s", err.text);
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
        unreachable = errno == EAGAIN;
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
        loop__say(l, LOG_LEVEL_ERROR, j->id,
                  "out of memory: the end of attempt %d may go unnoticed", attempt);
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
    sched = loop__sched_of(j);
    if (l->jo->started(l->jctx, j, attempt, p, id, run, &sched, &err) < 0)
        loop__say(l, LOG_LEVEL_ERROR, j->id, "cannot record attempt %d (%s): %s", attempt, id,
                  err.text);
    return 0;
failed:
    json_decref(spec);
    start_failed(l, j, now, why, unreachable);
    return -1;
}

int loop__start_reserved(struct loop *l)
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
            loop__start(l, j, &p, reason, 0);
            placement_clear(&p);
            started++;
            left--;
        }
    }
    l->any_reserved = left > 0;
    return started;
}

void loop__ask_stop(struct loop *l, struct loop_job *j, enum loop_stop why)
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
        loop__say(l, LOG_LEVEL_WARNING, j->id, "SIGTERM to attempt %d (%s) failed", j->attempt,
                  j->backend_id);
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

/* ---- attempts ending, progress ---- */

/* The program job j runs (its command[0]), quoted, into out; "its program" when the
 * JobSpec cannot be read. */
static void program_of(struct loop *l, const struct loop_job *j, char *out, size_t len)
{
    struct error err;
    char user[64];
    json_t *spec = l->jo->spec ? l->jo->spec(l->jctx, j->id, user, sizeof(user), &err) : NULL;
    const char *prog = json_string_value(json_array_get(json_object_get(spec, "command"), 0));
    if (prog != NULL)
        snprintf(out, len, "'%.120s'", prog);
    else
        snprintf(out, len, "its program");
    json_decref(spec);
}

/*
 * What the end of attempt (of workers workers) of j means, from the event e and why it was
 * stopped: the job's next state (returned), the event's type into *type and the reason
 * into reason[len]. stop_s: how long it took to stop once asked (-1: not asked).
 */
static const char *outcome(struct loop *l, struct loop_job *j, const struct backend_event *e,
                           enum loop_stop why, int attempt, int workers, double stop_s,
                           const char **type, char *reason, size_t len)
{
    int status = e->status;
    /* Slurm's word on an end ringd did not ask for ("Slurm job 42: node failure on n2"). */
    const char *told = e->reason[0] ? e->reason : NULL;
    const char *state;

    if (why == STOP_CANCEL) {
        state = "CANCELLED";
        *type = "cancelled";
        snprintf(reason, len, "cancelled by request (attempt %d exited %d)", attempt, status);
    } else if (e->cancelled && why == STOP_NONE) {
        /* Someone cancelled it in the resource manager (scancel): the job ends as they
         * asked, rather than being restarted behind their back. */
        state = "CANCELLED";
        *type = "cancelled";
        snprintf(reason, len, "attempt %d was cancelled outside ringd: %s", attempt,
                 told ? told : "by its resource manager");
    } else if (status == 0) {
        state = "SUCCEEDED";
        *type = "succeeded";
        snprintf(reason, len, "every worker exited 0");
    } else if (why == STOP_USER) {
        state = "STOPPED";
        *type = "stopped";
        if (status == 75)
            snprintf(reason, len,
                     "stopped by request after a checkpoint (exit 75, %.1f s after SIGTERM); "
                     "resume to continue",
                     stop_s);
        else
            snprintf(reason, len,
                     "stopped by request, but the program exited %d instead of 75: its last "
                     "checkpoint may be older",
                     status);
    } else if (why == STOP_RESIZE || why == STOP_PREEMPT) {
        state = "QUEUED";
        *type = why == STOP_RESIZE ? "resized" : "preempted";
        snprintf(reason, len, "attempt %d (%d worker%s) stopped in %.1f s%s%s%s", attempt, workers,
                 workers == 1 ? "" : "s", stop_s,
                 status == 75 ? " after a checkpoint"
                              : " but exited other than 75 (its last "
                                "checkpoint may be older)",
                 why == STOP_RESIZE && j->has_reserved ? "; restarting: " : "; queued again",
                 why == STOP_RESIZE && j->has_reserved ? j->reserved_reason : "");
    } else if (e->lost && j->lost < LOST_RETRIES) {
        /* Not the program's failure: started again at once, no restart spent. */
        j->lost++;
        state = "QUEUED";
        *type = "retry";
        snprintf(reason, len,
                 "attempt %d was lost by the resource manager, not the program (%s); started "
                 "again without spending a restart (%d of %d such)",
                 attempt, told ? told : "no reason given", j->lost, LOST_RETRIES);
    } else if (backend_exit_unrunnable(status) != NULL) {
        /* The program is not there or cannot be executed: every restart would end the same
         * way a moment later, so the job fails now rather than after max_restarts
         * backoffs. */
        char prog[160];
        program_of(l, j, prog, sizeof(prog));
        state = "FAILED";
        *type = "failed";
        snprintf(reason, len,
                 "%s: %s (exit %d)%s%s; not restarted, since every attempt would fail alike: "
                 "see 'ringctl logs %s --launcher'",
                 backend_exit_unrunnable(status), prog, status, told ? ": " : "", told ? told : "",
                 j->id);
    } else {
        char what[400];
        if (told != NULL)
            snprintf(what, sizeof(what), "attempt %d failed (exit status %d): %s", attempt, status,
                     told);
        else
            snprintf(what, sizeof(what),
                     "attempt %d failed (exit status %d; see 'ringctl logs %s --launcher' and "
                     "the ranks' logs)",
                     attempt, status, j->id);
        state = failure(l, j, e->time, reason, len, what);
        *type = strcmp(state, "FAILED") ? "retry" : "failed";
    }
    return state;
}

static void attempt_exited(struct loop *l, struct loop_job *j, const struct backend_event *e)
{
    int status = e->status;
    double t = e->time;
    struct journal_sched sched;
    struct error err;
    char reason[600];
    const char *state, *type;
    double ran = t - j->started, stop_s = j->stop != STOP_NONE ? t - j->stop_requested : -1;
    int attempt = j->attempt, workers = j->placement.workers;
    enum loop_stop why = j->stop;

    if (ran < 0)
        ran = 0;
    j->service += ran * workers * loop__unit(j);
    j->run_time += ran;
    j->last_stop_s = stop_s;
    if (j->state == LOOP_RUNNING) /* it ended by itself */
        usage_take(&l->running, &j->placement, j->cpw, -1);
    usage_apply(&l->used, &j->placement, j->cpw, -1);
    placement_clear(&j->placement);
    idmap_del(&l->by_backend, j->backend_id);
    j->backend_id[0] = '\0';
    l->stats.exits++;
    state = outcome(l, j, e, why, attempt, workers, stop_s, &type, reason, sizeof(reason));
    if (strcmp(state, "QUEUED") != 0 && j->has_reserved) {
        placement_clear(&j->reserved);
        j->has_reserved = 0;
    }
    sched = loop__sched_of(j);
    if (l->jo->ended(l->jctx, j, attempt, status, stop_s, state, type, reason, &sched, &err) < 0)
        loop__say(l, LOG_LEVEL_ERROR, j->id, "cannot record the end of attempt %d: %s", attempt,
                  err.text);
    j->stop = STOP_NONE;
    if (strcmp(state, "QUEUED") == 0) {
        j->state = LOOP_QUEUED;
        j->waiting_since = t;
        j->restarts++;
    } else {
        loop__drop(l, j);
    }
    l->dirty = 1;
}

static void attempt_progress(struct loop *l, struct loop_job *j, const struct backend_event *e)
{
    struct error err;
    double start_s = -1;
    int n = e->world_size > 0 ? e->world_size : j->placement.workers;
    /* The first report of an attempt started by a real backend is its start, not its speed
     * (backend.h: steady): one first step at 4 workers measured at 2469 samples/s, against
     * 2971 for every steady report at 2, kept ringd_sched's job from growing back to 4. */
    int speed = e->steady || j->first_progress >= 0;

    if (j->first_progress < 0) {
        j->first_progress = e->time;
        start_s = e->time - j->started;
        if (j->last_stop_s >= 0)
            j->restart_cost = j->last_stop_s + start_s;
        else if (j->restart_cost < 0)
            j->restart_cost = start_s; /* a first start: no stop to add yet */
    }
    if (e->samples_per_s > 0 && speed)
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
        loop__say(l, LOG_LEVEL_WARNING, j->id, "cannot record progress: %s", err.text);
}

/* The attempt's progress.json cannot be read (backend.h): said once per attempt, in the log
 * and as a "progress-ignored" event, however often the job rewrites it. */
static void progress_ignored(struct loop *l, struct loop_job *j, const struct backend_event *e)
{
    struct journal_sched sched = loop__sched_of(j);
    struct error err;
    if (j->progress_ignored == j->attempt)
        return;
    j->progress_ignored = j->attempt;
    loop__say(l, LOG_LEVEL_WARNING, j->id, "attempt %d: %s", j->attempt, e->reason);
    if (l->jo->transition(l->jctx, j, j->state == LOOP_STOPPING ? "STOPPING" : "RUNNING",
                          "progress-ignored", e->reason, &sched, &err) < 0)
        loop__say(l, LOG_LEVEL_WARNING, j->id, "cannot record that progress is ignored: %s",
                  err.text);
}

/* ---- where the backend put an attempt ---- */

/* A misplaced job's actual place, fetched for one reconcile. */
struct moved {
    struct loop_job *j;
    struct placement where;
    int done;
};

static void set_misplaced(struct loop *l, struct loop_job *j, int on)
{
    l->nmisplaced += on - j->misplaced;
    j->misplaced = on;
}

/* Takes m's actual place as its attempt's: journals it, then swaps the placements. */
static void take_place(struct loop *l, struct moved *m)
{
    struct loop_job *j = m->j;
    struct error err;
    char planned[512], hosts[512], gpus[512], msg[1600];
    placement_hosts(l->cluster, &j->placement, planned, sizeof(planned));
    placement_hosts(l->cluster, &m->where, hosts, sizeof(hosts));
    placement_gpus(&m->where, gpus, sizeof(gpus));
    snprintf(msg, sizeof(msg), "attempt %d runs on %s, GPUs [%s], where %s placed it (planned: %s)",
             j->attempt, hosts, gpus, l->b->name, planned);
    if (l->jo->placed != NULL && l->jo->placed(l->jctx, j, j->attempt, &m->where, msg, &err) < 0)
        loop__say(l, LOG_LEVEL_WARNING, j->id, "cannot record the placement: %s", err.text);
    loop__say(l, LOG_LEVEL_INFO, j->id, "%s", msg);
    placement_clear(&j->placement);
    j->placement = m->where; /* moved: the job owns the arrays now */
    memset(&m->where, 0, sizeof(m->where));
    set_misplaced(l, j, 0);
    l->dirty = 1;
}

/* j's place p in used, and in running while j runs (not while it is being stopped). */
static void hold(struct usage *used, struct usage *running, const struct loop_job *j,
                 const struct placement *p, int add)
{
    usage_take(used, p, j->cpw, add);
    if (j->state == LOOP_RUNNING)
        usage_take(running, p, j->cpw, add);
}

/*
 * The loop's model follows where the backend's resource manager put its attempts (Slurm
 * chooses nodes and GPUs itself, and may choose others than the loop planned, after a
 * resize or beside jobs from outside ringd), so that passes see the cluster as it is and
 * the API shows where the ranks run.
 *
 * Attempts can trade places (A planned on n1 runs on n2, B the other way round), so the
 * misplaced ones move together: their planned places are freed, then each actual place
 * that fits is taken, in sweeps until none moves. Any left keep their plan when every plan
 * left still fits; otherwise nothing changes (the model was wrong elsewhere), and the
 * misplaced attempts are looked at again at the next placement or exit.
 */
static void reconcile(struct loop *l)
{
    struct moved *m = calloc((size_t)l->nmisplaced, sizeof(*m));
    struct usage used, running;
    int n = 0, progress = 1, ok = 1;

    if (m == NULL || usage_init_copy(&used, &l->used) < 0) {
        free(m);
        return;
    }
    if (usage_init_copy(&running, &l->running) < 0) {
        usage_clear(&used);
        free(m);
        return;
    }
    for (int i = 0; i < l->njobs && n < l->nmisplaced; i++) {
        struct loop_job *j = l->job[i];
        if (j == NULL || !j->misplaced)
            continue;
        if (l->b->placement_of == NULL ||
            l->b->placement_of(l->bctx, j->backend_id, l->cluster, &m[n].where) < 0)
            continue; /* cannot tell yet: stays misplaced */
        if (placement_equal(&m[n].where, &j->placement)) {
            placement_clear(&m[n].where);
            set_misplaced(l, j, 0); /* where the loop planned it */
            continue;
        }
        m[n].j = j;
        hold(&used, &running, j, &j->placement, -1);
        n++;
    }
    while (progress) {
        progress = 0;
        for (int i = 0; i < n; i++) {
            if (m[i].done || !usage_fits(&used, &m[i].where, m[i].j->cpw))
                continue;
            hold(&used, &running, m[i].j, &m[i].where, 1);
            m[i].done = progress = 1;
        }
    }
    for (int i = 0; i < n && ok; i++) {
        if (m[i].done)
            continue;
        ok = usage_fits(&used, &m[i].j->placement, m[i].j->cpw);
        if (ok)
            hold(&used, &running, m[i].j, &m[i].j->placement, 1);
    }
    if (ok) {
        usage_copy(&l->used, &used);
        usage_copy(&l->running, &running);
        for (int i = 0; i < n; i++)
            if (m[i].done)
                take_place(l, &m[i]);
    } else {
        loop__say(l, LOG_LEVEL_WARNING, NULL,
                  "%d attempts run elsewhere than planned, and their places do not fit the "
                  "model of the cluster; will look again",
                  n);
    }
    for (int i = 0; i < n; i++)
        placement_clear(&m[i].where);
    usage_clear(&running);
    usage_clear(&used);
    free(m);
}

int loop__read_events(struct loop *l)
{
    struct backend_event ev[64];
    int total = 0, n, placed = 0, exited = 0;
    while ((n = l->b->poll(l->bctx, ev, 64)) > 0) {
        for (int i = 0; i < n; i++) {
            struct loop_job *j = idmap_get(&l->by_backend, ev[i].id, NULL);
            if (j == NULL)
                continue; /* an attempt this loop does not track (recovered and gone) */
            if (ev[i].kind == BACKEND_EXITED) {
                set_misplaced(l, j, 0);
                attempt_exited(l, j, &ev[i]);
                exited = 1;
            } else if (ev[i].kind == BACKEND_PLACED) {
                set_misplaced(l, j, 1);
                placed = 1;
            } else if (ev[i].kind == BACKEND_PROGRESS_IGNORED) {
                progress_ignored(l, j, &ev[i]);
            } else {
                attempt_progress(l, j, &ev[i]);
            }
            total++;
        }
        if (n < 64)
            break;
    }
    if (l->nmisplaced > 0 && (placed || exited))
        reconcile(l);
    return total;
}

void loop__enforce_kills(struct loop *l, double now)
{
    int stopping = 0;
    if (!l->any_stopping)
        return;
    for (int i = 0; i < l->njobs; i++) {
        struct loop_job *j = l->job[i];
        stopping += j != NULL && j->state == LOOP_STOPPING;
        if (j != NULL && j->state == LOOP_STOPPING && now >= j->kill_at) {
            loop__say(l, LOG_LEVEL_WARNING, j->id,
                      "attempt %d did not exit %.0f s after SIGTERM: SIGKILL", j->attempt,
                      l->cfg.kill_grace_s);
            l->b->signal(l->bctx, j->backend_id, SIGKILL);
            j->kill_at = now + REKILL_S;
        }
    }
    l->any_stopping = stopping > 0;
}

int loop_recover(struct loop *l, const struct loop_submit *s, int number, const char *backend_id,
                 int stopping, struct error *err)
{
    struct loop_job *j = loop__new_job(l, s, err);
    struct backend_start bs = {.job_id = s->id, .attempt = number, .cluster = l->cluster};
    struct journal_sched sched;
    struct placement where = {0};
    char reason[300], run[4200];
    int found = BACKEND_GONE;
    double now = l->b->now(l->bctx);

    if (j == NULL)
        return -1;
    if (l->cfg.data_dir != NULL) { /* where loop__start() put it: progress.json is read there */
        snprintf(run, sizeof(run), "%s/runs/%s/%d", l->cfg.data_dir, s->id, number);
        bs.run_dir = run;
    }
    if (backend_id != NULL && backend_id[0] != '\0') {
        found = l->b->recover(l->bctx, backend_id, &bs, err);
        if (found < 0) {
            loop__say(l, LOG_LEVEL_WARNING, j->id, "recovering attempt %d (%s): %s", number,
                      backend_id, err->text);
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
                     "ringd restarted; attempt %d still runs (%s %s, %d worker%s) and is tracked "
                     "again",
                     number, l->b->name, backend_id, where.workers, where.workers == 1 ? "" : "s");
            sched = loop__sched_of(j);
            if (l->jo->transition(l->jctx, j, "RUNNING", "adopted", reason, &sched, err) < 0)
                loop__say(l, LOG_LEVEL_ERROR, j->id, "cannot record the adoption: %s", err->text);
            loop__say(l, LOG_LEVEL_INFO, j->id, "%s", reason);
            l->dirty = 1;
            return 0;
        }
        placement_clear(&where);
        /* Otherwise the loop does not know its place: it is stopped gracefully and
         * restarted where the policy says, like a resize. */
        loop__ask_stop(l, j, stopping == 2 ? STOP_CANCEL : stopping ? STOP_USER : STOP_PREEMPT);
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
    sched = loop__sched_of(j);
    if (l->jo->ended(l->jctx, j, number, -1, -1,
                     stopping == 2 ? "CANCELLED"
                     : stopping    ? "STOPPED"
                                   : "QUEUED",
                     stopping == 2 ? "cancelled" : "requeued", reason, &sched, err) < 0) {
        loop__drop(l, j);
        return -1;
    }
    loop__say(l, LOG_LEVEL_WARNING, j->id, "%s", reason);
    if (stopping)
        loop__drop(l, j);
    l->dirty = 1;
    return 0;
}
