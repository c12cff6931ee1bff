/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of an attempt as a Slurm batch job (scheduler/slurm_job.c): shapes, the GPU
 * request, the script, job states and GRES strings, on hand-made records. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/stop_relay.h"
#include "scheduler/backend/backend.h"
#include "scheduler/backend/mpirun.h"
#include "scheduler/backend/slurm/slurm_job.h"
#include "unit.h"

START_TEST(shape_uses_the_fewest_nodes)
{
    struct slurm_shape s;
    struct error err;
    /* 4 workers of 1 GPU on nodes of 8 CPUs and 2 GPUs: 2 nodes of 2. */
    ck_assert_int_eq(slurm_shape(4, 1, 1, 8, 2, &s, &err), 0);
    ck_assert_int_eq(s.nodes, 2);
    ck_assert_int_eq(s.ntasks, 4);
    ck_assert_int_eq(s.tasks_per_node, 2);
    ck_assert_int_eq(s.gpus_per_node, 2);
    /* 3 workers: still 2 nodes; each holds up to 2. */
    ck_assert_int_eq(slurm_shape(3, 1, 1, 8, 2, &s, &err), 0);
    ck_assert_int_eq(s.nodes, 2);
    ck_assert_int_eq(s.ntasks, 3);
    /* 1 worker of 2 GPUs: 1 node. */
    ck_assert_int_eq(slurm_shape(1, 1, 2, 8, 2, &s, &err), 0);
    ck_assert_int_eq(s.nodes, 1);
    ck_assert_int_eq(s.gpus_per_node, 2);
    /* CPU only: CPUs bound it. */
    ck_assert_int_eq(slurm_shape(6, 2, 0, 8, 2, &s, &err), 0);
    ck_assert_int_eq(s.nodes, 2);
    ck_assert_int_eq(s.tasks_per_node, 4);
    ck_assert_int_eq(s.cpus_per_task, 2);
    ck_assert_int_eq(s.gpus_per_node, 0);
}
END_TEST

START_TEST(shape_refuses_a_worker_bigger_than_a_node)
{
    struct slurm_shape s;
    struct error err = {{0}};
    ck_assert_int_eq(slurm_shape(2, 1, 4, 8, 2, &s, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.text, "largest Slurm node has 8 and 2"));
}
END_TEST

START_TEST(gpu_tres_in_this_slurm_syntax)
{
    char buf[32];
    slurm_gpu_tres(2, buf, sizeof(buf));
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
    ck_assert_str_eq(buf, "gres/gpu:2");
#else
    ck_assert_str_eq(buf, "gres:gpu:2");
#endif
}
END_TEST

START_TEST(script_runs_the_arguments_through_srun)
{
    char *s = slurm_script(SLURM_LAUNCH_SRUN, 5, 1, "j-1", 3);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(strstr(s, "#!/bin/sh\n"));
    ck_assert_ptr_nonnull(strstr(s, "attempt 3 of job j-1"));
    ck_assert_ptr_nonnull(strstr(s, "exec srun --mpi=pmix --kill-on-bad-exit=0 --wait=5 "
                                    "--gpus-per-task=1"));
    ck_assert_ptr_nonnull(strstr(s, "--output=\"$RING_RUN_DIR/rank.%t/stdout\""));
    ck_assert_ptr_nonnull(strstr(s, "-- sh -c '" LAUNCH_UNMARK "trap \"\" USR2; \"$@\" & p=$!;"));
    ck_assert_ptr_nonnull(strstr(s, "' rank \"$@\"\n"));
    free(s);
    s = slurm_script(SLURM_LAUNCH_MPIRUN, 0, 0, "j-2", 1);
    ck_assert_ptr_nonnull(strstr(s, "exec mpirun -np \"$SLURM_NTASKS\""));
    ck_assert_ptr_nonnull(strstr(s, "rank \"$@\"\n"));
    ck_assert_ptr_null(strstr(s, "gpus-per-task"));
    free(s);
}
END_TEST

static slurm_job_info_t job(uint32_t state, uint32_t exit_code, uint16_t reason, char *desc)
{
    slurm_job_info_t j;
    memset(&j, 0, sizeof(j));
    j.job_id = 42;
    j.job_state = state;
    j.exit_code = exit_code;
    j.state_reason = reason;
    j.state_desc = desc;
    j.nodes = "n[1-2]";
    return j;
}

START_TEST(outcome_of_each_state)
{
    struct slurm_outcome o;
    slurm_job_info_t j = job(JOB_PENDING, 0, WAIT_RESOURCES, NULL);

    slurm_outcome(&j, &o);
    ck_assert(!o.ended && !o.running);
    ck_assert_str_eq(o.reason, "pending in Slurm: waiting for resources");
    j = job(JOB_RUNNING | JOB_COMPLETING, 0, 0, NULL);
    slurm_outcome(&j, &o);
    ck_assert(o.running && !o.ended);
    j = job(JOB_COMPLETE, 0, 0, NULL);
    slurm_outcome(&j, &o);
    ck_assert(o.ended && o.status == 0 && !o.cancelled && !o.lost);
    ck_assert_str_eq(o.reason, "Slurm job 42: completed");
    /* exit 75: the stop agreement's resumable exit, as a wait status */
    j = job(JOB_FAILED, 75 << 8, FAIL_EXIT_CODE, NULL);
    slurm_outcome(&j, &o);
    ck_assert(o.ended && o.status == 75 && !o.lost);
    ck_assert_str_eq(o.reason, "Slurm job 42: failed");
    j = job(JOB_CANCELLED, SIGTERM, 0, NULL);
    slurm_outcome(&j, &o);
    ck_assert(o.ended && o.cancelled && o.status == 128 + SIGTERM);
    ck_assert_str_eq(o.reason, "Slurm job 42: cancelled (scancel)");
    j = job(JOB_TIMEOUT, 0, FAIL_TIMEOUT, NULL);
    slurm_outcome(&j, &o);
    ck_assert(o.ended && o.status == 128 + SIGTERM);
    ck_assert_str_eq(o.reason, "Slurm job 42: time limit reached (time limit reached)");
    j = job(JOB_NODE_FAIL, 0, FAIL_DOWN_NODE, NULL);
    slurm_outcome(&j, &o);
    ck_assert(o.ended && o.status == 1 && o.lost); /* Slurm's doing, not the program's */
    ck_assert_str_eq(o.reason, "Slurm job 42: node failure on n[1-2]");
    j = job(JOB_BOOT_FAIL, 0, 0, NULL);
    slurm_outcome(&j, &o);
    ck_assert(o.ended && o.lost);
    j = job(JOB_FAILED, 0, FAIL_LAUNCH, "launch failed requeued held");
    slurm_outcome(&j, &o);
    ck_assert_str_eq(o.reason, "Slurm job 42: failed (launch failed requeued held)");
}
END_TEST

/* The exit status of the rank wrapper of an srun step (the batch script's "sh -c
 * RANK_STOP_WRAPPER rank PROGRAM"), run here for real on prog. */
static int wrapper_status(const char *prog)
{
    int status;
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDERR_FILENO);
        execl("/bin/sh", "sh", "-c", RANK_STOP_WRAPPER, "rank", prog, (char *)NULL);
        _exit(99);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* A program that is not there (or cannot be executed) on the nodes: the rank's wrapper
 * exits 127 (126), srun and the batch script pass the status on, and the attempt ends with
 * it as its status, neither lost nor cancelled, which the loop takes as permanent: the same
 * rule as the local backend's. Any other failure stays a failure to retry. */
START_TEST(an_unrunnable_program_fails_for_good)
{
    char noexec[] = "/tmp/test_slurm_job.XXXXXX";
    int fd = mkstemp(noexec);
    struct slurm_outcome o;
    slurm_job_info_t j;

    ck_assert_int_ge(fd, 0);
    close(fd); /* mode 0600: not executable */
    ck_assert_int_eq(wrapper_status("/no/such/program"), 127);
    ck_assert_int_eq(wrapper_status(noexec), 126);
    ck_assert_int_eq(wrapper_status("/bin/false"), 1);
    unlink(noexec);

    j = job(JOB_FAILED, 127 << 8, FAIL_EXIT_CODE, NULL);
    slurm_outcome(&j, &o);
    ck_assert(o.ended && o.status == 127 && !o.lost && !o.cancelled);
    ck_assert_str_eq(backend_exit_unrunnable(o.status), "command not found");
    j = job(JOB_FAILED, 126 << 8, FAIL_EXIT_CODE, NULL);
    slurm_outcome(&j, &o);
    ck_assert(o.ended && o.status == 126 && !o.lost && !o.cancelled);
    ck_assert_str_eq(backend_exit_unrunnable(o.status), "command cannot be executed");
    for (int s = 1; s < 256; s++) {
        j = job(JOB_FAILED, s << 8, FAIL_EXIT_CODE, NULL);
        slurm_outcome(&j, &o);
        ck_assert_int_eq(o.status, s);
        if (s != 126 && s != 127)
            ck_assert_ptr_null(backend_exit_unrunnable(o.status));
    }
    /* Killed by a signal, or ended by Slurm: never taken for a missing program. */
    j = job(JOB_CANCELLED, SIGTERM, 0, NULL);
    slurm_outcome(&j, &o);
    ck_assert_ptr_null(backend_exit_unrunnable(o.status));
    j = job(JOB_NODE_FAIL, 0, FAIL_DOWN_NODE, NULL);
    slurm_outcome(&j, &o);
    ck_assert_ptr_null(backend_exit_unrunnable(o.status));
}
END_TEST

/* A stop's signal that reaches a rank's wrapper just as its program exits (its peers agreed
 * on the stop first) must not replace the program's status by the signal's: a wrapper that
 * lost the race reported 140 (128 + SIGUSR2) for a rank that exited 75, and ringd took the
 * stop for a failure. Here the program exits 75 on its own while SIGUSR2 hammers the wrapper
 * until it is gone; every try must give 75 (the old wrapper failed about 1 in 4). */
START_TEST(a_stop_signal_racing_the_exit_keeps_its_status)
{
    for (int t = 0; t < 25; t++) {
        int fds[2], status;
        char c;
        pid_t pid, got;

        ck_assert_int_eq(pipe(fds), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, STDERR_FILENO);
            dup2(fds[1], 3);
            execl("/bin/sh", "sh", "-c", RANK_STOP_WRAPPER, "rank", "sh", "-c",
                  "trap \"\" TERM; echo >&3; exec 3>&-; sleep 0.03; exit 75", (char *)NULL);
            _exit(99);
        }
        close(fds[1]);
        /* The program runs: the wrapper has set SIGUSR2 aside already. */
        ck_assert_int_eq(read(fds[0], &c, 1), 1);
        close(fds[0]);
        while ((got = waitpid(pid, &status, WNOHANG)) == 0) {
            kill(pid, SIGUSR2);
            usleep(100);
        }
        ck_assert_int_eq(got, pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 75,
                      "try %d: the wrapper exited %d, not the program's 75", t,
                      WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
    }
}
END_TEST

START_TEST(gres_counts)
{
    ck_assert_int_eq(slurm_gres_count("gpu:2", "gpu"), 2);
    ck_assert_int_eq(slurm_gres_count("gpu:a100:4(S:0-1)", "gpu"), 4);
    ck_assert_int_eq(slurm_gres_count("mps:100,gpu:3", "gpu"), 3);
    ck_assert_int_eq(slurm_gres_count("gpu", "gpu"), 1);
    ck_assert_int_eq(slurm_gres_count("gpu:a100", "gpu"), 1);
    ck_assert_int_eq(slurm_gres_count("gpu:2(IDX:0-1),mps:0", "gpu"), 2);
    ck_assert_int_eq(slurm_gres_count("gpu:0", "gpu"), 0);
    ck_assert_int_eq(slurm_gres_count("gpux:2", "gpu"), 0);
    ck_assert_int_eq(slurm_gres_count("", "gpu"), 0);
    ck_assert_int_eq(slurm_gres_count(NULL, "gpu"), 0);
}
END_TEST

START_TEST(gres_indexes)
{
    int idx[8];
    ck_assert_int_eq(slurm_gres_indexes("gpu:1(IDX:0)", "gpu", idx, 8), 1);
    ck_assert_int_eq(idx[0], 0);
    ck_assert_int_eq(slurm_gres_indexes("gpu(IDX:0-1)", "gpu", idx, 8), 2);
    ck_assert_int_eq(idx[1], 1);
    ck_assert_int_eq(slurm_gres_indexes("gpu:a100:3(IDX:0,2-3)", "gpu", idx, 8), 3);
    ck_assert_int_eq(idx[0], 0);
    ck_assert_int_eq(idx[1], 2);
    ck_assert_int_eq(idx[2], 3);
    ck_assert_int_eq(slurm_gres_indexes("mps:50(IDX:1),gpu:1(IDX:1)", "gpu", idx, 8), 1);
    ck_assert_int_eq(idx[0], 1);
    ck_assert_int_eq(slurm_gres_indexes("gpu:2", "gpu", idx, 8), 0);
    ck_assert_int_eq(slurm_gres_indexes("gpu:2(IDX:N/A)", "gpu", idx, 8), 0);
    ck_assert_int_eq(slurm_gres_indexes("gpu:4(IDX:0-3)", "gpu", idx, 2), 2);
}
END_TEST

/* Makes dir/rank.N and, when started, dir/rank.N/stdout, as slurmstepd does for a rank. */
static void rank_dir(const char *dir, int r, int started)
{
    char path[256];
    FILE *f;
    snprintf(path, sizeof(path), "%s/rank.%d", dir, r);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    if (!started)
        return;
    snprintf(path, sizeof(path), "%s/rank.%d/stdout", dir, r);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fclose(f);
}

static void rm_run_dir(const char *dir, int n)
{
    char path[256];
    for (int r = 0; r < n; r++) {
        snprintf(path, sizeof(path), "%s/rank.%d/stdout", dir, r);
        unlink(path);
        snprintf(path, sizeof(path), "%s/rank.%d", dir, r);
        rmdir(path);
    }
    rmdir(dir);
}

START_TEST(a_success_with_ranks_that_never_started_fails)
{
    char dir[] = "/tmp/test_slurm_job.XXXXXX";
    struct slurm_outcome ok = {.ended = 1, .status = 0, .reason = "Slurm job 42: completed"};
    struct slurm_outcome o;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int r = 0; r < 12; r++) /* n1's ranks 0-5 never launched; n2's 6-11 ran */
        rank_dir(dir, r, r >= 6);
    o = ok;
    ck_assert_int_eq(slurm_check_ranks_started(dir, 12, &o), 6);
    ck_assert_int_eq(o.status, 1);
    ck_assert(o.lost); /* the program never ran there */
    ck_assert_msg(strstr(o.reason, "6 of 12 ranks never started (ranks 0, 1, 2, 3, 4, 5: no "
                                   "rank.0/stdout)") != NULL,
                  "%s", o.reason);
    /* The ranks that ran: nothing to say. */
    o = ok;
    ck_assert_int_eq(slurm_check_ranks_started(dir, 0, &o), 0);
    ck_assert_int_eq(o.status, 0);
    ck_assert(!o.lost);
    ck_assert_str_eq(o.reason, "Slurm job 42: completed");
    /* A failure keeps its status; its reason gains the ranks. */
    o = ok;
    o.status = 128 + SIGKILL;
    snprintf(o.reason, sizeof(o.reason), "Slurm job 42: failed");
    ck_assert_int_eq(slurm_check_ranks_started(dir, 12, &o), 6);
    ck_assert_int_eq(o.status, 128 + SIGKILL);
    ck_assert_str_eq(o.reason, "Slurm job 42: failed; 6 of 12 ranks never started (ranks 0, 1, 2, "
                               "3, 4, 5)");
    /* A cancel (a stop before it ran, scancel) or a running job: nothing to say. */
    o = ok;
    o.cancelled = 1;
    ck_assert_int_eq(slurm_check_ranks_started(dir, 12, &o), 0);
    o = ok;
    o.ended = 0;
    ck_assert_int_eq(slurm_check_ranks_started(dir, 12, &o), 0);
    /* No run directory known (a job adopted without one): nothing to check. */
    o = ok;
    ck_assert_int_eq(slurm_check_ranks_started("", 12, &o), 0);
    ck_assert_int_eq(o.status, 0);
    rm_run_dir(dir, 12);

    /* Many missing ranks: the list is cut short, the count is whole. */
    ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/test_slurm_job.XXXXXX")));
    o = ok;
    ck_assert_int_eq(slurm_check_ranks_started(dir, 1000, &o), 1000);
    ck_assert_msg(strstr(o.reason, "1000 of 1000 ranks never started (ranks 0, 1, 2,") != NULL &&
                      strstr(o.reason, ", ...: no rank.0/stdout") != NULL,
                  "%s", o.reason);
    rmdir(dir);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        shape_uses_the_fewest_nodes,
        shape_refuses_a_worker_bigger_than_a_node,
        gpu_tres_in_this_slurm_syntax,
        script_runs_the_arguments_through_srun,
        outcome_of_each_state,
        an_unrunnable_program_fails_for_good,
        a_stop_signal_racing_the_exit_keeps_its_status,
        gres_counts,
        gres_indexes,
        a_success_with_ranks_that_never_started_fails,
        NULL,
    };
    return unit_main("slurm_job", tests, 30);
}
