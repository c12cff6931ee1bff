/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_utf8 - the text checks of ringd's HTTP edge (api/utf8.c) on any bytes. Byte 0 is
 * the size of log_escape's output buffer (0..255); the rest is the text.
 *
 * Besides memory safety (log_escape writes into a buffer of exactly that size) it checks
 * what utf8.h promises, against Jansson (which refuses what is not UTF-8, and is what the
 * text must get through) and against the bytes themselves:
 *   - utf8_text_ok holds exactly when Jansson takes the bytes as a string and they hold no
 *     control byte but tab (NUL included);
 *   - utf8_repair's result is valid UTF-8 (Jansson takes it), never longer than its input,
 *     keeps each byte or makes it '?', drops at most one incomplete character at the end
 *     (a lead byte and fewer continuation bytes than it wants), leaves valid text as it
 *     is, and repairs nothing more when run again;
 *   - log_escape's result is printable ASCII with no unescaped '"', fits the buffer with
 *     its NUL, decodes back to the input (so no log line can be forged or split, and no
 *     two inputs log alike), is the whole escape when that fits, and otherwise a whole
 *     number of escapes followed by "...".
 */
#include <string.h>

#include <jansson.h>

#include "api/utf8.h"
#include "fuzz.h"

static int controls(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7F)
            return 1;
    return 0;
}

/* 1 when Jansson takes s[0..n) as a string: valid UTF-8. */
static int jansson_utf8(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);
    json_decref(j);
    return j != NULL;
}

/* Undoes log_escape on e[0..n) into out (at least n bytes); returns the length, or -1 when
 * e is not something log_escape writes. */
static long unescape(const char *e, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)e[i];
        if (c < 0x20 || c >= 0x7F || c == '"')
            return -1;
        if (c != '\\') {
            out[o++] = (char)c;
            continue;
        }
        if (i + 1 < n && (e[i + 1] == '"' || e[i + 1] == '\\')) {
            out[o++] = e[++i];
        } else if (i + 3 < n && e[i + 1] == 'x') {
            unsigned v;
            char hex[3] = {e[i + 2], e[i + 3], '\0'};
            if (strspn(hex, "0123456789abcdef") != 2 || sscanf(hex, "%x", &v) != 1)
                return -1;
            out[o++] = (char)v;
            i += 3;
        } else {
            return -1;
        }
    }
    return (long)o;
}

static void check_text_ok(const uint8_t *s, size_t n)
{
    int ok = utf8_text_ok((const char *)s, n);
    FUZZ_CHECK(ok == (jansson_utf8((const char *)s, n) && !controls(s, n)));
}

static void check_repair(const char *s)
{
    size_t n = strlen(s), m;
    char *r = strdup(s), *again;
    FUZZ_CHECK(r != NULL);
    FUZZ_CHECK(utf8_repair(r) == r);
    m = strlen(r);
    FUZZ_CHECK(m <= n);
    FUZZ_CHECK(jansson_utf8(r, m));
    for (size_t i = 0; i < m; i++)
        FUZZ_CHECK(r[i] == s[i] || r[i] == '?');
    if (m < n) { /* the dropped tail: one lead byte, then fewer continuations than it wants */
        unsigned char lead = (unsigned char)s[m];
        size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        FUZZ_CHECK(lead >= 0xC2 && lead <= 0xF4);
        FUZZ_CHECK(n - m < want);
        for (size_t i = m + 1; i < n; i++)
            FUZZ_CHECK(((unsigned char)s[i] & 0xC0) == 0x80);
    }
    if (jansson_utf8(s, n))
        FUZZ_CHECK(strcmp(r, s) == 0);
    again = strdup(r);
    FUZZ_CHECK(again != NULL);
    FUZZ_CHECK(strcmp(utf8_repair(again), r) == 0);
    free(again);
    free(r);
}

static void check_escape(const char *s, size_t outlen)
{
    size_t n = strlen(s), fl = 4 * n + 8, el;
    char *full = malloc(fl), *out = malloc(outlen ? outlen : 1), *back = malloc(4 * n + 8);
    long bl;
    FUZZ_CHECK(full != NULL && out != NULL && back != NULL);

    /* The whole escape, with room to spare: it decodes back to s. */
    FUZZ_CHECK(log_escape(s, full, fl) == full);
    el = strlen(full);
    bl = unescape(full, el, back);
    FUZZ_CHECK(bl == (long)n && memcmp(back, s, n) == 0);

    /* Into exactly outlen bytes (ASan catches a write past them). */
    FUZZ_CHECK(log_escape(s, out, outlen) == out);
    if (outlen > 0) {
        size_t ol = strlen(out);
        FUZZ_CHECK(ol < outlen);
        if (el < outlen) {
            FUZZ_CHECK(strcmp(out, full) == 0);
        } else if (outlen < 4) {
            FUZZ_CHECK(ol == 0);
        } else {
            FUZZ_CHECK(ol >= 3 && strcmp(out + ol - 3, "...") == 0);
            FUZZ_CHECK(memcmp(out, full, ol - 3) == 0);
            bl = unescape(out, ol - 3, back); /* whole escapes: a prefix of s */
            FUZZ_CHECK(bl >= 0 && memcmp(back, s, (size_t)bl) == 0);
        }
    }
    free(back);
    free(out);
    free(full);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s;
    if (size < 1)
        return 0;
    check_text_ok(data + 1, size - 1);
    s = malloc(size);
    if (s == NULL)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0'; /* repair and escape take C strings: the text up to its first NUL */
    check_repair(s);
    check_escape(s, data[0]);
    free(s);
    return 0;
}
