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
    size_t len;
    char buf[OUTPUT_LINE_MAX];
};

/* Initializes o for fd; file_fd may be -1. */
void output_init(struct output *o, int fd, int rank, int is_err, int file_fd);
/*
 * Reads what is available and forwards complete lines. Returns 1 while the pipe is open,
 * 0 at end of file (after flushing a last unterminated line and closing fd).
 */
int output_pump(struct output *o);
/* Flushes and closes everything. Accepts an already closed output. */
void output_close(struct output *o);

#endif /* RINGRUN_OUTPUT_H */
