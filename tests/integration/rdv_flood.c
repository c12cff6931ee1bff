/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdv_flood - floods a ringrun's rendezvous with connections that prove nothing, as a local
 * user without the job's secret can (rendezvous_flood.sh):
 *
 *   rdv_flood PID GO MODE SECONDS
 *
 * waits until process PID (a ringrun) listens on a TCP port, then connects to it on
 * 127.0.0.1 as fast as one process can until PID stops listening or SECONDS pass. After the
 * first STARTED connections it creates the file GO, which the test's ranks wait for, so
 * that they dial while the flood runs. MODE "close" connects and closes at once (a
 * non-blocking connect, then close: the red team's loop); "silent" keeps the last HOLD
 * connections open, saying nothing, and closes the oldest for each new one. It prints the
 * connections made and their rate, and exits 0, or 2 when PID never listened.
 *
 * An attacker finds the port in /proc/net/tcp, which every user reads; the test knows the
 * pid, and takes the listener whose inode is among PID's descriptors, so that it floods
 * nobody else's job on a shared machine.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Connections made before the ranks may dial: enough for the flood to be in full swing. */
#define STARTED 2000
/* Connections a silent flood holds open: past the server's 64 unproven clients. */
#define HOLD 256
/* Connections between two checks that PID still listens (a scan of /proc costs ~100 us). */
#define CHECK_EVERY 4096

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Whether inode names a socket among pid's descriptors. */
static int owns(const char *pid, unsigned long inode)
{
    char dir[64], path[384], link[64], want[64];
    struct dirent *e;
    DIR *d;
    int found = 0;

    snprintf(dir, sizeof(dir), "/proc/%s/fd", pid);
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    if ((d = opendir(dir)) == NULL)
        return 0;
    while (!found && (e = readdir(d)) != NULL) {
        ssize_t n;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        n = readlink(path, link, sizeof(link) - 1);
        if (n > 0) {
            link[n] = '\0';
            found = strcmp(link, want) == 0;
        }
    }
    closedir(d);
    return found;
}

/* The port pid listens on over TCP (IPv4), or 0. */
static int listening_port(const char *pid)
{
    char line[512];
    unsigned port, state;
    unsigned long inode;
    int found = 0;
    FILE *f = fopen("/proc/net/tcp", "r");

    if (f == NULL)
        return 0;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        /* "  0: 0100007F:A3A5 00000000:0000 0A ... uid timeout inode" */
        if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*d %lu", &port, &state,
                   &inode) == 3 &&
            state == 0x0A && owns(pid, inode))
            found = (int)port;
    }
    fclose(f);
    return found;
}

/* Lets the ranks dial (the test's ranks wait for this file). */
static void go(const char *path)
{
    static int done;
    int g;
    if (done)
        return;
    done = 1;
    if ((g = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) >= 0)
        close(g);
}

int main(int argc, char **argv)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    int held[HOLD], nheld = 0, silent, port = 0, fd;
    double start, limit, t0;
    long made = 0, tries = 0;

    if (argc != 5 || (strcmp(argv[3], "close") != 0 && strcmp(argv[3], "silent") != 0)) {
        fprintf(stderr, "usage: rdv_flood PID GO close|silent SECONDS\n");
        return 64;
    }
    silent = strcmp(argv[3], "silent") == 0;
    start = now_s();
    limit = start + atof(argv[4]);
    while ((port = listening_port(argv[1])) == 0 && now_s() < limit)
        usleep(500);
    if (port == 0) {
        go(argv[2]);
        fprintf(stderr, "rdv_flood: process %s did not listen within %s s\n", argv[1], argv[4]);
        return 2;
    }
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    t0 = now_s();
    for (;;) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            perror("rdv_flood: socket");
            return 1;
        }
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS)
            made++;
        if (!silent) {
            close(fd);
        } else {
            if (nheld == HOLD) {
                close(held[0]);
                memmove(held, held + 1, (HOLD - 1) * sizeof(held[0]));
                nheld--;
            }
            held[nheld++] = fd;
        }
        if (made == STARTED)
            go(argv[2]);
        /* Failed connects count too: once the listener is gone, every connect fails. */
        if (++tries % CHECK_EVERY == 0 && (now_s() >= limit || listening_port(argv[1]) != port))
            break;
    }
    go(argv[2]);
    printf("rdv_flood: %ld connections to port %d in %.2f s: %.0f per second\n", made, port,
           now_s() - t0, (double)made / (now_s() - t0));
    return 0;
}
