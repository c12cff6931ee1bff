/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_local.c - starts an attempt through ringd-exec with posix_spawn. Argument
 * vectors only, never a shell; nothing runs between fork and exec but what posix_spawn
 * itself does, so the multi-threaded daemon never calls a non-async-signal-safe function
 * (malloc, setenv, Jansson, strerror) in a forked child.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend_local.h"
#include "mpirun.h"

extern char **environ;

int local_identity_lookup(const char *user, struct local_identity *id, struct error *err)
{
    struct passwd pw, *res = NULL;
    char buf[16384];
    int ngroups = (int)(sizeof(id->groups) / sizeof(id->groups[0])), rc;
    uid_t self = geteuid();

    memset(id, 0, sizeof(*id));
    if (user == NULL)
        rc = getpwuid_r(self, &pw, buf, sizeof(buf), &res);
    else
        rc = getpwnam_r(user, &pw, buf, sizeof(buf), &res);
    if (rc != 0 || res == NULL) {
        if (user == NULL)
            return errno = ENOENT,
                   errprintf(err, "ringd's own uid %u has no entry in the user database",
                             (unsigned)self);
        return errno = ENOENT, errprintf(err, "there is no Unix user '%s' on this host", user);
    }
    if (self != 0 && pw.pw_uid != self)
        return errno = EPERM,
               errprintf(err,
                         "ringd runs as uid %u and cannot start jobs as '%s'; run ringd as "
                         "root to run each token's jobs as its own user",
                         (unsigned)self, user);
    id->switch_user = self == 0 && pw.pw_uid != 0;
    id->uid = pw.pw_uid;
    id->gid = pw.pw_gid;
    snprintf(id->name, sizeof(id->name), "%s", pw.pw_name);
    snprintf(id->home, sizeof(id->home), "%s", pw.pw_dir);
    snprintf(id->shell, sizeof(id->shell), "%s", pw.pw_shell);
    if (getgrouplist(pw.pw_name, pw.pw_gid, id->groups, &ngroups) < 0)
        return errno = E2BIG, errprintf(err, "user '%s' is in more than %zu groups", pw.pw_name,
                                        sizeof(id->groups) / sizeof(id->groups[0]));
    id->ngroups = ngroups;
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

static void env_free(struct env *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
}

/*
 * ringd's environment without its own settings (RINGD_*), the user's identity when the job
 * runs as someone else, the spec's env, then the worker contract, which nobody overrides.
 */
static int env_build(struct env *e, const struct local_launch *l, const struct local_identity *id)
{
    json_t *env = json_object_get(l->spec, "env"), *v;
    const char *key;
    char num[16];
    int rc = 0;

    for (char **p = environ; *p; p++) {
        const char *eq = strchr(*p, '=');
        char name[256];
        if (eq == NULL || strncmp(*p, "RINGD_", 6) == 0 || (size_t)(eq - *p) >= sizeof(name))
            continue;
        snprintf(name, sizeof(name), "%.*s", (int)(eq - *p), *p);
        rc |= env_set(e, name, eq + 1);
    }
    if (id->switch_user) {
        rc |= env_set(e, "HOME", id->home);
        rc |= env_set(e, "USER", id->name);
        rc |= env_set(e, "LOGNAME", id->name);
        rc |= env_set(e, "SHELL", id->shell);
    }
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

/* Gives directory path (created by ringd) to the job's user, private to them. */
static int give_dir(const char *path, const struct local_identity *id, struct error *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchown(fd, id->uid, id->gid) < 0 || fchmod(fd, 0700) < 0) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        return errprintf(err, "cannot give %s to user %s: %s", path, id->name, strerror(saved));
    }
    close(fd);
    return 0;
}

/* The argument vector: ringd-exec's options, "--", then ringrun's. */
static char **build_argv(const struct local_launch *l, const struct local_identity *id, char *np,
                         char *gpus_arg, char *uid, char *gid, char *groups, size_t groups_len,
                         char *hosts, char **storage)
{
    json_t *command = json_object_get(l->spec, "command");
    const char *wd = json_string_value(json_object_get(l->spec, "working_dir"));
    size_t nargs = json_array_size(command);
    /* mpirun with GPUs takes one app context (about 16 words and the command) per rank */
    size_t cap = nargs + 40 + (l->mpirun != NULL ? mpirun_argc(l->workers, nargs) : 0);
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
    if (id->switch_user) {
        size_t gl = 0;
        snprintf(uid, 16, "%u", (unsigned)id->uid);
        snprintf(gid, 16, "%u", (unsigned)id->gid);
        groups[0] = '\0';
        for (int i = 0; i < id->ngroups && gl + 12 < groups_len; i++)
            gl += (size_t)snprintf(groups + gl, groups_len - gl, "%s%u", i ? "," : "",
                                   (unsigned)id->groups[i]);
        argv[a++] = "--uid";
        argv[a++] = uid;
        argv[a++] = "--gid";
        argv[a++] = gid;
        if (groups[0]) {
            argv[a++] = "--groups";
            argv[a++] = groups;
        }
    }
    if (!l->checkpoint_in_data_dir) {
        argv[a++] = "--mkdir";
        argv[a++] = (char *)l->checkpoint_dir;
    }
    argv[a++] = "--chdir";
    argv[a++] = (char *)(wd ? wd : l->run_dir);
    argv[a++] = "--";
    snprintf(np, 16, "%d", l->workers);
    snprintf(gpus_arg, 16, "%d", l->gpus_per_worker);
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
        snprintf(hosts, 64, "localhost:%d", l->workers);
        n = mpirun_args(argv, a, l->mpirun, l->workers, hosts, l->gpus, l->gpus_per_worker, cmd,
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
    argv[a++] = np;
    argv[a++] = "--output-dir";
    argv[a++] = (char *)l->run_dir;
    if (l->gpus[0] != '\0') {
        argv[a++] = "--gpus";
        argv[a++] = (char *)l->gpus;
        argv[a++] = "--gpus-per-rank";
        argv[a++] = gpus_arg;
    }
    for (size_t i = 0; i < nargs; i++)
        argv[a++] = (char *)json_string_value(json_array_get(command, i));
    argv[a] = NULL;
    return argv;
}

pid_t local_launch(const struct local_launch *l, struct error *err)
{
    struct local_identity id;
    struct env env = {0};
    char np[16], gpus_arg[16], uid[16], gid[16], groups[4096], log[4200], hosts[64];
    char *storage = NULL;
    char *empty_env[] = {NULL};
    char **argv = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    int logfd = -1, envfd = -1, rc;
    pid_t pid = -1;

    if (local_identity_lookup(l->user, &id, err) < 0)
        return -1;
    if (id.switch_user &&
        (give_dir(l->run_dir, &id, err) < 0 ||
         (l->checkpoint_in_data_dir && give_dir(l->checkpoint_dir, &id, err) < 0)))
        return -1;
    snprintf(log, sizeof(log), "%s/ringrun.log", l->run_dir);
    logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (logfd < 0)
        return errprintf(err, "cannot write %s: %s", log, strerror(errno)), -1;
    if (id.switch_user && fchown(logfd, id.uid, id.gid) < 0) {
        errprintf(err, "cannot give %s to user %s: %s", log, id.name, strerror(errno));
        goto out;
    }
    if (env_build(&env, l, &id) < 0) {
        errprintf(err, "out of memory building the job's environment");
        goto out;
    }
    if ((envfd = env_memfd(&env, err)) < 0)
        goto out;
    argv = build_argv(l, &id, np, gpus_arg, uid, gid, groups, sizeof(groups), hosts, &storage);
    if (argv == NULL) {
        errprintf(err, "out of memory");
        goto out;
    }

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, logfd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, logfd, STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&fa, envfd, 3);
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
