/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admin.c - `ringctl admin backup FILE`: ringd's database as of one commit
 * (GET /v1/admin/backup), written to FILE atomically.
 *
 * FILE is whole or untouched: the download goes to a temporary file beside it, which is
 * checked (a complete response, an SQLite database), fsynced and renamed over FILE, and the
 * directory fsynced. A download cut short leaves FILE as it was, never a truncated copy that
 * would pass for a backup until the day it is restored.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "http.h"
#include "ringctl.h"

/* Where the download goes, and what became of it. */
struct sink {
    int fd;
    long long bytes;
    char head[16]; /* the first bytes: an SQLite database's header says what it is */
    int werrno;    /* a failed write's errno; 0 if none */
};

static size_t sink_write(const char *p, size_t n, void *arg)
{
    struct sink *k = arg;
    size_t left = n;
    if (k->bytes < (long long)sizeof(k->head)) {
        size_t take = sizeof(k->head) - (size_t)k->bytes;
        memcpy(k->head + k->bytes, p, take < n ? take : n);
    }
    while (left > 0) {
        ssize_t w = write(k->fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            k->werrno = errno;
            return 0; /* curl stops with a write error */
        }
        p += w;
        left -= (size_t)w;
    }
    k->bytes += (long long)n;
    return n;
}

/* fsyncs the directory that holds path, so that a rename into it is on disk. */
static int sync_dir_of(const char *path)
{
    char copy[PATH_MAX];
    int fd, rc;
    snprintf(copy, sizeof(copy), "%s", path);
    if ((fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return -1;
    rc = fsync(fd);
    close(fd);
    return rc;
}

/* What to make of the download into k: 0 when it is whole and a database, else ringctl's
 * exit status after saying why. stream_rc is ringctl__stream_get's. */
static int judge(const struct sink *k, int stream_rc, const char *tmp, const char *file)
{
    if (k->werrno != 0) {
        log_error("cannot write %s: %s", tmp, strerror(k->werrno));
        return EXIT_REFUSED;
    }
    if (stream_rc > 0) /* an HTTP error, already told */
        return stream_rc;
    if (stream_rc < 0) {
        log_error("the backup's download from %s broke off; %s is unchanged",
                  ringctl__conn.base_url, file);
        return EXIT_UNAVAILABLE;
    }
    if (k->bytes < (long long)sizeof(k->head) || memcmp(k->head, "SQLite format 3", 16) != 0) {
        log_error("ringd's answer (%lld bytes) is not an SQLite database", k->bytes);
        return EXIT_UNAVAILABLE;
    }
    return 0;
}

static int backup(const char *file)
{
    char tmp[PATH_MAX], dir[PATH_MAX];
    struct sink k = {0};
    int rc;

    snprintf(dir, sizeof(dir), "%s", file);
    if (snprintf(tmp, sizeof(tmp), "%s/.ringd-backup.XXXXXX", dirname(dir)) >= (int)sizeof(tmp)) {
        log_error("%s: path too long", file);
        return EXIT_USAGE;
    }
    /* 0600: the copy holds every job and every token's hash. */
    if ((k.fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
        log_error("cannot create a file beside %s: %s", file, strerror(errno));
        return EXIT_REFUSED;
    }
    rc = judge(&k, ringctl__stream_get("/v1/admin/backup", NULL, NULL, sink_write, &k), tmp, file);
    if (rc == 0 && fsync(k.fd) < 0) {
        log_error("cannot write %s: %s", tmp, strerror(errno));
        rc = EXIT_REFUSED;
    }
    if (close(k.fd) < 0 && rc == 0) {
        log_error("cannot write %s: %s", tmp, strerror(errno));
        rc = EXIT_REFUSED;
    }
    if (rc == 0 && (rename(tmp, file) < 0 || sync_dir_of(file) < 0)) {
        log_error("cannot put the backup at %s: %s", file, strerror(errno));
        rc = EXIT_REFUSED;
    }
    if (rc != 0) {
        unlink(tmp);
        return rc;
    }
    if (ringctl__json_out()) {
        json_t *j = json_pack("{s:s, s:I}", "file", file, "bytes", (json_int_t)k.bytes);
        ringctl__print_json(j);
        json_decref(j);
    } else {
        printf("backed up ringd's database to %s (%lld bytes)\n", file, k.bytes);
    }
    return 0;
}

int ringctl_admin(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "backup") == 0 && argv[2][0] != '\0')
        return backup(argv[2]);
    fprintf(stderr, "usage: ringctl admin backup FILE   (a copy of ringd's database, taken "
                    "while it runs; admins only)\n");
    return EXIT_USAGE;
}
