/* Prints sizeof and offsetof of the structs ironaccel_levelzero mirrors, from the real ze_api.h. */
#include <level_zero/ze_api.h>
#include <level_zero/loader/ze_loader.h>
#include <stddef.h>
#include <stdio.h>

#define SIZE(T) printf(#T " sizeof %zu\n", sizeof(T))
#define OFF(T, f) printf(#T " %s %zu\n", #f, offsetof(T, f))

int main(void) {
    SIZE(ze_driver_properties_t); OFF(ze_driver_properties_t, uuid); OFF(ze_driver_properties_t, driverVersion);
    SIZE(ze_device_properties_t);
    OFF(ze_device_properties_t, type); OFF(ze_device_properties_t, flags); OFF(ze_device_properties_t, maxMemAllocSize);
    OFF(ze_device_properties_t, numSlices); OFF(ze_device_properties_t, timerResolution);
    OFF(ze_device_properties_t, kernelTimestampValidBits); OFF(ze_device_properties_t, uuid);
    OFF(ze_device_properties_t, name);
    SIZE(ze_device_compute_properties_t); OFF(ze_device_compute_properties_t, maxSharedLocalMemory);
    OFF(ze_device_compute_properties_t, subGroupSizes);
    SIZE(ze_device_module_properties_t); OFF(ze_device_module_properties_t, flags);
    OFF(ze_device_module_properties_t, nativeKernelSupported);
    SIZE(ze_device_memory_properties_t); OFF(ze_device_memory_properties_t, totalSize);
    OFF(ze_device_memory_properties_t, name);
    SIZE(ze_command_queue_group_properties_t); OFF(ze_command_queue_group_properties_t, maxMemoryFillPatternSize);
    OFF(ze_command_queue_group_properties_t, numQueues);
    SIZE(zel_component_version_t); OFF(zel_component_version_t, component_lib_version);
    SIZE(ze_context_desc_t); OFF(ze_context_desc_t, flags);
    SIZE(ze_command_queue_desc_t); OFF(ze_command_queue_desc_t, ordinal); OFF(ze_command_queue_desc_t, priority);
    SIZE(ze_command_list_desc_t); OFF(ze_command_list_desc_t, flags);
    SIZE(ze_device_mem_alloc_desc_t); OFF(ze_device_mem_alloc_desc_t, ordinal);
    SIZE(ze_host_mem_alloc_desc_t); OFF(ze_host_mem_alloc_desc_t, flags);
    SIZE(ze_module_desc_t); OFF(ze_module_desc_t, inputSize); OFF(ze_module_desc_t, pInputModule);
    OFF(ze_module_desc_t, pBuildFlags); OFF(ze_module_desc_t, pConstants);
    SIZE(ze_kernel_desc_t); OFF(ze_kernel_desc_t, pKernelName);
    SIZE(ze_kernel_properties_t); OFF(ze_kernel_properties_t, numKernelArgs); OFF(ze_kernel_properties_t, spillMemSize);
    SIZE(ze_fence_desc_t); SIZE(ze_event_pool_desc_t); OFF(ze_event_pool_desc_t, count);
    SIZE(ze_event_desc_t); OFF(ze_event_desc_t, index); OFF(ze_event_desc_t, wait);
    SIZE(ze_group_count_t); SIZE(ze_kernel_timestamp_result_t); OFF(ze_kernel_timestamp_result_t, context);
    return 0;
}
