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

#include "config.h"
#include "scheduler/backend/backend.h"

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

static int parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
        return *out = 1, 0;
    if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
        return *out = 0, 0;
    return -1;
}

/* The backend whose setting key is, or NULL. */
static const struct backend_ops *backend_of(const char *key)
{
    const struct backend_ops *b;
    for (int i = 0; (b = backend_at(i)) != NULL; i++)
        for (const struct setting *st = b->settings; st && st->key; st++)
            if (strcmp(st->key, key) == 0)
                return b;
    return NULL;
}

/*
 * A key that is not ringd's own: a policy's (checked and set now: it is a number in a
 * range), or a backend's (kept as given: the backend's config op checks it at start, when
 * ringd knows which backend runs). Returns 0, or -1 with err.
 */
static int set_theirs(struct config *c, const char *key, const char *v, const char *where,
                      struct error *err)
{
    int i;
    if (policy_setting_find(key) != NULL) {
        if (policy_config(&c->params, key, v, NULL) < 0)
            return errprintf(err, "%s: bad value '%s' for %s (see ringd --help)", where, v, key);
        return 0;
    }
    if (backend_of(key) == NULL)
        return errprintf(err, "%s: unknown setting '%s' (see ringd --help)", where, key);
    for (i = 0; i < c->nvalues && strcmp(c->values[i].key, key) != 0; i++)
        ;
    if (i == CONFIG_VALUES_MAX || strlen(key) >= sizeof(c->values[i].key) ||
        strlen(v) >= sizeof(c->values[i].value))
        return errprintf(err, "%s: value too long for %s", where, key);
    snprintf(c->values[i].key, sizeof(c->values[i].key), "%s", key);
    snprintf(c->values[i].value, sizeof(c->values[i].value), "%s", v);
    c->nvalues += i == c->nvalues;
    return 0;
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
    else if (!strcmp(key, "tls_cert"))
        ok = strlen(v) < sizeof(c->tls_cert) &&
             snprintf(c->tls_cert, sizeof(c->tls_cert), "%s", v) >= 0;
    else if (!strcmp(key, "tls_key"))
        ok = strlen(v) < sizeof(c->tls_key) &&
             snprintf(c->tls_key, sizeof(c->tls_key), "%s", v) >= 0;
    else if (!strcmp(key, "allow_insecure_http"))
        ok = parse_bool(v, &c->insecure_http) == 0;
    else if (!strcmp(key, "backend"))
        ok = backend_find(v) != NULL && snprintf(c->backend, sizeof(c->backend), "%s", v) > 0;
    else if (!strcmp(key, "backend_options"))
        ok = strlen(v) < sizeof(c->backend_options) &&
             snprintf(c->backend_options, sizeof(c->backend_options), "%s", v) >= 0;
    else if (!strcmp(key, "policy"))
        ok = policy_find(v) != NULL && snprintf(c->policy, sizeof(c->policy), "%s", v) > 0;
    else if (!strcmp(key, "sched_interval"))
        ok = parse_double(v, 0.05, 86400, &c->sched_interval) == 0;
    else
        return set_theirs(c, key, v, where, err);
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

/* A setting's row of --help: key, environment variable, then its help, a line at a time. */
static void usage_row(FILE *f, const struct setting *st)
{
    const char *h = st->help, *env = st->env ? st->env : "-";
    size_t n = strcspn(h, "\n");
    fprintf(f, "  %-24s %-16s%s%.*s\n", st->key, env, strlen(env) < 16 ? " " : "  ", (int)n, h);
    for (h += n; *h == '\n'; h += n) {
        h++;
        n = strcspn(h, "\n");
        fprintf(f, "  %-24s %-16s %.*s\n", "", "", (int)n, h);
    }
}

static void usage(FILE *f)
{
    const struct backend_ops *b;
    const struct policy_ops *p;
    size_t col = 13;
    fprintf(f, "usage: ringd [--listen HOST:PORT] [--data-dir DIR] [--config FILE] [--no-auth]\n"
               "             [--default-user NAME] [--tls-cert FILE --tls-key FILE]\n"
               "             [--allow-insecure-http] [--backend NAME]\n"
               "            ");
    /* The backends' flags, wrapped at 90 columns. */
    for (int i = 0; (b = backend_at(i)) != NULL; i++)
        for (const struct setting *st = b->settings; st && st->key; st++)
            if (st->flag) {
                char flag[64];
                snprintf(flag, sizeof(flag), "%s", st->key);
                for (char *k = flag; *k; k++)
                    *k = *k == '_' ? '-' : *k;
                if (col + strlen(flag) + 6 > 90) {
                    fprintf(f, "\n            ");
                    col = 13;
                }
                col += (size_t)fprintf(f, " [--%s V]", flag);
            }
    fprintf(f,
            "\n             [--print-config] [--version] [--help]\n"
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
            "  tls_cert, tls_key        RINGD_TLS_CERT, RINGD_TLS_KEY  none: serve HTTPS (PEM)\n"
            "  allow_insecure_http      -                false: tokens in clear text off loopback\n"
            "  backend                  RINGD_BACKEND    local: where attempts run, one of\n");
    for (int i = 0; (b = backend_at(i)) != NULL; i++)
        fprintf(f, "  %-24s %-16s   %s: %s\n", "", "", b->name, b->summary);
    fprintf(f,
            "  backend_options          -                the backend's own key=value,...\n"
            "  policy                   RINGD_POLICY     fifo (%s;\n"
            "                                            PUT /v1/scheduler changes it)\n"
            "  sched_interval           -                60 seconds between policy passes\n",
            policy_names());
    for (int i = 0; (p = policy_at(i)) != NULL; i++)
        for (const struct policy_setting *ps = p->settings; ps && ps->s.key; ps++)
            usage_row(f, &ps->s);
    for (int i = 0; (b = backend_at(i)) != NULL; i++) {
        if (b->settings != NULL && b->settings->key != NULL)
            fprintf(f, "Settings of backend %s:\n", b->name);
        for (const struct setting *st = b->settings; st && st->key; st++)
            usage_row(f, st);
    }
    fprintf(f, "\n"
               "Exit status: 0 after SIGTERM/SIGINT, 64 bad configuration, 69 address in use or\n"
               "data directory held by another ringd, 70 internal error.\n");
}

/* ringd's own keys' environment variables (the backends' and policies' come with them). */
static const char *const ENVS[][2] = {
    {"RINGD_LISTEN", "listen"},
    {"RINGD_DATA_DIR", "data_dir"},
    {"RINGD_NO_AUTH", "no_auth"},
    {"RINGD_SLOTS", "slots"},
    {"RINGD_GPUS", "gpus"},
    {"RINGD_THREADS", "threads"},
    {"RINGD_STREAMS_PER_TOKEN", "streams_per_token"},
    {"RINGD_RINGRUN", "ringrun"},
    {"RINGD_DEFAULT_USER", "default_user"},
    {"RINGD_TLS_CERT", "tls_cert"},
    {"RINGD_TLS_KEY", "tls_key"},
    {"RINGD_BACKEND", "backend"},
    {"RINGD_POLICY", "policy"},
};

/* ringd's own flags; the settings of backends and policies that have one follow them. */
static const struct option OPTS[] = {
    {"listen", required_argument, NULL, 'l'},
    {"data-dir", required_argument, NULL, 'd'},
    {"config", required_argument, NULL, 'c'},
    {"no-auth", no_argument, NULL, 'n'},
    {"print-config", no_argument, NULL, 'p'},
    {"version", no_argument, NULL, 'V'},
    {"help", no_argument, NULL, 'h'},
    {"default-user", required_argument, NULL, 'u'},
    {"tls-cert", required_argument, NULL, 'C'},
    {"tls-key", required_argument, NULL, 'K'},
    {"allow-insecure-http", no_argument, NULL, 'I'},
    {"backend", required_argument, NULL, 'B'},
};
#define NOPTS (sizeof(OPTS) / sizeof(OPTS[0]))
/* getopt_long's value for the i-th flag of the backends' and policies' settings */
#define THEIR_FLAG 1000
/* How many flags they may have: every backend's, with room. */
#define THEIR_FLAGS_MAX 32

/* Every setting of a backend or a policy, in one list: what --help, the environment and
 * the flags go through. Fills out (at most max) and returns how many. */
static int their_settings(const struct setting **out, int max)
{
    const struct backend_ops *b;
    const struct policy_ops *p;
    int n = 0;
    for (int i = 0; (p = policy_at(i)) != NULL; i++)
        for (const struct policy_setting *ps = p->settings; ps && ps->s.key && n < max; ps++)
            out[n++] = &ps->s;
    for (int i = 0; (b = backend_at(i)) != NULL; i++)
        for (const struct setting *st = b->settings; st && st->key && n < max; st++)
            out[n++] = st;
    return n;
}

/* The defaults, before the file, the environment and the flags. */
static void defaults(struct config *c)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const struct policy_ops *p;

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
    /* The policies' own defaults, then ringd's for their settings (dynamic's restart cost:
     * until a job's own stop and start are measured, a few seconds for the example trainer
     * here, tens of seconds for a large model loading its checkpoint from shared storage). */
    policy_params_default(&c->params);
    for (int i = 0; (p = policy_at(i)) != NULL; i++)
        for (const struct policy_setting *ps = p->settings; ps && ps->s.key; ps++)
            policy_config(&c->params, ps->s.key, ps->s.dflt, NULL);
}

/* The environment: ringd's variables, then those of the backends' and policies' settings. */
static int load_env(struct config *c, struct error *err)
{
    const struct setting *theirs[64];
    int n = their_settings(theirs, 64);
    for (size_t i = 0; i < sizeof(ENVS) / sizeof(ENVS[0]); i++) {
        const char *v = getenv(ENVS[i][0]);
        if (v != NULL && *v && set(c, ENVS[i][1], v, ENVS[i][0], err) < 0)
            return -1;
    }
    for (int i = 0; i < n; i++) {
        const char *v = theirs[i]->env ? getenv(theirs[i]->env) : NULL;
        if (v != NULL && *v && set(c, theirs[i]->key, v, theirs[i]->env, err) < 0)
            return -1;
    }
    return 0;
}

/*
 * The flags. Returns 0, 1 when ringd should exit 0 (--help, --version, --print-config), or
 * -1 with err.
 */
static int load_flags(struct config *c, int argc, char **argv, int *print, struct error *err)
{
    const struct setting *theirs[64], *flagged[THEIR_FLAGS_MAX];
    struct option opts[NOPTS + THEIR_FLAGS_MAX + 1];
    char names[THEIR_FLAGS_MAX][64];
    int n = their_settings(theirs, 64), nf = 0, o, li = 0;

    memcpy(opts, OPTS, sizeof(OPTS));
    for (int i = 0; i < n && nf < THEIR_FLAGS_MAX; i++) {
        if (!theirs[i]->flag)
            continue;
        snprintf(names[nf], sizeof(names[nf]), "%s", theirs[i]->key);
        for (char *k = names[nf]; *k; k++)
            *k = *k == '_' ? '-' : *k;
        opts[NOPTS + nf] = (struct option){names[nf], required_argument, NULL, THEIR_FLAG + nf};
        flagged[nf++] = theirs[i];
    }
    opts[NOPTS + nf] = (struct option){NULL, 0, NULL, 0};
    opterr = 0;
    while ((o = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        char where[80];
        const char *key = NULL;
        snprintf(where, sizeof(where), "--%s", opts[li].name);
        switch (o) {
        case 'l':
            key = "listen";
            break;
        case 'd':
            key = "data_dir";
            break;
        case 'c':
            break; /* read first */
        case 'u':
            key = "default_user";
            break;
        case 'C':
            key = "tls_cert";
            break;
        case 'K':
            key = "tls_key";
            break;
        case 'B':
            key = "backend";
            break;
        case 'I':
            c->insecure_http = 1;
            break;
        case 'n':
            c->no_auth = 1;
            break;
        case 'p':
            *print = 1;
            break;
        case 'V':
            printf("ringd %s\n", RING_VERSION_STRING);
            return 1;
        case 'h':
            usage(stdout);
            return 1;
        default:
            if (o >= THEIR_FLAG && o < THEIR_FLAG + nf) {
                key = flagged[o - THEIR_FLAG]->key;
                break;
            }
            return errprintf(err, "unknown option or missing value '%s' (see ringd --help)",
                             argv[optind - 1]);
        }
        if (key != NULL && set(c, key, optarg, where, err) < 0)
            return -1;
    }
    if (optind < argc)
        return errprintf(err, "unexpected argument '%s' (see ringd --help)", argv[optind]);
    return 0;
}

int config_load(struct config *c, int argc, char **argv, struct error *err)
{
    int print = 0, rc;

    defaults(c);
    /* The file first (flags and environment override it), so find --config before the rest. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc && load_file(c, argv[i + 1], err) < 0)
            return -1;
        if (!strncmp(argv[i], "--config=", 9) && load_file(c, argv[i] + 9, err) < 0)
            return -1;
    }
    if (load_env(c, err) < 0)
        return -1;
    if ((rc = load_flags(c, argc, argv, &print, err)) != 0)
        return rc;
    if (c->gpus < 0)
        c->gpus = detect_gpus();
    if (c->ringrun[0] == '\0')
        find_ringrun(c->ringrun, sizeof(c->ringrun));
    if (c->mpirun[0] == '\0')
        find_mpirun(c->mpirun, sizeof(c->mpirun));
    if ((c->tls_cert[0] == '\0') != (c->tls_key[0] == '\0'))
        return errprintf(err, "tls_cert and tls_key go together: give both, or neither");
    if (print) {
        config_print(c, stdout);
        return 1;
    }
    return 0;
}

void config_print(const struct config *c, FILE *f)
{
    const struct backend_ops *b;
    const struct policy_ops *p;
    fprintf(f,
            "listen = %s\ndata_dir = %s\nno_auth = %s\nslots = %d\ngpus = %d\nthreads = %d\n"
            "connection_limit = %d\nper_ip_connection_limit = %d\nconnection_timeout = %d\n"
            "streams_per_token = %d\n"
            "ringrun = %s\nmpirun = %s\nkill_grace = %d\ndefault_user = %s\n"
            "tls_cert = %s\ntls_key = %s\nallow_insecure_http = %s\nbackend = %s\n"
            "backend_options = %s\npolicy = %s\nsched_interval = %g\n",
            c->listen, c->data_dir, c->no_auth ? "true" : "false", c->slots, c->gpus, c->threads,
            c->connection_limit, c->per_ip_limit, c->timeout_s, c->streams_per_token, c->ringrun,
            c->mpirun, c->kill_grace_s, c->default_user, c->tls_cert, c->tls_key,
            c->insecure_http ? "true" : "false", c->backend, c->backend_options, c->policy,
            c->sched_interval);
    for (int i = 0; (p = policy_at(i)) != NULL; i++)
        for (const struct policy_setting *ps = p->settings; ps && ps->s.key; ps++)
            fprintf(f, "%s = %g\n", ps->s.key, policy_setting_value(ps, &c->params));
    for (int i = 0; (b = backend_at(i)) != NULL; i++) {
        for (const struct setting *st = b->settings; st && st->key; st++) {
            const char *v = st->dflt;
            for (int k = 0; k < c->nvalues; k++)
                if (strcmp(c->values[k].key, st->key) == 0)
                    v = c->values[k].value;
            fprintf(f, "%s = %s\n", st->key, v);
        }
    }
}

int config_values(const struct config *c, struct setting_value *out)
{
    for (int i = 0; i < c->nvalues; i++)
        out[i] = (struct setting_value){c->values[i].key, c->values[i].value};
    return c->nvalues;
}
