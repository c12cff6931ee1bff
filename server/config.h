/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - ringd's configuration: defaults, then the file (--config, "key = value"
 * lines, '#' comments), then RINGD_* environment variables, then flags. --print-config
 * shows the result in the file's own format.
 *
 * The keys below are ringd's own. The backends and the policies declare theirs (backend.h,
 * policy.h: settings); config.c reads, lists and prints those too, without knowing them:
 * a policy's land in params, a backend's in values, for the backend's config op.
 */
#ifndef RINGD_CONFIG_H
#define RINGD_CONFIG_H

#include <stdio.h>

#include "common/error.h"
#include "scheduler/policy/policy.h"

/* How many backend settings one configuration may give: every backend's, with room. */
#define CONFIG_VALUES_MAX 32

struct config {
    char listen[300];          /* listen = HOST:PORT            RINGD_LISTEN */
    char data_dir[2048];       /* data_dir = DIR                RINGD_DATA_DIR */
    int no_auth;               /* no_auth = true|false           RINGD_NO_AUTH */
    int slots;                 /* slots = N (workers without GPUs; default: CPUs) */
    int gpus;                  /* gpus = N (default: nvidia-smi's count, else 0) */
    int threads;               /* threads = N (HTTP thread pool; default: CPUs) */
    int connection_limit;      /* connection_limit = N */
    int per_ip_limit;          /* per_ip_connection_limit = N */
    int timeout_s;             /* connection_timeout = seconds */
    int streams_per_token;     /* streams_per_token = N   RINGD_STREAMS_PER_TOKEN */
    char ringrun[2048];        /* ringrun = PATH (default: next to ringd, or on PATH) */
    char mpirun[2048];         /* mpirun = PATH (launcher "mpirun" jobs; default: on PATH) */
    int kill_grace_s;          /* kill_grace = seconds after SIGTERM before SIGKILL */
    char default_user[64];     /* default_user = NAME   RINGD_DEFAULT_USER */
    char tls_cert[2048];       /* tls_cert = PEM file   RINGD_TLS_CERT */
    char tls_key[2048];        /* tls_key = PEM file    RINGD_TLS_KEY */
    int insecure_http;         /* allow_insecure_http = true: tokens over plain HTTP off loopback */
    char backend[32];          /* backend = local (where attempts run) RINGD_BACKEND */
    char backend_options[512]; /* backend_options = key=value,... (the backend's own) */
    char policy[32];           /* policy = one of policy.h's table   RINGD_POLICY */
    double sched_interval;     /* sched_interval = seconds between the policy's passes */
    /* Every policy's settings (policy_setting_find), their defaults and what was given. */
    struct policy_params params;
    /* The backends' settings that were given (backend.h), each once, the last given. */
    struct config_value {
        char key[64];
        char value[2048];
    } values[CONFIG_VALUES_MAX];
    int nvalues;
};

/* Parses argv (after defaults, the file and the environment). Returns 0, 1 when the program
 * should exit 0 (--help, --version, --print-config done), or -1 with err. */
int config_load(struct config *c, int argc, char **argv, struct error *err);
/* Writes c as a configuration file. */
void config_print(const struct config *c, FILE *f);
/* c's values of the settings of backends, as a backend_config takes them: fills out (at
 * most CONFIG_VALUES_MAX, borrowed from c) and returns how many. */
int config_values(const struct config *c, struct setting_value *out);

#endif /* RINGD_CONFIG_H */
