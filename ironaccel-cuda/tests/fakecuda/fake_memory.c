/* The fake libcuda's memory beyond cuMemAlloc: created pools (and their IPC over
 * memfd), release thresholds, legacy IPC handles, IPC events, virtual memory,
 * managed memory, mapped and flagged pinned memory, pitched memory and 2-D / 3-D
 * copies.  Everything is host memory, as in fake_cuda.c; see fake_cuda.h.
 *
 * Honest where a single host can be: a pool exported as a file descriptor is a
 * memfd that another process maps, so its buffers really are shared between
 * processes; reservations are PROT_NONE address space that cuMemMap makes
 * readable; a release threshold decides which freed blocks of a pool stay
 * reserved (the fake releases at the free, the driver at the next synchronize).
 * Not honest, and so refused: legacy IPC handles open only in the exporting
 * process's address space (the fake's cuMemAlloc memory is private), so
 * cuIpcOpenMemHandle fails with CUDA_ERROR_MAP_FAILED in another process.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_cuda.h"

#define CHECKED(real, mine) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&real), __typeof__(&mine)), #mine " does not match cuda.h")

static pthread_mutex_t memlock = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&memlock)
#define UNLOCK() pthread_mutex_unlock(&memlock)
#define GUARD() do { CUresult g_ = fake_cuda_check(); if (g_) return g_; } while (0)
#define NEED_CTX() do { if (fake_cuda_current_device() < 0) return CUDA_ERROR_INVALID_CONTEXT; } while (0)
#define GRANULARITY (2ull << 20)
#define MAX_DEV 8

static int is_default_pool(CUmemoryPool p, int *dev) {
    for (int d = 0; d < fake_cuda_device_count(); d++) {
        CUmemoryPool q = NULL;
        if (cuDeviceGetDefaultMemPool(&q, d) == CUDA_SUCCESS && q == p) { if (dev) *dev = d; return 1; }
    }
    return 0;
}

/* ---- a small address -> record map (open hashing) ---- */
struct entry { uintptr_t key; void *val; struct entry *next; };
struct map { struct entry *slot[1024]; };
static unsigned hslot(uintptr_t k) { return (unsigned)((k >> 8) ^ (k >> 20)) & 1023; }
static void map_put(struct map *m, uintptr_t k, void *v) {
    struct entry *e = malloc(sizeof *e); e->key = k; e->val = v; e->next = m->slot[hslot(k)]; m->slot[hslot(k)] = e;
}
static void *map_get(struct map *m, uintptr_t k) {
    for (struct entry *e = m->slot[hslot(k)]; e; e = e->next) if (e->key == k) return e->val;
    return NULL;
}
static void *map_take(struct map *m, uintptr_t k) {
    for (struct entry **pe = &m->slot[hslot(k)]; *pe; pe = &(*pe)->next)
        if ((*pe)->key == k) { struct entry *e = *pe; void *v = e->val; *pe = e->next; free(e); return v; }
    return NULL;
}

/* ---- device attributes this file answers ---- */
static CUresult fm_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    CUresult r = cuDeviceGetAttribute(v, a, d);
    if (r != CUDA_ERROR_INVALID_VALUE) return r;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
        *v = 1; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
        *v = getenv("FAKE_CUDA_NO_POOLS") ? 0 : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED:
        *v = getenv("FAKE_CUDA_NO_POOLS") ? 0 : 1; return CUDA_SUCCESS;
    default:
        return r;
    }
}
CHECKED(cuDeviceGetAttribute, fm_cuDeviceGetAttribute);

/* ---- the default pools: threshold, flags, and freed memory they keep ---- */
struct defpool { unsigned long long threshold, held, used_high, reserved_high; int reuse[4]; };
static struct defpool defpools[MAX_DEV];
static struct map async_allocs;  /* cuMemAllocAsync pointer -> (size_t) bytes, from the default pools */

static size_t default_used(int d) {
    CUmemoryPool p = NULL; cuuint64_t v = 0;
    cuDeviceGetDefaultMemPool(&p, d);
    cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v);
    return (size_t)v;
}
static CUresult fm_cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
    CUresult r = cuMemAllocAsync(p, n, s);
    if (r) return r;
    int d = fake_cuda_stream_device(s);
    size_t used = d >= 0 ? default_used(d) : 0;
    LOCK();
    map_put(&async_allocs, (uintptr_t)*p, (void *)(uintptr_t)n);
    if (d >= 0) {
        struct defpool *dp = &defpools[d];
        dp->held = dp->held > n ? dp->held - n : 0;
        if (used > dp->used_high) dp->used_high = used;
        if (used + dp->held > dp->reserved_high) dp->reserved_high = used + dp->held;
    }
    UNLOCK();
    return CUDA_SUCCESS;
}
CHECKED(cuMemAllocAsync, fm_cuMemAllocAsync);
static void default_freed(CUdeviceptr p, int d) {
    LOCK();
    void *v = map_take(&async_allocs, (uintptr_t)p);
    UNLOCK();
    if (!v || d < 0) return;
    LOCK();
    struct defpool *dp = &defpools[d];
    dp->held += (size_t)(uintptr_t)v;
    if (dp->held > dp->threshold) dp->held = 0;
    UNLOCK();
}
static CUresult fm_cuMemFreeAsync(CUdeviceptr p, CUstream s) {
    int d = fake_cuda_find_range(p, 0, NULL, NULL);
    CUresult r = cuMemFreeAsync(p, s);
    if (!r) default_freed(p, d);
    return r;
}
CHECKED(cuMemFreeAsync, fm_cuMemFreeAsync);
static CUresult fm_cuMemFree(CUdeviceptr p) {
    int d = fake_cuda_find_range(p, 0, NULL, NULL);
    CUresult r = cuMemFree(p);
    if (!r) default_freed(p, d);
    return r;
}
CHECKED(cuMemFree, fm_cuMemFree);

/* ---- created pools ---- */
#define MAGIC_POOL 0x504f4f4cU
#define POOL_HEADER 4096
#define POOL_ARENA (1ull << 32)  /* sparse: only touched pages cost anything */
struct block { size_t off, size; int live, reserved; struct block *next; };
struct pool {
    unsigned magic; int dev, host, ipc, imported, fd; unsigned long long key;
    char *arena; size_t arena_size, bump, max_size;
    unsigned long long threshold, used, reserved, used_high, reserved_high; int reuse[4];
    int access[MAX_DEV]; struct block *blocks; int destroyed, outstanding;
};
struct pool_header { unsigned magic; unsigned long long key; size_t arena_size; int dev; };

static struct pool *get_pool(CUmemoryPool h) {  /* a default pool's handle reads as magic 0 */
    struct pool *p = (struct pool *)h;
    return (p && p->magic == MAGIC_POOL && !p->destroyed) ? p : NULL;
}
static void pool_release_free(struct pool *p, unsigned long long keep) {  /* with memlock held */
    for (struct block *b = p->blocks; b && p->reserved > keep; b = b->next)
        if (!b->live && b->reserved) {
            madvise(p->arena + b->off, b->size, MADV_DONTNEED);
            b->reserved = 0; p->reserved -= b->size;
        }
}
static void pool_maybe_free(struct pool *p) {  /* with memlock held: a destroyed pool goes with its last block */
    if (!p->destroyed || p->outstanding) return;
    munmap(p->arena, p->arena_size);
    if (p->fd >= 0) close(p->fd);
    struct block *b = p->blocks;
    while (b) { struct block *n = b->next; free(b); b = n; }
    p->blocks = NULL; p->magic = 0;
}
struct live { struct pool *pool; struct block *block; };
static struct map pool_blocks;  /* every block a pool here handed out (or imported), by address */
static struct live *find_pool_block(CUdeviceptr ptr) { return map_get(&pool_blocks, (uintptr_t)ptr); }
static void on_pool_free(void *base, void *arg) {
    struct live *l = arg;
    LOCK();
    map_take(&pool_blocks, (uintptr_t)base);
    struct pool *p = l->pool;
    if (p->imported) {
        p->outstanding--;
        free(l->block);
    } else {
        l->block->live = 0; p->used -= l->block->size; p->outstanding--;
        if (p->reserved > p->threshold) pool_release_free(p, p->threshold);
    }
    pool_maybe_free(p);
    UNLOCK();
    free(l);
}

static CUresult fm_cuMemPoolCreate(CUmemoryPool *out, const CUmemPoolProps *props) {
    GUARD();
    if (!out || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    int host = props->location.type == CU_MEM_LOCATION_TYPE_HOST;
    if (!host && (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->location.id < 0
                  || props->location.id >= fake_cuda_device_count())) return CUDA_ERROR_INVALID_VALUE;
    if (props->handleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    int ipc = props->handleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (host && ipc) return CUDA_ERROR_INVALID_VALUE;
    struct pool *p = calloc(1, sizeof *p);
    p->magic = MAGIC_POOL; p->host = host; p->ipc = ipc; p->dev = host ? -1 : props->location.id;
    p->max_size = props->maxSize; p->reuse[1] = p->reuse[2] = p->reuse[3] = 1;
    p->arena_size = POOL_ARENA; p->bump = POOL_HEADER;
    p->fd = memfd_create("fake-cuda-pool", MFD_CLOEXEC);
    if (p->fd < 0 || ftruncate(p->fd, (off_t)p->arena_size)) { free(p); return CUDA_ERROR_OUT_OF_MEMORY; }
    p->arena = mmap(NULL, p->arena_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, p->fd, 0);
    if (p->arena == MAP_FAILED) { close(p->fd); free(p); return CUDA_ERROR_OUT_OF_MEMORY; }
    if (getrandom(&p->key, sizeof p->key, 0) != sizeof p->key) p->key = (unsigned long long)getpid() << 32 ^ (uintptr_t)p;
    struct pool_header hdr = {MAGIC_POOL, p->key, p->arena_size, p->dev};
    memcpy(p->arena, &hdr, sizeof hdr);
    if (!host) p->access[p->dev] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    *out = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}
CHECKED(cuMemPoolCreate, fm_cuMemPoolCreate);

static CUresult fm_cuMemPoolDestroy(CUmemoryPool h) {
    GUARD();
    int d;
    if (is_default_pool(h, &d)) return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct pool *p = get_pool(h);
    if (!p) { UNLOCK(); return CUDA_ERROR_INVALID_VALUE; }
    p->destroyed = 1;
    pool_maybe_free(p);
    UNLOCK();
    return CUDA_SUCCESS;
}
CHECKED(cuMemPoolDestroy, fm_cuMemPoolDestroy);

static CUresult fm_cuMemAllocFromPoolAsync(CUdeviceptr *out, size_t n, CUmemoryPool h, CUstream s) {
    GUARD(); NEED_CTX();
    if (fake_cuda_stream_device(s) < 0) return CUDA_ERROR_INVALID_HANDLE;
    if (!out || n == 0) return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct pool *p = get_pool(h);
    if (!p || p->imported) { UNLOCK(); return CUDA_ERROR_INVALID_VALUE; }
    size_t size = (n + 255) / 256 * 256;
    if (p->max_size && p->used + size > p->max_size) { UNLOCK(); return CUDA_ERROR_OUT_OF_MEMORY; }
    struct block *b = NULL;
    for (struct block *c = p->blocks; c; c = c->next)
        if (!c->live && c->size >= size && (!b || c->size < b->size)) b = c;
    if (!b) {
        if (p->bump + size > p->arena_size) { UNLOCK(); return CUDA_ERROR_OUT_OF_MEMORY; }
        b = calloc(1, sizeof *b); b->off = p->bump; b->size = size; p->bump += size;
        b->next = p->blocks; p->blocks = b;
    }
    b->live = 1; p->used += b->size; p->outstanding++;
    if (!b->reserved) { b->reserved = 1; p->reserved += b->size; }
    if (p->used > p->used_high) p->used_high = p->used;
    if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
    char *ptr = p->arena + b->off;
    memset(ptr, 0xAB, n);
    int dev = p->dev;
    for (int d = 0; dev < 0 && d < MAX_DEV; d++) if (p->access[d]) dev = d;
    struct live *l = malloc(sizeof *l); l->pool = p; l->block = b;
    map_put(&pool_blocks, (uintptr_t)ptr, l);
    UNLOCK();
    fake_cuda_add_range(ptr, n, dev, on_pool_free, l);
    *out = (CUdeviceptr)(uintptr_t)ptr;
    return CUDA_SUCCESS;
}
CHECKED(cuMemAllocFromPoolAsync, fm_cuMemAllocFromPoolAsync);

static CUresult pool_attr(CUmemoryPool h, CUmemPool_attribute attr, void *v, int set) {
    int d;
    if (is_default_pool(h, &d)) {
        struct defpool *dp = &defpools[d];
        size_t used = default_used(d);
        LOCK();
        CUresult r = CUDA_SUCCESS;
        switch (attr) {
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            if (set) { dp->threshold = *(cuuint64_t *)v; if (dp->held > dp->threshold) dp->held = 0; }
            else *(cuuint64_t *)v = dp->threshold;
            break;
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            if (set) dp->reuse[attr] = !!*(int *)v; else *(int *)v = dp->reuse[attr];
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: if (set) r = CUDA_ERROR_INVALID_VALUE; else *(cuuint64_t *)v = used; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: if (set) r = CUDA_ERROR_INVALID_VALUE; else *(cuuint64_t *)v = used + dp->held; break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            if (set) { if (*(cuuint64_t *)v) r = CUDA_ERROR_INVALID_VALUE; else dp->used_high = used; }
            else *(cuuint64_t *)v = dp->used_high > used ? dp->used_high : used;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
            if (set) { if (*(cuuint64_t *)v) r = CUDA_ERROR_INVALID_VALUE; else dp->reserved_high = used + dp->held; }
            else *(cuuint64_t *)v = dp->reserved_high > used + dp->held ? dp->reserved_high : used + dp->held;
            break;
        default: r = CUDA_ERROR_INVALID_VALUE;
        }
        UNLOCK();
        return r;
    }
    LOCK();
    struct pool *p = get_pool(h);
    CUresult r = CUDA_SUCCESS;
    if (!p) { UNLOCK(); return CUDA_ERROR_INVALID_VALUE; }
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        if (set) { p->threshold = *(cuuint64_t *)v; pool_release_free(p, p->threshold); }
        else *(cuuint64_t *)v = p->threshold;
        break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        if (set) p->reuse[attr] = !!*(int *)v; else *(int *)v = p->reuse[attr];
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: if (set) r = CUDA_ERROR_INVALID_VALUE; else *(cuuint64_t *)v = p->used; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: if (set) r = CUDA_ERROR_INVALID_VALUE; else *(cuuint64_t *)v = p->reserved; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (set) { if (*(cuuint64_t *)v) r = CUDA_ERROR_INVALID_VALUE; else p->used_high = p->used; }
        else *(cuuint64_t *)v = p->used_high;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (set) { if (*(cuuint64_t *)v) r = CUDA_ERROR_INVALID_VALUE; else p->reserved_high = p->reserved; }
        else *(cuuint64_t *)v = p->reserved_high;
        break;
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    UNLOCK();
    return r;
}
static CUresult fm_cuMemPoolGetAttribute(CUmemoryPool h, CUmemPool_attribute attr, void *v) {
    GUARD(); if (!v) return CUDA_ERROR_INVALID_VALUE; return pool_attr(h, attr, v, 0);
}
CHECKED(cuMemPoolGetAttribute, fm_cuMemPoolGetAttribute);
static CUresult fm_cuMemPoolSetAttribute(CUmemoryPool h, CUmemPool_attribute attr, void *v) {
    GUARD(); if (!v) return CUDA_ERROR_INVALID_VALUE; return pool_attr(h, attr, v, 1);
}
CHECKED(cuMemPoolSetAttribute, fm_cuMemPoolSetAttribute);

static CUresult fm_cuMemPoolTrimTo(CUmemoryPool h, size_t keep) {
    GUARD();
    int d;
    if (is_default_pool(h, &d)) {
        size_t used = default_used(d);
        LOCK(); if (used + defpools[d].held > keep) defpools[d].held = keep > used ? keep - used : 0; UNLOCK();
        return CUDA_SUCCESS;
    }
    LOCK();
    struct pool *p = get_pool(h);
    if (p) pool_release_free(p, keep);
    UNLOCK();
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CHECKED(cuMemPoolTrimTo, fm_cuMemPoolTrimTo);

static CUresult fm_cuMemPoolSetAccess(CUmemoryPool h, const CUmemAccessDesc *map, size_t count) {
    GUARD();
    if (is_default_pool(h, NULL)) return cuMemPoolSetAccess(h, map, count);
    if (count && !map) return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct pool *p = get_pool(h);
    CUresult r = p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; p && i < count && !r; i++) {
        int id = map[i].location.id;
        if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || id < 0 || id >= fake_cuda_device_count()
            || (unsigned)map[i].flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            || (id == p->dev && map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)) r = CUDA_ERROR_INVALID_VALUE;
        else p->access[id] = map[i].flags;
    }
    UNLOCK();
    return r;
}
CHECKED(cuMemPoolSetAccess, fm_cuMemPoolSetAccess);

static CUresult fm_cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool h, CUmemLocation *loc) {
    GUARD();
    if (!flags || !loc || loc->type != CU_MEM_LOCATION_TYPE_DEVICE || loc->id < 0 || loc->id >= fake_cuda_device_count())
        return CUDA_ERROR_INVALID_VALUE;
    int d;
    if (is_default_pool(h, &d)) { *flags = d == loc->id ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE; return CUDA_SUCCESS; }
    LOCK();
    struct pool *p = get_pool(h);
    if (p) *flags = (CUmemAccess_flags)p->access[loc->id];
    UNLOCK();
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CHECKED(cuMemPoolGetAccess, fm_cuMemPoolGetAccess);

/* Pool IPC: the pool's memfd is its shareable handle; export data names the pool and the block. */
struct export_data { unsigned magic; unsigned long long key; size_t off, size; };
static CUresult fm_cuMemPoolExportToShareableHandle(void *out, CUmemoryPool h, CUmemAllocationHandleType type,
                                                    unsigned long long flags) {
    GUARD();
    if (!out || flags || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct pool *p = get_pool(h);
    int fd = p && p->ipc && !p->imported ? dup(p->fd) : -1;
    UNLOCK();
    if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
    *(int *)out = fd;
    return CUDA_SUCCESS;
}
CHECKED(cuMemPoolExportToShareableHandle, fm_cuMemPoolExportToShareableHandle);

static CUresult fm_cuMemPoolImportFromShareableHandle(CUmemoryPool *out, void *handle, CUmemAllocationHandleType type,
                                                      unsigned long long flags) {
    GUARD();
    if (!out || flags || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    int fd = (int)(intptr_t)handle;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || (size_t)st.st_size < POOL_HEADER) return CUDA_ERROR_INVALID_VALUE;
    char *arena = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (arena == MAP_FAILED) return CUDA_ERROR_INVALID_VALUE;
    struct pool_header hdr; memcpy(&hdr, arena, sizeof hdr);
    if (hdr.magic != MAGIC_POOL) { munmap(arena, (size_t)st.st_size); return CUDA_ERROR_INVALID_VALUE; }
    struct pool *p = calloc(1, sizeof *p);
    p->magic = MAGIC_POOL; p->imported = 1; p->ipc = 1; p->dev = hdr.dev; p->key = hdr.key; p->fd = -1;
    p->arena = arena; p->arena_size = (size_t)st.st_size;
    if (p->dev >= 0) p->access[p->dev] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    *out = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}
CHECKED(cuMemPoolImportFromShareableHandle, fm_cuMemPoolImportFromShareableHandle);

static CUresult fm_cuMemPoolExportPointer(CUmemPoolPtrExportData *out, CUdeviceptr ptr) {
    GUARD();
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct live *l = find_pool_block(ptr);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (l && l->pool->ipc && !l->pool->imported) {
        struct export_data e = {MAGIC_POOL, l->pool->key, l->block->off, l->block->size};
        memset(out, 0, sizeof *out); memcpy(out->reserved, &e, sizeof e); r = CUDA_SUCCESS;
    }
    UNLOCK();
    return r;
}
CHECKED(cuMemPoolExportPointer, fm_cuMemPoolExportPointer);

static CUresult fm_cuMemPoolImportPointer(CUdeviceptr *out, CUmemoryPool h, CUmemPoolPtrExportData *data) {
    GUARD();
    if (!out || !data) return CUDA_ERROR_INVALID_VALUE;
    struct export_data e; memcpy(&e, data->reserved, sizeof e);
    LOCK();
    struct pool *p = get_pool(h);
    if (!p || !p->imported || e.magic != MAGIC_POOL || e.key != p->key || e.off < POOL_HEADER
        || e.off + e.size > p->arena_size) { UNLOCK(); return CUDA_ERROR_INVALID_VALUE; }
    p->outstanding++;
    struct live *l = malloc(sizeof *l); l->pool = p;
    l->block = calloc(1, sizeof *l->block); l->block->off = e.off; l->block->size = e.size; l->block->live = 1;
    char *ptr = p->arena + e.off;
    int dev = p->dev >= 0 ? p->dev : 0;
    map_put(&pool_blocks, (uintptr_t)ptr, l);
    UNLOCK();
    fake_cuda_add_range(ptr, e.size, dev, on_pool_free, l);
    *out = (CUdeviceptr)(uintptr_t)ptr;
    return CUDA_SUCCESS;
}
CHECKED(cuMemPoolImportPointer, fm_cuMemPoolImportPointer);


/* ---- managed memory ---- */
struct managed { size_t size; int dev, read_mostly, preferred, last_prefetch; unsigned accessed_by; unsigned flags; };
static struct map managed_allocs;
static void on_managed_free(void *base, void *arg) {
    (void)arg;
    LOCK(); struct managed *m = map_take(&managed_allocs, (uintptr_t)base); UNLOCK();
    free(m); free(base);
}
static struct managed *find_managed(CUdeviceptr p, size_t n, CUdeviceptr *base) {
    CUdeviceptr b = 0; size_t size = 0;
    if (fake_cuda_find_range(p, n, &b, &size) < 0) return NULL;
    LOCK(); struct managed *m = map_get(&managed_allocs, (uintptr_t)b); UNLOCK();
    if (m && base) *base = b;
    return m;
}
static CUresult fm_cuMemAllocManaged(CUdeviceptr *out, size_t n, unsigned int flags) {
    GUARD(); NEED_CTX();
    if (!out || n == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)) return CUDA_ERROR_INVALID_VALUE;
    char *mem = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(mem, 0xAB, n);
    struct managed *m = calloc(1, sizeof *m);
    m->size = n; m->dev = fake_cuda_current_device(); m->preferred = -2; m->last_prefetch = -2; m->flags = flags;
    LOCK(); map_put(&managed_allocs, (uintptr_t)mem, m); UNLOCK();
    fake_cuda_add_range(mem, n, m->dev, on_managed_free, NULL);
    *out = (CUdeviceptr)(uintptr_t)mem;
    return CUDA_SUCCESS;
}
CHECKED(cuMemAllocManaged, fm_cuMemAllocManaged);

static int location_id(CUmemLocation loc, int *id) {
    if (loc.type == CU_MEM_LOCATION_TYPE_HOST) { *id = -1; return 1; }
    if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE && loc.id >= 0 && loc.id < fake_cuda_device_count()) { *id = loc.id; return 1; }
    return 0;
}
static CUresult fm_cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream s) {
    GUARD(); NEED_CTX();
    int id;
    if (flags || !location_id(loc, &id)) return CUDA_ERROR_INVALID_VALUE;
    if (fake_cuda_stream_device(s) < 0) return CUDA_ERROR_INVALID_HANDLE;
    struct managed *m = find_managed(p, n, NULL);
    if (!m) return CUDA_ERROR_INVALID_VALUE;
    LOCK(); m->last_prefetch = id; UNLOCK();
    return CUDA_SUCCESS;
}
CHECKED(cuMemPrefetchAsync, fm_cuMemPrefetchAsync);

static CUresult fm_cuMemAdvise(CUdeviceptr p, size_t n, CUmem_advise advice, CUmemLocation loc) {
    GUARD();
    int id = 0;
    struct managed *m = find_managed(p, n, NULL);
    if (!m) return CUDA_ERROR_INVALID_VALUE;
    int needs = advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION || advice == CU_MEM_ADVISE_SET_ACCESSED_BY
                || advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
    if (needs && !location_id(loc, &id)) return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    CUresult r = CUDA_SUCCESS;
    switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY: m->read_mostly = 1; break;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY: m->read_mostly = 0; break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: m->preferred = id; break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: m->preferred = -2; break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY: if (id < 0) r = CUDA_ERROR_INVALID_DEVICE; else m->accessed_by |= 1u << id; break;
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY: if (id < 0) r = CUDA_ERROR_INVALID_DEVICE; else m->accessed_by &= ~(1u << id); break;
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    UNLOCK();
    return r;
}
CHECKED(cuMemAdvise, fm_cuMemAdvise);

static CUresult fm_cuStreamAttachMemAsync(CUstream s, CUdeviceptr p, size_t length, unsigned int flags) {
    GUARD(); NEED_CTX();
    if (fake_cuda_stream_device(s) < 0) return CUDA_ERROR_INVALID_HANDLE;
    CUdeviceptr base = 0;
    struct managed *m = find_managed(p, 1, &base);
    if (!m || base != p || length || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST
                                      && flags != CU_MEM_ATTACH_SINGLE)) return CUDA_ERROR_INVALID_VALUE;
    LOCK(); m->flags = flags; UNLOCK();
    return CUDA_SUCCESS;
}
CHECKED(cuStreamAttachMemAsync, fm_cuStreamAttachMemAsync);

static CUresult fm_cuMemRangeGetAttribute(void *data, size_t size, CUmem_range_attribute attr, CUdeviceptr p, size_t n) {
    GUARD();
    struct managed *m = find_managed(p, n, NULL);
    if (!m || !data || size < 4 || size % 4) return CUDA_ERROR_INVALID_VALUE;
    int *out = data;
    LOCK();
    CUresult r = CUDA_SUCCESS;
    switch (attr) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: *out = m->read_mostly; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION: *out = m->preferred; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: *out = m->last_prefetch; break;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
        size_t k = 0;
        for (int d = 0; d < MAX_DEV && k < size / 4; d++) if (m->accessed_by >> d & 1) out[k++] = d;
        while (k < size / 4) out[k++] = -2;
        break;
    }
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    UNLOCK();
    return r;
}
CHECKED(cuMemRangeGetAttribute, fm_cuMemRangeGetAttribute);

static CUresult fm_cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr p) {
    GUARD();
    if (attr == CU_POINTER_ATTRIBUTE_IS_MANAGED && data) {
        if (fake_cuda_find_range(p, 0, NULL, NULL) < 0) return CUDA_ERROR_INVALID_VALUE;
        *(unsigned *)data = find_managed(p, 0, NULL) != NULL;
        return CUDA_SUCCESS;
    }
    if (attr == CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE && data) {
        CUdeviceptr base = 0;
        int d = fake_cuda_find_range(p, 0, &base, NULL);
        if (d < 0) return CUDA_ERROR_INVALID_VALUE;
        LOCK();
        struct live *l = find_pool_block(base);
        int async = map_get(&async_allocs, (uintptr_t)base) != NULL;
        UNLOCK();
        CUmemoryPool pool = NULL;
        if (l) pool = (CUmemoryPool)l->pool;
        else if (async) cuDeviceGetDefaultMemPool(&pool, d);
        *(CUmemoryPool *)data = pool;
        return CUDA_SUCCESS;
    }
    return cuPointerGetAttribute(data, attr, p);
}
CHECKED(cuPointerGetAttribute, fm_cuPointerGetAttribute);

/* ---- legacy IPC handles and the address range of an allocation ---- */
struct legacy_handle { unsigned magic; pid_t pid; CUdeviceptr base; size_t size; };
#define MAGIC_LEGACY 0x4c454741U
static struct map legacy_open;  /* opened base -> count */
static CUresult fm_cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    GUARD();
    CUdeviceptr b = 0; size_t s = 0;
    if (fake_cuda_find_range(p, 0, &b, &s) < 0) return CUDA_ERROR_NOT_FOUND;
    if (base) *base = b;
    if (size) *size = s;
    return CUDA_SUCCESS;
}
CHECKED(cuMemGetAddressRange, fm_cuMemGetAddressRange);
static CUresult fm_cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
    GUARD(); NEED_CTX();
    CUdeviceptr base = 0; size_t size = 0;
    if (!h || fake_cuda_find_range(p, 0, &base, &size) < 0 || base != p) return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    int refused = map_get(&async_allocs, (uintptr_t)p) || find_pool_block(p) || map_get(&managed_allocs, (uintptr_t)p);
    UNLOCK();
    if (refused) return CUDA_ERROR_INVALID_VALUE;  /* stream-ordered and managed memory have no legacy handle */
    struct legacy_handle lh = {MAGIC_LEGACY, getpid(), base, size};
    memset(h, 0, sizeof *h); memcpy(h->reserved, &lh, sizeof lh);
    return CUDA_SUCCESS;
}
CHECKED(cuIpcGetMemHandle, fm_cuIpcGetMemHandle);
static CUresult fm_cuIpcOpenMemHandle(CUdeviceptr *out, CUipcMemHandle h, unsigned int flags) {
    GUARD(); NEED_CTX();
    struct legacy_handle lh; memcpy(&lh, h.reserved, sizeof lh);
    if (!out || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS || lh.magic != MAGIC_LEGACY) return CUDA_ERROR_INVALID_VALUE;
    if (lh.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_ERROR_MAP_FAILED;  /* another process's private memory: see the comment at the top */
}
CHECKED(cuIpcOpenMemHandle, fm_cuIpcOpenMemHandle);
static CUresult fm_cuIpcCloseMemHandle(CUdeviceptr p) {
    GUARD(); NEED_CTX();
    LOCK(); void *v = map_take(&legacy_open, (uintptr_t)p); UNLOCK();
    return v ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CHECKED(cuIpcCloseMemHandle, fm_cuIpcCloseMemHandle);

/* ---- interprocess events ---- */
struct ipc_event_handle { unsigned magic; pid_t pid; uintptr_t event; };
#define MAGIC_IPC_EVENT 0x49455654U
static struct map ipc_events;  /* events created with CU_EVENT_INTERPROCESS */
static CUresult fm_cuEventCreate(CUevent *e, unsigned int flags) {
    GUARD();
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuEventCreate(e, flags & ~(unsigned)CU_EVENT_INTERPROCESS);
    if (!r && (flags & CU_EVENT_INTERPROCESS)) { LOCK(); map_put(&ipc_events, (uintptr_t)*e, (void *)1); UNLOCK(); }
    return r;
}
CHECKED(cuEventCreate, fm_cuEventCreate);
static CUresult fm_cuEventDestroy(CUevent e) {
    CUresult r = cuEventDestroy(e);
    if (!r) { LOCK(); map_take(&ipc_events, (uintptr_t)e); UNLOCK(); }
    return r;
}
CHECKED(cuEventDestroy, fm_cuEventDestroy);
static CUresult fm_cuIpcGetEventHandle(CUipcEventHandle *h, CUevent e) {
    GUARD(); NEED_CTX();  /* as on the card: INVALID_CONTEXT on a thread with no current context */
    LOCK(); int ok = map_get(&ipc_events, (uintptr_t)e) != NULL; UNLOCK();
    if (!h) return CUDA_ERROR_INVALID_VALUE;
    if (!ok) return CUDA_ERROR_INVALID_HANDLE;
    struct ipc_event_handle ih = {MAGIC_IPC_EVENT, getpid(), (uintptr_t)e};
    memset(h, 0, sizeof *h); memcpy(h->reserved, &ih, sizeof ih);
    return CUDA_SUCCESS;
}
CHECKED(cuIpcGetEventHandle, fm_cuIpcGetEventHandle);
static CUresult fm_cuIpcOpenEventHandle(CUevent *e, CUipcEventHandle h) {
    GUARD(); NEED_CTX();
    struct ipc_event_handle ih; memcpy(&ih, h.reserved, sizeof ih);
    if (!e || ih.magic != MAGIC_IPC_EVENT) return CUDA_ERROR_INVALID_VALUE;
    if (ih.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;
    return cuEventCreate(e, CU_EVENT_DISABLE_TIMING);  /* every stream of the fake is synchronous: nothing to share */
}
CHECKED(cuIpcOpenEventHandle, fm_cuIpcOpenEventHandle);

/* ---- pinned memory flags and mapped host memory ---- */
struct hostmem { size_t size; unsigned flags; int registered; };
static struct map host_flags;  /* host pointer -> flags, for cuMemHostAlloc'd and registered memory */
static void host_track(void *p, size_t n, unsigned flags, int registered, unsigned mapflag) {
    struct hostmem *h = malloc(sizeof *h); h->size = n; h->flags = flags; h->registered = registered;
    LOCK(); map_put(&host_flags, (uintptr_t)p, h); UNLOCK();
    if (flags & mapflag) fake_cuda_add_range(p, n, fake_cuda_current_device(), NULL, NULL);
}
static void host_untrack(void *p) {
    LOCK(); struct hostmem *h = map_take(&host_flags, (uintptr_t)p); UNLOCK();
    if (h) { fake_cuda_remove_range(p); free(h); }
}
static CUresult fm_cuMemHostAlloc(void **pp, size_t n, unsigned int flags) {
    if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuMemHostAlloc(pp, n, flags);
    if (!r) host_track(*pp, n, flags, 0, CU_MEMHOSTALLOC_DEVICEMAP);
    return r;
}
CHECKED(cuMemHostAlloc, fm_cuMemHostAlloc);
static CUresult fm_cuMemFreeHost(void *p) {
    host_untrack(p);
    return cuMemFreeHost(p);
}
CHECKED(cuMemFreeHost, fm_cuMemFreeHost);
static CUresult fm_cuMemHostRegister(void *p, size_t n, unsigned int flags) {
    if (flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_READ_ONLY))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuMemHostRegister(p, n, flags);
    if (!r) host_track(p, n, flags, 1, CU_MEMHOSTREGISTER_DEVICEMAP);
    return r;
}
CHECKED(cuMemHostRegister, fm_cuMemHostRegister);
static CUresult fm_cuMemHostUnregister(void *p) {
    CUresult r = cuMemHostUnregister(p);
    if (!r) host_untrack(p);
    return r;
}
CHECKED(cuMemHostUnregister, fm_cuMemHostUnregister);
static CUresult fm_cuMemHostGetFlags(unsigned int *flags, void *p) {
    GUARD();
    LOCK(); struct hostmem *h = map_get(&host_flags, (uintptr_t)p); UNLOCK();
    if (!flags || !h || h->registered) return cuMemHostGetFlags(flags, p);
    *flags = h->flags;
    return CUDA_SUCCESS;
}
CHECKED(cuMemHostGetFlags, fm_cuMemHostGetFlags);
static CUresult fm_cuMemHostGetDevicePointer(CUdeviceptr *out, void *p, unsigned int flags) {
    GUARD(); NEED_CTX();
    if (!out || flags) return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    struct hostmem *found = NULL;
    for (unsigned i = 0; i < 1024 && !found; i++)
        for (struct entry *e = host_flags.slot[i]; e; e = e->next) {
            struct hostmem *h = e->val;
            unsigned mapflag = h->registered ? CU_MEMHOSTREGISTER_DEVICEMAP : CU_MEMHOSTALLOC_DEVICEMAP;
            if ((h->flags & mapflag) && (uintptr_t)p >= e->key && (uintptr_t)p < e->key + h->size) { found = h; break; }
        }
    UNLOCK();
    if (!found) return CUDA_ERROR_INVALID_VALUE;
    *out = (CUdeviceptr)(uintptr_t)p;  /* unified addressing: the same address */
    return CUDA_SUCCESS;
}
CHECKED(cuMemHostGetDevicePointer, fm_cuMemHostGetDevicePointer);
/* The fake runs every copy when it is queued, so a stream memop's write lands at once (device-mapped host
   memory only: the one use, the compiled core's fence word). */
static CUresult fm_cuStreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
    GUARD(); NEED_CTX();
    if (getenv("FAKE_CUDA_NO_STREAM_MEMOPS")) return CUDA_ERROR_NOT_SUPPORTED; /* a device without them */
    if (fake_cuda_stream_device(s) < 0) return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~1u || (addr & 3)) return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr dp = 0;
    if (fm_cuMemHostGetDevicePointer(&dp, (void *)(uintptr_t)addr, 0) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    __atomic_store_n((cuuint32_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}
CHECKED(cuStreamWriteValue32, fm_cuStreamWriteValue32);

/* ---- virtual memory: PROT_NONE reservations, "physical" handles mapped by mprotect ---- */
#define MAGIC_VRES 0x56524553U
#define MAGIC_PHYS 0x50485953U
struct chunk { size_t off, size; struct chunk *next; };
struct vres { unsigned magic; char *base; size_t size; int dev; struct chunk *chunks; void *runs[64]; int nruns; struct vres *next; };
struct phys { unsigned magic; size_t size; int dev, mapped; int fd; };  /* fd: a memfd where exportable, else -1 */
static struct vres *reservations;
static unsigned long long vmm_budget = 256ull << 30;  /* "physical" bytes the fake hands out (pages cost only when touched) */

static CUresult fm_cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags f) {
    GUARD();
    if (!g || !prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE
        || prop->location.id < 0 || prop->location.id >= fake_cuda_device_count() || (unsigned)f > 1) return CUDA_ERROR_INVALID_VALUE;
    *g = GRANULARITY;
    return CUDA_SUCCESS;
}
CHECKED(cuMemGetAllocationGranularity, fm_cuMemGetAllocationGranularity);

static CUresult fm_cuMemAddressReserve(CUdeviceptr *out, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags) {
    GUARD();
    (void)addr;
    if (!out || !size || size % GRANULARITY || flags || (align && (align & (align - 1)))) return CUDA_ERROR_INVALID_VALUE;
    if (align < GRANULARITY) align = GRANULARITY;
    char *raw = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    if (start > (uintptr_t)raw) munmap(raw, start - (uintptr_t)raw);
    size_t tail = (uintptr_t)raw + size + align - (start + size);
    if (tail) munmap((char *)(start + size), tail);
    struct vres *r = calloc(1, sizeof *r);
    r->magic = MAGIC_VRES; r->base = (char *)start; r->size = size; r->dev = -1;
    LOCK(); r->next = reservations; reservations = r; UNLOCK();
    *out = (CUdeviceptr)start;
    return CUDA_SUCCESS;
}
CHECKED(cuMemAddressReserve, fm_cuMemAddressReserve);

static struct vres *find_vres(CUdeviceptr p, size_t n) {  /* with memlock held */
    for (struct vres *r = reservations; r; r = r->next)
        if (r->magic == MAGIC_VRES && (char *)p >= r->base && (char *)p + n <= r->base + r->size) return r;
    return NULL;
}
static CUresult fm_cuMemAddressFree(CUdeviceptr p, size_t size) {
    GUARD();
    LOCK();
    struct vres *r = find_vres(p, size);
    CUresult err = (!r || (char *)p != r->base || size != r->size) ? CUDA_ERROR_INVALID_VALUE
                   : r->chunks ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;  /* unmap first */
    if (!err) { munmap(r->base, r->size); r->magic = 0; }
    UNLOCK();
    return err;
}
CHECKED(cuMemAddressFree, fm_cuMemAddressFree);

static CUresult fm_cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop, unsigned long long flags) {
    GUARD();
    if (!h || !prop || flags || !size || size % GRANULARITY || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED
        || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0
        || prop->location.id >= fake_cuda_device_count()) return CUDA_ERROR_INVALID_VALUE;
    LOCK();
    if (size > vmm_budget) { UNLOCK(); return CUDA_ERROR_OUT_OF_MEMORY; }
    vmm_budget -= size;
    UNLOCK();
    int fd = -1;
    if (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {  /* exportable: shared memory */
        fd = memfd_create("fake-cuda-vmm", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)size)) { if (fd >= 0) close(fd); LOCK(); vmm_budget += size; UNLOCK(); return CUDA_ERROR_OUT_OF_MEMORY; }
    }
    struct phys *ph = calloc(1, sizeof *ph); ph->magic = MAGIC_PHYS; ph->size = size; ph->dev = prop->location.id; ph->fd = fd;
    *h = (CUmemGenericAllocationHandle)(uintptr_t)ph;
    return CUDA_SUCCESS;
}
CHECKED(cuMemCreate, fm_cuMemCreate);
static CUresult fm_cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                                                unsigned long long flags) {
    GUARD();
    struct phys *ph = (struct phys *)(uintptr_t)h;
    if (!out || flags || !ph || ph->magic != MAGIC_PHYS || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || ph->fd < 0)
        return CUDA_ERROR_INVALID_VALUE;
    int fd = dup(ph->fd);
    if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
    *(int *)out = fd;
    return CUDA_SUCCESS;
}
CHECKED(cuMemExportToShareableHandle, fm_cuMemExportToShareableHandle);
static CUresult fm_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os_handle,
                                                  CUmemAllocationHandleType type) {
    GUARD(); NEED_CTX();
    struct stat st;
    int fd = (int)(intptr_t)os_handle;
    if (!h || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size % GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
    int mine = dup(fd);  /* the caller keeps its fd */
    if (mine < 0) return CUDA_ERROR_OPERATING_SYSTEM;
    struct phys *ph = calloc(1, sizeof *ph); ph->magic = MAGIC_PHYS; ph->size = (size_t)st.st_size;
    ph->dev = fake_cuda_current_device(); ph->fd = mine;
    LOCK(); vmm_budget -= ph->size; UNLOCK();  /* given back by cuMemRelease, as for a created handle */
    *h = (CUmemGenericAllocationHandle)(uintptr_t)ph;
    return CUDA_SUCCESS;
}
CHECKED(cuMemImportFromShareableHandle, fm_cuMemImportFromShareableHandle);
static CUresult fm_cuMemRelease(CUmemGenericAllocationHandle h) {
    GUARD();
    struct phys *ph = (struct phys *)(uintptr_t)h;
    if (!ph || ph->magic != MAGIC_PHYS) return CUDA_ERROR_INVALID_VALUE;
    LOCK(); ph->magic = 0; vmm_budget += ph->size; UNLOCK();  /* a mapping keeps its pages; the fake frees them at unmap */
    if (ph->fd >= 0) close(ph->fd);  /* a shared mapping keeps the memfd's pages until it is unmapped */
    free(ph);
    return CUDA_SUCCESS;
}
CHECKED(cuMemRelease, fm_cuMemRelease);

/* Copies, memsets and kernels see a reservation's mapped chunks as runs of contiguous memory. */
static void refresh_runs(struct vres *r, void *removed[], int *nremoved, char *added_base[], size_t added_size[], int *nadded) {
    for (int i = 0; i < r->nruns; i++) removed[(*nremoved)++] = r->runs[i];
    r->nruns = 0;
    size_t lo = 0, hi = 0; int open = 0;
    for (size_t off = 0; off < r->size;) {
        struct chunk *c = NULL;
        for (struct chunk *k = r->chunks; k; k = k->next) if (k->off == off) { c = k; break; }
        if (c) { if (!open) { lo = off; open = 1; } hi = off + c->size; off += c->size; continue; }
        if (open) { added_base[*nadded] = r->base + lo; added_size[(*nadded)++] = hi - lo; r->runs[r->nruns++] = r->base + lo; open = 0; }
        size_t next = r->size;
        for (struct chunk *k = r->chunks; k; k = k->next) if (k->off > off && k->off < next) next = k->off;
        off = next;
    }
    if (open) { added_base[*nadded] = r->base + lo; added_size[(*nadded)++] = hi - lo; r->runs[r->nruns++] = r->base + lo; }
}
static void apply_runs(void *removed[], int nremoved, char *added_base[], size_t added_size[], int nadded, int dev) {
    for (int i = 0; i < nremoved; i++) fake_cuda_remove_range(removed[i]);
    for (int i = 0; i < nadded; i++) fake_cuda_add_range(added_base[i], added_size[i], dev, NULL, NULL);
}

static CUresult fm_cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long flags) {
    GUARD();
    struct phys *ph = (struct phys *)(uintptr_t)h;
    if (!ph || ph->magic != MAGIC_PHYS || flags || offset || size != ph->size) return CUDA_ERROR_INVALID_VALUE;
    void *removed[64]; char *added[64]; size_t sizes[64];
    int nr = 0, na = 0, dev;
    LOCK();
    struct vres *r = find_vres(p, size);
    CUresult err = r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    size_t off = r ? (size_t)((char *)p - r->base) : 0;
    for (struct chunk *c = r ? r->chunks : NULL; c && !err; c = c->next)
        if (off < c->off + c->size && c->off < off + size) err = CUDA_ERROR_INVALID_VALUE;  /* overlaps a mapping */
    if (!err && r->nruns >= 32) err = CUDA_ERROR_OUT_OF_MEMORY;  /* the fake keeps at most 32 separate runs */
    if (!err && ph->fd >= 0 && mmap((char *)p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, ph->fd, 0) == MAP_FAILED)
        err = CUDA_ERROR_OUT_OF_MEMORY;  /* exportable: the memfd itself, shared with whoever imports it */
    else if (!err && ph->fd < 0 && mprotect((char *)p, size, PROT_READ | PROT_WRITE)) err = CUDA_ERROR_OUT_OF_MEMORY;
    if (!err) {
        struct chunk *c = calloc(1, sizeof *c); c->off = off; c->size = size; c->next = r->chunks; r->chunks = c;
        ph->mapped++; r->dev = ph->dev;
        refresh_runs(r, removed, &nr, added, sizes, &na);
    }
    dev = r ? r->dev : 0;
    UNLOCK();
    if (!err) apply_runs(removed, nr, added, sizes, na, dev);
    return err;
}
CHECKED(cuMemMap, fm_cuMemMap);

static CUresult fm_cuMemUnmap(CUdeviceptr p, size_t size) {
    GUARD();
    void *removed[64]; char *added[64]; size_t sizes[64];
    int nr = 0, na = 0, dev = 0;
    LOCK();
    struct vres *r = find_vres(p, size);
    CUresult err = CUDA_ERROR_INVALID_VALUE;
    if (r) {
        size_t off = (size_t)((char *)p - r->base);
        for (struct chunk **pc = &r->chunks; *pc; pc = &(*pc)->next)
            if ((*pc)->off == off && (*pc)->size == size) {
                struct chunk *c = *pc; *pc = c->next; free(c);
                /* back to reserved address space (a shared mapping of an exported memfd is dropped with it) */
                mmap((char *)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
                refresh_runs(r, removed, &nr, added, sizes, &na);
                dev = r->dev; err = CUDA_SUCCESS;
                break;
            }
    }
    UNLOCK();
    if (!err) apply_runs(removed, nr, added, sizes, na, dev);
    return err;
}
CHECKED(cuMemUnmap, fm_cuMemUnmap);

static CUresult fm_cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count) {
    GUARD();
    if (!desc || !count) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++)
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0
            || desc[i].location.id >= fake_cuda_device_count() || (unsigned)desc[i].flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_DEVICE;
    LOCK();
    struct vres *r = find_vres(p, size);
    size_t covered = 0, off = r ? (size_t)((char *)p - r->base) : 0;
    for (struct chunk *c = r ? r->chunks : NULL; c; c = c->next)
        if (c->off >= off && c->off + c->size <= off + size) covered += c->size;
    UNLOCK();
    return r && covered == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;  /* every byte must be mapped */
}
CHECKED(cuMemSetAccess, fm_cuMemSetAccess);

/* ---- pitched memory and 2-D / 3-D copies ---- */
static CUresult fm_cuMemAllocPitch(CUdeviceptr *p, size_t *pitch, size_t width, size_t height, unsigned int elem) {
    GUARD();
    if (!p || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16)) return CUDA_ERROR_INVALID_VALUE;
    size_t pt = (width + 511) / 512 * 512;
    CUresult r = cuMemAlloc(p, pt * height);
    if (!r) *pitch = pt;
    return r;
}
CHECKED(cuMemAllocPitch, fm_cuMemAllocPitch);

static int side_ok(CUmemorytype type, const void *host, CUdeviceptr dev, size_t span) {
    if (type == CU_MEMORYTYPE_HOST) return host != NULL;
    if (type == CU_MEMORYTYPE_DEVICE) return fake_cuda_find_range(dev, span, NULL, NULL) >= 0;
    return 0;
}
/* One side of a 3-D copy as host memory: its first byte, row pitch and rows per slice (an array's from
   fake_arrays.c), checked against the copy's box. */
static CUresult copy_side(const CUDA_MEMCPY3D *c, CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array,
                          size_t x, size_t y, size_t z, size_t pitch, size_t height, char **at, size_t *rpitch, size_t *rows) {
    if (type == CU_MEMORYTYPE_ARRAY) return fake_cuda_array_span(array, x, y, z, c->WidthInBytes, c->Height, c->Depth, at, rpitch, rows);
    if (pitch < c->WidthInBytes + x) return CUDA_ERROR_INVALID_VALUE;
    size_t h = height ? height : c->Height;
    if (c->Depth > 1 && h < c->Height + y) return CUDA_ERROR_INVALID_VALUE;
    size_t off = (z * h + y) * pitch + x, span = ((c->Depth - 1) * h + c->Height - 1) * pitch + c->WidthInBytes;
    if (!side_ok(type, host, dev + off, span)) return CUDA_ERROR_INVALID_VALUE;
    *at = (type == CU_MEMORYTYPE_HOST ? (char *)host : (char *)(uintptr_t)dev) + off;
    *rpitch = pitch; *rows = h;
    return CUDA_SUCCESS;
}
static CUresult copy3d(const CUDA_MEMCPY3D *c, CUstream s) {
    if (!c || c->reserved0 || c->reserved1 || !c->WidthInBytes || !c->Height || !c->Depth) return CUDA_ERROR_INVALID_VALUE;
    if (fake_cuda_stream_device(s) < 0) return CUDA_ERROR_INVALID_HANDLE;
    char *src, *dst; size_t sp, dp, sh, dh;
    CUresult err = copy_side(c, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes, c->srcY, c->srcZ,
                             c->srcPitch, c->srcHeight, &src, &sp, &sh);
    if (!err) err = copy_side(c, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes, c->dstY, c->dstZ,
                              c->dstPitch, c->dstHeight, &dst, &dp, &dh);
    if (err) return err;
    for (size_t z = 0; z < c->Depth; z++)
        for (size_t y = 0; y < c->Height; y++)
            memmove(dst + (z * dh + y) * dp, src + (z * sh + y) * sp, c->WidthInBytes);
    return CUDA_SUCCESS;
}
static CUresult fm_cuMemcpy3DAsync(const CUDA_MEMCPY3D *c, CUstream s) { GUARD(); NEED_CTX(); return copy3d(c, s); }
CHECKED(cuMemcpy3DAsync, fm_cuMemcpy3DAsync);
static CUresult fm_cuMemcpy2DAsync(const CUDA_MEMCPY2D *c, CUstream s) {
    GUARD(); NEED_CTX();
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D d; memset(&d, 0, sizeof d);
    d.srcXInBytes = c->srcXInBytes; d.srcY = c->srcY; d.srcMemoryType = c->srcMemoryType; d.srcHost = c->srcHost;
    d.srcDevice = c->srcDevice; d.srcPitch = c->srcPitch; d.srcHeight = c->Height;
    d.dstXInBytes = c->dstXInBytes; d.dstY = c->dstY; d.dstMemoryType = c->dstMemoryType; d.dstHost = c->dstHost;
    d.dstDevice = c->dstDevice; d.dstPitch = c->dstPitch; d.dstHeight = c->Height;
    d.WidthInBytes = c->WidthInBytes; d.Height = c->Height; d.Depth = 1;
    return copy3d(&d, s);
}
CHECKED(cuMemcpy2DAsync, fm_cuMemcpy2DAsync);

/* ---- cuStreamCreate, for the benchmark's raw cuda.bindings side (its IPC importer process) ---- */
static CUresult fm_cuStreamCreate(CUstream *s, unsigned int flags) { return cuStreamCreateWithPriority(s, flags, 0); }
CHECKED(cuStreamCreate, fm_cuStreamCreate);

/* ---- registration ---- */
#define SYM(name, fn) {name, (void *)fn}
static const struct fake_cuda_symbol MEMORY_SYMS[] = {
    SYM("cuDeviceGetAttribute", fm_cuDeviceGetAttribute),
    SYM("cuMemAllocAsync", fm_cuMemAllocAsync), SYM("cuMemFreeAsync", fm_cuMemFreeAsync), SYM("cuMemFree", fm_cuMemFree),
    SYM("cuMemPoolCreate", fm_cuMemPoolCreate), SYM("cuMemPoolDestroy", fm_cuMemPoolDestroy),
    SYM("cuMemAllocFromPoolAsync", fm_cuMemAllocFromPoolAsync),
    SYM("cuMemPoolGetAttribute", fm_cuMemPoolGetAttribute), SYM("cuMemPoolSetAttribute", fm_cuMemPoolSetAttribute),
    SYM("cuMemPoolTrimTo", fm_cuMemPoolTrimTo), SYM("cuMemPoolSetAccess", fm_cuMemPoolSetAccess),
    SYM("cuMemPoolGetAccess", fm_cuMemPoolGetAccess),
    SYM("cuMemPoolExportToShareableHandle", fm_cuMemPoolExportToShareableHandle),
    SYM("cuMemPoolImportFromShareableHandle", fm_cuMemPoolImportFromShareableHandle),
    SYM("cuMemPoolExportPointer", fm_cuMemPoolExportPointer), SYM("cuMemPoolImportPointer", fm_cuMemPoolImportPointer),
    SYM("cuMemAllocManaged", fm_cuMemAllocManaged), SYM("cuMemPrefetchAsync", fm_cuMemPrefetchAsync),
    SYM("cuMemAdvise", fm_cuMemAdvise), SYM("cuStreamAttachMemAsync", fm_cuStreamAttachMemAsync),
    SYM("cuMemRangeGetAttribute", fm_cuMemRangeGetAttribute), SYM("cuPointerGetAttribute", fm_cuPointerGetAttribute),
    SYM("cuMemGetAddressRange", fm_cuMemGetAddressRange), SYM("cuIpcGetMemHandle", fm_cuIpcGetMemHandle),
    SYM("cuIpcOpenMemHandle", fm_cuIpcOpenMemHandle), SYM("cuIpcCloseMemHandle", fm_cuIpcCloseMemHandle),
    SYM("cuEventCreate", fm_cuEventCreate), SYM("cuEventDestroy", fm_cuEventDestroy),
    SYM("cuIpcGetEventHandle", fm_cuIpcGetEventHandle), SYM("cuIpcOpenEventHandle", fm_cuIpcOpenEventHandle),
    SYM("cuMemHostAlloc", fm_cuMemHostAlloc), SYM("cuMemFreeHost", fm_cuMemFreeHost),
    SYM("cuMemHostRegister", fm_cuMemHostRegister), SYM("cuMemHostUnregister", fm_cuMemHostUnregister),
    SYM("cuMemHostGetFlags", fm_cuMemHostGetFlags), SYM("cuMemHostGetDevicePointer", fm_cuMemHostGetDevicePointer),
    SYM("cuStreamWriteValue32", fm_cuStreamWriteValue32),
    SYM("cuMemGetAllocationGranularity", fm_cuMemGetAllocationGranularity),
    SYM("cuMemAddressReserve", fm_cuMemAddressReserve), SYM("cuMemAddressFree", fm_cuMemAddressFree),
    SYM("cuMemCreate", fm_cuMemCreate), SYM("cuMemRelease", fm_cuMemRelease), SYM("cuMemMap", fm_cuMemMap),
    SYM("cuMemExportToShareableHandle", fm_cuMemExportToShareableHandle),
    SYM("cuMemImportFromShareableHandle", fm_cuMemImportFromShareableHandle),
    SYM("cuMemUnmap", fm_cuMemUnmap), SYM("cuMemSetAccess", fm_cuMemSetAccess),
    SYM("cuMemAllocPitch", fm_cuMemAllocPitch), SYM("cuMemcpy2DAsync", fm_cuMemcpy2DAsync),
    SYM("cuMemcpy3DAsync", fm_cuMemcpy3DAsync), SYM("cuStreamCreate", fm_cuStreamCreate),
};

__attribute__((constructor)) static void register_memory(void) {
    for (int d = 0; d < MAX_DEV; d++) defpools[d].reuse[1] = defpools[d].reuse[2] = defpools[d].reuse[3] = 1;
    fake_cuda_add_symbols(MEMORY_SYMS, sizeof MEMORY_SYMS / sizeof *MEMORY_SYMS);
}
