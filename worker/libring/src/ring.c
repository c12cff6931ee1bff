/* SPDX-License-Identifier: Apache-2.0 */
/* ring.c - ring_init/ring_finalize, the worker contract getters and stop requests. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "backend.h"
#include "bootstrap.h"
#include "engine.h"
#include "transport.h"

static struct ring__ctx ctx;
static int initialized;
/* This rank's own stop request; read by the engine thread, set by the SIGTERM handler. */
static atomic_int stop_flag;

/*
 * Defaults. The 30 s timeouts match Horovod's start timeout: long enough for a slow
 * launch on a loaded node, short enough that a dead job is noticed within a minute.
 * 64 KiB is where the ring's 2(n-1) latency terms stop dominating on TCP (bench/allreduce).
 * 256 KiB segments fit many times into the 4 MiB socket buffers (transport_tcp.c), so the
 * kernel keeps receiving while a segment is reduced.
 */
#define DEFAULT_TIMEOUT_S     30
#define DEFAULT_SMALL_BYTES   65536
#define DEFAULT_SEGMENT_BYTES (256 * 1024)

const char *ring_version(void)
{
    return RING_VERSION_STRING;
}

struct ring__ctx *ring__ctx(void)
{
    return initialized ? &ctx : NULL;
}

struct ring__ctx *ring__ctx_usable(int *rc)
{
    if (!initialized) {
        *rc = ring__err(RING_ENOTINIT, "call ring_init() first");
        return NULL;
    }
    *rc = 0;
    return &ctx;
}

struct ring__comm ring__world(struct ring__ctx *c)
{
    struct ring__comm w = {.ctx = c, .rank = c->rank, .size = c->size, .members = NULL};
    return w;
}

int ring__stop_local(void)
{
    return atomic_load(&stop_flag) != 0;
}

/*
 * SIGTERM. The handler may run on any thread at any moment, also while ring_finalize tears
 * the engine down, so it touches only atomics: it sets stop_flag and writes to the eventfd
 * published in sig_wake_fd (write() is async-signal-safe). Finalize first puts the
 * program's previous handler back, so no new invocation starts, then unpublishes the fd
 * and waits until no invocation is between reading sig_wake_fd and its write(): only then
 * may the engine close the fd. The handler counts itself in before it reads the fd and
 * finalize unpublishes before it reads the count, so with sequentially consistent atomics
 * one of them always sees the other. (libuv's signal.c guards its handler state with a
 * lock the handler itself can take; one signal and one fd need only this counter.)
 */
static atomic_int sig_wake_fd = -1;
static atomic_int sig_in_handler;
static struct sigaction sig_prev;
static int sig_installed;
/* Left in place by a finalize after a stop (uninstall_sigterm); sig_prev still holds the
 * program's own disposition for the next ring_init. */
static int sig_lingering;

static void on_sigterm(int sig)
{
    int saved = errno, fd;
    uint64_t one = 1;

    atomic_fetch_add(&sig_in_handler, 1);
    atomic_store(&stop_flag, 1);
    fd = atomic_load(&sig_wake_fd);
    if (fd >= 0 && write(fd, &one, sizeof(one)) < 0)
        fd = -1; /* the counter is saturated: the engine is awake anyway */
    atomic_fetch_sub(&sig_in_handler, 1);
    errno = saved;
}

static int install_sigterm(int wake_fd)
{
    struct sigaction sa;
    long handle;
    int rc = ring__env_int("RING_HANDLE_SIGTERM", 1, 0, 1, &handle);

    if (rc < 0 || !handle)
        return rc;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    atomic_store(&sig_wake_fd, wake_fd);
    if (sigaction(SIGTERM, &sa, sig_lingering ? NULL : &sig_prev) < 0) {
        atomic_store(&sig_wake_fd, -1);
        return ring__err(RING_ESYS, "sigaction(SIGTERM): %s", strerror(errno));
    }
    sig_installed = 1;
    sig_lingering = 0;
    return 0;
}

/*
 * Puts the program's own SIGTERM disposition back and waits out running handlers. But
 * after a stop, when that disposition is the default one, the handler stays: a stop's
 * SIGTERM reaches the ranks at different moments (one host's signal late, a wrapper
 * scheduled late), and a rank whose peers already agreed on the stop would otherwise be
 * killed by its own late copy while it checkpoints and exits 75. With the engine gone the
 * handler only sets a flag, so the copy is absorbed; a program with its own handler gets
 * it back as always.
 */
static void uninstall_sigterm(void)
{
    int stopping = atomic_load(&stop_flag) || ring__engine_stop_seen();

    if (!sig_installed)
        return;
    if (stopping && !(sig_prev.sa_flags & SA_SIGINFO) && sig_prev.sa_handler == SIG_DFL)
        sig_lingering = 1;
    else if (sigaction(SIGTERM, &sig_prev, NULL) < 0)
        ring__log(RING_LOG_WARNING, "cannot restore the previous SIGTERM handler: %s",
                  strerror(errno));
    sig_installed = 0;
    atomic_store(&sig_wake_fd, -1);
    while (atomic_load(&sig_in_handler) > 0)
        sched_yield();
}

/* RING_HIERARCHICAL: 0, 1 or auto (the default); see ring__hier_for in collectives.h. */
static int read_hierarchical(struct ring__ctx *c)
{
    const char *v = getenv("RING_HIERARCHICAL");

    c->hier = RING__HIER_AUTO;
    if (v == NULL || *v == '\0' || strcasecmp(v, "auto") == 0)
        return 0;
    if (strcmp(v, "0") == 0)
        c->hier = RING__HIER_OFF;
    else if (strcmp(v, "1") == 0)
        c->hier = RING__HIER_ON;
    else {
        ring__log(RING_LOG_ERROR, "RING_HIERARCHICAL='%s' must be 0, 1 or auto", v);
        return ring__err(RING_EENV, "RING_HIERARCHICAL='%s' must be 0, 1 or auto", v);
    }
    return 0;
}

static int read_tuning(struct ring__ctx *c)
{
    const char *algo = getenv("RING_ALLREDUCE_ALGO");
    long small, seg;
    int rc;

    if ((rc = ring__env_int("RING_SMALL_ALLREDUCE_BYTES", DEFAULT_SMALL_BYTES, 0, 1L << 40,
                            &small)) < 0 ||
        (rc = ring__env_int("RING_SEGMENT_BYTES", DEFAULT_SEGMENT_BYTES, 4096, 1L << 30, &seg)) < 0)
        return rc;
    c->small_bytes = (size_t)small;
    c->segment_bytes = (size_t)seg & ~(size_t)7; /* a whole number of elements of any dtype */
    c->algo = RING__ALGO_AUTO;
    if (algo != NULL && *algo != '\0') {
        if (strcasecmp(algo, "ring") == 0)
            c->algo = RING__ALGO_RING;
        else if (strcasecmp(algo, "rd") == 0)
            c->algo = RING__ALGO_RD;
        else if (strcasecmp(algo, "auto") != 0) {
            ring__log(RING_LOG_ERROR, "RING_ALLREDUCE_ALGO='%s' must be auto, ring or rd", algo);
            return ring__err(RING_EENV, "RING_ALLREDUCE_ALGO='%s' must be auto, ring or rd", algo);
        }
    }
    return read_hierarchical(c);
}

/*
 * RING_SPIN_US, or by default 50 us when every rank on this host has a core of its own and
 * 100 us when the host is oversubscribed, where the spin yields the CPU at every turn
 * (mesh.c), so that a peer that needs it to answer gets it. Without the spin, every wait
 * there went to sleep: a 4 KiB allreduce at np 4 on 2 cores took ~150 us against ~55 us
 * with it (bench/allreduce, RING_SPIN_US 0 and 100). A program's thread waiting on a
 * handle spins as long before it sleeps (ring_wait, engine.c).
 */
static int spin_us(const struct ring__ctx *c)
{
    long v, dflt = c->oversubscribed ? 100 : 50;
    if (ring__env_int("RING_SPIN_US", dflt, 0, 1000000, &v) < 0)
        return (int)dflt;
    return (int)v;
}

/* Meets the other ranks (bootstrap) and connects to them (mesh). */
static int connect_world(struct ring__ctx *c, int setup_ms, int op_ms)
{
    struct ring__mesh_cfg cfg;
    int rc;

    c->setup_timeout_ms = setup_ms;
    c->op_timeout_ms = op_ms;
    if ((rc = ring__bootstrap_open(setup_ms, &c->boot)) < 0)
        return rc;
    c->rank = c->boot->rank;
    c->size = c->boot->size;
    c->local_rank = c->boot->local_rank;
    c->local_size = c->boot->local_size;
    c->cross_rank = c->boot->cross_rank;
    c->cross_size = c->boot->cross_size;
    ring__log_init(c->rank);
    {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        c->oversubscribed = cpus > 0 && c->local_size > cpus;
    }
    c->spin_us = spin_us(c);
    if (c->size == 1)
        return 0;
    cfg = (struct ring__mesh_cfg){
        .rank = c->rank,
        .size = c->size,
        .setup_timeout_ms = setup_ms,
        .op_timeout_ms = op_ms,
        .oversubscribed = c->oversubscribed,
        .host_addr = c->boot->host_addr,
    };
    return ring__mesh_create(c->boot, &cfg, c->spin_us, &c->mesh);
}

int ring_init(void)
{
    struct ring__ctx c = {0};
    long setup_s, op_s;
    int rc;

    if (initialized)
        return ring__err(RING_EALREADY, "ring_init called twice");
    ring__log_init(-1);
    if ((rc = read_tuning(&c)) < 0 ||
        (rc = ring__env_int("RING_TIMEOUT_SECONDS", DEFAULT_TIMEOUT_S, 1, 86400, &setup_s)) < 0 ||
        (rc = ring__env_int("RING_OP_TIMEOUT_SECONDS", DEFAULT_TIMEOUT_S, 1, 86400, &op_s)) < 0)
        return rc;
    if ((rc = connect_world(&c, (int)setup_s * 1000, (int)op_s * 1000)) < 0) {
        if (c.size > 1)
            ring__log(RING_LOG_ERROR, "cannot connect to the other ranks: %s", ring_last_error());
        ring__mesh_destroy(c.mesh);
        ring__bootstrap_close(c.boot);
        return rc;
    }
    ctx = c;
    /* A new job: nothing asked this one to stop yet, whatever the last one was told. */
    atomic_store(&stop_flag, 0);
    if ((rc = ring__backends_create(&ctx, &ctx.backends)) < 0 ||
        (rc = ring__engine_start(&ctx, &ctx.engine)) < 0) {
        /* The ranks may not all have failed here: tell the backends and the bootstrap not
         * to wait for the others. */
        ring__backends_destroy(ctx.backends, 1);
        ring__mesh_destroy(ctx.mesh);
        if (ctx.boot != NULL)
            ctx.boot->job_failed = 1;
        ring__bootstrap_close(ctx.boot);
        memset(&ctx, 0, sizeof(ctx));
        return rc;
    }
    initialized = 1;
    if ((rc = install_sigterm(ring__engine_wake_fd(ctx.engine))) < 0) {
        ring_finalize();
        return rc;
    }
    ring__log(RING_LOG_INFO,
              "initialized: rank %d of %d (local %d/%d, host %d/%d), bootstrap %s, host "
              "memory through %s",
              c.rank, c.size, c.local_rank, c.local_size, c.cross_rank, c.cross_size,
              c.boot->ops->name, ctx.backends->cpu->name);
    if (ctx.backends->cpu == &ring__backend_ring && ring__log_enabled(RING_LOG_INFO)) {
        char line[256];
        if (ring__hier_describe(&ctx, line, sizeof(line)) == 0)
            ring__log(RING_LOG_INFO, "hierarchical allreduce: %s", line);
    }
    return 0;
}

int ring_finalize(void)
{
    int failed;

    if (!initialized)
        return RING_ENOTINIT;
    uninstall_sigterm();
    /* Agrees on the shutdown with the other ranks, so none closes sockets that another
     * still needs for a collective in flight. */
    ring__engine_stop(ctx.engine);
    initialized = 0;
    /* After a transport error some peer may be dead or stuck: nothing below may wait for
     * the others then (MPI_Finalize, NCCL's finalize and PMIx's would). */
    failed = ctx.mesh != NULL && ring__mesh_broken(ctx.mesh);
    ring__backends_destroy(ctx.backends, failed);
    ring__mesh_destroy(ctx.mesh);
    ctx.boot->job_failed = failed;
    ring__bootstrap_close(ctx.boot);
    free(ctx.scratch);
    memset(&ctx, 0, sizeof(ctx));
    return 0;
}

int ring_initialized(void)
{
    return initialized;
}

#define GETTER(fn, field)                                                                          \
    int fn(void)                                                                                   \
    {                                                                                              \
        return initialized ? ctx.field : -1;                                                       \
    }
GETTER(ring_rank, rank)
GETTER(ring_size, size)
GETTER(ring_local_rank, local_rank)
GETTER(ring_local_size, local_size)
GETTER(ring_cross_rank, cross_rank)
GETTER(ring_cross_size, cross_size)

void ring_request_stop(void)
{
    atomic_store(&stop_flag, 1);
}

int ring_stop_requested(void)
{
    /* A world of one agrees with itself at once; larger worlds see the stop after the
     * same operation on every rank (engine.c). */
    if (initialized && ctx.size == 1)
        return atomic_load(&stop_flag) != 0;
    return ring__engine_stop_seen();
}
