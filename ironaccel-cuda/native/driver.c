/* The entry-point table, its stubs and its names (see driver.h). */
#define _GNU_SOURCE
#include "driver.h"

__thread uintptr_t ia_tls_ctx;

#define IA_NAME(name, abi, kind, params) #name,
const char *const ia_names[IA_N_ENTRY_POINTS] = { IA_ENTRY_POINTS(IA_NAME) };
#undef IA_NAME

#define IA_ABI(name, abi, kind, params) abi,
const int ia_abi[IA_N_ENTRY_POINTS] = { IA_ENTRY_POINTS(IA_ABI) };
#undef IA_ABI

#define IA_KIND_CALL 0
#define IA_KIND_RELEASE 1

/* Four stubs per entry point; their parameters are never read. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define IA_STUBS(name, abi, kind, params) \
    static CUresult ia_unbound_##name params { return IA_UNBOUND; } \
    static CUresult ia_disabled_##name params { return IA_KIND_##kind == IA_KIND_RELEASE ? 0 : IA_DISABLED; } \
    static CUresult ia_missing_##name params { return IA_MISSING; }
IA_ENTRY_POINTS(IA_STUBS)
#undef IA_STUBS
#pragma GCC diagnostic pop

#define IA_UNBOUND_INIT(name, abi, kind, params) .name = ia_unbound_##name,
ia_table ia_cu = { IA_ENTRY_POINTS(IA_UNBOUND_INIT) };
#undef IA_UNBOUND_INIT

void ia_table_stub(int mode) {
#define IA_PICK(name, abi, kind, params) ia_cu.name = mode == IA_UNBOUND ? ia_unbound_##name : ia_disabled_##name;
    IA_ENTRY_POINTS(IA_PICK)
#undef IA_PICK
}

void ia_table_install(void *const *addrs) {
#define IA_SET(name, abi, kind, params) \
    ia_cu.name = addrs[IA_##name] ? (CUresult (*) params)addrs[IA_##name] : ia_missing_##name;
    IA_ENTRY_POINTS(IA_SET)
#undef IA_SET
}

#if defined(__linux__)
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>
int ia_readable(uintptr_t addr, size_t n) {
    char buf[64];
    while (n) {
        size_t len = n < sizeof buf ? n : sizeof buf;
        struct iovec local = {buf, len}, remote = {(void *)addr, len};
        ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (got < 0) return errno == EFAULT ? 0 : 1;  /* EPERM/ENOSYS (a sandbox): cannot tell, assume yes */
        if (got != (ssize_t)len) return 0;
        addr += len;
        n -= len;
    }
    return 1;
}
#else
int ia_readable(uintptr_t addr, size_t n) { (void)addr; (void)n; return 1; }
#endif
