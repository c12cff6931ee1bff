/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rendezvous.c - the key-value server of ringrun.
 *
 * Every client is a rank at start-up: a few SETs and GETs, then it disconnects. A GET for a
 * key not yet set parks the client until some rank sets it. Replies are a line each, far
 * below a socket buffer, so they are written without waiting; a client whose reply would
 * block is misbehaving and is dropped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "rendezvous.h"

struct client {
    int fd;
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
    struct client *clients;
    int nclients, cap_clients;
    struct kv *kvs;
    int nkvs, cap_kvs;
};

struct rendezvous *rendezvous_create(const char *bind_addr, int port, struct error *err)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    socklen_t len = sizeof(sa);
    struct rendezvous *r = calloc(1, sizeof(*r));
    int one = 1, e;

    if (r == NULL) {
        snprintf(err->text, sizeof(err->text), "out of memory");
        return NULL;
    }
    if (inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) {
        snprintf(err->text, sizeof(err->text), "'%s' is not an IPv4 address", bind_addr);
        free(r);
        errno = EINVAL;
        return NULL;
    }
    r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (r->lfd < 0)
        goto error;
    (void)setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        e = errno;
        if (e == EADDRINUSE)
            snprintf(err->text, sizeof(err->text),
                     "port %d is in use; pick another with --port or use --port 0", port);
        else
            snprintf(err->text, sizeof(err->text), "cannot bind %s:%d: %s", bind_addr, port,
                     strerror(e));
        close(r->lfd);
        free(r);
        errno = e;
        return NULL;
    }
    if (listen(r->lfd, 4096) < 0 || getsockname(r->lfd, (struct sockaddr *)&sa, &len) < 0)
        goto error;
    r->port = ntohs(sa.sin_port);
    return r;
error:
    e = errno;
    snprintf(err->text, sizeof(err->text), "rendezvous socket: %s", strerror(e));
    if (r->lfd >= 0)
        close(r->lfd);
    free(r);
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
    close(r->lfd);
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

int rendezvous_pollfds(const struct rendezvous *r, struct pollfd *pfd, int max)
{
    int n = 0;
    if (n < max)
        pfd[n++] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
    for (int i = 0; i < r->nclients && n < max; i++)
        pfd[n++] = (struct pollfd){.fd = r->clients[i].fd, .events = POLLIN};
    return n;
}

static void drop(struct rendezvous *r, int i)
{
    close(r->clients[i].fd);
    r->clients[i] = r->clients[--r->nclients];
}

/* Returns 0, or -1 when the client must be dropped. */
static int reply(struct client *c, const char *line)
{
    size_t n = strlen(line);
    ssize_t k = send(c->fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    return k == (ssize_t)n ? 0 : -1;
}

static const char *lookup(const struct rendezvous *r, const char *key)
{
    for (int i = 0; i < r->nkvs; i++) {
        if (strcmp(r->kvs[i].key, key) == 0)
            return r->kvs[i].value;
    }
    return NULL;
}

static int store(struct rendezvous *r, const char *key, const char *value)
{
    for (int i = 0; i < r->nkvs; i++) {
        if (strcmp(r->kvs[i].key, key) == 0) {
            strcpy(r->kvs[i].value, value);
            return 0;
        }
    }
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
            /* Not dropped here, which would reorder the array under serve(): the shutdown
             * makes the next poll report it, and serve() drops it then. */
            if (reply(c, line) < 0)
                shutdown(c->fd, SHUT_RDWR);
        }
    }
}

static int token_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > RING_RDV_TOKEN_MAX)
        return 0;
    for (; *s; s++) {
        if (*s <= ' ' || *s > '~')
            return 0;
    }
    return 1;
}

/* Executes one request line. Returns 0, or -1 to drop the client. */
static int execute(struct rendezvous *r, int i, char *line)
{
    struct client *c = &r->clients[i];
    char *sp = strchr(line, ' ');
    char *key, *value = NULL;
    char out[RING_RDV_LINE_MAX];

    if (sp == NULL)
        return reply(c, "ERR want SET <key> <value> or GET <key>\n"), -1;
    *sp = '\0';
    key = sp + 1;
    if (strcmp(line, "SET") == 0) {
        value = strchr(key, ' ');
        if (value == NULL)
            return reply(c, "ERR SET needs a key and a value\n"), -1;
        *value++ = '\0';
    } else if (strcmp(line, "GET") != 0) {
        return reply(c, "ERR unknown command\n"), -1;
    }
    if (!token_ok(key) || (value != NULL && !token_ok(value)))
        return reply(c, "ERR keys and values are 1-255 printable characters without spaces\n"), -1;
    if (value != NULL) {
        if (store(r, key, value) < 0)
            return reply(c, "ERR out of memory\n"), -1;
        if (reply(c, "OK\n") < 0)
            return -1;
        wake(r, key, value);
        return 0;
    }
    if (c->waiting[0] != '\0')
        return reply(c, "ERR one GET at a time\n"), -1;
    if ((value = (char *)lookup(r, key)) != NULL) {
        snprintf(out, sizeof(out), "VAL %s\n", value);
        return reply(c, out);
    }
    strcpy(c->waiting, key);
    return 0;
}

static void accept_all(struct rendezvous *r)
{
    for (;;) {
        int fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return; /* EAGAIN, or a transient error the next poll retries */
        if (r->nclients == r->cap_clients) {
            int cap = r->cap_clients ? r->cap_clients * 2 : 64;
            struct client *grown = realloc(r->clients, (size_t)cap * sizeof(*grown));
            if (grown == NULL) {
                close(fd);
                return;
            }
            r->clients = grown;
            r->cap_clients = cap;
        }
        r->clients[r->nclients] = (struct client){.fd = fd};
        r->nclients++;
    }
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
    while ((nl = strchr(c->buf, '\n')) != NULL) {
        size_t used = (size_t)(nl - c->buf) + 1;
        *nl = '\0';
        if (execute(r, i, c->buf) < 0)
            return -1;
        memmove(c->buf, c->buf + used, c->len - used + 1);
        c->len -= used;
    }
    if (c->len >= sizeof(c->buf) - 1)
        return reply(c, "ERR line too long\n"), -1;
    return 0;
}

void rendezvous_handle(struct rendezvous *r, const struct pollfd *pfd, int n)
{
    for (int p = 0; p < n; p++) {
        if (pfd[p].revents == 0)
            continue;
        if (pfd[p].fd == r->lfd) {
            accept_all(r);
            continue;
        }
        for (int i = 0; i < r->nclients; i++) {
            if (r->clients[i].fd == pfd[p].fd) {
                if (serve(r, i) < 0)
                    drop(r, i);
                break;
            }
        }
    }
}
