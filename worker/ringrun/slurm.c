/* SPDX-License-Identifier: Apache-2.0 */
/* slurm.c - ringrun's launch through srun --mpi=pmix inside a Slurm allocation. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/stop_relay.h"
#include "options.h"
#include "output.h"
#include "slurm.h"

/* squeue and scancel answer in milliseconds; a slurmctld that does not answer in this long
 * is not going to, and ringrun falls back to signalling srun itself. */
#define HELPER_TIMEOUT_MS 10000
/* After the step is cancelled, srun normally exits within KillWait; past this, ringrun
 * kills srun itself, which makes Slurm end the step. */
#define SRUN_KILL_AFTER_MS 15000

int slurm_in_allocation(void)
{
    const char *job = getenv("SLURM_JOB_ID"), *nodes = getenv("SLURM_NODELIST");
    return job != NULL && *job != '\0' && nodes != NULL && *nodes != '\0';
}

/* The rank count: -np, else the allocation's task count; 0 when neither is known. */
static int ranks_of(const struct slurm_launch *l)
{
    const char *nt = getenv("SLURM_NTASKS");
    char *end;
    long v;
    if (l->np > 0)
        return l->np;
    if (nt == NULL || *nt == '\0')
        return 0;
    v = strtol(nt, &end, 10);
    return *end == '\0' && v > 0 && v <= 1 << 20 ? (int)v : 0;
}

int slurm_srun_argv(const struct slurm_launch *l, char **av, int cap, char *buf, size_t bufcap,
                    struct error *err)
{
    int n = 0, np = ranks_of(l);
    size_t used = 0;
    char *num;

#define ADD(s)                                                                                     \
    do {                                                                                           \
        if (n + 1 >= cap)                                                                          \
            goto too_long;                                                                         \
        av[n++] = (char *)(s);                                                                     \
    } while (0)
#define NUM(fmt, v)                                                                                \
    do {                                                                                           \
        int k = snprintf(buf + used, bufcap - used, fmt, v);                                       \
        if (k < 0 || (size_t)k >= bufcap - used)                                                   \
            goto too_long;                                                                         \
        num = buf + used;                                                                          \
        used += (size_t)k + 1;                                                                     \
    } while (0)

    if (np == 0) {
        return errno = EINVAL,
               errprintf(err, "-np N is required: the allocation does not say how many tasks "
                              "(SLURM_NTASKS)");
    }
    ADD("srun");
    ADD("--mpi=pmix");
    /* Every line names its rank, which ringrun turns into its own prefix. */
    ADD("--label");
    ADD("--job-name");
    ADD(l->step_name);
    NUM("--ntasks=%d", np);
    ADD(num);
    /* A failing rank does not kill the step at once: the others get the grace period to
     * notice, as ringrun gives them outside Slurm. srun's --wait=0 would mean "forever". */
    ADD("--kill-on-bad-exit=0");
    NUM("--wait=%d", l->grace_s > 0 ? l->grace_s : 1);
    ADD(num);
    if (l->gpus_per_rank > 0) {
        NUM("--gpus-per-task=%d", l->gpus_per_rank);
        ADD(num);
    }
    /* Each rank under the stop wrapper, so that a stop reaches it as SIGTERM without srun
     * taking it for a cancel (stop_relay.h). */
    ADD("--");
    ADD("sh");
    ADD("-c");
    ADD(RANK_STOP_WRAPPER);
    ADD("rank");
    for (char **a = l->argv; *a; a++)
        ADD(*a);
    av[n] = NULL;
    return n;
too_long:
    return errno = E2BIG, errprintf(err, "the srun command line is too long");
#undef ADD
#undef NUM
}

/*
 * Runs argv (squeue, scancel) and waits for it, with its stdout in out (NUL-terminated, may
 * be NULL). Returns its exit status, or -1 when it cannot run or takes too long.
 */
static int run_helper(char *const *argv, char *out, size_t cap)
{
    int pfd[2], status, devnull;
    size_t len = 0;
    int64_t deadline = clock_mono_ms() + HELPER_TIMEOUT_MS;
    pid_t pid;

    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        dup2(pfd[1], STDOUT_FILENO);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    for (;;) {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        int64_t left = deadline - clock_mono_ms();
        char tmp[4096];
        ssize_t k;
        if (left <= 0 || poll(&p, 1, (int)left) == 0) {
            kill(pid, SIGKILL);
            break;
        }
        k = read(pfd[0], tmp, sizeof(tmp));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        if (out != NULL && len + 1 < cap) {
            size_t take = (size_t)k < cap - 1 - len ? (size_t)k : cap - 1 - len;
            memcpy(out + len, tmp, take);
            len += take;
        }
    }
    close(pfd[0]);
    if (out != NULL)
        out[len] = '\0';
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    if (clock_mono_ms() > deadline)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Finds "JOB.STEP" of the step named name in this job; 0, or -1 when not (yet) there. */
static int find_step(const char *name, char *step, size_t cap)
{
    char out[16384], *save = NULL;
    char *job = getenv("SLURM_JOB_ID");
    char *argv[] = {"squeue", "--noheader", "--steps", "--jobs", job, "--format", "%i %j", NULL};

    if (run_helper(argv, out, sizeof(out)) != 0)
        return -1;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        if (sp != NULL && strcmp(sp + 1, name) == 0) {
            *sp = '\0';
            snprintf(step, cap, "%s", line);
            return 0;
        }
    }
    return -1;
}

/*
 * Delivers sig to the step's tasks through scancel, so that they can stop gracefully (srun
 * turns a SIGTERM of its own into an immediate kill of the step). A SIGTERM goes as
 * RANK_STOP_SIGNAL, which each rank's wrapper turns back into SIGTERM: slurmstepd takes a
 * SIGTERM to a step for a cancel, and srun would then exit 143 without waiting for the
 * ranks' 75. SIGKILL cancels the step. Falls back to signalling srun. Returns 0 when the
 * step got it.
 */
static int signal_step(const struct slurm_launch *l, pid_t srun, int sig)
{
    char step[64], sigarg[32];
    char *cancel[] = {"scancel", "--quiet", sigarg, step, NULL};
    char *kill_step[] = {"scancel", "--quiet", step, NULL};

    if (find_step(l->step_name, step, sizeof(step)) == 0) {
        snprintf(sigarg, sizeof(sigarg), "--signal=%d", sig == SIGTERM ? RANK_STOP_SIGNAL : sig);
        if (run_helper(sig == SIGKILL ? kill_step : cancel, NULL, 0) == 0) {
            if (l->verbose)
                log_info("signal %d to step %s", sig, step);
            return 0;
        }
    }
    log_warning("cannot signal the ranks through scancel; signal %d to srun", sig);
    kill(srun, sig);
    return -1;
}

/* Opens DIR/rank.R/stdout or stderr for every rank; -1 entries where that fails. */
static int *open_rank_files(const char *dir, int np, const char *name)
{
    int *fds = malloc((size_t)np * sizeof(int));
    char path[PATH_MAX];
    if (fds == NULL)
        return NULL;
    for (int r = 0; r < np; r++) {
        snprintf(path, sizeof(path), "%s/rank.%d", dir, r);
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            log_error("cannot create %s: %s", path, strerror(errno));
        snprintf(path, sizeof(path), "%s/rank.%d/%s", dir, r, name);
        fds[r] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fds[r] < 0)
            log_error("cannot create %s: %s", path, strerror(errno));
    }
    return fds;
}

static void close_files(int *fds, int np)
{
    if (fds == NULL)
        return;
    for (int r = 0; r < np; r++) {
        if (fds[r] >= 0)
            close(fds[r]);
    }
    free(fds);
}

/* Forks and execs srun (av) with its stdout and stderr into new pipes, whose read ends go
 * to *out_fd and *err_fd (non-blocking). Returns srun's pid, or -1 after saying why. */
static pid_t start_srun(char **av, int *out_fd, int *err_fd)
{
    int pout[2] = {-1, -1}, perr[2] = {-1, -1};
    pid_t pid = -1, parent = getpid();

    if (pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0) {
        log_error("pipe: %s", strerror(errno));
        goto fail;
    }
    pid = fork();
    if (pid < 0) {
        log_error("fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0) {
        /* A group of its own: a SIGTERM to ringrun's group must reach srun only through
         * ringrun, since srun would answer it by killing the step. If ringrun dies, srun
         * dies with it, and Slurm ends the step. */
        if (child_setup(parent, -1, pout[1], perr[1]) < 0)
            _exit(EXIT_OSERR);
        execvp(av[0], av);
        dprintf(STDERR_FILENO, "ringrun: cannot execute srun: %s\n", strerror(errno));
        _exit(EXIT_NOTFOUND);
    }
    close(pout[1]);
    close(perr[1]);
    fcntl(pout[0], F_SETFL, O_NONBLOCK);
    fcntl(perr[0], F_SETFL, O_NONBLOCK);
    *out_fd = pout[0];
    *err_fd = perr[0];
    return pid;
fail:
    for (int k = 0; k < 2; k++) {
        if (pout[k] >= 0)
            close(pout[k]);
        if (perr[k] >= 0)
            close(perr[k]);
    }
    return -1;
}

/* srun as slurm_run() watches it. */
struct srun_watch {
    const struct slurm_launch *l;
    pid_t pid;
    int sfd;
    struct output out[2];
    int alive, status, signals;
    int64_t kill_at;      /* SIGKILL to the step's tasks, or -1 */
    int64_t hard_kill_at; /* SIGKILL to srun itself, or -1 */
};

/* The kill deadlines that have come are carried out; returns poll's timeout to the next
 * (-1: none). */
static int deadlines(struct srun_watch *w)
{
    int64_t now = clock_mono_ms();

    if (w->alive && w->kill_at >= 0 && now >= w->kill_at) {
        log_warning("the ranks did not all end within %d s; killing the step", w->l->grace_s);
        signal_step(w->l, w->pid, SIGKILL);
        w->kill_at = -1;
        w->hard_kill_at = now + SRUN_KILL_AFTER_MS;
    }
    if (w->alive && w->hard_kill_at >= 0 && now >= w->hard_kill_at) {
        kill(w->pid, SIGKILL);
        w->hard_kill_at = -1;
    }
    if (w->alive && w->kill_at >= 0)
        return (int)(w->kill_at - now);
    if (w->alive && w->hard_kill_at >= 0)
        return (int)(w->hard_kill_at - now);
    return -1;
}

/* The signals that came: the first goes to the step (and starts the grace period), a
 * second kills it. */
static void read_signals(struct srun_watch *w)
{
    for (;;) {
        struct signalfd_siginfo si;
        if (read(w->sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
            break;
        if (si.ssi_signo == SIGCHLD)
            continue;
        if (++w->signals == 1) {
            log_info("got signal %d; passing it to every rank (again to kill them)",
                     (int)si.ssi_signo);
            signal_step(w->l, w->pid, (int)si.ssi_signo);
            if (w->kill_at < 0 && w->hard_kill_at < 0)
                w->kill_at = clock_mono_ms() + (int64_t)w->l->grace_s * 1000;
        } else if (w->signals == 2) {
            signal_step(w->l, w->pid, SIGKILL);
            w->kill_at = -1;
            w->hard_kill_at = clock_mono_ms() + SRUN_KILL_AFTER_MS;
        }
    }
}

/* Forwards srun's output and the signals that come until srun has exited and its output
 * is drained; srun's wait status into w->status. */
static void watch(struct srun_watch *w)
{
    while (w->alive || w->out[0].fd >= 0 || w->out[1].fd >= 0) {
        struct pollfd pfd[3];
        int n = 0, timeout = deadlines(w);

        for (int k = 0; k < 2; k++) {
            if (w->out[k].fd >= 0)
                pfd[n++] = (struct pollfd){.fd = w->out[k].fd, .events = POLLIN};
        }
        if (w->alive)
            pfd[n++] = (struct pollfd){.fd = w->sfd, .events = POLLIN};
        if (n == 0)
            break;
        if (poll(pfd, (nfds_t)n, timeout) < 0 && errno != EINTR) {
            log_error("poll: %s", strerror(errno));
            kill(w->pid, SIGKILL);
            break;
        }
        for (int k = 0; k < 2; k++)
            output_pump(&w->out[k]);
        read_signals(w);
        if (w->alive && waitpid(w->pid, &w->status, WNOHANG) == w->pid)
            w->alive = 0;
    }
    if (w->alive) {
        while (waitpid(w->pid, &w->status, 0) < 0 && errno == EINTR)
            ;
    }
}

/* Says the srun command line it will run (--verbose). */
static void say_srun(char **av)
{
    char line[2048];
    size_t len = 0;
    for (char **a = av; *a && len + 2 < sizeof(line); a++)
        len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s", len ? " " : "", *a);
    log_info("in Slurm job %s: %s", getenv("SLURM_JOB_ID"), line);
}

int slurm_run(const struct slurm_launch *l)
{
    char *av[4200], buf[256], num[16];
    struct srun_watch w = {.l = l, .sfd = -1, .alive = 1, .kill_at = -1, .hard_kill_at = -1};
    struct error err;
    int *files[2] = {NULL, NULL}, out_fd, err_fd;
    int np = ranks_of(l), rc = EXIT_OSERR;

    if (slurm_srun_argv(l, av, (int)(sizeof(av) / sizeof(av[0])), buf, sizeof(buf), &err) < 0) {
        log_error("%s", err.text);
        return EXIT_USAGE;
    }
    if (l->timeout_s > 0) {
        snprintf(num, sizeof(num), "%d", l->timeout_s);
        setenv("RING_TIMEOUT_SECONDS", num, 1);
    }
    if (l->verbose)
        say_srun(av);
    if (l->output_dir != NULL) {
        if (mkdir(l->output_dir, 0755) < 0 && errno != EEXIST) {
            log_error("cannot create --output-dir %s: %s", l->output_dir, strerror(errno));
            return EXIT_USAGE;
        }
        files[0] = open_rank_files(l->output_dir, np, "stdout");
        files[1] = open_rank_files(l->output_dir, np, "stderr");
    }
    if ((w.sfd = child_signalfd(l->hup_ignored)) < 0 ||
        (w.pid = start_srun(av, &out_fd, &err_fd)) < 0)
        goto out;
    output_init_labelled(&w.out[0], out_fd, 0, np, files[0]);
    output_init_labelled(&w.out[1], err_fd, 1, np, files[1]);
    watch(&w);
    output_close(&w.out[0]);
    output_close(&w.out[1]);
    rc = WIFEXITED(w.status) ? WEXITSTATUS(w.status) : 128 + WTERMSIG(w.status);
    /* srun exits with the highest status of any task; ringrun's contract is the first
     * failing rank's, which srun reports first. */
    if (rc != 0 && w.out[1].first_failure > 0)
        rc = w.out[1].first_failure;
out:
    if (w.sfd >= 0)
        close(w.sfd);
    close_files(files[0], np);
    close_files(files[1], np);
    return rc;
}
