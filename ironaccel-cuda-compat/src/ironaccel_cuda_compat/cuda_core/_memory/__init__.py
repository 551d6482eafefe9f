"""cuda.core's memory: `Buffer`, `MemoryResource` and the resources (see each module)."""

from ._buffer import Buffer, MemoryResource
from ._device_memory_resource import DeviceMemoryResource, DeviceMemoryResourceOptions
from ._graph_memory_resource import GraphMemoryResource
from ._ipc import IPCAllocationHandle, IPCBufferDescriptor
from ._legacy import LegacyPinnedMemoryResource
from ._managed_buffer import ManagedBuffer
from ._managed_memory_resource import ManagedMemoryResource, ManagedMemoryResourceOptions
from ._pinned_memory_resource import PinnedMemoryResource, PinnedMemoryResourceOptions
from ._virtual_memory_resource import VirtualMemoryResource, VirtualMemoryResourceOptions

__all__ = [
    "Buffer",
    "DeviceMemoryResource",
    "DeviceMemoryResourceOptions",
    "GraphMemoryResource",
    "IPCAllocationHandle",
    "IPCBufferDescriptor",
    "LegacyPinnedMemoryResource",
    "ManagedBuffer",
    "ManagedMemoryResource",
    "ManagedMemoryResourceOptions",
    "MemoryResource",
    "PinnedMemoryResource",
    "PinnedMemoryResourceOptions",
    "VirtualMemoryResource",
    "VirtualMemoryResourceOptions",
]
