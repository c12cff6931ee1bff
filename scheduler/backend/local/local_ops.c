/* SPDX-License-Identifier: Apache-2.0 */
/*
 * local_ops.c - the local backend behind the backend interface (backend.h): one node,
 * this host, with ringd's `slots` and `gpus`. local.c starts an attempt's
 * ringrun in a process group of its own; this file tracks those children: it reaps them
 * by pid (never waitpid(-1), which would steal the exit of any other child of ringd), reads
 * rank 0's progress.json, and stops what a previous ringd left.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "local.h"
#include "scheduler/backend/backend.h"
#include "scheduler/backend/jobfs.h"
#include "scheduler/backend/mpirun.h"
#include "scheduler/backend/progress.h"

struct local_attempt {
    pid_t pid;  /* also its process group */
    int mpirun; /* launcher "mpirun": stops with MPIRUN_STOP_SIGNAL, ranks in their own groups */
    char run_dir[4200];
    struct timespec progress_mtime;
    struct local_attempt *next;
};

struct local {
    struct backend_config cfg;
    struct local_settings set;
    int isolate; /* jobs run in a mount namespace that hides cfg.data_dir */
    char host[256];
    struct local_attempt *attempts;
};

static int local_init(const struct backend_config *cfg, void **ctx, struct error *err)
{
    struct local *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    l->cfg = *cfg;
    if (local_settings_read(cfg, &l->set, err) < 0 ||
        (l->isolate = local_isolation_choose(cfg, &l->set, err)) < 0) {
        free(l);
        return -1;
    }
    if (gethostname(l->host, sizeof(l->host)) < 0 || l->host[0] == '\0')
        snprintf(l->host, sizeof(l->host), "localhost");
    l->host[sizeof(l->host) - 1] = '\0';
    *ctx = l;
    return 0;
}

static void local_fini(void *ctx)
{
    struct local *l = ctx;
    if (l == NULL)
        return;
    while (l->attempts) {
        struct local_attempt *a = l->attempts;
        l->attempts = a->next;
        free(a);
    }
    free(l);
}

static int local_describe(void *ctx, struct cluster **out, struct error *err)
{
    struct local *l = ctx;
    struct cluster *c = cluster_create(0, 0, 0);
    if (c == NULL || cluster_add_node(c, l->host, l->cfg.slots, l->cfg.gpus) < 0) {
        cluster_free(c);
        return errno = ENOMEM, errprintf(err, "out of memory");
    }
    *out = c;
    return 0;
}

static int local_start(void *ctx, const struct backend_start *s, char *id, size_t idlen,
                       struct error *err)
{
    struct local *l = ctx;
    struct local_attempt *a;
    struct local_launch launch;
    const char *user = s->user;
    const char *launcher = json_string_value(json_object_get(s->spec, "launcher"));
    int mpirun = launcher != NULL && strcmp(launcher, "mpirun") == 0;
    char gpus[1024];
    pid_t pid;

    if (s->placement->nparts != 1 || s->placement->part[0].node != 0)
        return errno = EINVAL, errprintf(err, "the local backend runs on one node only");
    if (s->run_dir == NULL || s->checkpoint_dir == NULL)
        return errno = EINVAL, errprintf(err, "the local backend needs run and checkpoint dirs");
    /* As root a job runs as its user, never as root by default. */
    if (user == NULL && geteuid() == 0) /* a job stored before users were mapped */
        user = l->cfg.default_user && l->cfg.default_user[0] ? l->cfg.default_user : NULL;
    if (user == NULL && geteuid() == 0)
        return errno = EPERM, errprintf(err, "the job has no Unix user to run as and ringd has no "
                                             "default_user");
    /* local_launch makes the run directory and the default checkpoint one for the user; a
     * checkpoint directory the user named is made by ringd-exec, as the user. */
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory");
    placement_gpus(s->placement, gpus, sizeof(gpus));
    launch = (struct local_launch){
        .ringrun = l->cfg.ringrun,
        .mpirun = mpirun ? l->cfg.mpirun : NULL,
        .exec_helper = l->set.exec_helper,
        .checkpoint_in_data_dir = s->checkpoint_is_default,
        .hide_dir = l->isolate ? l->cfg.data_dir : NULL,
        .user = user,
        .limits = &l->set.limits,
        .job_id = s->job_id,
        .attempt = s->attempt,
        .workers = s->placement->workers,
        .gpus = gpus,
        .gpus_per_worker = s->gpus_per_worker,
        .run_dir = s->run_dir,
        .checkpoint_dir = s->checkpoint_dir,
        .spec = s->spec,
    };
    pid = local_launch(&launch, err);
    if (pid < 0) {
        free(a);
        return -1;
    }
    a->pid = pid;
    a->mpirun = mpirun;
    snprintf(a->run_dir, sizeof(a->run_dir), "%s", s->run_dir);
    a->next = l->attempts;
    l->attempts = a;
    snprintf(id, idlen, "%d", (int)pid);
    return 0;
}

static struct local_attempt *find(struct local *l, const char *id)
{
    char *end;
    long pid = strtol(id, &end, 10);
    if (*end != '\0' || pid <= 0)
        return NULL;
    for (struct local_attempt *a = l->attempts; a; a = a->next)
        if (a->pid == (pid_t)pid)
            return a;
    return NULL;
}

/*
 * Sends sig to pid and everything below it, whatever their process groups: mpirun puts
 * each rank in a group of its own, beyond a signal to mpirun's group. The tree is found in
 * /proc (each process's ppid) before anything is signalled: a parent killed first would
 * leave its children to init, out of the walk's sight.
 */
static void kill_tree(pid_t root, int sig)
{
    pid_t tree[4096];
    int n = 0;

    tree[n++] = root;
    for (int i = 0; i < n; i++) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        if (d == NULL)
            break;
        while ((e = readdir(d)) != NULL && n < (int)(sizeof(tree) / sizeof(tree[0]))) {
            char path[64], buf[512], *close_paren;
            long pid = strtol(e->d_name, NULL, 10), ppid;
            FILE *f;
            if (pid <= 0)
                continue;
            snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
            if ((f = fopen(path, "r")) == NULL)
                continue;
            if (fgets(buf, sizeof(buf), f) == NULL)
                buf[0] = '\0';
            fclose(f);
            /* "pid (comm) state ppid ...": comm may hold spaces and parentheses */
            close_paren = strrchr(buf, ')');
            if (close_paren == NULL || sscanf(close_paren + 1, " %*c %ld", &ppid) != 1 ||
                ppid != (long)tree[i])
                continue;
            tree[n++] = (pid_t)pid;
        }
        closedir(d);
    }
    for (int i = 0; i < n; i++)
        kill(tree[i], sig);
}

static int local_sig(void *ctx, const char *id, int sig)
{
    struct local_attempt *a = find(ctx, id);
    if (a == NULL)
        return errno = ESRCH, -1;
    /* See mpirun.h: mpirun passes this one on. To the group: with isolation, ringd-exec
     * leads it and mpirun is a member (ringd_exec.c). */
    if (a->mpirun && sig == SIGTERM)
        return local_signal(a->pid, MPIRUN_STOP_SIGNAL);
    if (a->mpirun && sig == SIGKILL) {
        if (kill(a->pid, 0) < 0 && errno == ESRCH)
            return -1;
        kill_tree(a->pid, SIGKILL);
        return 0;
    }
    return local_signal(a->pid, sig);
}

/* A progress.json too large to read: event e for attempt pid says so (returns 1); for any
 * other failure (absent, not JSON, half written) nothing (0). */
static int progress_ignored(int errnum, int pid, struct backend_event *e)
{
    if (errnum != EFBIG)
        return 0;
    memset(e, 0, sizeof(*e));
    e->kind = BACKEND_PROGRESS_IGNORED;
    snprintf(e->id, sizeof(e->id), "%d", pid);
    e->time = clock_wall_s();
    snprintf(e->reason, sizeof(e->reason),
             "progress.json is larger than %d bytes: ringd ignores it; rank 0's report is a "
             "small JSON object (see the worker contract)",
             PROGRESS_MAX);
    return 1;
}

/* A progress event when rank 0 rewrote progress.json since the last look. */
static int progress_event(struct local_attempt *a, struct backend_event *e)
{
    char path[4400];
    struct stat st;
    struct progress p;
    snprintf(path, sizeof(path), "%s/progress.json", a->run_dir);
    if (jobfs_stat(path, &st) < 0 || (st.st_mtim.tv_sec == a->progress_mtime.tv_sec &&
                                      st.st_mtim.tv_nsec == a->progress_mtime.tv_nsec))
        return 0;
    a->progress_mtime = st.st_mtim;
    if (progress_read(path, &p) < 0)
        return progress_ignored(errno, (int)a->pid, e);
    memset(e, 0, sizeof(*e));
    e->kind = BACKEND_PROGRESS;
    snprintf(e->id, sizeof(e->id), "%d", (int)a->pid);
    e->time = clock_wall_s();
    e->step = p.step;
    e->total_steps = p.total_steps;
    e->samples_per_s = p.samples_per_s;
    e->samples = p.samples;
    e->total_samples = p.total_samples;
    e->world_size = p.world_size;
    return 1;
}

static int local_poll(void *ctx, struct backend_event *out, int max)
{
    struct local *l = ctx;
    struct local_attempt **pp = &l->attempts;
    int n = 0;
    while (*pp != NULL && n < max) {
        struct local_attempt *a = *pp;
        int status;
        pid_t r;
        if (progress_event(a, &out[n]))
            n++;
        if (n >= max)
            break;
        r = waitpid(a->pid, &status, WNOHANG);
        if (r == a->pid || (r < 0 && errno == ECHILD)) {
            memset(&out[n], 0, sizeof(out[n]));
            out[n].kind = BACKEND_EXITED;
            snprintf(out[n].id, sizeof(out[n].id), "%d", (int)a->pid);
            out[n].time = clock_wall_s();
            out[n].status = r < 0               ? -1
                            : WIFEXITED(status) ? WEXITSTATUS(status)
                                                : 128 + WTERMSIG(status);
            n++;
            *pp = a->next;
            free(a);
            continue;
        }
        pp = &a->next;
    }
    return n;
}

/* The base name of path. */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/*
 * 1 when process group pgid is still led by a ringrun, 2 by an mpirun, directly or through
 * the ringd-exec that isolates it (which stays, as the group's leader, until the job ends);
 * 0 otherwise: a recycled pid must not be killed.
 */
static int launcher_alive(pid_t pgid)
{
    char path[64], cmd[8192];
    const char *word, *end, *program;
    FILE *f;
    size_t n;
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pgid);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    n = fread(cmd, 1, sizeof(cmd) - 1, f);
    fclose(f);
    cmd[n] = '\0';
    end = cmd + n;
    program = cmd;
    if (strcmp(base_name(cmd), "ringd-exec") == 0) { /* its argv: options, "--", program */
        program = NULL;
        for (word = cmd; word < end; word += strlen(word) + 1) {
            if (strcmp(word, "--") == 0) {
                program = word + 3 < end ? word + 3 : NULL;
                break;
            }
        }
        if (program == NULL)
            return 0;
    }
    if (local_signal(pgid, 0) < 0)
        return 0;
    return strcmp(base_name(program), "ringrun") == 0  ? 1
           : strcmp(base_name(program), "mpirun") == 0 ? 2
                                                       : 0;
}

/*
 * A previous ringd's attempt: not our child, so it cannot be reaped or adopted; it is
 * stopped and its job resumes from the checkpoint. ringd-exec passed the stop on when the
 * previous ringd went away (its parent-death signal), so the attempt is checkpointing
 * already: a second SIGTERM would make ringrun kill its ranks. It gets the grace (at most
 * 5 s here, so that a restart is not held up for long) to end, then SIGKILL.
 */
static int local_recover(void *ctx, const char *id, const struct backend_start *s,
                         struct error *err)
{
    struct local *l = ctx;
    char *end;
    long pgid = strtol(id, &end, 10);
    int grace_ms = (l->cfg.kill_grace_s < 5 ? l->cfg.kill_grace_s : 5) * 1000, kind;

    if (*end != '\0' || pgid <= 0 || (kind = launcher_alive((pid_t)pgid)) == 0)
        return BACKEND_GONE;
    for (int waited = 0; waited < grace_ms && local_signal((pid_t)pgid, 0) == 0; waited += 50) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (kind == 2)
        kill_tree((pid_t)pgid, SIGKILL);
    local_signal((pid_t)pgid, SIGKILL);
    return BACKEND_STOPPED;
}

static double local_now(void *ctx)
{
    return clock_wall_s();
}

const struct backend_ops backend_local_ops = {
    .name = "local",
    .id_label = "process group",
    .summary = "ringrun in a process group of its own on this host",
    .settings = local_settings,
    .config = local_config,
    .init = local_init,
    .fini = local_fini,
    .describe = local_describe,
    .start = local_start,
    .signal = local_sig,
    .poll = local_poll,
    .recover = local_recover,
    .now = local_now,
};
