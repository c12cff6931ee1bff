/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend.h - where attempts run: the seam between the scheduler loop and the thing that
 * starts processes. An ops table, in the shape of flux-core's job-exec
 * `struct exec_implementation`: ringd picks one implementation at start-up and the loop
 * calls it without knowing what it is.
 *
 *   local/  ringrun in a process group of its own on this host
 *   slurm/  a batch job per attempt through libslurm, its ranks under srun --mpi=pmix
 *           (built when libslurm is found)
 *   sim/    no processes: a virtual clock and a model of each job's speed, for ringsim,
 *           bench/sched and the unit tests (not offered to ringd: not in backend.c's table)
 *
 * ringd names none of them: it finds the one its configuration asks for in backend.c's
 * table, reads that backend's own settings for it (settings, config) and gives it ringd's
 * shared configuration (struct backend_config). A new backend is a folder here and a row
 * in that table.
 *
 * Threads: every op is called from the scheduler's thread only (ringsim: its only thread),
 * never from an HTTP thread, so an implementation needs no locks of its own and may block
 * briefly (a Slurm RPC), never for long.
 *
 * Time: the loop reads the time from the backend (now()), in seconds. local and slurm
 * answer the wall clock (CLOCK_REALTIME, so that it compares with the store's timestamps);
 * sim answers its virtual clock.
 *
 * Errors: ops return 0 or -1 with errno set and a message in err (struct error,
 * common/error.h) that says what went wrong and what to do.
 *
 * The life of an attempt, as the loop drives it:
 *   start()    -> the backend's id for it (a process group, a Slurm job id), which the
 *                 loop stores with the attempt before anything else happens to it; the
 *                 job runs as its user (as slurmstepd does: setgid, initgroups, setuid),
 *                 never with ringd's privileges;
 *   signal()   -> SIGTERM asks for a graceful stop (libring agrees on it across ranks; the
 *                 program checkpoints and exits 75); SIGKILL after the grace period;
 *   poll()     -> BACKEND_EXITED once, when every rank is gone, with ringrun's status;
 *                 BACKEND_PROGRESS whenever rank 0 reports progress (RING_RUN_DIR/
 *                 progress.json: step, total steps, samples/s);
 *   recover()  -> after ringd restarts, for each attempt the store says was running.
 *
 * Optional ops (NULL when a backend has none): placement_of() says where an attempt runs:
 * an adopted one, so that it keeps running after a ringd restart, and one that its resource
 * manager placed itself (BACKEND_PLACED), so that the loop's model follows the manager's
 * choice rather than its own plan; cluster_json() adds the backend's
 * own view of its cluster to GET /v1/cluster.
 */
#ifndef RINGD_BACKEND_H
#define RINGD_BACKEND_H

#include <sys/types.h>
#include <jansson.h>

#include "common/error.h"
#include "common/setting.h"
#include "scheduler/model/cluster.h"

/* ringd's configuration as every backend sees it (borrowed for the backend's lifetime). */
struct backend_config {
    const char *data_dir;     /* ringd's data directory (its own, 0700: jobs never see it);
                               * runs/ and checkpoints/ go there unless work_dir() says */
    const char *ringrun;      /* the launcher's path */
    const char *mpirun;       /* Open MPI's mpirun, for JobSpecs with launcher "mpirun" */
    int slots, gpus;          /* this host's, as ringd's `slots` and `gpus` say (the local
                               * backend's node; a resource manager's backend has its own) */
    int kill_grace_s;         /* ringd's `kill_grace`: the loop's SIGTERM-to-SIGKILL delay */
    int no_auth;              /* ringd serves without tokens: every job is its local user's */
    const char *default_user; /* as root, the user of jobs stored without one */
    const char *options;      /* `backend_options`, "key=value,key=value", or NULL */
    /* The backend's own settings as configured (backend_ops.settings), nsettings of them;
     * a setting not among them has its default (backend_setting()). */
    const struct setting_value *settings;
    int nsettings;
};

/* One attempt to start. Everything is borrowed for the duration of start(). */
struct backend_start {
    const char *job_id;
    int attempt;                       /* 1, 2, ... */
    const struct placement *placement; /* where: nodes, workers per node, GPU ids */
    const struct cluster *cluster;     /* what placement's node indexes refer to */
    int gpus_per_worker, cpus_per_worker;
    json_t *spec;               /* the validated JobSpec: command, env, working_dir (borrowed) */
    const char *run_dir;        /* RING_RUN_DIR: the backend creates it, for the job's user */
    const char *checkpoint_dir; /* RING_CHECKPOINT_DIR */
    int checkpoint_is_default;  /* 1: ringd's default under data_dir (the backend creates it
                                 * for the job's user); 0: the user named it (the job creates
                                 * it, as its user) */
    const char *owner;          /* the job's owner (the token's name) */
    const char *user;           /* the Unix user it runs as (its token's); NULL: none known,
                                 * then the backend's default_user, or ringd's own user when
                                 * ringd is not root. A job never runs with ringd's privileges
                                 * when ringd is root. */
};

enum backend_event_kind {
    BACKEND_EXITED,   /* every rank is gone; status is set */
    BACKEND_PROGRESS, /* rank 0 reported progress; the progress fields are set */
    BACKEND_PLACED,   /* the resource manager started the attempt where it chose, which
                       * may not be where the loop asked (Slurm picks the nodes and GPUs
                       * itself): placement_of() says where; no other field is set */
    /* rank 0 rewrote progress.json, but it is no report ringd reads (larger than
     * PROGRESS_MAX): reason says why. Sent at each such rewrite; the loop tells the job's
     * events once per attempt. */
    BACKEND_PROGRESS_IGNORED,
};

struct backend_event {
    enum backend_event_kind kind;
    char id[64]; /* the attempt's backend id, as start() gave it */
    double time; /* when it happened, on the backend's clock */
    /* BACKEND_EXITED: ringrun's exit status (0 done, 75 stopped and resumable), or 128+N
     * when it died of signal N */
    int status;
    /* BACKEND_EXITED, from a backend that knows more than the status (Slurm): the attempt
     * was cancelled by its resource manager (an scancel, by ringd or anyone), and why it
     * ended in the manager's words ("Slurm job 42: node failure on n2"; "" when nothing
     * more is known). BACKEND_PROGRESS_IGNORED: reason only. */
    int cancelled;
    char reason[200];
    /* BACKEND_EXITED: the resource manager lost the attempt, not the program: a node of it
     * failed or did not boot, its ranks never started, the manager forgot it. The loop
     * starts it again without spending the job's max_restarts (a few times at most). */
    int lost;
    /* BACKEND_PROGRESS: what rank 0 reported; a negative value was not reported. samples
     * and total_samples count the whole job's work (over all attempts) in the unit of
     * samples_per_s; they tell the scheduler how much work is left. */
    long step, total_steps;
    double samples_per_s;
    double samples, total_samples;
    int world_size;
    /* BACKEND_PROGRESS: 1 when samples_per_s is the attempt's speed from its first report
     * on (the sim backend's rates are exact). 0 when a program measured it: a program's
     * first report of an attempt marks its start, and its rate covers the first steps,
     * which build the rings, fault in the memory and warm the caches, so the scheduler
     * takes the speed from the reports after it. */
    int steady;
};

/* What recover() found of an attempt a previous ringd left. */
enum backend_recovered {
    BACKEND_GONE = 0,    /* nothing of it runs any more */
    BACKEND_STOPPED = 1, /* it still ran; the backend stopped it (a stop, grace, SIGKILL) */
    BACKEND_ADOPTED = 2, /* it still runs and the backend tracks it again: poll() will
                          * report its end (a backend that cannot adopt stops it) */
};

struct backend_ops {
    const char *name;     /* "local", "sim", "slurm": what a JobSpec's `backend` names */
    const char *id_label; /* what an attempt's id is, for events: "process group", "Slurm job" */
    const char *summary;  /* what it is, for ringd --help: "a batch job per attempt ..." */
    /* The keys of ringd's configuration that are this backend's own (ringd reads, lists
     * and prints them without knowing them), ended by a row with key NULL; NULL: none. */
    const struct setting *settings;
    /*
     * Optional. Takes the backend's own settings before anything starts, as flux-core
     * job-exec's config does: checks each (backend_setting()), against this host where a
     * setting needs it (the resource limits ringd can grant), so that ringd refuses to start
     * on a bad one. Returns 0, or -1 with err saying what to fix (ringd exits 64).
     */
    int (*config)(const struct backend_config *cfg, struct error *err);
    /*
     * Prepares the backend from cfg (config() accepted it). Returns a context in *ctx and
     * 0; or -1 when the backend declines (errno ENOTSUP: not built in, not configured, its
     * service unreachable), cannot work here as configured (EINVAL: a directory it must
     * make, an isolation it cannot give; ringd exits 64) or fails, with err saying which
     * and what to do.
     */
    int (*init)(const struct backend_config *cfg, void **ctx, struct error *err);
    /* Optional. Where the attempts' runs/<job>/<attempt> and checkpoints/<job> go (a
     * directory every node of the backend sees), for the loop and the API; NULL op: the
     * data directory. Borrowed for ctx's lifetime. */
    const char *(*work_dir)(void *ctx);
    /* Releases ctx; attempts keep running (a restarted ringd recovers them), except that a
     * local attempt is asked to stop when the thread that started it ends (ringd-exec's
     * parent-death signal: see ringd_exec.c). NULL-safe. */
    void (*fini)(void *ctx);
    /*
     * The cluster this backend runs on, as a new struct the caller frees (cluster_free):
     * its nodes, each with slots and GPUs, and offline set on those out of service now.
     * Called once, when the loop is created. Returns 0 or -1 with err.
     */
    int (*describe)(void *ctx, struct cluster **out, struct error *err);
    /*
     * Starts one attempt where s->placement says, with the worker contract (RING_JOB_ID,
     * RING_ATTEMPT, RING_RUN_DIR, RING_CHECKPOINT_DIR, and through ringrun RING_RANK, ...,
     * CUDA_VISIBLE_DEVICES), as s->uid/s->gid when ringd runs as root. Writes the attempt's
     * backend id (NUL-terminated, at most idlen bytes) to id: a process group, a Slurm job
     * id. Returns 0, or -1 with err (nothing was left running); errno EAGAIN when the
     * resource manager could not be reached (slurmctld down or busy), which is not the
     * job's fault: the loop queues it again without counting a failed attempt.
     */
    int (*start)(void *ctx, const struct backend_start *s, char *id, size_t idlen,
                 struct error *err);
    /* Sends sig to every process of attempt id: SIGTERM (graceful stop), SIGKILL.
     * Returns 0, or -1 with errno ESRCH when nothing of it is left. */
    int (*signal)(void *ctx, const char *id, int sig);
    /*
     * Reports what happened since the last call, without blocking: at most max events into
     * out, oldest first. Returns how many (0: nothing new). An attempt's BACKEND_EXITED
     * comes once; after it the id is forgotten.
     */
    int (*poll)(void *ctx, struct backend_event *out, int max);
    /*
     * After a ringd restart: attempt id of job_id was running when the old ringd went away
     * (s describes it as it was started; s->placement may be NULL when unknown). Returns a
     * enum backend_recovered, or -1 with err.
     */
    int (*recover)(void *ctx, const char *id, const struct backend_start *s, struct error *err);
    /* The backend's clock, in seconds. */
    double (*now)(void *ctx);
    /*
     * Optional. Where attempt id runs, in c's node indexes, into out (cleared first).
     * Returns 0, or -1 when the backend cannot tell (not placed yet; for an adopted
     * attempt the loop then stops it and restarts it where the policy says). Needed by a
     * backend that reports BACKEND_PLACED.
     */
    int (*placement_of)(void *ctx, const char *id, const struct cluster *c, struct placement *out);
    /*
     * Optional, for a cluster whose nodes go in and out of service (Slurm: down, drained,
     * resumed). Sets offline on each node of c (the cluster describe() gave, by name) as
     * the backend sees it now; a node the backend no longer knows is offline. Returns 0,
     * or -1 with err (c is then unchanged). The loop asks every NODE_CHECK_S.
     */
    int (*node_states)(void *ctx, struct cluster *c, struct error *err);
    /* Optional. The backend's own view of its cluster for GET /v1/cluster, as a new
     * reference (Slurm: its nodes, GPUs and which jobs hold them, ringd's or not). */
    json_t *(*cluster_json)(void *ctx);
};

/* The backend ringd may run that is called name (backend.c's table), or NULL when this
 * ringd has none by that name. */
const struct backend_ops *backend_find(const char *name);
/* The i-th backend of the table (0, 1, ...), NULL past the last: for listing them. */
const struct backend_ops *backend_at(int i);
/* The names of the table's backends, comma-separated ("local, slurm"). */
const char *backend_names(void);
/* The value of b's setting key in cfg: as configured, else the setting's default; NULL
 * when b has no such setting. */
const char *backend_setting(const struct backend_ops *b, const struct backend_config *cfg,
                            const char *key);

/*
 * Whether an attempt's exit status says that its program can never run as given: 127, the
 * program was not found, or 126, it was found but cannot be executed. Every backend reports
 * them alike: ringrun and ringd-exec exit so (ringrun.c, ringd_exec.c), as does the shell
 * that runs each rank under srun or mpirun (slurm_job.c, mpirun.c), and Slurm passes the
 * batch script's status on. Starting such an attempt again fails the same way, so the loop
 * fails the job rather than spend its restarts. Returns the words for it ("command not
 * found", a static string), or NULL for any other status.
 */
const char *backend_exit_unrunnable(int status);

#endif /* RINGD_BACKEND_H */
