/* SPDX-License-Identifier: Apache-2.0 */
/*
 * setting.h - a setting of a program's configuration that a part of it owns, described so
 * that the program reads, lists and prints it without knowing what it means. ringd's
 * backends and policies declare theirs (scheduler/backend/backend.h, policy/policy.h);
 * server/config.c reads them from ringd.conf, RINGD_* variables and flags like its own.
 */
#ifndef RING_COMMON_SETTING_H
#define RING_COMMON_SETTING_H

struct setting {
    const char *key;  /* in the configuration file: "slurm_partition" */
    const char *env;  /* the environment variable that sets it, or NULL */
    int flag;         /* 1: also a flag, --KEY with '-' for '_' ("--slurm-partition") */
    const char *dflt; /* its value when not given, as --print-config shows it ("": none) */
    const char *help; /* --help: the default and what it does; lines joined by '\n' */
};

/* A value given for a setting (both strings borrowed from the configuration's owner). */
struct setting_value {
    const char *key, *value;
};

#endif /* RING_COMMON_SETTING_H */
