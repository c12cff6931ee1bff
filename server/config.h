/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - ringd's configuration: defaults, then the file (--config, "key = value"
 * lines, '#' comments), then RINGD_* environment variables, then flags. --print-config
 * shows the result in the file's own format.
 */
#ifndef RINGD_CONFIG_H
#define RINGD_CONFIG_H

#include <stdio.h>

#include "error.h"

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
    char exec_helper[2048];    /* next to ringd, else RINGD_EXEC_PATH (root runs it: fixed) */
    char default_user[64];     /* default_user = NAME   RINGD_DEFAULT_USER */
    int isolation;             /* isolation = auto|namespace|none   RINGD_ISOLATION */
    char tls_cert[2048];       /* tls_cert = PEM file   RINGD_TLS_CERT */
    char tls_key[2048];        /* tls_key = PEM file    RINGD_TLS_KEY */
    int insecure_http;         /* allow_insecure_http = true: tokens over plain HTTP off loopback */
    char backend[32];          /* backend = local (where attempts run) RINGD_BACKEND */
    char backend_options[512]; /* backend_options = key=value,... (the backend's own) */
    char policy[32];           /* policy = fifo|priority|tiresias|dynamic RINGD_POLICY */
    double sched_interval;     /* sched_interval = seconds between the policy's passes */
    double restart_cost;       /* restart_cost = seconds a restart costs a job until measured */
    double hysteresis;         /* hysteresis = a resize must gain this many restarts' worth */
    /* backend = slurm: where and how its batch jobs go (RINGD_SLURM_*, --slurm-*) */
    char slurm_partition[128]; /* slurm_partition = NAME (default: Slurm's default) */
    char slurm_account[128];   /* slurm_account = NAME */
    char slurm_qos[128];       /* slurm_qos = NAME */
    int slurm_time_limit;      /* slurm_time_limit = minutes (0: the partition's) */
    char slurm_work_dir[2048]; /* slurm_work_dir = DIR every node sees: runs/, checkpoints/ */
    char job_limits[512];      /* job_limits = nofile=N,core=0,... (local jobs' rlimits) */
};

enum { ISOLATION_AUTO, ISOLATION_NAMESPACE, ISOLATION_NONE };

/* Parses argv (after defaults, the file and the environment). Returns 0, 1 when the program
 * should exit 0 (--help, --version, --print-config done), or -1 with err. */
int config_load(struct config *c, int argc, char **argv, struct error *err);
/* Writes c as a configuration file. */
void config_print(const struct config *c, FILE *f);

#endif /* RINGD_CONFIG_H */
