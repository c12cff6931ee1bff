/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ringd - the Ringmaster job service.
 *
 *   ringd --listen 127.0.0.1:8080 --data-dir var
 *
 * Holds DATA_DIR/ringd.lock for its lifetime (two daemons never share a data directory),
 * keeps jobs in DATA_DIR/ringd.db, writes the bound address to DATA_DIR/ringd.addr and, on
 * its first start, an admin token to DATA_DIR/admin.token (mode 0600). SIGTERM or SIGINT
 * stop it gracefully: requests in flight finish, then it exits 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "auth.h"
#include "config.h"
#include "http.h"
#include "scheduler.h"
#include "store.h"

#define EXIT_CONFIG      64
#define EXIT_UNAVAILABLE 69
#define EXIT_SOFTWARE    70

static void say(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(const char *level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "level=%s msg=\"%s\"\n", level, msg);
}

/* 1 when the listen host is a loopback address (so --no-auth exposes nothing). */
static int loopback(const char *listen)
{
    char host[300];
    const char *colon = strrchr(listen, ':');
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai, *p;
    int all = 1;

    snprintf(host, sizeof(host), "%.*s", colon ? (int)(colon - listen) : 0, listen);
    if (host[0] == '[') {
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = '\0';
    }
    if (getaddrinfo(host, NULL, &hints, &ai) != 0)
        return 0;
    for (p = ai; p; p = p->ai_next) {
        if (p->ai_family == AF_INET)
            all &= (ntohl(((struct sockaddr_in *)p->ai_addr)->sin_addr.s_addr) >> 24) == 127;
        else if (p->ai_family == AF_INET6)
            all &= IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)p->ai_addr)->sin6_addr);
        else
            all = 0;
    }
    freeaddrinfo(ai);
    return all;
}

static int lock_data_dir(const char *dir)
{
    char path[2200], pid[32];
    int fd;
    snprintf(path, sizeof(path), "%s/ringd.lock", dir);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        say("error", "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        ssize_t n = read(fd, pid, sizeof(pid) - 1);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        say("error",
            "another ringd (pid %s) uses data directory %s; stop it or pick another "
            "--data-dir",
            pid[0] ? pid : "?", dir);
        close(fd);
        return -2;
    }
    snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, strlen(pid), 0) < 0)
        say("warning", "cannot record the pid in %s: %s", path, strerror(errno));
    return fd; /* held open, and so locked, until exit */
}

/* On the first start, an admin token, shown once and kept in a 0600 file. */
static int first_token(struct store *st, const char *dir)
{
    char token[AUTH_TOKEN_LEN], path[2200];
    struct error err;
    int n, fd;

    if (store_token_count(st, &n, &err) < 0) {
        say("error", "%s", err.text);
        return -1;
    }
    if (n > 0)
        return 0;
    if (auth_token_create(st, "admin", 1, token, &err) < 0) {
        say("error", "cannot create the admin token: %s", err.text);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/admin.token", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, token, strlen(token)) < 0 || write(fd, "\n", 1) < 0 || fsync(fd) < 0) {
        say("error", "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    fprintf(stderr,
            "\nFirst start: created an admin token (also in %s, mode 0600):\n\n    %s\n\n"
            "Use it as RINGMASTER_TOKEN or 'Authorization: Bearer <token>'. It is not "
            "shown again.\n\n",
            path, token);
    return 0;
}

int main(int argc, char **argv)
{
    struct config cfg;
    struct api_config api;
    struct error err;
    struct store *st = NULL;
    struct store_checkpointer *ckpt = NULL;
    struct http *http = NULL;
    struct scheduler *sched = NULL;
    struct scheduler_config scfg;
    char db_path[2200], addr_path[2200], checkpoints[2200], ckpt_prefix[2200];
    int rc, port = 0, lock_fd, sig;
    sigset_t set;

    rc = config_load(&cfg, argc, argv, &err);
    if (rc != 0) {
        if (rc < 0)
            say("error", "%s", err.text);
        return rc < 0 ? EXIT_CONFIG : 0;
    }
    if (cfg.no_auth && !loopback(cfg.listen)) {
        say("error",
            "--no-auth is only allowed on a loopback address, not %s; drop --no-auth "
            "or listen on 127.0.0.1",
            cfg.listen);
        return EXIT_CONFIG;
    }
    if (mkdir(cfg.data_dir, 0700) < 0 && errno != EEXIST) {
        say("error", "cannot create data directory %s: %s", cfg.data_dir, strerror(errno));
        return EXIT_CONFIG;
    }
    {
        /* Absolute from here on: attempts run in their own directories. */
        char abs[PATH_MAX];
        if (realpath(cfg.data_dir, abs) == NULL || strlen(abs) >= sizeof(cfg.data_dir)) {
            say("error", "cannot resolve data directory %s: %s", cfg.data_dir, strerror(errno));
            return EXIT_CONFIG;
        }
        memcpy(cfg.data_dir, abs, strlen(abs) + 1); /* fits: checked above */
    }
    snprintf(checkpoints, sizeof(checkpoints), "%s/checkpoints", cfg.data_dir);
    if (mkdir(checkpoints, 0755) < 0 && errno != EEXIST) {
        say("error", "cannot create %s: %s", checkpoints, strerror(errno));
        return EXIT_CONFIG;
    }
    if ((lock_fd = lock_data_dir(cfg.data_dir)) < 0)
        return lock_fd == -2 ? EXIT_UNAVAILABLE : EXIT_CONFIG;
    if (auth_init() < 0) {
        say("error", "libsodium failed to initialize");
        return EXIT_SOFTWARE;
    }
    snprintf(db_path, sizeof(db_path), "%s/ringd.db", cfg.data_dir);
    if ((ckpt = store_checkpointer_start(db_path, &err)) == NULL ||
        store_open(db_path, &st, &err) < 0) {
        store_checkpointer_stop(ckpt);
        say("error", "cannot open the job database %s: %s", db_path, err.text);
        return EXIT_SOFTWARE;
    }
    if (!cfg.no_auth && first_token(st, cfg.data_dir) < 0) {
        store_close(st);
        store_checkpointer_stop(ckpt);
        return EXIT_SOFTWARE;
    }
    api.data_dir = cfg.data_dir;
    snprintf(ckpt_prefix, sizeof(ckpt_prefix), "%.2190s/", checkpoints);
    api.ckpt_prefix = ckpt_prefix;
    api.slots = cfg.slots;
    api.gpus = cfg.gpus;
    api.token_create = auth_token_create;
    api.token_revoked = auth_revoked;
    scfg = (struct scheduler_config){db_path,   cfg.data_dir, cfg.ringrun,
                                     cfg.slots, cfg.gpus,     cfg.kill_grace_s};

    /* Signals go to sigwait below, not to the server threads, which inherit this mask. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    sched = scheduler_start(&scfg, &err);
    if (sched == NULL) {
        say("error", "cannot start the scheduler: %s", err.text);
        store_close(st);
        store_checkpointer_stop(ckpt);
        return EXIT_SOFTWARE;
    }
    api.sched = sched;
    http = http_start(&cfg, &api, db_path, &port, &err);
    if (http == NULL) {
        say("error", "%s", err.text);
        scheduler_stop(sched);
        store_close(st);
        store_checkpointer_stop(ckpt);
        return errno == EADDRINUSE ? EXIT_UNAVAILABLE : EXIT_CONFIG;
    }
    {
        char host[300];
        FILE *f;
        const char *colon = strrchr(cfg.listen, ':');
        snprintf(host, sizeof(host), "%.*s", (int)(colon - cfg.listen), cfg.listen);
        snprintf(addr_path, sizeof(addr_path), "%s/ringd.addr", cfg.data_dir);
        f = fopen(addr_path, "w");
        if (f != NULL) {
            fprintf(f, "%s:%d\n", host, port);
            fclose(f);
        }
        say("info", "listening on http://%s:%d (data %s, %d slots, %d GPUs, auth %s, ringrun %s)",
            host, port, cfg.data_dir, cfg.slots, cfg.gpus, cfg.no_auth ? "off" : "on", cfg.ringrun);
    }
    while (sigwait(&set, &sig) != 0)
        ;
    say("info", "got signal %d; finishing requests in flight", sig);
    http_stop(http);
    scheduler_stop(sched);
    store_close(st);
    store_checkpointer_stop(ckpt);
    unlink(addr_path);
    close(lock_fd);
    say("info", "stopped");
    return 0;
}
