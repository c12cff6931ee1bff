/* SPDX-License-Identifier: Apache-2.0 */
/* idmap.c - a map from strings to pointers: open addressing with tombstones (idmap.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idmap.h"

/* A deleted slot: a probe goes on past it, a put may reuse it. */
static char tomb;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static int idmap_grow(struct idmap *m)
{
    struct idmap n = {0};
    n.cap = m->cap ? m->cap * 2 : 64;
    n.slot = calloc(n.cap, sizeof(*n.slot));
    n.key = calloc(n.cap, sizeof(*n.key));
    if (n.slot == NULL || n.key == NULL) {
        free(n.slot);
        free(n.key);
        return errno = ENOMEM, -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slot[i] != NULL && m->slot[i] != &tomb) {
            size_t k = hash_str(m->key[i]) & (n.cap - 1);
            while (n.slot[k] != NULL)
                k = (k + 1) & (n.cap - 1);
            n.slot[k] = m->slot[i];
            n.key[k] = m->key[i];
            n.used++;
        }
    }
    free(m->slot);
    free(m->key);
    *m = n;
    return 0;
}

int idmap_put(struct idmap *m, const char *key, void *v)
{
    size_t k;
    if ((m->used + 1) * 2 > m->cap && idmap_grow(m) < 0)
        return -1;
    k = hash_str(key) & (m->cap - 1);
    while (m->slot[k] != NULL && m->slot[k] != &tomb)
        k = (k + 1) & (m->cap - 1);
    if (m->slot[k] == NULL)
        m->used++;
    m->slot[k] = v;
    m->key[k] = key;
    return 0;
}

void *idmap_get(const struct idmap *m, const char *key, size_t *at)
{
    size_t k;
    if (m->cap == 0)
        return NULL;
    k = hash_str(key) & (m->cap - 1);
    while (m->slot[k] != NULL) {
        if (m->slot[k] != &tomb && strcmp(m->key[k], key) == 0) {
            if (at)
                *at = k;
            return m->slot[k];
        }
        k = (k + 1) & (m->cap - 1);
    }
    return NULL;
}

void idmap_del(struct idmap *m, const char *key)
{
    size_t at;
    if (idmap_get(m, key, &at) != NULL)
        m->slot[at] = &tomb;
}

void idmap_free(struct idmap *m)
{
    free(m->slot);
    free(m->key);
    memset(m, 0, sizeof(*m));
}
