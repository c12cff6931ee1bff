/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nccl_check - libring's collectives on GPU buffers (the NCCL backend), checked against a
 * serial reference on the host. Run under ringrun (one GPU per rank: the rank's local rank
 * modulo the visible GPUs) or alone.
 *
 * Covers: device pointers told from host ones; allreduce of every dtype, in and out of
 * place, with SUM, MIN, MAX, PRODUCT, AVERAGE and scale factors; a fused batch of tensors
 * submitted at once (the device fusion buffer); grouped allreduce; allgather(v),
 * broadcast from every root, reducescatter in and out of place, alltoall(v); a host
 * allreduce in the same job; and the errors of mixed or unsupported GPU requests.
 *
 * Exits 0 when every check passed ("nccl_check: N checks passed at np P on GPU D"), 1 at
 * the first wrong element, 77 when there is no CUDA device (with the reason), 2 on usage.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/collectives.h"
#include "ring.h"

static int rank, size, checks;

#define CUDA(call)                                                                                 \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_));             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void check_rc(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "rank %d/%d: %s failed: %s (%s)\n", rank, size, what, ring_strerror(rc),
                ring_last_error());
        exit(1);
    }
}

static void put(void *buf, size_t i, ring_dtype_t t, double v)
{
    switch (t) {
    case RING_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case RING_INT8:
        ((int8_t *)buf)[i] = (int8_t)v;
        break;
    case RING_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case RING_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case RING_FLOAT16:
        ((uint16_t *)buf)[i] = ring__float_to_half((float)v);
        break;
    case RING_BFLOAT16:
        ((uint16_t *)buf)[i] = ring__float_to_bf16((float)v);
        break;
    case RING_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    default:
        ((double *)buf)[i] = v;
        break;
    }
}

static double get(const void *buf, size_t i, ring_dtype_t t)
{
    switch (t) {
    case RING_UINT8:
        return ((const uint8_t *)buf)[i];
    case RING_INT8:
        return ((const int8_t *)buf)[i];
    case RING_INT32:
        return ((const int32_t *)buf)[i];
    case RING_INT64:
        return (double)((const int64_t *)buf)[i];
    case RING_FLOAT16:
        return ring__half_to_float(((const uint16_t *)buf)[i]);
    case RING_BFLOAT16:
        return ring__bf16_to_float(((const uint16_t *)buf)[i]);
    case RING_FLOAT32:
        return ((const float *)buf)[i];
    default:
        return ((const double *)buf)[i];
    }
}

/* Small integers, exact in every dtype and in every order of reduction. */
static double input(int r, size_t i, ring_op_t op)
{
    if (op == RING_PRODUCT)
        return (double)(1 + (r + (int)i) % 2);
    return (double)((r * 7 + (int)(i % 13)) % 11);
}

static double reference(size_t i, ring_op_t op, double pre, double post)
{
    double acc = op == RING_PRODUCT ? 1.0
                 : op == RING_MIN   ? INFINITY
                 : op == RING_MAX   ? -INFINITY
                                    : 0;
    for (int r = 0; r < size; r++) {
        double v = input(r, i, op) * pre;
        acc = op == RING_PRODUCT ? acc * v
              : op == RING_MIN   ? fmin(acc, v)
              : op == RING_MAX   ? fmax(acc, v)
                                 : acc + v;
    }
    return op == RING_AVERAGE ? acc / size * post : acc * post;
}

static void expect_close(double got, double want, ring_dtype_t t, const char *what, size_t i)
{
    double tol = t == RING_FLOAT16 ? 1e-3 : t == RING_BFLOAT16 ? 1e-2 : 1e-6;
    if (fabs(got - want) > tol * fmax(1.0, fabs(want))) {
        fprintf(stderr, "rank %d/%d: %s: element %zu is %g, want %g\n", rank, size, what, i, got,
                want);
        exit(1);
    }
}

/* A device buffer of count elements of t, filled from a host function of the index. */
static void *dev_fill(size_t count, ring_dtype_t t, double (*f)(size_t, void *), void *arg)
{
    size_t es = ring_dtype_size(t);
    char *h = malloc(count * es + 1);
    void *d = NULL;

    for (size_t i = 0; i < count; i++)
        put(h, i, t, f != NULL ? f(i, arg) : 0);
    CUDA(cudaMalloc(&d, count * es + 1));
    CUDA(cudaMemcpy(d, h, count * es, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static void *to_host(const void *d, size_t count, ring_dtype_t t)
{
    size_t es = ring_dtype_size(t);
    char *h = malloc(count * es + 1);
    CUDA(cudaMemcpy(h, d, count * es, cudaMemcpyDeviceToHost));
    return h;
}

struct in_arg {
    int r;
    ring_op_t op;
};
static double f_input(size_t i, void *a)
{
    struct in_arg *x = a;
    return input(x->r, i, x->op);
}
static double token(int r, size_t i)
{
    return (double)((r * 31 + (int)(i % 97)) % 100);
}
static double f_token(size_t i, void *a)
{
    return token(*(int *)a, i);
}

static void check_allreduce(size_t count, ring_dtype_t t, ring_op_t op, int in_place, double pre,
                            double post)
{
    struct in_arg a = {rank, op};
    void *in = dev_fill(count, t, f_input, &a), *out = in_place ? in : dev_fill(count, t, NULL, 0);
    char what[128];
    void *h;

    snprintf(what, sizeof(what), "allreduce %s %s count %zu %s pre %g post %g", ring_dtype_name(t),
             ring_op_name(op), count, in_place ? "in place" : "out of place", pre, post);
    check_rc(ring_allreduce_scaled(in_place ? RING_IN_PLACE : in, out, count, t, op, pre, post),
             what);
    h = to_host(out, count, t);
    for (size_t i = 0; i < count; i++)
        expect_close(get(h, i, t), reference(i, op, pre, post), t, what, i);
    free(h);
    cudaFree(in);
    if (!in_place)
        cudaFree(out);
    checks++;
}

/* Many tensors at once: the engine fuses them through the device fusion buffer. */
static void check_fused(int n, ring_dtype_t t, ring_op_t op)
{
    void **buf = calloc((size_t)n, sizeof(void *));
    ring_handle_t **hd = calloc((size_t)n, sizeof(*hd));
    struct in_arg a = {rank, op};
    char name[64];

    for (int k = 0; k < n; k++) {
        buf[k] = dev_fill((size_t)(k * 37 % 300 + 1), t, f_input, &a);
        snprintf(name, sizeof(name), "fused/%d", k);
        check_rc(ring_allreduce_async(name, RING_IN_PLACE, buf[k], (size_t)(k * 37 % 300 + 1), t,
                                      op, 1.0, 1.0, RING_GLOBAL, &hd[k]),
                 "allreduce_async");
    }
    for (int k = 0; k < n; k++) {
        size_t count = (size_t)(k * 37 % 300 + 1);
        void *h;
        check_rc(ring_wait(hd[k]), "ring_wait");
        h = to_host(buf[k], count, t);
        for (size_t i = 0; i < count; i++)
            expect_close(get(h, i, t), reference(i, op, 1, 1), t, "fused allreduce", i);
        free(h);
        cudaFree(buf[k]);
    }
    free(buf);
    free(hd);
    checks++;
}

static void check_grouped(void)
{
    enum { N = 3 };
    size_t counts[N] = {5, 1000, 17};
    void *send[N], *recv[N];
    struct in_arg a = {rank, RING_SUM};
    ring_handle_t *h;

    for (int k = 0; k < N; k++) {
        send[k] = dev_fill(counts[k], RING_FLOAT32, f_input, &a);
        recv[k] = dev_fill(counts[k], RING_FLOAT32, NULL, 0);
    }
    check_rc(ring_grouped_allreduce_async("grouped", N, (const void *const *)send, recv, counts,
                                          RING_FLOAT32, RING_SUM, RING_GLOBAL, &h),
             "grouped allreduce");
    check_rc(ring_wait(h), "grouped allreduce");
    for (int k = 0; k < N; k++) {
        float *x = to_host(recv[k], counts[k], RING_FLOAT32);
        for (size_t i = 0; i < counts[k]; i++)
            expect_close(x[i], reference(i, RING_SUM, 1, 1), RING_FLOAT32, "grouped", i);
        free(x);
        cudaFree(send[k]);
        cudaFree(recv[k]);
    }
    checks++;
}

static void check_allgather(size_t count, int variable, int in_place)
{
    size_t counts[64], offs[64], total = 0;
    int me = rank;
    void *in, *out;
    char *h;

    for (int r = 0; r < size; r++) {
        counts[r] = variable ? (count + (size_t)r * 3) % (count + 5) : count;
        offs[r] = total;
        total += counts[r];
    }
    in = dev_fill(counts[rank], RING_INT32, f_token, &me);
    out = dev_fill(total, RING_INT32, NULL, 0);
    if (in_place)
        CUDA(cudaMemcpy((int32_t *)out + offs[rank], in, counts[rank] * 4,
                        cudaMemcpyDeviceToDevice));
    if (variable)
        check_rc(
            ring_allgatherv(in_place ? RING_IN_PLACE : in, counts[rank], out, counts, RING_INT32),
            "allgatherv");
    else
        check_rc(ring_allgather(in_place ? RING_IN_PLACE : in, count, out, RING_INT32),
                 "allgather");
    h = to_host(out, total, RING_INT32);
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < counts[r]; i++)
            expect_close(get(h, offs[r] + i, RING_INT32), token(r, i), RING_INT32,
                         variable ? "allgatherv" : "allgather", offs[r] + i);
    free(h);
    cudaFree(in);
    cudaFree(out);
    checks++;
}

static void check_broadcast(size_t count, int root)
{
    int me = rank;
    void *buf = dev_fill(count, RING_FLOAT64, f_token, &me);
    double *h;

    check_rc(ring_broadcast(buf, count, RING_FLOAT64, root), "broadcast");
    h = to_host(buf, count, RING_FLOAT64);
    for (size_t i = 0; i < count; i++)
        expect_close(h[i], token(root, i), RING_FLOAT64, "broadcast", i);
    free(h);
    cudaFree(buf);
    checks++;
}

static void check_reducescatter(size_t count, int in_place, double pre, double post)
{
    size_t off, mine = ring_reducescatter_count(count, size, rank, &off);
    struct in_arg a = {rank, RING_SUM};
    void *in = dev_fill(count, RING_FLOAT32, f_input, &a);
    void *out = in_place ? in : dev_fill(mine + 1, RING_FLOAT32, NULL, 0);
    float *h;

    check_rc(ring_reducescatter_scaled(in_place ? RING_IN_PLACE : in, out, count, RING_FLOAT32,
                                       RING_SUM, pre, post),
             "reducescatter");
    h = to_host(out, mine, RING_FLOAT32);
    for (size_t i = 0; i < mine; i++)
        expect_close(h[i], reference(off + i, RING_SUM, pre, post), RING_FLOAT32, "reducescatter",
                     i);
    free(h);
    cudaFree(in);
    if (!in_place)
        cudaFree(out);
    checks++;
}

static void check_alltoall(size_t count)
{
    int me = rank;
    void *in = dev_fill(count * (size_t)size, RING_INT64, f_token, &me);
    void *out = dev_fill(count * (size_t)size, RING_INT64, NULL, 0);
    char *h;

    check_rc(ring_alltoall(in, out, count, RING_INT64), "alltoall");
    h = to_host(out, count * (size_t)size, RING_INT64);
    /* block r came from rank r, where it was that rank's block number `rank` */
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < count; i++)
            expect_close(get(h, (size_t)r * count + i, RING_INT64),
                         token(r, (size_t)rank * count + i), RING_INT64, "alltoall",
                         (size_t)r * count + i);
    free(h);
    cudaFree(in);
    cudaFree(out);
    checks++;
}

static void check_errors(void)
{
    float host[4] = {0};
    void *d = dev_fill(4, RING_FLOAT32, NULL, 0), *di = dev_fill(4, RING_INT32, NULL, 0);

    if (ring_allreduce(d, host, 4, RING_FLOAT32, RING_SUM) != RING_EINVAL ||
        strstr(ring_last_error(), "both must be in the same place") == NULL) {
        fprintf(stderr, "rank %d: a GPU send buffer with a host receive buffer: %s\n", rank,
                ring_last_error());
        exit(1);
    }
    if (ring_allreduce_scaled(RING_IN_PLACE, d, 4, RING_FLOAT32, RING_PRODUCT, 2.0, 1.0) !=
            RING_ENOTSUP ||
        ring_allreduce(RING_IN_PLACE, di, 4, RING_INT32, RING_AVERAGE) != RING_ENOTSUP) {
        fprintf(stderr, "rank %d: unsupported GPU scaling was accepted: %s\n", rank,
                ring_last_error());
        exit(1);
    }
    cudaFree(d);
    cudaFree(di);
    checks++;
}

int main(int argc, char **argv)
{
    static const ring_dtype_t all[] = {RING_UINT8,   RING_INT8,     RING_INT32,   RING_INT64,
                                       RING_FLOAT16, RING_BFLOAT16, RING_FLOAT32, RING_FLOAT64};
    size_t counts[] = {0, 1, 7, 1000, 65537};
    int ndev = 0, dev, rc;
    cudaError_t e;

    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "usage: nccl_check (under ringrun -np N, one GPU per rank)\n");
        return 2;
    }
    if ((e = cudaGetDeviceCount(&ndev)) != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device here (%s); nccl_check needs a GPU\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    if ((rc = ring_init()) != 0) {
        fprintf(stderr, "ring_init: %s (%s)\n", ring_strerror(rc), ring_last_error());
        return 1;
    }
    rank = ring_rank();
    size = ring_size();
    if (size > 64) {
        fprintf(stderr, "nccl_check: at most 64 ranks\n");
        return 2;
    }
    dev = ring_local_rank() % ndev;
    CUDA(cudaSetDevice(dev));

    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        for (size_t t = 0; t < sizeof(all) / sizeof(all[0]); t++) {
            for (int op = 0; op < RING_OP_COUNT; op++) {
                int integer = all[t] <= RING_INT64;
                if (op == RING_AVERAGE && integer)
                    continue; /* refused on GPUs: check_errors */
                if (op == RING_PRODUCT && size > 4 && all[t] <= RING_INT8)
                    continue; /* 2^size overflows 8 bits */
                check_allreduce(counts[k], all[t], op, 0, 1.0, 1.0);
                check_allreduce(counts[k], all[t], op, 1, 1.0, 1.0);
            }
        }
        check_allreduce(counts[k], RING_FLOAT32, RING_SUM, 0, 0.5, 2.0);
        check_allreduce(counts[k], RING_FLOAT64, RING_AVERAGE, 1, 2.0, 1.0);
        check_allreduce(counts[k], RING_INT32, RING_SUM, 0, 3.0, 1.0);
        check_allgather(counts[k], 0, 0);
        check_allgather(counts[k], 0, 1);
        check_allgather(counts[k], 1, 0);
        check_allgather(counts[k], 1, 1);
        for (int root = 0; root < size; root++)
            check_broadcast(counts[k], root);
        check_reducescatter(counts[k], 0, 1.0, 1.0);
        check_reducescatter(counts[k], 1, 0.5, 2.0);
        check_alltoall(counts[k]);
    }
    check_fused(40, RING_FLOAT32, RING_SUM);
    check_fused(40, RING_FLOAT16, RING_MAX);
    check_fused(40, RING_INT32, RING_MIN);
    check_grouped();
    {
        /* host memory keeps its own backend in the same job */
        int32_t x[3] = {rank, 1, 2};
        check_rc(ring_allreduce(RING_IN_PLACE, x, 3, RING_INT32, RING_SUM), "host allreduce");
        if (x[0] != size * (size - 1) / 2 || x[1] != size) {
            fprintf(stderr, "rank %d: the host allreduce beside GPU ones is wrong\n", rank);
            return 1;
        }
        checks++;
    }
    check_errors();
    check_rc(ring_barrier(), "barrier");
    if (rank == 0)
        printf("nccl_check: %d checks passed at np %d on GPU %d\n", checks, size, dev);
    ring_finalize();
    return 0;
}
