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
    return 0;
}
