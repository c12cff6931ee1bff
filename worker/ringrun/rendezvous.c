/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rendezvous.c - the key-value server of ringrun.
 *
 * Every client is a rank at start-up: it proves the job's secret (net.h: HELLO, AUTH), makes
 * a few SETs and GETs, then disconnects. A GET for a key not yet set parks the client until
 * some rank sets it. Replies are a line each, far below a socket buffer, so they are written
 * without waiting; a client whose reply would block is misbehaving and is dropped.
 *
 * Anyone who can reach the port can connect (ringrun binds loopback for a one-host job, every
 * address otherwise), so nothing is believed before the proof: a client that has not proved
 * the secret may only say HELLO and AUTH, anything else closes it. Each key is set once: a
 * SET of a key that exists is refused, so that no rank (and no bug) can change an address
 * another rank may already have read.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h" /* ring__now_ms */
#include "bootstrap/rendezvous_protocol.h"
#include "rendezvous.h"

/*
 * Limits, so that no caller can make ringrun hold unbounded memory or descriptors:
 * - clients still proving the secret: RDV_PENDING_MAX. Anyone who can reach the port can
 *   connect far faster than ranks do (one local process makes 10 000 to 50 000 connections
 *   a second, closing each at once or holding it and saying nothing), so a slot is not
 *   first come, first served, and a flood that proves nothing must not push out a rank that
 *   is proving the secret (tests/integration/rendezvous_flood.sh):
 *   - a round serves what clients sent before it accepts newcomers, and serves each
 *     newcomer as it accepts it: a rank's HELLO, sent the moment it connects, is usually
 *     there already, and a connection its peer closed is reaped before it takes a slot;
 *   - a newcomer to a full table pushes out, oldest first, an unproven client that said
 *     nothing through a whole poll, else one whose challenge went unanswered for
 *     RDV_PROVE_MS (a rank answers within a round trip; a second covers a loaded host and
 *     a slow network). So a flood that says nothing cannot push out a rank whose HELLO was
 *     read; one pushed out before it spoke dials again (bootstrap_rendezvous.c);
 *   - failing both, newcomers wait in the listen backlog (RDV_BACKLOG, the kernel's usual
 *     somaxconn) until a client proves the secret or leaves, or the oldest challenge grows
 *     stale (rendezvous_timeout); the listener is left out of the poll meanwhile;
 *   - a round accepts at most RDV_ACCEPT_ROUND, so that a flood faster than the server
 *     cannot keep it from the clients it holds.
 *   A silent client is not given time, as a challenged one is: a flood that held its
 *   connections would then shut the door for as long, with a few dozen descriptors.
 * - clients that proved it: two per rank (a rank holds one connection for its life, and
 *   for a moment two while it initializes again) plus RDV_SPARE; they are never pushed out;
 * - keys: RDV_KEYS_PER_RANK per rank. A ring_init publishes one key per 120 bytes of its
 *   address blob (bootstrap_rendezvous.c; the blob is 80 bytes today, so one key), and a
 *   barrier one more: 256 leave room for a hundred re-initialisations with larger blobs.
 */
#define RDV_PENDING_MAX   64
#define RDV_PROVE_MS      1000
#define RDV_SPARE         8
#define RDV_KEYS_PER_RANK 256
#define RDV_BACKLOG       4096
#define RDV_ACCEPT_ROUND  RDV_PENDING_MAX

struct client {
    int fd;
    int hello;       /* said HELLO: the nonces below are set */
    int authed;      /* proved the secret */
    int polled;      /* was in a poll since it was accepted: if it had sent anything, poll said */
    int64_t chal_ms; /* when the server answered HELLO (ring__now_ms) */
    unsigned char client_nonce[RING__NONCE_BYTES], server_nonce[RING__NONCE_BYTES];
    size_t len;
    char buf[RING_RDV_LINE_MAX + 1];
    char waiting[RING_RDV_TOKEN_MAX + 1]; /* key of a parked GET, or "" */
};

struct kv {
    char key[RING_RDV_TOKEN_MAX + 1];
    char value[RING_RDV_TOKEN_MAX + 1];
};

struct rendezvous {
    int lfd, port;
    struct ring__key key;
    int size; /* the world's, in the transcript (net.h) */
    int max_authed, max_keys;
    struct client *clients; /* in order of arrival */
    int nclients, nauthed;
    struct kv *kvs;
    int nkvs, cap_kvs;
    int refused; /* clients closed before they proved the secret */
};

static struct rendezvous *alloc(const struct ring__key *key, int size, struct error *err)
{
    struct rendezvous *r = calloc(1, sizeof(*r));

    if (r == NULL || size < 1) {
        free(r);
        errno = size < 1 ? EINVAL : ENOMEM;
        return errprintf(err, size < 1 ? "no ranks" : "out of memory"), NULL;
    }
    r->lfd = -1;
    r->key = *key;
    r->size = size;
    r->max_authed = 2 * size + RDV_SPARE;
    r->max_keys = size * RDV_KEYS_PER_RANK;
    r->clients = calloc((size_t)(RDV_PENDING_MAX + r->max_authed), sizeof(*r->clients));
    if (r->clients == NULL) {
        free(r);
        return errno = ENOMEM, errprintf(err, "out of memory"), NULL;
    }
    return r;
}

struct rendezvous *rendezvous_create(const char *bind_addr, int port, const struct ring__key *key,
                                     int size, struct error *err)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    socklen_t len = sizeof(sa);
    struct rendezvous *r;
    int one = 1, e;

    if (inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) {
        return errno = EINVAL, errprintf(err, "'%s' is not an IPv4 address", bind_addr), NULL;
    }
    if ((r = alloc(key, size, err)) == NULL)
        return NULL;
    r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (r->lfd < 0)
        goto error;
    (void)setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        e = errno;
        if (e == EADDRINUSE)
            errprintf(err, "port %d is in use; pick another with --port or use --port 0", port);
        else
            errprintf(err, "cannot bind %s:%d: %s", bind_addr, port, strerror(e));
        rendezvous_destroy(r);
        errno = e;
        return NULL;
    }
    if (listen(r->lfd, RDV_BACKLOG) < 0 || getsockname(r->lfd, (struct sockaddr *)&sa, &len) < 0)
        goto error;
    r->port = ntohs(sa.sin_port);
    return r;
error:
    e = errno;
    errprintf(err, "rendezvous socket: %s", strerror(e));
    rendezvous_destroy(r);
    errno = e;
    return NULL;
}

void rendezvous_destroy(struct rendezvous *r)
{
    int saved = errno;
    if (r == NULL)
        return;
    for (int i = 0; i < r->nclients; i++)
        close(r->clients[i].fd);
    if (r->lfd >= 0)
        close(r->lfd);
    ring__key_wipe(&r->key);
    free(r->clients);
    free(r->kvs);
    free(r);
    errno = saved;
}

int rendezvous_port(const struct rendezvous *r)
{
    return r->port;
}

int rendezvous_keys(const struct rendezvous *r)
{
    return r->nkvs;
}

int rendezvous_refused(const struct rendezvous *r)
{
    return r->refused;
}

int rendezvous_max_pollfds(const struct rendezvous *r)
{
    return 1 + RDV_PENDING_MAX + r->max_authed;
}

static int pending(const struct rendezvous *r)
{
    return r->nclients - r->nauthed;
}

/*
 * The client a newcomer to a full table may push out (see the limits above), or -1: the
 * oldest unproven client that said nothing through a poll, else the oldest whose challenge
 * is RDV_PROVE_MS old. any_silent counts every silent client, polled or not: the caller's
 * next poll covers them all.
 */
static int victim(const struct rendezvous *r, int any_silent, int64_t now)
{
    int stale = -1;
    for (int i = 0; i < r->nclients; i++) {
        const struct client *c = &r->clients[i];
        if (c->authed)
            continue;
        if (!c->hello && (c->polled || any_silent))
            return i;
        if (c->hello && stale < 0 && now - c->chal_ms >= RDV_PROVE_MS)
            stale = i;
    }
    return stale;
}

int rendezvous_timeout(const struct rendezvous *r)
{
    int64_t now = ring__now_ms(), first = -1, left;
    /* Only while the listener is out of the poll: all pending clients are in their grace. */
    if (pending(r) < RDV_PENDING_MAX || victim(r, 1, now) >= 0)
        return -1;
    for (int i = 0; i < r->nclients; i++) {
        const struct client *c = &r->clients[i];
        if (!c->authed && c->hello && (first < 0 || c->chal_ms < first))
            first = c->chal_ms;
    }
    if (first < 0)
        return -1;
    left = first + RDV_PROVE_MS - now;
    return left < 0 ? 0 : (int)left;
}

int rendezvous_pollfds(const struct rendezvous *r, struct pollfd *pfd, int max)
{
    int n = 0;
    /* A full table that nobody can leave yet: newcomers wait in the backlog, unpolled. */
    if (n < max && r->lfd >= 0 &&
        (pending(r) < RDV_PENDING_MAX || victim(r, 1, ring__now_ms()) >= 0))
        pfd[n++] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
    for (int i = 0; i < r->nclients && n < max; i++)
        pfd[n++] = (struct pollfd){.fd = r->clients[i].fd, .events = POLLIN};
    return n;
}

/* Closes client i; the others keep their order of arrival. */
static void drop(struct rendezvous *r, int i)
{
    struct client *c = &r->clients[i];
    if (c->authed)
        r->nauthed--;
    else
        r->refused++;
    close(c->fd);
    memmove(c, c + 1, (size_t)(r->nclients - i - 1) * sizeof(*c));
    r->nclients--;
}

/* Returns 0, or -1 when the client must be dropped. */
static int reply(struct client *c, const char *line)
{
    size_t n = strlen(line);
    ssize_t k = send(c->fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    return k == (ssize_t)n ? 0 : -1;
}

/* Answers "ERR why" and returns -1: the caller drops the client. */
static int refuse(struct client *c, const char *why)
{
    char line[RING_RDV_LINE_MAX];
    snprintf(line, sizeof(line), "ERR %s\n", why);
    (void)reply(c, line);
    return -1;
}

static const char *lookup(const struct rendezvous *r, const char *key)
{
    for (int i = 0; i < r->nkvs; i++) {
        if (strcmp(r->kvs[i].key, key) == 0)
            return r->kvs[i].value;
    }
    return NULL;
}

/* Adds a key that is not set yet. Returns 0, or -1 when out of memory. */
static int store(struct rendezvous *r, const char *key, const char *value)
{
    if (r->nkvs == r->cap_kvs) {
        int cap = r->cap_kvs ? r->cap_kvs * 2 : 64;
        struct kv *grown = realloc(r->kvs, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return -1;
        r->kvs = grown;
        r->cap_kvs = cap;
    }
    strcpy(r->kvs[r->nkvs].key, key);
    strcpy(r->kvs[r->nkvs].value, value);
    r->nkvs++;
    return 0;
}

/* Answers every client parked on key. */
static void wake(struct rendezvous *r, const char *key, const char *value)
{
    char line[RING_RDV_LINE_MAX];
    snprintf(line, sizeof(line), "VAL %s\n", value);
    for (int i = 0; i < r->nclients; i++) {
        struct client *c = &r->clients[i];
        if (strcmp(c->waiting, key) == 0) {
            c->waiting[0] = '\0';
            /* Not dropped here, which would move the array under serve(): the shutdown
             * makes the next poll report it, and serve() drops it then. */
            if (reply(c, line) < 0)
                shutdown(c->fd, SHUT_RDWR);
        }
    }
}

/* HELLO and AUTH: the proof of the secret (net.h). Returns 0, or -1 to drop the client. */
static int authenticate(struct rendezvous *r, struct client *c, const struct ring__rdv_req *q)
{
    struct ring__auth_transcript t;
    unsigned char mac[RING__MAC_BYTES];
    char line[RING_RDV_LINE_MAX], nonce[2 * RING__NONCE_BYTES + 1], hex[2 * RING__MAC_BYTES + 1];

    if (q->verb == RING__RDV_HELLO && !c->hello) {
        c->hello = 1;
        memcpy(c->client_nonce, q->nonce, sizeof(c->client_nonce));
        ring__auth_nonce(c->server_nonce);
        ring__rdv_transcript(&t, r->size, c->client_nonce, c->server_nonce);
        ring__auth_mac(&r->key, RING__ROLE_ACCEPTOR, &t, mac);
        ring__hex_encode(c->server_nonce, sizeof(c->server_nonce), nonce);
        ring__hex_encode(mac, sizeof(mac), hex);
        snprintf(line, sizeof(line), "CHAL %s %s\n", nonce, hex);
        c->chal_ms = ring__now_ms();
        return reply(c, line);
    }
    if (q->verb != RING__RDV_AUTH || !c->hello)
        return refuse(c, "prove the job's secret first (HELLO, then AUTH)");
    ring__rdv_transcript(&t, r->size, c->client_nonce, c->server_nonce);
    if (!ring__auth_check(&r->key, RING__ROLE_DIALER, &t, q->mac))
        return refuse(c, "that is not a proof of this job's secret");
    if (r->nauthed == r->max_authed)
        return refuse(c, "too many connections for the job's ranks");
    c->authed = 1;
    r->nauthed++;
    return reply(c, "OK\n");
}

/* Executes one request line. Returns 0, or -1 to drop the client. */
static int execute(struct rendezvous *r, int i, char *line)
{
    struct client *c = &r->clients[i];
    struct ring__rdv_req q;
    const char *why, *value;
    char out[RING_RDV_LINE_MAX];

    if (ring__rdv_parse(line, &q, &why) < 0)
        return refuse(c, why);
    if (!c->authed)
        return authenticate(r, c, &q);
    if (q.verb == RING__RDV_HELLO || q.verb == RING__RDV_AUTH)
        return refuse(c, "already authenticated");
    if (q.verb == RING__RDV_SET) {
        if (lookup(r, q.key) != NULL) {
            snprintf(out, sizeof(out), "key %.200s is set already (a key is set once)", q.key);
            return refuse(c, out);
        }
        if (r->nkvs == r->max_keys)
            return refuse(c, "the rendezvous holds as many keys as a job may set");
        if (store(r, q.key, q.value) < 0)
            return refuse(c, "out of memory");
        if (reply(c, "OK\n") < 0)
            return -1;
        wake(r, q.key, q.value);
        return 0;
    }
    if (c->waiting[0] != '\0')
        return refuse(c, "one GET at a time");
    if ((value = lookup(r, q.key)) != NULL) {
        snprintf(out, sizeof(out), "VAL %s\n", value);
        return reply(c, out);
    }
    strcpy(c->waiting, q.key);
    return 0;
}

int rendezvous_adopt(struct rendezvous *r, int fd)
{
    if (pending(r) >= RDV_PENDING_MAX) {
        int i = victim(r, 0, ring__now_ms());
        if (i < 0)
            return -1;
        drop(r, i);
    }
    if (r->nclients == RDV_PENDING_MAX + r->max_authed) /* cannot be: authenticate() caps */
        return -1;
    memset(&r->clients[r->nclients], 0, sizeof(r->clients[0]));
    r->clients[r->nclients].fd = fd;
    r->nclients++;
    return 0;
}

/* Reads what client i sent and executes complete lines. Returns -1 to drop it. */
static int serve(struct rendezvous *r, int i)
{
    struct client *c = &r->clients[i];
    ssize_t k = recv(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, MSG_DONTWAIT);
    char *nl;

    if (k == 0)
        return -1;
    if (k < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    c->len += (size_t)k;
    c->buf[c->len] = '\0';
    while ((nl = memchr(c->buf, '\n', c->len)) != NULL) {
        size_t used = (size_t)(nl - c->buf) + 1;
        *nl = '\0';
        if (strlen(c->buf) != used - 1)
            return refuse(c, "a NUL byte in a request");
        if (execute(r, i, c->buf) < 0)
            return -1;
        memmove(c->buf, c->buf + used, c->len - used + 1);
        c->len -= used;
    }
    if (c->len >= sizeof(c->buf) - 1)
        return refuse(c, "line too long");
    return 0;
}

/*
 * Accepts newcomers while one fits (see the limits above), at most RDV_ACCEPT_ROUND, so that
 * a flood faster than the server cannot keep it from its clients; the rest stay in the
 * backlog for the next round. Fit is checked before accept4, so that nobody is pushed out
 * for a connection that is not there. Each newcomer is served at once: a rank's HELLO
 * is usually there already, and a connection its peer closed is reaped without a slot.
 */
static void accept_some(struct rendezvous *r)
{
    for (int k = 0; k < RDV_ACCEPT_ROUND; k++) {
        int fd, i;
        if (pending(r) >= RDV_PENDING_MAX && victim(r, 0, ring__now_ms()) < 0)
            return;
        fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return; /* EAGAIN, or a transient error the next poll retries */
        if (rendezvous_adopt(r, fd) < 0) {
            close(fd);
            return;
        }
        i = r->nclients - 1;
        if (serve(r, i) < 0)
            drop(r, i);
    }
}

void rendezvous_handle(struct rendezvous *r, const struct pollfd *pfd, int n)
{
    int listener_polled = 0, listener_ready = 0;

    /* Every client in the table was in this poll: whatever it had sent, poll reported. */
    for (int i = 0; i < r->nclients; i++)
        r->clients[i].polled = 1;
    for (int p = 0; p < n; p++) {
        if (pfd[p].fd == r->lfd) {
            listener_polled = 1;
            listener_ready = pfd[p].revents != 0;
            continue;
        }
        if (pfd[p].revents == 0)
            continue;
        for (int i = 0; i < r->nclients; i++) {
            if (r->clients[i].fd == pfd[p].fd) {
                if (serve(r, i) < 0)
                    drop(r, i);
                break;
            }
        }
    }
    /* Newcomers last, once HELLOs are read and closed connections reaped. A listener left
     * out of the poll is tried too: the deadline that woke the caller may have made room. */
    if (listener_ready || (!listener_polled && r->lfd >= 0))
        accept_some(r);
}
