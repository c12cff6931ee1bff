/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rendezvous_protocol.c - the rendezvous's line protocol (rendezvous_protocol.h): parsing a
 * request, the transcript of its proof, and the client's calls.
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "base/net.h"
#include "bootstrap/rendezvous_protocol.h"

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

int ring__rdv_parse(char *line, struct ring__rdv_req *req, const char **why)
{
    char *sp = strchr(line, ' ');
    char *arg, *value = NULL;

    memset(req, 0, sizeof(*req));
    if (sp == NULL)
        return *why = "want SET <key> <value> or GET <key>", -1;
    *sp = '\0';
    arg = sp + 1;
    if (strcmp(line, "HELLO") == 0) {
        req->verb = RING__RDV_HELLO;
        if (ring__hex_decode(arg, req->nonce, sizeof(req->nonce)) < 0)
            return *why = "HELLO needs a nonce of 32 hex digits", -1;
        return 0;
    }
    if (strcmp(line, "AUTH") == 0) {
        req->verb = RING__RDV_AUTH;
        if (ring__hex_decode(arg, req->mac, sizeof(req->mac)) < 0)
            return *why = "AUTH needs a MAC of 64 hex digits", -1;
        return 0;
    }
    if (strcmp(line, "SET") == 0) {
        req->verb = RING__RDV_SET;
        if ((value = strchr(arg, ' ')) == NULL)
            return *why = "SET needs a key and a value", -1;
        *value++ = '\0';
    } else if (strcmp(line, "GET") == 0) {
        req->verb = RING__RDV_GET;
    } else {
        return *why = "unknown command", -1;
    }
    if (!token_ok(arg) || (value != NULL && !token_ok(value)))
        return *why = "keys and values are 1-255 printable characters without spaces", -1;
    req->key = arg;
    req->value = value;
    return 0;
}

void ring__rdv_transcript(struct ring__auth_transcript *t, int size,
                          const unsigned char client_nonce[RING__NONCE_BYTES],
                          const unsigned char server_nonce[RING__NONCE_BYTES])
{
    memset(t, 0, sizeof(*t));
    snprintf(t->wire, sizeof(t->wire), "rdv");
    t->dialer = UINT32_MAX; /* a rank proves the key, not which rank it is */
    t->acceptor = UINT32_MAX;
    t->size = (uint32_t)size;
    memcpy(t->dialer_nonce, client_nonce, RING__NONCE_BYTES);
    memcpy(t->acceptor_nonce, server_nonce, RING__NONCE_BYTES);
}

/* Splits "CHAL <nonce> <mac>" into its parts; 0 or -1. */
static int parse_challenge(char *line, unsigned char *nonce, unsigned char *mac)
{
    char *a, *b;
    if (strncmp(line, "CHAL ", 5) != 0 || (b = strchr(a = line + 5, ' ')) == NULL)
        return -1;
    *b++ = '\0';
    return ring__hex_decode(a, nonce, RING__NONCE_BYTES) < 0 ||
                   ring__hex_decode(b, mac, RING__MAC_BYTES) < 0
               ? -1
               : 0;
}

int ring__rdv_auth(int fd, const struct ring__key *key, int size, int64_t deadline)
{
    unsigned char cn[RING__NONCE_BYTES], sn[RING__NONCE_BYTES], mac[RING__MAC_BYTES];
    char line[RING_RDV_LINE_MAX], hex[2 * RING__MAC_BYTES + 1];
    struct ring__auth_transcript t;
    int rc;

    ring__auth_nonce(cn);
    ring__hex_encode(cn, sizeof(cn), hex);
    snprintf(line, sizeof(line), "HELLO %s\n", hex);
    if ((rc = ring__net_write_all(fd, line, strlen(line), deadline)) < 0 ||
        (rc = ring__net_read_line(fd, line, sizeof(line), deadline)) < 0)
        return rc;
    if (parse_challenge(line, sn, mac) < 0)
        return ring__err(RING_EBOOTSTRAP, "it answered HELLO with '%.80s'", line);
    ring__rdv_transcript(&t, size, cn, sn);
    if (!ring__auth_check(key, RING__ROLE_ACCEPTOR, &t, mac))
        return ring__err(RING_EBOOTSTRAP,
                         "it does not hold this job's secret (another job's rendezvous, or "
                         "an impostor?)");
    ring__auth_mac(key, RING__ROLE_DIALER, &t, mac);
    ring__hex_encode(mac, sizeof(mac), hex);
    snprintf(line, sizeof(line), "AUTH %s\n", hex);
    if ((rc = ring__net_write_all(fd, line, strlen(line), deadline)) < 0 ||
        (rc = ring__net_read_line(fd, line, sizeof(line), deadline)) < 0)
        return rc;
    if (strcmp(line, "OK") != 0)
        return ring__err(RING_EBOOTSTRAP, "it refused this rank's job secret (%.80s)", line);
    return 0;
}

int ring__rdv_set(int fd, const char *key, const char *value, int64_t deadline)
{
    char line[RING_RDV_LINE_MAX];
    int rc;

    if (!token_ok(key) || !token_ok(value))
        return ring__err(RING_EINVAL, "rendezvous key or value is empty, too long or has spaces");
    snprintf(line, sizeof(line), "SET %s %s\n", key, value);
    if ((rc = ring__net_write_all(fd, line, strlen(line), deadline)) < 0)
        return rc;
    if ((rc = ring__net_read_line(fd, line, sizeof(line), deadline)) < 0)
        return rc;
    if (strcmp(line, "OK") != 0)
        return ring__err(RING_EBOOTSTRAP, "rendezvous refused SET %s: %s", key, line);
    return 0;
}

int ring__rdv_get(int fd, const char *key, char *value, size_t cap, int64_t deadline)
{
    char line[RING_RDV_LINE_MAX];
    int rc;

    if (!token_ok(key))
        return ring__err(RING_EINVAL, "rendezvous key is empty, too long or has spaces");
    snprintf(line, sizeof(line), "GET %s\n", key);
    if ((rc = ring__net_write_all(fd, line, strlen(line), deadline)) < 0)
        return rc;
    if ((rc = ring__net_read_line(fd, line, sizeof(line), deadline)) < 0)
        return rc;
    if (strncmp(line, "VAL ", 4) != 0 || strlen(line + 4) >= cap)
        return ring__err(RING_EBOOTSTRAP, "rendezvous answered GET %s with '%s'", key, line);
    strcpy(value, line + 4);
    return 0;
}
