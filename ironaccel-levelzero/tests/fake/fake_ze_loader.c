/* A stand-in for libze_loader with two devices, compiled against the real ze_api.h
 * (libze-dev) so its struct layouts are the spec's, not ours.
 * FAKE_ZE_MODE: "ok" (default), "nodrivers" (zeDriverGet finds none), "lost" (zeDeviceGet fails). */
#include <level_zero/ze_api.h>
#include <stdlib.h>
#include <string.h>

static int drv_tag, gpu_tag, npu_tag;
static const char* mode(void) { const char* m = getenv("FAKE_ZE_MODE"); return m ? m : "ok"; }

ze_result_t zeInit(ze_init_flags_t flags) { (void)flags; return ZE_RESULT_SUCCESS; }

ze_result_t zeDriverGet(uint32_t* count, ze_driver_handle_t* drivers) {
    if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (strcmp(mode(), "nodrivers") == 0) { *count = 0; return ZE_RESULT_SUCCESS; }
    if (drivers && *count >= 1) drivers[0] = (ze_driver_handle_t)&drv_tag;
    *count = 1;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDriverGetApiVersion(ze_driver_handle_t d, ze_api_version_t* v) {
    (void)d; *v = ZE_MAKE_VERSION(1, 3); return ZE_RESULT_SUCCESS;
}

ze_result_t zeDriverGetProperties(ze_driver_handle_t d, ze_driver_properties_t* p) {
    (void)d;
    if (p->stype != ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    p->driverVersion = 16900000u;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGet(ze_driver_handle_t d, uint32_t* count, ze_device_handle_t* devices) {
    if (d != (ze_driver_handle_t)&drv_tag) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (strcmp(mode(), "lost") == 0) return ZE_RESULT_ERROR_DEVICE_LOST;
    if (devices) {
        if (*count >= 1) devices[0] = (ze_device_handle_t)&gpu_tag;
        if (*count >= 2) devices[1] = (ze_device_handle_t)&npu_tag;
    }
    *count = 2;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetProperties(ze_device_handle_t h, ze_device_properties_t* p) {
    if (p->stype != ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    int gpu = h == (ze_device_handle_t)&gpu_tag;
    p->type = gpu ? ZE_DEVICE_TYPE_GPU : ZE_DEVICE_TYPE_VPU;
    p->vendorId = 0x8086;
    p->deviceId = gpu ? 0x0bd5 : 0x7d1d;
    p->flags = gpu ? (ZE_DEVICE_PROPERTY_FLAG_ECC | ZE_DEVICE_PROPERTY_FLAG_ONDEMANDPAGING)
                   : ZE_DEVICE_PROPERTY_FLAG_INTEGRATED;
    p->coreClockRate = gpu ? 1600 : 1400;
    p->maxMemAllocSize = gpu ? (64ull << 30) : (4ull << 30);
    p->numThreadsPerEU = 8; p->physicalEUSimdWidth = 16;
    p->numEUsPerSubslice = 8; p->numSubslicesPerSlice = gpu ? 64 : 1; p->numSlices = gpu ? 2 : 1;
    p->timestampValidBits = 64; p->kernelTimestampValidBits = gpu ? 32 : 0;
    for (int i = 0; i < ZE_MAX_DEVICE_UUID_SIZE; i++) p->uuid.id[i] = (uint8_t)(gpu ? i : 0xA0 + i);
    strcpy(p->name, gpu ? "Intel(R) Data Center GPU Max 1550" : "Intel(R) AI Boost");
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetComputeProperties(ze_device_handle_t h, ze_device_compute_properties_t* p) {
    if (p->stype != ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    int gpu = h == (ze_device_handle_t)&gpu_tag;
    p->maxTotalGroupSize = 1024; p->maxGroupSizeX = 1024; p->maxGroupSizeY = 1024; p->maxGroupSizeZ = 64;
    p->maxGroupCountX = 0xffffffffu; p->maxGroupCountY = 65535; p->maxGroupCountZ = 65535;
    p->maxSharedLocalMemory = 131072;
    p->numSubGroupSizes = gpu ? 2 : 0;
    p->subGroupSizes[0] = 16; p->subGroupSizes[1] = 32;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetModuleProperties(ze_device_handle_t h, ze_device_module_properties_t* p) {
    if (p->stype != ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    int gpu = h == (ze_device_handle_t)&gpu_tag;
    p->spirvVersionSupported = gpu ? ZE_MAKE_VERSION(1, 4) : 0;
    p->flags = gpu ? (ZE_DEVICE_MODULE_FLAG_FP16 | ZE_DEVICE_MODULE_FLAG_FP64 | ZE_DEVICE_MODULE_FLAG_DP4A)
                   : ZE_DEVICE_MODULE_FLAG_FP16;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetMemoryProperties(ze_device_handle_t h, uint32_t* count, ze_device_memory_properties_t* p) {
    int gpu = h == (ze_device_handle_t)&gpu_tag;
    uint32_t n = gpu ? 2 : 0;
    if (p) {
        for (uint32_t i = 0; i < n && i < *count; i++) {
            if (p[i].stype != ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
            p[i].totalSize = 64ull << 30;
            strcpy(p[i].name, "HBM");
        }
    }
    *count = n;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetCommandQueueGroupProperties(ze_device_handle_t h, uint32_t* count,
                                                   ze_command_queue_group_properties_t* p) {
    int gpu = h == (ze_device_handle_t)&gpu_tag;
    uint32_t n = gpu ? 2 : 1;
    if (p) {
        for (uint32_t i = 0; i < n && i < *count; i++) {
            if (p[i].stype != ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
            p[i].numQueues = 1;
            p[i].maxMemoryFillPatternSize = 16;
        }
        p[0].flags = ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY
                     | (gpu ? ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COOPERATIVE_KERNELS : 0);
        if (n > 1 && *count > 1) p[1].flags = ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
    }
    *count = n;
    return ZE_RESULT_SUCCESS;
}
