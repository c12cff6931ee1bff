/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ringctl_sched.h - ringctl's scheduler views (ringctl_sched.c): the policy command and a
 * job's sizes, speeds and restart overheads in `ringctl show`. They send their requests
 * through ringctl_http.h, and ringctl.c lends them its output helpers.
 */
#ifndef RINGCTL_SCHED_H
#define RINGCTL_SCHED_H

#include <jansson.h>

/* ringctl.c's: 1 under --json. */
int ringctl__json_out(void);
void ringctl__print_json(json_t *j);

/* ringctl policy [NAME]: shows the scheduler, or switches its policy (admins). Returns
 * ringctl's exit status. */
int ringctl_policy(int argc, char **argv);
/* Prints job's "scaling" object (GET /v1/jobs/{id}) as lines of `ringctl show`. */
void ringctl_show_scaling(json_t *job);

#endif /* RINGCTL_SCHED_H */
