/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_jobfs.c - jobfs.h against what a job plants in its own directory: a symbolic link
 * where ringd makes a directory or a file, a FIFO where it writes or reads, a hard link
 * to another file, someone else's file, and a job swapping names while ringd works. The
 * owner changes need root (CI runs as root); without root jobfs_give changes only the
 * mode, which the same checks watch.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scheduler/backend/jobfs.h"
#include "unit.h"

/* A user and group that own nothing on a test machine. */
#define OTHER_UID ((uid_t)54321)
#define OTHER_GID ((gid_t)54321)

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/test_jobfs.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    umask(077); /* as ringd runs */
}

static void teardown(void)
{
    jobfs_remove_tree(dir);
}

static char *at(const char *name)
{
    static char path[4][256];
    static int i;
    char *p = path[i++ % 4];
    snprintf(p, sizeof(path[0]), "%s/%s", dir, name);
    return p;
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    ck_assert_int_eq(fchmod(fd, mode), 0);
    close(fd);
}

static mode_t mode_of(const char *path)
{
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    return sb.st_mode & 07777;
}

START_TEST(mkdirs_makes_parents_0755_and_the_leaf_0700_whatever_the_umask)
{
    struct stat sb;
    int fd = jobfs_mkdirs(at("runs/j1/1"));
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fstat(fd, &sb), 0);
    ck_assert(S_ISDIR(sb.st_mode));
    ck_assert_int_eq(sb.st_mode & 07777, 0700);
    ck_assert_int_eq(mode_of(at("runs")), 0755);
    ck_assert_int_eq(mode_of(at("runs/j1")), 0755);
    close(fd);
    /* Again: there already, and left as it is. */
    ck_assert_int_eq(chmod(at("runs/j1/1"), 0711), 0);
    fd = jobfs_mkdirs(at("runs/j1/1"));
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(mode_of(at("runs/j1/1")), 0711);
    close(fd);
    ck_assert_int_eq(jobfs_mkdirs("relative/path"), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(mkdirs_refuses_a_link_on_the_way)
{
    ck_assert_int_eq(mkdir(at("real"), 0755), 0);
    ck_assert_int_eq(symlink(at("real"), at("runs")), 0);
    ck_assert_int_eq(jobfs_mkdirs(at("runs/j1")), -1);
    ck_assert(errno == ENOTDIR || errno == ELOOP);
    ck_assert_int_eq(access(at("real/j1"), F_OK), -1);
}
END_TEST

START_TEST(subdir_refuses_a_link_planted_in_its_place)
{
    int run = jobfs_mkdirs(at("run")), fd;
    ck_assert_int_ge(run, 0);
    write_text(at("victim"), "root's\n", 0644);
    ck_assert_int_eq(symlink(at("victim"), at("run/rank.0")), 0);
    ck_assert_int_eq(jobfs_subdir(run, "rank.0", OTHER_UID), -1);
    ck_assert(errno == ENOTDIR || errno == ELOOP);
    /* A link to a directory is refused alike. */
    ck_assert_int_eq(mkdir(at("victim.d"), 0755), 0);
    ck_assert_int_eq(chmod(at("victim.d"), 0755), 0);
    ck_assert_int_eq(symlink(at("victim.d"), at("run/rank.1")), 0);
    ck_assert_int_eq(jobfs_subdir(run, "rank.1", OTHER_UID), -1);
    /* The name made by jobfs_subdir itself: a directory, ringd's, 0700. */
    fd = jobfs_subdir(run, "rank.2", OTHER_UID);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(mode_of(at("run/rank.2")), 0700);
    ck_assert_int_eq(jobfs_give(fd, OTHER_UID, OTHER_GID, 0700), 0);
    close(fd);
    ck_assert_int_eq(mode_of(at("victim")), 0644);
    ck_assert_int_eq(mode_of(at("victim.d")), 0755);
    close(run);
}
END_TEST

START_TEST(subdir_takes_the_users_own_directory_and_refuses_anyone_elses)
{
    int run = jobfs_mkdirs(at("run")), fd;
    struct stat sb;
    if (geteuid() != 0)
        return; /* needs a directory of another user */
    ck_assert_int_eq(mkdir(at("run/rank.0"), 0700), 0);
    ck_assert_int_eq(chown(at("run/rank.0"), OTHER_UID, OTHER_GID), 0);
    fd = jobfs_subdir(run, "rank.0", OTHER_UID);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fstat(fd, &sb), 0);
    ck_assert_int_eq(sb.st_uid, OTHER_UID);
    close(fd);
    ck_assert_int_eq(jobfs_subdir(run, "rank.0", OTHER_UID + 1), -1);
    ck_assert_int_eq(errno, EPERM);
    close(run);
}
END_TEST

START_TEST(create_replaces_a_planted_fifo_or_link_without_blocking)
{
    int run = jobfs_mkdirs(at("run")), fd;
    struct stat sb;
    /* A FIFO: opened for writing, it would block until someone reads. */
    ck_assert_int_eq(mkfifo(at("run/ringrun.log"), 0666), 0);
    fd = jobfs_create(run, "ringrun.log", 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fstat(fd, &sb), 0);
    ck_assert(S_ISREG(sb.st_mode));
    ck_assert_int_eq(sb.st_mode & 07777, 0600);
    close(fd);
    /* A link to a file ringd must not touch, and one to a file that does not exist yet. */
    write_text(at("victim"), "keep\n", 0644);
    ck_assert_int_eq(unlink(at("run/ringrun.log")), 0);
    ck_assert_int_eq(symlink(at("victim"), at("run/ringrun.log")), 0);
    ck_assert_int_eq(symlink(at("made-by-ringd"), at("run/other.log")), 0);
    fd = jobfs_create(run, "ringrun.log", 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "x", 1), 1);
    close(fd);
    fd = jobfs_create(run, "other.log", 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(lstat(at("victim"), &sb), 0);
    ck_assert_int_eq(sb.st_size, 5);
    ck_assert_int_eq(sb.st_mode & 07777, 0644);
    ck_assert_int_eq(access(at("made-by-ringd"), F_OK), -1);
    ck_assert_int_eq(lstat(at("run/ringrun.log"), &sb), 0);
    ck_assert(S_ISREG(sb.st_mode) && sb.st_size == 1);
    /* A directory with something in it is not removed for a log. */
    ck_assert_int_eq(mkdir(at("run/full"), 0755), 0);
    write_text(at("run/full/x"), "x", 0644);
    ck_assert_int_eq(jobfs_create(run, "full", 0600), -1);
    close(run);
}
END_TEST

START_TEST(fopen_reads_a_jobs_own_file)
{
    char line[32];
    FILE *f;
    write_text(at("progress.json"), "{\"step\":1}\n", 0644);
    f = jobfs_fopen(at("progress.json"));
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
    ck_assert_str_eq(line, "{\"step\":1}\n");
    fclose(f);
}
END_TEST

START_TEST(fopen_refuses_links_fifos_hard_links_and_other_users_files)
{
    write_text(at("secret"), "admin token\n", 0600);
    ck_assert_int_eq(mkdir(at("run"), 0755), 0);
    ck_assert_int_eq(symlink(at("secret"), at("run/stdout")), 0);
    ck_assert_ptr_null(jobfs_fopen(at("run/stdout")));
    ck_assert_int_eq(errno, ELOOP);
    /* A link on the way. */
    ck_assert_int_eq(symlink(at("."), at("run/up")), 0);
    ck_assert_ptr_null(jobfs_fopen(at("run/up/secret")));
    ck_assert_int_eq(errno, ELOOP);
    /* A FIFO nobody writes: refused at once, not waited on. */
    ck_assert_int_eq(mkfifo(at("run/progress.json"), 0666), 0);
    ck_assert_ptr_null(jobfs_fopen(at("run/progress.json")));
    ck_assert_int_eq(errno, EINVAL);
    /* A hard link to a file elsewhere (fs.protected_hardlinks=0 lets a user make one). */
    ck_assert_int_eq(link(at("secret"), at("run/stderr")), 0);
    ck_assert_ptr_null(jobfs_fopen(at("run/stderr")));
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_ptr_null(jobfs_fopen(at("secret"))); /* two links now, wherever it is read */
    /* Another user's file in a directory that is not theirs (renamed into it). */
    if (geteuid() == 0) {
        write_text(at("run/theirs"), "another user's\n", 0600);
        ck_assert_int_eq(chown(at("run/theirs"), OTHER_UID, OTHER_GID), 0);
        ck_assert_ptr_null(jobfs_fopen(at("run/theirs")));
        ck_assert_int_eq(errno, EINVAL);
        /* ... while the user's own file in the user's directory is read. */
        ck_assert_int_eq(chown(at("run"), OTHER_UID, OTHER_GID), 0);
        FILE *f = jobfs_fopen(at("run/theirs"));
        ck_assert_ptr_nonnull(f);
        fclose(f);
    }
}
END_TEST

START_TEST(stat_refuses_links)
{
    struct stat sb;
    ck_assert_int_eq(mkdir(at("elsewhere"), 0755), 0);
    write_text(at("elsewhere/stdout"), "x", 0644);
    ck_assert_int_eq(mkdir(at("run"), 0755), 0);
    ck_assert_int_eq(symlink(at("elsewhere"), at("run/rank.0")), 0);
    ck_assert_int_eq(jobfs_stat(at("run/rank.0/stdout"), &sb), -1);
    ck_assert_int_eq(errno, ELOOP);
    ck_assert_int_eq(symlink(at("elsewhere/stdout"), at("run/stdout")), 0);
    ck_assert_int_eq(jobfs_stat(at("run/stdout"), &sb), -1);
    ck_assert_int_eq(errno, ELOOP);
    ck_assert_int_eq(jobfs_stat(at("elsewhere/stdout"), &sb), 0);
    ck_assert(S_ISREG(sb.st_mode));
}
END_TEST

/*
 * How often the races below run. A path-based mkdir-then-chown loses to the swapper within
 * 200-1300 rounds on a loaded 2-core machine (measured), so 5000 rounds catch it nearly
 * always, in a few seconds.
 */
#define RACE_ROUNDS 5000

/*
 * A job that watches name in run and, each time something other than its own plant shows
 * up there (a directory or file ringd just made), swaps it for a link to target (or a
 * FIFO), as fast as it can, until killed.
 */
static pid_t swapper(const char *run, const char *name, const char *target, int fifo)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char path[300], aside[300];
        struct stat sb;
        snprintf(path, sizeof(path), "%s/%s", run, name);
        snprintf(aside, sizeof(aside), "%s/.aside-%d", run, (int)getpid());
        for (;;) {
            if (lstat(path, &sb) < 0 || (fifo ? S_ISFIFO(sb.st_mode) : S_ISLNK(sb.st_mode)))
                continue;
            /* An empty directory or a file is replaced in one rename, onto the last one. */
            if (rename(path, aside) < 0) {
                unlink(aside);
                rmdir(aside);
                continue;
            }
            if (fifo)
                mkfifo(path, 0666);
            else
                symlink(target, path);
        }
    }
    return pid;
}

static void stop(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

START_TEST(a_job_swapping_a_directory_for_a_link_never_gets_ringds_chown)
{
    int run = jobfs_mkdirs(at("run"));
    struct stat sb;
    pid_t pid;
    write_text(at("victim"), "root's\n", 0644);
    pid = swapper(at("run"), "rank.0", at("victim"), 0);
    for (int i = 0; i < RACE_ROUNDS; i++) {
        int fd = jobfs_subdir(run, "rank.0", OTHER_UID);
        if (fd >= 0) {
            ck_assert_int_eq(jobfs_give(fd, OTHER_UID, OTHER_GID, 0700), 0);
            close(fd);
        }
        ck_assert_msg(lstat(at("victim"), &sb) == 0 && sb.st_uid == geteuid() &&
                          (sb.st_mode & 07777) == 0644,
                      "round %d: the job got ringd to change its link's target", i);
        /* A new directory every round, as each attempt's run directory is new. */
        if (unlinkat(run, "rank.0", AT_REMOVEDIR) < 0)
            unlinkat(run, "rank.0", 0);
    }
    stop(pid);
    ck_assert_int_eq(lstat(at("victim"), &sb), 0);
    ck_assert_int_eq(sb.st_uid, geteuid());
    ck_assert_int_eq(sb.st_mode & 07777, 0644);
    close(run);
}
END_TEST

START_TEST(a_job_planting_fifos_and_links_never_blocks_or_redirects_a_log)
{
    int run = jobfs_mkdirs(at("run"));
    struct stat sb;
    pid_t fifos, links;
    write_text(at("victim"), "root's\n", 0644);
    fifos = swapper(at("run"), "ringrun.log", NULL, 1);
    links = swapper(at("run"), "ringrun.log", at("victim"), 0);
    for (int i = 0; i < RACE_ROUNDS; i++) {
        int fd = jobfs_create(run, "ringrun.log", 0600);
        if (fd < 0) { /* the planters won every try: refused, never blocked */
            ck_assert_int_eq(errno, EEXIST);
            continue;
        }
        ck_assert_int_eq(fstat(fd, &sb), 0);
        ck_assert(S_ISREG(sb.st_mode));
        ck_assert_int_eq(write(fd, "x", 1), 1);
        close(fd);
    }
    stop(fifos);
    stop(links);
    ck_assert_int_eq(lstat(at("victim"), &sb), 0);
    ck_assert_int_eq(sb.st_size, 7);
    ck_assert_int_eq(sb.st_mode & 07777, 0644);
    close(run);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {mkdirs_makes_parents_0755_and_the_leaf_0700_whatever_the_umask,
                            mkdirs_refuses_a_link_on_the_way,
                            subdir_refuses_a_link_planted_in_its_place,
                            subdir_takes_the_users_own_directory_and_refuses_anyone_elses,
                            create_replaces_a_planted_fifo_or_link_without_blocking,
                            fopen_reads_a_jobs_own_file,
                            fopen_refuses_links_fifos_hard_links_and_other_users_files,
                            stat_refuses_links,
                            a_job_swapping_a_directory_for_a_link_never_gets_ringds_chown,
                            a_job_planting_fifos_and_links_never_blocks_or_redirects_a_log,
                            NULL};
    /* A FIFO that blocks an open shows as a timeout. */
    return unit_main_fixture("jobfs", tests, 60, setup, teardown);
}
