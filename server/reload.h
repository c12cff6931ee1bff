/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reload.h - what ringd does at SIGHUP (systemctl reload ringd).
 *
 * It reads its configuration again as at start (defaults < --config file < RINGD_*
 * environment < flags: the same argv; the environment of a running process does not
 * change, so in practice the file), then:
 *   - loads the TLS certificate and key again, always (a rotation replaces the files at
 *     the same paths) and from new paths if tls_cert or tls_key changed. New connections
 *     get the new pair; open ones keep theirs, and none is closed (tls.h);
 *   - applies the settings that can change at runtime: streams_per_token (streams already
 *     open stay open) and policy (as PUT /v1/scheduler would; a policy set through the API
 *     stays unless ringd.conf's policy changed);
 *   - for every other setting that changed, logs that it cannot change without a restart
 *     and what it kept.
 * The log says what was reloaded. A configuration that does not parse, or a certificate
 * that is bad (not PEM, not the key's, expired), is refused with the reason in the log,
 * and what runs stays as it was: a reload never stops ringd.
 *
 * Threads: one caller (ringd's main thread, which takes SIGHUP through sigwait).
 */
#ifndef RINGD_RELOAD_H
#define RINGD_RELOAD_H

#include "config.h"
#include "http.h"
#include "scheduler/core/scheduler.h"

struct reload;

/* Remembers argv (borrowed: main's, alive until exit), a copy of loaded (the configuration
 * as config_load gave it, before ringd resolved any of it), and what a reload changes: the
 * HTTP server and the scheduler (borrowed). Returns NULL with errno ENOMEM. */
struct reload *reload_create(int argc, char **argv, const struct config *loaded, struct http *http,
                             struct scheduler *sched);
/* Reloads, logs what it did, and tells systemd (RELOADING=1, then READY=1). With r NULL
 * (reload_create failed), says that it cannot. */
void reload_run(struct reload *r);
/* Accepts NULL. */
void reload_destroy(struct reload *r);

#endif /* RINGD_RELOAD_H */
