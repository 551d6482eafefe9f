"""ironaccel backend: the NVIDIA CUDA driver API on cuda-python.

    import ironaccel_cuda as cu
    dev = cu.Device(0)                                   # or ironaccel.open("cuda", 0)
    code = cu.Program(src, cu.CompileOptions(std="c++17")).compile("cubin")
    fn = dev.load_module(code).function("saxpy")
    x = dev.alloc(n, "float32"); x.copy_from(host)
    fn.launch(blocks, 256, np.float32(2.0), x, y, np.uint32(n))

Importing this package loads no vendor library and no binding: public names
are resolved on first use, and the driver is loaded by the first Device,
probe or compile.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.2.0"

_EXPORTS = {
    "Backend": "backend",
    "Device": "device",
    "DeviceAttributes": "device",
    "device_count": "device",
    "device_ordinal": "device",
    "device_name": "device",
    "device_pci_bus_id": "device",
    "device_total_memory": "device",
    "device_attribute": "device",
    "can_access_peer": "device",
    "driver_version": "device",
    "devices": "device",
    "Stream": "stream",
    "Event": "event",
    "event_elapsed_ms": "event",
    "DeviceBuf": "memory",
    "PinnedBuf": "memory",
    "pinned": "memory",
    "pointer_attribute": "memory",
    "address_range": "memory",
    "copy_peer": "memory",
    "copy_async": "memory",
    "HostFlags": "memory",
    "host_alloc": "memory",
    "host_free": "memory",
    "host_register": "memory",
    "host_unregister": "memory",
    "host_device_pointer": "memory",
    "host_flags": "memory",
    "device_alloc": "memory",
    "device_free": "memory",
    "managed_alloc": "memory",
    "alloc_pitch": "memory",
    "attach_address": "memory",
    "alloc_async": "memory",
    "free_async": "memory",
    "Program": "program",
    "CompileOptions": "options",
    "ObjectCode": "program",
    "nvrtc_version": "program",
    "Module": "module",
    "Function": "module",
    "LaunchConfig": "module",
    "PreparedLaunch": "module",
    "FunctionAttributes": "module",
    "function_param_layout": "module",
    "JitLog": "module",
    "load_module_file": "module",
    "load_module_image": "module",
    "module_function": "module",
    "module_global": "module",
    "unload_module": "module",
    "MemPool": "pool",
    "PoolStats": "pool",
    "Allocator": "allocator",
    "DirectAllocator": "allocator",
    "ExternalAllocator": "allocator",
    "DriverPool": "driver_pool",
    "PoolUsage": "driver_pool",
    "VirtualBuffer": "vmm",
    "VirtualAllocator": "vmm",
    "ManagedAllocator": "managed",
    "ManagedInfo": "managed",
    "prefetch": "managed",
    "advise": "managed",
    "attach": "managed",
    "managed_info": "managed",
    "host_array": "managed",
    "copy_batch": "batched",
    "CopyAttributes": "batched",
    "PitchedBuf": "pitched",
    "Array": "arrays",
    "TextureObject": "arrays",
    "SurfaceObject": "arrays",
    "ipc": "ipc",
    "Graph": "graph",
    "GraphExec": "graph",
    "GraphNode": "graph",
    "ConditionalNode": "graph",
    "AllocNode": "graph",
    "ChildNode": "graph",
    "KernelNodeParams": "graph",
    "MemcpyNodeParams": "graph",
    "MemsetNodeParams": "graph",
    "HostNodeParams": "graph",
    "AllocNodeParams": "graph",
    "FreeNodeParams": "graph",
    "CaptureInfo": "stream",
    "Library": "library",
    "kernel_function": "library",
    "Linker": "linker",
    "Context": "context",
    "GreenContext": "context",
    "context_api_version": "context",
    "init_driver": "context",
    "create_context": "context",
    "destroy_context": "context",
    "push_context": "context",
    "pop_context": "context",
    "attach_context": "context",
    "detach_context": "context",
    "retain_primary_context": "context",
    "release_primary_context": "context",
    "current_context_shared_memory_config": "context",
    "set_current_context_shared_memory_config": "context",
    "current_context": "device",
    "current_context_handle": "device",
    "current_device_ordinal": "device",
    "synchronize_current_context": "device",
    "current_device_memory_info": "device",
    "current_context_limit": "device",
    "set_current_context_limit": "device",
    "current_context_cache_config": "device",
    "set_current_context_cache_config": "device",
    "stream_priority": "stream",
    "stream_non_blocking": "stream",
    "stream_device_ordinal": "stream",
    "HostFuncError": "errors",
    "nvtx_range": "profiling",
    "nvtx_mark": "profiling",
    "nvtx_push": "profiling",
    "nvtx_pop": "profiling",
    "profiler_start": "profiling",
    "profiler_stop": "profiling",
    "Pipeline": "compute",
    "host_cache": "memory",
    "Submission": "compute",
    "clear_memory_cache": "cache",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ironaccel_cuda' has no attribute {name!r}")
    target = "clear_memory" if name == "clear_memory_cache" else name
    imported = import_module(f"{__name__}.{module}")
    value = imported if name == module else getattr(imported, target)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
