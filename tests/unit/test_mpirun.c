/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_mpirun.c - an mpirun job's command line (mpirun.h): a job's words reach its program
 * exactly, through mpirun and the rank's wrapper, and none of them, ":" least of all, can
 * start another program outside the job's slots and GPUs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scheduler/backend/mpirun.h"
#include "unit.h"

/* A command that would escape if ":" reached mpirun as a word. */
static char *const escape[] = {"/bin/echo", ":", "-np", "8", "/bin/touch", "/tmp/escaped", NULL};

START_TEST(no_word_of_the_command_is_a_colon_on_mpiruns_line)
{
    char *av[256], *storage = NULL;
    int n = mpirun_args(av, 0, "/usr/bin/mpirun", 2, "localhost:2", "0,1", 1, escape, 6, &storage);
    int colons = 0;
    ck_assert_int_gt(n, 0);
    for (int i = 0; i < n; i++)
        colons += strcmp(av[i], ":") == 0;
    /* Only ringd's own separator between the two ranks' app contexts. */
    ck_assert_int_eq(colons, 1);
    free(storage);
    n = mpirun_args(av, 0, "/usr/bin/mpirun", 3, "localhost:3", NULL, 0, escape, 6, &storage);
    for (int i = 0; i < n; i++)
        ck_assert_str_ne(av[i], ":");
    free(storage);
}
END_TEST

/* Runs sh -c "WRAPPER-HEAD printf" rank marked words, and reads what the program got. */
static void unmarked(char *const *words, size_t n, char *out, size_t len)
{
    char **marked = launch_words_mark(words, n), script[256], *argv[64];
    int fds[2], a = 0;
    pid_t pid;
    ssize_t got, total = 0;

    ck_assert_ptr_nonnull(marked);
    snprintf(script, sizeof(script), "%s printf '[%%s]' \"$@\"", LAUNCH_UNMARK);
    argv[a++] = "sh";
    argv[a++] = "-c";
    argv[a++] = script;
    argv[a++] = "rank";
    for (size_t i = 0; i < n; i++)
        argv[a++] = marked[i];
    argv[a] = NULL;
    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        execv("/bin/sh", argv);
        _exit(127);
    }
    close(fds[1]);
    while ((got = read(fds[0], out + total, len - 1 - (size_t)total)) > 0)
        total += got;
    out[total] = '\0';
    close(fds[0]);
    waitpid(pid, NULL, 0);
    free(marked);
}

START_TEST(the_wrapper_gives_the_program_its_words_exactly)
{
    char *const words[] = {"/bin/echo", ":", "_x", "", "a b", "$HOME", "'q'", "-np", "\"", NULL};
    char out[512];
    unmarked(words, 9, out, sizeof(out));
    ck_assert_str_eq(out, "[/bin/echo][:][_x][][a b][$HOME]['q'][-np][\"]");
    unmarked(words, 1, out, sizeof(out));
    ck_assert_str_eq(out, "[/bin/echo]");
}
END_TEST

START_TEST(the_wrappers_unmark_their_arguments)
{
    ck_assert_ptr_nonnull(strstr(MPIRUN_WRAPPER, LAUNCH_UNMARK));
    ck_assert_ptr_null(strchr(MPIRUN_WRAPPER, '\''));
    ck_assert_ptr_null(strchr(LAUNCH_UNMARK, '\''));
}
END_TEST

int main(void)
{
    const TTest *tests[] = {no_word_of_the_command_is_a_colon_on_mpiruns_line,
                            the_wrapper_gives_the_program_its_words_exactly,
                            the_wrappers_unmark_their_arguments, NULL};
    return unit_main("mpirun", tests, 30);
}
