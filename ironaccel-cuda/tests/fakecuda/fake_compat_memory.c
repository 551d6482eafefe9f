/* Graph-memory queries for the fake libcuda (the cuda.core compat's GraphMemoryResource attributes and trim).
 *
 * The fake records no memory nodes in stream capture, so no graph memory is ever in use or reserved: every
 * counter reads 0, the two high-water marks accept a reset to 0 only (as the driver does), and trim succeeds.
 */
#include <cuda.h>
#include <stdint.h>

#include "fake_cuda.h"

static CUresult graph_mem_device(CUdevice device) {
    CUresult err = fake_cuda_check();
    if (err) return err;
    if ((int)device < 0 || (int)device >= fake_cuda_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value) {
    CUresult err = graph_mem_device(device);
    if (err) return err;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
        *(cuuint64_t *)value = 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value) {
    CUresult err = graph_mem_device(device);
    if (err) return err;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    if (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
        return CUDA_ERROR_INVALID_VALUE;
    return *(cuuint64_t *)value == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGraphMemTrim(CUdevice device) {
    return graph_mem_device(device);
}
