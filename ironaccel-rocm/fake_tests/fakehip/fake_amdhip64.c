/* A fake libamdhip64 for ironaccel-rocm's tests, compiled against ROCm's real hip_runtime_api.h.
 *
 * Two "devices" of host memory; every handle is checked against a live list; errors are HIP's codes.
 * Work runs at once (a stream is ordered by construction); events record the host clock.
 * hipModuleLoadData takes a real AMDGPU code object (an ELF from hipRTC) and finds the built-in
 * kernels it can "run" by symbol name in the ELF symbol table.
 * hip-python 10 reads hipDeviceProp_t in ROCm 6's layout (hipGetDevicePropertiesR0600); its field
 * offsets come in as -D defines measured from hip-python (ROCm 5.2's header has the older layout).
 */
#define _GNU_SOURCE
#include <hip/hip_runtime_api.h>
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NDEV 2
#define MAGIC_STREAM 0x5354524dU
#define MAGIC_EVENT 0x45564e54U
#define MAGIC_MODULE 0x4d4f444cU
#define MAGIC_FUNC 0x46554e43U

struct ihipStream_t { uint32_t magic; int device; int priority; struct ihipStream_t* next; };
struct ihipEvent_t { uint32_t magic; int device; int recorded; double ms; struct ihipEvent_t* next; };
struct ihipModuleSymbol_t { uint32_t magic; int kind; uint32_t kernarg; struct ihipModule_t* module; };
#define MAX_GLOBALS 8
struct global { char name[64]; unsigned char* ptr; size_t size; };
struct ihipModule_t { uint32_t magic; int device; struct ihipModuleSymbol_t funcs[8]; int nfuncs;
                      struct global globals[MAX_GLOBALS]; int nglobals; struct ihipModule_t* next; };
struct alloc { char* base; size_t size; int device; int host; struct alloc* next; };

static int current;
static struct ihipStream_t* streams;
static struct ihipEvent_t* events;
static struct ihipModule_t* modules;
static struct alloc* allocs;

/* A scale_offset whose kernel descriptor says a kernarg segment this large is the typed-params one: 40 bytes
 * for (x, y, a, float2 pair, n, k) against 28 for (x, y, a, b, n), as hipRTC 5.2 lays them out. */
#define TYPED_KERNARG 40
/* ... and 20 bytes, (x, y, n), is the one whose SCALE and BIAS are __constant__ globals. */
#define CONSTANTS_KERNARG 20
enum { K_SCALE_OFFSET = 1, K_SAXPY = 2, K_FILL = 3 };
static const char* kernel_names[] = {"", "scale_offset", "saxpy", "fill"};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int stream_ok(hipStream_t s) {
    if (s == NULL) return 1;
    for (struct ihipStream_t* p = streams; p; p = p->next)
        if (p == s) return p->device == current;
    return 0;
}

/* The allocation holding [ptr, ptr+size) on the current device (or a host allocation), else NULL. */
static struct alloc* find(const void* ptr, size_t size, int host_ok) {
    for (struct alloc* a = allocs; a; a = a->next) {
        const char* p = ptr;
        if (p >= a->base && p < a->base + (a->size ? a->size : 1)) {
            if (size > (size_t)(a->base + a->size - p)) return NULL;
            if (a->host) return host_ok ? a : NULL;
            return a->device == current ? a : NULL;
        }
    }
    return NULL;
}

static void* add_alloc(size_t size, int host) {
    struct alloc* a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->base = calloc(1, size);
    if (!a->base) { free(a); return NULL; }
    a->size = size; a->device = current; a->host = host; a->next = allocs; allocs = a;
    return a->base;
}

static hipError_t drop_alloc(void* ptr, int host) {
    for (struct alloc** pp = &allocs; *pp; pp = &(*pp)->next) {
        struct alloc* a = *pp;
        if (a->base == ptr && a->host == host) {
            *pp = a->next; free(a->base); free(a); return hipSuccess;
        }
    }
    return hipErrorInvalidValue;
}

hipError_t hipRuntimeGetVersion(int* v) { if (!v) return hipErrorInvalidValue; *v = 50221153; return hipSuccess; }
hipError_t hipDriverGetVersion(int* v) { if (!v) return hipErrorInvalidValue; *v = 50221153; return hipSuccess; }
hipError_t hipGetDeviceCount(int* n) { if (!n) return hipErrorInvalidValue; *n = NDEV; return hipSuccess; }
hipError_t hipSetDevice(int d) { if (d < 0 || d >= NDEV) return hipErrorInvalidDevice; current = d; return hipSuccess; }
hipError_t hipGetDevice(int* d) { if (!d) return hipErrorInvalidValue; *d = current; return hipSuccess; }
hipError_t hipDeviceSynchronize(void) { return hipSuccess; }
hipError_t hipDeviceCanAccessPeer(int* can, int d, int peer) {
    if (!can || d < 0 || d >= NDEV || peer < 0 || peer >= NDEV) return hipErrorInvalidDevice;
    *can = d != peer; return hipSuccess;
}

#define PUT(type, off, value) (*(type*)((char*)props + (off)) = (value))
hipError_t hipGetDevicePropertiesR0600(void* props, int d);
hipError_t hipGetDevicePropertiesR0600(void* props, int d) {
    if (!props) return hipErrorInvalidValue;
    if (d < 0 || d >= NDEV) return hipErrorInvalidDevice;
    memset(props, 0, PROP_SIZE);
    strcpy((char*)props + OFF_name, d ? "Fake AMD GPU 1" : "Fake AMD GPU 0");
    strcpy((char*)props + OFF_gcnArchName, "gfx90a:sramecc+:xnack-");
    PUT(size_t, OFF_totalGlobalMem, (size_t)1 << 30);
    PUT(size_t, OFF_sharedMemPerBlock, 65536);
    PUT(int, OFF_multiProcessorCount, 104);
    PUT(int, OFF_warpSize, 64);
    PUT(int, OFF_maxThreadsPerBlock, 1024);
    PUT(int, OFF_clockRate, 1700000);
    PUT(int, OFF_l2CacheSize, 8 << 20);
    PUT(int, OFF_major, 9);
    PUT(int, OFF_minor, 0);
    PUT(int, OFF_unifiedAddressing, 1);
    PUT(int, OFF_canMapHostMemory, 1);
    PUT(int, OFF_memoryPoolsSupported, 1);
    PUT(int, OFF_asyncEngineCount, 2);
    PUT(int, OFF_streamPrioritiesSupported, 1);
    return hipSuccess;
}

hipError_t hipDeviceGetStreamPriorityRange(int* least, int* greatest) {
    if (least) *least = 0;
    if (greatest) *greatest = -1;
    return hipSuccess;
}

hipError_t hipStreamCreateWithPriority(hipStream_t* s, unsigned int flags, int priority) {
    if (!s || flags > 1) return hipErrorInvalidValue;
    struct ihipStream_t* p = calloc(1, sizeof *p);
    if (!p) return hipErrorOutOfMemory;
    p->magic = MAGIC_STREAM; p->device = current; p->priority = priority < -1 ? -1 : priority > 0 ? 0 : priority;
    p->next = streams; streams = p; *s = p;
    return hipSuccess;
}
hipError_t hipStreamCreate(hipStream_t* s) { return hipStreamCreateWithPriority(s, 0, 0); }
hipError_t hipStreamDestroy(hipStream_t s) {
    for (struct ihipStream_t** pp = &streams; *pp; pp = &(*pp)->next)
        if (*pp == s) { *pp = s->next; s->magic = 0; free(s); return hipSuccess; }
    return hipErrorInvalidHandle;
}
hipError_t hipStreamQuery(hipStream_t s) { return stream_ok(s) ? hipSuccess : hipErrorInvalidHandle; }
hipError_t hipStreamSynchronize(hipStream_t s) { return stream_ok(s) ? hipSuccess : hipErrorInvalidHandle; }
hipError_t hipStreamGetPriority(hipStream_t s, int* priority) {
    if (!priority) return hipErrorInvalidValue;
    if (!stream_ok(s)) return hipErrorInvalidHandle;
    *priority = s ? s->priority : 0; return hipSuccess;
}

static struct ihipEvent_t* event_of(hipEvent_t e) {
    for (struct ihipEvent_t* p = events; p; p = p->next) if (p == e) return p;
    return NULL;
}
hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned flags) {
    if (!e || flags > 0xf) return hipErrorInvalidValue;
    struct ihipEvent_t* p = calloc(1, sizeof *p);
    if (!p) return hipErrorOutOfMemory;
    p->magic = MAGIC_EVENT; p->device = current; p->next = events; events = p; *e = p;
    return hipSuccess;
}
hipError_t hipEventCreate(hipEvent_t* e) { return hipEventCreateWithFlags(e, 0); }
hipError_t hipEventDestroy(hipEvent_t e) {
    for (struct ihipEvent_t** pp = &events; *pp; pp = &(*pp)->next)
        if (*pp == e) { *pp = e->next; e->magic = 0; free(e); return hipSuccess; }
    return hipErrorInvalidHandle;
}
hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) {
    struct ihipEvent_t* p = event_of(e);
    if (!p || !stream_ok(s)) return hipErrorInvalidHandle;
    if (p->device != current) return hipErrorInvalidHandle;
    p->recorded = 1; p->ms = now_ms();
    return hipSuccess;
}
hipError_t hipEventSynchronize(hipEvent_t e) { return event_of(e) ? hipSuccess : hipErrorInvalidHandle; }
hipError_t hipEventQuery(hipEvent_t e) { return event_of(e) ? hipSuccess : hipErrorInvalidHandle; }
hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned int flags) {
    return stream_ok(s) && event_of(e) ? hipSuccess : hipErrorInvalidHandle;
}
hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
    struct ihipEvent_t *a = event_of(start), *b = event_of(stop);
    if (!ms) return hipErrorInvalidValue;
    if (!a || !b) return hipErrorInvalidHandle;
    if (!a->recorded || !b->recorded) return hipErrorNotReady;
    *ms = (float)(b->ms - a->ms); return hipSuccess;
}

hipError_t hipMalloc(void** ptr, size_t size) {
    if (!ptr) return hipErrorInvalidValue;
    if (size == 0) { *ptr = NULL; return hipSuccess; }
    if (size > ((size_t)1 << 30)) return hipErrorOutOfMemory;
    void* p = add_alloc(size, 0);
    if (!p) return hipErrorOutOfMemory;
    *ptr = p; return hipSuccess;
}
hipError_t hipFree(void* ptr) { return ptr == NULL ? hipSuccess : drop_alloc(ptr, 0); }
hipError_t hipMallocAsync(void** ptr, size_t size, hipStream_t s) {
    return stream_ok(s) ? hipMalloc(ptr, size) : hipErrorInvalidHandle;
}
hipError_t hipFreeAsync(void* ptr, hipStream_t s) { return stream_ok(s) ? hipFree(ptr) : hipErrorInvalidHandle; }
hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags) {
    if (!ptr) return hipErrorInvalidValue;
    if (size == 0) { *ptr = NULL; return hipSuccess; }
    if (size > ((size_t)1 << 30)) return hipErrorOutOfMemory;
    void* p = add_alloc(size, 1);
    if (!p) return hipErrorOutOfMemory;
    *ptr = p; return hipSuccess;
}
hipError_t hipHostFree(void* ptr) { return ptr == NULL ? hipSuccess : drop_alloc(ptr, 1); }

hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void* src, size_t n) {
    if (!src || !find(dst, n, 0)) return hipErrorInvalidValue;
    memcpy(dst, src, n); return hipSuccess;
}
hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t n) {
    if (!dst || !find(src, n, 0)) return hipErrorInvalidValue;
    memcpy(dst, src, n); return hipSuccess;
}
/* Device-side copies and sets take mapped pinned host memory too, as HIP does under unified addressing. */
hipError_t hipMemcpyDtoD(hipDeviceptr_t dst, hipDeviceptr_t src, size_t n) {
    if (!find(dst, n, 1) || !find(src, n, 1)) return hipErrorInvalidValue;
    memmove(dst, src, n); return hipSuccess;
}
hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void* src, size_t n, hipStream_t s) {
    return stream_ok(s) ? hipMemcpyHtoD(dst, src, n) : hipErrorInvalidHandle;
}
hipError_t hipMemcpyDtoHAsync(void* dst, hipDeviceptr_t src, size_t n, hipStream_t s) {
    return stream_ok(s) ? hipMemcpyDtoH(dst, src, n) : hipErrorInvalidHandle;
}
hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t n, hipStream_t s) {
    return stream_ok(s) ? hipMemcpyDtoD(dst, src, n) : hipErrorInvalidHandle;
}
hipError_t hipMemsetD8(hipDeviceptr_t dst, unsigned char v, size_t n) {
    if (!find(dst, n, 0)) return hipErrorInvalidValue;
    memset(dst, v, n); return hipSuccess;
}
hipError_t hipMemsetD32(hipDeviceptr_t dst, int v, size_t n) {
    if (n > SIZE_MAX / 4 || !find(dst, n * 4, 1)) return hipErrorInvalidValue;
    for (size_t i = 0; i < n; i++) memcpy((char*)dst + 4 * i, &v, 4);
    return hipSuccess;
}
hipError_t hipMemsetD8Async(hipDeviceptr_t dst, unsigned char v, size_t n, hipStream_t s) {
    return stream_ok(s) ? hipMemsetD8(dst, v, n) : hipErrorInvalidHandle;
}
hipError_t hipMemsetD32Async(hipDeviceptr_t dst, int v, size_t n, hipStream_t s) {
    return stream_ok(s) ? hipMemsetD32(dst, v, n) : hipErrorInvalidHandle;
}

/* The symbol `name` in the ELF symbol table of a code object (NULL if absent); finds the built-in kernels. */
static const Elf64_Sym* elf_symbol(const unsigned char* image, size_t size, const char* name) {
    const Elf64_Ehdr* eh = (const Elf64_Ehdr*)image;
    if (eh->e_shoff == 0 || eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > size) return 0;
    const Elf64_Shdr* sh = (const Elf64_Shdr*)(image + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
        if (sh[i].sh_link >= eh->e_shnum) continue;
        const Elf64_Shdr* strs = &sh[sh[i].sh_link];
        if (sh[i].sh_offset + sh[i].sh_size > size || strs->sh_offset + strs->sh_size > size) continue;
        const Elf64_Sym* sym = (const Elf64_Sym*)(image + sh[i].sh_offset);
        size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
        for (size_t j = 0; j < count; j++) {
            if (sym[j].st_name >= strs->sh_size) continue;
            const char* s = (const char*)image + strs->sh_offset + sym[j].st_name;
            if (strnlen(s, strs->sh_size - sym[j].st_name) < strs->sh_size - sym[j].st_name && strcmp(s, name) == 0)
                return &sym[j];
        }
    }
    return NULL;
}

static int elf_has_symbol(const unsigned char* image, size_t size, const char* name) {
    return elf_symbol(image, size, name) != NULL;
}

/* The kernarg segment size in kernel `name`'s descriptor (`name`.kd, offset 8), 0 if unreadable. */
static uint32_t kernarg_size(const unsigned char* image, size_t size, const char* name) {
    char kd[64];
    snprintf(kd, sizeof kd, "%s.kd", name);
    const Elf64_Sym* sym = elf_symbol(image, size, kd);
    if (!sym) return 0;
    const Elf64_Ehdr* eh = (const Elf64_Ehdr*)image;
    const Elf64_Shdr* sh = (const Elf64_Shdr*)(image + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++)
        if (sh[i].sh_type == SHT_PROGBITS && sym->st_value >= sh[i].sh_addr &&
            sym->st_value + 12 <= sh[i].sh_addr + sh[i].sh_size) {
            size_t off = sh[i].sh_offset + (sym->st_value - sh[i].sh_addr);
            uint32_t v;
            if (off + 12 > size) return 0;
            memcpy(&v, image + off + 8, 4);
            return v;
        }
    return 0;
}

/* Each data object of the code object (STT_OBJECT, up to 64 bytes) becomes device memory holding its
 * initial bytes, for hipModuleGetGlobal and for the kernels that read globals. */
static void load_globals(struct ihipModule_t* m, const unsigned char* image, size_t size) {
    const Elf64_Ehdr* eh = (const Elf64_Ehdr*)image;
    const Elf64_Shdr* sh = (const Elf64_Shdr*)(image + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
        const Elf64_Shdr* strs = &sh[sh[i].sh_link];
        const Elf64_Sym* sym = (const Elf64_Sym*)(image + sh[i].sh_offset);
        for (size_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Sym) && m->nglobals < MAX_GLOBALS; j++) {
            if (ELF64_ST_TYPE(sym[j].st_info) != STT_OBJECT || sym[j].st_size == 0 || sym[j].st_size > 64 ||
                sym[j].st_shndx == SHN_UNDEF || sym[j].st_shndx >= eh->e_shnum || sym[j].st_name >= strs->sh_size)
                continue;
            const char* name = (const char*)image + strs->sh_offset + sym[j].st_name;
            const Elf64_Shdr* sec = &sh[sym[j].st_shndx];
            struct global* g = &m->globals[m->nglobals];
            if (strnlen(name, sizeof g->name) >= sizeof g->name) continue;
            g->ptr = add_alloc(sym[j].st_size, 0);
            if (!g->ptr) continue;
            strcpy(g->name, name);
            g->size = sym[j].st_size;
            size_t off = sec->sh_offset + (sym[j].st_value - sec->sh_addr);
            if (sec->sh_type == SHT_PROGBITS && off + g->size <= size) memcpy(g->ptr, image + off, g->size);
            m->nglobals++;
        }
    }
}

static struct global* global_of(struct ihipModule_t* m, const char* name) {
    for (int i = 0; i < m->nglobals; i++) if (strcmp(m->globals[i].name, name) == 0) return &m->globals[i];
    return NULL;
}

hipError_t hipModuleLoadData(hipModule_t* module, const void* image) {
    if (!module || !image) return hipErrorInvalidValue;
    const unsigned char* p = image;
    if (memcmp(p, ELFMAG, SELFMAG) != 0 || p[EI_CLASS] != ELFCLASS64) return hipErrorInvalidImage;
    const Elf64_Ehdr* eh = image;
    if (eh->e_machine != EM_AMDGPU) return hipErrorNoBinaryForGpu;
    /* The image's size: the end of its section header table, which hipRTC puts last. */
    size_t size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
    struct ihipModule_t* m = calloc(1, sizeof *m);
    if (!m) return hipErrorOutOfMemory;
    m->magic = MAGIC_MODULE; m->device = current;
    for (int k = 1; k <= K_FILL; k++)
        if (elf_has_symbol(p, size, kernel_names[k])) {
            m->funcs[m->nfuncs].magic = MAGIC_FUNC; m->funcs[m->nfuncs].kind = k;
            m->funcs[m->nfuncs].module = m; m->funcs[m->nfuncs].kernarg = kernarg_size(p, size, kernel_names[k]);
            m->nfuncs++;
        }
    load_globals(m, p, size);
    m->next = modules; modules = m; *module = m;
    return hipSuccess;
}
static struct ihipModule_t* module_of(hipModule_t m) {
    for (struct ihipModule_t* p = modules; p; p = p->next) if (p == m) return p;
    return NULL;
}
hipError_t hipModuleUnload(hipModule_t m) {
    for (struct ihipModule_t** pp = &modules; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            for (int i = 0; i < m->nglobals; i++) drop_alloc(m->globals[i].ptr, 0);
            m->magic = 0; free(m); return hipSuccess;
        }
    return hipErrorInvalidHandle;
}
hipError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t m, const char* name) {
    struct ihipModule_t* mod = module_of(m);
    if (!f || !name) return hipErrorInvalidValue;
    if (!mod) return hipErrorInvalidHandle;
    for (int i = 0; i < mod->nfuncs; i++)
        if (strcmp(kernel_names[mod->funcs[i].kind], name) == 0) { *f = &mod->funcs[i]; return hipSuccess; }
    return hipErrorNotFound;
}
hipError_t hipModuleGetGlobal(hipDeviceptr_t* dptr, size_t* bytes, hipModule_t m, const char* name) {
    struct ihipModule_t* mod = module_of(m);
    if (!name) return hipErrorInvalidValue;
    if (!mod) return hipErrorInvalidHandle;
    struct global* g = global_of(mod, name);
    if (!g) return hipErrorNotFound;
    if (dptr) *dptr = g->ptr;
    if (bytes) *bytes = g->size;
    return hipSuccess;
}

static int function_ok(hipFunction_t f) {
    for (struct ihipModule_t* m = modules; m; m = m->next)
        for (int i = 0; i < m->nfuncs; i++) if (&m->funcs[i] == f) return m->device == current;
    return 0;
}

hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                                 unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                 hipStream_t s, void** params, void** extra) {
    if (!function_ok(f) || !stream_ok(s)) return hipErrorInvalidHandle;
    if (!params || extra) return hipErrorInvalidValue;
    if (!gx || !gy || !gz || !bx || !by || !bz || (size_t)bx * by * bz > 1024) return hipErrorInvalidConfiguration;
    size_t threads = (size_t)gx * bx;
    if (f->kind == K_SCALE_OFFSET && f->kernarg >= TYPED_KERNARG) {
        /* the typed-params variant: (const float* x, float* y, float a, float2 pair, unsigned n, int k) */
        float* x = *(float**)params[0]; float* y = *(float**)params[1]; float a = *(float*)params[2];
        float* pair = (float*)params[3]; unsigned n = *(unsigned*)params[4]; int k = *(int*)params[5];
        size_t m = n < threads ? n : threads;
        if (!find(x, m * 4, 1) || !find(y, m * 4, 1)) return hipErrorIllegalAddress;
        for (size_t i = 0; i < m; i++) y[i] = a * x[i] + pair[0] - pair[1] * (float)k;
    } else if (f->kind == K_SCALE_OFFSET && f->kernarg == CONSTANTS_KERNARG) {
        /* the constants variant: (const float* x, float* y, unsigned n), y = x * SCALE + BIAS (module globals) */
        float* x = *(float**)params[0]; float* y = *(float**)params[1]; unsigned n = *(unsigned*)params[2];
        struct global *scale = global_of(f->module, "SCALE"), *bias = global_of(f->module, "BIAS");
        if (!scale || !bias) return hipErrorLaunchFailure;
        float sc; int bi;
        memcpy(&sc, scale->ptr, 4); memcpy(&bi, bias->ptr, 4);
        size_t m = n < threads ? n : threads;
        if (!find(x, m * 4, 1) || !find(y, m * 4, 1)) return hipErrorIllegalAddress;
        for (size_t i = 0; i < m; i++) y[i] = x[i] * sc + (float)bi;
    } else if (f->kind == K_SCALE_OFFSET) { /* (const float* x, float* y, float a, float b, unsigned n) */
        float* x = *(float**)params[0]; float* y = *(float**)params[1];
        float a = *(float*)params[2], b = *(float*)params[3]; unsigned n = *(unsigned*)params[4];
        size_t m = n < threads ? n : threads;
        if (!find(x, m * 4, 1) || !find(y, m * 4, 1)) return hipErrorIllegalAddress;
        for (size_t i = 0; i < m; i++) y[i] = a * x[i] + b;
    } else if (f->kind == K_SAXPY) { /* (const float* x, float* y, float a, int n) */
        float* x = *(float**)params[0]; float* y = *(float**)params[1]; float a = *(float*)params[2];
        int n = *(int*)params[3];
        size_t m = n < 0 ? 0 : (size_t)n < threads ? (size_t)n : threads;
        if (!find(x, m * 4, 1) || !find(y, m * 4, 1)) return hipErrorIllegalAddress;
        for (size_t i = 0; i < m; i++) y[i] = a * x[i] + y[i];
    } else { /* fill(unsigned* y, unsigned value, unsigned n) */
        unsigned* y = *(unsigned**)params[0]; unsigned v = *(unsigned*)params[1], n = *(unsigned*)params[2];
        size_t m = n < threads ? n : threads;
        if (!find(y, m * 4, 1)) return hipErrorIllegalAddress;
        for (size_t i = 0; i < m; i++) y[i] = v;
    }
    return hipSuccess;
}

/* For the tests: how many allocations, streams, events and modules are alive (nothing leaked: 0). */
int fakehip_live(void);
int fakehip_live(void) {
    int n = 0;
    for (struct alloc* a = allocs; a; a = a->next) n++;
    for (struct ihipStream_t* p = streams; p; p = p->next) n++;
    for (struct ihipEvent_t* p = events; p; p = p->next) n++;
    for (struct ihipModule_t* p = modules; p; p = p->next) n += 1 - p->nglobals;  /* globals die with it */
    return n;
}

const char* hipGetErrorName(hipError_t e) { return e == hipSuccess ? "hipSuccess" : "hipErrorFake"; }
const char* hipGetErrorString(hipError_t e) { return hipGetErrorName(e); }
