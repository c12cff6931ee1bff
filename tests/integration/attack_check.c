/* SPDX-License-Identifier: Apache-2.0 */
/*
 * attack_check - a job to attack, and the attacks, for multiuser_ranks.sh.
 *
 *   attack_check job                        a rank: ring_init, a sum allreduce checked
 *                                           against its known result, ring_finalize. The
 *                                           rank named by ATTACK_HOLD_RANK waits until the
 *                                           file ATTACK_GO exists before ring_init, so the
 *                                           others sit in set-up with their listeners open.
 *   attack_check rdv HOST:PORT              at ringrun's rendezvous: SET and GET without a
 *                                           proof, then a proof under a key of its own.
 *   attack_check tcp HOST:PORT RANK SIZE    at a rank's TCP listener: a hello claiming RANK
 *                                           of SIZE with a made-up proof, then the old
 *                                           unauthenticated hello.
 *   attack_check shm NAME RANK SIZE         at a rank's abstract Unix socket: a hello with a
 *                                           memfd attached, then (if the socket lets this
 *                                           uid in) a made-up proof and the segment's hello
 *                                           with a memfd again.
 *
 * An attack exits 0 when every attempt was refused (an ERR line, or the connection closed
 * before anything was accepted), 1 when one got in (an OK, a VAL), 2 when it could not even
 * connect. It prints one line per attempt. It speaks the wire formats from their headers'
 * descriptions, as an attacker who read the source would; its key is its own random one.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/base.h"
#include "base/net.h"
#include "bootstrap/auth.h"
#include "bootstrap/rendezvous_protocol.h"
#include "ring.h"

#define TCP_MAGIC 0x52494e32u /* transport_tcp.c */
#define SHM_MAGIC 0x52534d32u /* transport_shm.c */
#define WAIT_MS   60000       /* the job's set-up may take this long to reach our connection */

static int got_in;

/* Waits until the other end closes fd (0), or sends something (its first bytes in buf). */
static ssize_t until_closed(int fd, char *buf, size_t cap)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    ssize_t k;

    if (poll(&pfd, 1, WAIT_MS) <= 0)
        return -2; /* still open: neither refused nor answered */
    k = recv(fd, buf, cap, 0);
    return k < 0 ? 0 : k; /* ECONNRESET is a close too */
}

static void verdict(const char *what, int refused, const char *detail)
{
    printf("%s: %s (%s)\n", what, refused ? "refused" : "GOT IN", detail);
    if (!refused)
        got_in = 1;
}

/* ---- the rendezvous ---- */

static int rdv_connect(const char *addr)
{
    char host[256], port[16];
    int fd;
    if (ring__net_split_hostport(addr, host, sizeof(host), port, sizeof(port)) < 0 ||
        ring__net_connect(host, port, 0, ring__now_ms() + 5000, &fd) < 0) {
        fprintf(stderr, "cannot connect to %s: %s\n", addr, ring_last_error());
        exit(2);
    }
    return fd;
}

/* Sends line, reads one answer line into out ("" when closed). */
static void ask(int fd, const char *line, char *out, size_t cap)
{
    out[0] = '\0';
    if (ring__net_write_all(fd, line, strlen(line), ring__now_ms() + 5000) < 0 ||
        ring__net_read_line(fd, out, cap, ring__now_ms() + WAIT_MS) < 0)
        out[0] = '\0';
}

static int attack_rdv(const char *addr)
{
    static const char *const plain[] = {"SET ag0.0.0 deadbeef\n", "GET ag0.0.0\n",
                                        "SET attacker.was.here 1\n"};
    char line[RING_RDV_LINE_MAX], hello[128], hex[2 * RING__MAC_BYTES + 1];
    unsigned char cn[RING__NONCE_BYTES], sn[RING__NONCE_BYTES], mac[RING__MAC_BYTES];
    struct ring__auth_transcript t;
    struct ring__key mine;
    int fd;

    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        fd = rdv_connect(addr);
        ask(fd, plain[i], line, sizeof(line));
        verdict("rendezvous, no proof", strncmp(line, "OK", 2) != 0 && strncmp(line, "VAL", 3) != 0,
                line[0] ? line : "closed");
        close(fd);
    }
    /* A proof under another key: the server's challenge does not verify, and ours fails. */
    if (ring__key_generate(&mine) < 0)
        return 2;
    fd = rdv_connect(addr);
    ring__auth_nonce(cn);
    ring__hex_encode(cn, sizeof(cn), hex);
    snprintf(hello, sizeof(hello), "HELLO %s\n", hex);
    ask(fd, hello, line, sizeof(line));
    if (strncmp(line, "CHAL ", 5) == 0) {
        line[5 + 2 * RING__NONCE_BYTES] = '\0';
        if (ring__hex_decode(line + 5, sn, sizeof(sn)) < 0)
            memset(sn, 0, sizeof(sn));
        ring__rdv_transcript(&t, 0, cn, sn);
        ring__auth_mac(&mine, RING__ROLE_DIALER, &t, mac);
        ring__hex_encode(mac, sizeof(mac), hex);
        snprintf(hello, sizeof(hello), "AUTH %s\n", hex);
        ask(fd, hello, line, sizeof(line));
    }
    verdict("rendezvous, wrong secret", strcmp(line, "OK") != 0, line[0] ? line : "closed");
    close(fd);
    return got_in;
}

/* ---- a rank's TCP listener ---- */

static int attack_tcp(const char *addr, uint32_t rank, uint32_t size)
{
    struct {
        uint32_t magic, rank, size, pad;
        unsigned char nonce[RING__NONCE_BYTES];
    } hello = {TCP_MAGIC, rank, size, 0, {0}};
    struct {
        uint32_t magic, rank, size;
    } old = {0x52494e47u /* "RING" */, rank, size};
    unsigned char proof[RING__MAC_BYTES];
    char buf[256];
    ssize_t k;
    int fd = rdv_connect(addr), fd2 = rdv_connect(addr);

    /* Both connect while the rank is still in set-up; its listener closes after it. */
    ring__auth_nonce(hello.nonce);
    (void)ring__net_write_all(fd2, &old, sizeof(old), ring__now_ms() + 5000);
    if (ring__net_write_all(fd, &hello, sizeof(hello), ring__now_ms() + 5000) < 0) {
        k = 0;
    } else if ((k = until_closed(fd, buf, sizeof(buf))) > 0) {
        /* The challenge: answer it with what we cannot compute. */
        memset(proof, 0x5a, sizeof(proof));
        if (ring__net_write_all(fd, proof, sizeof(proof), ring__now_ms() + 5000) == 0)
            k = until_closed(fd, buf, sizeof(buf));
        else
            k = 0;
    }
    verdict("tcp forged hello and proof", k == 0, k == 0 ? "closed" : "still open");
    close(fd);
    k = until_closed(fd2, buf, sizeof(buf));
    verdict("tcp unauthenticated hello", k == 0, k == 0 ? "closed" : "answered or open");
    close(fd2);
    return got_in;
}

/* ---- a rank's shared-memory socket ---- */

/* Sends len bytes with a fresh unsealed memfd of one page attached. */
static int send_with_memfd(int sock, const void *p, size_t len)
{
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {(void *)p, len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    int mfd = memfd_create("attack", MFD_CLOEXEC);
    struct cmsghdr *c;
    ssize_t k;

    if (mfd < 0 || ftruncate(mfd, 4096) < 0)
        return -1;
    memset(cbuf, 0, sizeof(cbuf));
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof(cbuf);
    c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &mfd, sizeof(int));
    k = sendmsg(sock, &msg, MSG_NOSIGNAL);
    close(mfd);
    return k == (ssize_t)len ? 0 : -1;
}

static int attack_shm(const char *name, uint32_t rank, uint32_t size)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct {
        uint32_t magic, rank, size, pad;
        unsigned char nonce[RING__NONCE_BYTES];
    } hello = {SHM_MAGIC, rank, size, 0, {0}};
    struct {
        uint32_t magic, pad;
        uint64_t cap, probe_addr;
    } seg = {SHM_MAGIC, 0, 4096, 0};
    unsigned char proof[RING__MAC_BYTES];
    size_t n = strnlen(name, sizeof(sa.sun_path) - 2);
    char buf[256];
    ssize_t k;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    memcpy(sa.sun_path + 1, name, n);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0) {
        fprintf(stderr, "cannot connect to @%s: %s\n", name, strerror(errno));
        return 2;
    }
    ring__auth_nonce(hello.nonce);
    if (send_with_memfd(fd, &hello, sizeof(hello)) < 0) {
        verdict("shm hello with a memfd", 1, "closed at once");
        close(fd);
        return got_in;
    }
    k = until_closed(fd, buf, sizeof(buf));
    if (k > 0) { /* let in by uid: a challenge. A made-up proof, and a segment anyway. */
        memset(proof, 0xa5, sizeof(proof));
        if (ring__net_write_all(fd, proof, sizeof(proof), ring__now_ms() + 5000) == 0 &&
            send_with_memfd(fd, &seg, sizeof(seg)) == 0)
            k = until_closed(fd, buf, sizeof(buf));
        else
            k = 0;
    }
    verdict("shm hello, proof and memfd", k == 0, k == 0 ? "closed" : "answered or open");
    close(fd);
    return got_in;
}

/* ---- the job ---- */

static int job(void)
{
    const char *hold = getenv("ATTACK_HOLD_RANK"), *go = getenv("ATTACK_GO");
    long me = strtol(getenv("RING_RANK") ? getenv("RING_RANK") : "0", NULL, 10);
    double x[1024];
    int rc, size;

    if (hold != NULL && go != NULL && strtol(hold, NULL, 10) == me) {
        for (int i = 0; i < 12000 && access(go, F_OK) != 0; i++)
            usleep(10 * 1000);
    }
    if ((rc = ring_init()) != 0) {
        fprintf(stderr, "ring_init: %s (%s)\n", ring_strerror(rc), ring_last_error());
        return 1;
    }
    size = ring_size();
    for (int i = 0; i < 1024; i++)
        x[i] = ring_rank() + i;
    if ((rc = ring_allreduce(RING_IN_PLACE, x, 1024, RING_FLOAT64, RING_SUM)) != 0) {
        fprintf(stderr, "allreduce: %s (%s)\n", ring_strerror(rc), ring_last_error());
        return 1;
    }
    for (int i = 0; i < 1024; i++) {
        if (x[i] != (double)size * (size - 1) / 2 + (double)size * i) {
            fprintf(stderr, "rank %d: element %d is %g\n", ring_rank(), i, x[i]);
            return 1;
        }
    }
    printf("rank %d of %d: allreduce right\n", ring_rank(), size);
    ring_finalize();
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 2 && strcmp(argv[1], "job") == 0)
        return job();
    if (argc == 3 && strcmp(argv[1], "rdv") == 0)
        return attack_rdv(argv[2]);
    if (argc == 5 && strcmp(argv[1], "tcp") == 0)
        return attack_tcp(argv[2], (uint32_t)atoi(argv[3]), (uint32_t)atoi(argv[4]));
    if (argc == 5 && strcmp(argv[1], "shm") == 0)
        return attack_shm(argv[2], (uint32_t)atoi(argv[3]), (uint32_t)atoi(argv[4]));
    fprintf(stderr, "usage: attack_check job | rdv HOST:PORT | tcp HOST:PORT RANK SIZE | "
                    "shm NAME RANK SIZE\n");
    return 64;
}
