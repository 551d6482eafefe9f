/* What fake_cuda.c offers the other files of the fake libcuda (one file per area).
 *
 * A file adds driver functions by registering a symbol table from a constructor
 * (cuGetProcAddress, the only way cuda.bindings and the compiled hot path find
 * functions, looks in the registered tables before fake_cuda.c's own, so a file
 * may also replace a function of fake_cuda.c and call the original by name).
 * Memory a file allocates itself becomes visible to fake_cuda.c's copies,
 * memsets, kernels and pointer queries through fake_cuda_add_range; a free of
 * its base (cuMemFree, cuMemFreeAsync) calls on_free, or fails with
 * CUDA_ERROR_INVALID_VALUE when on_free is NULL.  on_free runs under
 * fake_cuda.c's lock: it must not call driver functions.
 */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include <cuda.h>
#include <stddef.h>

struct fake_cuda_symbol { const char *name; void *fn; };
typedef void (*fake_cuda_free_fn)(void *base, void *arg);

void fake_cuda_add_symbols(const struct fake_cuda_symbol *table, size_t n);
/* CUDA_ERROR_NOT_INITIALIZED before cuInit, the sticky error after a faulting kernel, else CUDA_SUCCESS. */
CUresult fake_cuda_check(void);
int fake_cuda_current_device(void);  /* -1 when no context is current on this thread */
int fake_cuda_device_count(void);
int fake_cuda_stream_device(CUstream s);  /* -1 for a bad handle; the legacy stream is the current device's */
/* The device of the live allocation holding [p, p+n) (and its base and size), or -1. */
int fake_cuda_find_range(CUdeviceptr p, size_t n, CUdeviceptr *base, size_t *size);
void fake_cuda_add_range(void *base, size_t size, int dev, fake_cuda_free_fn on_free, void *arg);
int fake_cuda_remove_range(void *base);  /* 0 when a range added here was removed */
/* User objects (fake_user_objects.c): `to` (a graph or executable graph) gets references of its own to what
   `from` holds; a destroyed graph or executable graph releases what it holds. */
void fake_uo_copy(const void *from, const void *to);
void fake_uo_drop(const void *holder);
/* CUDA arrays (fake_arrays.c): where the box of `width` bytes x `height` rows x `depth` slices at byte x, row y,
   slice z of a live array lies (its first byte, row pitch and rows per slice), for cuMemcpy3D's array sides;
   CUDA_ERROR_INVALID_VALUE for a handle that is no live array, a box past its extent or not on whole elements. */
CUresult fake_cuda_array_span(CUarray a, size_t x, size_t y, size_t z, size_t width, size_t height, size_t depth,
                              char **at, size_t *pitch, size_t *rows);
/* Kernels other files run, listed with their parameter layouts in fake_cuda.c's KERNELS (fake_arrays.c: a
   texture fetch, a point-sampled 2-D texture read and a surface write). */
struct func;
void fake_kernel_tex_fetch_1d(struct func *f, void **params, size_t nthreads);
void fake_kernel_tex2d_point(struct func *f, void **params, size_t nthreads);
void fake_kernel_surf2d_write(struct func *f, void **params, size_t nthreads);

#endif
