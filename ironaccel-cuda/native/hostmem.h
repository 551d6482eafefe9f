/* Host memory for the arrays that copy_to_host() makes: large regions that are reused.
 *
 * A fresh 64 MiB numpy array costs 16384 page faults on first touch (glibc maps every allocation above its
 * mmap threshold anew and unmaps it when freed), which held a device-to-host copy into a new array to a third
 * of the speed of a copy into an existing one.  Regions here are mapped with transparent huge pages where the
 * kernel allows them, and a region whose array was dropped is kept (up to a byte budget) and handed to the
 * next array of a size that fits, already faulted in.  Called with the GIL held: no lock.
 */
#ifndef IRONACCEL_CUDA_HOSTMEM_H
#define IRONACCEL_CUDA_HOSTMEM_H

#include <stddef.h>

/* A region of at least `nbytes` (rounded up to 2 MiB); *size gets its size.  NULL when out of memory. */
void *ia_host_take(size_t nbytes, size_t *size);
/* Give a region back: kept for reuse within the budget, else unmapped. */
void ia_host_give(void *ptr, size_t size);
/* The byte budget of kept regions (default 1 GiB); 0 keeps none. */
void ia_host_set_budget(size_t bytes);
/* Unmap every kept region; returns the bytes released. */
size_t ia_host_trim(void);
/* Bytes currently kept, and regions currently handed out. */
size_t ia_host_kept(void);
size_t ia_host_outstanding(void);

#endif
