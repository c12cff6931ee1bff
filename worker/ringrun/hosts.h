/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hosts.h - host lists (-H, --hostfile) and the placement of ranks on them.
 */
#ifndef RINGRUN_HOSTS_H
#define RINGRUN_HOSTS_H

#include <stddef.h>
#include <stdio.h>

#include "common/error.h"

#define HOSTS_NAME_MAX 255

struct host {
    char name[HOSTS_NAME_MAX + 1];
    int slots;     /* ranks it takes */
    int max_slots; /* the most it may take oversubscribed (hostfile max_slots=); 0: no limit */
};

struct hostlist {
    struct host *hosts;
    int count;
    int oversubscribe; /* hosts_place may put ranks past a host's slots, up to its max_slots */
};

/* Where one rank runs, and its place in the worker contract. */
struct placement {
    int host;                   /* index into the host list */
    int local_rank, local_size; /* among the ranks on that host */
    int cross_rank, cross_size; /* the host's index among hosts used, and their number */
};

/*
 * Parses "host[:slots],host[:slots],..." (slots default to 1) and appends to *hl.
 * Returns 0, or -1 with errno EINVAL (ENOMEM) and err naming the bad entry. A host named
 * twice is an error.
 */
int hosts_parse_list(struct hostlist *hl, const char *spec, struct error *err);

/*
 * Parses a hostfile: one host per line as "host", "host:N", or in Open MPI's form
 * "host slots=N max_slots=M" (either key may be left out: slots defaults to max_slots, or 1);
 * '#' starts a comment. Returns 0, or -1 with errno (EINVAL for a bad line, ENOMEM, or
 * fopen's) and err naming the file and line.
 */
int hosts_parse_file(struct hostlist *hl, const char *path, struct error *err);
/* The same for a hostfile already open as f (not closed), named path in messages. */
int hosts_parse_stream(struct hostlist *hl, FILE *f, const char *path, struct error *err);

/* Total slots. */
int hosts_slots(const struct hostlist *hl);

/*
 * Places np ranks on the hosts in order, filling each host's slots before the next, as
 * horovodrun and mpirun --map-by slot do. With hl->oversubscribe, ranks past the slots go
 * one per host in turn to the hosts below their max_slots (any host without one), as
 * mpirun --oversubscribe does; a host's ranks stay consecutive. Fills out[0..np-1]. Returns
 * 0, or -1 with errno EINVAL and err when np exceeds the slots (oversubscribed: the
 * max_slots), or ENOMEM.
 */
int hosts_place(const struct hostlist *hl, int np, struct placement *out, struct error *err);

/* Returns 1 when name means this machine (localhost, 127.x.x.x, ::1 or our hostname). */
int hosts_is_local(const char *name);

/* Frees the list and zeroes it. Accepts an empty list. */
void hosts_free(struct hostlist *hl);

#endif /* RINGRUN_HOSTS_H */
