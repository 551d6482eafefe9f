/* Which host memory is page-locked: ranges ironaccel pinned (PinnedBuf, `pinned()`), kept sorted, and the
 * driver's own answer for allocations anyone made with cuMemHostAlloc.  Copies from page-locked memory go
 * straight to the DMA engine; pageable ones are staged (staging.h).  The registry is changed only while
 * the caller holds the GIL; lookups may run without it but never concurrently with a change. */
#ifndef IRONACCEL_CUDA_PINNED_H
#define IRONACCEL_CUDA_PINNED_H

#include <stddef.h>
#include <stdint.h>

/* Record [start, end); 0, or -1 when out of memory.  Re-adding a start replaces its end. */
int ia_pin_add(uintptr_t start, uintptr_t end);
/* Forget the range starting at `start` (no-op if unknown). */
void ia_pin_remove(uintptr_t start);
/* Is [addr, addr + n) inside one recorded range? */
int ia_pin_known(uintptr_t addr, size_t n);
/* Is `addr` inside an allocation the driver page-locked (cuMemHostGetFlags succeeds)? */
int ia_pin_driver(uintptr_t addr);
/* How many ranges are recorded (tests). */
size_t ia_pin_count(void);

#endif
