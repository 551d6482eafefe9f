/* The fake driver's JIT linker (cuLinkCreate/AddData/AddFile/Complete/Destroy), for ironaccel's cuLink* backend.
 *
 * Nothing is compiled: each input is checked as the driver checks its kind (a CUDA ELF for CUBIN, NUL-ended text
 * with ".version" for PTX, an archive for a library), and the "linked CUBIN" is a minimal CUDA ELF for the target
 * (CU_JIT_TARGET, else the first CUBIN's, else sm_90) whose string table holds every identifier of every input,
 * so the fake's cuModuleLoadData finds the kernels of kernels.py in it.  The info log names the options the link
 * was given (what the tests check), the error log why an input was refused.
 */
#include "fake_cuda.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC_LINK 0x4c494e4bU

struct link {
    unsigned magic; int sm, sm_set, inputs; char *info, *error; size_t info_size, error_size;
    char opts[256]; char *names; size_t nnames; char *out;
};

static struct link *get_link(CUlinkState h) { struct link *l = (struct link *)h; return (l && l->magic == MAGIC_LINK) ? l : NULL; }

static void put_log(char *buf, size_t size, const char *text) {
    if (buf && size) { strncpy(buf, text, size - 1); buf[size - 1] = '\0'; }
}

static void add_opts(struct link *l, unsigned n, CUjit_option *o, void **v) {
    for (unsigned i = 0; i < n; i++) {
        uintptr_t x = (uintptr_t)v[i]; char word[48] = "";
        switch (o[i]) {
        case CU_JIT_INFO_LOG_BUFFER: l->info = (char *)v[i]; break;
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: l->info_size = (size_t)x; break;
        case CU_JIT_ERROR_LOG_BUFFER: l->error = (char *)v[i]; break;
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: l->error_size = (size_t)x; break;
        case CU_JIT_TARGET: l->sm = (int)x; l->sm_set = 1; snprintf(word, sizeof word, " target=%d", (int)x); break;
        case CU_JIT_OPTIMIZATION_LEVEL: snprintf(word, sizeof word, " opt=%d", (int)x); break;
        case CU_JIT_MAX_REGISTERS: snprintf(word, sizeof word, " maxreg=%d", (int)x); break;
        case CU_JIT_GENERATE_DEBUG_INFO: snprintf(word, sizeof word, " debug=%d", (int)x); break;
        case CU_JIT_GENERATE_LINE_INFO: snprintf(word, sizeof word, " lineinfo=%d", (int)x); break;
        case CU_JIT_LOG_VERBOSE: snprintf(word, sizeof word, " verbose=%d", (int)x); break;
        default: snprintf(word, sizeof word, " option%d", (int)o[i]); break;
        }
        if (strlen(l->opts) + strlen(word) < sizeof l->opts) strcat(l->opts, word);
    }
}

CUresult cuLinkCreate(unsigned int n, CUjit_option *options, void **values, CUlinkState *out) {
    CUresult r = fake_cuda_check(); if (r) return r;
    if (fake_cuda_current_device() < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (!out || (n && (!options || !values))) return CUDA_ERROR_INVALID_VALUE;
    struct link *l = calloc(1, sizeof *l); l->magic = MAGIC_LINK; l->sm = 90;
    add_opts(l, n, options, values);
    l->names = calloc(1, 1); l->nnames = 1;  /* the string table starts with NUL */
    *out = (CUlinkState)l; return CUDA_SUCCESS;
}

static void add_names(struct link *l, const char *data, size_t size) {
    l->names = realloc(l->names, l->nnames + size + 1);
    for (size_t i = 0; i < size; i++) {
        char c = data[i];
        int ident = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        l->names[l->nnames + i] = ident ? c : '\0';
    }
    l->nnames += size; l->names[l->nnames++] = '\0';
}

CUresult cuLinkAddData(CUlinkState h, CUjitInputType type, void *data, size_t size, const char *name, unsigned int n,
                       CUjit_option *options, void **values) {
    CUresult r = fake_cuda_check(); if (r) return r;
    struct link *l = get_link(h); if (!l) return CUDA_ERROR_INVALID_HANDLE;
    if (!data || !size) return CUDA_ERROR_INVALID_VALUE;
    const char *d = data; char why[160] = "";
    (void)n; (void)options; (void)values;
    switch (type) {
    case CU_JIT_INPUT_CUBIN:
        if (size < 64 || memcmp(d, "\x7f" "ELF", 4) != 0 || *(const unsigned short *)(d + 18) != 190) {
            snprintf(why, sizeof why, "fake cuLink: input %s is not a CUDA CUBIN", name ? name : "?");
            put_log(l->error, l->error_size, why); return CUDA_ERROR_INVALID_IMAGE;
        }
        if (!l->sm_set) { unsigned flags; memcpy(&flags, d + 48, 4); l->sm = (int)((flags >> 8) & 0xff); l->sm_set = 1; }
        break;
    case CU_JIT_INPUT_PTX:
        if (d[size - 1] != '\0' || !strstr(d, ".version")) {
            snprintf(why, sizeof why, "fake cuLink: input %s is not NUL-terminated PTX", name ? name : "?");
            put_log(l->error, l->error_size, why); return CUDA_ERROR_INVALID_PTX;
        }
        break;
    case CU_JIT_INPUT_LIBRARY:
        if (size < 8 || memcmp(d, "!<arch>\n", 8) != 0) return CUDA_ERROR_INVALID_IMAGE;
        break;
    case CU_JIT_INPUT_FATBINARY: case CU_JIT_INPUT_OBJECT:
        break;
    default:
        snprintf(why, sizeof why, "fake cuLink: input %s: this driver takes no input of type %d", name ? name : "?", (int)type);
        put_log(l->error, l->error_size, why); return CUDA_ERROR_INVALID_VALUE;
    }
    add_names(l, d, size); l->inputs++;
    return CUDA_SUCCESS;
}

CUresult cuLinkAddFile(CUlinkState h, CUjitInputType type, const char *path, unsigned int n, CUjit_option *options,
                       void **values) {
    CUresult r = fake_cuda_check(); if (r) return r;
    if (!get_link(h)) return CUDA_ERROR_INVALID_HANDLE;
    FILE *f = path ? fopen(path, "rb") : NULL; if (!f) return CUDA_ERROR_FILE_NOT_FOUND;
    fseek(f, 0, SEEK_END); long size = ftell(f); fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1); size_t got = fread(buf, 1, (size_t)size, f); fclose(f); buf[got] = '\0';
    r = cuLinkAddData(h, type, buf, type == CU_JIT_INPUT_PTX ? got + 1 : got, path, n, options, values);
    free(buf); return r;
}

CUresult cuLinkComplete(CUlinkState h, void **cubin, size_t *size) {
    CUresult r = fake_cuda_check(); if (r) return r;
    struct link *l = get_link(h); if (!l) return CUDA_ERROR_INVALID_HANDLE;
    if (!cubin) return CUDA_ERROR_INVALID_VALUE;
    if (!l->inputs) { put_log(l->error, l->error_size, "fake cuLink: nothing to link"); return CUDA_ERROR_INVALID_VALUE; }
    size_t strtab = (l->nnames + 7) & ~(size_t)7, total = 64 + strtab + 2 * 64;
    unsigned char *e = calloc(1, total);
    memcpy(e, "\x7f" "ELF", 4); e[4] = 2; e[5] = 1; e[6] = 1; e[7] = 0x33; e[8] = 8;
    unsigned short u16; unsigned u32; unsigned long long u64;
    u16 = 2; memcpy(e + 16, &u16, 2);                  /* e_type: executable */
    u16 = 190; memcpy(e + 18, &u16, 2);                /* e_machine: CUDA */
    u32 = 1; memcpy(e + 20, &u32, 4);
    u64 = 64 + strtab; memcpy(e + 0x28, &u64, 8);      /* e_shoff */
    u32 = (unsigned)l->sm << 8; memcpy(e + 48, &u32, 4);
    u16 = 64; memcpy(e + 0x34, &u16, 2);               /* e_ehsize */
    u16 = 64; memcpy(e + 0x3A, &u16, 2);               /* e_shentsize */
    u16 = 2; memcpy(e + 0x3C, &u16, 2);                /* e_shnum */
    u16 = 1; memcpy(e + 0x3E, &u16, 2);                /* e_shstrndx */
    memcpy(e + 64, l->names, l->nnames);
    unsigned char *sh = e + 64 + strtab + 64;          /* section 1: the string table (section 0 is null) */
    u32 = 3; memcpy(sh + 4, &u32, 4);                  /* SHT_STRTAB */
    u64 = 64; memcpy(sh + 24, &u64, 8);
    u64 = l->nnames; memcpy(sh + 32, &u64, 8);
    free(l->out); l->out = (char *)e;
    char info[400]; snprintf(info, sizeof info, "fake cuLink: %d inputs for sm_%d;%s", l->inputs, l->sm, l->opts);
    put_log(l->info, l->info_size, info);
    *cubin = e; if (size) *size = total;
    return CUDA_SUCCESS;
}

CUresult cuLinkDestroy(CUlinkState h) {
    struct link *l = get_link(h); if (!l) return CUDA_ERROR_INVALID_HANDLE;
    l->magic = 0xdead; free(l->names); free(l->out); l->names = l->out = NULL;  /* the struct stays: a stale handle is refused */
    return CUDA_SUCCESS;
}
