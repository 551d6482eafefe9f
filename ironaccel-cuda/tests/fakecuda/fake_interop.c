/* The fake libcuda's external memory and semaphores (cuImportExternalMemory, cuImportExternalSemaphore).
 *
 * Honest where a single host can be: an opaque fd is a memfd (what the compute kit's in-memory double exports,
 * and what fake_memory.c's exportable cuMemCreate makes), so imported memory really is the exporter's memory,
 * mapped shared.  A timeline semaphore's fd is a memfd page holding its 64-bit value (the double's fences): a
 * signal stores the value, a wait blocks until the value is reached (the fake's streams run at once, so a wait
 * for a value nobody signals gives up after FAKE_CUDA_SEMAPHORE_WAIT_MS, default 10000, with
 * CUDA_ERROR_LAUNCH_TIMEOUT).  An fd that is not a memfd (a pipe, a directory, a device) is refused, as the
 * driver refuses an fd that is not its own, and a memfd smaller than the size given is refused too.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda.h"

#define CHECKED(real, mine) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&real), __typeof__(&mine)), #mine " does not match cuda.h")
#define GUARD() do { CUresult g_ = fake_cuda_check(); if (g_) return g_; } while (0)
#define NEED_CTX() do { if (fake_cuda_current_device() < 0) return CUDA_ERROR_INVALID_CONTEXT; } while (0)
#define MAGIC_EXTMEM 0x45584d45U
#define MAGIC_EXTSEM 0x45585345U

struct extmem { unsigned magic; int fd; unsigned long long size; int dev; };
struct extsem { unsigned magic; int fd; uint64_t *word; };

static CUresult memfd_of(int fd, unsigned long long size) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) return CUDA_ERROR_INVALID_VALUE;
    if (!S_ISREG(st.st_mode)) return CUDA_ERROR_INVALID_VALUE;  /* not memory of any driver the fake knows */
    if ((unsigned long long)st.st_size < size) return CUDA_ERROR_INVALID_VALUE;  /* smaller than it claims */
    return CUDA_SUCCESS;
}

static CUresult fi_cuImportExternalMemory(CUexternalMemory *out, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *d) {
    GUARD(); NEED_CTX();
    if (!out || !d || d->type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD || !d->size) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = memfd_of(d->handle.fd, d->size);
    if (err) return err;
    struct extmem *m = calloc(1, sizeof *m);
    m->magic = MAGIC_EXTMEM; m->fd = d->handle.fd; m->size = d->size; m->dev = fake_cuda_current_device();
    *out = (CUexternalMemory)m;  /* owns the fd from here, as the driver does */
    return CUDA_SUCCESS;
}
CHECKED(cuImportExternalMemory, fi_cuImportExternalMemory);

static void unmap_buffer(void *base, void *arg) { munmap(base, (size_t)(uintptr_t)arg); }

static CUresult fi_cuExternalMemoryGetMappedBuffer(CUdeviceptr *out, CUexternalMemory h,
                                                   const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *b) {
    GUARD(); NEED_CTX();
    struct extmem *m = (struct extmem *)h;
    if (!m || m->magic != MAGIC_EXTMEM) return CUDA_ERROR_INVALID_HANDLE;
    if (!out || !b || b->flags || !b->size || b->offset + b->size > m->size || b->offset % 4096) return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, (off_t)b->offset);
    if (p == MAP_FAILED) return CUDA_ERROR_INVALID_VALUE;
    fake_cuda_add_range(p, b->size, m->dev, unmap_buffer, (void *)(uintptr_t)b->size);  /* cuMemFree unmaps it */
    *out = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
CHECKED(cuExternalMemoryGetMappedBuffer, fi_cuExternalMemoryGetMappedBuffer);

static CUresult fi_cuDestroyExternalMemory(CUexternalMemory h) {
    GUARD();
    struct extmem *m = (struct extmem *)h;
    if (!m || m->magic != MAGIC_EXTMEM) return CUDA_ERROR_INVALID_HANDLE;
    m->magic = 0; close(m->fd); free(m);  /* mapped buffers keep their pages until cuMemFree */
    return CUDA_SUCCESS;
}
CHECKED(cuDestroyExternalMemory, fi_cuDestroyExternalMemory);

static CUresult fi_cuImportExternalSemaphore(CUexternalSemaphore *out, const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *d) {
    GUARD(); NEED_CTX();
    if (!out || !d || d->type != CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD || d->flags) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = memfd_of(d->handle.fd, 8);
    if (err) return err;
    void *p = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, d->handle.fd, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_INVALID_VALUE;
    struct extsem *s = calloc(1, sizeof *s);
    s->magic = MAGIC_EXTSEM; s->fd = d->handle.fd; s->word = p;
    *out = (CUexternalSemaphore)s;
    return CUDA_SUCCESS;
}
CHECKED(cuImportExternalSemaphore, fi_cuImportExternalSemaphore);

static CUresult check_sems(const CUexternalSemaphore *sems, const void *params, unsigned n, CUstream st) {
    if (!sems || !params || !n) return CUDA_ERROR_INVALID_VALUE;
    if (fake_cuda_stream_device(st) < 0) return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned i = 0; i < n; i++) {
        struct extsem *s = (struct extsem *)sems[i];
        if (!s || s->magic != MAGIC_EXTSEM) return CUDA_ERROR_INVALID_HANDLE;
    }
    return CUDA_SUCCESS;
}

static CUresult fi_cuSignalExternalSemaphoresAsync(const CUexternalSemaphore *sems,
                                                   const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *params, unsigned n,
                                                   CUstream st) {
    GUARD(); NEED_CTX();
    CUresult err = check_sems(sems, params, n, st);
    if (err) return err;
    for (unsigned i = 0; i < n; i++)
        __atomic_store_n(((struct extsem *)sems[i])->word, params[i].params.fence.value, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}
CHECKED(cuSignalExternalSemaphoresAsync, fi_cuSignalExternalSemaphoresAsync);

static CUresult fi_cuWaitExternalSemaphoresAsync(const CUexternalSemaphore *sems,
                                                 const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *params, unsigned n,
                                                 CUstream st) {
    GUARD(); NEED_CTX();
    CUresult err = check_sems(sems, params, n, st);
    if (err) return err;
    const char *e = getenv("FAKE_CUDA_SEMAPHORE_WAIT_MS");
    long budget = e ? atol(e) : 10000;
    for (unsigned i = 0; i < n; i++) {
        const uint64_t *word = ((struct extsem *)sems[i])->word;
        while (__atomic_load_n(word, __ATOMIC_ACQUIRE) < params[i].params.fence.value) {
            if (budget-- <= 0) return CUDA_ERROR_LAUNCH_TIMEOUT;
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
    }
    return CUDA_SUCCESS;
}
CHECKED(cuWaitExternalSemaphoresAsync, fi_cuWaitExternalSemaphoresAsync);

static CUresult fi_cuDestroyExternalSemaphore(CUexternalSemaphore h) {
    GUARD();
    struct extsem *s = (struct extsem *)h;
    if (!s || s->magic != MAGIC_EXTSEM) return CUDA_ERROR_INVALID_HANDLE;
    s->magic = 0; munmap(s->word, 8); close(s->fd); free(s);
    return CUDA_SUCCESS;
}
CHECKED(cuDestroyExternalSemaphore, fi_cuDestroyExternalSemaphore);

#define SYM(name, fn) {name, (void *)fn}
static const struct fake_cuda_symbol INTEROP_SYMS[] = {
    SYM("cuImportExternalMemory", fi_cuImportExternalMemory),
    SYM("cuExternalMemoryGetMappedBuffer", fi_cuExternalMemoryGetMappedBuffer),
    SYM("cuDestroyExternalMemory", fi_cuDestroyExternalMemory),
    SYM("cuImportExternalSemaphore", fi_cuImportExternalSemaphore),
    SYM("cuSignalExternalSemaphoresAsync", fi_cuSignalExternalSemaphoresAsync),
    SYM("cuWaitExternalSemaphoresAsync", fi_cuWaitExternalSemaphoresAsync),
    SYM("cuDestroyExternalSemaphore", fi_cuDestroyExternalSemaphore),
};

__attribute__((constructor)) static void register_interop(void) {
    fake_cuda_add_symbols(INTEROP_SYMS, sizeof INTEROP_SYMS / sizeof *INTEROP_SYMS);
}
