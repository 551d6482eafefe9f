"""`PjrtDevice`: what `Backend.open(ordinal)` returns -- one PJRT device, ready to use.

PJRT has no streams: work on a device is ordered by data dependencies, and
every call returns as soon as the work is enqueued.  `upload` copies a host
array to the device, `compile` builds an executable pinned to this device
(cached by the client), `execute` runs it on device buffers and returns
output buffers at once, `download` waits for a buffer and copies it to host.
`run(program, *arrays)` does all four.

`close()` deletes the buffers made through this device object; the client
(shared by every device of the plugin) stays open until the backend closes.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.errors import ClosedError, InvalidArgument
from ironaccel.types import DeviceDescriptor

from .api import BACKEND
from .buffer import Buffer
from .client import Client, DeviceInfo
from .executable import Executable, argument_list
from .options import CompileOptions

__all__ = ["PjrtDevice"]


class PjrtDevice:
    """One PJRT device: `descriptor`, `info` (its PJRT description), `client`."""

    def __init__(self, descriptor: DeviceDescriptor, info: DeviceInfo):
        self.descriptor = descriptor
        self.info = info
        self.client: Client = info.client
        self._buffers: weakref.WeakSet[Buffer] = weakref.WeakSet()
        self._closed = False

    def __repr__(self) -> str:
        return f"<PjrtDevice {self.descriptor.ordinal}: {self.descriptor.name} id={self.info.id}>"

    def _check_open(self, op: str) -> None:
        if self._closed:
            raise ClosedError(BACKEND, op, "device")
        if self.client.closed:
            raise ClosedError(BACKEND, op, "client")

    def _own(self, buffer: Any, op: str) -> Buffer:
        if not isinstance(buffer, Buffer):
            raise InvalidArgument(BACKEND, op, detail=f"expected a pjrt Buffer, got {type(buffer).__name__}")
        if buffer.client is not self.client:
            raise InvalidArgument(BACKEND, op, detail="the buffer belongs to another client")
        return buffer

    # -- memory ----------------------------------------------------------------

    def upload(self, array: Any, *, memory: str | None = None) -> Buffer:
        """A device buffer holding a copy of `array` (shape and dtype kept); `memory` picks a memory kind."""
        self._check_open("PJRT_Client_BufferFromHostBuffer")
        buffer = self.client.buffer_from_host(array, self.info, memory=memory)
        self._buffers.add(buffer)
        return buffer

    def download(self, buffer: Buffer, out: np.ndarray | None = None) -> np.ndarray:
        """Wait for `buffer` and copy it into a new array of its shape, or into `out`."""
        op = "PJRT_Buffer_ToHostBuffer"
        self._check_open(op)
        return self._own(buffer, op).to_host(out)

    # -- programs ---------------------------------------------------------------

    def compile(self, program: str | bytes, options: CompileOptions | None = None, *,
                format: str = "mlir") -> Executable:
        """Compile StableHLO for this device (or with explicit `options`); cached by the client."""
        self._check_open("PJRT_Client_Compile")
        return self.client.compile(program, options or CompileOptions.for_devices([self.info.id]), format=format)

    def execute(self, executable: Executable, args: Sequence[Buffer]) -> list[Buffer]:
        """Run `executable` on `args`; returns output buffers without waiting."""
        op = "PJRT_LoadedExecutable_Execute"
        self._check_open(op)
        if not isinstance(executable, Executable) or executable.client is not self.client:
            raise InvalidArgument(BACKEND, op, detail="the executable belongs to another client")
        outputs = executable.execute([self._own(a, op) for a in argument_list(args, op)])
        for out in outputs:
            self._buffers.add(out)
        return outputs

    def run(self, program: str | bytes, *arrays: Any) -> list[np.ndarray]:
        """Compile (cached), upload `arrays`, execute, download every output."""
        executable = self.compile(program)
        inputs = [self.upload(a) for a in arrays]
        try:
            outputs = self.execute(executable, inputs)
            try:
                return [self.download(o) for o in outputs]
            finally:
                for o in outputs:
                    o.delete()
        finally:
            for i in inputs:
                i.delete()

    def synchronize(self) -> None:
        """Wait until every live buffer made through this device is ready."""
        self._check_open("PJRT_Buffer_ReadyEvent")
        for buffer in list(self._buffers):
            if not buffer.closed:
                buffer.block_until_ready()

    def memory_stats(self) -> dict[str, int]:
        """The plugin's memory statistics for this device (bytes in use, limit, ...), as PJRT reports them."""
        self._check_open("PJRT_Device_MemoryStats")
        return self.info.memory_stats()

    def close(self) -> None:
        """Delete the buffers made through this device object; a second call is a no-op."""
        if self._closed:
            return
        self._closed = True
        for buffer in list(self._buffers):
            buffer.delete()
        self._buffers.clear()

    def __enter__(self) -> PjrtDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
