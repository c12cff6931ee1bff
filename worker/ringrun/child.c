/* SPDX-License-Identifier: Apache-2.0 */
/* child.c - the set-up ringrun gives every process it starts (child.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "child.h"
#include "common/log.h"

int child_setup(pid_t parent, int in, int out, int err)
{
    sigset_t none;
    int stdin_fd = in >= 0 ? in : open("/dev/null", O_RDONLY);

    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        return -1;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    if (stdin_fd >= 0)
        dup2(stdin_fd, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    return 0;
}

int child_signalfd(int hup_ignored)
{
    sigset_t mask;
    int sfd;

    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    if (!hup_ignored)
        sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
        (sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        log_error("signalfd: %s", strerror(errno));
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    return sfd;
}
