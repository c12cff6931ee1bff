/* SPDX-License-Identifier: Apache-2.0 */
/* backend.c - the table of built-in backends, and what every backend does alike. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"

static const struct backend_ops *const builtin[] = {
    &backend_local_ops,
    &backend_sim_ops,
#ifdef RING_HAVE_SLURM
    &backend_slurm_ops,
#endif
    NULL,
};

const struct backend_ops *backend_find(const char *name)
{
    for (int i = 0; builtin[i]; i++) {
        if (name != NULL && strcmp(builtin[i]->name, name) == 0)
            return builtin[i];
    }
    return NULL;
}

int backend_mkdirs(const char *path, mode_t leaf_mode)
{
    char buf[4200];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return errno = ENAMETOOLONG, -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, leaf_mode) == 0)
        return 1;
    return errno == EEXIST ? 0 : -1;
}

const char *backend_exit_unrunnable(int status)
{
    switch (status) {
    case 126:
        return "command cannot be executed";
    case 127:
        return "command not found";
    default:
        return NULL;
    }
}
