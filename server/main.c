/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ringd - the Ringmaster job service.
 *
 *   ringd --listen 127.0.0.1:8080 --data-dir var
 *
 * Holds DATA_DIR/ringd.lock for its lifetime (two daemons never share a data directory),
 * keeps jobs in DATA_DIR/ringd.db (checked at start: a corrupt one exits 65), writes the
 * bound address to DATA_DIR/ringd.addr and, on its first start, an admin token to
 * DATA_DIR/admin.token (mode 0600; 73 when it cannot be written). SIGTERM or SIGINT stop it
 * gracefully: requests in flight finish, then it exits 0.
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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "auth.h"
#include "common/log.h"
#include "config.h"
#include "db/store.h"
#include "http.h"
#include "scheduler/backend/identity.h"
#include "scheduler/core/scheduler.h"

#define EXIT_CONFIG      64
#define EXIT_DATAERR     65 /* the job database is corrupt */
#define EXIT_UNAVAILABLE 69
#define EXIT_SOFTWARE    70
#define EXIT_CANTCREAT   73 /* the first admin token cannot be written */

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
    fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        log_error("cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        ssize_t n = read(fd, pid, sizeof(pid) - 1);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        log_error("another ringd (pid %s) uses data directory %s; stop it or pick another "
                  "--data-dir",
                  pid[0] ? pid : "?", dir);
        close(fd);
        return -2;
    }
    snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, strlen(pid), 0) < 0)
        log_warning("cannot record the pid in %s: %s", path, strerror(errno));
    return fd; /* held open, and so locked, until exit */
}

/* The files ringd keeps in its data directory, each 0600: every one is ringd's alone. */
static const char *const DATA_FILES[] = {
    "ringd.db", "ringd.db-wal", "ringd.db-shm", "admin.token", "ringd.addr", "ringd.lock", NULL};

/*
 * The data directory holds every token's hash, every job's environment and the admin
 * token: it is ringd's alone (0700), and so is each of its files (0600; an older ringd left
 * the database 0644). One that belongs to another user is refused rather than taken over.
 */
static int data_dir_private(const char *dir)
{
    struct stat sb;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        log_error("cannot create data directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
        log_error("data directory %s is not a directory", dir);
        return -1;
    }
    if (sb.st_uid != geteuid()) {
        log_error("data directory %s belongs to uid %u, but ringd runs as uid %u; give it "
                  "to ringd's user or pick another --data-dir",
                  dir, (unsigned)sb.st_uid, (unsigned)geteuid());
        return -1;
    }
    if ((sb.st_mode & 077) != 0) {
        if (chmod(dir, 0700) < 0) {
            log_error("cannot make data directory %s private (0700): %s", dir, strerror(errno));
            return -1;
        }
        log_info("data directory %s was mode %03o; made it 0700", dir,
                 (unsigned)(sb.st_mode & 0777));
    }
    for (int i = 0; DATA_FILES[i] != NULL; i++) {
        char path[2200];
        snprintf(path, sizeof(path), "%s/%s", dir, DATA_FILES[i]);
        if (lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode) || (sb.st_mode & 077) == 0)
            continue;
        if (chmod(path, 0600) < 0) {
            log_error("cannot make %s private (0600): %s", path, strerror(errno));
            return -1;
        }
        log_info("%s was mode %03o; made it 0600", path, (unsigned)(sb.st_mode & 0777));
    }
    return 0;
}

/* Writes all of buf to fd, through short writes and EINTR. Returns 0 or -1 with errno. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/*
 * Puts text in dir/name, mode 0600, atomically: a temporary file beside it is written and
 * fsynced, renamed over dir/name, and the directory fsynced. After a crash dir/name is
 * either as it was or whole, never half-written. Returns 0, or -1 with errno and *what
 * saying which step failed.
 */
static int write_file_atomic(const char *dir, const char *name, const char *text, const char **what)
{
    char tmp[2300], path[2300];
    int fd, dfd;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name);
    *what = "create a temporary file";
    if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) /* mode 0600 */
        return -1;
    *what = "write";
    if (write_all(fd, text, strlen(text)) < 0 || (*what = "fsync", fsync(fd) < 0)) {
        int saved = errno;
        close(fd);
        unlink(tmp);
        errno = saved;
        return -1;
    }
    close(fd);
    *what = "rename the temporary file into place";
    if (rename(tmp, path) < 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    *what = "fsync the directory";
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return -1;
    if (fsync(dfd) < 0) {
        int saved = errno;
        close(dfd);
        errno = saved;
        return -1;
    }
    close(dfd);
    return 0;
}

/*
 * On the first start, an admin token, shown once and kept in a 0600 file. The file comes
 * first and the row second: written the other way round, a failed write would leave a
 * committed token that nobody can read, and since tokens then exist no later start would
 * make another. Here a failed write stores nothing (the next start tries again), a failed
 * commit removes the file, and a crash between the two leaves a file whose token the next
 * start replaces. Returns 0, or an exit status after saying why.
 */
static int first_token(struct store *st, const char *dir)
{
    struct auth_new_token t;
    char line[AUTH_TOKEN_LEN + 2], path[2200];
    const char *what;
    struct error err;
    int n;

    if (store_token_count(st, &n, &err) < 0) {
        log_error("%s", err.text);
        return EXIT_SOFTWARE;
    }
    if (n > 0)
        return 0;
    snprintf(path, sizeof(path), "%s/admin.token", dir);
    auth_token_generate(&t);
    snprintf(line, sizeof(line), "%s\n", t.token);
    if (write_file_atomic(dir, "admin.token", line, &what) < 0) {
        log_error("cannot write the first admin token to %s (%s: %s); no token was created: make "
                  "%s writable by ringd (and remove whatever is at %s), then start ringd again",
                  path, what, strerror(errno), dir, path);
        return EXIT_CANTCREAT;
    }
    if (auth_token_store(st, &t, "admin", 1, NULL, 0, NULL, &err) < 0) {
        unlink(path); /* its token does not exist */
        log_error("cannot create the admin token: %s", err.text);
        return EXIT_SOFTWARE;
    }
    fprintf(stderr,
            "\nFirst start: created an admin token (also in %s, mode 0600):\n\n    %s\n\n"
            "Use it as RINGMASTER_TOKEN or 'Authorization: Bearer <token>'. It is not "
            "shown again.\n\n",
            path, t.token);
    return 0;
}

/*
 * Refuses what would be unsafe: no authentication off loopback, tokens in clear text, root
 * with --no-auth and no default user, a default user that does not exist; and warns when
 * jobs cannot be kept apart (ringd not root). Returns 0, or EXIT_CONFIG after saying why.
 */
static int check_safety(const struct config *c, struct error *err)
{
    if (c->no_auth && !loopback(c->listen)) {
        log_error("--no-auth is only allowed on a loopback address, not %s; drop --no-auth "
                  "or listen on 127.0.0.1",
                  c->listen);
        return EXIT_CONFIG;
    }
    if (!c->no_auth && !c->insecure_http && c->tls_cert[0] == '\0' && !loopback(c->listen)) {
        log_error(
            "ringd would take bearer tokens in clear text on %s; give --tls-cert and --tls-key, "
            "listen on loopback behind a TLS proxy, or accept the risk with "
            "--allow-insecure-http",
            c->listen);
        return EXIT_CONFIG;
    }
    if (geteuid() == 0 && c->no_auth && c->default_user[0] == '\0') {
        log_error("ringd runs as root with --no-auth: every local user could run commands as "
                  "root; set --default-user NAME (the account jobs run as), or run ringd as "
                  "a normal user");
        return EXIT_CONFIG;
    }
    if (c->default_user[0] != '\0') {
        struct identity id;
        if (identity_lookup(c->default_user, &id, err) < 0) {
            log_error("default_user: %s", err->text);
            return EXIT_CONFIG;
        }
        if (id.uid == 0)
            log_warning("default_user is root: jobs without a mapped user run as root, with "
                        "no isolation that root could not undo");
    }
    if (geteuid() != 0)
        log_warning(
            "ringd runs as uid %u, not root: every job runs as this one user, so the jobs of "
            "different tokens are not kept apart from one another (only ringd's own data is "
            "kept from them); run ringd as root to run each token's jobs as its own user",
            (unsigned)geteuid());
    return 0;
}

/* The data directory made absolute, in place: attempts run in their own directories.
 * Returns 0, or -1 after saying why. */
static int absolute_data_dir(struct config *c)
{
    /* Absolute from here on: attempts run in their own directories. */
    char abs[PATH_MAX];
    if (realpath(c->data_dir, abs) == NULL || strlen(abs) >= sizeof(c->data_dir)) {
        log_error("cannot resolve data directory %s: %s", c->data_dir, strerror(errno));
        return -1;
    }
    memcpy(c->data_dir, abs, strlen(abs) + 1); /* fits: checked above */
    return 0;
}

/* Checks the job database at db_path, starts its checkpointer and opens it. Returns 0, or
 * an exit status after saying why (nothing left open). */
static int open_database(const char *db_path, struct store **st, struct store_checkpointer **ckpt)
{
    struct error err;

    /* Before anything writes to it (a migration, a checkpoint): a corrupt database only gets
     * worse with use, and jobs read from it would be started wrong or lost. */
    if (store_check(db_path, &err) < 0) {
        if (errno == EUCLEAN) {
            log_error(
                "the job database %s is corrupt (%s); ringd will not run on it. Move it (with "
                "any ringd.db-wal) aside for inspection and restore the latest backup "
                "(ringctl admin backup FILE; see README, Backup and restore)",
                db_path, err.text);
            return EXIT_DATAERR;
        }
        log_error("cannot check the job database %s: %s", db_path, err.text);
        return EXIT_SOFTWARE;
    }
    if ((*ckpt = store_checkpointer_start(db_path, &err)) == NULL ||
        store_open(db_path, st, &err) < 0) {
        store_checkpointer_stop(*ckpt);
        log_error("cannot open the job database %s: %s", db_path, err.text);
        return EXIT_SOFTWARE;
    }
    return 0;
}

/* Writes where ringd listens to DATA_DIR/ringd.addr (its path into addr_path, for the
 * unlink at the end) and says so in the log. */
static void announce(const struct config *c, int port, char *addr_path, size_t len)
{
    char host[300];
    const char *colon = strrchr(c->listen, ':');
    int fd;
    snprintf(host, sizeof(host), "%.*s", (int)(colon - c->listen), c->listen);
    snprintf(addr_path, len, "%s/ringd.addr", c->data_dir);
    fd = open(addr_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || dprintf(fd, "%s:%d\n", host, port) < 0)
        log_warning("cannot write %s: %s", addr_path, strerror(errno));
    if (fd >= 0)
        close(fd);
    log_info("listening on %s://%s:%d (data %s, %d slots, %d GPUs, auth %s, ringrun %s, "
             "backend %s, policy %s)",
             c->tls_cert[0] ? "https" : "http", host, port, c->data_dir, c->slots, c->gpus,
             c->no_auth ? "off" : "on", c->ringrun, c->backend, c->policy);
}

/* What the scheduler is given from ringd's configuration c. Its strings point into c, and
 * db_path and values are filled in by the caller (values: the backend's and the policy's
 * settings as config_values() gives them). */
static struct scheduler_config scheduler_settings(const struct config *c, const char *db_path,
                                                  struct setting_value *values)
{
    struct scheduler_config scfg = {
        .db_path = db_path,
        .data_dir = c->data_dir,
        .ringrun = c->ringrun,
        .mpirun = c->mpirun,
        .default_user = c->default_user,
        .no_auth = c->no_auth,
        .slots = c->slots,
        .gpus = c->gpus,
        .kill_grace_s = c->kill_grace_s,
        .backend = c->backend,
        .backend_options = c->backend_options[0] ? c->backend_options : NULL,
        .settings = values,
        .nsettings = config_values(c, values),
        .policy = c->policy,
        .params = c->params,
    };
    scfg.params.interval_s = c->sched_interval;
    return scfg;
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
    struct setting_value values[CONFIG_VALUES_MAX];
    char db_path[2200], addr_path[2200], ckpt_prefix[4300];
    int rc, port = 0, lock_fd, sig;
    sigset_t set;

    log_init("ringd", LOG_STYLE_LOGFMT);
    /* Every file ringd makes is its own (0600), unless it says otherwise: the database and
     * its -wal and -shm, which SQLite creates 0644, hold every job's environment. */
    umask(077);
    /*
     * Jobs may run as ringd's own user (always, when ringd is not root). Without this, such
     * a job could read ringd's memory and open files, and its files through
     * /proc/<ringd>/root, around the mount namespace that hides the data directory.
     */
    prctl(PR_SET_DUMPABLE, 0);
    rc = config_load(&cfg, argc, argv, &err);
    if (rc != 0) {
        if (rc < 0)
            log_error("%s", err.text);
        return rc < 0 ? EXIT_CONFIG : 0;
    }
    if ((rc = check_safety(&cfg, &err)) != 0)
        return rc;
    scfg = scheduler_settings(&cfg, db_path, values);
    /* The backend's own settings, before anything is made: a bad one stops ringd here. */
    if (scheduler_config(&scfg, &err) < 0) {
        log_error("%s", err.text);
        return EXIT_CONFIG;
    }
    if (data_dir_private(cfg.data_dir) < 0)
        return EXIT_CONFIG;
    if (absolute_data_dir(&cfg) < 0)
        return EXIT_CONFIG;
    if ((lock_fd = lock_data_dir(cfg.data_dir)) < 0)
        return lock_fd == -2 ? EXIT_UNAVAILABLE : EXIT_CONFIG;
    if (auth_init() < 0) {
        log_error("libsodium failed to initialize");
        return EXIT_SOFTWARE;
    }
    snprintf(db_path, sizeof(db_path), "%s/ringd.db", cfg.data_dir);
    store_backup_sweep(cfg.data_dir);
    if ((rc = open_database(db_path, &st, &ckpt)) != 0)
        return rc;
    if (!cfg.no_auth && (rc = first_token(st, cfg.data_dir)) != 0) {
        store_close(st);
        store_checkpointer_stop(ckpt);
        return rc;
    }
    api.data_dir = cfg.data_dir;
    api.token_create = auth_token_create;
    api.token_revoked = auth_revoked;
    api.default_user = cfg.default_user;

    /* Signals go to sigwait below, not to the server threads, which inherit this mask. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    sched = scheduler_start(&scfg, &err);
    if (sched == NULL) {
        /* EINVAL: the configuration cannot work on this host (scheduler.h), what to fix */
        int config = errno == EINVAL;
        if (config)
            log_error("%s", err.text);
        else
            log_error("cannot start the scheduler: %s", err.text);
        store_close(st);
        store_checkpointer_stop(ckpt);
        return config ? EXIT_CONFIG : EXIT_SOFTWARE;
    }
    api.work_dir = scheduler_work_dir(sched);
    snprintf(ckpt_prefix, sizeof(ckpt_prefix), "%s/checkpoints/", api.work_dir);
    api.ckpt_prefix = ckpt_prefix;
    api.sched = sched;
    api.cluster = scheduler_cluster(sched);
    api.backend = scheduler_backend(sched);
    http = http_start(&cfg, &api, db_path, &port, &err);
    if (http == NULL) {
        log_error("%s", err.text);
        scheduler_stop(sched);
        store_close(st);
        store_checkpointer_stop(ckpt);
        return errno == EADDRINUSE ? EXIT_UNAVAILABLE : EXIT_CONFIG;
    }
    announce(&cfg, port, addr_path, sizeof(addr_path));
    while (sigwait(&set, &sig) != 0)
        ;
    log_info("got signal %d; finishing requests in flight", sig);
    http_stop(http);
    scheduler_stop(sched);
    store_close(st);
    store_checkpointer_stop(ckpt);
    unlink(addr_path);
    close(lock_fd);
    log_info("stopped");
    return 0;
}
