"""The memory resources and buffers of cuda.core that wait for issue 10 (see the coverage map)."""

from __future__ import annotations

from .. import _needs
from .._missing import missing_class

__all__ = ["GraphMemoryResource", "IPCAllocationHandle", "IPCBufferDescriptor"]

_M = __name__


GraphMemoryResource = missing_class("GraphMemoryResource", _needs.GRAPH_MEMORY, _M)
IPCBufferDescriptor = missing_class("IPCBufferDescriptor", _needs.IPC, _M)
IPCAllocationHandle = missing_class("IPCAllocationHandle", _needs.IPC, _M)
