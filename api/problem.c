/* SPDX-License-Identifier: Apache-2.0 */
/*
 * problem.c - RFC 9457 problem details. Each kind of error has a stable type URI, so that
 * clients branch on "type" and show "detail", which says what to fix.
 */
#include <stdarg.h>
#include <stdio.h>

#include "api.h"
#include "utf8.h"

json_t *api_problem(struct api_response *resp, int status, const char *kind, const char *title,
                    const char *instance, const char *detail_fmt, ...)
{
    char type[96], detail[512], where[512];
    va_list ap;

    /* The detail may quote what the client sent, cut to fit: made valid UTF-8 here, or the
     * body could not be encoded and the problem would go out without one. */
    va_start(ap, detail_fmt);
    vsnprintf(detail, sizeof(detail), detail_fmt, ap);
    va_end(ap);
    utf8_repair(detail);
    snprintf(where, sizeof(where), "%s", instance ? instance : "");
    utf8_repair(where);
    snprintf(type, sizeof(type), "urn:ringmaster:problem:%s", kind);
    json_decref(resp->body);
    resp->status = status;
    resp->problem = 1;
    resp->body = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", title, "status",
                           status, "detail", detail, "instance", where);
    if (resp->body == NULL) /* out of memory: still a problem, with its status */
        resp->body = json_pack("{s:s, s:i}", "type", type, "status", status);
    return resp->body;
}
