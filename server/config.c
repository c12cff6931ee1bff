/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - defaults < ringd.conf < RINGD_* environment < flags. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend_local.h"
#include "config.h"

/*
 * Where nvidia-smi is installed: by Debian's and NVIDIA's driver packages, and by the NVIDIA
 * container toolkit. Never looked up on PATH: ringd runs it as root, before it has dropped
 * anything, and a PATH with a directory some user can write would run their program.
 */
static const char *const NVIDIA_SMI[] = {"/usr/bin/nvidia-smi", "/usr/local/nvidia/bin/nvidia-smi",
                                         "/usr/local/bin/nvidia-smi", NULL};

/* Counts the GPUs nvidia-smi lists; 0 when it is missing or fails. Argument vector only. */
static int detect_gpus(void)
{
    char *env[] = {"PATH=/usr/bin:/bin", NULL}, *argv[] = {NULL, "-L", NULL};
    const char *smi = NULL;
    posix_spawn_file_actions_t fa;
    int fds[2], n = 0, status;
    pid_t pid;
    FILE *f;
    char line[512];

    for (int i = 0; smi == NULL && NVIDIA_SMI[i] != NULL; i++)
        if (access(NVIDIA_SMI[i], X_OK) == 0)
            smi = NVIDIA_SMI[i];
    if (smi == NULL || pipe(fds) < 0)
        return 0;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", 1, 0);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    argv[0] = (char *)smi;
    if (posix_spawn(&pid, smi, &fa, NULL, argv, env) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    f = fdopen(fds[0], "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        n += strncmp(line, "GPU ", 4) == 0;
    if (f != NULL)
        fclose(f);
    else
        close(fds[0]);
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 0;
    return n;
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
 * differ. Never from PATH: ringd runs it with root's privileges (main.c checks who may
 * change it, and every directory above it, before using it).
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

/* ringrun next to this ringd (installed), in the build tree, or on PATH. */
/* Open MPI's mpirun on PATH (jobs are started with execve, so it must be absolute). */
static void find_mpirun(char *out, size_t len)
{
    const char *path = getenv("PATH");
    char cand[2200];
    while (path != NULL && *path) {
        size_t k = strcspn(path, ":");
        snprintf(cand, sizeof(cand), "%.*s/mpirun", (int)k, path);
        if (k > 0 && path[0] == '/' && access(cand, X_OK) == 0 &&
            snprintf(out, len, "%s", cand) > 0)
            return;
        path += k + (path[k] == ':');
    }
    snprintf(out, len, "/usr/bin/mpirun");
}

static void find_ringrun(char *out, size_t len)
{
    char self[2048], cand[2200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    const char *path = getenv("PATH");

    if (n > 0) {
        char *slash;
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(cand, sizeof(cand), "%s/ringrun", self);
            if (access(cand, X_OK) == 0 && snprintf(out, len, "%s", cand) > 0)
                return;
            snprintf(cand, sizeof(cand), "%s/../worker/ringrun/ringrun", self);
            if (access(cand, X_OK) == 0 && realpath(cand, self) != NULL &&
                snprintf(out, len, "%s", self) > 0)
                return;
        }
    }
    while (path != NULL && *path) {
        size_t k = strcspn(path, ":");
        snprintf(cand, sizeof(cand), "%.*s/ringrun", (int)k, path);
        if (access(cand, X_OK) == 0 && snprintf(out, len, "%s", cand) > 0)
            return;
        path += k + (path[k] == ':');
    }
    snprintf(out, len, "ringrun"); /* reported when the first attempt fails to start */
}

static int parse_int(const char *v, int lo, int hi, int *out)
{
    char *end;
    long x;
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || x < lo || x > hi)
        return -1;
    *out = (int)x;
    return 0;
}

static int parse_double(const char *v, double lo, double hi, double *out)
{
    char *end;
    double x;
    errno = 0;
    x = strtod(v, &end);
    if (errno || end == v || *end != '\0' || !(x >= lo && x <= hi))
        return -1;
    *out = x;
    return 0;
}

/* One of the scheduler's policies (scheduler/policy.h). */
static int policy_ok(const char *v)
{
    return !strcmp(v, "fifo") || !strcmp(v, "priority") || !strcmp(v, "tiresias") ||
           !strcmp(v, "dynamic");
}

/* Whether this ringd has the Slurm backend (built with libslurm: RING_WITH_SLURM). */
#ifdef RING_HAVE_SLURM
#define RING_SLURM_BUILT 1
#else
#define RING_SLURM_BUILT 0
#endif

static int parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
        return *out = 1, 0;
    if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
        return *out = 0, 0;
    return -1;
}

/* Sets one key; where says where it came from, for the message. */
static int set(struct config *c, const char *key, const char *v, const char *where,
               struct error *err)
{
    int ok = 0;
    if (!strcmp(key, "listen")) {
        /* HOST:PORT with a numeric port: getaddrinfo would wrap 99999 around to 34463 and
         * look up a service name */
        const char *colon = strrchr(v, ':');
        int port;
        ok = strlen(v) < sizeof(c->listen) && colon != NULL &&
             parse_int(colon + 1, 0, 65535, &port) == 0 && isdigit((unsigned char)colon[1]) &&
             snprintf(c->listen, sizeof(c->listen), "%s", v) > 0;
    } else if (!strcmp(key, "data_dir"))
        ok = *v && strlen(v) < sizeof(c->data_dir) &&
             snprintf(c->data_dir, sizeof(c->data_dir), "%s", v) > 0;
    else if (!strcmp(key, "no_auth"))
        ok = parse_bool(v, &c->no_auth) == 0;
    else if (!strcmp(key, "slots"))
        ok = parse_int(v, 1, 1 << 20, &c->slots) == 0;
    else if (!strcmp(key, "gpus"))
        ok = parse_int(v, 0, 1 << 16, &c->gpus) == 0;
    else if (!strcmp(key, "threads"))
        ok = parse_int(v, 1, 1024, &c->threads) == 0;
    else if (!strcmp(key, "connection_limit"))
        ok = parse_int(v, 1, 1 << 20, &c->connection_limit) == 0;
    else if (!strcmp(key, "per_ip_connection_limit"))
        ok = parse_int(v, 0, 1 << 20, &c->per_ip_limit) == 0;
    else if (!strcmp(key, "connection_timeout"))
        ok = parse_int(v, 1, 86400, &c->timeout_s) == 0;
    else if (!strcmp(key, "streams_per_token"))
        ok = parse_int(v, 1, 1 << 20, &c->streams_per_token) == 0;
    else if (!strcmp(key, "ringrun"))
        ok = *v && strlen(v) < sizeof(c->ringrun) &&
             snprintf(c->ringrun, sizeof(c->ringrun), "%s", v) > 0;
    else if (!strcmp(key, "mpirun"))
        ok = *v == '/' && strlen(v) < sizeof(c->mpirun) &&
             snprintf(c->mpirun, sizeof(c->mpirun), "%s", v) > 0;
    else if (!strcmp(key, "kill_grace"))
        ok = parse_int(v, 0, 3600, &c->kill_grace_s) == 0;
    else if (!strcmp(key, "default_user"))
        ok = strlen(v) < sizeof(c->default_user) &&
             snprintf(c->default_user, sizeof(c->default_user), "%s", v) >= 0;
    else if (!strcmp(key, "isolation"))
        ok = (!strcmp(v, "auto") && (c->isolation = ISOLATION_AUTO, 1)) ||
             (!strcmp(v, "namespace") && (c->isolation = ISOLATION_NAMESPACE, 1)) ||
             (!strcmp(v, "none") && (c->isolation = ISOLATION_NONE, 1));
    else if (!strcmp(key, "tls_cert"))
        ok = strlen(v) < sizeof(c->tls_cert) &&
             snprintf(c->tls_cert, sizeof(c->tls_cert), "%s", v) >= 0;
    else if (!strcmp(key, "tls_key"))
        ok = strlen(v) < sizeof(c->tls_key) &&
             snprintf(c->tls_key, sizeof(c->tls_key), "%s", v) >= 0;
    else if (!strcmp(key, "allow_insecure_http"))
        ok = parse_bool(v, &c->insecure_http) == 0;
    else if (!strcmp(key, "backend"))
        ok = (!strcmp(v, "local") || (RING_SLURM_BUILT && !strcmp(v, "slurm"))) &&
             snprintf(c->backend, sizeof(c->backend), "%s", v) > 0;
    else if (!strcmp(key, "slurm_partition"))
        ok = strlen(v) < sizeof(c->slurm_partition) && !strpbrk(v, ",=") &&
             snprintf(c->slurm_partition, sizeof(c->slurm_partition), "%s", v) >= 0;
    else if (!strcmp(key, "slurm_account"))
        ok = strlen(v) < sizeof(c->slurm_account) && !strpbrk(v, ",=") &&
             snprintf(c->slurm_account, sizeof(c->slurm_account), "%s", v) >= 0;
    else if (!strcmp(key, "slurm_qos"))
        ok = strlen(v) < sizeof(c->slurm_qos) && !strpbrk(v, ",=") &&
             snprintf(c->slurm_qos, sizeof(c->slurm_qos), "%s", v) >= 0;
    else if (!strcmp(key, "slurm_time_limit"))
        ok = parse_int(v, 0, 525600, &c->slurm_time_limit) == 0;
    else if (!strcmp(key, "slurm_work_dir"))
        ok = *v == '/' && strlen(v) < sizeof(c->slurm_work_dir) &&
             snprintf(c->slurm_work_dir, sizeof(c->slurm_work_dir), "%s", v) > 0;
    else if (!strcmp(key, "job_limits")) {
        struct local_limits limits;
        struct error why;
        if (strlen(v) >= sizeof(c->job_limits) || local_limits_parse(v, &limits, &why) < 0)
            return errprintf(err, "%s: %s", where,
                             strlen(v) >= sizeof(c->job_limits) ? "job_limits is too long"
                                                                : why.text);
        ok = snprintf(c->job_limits, sizeof(c->job_limits), "%s", v) >= 0;
    } else if (!strcmp(key, "backend_options"))
        ok = strlen(v) < sizeof(c->backend_options) &&
             snprintf(c->backend_options, sizeof(c->backend_options), "%s", v) >= 0;
    else if (!strcmp(key, "policy"))
        ok = policy_ok(v) && snprintf(c->policy, sizeof(c->policy), "%s", v) > 0;
    else if (!strcmp(key, "sched_interval"))
        ok = parse_double(v, 0.05, 86400, &c->sched_interval) == 0;
    else if (!strcmp(key, "restart_cost"))
        ok = parse_double(v, 0, 86400, &c->restart_cost) == 0;
    else if (!strcmp(key, "hysteresis"))
        ok = parse_double(v, 0, 1000, &c->hysteresis) == 0;
    else
        return errprintf(err, "%s: unknown setting '%s' (see ringd --help)", where, key);
    if (!ok)
        return errprintf(err, "%s: bad value '%s' for %s (see ringd --help)", where, v, key);
    return 0;
}

static int load_file(struct config *c, const char *path, struct error *err)
{
    FILE *f = fopen(path, "r");
    char line[4096], where[2200];
    int n = 0;

    if (f == NULL)
        return errprintf(err, "cannot read --config %s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL) {
        char *s = line, *eq, *k, *v, *e;
        n++;
        if ((e = strchr(s, '#')) != NULL)
            *e = '\0';
        while (isspace((unsigned char)*s))
            s++;
        if (*s == '\0')
            continue;
        snprintf(where, sizeof(where), "%s:%d", path, n);
        if ((eq = strchr(s, '=')) == NULL) {
            fclose(f);
            return errprintf(err, "%s: want 'key = value'", where);
        }
        *eq = '\0';
        k = s;
        v = eq + 1;
        for (e = eq; e > k && isspace((unsigned char)e[-1]); e--)
            e[-1] = '\0';
        while (isspace((unsigned char)*v))
            v++;
        for (e = v + strlen(v); e > v && isspace((unsigned char)e[-1]); e--)
            e[-1] = '\0';
        if (set(c, k, v, where, err) < 0) {
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ringd [--listen HOST:PORT] [--data-dir DIR] [--config FILE] [--no-auth]\n"
            "             [--default-user NAME] [--isolation auto|namespace|none]\n"
            "             [--tls-cert FILE --tls-key FILE] [--allow-insecure-http]\n"
            "             [--backend local|slurm] [--slurm-partition P] [--slurm-account A]\n"
            "             [--slurm-qos Q] [--slurm-time-limit MIN] [--slurm-work-dir DIR]\n"
            "             [--print-config] [--version] [--help]\n"
            "\n"
            "The Ringmaster job service: a REST API (see /v1/openapi.json) over a SQLite store.\n"
            "\n"
            "Settings (file key, environment variable, default):\n"
            "  listen                   RINGD_LISTEN     127.0.0.1:8080 (port 0: any free port)\n"
            "  data_dir                 RINGD_DATA_DIR   /var/lib/ringmaster\n"
            "  no_auth                  RINGD_NO_AUTH    false (allowed on loopback only)\n"
            "  slots                    RINGD_SLOTS      number of CPUs\n"
            "  gpus                     RINGD_GPUS       GPUs nvidia-smi lists, else 0\n"
            "  threads                  RINGD_THREADS    number of CPUs (HTTP thread pool)\n"
            "  connection_limit         -                1024\n"
            "  per_ip_connection_limit  -                256 (0: none)\n"
            "  connection_timeout       -                30 seconds\n"
            "  streams_per_token        RINGD_STREAMS_PER_TOKEN  32 (event streams and log\n"
            "                                            follows one token holds at once)\n"
            "  ringrun                  RINGD_RINGRUN    next to ringd, else on PATH\n"
            "  mpirun                   -                on PATH (jobs with launcher mpirun)\n"
            "  kill_grace               -                10 seconds (SIGTERM, then SIGKILL)\n"
            "  default_user             RINGD_DEFAULT_USER  none: the Unix user of --no-auth jobs\n"
            "                                            and of tokens without one (as root)\n"
            "  isolation                RINGD_ISOLATION  auto: hide data_dir from jobs in a\n"
            "                                            private mount namespace when possible\n"
            "  tls_cert, tls_key        RINGD_TLS_CERT, RINGD_TLS_KEY  none: serve HTTPS (PEM)\n"
            "  allow_insecure_http      -                false: tokens in clear text off loopback\n"
            "  backend                  RINGD_BACKEND    local (where attempts run): local, or\n"
            "                                            slurm (a batch job per attempt, ranks\n"
            "                                            under srun --mpi=pmix; built with\n"
            "                                            libslurm)\n"
            "  slurm_partition          RINGD_SLURM_PARTITION  Slurm's default partition\n"
            "  slurm_account            RINGD_SLURM_ACCOUNT    none\n"
            "  slurm_qos                RINGD_SLURM_QOS        none\n"
            "  slurm_time_limit         RINGD_SLURM_TIME_LIMIT 0: the partition's (minutes)\n"
            "  slurm_work_dir           RINGD_SLURM_WORK_DIR   required with backend slurm: a\n"
            "                                            directory every Slurm node sees, for\n"
            "                                            the jobs' runs/ and checkpoints/\n"
            "  backend_options          -                the backend's own key=value,...\n"
            "  job_limits               RINGD_JOB_LIMITS none: local jobs start with ringd's\n"
            "                                            limits; else NAME=VALUE[:HARD],... of\n"
            "                                            as core cpu data fsize memlock nofile\n"
            "                                            nproc stack (a number or unlimited)\n"
            "  policy                   RINGD_POLICY     fifo (fifo, priority, tiresias,\n"
            "                                            dynamic; PUT /v1/scheduler changes it)\n"
            "  sched_interval           -                60 seconds between policy passes\n"
            "  restart_cost             -                10 seconds a restart costs a job\n"
            "                                            until measured (dynamic)\n"
            "  hysteresis               -                2: a resize must gain that many\n"
            "                                            restarts' worth (dynamic)\n"
            "\n"
            "Exit status: 0 after SIGTERM/SIGINT, 64 bad configuration, 69 address in use or\n"
            "data directory held by another ringd, 70 internal error.\n");
}

int config_load(struct config *c, int argc, char **argv, struct error *err)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"data-dir", required_argument, NULL, 'd'},
        {"config", required_argument, NULL, 'c'},
        {"no-auth", no_argument, NULL, 'n'},
        {"print-config", no_argument, NULL, 'p'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {"default-user", required_argument, NULL, 'u'},
        {"isolation", required_argument, NULL, 'i'},
        {"tls-cert", required_argument, NULL, 'C'},
        {"tls-key", required_argument, NULL, 'K'},
        {"allow-insecure-http", no_argument, NULL, 'I'},
        {"backend", required_argument, NULL, 'B'},
        {"slurm-partition", required_argument, NULL, 'P'},
        {"slurm-account", required_argument, NULL, 'A'},
        {"slurm-qos", required_argument, NULL, 'Q'},
        {"slurm-time-limit", required_argument, NULL, 'T'},
        {"slurm-work-dir", required_argument, NULL, 'W'},
        {NULL, 0, NULL, 0},
    };
    static const char *const envs[][2] = {
        {"RINGD_LISTEN", "listen"},
        {"RINGD_DATA_DIR", "data_dir"},
        {"RINGD_NO_AUTH", "no_auth"},
        {"RINGD_SLOTS", "slots"},
        {"RINGD_GPUS", "gpus"},
        {"RINGD_THREADS", "threads"},
        {"RINGD_STREAMS_PER_TOKEN", "streams_per_token"},
        {"RINGD_RINGRUN", "ringrun"},
        {"RINGD_DEFAULT_USER", "default_user"},
        {"RINGD_ISOLATION", "isolation"},
        {"RINGD_TLS_CERT", "tls_cert"},
        {"RINGD_TLS_KEY", "tls_key"},
        {"RINGD_BACKEND", "backend"},
        {"RINGD_POLICY", "policy"},
        {"RINGD_SLURM_PARTITION", "slurm_partition"},
        {"RINGD_SLURM_ACCOUNT", "slurm_account"},
        {"RINGD_SLURM_QOS", "slurm_qos"},
        {"RINGD_SLURM_TIME_LIMIT", "slurm_time_limit"},
        {"RINGD_SLURM_WORK_DIR", "slurm_work_dir"},
        {"RINGD_JOB_LIMITS", "job_limits"},
    };
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int o, li = 0, print = 0;

    memset(c, 0, sizeof(*c));
    snprintf(c->listen, sizeof(c->listen), "127.0.0.1:8080");
    snprintf(c->data_dir, sizeof(c->data_dir), "/var/lib/ringmaster");
    c->slots = c->threads = cpus > 0 ? (int)cpus : 1;
    c->gpus = -1;
    c->connection_limit = 1024;
    c->per_ip_limit = 256;
    c->timeout_s = 30;
    /* A stream lasts as long as its job, and every one holds a connection. A user follows
     * a few jobs at once (their events and a log each: ringctl, a dashboard); 32 lets one
     * token follow 16, while it takes 32 tokens at their limit to fill the 1024
     * connections of connection_limit's default. */
    c->streams_per_token = 32;
    c->kill_grace_s = 10;
    snprintf(c->backend, sizeof(c->backend), "local");
    snprintf(c->policy, sizeof(c->policy), "fifo");
    c->sched_interval = 60;
    /* Until a job's own stop and start are measured: a few seconds for the example trainer
     * here, tens of seconds for a large model loading its checkpoint from shared storage. */
    c->restart_cost = 10;
    c->hysteresis = 2;
    /* The file first (flags and environment override it), so find --config before the rest. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc && load_file(c, argv[i + 1], err) < 0)
            return -1;
        if (!strncmp(argv[i], "--config=", 9) && load_file(c, argv[i] + 9, err) < 0)
            return -1;
    }
    for (size_t i = 0; i < sizeof(envs) / sizeof(envs[0]); i++) {
        const char *v = getenv(envs[i][0]);
        if (v != NULL && *v && set(c, envs[i][1], v, envs[i][0], err) < 0)
            return -1;
    }
    opterr = 0;
    while ((o = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        switch (o) {
        case 'l':
            if (set(c, "listen", optarg, "--listen", err) < 0)
                return -1;
            break;
        case 'd':
            if (set(c, "data_dir", optarg, "--data-dir", err) < 0)
                return -1;
            break;
        case 'c':
            break; /* read above */
        case 'u':
            if (set(c, "default_user", optarg, "--default-user", err) < 0)
                return -1;
            break;
        case 'i':
            if (set(c, "isolation", optarg, "--isolation", err) < 0)
                return -1;
            break;
        case 'C':
            if (set(c, "tls_cert", optarg, "--tls-cert", err) < 0)
                return -1;
            break;
        case 'K':
            if (set(c, "tls_key", optarg, "--tls-key", err) < 0)
                return -1;
            break;
        case 'I':
            c->insecure_http = 1;
            break;
        case 'B':
        case 'P':
        case 'A':
        case 'Q':
        case 'T':
        case 'W': {
            /* --backend and --slurm-*: the flag is the key with '-' for '_' */
            char key[64], name[80];
            snprintf(key, sizeof(key), "%s", opts[li].name);
            snprintf(name, sizeof(name), "--%s", key);
            for (char *k = key; *k; k++)
                *k = *k == '-' ? '_' : *k;
            if (set(c, key, optarg, name, err) < 0)
                return -1;
            break;
        }
        case 'n':
            c->no_auth = 1;
            break;
        case 'p':
            print = 1;
            break;
        case 'V':
            printf("ringd %s\n", RING_VERSION_STRING);
            return 1;
        case 'h':
            usage(stdout);
            return 1;
        default:
            return errprintf(err, "unknown option or missing value '%s' (see ringd --help)",
                             argv[optind - 1]);
        }
    }
    if (optind < argc)
        return errprintf(err, "unexpected argument '%s' (see ringd --help)", argv[optind]);
    if (c->gpus < 0)
        c->gpus = detect_gpus();
    if (c->ringrun[0] == '\0')
        find_ringrun(c->ringrun, sizeof(c->ringrun));
    if (c->mpirun[0] == '\0')
        find_mpirun(c->mpirun, sizeof(c->mpirun));
    find_exec_helper(c->exec_helper, sizeof(c->exec_helper));
    if ((c->tls_cert[0] == '\0') != (c->tls_key[0] == '\0'))
        return errprintf(err, "tls_cert and tls_key go together: give both, or neither");
    if (!strcmp(c->backend, "slurm") && c->slurm_work_dir[0] == '\0')
        return errprintf(err, "backend slurm needs slurm_work_dir (--slurm-work-dir DIR): a "
                              "directory every Slurm node sees, where the jobs' run and "
                              "checkpoint directories go");
    if (print) {
        config_print(c, stdout);
        return 1;
    }
    return 0;
}

void config_print(const struct config *c, FILE *f)
{
    fprintf(f,
            "listen = %s\ndata_dir = %s\nno_auth = %s\nslots = %d\ngpus = %d\nthreads = %d\n"
            "connection_limit = %d\nper_ip_connection_limit = %d\nconnection_timeout = %d\n"
            "streams_per_token = %d\n"
            "ringrun = %s\nmpirun = %s\nkill_grace = %d\ndefault_user = %s\nisolation = %s\n"
            "tls_cert = %s\ntls_key = %s\nallow_insecure_http = %s\nbackend = %s\n"
            "backend_options = %s\npolicy = %s\nsched_interval = %g\nrestart_cost = %g\n"
            "hysteresis = %g\nslurm_partition = %s\nslurm_account = %s\nslurm_qos = %s\n"
            "slurm_time_limit = %d\nslurm_work_dir = %s\njob_limits = %s\n",
            c->listen, c->data_dir, c->no_auth ? "true" : "false", c->slots, c->gpus, c->threads,
            c->connection_limit, c->per_ip_limit, c->timeout_s, c->streams_per_token, c->ringrun,
            c->mpirun, c->kill_grace_s, c->default_user,
            c->isolation == ISOLATION_NAMESPACE ? "namespace"
            : c->isolation == ISOLATION_NONE    ? "none"
                                                : "auto",
            c->tls_cert, c->tls_key, c->insecure_http ? "true" : "false", c->backend,
            c->backend_options, c->policy, c->sched_interval, c->restart_cost, c->hysteresis,
            c->slurm_partition, c->slurm_account, c->slurm_qos, c->slurm_time_limit,
            c->slurm_work_dir, c->job_limits);
}
