/* The fake driver's cuMemcpyBatchAsync (CUDA 13.0's prototype): checked as the driver documents it, then run
 * at once, copy by copy, on the host (the fake's device memory is host memory).
 *
 * Refused with CUDA_ERROR_INVALID_VALUE: no copies, a missing array, the legacy NULL stream, attributes that do
 * not start at copy 0 or whose first indices are not increasing and below count, an invalid source access
 * order or unknown flags, and an operand that starts or ends inside a device allocation without lying wholly
 * inside it.  An operand outside every device allocation is host memory (page-locked or not).  A capturing
 * stream gets CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, as every uncapturable call of the fake does. */
#include <stdint.h>
#include <string.h>

#include "fake_cuda.h"

static int operand_ok(CUdeviceptr p, size_t n) {
    if (!n) return 1;
    int first = fake_cuda_find_range(p, 1, NULL, NULL), last = fake_cuda_find_range(p + n - 1, 1, NULL, NULL);
    if (first < 0 && last < 0) return 1; /* host memory */
    return fake_cuda_find_range(p, n, NULL, NULL) >= 0;
}

static CUresult fb_cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                      CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream s) {
    CUresult g = fake_cuda_check();
    if (g) return g;
    if (fake_cuda_current_device() < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (!count || !dsts || !srcs || !sizes || !attrs || !attrsIdxs || !numAttrs || numAttrs > count || !s || s == CU_STREAM_LEGACY)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_cuda_stream_device(s) < 0) return CUDA_ERROR_INVALID_HANDLE;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = cuStreamIsCapturing(s, &status);
    if (r) return r;
    if (status != CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    for (size_t k = 0; k < numAttrs; k++) {
        if (k == 0 ? attrsIdxs[0] != 0 : attrsIdxs[k] <= attrsIdxs[k - 1] || attrsIdxs[k] >= count)
            return CUDA_ERROR_INVALID_VALUE;
        int order = (int)attrs[k].srcAccessOrder;
        if (order < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM || order > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
            return CUDA_ERROR_INVALID_VALUE;
        if (attrs[k].flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE) return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < count; i++)
        if (!operand_ok(dsts[i], sizes[i]) || !operand_ok(srcs[i], sizes[i]) || (sizes[i] && (!dsts[i] || !srcs[i])))
            return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++)
        if (sizes[i]) memmove((void *)(uintptr_t)dsts[i], (const void *)(uintptr_t)srcs[i], sizes[i]);
    return CUDA_SUCCESS;
}

static const struct fake_cuda_symbol batch_symbols[] = {
    {"cuMemcpyBatchAsync", (void *)fb_cuMemcpyBatchAsync},
};

__attribute__((constructor)) static void batch_register(void) {
    fake_cuda_add_symbols(batch_symbols, sizeof batch_symbols / sizeof *batch_symbols);
}
