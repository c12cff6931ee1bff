/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ringctl_admin.h - ringctl's admin commands (ringctl_admin.c), through ringctl_http.h.
 */
#ifndef RINGCTL_ADMIN_H
#define RINGCTL_ADMIN_H

/*
 * ringctl admin backup FILE: ringd's database, taken while it runs (GET /v1/admin/backup),
 * written to FILE atomically (FILE is whole, or as it was). Returns ringctl's exit status:
 * 0, 2 bad usage, 1 FILE cannot be written, 5 not an admin, 69 ringd unreachable, failing,
 * or cut off.
 */
int ringctl_admin(int argc, char **argv);

#endif /* RINGCTL_ADMIN_H */
