/* A fake Level Zero driver, loaded by the real loader (libze1) through ZE_ENABLE_ALT_DRIVERS and compiled
 * against the real ze_api.h / ze_ddi.h, so every prototype and struct is the spec's.
 *
 * Two GPUs.  Memory is host memory; command lists record commands and a queue runs them when executed (the
 * fake is synchronous, so work is done when zeCommandQueueExecuteCommandLists returns).  zeModuleCreate parses
 * the SPIR-V it is given (magic, OpEntryPoint Kernel, each entry's OpFunctionParameter types) and a kernel is
 * found by name in the module; the fake computes the kernels it knows by name: scale_offset (y = a*x + b)
 * and saxpy (y = a*x + y).  Kernel-timestamp events record the host clock (ns) around each command. */
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NDEV 2
#define MAXARGS 16
#define MAXENTRY 32

enum { K_CONTEXT = 0x5a450001, K_QUEUE, K_LIST, K_MODULE, K_KERNEL, K_LOG, K_POOL, K_EVENT, K_FENCE };

struct dev { int index; };
static int drv_tag;
static struct dev devs[NDEV] = {{0}, {1}};

typedef struct { uint32_t kind; } head_t;
struct _ze_context_handle_t { uint32_t kind; };
struct alloc { void* ptr; size_t size; ze_context_handle_t ctx; int device; struct alloc* next; };
static struct alloc* allocs;

struct entry { char name[64]; uint32_t nargs; uint32_t sizes[MAXARGS]; int pointer[MAXARGS]; };
struct _ze_module_handle_t { uint32_t kind; ze_context_handle_t ctx; int device; uint32_t n; struct entry e[MAXENTRY]; };
struct _ze_module_build_log_handle_t { uint32_t kind; char text[256]; };
struct _ze_kernel_handle_t {
    uint32_t kind; ze_module_handle_t module; struct entry* e; uint32_t set; uint64_t args[MAXARGS];
    uint32_t group[3];
};
struct _ze_event_pool_handle_t { uint32_t kind; uint32_t count; int timestamps; };
struct _ze_event_handle_t { uint32_t kind; ze_event_pool_handle_t pool; int signaled; uint64_t start, end; };
struct _ze_fence_handle_t { uint32_t kind; int signaled; };

enum { C_LAUNCH, C_COPY, C_FILL, C_SIGNAL, C_WAIT, C_RESET, C_BARRIER };
struct cmd {
    int type; ze_event_handle_t signal; uint32_t nwait; ze_event_handle_t waits[8];
    struct _ze_kernel_handle_t kernel; uint32_t groups[3];   /* a launch: the kernel as it was at append */
    void* dst; const void* src; size_t size; uint8_t pattern[16]; size_t pattern_size;
};
struct _ze_command_list_handle_t {
    uint32_t kind; ze_context_handle_t ctx; int device; int closed; uint32_t n, cap; struct cmd* cmds;
};
struct _ze_command_queue_handle_t { uint32_t kind; ze_context_handle_t ctx; int device; uint32_t ordinal; };

static int device_of(ze_device_handle_t h) {
    for (int i = 0; i < NDEV; i++) if (h == (ze_device_handle_t)&devs[i]) return i;
    return -1;
}
static uint64_t now_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
static struct alloc* find_alloc(const void* p) {
    for (struct alloc* a = allocs; a; a = a->next)
        if ((const char*)p >= (const char*)a->ptr && (const char*)p < (const char*)a->ptr + a->size) return a;
    return NULL;
}

/* -- driver and devices --------------------------------------------------------------------------------- */
static ze_result_t Init(ze_init_flags_t f) { (void)f; return ZE_RESULT_SUCCESS; }
static ze_result_t DriverGet(uint32_t* count, ze_driver_handle_t* d) {
    if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (d && *count >= 1) d[0] = (ze_driver_handle_t)&drv_tag;
    *count = 1; return ZE_RESULT_SUCCESS;
}
static ze_result_t DriverGetApiVersion(ze_driver_handle_t d, ze_api_version_t* v) { (void)d; *v = ZE_API_VERSION_1_3; return ZE_RESULT_SUCCESS; }
static ze_result_t DriverGetProperties(ze_driver_handle_t d, ze_driver_properties_t* p) {
    (void)d; p->driverVersion = 424242; memset(p->uuid.id, 7, sizeof p->uuid.id); return ZE_RESULT_SUCCESS;
}
static ze_result_t DeviceGet(ze_driver_handle_t d, uint32_t* count, ze_device_handle_t* out) {
    if (d != (ze_driver_handle_t)&drv_tag) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (out) for (uint32_t i = 0; i < NDEV && i < *count; i++) out[i] = (ze_device_handle_t)&devs[i];
    *count = NDEV; return ZE_RESULT_SUCCESS;
}
static ze_result_t DeviceGetProperties(ze_device_handle_t h, ze_device_properties_t* p) {
    int i = device_of(h);
    if (i < 0) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    p->type = ZE_DEVICE_TYPE_GPU; p->vendorId = 0x8086; p->deviceId = 0x0bd5 + i;
    p->flags = ZE_DEVICE_PROPERTY_FLAG_ONDEMANDPAGING; p->coreClockRate = 1600;
    p->maxMemAllocSize = 1ull << 32; p->numThreadsPerEU = 8; p->physicalEUSimdWidth = 16;
    p->numEUsPerSubslice = 8; p->numSubslicesPerSlice = 4; p->numSlices = 1;
    p->timerResolution = 1; p->timestampValidBits = 64; p->kernelTimestampValidBits = 64;
    memset(p->uuid.id, 0, sizeof p->uuid.id); p->uuid.id[0] = (uint8_t)(0xF0 + i);
    snprintf(p->name, sizeof p->name, "ironaccel fake Level Zero GPU %d", i);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t DeviceGetComputeProperties(ze_device_handle_t h, ze_device_compute_properties_t* p) {
    (void)h;
    p->maxTotalGroupSize = 1024; p->maxGroupSizeX = 1024; p->maxGroupSizeY = 1024; p->maxGroupSizeZ = 64;
    p->maxGroupCountX = 0xffffffffu; p->maxGroupCountY = 65535; p->maxGroupCountZ = 65535;
    p->maxSharedLocalMemory = 65536; p->numSubGroupSizes = 1; p->subGroupSizes[0] = 16;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t DeviceGetModuleProperties(ze_device_handle_t h, ze_device_module_properties_t* p) {
    (void)h; p->spirvVersionSupported = ZE_MAKE_VERSION(1, 2); p->flags = ZE_DEVICE_MODULE_FLAG_FP16;
    p->maxArgumentsSize = 2048; return ZE_RESULT_SUCCESS;
}
static ze_result_t DeviceGetMemoryProperties(ze_device_handle_t h, uint32_t* count, ze_device_memory_properties_t* p) {
    (void)h;
    if (p && *count >= 1) { p[0].totalSize = 8ull << 30; strcpy(p[0].name, "host memory"); }
    *count = 1; return ZE_RESULT_SUCCESS;
}
static ze_result_t DeviceGetCommandQueueGroupProperties(ze_device_handle_t h, uint32_t* count,
                                                        ze_command_queue_group_properties_t* p) {
    (void)h;
    if (p) {
        if (*count >= 1) {
            p[0].flags = ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
            p[0].numQueues = 4; p[0].maxMemoryFillPatternSize = 16;
        }
        if (*count >= 2) { p[1].flags = ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY; p[1].numQueues = 2; p[1].maxMemoryFillPatternSize = 16; }
    }
    *count = 2; return ZE_RESULT_SUCCESS;
}

/* -- context and memory --------------------------------------------------------------------------------- */
static ze_result_t ContextCreate(ze_driver_handle_t d, const ze_context_desc_t* desc, ze_context_handle_t* out) {
    (void)desc;
    if (d != (ze_driver_handle_t)&drv_tag) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    ze_context_handle_t c = calloc(1, sizeof *c);
    if (!c) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    c->kind = K_CONTEXT; *out = c; return ZE_RESULT_SUCCESS;
}
static ze_result_t ContextDestroy(ze_context_handle_t c) {
    if (!c || c->kind != K_CONTEXT) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    c->kind = 0; free(c); return ZE_RESULT_SUCCESS;
}
static ze_result_t alloc_any(ze_context_handle_t c, size_t size, size_t align, int device, void** out) {
    if (!c || c->kind != K_CONTEXT) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (size == 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    if (size > (1ull << 32)) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    if (align & (align - 1)) return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
    struct alloc* a = calloc(1, sizeof *a);
    void* p = NULL;
    if (!a || posix_memalign(&p, 64, size) != 0) { free(a); return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY; }
    memset(p, 0, size);
    a->ptr = p; a->size = size; a->ctx = c; a->device = device; a->next = allocs; allocs = a;
    *out = p; return ZE_RESULT_SUCCESS;
}
static ze_result_t MemAllocDevice(ze_context_handle_t c, const ze_device_mem_alloc_desc_t* d, size_t size,
                                  size_t align, ze_device_handle_t h, void** out) {
    (void)d; int i = device_of(h);
    if (i < 0) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return alloc_any(c, size, align, i, out);
}
static ze_result_t MemAllocHost(ze_context_handle_t c, const ze_host_mem_alloc_desc_t* d, size_t size, size_t align,
                                void** out) {
    (void)d; return alloc_any(c, size, align, -1, out);
}
static ze_result_t MemAllocShared(ze_context_handle_t c, const ze_device_mem_alloc_desc_t* d,
                                  const ze_host_mem_alloc_desc_t* hd, size_t size, size_t align,
                                  ze_device_handle_t h, void** out) {
    (void)d; (void)hd; return alloc_any(c, size, align, h ? device_of(h) : -1, out);
}
static ze_result_t MemFree(ze_context_handle_t c, void* p) {
    for (struct alloc** a = &allocs; *a; a = &(*a)->next) {
        if ((*a)->ptr == p && (*a)->ctx == c) {
            struct alloc* gone = *a; *a = gone->next; free(gone->ptr); free(gone); return ZE_RESULT_SUCCESS;
        }
    }
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
}

/* -- modules and kernels -------------------------------------------------------------------------------- */
static ze_result_t fail_build(ze_module_build_log_handle_t* log, const char* text) {
    if (log) {
        ze_module_build_log_handle_t l = calloc(1, sizeof *l);
        if (l) { l->kind = K_LOG; snprintf(l->text, sizeof l->text, "%s", text); }
        *log = l;
    }
    return ZE_RESULT_ERROR_MODULE_BUILD_FAILURE;
}

/* The entry points of a SPIR-V module and their parameters' sizes (pointers: 8 bytes, scalars: their width). */
static ze_result_t parse_spirv(const uint32_t* w, size_t n, ze_module_handle_t m, ze_module_build_log_handle_t* log) {
    if (n < 5 || w[0] != 0x07230203u) return fail_build(log, "not SPIR-V: the magic number 0x07230203 is missing");
    uint32_t bound = w[3];
    if (bound == 0 || bound > (1u << 20)) return fail_build(log, "SPIR-V header has a bad id bound");
    uint32_t* width = calloc(bound, sizeof *width);   /* scalar types: bits; pointers: 64 */
    uint32_t* fntype = calloc(bound, sizeof *fntype);  /* OpFunction id -> OpTypeFunction id */
    size_t* fnword = calloc(bound, sizeof *fnword);    /* OpTypeFunction id -> its word offset */
    uint32_t entries[MAXENTRY];
    ze_result_t res = ZE_RESULT_SUCCESS;
    int kernel_cap = 0;
    if (!width || !fntype || !fnword) { res = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY; goto out; }
    for (size_t i = 5; i < n;) {
        uint32_t count = w[i] >> 16, op = w[i] & 0xffff;
        if (count == 0 || i + count > n) { res = fail_build(log, "SPIR-V instruction runs past the end of the module"); goto out; }
        if (op == 17 && count >= 2 && w[i + 1] == 6) kernel_cap = 1;                       /* OpCapability Kernel */
        if ((op == 21 || op == 22) && count >= 3 && w[i + 1] < bound) width[w[i + 1]] = w[i + 2];  /* OpTypeInt/Float */
        if (op == 32 && count >= 4 && w[i + 1] < bound) width[w[i + 1]] = 64;              /* OpTypePointer */
        if (op == 33 && count >= 3 && w[i + 1] < bound) fnword[w[i + 1]] = i;                /* OpTypeFunction */
        if (op == 54 && count >= 5 && w[i + 2] < bound) fntype[w[i + 2]] = w[i + 4];         /* OpFunction */
        if (op == 15 && count >= 4) {                                                       /* OpEntryPoint */
            if (w[i + 1] != 6) { res = fail_build(log, "an OpEntryPoint is not an OpenCL Kernel (Level Zero runs kernels, not shaders)"); goto out; }
            if (m->n >= MAXENTRY) { res = fail_build(log, "too many entry points for the fake"); goto out; }
            struct entry* e = &m->e[m->n];
            size_t len = (count - 3) * 4;
            const char* name = (const char*)&w[i + 3];
            size_t k = 0;
            while (k < len && name[k]) k++;
            if (k == len || k >= sizeof e->name) { res = fail_build(log, "an OpEntryPoint name is not terminated"); goto out; }
            memcpy(e->name, name, k + 1);
            entries[m->n++] = w[i + 2];
        }
        i += count;
    }
    if (!kernel_cap) { res = fail_build(log, "the module does not declare OpCapability Kernel"); goto out; }
    if (m->n == 0) { res = fail_build(log, "the module has no OpEntryPoint"); goto out; }
    for (uint32_t k = 0; k < m->n; k++) {
        uint32_t id = entries[k];
        uint32_t t = id < bound ? fntype[id] : 0;
        size_t at = t < bound ? fnword[t] : 0;
        if (!at) { res = fail_build(log, "an entry point has no OpFunction with an OpTypeFunction"); goto out; }
        uint32_t params = (w[at] >> 16) - 3;
        if (params > MAXARGS) { res = fail_build(log, "too many kernel arguments for the fake"); goto out; }
        m->e[k].nargs = params;
        for (uint32_t p = 0; p < params; p++) {
            uint32_t type = w[at + 3 + p];
            uint32_t bits = type < bound ? width[type] : 0;
            if (!bits) { res = fail_build(log, "a kernel argument has a type the fake does not size"); goto out; }
            m->e[k].sizes[p] = bits / 8; m->e[k].pointer[p] = bits == 64 && type < bound;
        }
    }
out:
    free(width); free(fntype); free(fnword);
    return res;
}

static ze_result_t ModuleCreate(ze_context_handle_t c, ze_device_handle_t h, const ze_module_desc_t* desc,
                                ze_module_handle_t* out, ze_module_build_log_handle_t* log) {
    if (log) *log = NULL;
    int dev = device_of(h);
    if (!c || c->kind != K_CONTEXT || dev < 0) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !out || !desc->pInputModule) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (desc->format != ZE_MODULE_FORMAT_IL_SPIRV) return ZE_RESULT_ERROR_INVALID_NATIVE_BINARY;
    if (desc->inputSize == 0 || desc->inputSize % 4) return fail_build(log, "SPIR-V size is not a multiple of 4 bytes");
    ze_module_handle_t m = calloc(1, sizeof *m);
    if (!m) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    m->kind = K_MODULE; m->ctx = c; m->device = dev;
    ze_result_t res = parse_spirv((const uint32_t*)desc->pInputModule, desc->inputSize / 4, m, log);
    if (res != ZE_RESULT_SUCCESS) { free(m); return res; }
    if (log) { *log = calloc(1, sizeof **log); if (*log) (*log)->kind = K_LOG; }
    *out = m; return ZE_RESULT_SUCCESS;
}
static ze_result_t ModuleDestroy(ze_module_handle_t m) {
    if (!m || m->kind != K_MODULE) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    m->kind = 0; free(m); return ZE_RESULT_SUCCESS;
}
static ze_result_t LogGetString(ze_module_build_log_handle_t l, size_t* size, char* text) {
    if (!l || l->kind != K_LOG) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    size_t need = strlen(l->text) + 1;
    if (text) memcpy(text, l->text, *size < need ? *size : need);
    *size = need; return ZE_RESULT_SUCCESS;
}
static ze_result_t LogDestroy(ze_module_build_log_handle_t l) {
    if (!l || l->kind != K_LOG) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    l->kind = 0; free(l); return ZE_RESULT_SUCCESS;
}
static ze_result_t KernelCreate(ze_module_handle_t m, const ze_kernel_desc_t* desc, ze_kernel_handle_t* out) {
    if (!m || m->kind != K_MODULE) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !desc->pKernelName || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    for (uint32_t i = 0; i < m->n; i++) {
        if (strcmp(m->e[i].name, desc->pKernelName) == 0) {
            ze_kernel_handle_t k = calloc(1, sizeof *k);
            if (!k) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
            k->kind = K_KERNEL; k->module = m; k->e = &m->e[i]; k->group[0] = k->group[1] = k->group[2] = 1;
            *out = k; return ZE_RESULT_SUCCESS;
        }
    }
    return ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
}
static ze_result_t KernelDestroy(ze_kernel_handle_t k) {
    if (!k || k->kind != K_KERNEL) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    k->kind = 0; free(k); return ZE_RESULT_SUCCESS;
}
static ze_result_t KernelSetArgumentValue(ze_kernel_handle_t k, uint32_t index, size_t size, const void* value) {
    if (!k || k->kind != K_KERNEL) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (index >= k->e->nargs) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
    if (size != k->e->sizes[index]) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
    uint64_t v = 0;
    if (value) memcpy(&v, value, size);
    if (k->e->pointer[index] && v) {
        struct alloc* a = find_alloc((void*)(uintptr_t)v);
        if (!a || a->ctx != k->module->ctx) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  /* not memory of this context */
    }
    k->args[index] = v; k->set |= 1u << index;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t KernelSetGroupSize(ze_kernel_handle_t k, uint32_t x, uint32_t y, uint32_t z) {
    if (!k || k->kind != K_KERNEL) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!x || !y || !z || (uint64_t)x * y * z > 1024) return ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION;
    k->group[0] = x; k->group[1] = y; k->group[2] = z; return ZE_RESULT_SUCCESS;
}
static ze_result_t KernelGetProperties(ze_kernel_handle_t k, ze_kernel_properties_t* p) {
    if (!k || k->kind != K_KERNEL) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    p->numKernelArgs = k->e->nargs; p->requiredGroupSizeX = p->requiredGroupSizeY = p->requiredGroupSizeZ = 0;
    p->maxSubgroupSize = 16; p->maxNumSubgroups = 64; p->localMemSize = 0; p->privateMemSize = 0; p->spillMemSize = 0;
    return ZE_RESULT_SUCCESS;
}

/* -- events and fences ---------------------------------------------------------------------------------- */
static ze_result_t EventPoolCreate(ze_context_handle_t c, const ze_event_pool_desc_t* d, uint32_t n,
                                   ze_device_handle_t* devices, ze_event_pool_handle_t* out) {
    (void)n; (void)devices;
    if (!c || c->kind != K_CONTEXT) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!d || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (d->count == 0) return ZE_RESULT_ERROR_INVALID_SIZE;
    ze_event_pool_handle_t p = calloc(1, sizeof *p);
    if (!p) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    p->kind = K_POOL; p->count = d->count; p->timestamps = !!(d->flags & ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP);
    *out = p; return ZE_RESULT_SUCCESS;
}
static ze_result_t EventPoolDestroy(ze_event_pool_handle_t p) {
    if (!p || p->kind != K_POOL) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    p->kind = 0; free(p); return ZE_RESULT_SUCCESS;
}
static ze_result_t EventCreate(ze_event_pool_handle_t p, const ze_event_desc_t* d, ze_event_handle_t* out) {
    if (!p || p->kind != K_POOL) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!d || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (d->index >= p->count) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    ze_event_handle_t e = calloc(1, sizeof *e);
    if (!e) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    e->kind = K_EVENT; e->pool = p; *out = e; return ZE_RESULT_SUCCESS;
}
static ze_result_t EventDestroy(ze_event_handle_t e) {
    if (!e || e->kind != K_EVENT) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    e->kind = 0; free(e); return ZE_RESULT_SUCCESS;
}
static ze_result_t EventHostSignal(ze_event_handle_t e) {
    if (!e || e->kind != K_EVENT) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    e->signaled = 1; return ZE_RESULT_SUCCESS;
}
static ze_result_t EventHostReset(ze_event_handle_t e) {
    if (!e || e->kind != K_EVENT) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    e->signaled = 0; return ZE_RESULT_SUCCESS;
}
static ze_result_t EventQueryStatus(ze_event_handle_t e) {
    if (!e || e->kind != K_EVENT) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return e->signaled ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}
static ze_result_t EventHostSynchronize(ze_event_handle_t e, uint64_t timeout) { (void)timeout; return EventQueryStatus(e); }
static ze_result_t EventQueryKernelTimestamp(ze_event_handle_t e, ze_kernel_timestamp_result_t* r) {
    if (!e || e->kind != K_EVENT) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!e->pool->timestamps) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (!e->signaled) return ZE_RESULT_NOT_READY;
    r->global.kernelStart = r->context.kernelStart = e->start;
    r->global.kernelEnd = r->context.kernelEnd = e->end;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t FenceCreate(ze_command_queue_handle_t q, const ze_fence_desc_t* d, ze_fence_handle_t* out) {
    (void)d;
    if (!q || q->kind != K_QUEUE) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    ze_fence_handle_t f = calloc(1, sizeof *f);
    if (!f) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    f->kind = K_FENCE; *out = f; return ZE_RESULT_SUCCESS;
}
static ze_result_t FenceDestroy(ze_fence_handle_t f) {
    if (!f || f->kind != K_FENCE) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    f->kind = 0; free(f); return ZE_RESULT_SUCCESS;
}
static ze_result_t FenceQueryStatus(ze_fence_handle_t f) {
    if (!f || f->kind != K_FENCE) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    return f->signaled ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}
static ze_result_t FenceHostSynchronize(ze_fence_handle_t f, uint64_t timeout) { (void)timeout; return FenceQueryStatus(f); }
static ze_result_t FenceReset(ze_fence_handle_t f) {
    if (!f || f->kind != K_FENCE) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    f->signaled = 0; return ZE_RESULT_SUCCESS;
}

/* -- command lists and queues --------------------------------------------------------------------------- */
static ze_result_t ListCreate(ze_context_handle_t c, ze_device_handle_t h, const ze_command_list_desc_t* d,
                              ze_command_list_handle_t* out) {
    (void)d; int dev = device_of(h);
    if (!c || c->kind != K_CONTEXT || dev < 0) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    ze_command_list_handle_t l = calloc(1, sizeof *l);
    if (!l) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    l->kind = K_LIST; l->ctx = c; l->device = dev; *out = l; return ZE_RESULT_SUCCESS;
}
static ze_result_t ListDestroy(ze_command_list_handle_t l) {
    if (!l || l->kind != K_LIST) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    l->kind = 0; free(l->cmds); free(l); return ZE_RESULT_SUCCESS;
}
static ze_result_t ListClose(ze_command_list_handle_t l) {
    if (!l || l->kind != K_LIST) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    l->closed = 1; return ZE_RESULT_SUCCESS;
}
static ze_result_t ListReset(ze_command_list_handle_t l) {
    if (!l || l->kind != K_LIST) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    l->closed = 0; l->n = 0; return ZE_RESULT_SUCCESS;
}
static ze_result_t append(ze_command_list_handle_t l, struct cmd* c, ze_event_handle_t signal, uint32_t nwait,
                          ze_event_handle_t* waits) {
    if (!l || l->kind != K_LIST) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (l->closed) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  /* appending to a closed list */
    if (nwait > 8) return ZE_RESULT_ERROR_INVALID_SIZE;
    if (signal && signal->kind != K_EVENT) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    for (uint32_t i = 0; i < nwait; i++) if (!waits || !waits[i] || waits[i]->kind != K_EVENT) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 16;
        struct cmd* grown = realloc(l->cmds, cap * sizeof *grown);
        if (!grown) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        l->cmds = grown; l->cap = cap;
    }
    c->signal = signal; c->nwait = nwait;
    for (uint32_t i = 0; i < nwait; i++) c->waits[i] = waits[i];
    l->cmds[l->n++] = *c; return ZE_RESULT_SUCCESS;
}
static const char* known[] = {"scale_offset", "saxpy"};
static ze_result_t AppendLaunchKernel(ze_command_list_handle_t l, ze_kernel_handle_t k, const ze_group_count_t* g,
                                      ze_event_handle_t signal, uint32_t nwait, ze_event_handle_t* waits) {
    if (!k || k->kind != K_KERNEL || !l || l->kind != K_LIST) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!g) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (k->module->ctx != l->ctx || k->module->device != l->device) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (!g->groupCountX || !g->groupCountY || !g->groupCountZ || g->groupCountY > 65535 || g->groupCountZ > 65535)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (k->set != (k->e->nargs >= 32 ? 0xffffffffu : (1u << k->e->nargs) - 1)) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
    int found = 0;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) found |= strcmp(k->e->name, known[i]) == 0;
    if (!found) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;  /* the fake computes only the kernels it knows */
    struct cmd c = {0};
    c.type = C_LAUNCH; c.kernel = *k; c.groups[0] = g->groupCountX; c.groups[1] = g->groupCountY; c.groups[2] = g->groupCountZ;
    return append(l, &c, signal, nwait, waits);
}
static ze_result_t AppendMemoryCopy(ze_command_list_handle_t l, void* dst, const void* src, size_t size,
                                    ze_event_handle_t signal, uint32_t nwait, ze_event_handle_t* waits) {
    if (!dst || !src) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    struct alloc* d = find_alloc(dst); struct alloc* s = find_alloc(src);
    if (d && (char*)dst + size > (char*)d->ptr + d->size) return ZE_RESULT_ERROR_INVALID_SIZE;
    if (s && (const char*)src + size > (char*)s->ptr + s->size) return ZE_RESULT_ERROR_INVALID_SIZE;
    struct cmd c = {0};
    c.type = C_COPY; c.dst = dst; c.src = src; c.size = size;
    return append(l, &c, signal, nwait, waits);
}
static ze_result_t AppendMemoryFill(ze_command_list_handle_t l, void* ptr, const void* pattern, size_t psize,
                                    size_t size, ze_event_handle_t signal, uint32_t nwait, ze_event_handle_t* waits) {
    if (!ptr || !pattern) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (!psize || psize > 16 || (psize & (psize - 1)) || size % psize) return ZE_RESULT_ERROR_INVALID_SIZE;
    struct alloc* d = find_alloc(ptr);
    if (!d || (char*)ptr + size > (char*)d->ptr + d->size) return ZE_RESULT_ERROR_INVALID_SIZE;
    struct cmd c = {0};
    c.type = C_FILL; c.dst = ptr; c.size = size; c.pattern_size = psize; memcpy(c.pattern, pattern, psize);
    return append(l, &c, signal, nwait, waits);
}
static ze_result_t AppendBarrier(ze_command_list_handle_t l, ze_event_handle_t signal, uint32_t nwait, ze_event_handle_t* waits) {
    struct cmd c = {0}; c.type = C_BARRIER; return append(l, &c, signal, nwait, waits);
}
static ze_result_t AppendSignalEvent(ze_command_list_handle_t l, ze_event_handle_t e) {
    if (!e) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    struct cmd c = {0}; c.type = C_SIGNAL; return append(l, &c, e, 0, NULL);
}
static ze_result_t AppendWaitOnEvents(ze_command_list_handle_t l, uint32_t n, ze_event_handle_t* e) {
    struct cmd c = {0}; c.type = C_WAIT; return append(l, &c, NULL, n, e);
}
static ze_result_t AppendEventReset(ze_command_list_handle_t l, ze_event_handle_t e) {
    if (!e) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    struct cmd c = {0}; c.type = C_RESET; c.dst = e; return append(l, &c, NULL, 0, NULL);
}

static ze_result_t QueueCreate(ze_context_handle_t c, ze_device_handle_t h, const ze_command_queue_desc_t* d,
                               ze_command_queue_handle_t* out) {
    int dev = device_of(h);
    if (!c || c->kind != K_CONTEXT || dev < 0) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!d || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (d->ordinal >= 2 || d->index >= (d->ordinal == 0 ? 4u : 2u)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    ze_command_queue_handle_t q = calloc(1, sizeof *q);
    if (!q) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    q->kind = K_QUEUE; q->ctx = c; q->device = dev; q->ordinal = d->ordinal; *out = q; return ZE_RESULT_SUCCESS;
}
static ze_result_t QueueDestroy(ze_command_queue_handle_t q) {
    if (!q || q->kind != K_QUEUE) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    q->kind = 0; free(q); return ZE_RESULT_SUCCESS;
}
static ze_result_t QueueSynchronize(ze_command_queue_handle_t q, uint64_t timeout) {
    (void)timeout; return q && q->kind == K_QUEUE ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
}

static void run_kernel(const struct cmd* c) {
    const struct _ze_kernel_handle_t* k = &c->kernel;
    uint64_t total = (uint64_t)c->groups[0] * k->group[0] * c->groups[1] * k->group[1] * c->groups[2] * k->group[2];
    float* x = (float*)(uintptr_t)k->args[0];
    float* y = (float*)(uintptr_t)k->args[1];
    float a; memcpy(&a, &k->args[2], 4);
    if (strcmp(k->e->name, "scale_offset") == 0) {
        float b; memcpy(&b, &k->args[3], 4);
        uint32_t n = (uint32_t)k->args[4];
        for (uint64_t i = 0; i < total && i < n; i++) y[i] = a * x[i] + b;
    } else {  /* saxpy */
        uint32_t n = (uint32_t)k->args[3];
        for (uint64_t i = 0; i < total && i < n; i++) y[i] = a * x[i] + y[i];
    }
}

static ze_result_t QueueExecute(ze_command_queue_handle_t q, uint32_t n, ze_command_list_handle_t* lists, ze_fence_handle_t f) {
    if (!q || q->kind != K_QUEUE) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!lists || !n) return ZE_RESULT_ERROR_INVALID_SIZE;
    if (f && f->kind != K_FENCE) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    for (uint32_t i = 0; i < n; i++) {
        if (!lists[i] || lists[i]->kind != K_LIST) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
        if (!lists[i]->closed) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  /* a list must be closed to run */
        if (lists[i]->ctx != q->ctx || lists[i]->device != q->device) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        for (uint32_t j = 0; j < lists[i]->n; j++) {
            struct cmd* c = &lists[i]->cmds[j];
            for (uint32_t w = 0; w < c->nwait; w++)  /* synchronous: what it waits for must have happened */
                if (!c->waits[w]->signaled) return ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < lists[i]->n; j++) {
            struct cmd* c = &lists[i]->cmds[j];
            uint64_t start = now_ns();
            switch (c->type) {
            case C_LAUNCH: run_kernel(c); break;
            case C_COPY: memmove(c->dst, c->src, c->size); break;
            case C_FILL: for (size_t b = 0; b < c->size; b += c->pattern_size) memcpy((char*)c->dst + b, c->pattern, c->pattern_size); break;
            case C_RESET: ((ze_event_handle_t)c->dst)->signaled = 0; break;
            default: break;
            }
            if (c->signal) { c->signal->start = start; c->signal->end = now_ns(); c->signal->signaled = 1; }
        }
    }
    if (f) f->signaled = 1;
    return ZE_RESULT_SUCCESS;
}

/* -- the tables the loader asks for ---------------------------------------------------------------------- */
#define TABLE(Name, type) ZE_DLLEXPORT ze_result_t ZE_APICALL zeGet##Name##ProcAddrTable(ze_api_version_t v, type* t)
#define EMPTY(Name, type) TABLE(Name, type) { (void)v; if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER; memset(t, 0, sizeof *t); return ZE_RESULT_SUCCESS; }

TABLE(Global, ze_global_dditable_t) { (void)v; t->pfnInit = Init; return ZE_RESULT_SUCCESS; }
TABLE(Driver, ze_driver_dditable_t) {
    (void)v; memset(t, 0, sizeof *t);
    t->pfnGet = DriverGet; t->pfnGetApiVersion = DriverGetApiVersion; t->pfnGetProperties = DriverGetProperties;
    return ZE_RESULT_SUCCESS;
}
TABLE(Device, ze_device_dditable_t) {
    (void)v; memset(t, 0, sizeof *t);
    t->pfnGet = DeviceGet; t->pfnGetProperties = DeviceGetProperties; t->pfnGetComputeProperties = DeviceGetComputeProperties;
    t->pfnGetModuleProperties = DeviceGetModuleProperties; t->pfnGetMemoryProperties = DeviceGetMemoryProperties;
    t->pfnGetCommandQueueGroupProperties = DeviceGetCommandQueueGroupProperties;
    return ZE_RESULT_SUCCESS;
}
TABLE(Context, ze_context_dditable_t) {
    (void)v; memset(t, 0, sizeof *t); t->pfnCreate = ContextCreate; t->pfnDestroy = ContextDestroy; return ZE_RESULT_SUCCESS;
}
TABLE(CommandQueue, ze_command_queue_dditable_t) {
    (void)v; memset(t, 0, sizeof *t);
    t->pfnCreate = QueueCreate; t->pfnDestroy = QueueDestroy; t->pfnExecuteCommandLists = QueueExecute;
    t->pfnSynchronize = QueueSynchronize; return ZE_RESULT_SUCCESS;
}
TABLE(CommandList, ze_command_list_dditable_t) {
    (void)v; memset(t, 0, sizeof *t);
    t->pfnCreate = ListCreate; t->pfnDestroy = ListDestroy; t->pfnClose = ListClose; t->pfnReset = ListReset;
    t->pfnAppendLaunchKernel = AppendLaunchKernel; t->pfnAppendMemoryCopy = AppendMemoryCopy;
    t->pfnAppendMemoryFill = AppendMemoryFill; t->pfnAppendBarrier = AppendBarrier;
    t->pfnAppendSignalEvent = AppendSignalEvent; t->pfnAppendWaitOnEvents = AppendWaitOnEvents;
    t->pfnAppendEventReset = AppendEventReset; return ZE_RESULT_SUCCESS;
}
TABLE(Fence, ze_fence_dditable_t) {
    (void)v; memset(t, 0, sizeof *t);
    t->pfnCreate = FenceCreate; t->pfnDestroy = FenceDestroy; t->pfnHostSynchronize = FenceHostSynchronize;
    t->pfnQueryStatus = FenceQueryStatus; t->pfnReset = FenceReset; return ZE_RESULT_SUCCESS;
}
TABLE(EventPool, ze_event_pool_dditable_t) {
    (void)v; memset(t, 0, sizeof *t); t->pfnCreate = EventPoolCreate; t->pfnDestroy = EventPoolDestroy; return ZE_RESULT_SUCCESS;
}
TABLE(Event, ze_event_dditable_t) {
    (void)v; memset(t, 0, sizeof *t);
    t->pfnCreate = EventCreate; t->pfnDestroy = EventDestroy; t->pfnHostSignal = EventHostSignal;
    t->pfnHostSynchronize = EventHostSynchronize; t->pfnQueryStatus = EventQueryStatus; t->pfnHostReset = EventHostReset;
    t->pfnQueryKernelTimestamp = EventQueryKernelTimestamp; return ZE_RESULT_SUCCESS;
}
TABLE(Module, ze_module_dditable_t) {
    (void)v; memset(t, 0, sizeof *t); t->pfnCreate = ModuleCreate; t->pfnDestroy = ModuleDestroy; return ZE_RESULT_SUCCESS;
}
TABLE(ModuleBuildLog, ze_module_build_log_dditable_t) {
    (void)v; memset(t, 0, sizeof *t); t->pfnDestroy = LogDestroy; t->pfnGetString = LogGetString; return ZE_RESULT_SUCCESS;
}
TABLE(Kernel, ze_kernel_dditable_t) {
    (void)v; memset(t, 0, sizeof *t);
    t->pfnCreate = KernelCreate; t->pfnDestroy = KernelDestroy; t->pfnSetArgumentValue = KernelSetArgumentValue;
    t->pfnSetGroupSize = KernelSetGroupSize; t->pfnGetProperties = KernelGetProperties; return ZE_RESULT_SUCCESS;
}
TABLE(Mem, ze_mem_dditable_t) {
    (void)v; memset(t, 0, sizeof *t);
    t->pfnAllocDevice = MemAllocDevice; t->pfnAllocHost = MemAllocHost; t->pfnAllocShared = MemAllocShared;
    t->pfnFree = MemFree; return ZE_RESULT_SUCCESS;
}
EMPTY(DeviceExp, ze_device_exp_dditable_t)
EMPTY(Image, ze_image_dditable_t)
EMPTY(ImageExp, ze_image_exp_dditable_t)
EMPTY(EventExp, ze_event_exp_dditable_t)
EMPTY(KernelExp, ze_kernel_exp_dditable_t)
EMPTY(Sampler, ze_sampler_dditable_t)
EMPTY(PhysicalMem, ze_physical_mem_dditable_t)
EMPTY(VirtualMem, ze_virtual_mem_dditable_t)
EMPTY(FabricVertexExp, ze_fabric_vertex_exp_dditable_t)
EMPTY(FabricEdgeExp, ze_fabric_edge_exp_dditable_t)

/* Tools and sysman: present (the loader asks every driver for them), empty. */
#define EMPTY_TOOL(prefix, Name, type) ZE_DLLEXPORT ze_result_t ZE_APICALL prefix##Get##Name##ProcAddrTable(ze_api_version_t v, type* t) \
    { (void)v; if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER; memset(t, 0, sizeof *t); return ZE_RESULT_SUCCESS; }
EMPTY_TOOL(zet, Device, zet_device_dditable_t)
EMPTY_TOOL(zet, Context, zet_context_dditable_t)
EMPTY_TOOL(zet, CommandList, zet_command_list_dditable_t)
EMPTY_TOOL(zet, Module, zet_module_dditable_t)
EMPTY_TOOL(zet, Kernel, zet_kernel_dditable_t)
EMPTY_TOOL(zet, MetricGroup, zet_metric_group_dditable_t)
EMPTY_TOOL(zet, MetricGroupExp, zet_metric_group_exp_dditable_t)
EMPTY_TOOL(zet, Metric, zet_metric_dditable_t)
EMPTY_TOOL(zet, MetricStreamer, zet_metric_streamer_dditable_t)
EMPTY_TOOL(zet, MetricQueryPool, zet_metric_query_pool_dditable_t)
EMPTY_TOOL(zet, MetricQuery, zet_metric_query_dditable_t)
EMPTY_TOOL(zet, TracerExp, zet_tracer_exp_dditable_t)
EMPTY_TOOL(zet, Debug, zet_debug_dditable_t)
EMPTY_TOOL(zes, Driver, zes_driver_dditable_t)
EMPTY_TOOL(zes, Device, zes_device_dditable_t)
EMPTY_TOOL(zes, Scheduler, zes_scheduler_dditable_t)
EMPTY_TOOL(zes, PerformanceFactor, zes_performance_factor_dditable_t)
EMPTY_TOOL(zes, Power, zes_power_dditable_t)
EMPTY_TOOL(zes, Frequency, zes_frequency_dditable_t)
EMPTY_TOOL(zes, Engine, zes_engine_dditable_t)
EMPTY_TOOL(zes, Standby, zes_standby_dditable_t)
EMPTY_TOOL(zes, Firmware, zes_firmware_dditable_t)
EMPTY_TOOL(zes, Memory, zes_memory_dditable_t)
EMPTY_TOOL(zes, FabricPort, zes_fabric_port_dditable_t)
EMPTY_TOOL(zes, Temperature, zes_temperature_dditable_t)
EMPTY_TOOL(zes, Psu, zes_psu_dditable_t)
EMPTY_TOOL(zes, Fan, zes_fan_dditable_t)
EMPTY_TOOL(zes, Led, zes_led_dditable_t)
EMPTY_TOOL(zes, Ras, zes_ras_dditable_t)
EMPTY_TOOL(zes, Diagnostics, zes_diagnostics_dditable_t)
