/* A pretend libcuda for testing floor.c on a machine without a GPU (test_harness.py builds it).
 *
 * Device memory is host memory, copies are memcpy, streams and events do nothing (a query says "not
 * ready" every other time, and a stream memop's write lands at once), and a "launch"
 * of bench_k4 / bench_k16 does what the real kernels do: write the sum of the int arguments to
 * the output pointer. Stream capture records launches; a graph launch replays them.
 * Only the entry points floor.c uses are here.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define K4 ((CUfunction)(uintptr_t)4)
#define K16 ((CUfunction)(uintptr_t)16)
#define MAX_CAPTURE 4096

static int capturing;
static struct {
    CUfunction f;
    void **params;
} captured[MAX_CAPTURE];
static int n_captured;

CUresult cuGetErrorName(CUresult error, const char **name) {
    *name = error == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
}
CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    *device = ordinal;
    return ordinal == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
    (void)dev;
    *ctx = (CUcontext)(uintptr_t)0x1000;
    return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext ctx) { return ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }
CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
    (void)flags;
    *stream = (CUstream)(uintptr_t)0x2000;
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream stream) { return stream ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
CUresult cuStreamSynchronize(CUstream stream) { return stream ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
/* Every other query says "not ready", so floor.c's wait_stream takes its fence-word path too. */
CUresult cuStreamQuery(CUstream stream) {
    static int queries;
    if (!stream) return CUDA_ERROR_INVALID_HANDLE;
    return queries++ % 2 ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
/* Work runs when queued, so the write lands at once; device-mapped host memory has its host address. */
CUresult cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
    if (!stream || !addr || flags) return CUDA_ERROR_INVALID_VALUE;
    __atomic_store_n((cuuint32_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}
CUresult cuMemHostGetDevicePointer(CUdeviceptr *dptr, void *p, unsigned int flags) {
    if (!dptr || !p || flags) return CUDA_ERROR_INVALID_VALUE;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    *module = (CUmodule)(uintptr_t)0x3000;
    return image ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
}
CUresult cuModuleGetFunction(CUfunction *f, CUmodule module, const char *name) {
    (void)module;
    if (!strcmp(name, "bench_k4")) *f = K4;
    else if (!strcmp(name, "bench_k16")) *f = K16;
    else return CUDA_ERROR_NOT_FOUND;
    return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuMemFree(CUdeviceptr dptr) {
    free((void *)(uintptr_t)dptr);
    return CUDA_SUCCESS;
}
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream) {
    (void)stream;
    return cuMemAlloc(dptr, bytes);
}
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    (void)stream;
    return cuMemFree(dptr);
}
CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned int flags) {
    (void)flags;
    *p = malloc(bytes);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void *p) {
    free(p);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream stream) {
    (void)stream;
    memcpy((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream stream) {
    (void)stream;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream) {
    (void)stream;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) { return cuMemcpyDtoHAsync(dst, src, n, NULL); }
CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) { return cuMemcpyHtoDAsync(dst, src, n, NULL); }
CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
CUresult cuMemsetD32(CUdeviceptr dst, unsigned int value, size_t n) {
    unsigned int *p = (unsigned int *)(uintptr_t)dst;
    for (size_t i = 0; i < n; i++) p[i] = value;
    return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent *event, unsigned int flags) {
    *event = (CUevent)(uintptr_t)(0x4000 + flags);
    return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent event, CUstream stream) { return event && stream ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
CUresult cuEventSynchronize(CUevent event) { return event ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
CUresult cuEventDestroy(CUevent event) { return event ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }

static void run_kernel(CUfunction f, void **params) {
    int *out = (int *)(uintptr_t) * (CUdeviceptr *)params[0];
    int count = f == K4 ? 4 : 16, sum = 0;
    for (int i = 1; i < count; i++) sum += *(int *)params[i];
    *out = sum;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void **params,
                        void **extra) {
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)extra;
    if (f != K4 && f != K16) return CUDA_ERROR_INVALID_HANDLE;
    if (capturing) {
        if (n_captured == MAX_CAPTURE) return CUDA_ERROR_OUT_OF_MEMORY;
        captured[n_captured].f = f;
        captured[n_captured].params = params;
        n_captured++;
        return CUDA_SUCCESS;
    }
    run_kernel(f, params);
    return CUDA_SUCCESS;
}
CUresult cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode) {
    (void)stream, (void)mode;
    capturing = 1;
    n_captured = 0;
    return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph) {
    (void)stream;
    capturing = 0;
    *graph = (CUgraph)(uintptr_t)(0x5000 + n_captured);
    return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
    (void)flags;
    *exec = (CUgraphExec)graph;
    return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
    (void)stream;
    if ((uintptr_t)exec - 0x5000 != (uintptr_t)n_captured) return CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < n_captured; i++) run_kernel(captured[i].f, captured[i].params);
    return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(CUgraphExec exec) { return exec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
CUresult cuGraphDestroy(CUgraph graph) { return graph ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
