/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ringd-exec - the step between ringd and a job's ringrun, as slurmstepd is for Slurm.
 *
 * ringd is multi-threaded and holds secrets (the database, the admin token); a job is a
 * user's program. ringd starts this small single-threaded program with posix_spawn, with an
 * empty environment (a job's LD_PRELOAD must never reach a process that still has ringd's
 * privileges), and it turns itself into the job's launcher in a few plain steps:
 *
 *   1. read the job's environment from fd 3 (NUL-separated NAME=VALUE strings);
 *   2. with --hide DIR: enter a private mount namespace (inside a user namespace when not
 *      root) in which DIR is an empty read-only tmpfs, except for each --expose PATH, which
 *      is bind-mounted back at its own path. The job sees its run and checkpoint
 *      directories where ringd said they are, and nothing else of ringd's data;
 *   3. as root with --uid: setgroups, setgid, then setuid (and check that root cannot be
 *      regained);
 *   4. --mkdir PATH as the job's user (a checkpoint directory the user named), then chdir;
 *   5. execve the program with the job's environment.
 *
 * Any failure prints "ringd-exec: <what>" to stderr (the attempt's ringrun.log) and exits
 * 126, as a shell does for a command it cannot run; a program that cannot be executed
 * exits 127. With --check, steps 2-3 run and the program exits 0 when DIR's contents are
 * hidden; ringd uses it to learn at start whether this kernel allows isolation.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_SETUP  126
#define EXIT_NOEXEC 127
#define MAX_EXPOSE  8
#define MAX_MKDIR   4
#define MAX_GROUPS  256
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
    int check;
    char **argv; /* the program and its arguments */
};

static void die(const char *what, const char *arg, int e)
{
    fprintf(stderr, "ringd-exec: %s%s%s%s%s\n", what, arg ? " " : "", arg ? arg : "", e ? ": " : "",
            e ? strerror(e) : "");
    exit(EXIT_SETUP);
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

static void parse(struct opts *o, int argc, char **argv)
{
    int i;
    o->uid = o->gid = -1;
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
        else
            die("unknown or repeated option", a, 0);
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

static void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    size_t len = strlen(text);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len)
        die("cannot write", path, errno);
    close(fd);
}

/* Creates every missing directory of path (0755); a path that exists is fine. */
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
 * nothing propagates back to the host). Without root the namespace is owned by a new user
 * namespace in which only our own uid and gid are mapped; the program exec'd later runs as
 * that same non-zero uid, so the kernel gives it no capabilities there, and the tmpfs over
 * DIR cannot be unmounted by the job to look underneath.
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
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
            die("cannot create a user and mount namespace (isolation needs unprivileged user "
                "namespaces, or ringd as root)",
                NULL, errno);
        write_file("/proc/self/setgroups", "deny");
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
        write_file("/proc/self/uid_map", map);
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
        write_file("/proc/self/gid_map", map);
    } else if (unshare(CLONE_NEWNS) < 0) {
        die("cannot create a mount namespace", NULL, errno);
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

int main(int argc, char **argv)
{
    struct opts o = {0};
    char **envp;

    parse(&o, argc, argv);
    envp = o.check ? NULL : read_env();
    if (o.hide != NULL)
        isolate(&o);
    drop_privileges(&o);
    if (o.check)
        return o.hide != NULL && hidden(o.hide) ? 0 : EXIT_SETUP;
    for (int i = 0; i < o.nmkdir; i++)
        if (mkdirs(o.mkdir[i], 0700) < 0)
            die("cannot create", o.mkdir[i], errno);
    if (o.chdir != NULL && chdir(o.chdir) < 0)
        die("cannot enter", o.chdir, errno);
    execve(o.argv[0], o.argv, envp);
    fprintf(stderr, "ringd-exec: cannot execute %s: %s\n", o.argv[0], strerror(errno));
    return EXIT_NOEXEC;
}
