"""cuda.core's IPC of memory (`IPCBufferDescriptor`, `IPCAllocationHandle`): waiting for issue 10."""

from __future__ import annotations

from ._placeholders import IPCAllocationHandle, IPCBufferDescriptor

__all__: list[str] = []
_names = (IPCAllocationHandle, IPCBufferDescriptor)
