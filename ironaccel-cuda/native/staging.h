/* Staging copies between pageable host memory and the device through page-locked slots.
 *
 * A pool of worker threads copies chunks between the host array and the slots while the calling thread
 * issues each chunk's DMA as soon as its copy is done and recycles slots as their events complete, so host
 * copies and PCIe transfers overlap.  Small copies go through one page-locked bounce buffer.  The settings
 * come from Python (transfer.py); the slots, events and bounce buffer are made by the caller (_core.pyx).
 *
 * Threading: one pipelined copy at a time (ia_pipe_lock), run without the GIL.  The workers never call the
 * driver; only the calling thread does.
 */
#ifndef IRONACCEL_CUDA_STAGING_H
#define IRONACCEL_CUDA_STAGING_H

#include <stdatomic.h>
#include <stddef.h>

#include "driver.h"

#define IA_MAX_SLOTS 256
#define IA_MAX_THREADS 64

typedef struct {
    char *slots;            /* nslots * chunk bytes, page-locked */
    size_t chunk;           /* slot size: the largest chunk */
    int nslots;
    int split;              /* a copy is cut into about this many chunks */
    int nt;                 /* non-temporal stores: bit 0 into the slots (h2d), bit 1 into the host (d2h) */
    CUevent events[IA_MAX_SLOTS];
    char *bounce;           /* page-locked bounce buffer for small copies */
    size_t bounce_size;
    atomic_int bounce_busy; /* its holder waits for the copy as every busy stream's wait does (fence.h) */
} ia_staging;

/* Start the workers once (later calls return the count started first). */
int ia_pool_start(int nthreads);
int ia_pool_threads(void);

/* The chunk size of one copy of nbytes: about `split` chunks, 64 KiB at least, the slot size at most. */
size_t ia_chunk_for(const ia_staging *st, size_t nbytes);

void ia_pipe_lock(void);
void ia_pipe_unlock(void);
/* Pageable host -> device (call with ia_pipe_lock held).  Returns 0 or a CUresult, with *op the failed call;
   the copy has landed and no DMA still reads a slot when it returns 0.  2 with *op "malloc": out of memory. */
int ia_pipe_htod(ia_staging *st, CUdeviceptr dst, const char *src, size_t nbytes, CUstream stream, const char **op);
/* Device -> pageable host, the same way. */
int ia_pipe_dtoh(ia_staging *st, char *dst, CUdeviceptr src, size_t nbytes, CUstream stream, const char **op);

/* Take the bounce buffer (0) or learn that another thread has it (-1); give it back after the copy. */
int ia_bounce_take(ia_staging *st);
void ia_bounce_give(ia_staging *st);

/* memcpy, with non-temporal stores for large copies when `nt` (x86-64). */
void ia_copy(char *dst, const char *src, size_t len, int nt);

#endif
