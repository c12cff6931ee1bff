/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ringctl.h - what ringctl's files share besides HTTP (http.h): the output helpers
 * (output.c) and each command group's entry points, which main (ringctl.c) finds in its
 * command table. Each command returns ringctl's exit status (http.h's EXIT_*; ringctl.c's
 * header says when each is used). argv[0] is the command's name.
 */
#ifndef RINGCTL_H
#define RINGCTL_H

#include <stddef.h>

#include <jansson.h>

/* ---- output.c ---- */

/* --json: the server's JSON instead of a table. */
void ringctl__set_json_out(int on);
int ringctl__json_out(void);
/* Prints j indented, keys in the server's order. */
void ringctl__print_json(json_t *j);
/* o's string member k, or "" (never NULL). */
const char *ringctl__str(json_t *o, const char *k);
/* An int, all of s: 0 and *out, or -1 (atoi would read '2-4' as 2 and 'x' as 0, and
 * submit something else than asked). */
int ringctl__int_all(const char *s, int *out);
/* An integer flag value in [lo, hi]: 0 and *out, or -1 after saying what is wrong. */
int ringctl__flag_int(const char *flag, const char *s, int lo, int hi, const char *what, int *out);
/* /v1/jobs/ID followed by suffix (may be ""), the id escaped so that it stays one path
 * segment: "../tokens" must not name another resource. */
void ringctl__job_path(char *buf, size_t len, const char *id, const char *suffix);

/* ---- jobs.c ---- */

/* ringctl submit [-n N|MIN:MAX] [options] (-f spec | -- program args...): prints the id. */
int ringctl_submit(int argc, char **argv);
/* ringctl ls [--state S] [--label K=V]. */
int ringctl_ls(int argc, char **argv);
/* ringctl show ID. */
int ringctl_show(const char *id);
/* method on job id's action (cancel, stop, resume; NULL: the job itself, for rm). */
int ringctl_action(const char *method, const char *id, const char *action);

/* ---- logs.c ---- */

/* ringctl events ID [-f]: with follow, until the job has finished (EXIT_JOBFAILED when it
 * ended FAILED or CANCELLED). */
int ringctl_events(const char *id, int follow);
/* ringctl logs ID [--rank R] [--stderr | --launcher] [--tail N] [-f]. */
int ringctl_logs(int argc, char **argv);

/* ---- tokens.c ---- */

/* ringctl token create NAME [...] | token list | token revoke ID. */
int ringctl_token(int argc, char **argv);

/* ---- sched.c ---- */

/* ringctl cluster: the nodes, what is free, and the jobs on each. */
int ringctl_cluster(void);
/* ringctl policy [NAME]: shows the scheduler, or switches its policy (admins). */
int ringctl_policy(int argc, char **argv);
/* Prints job's "scaling" object (GET /v1/jobs/{id}) as lines of `ringctl show`. */
void ringctl_show_scaling(json_t *job);

/* ---- admin.c ---- */

/*
 * ringctl admin backup FILE: ringd's database, taken while it runs (GET /v1/admin/backup),
 * written to FILE atomically (FILE is whole, or as it was). Returns 0, 2 bad usage, 1 FILE
 * cannot be written, 5 not an admin, 69 ringd unreachable, failing, or cut off.
 */
int ringctl_admin(int argc, char **argv);

#endif /* RINGCTL_H */
