/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strmap.c - a string-keyed hash map with chaining; grows to keep chains short.
 *
 * The engine puts and deletes a name per tensor several times a step (in flight, pending),
 * so a deleted node is kept on a free list and reused by the next put of a key that fits:
 * a step of many small tensors then costs no malloc or free here once the map has grown.
 * Each node keeps its key's hash, so a lookup compares strings only on a likely match.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

struct ring__strmap_node {
    struct ring__strmap_node *next;
    void *value;
    size_t hash;
    size_t cap; /* bytes for the key */
    char key[];
};

/* Keys up to this long get a node of this size, so that any freed node fits the next. */
#define KEY_CAP_MIN 64

/* FNV-1a: short keys, no adversary (names come from this job's own ranks). */
size_t ring__strmap_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (size_t)h;
}

void *ring__strmap_get(const struct ring__strmap *m, const char *key)
{
    return ring__strmap_get_h(m, key, ring__strmap_hash(key));
}

void *ring__strmap_get_h(const struct ring__strmap *m, const char *key, size_t h)
{
    struct ring__strmap_node *n;
    if (m->nbuckets == 0)
        return NULL;
    for (n = m->buckets[h % m->nbuckets]; n != NULL; n = n->next) {
        if (n->hash == h && strcmp(n->key, key) == 0)
            return n->value;
    }
    return NULL;
}

static int grow(struct ring__strmap *m)
{
    size_t nb = m->nbuckets ? m->nbuckets * 2 : 64;
    struct ring__strmap_node **b = calloc(nb, sizeof(*b));
    if (b == NULL)
        return RING_ENOMEM;
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct ring__strmap_node *n = m->buckets[i], *next;
        for (; n != NULL; n = next) {
            size_t k = n->hash % nb;
            next = n->next;
            n->next = b[k];
            b[k] = n;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = nb;
    return 0;
}

/* Puts key (of hash h); an existing key keeps its value unless replace. Returns 0 when
 * key was absent, 1 when present, or RING_ENOMEM. */
static int put(struct ring__strmap *m, const char *key, size_t h, void *value, int replace)
{
    struct ring__strmap_node *n;
    size_t len = strlen(key), k;

    if (m->count >= m->nbuckets && grow(m) < 0)
        return RING_ENOMEM;
    k = h % m->nbuckets;
    for (n = m->buckets[k]; n != NULL; n = n->next) {
        if (n->hash == h && strcmp(n->key, key) == 0) {
            if (replace)
                n->value = value;
            return 1;
        }
    }
    if (m->spare != NULL && m->spare->cap > len) {
        n = m->spare;
        m->spare = n->next;
    } else {
        size_t cap = len + 1 > KEY_CAP_MIN ? len + 1 : KEY_CAP_MIN;
        n = malloc(sizeof(*n) + cap);
        if (n == NULL)
            return RING_ENOMEM;
        n->cap = cap;
    }
    memcpy(n->key, key, len + 1);
    n->hash = h;
    n->value = value;
    n->next = m->buckets[k];
    m->buckets[k] = n;
    m->count++;
    return 0;
}

int ring__strmap_put(struct ring__strmap *m, const char *key, void *value)
{
    int rc = put(m, key, ring__strmap_hash(key), value, 1);
    return rc < 0 ? rc : 0;
}

int ring__strmap_add_h(struct ring__strmap *m, const char *key, size_t h, void *value)
{
    return put(m, key, h, value, 0);
}

void *ring__strmap_del(struct ring__strmap *m, const char *key)
{
    return ring__strmap_del_h(m, key, ring__strmap_hash(key));
}

void *ring__strmap_del_h(struct ring__strmap *m, const char *key, size_t h)
{
    struct ring__strmap_node **pp;
    if (m->nbuckets == 0)
        return NULL;
    for (pp = &m->buckets[h % m->nbuckets]; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->hash == h && strcmp((*pp)->key, key) == 0) {
            struct ring__strmap_node *n = *pp;
            void *v = n->value;
            *pp = n->next;
            /* Kept for the next put; at most as many as the map held at once. */
            n->next = m->spare;
            m->spare = n;
            m->count--;
            return v;
        }
    }
    return NULL;
}

void ring__strmap_each(const struct ring__strmap *m,
                       void (*fn)(const char *key, void *value, void *arg), void *arg)
{
    for (size_t i = 0; i < m->nbuckets; i++) {
        for (struct ring__strmap_node *n = m->buckets[i]; n != NULL; n = n->next)
            fn(n->key, n->value, arg);
    }
}

void ring__strmap_free(struct ring__strmap *m)
{
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct ring__strmap_node *n = m->buckets[i], *next;
        for (; n != NULL; n = next) {
            next = n->next;
            free(n);
        }
    }
    while (m->spare != NULL) {
        struct ring__strmap_node *next = m->spare->next;
        free(m->spare);
        m->spare = next;
    }
    free(m->buckets);
    m->buckets = NULL;
    m->nbuckets = m->count = 0;
}
