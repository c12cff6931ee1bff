/* SPDX-License-Identifier: Apache-2.0 */
/*
 * local_config.c - the local backend's own settings (local.h): the resource limits its
 * jobs start with (job_limits), whether they are hidden from ringd's data directory
 * (isolation), and ringd-exec, the helper it starts every job through, which must be safe
 * for ringd to run with its privileges. ringd reads the settings without knowing them
 * (backend.h: settings, config).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "local.h"
#include "scheduler/backend/backend.h"

extern const struct backend_ops backend_local_ops;

const struct setting local_settings[] = {
    {"isolation", "RINGD_ISOLATION", 1, "auto",
     "auto: hide data_dir from jobs in a\nprivate mount namespace when possible\n"
     "(namespace: always, none: never)"},
    {"job_limits", "RINGD_JOB_LIMITS", 0, "",
     "none: local jobs start with ringd's\nlimits; else NAME=VALUE[:HARD],... of\n"
     "as core cpu data fsize memlock nofile\nnproc stack (a number or unlimited)"},
    {NULL, NULL, 0, NULL, NULL},
};

/* isolation's value as LOCAL_ISOLATION_*, or -1. */
static int isolation_of(const char *v)
{
    return !strcmp(v, "auto")        ? LOCAL_ISOLATION_AUTO
           : !strcmp(v, "namespace") ? LOCAL_ISOLATION_NAMESPACE
           : !strcmp(v, "none")      ? LOCAL_ISOLATION_NONE
                                     : -1;
}

/*
 * Where the install puts ringd-exec (${libexecdir}/ringmaster/ringd-exec), fixed when ringd
 * is built: cmake/RingInstall.cmake defines it from CMAKE_INSTALL_PREFIX.
 */
#ifndef RINGD_EXEC_PATH
#error "RINGD_EXEC_PATH must name the installed ringd-exec (cmake/RingInstall.cmake defines it)"
#endif

/*
 * ringd-exec: the one next to this ringd when there is one (a build tree, where both are
 * built together), else the installed one at RINGD_EXEC_PATH (an install puts ringd in bin
 * and ringd-exec in libexec, so nothing is next to it). The build tree's comes first so that
 * a ringd under development never runs an older installed ringd-exec, whose arguments may
 * differ. Never from PATH: ringd runs it with root's privileges (exec_helper_safe checks
 * who may change it, and every directory above it, before it is used).
 */
static void find_exec_helper(char *out, size_t len)
{
    char self[1900];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash;

    if (n > 0) {
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (slash != NULL) {
            *slash = '\0';
            if (snprintf(out, len, "%s/ringd-exec", self) < (int)len && access(out, F_OK) == 0)
                return;
        }
    }
    snprintf(out, len, "%s", RINGD_EXEC_PATH);
}

/* 1 when only root or ringd's own user can change what path names (mode without group or
 * other write, or a sticky directory, which keeps others' entries in place). */
static int only_ours(const char *path, struct stat *sb)
{
    return stat(path, sb) == 0 && (sb->st_uid == 0 || sb->st_uid == geteuid()) &&
           ((sb->st_mode & 022) == 0 || (S_ISDIR(sb->st_mode) && (sb->st_mode & S_ISVTX)));
}

/*
 * ringd runs ringd-exec as root, or without root with every job's secrets in reach: it
 * must be a regular file that only root or ringd's own user can change, and so must be
 * every directory above it (someone who can rename one can put another ringd-exec in its
 * place). Resolves path (links included) in place, so that ringd runs the file it checked.
 * Returns 0, or -1 with errno EINVAL and err (the whole of what to fix is logged: it is
 * longer than a struct error holds).
 */
static int exec_helper_safe(char *path, size_t len, struct error *err)
{
    char real[PATH_MAX], dir[PATH_MAX];
    struct stat sb;

    if (realpath(path, real) == NULL || strlen(real) >= len)
        return errprintf(err,
                         "cannot find ringd-exec at %s: %s (an install puts it at " RINGD_EXEC_PATH
                         ", a build tree next to ringd)",
                         path, strerror(errno)),
               errno = EINVAL, -1;
    if (!only_ours(real, &sb) || !S_ISREG(sb.st_mode)) {
        log_error("ringd-exec %s may be changed by others than root and ringd's user (owner uid "
                  "%u, mode %04o), and ringd runs it with its privileges; make it root's and not "
                  "group- or world-writable (chown root %s; chmod go-w %s)",
                  real, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777), real, real);
        return errno = EINVAL, errprintf(err, "ringd-exec is not safe to run (see above)");
    }
    snprintf(dir, sizeof(dir), "%s", real);
    for (char *slash = strrchr(dir, '/'); slash != NULL; slash = strrchr(dir, '/')) {
        *slash = '\0';
        if (!only_ours(dir[0] ? dir : "/", &sb)) {
            log_error("ringd-exec %s lies in directory %s, which others than root and ringd's "
                      "user may change (owner uid %u, mode %04o): they could put another program "
                      "in its place; make it root's and not group- or world-writable",
                      real, dir[0] ? dir : "/", (unsigned)sb.st_uid,
                      (unsigned)(sb.st_mode & 07777));
            return errno = EINVAL, errprintf(err, "ringd-exec is not safe to run (see above)");
        }
    }
    memcpy(path, real, strlen(real) + 1);
    log_info("jobs start through ringd-exec %s", path);
    return 0;
}

int local_config(const struct backend_config *cfg, struct error *err)
{
    struct local_settings set;
    if (local_settings_read(cfg, &set, err) < 0)
        return -1;
    return exec_helper_safe(set.exec_helper, sizeof(set.exec_helper), err);
}

int local_settings_read(const struct backend_config *cfg, struct local_settings *out,
                        struct error *err)
{
    char real[PATH_MAX];
    const char *iso = backend_setting(&backend_local_ops, cfg, "isolation");
    const char *lim = backend_setting(&backend_local_ops, cfg, "job_limits");

    memset(out, 0, sizeof(*out));
    if ((out->isolation = isolation_of(iso)) < 0)
        return errno = EINVAL,
               errprintf(err, "bad value '%s' for isolation (auto, namespace or none)", iso);
    if (local_limits_parse(lim, &out->limits, err) < 0 ||
        local_limits_allowed(&out->limits, err) < 0)
        return errno = EINVAL, -1;
    find_exec_helper(out->exec_helper, sizeof(out->exec_helper));
    /* Resolved, as the config op checked it, so that ringd runs the file it checked. */
    if (realpath(out->exec_helper, real) != NULL && strlen(real) < sizeof(out->exec_helper))
        memcpy(out->exec_helper, real, strlen(real) + 1);
    return 0;
}

/*
 * Whether jobs run in a private mount namespace that hides the data directory (1) or not
 * (0); -1 with err when ringd must not start. Without it, a job running as ringd's own
 * user could read the database and the admin token, and one running as another user could
 * not reach its run directory inside the 0700 data directory.
 */
int local_isolation_choose(const struct backend_config *cfg, const struct local_settings *set,
                           struct error *err)
{
    struct error why;
    if (set->isolation == LOCAL_ISOLATION_NONE) {
        if (geteuid() == 0) {
            /* Job users must pass through to their own (0700) run directories. */
            if (chmod(cfg->data_dir, 0711) < 0)
                return errprintf(err, "cannot open %s for traversal: %s", cfg->data_dir,
                                 strerror(errno)),
                       errno = EINVAL, -1;
            log_warning("isolation is off: the data directory is 0711 so that jobs reach "
                        "their run directories; its files stay 0600");
        } else {
            log_warning("isolation is off: jobs run as ringd's user and can read %s",
                        cfg->data_dir);
        }
        return 0;
    }
    if (local_isolation_works(set->exec_helper, cfg->data_dir, &why))
        return 1;
    if (set->isolation == LOCAL_ISOLATION_NAMESPACE || geteuid() == 0 || !cfg->no_auth) {
        log_error("cannot hide the data directory from jobs: %s. Jobs would be able to read the "
                  "database and the admin token. Allow unprivileged user namespaces (sysctl "
                  "kernel.unprivileged_userns_clone=1), run ringd as root, or accept the risk "
                  "with isolation = none",
                  why.text);
        return errno = EINVAL, errprintf(err, "cannot hide the data directory from jobs (see "
                                              "above)");
    }
    log_warning("cannot hide the data directory from jobs (%s); with --no-auth every job is "
                "the local user's anyway",
                why.text);
    return 0;
}
