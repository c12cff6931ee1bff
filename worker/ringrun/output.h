/* SPDX-License-Identifier: Apache-2.0 */
/*
 * output.h - forwards a rank's stdout or stderr line by line, prefixed with its rank as
 * horovodrun does ("[1]<stdout>:loss 0.42"), and optionally copies it to a file.
 */
#ifndef RINGRUN_OUTPUT_H
#define RINGRUN_OUTPUT_H

#include <stddef.h>

/* Longest line forwarded whole; longer ones are split, each part prefixed. */
#define OUTPUT_LINE_MAX 8192

struct output {
    int fd; /* read end of the rank's pipe, -1 once closed */
    int rank;
    int is_err;  /* stderr (forwarded to our stderr) or stdout */
    int file_fd; /* copy of the raw stream, or -1 */
    /* srun --label mode: one stream carries every rank's lines, each starting with the
     * rank ("  3: text"); rank_files[r] (borrowed, -1 for none) gets rank r's lines. */
    int labelled;
    int nranks;
    const int *rank_files;
    int first_failure; /* labelled stderr: the status of the first failure srun reported
                        * ("task 2: Exited with exit code 7"), or -1 */
    size_t len;
    char buf[OUTPUT_LINE_MAX];
};

/* Initializes o for fd; file_fd may be -1. */
void output_init(struct output *o, int fd, int rank, int is_err, int file_fd);
/*
 * Initializes o for the stream of srun --label (fd): a line "  3: text" is forwarded as
 * "[3]<stdout>:text" (or stderr) and "text" goes to rank_files[3] unless that is -1; a line
 * without a rank below nranks (srun's own messages) is forwarded as it is. rank_files
 * (nranks entries, or NULL) stays the caller's and must outlive o.
 */
void output_init_labelled(struct output *o, int fd, int is_err, int nranks, const int *rank_files);
/*
 * Splits a line of srun --label output: returns the offset of the text after the label and
 * sets *rank, or -1 when the line has no label ("srun: error: ...").
 */
int output_parse_label(const char *line, size_t n, int *rank);
/*
 * The exit status (128+N for signal N) in one of srun's reports of a failed task, such as
 * "srun: error: n2: task 2: Exited with exit code 7" or "...: tasks 0-1: Killed", or -1 when
 * the line is none.
 */
int output_srun_failure(const char *line, size_t n);
/*
 * Reads what is available and forwards complete lines. Returns 1 while the pipe is open,
 * 0 at end of file (after flushing a last unterminated line and closing fd).
 */
int output_pump(struct output *o);
/* Flushes and closes everything. Accepts an already closed output. */
void output_close(struct output *o);

#endif /* RINGRUN_OUTPUT_H */
