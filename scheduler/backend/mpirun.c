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
const char MPIRUN_WRAPPER[] = LAUNCH_UNMARK
    "d=\"$RING_RUN_DIR/rank.${OMPI_COMM_WORLD_RANK:-0}\"; mkdir -p \"$d\"; trap \"\" USR2; "
    "\"$@\" >\"$d/stdout\" 2>\"$d/stderr\" & " RANK_STOP_RELAY;

/* Bytes for launch_words_mark's array and its marked words. */
static size_t marked_bytes(char *const *words, size_t n)
{
    size_t bytes = (n + 1) * sizeof(char *);
    for (size_t i = 0; i < n; i++)
        bytes += strlen(LAUNCH_WORD_MARK) + strlen(words[i]) + 1;
    return bytes;
}

/* The marked words into mem (marked_bytes long, aligned for pointers). */
static char **mark_into(void *mem, char *const *words, size_t n)
{
    char **out = mem, *p = (char *)(out + n + 1);
    for (size_t i = 0; i < n; i++) {
        out[i] = p;
        p += sprintf(p, "%s%s", LAUNCH_WORD_MARK, words[i]) + 1;
    }
    out[n] = NULL;
    return out;
}

char **launch_words_mark(char *const *words, size_t n)
{
    void *mem = words != NULL ? malloc(marked_bytes(words, n)) : NULL;
    return mem != NULL ? mark_into(mem, words, n) : NULL;
}

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
    /* "CUDA_VISIBLE_DEVICES=" and up to 39 characters of ids (rank_gpus); a multiple of
     * 16, so that the marked words' array after it is aligned */
    size_t slot = 64, head = 16 + (per_rank ? (size_t)np * slot : 0);
    char *block = malloc(head + marked_bytes(cmd, ncmd)), *num = block, *cvd = block + 16;
    char **words;

    *storage = block;
    if (block == NULL)
        return -1;
    words = mark_into(block + head, cmd, ncmd);
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
            av[at++] = words[k];
    }
    av[at] = NULL;
    return at;
}
