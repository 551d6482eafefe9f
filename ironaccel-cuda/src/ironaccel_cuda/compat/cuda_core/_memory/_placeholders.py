"""The memory resources and buffers of cuda.core that wait for issue 10 (see the coverage map)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _needs
from .._missing import missing_class

__all__ = [
    "GraphMemoryResource", "IPCAllocationHandle", "IPCBufferDescriptor", "VirtualMemoryResource",
    "VirtualMemoryResourceOptions",
]

_M = __name__


@dataclass
class VirtualMemoryResourceOptions:
    allocation_type: Any = "pinned"
    location_type: Any = "device"
    handle_type: Any = "posix_fd"
    granularity: Any = "recommended"
    gpu_direct_rdma: bool = False
    addr_hint: int | None = 0
    addr_align: int | None = None
    peers: Any = ()
    self_access: Any = "rw"
    peer_access: Any = "rw"


VirtualMemoryResource = missing_class("VirtualMemoryResource", _needs.VMM, _M)
GraphMemoryResource = missing_class("GraphMemoryResource", _needs.GRAPH_MEMORY, _M)
IPCBufferDescriptor = missing_class("IPCBufferDescriptor", _needs.IPC, _M)
IPCAllocationHandle = missing_class("IPCAllocationHandle", _needs.IPC, _M)
