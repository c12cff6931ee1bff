/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of progress.json's reader: a report is read, and a file a job made too large
 * (over PROGRESS_MAX bytes) is refused by its size, without being read.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scheduler/backend/progress.h"
#include "unit.h"

static char dir[] = "/tmp/ring-progress-XXXXXX";
static char path[256];

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/progress.json", dir);
}

static void teardown(void)
{
    unlink(path);
    rmdir(dir);
}

static void write_file(const char *text, off_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    if (size > 0)
        ck_assert_int_eq(ftruncate(fd, size), 0);
    close(fd);
}

START_TEST(reads_a_report)
{
    struct progress p;
    write_file("{\"step\": 12, \"total_steps\": 100, \"samples_per_s\": 250.5, \"world_size\": 4}",
               0);
    ck_assert_int_eq(progress_read(path, &p), 0);
    ck_assert_int_eq(p.step, 12);
    ck_assert_int_eq(p.total_steps, 100);
    ck_assert(p.samples_per_s == 250.5);
    ck_assert_int_eq(p.world_size, 4);
    ck_assert(p.samples < 0 && p.total_samples < 0);
}
END_TEST

START_TEST(not_a_report)
{
    struct progress p;
    write_file("[1, 2]", 0);
    ck_assert_int_eq(progress_read(path, &p), -1);
    ck_assert_int_eq(errno, EINVAL);
    write_file("{\"step\": 1", 0); /* half written */
    ck_assert_int_eq(progress_read(path, &p), -1);
    ck_assert_int_eq(errno, EINVAL);
    unlink(path);
    ck_assert_int_eq(progress_read(path, &p), -1);
    ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/* The bound itself: PROGRESS_MAX bytes are read, one more is refused. */
START_TEST(the_bound)
{
    struct progress p;
    char *text = malloc(PROGRESS_MAX + 2);
    ck_assert_ptr_nonnull(text);
    memset(text, ' ', PROGRESS_MAX + 1);
    memcpy(text, "{\"step\": 3}", 11);
    text[PROGRESS_MAX] = '\0';
    write_file(text, 0);
    ck_assert_int_eq(progress_read(path, &p), 0);
    ck_assert_int_eq(p.step, 3);
    text[PROGRESS_MAX] = ' ';
    text[PROGRESS_MAX + 1] = '\0';
    write_file(text, 0);
    ck_assert_int_eq(progress_read(path, &p), -1);
    ck_assert_int_eq(errno, EFBIG);
    free(text);
}
END_TEST

/* A sparse 100 GB file: refused by its size (EFBIG), so that the reader can say why. */
START_TEST(a_huge_file_is_refused)
{
    struct progress p;
    write_file("{\"step\": 1, \"pad\": \"", 100LL << 30);
    ck_assert_int_eq(progress_read(path, &p), -1);
    ck_assert_int_eq(errno, EFBIG);
}
END_TEST

/* A FIFO where the report should be does not block the reader. */
START_TEST(a_fifo_does_not_block)
{
    struct progress p;
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(progress_read(path, &p), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {reads_a_report,         not_a_report,          the_bound,
                            a_huge_file_is_refused, a_fifo_does_not_block, NULL};
    return unit_main_fixture("progress", tests, 30, setup, teardown);
}
