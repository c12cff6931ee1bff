/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache.c - the response cache. Entry i is bit i of the engine's bit vector; in steady
 * state each rank sets the bits of the tensors it has ready, one AND across ranks says
 * which are ready everywhere, and no names travel to the coordinator.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

int ring__cache_init(struct ring__cache *c, int capacity)
{
    memset(c, 0, sizeof(*c));
    c->capacity = capacity;
    if (capacity > 0 && (c->entries = calloc((size_t)capacity, sizeof(*c->entries))) == NULL)
        return RING_ENOMEM;
    return 0;
}

void ring__cache_free(struct ring__cache *c)
{
    for (int i = 0; i < c->capacity; i++)
        ring__request_clear(&c->entries[i].req);
    free(c->entries);
    ring__strmap_free(&c->index);
    memset(c, 0, sizeof(*c));
}

static int bit_of(const struct ring__cache *c, const char *name)
{
    return (int)(intptr_t)ring__strmap_get(&c->index, name) - 1;
}

int ring__cache_lookup(const struct ring__cache *c, const struct ring__request *req)
{
    return ring__cache_lookup_h(c, req, ring__strmap_hash(req->name));
}

int ring__cache_lookup_h(const struct ring__cache *c, const struct ring__request *req, size_t h)
{
    int bit = (int)(intptr_t)ring__strmap_get_h(&c->index, req->name, h) - 1;
    /* The index matched the name already. */
    if (bit < 0 || !ring__request_same_params(&c->entries[bit].req, req))
        return -1;
    return bit;
}

int ring__cache_cacheable(const struct ring__request *req)
{
    /* v-ops change sizes from call to call and a rank only knows its own. A packed group
     * (engine.h) is one entry whose counts are compared like the other parameters. A GPU
     * group's members are cached one bit each; they fire as a unit because a rank marks all
     * of them ready at once or none (the engine's take_queue: a group with a member not
     * cached goes through the coordinator whole), and every rank's cache is the same. */
    return req->type != RING__ALLGATHERV && req->type != RING__ALLTOALLV;
}

void ring__cache_touch(struct ring__cache *c, int bit)
{
    c->entries[bit].last_use = ++c->clock;
}

void ring__cache_erase(struct ring__cache *c, const char *name)
{
    int bit = bit_of(c, name);
    if (bit < 0)
        return;
    ring__strmap_del(&c->index, name);
    ring__request_clear(&c->entries[bit].req);
    c->entries[bit].used = 0;
}

int ring__cache_put(struct ring__cache *c, const struct ring__request *req)
{
    int bit, victim = -1;
    uint64_t oldest = UINT64_MAX;

    if (c->capacity == 0 || !ring__cache_cacheable(req))
        return -1;
    ring__cache_erase(c, req->name);
    for (bit = 0; bit < c->capacity; bit++) {
        if (!c->entries[bit].used) {
            victim = bit;
            break;
        }
        if (c->entries[bit].last_use < oldest) {
            oldest = c->entries[bit].last_use;
            victim = bit;
        }
    }
    if (c->entries[victim].used)
        ring__cache_erase(c, c->entries[victim].req.name);
    if (ring__request_copy(&c->entries[victim].req, req) < 0)
        return -1;
    if (ring__strmap_put(&c->index, req->name, (void *)(intptr_t)(victim + 1)) < 0) {
        ring__request_clear(&c->entries[victim].req);
        return -1;
    }
    c->entries[victim].used = 1;
    if (victim >= c->hwm)
        c->hwm = victim + 1;
    ring__cache_touch(c, victim);
    return victim;
}
