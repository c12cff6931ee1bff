/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journald.h - ringd's log lines with their priority, when standard error is the systemd
 * journal's.
 *
 * Under systemd a service's standard error is a stream into the journal, and systemd names
 * it in JOURNAL_STREAM ("DEVICE:INODE" of the socket). The journal reads a "<N>" at the
 * start of a line as the line's syslog priority (3 error, 4 warning, 6 info), strips it and
 * keeps it as PRIORITY=N, so that `journalctl -p warning` finds ringd's warnings and errors.
 * The rest of the line stays logfmt (log.h), job= included.
 *
 * A "<N>" prefix, rather than sd_journal_send with fields: it needs no library, keeps the
 * lines' order with everything else on standard error, and works as well when the journal
 * is not running (the lines then go where standard error goes, prefixed).
 */
#ifndef RINGD_JOURNALD_H
#define RINGD_JOURNALD_H

/* When JOURNAL_STREAM names standard error (not a stream standard error was redirected away
 * from), has every log line from now on start with its priority, and returns 1; else
 * changes nothing and returns 0. Call before any thread logs (log_set_output). */
int journald_init(void);

#endif /* RINGD_JOURNALD_H */
