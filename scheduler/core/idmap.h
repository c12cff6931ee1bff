/* SPDX-License-Identifier: Apache-2.0 */
/*
 * idmap.h - a map from strings to pointers (open addressing with tombstones), as the
 * scheduler loop keeps its jobs by job id and by backend id.
 *
 * The map does not copy keys: each key must live, unchanged, as long as its entry (the
 * loop's keys point into the job they map to). Values are borrowed, never freed here.
 */
#ifndef RINGD_IDMAP_H
#define RINGD_IDMAP_H

#include <stddef.h>

struct idmap {
    void **slot; /* NULL empty, idmap's tombstone deleted */
    const char **key;
    size_t cap, used; /* used counts tombstones too */
};

/* An empty map is all zeros: struct idmap m = {0}. */

/* Maps key, which must not be in the map yet, to v (not NULL). Returns 0, or -1 with errno
 * ENOMEM. */
int idmap_put(struct idmap *m, const char *key, void *v);
/* What key maps to, or NULL; *at (when not NULL) gets its slot, for idmap_del. */
void *idmap_get(const struct idmap *m, const char *key, size_t *at);
/* Forgets key (nothing when it is not there). */
void idmap_del(struct idmap *m, const char *key);
/* Frees the map's arrays (not the values) and leaves it empty. */
void idmap_free(struct idmap *m);

#endif /* RINGD_IDMAP_H */
