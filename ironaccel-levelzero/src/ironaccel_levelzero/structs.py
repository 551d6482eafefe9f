"""ctypes mirrors of the Level Zero structs the probe reads (ze_api.h, spec v1.x).

Every struct starts with ``stype`` and ``pNext``; `new` fills ``stype`` as the
spec requires.  Layouts are checked against the real header by
tests/test_layout.py when ``libze-dev`` is installed.
"""

from __future__ import annotations

import ctypes
from typing import TypeVar

u8, u32, u64 = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64

MAX_DEVICE_NAME = 256
MAX_UUID_SIZE = 16
SUBGROUPSIZE_COUNT = 8

# ze_structure_type_t
STYPE_DRIVER_PROPERTIES = 0x1
STYPE_DEVICE_PROPERTIES = 0x3
STYPE_DEVICE_COMPUTE_PROPERTIES = 0x4
STYPE_DEVICE_MODULE_PROPERTIES = 0x5
STYPE_COMMAND_QUEUE_GROUP_PROPERTIES = 0x6
STYPE_DEVICE_MEMORY_PROPERTIES = 0x7

# ze_device_type_t
DEVICE_TYPES = {1: "gpu", 2: "cpu", 3: "fpga", 4: "mca", 5: "vpu"}

# ze_device_property_flag_t
DEVICE_FLAG_INTEGRATED = 1 << 0
DEVICE_FLAG_SUBDEVICE = 1 << 1
DEVICE_FLAG_ECC = 1 << 2
DEVICE_FLAG_ONDEMANDPAGING = 1 << 3

# ze_device_module_flag_t
MODULE_FLAG_FP16 = 1 << 0
MODULE_FLAG_FP64 = 1 << 1
MODULE_FLAG_INT64_ATOMICS = 1 << 2
MODULE_FLAG_DP4A = 1 << 3

# ze_command_queue_group_property_flag_t
QUEUE_GROUP_COMPUTE = 1 << 0
QUEUE_GROUP_COPY = 1 << 1
QUEUE_GROUP_COOPERATIVE_KERNELS = 1 << 2


def make_version(major: int, minor: int) -> int:
    """ZE_MAKE_VERSION."""
    return (major << 16) | (minor & 0xFFFF)


def version_text(version: int) -> str:
    return f"{version >> 16}.{version & 0xFFFF}"


class _Header(ctypes.Structure):
    STYPE = 0


class DriverUuid(ctypes.Structure):
    _fields_ = [("id", u8 * MAX_UUID_SIZE)]


class DriverProperties(_Header):
    STYPE = STYPE_DRIVER_PROPERTIES
    _fields_ = [("stype", u32), ("pNext", ctypes.c_void_p), ("uuid", DriverUuid), ("driverVersion", u32)]


class DeviceUuid(ctypes.Structure):
    _fields_ = [("id", u8 * MAX_UUID_SIZE)]


class DeviceProperties(_Header):
    STYPE = STYPE_DEVICE_PROPERTIES
    _fields_ = [
        ("stype", u32),
        ("pNext", ctypes.c_void_p),
        ("type", u32),
        ("vendorId", u32),
        ("deviceId", u32),
        ("flags", u32),
        ("subdeviceId", u32),
        ("coreClockRate", u32),
        ("maxMemAllocSize", u64),
        ("maxHardwareContexts", u32),
        ("maxCommandQueuePriority", u32),
        ("numThreadsPerEU", u32),
        ("physicalEUSimdWidth", u32),
        ("numEUsPerSubslice", u32),
        ("numSubslicesPerSlice", u32),
        ("numSlices", u32),
        ("timerResolution", u64),
        ("timestampValidBits", u32),
        ("kernelTimestampValidBits", u32),
        ("uuid", DeviceUuid),
        ("name", ctypes.c_char * MAX_DEVICE_NAME),
    ]


class DeviceComputeProperties(_Header):
    STYPE = STYPE_DEVICE_COMPUTE_PROPERTIES
    _fields_ = [
        ("stype", u32),
        ("pNext", ctypes.c_void_p),
        ("maxTotalGroupSize", u32),
        ("maxGroupSizeX", u32),
        ("maxGroupSizeY", u32),
        ("maxGroupSizeZ", u32),
        ("maxGroupCountX", u32),
        ("maxGroupCountY", u32),
        ("maxGroupCountZ", u32),
        ("maxSharedLocalMemory", u32),
        ("numSubGroupSizes", u32),
        ("subGroupSizes", u32 * SUBGROUPSIZE_COUNT),
    ]


class NativeKernelUuid(ctypes.Structure):
    _fields_ = [("id", u8 * MAX_UUID_SIZE)]


class DeviceModuleProperties(_Header):
    STYPE = STYPE_DEVICE_MODULE_PROPERTIES
    _fields_ = [
        ("stype", u32),
        ("pNext", ctypes.c_void_p),
        ("spirvVersionSupported", u32),
        ("flags", u32),
        ("fp16flags", u32),
        ("fp32flags", u32),
        ("fp64flags", u32),
        ("maxArgumentsSize", u32),
        ("printfBufferSize", u32),
        ("nativeKernelSupported", NativeKernelUuid),
    ]


class DeviceMemoryProperties(_Header):
    STYPE = STYPE_DEVICE_MEMORY_PROPERTIES
    _fields_ = [
        ("stype", u32),
        ("pNext", ctypes.c_void_p),
        ("flags", u32),
        ("maxClockRate", u32),
        ("maxBusWidth", u32),
        ("totalSize", u64),
        ("name", ctypes.c_char * MAX_DEVICE_NAME),
    ]


class CommandQueueGroupProperties(_Header):
    STYPE = STYPE_COMMAND_QUEUE_GROUP_PROPERTIES
    _fields_ = [
        ("stype", u32),
        ("pNext", ctypes.c_void_p),
        ("flags", u32),
        ("maxMemoryFillPatternSize", ctypes.c_size_t),
        ("numQueues", u32),
    ]


class LoaderVersion(ctypes.Structure):
    """zel_version_t (loader/ze_loader.h)."""

    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int)]


class LoaderComponentVersion(ctypes.Structure):
    """zel_component_version_t (loader/ze_loader.h)."""

    _fields_ = [("component_name", ctypes.c_char * 64), ("spec_version", u32), ("component_lib_version", LoaderVersion)]


S = TypeVar("S", bound=_Header)


def new(cls: type[S], count: int | None = None):
    """One struct (or an array of `count`) with ``stype`` set, as the spec requires."""
    if count is None:
        item = cls()
        item.stype = cls.STYPE
        return item
    array = (cls * count)()
    for item in array:
        item.stype = cls.STYPE
    return array
