/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ringd-exec - the step between ringd and a job's ringrun, as slurmstepd is for Slurm.
 *
 * ringd is multi-threaded and holds secrets (the database, the admin token); a job is a
 * user's program. ringd starts this small single-threaded program with posix_spawn, with an
 * empty environment (a job's LD_PRELOAD must never reach a process that still has ringd's
 * privileges), and it turns itself into the job's launcher in a few plain steps:
 *
 *   1. read the job's environment from fd 3 (NUL-separated NAME=VALUE strings), then close
 *      every descriptor above 2: ringd opens its own with O_CLOEXEC, but nothing of ringd's
 *      may reach a job, whatever a library forgot;
 *   2. with --hide DIR: enter private mount and PID namespaces (inside a user namespace when
 *      not root) in which DIR is an empty read-only tmpfs, except for each --expose PATH,
 *      which is bind-mounted back at its own path. The job sees its run and checkpoint
 *      directories where ringd said they are, and nothing else of ringd's data. Then it
 *      forks (see supervise()): the child is the PID namespace's init, which mounts a /proc
 *      of the namespace's own and starts the program. A job so sees no process but its own:
 *      not ringd, not another job (whose command line /proc shows everyone), and not the
 *      ringd-exec of a job being started, which, without root, runs as the jobs' user in
 *      ringd's mount namespace until it has made its own, and would show ringd's data
 *      through /proc/<pid>/root meanwhile (execve makes it dumpable, before main() runs);
 *   3. set the job's resource limits (--rlimit), then as root with --uid: setgroups,
 *      setgid, then setuid (and check that root cannot be regained);
 *   4. --mkdir PATH as the job's user (a checkpoint directory the user named), then chdir;
 *   5. execve the program with the job's environment, umask 022.
 *
 * If ringd goes away, the job is asked to stop (--stop-signal, what its launcher passes on
 * to the ranks: they checkpoint and exit 75), as a restarted ringd would do anyway: nothing
 * runs that no ringd knows of.
 *
 * Any failure prints "ringd-exec: <what>" to stderr (the attempt's ringrun.log) and exits
 * 126, as a shell does for a command it cannot run; a program that cannot be executed
 * exits 127. With --check, step 2 runs (and 3 without a program) and the program exits 0
 * when DIR's contents are hidden and /proc is the namespace's own; ringd uses it to learn at
 * start whether this kernel allows isolation.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_SETUP  126
#define EXIT_NOEXEC 127
#define MAX_EXPOSE  8
#define MAX_MKDIR   4
#define MAX_GROUPS  256
#define MAX_RLIMITS 16
/* The job's environment: a JobSpec body is at most 1 MiB, so this bounds it with room for
 * what ringd adds (the worker contract, the user's identity). */
#define ENV_MAX (2u << 20)

struct opts {
    const char *hide;
    const char *expose[MAX_EXPOSE];
    int nexpose;
    const char *mkdir[MAX_MKDIR];
    int nmkdir;
    const char *chdir;
    long uid, gid; /* -1: keep */
    gid_t groups[MAX_GROUPS];
    int ngroups;
    struct {
        int resource;
        struct rlimit value;
    } rlimit[MAX_RLIMITS];
    int nrlimits;
    int stop_signal; /* to the job's process group when ringd goes away */
    int check;
    char **argv; /* the program and its arguments */
};

/*
 * Every exit is _exit: stderr is unbuffered, so nothing is lost, and no exit handler runs in
 * a process that may have dropped its privileges (a sanitizer's leak check at exit cannot
 * inspect a process that is no longer dumpable, and fails).
 */
static void die(const char *what, const char *arg, int e)
{
    fprintf(stderr, "ringd-exec: %s%s%s%s%s\n", what, arg ? " " : "", arg ? arg : "", e ? ": " : "",
            e ? strerror(e) : "");
    _exit(EXIT_SETUP);
}

static long number(const char *s, const char *flag)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *s == '\0' || *end != '\0' || v < 0 || v > INT_MAX)
        die("bad number for", flag, 0);
    return v;
}

static void parse_groups(struct opts *o, const char *s)
{
    char *copy = strdup(s), *save = NULL;
    if (copy == NULL)
        die("out of memory", NULL, ENOMEM);
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->ngroups == MAX_GROUPS)
            die("too many groups in", "--groups", 0);
        o->groups[o->ngroups++] = (gid_t)number(t, "--groups");
    }
    free(copy);
}

/* --rlimit RESOURCE:SOFT:HARD, numbers as ringd writes them (RLIM_INFINITY in full). */
static void parse_rlimit(struct opts *o, const char *s)
{
    unsigned long long soft, hard;
    int resource, end = 0;
    if (o->nrlimits == MAX_RLIMITS)
        die("too many", "--rlimit", 0);
    if (sscanf(s, "%d:%llu:%llu%n", &resource, &soft, &hard, &end) != 3 || s[end] != '\0' ||
        resource < 0 || resource >= RLIM_NLIMITS || soft > hard)
        die("bad value for --rlimit (RESOURCE:SOFT:HARD):", s, 0);
    o->rlimit[o->nrlimits].resource = resource;
    o->rlimit[o->nrlimits].value = (struct rlimit){(rlim_t)soft, (rlim_t)hard};
    o->nrlimits++;
}

static void parse(struct opts *o, int argc, char **argv)
{
    int i;
    o->uid = o->gid = -1;
    o->stop_signal = SIGTERM;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "--check")) {
            o->check = 1;
            continue;
        }
        if (v == NULL)
            die("missing value after", a, 0);
        i++;
        if (!strcmp(a, "--hide"))
            o->hide = v;
        else if (!strcmp(a, "--expose") && o->nexpose < MAX_EXPOSE)
            o->expose[o->nexpose++] = v;
        else if (!strcmp(a, "--mkdir") && o->nmkdir < MAX_MKDIR)
            o->mkdir[o->nmkdir++] = v;
        else if (!strcmp(a, "--chdir"))
            o->chdir = v;
        else if (!strcmp(a, "--uid"))
            o->uid = number(v, a);
        else if (!strcmp(a, "--gid"))
            o->gid = number(v, a);
        else if (!strcmp(a, "--groups"))
            parse_groups(o, v);
        else if (!strcmp(a, "--rlimit"))
            parse_rlimit(o, v);
        else if (!strcmp(a, "--stop-signal") && (o->stop_signal = (int)number(v, a)) < NSIG)
            continue;
        else
            die("unknown, repeated or bad option", a, 0);
    }
    o->argv = argv + i;
    if (!o->check && o->argv[0] == NULL)
        die("no program to run (usage: ringd-exec [options] -- PROGRAM ARGS...)", NULL, 0);
    if ((o->uid < 0) != (o->gid < 0))
        die("--uid and --gid go together", NULL, 0);
}

/* The job's environment from fd 3, as a NULL-terminated vector into one buffer. */
static char **read_env(void)
{
    char *buf = malloc(ENV_MAX + 1), **envp;
    size_t len = 0, n = 0, k = 0;
    ssize_t got;

    if (buf == NULL)
        die("out of memory", NULL, ENOMEM);
    while ((got = read(3, buf + len, ENV_MAX - len)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            die("cannot read the job's environment", NULL, errno);
        len += (size_t)got;
        if (len == ENV_MAX)
            die("the job's environment is too large", NULL, 0);
    }
    close(3);
    buf[len] = '\0';
    for (size_t i = 0; i < len; i++)
        n += buf[i] == '\0';
    if ((envp = calloc(n + 2, sizeof(char *))) == NULL)
        die("out of memory", NULL, ENOMEM);
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        if (buf[i] != '\0')
            envp[k++] = buf + i;
    envp[k] = NULL;
    return envp;
}

/* Step 1: nothing but stdin, stdout and stderr stays open. */
static void close_fds(void)
{
    if (close_range(3, ~0U, 0) == 0)
        return;
    /* Before Linux 5.9: one by one, up to the highest descriptor this process may have. */
    for (long fd = 3, max = sysconf(_SC_OPEN_MAX); fd < (max > 0 ? max : 65536); fd++)
        close((int)fd);
}

static void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    size_t len = strlen(text);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len)
        die("cannot write", path, errno);
    close(fd);
}

/* Creates every missing directory of path (mode); a path that exists is fine. */
static int mkdirs(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return errno = ENAMETOOLONG, -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, mode) < 0 && errno != EEXIST ? -1 : 0;
}

/*
 * Step 2. Mounts made in a new mount namespace stay there (/ is made private first, so
 * nothing propagates back to the host). Without root the namespaces are owned by a new user
 * namespace in which only our own uid and gid are mapped; the program exec'd later runs as
 * that same non-zero uid, so the kernel gives it no capabilities there, and the tmpfs over
 * DIR cannot be unmounted by the job to look underneath. The PID namespace takes effect for
 * the children made after this (supervise()).
 */
static void isolate(const struct opts *o)
{
    int fds[MAX_EXPOSE];
    size_t hl = strlen(o->hide);
    uid_t uid = geteuid();
    gid_t gid = getegid();

    for (int i = 0; i < o->nexpose; i++)
        if (strncmp(o->expose[i], o->hide, hl) != 0 || o->expose[i][hl] != '/')
            die("--expose must be inside --hide:", o->expose[i], 0);
    if (uid != 0) {
        char map[64];
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) < 0)
            die("cannot create user, mount and PID namespaces (isolation needs unprivileged "
                "user namespaces, or ringd as root)",
                NULL, errno);
        write_file("/proc/self/setgroups", "deny");
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
        write_file("/proc/self/uid_map", map);
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
        write_file("/proc/self/gid_map", map);
    } else if (unshare(CLONE_NEWNS | CLONE_NEWPID) < 0) {
        die("cannot create mount and PID namespaces", NULL, errno);
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        die("cannot make the mounts private", NULL, errno);
    /* Held open across the tmpfs mount that covers them, and bound back from these. Opened
     * here, in the new namespace: a bind mount's source must be one of its own mounts. */
    for (int i = 0; i < o->nexpose; i++)
        if ((fds[i] = open(o->expose[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
            die("cannot open", o->expose[i], errno);
    if (mount("ringd-hidden", o->hide, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0755,size=64k") < 0)
        die("cannot hide", o->hide, errno);
    for (int i = 0; i < o->nexpose; i++) {
        char src[64];
        if (mkdirs(o->expose[i], 0755) < 0)
            die("cannot recreate", o->expose[i], errno);
        snprintf(src, sizeof(src), "/proc/self/fd/%d", fds[i]);
        if (mount(src, o->expose[i], NULL, MS_BIND | MS_REC, NULL) < 0)
            die("cannot expose", o->expose[i], errno);
        close(fds[i]);
    }
    if (mount(NULL, o->hide, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              NULL) < 0)
        die("cannot make the hidden directory read-only", o->hide, errno);
}

/* Step 3, first half: as root, a limit may be raised above ringd's own. */
static void set_limits(const struct opts *o)
{
    static const char *const names[RLIM_NLIMITS] = {
        [RLIMIT_AS] = "as",         [RLIMIT_CORE] = "core",   [RLIMIT_CPU] = "cpu",
        [RLIMIT_DATA] = "data",     [RLIMIT_FSIZE] = "fsize", [RLIMIT_MEMLOCK] = "memlock",
        [RLIMIT_NOFILE] = "nofile", [RLIMIT_NPROC] = "nproc", [RLIMIT_STACK] = "stack",
    };
    for (int i = 0; i < o->nrlimits; i++) {
        int r = o->rlimit[i].resource;
        if (setrlimit(r, &o->rlimit[i].value) < 0)
            die("cannot set the job's limit", names[r] ? names[r] : "?", errno);
    }
}

/* Step 3: the order is slurmstepd's; groups and gid need root, so uid goes last. */
static void drop_privileges(const struct opts *o)
{
    if (o->uid < 0)
        return;
    if (setgroups((size_t)o->ngroups, o->groups) < 0)
        die("cannot set the job's groups", NULL, errno);
    if (setgid((gid_t)o->gid) < 0)
        die("cannot set the job's group id", NULL, errno);
    if (setuid((uid_t)o->uid) < 0)
        die("cannot set the job's user id", NULL, errno);
    if (o->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0))
        die("root could be regained after setuid; refusing to run the job", NULL, 0);
}

/* --check: is the hidden directory really empty now? ringd holds its lock file there. */
static int hidden(const char *dir)
{
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/ringd.lock", dir);
    return stat(path, &sb) < 0 && errno == ENOENT;
}

/* Steps 4-5, in the process that becomes the program (as the job's user). Never returns. */
static void run_program(const struct opts *o, char **envp)
{
    sigset_t none;
    for (int i = 0; i < o->nmkdir; i++)
        if (mkdirs(o->mkdir[i], 0700) < 0)
            die("cannot create", o->mkdir[i], errno);
    if (o->chdir != NULL && chdir(o->chdir) < 0)
        die("cannot enter", o->chdir, errno);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(o->argv[0], o->argv, envp);
    fprintf(stderr, "ringd-exec: cannot execute %s: %s\n", o->argv[0], strerror(errno));
    _exit(EXIT_NOEXEC);
}

/* A wait status as a shell reports it: the exit code, or 128 + the signal. */
static int status_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * A child whose pid in the new PID namespace is pid, when this process may choose it (it
 * has the namespace's capabilities until it drops them), else the next free one. The
 * program gets the host pid of the ringd-exec above it, unique on this host while the job
 * lives: Open MPI names its session directory and its shared memory after mpirun's pid, and
 * every job's mpirun would otherwise be pid 2, colliding with another job of the same user.
 */
static int next_pid_is(pid_t pid)
{
    char last[24];
    int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC), len, ok;
    if (fd < 0)
        return 0;
    len = snprintf(last, sizeof(last), "%d", (int)pid - 1);
    ok = write(fd, last, (size_t)len) == len;
    close(fd);
    return ok;
}

static pid_t fork_as(pid_t pid)
{
    next_pid_is(pid); /* else the next free pid: the program still runs */
    return fork();
}

/*
 * The PID namespace's init (pid 1): its own /proc, then the program, then it reaps whatever
 * is orphaned in the namespace until the program ends, and exits with its status (which
 * ends everything left in the namespace). It runs as the job's user, with every signal
 * blocked: the stop and kill signals ringd sends to the attempt's process group reach the
 * program directly (SIGKILL reaches init too, and so ends the namespace).
 */
static void ns_init(const struct opts *o, char **envp, pid_t host_pid)
{
    sigset_t all;
    pid_t program;

    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        die("cannot mount a /proc of the job's own", NULL, errno);
    if (o->check) {
        char self[16] = "";
        drop_privileges(o);
        if (readlink("/proc/self", self, sizeof(self) - 1) < 0 || strcmp(self, "1") != 0)
            die("the new /proc does not show the job's own PID namespace", NULL, 0);
        _exit(hidden(o->hide) ? 0 : EXIT_SETUP);
    }
    if ((program = fork_as(host_pid)) < 0)
        die("cannot fork", NULL, errno);
    if (program == 0) {
        set_limits(o);
        drop_privileges(o);
        run_program(o, envp);
    }
    drop_privileges(o);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the ringd-exec above gone: so is the job */
    sigfillset(&all);
    for (;;) {
        int status, sig = sigwaitinfo(&all, NULL);
        pid_t pid;
        if (sig != SIGCHLD)
            continue;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
            if (pid == program)
                _exit(status_code(status));
    }
}

/*
 * With --hide: forks the namespace's init and stays above it, in ringd's PID namespace, as
 * the leader of the attempt's process group, which is ringd's id for the attempt. Exits with
 * the program's status. When ringd goes away (the parent-death signal, SIGHUP here), the
 * job's process group gets o->stop_signal, once.
 */
static void supervise(const struct opts *o, char **envp, pid_t ringd)
{
    sigset_t all;
    pid_t init, self = getpid();
    int stopped = 0;

    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    if ((init = fork()) < 0)
        die("cannot fork", NULL, errno);
    if (init == 0)
        ns_init(o, envp, self);
    drop_privileges(o);
    /* After setuid, which clears it; a parent gone before this shows in getppid(). */
    prctl(PR_SET_PDEATHSIG, SIGHUP);
    if (getppid() != ringd)
        kill(self, SIGHUP);
    for (;;) {
        int status, sig = sigwaitinfo(&all, NULL);
        if (sig == SIGHUP && !stopped && !o->check) {
            stopped = 1;
            kill(-getpgrp(), o->stop_signal);
        } else if (sig == SIGCHLD && waitpid(init, &status, WNOHANG) == init) {
            _exit(status_code(status));
        }
    }
}

int main(int argc, char **argv)
{
    struct opts o = {0};
    pid_t ringd = getppid();
    char **envp;

    parse(&o, argc, argv);
    umask(022); /* the job's; ringd's own is 077 */
    envp = o.check ? NULL : read_env();
    close_fds();
    if (o.hide != NULL) {
        isolate(&o);
        supervise(&o, envp, ringd);
    }
    if (o.check)
        die("--check needs --hide", NULL, 0);
    /* Without isolation, this process becomes the program: it takes the stop itself. */
    set_limits(&o);
    drop_privileges(&o);
    prctl(PR_SET_PDEATHSIG, o.stop_signal);
    if (getppid() != ringd)
        die("ringd went away before the job started", NULL, 0);
    run_program(&o, envp);
    return EXIT_NOEXEC;
}
