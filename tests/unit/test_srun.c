/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of ringrun inside a Slurm allocation: the srun command line, srun --label's
 * lines and srun's failure reports. The launch itself runs on the Slurm test cluster
 * (tests/integration/slurm_ringrun.sh). */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/stop_relay.h"
#include "output.h"
#include "slurm.h"
#include "unit.h"

static char *prog[] = {"./train", "--epochs", "3", NULL};

static const char *joined(char **av, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (; *av; av++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? " " : "", *av);
    return buf;
}

START_TEST(srun_argv_names_the_step_and_passes_the_program)
{
    struct slurm_launch l = {.np = 4, .grace_s = 5, .step_name = "ringrun.7", .argv = prog};
    char *av[64], buf[128], line[512];
    struct error err;
    ck_assert_int_gt(slurm_srun_argv(&l, av, 64, buf, sizeof(buf), &err), 0);
    ck_assert_str_eq(joined(av, line, sizeof(line)),
                     "srun --mpi=pmix --label --job-name ringrun.7 --ntasks=4 "
                     "--kill-on-bad-exit=0 --wait=5 -- sh -c " RANK_STOP_WRAPPER
                     " rank ./train --epochs 3");
}
END_TEST

START_TEST(srun_argv_gpus_and_zero_grace)
{
    struct slurm_launch l = {
        .np = 2, .grace_s = 0, .gpus_per_rank = 2, .step_name = "s", .argv = prog};
    char *av[64], buf[128], line[512];
    struct error err;
    ck_assert_int_gt(slurm_srun_argv(&l, av, 64, buf, sizeof(buf), &err), 0);
    /* srun's --wait=0 would wait forever: a zero grace becomes one second. */
    ck_assert_ptr_nonnull(strstr(joined(av, line, sizeof(line)), "--wait=1 --gpus-per-task=2 --"));
}
END_TEST

START_TEST(srun_argv_takes_np_from_the_allocation)
{
    struct slurm_launch l = {.step_name = "s", .argv = prog};
    char *av[64], buf[128], line[512];
    struct error err = {{0}};
    unsetenv("SLURM_NTASKS");
    ck_assert_int_eq(slurm_srun_argv(&l, av, 64, buf, sizeof(buf), &err), -1);
    ck_assert_ptr_nonnull(strstr(err.text, "-np N is required"));
    setenv("SLURM_NTASKS", "6", 1);
    ck_assert_int_gt(slurm_srun_argv(&l, av, 64, buf, sizeof(buf), &err), 0);
    ck_assert_ptr_nonnull(strstr(joined(av, line, sizeof(line)), "--ntasks=6"));
}
END_TEST

START_TEST(srun_argv_that_does_not_fit_fails)
{
    struct slurm_launch l = {.np = 2, .step_name = "s", .argv = prog};
    char *av[8], buf[128];
    struct error err = {{0}};
    ck_assert_int_eq(slurm_srun_argv(&l, av, 8, buf, sizeof(buf), &err), -1);
    ck_assert_ptr_nonnull(strstr(err.text, "too long"));
}
END_TEST

START_TEST(in_allocation_needs_job_and_nodes)
{
    unsetenv("SLURM_JOB_ID");
    unsetenv("SLURM_NODELIST");
    ck_assert_int_eq(slurm_in_allocation(), 0);
    setenv("SLURM_JOB_ID", "12", 1);
    ck_assert_int_eq(slurm_in_allocation(), 0);
    setenv("SLURM_NODELIST", "n[1-2]", 1);
    ck_assert_int_eq(slurm_in_allocation(), 1);
}
END_TEST

START_TEST(labels)
{
    static const struct {
        const char *line;
        int at, rank;
    } cases[] = {
        {"0: hello", 3, 0}, {" 9: x", 4, 9},        {"12: ", 4, 12},
        {"3:", 2, 3},       {"srun: error", -1, 0}, {"", -1, 0},
        {"  : x", -1, 0},   {"7 x", -1, 0},         {"99999999999: x", -1, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rank = -1;
        int at = output_parse_label(cases[i].line, strlen(cases[i].line), &rank);
        ck_assert_msg(at == cases[i].at, "'%s': offset %d, want %d", cases[i].line, at,
                      cases[i].at);
        if (at >= 0)
            ck_assert_int_eq(rank, cases[i].rank);
    }
}
END_TEST

START_TEST(srun_failure_reports)
{
    static const struct {
        const char *line;
        int status;
    } cases[] = {
        {"srun: error: n2: task 2: Exited with exit code 7", 7},
        {"srun: error: n1: tasks 0-1: Exited with exit code 75", 75},
        {"srun: error: n1: tasks 0-1: Killed", 137},
        {"srun: error: n2: task 3: Segmentation fault (core dumped)", 139},
        {"srun: error: n2: task 3: Terminated", 143},
        {"srun: Job step aborted: Waiting up to 7 seconds", -1},
        {"srun: error: Unable to create step", -1},
        {"0: Exited with exit code 3", -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(output_srun_failure(cases[i].line, strlen(cases[i].line)) == cases[i].status,
                      "'%s'", cases[i].line);
}
END_TEST

/* The demultiplexer end to end: srun's stream in a pipe, ringrun's prefixed lines and the
 * per-rank files out. */
START_TEST(labelled_stream_goes_to_each_rank)
{
    char dir[] = "/tmp/ring-srun-XXXXXX", path[256], got[256];
    int p[2], files[2], saved = dup(STDOUT_FILENO), cap[2];
    struct output o;
    FILE *f;
    const char *in = "0: a\n 1: b\nsrun: note\n1: c";

    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int r = 0; r < 2; r++) {
        snprintf(path, sizeof(path), "%s/%d", dir, r);
        files[r] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(pipe(cap), 0);
    dup2(cap[1], STDOUT_FILENO);
    output_init_labelled(&o, p[0], 0, 2, files);
    ck_assert_int_eq(write(p[1], in, strlen(in)), (int)strlen(in));
    close(p[1]);
    while (output_pump(&o))
        ;
    output_close(&o);
    dup2(saved, STDOUT_FILENO);
    close(cap[1]);
    memset(got, 0, sizeof(got));
    ck_assert_int_gt(read(cap[0], got, sizeof(got) - 1), 0);
    ck_assert_str_eq(got, "[0]<stdout>:a\n[1]<stdout>:b\nsrun: note\n[1]<stdout>:c\n");
    close(files[0]);
    close(files[1]);
    snprintf(path, sizeof(path), "%s/1", dir);
    f = fopen(path, "r");
    memset(got, 0, sizeof(got));
    ck_assert_int_gt((int)fread(got, 1, sizeof(got) - 1, f), 0);
    fclose(f);
    ck_assert_str_eq(got, "b\nc\n");
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        srun_argv_names_the_step_and_passes_the_program,
        srun_argv_gpus_and_zero_grace,
        srun_argv_takes_np_from_the_allocation,
        srun_argv_that_does_not_fit_fails,
        in_allocation_needs_job_and_nodes,
        labels,
        srun_failure_reports,
        labelled_stream_goes_to_each_rank,
        NULL,
    };
    return unit_main("srun", tests, 30);
}
