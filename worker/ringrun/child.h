/* SPDX-License-Identifier: Apache-2.0 */
/*
 * child.h - what ringrun does alike for the processes it starts, a rank (ringrun.c) or srun
 * (slurm.c): the child's set-up between fork and exec, and the signalfd through which
 * ringrun hears the signals it forwards.
 */
#ifndef RINGRUN_CHILD_H
#define RINGRUN_CHILD_H

#include <sys/types.h>

/*
 * In a child just forked by parent: a process group of its own, SIGKILL when ringrun dies
 * (PR_SET_PDEATHSIG), no blocked signals, SIGPIPE as by default; standard input from in
 * (or /dev/null when in < 0), standard output and error to out and err. Returns 0, or -1
 * when parent died before the child could ask to die with it: the caller must _exit().
 */
int child_setup(pid_t parent, int in, int out, int err);

/*
 * Blocks SIGCHLD, SIGINT, SIGTERM, and SIGHUP unless hup_ignored (ringrun was started under
 * nohup), and returns a non-blocking signalfd that reads them; SIGPIPE is ignored (a
 * closed pipe is an error from write). Returns -1 after logging why.
 */
int child_signalfd(int hup_ignored);

#endif /* RINGRUN_CHILD_H */
