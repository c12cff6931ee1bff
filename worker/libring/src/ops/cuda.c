/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda.c - where a buffer lives (ops/ops.h: ring__cuda_device_of), through the CUDA
 * runtime. Built with RING_WITH_CUDA.
 *
 * The first call asks the runtime for the device count, once per process: with no driver
 * or no GPU (this build machine, a CPU-only node) every buffer is host memory and no later
 * call touches CUDA again. Otherwise cudaPointerGetAttributes tells device and managed
 * memory (which NCCL reads and writes alike) from host memory, registered or not.
 */
#include <cuda_runtime.h>
#include <pthread.h>

#include "ops/ops.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_devices;

static void count_devices(void)
{
    int n = 0;

    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0)
        have_devices = 1;
    else
        (void)cudaGetLastError(); /* the runtime keeps the error otherwise */
}

int ring__cuda_have_devices(void)
{
    pthread_once(&once, count_devices);
    return have_devices;
}

int ring__cuda_device_of(const void *ptr)
{
    struct cudaPointerAttributes a;

    pthread_once(&once, count_devices);
    if (!have_devices || ptr == NULL)
        return -1;
    if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
}
