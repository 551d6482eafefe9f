/* CUDA arrays, texture objects and surface objects for the fake libcuda (see fake_cuda.c, fake_cuda.h).
 *
 * An array is fake device memory (cuMemAlloc, so it counts in cuMemGetInfo and the leak counters) holding its
 * texels row after row, slice after slice, with no padding; fake_memory.c's cuMemcpy3DAsync reaches it through
 * fake_cuda_array_span.  Descriptors are checked as cuda.h documents them: CUDA_ERROR_INVALID_VALUE for an
 * unknown format or flag, 3 channels, a zero width, a depth without a height that is not layered, a cubemap that
 * is not square with 6 faces (a multiple of 6 layered), texture gather off a 2-D array, and an extent past the
 * limits of an sm_90 GPU; the texture alignment (512 bytes) and pitch alignment (32) of linear and pitched
 * resources; surfaces over arrays made without CUDA_ARRAY3D_SURFACE_LDST.  A destroyed array is
 * CUDA_ERROR_INVALID_HANDLE to cuArrayDestroy and cuArray3DGetDescriptor and CUDA_ERROR_INVALID_VALUE to copies
 * and object creation; handles of texture and surface objects are small integers never reused, so a destroyed
 * one is refused (CUDA_ERROR_INVALID_VALUE, the code those calls document).
 *
 * Three kernels read and write through the objects, so that a handle passed as a kernel argument is checked end
 * to end (fake_cuda.c lists them in KERNELS): tex_fetch_1d (tex1Dfetch<float> of a linear float texture),
 * tex2d_point (tex2D<float> at texel centres of a float array or pitched texture) and surf2d_write
 * (surf2Dwrite<float>(x + 1000 y) into a float array).  No filtering, addressing or normalized coordinates:
 * those need a GPU.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define MAGIC_ARRAY 0x41525259U
#define TEXTURE_ALIGNMENT 512
#define TEXTURE_PITCH_ALIGNMENT 32

static pthread_mutex_t arrlock = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&arrlock)
#define UNLOCK() pthread_mutex_unlock(&arrlock)
#define GUARD() do { CUresult g_ = fake_cuda_check(); if (g_) return g_; } while (0)
#define NEED_CTX() do { if (fake_cuda_current_device() < 0) return CUDA_ERROR_INVALID_CONTEXT; } while (0)

struct farray {
    unsigned magic;
    int dev;
    CUDA_ARRAY3D_DESCRIPTOR desc;
    CUdeviceptr mem;
    size_t row_bytes, rows, slices, elem;  /* elem: bytes of one channel value */
};

static size_t format_size(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;  /* the video and block-compressed formats: not faked */
    }
}

static struct farray *live_array(CUarray h) {
    struct farray *a = (struct farray *)h;
    return a && a->magic == MAGIC_ARRAY ? a : NULL;
}

/* ---- arrays ---- */
static CUresult check_descriptor(const CUDA_ARRAY3D_DESCRIPTOR *d) {
    const unsigned known = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP
                           | CUDA_ARRAY3D_TEXTURE_GATHER;
    if (!format_size(d->Format) || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4)) return CUDA_ERROR_INVALID_VALUE;
    if (d->Flags & ~known) return CUDA_ERROR_INVALID_VALUE;
    int layered = d->Flags & CUDA_ARRAY3D_LAYERED, cube = d->Flags & CUDA_ARRAY3D_CUBEMAP;
    int surface = d->Flags & CUDA_ARRAY3D_SURFACE_LDST;
    if (!d->Width) return CUDA_ERROR_INVALID_VALUE;
    if (!d->Height && d->Depth && !layered) return CUDA_ERROR_INVALID_VALUE;  /* a depth needs a height */
    if (layered && !d->Depth) return CUDA_ERROR_INVALID_VALUE;
    if (cube && (d->Width != d->Height || (layered ? d->Depth % 6 : d->Depth != 6))) return CUDA_ERROR_INVALID_VALUE;
    if ((d->Flags & CUDA_ARRAY3D_TEXTURE_GATHER) && (!d->Height || d->Depth || layered || cube)) return CUDA_ERROR_INVALID_VALUE;
    /* an sm_90 GPU's limits (MAXIMUM_TEXTURE* / MAXIMUM_SURFACE* attributes) */
    size_t w = d->Width, h = d->Height, z = d->Depth;
    if (cube) { if (w > 32768 || (layered && z > 6 * 2046)) return CUDA_ERROR_INVALID_VALUE; }
    else if (layered) { if (w > 32768 || h > 32768 || z > 2048) return CUDA_ERROR_INVALID_VALUE; }
    else if (!h) { if (w > (surface ? 32768u : 131072u)) return CUDA_ERROR_INVALID_VALUE; }
    else if (!z) { if (w > 131072 || h > 65536) return CUDA_ERROR_INVALID_VALUE; }
    else if (w > 16384 || h > 16384 || z > 16384) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuArray3DCreate(CUarray *ph, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    GUARD(); NEED_CTX();
    if (!ph || !d) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = check_descriptor(d);
    if (err) return err;
    struct farray *a = calloc(1, sizeof *a);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    a->elem = format_size(d->Format);
    a->row_bytes = d->Width * d->NumChannels * a->elem;
    a->rows = d->Height ? d->Height : 1;
    a->slices = d->Depth ? d->Depth : 1;
    err = cuMemAlloc(&a->mem, a->row_bytes * a->rows * a->slices);
    if (err) { free(a); return err; }
    a->desc = *d;
    a->dev = fake_cuda_current_device();
    LOCK(); a->magic = MAGIC_ARRAY; UNLOCK();
    *ph = (CUarray)a;
    return CUDA_SUCCESS;
}

CUresult cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR *d, CUarray h) {
    GUARD();
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    LOCK(); struct farray *a = live_array(h); if (a) *d = a->desc; UNLOCK();
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuArrayDestroy(CUarray h) {
    GUARD();
    LOCK(); struct farray *a = live_array(h); if (a) a->magic = 0xdead; UNLOCK();  /* kept: a stale handle stays refused */
    if (!a) return CUDA_ERROR_INVALID_HANDLE;
    return cuMemFree(a->mem);
}

CUresult fake_cuda_array_span(CUarray h, size_t x, size_t y, size_t z, size_t width, size_t height, size_t depth,
                              char **at, size_t *pitch, size_t *rows) {
    LOCK();
    struct farray *a = live_array(h);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (a && x % a->elem == 0 && width % a->elem == 0 && x + width <= a->row_bytes && y + height <= a->rows
        && z + depth <= a->slices) {
        *at = (char *)(uintptr_t)a->mem + (z * a->rows + y) * a->row_bytes + x;
        *pitch = a->row_bytes; *rows = a->rows; r = CUDA_SUCCESS;
    }
    UNLOCK();
    return r;
}

/* ---- texture and surface objects ---- */
struct fobject { int live, surface; CUDA_RESOURCE_DESC res; CUDA_TEXTURE_DESC tex; };
static struct fobject *objects = NULL;
static size_t nobjects = 0, capobjects = 0;  /* handle i + 1 is objects[i] */

static struct fobject *live_object(unsigned long long h, int surface) {
    return h >= 1 && h <= nobjects && objects[h - 1].live && objects[h - 1].surface == surface ? &objects[h - 1] : NULL;
}

static CUresult new_object(unsigned long long *ph, int surface, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex) {
    LOCK();
    if (nobjects == capobjects) {
        size_t cap = capobjects ? capobjects * 2 : 64;
        struct fobject *grown = realloc(objects, cap * sizeof *grown);
        if (!grown) { UNLOCK(); return CUDA_ERROR_OUT_OF_MEMORY; }
        objects = grown; capobjects = cap;
    }
    struct fobject *o = &objects[nobjects++];
    memset(o, 0, sizeof *o);
    o->live = 1; o->surface = surface; o->res = *res;
    if (tex) o->tex = *tex;
    *ph = nobjects;
    UNLOCK();
    return CUDA_SUCCESS;
}

/* The resource of a texture or surface, as cuTexObjectCreate documents its checks. */
static CUresult check_resource(const CUDA_RESOURCE_DESC *r) {
    if (r->flags) return CUDA_ERROR_INVALID_VALUE;
    switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY: {
        LOCK(); int ok = live_array(r->res.array.hArray) != NULL; UNLOCK();
        return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    case CU_RESOURCE_TYPE_LINEAR: {
        unsigned n = r->res.linear.numChannels;
        size_t size = r->res.linear.sizeInBytes;
        if (!format_size(r->res.linear.format) || (n != 1 && n != 2 && n != 4) || !size) return CUDA_ERROR_INVALID_VALUE;
        if (r->res.linear.devPtr % TEXTURE_ALIGNMENT || size / (format_size(r->res.linear.format) * n) > (1u << 28))
            return CUDA_ERROR_INVALID_VALUE;
        return fake_cuda_find_range(r->res.linear.devPtr, size, NULL, NULL) >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    case CU_RESOURCE_TYPE_PITCH2D: {
        unsigned n = r->res.pitch2D.numChannels;
        size_t w = r->res.pitch2D.width, h = r->res.pitch2D.height, pitch = r->res.pitch2D.pitchInBytes;
        if (!format_size(r->res.pitch2D.format) || (n != 1 && n != 2 && n != 4) || !w || !h) return CUDA_ERROR_INVALID_VALUE;
        size_t row = w * format_size(r->res.pitch2D.format) * n;
        if (r->res.pitch2D.devPtr % TEXTURE_ALIGNMENT || pitch % TEXTURE_PITCH_ALIGNMENT || row > pitch) return CUDA_ERROR_INVALID_VALUE;
        if (w > 131072 || h > 65000 || pitch > (1u << 21)) return CUDA_ERROR_INVALID_VALUE;
        return fake_cuda_find_range(r->res.pitch2D.devPtr, pitch * (h - 1) + row, NULL, NULL) >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;  /* mipmapped arrays: not faked */
    }
}

CUresult cuTexObjectCreate(CUtexObject *ph, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex,
                           const CUDA_RESOURCE_VIEW_DESC *view) {
    GUARD(); NEED_CTX();
    if (!ph || !res || !tex || view) return CUDA_ERROR_INVALID_VALUE;  /* resource views: not faked */
    const unsigned known = CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB
                           | CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION | CU_TRSF_SEAMLESS_CUBEMAP;
    for (int i = 0; i < 3; i++) if ((unsigned)tex->addressMode[i] > CU_TR_ADDRESS_MODE_BORDER) return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned)tex->filterMode > CU_TR_FILTER_MODE_LINEAR || (tex->flags & ~known)) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = check_resource(res);
    return err ? err : new_object(ph, 0, res, tex);
}

CUresult cuTexObjectDestroy(CUtexObject h) {
    GUARD();
    LOCK(); struct fobject *o = live_object(h, 0); if (o) o->live = 0; UNLOCK();
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *res, CUtexObject h) {
    GUARD();
    if (!res) return CUDA_ERROR_INVALID_VALUE;
    LOCK(); struct fobject *o = live_object(h, 0); if (o) *res = o->res; UNLOCK();
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *tex, CUtexObject h) {
    GUARD();
    if (!tex) return CUDA_ERROR_INVALID_VALUE;
    LOCK(); struct fobject *o = live_object(h, 0); if (o) *tex = o->tex; UNLOCK();
    if (o) memset(tex->borderColor, 0, sizeof tex->borderColor);  /* as an H200's driver (580.159) reports it */
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuSurfObjectCreate(CUsurfObject *ph, const CUDA_RESOURCE_DESC *res) {
    GUARD(); NEED_CTX();
    if (!ph || !res || res->resType != CU_RESOURCE_TYPE_ARRAY) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = check_resource(res);
    if (err) return err;
    LOCK(); struct farray *a = live_array(res->res.array.hArray); int ldst = a && (a->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST); UNLOCK();
    return ldst ? new_object(ph, 1, res, NULL) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuSurfObjectDestroy(CUsurfObject h) {
    GUARD();
    LOCK(); struct fobject *o = live_object(h, 1); if (o) o->live = 0; UNLOCK();
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *res, CUsurfObject h) {
    GUARD();
    if (!res) return CUDA_ERROR_INVALID_VALUE;
    LOCK(); struct fobject *o = live_object(h, 1); if (o) *res = o->res; UNLOCK();
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- kernels (they run under fake_cuda.c's lock: no driver calls here) ---- */
/* The rows of a live object over one-channel float texels: first byte, row pitch, width and height in texels; 0 for
   a bad handle or another format. */
static int float_plane(unsigned long long h, int surface, char **base, size_t *pitch, size_t *w, size_t *hgt) {
    struct fobject *o = live_object(h, surface);
    if (!o) return 0;
    const CUDA_RESOURCE_DESC *r = &o->res;
    if (r->resType == CU_RESOURCE_TYPE_ARRAY) {
        struct farray *a = live_array(r->res.array.hArray);
        if (!a || a->desc.Format != CU_AD_FORMAT_FLOAT || a->desc.NumChannels != 1) return 0;
        *base = (char *)(uintptr_t)a->mem; *pitch = a->row_bytes; *w = a->desc.Width; *hgt = a->rows;
    } else if (r->resType == CU_RESOURCE_TYPE_PITCH2D) {
        if (r->res.pitch2D.format != CU_AD_FORMAT_FLOAT || r->res.pitch2D.numChannels != 1) return 0;
        *base = (char *)(uintptr_t)r->res.pitch2D.devPtr; *pitch = r->res.pitch2D.pitchInBytes;
        *w = r->res.pitch2D.width; *hgt = r->res.pitch2D.height;
    } else if (r->resType == CU_RESOURCE_TYPE_LINEAR) {
        if (r->res.linear.format != CU_AD_FORMAT_FLOAT || r->res.linear.numChannels != 1) return 0;
        *base = (char *)(uintptr_t)r->res.linear.devPtr; *pitch = r->res.linear.sizeInBytes;
        *w = r->res.linear.sizeInBytes / 4; *hgt = 1;
    } else {
        return 0;
    }
    return 1;
}
#define TEXEL(base, pitch, x, y) (*(float *)((base) + (y) * (pitch) + (x) * 4))

/* tex_fetch_1d(float* out, cudaTextureObject_t tex, unsigned n): out[i] = tex1Dfetch<float>(tex, i); 0 past the
   end, as a GPU reads; NaN everywhere for a handle that is no live linear float texture (so a test sees it). */
void fake_kernel_tex_fetch_1d(struct func *f, void **p, size_t nthreads) {
    (void)f;
    float *out = *(float **)p[0]; unsigned long long t = *(unsigned long long *)p[1]; unsigned n = *(unsigned *)p[2];
    char *base = NULL; size_t pitch = 0, w = 0, h = 0;
    LOCK();
    struct fobject *o = live_object(t, 0);
    int ok = o && o->res.resType == CU_RESOURCE_TYPE_LINEAR && float_plane(t, 0, &base, &pitch, &w, &h);
    for (size_t i = 0; i < nthreads && i < n; i++) out[i] = !ok ? NAN : i < w ? TEXEL(base, pitch, i, 0) : 0.0f;
    UNLOCK();
}

/* tex2d_point(float* out, cudaTextureObject_t tex, unsigned w, unsigned h): out[y*w + x] = tex2D<float>(tex,
   x + 0.5f, y + 0.5f) with point filtering and unnormalized coordinates: the texel itself, clamped to the edge;
   NaN for a handle that is no such texture of an array or pitched memory. */
void fake_kernel_tex2d_point(struct func *f, void **p, size_t nthreads) {
    (void)f;
    float *out = *(float **)p[0]; unsigned long long t = *(unsigned long long *)p[1];
    unsigned w = *(unsigned *)p[2], h = *(unsigned *)p[3];
    char *base = NULL; size_t pitch = 0, tw = 0, th = 0;
    LOCK();
    struct fobject *o = live_object(t, 0);
    int ok = o && o->res.resType != CU_RESOURCE_TYPE_LINEAR && o->tex.filterMode == CU_TR_FILTER_MODE_POINT
             && !(o->tex.flags & CU_TRSF_NORMALIZED_COORDINATES) && float_plane(t, 0, &base, &pitch, &tw, &th);
    for (size_t i = 0; i < nthreads && i < (size_t)w * h; i++) {
        size_t x = i % w, y = i / w;
        out[i] = ok ? TEXEL(base, pitch, x < tw ? x : tw - 1, y < th ? y : th - 1) : NAN;
    }
    UNLOCK();
}

/* surf2d_write(cudaSurfaceObject_t surf, unsigned w, unsigned h): surf2Dwrite<float>(x + 1000.0f * y, surf,
   x * 4, y) for every texel inside the array (a GPU would trap outside). */
void fake_kernel_surf2d_write(struct func *f, void **p, size_t nthreads) {
    (void)f;
    unsigned long long s = *(unsigned long long *)p[0]; unsigned w = *(unsigned *)p[1], h = *(unsigned *)p[2];
    char *base = NULL; size_t pitch = 0, tw = 0, th = 0;
    LOCK();
    if (float_plane(s, 1, &base, &pitch, &tw, &th))
        for (size_t i = 0; i < nthreads && i < (size_t)w * h; i++) {
            size_t x = i % w, y = i / w;
            if (x < tw && y < th) TEXEL(base, pitch, x, y) = (float)x + 1000.0f * (float)y;
        }
    UNLOCK();
}
