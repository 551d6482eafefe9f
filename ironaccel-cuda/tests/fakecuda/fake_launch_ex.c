/* The fake driver's cuLaunchKernelEx (see fake_cuda.c): the attributes a launch config carries are checked as
 * the driver checks them, then the launch runs as cuLaunchKernel does.  Cooperative grids are limited to
 * FAKE_COOPERATIVE_MAX_BLOCKS (132 x 16, an H200's 132 SMs at 16 resident blocks). */
#include <cuda.h>

#define FAKE_COOPERATIVE_MAX_BLOCKS (132u * 16u)

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra) {
    if (!config || (config->numAttrs && !config->attrs)) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < config->numAttrs; i++) {
        const CUlaunchAttribute *a = &config->attrs[i];
        switch (a->id) {
        case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
            if (a->value.cooperative && (unsigned long long)config->gridDimX * config->gridDimY * config->gridDimZ >
                                            FAKE_COOPERATIVE_MAX_BLOCKS)
                return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
            break;
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: {
            unsigned x = a->value.clusterDim.x, y = a->value.clusterDim.y, z = a->value.clusterDim.z;
            if (!x || !y || !z || config->gridDimX % x || config->gridDimY % y || config->gridDimZ % z)
                return CUDA_ERROR_INVALID_CLUSTER_SIZE;
            if ((unsigned long long)x * y * z > 8) return CUDA_ERROR_INVALID_CLUSTER_SIZE; /* not opted in */
            break;
        }
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return cuLaunchKernel(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                          config->blockDimY, config->blockDimZ, config->sharedMemBytes, config->hStream, kernelParams,
                          extra);
}
