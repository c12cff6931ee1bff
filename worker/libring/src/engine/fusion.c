/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fusion.c - which responses run together. Fusing many small allreduces into one buffer
 * pays the ring's 2(n-1) latency steps once per batch instead of once per tensor, which is
 * most of the cost of the small tensors that dominate a model's gradient count.
 */
#include "engine/engine.h"

static int compatible(const struct ring__request *a, const struct ring__request *b)
{
    return a->dtype == b->dtype && a->op == b->op && a->prescale == b->prescale &&
           a->postscale == b->postscale && a->process_set == b->process_set &&
           (a->device >= 0) == (b->device >= 0);
}

static size_t bytes_of(const struct ring__request *r)
{
    return (size_t)r->count * ring_dtype_size((ring_dtype_t)r->dtype);
}

int ring__fusion_plan(const struct ring__response *resp, int n, size_t threshold, int *starts)
{
    int nb = 0;
    size_t used = 0;

    for (int i = 0; i < n; i++) {
        const struct ring__response *r = &resp[i];
        int fusable = r->error == 0 && r->req.type == RING__ALLREDUCE && threshold > 0;
        int joins = fusable && nb > 0 && i > 0 && resp[i - 1].error == 0 &&
                    resp[i - 1].req.type == RING__ALLREDUCE &&
                    compatible(&resp[i - 1].req, &r->req) && used + bytes_of(&r->req) <= threshold;
        if (joins) {
            used += bytes_of(&r->req);
        } else {
            starts[nb++] = i;
            used = fusable ? bytes_of(&r->req) : threshold; /* nothing joins a non-fusable */
        }
    }
    return nb;
}
