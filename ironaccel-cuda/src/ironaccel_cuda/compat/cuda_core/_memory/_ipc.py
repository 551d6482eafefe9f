"""cuda.core's IPC of memory (`IPCBufferDescriptor`, `IPCAllocationHandle`): waiting for issue 10."""

from __future__ import annotations

from ._placeholders import IPCAllocationHandle as IPCAllocationHandle
from ._placeholders import IPCBufferDescriptor as IPCBufferDescriptor

__all__: list[str] = []  # as in cuda.core 1.2: importable by name, not by *
