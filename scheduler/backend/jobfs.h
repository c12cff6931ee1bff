/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jobfs.h - ringd's access to the directories and files of jobs. A job owns its run
 * directory and can change it at any moment: swap a directory ringd just made for a
 * symbolic link ("rank.0" -> /etc/shadow), plant a link where ringd expects a log
 * ("rank.0/stdout" -> the admin token), a FIFO (which would block the thread that opens it
 * forever), or a hard link to someone else's file. ringd works there with its own
 * privileges (root, in the multi-user set-up), so:
 *
 *   - below a directory a user owns, it works only through file descriptors (mkdirat, then
 *     openat with O_NOFOLLOW, then fchown and fchmod on what it opened), never by path;
 *   - it makes a job's directories while they are still its own (0700), and gives each to
 *     the user last, so that the user cannot touch them while ringd works in them;
 *   - it never follows a link below a path it built (the paths start at the data
 *     directory or slurm_work_dir, resolved at start-up), creates files with O_EXCL, and
 *     opens nothing that could block or that belongs to someone else.
 */
#ifndef RINGD_JOBFS_H
#define RINGD_JOBFS_H

#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * Opens path for reading: a regular file with one link, owned by whoever owns the
 * directory it is in (a job's file in the job's directory; never a hard link to another
 * file, nor someone else's file renamed into place), reached without a symbolic link in any
 * component. Never blocks on a FIFO, and never opens a device. Returns a stream, or NULL
 * with errno: ENOENT, ELOOP (a link), EINVAL (not such a file), or what open(2) gives.
 */
FILE *jobfs_fopen(const char *path);
/* stat(2) of path without following a link in any component. Returns 0, or -1 with errno
 * (ELOOP: a component is a link). */
int jobfs_stat(const char *path, struct stat *st);
/*
 * rm -rf path, without following links: a link inside is removed itself, never what it
 * points to. path's own components are trusted (built by ringd). Returns 0, or -1 with
 * errno from the first failure (removal goes on past it).
 */
int jobfs_remove_tree(const char *path);

/*
 * mkdir -p path, without following a link in any component: the directories it makes on the
 * way are ringd's and 0755 (every job's user passes through them), path itself, when it
 * makes it, ringd's and 0700. Returns an O_DIRECTORY descriptor of path (the caller closes
 * it), or -1 with errno (ELOOP: a component is a link).
 */
int jobfs_mkdirs(const char *path);
/*
 * The directory name inside directory dirfd: made (ringd's, 0700) when missing, then opened
 * without following a link. It must be ringd's or belong to uid already. Returns its
 * descriptor, or -1 with errno: ELOOP or ENOTDIR (a link or something else has the name),
 * EPERM (a directory of another user).
 */
int jobfs_subdir(int dirfd, const char *name, uid_t uid);
/*
 * Creates name inside directory dirfd as a new, empty regular file open for appending (mode
 * as given, not reduced by the umask), with O_EXCL: never through a link, never a FIFO or a
 * device, never blocking. Whatever has the name already (a log of a previous try, or
 * something a job planted) is unlinked first, a few times at most. Returns the descriptor,
 * or -1 with errno.
 */
int jobfs_create(int dirfd, const char *name, mode_t mode);
/* Gives what fd is open on to uid:gid (fchown; only when ringd is root) with mode (fchmod).
 * Returns 0, or -1 with errno. */
int jobfs_give(int fd, uid_t uid, gid_t gid, mode_t mode);

#endif /* RINGD_JOBFS_H */
