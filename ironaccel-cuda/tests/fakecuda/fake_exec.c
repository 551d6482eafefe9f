/* The fake libcuda's part for launches, streams, contexts and linking (ironaccel_cuda's exec features).
 *
 * Found by cuGetProcAddress through its by-name fallback (see fake_cuda.c).  Built on the fake's exported
 * entry points, so handles are checked by them.  Honest where a CPU can be: host functions run at once on a
 * stream that is not capturing (every fake stream is synchronous), limits and cache configuration are kept
 * per context, occupancy is computed from the fake device's limits, libraries wrap a module of the current
 * context.  Capture of host functions, explicit graphs, explicit and green contexts and module globals are
 * not faked: their GPU tests skip under the fake.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t xlock = PTHREAD_MUTEX_INITIALIZER;

CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *data) {
    CUstreamCaptureStatus st;
    CUresult err = cuStreamIsCapturing(h, &st);
    if (err) return err;
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    if (st != CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_NOT_SUPPORTED;
    fn(data);
    return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *graph,
                                const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps) {
    if (!st) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = cuStreamIsCapturing(h, st);
    if (err) return err;
    if (id) *id = (cuuint64_t)(uintptr_t)h;
    if (graph) *graph = NULL;
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (ndeps) *ndeps = 0;
    return CUDA_SUCCESS;
}

/* ---- limits and cache configuration, per device (the fake has one context per device) ---- */
static size_t limits[8][CU_LIMIT_MAX];
static int limits_set[8][CU_LIMIT_MAX];
static CUfunc_cache cache_config[8];

static int current_device(CUresult *err) {
    CUdevice d;
    *err = cuCtxGetDevice(&d);
    return *err ? -1 : (int)d;
}
static size_t default_limit(CUlimit l) {
    switch (l) {
    case CU_LIMIT_STACK_SIZE: return 1024;
    case CU_LIMIT_PRINTF_FIFO_SIZE: return 1 << 20;
    case CU_LIMIT_MALLOC_HEAP_SIZE: return 8 << 20;
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT: return 2048;
    case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH: return 2;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY: return 32;
    default: return 0;
    }
}
CUresult cuCtxGetLimit(size_t *v, CUlimit l) {
    CUresult err; int d = current_device(&err); if (d < 0) return err;
    if (!v || l < 0 || l >= CU_LIMIT_MAX) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&xlock); *v = limits_set[d][l] ? limits[d][l] : default_limit(l); pthread_mutex_unlock(&xlock);
    return CUDA_SUCCESS;
}
CUresult cuCtxSetLimit(CUlimit l, size_t v) {
    CUresult err; int d = current_device(&err); if (d < 0) return err;
    if (l < 0 || l >= CU_LIMIT_MAX) return CUDA_ERROR_INVALID_VALUE;
    if (l == CU_LIMIT_STACK_SIZE) v = (v + 15) / 16 * 16;  /* the driver rounds the stack size */
    pthread_mutex_lock(&xlock); limits[d][l] = v; limits_set[d][l] = 1; pthread_mutex_unlock(&xlock);
    return CUDA_SUCCESS;
}
CUresult cuCtxGetCacheConfig(CUfunc_cache *c) {
    CUresult err; int d = current_device(&err); if (d < 0) return err;
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    *c = cache_config[d]; return CUDA_SUCCESS;
}
CUresult cuCtxSetCacheConfig(CUfunc_cache c) {
    CUresult err; int d = current_device(&err); if (d < 0) return err;
    if (c < CU_FUNC_CACHE_PREFER_NONE || c > CU_FUNC_CACHE_PREFER_EQUAL) return CUDA_ERROR_INVALID_VALUE;
    cache_config[d] = c; return CUDA_SUCCESS;
}

/* ---- occupancy (fake device: 2048 threads, 32 blocks and 228 KiB shared memory per SM, 1024 per block) ---- */
static CUresult func_ok(CUfunction f) { int v; return cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f); }
static int blocks_per_sm(int block, size_t smem) {
    int n = 2048 / block; if (n > 32) n = 32;
    if (smem) { size_t by_smem = 233472 / (smem + 1024); if ((size_t)n > by_smem) n = (int)by_smem; }
    return n;
}
CUresult cuOccupancyMaxPotentialBlockSize(int *grid, int *block, CUfunction f, CUoccupancyB2DSize per_block,
                                          size_t smem, int limit) {
    CUresult err = func_ok(f); if (err) return err;
    if (!grid || !block) return CUDA_ERROR_INVALID_VALUE;
    int best = 0, best_threads = -1, top = limit > 0 && limit < 1024 ? limit : 1024;
    for (int b = 32; b <= top; b += 32) {
        size_t need = per_block ? per_block(b) : smem;
        if (need > 232448) continue;
        int threads = blocks_per_sm(b, need) * b;
        if (threads >= best_threads) { best_threads = threads; best = b; }
    }
    if (!best) return CUDA_ERROR_INVALID_VALUE;
    *block = best; *grid = blocks_per_sm(best, per_block ? per_block(best) : smem) * 132;
    return CUDA_SUCCESS;
}
CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *smem, CUfunction f, int nblocks, int block) {
    CUresult err = func_ok(f); if (err) return err;
    if (!smem || nblocks <= 0 || block <= 0 || block > 1024 || nblocks * block > 2048) return CUDA_ERROR_INVALID_VALUE;
    size_t per = 233472 / (size_t)nblocks;
    per = per > 1024 ? per - 1024 : 0;
    *smem = per > 232448 ? 232448 : per;
    return CUDA_SUCCESS;
}
static CUresult config_ok(CUfunction f, const CUlaunchConfig *c) {
    CUresult err = func_ok(f); if (err) return err;
    if (!c || !c->gridDimX || !c->blockDimX || (unsigned long long)c->blockDimX * c->blockDimY * c->blockDimZ > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}
CUresult cuOccupancyMaxPotentialClusterSize(int *size, CUfunction f, const CUlaunchConfig *c) {
    CUresult err = config_ok(f, c); if (err) return err;
    if (!size) return CUDA_ERROR_INVALID_VALUE;
    *size = 8; return CUDA_SUCCESS;
}
CUresult cuOccupancyMaxActiveClusters(int *n, CUfunction f, const CUlaunchConfig *c) {
    CUresult err = config_ok(f, c); if (err) return err;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    unsigned cluster = 1;
    for (unsigned i = 0; i < c->numAttrs; i++)
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            cluster = c->attrs[i].value.clusterDim.x * c->attrs[i].value.clusterDim.y * c->attrs[i].value.clusterDim.z;
    if (cluster == 0 || cluster > 8) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    *n = (int)(132 / cluster) * blocks_per_sm((int)(c->blockDimX * c->blockDimY * c->blockDimZ), c->sharedMemBytes);
    return CUDA_SUCCESS;
}

/* ---- profiler ---- */
static int profiling;
CUresult cuProfilerStart(void) { profiling = 1; return CUDA_SUCCESS; }
CUresult cuProfilerStop(void) { profiling = 0; return CUDA_SUCCESS; }
int fake_cuda_profiling(void) { return profiling; }

/* ---- libraries: a module of the current context ---- */
#define MAGIC_LIBRARY 0x4c494252U
struct library { unsigned magic; CUmodule mod; };
static struct library *get_library(CUlibrary h) {
    struct library *l = (struct library *)h; return (l && l->magic == MAGIC_LIBRARY) ? l : NULL;
}
CUresult cuLibraryLoadData(CUlibrary *out, const void *code, CUjit_option *jo, void **jv, unsigned nj,
                           CUlibraryOption *lo, void **lv, unsigned nl) {
    (void)jo; (void)jv; (void)nj; (void)lo; (void)lv; (void)nl;
    if (!out || !code) return CUDA_ERROR_INVALID_VALUE;
    CUmodule m; CUresult err = cuModuleLoadData(&m, code); if (err) return err;
    struct library *l = calloc(1, sizeof *l); l->magic = MAGIC_LIBRARY; l->mod = m;
    *out = (CUlibrary)l; return CUDA_SUCCESS;
}
CUresult cuLibraryUnload(CUlibrary h) {
    struct library *l = get_library(h); if (!l) return CUDA_ERROR_INVALID_HANDLE;
    l->magic = 0xdead; return cuModuleUnload(l->mod);
}
CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary h, const char *name) {
    struct library *l = get_library(h); if (!l || !k || !name) return l ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
    return cuModuleGetFunction((CUfunction *)k, l->mod, name);
}
CUresult cuLibraryGetGlobal(CUdeviceptr *p, size_t *n, CUlibrary h, const char *name) {
    (void)p; (void)n; (void)name; return get_library(h) ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuKernelGetFunction(CUfunction *f, CUkernel k) { if (!f) return CUDA_ERROR_INVALID_VALUE; *f = (CUfunction)k; return func_ok(*f); }
CUresult cuKernelGetParamInfo(CUkernel k, size_t i, size_t *off, size_t *size) { return cuFuncGetParamInfo((CUfunction)k, i, off, size); }
CUresult cuKernelGetAttribute(int *v, CUfunction_attribute a, CUkernel k, CUdevice d) { (void)d; return cuFuncGetAttribute(v, a, (CUfunction)k); }
CUresult cuKernelSetAttribute(CUfunction_attribute a, int v, CUkernel k, CUdevice d) { (void)d; return cuFuncSetAttribute((CUfunction)k, a, v); }
CUresult cuKernelSetCacheConfig(CUkernel k, CUfunc_cache c, CUdevice d) { (void)d; return cuFuncSetCacheConfig((CUfunction)k, c); }
CUresult cuLibraryGetModule(CUmodule *m, CUlibrary h) {
    struct library *l = get_library(h); if (!l) return CUDA_ERROR_INVALID_HANDLE;
    if (!m) return CUDA_ERROR_INVALID_VALUE;
    *m = l->mod; return CUDA_SUCCESS;
}

/* This thread's capture mode: kept and exchanged, not enforced (the fake refuses no call because of it). */
static __thread CUstreamCaptureMode thread_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
    if (!mode) return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = thread_capture_mode;
    thread_capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}
