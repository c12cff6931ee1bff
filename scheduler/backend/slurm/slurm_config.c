/* SPDX-License-Identifier: Apache-2.0 */
/* slurm_config.c - the Slurm backend's own settings and its work directory (slurm_config.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "slurm_config.h"

extern const struct backend_ops backend_slurm_ops;

const struct setting slurm_settings[] = {
    {"slurm_partition", "RINGD_SLURM_PARTITION", 1, "", "Slurm's default partition"},
    {"slurm_account", "RINGD_SLURM_ACCOUNT", 1, "", "none"},
    {"slurm_qos", "RINGD_SLURM_QOS", 1, "", "none"},
    {"slurm_time_limit", "RINGD_SLURM_TIME_LIMIT", 1, "0", "0: the partition's (minutes)"},
    {"slurm_work_dir", "RINGD_SLURM_WORK_DIR", 1, "",
     "required with backend slurm: a\ndirectory every Slurm node sees, for\n"
     "the jobs' runs/ and checkpoints/"},
    {NULL, NULL, 0, NULL, NULL},
};

/* The longest time limit Slurm takes: a year, in minutes. */
#define TIME_LIMIT_MAX 525600

/* A Slurm name (partition, account, QOS) into out: it fits, and has neither ',' (a list,
 * to Slurm) nor '='. */
static int take_name(const char *key, const char *v, char *out, size_t len, struct error *err)
{
    if (strlen(v) >= len || strpbrk(v, ",=") != NULL)
        return errno = EINVAL, errprintf(err, "bad value '%s' for %s (see ringd --help)", v, key);
    snprintf(out, len, "%s", v);
    return 0;
}

static int take_minutes(const char *key, const char *v, int *out, struct error *err)
{
    char *end;
    long m;
    errno = 0;
    m = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || m < 0 || m > TIME_LIMIT_MAX)
        return errno = EINVAL,
               errprintf(err, "%s '%s' must be minutes in 0..%d", key, v, TIME_LIMIT_MAX);
    *out = (int)m;
    return 0;
}

/* One of partition, account, qos, time_limit, from backend_options or a slurm_* key. */
static int take(struct slurm_settings *s, const char *key, const char *v, struct error *err)
{
    if (strcmp(key, "partition") == 0)
        return take_name("slurm_partition", v, s->partition, sizeof(s->partition), err);
    if (strcmp(key, "account") == 0)
        return take_name("slurm_account", v, s->account, sizeof(s->account), err);
    if (strcmp(key, "qos") == 0)
        return take_name("slurm_qos", v, s->qos, sizeof(s->qos), err);
    if (strcmp(key, "time_limit") == 0)
        return take_minutes("slurm time_limit", v, &s->time_limit_min, err);
    return errno = EINVAL, errprintf(err,
                                     "unknown slurm backend option '%s' (partition, account, "
                                     "qos, time_limit)",
                                     key);
}

/* backend_options: "key=value,key=value". */
static int take_options(struct slurm_settings *s, const char *opts, struct error *err)
{
    char buf[1024], *save = NULL;
    if (opts == NULL)
        return 0;
    snprintf(buf, sizeof(buf), "%s", opts);
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *v = strchr(kv, '=');
        if (v == NULL)
            return errno = EINVAL, errprintf(err, "slurm backend option '%s' is not key=value", kv);
        *v++ = '\0';
        if (take(s, kv, v, err) < 0)
            return -1;
    }
    return 0;
}

int slurm_settings_read(const struct backend_config *cfg, struct slurm_settings *out,
                        struct error *err)
{
    static const char *const keys[] = {"partition", "account", "qos", "time_limit"};
    const char *wd = backend_setting(&backend_slurm_ops, cfg, "slurm_work_dir");

    memset(out, 0, sizeof(*out));
    /* backend_options first: a slurm_* setting given as well wins over it. */
    if (take_options(out, cfg->options, err) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char key[32];
        const char *v;
        int minutes = 0;
        snprintf(key, sizeof(key), "slurm_%s", keys[i]);
        v = backend_setting(&backend_slurm_ops, cfg, key);
        if (v == NULL || v[0] == '\0')
            continue;
        /* A time limit of 0 is the partition's: it leaves backend_options' alone. */
        if (strcmp(keys[i], "time_limit") == 0 && (take_minutes(key, v, &minutes, err) < 0))
            return -1;
        if ((strcmp(keys[i], "time_limit") != 0 || minutes > 0) && take(out, keys[i], v, err) < 0)
            return -1;
    }
    if (wd == NULL || wd[0] == '\0')
        return errno = EINVAL,
               errprintf(err, "backend slurm needs slurm_work_dir (--slurm-work-dir DIR): a "
                              "directory every Slurm node sees, where the jobs' run and "
                              "checkpoint directories go");
    if (wd[0] != '/' || strlen(wd) >= sizeof(out->work_dir))
        return errno = EINVAL,
               errprintf(err, "bad value '%s' for slurm_work_dir (see ringd --help)", wd);
    snprintf(out->work_dir, sizeof(out->work_dir), "%s", wd);
    return 0;
}

int slurm_config(const struct backend_config *cfg, struct error *err)
{
    struct slurm_settings s;
    return slurm_settings_read(cfg, &s, err);
}

int slurm_work_dir_prepare(const char *dir, const char *data_dir, char *out, size_t len,
                           struct error *err)
{
    char abs[PATH_MAX];
    struct stat sb;
    size_t n;

    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return errprintf(err, "cannot create slurm_work_dir %s: %s", dir, strerror(errno)),
               errno = EINVAL, -1;
    if (realpath(dir, abs) == NULL || strlen(abs) + 1 > len)
        return errprintf(err, "cannot resolve slurm_work_dir %s: %s", dir, strerror(errno)),
               errno = EINVAL, -1;
    n = strlen(data_dir);
    if (strncmp(abs, data_dir, n) == 0 && (abs[n] == '/' || abs[n] == '\0'))
        return errno = EINVAL, errprintf(err,
                                         "slurm_work_dir %s is inside the data directory, which "
                                         "jobs must never see; pick a directory outside it",
                                         abs);
    snprintf(out, len, "%s", abs);
    /* ringd makes each job's directories in it as root: a user who could replace what is in
     * it could have ringd make them anywhere. */
    if (stat(out, &sb) < 0 || (sb.st_uid != 0 && sb.st_uid != geteuid()))
        return errno = EINVAL, errprintf(err,
                                         "slurm_work_dir %s must belong to root or ringd's "
                                         "user (uid %u)",
                                         out, (unsigned)geteuid());
    /* Jobs' users pass through it to their own run and checkpoint directories. */
    if (chmod(out, 0755) < 0)
        return errprintf(err, "cannot make slurm_work_dir %s traversable: %s", out,
                         strerror(errno)),
               errno = EINVAL, -1;
    return 0;
}
