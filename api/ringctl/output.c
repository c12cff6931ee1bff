/* SPDX-License-Identifier: Apache-2.0 */
/*
 * output.c - what ringctl's commands share besides HTTP (http.c): --json, printing, reading
 * numbers from flags, and a job's URL path.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/log.h"
#include "ringctl.h"

static int json_out;

void ringctl__set_json_out(int on)
{
    json_out = on;
}

int ringctl__json_out(void)
{
    return json_out;
}

void ringctl__print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s != NULL) {
        puts(s);
        free(s);
    }
}

const char *ringctl__str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* An int, all of s: 0 and *out, or -1 (atoi would read '2-4' as 2 and 'x' as 0, and
 * submit something else than asked). */
int ringctl__int_all(const char *s, int *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < INT_MIN || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

/* An integer flag value in [lo, hi]: 0 and *out, or -1 after saying what is wrong. */
int ringctl__flag_int(const char *flag, const char *s, int lo, int hi, const char *what, int *out)
{
    if (ringctl__int_all(s, out) < 0 || *out < lo || *out > hi) {
        log_error("%s '%s' must be %s", flag, s, what);
        return -1;
    }
    return 0;
}

/* /v1/jobs/ID followed by suffix (may be ""), the id escaped so that it stays one path
 * segment: "../tokens" must not name another resource. */
void ringctl__job_path(char *buf, size_t len, const char *id, const char *suffix)
{
    char *e = curl_easy_escape(NULL, id, 0);
    snprintf(buf, len, "/v1/jobs/%s%s", e ? e : "", suffix);
    curl_free(e);
}
