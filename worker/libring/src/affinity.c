/* SPDX-License-Identifier: Apache-2.0 */
/*
 * affinity.c - RING_BIND: keeps each rank of a crowded host on a CPU of its own.
 *
 * Why: with about one CPU per rank, two ranks that wake each other through a socket end
 * up on the same CPU while the other idles. The kernel wakes a reader of a TCP socket
 * as a "sync" wake-up (the waker is expected to sleep soon), which may pull the woken
 * thread onto the waker's CPU; as the two then take turns, neither CPU looks overloaded
 * to the load balancer, so nothing moves them apart. perf sched showed both
 * engine threads of an np 2 run sharing one CPU for whole 100 ms windows, the other CPU
 * 40-70% idle, and `perf stat` 0.95 CPUs used of 2; a 1 MiB allreduce over TCP then took
 * 0.7-1.1 ms against 0.4-0.6 ms with each rank held on its own CPU (bench/allreduce,
 * interleaved runs). Open MPI does not show it because its ranks never sleep; mpirun also
 * binds each rank to a core by default at np 2.
 *
 * What: the thread that calls ring_init, and so every thread it starts afterwards (the
 * engine's among them), is held on one CPU: the (local rank mod n)-th of the n CPUs it may
 * run on. Threads started before ring_init keep their mask. With RING_BIND=auto this
 * happens only where it pays and cannot fight a launcher: the host is crowded (fewer than
 * two CPUs per local rank: the program's thread and the engine's) and the process may run
 * on every online CPU (no launcher or cpuset bound it already). ring_finalize gives the
 * calling thread its old mask back.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "ring_internal.h"

int ring__bind_choose(const cpu_set_t *allowed, long online, int local_rank, int local_size,
                      int mode)
{
    int n = CPU_COUNT(allowed), want;

    if (mode == RING__BIND_OFF || n <= 0 || local_rank < 0 || local_size <= 0)
        return -1;
    if (mode == RING__BIND_AUTO && (n < online || (long)n >= 2L * local_size))
        return -1;
    want = local_rank % n;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, allowed) && want-- == 0)
            return cpu;
    }
    return -1;
}

int ring__bind_apply(struct ring__ctx *c)
{
    cpu_set_t one;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int cpu;

    c->bound_cpu = -1;
    if (sched_getaffinity(0, sizeof(c->bind_saved), &c->bind_saved) < 0) {
        ring__log(RING_LOG_WARNING, "RING_BIND: cannot read this thread's CPU mask (%s); not bound",
                  strerror(errno));
        return -1;
    }
    cpu = ring__bind_choose(&c->bind_saved, online, c->local_rank, c->local_size, c->bind);
    if (cpu < 0)
        return -1;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) < 0) {
        ring__log(RING_LOG_WARNING, "RING_BIND: cannot bind to CPU %d (%s); not bound", cpu,
                  strerror(errno));
        return -1;
    }
    c->bound_cpu = cpu;
    ring__log(RING_LOG_INFO, "bound to CPU %d (local rank %d of %d, %d CPUs allowed)", cpu,
              c->local_rank, c->local_size, CPU_COUNT(&c->bind_saved));
    return cpu;
}

void ring__bind_restore(struct ring__ctx *c)
{
    if (c->bound_cpu >= 0)
        (void)sched_setaffinity(0, sizeof(c->bind_saved), &c->bind_saved);
    c->bound_cpu = -1;
}
