/* SPDX-License-Identifier: Apache-2.0 */
/* error.c - error names and messages, and the detail text behind ring_last_error(). */
#include <stdio.h>
#include <string.h>

#include "base/base.h"

static _Thread_local char error_detail[256];

const char *ring_strerror(int err)
{
    switch (err) {
    case RING_OK:
        return "success";
#define XX(name, msg)                                                                              \
    case RING__ERR(name):                                                                          \
        return msg;
        RING_ERRNO_MAP(XX)
#undef XX
    default:
        return "unknown error";
    }
}

const char *ring_err_name(int err)
{
    switch (err) {
    case RING_OK:
        return "RING_OK";
#define XX(name, msg)                                                                              \
    case RING__ERR(name):                                                                          \
        return "RING_" #name;
        RING_ERRNO_MAP(XX)
#undef XX
    default:
        return "RING_EUNKNOWN";
    }
}

const char *ring_last_error(void)
{
    return error_detail;
}

int ring__err(int err, const char *fmt, ...)
{
    char text[sizeof(error_detail)];
    va_list ap;

    /* Formatted apart first: a caller may pass ring_last_error() itself as an argument, and
     * formatting into the buffer being read repeats the new prefix instead of the old text. */
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    memcpy(error_detail, text, sizeof(text));
    ring__log(RING_LOG_DEBUG, "%s: %s", ring_err_name(err), error_detail);
    return err;
}
