/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_round.c - step 4 of a cycle (engine.c), the full round: when some rank holds a
 * request the response cache does not know (or rank 0 asks, to inspect a stall), every rank
 * sends its unfired requests to rank 0, which matches and validates them (coordinator.c),
 * keeps the stall bookkeeping, and broadcasts the ordered responses back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"

/* Rank 0: stall bookkeeping for the names of a full round that are not ready yet. */
static void inspect_stalls(struct ring__engine *e, struct ring__request **reqs, const int *nreqs,
                           const struct ring__response *resp, int nresp, int64_t now, int *shutdown,
                           char *msg, size_t msglen)
{
    int size = e->ctx->size;

    for (int i = 0; i < nresp; i++) {
        struct stall *s = ring__strmap_del(&e->stalls, resp[i].req.name);
        if (s != NULL) {
            for (int r = 0; r < size; r++) {
                char what[32];
                snprintf(what, sizeof(what), "rank %d ready", r);
                if (!s->seen[r])
                    ring__timeline_mark(e->timeline, resp[i].req.name, what, now);
            }
            free(s->seen);
            free(s);
        }
    }
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < nreqs[r]; i++) {
            const char *name = reqs[r][i].name;
            struct stall *s;
            int done = 0;
            for (int k = 0; k < nresp && !done; k++)
                done = strcmp(resp[k].req.name, name) == 0;
            if (done)
                continue;
            s = ring__strmap_get(&e->stalls, name);
            if (s == NULL) {
                s = calloc(1, sizeof(*s));
                if (s == NULL || (s->seen = calloc((size_t)size, 1)) == NULL ||
                    ring__strmap_put(&e->stalls, name, s) < 0) {
                    if (s != NULL)
                        free(s->seen);
                    free(s);
                    continue;
                }
                s->first_us = now;
            }
            if (!s->seen[r]) {
                char what[32];
                snprintf(what, sizeof(what), "rank %d ready", r);
                ring__timeline_mark(e->timeline, name, what, now);
                s->seen[r] = 1;
            }
        }
    }
    /* Warn about (or give up on) names some ranks have lacked for too long. */
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < nreqs[r]; i++) {
            const char *name = reqs[r][i].name;
            struct stall *s = ring__strmap_get(&e->stalls, name);
            char have[256], missing[256];
            size_t hl = 0, ml = 0;
            int64_t age;
            if (s == NULL)
                continue;
            age = now - s->first_us;
            have[0] = missing[0] = '\0';
            for (int k = 0; k < size; k++) {
                char *b = s->seen[k] ? have : missing;
                size_t *l = s->seen[k] ? &hl : &ml;
                if (*l + 12 < sizeof(have))
                    *l += (size_t)snprintf(b + *l, sizeof(have) - *l, "%s%d", *l ? ", " : "", k);
            }
            if (e->stall_shutdown_us > 0 && age >= e->stall_shutdown_us && !*shutdown) {
                *shutdown = 1;
                snprintf(msg, msglen,
                         "%s '%s' stalled for %lld s (RING_STALL_SHUTDOWN_SECONDS): submitted "
                         "by ranks %s, never by ranks %s",
                         ring__optype_name(reqs[r][i].type), name, (long long)(age / 1000000), have,
                         missing);
            }
            if (e->stall_check_us > 0 && age >= e->stall_check_us &&
                now - s->warned_us >= e->stall_check_us) {
                s->warned_us = now;
                ring__log(RING_LOG_WARNING,
                          "stall: %s '%s' was submitted by ranks %s but not by ranks %s for "
                          "%lld s; those ranks may have diverged (different code paths, "
                          "uneven data without ring_join)",
                          ring__optype_name(reqs[r][i].type), name, have, missing,
                          (long long)(age / 1000000));
            }
        }
    }
}

/*
 * RING_JOIN_BROADCAST=0, on rank 0: while ranks have joined, every broadcast fails with
 * RING_EJOINED, as in Horovod, rather than only those from a joined root (coordinator.c).
 * Returns 0 or RING_ENOMEM.
 */
static int refuse_joined_broadcasts(struct ring__engine *e, struct ring__response *resp, int n)
{
    int joined = -1;
    if (e->ctx->tune.v[RING__K_JOIN_BROADCAST])
        return 0;
    for (int r = 0; r < e->ctx->size && joined < 0; r++)
        joined = e->joined_ranks[r] ? r : -1;
    for (int i = 0; joined >= 0 && i < n; i++) {
        char msg[RING__NAME_MAX + 128];
        if (resp[i].req.type != RING__BROADCAST || resp[i].error != 0)
            continue;
        snprintf(msg, sizeof(msg),
                 "broadcast '%s': not allowed while ranks have joined (rank %d has; "
                 "RING_JOIN_BROADCAST=0)",
                 resp[i].req.name, joined);
        if ((resp[i].message = strdup(msg)) == NULL)
            return ring__err(RING_ENOMEM, "coordinator: out of memory");
        resp[i].error = RING_EJOINED;
    }
    return 0;
}

/*
 * Rank 0's part of a full round: reads every rank's unfired requests (bufs, lens: the
 * gather's, which it frees), matches and validates them (coordinator.c), refuses what
 * RING_JOIN_BROADCAST=0 refuses, inspects stalls, and serializes the answer every rank
 * reads: the stall shutdown and its message, then the responses. On an error the answer
 * still goes out, saying so, so that the other ranks fail with a message rather than time
 * out. Returns the answer in *payload, *plen, which the caller frees.
 */
static void coordinate(struct ring__engine *e, char **bufs, size_t *lens, int *shutdown, char *msg,
                       size_t msglen, char **payload, size_t *plen)
{
    int size = e->ctx->size, rc;
    struct ring__request **reqs = calloc((size_t)size, sizeof(*reqs));
    int *nreqs = calloc((size_t)size, sizeof(int));
    struct ring__response *resp = NULL;
    struct ring__buf ob = {0};
    int nresp = 0;
    int64_t now = ring__now_us();

    rc = reqs && nreqs ? 0 : ring__err(RING_ENOMEM, "coordinator: out of memory");
    for (int r = 0; r < size && rc == 0; r++) {
        struct ring__reader rd = {bufs[r], bufs[r] + lens[r], 0};
        uint64_t n = ring__get_u64(&rd);
        if (rd.bad || n > lens[r] / RING__REQUEST_WIRE_MIN) {
            rc = ring__err(RING_EPROTO, "rank %d sent a malformed request list", r);
            break;
        }
        reqs[r] = calloc(n > 0 ? n : 1, sizeof(**reqs));
        if (reqs[r] == NULL) {
            rc = RING_ENOMEM;
            break;
        }
        for (uint64_t i = 0; i < n && rc == 0; i++) {
            if ((rc = ring__get_request(&rd, &reqs[r][i])) < 0)
                rc = ring__err(RING_EPROTO, "rank %d sent a malformed request", r);
            else
                nreqs[r]++;
        }
    }
    if (rc == 0) {
        pthread_mutex_lock(&e->mu);
        for (int r = 0; r < size; r++)
            e->stats.coordinator_names += (uint64_t)nreqs[r];
        rc = ring__coord_match(size, reqs, nreqs, e->joined_ranks, &e->psets, &resp, &nresp);
        pthread_mutex_unlock(&e->mu);
    }
    if (rc == 0)
        rc = refuse_joined_broadcasts(e, resp, nresp);
    if (rc == 0)
        inspect_stalls(e, reqs, nreqs, resp, nresp, now, shutdown, msg, msglen);
    ring__put_u64(&ob, (uint64_t)*shutdown);
    ring__put_str(&ob, *shutdown ? msg : "");
    ring__put_u64(&ob, (uint64_t)nresp);
    for (int i = 0; i < nresp; i++)
        ring__put_response(&ob, &resp[i]);
    for (int r = 0; r < size; r++) {
        for (int i = 0; reqs && reqs[r] && i < nreqs[r]; i++)
            ring__request_clear(&reqs[r][i]);
        if (reqs)
            free(reqs[r]);
        free(bufs[r]);
    }
    free(reqs);
    free(nreqs);
    free(bufs);
    free(lens);
    for (int i = 0; i < nresp; i++)
        ring__response_clear(&resp[i]);
    free(resp);
    if (rc == 0 && ob.oom)
        rc = ring__err(RING_ENOMEM, "coordinator: out of memory");
    if (rc < 0) {
        /* Still answer, so the other ranks fail with a message instead of timing out. */
        ring__buf_free(&ob);
        ring__put_u64(&ob, 1);
        ring__put_str(&ob, ring_last_error());
        ring__put_u64(&ob, 0);
    }
    *payload = ob.data;
    *plen = ob.len;
}

/* Step 4: every rank's unfired requests to rank 0 and the responses back. */
int ring__eng_full_round(struct ring__engine *e, const unsigned char *fired,
                         struct ring__response **out, int *nout, int *shutdown, char *msg,
                         size_t msglen)
{
    struct ring__buf b = {0};
    uint64_t nreq = 0;
    char **bufs = NULL, *payload = NULL;
    size_t *lens = NULL, plen = 0;
    int rc;

    *out = NULL;
    *nout = 0;
    ring__put_u64(&b, 0); /* count, patched below */
    for (struct entry *en = e->phead; en != NULL; en = en->pnext) {
        if (en->bit < 0 || !fired[en->bit]) {
            ring__put_request(&b, &en->req);
            nreq++;
        }
    }
    if (b.oom) {
        ring__buf_free(&b);
        return ring__err(RING_ENOMEM, "out of memory serializing requests");
    }
    for (int i = 0; i < 8; i++)
        b.data[i] = (char)(nreq >> (8 * i));
    rc = ring__gather_bytes(&e->world, b.data, b.len, &bufs, &lens);
    ring__buf_free(&b);
    if (rc < 0)
        return rc;

    if (e->ctx->rank == 0) /* its errors go to every rank in the answer */
        coordinate(e, bufs, lens, shutdown, msg, msglen, &payload, &plen);
    rc = ring__bcast_bytes(&e->world, &payload, &plen);
    if (rc == 0) {
        struct ring__reader rd = {payload, payload + plen, 0};
        uint64_t n;
        char *smsg;
        *shutdown = (int)ring__get_u64(&rd);
        smsg = ring__get_str(&rd);
        if (smsg != NULL) {
            snprintf(msg, msglen, "%s", smsg);
            free(smsg);
        }
        n = ring__get_u64(&rd);
        if (rd.bad || n > plen / RING__RESPONSE_WIRE_MIN) {
            rc = ring__err(RING_EPROTO, "malformed response list from rank 0");
        } else if (n > 0) {
            *out = calloc(n, sizeof(**out));
            if (*out == NULL)
                rc = RING_ENOMEM;
            for (uint64_t i = 0; i < n && rc == 0; i++) {
                if ((rc = ring__get_response(&rd, &(*out)[i])) == 0)
                    (*nout)++;
            }
        }
    }
    free(payload);
    return rc;
}
