/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bootstrap_rendezvous.c - the bootstrap through ringrun's key-value rendezvous (the
 * protocol is in rendezvous_protocol.h): the job's shape comes from the worker contract,
 * and an allgather is a SET of this rank's blob and a GET of every other rank's.
 *
 * A GET of a key nobody has set yet waits at the server until some rank sets it, so the
 * GETs themselves are the synchronisation: a rank returns from the allgather once every
 * rank has published. Values are printable tokens of at most 255 characters, so a blob
 * travels hex-encoded in parts of PART_BYTES, under keys "ag<seq>.<rank>.<part>"; seq
 * counts this process's allgathers, which every rank makes in the same order, over all its
 * ring_inits: the server sets a key once (rendezvous_protocol.h), and a rank that
 * initializes again must not read the addresses its peers published the first time.
 *
 * Every connection first proves the job's secret, which ringrun passed in RING_JOB_SECRET
 * (auth.h), and checks that the server holds it too; without the variable a rendezvous is
 * refused (RING_EENV), since the server would refuse the rank anyway.
 *
 * One connection per rank stays open until ring_finalize; the server keeps no state per
 * connection beyond a parked GET, so an idle one costs it a file descriptor.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/net.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/rendezvous_protocol.h"

/* 120 bytes are 240 hex characters, inside the protocol's 255. */
#define PART_BYTES 120

struct rdv {
    struct ring__bootstrap b; /* first: the bootstrap is a struct rdv */
    int fd;
    char addr[RING_RDV_TOKEN_MAX + 1];
};

/* This process's allgathers so far, over every ring_init (see the top of the file). */
static unsigned rdv_seq;

/* Turns a failed rendezvous call into a message that says what to check. */
static int rdv_error(struct rdv *r, int rc, int waiting_for)
{
    int secs = r->b.timeout_ms / 1000;
    if (rc == RING_ETIMEDOUT && waiting_for >= 0)
        return ring__err(RING_ETIMEDOUT,
                         "rank %d: rank %d did not reach the rendezvous at %s within %d s "
                         "(RING_TIMEOUT_SECONDS); did it start?",
                         r->b.rank, waiting_for, r->addr, secs);
    if (rc == RING_ETIMEDOUT)
        return ring__err(RING_ETIMEDOUT,
                         "rank %d: the rendezvous at %s did not answer within %d s "
                         "(RING_TIMEOUT_SECONDS)",
                         r->b.rank, r->addr, secs);
    if (rc == RING_EPEER)
        return ring__err(RING_EBOOTSTRAP,
                         "rank %d: the rendezvous at %s closed the connection (did ringrun exit?)",
                         r->b.rank, r->addr);
    return rc; /* already says what went wrong with which key */
}

static int rdv_allgather(struct ring__bootstrap *b, const void *mine, size_t len, void *all)
{
    struct rdv *r = (struct rdv *)b;
    int64_t deadline = ring__now_ms() + b->timeout_ms;
    size_t nparts = (len + PART_BYTES - 1) / PART_BYTES;
    unsigned seq = rdv_seq++;
    char key[64], val[RING_RDV_TOKEN_MAX + 1];
    int rc;

    if (len > 0)
        memcpy((char *)all + (size_t)b->rank * len, mine, len);
    for (size_t p = 0; p < nparts; p++) {
        size_t n = len - p * PART_BYTES < PART_BYTES ? len - p * PART_BYTES : PART_BYTES;
        snprintf(key, sizeof(key), "ag%u.%d.%zu", seq, b->rank, p);
        ring__hex_encode((const unsigned char *)mine + p * PART_BYTES, n, val);
        if ((rc = ring__rdv_set(r->fd, key, val, deadline)) < 0)
            return rdv_error(r, rc, -1);
    }
    for (int peer = 0; peer < b->size; peer++) {
        for (size_t p = 0; peer != b->rank && p < nparts; p++) {
            size_t n = len - p * PART_BYTES < PART_BYTES ? len - p * PART_BYTES : PART_BYTES;
            unsigned char *dst = (unsigned char *)all + (size_t)peer * len + p * PART_BYTES;
            snprintf(key, sizeof(key), "ag%u.%d.%zu", seq, peer, p);
            if ((rc = ring__rdv_get(r->fd, key, val, sizeof(val), deadline)) < 0)
                return rdv_error(r, rc, peer);
            if (ring__hex_decode(val, dst, n) < 0)
                return ring__err(RING_EBOOTSTRAP,
                                 "rank %d: the rendezvous at %s holds a malformed %s "
                                 "(another job on the same rendezvous?)",
                                 b->rank, r->addr, key);
        }
    }
    return 0;
}

static int rdv_barrier(struct ring__bootstrap *b)
{
    unsigned char one = 1, *all = malloc((size_t)b->size);
    int rc;

    if (all == NULL)
        return ring__err(RING_ENOMEM, "out of memory for a barrier");
    rc = rdv_allgather(b, &one, 1, all);
    free(all);
    return rc;
}

static void rdv_finalize(struct ring__bootstrap *b)
{
    struct rdv *r = (struct rdv *)b;
    if (r->fd >= 0)
        close(r->fd);
    ring__key_wipe(&r->b.key);
    free(r);
}

static const struct ring__bootstrap_ops rdv_ops = {
    .name = "rendezvous",
    .allgather = rdv_allgather,
    .barrier = rdv_barrier,
    .finalize = rdv_finalize,
};

/* The address this host used to reach the rendezvous: peers can reach it there too. */
static void local_addr(struct rdv *r)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(r->fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, r->b.host_addr,
                  sizeof(r->b.host_addr));
}

static int rdv_open(int timeout_ms, struct ring__bootstrap **out)
{
    const char *addr = getenv("RING_RENDEZVOUS");
    char host[256], port[16];
    int64_t deadline = ring__now_ms() + timeout_ms;
    struct rdv *r;
    int rc;

    if (addr == NULL || *addr == '\0')
        return 0; /* not launched by ringrun */
    if ((r = calloc(1, sizeof(*r))) == NULL)
        return ring__err(RING_ENOMEM, "out of memory for the bootstrap");
    r->fd = -1;
    r->b.ops = &rdv_ops;
    r->b.timeout_ms = timeout_ms;
    if ((rc = ring__bootstrap_read_contract(&r->b)) < 0)
        goto error;
    if ((rc = ring__key_from_env(&r->b.key)) < 0)
        goto error;
    if (rc == 0) {
        ring__log(RING_LOG_ERROR,
                  "RING_RENDEZVOUS is set but %s is not; start the program with "
                  "ringrun (of this build)",
                  RING__SECRET_ENV);
        rc = ring__err(RING_EENV,
                       "RING_RENDEZVOUS is set but %s is not: ranks prove the job's secret to "
                       "the rendezvous and to each other; start the program with ringrun (of "
                       "this build)",
                       RING__SECRET_ENV);
        goto error;
    }
    r->b.has_key = 1;
    if (ring__net_split_hostport(addr, host, sizeof(host), port, sizeof(port)) < 0 ||
        strlen(addr) >= sizeof(r->addr)) {
        rc = ring__err(RING_EENV, "RING_RENDEZVOUS='%s' is not host:port", addr);
        goto error;
    }
    snprintf(r->addr, sizeof(r->addr), "%s", addr);
    /*
     * A rendezvous flooded with connections that prove nothing may close a rank's before it
     * read its HELLO, when the rank was descheduled between connect and HELLO (ringrun's
     * rendezvous.c): the rank dials again, 4 times at most, which makes a failure
     * vanishingly rare. A redial waits at most 3 s for a refusing port, so that a rank whose
     * ringrun is gone still fails soon.
     */
    for (int dial = 1;; dial++) {
        int64_t until =
            dial > 1 && deadline - ring__now_ms() > 3000 ? ring__now_ms() + 3000 : deadline;
        if ((rc = ring__net_connect(host, port, 0, until, &r->fd)) < 0) {
            /* ring__net_connect's text names the address already. */
            rc = ring__err(rc == RING_ETIMEDOUT ? rc : RING_EBOOTSTRAP,
                           "cannot reach the rendezvous (RING_RENDEZVOUS): %s", ring_last_error());
            goto error;
        }
        rc = ring__rdv_auth(r->fd, &r->b.key, r->b.size, deadline);
        if (rc != RING_EPEER || dial == 4 || ring__now_ms() + 10 * dial >= deadline)
            break;
        ring__log(RING_LOG_WARNING,
                  "rank %d: the rendezvous at %s closed the connection before "
                  "the handshake (a flood of connections?); dialing again",
                  r->b.rank, r->addr);
        close(r->fd);
        r->fd = -1;
        usleep((useconds_t)dial * 10 * 1000);
    }
    if (rc < 0) {
        rc = rc == RING_EBOOTSTRAP
                 ? ring__err(rc, "rank %d: authenticating with the rendezvous at %s: %s", r->b.rank,
                             r->addr, ring_last_error())
                 : rdv_error(r, rc, -1);
        ring__log(RING_LOG_ERROR, "%s", ring_last_error());
        goto error;
    }
    local_addr(r);
    *out = &r->b;
    return 0;
error:
    rdv_finalize(&r->b);
    return rc;
}

const struct ring__bootstrap_impl ring__bootstrap_rendezvous = {"rendezvous", rdv_open};
