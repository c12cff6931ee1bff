/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend.c - the table of the backends ringd may run, and what every backend does alike.
 * A new backend is a folder beside local/ and slurm/ and a row here. (sim/ is not in the
 * table: ringsim, bench/sched and the tests take backend_sim_ops directly.)
 */
#include <stdio.h>
#include <string.h>

#include "backend.h"

extern const struct backend_ops backend_local_ops;
#ifdef RING_HAVE_SLURM
extern const struct backend_ops backend_slurm_ops;
#endif

static const struct backend_ops *const builtin[] = {
    &backend_local_ops,
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

const struct backend_ops *backend_at(int i)
{
    return i >= 0 && i < (int)(sizeof(builtin) / sizeof(builtin[0])) ? builtin[i] : NULL;
}

const char *backend_names(void)
{
    static char names[256]; /* written once: the table is constant */
    if (names[0] == '\0') {
        size_t at = 0;
        for (int i = 0; builtin[i] && at < sizeof(names); i++)
            at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s", i ? ", " : "",
                                   builtin[i]->name);
    }
    return names;
}

const char *backend_setting(const struct backend_ops *b, const struct backend_config *cfg,
                            const char *key)
{
    for (int i = 0; i < cfg->nsettings; i++)
        if (strcmp(cfg->settings[i].key, key) == 0)
            return cfg->settings[i].value;
    for (const struct setting *s = b->settings; s != NULL && s->key != NULL; s++)
        if (strcmp(s->key, key) == 0)
            return s->dflt;
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
