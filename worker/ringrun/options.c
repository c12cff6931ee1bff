/* SPDX-License-Identifier: Apache-2.0 */
/* options.c - ringrun's command line: --help, and the options checked into struct opts. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "options.h"
#include "ring.h"
#include "slurm.h"

int ringrun_verbose;

void options_usage(FILE *f)
{
    fprintf(
        f,
        "usage: ringrun -np N [options] program [args...]\n"
        "\n"
        "Starts N ranks of a libring program and wires them together.\n"
        "\n"
        "  -np N                 number of ranks\n"
        "  -H, --hosts LIST      host:slots,... (default localhost:N)\n"
        "  --hostfile FILE       one 'host slots=N [max_slots=M]' or 'host:N' per line\n"
        "  --oversubscribe       allow -np above the slots: the ranks past them go one per\n"
        "                        host in turn, each host up to its max_slots\n"
        "  --rsh CMD             remote shell for other hosts (default 'ssh'); %%h stands\n"
        "                        for the host, else it is appended. The last argument is\n"
        "                        one shell command line, e.g. --rsh 'ip netns exec %%h sh -c'\n"
        "  -x NAME[=VALUE]       also pass this variable to remote ranks\n"
        "  --output-dir DIR      also write DIR/rank.N/stdout and stderr\n"
        "  --timeout S           ranks give up connecting after S seconds (RING_TIMEOUT_SECONDS)\n"
        "  --port P              rendezvous port (default: any free port)\n"
        "  --rendezvous-addr A   address remote ranks reach this host at\n"
        "  --kill-grace S        after a rank fails, wait S seconds before killing the\n"
        "                        others (default %d)\n"
        "  --no-slurm            inside a Slurm allocation, start the ranks here anyway\n"
        "                        (by default they start through srun --mpi=pmix on the\n"
        "                        allocation's nodes, -np defaulting to SLURM_NTASKS,\n"
        "                        --gpus-per-rank becoming srun --gpus-per-task)\n"
        "  -v, --verbose         say what is launched where\n"
        "  --version, --help\n"
        "\n"
        "Exit status: 0 when every rank succeeded; else the first failing rank's status\n"
        "(128+N for signal N); 64 bad arguments, 69 port unavailable, 126 program not\n"
        "executable, 127 program not found.\n",
        DEFAULT_GRACE_S);
}

static int parse_int(const char *s, int min, int max, int *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

enum {
    OPT_HOSTFILE = 256,
    OPT_OUTPUT_DIR,
    OPT_TIMEOUT,
    OPT_RSH,
    OPT_PORT,
    OPT_RDV_ADDR,
    OPT_GRACE,
    OPT_GPUS,
    OPT_GPUS_PER_RANK,
    OPT_NO_SLURM,
    OPT_OVERSUBSCRIBE,
    OPT_VERSION,
    OPT_HELP,
};

/* -x NAME[=VALUE]: a variable passed on to every rank. Returns 0, or -1 after saying why. */
static int add_xvar(struct opts *o, const char *arg)
{
    const char **grown;
    /* ringrun makes the job's secret and passes it privately; a -x would put it (or another
     * job's) on the remote command line for every user to read. */
    if (strncmp(arg, "RING_JOB_SECRET", 15) == 0 && (arg[15] == '\0' || arg[15] == '='))
        return log_error("-x RING_JOB_SECRET: ringrun makes the job's secret itself "
                         "and never passes it on a command line"),
               -1;
    grown = realloc(o->xvars, (size_t)(o->nx + 1) * sizeof(*grown));
    if (grown == NULL)
        return log_error("out of memory"), -1;
    o->xvars = grown;
    o->xvars[o->nx++] = arg;
    return 0;
}

/*
 * The hosts the ranks run on, after the options: -H or --hostfile, else the Slurm
 * allocation ringrun is in (then o->slurm), else this host; and -np from the hosts' slots
 * when not given. Returns 0, or -1 after saying why.
 */
static int choose_hosts(struct opts *o, const char *hosts_spec, const char *hostfile)
{
    struct error err;

    if (hosts_spec != NULL && hostfile != NULL)
        return log_error("give either -H or --hostfile, not both"), -1;
    if (hosts_spec != NULL && hosts_parse_list(&o->hosts, hosts_spec, &err) < 0)
        return log_error("-H: %s", err.text), -1;
    if (hostfile != NULL && hosts_parse_file(&o->hosts, hostfile, &err) < 0)
        return log_error("--hostfile: %s", err.text), -1;
    /* Inside an allocation the hosts are Slurm's, unless the user named others. */
    if (!o->no_slurm && hosts_spec == NULL && hostfile == NULL && slurm_in_allocation()) {
        if (o->gpus != NULL)
            return log_error(
                       "--gpus names this host's GPUs; inside a Slurm allocation the GPUs are "
                       "Slurm's (use --gpus-per-rank, or --no-slurm)"),
                   -1;
        o->slurm = 1;
        return 0;
    }
    if (o->np == 0) {
        if (o->hosts.count == 0)
            return log_error("-np N is required"), -1;
        o->np = hosts_slots(&o->hosts);
    }
    if (o->hosts.count == 0) {
        char spec[32];
        snprintf(spec, sizeof(spec), "localhost:%d", o->np);
        if (hosts_parse_list(&o->hosts, spec, &err) < 0)
            return log_error("%s", err.text), -1;
    }
    return 0;
}

int options_parse(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"np", required_argument, NULL, 'n'},
        {"hosts", required_argument, NULL, 'H'},
        {"hostfile", required_argument, NULL, OPT_HOSTFILE},
        {"output-dir", required_argument, NULL, OPT_OUTPUT_DIR},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"rsh", required_argument, NULL, OPT_RSH},
        {"port", required_argument, NULL, OPT_PORT},
        {"rendezvous-addr", required_argument, NULL, OPT_RDV_ADDR},
        {"kill-grace", required_argument, NULL, OPT_GRACE},
        {"gpus", required_argument, NULL, OPT_GPUS},
        {"gpus-per-rank", required_argument, NULL, OPT_GPUS_PER_RANK},
        {"no-slurm", no_argument, NULL, OPT_NO_SLURM},
        {"oversubscribe", no_argument, NULL, OPT_OVERSUBSCRIBE},
        {"verbose", no_argument, NULL, 'v'},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *hosts_spec = NULL, *hostfile = NULL;
    int c;

    o->grace_s = DEFAULT_GRACE_S;
    o->gpus_per_rank = 1;
    o->rsh = "ssh";
    opterr = 0;
    /* '+': stop at the program name, so its own options are left alone. */
    while ((c = getopt_long_only(argc, argv, "+n:H:x:vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (parse_int(optarg, 1, 1 << 20, &o->np) < 0)
                return log_error("-np '%s' must be a positive integer", optarg), -1;
            break;
        case 'H':
            hosts_spec = optarg;
            break;
        case OPT_HOSTFILE:
            hostfile = optarg;
            break;
        case OPT_OUTPUT_DIR:
            o->output_dir = optarg;
            break;
        case OPT_TIMEOUT:
            if (parse_int(optarg, 1, 86400, &o->timeout_s) < 0)
                return log_error("--timeout '%s' must be seconds in 1..86400", optarg), -1;
            break;
        case OPT_RSH:
            if (*optarg == '\0')
                return log_error("--rsh must name a command"), -1;
            o->rsh = optarg;
            break;
        case OPT_PORT:
            if (parse_int(optarg, 0, 65535, &o->port) < 0)
                return log_error("--port '%s' must be in 0..65535", optarg), -1;
            break;
        case OPT_RDV_ADDR:
            o->rdv_addr = optarg;
            break;
        case OPT_GRACE:
            if (parse_int(optarg, 0, 3600, &o->grace_s) < 0)
                return log_error("--kill-grace '%s' must be seconds in 0..3600", optarg), -1;
            break;
        case OPT_GPUS:
            if (strspn(optarg, "0123456789,") != strlen(optarg) || *optarg == '\0')
                return log_error("--gpus '%s' must be a comma-separated list of GPU ids", optarg),
                       -1;
            o->gpus = optarg;
            break;
        case OPT_GPUS_PER_RANK:
            if (parse_int(optarg, 1, 64, &o->gpus_per_rank) < 0)
                return log_error("--gpus-per-rank '%s' must be in 1..64", optarg), -1;
            o->gpus_per_rank_given = 1;
            break;
        case OPT_NO_SLURM:
            o->no_slurm = 1;
            break;
        case OPT_OVERSUBSCRIBE:
            o->hosts.oversubscribe = 1;
            break;
        case 'x':
            if (add_xvar(o, optarg) < 0)
                return -1;
            break;
        case 'v':
            o->verbose = 1;
            break;
        case OPT_VERSION:
            printf("ringrun %s (libring %s)\n", RING_VERSION_STRING, ring_version());
            exit(0);
        case 'h':
        case OPT_HELP:
            options_usage(stdout);
            exit(0);
        default:
            /* The word as typed: for -np without its value getopt names only 'n'. */
            log_error("unknown option '%s' or missing value (see ringrun --help)",
                      optind > 0 && optind <= argc ? argv[optind - 1] : "?");
            return -1;
        }
    }
    if (optind >= argc)
        return log_error("no program given (usage: ringrun -np N program [args...])"), -1;
    o->argv = argv + optind;
    return choose_hosts(o, hosts_spec, hostfile);
}
