/* SPDX-License-Identifier: Apache-2.0 */
/* notify.c - sd_notify through libsystemd, or nothing (notify.h). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef RING_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "common/log.h"
#include "notify.h"

/* A state and its status fit: STATUS is one line for `systemctl status`. */
#define NOTIFY_MAX 1024

static atomic_int notify_warned;

static void notify_send(const char *state)
{
#ifdef RING_HAVE_SYSTEMD
    int rc = sd_notify(0, state);
    if (rc < 0 && atomic_exchange(&notify_warned, 1) == 0)
        log_warning("cannot notify the service manager at NOTIFY_SOCKET (%s): %s; systemd "
                    "will not learn that ringd is ready or reloading",
                    getenv("NOTIFY_SOCKET") ? getenv("NOTIFY_SOCKET") : "", strerror(-rc));
#else
    (void)state;
    if (getenv("NOTIFY_SOCKET") != NULL && atomic_exchange(&notify_warned, 1) == 0)
        log_warning("NOTIFY_SOCKET is set, but this ringd was built without libsystemd: it "
                    "cannot tell systemd that it is ready. Rebuild with libsystemd-dev, or "
                    "use Type=simple in the unit");
#endif
}

/* Sends prefix followed by STATUS=<fmt...>. */
static void notify_with_status(const char *prefix, const char *fmt, va_list ap)
{
    char state[NOTIFY_MAX], status[NOTIFY_MAX - 64];
    vsnprintf(status, sizeof(status), fmt, ap);
    status[strcspn(status, "\n")] = '\0'; /* one assignment per line in the protocol */
    snprintf(state, sizeof(state), "%sSTATUS=%s", prefix, status);
    notify_send(state);
}

void notify_status(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    notify_with_status("", fmt, ap);
    va_end(ap);
}

void notify_ready(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    notify_with_status("READY=1\n", fmt, ap);
    va_end(ap);
}

void notify_reloading(void)
{
    char state[128];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(state, sizeof(state), "RELOADING=1\nSTATUS=reloading\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
    notify_send(state);
}

void notify_stopping(void)
{
    notify_send("STOPPING=1\nSTATUS=stopping: finishing requests in flight");
}
