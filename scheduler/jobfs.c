/* SPDX-License-Identifier: Apache-2.0 */
/* jobfs.c - reading and removing the files of jobs without following what a job planted. */
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
            return errno = errno == ENOTDIR ? ELOOP : errno, -1;
        dir = sub;
    }
    fd = openat(dir, p, flags | O_NOFOLLOW);
    close(dir);
    return fd;
}

FILE *jobfs_fopen(const char *path)
{
    struct stat sb;
    FILE *f;
    int fd = open_no_links(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

    if (fd < 0)
        return NULL;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
        close(fd);
        return errno = EINVAL, NULL;
    }
    if ((f = fdopen(fd, "r")) == NULL)
        close(fd);
    return f;
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
