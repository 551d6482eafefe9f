/* A fake libcuda.so.1 for CPU-only tests of ironaccel-cuda.
 *
 * It implements, with the real cuda.h prototypes, the part of the driver API
 * that ironaccel_cuda calls, over host memory: "device" pointers are malloc'd
 * host memory, every stream is synchronous (with FAKE_CUDA_DEFER_PINNED_DMA, which test_fake_driver.py sets,
 * a copy from page-locked memory runs at the next driver call instead), and a few kernels are built in
 * (found by symbol name inside whatever image is loaded):
 *
 *   scale_offset(const float* x, float* y, float a, float b, unsigned n)   y = a*x + b
 *   saxpy(float a, const float* x, float* y, unsigned n)                   y = a*x + y
 *   templated::saxpy<float> (_ZN9templated5saxpyIfEEvT_PKS1_PS1_j), the same
 *   echo16(unsigned char* out, 15 scalars of mixed types)                  copies its parameter block to out
 *   fault(float* p)                                                        makes the context sticky-failed (700)
 *   spin(long long cycles)                                                 does nothing (a GPU busy-waits)
 *   scale_offset(const float* x, float* y, float a, float2 pair, unsigned n, int k)
 *       y = a*x + pair.x - pair.y*k, where the image also holds the symbol ironaccel_fake_typed_params (the
 *       conformance kit's typed-params kernel has the same entry name as scale_offset: the marker tells them apart)
 *   scale_offset(const float* x, float* y, unsigned n)                      y = x*SCALE + BIAS, where the image holds
 *       the string "ironaccel-fake-constants SCALE BIAS" (the kit's constants kernel: NVRTC's -D values, as text)
 *
 * It validates handles and pointer ranges and returns the driver's error codes,
 * so the Python layer's argument conversions, result tuples and error mapping
 * run for real.  Not a simulator: no timing, no concurrency between streams.
 * fake_cuda_counters() exposes allocation counters for leak / double-free checks.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dlfcn.h>

#include "fake_cuda.h"

#define MAGIC_STREAM 0x5354524dU
#define MAGIC_EVENT 0x4556454eU
#define MAGIC_MODULE 0x4d4f4455U
#define MAGIC_FUNC 0x46554e43U
#define MAGIC_GRAPH 0x47524150U
#define MAGIC_EXEC 0x45584543U
#define MAX_DEV 8
#define DEV_MEM (1ull << 30)
#define RESERVED (64ull << 20) /* what a real context keeps for itself */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised = 0;
static CUresult sticky = CUDA_SUCCESS;
static __thread CUcontext current = NULL;

struct ctx { int dev; int peer[MAX_DEV]; };
static struct ctx ctxs[MAX_DEV];

static int ndev(void) {
    const char *e = getenv("FAKE_CUDA_DEVICES");
    int n = e ? atoi(e) : 2;
    return n < 0 ? 0 : n > MAX_DEV ? MAX_DEV : n;
}

/* ---- allocations ---- */
struct alloc { char *base; size_t size; int dev; int live; int host; fake_cuda_free_fn on_free; void *arg; int external; };
static struct alloc *allocs = NULL;
static size_t nallocs = 0, capallocs = 0;
static long long counters[6]; /* allocs, frees, bad_frees, live, host_allocs, host_frees */
static size_t used[MAX_DEV];

static struct alloc *find_alloc(const char *p, size_t n, int host) {
    for (size_t i = 0; i < nallocs; i++) {
        struct alloc *a = &allocs[i];
        if (a->live && a->host == host && p >= a->base && p + n <= a->base + a->size && (n > 0 || p < a->base + a->size))
            return a;
    }
    return NULL;
}
static struct alloc *find_base(const char *p, int host) {
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].live && allocs[i].host == host && allocs[i].base == p) return &allocs[i];
    return NULL;
}
static char *new_alloc(size_t size, int dev, int host) {
    if (nallocs == capallocs) {
        capallocs = capallocs ? capallocs * 2 : 256;
        allocs = realloc(allocs, capallocs * sizeof *allocs);
    }
    char *p = aligned_alloc(256, (size + 255) / 256 * 256);
    if (!p) return NULL;
    allocs[nallocs++] = (struct alloc){p, size, dev, 1, host};
    return p;
}

long long fake_cuda_counters(int i) { return (i >= 0 && i < 6) ? counters[i] : -1; }
size_t fake_cuda_used(int dev) { return dev >= 0 && dev < MAX_DEV ? used[dev] : 0; }

/* ---- objects ---- */
struct graph;
struct stream { unsigned magic; int dev; unsigned flags; int prio; int capturing; struct graph *g; };
struct event { unsigned magic; int dev; unsigned flags; int recorded; double t; };
struct func;
typedef void (*kernel_fn)(struct func *f, void **params, size_t nthreads);
struct func { unsigned magic; const char *name; int dev; kernel_fn run; int nparams; unsigned ptrmask; size_t off[16], size[16];
              double consts[2];
              int attr_set, max_dyn, carveout, cache; /* what cuFuncSetAttribute / cuFuncSetCacheConfig set (attr_set: bits) */ };
struct module { unsigned magic; int dev; struct func funcs[8]; int nfuncs; };
enum { NODE_KERNEL, NODE_MEMSET };
struct node { int type; struct func *f; size_t nthreads; unsigned char data[256]; void *ptrs[16];
              CUdeviceptr dst; unsigned value; size_t elem, count; };
struct graph { unsigned magic; int dev; struct node nodes[256]; int n; };
struct exec { unsigned magic; struct graph g; };

static struct stream legacy_streams[MAX_DEV];

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cur_dev(void) { return current ? ((struct ctx *)current)->dev : -1; }

static struct stream *get_stream(CUstream h, CUresult *err) {
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        int d = cur_dev();
        if (d < 0) { *err = CUDA_ERROR_INVALID_CONTEXT; return NULL; }
        return &legacy_streams[d];
    }
    struct stream *s = (struct stream *)h;
    if (s->magic != MAGIC_STREAM) { *err = CUDA_ERROR_INVALID_HANDLE; return NULL; }
    return s;
}

/* FAKE_CUDA_DEFER_PINNED_DMA=1: a cuMemcpyHtoDAsync from cuMemHostAlloc'd memory reads its source only at the
   next driver call of fake_cuda.c (or fake_cuda_check), as late as a real DMA may, so code that reuses a
   page-locked source before the copy has surely run reads back the later bytes.  Pageable sources are copied at
   once, as the driver stages them. */
static struct { void *dst; const void *src; size_t n; } pending[256];
static int npending = 0;
static void flush_pending(void) {
    for (int i = 0; i < npending; i++) memcpy(pending[i].dst, pending[i].src, pending[i].n);
    npending = 0;
}
#define ENTER() pthread_mutex_lock(&lock); if (npending) flush_pending(); if (!initialised) { pthread_mutex_unlock(&lock); return CUDA_ERROR_NOT_INITIALIZED; } \
    if (sticky) { CUresult e_ = sticky; pthread_mutex_unlock(&lock); return e_; }
#define LEAVE(x) do { CUresult r_ = (x); pthread_mutex_unlock(&lock); return r_; } while (0)
#define STREAM(var, h) CUresult e_##var = CUDA_SUCCESS; struct stream *var = get_stream(h, &e_##var); if (!var) LEAVE(e_##var)
/* The strictest reading of the driver docs: these calls need a current context, even with an explicit stream. */
#define NEED_CTX() if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT)

/* ---- kernels ---- */
static void k_scale_offset(struct func *f, void **p, size_t nthreads) {
    (void)f;
    const float *x = *(float **)p[0]; float *y = *(float **)p[1];
    float a = *(float *)p[2], b = *(float *)p[3]; unsigned n = *(unsigned *)p[4];
    for (size_t i = 0; i < nthreads && i < n; i++) y[i] = a * x[i] + b;
}
static void k_saxpy(struct func *f, void **p, size_t nthreads) {
    (void)f;
    float a = *(float *)p[0]; const float *x = *(float **)p[1]; float *y = *(float **)p[2];
    unsigned n = *(unsigned *)p[3];
    for (size_t i = 0; i < nthreads && i < n; i++) y[i] = a * x[i] + y[i];
}
static void k_echo16(struct func *f, void **p, size_t nthreads) {
    (void)nthreads;
    unsigned char *out = *(unsigned char **)p[0];
    for (int i = 1; i < f->nparams; i++) memcpy(out + f->off[i], p[i], f->size[i]);
}
static void k_scale_offset_typed(struct func *f, void **p, size_t nthreads) {
    (void)f;
    const float *x = *(float **)p[0]; float *y = *(float **)p[1];
    float a = *(float *)p[2]; const float *pair = (const float *)p[3]; unsigned n = *(unsigned *)p[4];
    int k = *(int *)p[5];
    for (size_t i = 0; i < nthreads && i < n; i++) y[i] = a * x[i] + pair[0] - pair[1] * (float)k;
}
static void k_constants(struct func *f, void **p, size_t nthreads) {
    const float *x = *(float **)p[0]; float *y = *(float **)p[1]; unsigned n = *(unsigned *)p[2];
    for (size_t i = 0; i < nthreads && i < n; i++) y[i] = x[i] * (float)f->consts[0] + (float)f->consts[1];
}
static void k_spin(struct func *f, void **p, size_t nthreads) { (void)f; (void)p; (void)nthreads; }
static void k_fault(struct func *f, void **p, size_t nthreads) { (void)f; (void)p; (void)nthreads; sticky = CUDA_ERROR_ILLEGAL_ADDRESS; }

struct kdef { const char *name; kernel_fn run; int n; unsigned ptrmask; size_t off[16], size[16]; const char *marker; };
static const struct kdef KERNELS[] = {
    /* a variant first: found only where the image holds its marker symbol, and then the plain entry is not */
    {"scale_offset", k_scale_offset_typed, 6, 0x3, {0, 8, 16, 24, 32, 36}, {8, 8, 4, 8, 4, 4},
     "ironaccel_fake_typed_params"},
    {"scale_offset", k_constants, 3, 0x3, {0, 8, 16}, {8, 8, 4}, "ironaccel-fake-constants "},
    {"scale_offset", k_scale_offset, 5, 0x3, {0, 8, 16, 20, 24}, {8, 8, 4, 4, 4}},
    {"saxpy", k_saxpy, 4, 0x6, {0, 8, 16, 24}, {4, 8, 8, 4}},
    {"_ZN9templated5saxpyIfEEvT_PKS1_PS1_j", k_saxpy, 4, 0x6, {0, 8, 16, 24}, {4, 8, 8, 4}},
    /* echo16(u8* out, char, short, int, long long, float, double, u8, u16, u32, u64, float, double, int, float, u64) */
    {"echo16", k_echo16, 16, 0x1, {0, 8, 10, 12, 16, 24, 32, 40, 42, 44, 48, 56, 64, 72, 76, 80},
                            {8, 1, 2, 4, 8, 4, 8, 1, 2, 4, 8, 4, 8, 4, 4, 8}},
    /* tex_fetch_1d(float*, cudaTextureObject_t, unsigned), tex2d_point(float*, tex, unsigned, unsigned),
       surf2d_write(cudaSurfaceObject_t, unsigned, unsigned): fake_arrays.c */
    {"tex_fetch_1d", fake_kernel_tex_fetch_1d, 3, 0x1, {0, 8, 16}, {8, 8, 4}},
    {"tex2d_point", fake_kernel_tex2d_point, 4, 0x1, {0, 8, 16, 20}, {8, 8, 4, 4}},
    {"surf2d_write", fake_kernel_surf2d_write, 3, 0x0, {0, 8, 12}, {8, 4, 4}},
    {"fault", k_fault, 1, 0x0, {0}, {8}},
    {"spin", k_spin, 1, 0x0, {0}, {8}},
};

/* ---- init, version, errors ---- */
CUresult cuInit(unsigned int flags) {
    (void)flags;
    if (getenv("FAKE_CUDA_NO_DEVICE")) return CUDA_ERROR_NO_DEVICE;
    pthread_mutex_lock(&lock);
    if (!initialised) {
        for (int i = 0; i < MAX_DEV; i++) { ctxs[i].dev = i; legacy_streams[i] = (struct stream){MAGIC_STREAM, i, 0, 0, 0, NULL}; }
        initialised = 1;
    }
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
/* FAKE_CUDA_DRIVER_VERSION plays an older driver (the compiled core leaves newer entry points unbound). */
CUresult cuDriverGetVersion(int *v) {
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    const char *e = getenv("FAKE_CUDA_DRIVER_VERSION");
    *v = e && *e ? atoi(e) : 13000; return CUDA_SUCCESS;
}

static const struct { CUresult code; const char *name, *text; } ERRS[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "the graph update was not performed"},
};
CUresult cuGetErrorName(CUresult e, const char **s) {
    for (size_t i = 0; i < sizeof ERRS / sizeof *ERRS; i++) if (ERRS[i].code == e) { *s = ERRS[i].name; return CUDA_SUCCESS; }
    *s = NULL; return CUDA_ERROR_INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult e, const char **s) {
    for (size_t i = 0; i < sizeof ERRS / sizeof *ERRS; i++) if (ERRS[i].code == e) { *s = ERRS[i].text; return CUDA_SUCCESS; }
    *s = NULL; return CUDA_ERROR_INVALID_VALUE;
}

/* ---- devices and contexts ---- */
CUresult cuDeviceGetCount(int *n) { ENTER(); *n = ndev(); LEAVE(CUDA_SUCCESS); }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { ENTER(); if (ordinal < 0 || ordinal >= ndev()) LEAVE(CUDA_ERROR_INVALID_DEVICE); *d = ordinal; LEAVE(CUDA_SUCCESS); }
#define DEV_OK(d) if ((d) < 0 || (d) >= ndev()) LEAVE(CUDA_ERROR_INVALID_DEVICE)
CUresult cuDeviceGetName(char *name, int len, CUdevice d) { ENTER(); DEV_OK(d); snprintf(name, len, "Fake NVIDIA H200 #%d", d); LEAVE(CUDA_SUCCESS); }
CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d) { ENTER(); DEV_OK(d); for (int i = 0; i < 16; i++) u->bytes[i] = (char)(0x10 * d + i); LEAVE(CUDA_SUCCESS); }
CUresult cuDeviceGetPCIBusId(char *s, int len, CUdevice d) { ENTER(); DEV_OK(d); snprintf(s, len, "0000:%02X:00.0", 0x18 + d); LEAVE(CUDA_SUCCESS); }
CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { ENTER(); DEV_OK(d); *b = DEV_MEM; LEAVE(CUDA_SUCCESS); }
CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    ENTER(); DEV_OK(d);
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 52428800; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *v = 3; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *v = getenv("FAKE_CUDA_NO_POOLS") ? 0 : 1; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *v = 0x18 + d; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: *v = 512; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: *v = 32; break;
    default: LEAVE(CUDA_ERROR_INVALID_VALUE);
    }
    LEAVE(CUDA_SUCCESS);
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { ENTER(); DEV_OK(d); *c = (CUcontext)&ctxs[d]; LEAVE(CUDA_SUCCESS); }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { ENTER(); DEV_OK(d); LEAVE(CUDA_SUCCESS); }
static int ctx_ok(CUcontext c) { return c >= (CUcontext)&ctxs[0] && c < (CUcontext)&ctxs[ndev()]; }
CUresult cuCtxSetCurrent(CUcontext c) { ENTER(); if (c && !ctx_ok(c)) LEAVE(CUDA_ERROR_INVALID_CONTEXT); current = c; LEAVE(CUDA_SUCCESS); }
CUresult cuCtxGetCurrent(CUcontext *c) { ENTER(); *c = current; LEAVE(CUDA_SUCCESS); }
CUresult cuCtxGetDevice(CUdevice *d) { ENTER(); if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT); *d = cur_dev(); LEAVE(CUDA_SUCCESS); }
CUresult cuCtxSynchronize(void) { ENTER(); if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT); LEAVE(CUDA_SUCCESS); }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { ENTER(); if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT); *t = DEV_MEM; *f = DEV_MEM - RESERVED - used[cur_dev()]; LEAVE(CUDA_SUCCESS); }
CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice p) { ENTER(); DEV_OK(d); DEV_OK(p); *can = d != p; LEAVE(CUDA_SUCCESS); }
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
    ENTER(); (void)flags;
    if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    if (!ctx_ok(peer) || peer == current) LEAVE(CUDA_ERROR_INVALID_DEVICE);
    struct ctx *c = (struct ctx *)current; int p = ((struct ctx *)peer)->dev;
    if (c->peer[p]) LEAVE(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    c->peer[p] = 1; LEAVE(CUDA_SUCCESS);
}
CUresult cuCtxDisablePeerAccess(CUcontext peer) {
    ENTER();
    if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    if (!ctx_ok(peer)) LEAVE(CUDA_ERROR_INVALID_DEVICE);
    struct ctx *c = (struct ctx *)current; int p = ((struct ctx *)peer)->dev;
    if (!c->peer[p]) LEAVE(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    c->peer[p] = 0; LEAVE(CUDA_SUCCESS);
}
CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) { ENTER(); *least = 0; *greatest = -5; LEAVE(CUDA_SUCCESS); }

/* ---- streams ---- */
CUresult cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int prio) {
    ENTER(); if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    if (flags > 1) LEAVE(CUDA_ERROR_INVALID_VALUE);
    struct stream *s = calloc(1, sizeof *s);
    *s = (struct stream){MAGIC_STREAM, cur_dev(), flags, prio, 0, NULL};
    *ph = (CUstream)s; LEAVE(CUDA_SUCCESS);
}
CUresult cuStreamDestroy_v2(CUstream h) { ENTER(); STREAM(s, h); if (s >= legacy_streams && s < legacy_streams + MAX_DEV) LEAVE(CUDA_ERROR_INVALID_HANDLE); s->magic = 0xdead; LEAVE(CUDA_SUCCESS); }
CUresult cuStreamSynchronize(CUstream h) { ENTER(); NEED_CTX(); STREAM(s, h); if (s->capturing) LEAVE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); LEAVE(CUDA_SUCCESS); }
/* FAKE_CUDA_BUSY_QUERIES (read at each call): every stream answers a query "not ready", as a real one does
   while work runs, so that the waits' busy paths (the fence word, fence.h) run here too. */
CUresult cuStreamQuery(CUstream h) {
    ENTER(); NEED_CTX(); STREAM(s, h);
    if (s->capturing) LEAVE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    LEAVE(getenv("FAKE_CUDA_BUSY_QUERIES") ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS);
}
CUresult cuStreamGetCtx(CUstream h, CUcontext *c) { ENTER(); STREAM(s, h); *c = (CUcontext)&ctxs[s->dev]; LEAVE(CUDA_SUCCESS); }
CUresult cuStreamGetCtx_v2(CUstream h, CUcontext *c, CUgreenCtx *g) { ENTER(); STREAM(s, h); *c = (CUcontext)&ctxs[s->dev]; if (g) *g = NULL; LEAVE(CUDA_SUCCESS); }
static struct event *get_event(CUevent h) { struct event *e = (struct event *)h; return (e && e->magic == MAGIC_EVENT) ? e : NULL; }
CUresult cuStreamWaitEvent(CUstream h, CUevent ev, unsigned int flags) {
    ENTER(); NEED_CTX(); (void)flags; STREAM(s, h); if (!get_event(ev)) LEAVE(CUDA_ERROR_INVALID_HANDLE); LEAVE(CUDA_SUCCESS);
}

/* ---- events ---- */
CUresult cuEventCreate(CUevent *ph, unsigned int flags) {
    ENTER(); if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    struct event *e = calloc(1, sizeof *e); *e = (struct event){MAGIC_EVENT, cur_dev(), flags, 0, 0};
    *ph = (CUevent)e; LEAVE(CUDA_SUCCESS);
}
CUresult cuEventDestroy_v2(CUevent h) { ENTER(); struct event *e = get_event(h); if (!e) LEAVE(CUDA_ERROR_INVALID_HANDLE); e->magic = 0xdead; LEAVE(CUDA_SUCCESS); }
CUresult cuEventRecord(CUevent h, CUstream sh) {
    ENTER(); NEED_CTX(); struct event *e = get_event(h); if (!e) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    STREAM(s, sh); if (s->dev != e->dev) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    e->recorded = 1; e->t = now_ms(); LEAVE(CUDA_SUCCESS);
}
CUresult cuEventSynchronize(CUevent h) { ENTER(); NEED_CTX(); if (!get_event(h)) LEAVE(CUDA_ERROR_INVALID_HANDLE); LEAVE(CUDA_SUCCESS); }
CUresult cuEventQuery(CUevent h) { ENTER(); NEED_CTX(); if (!get_event(h)) LEAVE(CUDA_ERROR_INVALID_HANDLE); LEAVE(CUDA_SUCCESS); }
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
    ENTER(); struct event *s = get_event(a), *e = get_event(b);
    if (!s || !e || (s->flags & CU_EVENT_DISABLE_TIMING) || (e->flags & CU_EVENT_DISABLE_TIMING)) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    if (!s->recorded || !e->recorded) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    *ms = (float)(e->t - s->t); LEAVE(CUDA_SUCCESS);
}

/* ---- memory ---- */
static CUresult do_alloc(CUdeviceptr *p, size_t n, int dev) {
    if (n == 0) return CUDA_ERROR_INVALID_VALUE;
    if (n > DEV_MEM - RESERVED - used[dev]) return CUDA_ERROR_OUT_OF_MEMORY;  /* not used + n: it can wrap */
    char *m = new_alloc(n, dev, 0); if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(m, 0xAB, n); /* poison: reading uninitialised device memory shows */
    used[dev] += n; counters[0]++; counters[3]++;
    *p = (CUdeviceptr)(uintptr_t)m; return CUDA_SUCCESS;
}
static CUresult do_free(CUdeviceptr p) {
    struct alloc *a = find_base((const char *)(uintptr_t)p, 0);
    if (!a) { counters[2]++; return CUDA_ERROR_INVALID_VALUE; }
    if (a->external) {  /* memory another file of the fake owns: it frees, or refuses */
        if (!a->on_free) return CUDA_ERROR_INVALID_VALUE;
        a->live = 0; a->on_free(a->base, a->arg); return CUDA_SUCCESS;
    }
    a->live = 0; used[a->dev] -= a->size; free(a->base); counters[1]++; counters[3]--;
    return CUDA_SUCCESS;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { ENTER(); if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT); LEAVE(do_alloc(p, n, cur_dev())); }
CUresult cuMemFree_v2(CUdeviceptr p) { ENTER(); if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT); LEAVE(do_free(p)); }
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream h) { ENTER(); NEED_CTX(); STREAM(s, h); LEAVE(do_alloc(p, n, s->dev)); }
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream h) { ENTER(); NEED_CTX(); STREAM(s, h); LEAVE(do_free(p)); }
#define DRANGE(p, n) struct alloc *a_##p = find_alloc((const char *)(uintptr_t)(p), (n), 0); if (!a_##p) LEAVE(CUDA_ERROR_INVALID_VALUE)
#define NOT_CAPTURING(s) if ((s)->capturing) LEAVE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, CUstream sh) {
    ENTER(); NEED_CTX(); STREAM(s, sh); NOT_CAPTURING(s); DRANGE(d, n); if (!h) LEAVE(CUDA_ERROR_INVALID_VALUE);
    static int defer = -1;
    if (defer < 0) defer = getenv("FAKE_CUDA_DEFER_PINNED_DMA") != NULL;
    if (defer && find_alloc((const char *)h, n, 1)) {
        if (npending == (int)(sizeof pending / sizeof pending[0])) flush_pending();
        pending[npending].dst = (void *)(uintptr_t)d; pending[npending].src = h; pending[npending].n = n; npending++;
        LEAVE(CUDA_SUCCESS);
    }
    memcpy((void *)(uintptr_t)d, h, n); LEAVE(CUDA_SUCCESS);
}
CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, CUstream sh) {
    ENTER(); NEED_CTX(); STREAM(s, sh); NOT_CAPTURING(s); DRANGE(d, n); if (!h) LEAVE(CUDA_ERROR_INVALID_VALUE);
    memcpy(h, (void *)(uintptr_t)d, n); LEAVE(CUDA_SUCCESS);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n, CUstream sh) {
    ENTER(); NEED_CTX(); STREAM(s, sh); NOT_CAPTURING(s); DRANGE(d, n); DRANGE(src, n);
    memmove((void *)(uintptr_t)d, (void *)(uintptr_t)src, n); LEAVE(CUDA_SUCCESS);
}
CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream sh) {
    ENTER(); STREAM(s, sh); NOT_CAPTURING(s); DRANGE(d, n); DRANGE(src, n);
    if (!ctx_ok(dc) || !ctx_ok(sc)) LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    if (a_d->dev != ((struct ctx *)dc)->dev || a_src->dev != ((struct ctx *)sc)->dev) LEAVE(CUDA_ERROR_INVALID_VALUE);
    memmove((void *)(uintptr_t)d, (void *)(uintptr_t)src, n); LEAVE(CUDA_SUCCESS);
}
/* Synchronous across both contexts' work: every stream of the fake already is. */
CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n) {
    ENTER(); DRANGE(d, n); DRANGE(src, n);
    if (!ctx_ok(dc) || !ctx_ok(sc)) LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    if (a_d->dev != ((struct ctx *)dc)->dev || a_src->dev != ((struct ctx *)sc)->dev) LEAVE(CUDA_ERROR_INVALID_VALUE);
    memmove((void *)(uintptr_t)d, (void *)(uintptr_t)src, n); LEAVE(CUDA_SUCCESS);
}
static void do_memset(CUdeviceptr d, unsigned v, size_t elem, size_t count) {
    for (size_t i = 0; i < count; i++) {
        if (elem == 1) ((unsigned char *)(uintptr_t)d)[i] = (unsigned char)v;
        else if (elem == 2) ((unsigned short *)(uintptr_t)d)[i] = (unsigned short)v;
        else ((unsigned *)(uintptr_t)d)[i] = v;
    }
}
static CUresult memset_any(CUdeviceptr d, unsigned v, size_t elem, size_t count, CUstream sh) {
    CUresult err = CUDA_SUCCESS; struct stream *s = get_stream(sh, &err); if (!s) return err;
    if (!find_alloc((const char *)(uintptr_t)d, elem * count, 0)) return CUDA_ERROR_INVALID_VALUE;
    if (s->capturing) {
        struct graph *g = s->g; if (g->n == 256) return CUDA_ERROR_OUT_OF_MEMORY;
        struct node *nd = &g->nodes[g->n++]; memset(nd, 0, sizeof *nd);
        nd->type = NODE_MEMSET; nd->dst = d; nd->value = v; nd->elem = elem; nd->count = count;
        return CUDA_SUCCESS;
    }
    do_memset(d, v, elem, count); return CUDA_SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { ENTER(); NEED_CTX(); LEAVE(memset_any(d, v, 1, n, s)); }
CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) { ENTER(); NEED_CTX(); LEAVE(memset_any(d, v, 2, n, s)); }
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) { ENTER(); NEED_CTX(); LEAVE(memset_any(d, v, 4, n, s)); }
CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int flags) {
    ENTER(); (void)flags; if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT); if (!n) LEAVE(CUDA_ERROR_INVALID_VALUE);
    *pp = new_alloc(n, -1, 1); counters[4]++; LEAVE(*pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
}
CUresult cuMemFreeHost(void *p) {
    ENTER(); struct alloc *a = find_base(p, 1); if (!a) LEAVE(CUDA_ERROR_INVALID_VALUE);
    a->live = 0; free(a->base); counters[5]++; LEAVE(CUDA_SUCCESS);
}
static void *registered[64];
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) {
    ENTER(); (void)flags; (void)n; if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT);
    for (int i = 0; i < 64; i++) if (registered[i] == p) LEAVE(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    for (int i = 0; i < 64; i++) if (!registered[i]) { registered[i] = p; LEAVE(CUDA_SUCCESS); }
    LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
}
CUresult cuMemHostUnregister(void *p) {
    ENTER(); for (int i = 0; i < 64; i++) if (registered[i] == p) { registered[i] = NULL; LEAVE(CUDA_SUCCESS); }
    LEAVE(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}
int fake_cuda_registered(void) { int n = 0; for (int i = 0; i < 64; i++) n += registered[i] != NULL; return n; }
CUresult cuMemHostGetFlags(unsigned int *flags, void *p) {
    ENTER(); struct alloc *a = find_alloc((const char *)p, 0, 1); if (!a) LEAVE(CUDA_ERROR_INVALID_VALUE);
    *flags = 0; LEAVE(CUDA_SUCCESS);
}
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr p) {
    ENTER();
    if (attr == CU_POINTER_ATTRIBUTE_MEMORY_TYPE && find_alloc((const char *)(uintptr_t)p, 0, 1)) {  /* cuMemHostAlloc'd */
        *(unsigned *)data = CU_MEMORYTYPE_HOST; LEAVE(CUDA_SUCCESS);
    }
    struct alloc *a = find_alloc((const char *)(uintptr_t)p, 0, 0); if (!a) LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (attr == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) { *(int *)data = a->dev; LEAVE(CUDA_SUCCESS); }
    if (attr == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) { *(unsigned *)data = CU_MEMORYTYPE_DEVICE; LEAVE(CUDA_SUCCESS); }
    LEAVE(CUDA_ERROR_INVALID_VALUE);
}
static int pools[MAX_DEV];
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *p, CUdevice d) { ENTER(); DEV_OK(d); *p = (CUmemoryPool)&pools[d]; LEAVE(CUDA_SUCCESS); }
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *v) {
    ENTER(); int d = (int)((int *)pool - pools); if (d < 0 || d >= ndev()) LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT || attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) { *(cuuint64_t *)v = used[d]; LEAVE(CUDA_SUCCESS); }
    LEAVE(CUDA_ERROR_INVALID_VALUE);
}
CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count) {
    ENTER(); int d = (int)((int *)pool - pools); if (d < 0 || d >= ndev() || (count && !map)) LEAVE(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < count; i++)
        if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || map[i].location.id < 0 || map[i].location.id >= ndev())
            LEAVE(CUDA_ERROR_INVALID_VALUE);
    LEAVE(CUDA_SUCCESS);
}

/* ---- modules and functions ---- */
/* How many bytes an ELF64 image spans, from its header (the driver API passes no length): the end of its section
 * and program header tables, capped.  Scanning a fixed 64 KiB read past the end of smaller CUBINs, and a spawned
 * test child died with SIGSEGV in this memcmp whenever the image happened to end next to an unmapped page. */
static size_t elf_extent(const char *img, size_t cap) {
    unsigned long long shoff, phoff; unsigned short shentsize, shnum, phentsize, phnum;
    memcpy(&phoff, img + 0x20, 8); memcpy(&shoff, img + 0x28, 8);
    memcpy(&phentsize, img + 0x36, 2); memcpy(&phnum, img + 0x38, 2);
    memcpy(&shentsize, img + 0x3A, 2); memcpy(&shnum, img + 0x3C, 2);
    unsigned long long end = 64, sh = shoff + (unsigned long long)shentsize * shnum;
    unsigned long long ph = phoff + (unsigned long long)phentsize * phnum;
    if (sh > end) end = sh;
    if (ph > end) end = ph;
    return end < cap ? (size_t)end : cap;
}
CUresult cuModuleLoadData(CUmodule *pm, const void *image) {
    ENTER(); if (!current) LEAVE(CUDA_ERROR_INVALID_CONTEXT); if (!image) LEAVE(CUDA_ERROR_INVALID_VALUE);
    const char *img = image; size_t len;
    int elf = 1;
    if (memcmp(img, "\x7f" "ELF", 4) == 0) len = elf_extent(img, 1 << 16);  /* CUBIN: its names, in at most 64 KiB */
    else if (memcmp(img, "\x50\xed\x55\xba", 4) == 0) len = 16 + *(const unsigned long long *)(img + 8);  /* fatbin */
    else { elf = 0; len = strnlen(img, 1 << 24); if (!strstr(img, ".entry")) LEAVE(CUDA_ERROR_INVALID_IMAGE); }
    struct module *m = calloc(1, sizeof *m); m->magic = MAGIC_MODULE; m->dev = cur_dev();
    for (size_t k = 0; k < sizeof KERNELS / sizeof *KERNELS; k++) {
        const char *name = KERNELS[k].name; size_t nl = strlen(name);
        int taken = 0;
        for (int j = 0; j < m->nfuncs; j++) if (strcmp(m->funcs[j].name, name) == 0) taken = 1;
        if (taken) continue;
        const char *marked = NULL;
        if (KERNELS[k].marker) {
            size_t ml = strlen(KERNELS[k].marker);
            for (size_t i = 0; !marked && i + ml <= len; i++) if (memcmp(img + i, KERNELS[k].marker, ml) == 0) marked = img + i + ml;
            if (!marked) continue;
        }
        for (size_t i = 1; i + nl < len; i++) {
            if (memcmp(img + i, name, nl) != 0) continue;
            char before = img[i - 1], after = img[i + nl];
            int ok = elf ? (before == '\0' && after == '\0')
                         : ((before == ' ' || before == '\t') && (after == '(' || after == ' ' || after == '\n'));
            if (!ok) continue;
            struct func *f = &m->funcs[m->nfuncs++];
            f->magic = MAGIC_FUNC; f->name = name; f->dev = m->dev; f->run = KERNELS[k].run; f->nparams = KERNELS[k].n;
            f->ptrmask = KERNELS[k].ptrmask;
            memcpy(f->off, KERNELS[k].off, sizeof f->off); memcpy(f->size, KERNELS[k].size, sizeof f->size);
            if (marked) {  /* the values after a marker: "SCALE BIAS" as the -D text gave them (2.5f 3) */
                char *end; f->consts[0] = strtod(marked, &end);
                while (*end && *end != ' ') end++;
                f->consts[1] = strtod(end, NULL);
            }
            break;
        }
    }
    *pm = (CUmodule)m; LEAVE(CUDA_SUCCESS);
}
CUresult cuModuleUnload(CUmodule h) { ENTER(); struct module *m = (struct module *)h; if (!m || m->magic != MAGIC_MODULE) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    m->magic = 0xdead; for (int i = 0; i < m->nfuncs; i++) m->funcs[i].magic = 0xdead; LEAVE(CUDA_SUCCESS); }
CUresult cuModuleGetFunction(CUfunction *pf, CUmodule h, const char *name) {
    ENTER(); struct module *m = (struct module *)h; if (!m || m->magic != MAGIC_MODULE) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    for (int i = 0; i < m->nfuncs; i++) if (strcmp(m->funcs[i].name, name) == 0) { *pf = (CUfunction)&m->funcs[i]; LEAVE(CUDA_SUCCESS); }
    LEAVE(CUDA_ERROR_NOT_FOUND);
}
static struct func *get_func(CUfunction h) { struct func *f = (struct func *)h; return (f && f->magic == MAGIC_FUNC) ? f : NULL; }
CUresult cuFuncGetParamInfo(CUfunction h, size_t i, size_t *off, size_t *size) {
    ENTER(); struct func *f = get_func(h); if (!f) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    if (i >= (size_t)f->nparams) LEAVE(CUDA_ERROR_INVALID_VALUE);
    *off = f->off[i]; if (size) *size = f->size[i]; LEAVE(CUDA_SUCCESS);
}
CUresult cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction h) {
    ENTER(); if (!get_func(h)) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    struct func *f = get_func(h);
    switch (a) { case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 16; break; case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = (f->attr_set & 1) ? f->max_dyn : 49152; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *v = (f->attr_set & 2) ? f->carveout : -1; break; case CU_FUNC_ATTRIBUTE_PTX_VERSION: case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
    default: *v = 0; }
    LEAVE(CUDA_SUCCESS);
}
/* The settable attributes are checked as the driver checks them (an H200's 227 KiB opt-in limit, a 0-100 % carveout
   or -1) and kept, so cuFuncGetAttribute reads them back. */
CUresult cuFuncSetAttribute(CUfunction h, CUfunction_attribute a, int v) {
    ENTER(); struct func *f = get_func(h); if (!f) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        if (v < 0 || v > 232448) LEAVE(CUDA_ERROR_INVALID_VALUE);
        f->max_dyn = v; f->attr_set |= 1;
    } else if (a == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) {
        if (v < -1 || v > 100) LEAVE(CUDA_ERROR_INVALID_VALUE);
        f->carveout = v; f->attr_set |= 2;
    }
    LEAVE(CUDA_SUCCESS);
}
CUresult cuFuncSetCacheConfig(CUfunction h, CUfunc_cache c) {
    ENTER(); struct func *f = get_func(h); if (!f) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    if ((unsigned)c > CU_FUNC_CACHE_PREFER_EQUAL) LEAVE(CUDA_ERROR_INVALID_VALUE);
    f->cache = (int)c; LEAVE(CUDA_SUCCESS);
}
/* The cache preference cuFuncSetCacheConfig kept for `h`, or -1 for a bad handle (tests read what reached the driver). */
int fake_cuda_func_cache_config(CUfunction h) {
    pthread_mutex_lock(&lock); struct func *f = get_func(h); int c = f ? f->cache : -1; pthread_mutex_unlock(&lock); return c;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction h, int block, size_t smem) {
    ENTER(); (void)smem; if (!get_func(h)) LEAVE(CUDA_ERROR_INVALID_HANDLE); if (block <= 0 || block > 1024) LEAVE(CUDA_ERROR_INVALID_VALUE);
    *n = 2048 / block > 32 ? 32 : 2048 / block; LEAVE(CUDA_SUCCESS);
}
static void run_kernel(struct func *f, void **params, size_t nthreads) { f->run(f, params, nthreads); }
CUresult cuLaunchKernel(CUfunction h, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, CUstream sh, void **params, void **extra) {
    ENTER(); NEED_CTX(); struct func *f = get_func(h); if (!f) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    STREAM(s, sh); if (s->dev != f->dev) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    if (extra && params) LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (!gx || !gy || !gz || !bx || !by || !bz || gy > 65535 || gz > 65535 || bx > 1024 || by > 1024 || bz > 64
        || (unsigned long long)bx * by * bz > 1024 || smem > 232448) LEAVE(CUDA_ERROR_INVALID_VALUE);
    if (f->nparams && !params) LEAVE(CUDA_ERROR_INVALID_VALUE);
    size_t nthreads = (size_t)gx * gy * gz * bx * by * bz;
    for (int i = 0; i < f->nparams; i++)  /* a bad pointer faults asynchronously, as on a GPU: sticky 700 */
        if ((f->ptrmask >> i & 1) && !s->capturing && !find_alloc(*(const char **)params[i], 1, 0)) { sticky = CUDA_ERROR_ILLEGAL_ADDRESS; LEAVE(CUDA_SUCCESS); }
    if (s->capturing) {
        struct graph *g = s->g; if (g->n == 256) LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
        struct node *nd = &g->nodes[g->n++]; memset(nd, 0, sizeof *nd);
        nd->type = NODE_KERNEL; nd->f = f; nd->nthreads = nthreads;
        for (int i = 0; i < f->nparams; i++) { memcpy(nd->data + f->off[i], params[i], f->size[i]); nd->ptrs[i] = nd->data + f->off[i]; }
        LEAVE(CUDA_SUCCESS);
    }
    run_kernel(f, params, nthreads);
    LEAVE(CUDA_SUCCESS);
}

/* ---- graphs ---- */
CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
    ENTER(); (void)mode; STREAM(s, h); if (s >= legacy_streams && s < legacy_streams + MAX_DEV) LEAVE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    if (s->capturing) LEAVE(CUDA_ERROR_ILLEGAL_STATE);
    s->g = calloc(1, sizeof *s->g); s->g->magic = MAGIC_GRAPH; s->g->dev = s->dev; s->capturing = 1; LEAVE(CUDA_SUCCESS);
}
CUresult cuStreamEndCapture(CUstream h, CUgraph *pg) {
    ENTER(); STREAM(s, h); if (!s->capturing) LEAVE(CUDA_ERROR_ILLEGAL_STATE);
    s->capturing = 0; *pg = (CUgraph)s->g; s->g = NULL; LEAVE(CUDA_SUCCESS);
}
CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st) { ENTER(); STREAM(s, h); *st = s->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE; LEAVE(CUDA_SUCCESS); }
static struct graph *get_graph(CUgraph h) { struct graph *g = (struct graph *)h; return (g && g->magic == MAGIC_GRAPH) ? g : NULL; }
CUresult cuGraphGetNodes(CUgraph h, CUgraphNode *nodes, size_t *n) {
    ENTER(); struct graph *g = get_graph(h); if (!g) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    if (nodes) for (int i = 0; i < g->n && (size_t)i < *n; i++) nodes[i] = (CUgraphNode)&g->nodes[i];
    *n = g->n; LEAVE(CUDA_SUCCESS);
}
static void fix_ptrs(struct graph *g) { for (int i = 0; i < g->n; i++) for (int k = 0; k < 16; k++) if (g->nodes[i].f && k < g->nodes[i].f->nparams) g->nodes[i].ptrs[k] = g->nodes[i].data + g->nodes[i].f->off[k]; }
CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph h, unsigned long long flags) {
    ENTER(); (void)flags; struct graph *g = get_graph(h); if (!g) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    struct exec *e = calloc(1, sizeof *e); e->magic = MAGIC_EXEC; e->g = *g; fix_ptrs(&e->g); fake_uo_copy(g, e); *pe = (CUgraphExec)e; LEAVE(CUDA_SUCCESS);
}
static struct exec *get_exec(CUgraphExec h) { struct exec *e = (struct exec *)h; return (e && e->magic == MAGIC_EXEC) ? e : NULL; }
CUresult cuGraphLaunch(CUgraphExec h, CUstream sh) {
    ENTER(); NEED_CTX(); struct exec *e = get_exec(h); if (!e) LEAVE(CUDA_ERROR_INVALID_HANDLE); STREAM(s, sh); NOT_CAPTURING(s);
    if (s->dev != e->g.dev) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    for (int i = 0; i < e->g.n; i++) {
        struct node *nd = &e->g.nodes[i];
        if (nd->type == NODE_KERNEL) run_kernel(nd->f, nd->ptrs, nd->nthreads); else do_memset(nd->dst, nd->value, nd->elem, nd->count);
    }
    LEAVE(CUDA_SUCCESS);
}
CUresult cuGraphExecUpdate_v2(CUgraphExec h, CUgraph gh, CUgraphExecUpdateResultInfo *info) {
    ENTER(); struct exec *e = get_exec(h); struct graph *g = get_graph(gh); if (!e || !g) LEAVE(CUDA_ERROR_INVALID_HANDLE);
    memset(info, 0, sizeof *info);
    int same = e->g.n == g->n;
    for (int i = 0; same && i < g->n; i++) same = e->g.nodes[i].type == g->nodes[i].type && e->g.nodes[i].f == g->nodes[i].f;
    if (!same) { info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED; LEAVE(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE); }
    e->g = *g; fix_ptrs(&e->g); info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS; LEAVE(CUDA_SUCCESS);
}
CUresult cuGraphDestroy(CUgraph h) { ENTER(); struct graph *g = get_graph(h); if (!g) LEAVE(CUDA_ERROR_INVALID_HANDLE); g->magic = 0xdead; fake_uo_drop(g); LEAVE(CUDA_SUCCESS); }
CUresult cuGraphExecDestroy(CUgraphExec h) { ENTER(); struct exec *e = get_exec(h); if (!e) LEAVE(CUDA_ERROR_INVALID_HANDLE); e->magic = 0xdead; fake_uo_drop(e); LEAVE(CUDA_SUCCESS); }

/* NVRTC dlopens libcuda.so.1 and asks for private tables: say there are none. */
CUresult cuGetExportTable(const void **table, const CUuuid *id) { (void)id; if (table) *table = NULL; return CUDA_ERROR_NOT_SUPPORTED; }

/* ---- hooks for the other files of the fake (fake_cuda.h) ---- */
#define MAX_EXTRA_TABLES 16
static struct { const struct fake_cuda_symbol *table; size_t n; } extra_tables[MAX_EXTRA_TABLES];
static int nextra_tables = 0;
void fake_cuda_add_symbols(const struct fake_cuda_symbol *table, size_t n) {
    if (nextra_tables < MAX_EXTRA_TABLES) { extra_tables[nextra_tables].table = table; extra_tables[nextra_tables].n = n; nextra_tables++; }
}
CUresult fake_cuda_check(void) {
    pthread_mutex_lock(&lock); if (npending) flush_pending();
    CUresult r = !initialised ? CUDA_ERROR_NOT_INITIALIZED : sticky; pthread_mutex_unlock(&lock); return r;
}
int fake_cuda_current_device(void) { return cur_dev(); }
/* The cuEventCreate flags of a live event, or -1 (tests check what ironaccel asked the driver for). */
long long fake_cuda_event_flags(CUevent h) {
    pthread_mutex_lock(&lock); struct event *e = get_event(h); long long f = e ? (long long)e->flags : -1; pthread_mutex_unlock(&lock); return f;
}
int fake_cuda_device_count(void) { return ndev(); }
int fake_cuda_stream_device(CUstream h) {
    CUresult err = CUDA_SUCCESS; pthread_mutex_lock(&lock); struct stream *s = get_stream(h, &err); int d = s ? s->dev : -1; pthread_mutex_unlock(&lock); return d;
}
int fake_cuda_find_range(CUdeviceptr p, size_t n, CUdeviceptr *base, size_t *size) {
    pthread_mutex_lock(&lock);
    struct alloc *a = find_alloc((const char *)(uintptr_t)p, n, 0);
    int d = a ? a->dev : -1;
    if (a && base) *base = (CUdeviceptr)(uintptr_t)a->base;
    if (a && size) *size = a->size;
    pthread_mutex_unlock(&lock); return d;
}
void fake_cuda_add_range(void *base, size_t size, int dev, fake_cuda_free_fn on_free, void *arg) {
    pthread_mutex_lock(&lock);
    if (nallocs == capallocs) { capallocs = capallocs ? capallocs * 2 : 256; allocs = realloc(allocs, capallocs * sizeof *allocs); }
    allocs[nallocs++] = (struct alloc){base, size, dev, 1, 0, on_free, arg, 1};
    pthread_mutex_unlock(&lock);
}
int fake_cuda_remove_range(void *base) {
    pthread_mutex_lock(&lock);
    struct alloc *a = find_base(base, 0); int ok = a && a->external;
    if (ok) a->live = 0;
    pthread_mutex_unlock(&lock); return ok ? 0 : -1;
}

/* ---- symbol lookup ---- */
#define SYM(n) {#n, (void *)n}
static const struct { const char *name; void *fn; } SYMS[] = {
    SYM(cuInit), SYM(cuDriverGetVersion), SYM(cuGetErrorName), SYM(cuGetErrorString),
    SYM(cuDeviceGetCount), SYM(cuDeviceGet), SYM(cuDeviceGetName), {"cuDeviceGetUuid", (void *)cuDeviceGetUuid_v2},
    SYM(cuDeviceGetPCIBusId), {"cuDeviceTotalMem", (void *)cuDeviceTotalMem_v2}, SYM(cuDeviceGetAttribute),
    SYM(cuDevicePrimaryCtxRetain), {"cuDevicePrimaryCtxRelease", (void *)cuDevicePrimaryCtxRelease_v2},
    SYM(cuCtxSetCurrent), SYM(cuCtxGetCurrent), SYM(cuCtxGetDevice), SYM(cuCtxSynchronize),
    {"cuMemGetInfo", (void *)cuMemGetInfo_v2}, SYM(cuDeviceCanAccessPeer), SYM(cuCtxEnablePeerAccess), SYM(cuCtxDisablePeerAccess),
    SYM(cuCtxGetStreamPriorityRange), SYM(cuStreamCreateWithPriority), {"cuStreamDestroy", (void *)cuStreamDestroy_v2},
    {"cuStreamSynchronize", (void *)cuStreamSynchronize}, {"cuStreamQuery", (void *)cuStreamQuery},
    {"cuStreamWaitEvent", (void *)cuStreamWaitEvent}, SYM(cuEventCreate), {"cuEventDestroy", (void *)cuEventDestroy_v2},
    {"cuEventRecord", (void *)cuEventRecord}, SYM(cuEventSynchronize), SYM(cuEventQuery),
    {"cuEventElapsedTime", (void *)cuEventElapsedTime_v2},
    {"cuMemAlloc", (void *)cuMemAlloc_v2}, {"cuMemFree", (void *)cuMemFree_v2},
    {"cuMemAllocAsync", (void *)cuMemAllocAsync}, {"cuMemFreeAsync", (void *)cuMemFreeAsync},
    {"cuMemcpyHtoDAsync", (void *)cuMemcpyHtoDAsync_v2}, {"cuMemcpyDtoHAsync", (void *)cuMemcpyDtoHAsync_v2},
    {"cuMemcpyDtoDAsync", (void *)cuMemcpyDtoDAsync_v2}, {"cuMemcpyPeerAsync", (void *)cuMemcpyPeerAsync}, SYM(cuMemcpyPeer),
    {"cuMemsetD8Async", (void *)cuMemsetD8Async}, {"cuMemsetD16Async", (void *)cuMemsetD16Async},
    {"cuMemsetD32Async", (void *)cuMemsetD32Async}, SYM(cuMemHostAlloc), SYM(cuMemFreeHost),
    {"cuMemHostRegister", (void *)cuMemHostRegister_v2}, SYM(cuMemHostUnregister), SYM(cuPointerGetAttribute),
    SYM(cuMemHostGetFlags),
    SYM(cuDeviceGetDefaultMemPool), SYM(cuMemPoolGetAttribute), SYM(cuMemPoolSetAccess),
    SYM(cuModuleLoadData), SYM(cuModuleUnload), SYM(cuModuleGetFunction), SYM(cuFuncGetParamInfo),
    SYM(cuFuncGetAttribute), SYM(cuFuncSetAttribute), SYM(cuFuncSetCacheConfig), SYM(cuOccupancyMaxActiveBlocksPerMultiprocessor),
    {"cuLaunchKernel", (void *)cuLaunchKernel}, {"cuStreamBeginCapture", (void *)cuStreamBeginCapture_v2},
    {"cuStreamEndCapture", (void *)cuStreamEndCapture}, {"cuStreamIsCapturing", (void *)cuStreamIsCapturing},
    SYM(cuGraphGetNodes), {"cuGraphInstantiate", (void *)cuGraphInstantiateWithFlags},
    {"cuGraphInstantiateWithFlags", (void *)cuGraphInstantiateWithFlags}, {"cuGraphLaunch", (void *)cuGraphLaunch},
    {"cuGraphExecUpdate", (void *)cuGraphExecUpdate_v2}, SYM(cuGraphDestroy), SYM(cuGraphExecDestroy),
    {"cuGetProcAddress", (void *)cuGetProcAddress_v2},
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
    (void)flags;
    if (strcmp(symbol, "cuStreamGetCtx") == 0) {
        *pfn = version >= 12050 ? (void *)cuStreamGetCtx_v2 : (void *)cuStreamGetCtx;
        if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    for (int t = 0; t < nextra_tables; t++)  /* the other files first: they may replace a function here */
        for (size_t i = 0; i < extra_tables[t].n; i++)
            if (strcmp(extra_tables[t].table[i].name, symbol) == 0) {
                *pfn = extra_tables[t].table[i].fn; if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS; return CUDA_SUCCESS;
            }
    for (size_t i = 0; i < sizeof SYMS / sizeof *SYMS; i++)
        if (strcmp(SYMS[i].name, symbol) == 0) { *pfn = SYMS[i].fn; if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS; return CUDA_SUCCESS; }
    /* Entry points defined in the other files of tests/fakecuda: by name, newest ABI suffix first (cuda.h
       renames e.g. cuStreamGetCaptureInfo to cuStreamGetCaptureInfo_v3 where they are defined). */
    static const char *const suffixes[] = {"_v4", "_v3", "_v2", ""};
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s%s", symbol, suffixes[i]);
        void *fn = dlsym(RTLD_DEFAULT, name);
        if (fn) { *pfn = fn; if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS; return CUDA_SUCCESS; }
    }
    *pfn = NULL;
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}
