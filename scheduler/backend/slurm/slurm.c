/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_slurm.c - the Slurm backend behind the backend interface (backend.h): each attempt
 * is one Slurm batch job, submitted with libslurm, whose script runs the ranks with
 * `srun --mpi=pmix` (or Open MPI's mpirun) so that they wire up through PMIx. ringd decides
 * the size; Slurm places it.
 *
 * - start: slurm_submit_batch_job with the shape of slurm_job.c (nodes, tasks, CPUs per
 *   task, GPUs per node through tres_per_node), the partition, account, QOS and time limit
 *   of ringd's configuration, the worker contract in the environment, the command as the
 *   script's arguments, the attempt's run directory as working directory and for the
 *   output, and the job's Unix user (user_id, group_id) when ringd runs as root.
 * - poll: slurm_load_jobs, at most every POLL_INTERVAL_S, or every END_POLL_S while an
 *   attempt is about to end (it was asked to stop, or reported its last step), and only
 *   when something changed (update_time), mapped by slurm_outcome() (job_state &
 *   JOB_STATE_BASE). A job that ends outside ringd (scancel, node failure, time limit) is
 *   reported with Slurm's reason.
 * - signal: a stop goes to the job's steps only (KILL_STEPS_ONLY) as SLURM_STOP_SIGNAL,
 *   which each rank's wrapper turns into SIGTERM (slurm_job.h says why not SIGTERM itself):
 *   the ranks agree on a stop and exit 75 while the batch script stays to report it. An
 *   mpirun job gets MPIRUN_STOP_SIGNAL through its batch script. SIGKILL cancels the job.
 * - recover: a job Slurm still knows is adopted again, running or ended (its end is then
 *   reported by the next poll); one Slurm forgot is gone.
 * - describe: slurm_load_node, the nodes of the partition with their CPUs and GPUs (gres
 *   gpu), those down, drained or not responding offline; node_states follows them as they
 *   go out of service and come back; cluster_json adds which jobs, ringd's or not, hold
 *   which GPUs; placement_of reads where Slurm put a running attempt. These read Slurm's
 *   nodes and live in slurm_nodes.c.
 *
 * Every call runs on the scheduler's thread (backend.h), never on an HTTP thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "scheduler/backend/backend.h"
#include "scheduler/backend/identity.h"
#include "scheduler/backend/jobfs.h"
#include "scheduler/backend/mpirun.h"
#include "scheduler/backend/progress.h"
#include "slurm_config.h"
#include "slurm_job.h"
#include "slurm_nodes.h"

/*
 * slurmctld answers a job query in about a millisecond, but ringd may track hundreds of
 * attempts and other clients use the same controller: one query a second keeps the load
 * negligible while ending attempts are still noticed within a second.
 */
#define POLL_INTERVAL_S 1.0

/*
 * An attempt that was asked to stop, or whose rank 0 reported its last step, ends within
 * seconds, and every tenth of a second before ringd sees it delays its restart (a resize on
 * Slurm is a stop and a new submission). Until it ends, or END_WAIT_S passes, the poll runs
 * every END_POLL_S; with update_time most of those polls cost slurmctld only a "no change".
 */
#define END_POLL_S 0.2
#define END_WAIT_S 30.0

struct sjob {
    uint32_t id;
    char sid[16]; /* id as text: the attempt's backend id */
    char run_dir[4200];
    struct timespec progress_mtime;
    int pending;         /* last seen PENDING: a SIGTERM cancels it */
    int placed;          /* BACKEND_PLACED was reported (or it was adopted, placed already) */
    int mpirun;          /* launcher "mpirun": its stop is MPIRUN_STOP_SIGNAL to the batch script */
    double ending_until; /* about to end (END_POLL_S) until this time */
    struct sjob *next;
};

struct sctx {
    struct backend_config cfg;
    struct slurm_settings set;
    char work_dir[PATH_MAX];  /* set.work_dir, made and resolved */
    int node_cpus, node_gpus; /* the largest node, from the last describe() */
    time_t jobs_updated;      /* last_update of the last full answer: the next update_time */
    double last_poll;
    int dirty; /* a tracked job was added or signalled: the next poll must look */
    struct sjob *jobs;
};

static const char *slurm_err(void)
{
    return slurm_strerror(slurm_get_errno());
}

static int slurm_describe(void *ctx, struct cluster **out, struct error *err)
{
    struct sctx *c = ctx;
    return slurm_nodes_describe(c->set.partition, out, &c->node_cpus, &c->node_gpus, err);
}

static int slurm_node_states(void *ctx, struct cluster *cl, struct error *err)
{
    const struct sctx *c = ctx;
    return slurm_nodes_states(c->set.partition, cl, err);
}

static int slurm_init_backend(const struct backend_config *cfg, void **ctx, struct error *err)
{
    struct sctx *c = calloc(1, sizeof(*c));
    struct cluster *cl = NULL;

    if (c == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    c->cfg = *cfg;
    if (slurm_settings_read(cfg, &c->set, err) < 0 ||
        slurm_work_dir_prepare(c->set.work_dir, cfg->data_dir, c->work_dir, sizeof(c->work_dir),
                               err) < 0) {
        free(c);
        return -1;
    }
    slurm_init(NULL);
    /* The controller must answer now: a backend that cannot reach Slurm is not offered. */
    if (slurm_describe(c, &cl, err) < 0) {
        struct error why = *err;
        free(c);
        errno = ENOTSUP;
        return errprintf(err, "Slurm is not reachable (%s); is SLURM_CONF right?", why.text);
    }
    if (cl->nnodes == 0) {
        errprintf(err, "Slurm has no node%s%s", c->set.partition[0] ? " in partition " : "",
                  c->set.partition);
        cluster_free(cl);
        free(c);
        errno = ENOTSUP;
        return -1;
    }
    cluster_free(cl);
    *ctx = c;
    return 0;
}

static void slurm_fini_backend(void *ctx)
{
    struct sctx *c = ctx;
    if (c == NULL)
        return;
    while (c->jobs) {
        struct sjob *j = c->jobs;
        c->jobs = j->next;
        free(j);
    }
    free(c);
}

/*
 * The attempt's run directory with one rank.N per rank (srun and the mpirun wrapper write
 * rank.N/stdout but do not make rank.N), and ringd's default checkpoint directory, for the
 * job's user (jobfs.h): made while they are ringd's, each given to the user last, so that
 * the user, who may already own the run directory (a retried start), never gets ringd to
 * give away anything else. Returns 0, or -1 with err.
 */
static int prepare_dirs(const struct backend_start *s, const struct identity *who,
                        struct error *err)
{
    int run = jobfs_mkdirs(s->run_dir), fd = -1;
    char what[64] = "";

    if (run < 0)
        goto error;
    for (int r = 0; r < s->placement->workers; r++) {
        snprintf(what, sizeof(what), "rank.%d", r);
        if ((fd = jobfs_subdir(run, what, who->uid)) < 0 ||
            jobfs_give(fd, who->uid, who->gid, 0700) < 0)
            goto error;
        close(fd);
        fd = -1;
    }
    what[0] = '\0';
    if (jobfs_give(run, who->uid, who->gid, 0700) < 0)
        goto error;
    close(run);
    run = -1;
    if (s->checkpoint_is_default) {
        if ((fd = jobfs_mkdirs(s->checkpoint_dir)) < 0 ||
            jobfs_give(fd, who->uid, who->gid, 0700) < 0) {
            run = -2; /* names the checkpoint directory below */
            goto error;
        }
        close(fd);
    }
    return 0;
error : {
    int saved = errno;
    errprintf(err, "cannot make %s%s%s for user %s: %s", run == -2 ? s->checkpoint_dir : s->run_dir,
              what[0] ? "/" : "", what, who->name, strerror(saved));
    if (fd >= 0)
        close(fd);
    if (run >= 0)
        close(run);
    errno = saved;
    return -1;
}
}

/* Appends "NAME=VALUE" to env (grown as needed). Returns 0 or -1 (ENOMEM). */
static int env_add(char ***env, uint32_t *n, const char *name, const char *value)
{
    char **grown = realloc(*env, ((size_t)*n + 2) * sizeof(char *));
    char *kv;
    if (grown == NULL)
        return -1;
    *env = grown;
    if (asprintf(&kv, "%s=%s", name, value) < 0)
        return -1;
    (*env)[(*n)++] = kv;
    (*env)[*n] = NULL;
    return 0;
}

static void env_free(char **env, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        free(env[i]);
    free(env);
}

/* What build_env passes of ringd's environment (identity_env_inherit): PATH it set first,
 * and what the spec sets comes later, once. */
struct inherit {
    char ***env;
    uint32_t *n;
    json_t *spec_env;
};

static int inherit(void *arg, const char *name, const char *value)
{
    struct inherit *in = arg;
    if (strcmp(name, "PATH") == 0 || json_object_get(in->spec_env, name) != NULL)
        return 0;
    return env_add(in->env, in->n, name, value);
}

/*
 * The job's environment: a clean one, as a login would give the job's user (what the local
 * backend passes of ringd's environment: PATH, the locale; HOME, USER and LOGNAME of the
 * user), SLURM_CONF so that srun finds this cluster, the JobSpec's env, and the worker
 * contract. The rest of ringd's own environment is not passed on.
 */
static int build_env(const struct backend_start *s, const struct identity *id, char ***env,
                     uint32_t *n)
{
    json_t *spec_env = json_object_get(s->spec, "env"), *v;
    const char *key, *conf = getenv("SLURM_CONF"), *path = getenv("PATH");
    char num[16];

    *env = NULL;
    *n = 0;
    if (env_add(env, n, "PATH", path ? path : "/usr/local/bin:/usr/bin:/bin") < 0)
        return -1;
    if (identity_env_inherit(inherit, &(struct inherit){env, n, spec_env}) != 0)
        return -1;
    if (env_add(env, n, "HOME", id->home) < 0 || env_add(env, n, "USER", id->name) < 0 ||
        env_add(env, n, "LOGNAME", id->name) < 0)
        return -1;
    if (conf != NULL && env_add(env, n, "SLURM_CONF", conf) < 0)
        return -1;
    json_object_foreach(spec_env, key, v)
    {
        if (env_add(env, n, key, json_string_value(v)) < 0)
            return -1;
    }
    snprintf(num, sizeof(num), "%d", s->attempt);
    if (env_add(env, n, "RING_JOB_ID", s->job_id) < 0 || env_add(env, n, "RING_ATTEMPT", num) < 0 ||
        env_add(env, n, "RING_RUN_DIR", s->run_dir) < 0 ||
        env_add(env, n, "RING_CHECKPOINT_DIR", s->checkpoint_dir) < 0)
        return -1;
    if (id->uid == 0) { /* Open MPI refuses root without both */
        if (env_add(env, n, "OMPI_ALLOW_RUN_AS_ROOT", "1") < 0 ||
            env_add(env, n, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1") < 0)
            return -1;
    }
    return 0;
}

/* The command's words, borrowed from the spec, into a new array *words (freed by the
 * caller). Returns it, or NULL when out of memory. */
static char **command_words(json_t *command, char ***words)
{
    size_t n = json_array_size(command);
    if ((*words = calloc(n + 1, sizeof(char *))) == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        (*words)[i] = (char *)json_string_value(json_array_get(command, i));
    return *words;
}

/* What the attempt asks Slurm for: ringd's partition, account, QoS and time limit, the
 * nodes, tasks and GPUs of shape (tres: where the GPU request is written), and no requeue
 * (ringd restarts failed attempts itself, with its own backoff and count). */
static void request_resources(job_desc_msg_t *d, struct sctx *c, const struct slurm_shape *shape,
                              char *tres, size_t len)
{
    if (c->set.partition[0])
        d->partition = c->set.partition;
    if (c->set.account[0])
        d->account = c->set.account;
    if (c->set.qos[0])
        d->qos = c->set.qos;
    if (c->set.time_limit_min > 0)
        d->time_limit = (uint32_t)c->set.time_limit_min;
    d->min_nodes = d->max_nodes = (uint32_t)shape->nodes;
    d->num_tasks = (uint32_t)shape->ntasks;
    d->ntasks_per_node = (uint16_t)shape->tasks_per_node;
    d->cpus_per_task = (uint16_t)shape->cpus_per_task;
    if (shape->gpus_per_node > 0) {
        slurm_gpu_tres(shape->gpus_per_node, tres, len);
        d->tres_per_node = tres;
    }
    d->requeue = 0;
    d->kill_on_node_fail = 1;
}

/* Slurm job job_id, just submitted for an attempt with run_dir, into the jobs c follows;
 * its id as the loop knows it into id. Returns 0, or -1 with err (ENOMEM: the job is
 * killed rather than left behind untracked). */
static int track(struct sctx *c, uint32_t job_id, const char *run_dir, int mpirun, char *id,
                 size_t idlen, struct error *err)
{
    struct sjob *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        slurm_kill_job(job_id, SIGKILL, 0);
        errno = ENOMEM;
        return errprintf(err, "out of memory");
    }
    j->id = job_id;
    snprintf(j->sid, sizeof(j->sid), "%u", j->id);
    snprintf(j->run_dir, sizeof(j->run_dir), "%s", run_dir);
    j->pending = 1;
    j->mpirun = mpirun;
    j->next = c->jobs;
    c->jobs = j;
    c->dirty = 1;
    snprintf(id, idlen, "%s", j->sid);
    return 0;
}

static int slurm_start(void *ctx, const struct backend_start *s, char *id, size_t idlen,
                       struct error *err)
{
    struct sctx *c = ctx;
    json_t *command = json_object_get(s->spec, "command");
    const char *launcher = json_string_value(json_object_get(s->spec, "launcher"));
    const char *wd = json_string_value(json_object_get(s->spec, "working_dir"));
    const char *name = json_string_value(json_object_get(s->spec, "name"));
    enum slurm_launcher how =
        launcher && strcmp(launcher, "mpirun") == 0 ? SLURM_LAUNCH_MPIRUN : SLURM_LAUNCH_SRUN;
    const char *user = s->user;
    struct slurm_shape shape;
    struct identity who;
    submit_response_msg_t *resp = NULL;
    job_desc_msg_t d;
    char tres[64], out_path[4300], comment[160];
    char **argv = NULL, **env = NULL, **words = NULL, **marked = NULL;
    uint32_t nenv = 0;
    int rc = -1, workers = s->placement->workers;

    if (s->run_dir == NULL || s->checkpoint_dir == NULL)
        return errno = EINVAL, errprintf(err, "the slurm backend needs run and checkpoint dirs");
    /* As root a job is submitted for its user (job_desc user_id/group_id, which slurmctld
     * accepts from root only), never as root by default. */
    if (user == NULL && geteuid() == 0)
        user = c->cfg.default_user && c->cfg.default_user[0] ? c->cfg.default_user : NULL;
    if (user == NULL && geteuid() == 0)
        return errno = EPERM, errprintf(err, "the job has no Unix user to run as and ringd has no "
                                             "default_user");
    if (identity_lookup(user, &who, err) < 0)
        return -1;
    if (slurm_shape(workers, s->cpus_per_worker > 0 ? s->cpus_per_worker : 1, s->gpus_per_worker,
                    c->node_cpus, c->node_gpus, &shape, err) < 0)
        return errno = EINVAL, -1;
    /* A checkpoint directory the user named is theirs to create, as the job. */
    if (prepare_dirs(s, &who, err) < 0)
        return -1;
    slurm_init_job_desc_msg(&d);
    d.name = (char *)name;
    d.comment = comment;
    /* Names the attempt for people reading squeue, and for a restarted ringd. */
    snprintf(comment, sizeof(comment), "ringd job %s attempt %d%s", s->job_id, s->attempt,
             how == SLURM_LAUNCH_MPIRUN ? " mpirun" : "");
    request_resources(&d, c, &shape, tres, sizeof(tres));
    d.user_id = (uint32_t)who.uid;
    d.group_id = (uint32_t)who.gid;
    d.work_dir = (char *)(wd ? wd : s->run_dir);
    snprintf(out_path, sizeof(out_path), "%s/slurm.out", s->run_dir);
    d.std_out = out_path;
    d.std_err = out_path;
    d.script = slurm_script(how, c->cfg.kill_grace_s, s->gpus_per_worker, s->job_id, s->attempt);
    argv = calloc(json_array_size(command) + 2, sizeof(char *));
    if (d.script == NULL || argv == NULL || build_env(s, &who, &env, &nenv) < 0 ||
        (marked = launch_words_mark(command_words(command, &words), json_array_size(command))) ==
            NULL) {
        errno = ENOMEM;
        errprintf(err, "out of memory");
        goto out;
    }
    /* argv[0] is the script's own name; the command follows as "$@", each word marked
     * (mpirun.h: srun and mpirun would read a ":" word as another program's start). */
    argv[0] = "ringd-attempt";
    for (size_t i = 0; i < json_array_size(command); i++)
        argv[i + 1] = marked[i];
    d.argc = (uint32_t)json_array_size(command) + 1;
    d.argv = argv;
    d.environment = env;
    d.env_size = nenv;
    if (slurm_submit_batch_job(&d, &resp) != SLURM_SUCCESS || resp == NULL) {
        int e = slurm_get_errno();
        /* slurmctld down or busy: nothing was submitted, and the loop tries again later
         * without holding it against the job (backend.h). */
        errprintf(err, "%s: %s",
                  slurm_unreachable(e) ? "slurmctld cannot be reached" : "Slurm refused the job",
                  slurm_strerror(e));
        errno = slurm_unreachable(e) ? EAGAIN : EIO;
        goto out;
    }
    if (track(c, resp->job_id, s->run_dir, how == SLURM_LAUNCH_MPIRUN, id, idlen, err) < 0)
        goto out;
    rc = 0;
out:
    if (resp != NULL)
        slurm_free_submit_response_response_msg(resp);
    free(d.script);
    free(argv);
    free(words);
    free(marked);
    env_free(env, nenv);
    return rc;
}

static struct sjob *find(struct sctx *c, const char *id)
{
    for (struct sjob *j = c->jobs; j; j = j->next) {
        if (strcmp(j->sid, id) == 0)
            return j;
    }
    return NULL;
}

/* Whether Slurm job jid is PENDING now. The poll's view is up to POLL_INTERVAL_S old, and a
 * job that started since then may have ranks past a checkpoint: cancelling it on that stale
 * view loses their work (the job ends cancelled, 143, instead of stopping with 75). Asks
 * slurmctld; when it cannot answer, the job counts as started, which a stop handles safely
 * (SIGTERM to steps that do not exist yet does nothing; the kill grace then ends it). */
static int pending_now(uint32_t jid)
{
    job_info_msg_t *msg = NULL;
    int pending = 0;

    if (slurm_load_job(&msg, jid, SHOW_ALL) != SLURM_SUCCESS)
        return 0;
    if (msg->record_count > 0)
        pending = (msg->job_array[0].job_state & JOB_STATE_BASE) == JOB_PENDING;
    slurm_free_job_info_msg(msg);
    return pending;
}

static int slurm_signal(void *ctx, const char *id, int sig)
{
    struct sctx *c = ctx;
    struct sjob *j = find(c, id);
    char *end;
    unsigned long jid = strtoul(id, &end, 10);
    int rc;

    if (*end != '\0' || jid == 0)
        return errno = ESRCH, -1;
    if (j != NULL && j->pending && sig != SIGKILL)
        j->pending = pending_now((uint32_t)jid);
    /* A pending job has no ranks to stop gracefully: it is withdrawn at once. */
    if (sig == SIGKILL || (j != NULL && j->pending)) {
        if (sig != SIGKILL)
            log_info("Slurm job %lu is still pending: cancelled, as it has no ranks to stop", jid);
        rc = slurm_kill_job((uint32_t)jid, SIGKILL, 0);
    } else if (j != NULL && j->mpirun && sig == SIGTERM) /* to mpirun, which passes it on */
        rc = slurm_kill_job((uint32_t)jid, MPIRUN_STOP_SIGNAL, KILL_JOB_BATCH);
    else if (sig == SIGTERM) /* to every rank's wrapper, which passes it on */
        rc = slurm_kill_job((uint32_t)jid, SLURM_STOP_SIGNAL, KILL_STEPS_ONLY);
    else
        rc = slurm_kill_job((uint32_t)jid, (uint16_t)sig, KILL_STEPS_ONLY);
    if (rc != SLURM_SUCCESS) {
        int e = slurm_get_errno();
        if (e == ESLURM_ALREADY_DONE || e == ESLURM_INVALID_JOB_ID)
            return errno = ESRCH, -1;
        return errno = EIO, -1;
    }
    if (j != NULL)
        j->ending_until = clock_wall_s() + END_WAIT_S;
    c->dirty = 1;
    return 0;
}

/* Rank 0's progress.json, when it changed since the last look. */
static int read_progress(struct sjob *j, struct backend_event *ev)
{
    char path[4300];
    struct stat st;
    struct progress p;

    snprintf(path, sizeof(path), "%s/progress.json", j->run_dir);
    if (jobfs_stat(path, &st) < 0 || (st.st_mtim.tv_sec == j->progress_mtime.tv_sec &&
                                      st.st_mtim.tv_nsec == j->progress_mtime.tv_nsec))
        return 0;
    j->progress_mtime = st.st_mtim;
    if (progress_read(path, &p) < 0) {
        if (errno != EFBIG)
            return 0;
        memset(ev, 0, sizeof(*ev));
        ev->kind = BACKEND_PROGRESS_IGNORED;
        snprintf(ev->id, sizeof(ev->id), "%s", j->sid);
        ev->time = clock_wall_s();
        snprintf(ev->reason, sizeof(ev->reason),
                 "progress.json is larger than %d bytes: ringd ignores it; rank 0's report is "
                 "a small JSON object (see the worker contract)",
                 PROGRESS_MAX);
        return 1;
    }
    memset(ev, 0, sizeof(*ev));
    ev->kind = BACKEND_PROGRESS;
    snprintf(ev->id, sizeof(ev->id), "%s", j->sid);
    ev->time = clock_wall_s();
    ev->step = p.step;
    ev->total_steps = p.total_steps;
    ev->samples_per_s = p.samples_per_s;
    ev->samples = p.samples;
    ev->total_samples = p.total_samples;
    ev->world_size = p.world_size;
    if (p.total_steps > 0 && p.step >= p.total_steps)
        j->ending_until = ev->time + END_WAIT_S;
    return 1;
}

static const slurm_job_info_t *lookup(const job_info_msg_t *msg, uint32_t id)
{
    for (uint32_t i = 0; msg != NULL && i < msg->record_count; i++) {
        if (msg->job_array[i].job_id == id)
            return &msg->job_array[i];
    }
    return NULL;
}

static int slurm_poll(void *ctx, struct backend_event *out, int max)
{
    struct sctx *c = ctx;
    job_info_msg_t *msg = NULL;
    double now = clock_wall_s();
    int n = 0;

    double interval = POLL_INTERVAL_S;

    for (struct sjob *j = c->jobs; j && n < max; j = j->next) {
        n += read_progress(j, &out[n]);
        if (now < j->ending_until)
            interval = END_POLL_S;
    }
    if (c->jobs == NULL || n >= max || (now < c->last_poll + interval && !c->dirty))
        return n;
    c->last_poll = now;
    /* With update_time, slurmctld answers "no change" or every job, never only the changed
     * ones: a tracked job the full answer lacks is purged, not unchanged. A new or
     * signalled job asks for the full answer at once. */
    if (slurm_load_jobs(c->dirty ? 0 : c->jobs_updated, &msg, SHOW_ALL) != SLURM_SUCCESS) {
        if (slurm_get_errno() == SLURM_NO_CHANGE_IN_DATA)
            return n;
        log_warning("slurm_load_jobs: %s; will retry", slurm_err());
        return n;
    }
    c->jobs_updated = msg->last_update;
    c->dirty = 0;
    for (struct sjob **pp = &c->jobs; *pp && n < max;) {
        struct sjob *j = *pp;
        const slurm_job_info_t *info = lookup(msg, j->id);
        struct slurm_outcome o;
        if (info == NULL) {
            memset(&o, 0, sizeof(o));
            o.ended = 1;
            o.status = 1;
            o.lost = 1;
            snprintf(o.reason, sizeof(o.reason),
                     "Slurm job %u is gone from slurmctld (it ended long ago, or slurmctld lost "
                     "its state)",
                     j->id);
        } else {
            slurm_outcome(info, &o);
            if (slurm_check_ranks_started(j->run_dir, (int)info->num_tasks, &o) > 0)
                log_warning("Slurm job %u: %s", j->id, o.reason);
        }
        j->pending = info != NULL && (info->job_state & JOB_STATE_BASE) == JOB_PENDING;
        if (!o.ended) {
            /* Slurm chose its nodes and GPUs: the loop asks where (placement_of). */
            if (!j->placed && info != NULL && (info->job_state & JOB_STATE_BASE) == JOB_RUNNING) {
                memset(&out[n], 0, sizeof(out[n]));
                out[n].kind = BACKEND_PLACED;
                snprintf(out[n].id, sizeof(out[n].id), "%s", j->sid);
                out[n].time = now;
                n++;
                j->placed = 1;
            }
            pp = &j->next;
            continue;
        }
        /* A last look at progress before forgetting the attempt. */
        if (n < max - 1)
            n += read_progress(j, &out[n]);
        memset(&out[n], 0, sizeof(out[n]));
        out[n].kind = BACKEND_EXITED;
        snprintf(out[n].id, sizeof(out[n].id), "%s", j->sid);
        out[n].time = now;
        out[n].status = o.status;
        out[n].cancelled = o.cancelled;
        out[n].lost = o.lost;
        snprintf(out[n].reason, sizeof(out[n].reason), "%s", o.reason);
        n++;
        *pp = j->next;
        free(j);
    }
    slurm_free_job_info_msg(msg);
    return n;
}

static int slurm_recover(void *ctx, const char *id, const struct backend_start *s,
                         struct error *err)
{
    struct sctx *c = ctx;
    job_info_msg_t *msg = NULL;
    struct sjob *j;
    char *end;
    unsigned long jid = strtoul(id, &end, 10);
    int pending, mpirun;

    if (*end != '\0' || jid == 0)
        return BACKEND_GONE; /* not a Slurm job id: a local attempt of an older ringd */
    if (slurm_load_job(&msg, (uint32_t)jid, SHOW_ALL) != SLURM_SUCCESS) {
        int e = slurm_get_errno();
        if (e == ESLURM_INVALID_JOB_ID)
            return BACKEND_GONE;
        return errno = EIO, errprintf(err, "slurm_load_job %lu: %s", jid, slurm_strerror(e));
    }
    if (msg->record_count == 0) {
        slurm_free_job_info_msg(msg);
        return BACKEND_GONE;
    }
    pending = (msg->job_array[0].job_state & JOB_STATE_BASE) == JOB_PENDING;
    mpirun = msg->job_array[0].comment != NULL && strstr(msg->job_array[0].comment, " mpirun");
    slurm_free_job_info_msg(msg);
    if ((j = calloc(1, sizeof(*j))) == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    j->id = (uint32_t)jid;
    snprintf(j->sid, sizeof(j->sid), "%u", j->id);
    if (s != NULL && s->run_dir != NULL)
        snprintf(j->run_dir, sizeof(j->run_dir), "%s", s->run_dir);
    j->pending = pending;
    j->placed = 1; /* the loop asks placement_of() when it adopts it */
    j->mpirun = mpirun;
    j->next = c->jobs;
    c->jobs = j;
    c->dirty = 1;
    return BACKEND_ADOPTED;
}

static int slurm_placement_of(void *ctx, const char *id, const struct cluster *c,
                              struct placement *out)
{
    char *end;
    unsigned long jid = strtoul(id, &end, 10);
    memset(out, 0, sizeof(*out));
    if (*end != '\0' || jid == 0 || jid > UINT32_MAX)
        return -1;
    return slurm_nodes_placement((uint32_t)jid, c, out);
}

static double slurm_now(void *ctx)
{
    return clock_wall_s();
}

static const char *slurm_work_dir(void *ctx)
{
    return ((struct sctx *)ctx)->work_dir;
}

static json_t *slurm_cluster_json(void *ctx)
{
    const struct sctx *c = ctx;
    return slurm_nodes_json(c->set.partition);
}

const struct backend_ops backend_slurm_ops = {
    .name = "slurm",
    .id_label = "Slurm job",
    .summary = "a batch job per attempt, ranks under srun --mpi=pmix",
    .settings = slurm_settings,
    .config = slurm_config,
    .init = slurm_init_backend,
    .work_dir = slurm_work_dir,
    .fini = slurm_fini_backend,
    .describe = slurm_describe,
    .start = slurm_start,
    .signal = slurm_signal,
    .poll = slurm_poll,
    .recover = slurm_recover,
    .now = slurm_now,
    .placement_of = slurm_placement_of,
    .node_states = slurm_node_states,
    .cluster_json = slurm_cluster_json,
};
