/* SPDX-License-Identifier: Apache-2.0 */
/* utf8.c - UTF-8 validation and repair at the HTTP edge; escaping for the log. */
#include <stdio.h>
#include <string.h>

#include "utf8.h"

/* Length of the valid UTF-8 character at s (at most n bytes available), or 0. */
static size_t char_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned cp;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

int utf8_text_ok(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        size_t k = char_len(p + i, len - i);
        if (k == 0 || (k == 1 && ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7F)))
            return 0;
        i += k;
    }
    return 1;
}

char *utf8_repair(char *s)
{
    unsigned char *p = (unsigned char *)s;
    size_t len = strlen(s), i = 0;
    while (i < len) {
        size_t k = char_len(p + i, len - i);
        if (k > 0) {
            i += k;
            continue;
        }
        /* A lead byte whose character the end cut short: drop the rest. */
        if (p[i] >= 0xC2 && p[i] <= 0xF4) {
            size_t want = p[i] >= 0xF0 ? 4 : p[i] >= 0xE0 ? 3 : 2, j = i + 1;
            while (j < len && (p[j] & 0xC0) == 0x80)
                j++;
            if (j == len && len - i < want) {
                p[i] = '\0';
                break;
            }
        }
        p[i++] = '?';
    }
    return s;
}

char *log_escape(const char *s, char *out, size_t outlen)
{
    /* o: bytes written; cut: the longest run of whole escapes that leaves room for "..."
     * and the NUL, where the text ends if the rest does not fit. */
    size_t o = 0, cut = 0;
    if (outlen == 0)
        return out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        size_t n;
        if (*p >= 0x20 && *p < 0x7F && *p != '"' && *p != '\\')
            esc[0] = (char)*p, n = 1;
        else if (*p == '"' || *p == '\\')
            esc[0] = '\\', esc[1] = (char)*p, n = 2;
        else
            n = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", *p);
        if (o + n > outlen - 1) { /* the rest does not fit */
            if (outlen >= 4)
                memcpy(out + cut, "...", 4);
            else
                out[0] = '\0';
            return out;
        }
        memcpy(out + o, esc, n);
        o += n;
        if (outlen >= 4 && o <= outlen - 4)
            cut = o;
    }
    out[o] = '\0';
    return out;
}
