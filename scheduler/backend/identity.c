/* SPDX-License-Identifier: Apache-2.0 */
/*
 * identity.c - who a job runs as (identity.h): the user database, a directory as that user
 * sees it, and what of ringd's own environment a job takes along.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "identity.h"

extern char **environ;

int identity_lookup(const char *user, struct identity *id, struct error *err)
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

/* ---- who may see a directory ---- */

/*
 * Whether path is a directory that user id can reach (search every directory on the way):
 * stat(2) as that user, so that the answer tells nothing about directories the user cannot
 * look into. As root, only this thread takes the user's filesystem identity for the call
 * (setfsuid, setfsgid and setgroups through syscall(2) are per thread, where glibc's
 * setgroups would change every thread of ringd), and takes root's back at once.
 */
int identity_dir_reachable(const struct identity *id, const char *path)
{
    gid_t saved[256];
    struct stat sb;
    int nsaved, e;

    if (geteuid() != 0 || !id->switch_user)
        return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? 0 : (errno = ENOENT, -1);
    if ((nsaved = getgroups((int)(sizeof(saved) / sizeof(saved[0])), saved)) < 0)
        return -1;
    if (syscall(SYS_setgroups, (size_t)id->ngroups, id->groups) < 0)
        return -1;
    /* setfsuid answers the previous id, whether it changed or not; asking again tells. */
    syscall(SYS_setfsgid, id->gid);
    syscall(SYS_setfsuid, id->uid);
    if ((uid_t)syscall(SYS_setfsuid, -1) != id->uid || (gid_t)syscall(SYS_setfsgid, -1) != id->gid)
        e = EPERM;
    else
        e = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? 0 : ENOENT;
    syscall(SYS_setfsuid, 0);
    syscall(SYS_setfsgid, 0);
    /* Root's groups back; failing that the thread must not go on as the user. */
    if (syscall(SYS_setgroups, (size_t)nsaved, saved) < 0 || (uid_t)syscall(SYS_setfsuid, -1) != 0)
        abort();
    return e ? (errno = e, -1) : 0;
}

/* ---- what a job inherits of ringd's environment ---- */

/*
 * What a job inherits of ringd's environment: the variables that say how to find programs
 * and how to speak (PATH, the locale, the time zone), and the sanitizer runtimes' options
 * (set only where ringd itself runs under a sanitizer, so that its jobs' ringrun reports
 * alike). Nothing else: ringd's environment is a service's (systemd's NOTIFY_SOCKET and
 * CREDENTIALS_DIRECTORY, secrets passed to the service), none of it the job's. This is
 * the list the README gives; the Slurm backend's is the same, with SLURM_CONF.
 */
static const char *const ENV_PASSED[] = {
    "PATH",          "LANG",         "LANGUAGE",     "TZ", "ASAN_OPTIONS",
    "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", NULL,
};

int identity_env_passed(const char *name)
{
    if (strncmp(name, "LC_", 3) == 0)
        return 1;
    for (int i = 0; ENV_PASSED[i] != NULL; i++)
        if (strcmp(name, ENV_PASSED[i]) == 0)
            return 1;
    return 0;
}

int identity_env_inherit(int (*add)(void *arg, const char *name, const char *value), void *arg)
{
    for (char **p = environ; *p; p++) {
        const char *eq = strchr(*p, '=');
        char name[256];
        int rc;
        if (eq == NULL || (size_t)(eq - *p) >= sizeof(name))
            continue;
        snprintf(name, sizeof(name), "%.*s", (int)(eq - *p), *p);
        if (identity_env_passed(name) && (rc = add(arg, name, eq + 1)) != 0)
            return rc;
    }
    return 0;
}
