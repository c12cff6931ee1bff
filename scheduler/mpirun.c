/* SPDX-License-Identifier: Apache-2.0 */
/* mpirun.c - the command line of an mpirun job and the wrapper around its ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpirun.h"

/*
 * Runs "$@" in the background with its output in the rank's files (made if missing), and
 * passes SIGUSR2 (from mpirun) and SIGTERM (mpirun aborting) on to it as SIGTERM
 * (RANK_STOP_RELAY). mpirun signals each rank's whole process group, the program included,
 * so the program starts with SIGUSR2 ignored (an ignored signal stays ignored across exec)
 * and only sees the SIGTERM.
 */
const char MPIRUN_WRAPPER[] =
    "d=\"$RING_RUN_DIR/rank.${OMPI_COMM_WORLD_RANK:-0}\"; mkdir -p \"$d\"; trap \"\" USR2; "
    "\"$@\" >\"$d/stdout\" 2>\"$d/stderr\" & " RANK_STOP_RELAY;

size_t mpirun_argc(int np, size_t ncmd)
{
    /* per rank with GPUs: -np 1 -x CVD sh -c W rank cmd... ":" */
    return 16 + (size_t)(np > 0 ? np : 1) * (ncmd + 10);
}

/* The gpus_per_rank ids of rank r in list ("0,1,2,3") into out; "" when there are fewer. */
static void rank_gpus(const char *list, int r, int per, char *out, size_t len)
{
    int idx = 0, first = r * per;
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = list; *p && idx < first + per;) {
        size_t k = strcspn(p, ",");
        if (idx >= first && n + k + 2 < len)
            n += (size_t)snprintf(out + n, len - n, "%s%.*s", n ? "," : "", (int)k, p);
        idx++;
        p += k + (p[k] == ',');
    }
}

int mpirun_args(char **av, int at, const char *mpirun, int np, const char *hosts, const char *gpus,
                int gpus_per_rank, char *const *cmd, size_t ncmd, char **storage)
{
    int per_rank = gpus != NULL && gpus[0] != '\0' && gpus_per_rank > 0;
    /* "CUDA_VISIBLE_DEVICES=" and up to 39 characters of ids (rank_gpus) */
    size_t slot = 64, len = 16 + (per_rank ? (size_t)np * slot : 0);
    char *block = malloc(len), *num = block, *cvd = block + 16;

    *storage = block;
    if (block == NULL)
        return -1;
    snprintf(num, 16, "%d", per_rank ? 1 : np);
    av[at++] = (char *)mpirun;
    if (hosts != NULL) {
        av[at++] = "-H";
        av[at++] = (char *)hosts;
    }
    /* ringd places the ranks; mpirun's default core binding would pin every job's rank 0
     * to the same core. */
    av[at++] = "--bind-to";
    av[at++] = "none";
    for (int r = 0; r < (per_rank ? np : 1); r++) {
        if (r > 0)
            av[at++] = ":";
        av[at++] = "-np";
        av[at++] = num;
        if (per_rank) {
            char ids[40];
            rank_gpus(gpus, r, gpus_per_rank, ids, sizeof(ids));
            snprintf(cvd + (size_t)r * slot, slot, "CUDA_VISIBLE_DEVICES=%s", ids);
            av[at++] = "-x";
            av[at++] = cvd + (size_t)r * slot;
        }
        av[at++] = "sh";
        av[at++] = "-c";
        av[at++] = (char *)MPIRUN_WRAPPER;
        av[at++] = "rank";
        for (size_t k = 0; k < ncmd; k++)
            av[at++] = cmd[k];
    }
    av[at] = NULL;
    return at;
}
