/* SPDX-License-Identifier: Apache-2.0 */
/*
 * utf8.h - checks on text that crosses the HTTP edge. JSON (and so every problem body) must
 * be valid UTF-8: text cut in the middle of a character, or a byte sequence that is not
 * UTF-8, would make Jansson refuse it and the answer would lose its body.
 */
#ifndef RINGD_UTF8_H
#define RINGD_UTF8_H

#include <stddef.h>

/* 1 when s[0..len) is valid UTF-8 (no overlong forms, surrogates or values past U+10FFFF)
 * and holds no NUL and no other control character but tab; 0 otherwise. */
int utf8_text_ok(const char *s, size_t len);
/*
 * Makes NUL-terminated s valid UTF-8 in place: an incomplete character at its end (left by
 * a cut) is dropped, and every other invalid byte becomes '?'. Returns s.
 */
char *utf8_repair(char *s);
/*
 * Escapes s for one logfmt value: printable ASCII as is, '"' and '\' escaped, anything else
 * (CR, LF, other control bytes, non-ASCII) as \xNN, so a log line can never be forged or
 * split. Writes at most outlen bytes with a NUL: the whole result when it fits, else as many
 * whole escapes as fit before "..." (nothing when outlen < 4). Returns out.
 */
char *log_escape(const char *s, char *out, size_t outlen);

#endif /* RINGD_UTF8_H */
