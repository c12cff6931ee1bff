/* SPDX-License-Identifier: Apache-2.0 */
/* backend_local.c - fork/exec ringrun for an attempt. Argument vectors only, never a shell. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_local.h"

pid_t local_launch(const struct local_launch *l, struct error *err)
{
    json_t *command = json_object_get(l->spec, "command"), *env = json_object_get(l->spec, "env");
    const char *wd = json_string_value(json_object_get(l->spec, "working_dir"));
    size_t nargs = json_array_size(command), i;
    char **argv = calloc(nargs + 16, sizeof(char *));
    char np[16], log[4200], gpus_arg[16];
    int fd, a = 0;
    pid_t pid;

    if (argv == NULL)
        return errno = ENOMEM, errprintf(err, "out of memory"), -1;
    snprintf(np, sizeof(np), "%d", l->workers);
    snprintf(gpus_arg, sizeof(gpus_arg), "%d", l->gpus_per_worker);
    argv[a++] = (char *)l->ringrun;
    argv[a++] = "-np";
    argv[a++] = np;
    argv[a++] = "--output-dir";
    argv[a++] = (char *)l->run_dir;
    if (l->gpus[0] != '\0') {
        argv[a++] = "--gpus";
        argv[a++] = (char *)l->gpus;
        argv[a++] = "--gpus-per-rank";
        argv[a++] = gpus_arg;
    }
    for (i = 0; i < nargs; i++)
        argv[a++] = (char *)json_string_value(json_array_get(command, i));
    argv[a] = NULL;
    snprintf(log, sizeof(log), "%s/ringrun.log", l->run_dir);
    fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(argv);
        return errprintf(err, "cannot write %s: %s", log, strerror(errno)), -1;
    }
    pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fd);
        free(argv);
        errno = e;
        return errprintf(err, "fork: %s", strerror(e)), -1;
    }
    if (pid == 0) {
        const char *key;
        json_t *v;
        char num[16];
        sigset_t none;
        setpgid(0, 0);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        fd = open("/dev/null", O_RDONLY);
        if (fd >= 0)
            dup2(fd, STDIN_FILENO);
        if (chdir(wd ? wd : l->run_dir) < 0) {
            dprintf(STDERR_FILENO, "ringd: cannot enter %s: %s\n", wd ? wd : l->run_dir,
                    strerror(errno));
            _exit(126);
        }
        json_object_foreach(env, key, v) setenv(key, json_string_value(v), 1);
        setenv("RING_JOB_ID", l->job_id, 1);
        snprintf(num, sizeof(num), "%d", l->attempt);
        setenv("RING_ATTEMPT", num, 1);
        setenv("RING_RUN_DIR", l->run_dir, 1);
        setenv("RING_CHECKPOINT_DIR", l->checkpoint_dir, 1);
        execv(l->ringrun, argv);
        dprintf(STDERR_FILENO, "ringd: cannot execute %s: %s\n", l->ringrun, strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(fd);
    free(argv);
    return pid;
}

int local_signal(pid_t pgid, int sig)
{
    return kill(-pgid, sig);
}
