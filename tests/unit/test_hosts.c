/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of ringrun's host lists, hostfiles and rank placement. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "hosts.h"

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
        ck_assert_int_eq(hosts_parse_list(&hl, bad[i][0], &err), -1);
        ck_assert_msg(strstr(err.text, bad[i][1]) != NULL, "'%s' gave '%s'", bad[i][0], err.text);
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
    ck_assert_int_eq(hosts_place(&hl, 4, pl, &err), -1);
    ck_assert(strstr(err.text, "-np 4 is more than the 3 slots") != NULL);
    ck_assert_int_eq(hosts_place(&hl, 0, pl, &err), -1);
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
        placement_fills_hosts_in_order,
        placement_rejects_too_many_ranks,
        local_names,
        NULL,
    };
    return unit_main("hosts", tests, 30);
}
