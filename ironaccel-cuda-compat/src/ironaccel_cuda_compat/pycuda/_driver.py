"""What PyCUDA's compiled `pycuda._driver` module provides, gathered from this package's parts.

`driver` re-exports all of it and adds PyCUDA's Python-level helpers
(`In`/`Out`, `to_device`, `pagelocked_zeros`, ...), as PyCUDA's own
`driver.py` does on top of its C++ `_driver`.
"""

from __future__ import annotations

from typing import Any

from ._context import Context, Device, get_driver_version, get_version, init
from ._enums import (
    TR_DEFAULT,
    TRSA_OVERRIDE_FORMAT,
    TRSF_NORMALIZED_COORDINATES,
    TRSF_READ_AS_INTEGER,
    address_mode,
    array3d_flags,
    array_cubemap_face,
    array_format,
    compute_mode,
    ctx_flags,
    device_attribute,
    event_flags,
    filter_mode,
    func_cache,
    function_attribute,
    graphics_register_flags,
    host_alloc_flags,
    ipc_mem_flags,
    jit_fallback,
    jit_input_type,
    jit_option,
    jit_target,
    limit,
    mem_attach_flags,
    mem_host_register_flags,
    mem_peer_register_flags,
    memory_type,
    pointer_attribute,
    profiler_output_mode,
    shared_config,
    stream_flags,
)
from ._errors import Error, LaunchError, LogicError, MemoryError, RuntimeError, no_arrays, unsupported
from ._link import Linker
from ._memory import (
    AlignedHostAllocation,
    DeviceAllocation,
    HostAllocation,
    HostPointer,
    IPCMemoryHandle,
    ManagedAllocation,
    Memcpy2D,
    Memcpy3D,
    Memcpy3DPeer,
    PagelockedHostAllocation,
    PointerHolderBase,
    RegisteredHostMemory,
    aligned_empty,
    managed_empty,
    mem_alloc,
    mem_alloc_pitch,
    mem_get_address_range,
    mem_get_info,
    mem_get_ipc_handle,
    memcpy_dtod,
    memcpy_dtod_async,
    memcpy_dtoh,
    memcpy_dtoh_async,
    memcpy_htod,
    memcpy_htod_async,
    memcpy_peer,
    memcpy_peer_async,
    memset_d2d8,
    memset_d2d8_async,
    memset_d2d16,
    memset_d2d16_async,
    memset_d2d32,
    memset_d2d32_async,
    memset_d8,
    memset_d8_async,
    memset_d16,
    memset_d16_async,
    memset_d32,
    memset_d32_async,
    pagelocked_empty,
    register_host_memory,
)
from ._module import Function, Module, module_from_buffer, module_from_file
from ._pools import (
    DeviceMemoryPool,
    PageLockedAllocator,
    PageLockedMemoryPool,
    PooledDeviceAllocation,
    PooledHostAllocation,
    bitlog2,
)
from ._stream import Event, Stream


class ArrayDescriptor:
    """CUDA_ARRAY_DESCRIPTOR fields (width, height, format, num_channels); Array itself is not provided."""

    def __init__(self) -> None:
        self.width = 0
        self.height = 0
        self.format = array_format.UNSIGNED_INT8
        self.num_channels = 1


class ArrayDescriptor3D(ArrayDescriptor):
    """CUDA_ARRAY3D_DESCRIPTOR fields (also depth and flags)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.flags = 0


class Array:
    def __init__(self, *args: Any, **kwargs: Any):
        raise no_arrays("cuArrayCreate")


class TextureReference:
    def __init__(self, *args: Any, **kwargs: Any):
        raise no_arrays("cuTexRefCreate")


class SurfaceReference:
    def __init__(self, *args: Any, **kwargs: Any):
        raise no_arrays("cuSurfRefGetArray")


def _missing(name: str) -> Any:
    def missing(*args: Any, **kwargs: Any) -> None:
        raise no_arrays(name)

    missing.__name__ = name
    return missing


memcpy_htoa = _missing("memcpy_htoa")
memcpy_atoh = _missing("memcpy_atoh")
memcpy_dtoa = _missing("memcpy_dtoa")
memcpy_atod = _missing("memcpy_atod")
memcpy_atoa = _missing("memcpy_atoa")


def start_profiler() -> None:
    from ironaccel_cuda.profiling import profiler_start

    from ._context import guarded

    guarded("cuProfilerStart", profiler_start)


def stop_profiler() -> None:
    from ironaccel_cuda.profiling import profiler_stop

    from ._context import guarded

    guarded("cuProfilerStop", profiler_stop)


def initialize_profiler(*args: Any) -> None:
    raise unsupported("cuProfilerInitialize", "cuProfilerInitialize was removed in CUDA 12")


def have_gl_ext() -> bool:
    return False


__all__ = [
    "get_version", "get_driver_version", "init", "Error", "MemoryError", "LogicError", "LaunchError", "RuntimeError",
    "ipc_mem_flags", "ctx_flags", "event_flags", "stream_flags", "array_format", "array3d_flags", "address_mode",
    "filter_mode", "device_attribute", "pointer_attribute", "profiler_output_mode", "func_cache", "shared_config",
    "function_attribute", "memory_type", "compute_mode", "jit_option", "jit_target", "jit_fallback",
    "jit_input_type", "host_alloc_flags", "mem_host_register_flags", "mem_peer_register_flags", "limit",
    "mem_attach_flags", "graphics_register_flags", "array_cubemap_face", "Device", "Context", "Stream", "Event",
    "Module", "Function", "module_from_file", "module_from_buffer", "Linker", "PointerHolderBase",
    "DeviceAllocation", "IPCMemoryHandle", "mem_get_ipc_handle", "HostPointer", "PagelockedHostAllocation",
    "HostAllocation", "AlignedHostAllocation", "ManagedAllocation", "RegisteredHostMemory", "pagelocked_empty",
    "aligned_empty", "managed_empty", "register_host_memory", "mem_get_info", "mem_alloc", "mem_alloc_pitch",
    "mem_get_address_range", "memset_d8", "memset_d16", "memset_d32", "memset_d2d8", "memset_d2d16", "memset_d2d32",
    "memset_d8_async", "memset_d16_async", "memset_d32_async", "memset_d2d8_async", "memset_d2d16_async",
    "memset_d2d32_async", "memcpy_htod", "memcpy_htod_async", "memcpy_dtoh", "memcpy_dtoh_async", "memcpy_dtod",
    "memcpy_dtod_async", "memcpy_peer", "memcpy_peer_async", "memcpy_htoa", "memcpy_atoh", "memcpy_dtoa",
    "memcpy_atod", "memcpy_atoa", "Memcpy2D", "Memcpy3D", "Memcpy3DPeer", "ArrayDescriptor", "ArrayDescriptor3D",
    "Array", "TextureReference", "SurfaceReference", "start_profiler", "stop_profiler", "initialize_profiler",
    "TRSA_OVERRIDE_FORMAT", "TRSF_READ_AS_INTEGER", "TRSF_NORMALIZED_COORDINATES", "TR_DEFAULT", "have_gl_ext",
    "bitlog2", "DeviceMemoryPool", "PageLockedAllocator", "PageLockedMemoryPool", "PooledDeviceAllocation",
    "PooledHostAllocation",
]
