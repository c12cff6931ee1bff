/* SPDX-License-Identifier: Apache-2.0 */
/* ring.c - ring_init/ring_finalize, the worker contract getters and stop requests. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "engine/engine.h"
#include "ops/ops.h"
#include "ring_internal.h"
#include "transport/transport.h"

static struct ring__ctx ctx;
static int initialized;

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

/*
 * SIGTERM. The handler may run on any thread at any moment, also while ring_finalize tears
 * the engine down, so it touches only atomics: it sets the stop request (ring__stop_request,
 * an atomic store) and writes to the eventfd published in sig_wake_fd (write() is
 * async-signal-safe). Finalize first puts the program's previous handler back, so no new
 * invocation starts, then unpublishes the fd and waits until no invocation is between
 * reading sig_wake_fd and its write(): only then may the engine close the fd. The handler
 * counts itself in before it reads the fd and finalize unpublishes before it reads the
 * count, so with sequentially consistent atomics one of them always sees the other.
 * (libuv's signal.c guards its handler state with a lock the handler itself can take; one
 * signal and one fd need only this counter.)
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
    ring__stop_request();
    fd = atomic_load(&sig_wake_fd);
    if (fd >= 0 && write(fd, &one, sizeof(one)) < 0)
        fd = -1; /* the counter is saturated: the engine is awake anyway */
    atomic_fetch_sub(&sig_in_handler, 1);
    errno = saved;
}

static int install_sigterm(int wake_fd)
{
    struct sigaction sa;

    if (!ctx.tune.v[RING__K_HANDLE_SIGTERM])
        return 0;
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
    int stopping = ring__stop_local() || ring__engine_stop_seen();

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

/* The collectives' knobs, from the tuning table (tuning.c says where the defaults come from). */
static void read_tuning(struct ring__ctx *c)
{
    const long *v = c->tune.v;

    c->small_bytes = (size_t)v[RING__K_SMALL_ALLREDUCE_BYTES];
    /* a whole number of elements of any dtype */
    c->segment_bytes = (size_t)v[RING__K_SEGMENT_BYTES] & ~(size_t)7;
    c->algo = (int)v[RING__K_ALLREDUCE_ALGO];
    c->rhd_bytes = (size_t)v[RING__K_RHD_ALLREDUCE_BYTES];
    c->hier = (int)v[RING__K_HIERARCHICAL];
    c->bind = (int)v[RING__K_BIND];
    c->bound_cpu = -1;
}

/* Meets the other ranks (bootstrap) and connects to them (mesh). */
static int connect_world(struct ring__ctx *c)
{
    struct ring__mesh_cfg cfg;
    int setup_ms = (int)c->tune.v[RING__K_TIMEOUT_SECONDS] * 1000;
    int op_ms = (int)c->tune.v[RING__K_OP_TIMEOUT_SECONDS] * 1000;
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
        c->crowded = cpus > 0 && 2L * c->local_size > cpus;
    }
    /* RING_SPIN_US's default depends on it (tuning.c). */
    ring__tuning_resolve(&c->tune, c->oversubscribed);
    c->spin_us = (int)c->tune.v[RING__K_SPIN_US];
    /* Before the engine thread starts, which inherits the mask. */
    (void)ring__bind_apply(c);
    if (c->size == 1)
        return 0;
    cfg = (struct ring__mesh_cfg){
        .rank = c->rank,
        .size = c->size,
        .setup_timeout_ms = setup_ms,
        .op_timeout_ms = op_ms,
        .oversubscribed = c->oversubscribed,
        .host_addr = c->boot->host_addr,
        .tune = &c->tune,
        .key = &c->boot->key,
    };
    return ring__mesh_create(c->boot, &cfg, c->spin_us, &c->mesh);
}

int ring_init(void)
{
    struct ring__ctx c = {0};
    int rc;

    if (initialized)
        return ring__err(RING_EALREADY, "ring_init called twice");
    ring__log_init(-1);
    /* Every knob, once: a bad value fails here, before any rank waits for another. */
    if ((rc = ring__tuning_load(&c.tune)) < 0)
        return rc;
    read_tuning(&c);
    if ((rc = connect_world(&c)) < 0) {
        if (c.size > 1)
            ring__log(RING_LOG_ERROR, "cannot connect to the other ranks: %s", ring_last_error());
        ring__mesh_destroy(c.mesh);
        ring__bootstrap_close(c.boot);
        ring__bind_restore(&c);
        return rc;
    }
    ctx = c;
    /* A new job: nothing asked this one to stop yet, whatever the last one was told. */
    ring__stop_clear();
    if ((rc = ring__ops_create(&ctx, &ctx.ops)) < 0 ||
        (rc = ring__engine_start(&ctx, &ctx.engine)) < 0) {
        /* The ranks may not all have failed here: tell the ops and the bootstrap not
         * to wait for the others. */
        ring__ops_destroy(ctx.ops, 1);
        ring__mesh_destroy(ctx.mesh);
        if (ctx.boot != NULL)
            ctx.boot->job_failed = 1;
        ring__bootstrap_close(ctx.boot);
        ring__bind_restore(&ctx);
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
              c.boot->ops->name, ctx.ops->cpu->name);
    if (ctx.ops->cpu == &ring__ops_ring && ring__log_enabled(RING_LOG_INFO)) {
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
    ring__ops_destroy(ctx.ops, failed);
    ring__mesh_destroy(ctx.mesh);
    ctx.boot->job_failed = failed;
    ring__bootstrap_close(ctx.boot);
    free(ctx.scratch);
    ring__bind_restore(&ctx);
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
    ring__stop_request();
}

int ring_stop_requested(void)
{
    /* A world of one agrees with itself at once; larger worlds see the stop after the
     * same operation on every rank (engine.c). */
    if (initialized && ctx.size == 1)
        return ring__stop_local();
    return ring__engine_stop_seen();
}
