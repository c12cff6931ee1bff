/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_rendezvous - ringrun's rendezvous server (worker/ringrun/rendezvous.c, with libring's
 * request parser in bootstrap/rendezvous_protocol.c) on any bytes a client could send,
 * through a real socket: the server serves one end of a socketpair as it serves an accepted
 * connection, the harness writes the input into the other in pieces and reads every reply.
 * Byte 0: bit 0, the client first proves the job's secret as a rank does (HELLO, CHAL,
 * AUTH); byte 1 sizes the pieces. It checks:
 *   - every reply is a line that starts with OK, VAL, CHAL or ERR, and after ERR the server
 *     hangs up;
 *   - a client that has not proved the secret sets no key, whatever it sends;
 *   - the server never holds more keys than its limit.
 */
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "bootstrap/rendezvous_protocol.h"
#include "rendezvous.h"

static struct ring__key key;
static int saw_err; /* an ERR line came: the server must hang up */

/* Lets the server read everything it can; returns 0 once it has hung up. */
static int pump(struct rendezvous *r, int server_fd, int client_fd)
{
    for (int i = 0; i < 64; i++) {
        struct pollfd pfd = {.fd = server_fd, .events = POLLIN};
        char peek;
        if (recv(client_fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
            return 0;
        if (poll(&pfd, 1, 0) <= 0)
            return 1;
        rendezvous_handle(r, &pfd, 1);
    }
    return 1;
}

/* Reads and checks every reply line waiting; returns 0 once the server has hung up. */
static int replies(int fd, char *acc, size_t *len, size_t cap)
{
    for (;;) {
        ssize_t k = recv(fd, acc + *len, cap - *len, MSG_DONTWAIT);
        char *nl;
        if (k == 0)
            return 0;
        if (k < 0)
            return 1;
        *len += (size_t)k;
        while ((nl = memchr(acc, '\n', *len)) != NULL) {
            size_t used = (size_t)(nl - acc) + 1;
            FUZZ_CHECK(strncmp(acc, "OK", 2) == 0 || strncmp(acc, "VAL ", 4) == 0 ||
                       strncmp(acc, "CHAL ", 5) == 0 || strncmp(acc, "ERR ", 4) == 0);
            saw_err |= strncmp(acc, "ERR ", 4) == 0;
            memmove(acc, acc + used, *len - used);
            *len -= used;
        }
        FUZZ_CHECK(*len < cap);
    }
}

/* Proves the secret over fd as a rank would, through the server. */
static void authenticate(struct rendezvous *r, int server_fd, int fd)
{
    unsigned char cn[RING__NONCE_BYTES] = {7}, sn[RING__NONCE_BYTES], mac[RING__MAC_BYTES];
    char line[RING_RDV_LINE_MAX], hex[2 * RING__MAC_BYTES + 1];
    struct ring__auth_transcript t;
    ssize_t k;

    ring__hex_encode(cn, sizeof(cn), hex);
    snprintf(line, sizeof(line), "HELLO %s\n", hex);
    FUZZ_CHECK(send(fd, line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line));
    pump(r, server_fd, fd);
    k = recv(fd, line, sizeof(line) - 1, MSG_DONTWAIT);
    FUZZ_CHECK(k > 6 + 2 * RING__NONCE_BYTES && strncmp(line, "CHAL ", 5) == 0);
    line[5 + 2 * RING__NONCE_BYTES] = '\0';
    FUZZ_CHECK(ring__hex_decode(line + 5, sn, sizeof(sn)) == 0);
    ring__rdv_transcript(&t, 4, cn, sn);
    ring__auth_mac(&key, RING__ROLE_DIALER, &t, mac);
    ring__hex_encode(mac, sizeof(mac), hex);
    snprintf(line, sizeof(line), "AUTH %s\n", hex);
    FUZZ_CHECK(send(fd, line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line));
    pump(r, server_fd, fd);
    FUZZ_CHECK(recv(fd, line, sizeof(line), MSG_DONTWAIT) == 3 && strncmp(line, "OK\n", 3) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int keyed;
    struct rendezvous *r;
    struct error err;
    char acc[2 * RING_RDV_LINE_MAX];
    size_t len = 0, piece, off = 2;
    int sv[2], authed, open = 1;

    if (!keyed) {
        FUZZ_CHECK(ring__key_generate(&key) == 0);
        keyed = 1;
    }
    if (size < 2)
        return 0;
    authed = data[0] & 1;
    saw_err = 0;
    piece = 1 + data[1] % 300;
    r = rendezvous_create("127.0.0.1", 0, &key, 4, &err);
    FUZZ_CHECK(r != NULL);
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    FUZZ_CHECK(rendezvous_adopt(r, sv[0]) == 0);
    if (authed)
        authenticate(r, sv[0], sv[1]);
    while (open && off < size) {
        size_t k = size - off < piece ? size - off : piece;
        ssize_t w = send(sv[1], data + off, k, MSG_NOSIGNAL); /* the server may have hung up */
        if (w <= 0)
            break;
        off += (size_t)w;
        open = pump(r, sv[0], sv[1]) && replies(sv[1], acc, &len, sizeof(acc));
    }
    if (open && saw_err) /* the server dropped it within the handle call that answered */
        FUZZ_CHECK(pump(r, sv[0], sv[1]) == 0 || replies(sv[1], acc, &len, sizeof(acc)) == 0);
    if (!authed)
        FUZZ_CHECK(rendezvous_keys(r) == 0);
    FUZZ_CHECK(rendezvous_keys(r) <= 4 * 256);
    close(sv[1]);
    rendezvous_destroy(r);
    return 0;
}
