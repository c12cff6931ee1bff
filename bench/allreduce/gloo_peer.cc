/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gloo_peer.cc - the few calls bench_allreduce.c makes, on Gloo (Debian's libgloo-dev):
 * gloo::allreduce with the ring algorithm over Gloo's TCP transport on loopback, the peer
 * the issue names. Built only for the bench, as bench_allreduce_gloo.
 *
 * Gloo has no launcher of its own: ranks come from the launcher's environment (ringrun's
 * RING_RANK/RING_SIZE or mpirun's OMPI_COMM_WORLD_*), and they meet through a FileStore
 * in the directory BENCH_GLOO_STORE, which run.sh makes empty for each run.
 */
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "gloo_peer.h"

namespace
{

std::shared_ptr<gloo::rendezvous::Context> ctx;

int env_int(const char *a, const char *b)
{
    const char *v = std::getenv(a);
    if (v == nullptr)
        v = std::getenv(b);
    return v != nullptr ? std::atoi(v) : -1;
}

template <typename T>
int reduce(T *in, T *out, size_t count, void (*fn)(void *, const void *, const void *, size_t))
{
    try {
        gloo::AllreduceOptions opts(ctx);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        opts.setInput(in, count);
        opts.setOutput(out, count);
        opts.setReduceFunction(fn);
        opts.setTimeout(std::chrono::milliseconds(60000));
        gloo::allreduce(opts);
    } catch (const std::exception &ex) {
        std::fprintf(stderr, "gloo allreduce: %s\n", ex.what());
        return -1;
    }
    return 0;
}

} // namespace

extern "C" int gloo_peer_init(int *rank, int *size)
{
    const char *dir = std::getenv("BENCH_GLOO_STORE");
    *rank = env_int("RING_RANK", "OMPI_COMM_WORLD_RANK");
    *size = env_int("RING_SIZE", "OMPI_COMM_WORLD_SIZE");
    if (dir == nullptr || *rank < 0 || *size < 1) {
        std::fprintf(stderr, "bench_allreduce_gloo: needs BENCH_GLOO_STORE and a launcher's "
                             "rank and size (ringrun or mpirun)\n");
        return -1;
    }
    try {
        gloo::transport::tcp::attr attr("127.0.0.1");
        auto dev = gloo::transport::tcp::CreateDevice(attr);
        gloo::rendezvous::FileStore store(dir);
        ctx = std::make_shared<gloo::rendezvous::Context>(*rank, *size);
        ctx->setTimeout(std::chrono::milliseconds(60000));
        ctx->connectFullMesh(store, dev);
    } catch (const std::exception &ex) {
        std::fprintf(stderr, "gloo set-up: %s\n", ex.what());
        return -1;
    }
    return 0;
}

extern "C" void gloo_peer_finish(void)
{
    ctx.reset();
}

extern "C" int gloo_peer_allreduce(float *in, float *out, size_t count)
{
    void (*fn)(void *, const void *, const void *, size_t) = &gloo::sum<float>;
    return reduce(in, out, count, fn);
}

extern "C" int gloo_peer_max(double *v)
{
    void (*fn)(void *, const void *, const void *, size_t) = &gloo::max<double>;
    return reduce(v, v, 1, fn);
}

extern "C" int gloo_peer_barrier(void)
{
    try {
        gloo::BarrierOptions opts(ctx);
        opts.setTimeout(std::chrono::milliseconds(60000));
        gloo::barrier(opts);
    } catch (const std::exception &ex) {
        std::fprintf(stderr, "gloo barrier: %s\n", ex.what());
        return -1;
    }
    return 0;
}
