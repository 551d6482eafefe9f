/* The driver's entry points as one table of function pointers, made from entry_points.h.
 *
 * Until `ia_table_install` fills it with what cuGetProcAddress returned, every pointer is a stub that returns
 * IA_UNBOUND, so a first call binds the driver and retries.  In a forked child, `ia_table_stub(IA_DISABLED)`
 * makes every call return IA_DISABLED except the releases, which succeed and do nothing (the parent owns
 * what they would release).  An entry point the driver does not have returns IA_MISSING.
 */
#ifndef IRONACCEL_CUDA_DRIVER_H
#define IRONACCEL_CUDA_DRIVER_H

#include <stdint.h>

#ifdef IA_WITH_CUDA_H
#include <cuda.h>
#else
#include "cuda_shim.h"
/* Is [addr, addr + n) readable memory of this process?  Asked of the kernel (process_vm_readv), so an
   address that is not mapped is refused without touching it: foreign handles are checked with this before
   the driver dereferences them.  Where the kernel will not say (a sandbox), the answer is yes. */
int ia_readable(uintptr_t addr, size_t n);

#endif
#include "entry_points.h"

#define IA_UNBOUND (-1)  /* the driver is not bound yet */
#define IA_DISABLED (-2) /* a forked child */
#define IA_MISSING (-3)  /* this driver has no such entry point */

#define IA_TABLE_FIELD(name, abi, kind, params) CUresult (*name) params;
typedef struct { IA_ENTRY_POINTS(IA_TABLE_FIELD) } ia_table;
#undef IA_TABLE_FIELD

#define IA_TABLE_INDEX(name, abi, kind, params) IA_##name,
enum { IA_ENTRY_POINTS(IA_TABLE_INDEX) IA_N_ENTRY_POINTS };
#undef IA_TABLE_INDEX

extern ia_table ia_cu;
extern const char *const ia_names[IA_N_ENTRY_POINTS];
extern const int ia_abi[IA_N_ENTRY_POINTS];

/* The context this thread last made current through ironaccel (0: none yet). */
extern __thread uintptr_t ia_tls_ctx;

/* mode: IA_UNBOUND or IA_DISABLED */
void ia_table_stub(int mode);
/* Install addrs[i] for entry point i (in table order); a NULL address gets the IA_MISSING stub. */
void ia_table_install(void *const *addrs);

/* Is [addr, addr + n) readable memory of this process?  Asked of the kernel (process_vm_readv), so an
   address that is not mapped is refused without touching it: foreign handles are checked with this before
   the driver dereferences them.  Where the kernel will not say (a sandbox), the answer is yes. */
int ia_readable(uintptr_t addr, size_t n);

#endif
