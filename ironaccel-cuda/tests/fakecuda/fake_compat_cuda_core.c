/* Driver entry points the cuda.core compat (ironaccel_cuda_compat.cuda_core) and cuda.core's own tests call,
 * for the fake libcuda (see fake_cuda.c; found by name through its cuGetProcAddress).
 *
 * Streams are checked with fake_cuda_stream_device and read through the first fields fake_cuda.c gives them
 * (magic, device, flags, priority); the default streams (handles 0, 1, 2) report flags 0 and priority 0.
 * cuMemcpyAsync copies between any two host addresses (fake "device" memory is host memory) once the stream is
 * valid.  Pinned host allocation forwards to cuMemHostAlloc.  Graph upload checks its handles and does nothing
 * else; the DOT print writes an empty graph.  Event IPC is fake_memory.c's.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fake_cuda.h"

#define FAKE_MAGIC_STREAM 0x5354524dU

struct fake_stream_prefix { unsigned magic; int dev; unsigned flags; int prio; };

static CUresult stream_fields(CUstream h, unsigned *flags, int *prio) {
    CUresult err = fake_cuda_check();
    if (err) return err;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        if (fake_cuda_current_device() < 0) return CUDA_ERROR_INVALID_CONTEXT;
        *flags = 0; *prio = 0;
        return CUDA_SUCCESS;
    }
    if (fake_cuda_stream_device(h) < 0) return CUDA_ERROR_INVALID_HANDLE;
    const struct fake_stream_prefix *s = (const struct fake_stream_prefix *)h;
    if (s->magic != FAKE_MAGIC_STREAM) return CUDA_ERROR_INVALID_HANDLE;
    *flags = s->flags; *prio = s->prio;
    return CUDA_SUCCESS;
}

CUresult cuStreamGetPriority(CUstream h, int *priority) {
    unsigned flags; int prio;
    if (!priority) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = stream_fields(h, &flags, &prio);
    if (!err) *priority = prio;
    return err;
}

CUresult cuStreamGetFlags(CUstream h, unsigned int *flags) {
    unsigned f; int prio;
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = stream_fields(h, &f, &prio);
    if (!err) *flags = f;
    return err;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) { return cuDeviceGetDefaultMemPool(pool, dev); }

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
    unsigned flags; int prio;
    CUresult err = stream_fields(h, &flags, &prio);
    if (err) return err;
    if (n && (!dst || !src)) return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void **pp, size_t n) { return cuMemHostAlloc(pp, n, 0); }

CUresult cuGraphUpload(CUgraphExec exec, CUstream h) {
    unsigned flags; int prio;
    if (!exec) return CUDA_ERROR_INVALID_VALUE;
    return stream_fields(h, &flags, &prio);
}

CUresult cuGraphDebugDotPrint(CUgraph graph, const char *path, unsigned int flags) {
    (void)flags;
    if (!graph || !path) return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "w");
    if (!f) return CUDA_ERROR_OPERATING_SYSTEM;
    fputs("digraph fake {}\n", f);
    fclose(f);
    return CUDA_SUCCESS;
}
