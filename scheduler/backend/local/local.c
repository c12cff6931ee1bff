/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_local.c - starts an attempt through ringd-exec with posix_spawn. Argument
 * vectors only, never a shell; nothing runs between fork and exec but what posix_spawn
 * itself does, so the multi-threaded daemon never calls a non-async-signal-safe function
 * (malloc, setenv, Jansson, strerror) in a forked child.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local.h"
#include "scheduler/backend/identity.h"
#include "scheduler/backend/jobfs.h"
#include "scheduler/backend/mpirun.h"

/* ---- resource limits (the job_limits setting) ---- */

/* The resources job_limits may name, as ulimit(1) and Slurm's PropagateResourceLimits do. */
static const struct {
    const char *name;
    int resource;
} LIMIT_NAMES[LOCAL_LIMITS_MAX] = {
    {"as", RLIMIT_AS},         {"core", RLIMIT_CORE},   {"cpu", RLIMIT_CPU},
    {"data", RLIMIT_DATA},     {"fsize", RLIMIT_FSIZE}, {"memlock", RLIMIT_MEMLOCK},
    {"nofile", RLIMIT_NOFILE}, {"nproc", RLIMIT_NPROC}, {"stack", RLIMIT_STACK},
};

/* "unlimited" or a decimal number (the resource's unit: bytes, seconds, a count). */
static int limit_value(const char *s, rlim_t *out)
{
    char *end;
    unsigned long long v;
    if (strcmp(s, "unlimited") == 0)
        return *out = RLIM_INFINITY, 0;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || (rlim_t)v == RLIM_INFINITY)
        return -1;
    *out = (rlim_t)v;
    return 0;
}

/* One "name=soft[:hard]" of job_limits into out. */
static int limit_parse(char *item, struct local_limits *out, struct error *err)
{
    char *value = strchr(item, '='), *colon;
    struct local_limit *lim = &out->v[out->n];
    int k;

    if (value == NULL)
        return errprintf(err, "job_limits: '%s' is not name=value", item);
    *value++ = '\0';
    for (k = 0; k < LOCAL_LIMITS_MAX && strcmp(LIMIT_NAMES[k].name, item) != 0; k++)
        ;
    if (k == LOCAL_LIMITS_MAX)
        return errprintf(err,
                         "job_limits: unknown limit '%s' (as, core, cpu, data, fsize, "
                         "memlock, nofile, nproc, stack)",
                         item);
    for (int i = 0; i < out->n; i++)
        if (out->v[i].resource == LIMIT_NAMES[k].resource)
            return errprintf(err, "job_limits: %s is given twice", item);
    if ((colon = strchr(value, ':')) != NULL)
        *colon++ = '\0';
    if (limit_value(value, &lim->soft) < 0 || limit_value(colon ? colon : value, &lim->hard) < 0 ||
        lim->soft > lim->hard)
        return errprintf(err,
                         "job_limits: bad value for %s (a number or 'unlimited', or "
                         "SOFT:HARD with SOFT <= HARD)",
                         item);
    lim->resource = LIMIT_NAMES[k].resource;
    snprintf(lim->name, sizeof(lim->name), "%s", item);
    out->n++;
    return 0;
}

int local_limits_parse(const char *text, struct local_limits *out, struct error *err)
{
    char buf[512], *save = NULL;

    memset(out, 0, sizeof(*out));
    if (text == NULL || *text == '\0')
        return 0;
    if (snprintf(buf, sizeof(buf), "%s", text) >= (int)sizeof(buf))
        return errno = EINVAL, errprintf(err, "job_limits is too long");
    for (char *item = strtok_r(buf, ", ", &save); item; item = strtok_r(NULL, ", ", &save))
        if (limit_parse(item, out, err) < 0)
            return errno = EINVAL, -1;
    return 0;
}

int local_limits_allowed(const struct local_limits *limits, struct error *err)
{
    for (int i = 0; geteuid() != 0 && i < limits->n; i++) {
        struct rlimit own;
        if (getrlimit(limits->v[i].resource, &own) == 0 && limits->v[i].hard > own.rlim_max)
            return errno = EPERM,
                   errprintf(err,
                             "job_limits: %s above ringd's own hard limit (%llu); only a ringd "
                             "running as root can raise it",
                             limits->v[i].name, (unsigned long long)own.rlim_max);
    }
    return 0;
}

/* ---- the job's environment: NAME=VALUE strings, a later NAME replacing an earlier ---- */

struct env {
    char **v;
    size_t n, cap;
};

static int env_set(struct env *e, const char *name, const char *value)
{
    size_t nl = strlen(name);
    char *s = malloc(nl + strlen(value) + 2);
    if (s == NULL)
        return -1;
    sprintf(s, "%s=%s", name, value);
    for (size_t i = 0; i < e->n; i++) {
        if (strncmp(e->v[i], name, nl) == 0 && e->v[i][nl] == '=') {
            free(e->v[i]);
            e->v[i] = s;
            return 0;
        }
    }
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        char **grown = realloc(e->v, cap * sizeof(char *));
        if (grown == NULL) {
            free(s);
            return -1;
        }
        e->v = grown;
        e->cap = cap;
    }
    e->v[e->n++] = s;
    return 0;
}

/* env_set for identity_env_inherit. */
static int env_add(void *e, const char *name, const char *value)
{
    return env_set(e, name, value);
}

static void env_free(struct env *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
}

/*
 * The allowed part of ringd's environment (identity_env_inherit), the user's identity as a login
 * gives it, the spec's env, then the worker contract, which nobody overrides.
 */
static int env_build(struct env *e, const struct local_launch *l, const struct identity *id)
{
    json_t *env = json_object_get(l->spec, "env"), *v;
    const char *key;
    char num[16];
    int rc = 0;

    rc |= env_set(e, "PATH", "/usr/local/bin:/usr/bin:/bin"); /* replaced by ringd's own */
    rc |= identity_env_inherit(env_add, e);
    rc |= env_set(e, "HOME", id->home);
    rc |= env_set(e, "USER", id->name);
    rc |= env_set(e, "LOGNAME", id->name);
    rc |= env_set(e, "SHELL", id->shell);
    json_object_foreach(env, key, v) rc |= env_set(e, key, json_string_value(v));
    /* Open MPI refuses to run as root without both; a root job is root's own choice. */
    if (l->mpirun != NULL && id->uid == 0) {
        rc |= env_set(e, "OMPI_ALLOW_RUN_AS_ROOT", "1");
        rc |= env_set(e, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    snprintf(num, sizeof(num), "%d", l->attempt);
    rc |= env_set(e, "RING_JOB_ID", l->job_id);
    rc |= env_set(e, "RING_ATTEMPT", num);
    rc |= env_set(e, "RING_RUN_DIR", l->run_dir);
    rc |= env_set(e, "RING_CHECKPOINT_DIR", l->checkpoint_dir);
    return rc ? -1 : 0;
}

/* The environment in a sealed memory file, for ringd-exec to read from its fd 3. */
static int env_memfd(const struct env *e, struct error *err)
{
    int fd = memfd_create("ringd-job-env", MFD_CLOEXEC);
    if (fd < 0)
        return errprintf(err, "memfd_create: %s", strerror(errno));
    for (size_t i = 0; i < e->n; i++) {
        const char *s = e->v[i];
        size_t len = strlen(s) + 1, off = 0;
        while (off < len) {
            ssize_t w = write(fd, s + off, len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                int saved = errno;
                close(fd);
                return errprintf(err, "cannot write the job's environment: %s", strerror(saved));
            }
            off += (size_t)w;
        }
    }
    if (lseek(fd, 0, SEEK_SET) < 0) {
        int saved = errno;
        close(fd);
        return errprintf(err, "lseek: %s", strerror(saved));
    }
    return fd;
}

/*
 * The attempt's run directory with its ringrun.log, and ringd's default checkpoint
 * directory, for the job's user (jobfs.h): made while they are ringd's, the log created
 * with O_EXCL (a FIFO planted there would hang the scheduler's thread), each given to the
 * user last. Returns the log's descriptor, or -1 with err.
 */
static int prepare_dirs(const struct local_launch *l, const struct identity *id, struct error *err)
{
    int run = jobfs_mkdirs(l->run_dir), log = -1, ckpt = -1;
    const char *what = l->run_dir;

    if (run < 0)
        goto error;
    what = "ringrun.log";
    if ((log = jobfs_create(run, "ringrun.log", 0600)) < 0 ||
        jobfs_give(log, id->uid, id->gid, 0600) < 0)
        goto error;
    what = l->run_dir;
    if (jobfs_give(run, id->uid, id->gid, 0700) < 0)
        goto error;
    if (l->checkpoint_in_data_dir) {
        what = l->checkpoint_dir;
        if ((ckpt = jobfs_mkdirs(l->checkpoint_dir)) < 0 ||
            jobfs_give(ckpt, id->uid, id->gid, 0700) < 0)
            goto error;
        close(ckpt);
    }
    close(run);
    return log;
error : {
    int saved = errno;
    errprintf(err, "cannot make %s%s for user %s: %s", what,
              strcmp(what, "ringrun.log") == 0 ? " in the run directory" : "", id->name,
              strerror(saved));
    if (ckpt >= 0)
        close(ckpt);
    if (log >= 0)
        close(log);
    if (run >= 0)
        close(run);
    errno = saved;
    return -1;
}
}

/* The numbers and lists ringd-exec's argument vector points into. */
struct argv_text {
    char np[16], gpus_per_rank[16], uid[16], gid[16], stop[16], hosts[64];
    char groups[4096];
    char limits[LOCAL_LIMITS_MAX][72];
};

/* ringd-exec's options about the user and the limits, from index a; returns the new a. */
static int exec_options(char **argv, int a, const struct local_launch *l, const struct identity *id,
                        struct argv_text *t)
{
    if (id->switch_user) {
        size_t gl = 0;
        snprintf(t->uid, sizeof(t->uid), "%u", (unsigned)id->uid);
        snprintf(t->gid, sizeof(t->gid), "%u", (unsigned)id->gid);
        t->groups[0] = '\0';
        for (int i = 0; i < id->ngroups && gl + 12 < sizeof(t->groups); i++)
            gl += (size_t)snprintf(t->groups + gl, sizeof(t->groups) - gl, "%s%u", i ? "," : "",
                                   (unsigned)id->groups[i]);
        argv[a++] = "--uid";
        argv[a++] = t->uid;
        argv[a++] = "--gid";
        argv[a++] = t->gid;
        if (t->groups[0]) {
            argv[a++] = "--groups";
            argv[a++] = t->groups;
        }
    }
    for (int i = 0; l->limits != NULL && i < l->limits->n; i++) {
        const struct local_limit *lim = &l->limits->v[i];
        snprintf(t->limits[i], sizeof(t->limits[i]), "%d:%llu:%llu", lim->resource,
                 (unsigned long long)lim->soft, (unsigned long long)lim->hard);
        argv[a++] = "--rlimit";
        argv[a++] = t->limits[i];
    }
    /* What the job gets if ringd goes away: the stop its launcher passes on to the ranks. */
    snprintf(t->stop, sizeof(t->stop), "%d", l->mpirun != NULL ? MPIRUN_STOP_SIGNAL : SIGTERM);
    argv[a++] = "--stop-signal";
    argv[a++] = t->stop;
    return a;
}

/* The argument vector: ringd-exec's options, "--", then ringrun's (or mpirun's). */
static char **build_argv(const struct local_launch *l, const struct identity *id,
                         struct argv_text *t, char **storage)
{
    json_t *command = json_object_get(l->spec, "command");
    const char *wd = json_string_value(json_object_get(l->spec, "working_dir"));
    size_t nargs = json_array_size(command);
    /* mpirun with GPUs takes one app context (about 16 words and the command) per rank */
    size_t cap = nargs + 40 + 2 * LOCAL_LIMITS_MAX +
                 (l->mpirun != NULL ? mpirun_argc(l->workers, nargs) : 0);
    char **argv = calloc(cap, sizeof(char *));
    int a = 0;

    if (argv == NULL)
        return NULL;
    argv[a++] = (char *)l->exec_helper;
    if (l->hide_dir != NULL) {
        argv[a++] = "--hide";
        argv[a++] = (char *)l->hide_dir;
        argv[a++] = "--expose";
        argv[a++] = (char *)l->run_dir;
        if (l->checkpoint_in_data_dir) {
            argv[a++] = "--expose";
            argv[a++] = (char *)l->checkpoint_dir;
        }
    }
    a = exec_options(argv, a, l, id, t);
    if (!l->checkpoint_in_data_dir) {
        argv[a++] = "--mkdir";
        argv[a++] = (char *)l->checkpoint_dir;
    }
    argv[a++] = "--chdir";
    argv[a++] = (char *)(wd ? wd : l->run_dir);
    argv[a++] = "--";
    snprintf(t->np, sizeof(t->np), "%d", l->workers);
    snprintf(t->gpus_per_rank, sizeof(t->gpus_per_rank), "%d", l->gpus_per_worker);
    if (l->mpirun != NULL) {
        /* mpirun with this host's slots; the command's words stay in the spec */
        char **cmd = calloc(nargs + 1, sizeof(char *));
        int n;
        if (cmd == NULL) {
            free(argv);
            return NULL;
        }
        for (size_t i = 0; i < nargs; i++)
            cmd[i] = (char *)json_string_value(json_array_get(command, i));
        snprintf(t->hosts, sizeof(t->hosts), "localhost:%d", l->workers);
        n = mpirun_args(argv, a, l->mpirun, l->workers, t->hosts, l->gpus, l->gpus_per_worker, cmd,
                        nargs, storage);
        free(cmd);
        if (n < 0) {
            free(argv);
            return NULL;
        }
        return argv;
    }
    argv[a++] = (char *)l->ringrun;
    argv[a++] = "-np";
    argv[a++] = t->np;
    argv[a++] = "--output-dir";
    argv[a++] = (char *)l->run_dir;
    if (l->gpus[0] != '\0') {
        argv[a++] = "--gpus";
        argv[a++] = (char *)l->gpus;
        argv[a++] = "--gpus-per-rank";
        argv[a++] = t->gpus_per_rank;
    }
    for (size_t i = 0; i < nargs; i++)
        argv[a++] = (char *)json_string_value(json_array_get(command, i));
    argv[a] = NULL;
    return argv;
}

pid_t local_launch(const struct local_launch *l, struct error *err)
{
    struct identity id;
    struct env env = {0};
    struct argv_text *text = NULL;
    char *storage = NULL;
    char *empty_env[] = {NULL};
    char **argv = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    int logfd = -1, envfd = -1, rc;
    pid_t pid = -1;

    if (identity_lookup(l->user, &id, err) < 0)
        return -1;
    if ((logfd = prepare_dirs(l, &id, err)) < 0)
        return -1;
    if (env_build(&env, l, &id) < 0) {
        errprintf(err, "out of memory building the job's environment");
        goto out;
    }
    if ((envfd = env_memfd(&env, err)) < 0)
        goto out;
    if ((text = calloc(1, sizeof(*text))) == NULL ||
        (argv = build_argv(l, &id, text, &storage)) == NULL) {
        errprintf(err, "out of memory");
        goto out;
    }

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, logfd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, logfd, STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&fa, envfd, 3);
    /* Not ringd's working directory (which may be its data directory) while ringd-exec
     * starts up; it enters the job's own. */
    posix_spawn_file_actions_addchdir_np(&fa, "/");
    posix_spawnattr_init(&attr);
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all); /* ringd ignores SIGPIPE; the job must not */
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    rc = posix_spawn(&pid, l->exec_helper, &fa, &attr, argv, empty_env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        pid = -1;
        errprintf(err, "cannot start %s: %s", l->exec_helper, strerror(rc));
    }
out:
    if (logfd >= 0)
        close(logfd);
    if (envfd >= 0)
        close(envfd);
    env_free(&env);
    free(argv);
    free(text);
    free(storage);
    return pid;
}

int local_signal(pid_t pgid, int sig)
{
    return kill(-pgid, sig);
}

int local_isolation_works(const char *exec_helper, const char *dir, struct error *err)
{
    char *argv[] = {(char *)exec_helper, "--check", "--hide", (char *)dir, NULL};
    char *empty_env[] = {NULL};
    posix_spawn_file_actions_t fa;
    int rc, status;
    pid_t pid;

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    rc = posix_spawn(&pid, exec_helper, &fa, NULL, argv, empty_env);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return errprintf(err, "cannot start %s: %s", exec_helper, strerror(rc)), 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return errprintf(err, "waitpid: %s", strerror(errno)), 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return errprintf(err, "a private mount namespace cannot be made here (see the "
                              "ringd-exec line above)"),
               0;
    return 1;
}
