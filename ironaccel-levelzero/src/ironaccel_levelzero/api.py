"""The Level Zero calls and structs a device uses (contexts, queues, command lists, memory, modules, events).

Declared on first open, not in `loader.load`, so a loader that only enumerates still probes; a loader
without them makes `open` raise Unsupported naming the missing function.
"""

from __future__ import annotations

import ctypes

from ironaccel.errors import Unsupported

from .loader import BACKEND, Loader

u32, u64, size_t, ptr = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
_P = ctypes.POINTER

STYPE_CONTEXT_DESC = 0xD
STYPE_COMMAND_QUEUE_DESC = 0xE
STYPE_COMMAND_LIST_DESC = 0xF
STYPE_EVENT_POOL_DESC = 0x10
STYPE_EVENT_DESC = 0x11
STYPE_FENCE_DESC = 0x12
STYPE_DEVICE_MEM_ALLOC_DESC = 0x15
STYPE_HOST_MEM_ALLOC_DESC = 0x16
STYPE_MODULE_DESC = 0x1B
STYPE_KERNEL_DESC = 0x1D
STYPE_KERNEL_PROPERTIES = 0x1E
QUEUE_MODE_ASYNCHRONOUS = 2
MODULE_FORMAT_IL_SPIRV = 0
EVENT_POOL_HOST_VISIBLE = 1
EVENT_POOL_KERNEL_TIMESTAMP = 4
EVENT_SCOPE_HOST = 4
NOT_READY = 1
WAIT_FOREVER = 2**64 - 1
QUEUE_PRIORITY_NORMAL, QUEUE_PRIORITY_LOW, QUEUE_PRIORITY_HIGH = 0, 1, 2


class _Desc(ctypes.Structure):
    STYPE = 0

    def __init__(self, **fields: object) -> None:
        super().__init__(stype=self.STYPE, **fields)


class ContextDesc(_Desc):
    STYPE = STYPE_CONTEXT_DESC
    _fields_ = [("stype", u32), ("pNext", ptr), ("flags", u32)]


class CommandQueueDesc(_Desc):
    STYPE = STYPE_COMMAND_QUEUE_DESC
    _fields_ = [("stype", u32), ("pNext", ptr), ("ordinal", u32), ("index", u32), ("flags", u32), ("mode", u32),
                ("priority", u32)]


class CommandListDesc(_Desc):
    STYPE = STYPE_COMMAND_LIST_DESC
    _fields_ = [("stype", u32), ("pNext", ptr), ("commandQueueGroupOrdinal", u32), ("flags", u32)]


class DeviceMemAllocDesc(_Desc):
    STYPE = STYPE_DEVICE_MEM_ALLOC_DESC
    _fields_ = [("stype", u32), ("pNext", ptr), ("flags", u32), ("ordinal", u32)]


class HostMemAllocDesc(_Desc):
    STYPE = STYPE_HOST_MEM_ALLOC_DESC
    _fields_ = [("stype", u32), ("pNext", ptr), ("flags", u32)]


class ModuleDesc(_Desc):
    STYPE = STYPE_MODULE_DESC
    _fields_ = [("stype", u32), ("pNext", ptr), ("format", u32), ("inputSize", size_t), ("pInputModule", ptr),
                ("pBuildFlags", ctypes.c_char_p), ("pConstants", ptr)]


class KernelDesc(_Desc):
    STYPE = STYPE_KERNEL_DESC
    _fields_ = [("stype", u32), ("pNext", ptr), ("flags", u32), ("pKernelName", ctypes.c_char_p)]


class KernelProperties(_Desc):
    STYPE = STYPE_KERNEL_PROPERTIES
    _fields_ = [("stype", u32), ("pNext", ptr), ("numKernelArgs", u32), ("requiredGroupSizeX", u32),
                ("requiredGroupSizeY", u32), ("requiredGroupSizeZ", u32), ("requiredNumSubGroups", u32),
                ("requiredSubgroupSize", u32), ("maxSubgroupSize", u32), ("maxNumSubgroups", u32),
                ("localMemSize", u32), ("privateMemSize", u32), ("spillMemSize", u32),
                ("kid", ctypes.c_uint8 * 16), ("mid", ctypes.c_uint8 * 16)]


class FenceDesc(_Desc):
    STYPE = STYPE_FENCE_DESC
    _fields_ = [("stype", u32), ("pNext", ptr), ("flags", u32)]


class EventPoolDesc(_Desc):
    STYPE = STYPE_EVENT_POOL_DESC
    _fields_ = [("stype", u32), ("pNext", ptr), ("flags", u32), ("count", u32)]


class EventDesc(_Desc):
    STYPE = STYPE_EVENT_DESC
    _fields_ = [("stype", u32), ("pNext", ptr), ("index", u32), ("signal", u32), ("wait", u32)]


class GroupCount(ctypes.Structure):
    _fields_ = [("groupCountX", u32), ("groupCountY", u32), ("groupCountZ", u32)]


class TimestampData(ctypes.Structure):
    _fields_ = [("kernelStart", u64), ("kernelEnd", u64)]


class KernelTimestampResult(ctypes.Structure):
    _fields_ = [("global_", TimestampData), ("context", TimestampData)]


_SIGNATURES: dict[str, list[type]] = {
    "zeContextCreate": [ptr, _P(ContextDesc), _P(ptr)],
    "zeContextDestroy": [ptr],
    "zeCommandQueueCreate": [ptr, ptr, _P(CommandQueueDesc), _P(ptr)],
    "zeCommandQueueDestroy": [ptr],
    "zeCommandQueueExecuteCommandLists": [ptr, u32, _P(ptr), ptr],
    "zeCommandQueueSynchronize": [ptr, u64],
    "zeCommandListCreate": [ptr, ptr, _P(CommandListDesc), _P(ptr)],
    "zeCommandListDestroy": [ptr],
    "zeCommandListClose": [ptr],
    "zeCommandListReset": [ptr],
    "zeCommandListAppendLaunchKernel": [ptr, ptr, _P(GroupCount), ptr, u32, _P(ptr)],
    "zeCommandListAppendMemoryCopy": [ptr, ptr, ptr, size_t, ptr, u32, _P(ptr)],
    "zeCommandListAppendMemoryFill": [ptr, ptr, ptr, size_t, size_t, ptr, u32, _P(ptr)],
    "zeCommandListAppendBarrier": [ptr, ptr, u32, _P(ptr)],
    "zeCommandListAppendSignalEvent": [ptr, ptr],
    "zeCommandListAppendWaitOnEvents": [ptr, u32, _P(ptr)],
    "zeCommandListAppendEventReset": [ptr, ptr],
    "zeMemAllocDevice": [ptr, _P(DeviceMemAllocDesc), size_t, size_t, ptr, _P(ptr)],
    "zeMemAllocHost": [ptr, _P(HostMemAllocDesc), size_t, size_t, _P(ptr)],
    "zeMemAllocShared": [ptr, _P(DeviceMemAllocDesc), _P(HostMemAllocDesc), size_t, size_t, ptr, _P(ptr)],
    "zeMemFree": [ptr, ptr],
    "zeModuleCreate": [ptr, ptr, _P(ModuleDesc), _P(ptr), _P(ptr)],
    "zeModuleDestroy": [ptr],
    "zeModuleBuildLogGetString": [ptr, _P(size_t), ctypes.c_char_p],
    "zeModuleBuildLogDestroy": [ptr],
    "zeKernelCreate": [ptr, _P(KernelDesc), _P(ptr)],
    "zeKernelDestroy": [ptr],
    "zeKernelSetArgumentValue": [ptr, u32, size_t, ptr],
    "zeKernelSetGroupSize": [ptr, u32, u32, u32],
    "zeKernelGetProperties": [ptr, _P(KernelProperties)],
    "zeFenceCreate": [ptr, _P(FenceDesc), _P(ptr)],
    "zeFenceDestroy": [ptr],
    "zeFenceHostSynchronize": [ptr, u64],
    "zeFenceQueryStatus": [ptr],
    "zeFenceReset": [ptr],
    "zeEventPoolCreate": [ptr, _P(EventPoolDesc), u32, _P(ptr), _P(ptr)],
    "zeEventPoolDestroy": [ptr],
    "zeEventCreate": [ptr, _P(EventDesc), _P(ptr)],
    "zeEventDestroy": [ptr],
    "zeEventHostSynchronize": [ptr, u64],
    "zeEventQueryStatus": [ptr],
    "zeEventHostReset": [ptr],
    "zeEventQueryKernelTimestamp": [ptr, _P(KernelTimestampResult)],
}


def declare(loader: Loader) -> ctypes.CDLL:
    """The loader with the device calls declared; Unsupported names the first it lacks."""
    lib = loader.lib
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(lib, name, None)
        if fn is None:
            raise Unsupported(BACKEND, "open", f"the Level Zero loader {loader.path} does not export {name}")
        fn.argtypes = argtypes
        fn.restype = ctypes.c_uint32
    return lib
