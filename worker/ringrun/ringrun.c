/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ringrun - launches the ranks of a libring job, like horovodrun or mpirun.
 *
 *   ringrun -np 4 ./train --epochs 10
 *   ringrun -np 8 -H node1:4,node2:4 ./train
 *   ringrun -np 8 ./train                  (inside a Slurm allocation: srun --mpi=pmix)
 *
 * ringrun serves the rendezvous that ranks meet at, starts each rank (fork/exec here, a
 * remote shell elsewhere) with the worker contract in its environment, forwards its
 * output with a rank prefix, forwards SIGINT/SIGTERM, and when one rank fails stops the
 * others after a grace period. It exits with the first failing rank's status.
 *
 * It also makes the job's secret (libring's auth.h), which every rank proves to the
 * rendezvous and to its peers. The secret never goes on a command line, which any user of a
 * host can read: a local rank finds it in its environment (readable only by its own user and
 * root), a remote one reads it from the remote shell's standard input, a pipe from ringrun.
 *
 * One thread and one poll loop do all of it: the rendezvous sockets, the ranks' pipes and
 * a signalfd for SIGCHLD and the termination signals.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "bootstrap/auth.h"
#include "child.h"
#include "common/log.h"
#include "hosts.h"
#include "base/base.h"
#include "options.h"
#include "output.h"
#include "rendezvous.h"
#include "ring.h"
#include "slurm.h"

struct rank {
    pid_t pid;
    int alive;
    int status;           /* wait status once reaped */
    struct output out[2]; /* stdout, stderr */
};

/* ringrun was started with SIGHUP ignored, as nohup starts it: it neither forwards a hangup
 * nor lets its ranks die of one, as the user asked. */
static int hup_ignored;

/* Finds prog as execvp would. Returns 0, EXIT_NOTFOUND or EXIT_NOEXEC, with a message. */
static int check_program(const char *prog)
{
    struct stat st;
    if (strchr(prog, '/') == NULL) {
        const char *path = getenv("PATH");
        char buf[PATH_MAX];
        int found_noexec = 0;
        if (path == NULL)
            path = "/usr/bin:/bin";
        while (*path) {
            const char *colon = strchr(path, ':');
            size_t n = colon ? (size_t)(colon - path) : strlen(path);
            snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, n ? path : ".", prog);
            if (stat(buf, &st) == 0 && S_ISREG(st.st_mode)) {
                if (access(buf, X_OK) == 0)
                    return 0;
                found_noexec = 1;
            }
            path += n + (colon ? 1 : 0);
        }
        if (found_noexec)
            return log_error("%s: found on PATH but not executable (chmod +x it)", prog),
                   EXIT_NOEXEC;
        return log_error("%s: command not found on PATH", prog), EXIT_NOTFOUND;
    }
    if (stat(prog, &st) < 0)
        return log_error("%s: %s", prog, strerror(errno)), EXIT_NOTFOUND;
    if (!S_ISREG(st.st_mode) || access(prog, X_OK) < 0)
        return log_error("%s: not an executable file (chmod +x it?)", prog), EXIT_NOEXEC;
    return 0;
}

/* Appends s to buf as one single-quoted shell word. Returns -1 if it does not fit. */
static int shell_quote(char *buf, size_t cap, size_t *len, const char *s)
{
    size_t n = *len;
#define PUT(ch)                                                                                    \
    do {                                                                                           \
        if (n + 1 >= cap)                                                                          \
            return -1;                                                                             \
        buf[n++] = (ch);                                                                           \
    } while (0)
    if (n > 0)
        PUT(' ');
    PUT('\'');
    for (; *s; s++) {
        if (*s == '\'') { /* close, escaped quote, reopen */
            PUT('\'');
            PUT('\\');
            PUT('\'');
            PUT('\'');
        } else {
            PUT(*s);
        }
    }
    PUT('\'');
#undef PUT
    buf[n] = '\0';
    *len = n;
    return 0;
}

/* The environment of one rank: the worker contract, as NAME=VALUE strings. */
struct rank_env {
    char vars[10][256];
    int n;
};

static void make_env(const struct opts *o, const struct placement *pl, int rank,
                     const char *rendezvous, struct rank_env *e)
{
    e->n = 0;
#define ADD(...) snprintf(e->vars[e->n++], sizeof(e->vars[0]), __VA_ARGS__)
    ADD("RING_RANK=%d", rank);
    ADD("RING_SIZE=%d", o->np);
    ADD("RING_LOCAL_RANK=%d", pl->local_rank);
    ADD("RING_LOCAL_SIZE=%d", pl->local_size);
    ADD("RING_CROSS_RANK=%d", pl->cross_rank);
    ADD("RING_CROSS_SIZE=%d", pl->cross_size);
    ADD("RING_RENDEZVOUS=%s", rendezvous);
    if (o->timeout_s > 0)
        ADD("RING_TIMEOUT_SECONDS=%d", o->timeout_s);
    if (o->gpus != NULL) {
        /* The local rank's group of gpus_per_rank ids from the list. */
        char list[200] = "";
        const char *p = o->gpus;
        int idx = 0, first = pl->local_rank * o->gpus_per_rank, len = 0;
        while (*p && idx < first + o->gpus_per_rank) {
            size_t k = strcspn(p, ",");
            if (idx >= first && len + (int)k + 2 < (int)sizeof(list))
                len += snprintf(list + len, sizeof(list) - (size_t)len, "%s%.*s", len ? "," : "",
                                (int)k, p);
            idx++;
            p += k + (p[k] == ',');
        }
        ADD("CUDA_VISIBLE_DEVICES=%s", list);
    }
#undef ADD
}

/*
 * What a remote rank's shell runs before the rank (as sh, whatever the login shell): it
 * reads the job's secret from its standard input into the environment, then execs "$0"
 * "$@", the env command that follows it on the command line.
 */
static const char remote_prelude[] =
    "IFS= read -r RING_JOB_SECRET || { echo 'ringrun: no job secret on standard input (does "
    "--rsh pass it on?)' >&2; exit 1; }; export RING_JOB_SECRET; exec \"$0\" \"$@\"";

/* The argv of a remote shell that starts one rank on another host. */
struct remote {
    char *words; /* a copy of --rsh, cut into words that av points into */
    char *av[64];
    char cmd[65536]; /* the one shell command line run on the remote host */
};

/*
 * Builds r->av = rsh words (with %h replaced by host, else host appended) followed by
 * "cd DIR && exec sh -c PRELUDE env VAR=... program args", every word single-quoted (see
 * remote_prelude). Returns 0, or -1 when out of memory or the line is too long. Free r->words
 * after use.
 */
static int remote_argv(const struct opts *o, const char *host, const struct rank_env *e,
                       struct remote *r)
{
    char cwd[PATH_MAX], *save = NULL, *w;
    size_t len = 0;
    int n = 0, has_host = 0;

    r->words = strdup(o->rsh);
    if (r->words == NULL || getcwd(cwd, sizeof(cwd)) == NULL)
        return -1;
    for (w = strtok_r(r->words, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (n >= 60)
            return -1;
        has_host |= strcmp(w, "%h") == 0;
        r->av[n++] = strcmp(w, "%h") == 0 ? (char *)host : w;
    }
    if (!has_host)
        r->av[n++] = (char *)host;
    r->cmd[0] = '\0';
    if (shell_quote(r->cmd, sizeof(r->cmd), &len, "cd") < 0 ||
        shell_quote(r->cmd, sizeof(r->cmd), &len, cwd) < 0 || len + 16 >= sizeof(r->cmd))
        return -1;
    strcat(r->cmd, " && exec sh -c");
    len = strlen(r->cmd);
    if (shell_quote(r->cmd, sizeof(r->cmd), &len, remote_prelude) < 0 ||
        shell_quote(r->cmd, sizeof(r->cmd), &len, "env") < 0)
        return -1;
    for (int i = 0; i < e->n; i++) {
        if (shell_quote(r->cmd, sizeof(r->cmd), &len, e->vars[i]) < 0)
            return -1;
    }
    for (int i = 0; i < o->nx; i++) {
        char kv[4096];
        const char *v = strchr(o->xvars[i], '=') ? NULL : getenv(o->xvars[i]);
        if (strchr(o->xvars[i], '=') == NULL && v == NULL)
            continue; /* -x NAME of an unset variable passes nothing */
        snprintf(kv, sizeof(kv), "%s%s%s", o->xvars[i], v ? "=" : "", v ? v : "");
        if (shell_quote(r->cmd, sizeof(r->cmd), &len, kv) < 0)
            return -1;
    }
    for (char **a = o->argv; *a; a++) {
        if (shell_quote(r->cmd, sizeof(r->cmd), &len, *a) < 0)
            return -1;
    }
    r->av[n++] = r->cmd;
    r->av[n] = NULL;
    return 0;
}

static int open_output_file(const char *dir, int rank, const char *name)
{
    char path[PATH_MAX];
    int fd;
    snprintf(path, sizeof(path), "%s/rank.%d", dir, rank);
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return log_error("cannot create %s: %s", path, strerror(errno)), -1;
    snprintf(path, sizeof(path), "%s/rank.%d/%s", dir, rank, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        log_error("cannot create %s: %s", path, strerror(errno));
    return fd;
}

/*
 * The standard input of a remote rank's shell: a pipe that holds the job's secret on one
 * line (remote_prelude reads it), then ends. Returns its read end, or -1.
 */
static int secret_pipe(const char *secret_line)
{
    int in[2];
    size_t n = strlen(secret_line);

    if (pipe2(in, O_CLOEXEC) < 0)
        return log_error("pipe: %s", strerror(errno)), -1;
    /* Far below a pipe's buffer (PIPE_BUF even): one write, and it never blocks. */
    if (write(in[1], secret_line, n) != (ssize_t)n) {
        log_error("pipe: %s", strerror(errno));
        close(in[0]);
        close(in[1]);
        return -1;
    }
    close(in[1]);
    return in[0];
}

/*
 * Starts one rank with argv (a local program, or the remote shell) in a process group of
 * its own, so that signals and kills reach everything it starts. A local rank gets env and
 * secret_env (RING_JOB_SECRET=...) in its environment; a remote one reads secret_line on its
 * standard input. Returns 0 or -1.
 */
static int spawn(struct rank *rk, int rank, char *const *argv, const struct rank_env *env,
                 int local, const char *secret_env, const char *secret_line, const char *output_dir)
{
    int out[2], err[2], in = local ? -1 : secret_pipe(secret_line);
    pid_t pid, parent = getpid();

    if (!local && in < 0)
        return -1;
    if (pipe2(out, O_CLOEXEC) < 0) {
        if (in >= 0)
            close(in);
        return log_error("pipe: %s", strerror(errno)), -1;
    }
    if (pipe2(err, O_CLOEXEC) < 0) {
        if (in >= 0)
            close(in);
        close(out[0]);
        close(out[1]);
        return log_error("pipe: %s", strerror(errno)), -1;
    }
    pid = fork();
    if (pid < 0) {
        log_error("fork: %s", strerror(errno));
        if (in >= 0)
            close(in);
        close(out[0]);
        close(out[1]);
        close(err[0]);
        close(err[1]);
        return -1;
    }
    if (pid == 0) {
        /* A group of its own, so that signals and kills reach everything the rank starts;
         * and if ringrun dies without a chance to forward anything (SIGKILL, OOM), its
         * ranks must not live on as orphans holding GPUs and ports. */
        if (child_setup(parent, in, out[1], err[1]) < 0)
            _exit(EXIT_OSERR);
        /* ringrun forwards these to the rank: they must act there, even when ringrun was
         * started with them ignored (a shell script's background command ignores SIGINT),
         * which exec would otherwise pass on. A SIGHUP ignored on purpose (nohup) stays so. */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (!hup_ignored)
            signal(SIGHUP, SIG_DFL);
        if (local) {
            for (int i = 0; i < env->n; i++)
                putenv((char *)env->vars[i]);
            putenv((char *)secret_env);
        }
        execvp(argv[0], argv);
        dprintf(STDERR_FILENO, "ringrun: rank %d: cannot execute %s: %s\n", rank, argv[0],
                strerror(errno));
        _exit(errno == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC);
    }
    setpgid(pid, pid); /* also here, so a signal sent right after fork reaches the group */
    if (in >= 0)
        close(in);
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    rk->pid = pid;
    rk->alive = 1;
    output_init(&rk->out[0], out[0], rank, 0,
                output_dir ? open_output_file(output_dir, rank, "stdout") : -1);
    output_init(&rk->out[1], err[0], rank, 1,
                output_dir ? open_output_file(output_dir, rank, "stderr") : -1);
    return 0;
}

static void signal_all(struct rank *ranks, int np, int sig)
{
    for (int i = 0; i < np; i++) {
        if (ranks[i].alive)
            kill(-ranks[i].pid, sig);
    }
}

/* Exit status in the shell's convention: the code, or 128 + the signal. */
static int shell_status(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

/* The address remote ranks should use to reach us: the route to the first remote host. */
static int guess_rdv_addr(const struct opts *o, const struct placement *pl, char *out, size_t cap)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res;
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd, rc = -1;

    for (int r = 0; r < o->np; r++) {
        const char *h = o->hosts.hosts[pl[r].host].name;
        if (hosts_is_local(h))
            continue;
        if (getaddrinfo(h, "9", &hints, &res) != 0)
            return log_error("cannot resolve host '%s'; give --rendezvous-addr", h), -1;
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        /* A UDP connect sends nothing; it only picks the route and source address. */
        if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&sa, &len) == 0 &&
            inet_ntop(AF_INET, &sa.sin_addr, out, (socklen_t)cap) != NULL)
            rc = 0;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        if (rc < 0)
            log_error("no route to host '%s'; give --rendezvous-addr", h);
        return rc;
    }
    snprintf(out, cap, "127.0.0.1");
    return 0;
}

/* Removes every PMIX_* variable from the environment. */
static void unset_pmix_env(void)
{
    extern char **environ;
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; e != NULL && *e != NULL; e++) {
            if (strncmp(*e, "PMIX_", 5) == 0) {
                char name[256];
                size_t n = strcspn(*e, "=");
                snprintf(name, sizeof(name), "%.*s", (int)(n < sizeof(name) ? n : sizeof(name) - 1),
                         *e);
                unsetenv(name);
                again = 1; /* environ changed under us: start over */
                break;
            }
        }
    }
}

static int any_remote(const struct opts *o, const struct placement *pl)
{
    for (int r = 0; r < o->np; r++) {
        if (!hosts_is_local(o->hosts.hosts[pl[r].host].name))
            return 1;
    }
    return 0;
}

/* Runs the job as one Slurm step (slurm.c) instead of ranks of its own. */
static int run_slurm(const struct opts *o)
{
    char step[64];
    struct slurm_launch l = {
        .np = o->np,
        .gpus_per_rank = o->gpus_per_rank_given ? o->gpus_per_rank : 0,
        .grace_s = o->grace_s,
        .timeout_s = o->timeout_s,
        .output_dir = o->output_dir,
        .step_name = step,
        .verbose = o->verbose,
        .hup_ignored = hup_ignored,
        .argv = o->argv,
    };
    snprintf(step, sizeof(step), "ringrun.%d", (int)getpid());
    return slurm_run(&l);
}

/*
 * What must hold before anything starts: the rendezvous address (given, or guessed from
 * the placement pl), the program when a rank runs here, and --output-dir a directory.
 * Returns 0, or the exit status after saying why.
 */
static int check_launch(const struct opts *o, const struct placement *pl, char *addr, size_t len)
{
    int rc;
    if (o->rdv_addr != NULL)
        snprintf(addr, len, "%s", o->rdv_addr);
    else if (guess_rdv_addr(o, pl, addr, len) < 0)
        return EXIT_USAGE;
    for (int r = 0; r < o->np; r++) {
        if (hosts_is_local(o->hosts.hosts[pl[r].host].name)) {
            if ((rc = check_program(o->argv[0])) != 0)
                return rc;
            break;
        }
    }
    if (o->output_dir != NULL && mkdir(o->output_dir, 0755) < 0 && errno != EEXIST) {
        log_error("cannot create --output-dir %s: %s", o->output_dir, strerror(errno));
        return EXIT_USAGE;
    }
    if (o->output_dir != NULL) { /* EEXIST: it may be a file, where no rank.N fits */
        struct stat st;
        if (stat(o->output_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
            log_error("--output-dir %s is not a directory", o->output_dir);
            return EXIT_USAGE;
        }
    }
    return 0;
}

/* A running job, as ringrun watches over it. */
struct job {
    const struct opts *o;
    const struct placement *pl;
    struct rank *ranks;
    struct rendezvous *rdv;
    struct pollfd *pfd;
    int npfd, sfd;
    int first_fail;   /* the first rank that failed, or -1 */
    int signals_seen; /* INT, TERM, HUP received */
    int64_t kill_at;  /* when the ranks left get SIGKILL, or -1 */
    int64_t drain_until;
};

/* Starts every rank: here with its secret in the environment, elsewhere through o->rsh
 * with it on stdin. Returns 0, or -1 after killing those started. */
static int spawn_all(struct job *j, const char *rendezvous, const char *secret_env,
                     const char *secret_line)
{
    const struct opts *o = j->o;
    for (int r = 0; r < o->np; r++) {
        const char *host = o->hosts.hosts[j->pl[r].host].name;
        struct rank_env env;
        int ok;
        make_env(o, &j->pl[r], r, rendezvous, &env);
        if (hosts_is_local(host)) {
            if (ringrun_verbose)
                log_info("rank %d: %s on %s (local rank %d/%d)", r, o->argv[0], host,
                         j->pl[r].local_rank, j->pl[r].local_size);
            ok = spawn(&j->ranks[r], r, o->argv, &env, 1, secret_env, NULL, o->output_dir);
        } else {
            static struct remote rem;
            if (remote_argv(o, host, &env, &rem) < 0) {
                free(rem.words);
                log_error("cannot build the remote command for rank %d (too long?)", r);
                signal_all(j->ranks, o->np, SIGKILL);
                return -1;
            }
            if (ringrun_verbose)
                log_info("rank %d: %s %s", r, o->rsh, rem.cmd);
            ok = spawn(&j->ranks[r], r, rem.av, &env, 0, NULL, secret_line, o->output_dir);
            free(rem.words);
        }
        if (ok < 0) {
            signal_all(j->ranks, o->np, SIGKILL);
            return -1;
        }
    }
    return 0;
}

/* The signals that came: the first is passed to every rank (and starts the grace period),
 * a second kills them. */
static void read_signals(struct job *j)
{
    for (;;) {
        struct signalfd_siginfo si;
        ssize_t k = read(j->sfd, &si, sizeof(si));
        if (k != (ssize_t)sizeof(si))
            break;
        if (si.ssi_signo == SIGCHLD)
            continue; /* reaped below */
        j->signals_seen++;
        if (j->signals_seen == 1) {
            log_info("got signal %d; passing it to every rank (again to kill them)",
                     (int)si.ssi_signo);
            signal_all(j->ranks, j->o->np, (int)si.ssi_signo);
            if (j->kill_at < 0)
                j->kill_at = ring__now_ms() + (int64_t)j->o->grace_s * 1000;
        } else {
            signal_all(j->ranks, j->o->np, SIGKILL);
        }
    }
}

/* Reaps the ranks that exited; the first that failed starts the others' grace period. */
static void reap(struct job *j)
{
    const struct opts *o = j->o;
    struct rank *ranks = j->ranks;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            break;
        for (int r = 0; r < o->np; r++) {
            if (ranks[r].pid != pid)
                continue;
            ranks[r].alive = 0;
            ranks[r].status = status;
            if (shell_status(status) != 0 && j->first_fail < 0) {
                j->first_fail = r;
                if (WIFSIGNALED(status))
                    log_error("rank %d was killed by signal %d", r, WTERMSIG(status));
                else
                    log_error("rank %d exited with status %d", r, WEXITSTATUS(status));
                if (j->kill_at < 0) {
                    int others = 0;
                    for (int k = 0; k < o->np; k++)
                        others += ranks[k].alive;
                    j->kill_at = ring__now_ms() + (int64_t)o->grace_s * 1000;
                    if (others > 0)
                        log_warning("stopping the other ranks in %d s", o->grace_s);
                }
            } else if (ringrun_verbose) {
                log_info("rank %d exited with status %d", r, shell_status(status));
            }
        }
    }
}

/*
 * The poll set of one turn into j->pfd: every open output pipe, the signalfd and the
 * rendezvous's sockets; the poll timeout into *timeout (-1: none): the nearest of the drain
 * or kill deadline and the rendezvous's own, after sending SIGKILL when the kill deadline
 * has come. Returns how many entries, or 0 when the job is over
 * (every rank gone and its pipes drained or given up on).
 */
static int poll_set(struct job *j, int *timeout)
{
    const struct opts *o = j->o;
    int n = 0, alive = 0, open_outputs = 0, rdv_timeout;
    int64_t now;

    *timeout = -1;
    for (int r = 0; r < o->np; r++) {
        alive += j->ranks[r].alive;
        for (int k = 0; k < 2; k++) {
            if (j->ranks[r].out[k].fd >= 0) {
                j->pfd[n++] = (struct pollfd){.fd = j->ranks[r].out[k].fd, .events = POLLIN};
                open_outputs++;
            }
        }
    }
    now = ring__now_ms();
    if (alive == 0) {
        /* Every rank is gone. A rank's own children may still hold its pipes open;
         * drain for a moment, then stop waiting for them. */
        if (open_outputs == 0)
            return 0;
        if (j->drain_until < 0)
            j->drain_until = now + 1000;
        if (now >= j->drain_until)
            return 0;
        *timeout = (int)(j->drain_until - now);
    } else if (j->kill_at >= 0) {
        if (now >= j->kill_at) {
            log_warning("killing the %d remaining rank%s", alive, alive == 1 ? "" : "s");
            signal_all(j->ranks, o->np, SIGKILL);
            j->kill_at = now + 1000; /* re-send if something ignores it (stuck in D) */
        }
        *timeout = (int)(j->kill_at - now);
    }
    j->pfd[n++] = (struct pollfd){.fd = j->sfd, .events = POLLIN};
    n += rendezvous_pollfds(j->rdv, j->pfd + n, j->npfd - n);
    rdv_timeout = rendezvous_timeout(j->rdv);
    if (rdv_timeout >= 0 && (*timeout < 0 || rdv_timeout < *timeout))
        *timeout = rdv_timeout;
    return n;
}

/* Watches the job until every rank has exited and its output is drained: the ranks'
 * output, the rendezvous, signals, exits. Returns 0, or -1 when poll failed (the ranks are
 * killed). */
static int supervise(struct job *j)
{
    for (;;) {
        int timeout, n = poll_set(j, &timeout);
        if (n == 0)
            return 0;
        if (poll(j->pfd, (nfds_t)n, timeout) < 0) {
            if (errno == EINTR)
                continue;
            log_error("poll: %s", strerror(errno));
            signal_all(j->ranks, j->o->np, SIGKILL);
            return -1;
        }
        rendezvous_handle(j->rdv, j->pfd, n);
        for (int r = 0; r < j->o->np; r++) {
            for (int k = 0; k < 2; k++)
                output_pump(&j->ranks[r].out[k]);
        }
        read_signals(j);
        reap(j);
    }
}

int main(int argc, char **argv)
{
    struct opts o = {0};
    struct placement *pl = NULL;
    struct job j = {.o = &o, .sfd = -1, .first_fail = -1, .kill_at = -1, .drain_until = -1};
    struct error err;
    struct ring__key key;
    char addr[64], rendezvous[96], hex[RING__KEY_HEX + 1];
    char secret_env[sizeof(RING__SECRET_ENV) + RING__KEY_HEX + 1];
    char secret_line[RING__KEY_HEX + 2];
    struct sigaction old;
    int rc = EXIT_OSERR;

    log_init("ringrun", LOG_STYLE_TEXT);
    if (options_parse(argc, argv, &o) < 0) {
        rc = EXIT_USAGE;
        goto out;
    }
    ringrun_verbose = o.verbose;
    hup_ignored = sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler == SIG_IGN;
    if (o.slurm) {
        rc = run_slurm(&o);
        goto out;
    }
    j.pl = pl = calloc((size_t)o.np, sizeof(*pl));
    j.ranks = calloc((size_t)o.np, sizeof(*j.ranks));
    if (pl == NULL || j.ranks == NULL) {
        log_error("out of memory for %d ranks", o.np);
        goto out;
    }
    if (hosts_place(&o.hosts, o.np, pl, &err) < 0) {
        log_error("%s", err.text);
        rc = EXIT_USAGE;
        goto out;
    }
    if ((rc = check_launch(&o, pl, addr, sizeof(addr))) != 0)
        goto out;
    rc = EXIT_OSERR;

    /* ringrun's ranks meet at its rendezvous. A ringrun that is itself a task of a PMIx
     * launcher (srun --mpi=pmix, mpirun) must not pass that launcher's PMIx identity on:
     * libring tries PMIx first and every rank would claim ringrun's place in that job. */
    unset_pmix_env();

    if (ring__key_generate(&key) < 0) {
        log_error("cannot make the job's secret: %s", ring_last_error());
        goto out;
    }
    ring__key_hex(&key, hex);
    snprintf(secret_env, sizeof(secret_env), "%s=%s", RING__SECRET_ENV, hex);
    snprintf(secret_line, sizeof(secret_line), "%s\n", hex);
    /* Local-only jobs keep the rendezvous off the network. */
    j.rdv =
        rendezvous_create(any_remote(&o, pl) ? "0.0.0.0" : "127.0.0.1", o.port, &key, o.np, &err);
    ring__key_wipe(&key);
    if (j.rdv == NULL) {
        log_error("cannot start the rendezvous: %s", err.text);
        rc = EXIT_UNAVAILABLE;
        goto out;
    }
    /* Every rank's two output pipes, the signalfd, and the rendezvous's sockets. */
    j.npfd = 2 * o.np + 1 + rendezvous_max_pollfds(j.rdv);
    if ((j.pfd = calloc((size_t)j.npfd, sizeof(*j.pfd))) == NULL) {
        log_error("out of memory for %d ranks", o.np);
        goto out;
    }
    snprintf(rendezvous, sizeof(rendezvous), "%s:%d", addr, rendezvous_port(j.rdv));
    if (ringrun_verbose)
        log_info("rendezvous at %s; %d ranks on %d hosts", rendezvous, o.np, pl[0].cross_size);
    if ((j.sfd = child_signalfd(hup_ignored)) < 0)
        goto out;
    if (spawn_all(&j, rendezvous, secret_env, secret_line) < 0 || supervise(&j) < 0)
        goto out;
    for (int r = 0; r < o.np; r++) {
        output_close(&j.ranks[r].out[0]);
        output_close(&j.ranks[r].out[1]);
    }
    rc = j.first_fail >= 0 ? shell_status(j.ranks[j.first_fail].status) : 0;
    if (rendezvous_refused(j.rdv) > 0)
        log_warning("the rendezvous closed %d connection%s that did not prove the job's secret",
                    rendezvous_refused(j.rdv), rendezvous_refused(j.rdv) == 1 ? "" : "s");
out:
    explicit_bzero(hex, sizeof(hex));
    explicit_bzero(secret_env, sizeof(secret_env));
    explicit_bzero(secret_line, sizeof(secret_line));
    if (j.sfd >= 0)
        close(j.sfd);
    rendezvous_destroy(j.rdv);
    hosts_free(&o.hosts);
    free(o.xvars);
    free(pl);
    free(j.ranks);
    free(j.pfd);
    return rc;
}
