/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.h - ringrun's command line (options.c), its exit statuses and its one way of
 * speaking to the user.
 */
#ifndef RINGRUN_OPTIONS_H
#define RINGRUN_OPTIONS_H

#include <stdio.h>

#include "hosts.h"

/* Exit codes of ringrun itself (sysexits.h and shell conventions); a rank's failure is
 * reported with that rank's own status instead. */
#define EXIT_USAGE       64  /* EX_USAGE: bad arguments */
#define EXIT_UNAVAILABLE 69  /* EX_UNAVAILABLE: port in use, cannot listen */
#define EXIT_OSERR       71  /* EX_OSERR: fork, pipe or poll failed */
#define EXIT_NOEXEC      126 /* the program exists but is not executable */
#define EXIT_NOTFOUND    127 /* the program does not exist */

#define DEFAULT_GRACE_S 5

struct opts {
    int np;
    struct hostlist hosts;
    int verbose;
    const char *output_dir;
    int timeout_s; /* 0: leave RING_TIMEOUT_SECONDS to the environment */
    const char *rsh;
    int port;
    const char *rdv_addr; /* address ranks use to reach the rendezvous */
    int grace_s;
    const char **xvars; /* -x NAME or NAME=VALUE, for remote ranks */
    int nx;
    const char *gpus; /* --gpus 0,1,2,3: CUDA_VISIBLE_DEVICES per local rank */
    int gpus_per_rank;
    int gpus_per_rank_given;
    int no_slurm; /* --no-slurm: fork or rsh even inside an allocation */
    int slurm;    /* launch through srun (inside an allocation, no -H/--hostfile) */
    char **argv;  /* the program and its arguments */
};

/* Fills o from the command line, placing the ranks on the hosts given (or on this one).
 * --help and --version print and exit 0. Returns 0, or -1 after saying what is wrong. */
int options_parse(int argc, char **argv, struct opts *o);
void options_usage(FILE *f);

/* -v: say what is launched where. */
extern int ringrun_verbose;

#endif /* RINGRUN_OPTIONS_H */
