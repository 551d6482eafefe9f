/* The driver calls the PyCUDA surface (ironaccel_cuda_compat.pycuda) makes beyond fake_cuda.c's.
 *
 * The fake has one context per device, so cuCtxCreate hands out the device's
 * (primary) context, pushed on a per-thread stack kept here; cuCtxDestroy, and
 * the cuCtxDetach that undoes no cuCtxAttach, pop it and release nothing.  cuModuleGetGlobal gives each
 * (module, name) its own 256-byte block of fake device memory (the fake
 * cannot read symbol sizes out of an image).  Managed memory is ordinary fake
 * device memory (host memory here anyway).  2-D and 3-D copies and memsets
 * walk the rows over host memory; they do not check pointer ranges.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 32
#define GLOBAL_BYTES 256

static __thread CUcontext below[MAX_DEPTH];
static __thread int depth = 0;

CUresult cuCtxPushCurrent(CUcontext ctx) {
    CUcontext cur = NULL;
    CUresult err = cuCtxGetCurrent(&cur);
    if (err) return err;
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    if (cur) {
        if (depth == MAX_DEPTH) return CUDA_ERROR_OUT_OF_MEMORY;
        below[depth++] = cur;
    }
    return cuCtxSetCurrent(ctx);
}

CUresult cuCtxPopCurrent(CUcontext *pctx) {
    CUcontext cur = NULL;
    CUresult err = cuCtxGetCurrent(&cur);
    if (err) return err;
    if (!cur) return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx) *pctx = cur;
    return cuCtxSetCurrent(depth ? below[--depth] : NULL);
}

CUresult cuCtxCreate(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev) {
    (void)params;
    if (!pctx || flags & ~(unsigned)CU_CTX_FLAGS_MASK) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = cuDevicePrimaryCtxRetain(pctx, dev);
    return err ? err : cuCtxPushCurrent(*pctx);
}

static CUresult pop_if_current(CUcontext ctx) {
    CUcontext cur = NULL;
    CUresult err = cuCtxGetCurrent(&cur);
    if (err) return err;
    return cur == ctx ? cuCtxPopCurrent(NULL) : CUDA_SUCCESS;
}

CUresult cuCtxDestroy(CUcontext ctx) { return ctx ? pop_if_current(ctx) : CUDA_ERROR_INVALID_CONTEXT; }

/* cuCtxAttach raises a usage count that cuCtxDetach lowers; a detach with no attach left ends the context (pops it,
   as cuCtxDestroy does here).  Counted per context handle: the fake has at most MAX_ATTACHED contexts. */
#define MAX_ATTACHED 64
static struct { CUcontext ctx; unsigned count; } attached[MAX_ATTACHED];

CUresult cuCtxDetach(CUcontext ctx) {
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    for (int i = 0; i < MAX_ATTACHED; i++)
        if (attached[i].ctx == ctx && attached[i].count) {
            attached[i].count--;
            return CUDA_SUCCESS;
        }
    return pop_if_current(ctx);
}

CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags) {
    if (!pctx || flags) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = cuCtxGetCurrent(pctx);
    if (err) return err;
    if (!*pctx) return CUDA_ERROR_INVALID_CONTEXT;
    int slot = -1;
    for (int i = 0; i < MAX_ATTACHED; i++) {
        if (attached[i].ctx == *pctx) { slot = i; break; }
        if (slot < 0 && !attached[i].ctx) slot = i;
    }
    if (slot < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    attached[slot].ctx = *pctx;
    attached[slot].count++;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version) {
    if (!ctx || !version) return CUDA_ERROR_INVALID_VALUE;
    *version = 13000;
    return CUDA_SUCCESS;
}

/* Shared-memory bank size: kept per device (the fake's one context per device); any of the three is accepted, as
   devices with fixed banks accept (and ignore) it. */
#define MAX_CONFIG_DEVICES 64
static CUsharedconfig shared_configs[MAX_CONFIG_DEVICES];

CUresult cuCtxGetSharedMemConfig(CUsharedconfig *config) {
    CUdevice dev = 0;
    CUresult err = cuCtxGetDevice(&dev);
    if (err) return err;
    if (!config || dev < 0 || dev >= MAX_CONFIG_DEVICES) return CUDA_ERROR_INVALID_VALUE;
    *config = shared_configs[dev];
    return CUDA_SUCCESS;
}

CUresult cuCtxSetSharedMemConfig(CUsharedconfig config) {
    CUdevice dev = 0;
    CUresult err = cuCtxGetDevice(&dev);
    if (err) return err;
    if (dev < 0 || dev >= MAX_CONFIG_DEVICES || (unsigned)config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
        return CUDA_ERROR_INVALID_VALUE;
    shared_configs[dev] = config;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *ph, unsigned int flags) { return cuStreamCreateWithPriority(ph, flags, 0); }

CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *bus_id) {
    unsigned domain = 0, bus = 0, device = 0;
    int count = 0;
    if (!dev || !bus_id || sscanf(bus_id, "%x:%x:%x", &domain, &bus, &device) != 3) return CUDA_ERROR_INVALID_VALUE;
    if (cuDeviceGetCount(&count)) return CUDA_ERROR_NOT_INITIALIZED;
    if (domain || device || bus < 0x18 || (int)(bus - 0x18) >= count) return CUDA_ERROR_INVALID_DEVICE;
    *dev = (CUdevice)(bus - 0x18);
    return CUDA_SUCCESS;
}

struct global { CUmodule module; char name[128]; CUdeviceptr ptr; };
static struct global globals[256];
static int nglobals = 0;

CUresult cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule module, const char *name) {
    if (!module || !name) return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < nglobals; i++)
        if (globals[i].module == module && strcmp(globals[i].name, name) == 0) {
            if (dptr) *dptr = globals[i].ptr;
            if (bytes) *bytes = GLOBAL_BYTES;
            return CUDA_SUCCESS;
        }
    if (nglobals == 256 || strlen(name) >= sizeof globals[0].name) return CUDA_ERROR_OUT_OF_MEMORY;
    CUdeviceptr p = 0;
    CUresult err = cuMemAlloc(&p, GLOBAL_BYTES);
    if (err) return err;
    globals[nglobals].module = module;
    strcpy(globals[nglobals].name, name);
    globals[nglobals++].ptr = p;
    if (dptr) *dptr = p;
    if (bytes) *bytes = GLOBAL_BYTES;
    return CUDA_SUCCESS;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags) {
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
    return cuMemAlloc(dptr, bytes);
}

static char *side(CUmemorytype type, const void *host, CUdeviceptr device) {
    if (type == CU_MEMORYTYPE_HOST) return (char *)host;
    if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED) return (char *)(uintptr_t)device;
    return NULL;
}

static CUresult copy_3d(const char *src, size_t spitch, size_t sheight, char *dst, size_t dpitch, size_t dheight,
                        size_t width, size_t height, size_t depth_) {
    if (!src || !dst) return CUDA_ERROR_INVALID_VALUE;
    if (width > spitch || width > dpitch || height > sheight || height > dheight) return CUDA_ERROR_INVALID_VALUE;
    for (size_t z = 0; z < depth_; z++)
        for (size_t y = 0; y < height; y++)
            memmove(dst + (z * dheight + y) * dpitch, src + (z * sheight + y) * spitch, width);
    return CUDA_SUCCESS;
}

static CUresult copy_2d(const CUDA_MEMCPY2D *c) {
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    char *src = side(c->srcMemoryType, c->srcHost, c->srcDevice);
    char *dst = side(c->dstMemoryType, c->dstHost, c->dstDevice);
    if (!src || !dst) return CUDA_ERROR_INVALID_VALUE;
    src += c->srcY * c->srcPitch + c->srcXInBytes;
    dst += c->dstY * c->dstPitch + c->dstXInBytes;
    return copy_3d(src, c->srcPitch, c->Height, dst, c->dstPitch, c->Height, c->WidthInBytes, c->Height, 1);
}

CUresult cuMemcpy2D(const CUDA_MEMCPY2D *c) { return copy_2d(c); }
CUresult cuMemcpy2DUnaligned(const CUDA_MEMCPY2D *c) { return copy_2d(c); }
CUresult cuMemcpy2DAsync(const CUDA_MEMCPY2D *c, CUstream s) { (void)s; return copy_2d(c); }

static CUresult copy_3d_desc(const CUDA_MEMCPY3D *c) {
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    char *src = side(c->srcMemoryType, c->srcHost, c->srcDevice);
    char *dst = side(c->dstMemoryType, c->dstHost, c->dstDevice);
    if (!src || !dst) return CUDA_ERROR_INVALID_VALUE;
    size_t sh = c->srcHeight ? c->srcHeight : c->Height, dh = c->dstHeight ? c->dstHeight : c->Height;
    src += (c->srcZ * sh + c->srcY) * c->srcPitch + c->srcXInBytes;
    dst += (c->dstZ * dh + c->dstY) * c->dstPitch + c->dstXInBytes;
    return copy_3d(src, c->srcPitch, sh, dst, c->dstPitch, dh, c->WidthInBytes, c->Height, c->Depth ? c->Depth : 1);
}

CUresult cuMemcpy3D(const CUDA_MEMCPY3D *c) { return copy_3d_desc(c); }
CUresult cuMemcpy3DAsync(const CUDA_MEMCPY3D *c, CUstream s) { (void)s; return copy_3d_desc(c); }

static CUresult set_2d(CUdeviceptr dst, size_t pitch, unsigned value, size_t elem, size_t width, size_t height) {
    if (!dst || width * elem > pitch) return CUDA_ERROR_INVALID_VALUE;
    for (size_t y = 0; y < height; y++) {
        char *row = (char *)(uintptr_t)dst + y * pitch;
        for (size_t x = 0; x < width; x++) memcpy(row + x * elem, &value, elem);
    }
    return CUDA_SUCCESS;
}

CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s) {
    (void)s; return set_2d(d, pitch, v, 1, w, h);
}
CUresult cuMemsetD2D16Async(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s) {
    (void)s; return set_2d(d, pitch, v, 2, w, h);
}
CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s) {
    (void)s; return set_2d(d, pitch, v, 4, w, h);
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, CUjit_option *options, void **values) {
    static const char info[] = "fake JIT: nothing to compile";
    for (unsigned i = 0; i < n; i++) {
        if (!options) return CUDA_ERROR_INVALID_VALUE;
        if (options[i] == CU_JIT_INFO_LOG_BUFFER && values && values[i]) {
            size_t room = 0;
            for (unsigned k = 0; k < n; k++)
                if (options[k] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES) room = (size_t)(uintptr_t)values[k];
            if (room > sizeof info) memcpy(values[i], info, sizeof info);
        }
    }
    return cuModuleLoadData(module, image);
}

CUresult cuModuleLoad(CUmodule *module, const char *fname) {
    FILE *f = fname ? fopen(fname, "rb") : NULL;
    if (!f) return CUDA_ERROR_FILE_NOT_FOUND;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *image = n > 0 ? calloc(1, (size_t)n + 1) : NULL;
    size_t got = image ? fread(image, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!image || got != (size_t)n) { free(image); return CUDA_ERROR_INVALID_IMAGE; }
    CUresult err = cuModuleLoadData(module, image);
    free(image);
    return err;
}
