/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of ringrun's host lists, hostfiles and rank placement. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hosts.h"
#include "unit.h"

START_TEST(parse_list_with_and_without_slots)
{
    struct hostlist hl = {0};
    struct error err;
    ck_assert_int_eq(hosts_parse_list(&hl, "a:2,b,c.example.com:4", &err), 0);
    ck_assert_int_eq(hl.count, 3);
    ck_assert_str_eq(hl.hosts[2].name, "c.example.com");
    ck_assert_int_eq(hl.hosts[1].slots, 1);
    ck_assert_int_eq(hosts_slots(&hl), 7);
    hosts_free(&hl);
}
END_TEST

START_TEST(malformed_lists_say_what_is_wrong)
{
    static const char *const bad[][2] = {
        {"", "empty host list"},    {"a:2,,b", "empty entry"},   {"a:0", "bad slot count"},
        {"a:x", "bad slot count"},  {"a:", "bad slot count"},    {"a:99999", "bad slot count"},
        {"a b:2", "bad host name"}, {"a:2,a:3", "listed twice"}, {":3", "bad host name"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct hostlist hl = {0};
        struct error err = {{0}};
        errno = 0;
        ck_assert_int_eq(hosts_parse_list(&hl, bad[i][0], &err), -1);
        ck_assert_msg(strstr(err.text, bad[i][1]) != NULL, "'%s' gave '%s'", bad[i][0], err.text);
        ck_assert_msg(errno == EINVAL, "'%s' left errno %d", bad[i][0], errno);
        hosts_free(&hl);
    }
}
END_TEST

START_TEST(hostfile_formats)
{
    char path[] = "/tmp/ring-hostfile-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    struct hostlist hl = {0};
    struct error err;

    fprintf(f, "# cluster\nnode1 slots=4\n\n  node2:2   # two GPUs\nnode3\n");
    fclose(f);
    ck_assert_int_eq(hosts_parse_file(&hl, path, &err), 0);
    ck_assert_int_eq(hl.count, 3);
    ck_assert_int_eq(hl.hosts[0].slots, 4);
    ck_assert_str_eq(hl.hosts[1].name, "node2");
    ck_assert_int_eq(hl.hosts[1].slots, 2);
    ck_assert_int_eq(hl.hosts[2].slots, 1);
    hosts_free(&hl);

    f = fopen(path, "w");
    fprintf(f, "node1 slots=4\nnode2 slots=zero\n");
    fclose(f);
    ck_assert_int_eq(hosts_parse_file(&hl, path, &err), -1);
    ck_assert_msg(strstr(err.text, ":2:") != NULL, "no line number in '%s'", err.text);
    hosts_free(&hl);
    unlink(path);
    ck_assert_int_eq(hosts_parse_file(&hl, path, &err), -1);
    ck_assert(strstr(err.text, "cannot open") != NULL);
}
END_TEST

/* Open MPI's hostfile keys: slots is what a host takes, max_slots its cap when oversubscribed
 * (at least slots); max_slots alone gives the slots too. */
START_TEST(hostfile_max_slots_as_open_mpi_reads_it)
{
    static const char *const bad[][2] = {
        {"a slots=4 max_slots=x\n", "bad value in 'max_slots=x' for host 'a'"},
        {"a max_slots=0\n", "bad value in 'max_slots=0'"},
        {"a max_slots=\n", "bad value in 'max_slots='"},
        {"a slots=4 max_slots=-8\n", "want an integer in 1..4096"},
        {"a slots=4 max_slots=99999\n", "want an integer in 1..4096"},
        {"a slots=4 max_slots=2\n", "max_slots=2 is less than slots=4 for host 'a'"},
        {"a slots=4 slots=5\n", "'slots' given twice"},
        {"a slots=4 maxslots=8\n", "unknown 'maxslots=8' after host 'a'"},
        {"a slots=4 8\n", "unknown '8'"},
        {"a:2 slots=4\n", "bad host name 'a:2'"},
    };
    char path[] = "/tmp/ring-hostfile-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    struct hostlist hl = {0};
    struct error err;

    fprintf(f, "a slots=4 max_slots=8\nb max_slots=3\nc\tmax_slots=6   slots=2 # tabs, any order\n"
               "d slots=2\n");
    fclose(f);
    ck_assert_msg(hosts_parse_file(&hl, path, &err) == 0, "%s", err.text);
    ck_assert_int_eq(hl.count, 4);
    ck_assert_int_eq(hl.hosts[0].slots, 4);
    ck_assert_int_eq(hl.hosts[0].max_slots, 8);
    ck_assert_int_eq(hl.hosts[1].slots, 3);
    ck_assert_int_eq(hl.hosts[1].max_slots, 3);
    ck_assert_str_eq(hl.hosts[2].name, "c");
    ck_assert_int_eq(hl.hosts[2].slots, 2);
    ck_assert_int_eq(hl.hosts[2].max_slots, 6);
    ck_assert_int_eq(hl.hosts[3].max_slots, 0);
    ck_assert_int_eq(hosts_slots(&hl), 11); /* slots, not max_slots, by default */
    hosts_free(&hl);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        f = fopen(path, "w");
        fprintf(f, "ok slots=1\n%s", bad[i][0]);
        fclose(f);
        ck_assert_int_eq(hosts_parse_file(&hl, path, &err), -1);
        ck_assert_msg(strstr(err.text, ":2: ") != NULL && strstr(err.text, bad[i][1]) != NULL,
                      "'%s' gave '%s'", bad[i][0], err.text);
        hosts_free(&hl);
    }
    unlink(path);
}
END_TEST

START_TEST(placement_fills_hosts_in_order)
{
    struct hostlist hl = {0};
    struct placement pl[5];
    struct error err;

    ck_assert_int_eq(hosts_parse_list(&hl, "a:2,b:2,c:4", &err), 0);
    ck_assert_int_eq(hosts_place(&hl, 5, pl, &err), 0);
    ck_assert_int_eq(pl[0].host, 0);
    ck_assert_int_eq(pl[1].local_rank, 1);
    ck_assert_int_eq(pl[2].host, 1);
    ck_assert_int_eq(pl[2].local_rank, 0);
    ck_assert_int_eq(pl[4].host, 2);
    ck_assert_int_eq(pl[4].local_size, 1); /* only one rank landed on c */
    ck_assert_int_eq(pl[4].cross_rank, 2);
    for (int r = 0; r < 5; r++)
        ck_assert_int_eq(pl[r].cross_size, 3);
    hosts_free(&hl);
}
END_TEST

START_TEST(placement_rejects_too_many_ranks)
{
    struct hostlist hl = {0};
    struct placement pl[8];
    struct error err;

    ck_assert_int_eq(hosts_parse_list(&hl, "a:2,b:1", &err), 0);
    errno = 0;
    ck_assert_int_eq(hosts_place(&hl, 4, pl, &err), -1);
    ck_assert(strstr(err.text, "-np 4 is more than the 3 slots") != NULL);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_int_eq(hosts_place(&hl, 0, pl, &err), -1);
    hosts_free(&hl);
}
END_TEST

/* --oversubscribe: past the slots, one more rank per host in turn up to each max_slots (a host
 * without one takes any number); each host's ranks stay consecutive. */
START_TEST(oversubscribed_placement_stops_at_max_slots)
{
    struct hostlist hl = {0};
    struct placement pl[16];
    struct error err;
    char path[] = "/tmp/ring-hostfile-XXXXXX";
    FILE *f = fdopen(mkstemp(path), "w");
    static const int want_host[] = {0, 0, 0, 1, 1, 2, 2, 2, 2};

    fprintf(f, "a slots=2 max_slots=3\nb max_slots=2\nc slots=1\n");
    fclose(f);
    ck_assert_int_eq(hosts_parse_file(&hl, path, &err), 0);
    unlink(path);
    ck_assert_int_eq(hosts_place(&hl, 6, pl, &err), -1); /* 5 slots, not oversubscribed */
    ck_assert_msg(strstr(err.text, "-np 6 is more than the 5 slots of the host list "
                                   "(--oversubscribe allows more)") != NULL,
                  "%s", err.text);
    hl.oversubscribe = 1;
    /* 5 slots, then a (to its 3) and c (no max); b is full at 2 */
    ck_assert_int_eq(hosts_place(&hl, 9, pl, &err), 0);
    for (int r = 0; r < 9; r++) {
        ck_assert_int_eq(pl[r].host, want_host[r]);
        ck_assert_int_eq(pl[r].cross_size, 3);
    }
    ck_assert_int_eq(pl[2].local_rank, 2);
    ck_assert_int_eq(pl[2].local_size, 3);
    ck_assert_int_eq(pl[4].local_size, 2);
    ck_assert_int_eq(pl[8].local_rank, 3);
    ck_assert_int_eq(pl[8].local_size, 4);
    ck_assert_int_eq(pl[8].cross_rank, 2);
    /* fewer ranks than slots: the same as without --oversubscribe */
    ck_assert_int_eq(hosts_place(&hl, 3, pl, &err), 0);
    ck_assert_int_eq(pl[2].host, 1);
    ck_assert_int_eq(pl[2].cross_size, 2);
    hosts_free(&hl);

    /* every host capped: past the sum of max_slots is an error */
    ck_assert_int_eq(hosts_parse_list(&hl, "a:2", &err), 0);
    hl.hosts[0].max_slots = 3;
    hl.oversubscribe = 1;
    ck_assert_int_eq(hosts_place(&hl, 3, pl, &err), 0);
    ck_assert_int_eq(hosts_place(&hl, 4, pl, &err), -1);
    ck_assert_msg(strstr(err.text, "-np 4 is more than the 3 max_slots") != NULL, "%s", err.text);
    hosts_free(&hl);
}
END_TEST

/* An error keeps the errno of what failed (common/error.h): a hostfile that is not there is
 * ENOENT, a bad line in one EINVAL. */
START_TEST(errors_keep_errno)
{
    struct hostlist hl = {0};
    struct error err;
    char path[] = "/tmp/ring-hostfile-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");

    fprintf(f, "node1 slots=x\n");
    fclose(f);
    errno = 0;
    ck_assert_int_eq(hosts_parse_file(&hl, path, &err), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert(strstr(err.text, ":1: bad value") != NULL);
    unlink(path);
    errno = 0;
    ck_assert_int_eq(hosts_parse_file(&hl, path, &err), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert(strstr(err.text, "cannot open hostfile") != NULL);
    hosts_free(&hl);
}
END_TEST

START_TEST(local_names)
{
    char me[256];
    ck_assert(hosts_is_local("localhost"));
    ck_assert(hosts_is_local("127.0.0.1"));
    ck_assert(!hosts_is_local("node-that-is-not-here"));
    ck_assert(gethostname(me, sizeof(me)) == 0);
    ck_assert(hosts_is_local(me));
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        parse_list_with_and_without_slots,
        malformed_lists_say_what_is_wrong,
        hostfile_formats,
        hostfile_max_slots_as_open_mpi_reads_it,
        oversubscribed_placement_stops_at_max_slots,
        placement_fills_hosts_in_order,
        placement_rejects_too_many_ranks,
        errors_keep_errno,
        local_names,
        NULL,
    };
    return unit_main("hosts", tests, 30);
}
