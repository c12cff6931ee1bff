/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the HTTP edge's text checks (api/utf8.c): what is UTF-8 text, how a cut or
 * broken string is repaired, and how a client's bytes are escaped for the log.
 */
#include <check.h>
#include <string.h>

#include "api/utf8.h"
#include "unit.h"

START_TEST(text_ok_takes_utf8_text_only)
{
    ck_assert_int_eq(utf8_text_ok("caf\xc3\xa9 \xe2\x82\xac\t\xf0\x9f\x98\x80", 14), 1);
    ck_assert_int_eq(utf8_text_ok("", 0), 1);
    ck_assert_int_eq(utf8_text_ok("a\0b", 3), 0);             /* NUL */
    ck_assert_int_eq(utf8_text_ok("a\r\nb", 4), 0);           /* CR LF */
    ck_assert_int_eq(utf8_text_ok("\x7f", 1), 0);             /* DEL */
    ck_assert_int_eq(utf8_text_ok("\xc0\xaf", 2), 0);         /* overlong '/' */
    ck_assert_int_eq(utf8_text_ok("\xe0\x80\xaf", 3), 0);     /* overlong, 3 bytes */
    ck_assert_int_eq(utf8_text_ok("\xed\xa0\x80", 3), 0);     /* a surrogate */
    ck_assert_int_eq(utf8_text_ok("\xf4\x90\x80\x80", 4), 0); /* past U+10FFFF */
    ck_assert_int_eq(utf8_text_ok("\xe2\x82", 2), 0);         /* cut */
    ck_assert_int_eq(utf8_text_ok("\xe2\x82\xac", 2), 0);     /* cut by the length */
}
END_TEST

START_TEST(repair_drops_a_cut_character_and_marks_bad_bytes)
{
    char cut[] = "ab\xe2\x82",
         bad[] = "a\xff"
                 "b\xc0\xaf",
         valid[] = "caf\xc3\xa9";
    char mid[] = "\xe2\x82x";
    ck_assert_str_eq(utf8_repair(cut), "ab");
    ck_assert_str_eq(utf8_repair(bad), "a?b??");
    ck_assert_str_eq(utf8_repair(valid), "caf\xc3\xa9");
    ck_assert_str_eq(utf8_repair(mid), "??x"); /* not at the end: not a cut */
}
END_TEST

START_TEST(log_escape_leaves_nothing_raw)
{
    char out[64];
    ck_assert_str_eq(log_escape("a\r\nts=0 \"x\"\\\xc3\xa9", out, sizeof(out)),
                     "a\\x0d\\x0ats=0 \\\"x\\\"\\\\\\xc3\\xa9");
}
END_TEST

/*
 * Found by tests/fuzz/fuzz_utf8 (corpus/utf8/tiny_buffer_fits, just_fits): a result that
 * fitted the buffer with its NUL but ended within its last 3 bytes became "..." (log_escape
 * kept room for "..." even where none was needed).
 */
START_TEST(log_escape_cuts_only_what_does_not_fit)
{
    char four[4], eight[8], two[2];
    ck_assert_str_eq(log_escape("abc", four, sizeof(four)), "abc");
    ck_assert_str_eq(log_escape("abcd", four, sizeof(four)), "...");
    ck_assert_str_eq(log_escape("abcdefg", eight, sizeof(eight)), "abcdefg");
    ck_assert_str_eq(log_escape("abcdefgh", eight, sizeof(eight)), "abcd...");
    /* escapes are never cut in half */
    ck_assert_str_eq(log_escape("ab\ncdefgh", eight, sizeof(eight)), "ab...");
    ck_assert_str_eq(log_escape("a", two, sizeof(two)), "a");
    ck_assert_str_eq(log_escape("ab", two, sizeof(two)), "");
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        text_ok_takes_utf8_text_only, repair_drops_a_cut_character_and_marks_bad_bytes,
        log_escape_leaves_nothing_raw, log_escape_cuts_only_what_does_not_fit, NULL};
    return unit_main("utf8", tests, 30);
}
