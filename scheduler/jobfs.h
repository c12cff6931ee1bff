/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jobfs.h - ringd's access to the files jobs write (logs, progress.json) and to the
 * directories it deletes. A job owns its run directory and may plant a symbolic link where
 * ringd expects a log ("rank.0/stdout" -> the admin token) or a FIFO (which would block the
 * reading thread forever). ringd reads with its own privileges, so it never follows a link
 * below a path it built, and only reads regular files.
 */
#ifndef RINGD_JOBFS_H
#define RINGD_JOBFS_H

#include <stdio.h>

/*
 * Opens path for reading, refusing symbolic links in any component (the paths ringd builds
 * start at its data directory, which it resolved at start-up) and anything but a regular
 * file. Never blocks on a FIFO or a device. Returns a stream, or NULL with errno: ENOENT,
 * ELOOP (a link), EINVAL (not a regular file), or what open(2) gives.
 */
FILE *jobfs_fopen(const char *path);
/*
 * rm -rf path, without following links: a link inside is removed itself, never what it
 * points to. path's own components are trusted (built by ringd). Returns 0, or -1 with
 * errno from the first failure (removal goes on past it).
 */
int jobfs_remove_tree(const char *path);

#endif /* RINGD_JOBFS_H */
