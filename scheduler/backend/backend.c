/* SPDX-License-Identifier: Apache-2.0 */
/* backend.c - the table of built-in backends, and what every backend does alike. */
#include <string.h>

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
