/* SPDX-License-Identifier: Apache-2.0 */
/* jobfs.c - making, reading and removing the files of jobs without following what a job
 * planted (jobfs.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jobfs.h"

/* openat2(2) with RESOLVE_NO_SYMLINKS (Linux 5.6); glibc 2.36 has no wrapper. */
static int open_no_links(const char *path, int flags)
{
    struct open_how how = {.flags = (unsigned long long)flags,
                           .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
    char buf[4096], *p, *next;
    int dir;

    if (fd >= 0 || errno != ENOSYS)
        return fd;
    /* An older kernel: the same, one component at a time with O_NOFOLLOW. */
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return errno = ENAMETOOLONG, -1;
    if ((dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return -1;
    for (p = buf + (buf[0] == '/'); (next = strchr(p, '/')) != NULL; p = next + 1) {
        int sub;
        *next = '\0';
        sub = openat(dir, *p ? p : ".", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dir);
        if (sub < 0)
            return -1;
        dir = sub;
    }
    fd = openat(dir, p, flags | O_NOFOLLOW);
    close(dir);
    return fd;
}

/*
 * The directory part of path (everything before its last '/'), opened O_PATH without
 * following a link; *base gets the last component, inside buf.
 */
static int open_parent(const char *path, char *buf, size_t len, const char **base)
{
    char *slash;
    int dir;

    if (snprintf(buf, len, "%s", path) >= (int)len)
        return errno = ENAMETOOLONG, -1;
    if ((slash = strrchr(buf, '/')) == NULL || slash[1] == '\0')
        return errno = EINVAL, -1;
    *slash = '\0';
    *base = slash + 1;
    dir = open_no_links(slash == buf ? "/" : buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return dir;
}

FILE *jobfs_fopen(const char *path)
{
    char buf[4096];
    const char *base;
    struct stat dir_sb, probe_sb, sb;
    FILE *f;
    int dir = open_parent(path, buf, sizeof(buf), &base), probe = -1, fd = -1;

    if (dir < 0)
        return NULL;
    /* Looked at before it is opened: opening is what a FIFO or a device would act on. */
    probe = openat(dir, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (probe < 0 || fstat(probe, &probe_sb) < 0 || fstat(dir, &dir_sb) < 0)
        goto error;
    if (S_ISLNK(probe_sb.st_mode)) {
        errno = ELOOP;
        goto error;
    }
    /* One link, and the directory's owner's: a hard link to a file elsewhere (where
     * fs.protected_hardlinks is off) or a file of someone else renamed into the job's
     * directory would otherwise be read, and served, with ringd's privileges. */
    if (!S_ISREG(probe_sb.st_mode) || probe_sb.st_nlink != 1 || probe_sb.st_uid != dir_sb.st_uid) {
        errno = EINVAL;
        goto error;
    }
    fd = openat(dir, base, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) < 0)
        goto error;
    /* The same file as the one looked at, not one swapped in since. */
    if (sb.st_dev != probe_sb.st_dev || sb.st_ino != probe_sb.st_ino ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
        errno = EINVAL;
        goto error;
    }
    close(probe);
    close(dir);
    if ((f = fdopen(fd, "r")) == NULL)
        close(fd);
    return f;
error : {
    int saved = errno;
    if (fd >= 0)
        close(fd);
    if (probe >= 0)
        close(probe);
    close(dir);
    errno = saved;
    return NULL;
}
}

int jobfs_stat(const char *path, struct stat *st)
{
    int fd = open_no_links(path, O_PATH | O_CLOEXEC), rc;
    if (fd < 0)
        return -1;
    rc = fstat(fd, st);
    close(fd);
    if (rc == 0 && S_ISLNK(st->st_mode)) /* the fallback opens a trailing link itself */
        return errno = ELOOP, -1;
    return rc;
}

/* Closes fd, keeping errno. */
static void close_keep_errno(int fd)
{
    int saved = errno;
    close(fd);
    errno = saved;
}

int jobfs_mkdirs(const char *path)
{
    char buf[4096], *save = NULL, *comp, *next;
    int dir;

    if (path[0] != '/')
        return errno = EINVAL, -1;
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return errno = ENAMETOOLONG, -1;
    if ((dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return -1;
    for (comp = strtok_r(buf, "/", &save); comp != NULL; comp = next) {
        int last, made = 0, sub;
        next = strtok_r(NULL, "/", &save);
        last = next == NULL;
        if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
            close(dir);
            return errno = EINVAL, -1;
        }
        if (mkdirat(dir, comp, last ? 0700 : 0755) == 0)
            made = 1;
        else if (errno != EEXIST) {
            close_keep_errno(dir);
            return -1;
        }
        /* Read access only where fchmod needs it: ringd may only pass through a parent. */
        sub = openat(dir, comp,
                     (last || made ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close_keep_errno(dir);
        if (sub < 0)
            return -1;
        /* The modes said, whatever ringd's umask (077: its own files are private). */
        if (made && fchmod(sub, last ? 0700 : 0755) < 0) {
            close_keep_errno(sub);
            return -1;
        }
        dir = sub;
    }
    return dir;
}

int jobfs_subdir(int dirfd, const char *name, uid_t uid)
{
    struct stat sb;
    int fd;

    if (strchr(name, '/') != NULL || strcmp(name, "..") == 0)
        return errno = EINVAL, -1;
    if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
        return -1;
    /* Whatever the name holds now: the directory just made, or what the user put there. */
    fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &sb) < 0 || (sb.st_uid != geteuid() && sb.st_uid != uid)) {
        close(fd);
        return errno = EPERM, -1;
    }
    return fd;
}

/*
 * How many times jobfs_create clears the name and tries again. A name that is back every
 * time is being re-planted by someone racing ringd; a few tries tell that from the log of
 * an earlier try of the same attempt, which goes at the first.
 */
#define CREATE_TRIES 8

int jobfs_create(int dirfd, const char *name, mode_t mode)
{
    for (int i = 0; i < CREATE_TRIES; i++) {
        int fd = openat(dirfd, name,
                        O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK |
                            O_NOCTTY | O_CLOEXEC,
                        mode);
        if (fd >= 0) {
            if (fchmod(fd, mode) < 0) {
                int saved = errno;
                close(fd);
                return errno = saved, -1;
            }
            return fd;
        }
        if (errno != EEXIST)
            return -1;
        if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT &&
            (errno != EISDIR || unlinkat(dirfd, name, AT_REMOVEDIR) < 0))
            return -1;
    }
    return errno = EEXIST, -1;
}

int jobfs_give(int fd, uid_t uid, gid_t gid, mode_t mode)
{
    if (geteuid() == 0 && fchown(fd, uid, gid) < 0)
        return -1;
    return fchmod(fd, mode);
}

/*
 * How deep removal goes. A job can nest directories without limit; each level costs a
 * descriptor and a stack frame on an HTTP thread, so a deeper tree is left (ELOOP) rather
 * than removed at any cost. Real run directories are 2-3 levels deep.
 */
#define REMOVE_DEPTH_MAX 64

/* Empties directory fd dir (which it closes), depth first; the first errno in *first. */
static void empty_dir(int dir, int depth, int *first)
{
    DIR *d = fdopendir(dir);
    struct dirent *e;
    if (depth > REMOVE_DEPTH_MAX) {
        if (*first == 0)
            *first = ELOOP;
        if (d != NULL)
            closedir(d);
        else
            close(dir);
        return;
    }
    if (d == NULL) {
        if (*first == 0)
            *first = errno;
        close(dir);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        int sub;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        /* O_NOFOLLOW: a link (to a directory or not) fails here and is unlinked below. */
        sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) {
            empty_dir(sub, depth + 1, first);
            if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) < 0 && *first == 0)
                *first = errno;
        } else if (unlinkat(dirfd(d), e->d_name, 0) < 0 && *first == 0) {
            *first = errno;
        }
    }
    closedir(d);
}

int jobfs_remove_tree(const char *path)
{
    int first = 0;
    int dir = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return errno == ENOENT ? 0 : -1;
    empty_dir(dir, 0, &first);
    if (rmdir(path) < 0 && first == 0)
        first = errno;
    return first ? (errno = first, -1) : 0;
}
