/* SPDX-License-Identifier: Apache-2.0 */
/* process_set.c - the registry of process sets; set 0 is the world. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int add(struct ring__process_sets *p, int *members, int n, int rank)
{
    struct ring__pset *grown = realloc(p->sets, (size_t)(p->count + 1) * sizeof(*grown));
    if (grown == NULL) {
        free(members);
        return RING_ENOMEM;
    }
    p->sets = grown;
    grown[p->count].size = n;
    grown[p->count].members = members;
    grown[p->count].my_rank = -1;
    for (int i = 0; i < n; i++) {
        if (members[i] == rank)
            grown[p->count].my_rank = i;
    }
    return p->count++;
}

int ring__psets_init(struct ring__process_sets *p, int size, int rank)
{
    int *m = malloc((size_t)size * sizeof(int));
    memset(p, 0, sizeof(*p));
    if (m == NULL)
        return RING_ENOMEM;
    for (int i = 0; i < size; i++)
        m[i] = i;
    return add(p, m, size, rank) < 0 ? RING_ENOMEM : 0;
}

void ring__psets_free(struct ring__process_sets *p)
{
    for (int i = 0; i < p->count; i++)
        free(p->sets[i].members);
    free(p->sets);
    memset(p, 0, sizeof(*p));
}

int ring__psets_add(struct ring__process_sets *p, const int *ranks, int n, int world_size, int rank)
{
    int *m;
    if (ranks == NULL || n < 1 || n > world_size)
        return ring__err(RING_EINVAL, "a process set needs 1..%d ranks, got %d", world_size, n);
    m = malloc((size_t)n * sizeof(int));
    if (m == NULL)
        return RING_ENOMEM;
    memcpy(m, ranks, (size_t)n * sizeof(int));
    qsort(m, (size_t)n, sizeof(int), cmp_int);
    for (int i = 0; i < n; i++) {
        if (m[i] < 0 || m[i] >= world_size || (i > 0 && m[i] == m[i - 1])) {
            int bad = m[i];
            free(m);
            return ring__err(RING_EINVAL, "process set rank %d is %s", bad,
                             bad < 0 || bad >= world_size ? "not a rank of the world"
                                                          : "listed twice");
        }
    }
    return add(p, m, n, rank);
}

const struct ring__pset *ring__psets_get(const struct ring__process_sets *p, int id)
{
    return id >= 0 && id < p->count && p->sets[id].members != NULL ? &p->sets[id] : NULL;
}

int ring__psets_remove(struct ring__process_sets *p, int id)
{
    if (id <= 0 || ring__psets_get(p, id) == NULL)
        return ring__err(RING_EINVAL, "there is no process set %d to remove", id);
    free(p->sets[id].members);
    p->sets[id].members = NULL; /* what marks it removed */
    p->sets[id].size = 0;
    p->sets[id].my_rank = -1;
    return 0;
}
