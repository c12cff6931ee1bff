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

#include "api.h"
#include "auth.h"
#include "backend_local.h"
#include "config.h"
#include "http.h"
#include "scheduler.h"
#include "store.h"

#define EXIT_CONFIG      64
#define EXIT_DATAERR     65 /* the job database is corrupt */
#define EXIT_UNAVAILABLE 69
#define EXIT_SOFTWARE    70
#define EXIT_CANTCREAT   73 /* the first admin token cannot be written */

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
    fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
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
        say("error", "cannot create data directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
        say("error", "data directory %s is not a directory", dir);
        return -1;
    }
    if (sb.st_uid != geteuid()) {
        say("error",
            "data directory %s belongs to uid %u, but ringd runs as uid %u; give it "
            "to ringd's user or pick another --data-dir",
            dir, (unsigned)sb.st_uid, (unsigned)geteuid());
        return -1;
    }
    if ((sb.st_mode & 077) != 0) {
        if (chmod(dir, 0700) < 0) {
            say("error", "cannot make data directory %s private (0700): %s", dir, strerror(errno));
            return -1;
        }
        say("info", "data directory %s was mode %03o; made it 0700", dir,
            (unsigned)(sb.st_mode & 0777));
    }
    for (int i = 0; DATA_FILES[i] != NULL; i++) {
        char path[2200];
        snprintf(path, sizeof(path), "%s/%s", dir, DATA_FILES[i]);
        if (lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode) || (sb.st_mode & 077) == 0)
            continue;
        if (chmod(path, 0600) < 0) {
            say("error", "cannot make %s private (0600): %s", path, strerror(errno));
            return -1;
        }
        say("info", "%s was mode %03o; made it 0600", path, (unsigned)(sb.st_mode & 0777));
    }
    return 0;
}

/* 1 when only root or ringd's own user can change what path names (mode without group or
 * other write, or a sticky directory, which keeps others' entries in place). */
static int only_ours(const char *path, struct stat *sb)
{
    return stat(path, sb) == 0 && (sb->st_uid == 0 || sb->st_uid == geteuid()) &&
           ((sb->st_mode & 022) == 0 || (S_ISDIR(sb->st_mode) && (sb->st_mode & S_ISVTX)));
}

/*
 * ringd runs ringd-exec as root, or without root with every job's secrets in reach: it
 * must be a regular file that only root or ringd's own user can change, and so must be
 * every directory above it (someone who can rename one can put another ringd-exec in its
 * place). Resolves path (links included) in place, so that ringd runs the file it checked.
 * Returns 0, or -1 after saying what to fix.
 */
static int exec_helper_safe(char *path, size_t len)
{
    char real[PATH_MAX], dir[PATH_MAX];
    struct stat sb;

    if (realpath(path, real) == NULL || strlen(real) >= len) {
        say("error",
            "cannot find ringd-exec at %s: %s (an install puts it at " RINGD_EXEC_PATH
            ", a build tree next to ringd)",
            path, strerror(errno));
        return -1;
    }
    if (!only_ours(real, &sb) || !S_ISREG(sb.st_mode)) {
        say("error",
            "ringd-exec %s may be changed by others than root and ringd's user (owner uid %u, "
            "mode %04o), and ringd runs it with its privileges; make it root's and not group- "
            "or world-writable (chown root %s; chmod go-w %s)",
            real, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777), real, real);
        return -1;
    }
    snprintf(dir, sizeof(dir), "%s", real);
    for (char *slash = strrchr(dir, '/'); slash != NULL; slash = strrchr(dir, '/')) {
        *slash = '\0';
        if (!only_ours(dir[0] ? dir : "/", &sb)) {
            say("error",
                "ringd-exec %s lies in directory %s, which others than root and ringd's user "
                "may change (owner uid %u, mode %04o): they could put another program in its "
                "place; make it root's and not group- or world-writable",
                real, dir[0] ? dir : "/", (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777));
            return -1;
        }
    }
    memcpy(path, real, strlen(real) + 1);
    return 0;
}

/*
 * Whether jobs run in a private mount namespace that hides the data directory (1) or not
 * (0); -1 when ringd must not start. Without it, a job running as ringd's own user could
 * read the database and the admin token, and one running as another user could not reach
 * its run directory inside the 0700 data directory.
 */
static int choose_isolation(const struct config *cfg)
{
    struct error err;
    if (cfg->isolation == ISOLATION_NONE) {
        if (geteuid() == 0) {
            /* Job users must pass through to their own (0700) run directories. */
            if (chmod(cfg->data_dir, 0711) < 0) {
                say("error", "cannot open %s for traversal: %s", cfg->data_dir, strerror(errno));
                return -1;
            }
            say("warning", "isolation is off: the data directory is 0711 so that jobs reach "
                           "their run directories; its files stay 0600");
        } else {
            say("warning", "isolation is off: jobs run as ringd's user and can read %s",
                cfg->data_dir);
        }
        return 0;
    }
    if (local_isolation_works(cfg->exec_helper, cfg->data_dir, &err))
        return 1;
    if (cfg->isolation == ISOLATION_NAMESPACE || geteuid() == 0 || !cfg->no_auth) {
        say("error",
            "cannot hide the data directory from jobs: %s. Jobs would be able to read "
            "the database and the admin token. Allow unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1), run ringd as root, or accept "
            "the risk with isolation = none",
            err.text);
        return -1;
    }
    say("warning",
        "cannot hide the data directory from jobs (%s); with --no-auth every job is "
        "the local user's anyway",
        err.text);
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
        say("error", "%s", err.text);
        return EXIT_SOFTWARE;
    }
    if (n > 0)
        return 0;
    snprintf(path, sizeof(path), "%s/admin.token", dir);
    auth_token_generate(&t);
    snprintf(line, sizeof(line), "%s\n", t.token);
    if (write_file_atomic(dir, "admin.token", line, &what) < 0) {
        say("error",
            "cannot write the first admin token to %s (%s: %s); no token was created: make "
            "%s writable by ringd (and remove whatever is at %s), then start ringd again",
            path, what, strerror(errno), dir, path);
        return EXIT_CANTCREAT;
    }
    if (auth_token_store(st, &t, "admin", 1, NULL, 0, NULL, &err) < 0) {
        unlink(path); /* its token does not exist */
        say("error", "cannot create the admin token: %s", err.text);
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
 * backend = slurm: the work directory (runs/ and checkpoints/, which every Slurm node must
 * see and the jobs' users reach) made and resolved into out, and the slurm_* settings
 * appended to backend_options for the backend. Returns 0, or -1 after saying why.
 */
static int slurm_setup(struct config *cfg, char *out, size_t len)
{
    char abs[PATH_MAX], opts[sizeof(cfg->backend_options)];
    size_t n;

    if (mkdir(cfg->slurm_work_dir, 0755) < 0 && errno != EEXIST) {
        say("error", "cannot create slurm_work_dir %s: %s", cfg->slurm_work_dir, strerror(errno));
        return -1;
    }
    if (realpath(cfg->slurm_work_dir, abs) == NULL || strlen(abs) + 1 > len) {
        say("error", "cannot resolve slurm_work_dir %s: %s", cfg->slurm_work_dir, strerror(errno));
        return -1;
    }
    n = strlen(cfg->data_dir);
    if (strncmp(abs, cfg->data_dir, n) == 0 && (abs[n] == '/' || abs[n] == '\0')) {
        say("error",
            "slurm_work_dir %s is inside the data directory, which jobs must never see; "
            "pick a directory outside it",
            abs);
        return -1;
    }
    snprintf(out, len, "%s", abs);
    {
        /* ringd makes each job's directories in it as root: a user who could replace what
         * is in it could have ringd make them anywhere. */
        struct stat sb;
        if (stat(out, &sb) < 0 || (sb.st_uid != 0 && sb.st_uid != geteuid())) {
            say("error", "slurm_work_dir %s must belong to root or ringd's user (uid %u)", out,
                (unsigned)geteuid());
            return -1;
        }
    }
    /* Jobs' users pass through it to their own run and checkpoint directories. */
    if (chmod(out, 0755) < 0) {
        say("error", "cannot make slurm_work_dir %s traversable: %s", out, strerror(errno));
        return -1;
    }
    snprintf(opts, sizeof(opts), "%s", cfg->backend_options);
#define OPT(key, fmt, v)                                                                           \
    do {                                                                                           \
        size_t at = strlen(opts);                                                                  \
        snprintf(opts + at, sizeof(opts) - at, "%s" key "=" fmt, at ? "," : "", v);                \
    } while (0)
    if (cfg->slurm_partition[0])
        OPT("partition", "%s", cfg->slurm_partition);
    if (cfg->slurm_account[0])
        OPT("account", "%s", cfg->slurm_account);
    if (cfg->slurm_qos[0])
        OPT("qos", "%s", cfg->slurm_qos);
    if (cfg->slurm_time_limit > 0)
        OPT("time_limit", "%d", cfg->slurm_time_limit);
#undef OPT
    snprintf(cfg->backend_options, sizeof(cfg->backend_options), "%s", opts);
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
    char db_path[2200], addr_path[2200], checkpoints[2300], ckpt_prefix[2400], work_dir[2200] = "";
    int rc, port = 0, lock_fd, sig, isolate;
    sigset_t set;

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
    if (!cfg.no_auth && !cfg.insecure_http && cfg.tls_cert[0] == '\0' && !loopback(cfg.listen)) {
        say("error",
            "ringd would take bearer tokens in clear text on %s; give --tls-cert and --tls-key, "
            "listen on loopback behind a TLS proxy, or accept the risk with "
            "--allow-insecure-http",
            cfg.listen);
        return EXIT_CONFIG;
    }
    if (geteuid() == 0 && cfg.no_auth && cfg.default_user[0] == '\0') {
        say("error", "ringd runs as root with --no-auth: every local user could run commands as "
                     "root; set --default-user NAME (the account jobs run as), or run ringd as "
                     "a normal user");
        return EXIT_CONFIG;
    }
    if (cfg.default_user[0] != '\0') {
        struct local_identity id;
        if (local_identity_lookup(cfg.default_user, &id, &err) < 0) {
            say("error", "default_user: %s", err.text);
            return EXIT_CONFIG;
        }
        if (id.uid == 0)
            say("warning", "default_user is root: jobs without a mapped user run as root, with "
                           "no isolation that root could not undo");
    }
    if (geteuid() != 0)
        say("warning",
            "ringd runs as uid %u, not root: every job runs as this one user, so the jobs of "
            "different tokens are not kept apart from one another (only ringd's own data is "
            "kept from them); run ringd as root to run each token's jobs as its own user",
            (unsigned)geteuid());
    if (cfg.job_limits[0] != '\0') {
        struct local_limits limits;
        if (local_limits_parse(cfg.job_limits, &limits, &err) < 0 ||
            local_limits_allowed(&limits, &err) < 0) {
            say("error", "%s", err.text);
            return EXIT_CONFIG;
        }
    }
    if (exec_helper_safe(cfg.exec_helper, sizeof(cfg.exec_helper)) < 0)
        return EXIT_CONFIG;
    if (data_dir_private(cfg.data_dir) < 0)
        return EXIT_CONFIG;
    {
        /* Absolute from here on: attempts run in their own directories. */
        char abs[PATH_MAX];
        if (realpath(cfg.data_dir, abs) == NULL || strlen(abs) >= sizeof(cfg.data_dir)) {
            say("error", "cannot resolve data directory %s: %s", cfg.data_dir, strerror(errno));
            return EXIT_CONFIG;
        }
        memcpy(cfg.data_dir, abs, strlen(abs) + 1); /* fits: checked above */
    }
    if (strcmp(cfg.backend, "slurm") == 0 && slurm_setup(&cfg, work_dir, sizeof(work_dir)) < 0)
        return EXIT_CONFIG;
    snprintf(checkpoints, sizeof(checkpoints), "%s/checkpoints",
             work_dir[0] ? work_dir : cfg.data_dir);
    /* 0755 whatever the umask: job users pass through to their checkpoints/<job>. */
    if ((mkdir(checkpoints, 0755) < 0 && errno != EEXIST) || chmod(checkpoints, 0755) < 0) {
        say("error", "cannot create %s: %s", checkpoints, strerror(errno));
        return EXIT_CONFIG;
    }
    if ((lock_fd = lock_data_dir(cfg.data_dir)) < 0)
        return lock_fd == -2 ? EXIT_UNAVAILABLE : EXIT_CONFIG;
    if ((isolate = choose_isolation(&cfg)) < 0)
        return EXIT_CONFIG;
    if (auth_init() < 0) {
        say("error", "libsodium failed to initialize");
        return EXIT_SOFTWARE;
    }
    snprintf(db_path, sizeof(db_path), "%s/ringd.db", cfg.data_dir);
    store_backup_sweep(cfg.data_dir);
    /* Before anything writes to it (a migration, a checkpoint): a corrupt database only gets
     * worse with use, and jobs read from it would be started wrong or lost. */
    if (store_check(db_path, &err) < 0) {
        if (errno == EUCLEAN) {
            say("error",
                "the job database %s is corrupt (%s); ringd will not run on it. Move it (with "
                "any ringd.db-wal) aside for inspection and restore the latest backup "
                "(ringctl admin backup FILE; see README, Backup and restore)",
                db_path, err.text);
            return EXIT_DATAERR;
        }
        say("error", "cannot check the job database %s: %s", db_path, err.text);
        return EXIT_SOFTWARE;
    }
    if ((ckpt = store_checkpointer_start(db_path, &err)) == NULL ||
        store_open(db_path, &st, &err) < 0) {
        store_checkpointer_stop(ckpt);
        say("error", "cannot open the job database %s: %s", db_path, err.text);
        return EXIT_SOFTWARE;
    }
    if (!cfg.no_auth && (rc = first_token(st, cfg.data_dir)) != 0) {
        store_close(st);
        store_checkpointer_stop(ckpt);
        return rc;
    }
    api.data_dir = cfg.data_dir;
    api.work_dir = work_dir[0] ? work_dir : cfg.data_dir;
    snprintf(ckpt_prefix, sizeof(ckpt_prefix), "%s/", checkpoints);
    api.ckpt_prefix = ckpt_prefix;
    api.token_create = auth_token_create;
    api.token_revoked = auth_revoked;
    api.default_user = cfg.default_user;
    scfg = (struct scheduler_config){
        .db_path = db_path,
        .data_dir = cfg.data_dir,
        .work_dir = work_dir[0] ? work_dir : NULL,
        .ringrun = cfg.ringrun,
        .mpirun = cfg.mpirun,
        .exec_helper = cfg.exec_helper,
        .isolate = isolate,
        .default_user = cfg.default_user,
        .job_limits = cfg.job_limits[0] ? cfg.job_limits : NULL,
        .slots = cfg.slots,
        .gpus = cfg.gpus,
        .kill_grace_s = cfg.kill_grace_s,
        .backend = cfg.backend,
        .backend_options = cfg.backend_options[0] ? cfg.backend_options : NULL,
        .policy = cfg.policy,
    };
    policy_params_default(&scfg.params);
    scfg.params.interval_s = cfg.sched_interval;
    scfg.params.restart_cost_s = cfg.restart_cost;
    scfg.params.hysteresis = cfg.hysteresis;

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
    api.cluster = scheduler_cluster(sched);
    api.backend = scheduler_backend(sched);
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
        const char *colon = strrchr(cfg.listen, ':');
        int fd;
        snprintf(host, sizeof(host), "%.*s", (int)(colon - cfg.listen), cfg.listen);
        snprintf(addr_path, sizeof(addr_path), "%s/ringd.addr", cfg.data_dir);
        fd = open(addr_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 || dprintf(fd, "%s:%d\n", host, port) < 0)
            say("warning", "cannot write %s: %s", addr_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        say("info",
            "listening on %s://%s:%d (data %s, %d slots, %d GPUs, auth %s, isolation %s, "
            "ringrun %s, ringd-exec %s, backend %s, policy %s)",
            cfg.tls_cert[0] ? "https" : "http", host, port, cfg.data_dir, cfg.slots, cfg.gpus,
            cfg.no_auth ? "off" : "on", isolate ? "namespace" : "none", cfg.ringrun,
            cfg.exec_helper, cfg.backend, cfg.policy);
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
