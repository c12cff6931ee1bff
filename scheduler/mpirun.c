/* SPDX-License-Identifier: Apache-2.0 */
/* mpirun.c - the command line of an mpirun job and the wrapper around its ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpirun.h"

/*
 * Runs "$@" in the background with its output in the rank's files, passes SIGUSR2 (from
 * mpirun) and SIGTERM (mpirun aborting) on to it as SIGTERM, and exits with its status.
 * mpirun signals each rank's whole process group, the program included, so the program
 * starts with SIGUSR2 ignored (an ignored signal stays ignored across exec) and only sees
 * the SIGTERM. A wait interrupted by a trapped signal returns early, so it waits again
 * while the program lives. No single quote inside: slurm_script embeds this text in one.
 */
const char MPIRUN_WRAPPER[] =
    "d=\"$RING_RUN_DIR/rank.${OMPI_COMM_WORLD_RANK:-0}\"; trap \"\" USR2; "
    "\"$@\" >\"$d/stdout\" 2>\"$d/stderr\" & p=$!; "
    "trap \"kill -TERM $p 2>/dev/null\" TERM USR2; "
    "while :; do wait $p; s=$?; kill -0 $p 2>/dev/null || exit $s; done";

char **mpirun_argv(const char *mpirun, int np, const char *hosts, char *const *argv)
{
    size_t nargs = 0, i = 0;
    char **av, *num;

    while (argv[nargs] != NULL)
        nargs++;
    /* the vector, then the -np number in the same block */
    av = malloc((nargs + 16) * sizeof(char *) + 16);
    if (av == NULL)
        return NULL;
    num = (char *)(av + nargs + 16);
    snprintf(num, 16, "%d", np);
    av[i++] = (char *)mpirun;
    av[i++] = "-np";
    av[i++] = num;
    if (hosts != NULL) {
        av[i++] = "-H";
        av[i++] = (char *)hosts;
    }
    /* ringd places the ranks; mpirun's default core binding would pin every job's rank 0
     * to the same core. */
    av[i++] = "--bind-to";
    av[i++] = "none";
    av[i++] = "sh";
    av[i++] = "-c";
    av[i++] = (char *)MPIRUN_WRAPPER;
    av[i++] = "rank";
    for (size_t k = 0; k < nargs; k++)
        av[i++] = argv[k];
    av[i] = NULL;
    return av;
}
