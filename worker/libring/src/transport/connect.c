/* SPDX-License-Identifier: Apache-2.0 */
/*
 * connect.c - how the pairs of one transport get connected, the same way for every wire
 * (transport.h, struct ring__transport): each rank dials its lower peers and accepts its
 * higher ones, and every connection starts with the handshake of handshake.h, in which both
 * ends prove the job's secret before the wire sends a byte of its own.
 *
 * One poll loop runs it all at once, each dial and each accepted connection a small state
 * machine: a dial sends its hello and waits for the challenge (then, on some wires, for the
 * peer's reply) without blocking the loop, and an accepted connection is read as its bytes
 * come. So no rank waits on another's progress through its other peers (the set-up of n
 * ranks takes a few round trips, not n of them one after the other), and a stranger who
 * connects and stalls, or floods the listener, delays no real peer.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "base/net.h"
#include "base/tuning.h"
#include "transport/handshake.h"
#include "transport/transport.h"

int ring__mesh_wanted(const struct ring__mesh_cfg *cfg, const unsigned char *use,
                      struct ring__pair *const *pairs, uint32_t rank, uint32_t size)
{
    return size == (uint32_t)cfg->size && rank > (uint32_t)cfg->rank && rank < size && use[rank] &&
           pairs[rank] == NULL;
}

/*
 * Connections accepted and still in their handshake, at most. Each is read as its bytes
 * come, so a caller that connects and stalls takes a slot but holds up nothing. Past the
 * limit the oldest is dropped: a real peer's handshake takes one round trip, so the oldest
 * is the likeliest to be stuck, and a real dialer dropped before its challenge connects
 * again. 64 is far above what real peers need: each higher rank has one dial to this one
 * at a time.
 */
#define PENDING_MAX 64

/* A connection accepted, in its handshake. */
struct pending {
    int fd;
    struct ring__hs hs;
};

/* A dial to a lower peer: waiting for its challenge, then (some wires) for its reply. */
enum { DIAL_CHALLENGE, DIAL_REPLY, DIAL_DONE };

struct dial {
    int peer, fd, stage;
    size_t got;
    struct ring__hs_hello hello;
    struct ring__hs_challenge ch;
};

/* One transport's connect loop: its dials and the connections it accepted (oldest first). */
struct connecting {
    const struct ring__transport *t;
    void *state;
    const struct ring__mesh_cfg *cfg;
    const char *blobs;
    size_t stride;
    const unsigned char *use;
    struct ring__pair **pairs;
    struct ring__hs_ctx hs;
    int64_t deadline;
    struct dial *dials; /* one per lower peer this transport serves */
    int ndials, dialing;
    struct pending pend[PENDING_MAX];
    int npend;
};

static int connecting_wants(void *arg, uint32_t rank, uint32_t size)
{
    struct connecting *c = arg;
    return ring__mesh_wanted(c->cfg, c->use, c->pairs, rank, size);
}

/* ---- dialing ---- */

/* Connects to d's peer and sends the hello; the answer comes through the loop. */
static int dial_start(struct connecting *c, struct dial *d)
{
    int rc = c->t->connect(c->state, c->cfg, c->blobs + (size_t)d->peer * c->stride, d->peer,
                           c->deadline, &d->fd);
    if (rc < 0)
        return rc;
    d->stage = DIAL_CHALLENGE;
    d->got = 0;
    ring__hs_dial_hello(&c->hs, &d->hello);
    /* The first bytes on the connection: they fit any socket buffer. */
    if ((rc = ring__net_write_all(d->fd, &d->hello, sizeof(d->hello), c->deadline)) < 0) {
        close(d->fd);
        d->fd = -1;
        return ring__err(rc, "rank %d: cannot greet rank %d over %s: %s", c->cfg->rank, d->peer,
                         c->t->name, ring_last_error());
    }
    return 0;
}

/* The challenge is in: checks it, proves this rank, hands the connection to the wire. */
static int dial_prove(struct connecting *c, struct dial *d)
{
    struct ring__hs_proof proof;
    char why[128];
    int rc;

    if (ring__hs_dial_check(&c->hs, &d->hello, d->peer, &d->ch, &proof, why, sizeof(why)) < 0) {
        ring__log(RING_LOG_ERROR, "%s: the listener published by rank %d is not that rank: %s",
                  c->t->name, d->peer, why);
        return ring__err(RING_EBOOTSTRAP,
                         "rank %d: the %s listener published by rank %d is not that rank: %s "
                         "(another job's process, or an impostor?)",
                         c->cfg->rank, c->t->name, d->peer, why);
    }
    if ((rc = ring__net_write_all(d->fd, &proof, sizeof(proof), c->deadline)) < 0)
        return ring__err(rc, "rank %d: rank %d closed the %s connection at set-up", c->cfg->rank,
                         d->peer, c->t->name);
    /* From here the pair owns the fd (and the mesh the pair, also on an error). */
    d->stage = DIAL_REPLY;
    rc = c->t->dialed(c->state, c->cfg, d->fd, d->peer, &c->pairs[d->peer]);
    if (rc == 1) {
        d->stage = DIAL_DONE;
        c->dialing--;
    }
    return rc < 0 ? rc : 0;
}

/* d's connection is readable: moves its dial on. Returns 0 or an error. */
static int step_dial(struct connecting *c, struct dial *d)
{
    ssize_t k;
    int rc;

    if (d->stage == DIAL_REPLY) {
        if ((rc = c->t->dial_reply(c->state, c->cfg, d->fd, c->pairs[d->peer], c->deadline)) < 0)
            return rc;
        d->stage = DIAL_DONE;
        c->dialing--;
        return 0;
    }
    k = recv(d->fd, (char *)&d->ch + d->got, sizeof(d->ch) - d->got, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (k <= 0) {
        /* Closed before its challenge: the peer shed it among a flood of callers. */
        close(d->fd);
        d->fd = -1;
        if (ring__now_ms() >= c->deadline)
            return ring__err(RING_ETIMEDOUT, "rank %d: rank %d kept closing the %s connection",
                             c->cfg->rank, d->peer, c->t->name);
        return dial_start(c, d);
    }
    d->got += (size_t)k;
    return d->got == sizeof(d->ch) ? dial_prove(c, d) : 0;
}

/* ---- accepting ---- */

/* Forgets connection i, closing it unless keep; why (if any) goes to the log. */
static void drop_pending(struct connecting *c, int i, const char *why, int keep)
{
    if (why != NULL)
        ring__log(RING_LOG_WARNING, "%s: refused a connection: %s", c->t->name, why);
    if (!keep)
        close(c->pend[i].fd);
    memmove(&c->pend[i], &c->pend[i + 1], (size_t)(c->npend - i - 1) * sizeof(c->pend[0]));
    c->npend--;
}

/* Takes every connection waiting on the listening socket into a handshake. */
static int accept_new(struct connecting *c)
{
    int lfd = c->t->listen_fd(c->state);
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                return ring__err(RING_ESYS, "rank %d: accept over %s: %s", c->cfg->rank, c->t->name,
                                 strerror(errno));
            return 0; /* EAGAIN, or a caller gone before we took it: poll again */
        }
        if (c->t->admit != NULL && !c->t->admit(c->state, c->cfg, fd)) {
            close(fd);
            continue;
        }
        if (c->npend == PENDING_MAX)
            drop_pending(c, 0,
                         "too many connections in their handshake at once (dropped the oldest)", 0);
        c->pend[c->npend].fd = fd;
        ring__hs_accept_init(&c->pend[c->npend].hs);
        c->npend++;
    }
}

/*
 * Reads what accepted connection i sent and moves its handshake on. Returns 1 when it became
 * the pair of a peer, 0 when not (yet), or an error of the transport's answer.
 */
static int step_pending(struct connecting *c, int i)
{
    struct pending *p = &c->pend[i];
    struct ring__hs_challenge reply;
    unsigned char buf[sizeof(p->hs.in)];
    ssize_t k = recv(p->fd, buf, ring__hs_need(&p->hs), MSG_DONTWAIT);
    int fd = p->fd, peer, v;

    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop_pending(c, i, NULL, 0); /* gone: a port scan, or a caller that gave up */
        return 0;
    }
    if (k < 0)
        return 0;
    v = ring__hs_accept_take(&p->hs, &c->hs, buf, (size_t)k, connecting_wants, c, &reply);
    if (v == RING__HS_SEND) {
        /* The first bytes this end sends on the connection: they fit any socket buffer. */
        if (send(fd, &reply, sizeof(reply), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(reply))
            drop_pending(c, i, NULL, 0);
        return 0;
    }
    if (v == RING__HS_REFUSE) {
        drop_pending(c, i, p->hs.why, 0);
        return 0;
    }
    if (v != RING__HS_OK)
        return 0;
    peer = (int)p->hs.peer;
    drop_pending(c, i, NULL, 1);
    if (!ring__mesh_wanted(c->cfg, c->use, c->pairs, (uint32_t)peer, (uint32_t)c->cfg->size)) {
        close(fd); /* rank peer connected twice: the first won */
        return 0;
    }
    v = c->t->answer(c->state, c->cfg, fd, peer, c->pairs, c->deadline);
    return v < 0 ? v : 1;
}

/* ---- the loop ---- */

/*
 * Runs every dial and accept of transport t to the end: until each lower peer's dial is done
 * and want higher peers have connected, by the deadline.
 */
static int connect_loop(struct connecting *c, int want)
{
    struct pollfd *pfd = calloc((size_t)(1 + PENDING_MAX + c->ndials), sizeof(*pfd));
    struct dial **polled_dial = calloc((size_t)c->ndials + 1, sizeof(*polled_dial));
    int got = 0, rc = pfd != NULL && polled_dial != NULL
                          ? ring__net_set_nonblock(c->t->listen_fd(c->state))
                          : ring__err(RING_ENOMEM, "out of memory for the connect loop");

    while (rc == 0 && (got < want || c->dialing > 0)) {
        int64_t left = c->deadline - ring__now_ms();
        int n = 0, nd = 0, ready, npolled = c->npend;

        pfd[n++] =
            (struct pollfd){.fd = got < want ? c->t->listen_fd(c->state) : -1, .events = POLLIN};
        for (int i = 0; i < c->npend; i++)
            pfd[n++] = (struct pollfd){.fd = c->pend[i].fd, .events = POLLIN};
        for (int i = 0; i < c->ndials; i++) {
            if (c->dials[i].stage != DIAL_DONE) {
                polled_dial[nd++] = &c->dials[i];
                pfd[n++] = (struct pollfd){.fd = c->dials[i].fd, .events = POLLIN};
            }
        }
        ready = poll(pfd, (nfds_t)n, left > 0 ? (int)(left < INT32_MAX ? left : INT32_MAX) : 0);
        if (ready == 0) {
            rc = ring__err(RING_ETIMEDOUT,
                           "rank %d: timed out connecting to the%s ranks over %s (%d of %d higher "
                           "ones called, %d dials unanswered)",
                           c->cfg->rank, c->t->host_only ? " local" : "", c->t->name, got, want,
                           c->dialing);
            break;
        }
        if (ready < 0) {
            if (errno != EINTR)
                rc = ring__err(RING_ESYS, "poll: %s", strerror(errno));
            continue;
        }
        for (int i = 0; i < nd && rc == 0; i++) {
            if (pfd[1 + npolled + i].revents != 0)
                rc = step_dial(c, polled_dial[i]);
        }
        /* From the newest down: dropping one moves only those after it. */
        for (int i = npolled - 1; i >= 0 && rc >= 0; i--) {
            if (pfd[1 + i].revents != 0 && (rc = step_pending(c, i)) > 0) {
                got++;
                rc = 0;
            }
        }
        if (rc == 0 && pfd[0].revents != 0)
            rc = accept_new(c);
    }
    if (rc == 0 && c->npend > 0)
        ring__log(RING_LOG_WARNING,
                  "%s: closed %d connection%s that had not proved the job's secret when every "
                  "peer had connected",
                  c->t->name, c->npend, c->npend == 1 ? "" : "s");
    while (c->npend > 0)
        drop_pending(c, c->npend - 1, NULL, 0);
    free(pfd);
    free(polled_dial);
    return rc;
}

int ring__mesh_connect(const struct ring__transport *t, void *state,
                       const struct ring__mesh_cfg *cfg, const char *blobs, size_t stride,
                       const unsigned char *use, struct ring__pair **pairs, int64_t deadline)
{
    struct connecting *c = calloc(1, sizeof(*c));
    int rc = 0, want = 0;

    if (c == NULL || (c->dials = calloc((size_t)cfg->rank + 1, sizeof(*c->dials))) == NULL) {
        free(c);
        return ring__err(RING_ENOMEM, "out of memory for the connect loop");
    }
    c->t = t;
    c->state = state;
    c->cfg = cfg;
    c->blobs = blobs;
    c->stride = stride;
    c->use = use;
    c->pairs = pairs;
    c->deadline = deadline;
    c->hs = (struct ring__hs_ctx){
        .key = cfg->key, .wire = t->name, .magic = t->magic, .rank = cfg->rank, .size = cfg->size};
    for (int peer = 0; peer < cfg->rank && rc == 0; peer++) {
        if (!use[peer])
            continue;
        c->dials[c->ndials] = (struct dial){.peer = peer, .fd = -1};
        if ((rc = dial_start(c, &c->dials[c->ndials])) == 0) {
            c->ndials++;
            c->dialing++;
        }
    }
    for (int peer = cfg->rank + 1; peer < cfg->size; peer++)
        want += use[peer];
    if (rc == 0)
        rc = connect_loop(c, want);
    /* A dial's fd is its pair's once dialed; before, it is still the loop's to close. */
    for (int i = 0; i < c->ndials; i++) {
        if (c->dials[i].stage == DIAL_CHALLENGE && c->dials[i].fd >= 0)
            close(c->dials[i].fd);
    }
    free(c->dials);
    free(c);
    return rc;
}
