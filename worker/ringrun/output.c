/* SPDX-License-Identifier: Apache-2.0 */
/* output.c - rank-prefixed line forwarding. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output.h"

void output_init(struct output *o, int fd, int rank, int is_err, int file_fd)
{
    o->fd = fd;
    o->rank = rank;
    o->is_err = is_err;
    o->file_fd = file_fd;
    o->len = 0;
    o->labelled = 0;
    o->nranks = 0;
    o->rank_files = NULL;
    o->first_failure = -1;
}

void output_init_labelled(struct output *o, int fd, int is_err, int nranks, const int *rank_files)
{
    output_init(o, fd, -1, is_err, -1);
    o->labelled = 1;
    o->nranks = nranks;
    o->rank_files = rank_files;
}

int output_srun_failure(const char *line, size_t n)
{
    static const struct {
        const char *text;
        int status;
    } signals[] = {{"Killed", 128 + 9},  {"Terminated", 128 + 15}, {"Segmentation fault", 128 + 11},
                   {"Aborted", 128 + 6}, {"Bus error", 128 + 7},   {"Interrupt", 128 + 2}};
    const char *code = "Exited with exit code ";
    char buf[512];
    const char *p;

    if (n >= sizeof(buf))
        n = sizeof(buf) - 1;
    memcpy(buf, line, n);
    buf[n] = '\0';
    if (strncmp(buf, "srun: error: ", 13) != 0 || strstr(buf, ": task") == NULL)
        return -1;
    if ((p = strstr(buf, code)) != NULL)
        return atoi(p + strlen(code));
    p = strrchr(buf, ':');
    for (size_t i = 0; p != NULL && i < sizeof(signals) / sizeof(signals[0]); i++) {
        if (strncmp(p + 2, signals[i].text, strlen(signals[i].text)) == 0)
            return signals[i].status;
    }
    return -1;
}

int output_parse_label(const char *line, size_t n, int *rank)
{
    size_t i = 0;
    long r = 0;
    while (i < n && line[i] == ' ')
        i++;
    if (i == n || line[i] < '0' || line[i] > '9')
        return -1;
    for (; i < n && line[i] >= '0' && line[i] <= '9'; i++) {
        r = r * 10 + (line[i] - '0');
        if (r > 1 << 24)
            return -1;
    }
    if (i >= n || line[i] != ':')
        return -1;
    i++;
    if (i < n && line[i] == ' ')
        i++;
    *rank = (int)r;
    return (int)i;
}

/* Writes all of buf, retrying short writes. Output that cannot be written (a closed
 * terminal, a full disk) is dropped: the job matters more than its log. */
static void write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, buf, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        buf += k;
        n -= (size_t)k;
    }
}

static void emit(struct output *o, const char *line, size_t n)
{
    char out[OUTPUT_LINE_MAX + 32];
    int p, rank = o->rank;

    if (o->labelled) {
        int at = output_parse_label(line, n, &rank);
        if (at < 0 || rank >= o->nranks) { /* srun's own message: as it is */
            if (o->first_failure < 0)
                o->first_failure = output_srun_failure(line, n);
            memcpy(out, line, n);
            out[n] = '\n';
            write_all(o->is_err ? STDERR_FILENO : STDOUT_FILENO, out, n + 1);
            return;
        }
        line += at;
        n -= (size_t)at;
        if (o->rank_files != NULL && o->rank_files[rank] >= 0) {
            memcpy(out, line, n);
            out[n] = '\n';
            write_all(o->rank_files[rank], out, n + 1);
        }
    }
    p = snprintf(out, sizeof(out), "[%d]<%s>:", rank, o->is_err ? "stderr" : "stdout");
    memcpy(out + p, line, n);
    out[(size_t)p + n] = '\n';
    /* One write per line: ranks share our stdout, and a single write of a line keeps lines
     * from different ranks from interleaving. */
    write_all(o->is_err ? STDERR_FILENO : STDOUT_FILENO, out, (size_t)p + n + 1);
}

static void forward_lines(struct output *o, int eof)
{
    size_t start = 0;
    for (size_t i = 0; i < o->len; i++) {
        if (o->buf[i] == '\n') {
            emit(o, o->buf + start, i - start);
            start = i + 1;
        }
    }
    if (start == 0 && o->len == sizeof(o->buf)) { /* no newline in a full buffer: split */
        emit(o, o->buf, o->len);
        start = o->len;
    }
    if (eof && start < o->len) {
        emit(o, o->buf + start, o->len - start);
        start = o->len;
    }
    memmove(o->buf, o->buf + start, o->len - start);
    o->len -= start;
}

int output_pump(struct output *o)
{
    ssize_t k;

    if (o->fd < 0)
        return 0;
    k = read(o->fd, o->buf + o->len, sizeof(o->buf) - o->len);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
        return 1;
    if (k <= 0) {
        output_close(o);
        return 0;
    }
    if (o->file_fd >= 0)
        write_all(o->file_fd, o->buf + o->len, (size_t)k);
    o->len += (size_t)k;
    forward_lines(o, 0);
    return 1;
}

void output_close(struct output *o)
{
    if (o->fd >= 0) {
        forward_lines(o, 1);
        close(o->fd);
        o->fd = -1;
    }
    if (o->file_fd >= 0) {
        close(o->file_fd);
        o->file_fd = -1;
    }
}
