"""cuda.core's `typing`: the string enumerations and aliases of its signatures."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Any, Literal

from ._context import DeviceResourcesType
from ._stream import IsStreamType
from ._utils.cuda_utils import driver  # noqa: F401 (cuda.core's typing re-exports it)

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:
    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)

__all__ = [
    "AddressModeType", "ArrayFormatType", "CompilerBackendType", "DevicePointerType", "DeviceResourcesType",
    "FilterModeType", "GraphConditionalType", "GraphMemoryType", "IsStreamType", "ManagedMemoryLocationType",
    "ObjectCodeFormatType", "PCHStatusType", "ProcessStateType", "ReadModeType", "SourceCodeType",
    "VirtualMemoryAccessType", "VirtualMemoryAllocationType", "VirtualMemoryGranularityType",
    "VirtualMemoryHandleType", "VirtualMemoryLocationType", "WorkqueueSharingScopeType",
]

DevicePointerType = Any  # driver.CUdeviceptr | int | None
ProcessStateType = Literal["running", "locked", "checkpointed", "failed"]


class SourceCodeType(StrEnum):
    CXX = "c++"
    PTX = "ptx"
    NVVM = "nvvm"


class ObjectCodeFormatType(StrEnum):
    PTX = "ptx"
    CUBIN = "cubin"
    LTOIR = "ltoir"
    FATBIN = "fatbin"
    OBJECT = "object"
    LIBRARY = "library"


class CompilerBackendType(StrEnum):
    NVRTC = "NVRTC"
    NVVM = "NVVM"
    NVJITLINK = "nvJitLink"
    DRIVER = "driver"


class PCHStatusType(StrEnum):
    CREATED = "created"
    NOT_ATTEMPTED = "not_attempted"
    FAILED = "failed"


class GraphConditionalType(StrEnum):
    IF = "if"
    WHILE = "while"
    SWITCH = "switch"


class GraphMemoryType(StrEnum):
    DEVICE = "device"
    HOST = "host"
    MANAGED = "managed"


class ManagedMemoryLocationType(StrEnum):
    DEVICE = "device"
    HOST = "host"
    HOST_NUMA = "host_numa"


class VirtualMemoryHandleType(StrEnum):
    POSIX_FD = "posix_fd"
    WIN32_KMT = "win32_kmt"
    FABRIC = "fabric"


class VirtualMemoryLocationType(StrEnum):
    DEVICE = "device"
    HOST = "host"
    HOST_NUMA = "host_numa"
    HOST_NUMA_CURRENT = "host_numa_current"


class VirtualMemoryGranularityType(StrEnum):
    MINIMUM = "minimum"
    RECOMMENDED = "recommended"


class VirtualMemoryAccessType(StrEnum):
    READ_WRITE = "rw"
    READ = "r"


class VirtualMemoryAllocationType(StrEnum):
    PINNED = "pinned"
    MANAGED = "managed"


class WorkqueueSharingScopeType(StrEnum):
    DEVICE_CTX = "device_ctx"
    GREEN_CTX_BALANCED = "green_ctx_balanced"


class AddressModeType(StrEnum):
    WRAP = "wrap"
    CLAMP = "clamp"
    MIRROR = "mirror"
    BORDER = "border"


class FilterModeType(StrEnum):
    POINT = "point"
    LINEAR = "linear"


class ReadModeType(StrEnum):
    ELEMENT_TYPE = "element_type"
    NORMALIZED_FLOAT = "normalized_float"


class ArrayFormatType(StrEnum):
    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    FLOAT16 = "float16"
    FLOAT32 = "float32"
