/* SPDX-License-Identifier: Apache-2.0 */
/*
 * problem.c - RFC 9457 problem details. Each kind of error has a stable type URI, so that
 * clients branch on "type" and show "detail", which says what to fix.
 */
#include <stdarg.h>
#include <stdio.h>

#include "api.h"

json_t *api_problem(struct api_response *resp, int status, const char *kind, const char *title,
                    const char *instance, const char *detail_fmt, ...)
{
    char type[96], detail[512];
    va_list ap;

    va_start(ap, detail_fmt);
    vsnprintf(detail, sizeof(detail), detail_fmt, ap);
    va_end(ap);
    snprintf(type, sizeof(type), "urn:ringmaster:problem:%s", kind);
    json_decref(resp->body);
    resp->status = status;
    resp->problem = 1;
    resp->body = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", title, "status",
                           status, "detail", detail, "instance", instance ? instance : "");
    return resp->body;
}
