/* SM resources for the cuda.core compat's device resources (dev.resources.sm, SMResource.split).
 *
 * Every fake device has 132 SMs in partitions of at least 8, aligned to 8, as an
 * H200 (sm_90); CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING lowers both to 2.
 * cuDevSmResourceSplitByCount rounds minCount up to the granularity (0: the
 * smallest partition) and makes as many of the requested groups as fit, the rest
 * going to the remainder, as the driver documents.  Green contexts themselves are
 * not faked: the fake has one context per device.  Workqueue resources (driver
 * 13.1) are unknown to this 13.0 fake, as to a 13.0 driver.
 */
#include <cuda.h>
#include <string.h>

#include "fake_cuda.h"

#define FCP_SMS 132u
#define FCP_GRANULARITY 8u
#define FCP_FINE_GRANULARITY 2u

static void fcp_fill_sm(CUdevResource *res, unsigned sm_count, unsigned min_size, unsigned alignment) {
    memset(res, 0, sizeof *res);
    res->type = CU_DEV_RESOURCE_TYPE_SM;
    res->sm.smCount = sm_count;
    res->sm.minSmPartitionSize = min_size;
    res->sm.smCoscheduledAlignment = alignment;
}

static CUresult fcp_cuDeviceGetDevResource(CUdevice dev, CUdevResource *res, CUdevResourceType type) {
    CUresult err = fake_cuda_check();
    if (err) return err;
    if (dev < 0 || dev >= fake_cuda_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    if (!res) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    fcp_fill_sm(res, FCP_SMS, FCP_GRANULARITY, FCP_GRANULARITY);
    return CUDA_SUCCESS;
}

static CUresult fcp_cuCtxGetDevResource(CUcontext ctx, CUdevResource *res, CUdevResourceType type) {
    CUresult err = cuCtxPushCurrent(ctx);
    if (err) return err;
    CUdevice dev = 0;
    err = cuCtxGetDevice(&dev);
    cuCtxPopCurrent(NULL);
    return err ? err : fcp_cuDeviceGetDevResource(dev, res, type);
}

static CUresult fcp_cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
                                                const CUdevResource *input, CUdevResource *remaining,
                                                unsigned int useFlags, unsigned int minCount) {
    CUresult err = fake_cuda_check();
    if (err) return err;
    if (!nbGroups || !input) return CUDA_ERROR_INVALID_VALUE;
    if (input->type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    if (useFlags & ~(unsigned)(CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING |
                               CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned total = input->sm.smCount;
    if (minCount > total) return CUDA_ERROR_INVALID_VALUE;
    unsigned grain = useFlags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING ? FCP_FINE_GRANULARITY
                                                                               : FCP_GRANULARITY;
    unsigned size = minCount ? (minCount + grain - 1) / grain * grain : grain;
    unsigned fit = size <= total ? total / size : 0;
    if (!result) {
        *nbGroups = fit;
        return CUDA_SUCCESS;
    }
    unsigned made = *nbGroups < fit ? *nbGroups : fit;
    for (unsigned i = 0; i < made; i++) fcp_fill_sm(&result[i], size, grain, grain);
    if (remaining) fcp_fill_sm(remaining, total - made * size, grain, grain);
    *nbGroups = made;
    return CUDA_SUCCESS;
}

static const struct fake_cuda_symbol FCP_SYMS[] = {
    {"cuDeviceGetDevResource", (void *)fcp_cuDeviceGetDevResource},
    {"cuCtxGetDevResource", (void *)fcp_cuCtxGetDevResource},
    {"cuDevSmResourceSplitByCount", (void *)fcp_cuDevSmResourceSplitByCount},
};

__attribute__((constructor)) static void fcp_register(void) {
    fake_cuda_add_symbols(FCP_SYMS, sizeof FCP_SYMS / sizeof *FCP_SYMS);
}
