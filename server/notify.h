/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.h - tells the service manager what ringd is doing (systemd's sd_notify protocol,
 * for a Type=notify unit: contrib/systemd/ringd.service).
 *
 * Each call sends one datagram to $NOTIFY_SOCKET through libsystemd; without that variable
 * (ringd not started by systemd) each does nothing. A ringd built without libsystemd
 * (RING_WITH_SYSTEMD=OFF, or libsystemd-dev missing) says once, when NOTIFY_SOCKET is set,
 * that it cannot tell systemd it is ready. A failed send is logged once and otherwise
 * ignored: the service runs whether or not its manager hears about it.
 *
 * Threads: any; the datagrams of concurrent calls do not mix.
 */
#ifndef RINGD_NOTIFY_H
#define RINGD_NOTIFY_H

/* STATUS=<text>: what `systemctl status ringd` shows. */
void notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* READY=1 with STATUS=<text>: ringd serves requests and its scheduler runs (the start is
 * over, or a reload is). */
void notify_ready(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* RELOADING=1 (with MONOTONIC_USEC, which systemd 253 and later want): a reload began;
 * notify_ready ends it. */
void notify_reloading(void);
/* STOPPING=1: ringd is shutting down. */
void notify_stopping(void);

#endif /* RINGD_NOTIFY_H */
