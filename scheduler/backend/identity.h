/* SPDX-License-Identifier: Apache-2.0 */
/*
 * identity.h - who a job runs as. A job never runs with ringd's privileges: as root, ringd
 * starts it as its token's Unix user (setgid, initgroups, setuid before exec, as slurmstepd
 * does); without root, only as ringd's own user. The API checks a token's user and a job's
 * working directory with it before accepting a job, ringd its default_user at start, and
 * both backends look the user up again as they start each attempt (a user may be removed
 * in between).
 */
#ifndef RINGD_IDENTITY_H
#define RINGD_IDENTITY_H

#include <sys/types.h>

#include "common/error.h"

/* Who a job runs as. */
struct identity {
    int switch_user; /* 1: ringd is root and the job's user is someone else */
    uid_t uid;
    gid_t gid;
    int ngroups;
    gid_t groups[256];
    char name[64];
    char home[1024];
    char shell[256];
};

/*
 * Looks up user (NULL: ringd's own user). As root, any existing user; otherwise only
 * ringd's own user, since switching users needs root. Returns 0, or -1 with errno ENOENT
 * (no such user) or EPERM (ringd cannot run jobs as that user) and err saying what to do.
 * Thread-safe (getpwnam_r).
 */
int identity_lookup(const char *user, struct identity *id, struct error *err);

/*
 * Whether user id can reach directory path (stat as that user: a directory the user cannot
 * search tells the caller nothing). Returns 0, or -1 with errno ENOENT (not there, not a
 * directory, or out of the user's reach). Thread-safe: only the calling thread takes the
 * user's identity, for the one call.
 */
int identity_dir_reachable(const struct identity *id, const char *path);

/* Whether name is one of the variables of ringd's environment that a job inherits (PATH,
 * the locale, ...: the README lists them). */
int identity_env_passed(const char *name);
/* Calls add(arg, name, value) for each variable of ringd's environment that a job inherits
 * (identity_env_passed), in the environment's order; name and value are borrowed for the
 * call. Returns 0, or the first nonzero value add returned. */
int identity_env_inherit(int (*add)(void *arg, const char *name, const char *value), void *arg);

#endif /* RINGD_IDENTITY_H */
